"""The exact backend: values are :class:`adjoint.values.exact.Exact` tensors.

Rationals stay rationals (FLINT), free symbols and transcendentals are SymPy closed forms,
and PyTorch's IEEE conventions are followed where it relies on them (x/0 = inf, 0/0 = nan,
sqrt of a negative = nan, -0.0; see :mod:`adjoint.values.exact` and :mod:`adjoint.values.signed_zero`).
After every op, :meth:`ExactBackend.after_op` refuses a forward value PyTorch could not
follow exactly: a non-finite value made from finite operands, or one beyond the dtype's range.
"""

from __future__ import annotations

import math

import numpy as np
from adjoint.values.backends.composed import Composed
from adjoint.values.numbers.sizes import broadcast_shape

from adjoint.values import exact as E
from adjoint.values import pointwise as T
from adjoint.values import arith as O
from adjoint.values import joins as J
from adjoint.format.errors import ProblemError
from adjoint.format.literals import infinite_items
from adjoint.format.problem import Infinite
from adjoint.values.exact import Exact
from adjoint.values.signed_zero import result_mask
from adjoint.values.backends.exact_families import ExactLosses, ExactNN, ExactSelections
from adjoint.values.backends.exact_modulo import ExactModulo
from adjoint.values.numbers.rational import QArray
from adjoint.values.numbers.symbolic import MAX_CLOSED_FORM, sympy, tree_size


class ExactBackend(ExactLosses, ExactSelections, ExactNN, ExactModulo, Composed):
    """Exact values (:class:`adjoint.values.exact.Exact`). ``symbols``: values bound to the file's free
    symbols (``--numeric``, verify); ``closed``: the file has free symbols left free, so every
    transcendental value stays a SymPy closed form (otherwise it is certified: balls, with a
    small closed form shown while there is one). ``undecided`` collects the notes of signs no
    precision could decide (:meth:`notes`)."""

    name = "exact"
    max_elements = 5_000_000   # per tensor: exact elements are Python integers (tens of bytes each)

    def __init__(self, dtype: str = "float32", symbols: dict | None = None, closed: bool = False):
        self.dtype = dtype
        self.symbols = symbols
        self.closed = closed
        self.undecided: list[str] = []
        self.underflows: dict[int, tuple] = {}   # id -> (the value, what underflowed): see _underflow
        self._sizes: dict = {}    # closed form -> its tree size (check_size), shared parts measured once

    def notes(self) -> list[str]:
        """What the run could not decide (a certified sign that stayed open at the largest
        precision), and the values PyTorch's float holds as 0 (:meth:`_underflow`)."""
        return list(dict.fromkeys(self.undecided + [text for _, text in self.underflows.values()]))

    def _underflow(self, op, ins, out: Exact) -> Exact:
        """``out`` with the elements PyTorch's float surely holds as 0 made 0 (:func:`underflow_mask`;
        an op with ``exp_overflow_zero``: also where its kernel's exp(-a) overflows, :func:`exp_overflow_mask`),
        noted once per value: what follows is PyTorch's arithmetic on that 0 (``log`` of it is
        -inf, which the forward refuses, saying why; ``sqrt``'s gradient there is inf)."""
        for mask, why in ((underflow_mask(out, self.dtype), f"below {self.dtype}'s smallest denormal number"),
                          (exp_overflow_mask(ins[0], self.dtype) if op.exp_overflow_zero else None,
                           f"where the kernel's exp(-a) overflows in {self.dtype} (a below "
                           f"{_EXP_OVERFLOW_INPUT[self.dtype] + 0.01:.4f})")):
            if mask is None or out.kind not in ("rational", "real"):
                continue
            idx = int(np.flatnonzero(mask)[0])
            if out.rational:
                text = E.s_sci(E.fmpq(int(out.qa.num.reshape(-1)[idx]), out.qa.den))
            else:
                text = out.balls.reshape(-1)[idx].str(3, radius=False)
            out = zeroed(out, mask, signed=op.underflows != "positive")
            more = f" (and {int(mask.sum()) - 1} more)" if mask.sum() > 1 else ""
            self.underflows[id(out)] = (out, f"{op.node}: element {_index(idx, out.shape)}{more} is about {text}, "
                                             f"{why}: PyTorch's value is 0")
        return out

    def _undecided(self, what: str):
        def record(mask: np.ndarray) -> None:
            where = [int(i) for i in np.argwhere(mask)[0]] if mask.ndim else []
            self.undecided.append(f"{what}: the sign of element {where} (and {int(mask.sum()) - 1} more) could not "
                                  f"be decided at {E.Bl.MAX_PREC} bits; it is taken as 0 (the value is 0 to over "
                                  "1200 digits)" if mask.sum() > 1 else
                                  f"{what}: the sign of element {where} could not be decided at {E.Bl.MAX_PREC} "
                                  "bits; it is taken as 0 (the value is 0 to over 1200 digits)")
        return record

    # ------------------------------------------------------------------ construction
    def literal(self, lit):
        """A tensor literal; free symbols become SymPy symbols (or their bound numbers). A literal
        of numbers is converted once (kept in ``lit.memo``: the integer array and its FLINT
        matrix serve every later solve of the problem)."""
        infinite = infinite_items(lit)
        if not lit.symbols and not infinite:
            qa = lit.memo.get("exact")
            if qa is None:
                items = lit.items
                if isinstance(items, tuple):
                    qa = QArray.from_fractions(items, tuple(lit.shape))
                else:  # a side file's integer array over one denominator (adjoint.format.sidefiles)
                    qa = QArray(items.num.astype(object).reshape(tuple(lit.shape)), items.den)
                lit.memo["exact"] = qa
            return Exact.from_q(qa).with_negzero(lit.negzero_mask())
        items = []
        symbolic = False
        S = sympy().S if infinite else None
        for e in lit.items:
            name = getattr(e, "name", None)
            if infinite and type(e) is Infinite:   # a float mask's -inf: SymPy's, as masked_fill's (ops.masking)
                items.append(S.NegativeInfinity if e.negative else S.Infinity)
            elif name is not None:
                if self.symbols is not None and name in self.symbols:
                    items.append(E.q(self.symbols[name] * e.coeff))
                else:
                    sp = sympy()
                    items.append(sp.Rational(e.coeff.numerator, e.coeff.denominator) * sp.Symbol(name, real=True))
                    symbolic = True
            else:
                items.append(e)
        if symbolic:
            self.closed = True
        return Exact.of(items, lit.shape).with_negzero(lit.negzero_mask())

    def scalar(self, value):
        return Exact.scalar(E.q(value) if not isinstance(value, Exact) else value.item())

    def zeros(self, shape):
        return Exact.zeros(tuple(shape))

    def full(self, shape, value):
        return Exact.full(tuple(shape), value)

    # ------------------------------------------------------------------ queries
    def shape(self, x):
        return x.shape

    def numel(self, x):
        return x.size

    def any_zero(self, x) -> bool:
        return bool(x.zero_mask().any())

    def all_zero(self, x) -> bool:
        return bool(x.zero_mask().all())

    def has_nonfinite(self, x) -> bool:
        return x.has_nonfinite()

    def is_symbolic(self, x) -> bool:
        return x.is_symbolic()

    # ------------------------------------------------------------------ arithmetic
    add = staticmethod(O.add)
    sub = staticmethod(O.sub)
    mul = staticmethod(O.mul)
    div = staticmethod(O.div)
    neg = staticmethod(O.neg)

    def pow(self, x, e):
        return T.power(x, e, self.closed)

    # ------------------------------------------------------------------ elementwise functions
    def relu(self, x):
        return T.relu(x, self._undecided("relu"))

    def tanh(self, x):
        return T.unary("tanh", x, self.closed)

    def sigmoid(self, x):
        return T.unary("sigmoid", x, self.closed)

    def onednn_sigmoid(self, x):
        """oneDNN's float32 logistic (the gates of its fused LSTM, ``MkldnnRnnLayerBackward0``): the
        exact sigmoid, but 0 where oneDNN's kernel flushes it (its ``exp(x)`` is ``2^n p(r)`` with
        ``n = round(x log2 e)``, and ``n <= -126`` gives 0: x below -86.9894, measured in torch
        2.13), though the exact value there (1.8e-38 at -86.99) is a number float32 holds; the
        boundary's few hundredths, where rounding decides, keep the exact value."""
        out = T.unary("sigmoid", x, self.closed)
        values = x.floats_flat()
        if values is None or out.kind not in ("rational", "real"):
            return out
        mask = np.array([v < ONEDNN_LOGISTIC_ZERO - 0.01 for v in values], dtype=bool).reshape(x.shape)
        if not mask.any():
            return out
        idx = int(np.flatnonzero(mask)[0])
        more = f" (and {int(mask.sum()) - 1} more)" if mask.sum() > 1 else ""
        out = zeroed(out, mask, signed=False)
        self.underflows[id(out)] = (out, f"MkldnnRnnLayerBackward0: a gate's input, element {_index(idx, out.shape)}"
                                         f"{more}, is about {values[idx]:.4g}, below {ONEDNN_LOGISTIC_ZERO}, where "
                                         "oneDNN's logistic flushes to 0: PyTorch's sigmoid there is 0")
        return out

    def exp(self, x):
        return T.unary("exp", x, self.closed)

    def log(self, x):
        return T.unary("log", x, self.closed)

    def sin(self, x):
        return T.unary("sin", x, self.closed)

    def cos(self, x):
        return T.unary("cos", x, self.closed)

    def sqrt(self, x):
        return T.unary("sqrt", x, self.closed)

    def rsqrt(self, x):
        return T.unary("rsqrt", x, self.closed)

    def log1p(self, x):
        return T.unary("log1p", x, self.closed)

    def expm1(self, x):
        return T.unary("expm1", x, self.closed)

    def atan(self, x):
        return T.unary("atan", x, self.closed)

    def atan2(self, y, x):
        """atan2(y, x) as C's atan2 (ATen's CPU kernel calls it), both broadcast: atan(y / x) where
        x > 0; plus pi (y's sign bit clear) or minus pi (set: negative or -0.0) where x < 0; where
        x is 0, +-pi / 2 for y != 0, and for y = 0 0 (x +0.0) or pi (x -0.0) with y's sign. The
        result's own -0.0 (y = -0.0, x >= +0) is the op's negzero rule. Finite operands only."""
        from adjoint.values.signed_zero import sign_bits
        shape = broadcast_shape(y.shape, x.shape)
        y, x = y.broadcast_to(shape), x.broadcast_to(shape)
        xz, yz = x.zero_mask(), y.zero_mask()
        xneg, yneg = sign_bits(x), sign_bits(y)
        q = self.atan(O.div(y, O.where_mask(xz, Exact.full(shape, 1), x)))
        pi = self.pi()
        half = O.div(pi, Exact.scalar(2))
        at_zero = O.negate_where(O.where_mask(yz, O.where_mask(xneg, pi, Exact.full(shape, 0)), half), yneg)
        turned = O.add(q, O.negate_where(pi.broadcast_to(shape), yneg))
        return O.where_mask(xz, at_zero, O.where_mask(xneg, turned, q))

    def sinh(self, x):
        return T.unary("sinh", x, self.closed)

    def cosh(self, x):
        return T.unary("cosh", x, self.closed)

    def tan(self, x):
        return T.unary("tan", x, self.closed)

    def log2(self, x):
        return T.unary("log2", x, self.closed)

    def log10(self, x):
        return T.unary("log10", x, self.closed)

    def abs(self, x):
        return T.absolute(x, self._undecided("abs"))

    def sgn(self, x):
        """sgn(x): -1, 0, 1 (SymPy's sign for a closed form with free symbols)."""
        return T.sgn(x, self._undecided("sgn"))

    # ------------------------------------------------------------------ selections
    def mask(self, x, predicate):
        """0/1 rational mask from a predicate on each element's sign (-1, 0, 1, 'nan', None)."""
        return T.mask(x, predicate, self._undecided("a kink"))

    where = staticmethod(O.where)

    def select_positive(self, x, g):
        """``threshold_backward(g, x, 0)``: ATen's ``x <= 0 ? 0 : g`` (a select, not a product; a
        nan x keeps g)."""
        return T.select_positive(x, g, self._undecided("threshold_backward"))

    def negate_at_negzero(self, x, ref):
        """-x where ``ref`` holds -0.0 (PyTorch's float), else x."""
        return O.negate_where(x, ref.negzero)

    # ------------------------------------------------------------------ structure and products
    def reshape(self, x, shape):
        return x.reshape(tuple(shape))

    def t2(self, x):
        return x.transpose()

    def broadcast_to(self, x, shape):
        return x.broadcast_to(tuple(shape))

    def index(self, x, key):
        """``x[key]`` (numpy indexing: ints, slices, None, Ellipsis, integer arrays), a copy."""
        return x.restructured(lambda a: np.array(a[key], dtype=a.dtype, copy=True))

    def permute(self, x, perm):
        # a C-ordered copy (np.ascontiguousarray would make a 0-d array 1-d)
        return x.restructured(lambda a: np.transpose(a, perm).copy(order="C"))

    def place(self, shape, key, g):
        """zeros(shape) with ``g`` written at ``key``."""
        return self.assign(Exact.zeros(tuple(shape)), key, g)

    def assign(self, base, key, new):
        """``base`` with ``base[key] = new`` (new broadcast), the -0.0 marks following the elements."""
        return J.assign(base, key, new)

    def place_add(self, shape, key, g):
        """zeros(shape) with ``g`` added at ``key`` (repeated indices add up: index_put_ accumulate)."""
        return J.place_add(shape, key, g)

    def concat(self, xs, axis):
        return J.join(list(xs), lambda arrs: np.concatenate(arrs, axis=axis))

    def stack(self, xs, axis):
        return J.join(list(xs), lambda arrs: np.stack(arrs, axis=axis))

    sum_to = staticmethod(O.sum_to)
    def matmul2d(self, x, y, outer: bool = True):
        """(m, k) @ (k, n), with the elements PyTorch's float holds as 0 made 0 (:func:`underflow_mask`:
        products of tiny factors, ``1e-30 * 1e-30`` in float32), in the forward (mm, addmm, mv, dot,
        bmm) and in their backwards alike. The CPU kernel sums the products from +0.0, so such an
        element is +0.0 whatever its sign; with an inner size of 1 it writes the one product, whose
        sign it keeps (the mm ``outer`` rule of adjoint.values.signed_zero, where BLAS does not hand
        a one-row or one-column result to gemv; ``bmm``'s kernel sums from +0.0 at any size: ``outer``
        False)."""
        out = O.matmul2d(x, y)
        mask = underflow_mask(out, self.dtype)
        if mask is None:
            return out
        (m, k), n = x.shape, y.shape[1]
        return zeroed(out, mask, signed=outer and k == 1 and m != 1 and n != 1)
    outer = staticmethod(O.outer)
    total = staticmethod(O.total)

    def check_literal(self, value, decl) -> None:
        refuse_overflow(value, self.dtype, decl.value.loc, f"the literal of '{decl.name}'")

    def check_output(self, value, loc, what: str) -> None:
        refuse_overflow(value, self.dtype, loc, what)

    def is_value(self, x) -> bool:
        return isinstance(x, Exact)

    def symbols_like(self, shape, prefix: str):
        """A tensor of fresh real symbols ``prefix0, prefix1, ...`` (a generic cotangent)."""
        n = 1
        for d in shape:
            n *= d
        sp = sympy()
        return Exact.of([sp.Symbol(f"{prefix}{i}", real=True) for i in range(n)], tuple(shape))

    def equals(self, x, y) -> bool:
        return O.equal(x, y)

    def same_value(self, x, y) -> bool:
        """Only the same object: an exact value's -0.0 mask and certified recipe are part of it."""
        return x is y

    def strings(self, x):
        return x.strings()

    # ------------------------------------------------------------------ after each op
    def after_op(self, op, ins, params, out, loc, check: bool):
        """The -0.0 mask of the result; refuse a value beyond the dtype's range (PyTorch makes it
        inf) or a closed form too large to print, wherever the op runs; with ``check`` (the
        model's forward), also a non-finite value made from finite operands."""
        out = out.with_negzero(result_mask(op, ins, params, out))
        if op.underflows:   # a product, a quotient, exp: in a hook's body too
            out = self._underflow(op, ins, out)
        if op.grows:   # in a hook's body too: PyTorch's float overflows there just the same
            if not check:   # outside the model's forward: an overflow PyTorch surely makes is its inf
                out = overflow_to_inf(out, self.dtype)
            refuse_overflow(out, self.dtype, loc, f"this op ({op.node})", "change the values so the forward pass "
                            "stays finite" if check else "change the values or the hook so every value stays finite")
        self.check_size(out, loc, f"this op ({op.node})")
        if check and not op.fills:
            operands = [x for x in ins if x is not None]
            refuse_nonfinite(op, operands, out, loc, [self.underflows[id(x)][1] if id(x) in self.underflows and
                                                      self.underflows[id(x)][0] is x else "" for x in operands])
        return out

    def after_backward(self, x, loc, what: str):
        """A gradient the backward computed (a node's backward formula, a sum into an input buffer,
        ``.grad +=``): PyTorch's float overflows there as in the forward. Surely beyond the dtype's
        range, it is that float's inf (and IEEE arithmetic follows); nearer the threshold, where
        the rounding decides, it is refused; a closed form too large to print is refused too.
        A matrix product's result that nothing has read element by element yet (FLINT's matrix,
        its numerator array not made: a weight's gradient, the gradient of a Linear's input) is
        not sized here: making that array for the check alone cost a third of an MLP's solve.
        It is sized where it is first read so (the next elementwise backward, a sum into a
        buffer, ``.grad +=``), which overflows then in its place; a product of such a value
        with 0 there gives 0 where PyTorch's inf * 0 is nan. Certified (irrational) gradients
        and closed forms are not sized in the backward (below)."""
        if x.kind == "rational" and not x.qa.lazy_numerators:   # (one comparison for the tensor, as below)
            mask = underflow_mask(x, self.dtype)
            if mask is not None:
                x = zeroed(x, mask)
        if x.kind == "rational" and (x.qa.lazy_numerators or _rational_in_range(x, self.dtype)):
            return x   # (one comparison for the tensor; a rational has no closed form to size)
        if x.kind != "rational":
            # certified (irrational) values and closed forms are not sized here: a pass over their
            # balls or forms per backward node doubled a Tanh MLP's solve, and such a gradient
            # beyond the range needs one a hook made huge first, which the hook's own ops size
            # (after_op); a closed form too large to print is still refused
            self.check_size(x, loc, what)
            return x
        x = overflow_to_inf(x, self.dtype)
        refuse_overflow(x, self.dtype, loc, what, "change the values or the hooks so every gradient stays finite")
        self.check_size(x, loc, what)
        return x

    def check_size(self, x, loc, what: str) -> None:
        """Refuse a closed form (free symbols) grown past :data:`MAX_CLOSED_FORM` tree nodes in one
        element: its text would take gigabytes. Known before any of it is printed."""
        if x.kind != "elements":
            return
        for e in x.elems.reshape(-1).tolist():
            if type(e) is not E.fmpq and tree_size(e, self._sizes) > MAX_CLOSED_FORM:
                raise ProblemError(loc, f"{what} gives a closed form of more than {MAX_CLOSED_FORM:,} terms in the "
                                        "free symbols, whose text would run to megabytes per element; give the "
                                        "symbols values (symbols:) and solve with --numeric, or use fewer layers")


# ----------------------------------------------------------------------------- refusals

def refuse_nonfinite(op, ins: list, out: Exact, loc, why: list | None = None) -> None:
    """PyTorch would carry inf/nan on silently; a forward pass that makes one is almost surely a
    mistake. ``why``: per operand, what made elements of it PyTorch's 0 (an underflow,
    ExactBackend._underflow), or ""."""
    if out.rational or not out.has_nonfinite() or any(x.has_nonfinite() for x in ins):
        return
    for idx, e in enumerate(out.flat()):
        if E.s_is_nonfinite(e):
            where = _index(idx, out.shape)
            operands = "; ".join(f"operand {k + 1} = {_element(x, idx, out.shape)}"
                                 + (f" ({why[k]})" if why and why[k] else "") for k, x in enumerate(ins))
            what = op.nonfinite or "a non-finite value"
            raise ProblemError(loc, f"{what} at the given values ({op.node}, element {where}: "
                                    f"{operands}) gives {E.s_str(e)} in PyTorch; change the values so the "
                                    "forward pass stays finite, or answer in doubles (solve --float64 follows "
                                    "PyTorch's inf and nan)")


#: The smallest magnitude each dtype rounds to inf (round to nearest: max + half an ulp), and
#: the bits of numerator and denominator under which a rational is surely below it.
_OVERFLOW = {"float32": E.q(2 ** 128 - 2 ** 103), "float64": E.q(2 ** 1024 - 2 ** 970)}
_SAFE_BITS = {"float32": 127, "float64": 1023}
_MAX_TEXT = {"float32": "3.4e38", "float64": "1.8e308"}


def refuse_overflow(out: Exact, dtype: str, loc, what: str,
                    remedy: str = "change the values so the forward pass stays finite") -> None:
    """A finite exact value PyTorch cannot hold: it becomes inf (and later nan), which no exact
    prediction follows. Closed forms are sized numerically; ones with free symbols are not
    checked (verify binds the symbols, and checks then)."""
    limit = _OVERFLOW[dtype]
    if out.rational:
        if _rational_in_range(out, dtype):
            return  # the largest |element| is below the limit: one comparison for the tensor
    elif out.kind == "real":
        if _certified_below(out, limit):
            return
    approx_limit = E.s_approx(limit, 20)
    for idx, e in enumerate(out.flat()):
        if E.s_is_nonfinite(e):
            continue
        if type(e) is E.fmpq:
            big = abs(e) >= limit
        else:
            v = E.s_approx(e, 20)
            big = v is not None and abs(v) >= approx_limit
        if big:
            raise ProblemError(loc, f"{what} gives {E.s_sci(e)} at element {_index(idx, out.shape)}, beyond "
                                    f"{dtype}'s range (about ±{_MAX_TEXT[dtype]}): PyTorch makes it inf; {remedy}")


#: how far beyond the dtype's overflow threshold an exact value must be for PyTorch's float to be
#: inf whatever its rounding: a computed value is within a few ulps of the exact one, far below
#: a factor of 2; nearer the threshold the rounding decides, and the value stays refused
OVERFLOW_MARGIN = 2


def overflow_to_inf(out: Exact, dtype: str) -> Exact:
    """``out`` with every finite element at least :data:`OVERFLOW_MARGIN` times beyond the dtype's
    range replaced by PyTorch's float for it, +-inf by its sign (IEEE overflow; what follows is
    IEEE arithmetic on it: values/ieee.py). Elements nearer the threshold are left as they are
    (refuse_overflow refuses them)."""
    from adjoint.values import ieee as I

    limit = _OVERFLOW[dtype]
    if out.rational:
        if _rational_in_range(out, dtype):
            return out
    elif out.kind == "real":
        if _certified_below(out, limit):
            return out
    far = E.s_approx(limit * OVERFLOW_MARGIN, 20)
    mask = np.zeros(out.size, dtype=bool)
    values = []
    for idx, e in enumerate(out.flat()):
        if E.s_is_nonfinite(e):
            continue
        v = E.s_approx(e, 20)
        if v is not None and abs(v) >= far:
            mask[idx] = True
            values.append(math.inf if v > 0 else -math.inf)
    if not mask.any():
        return out
    return I.overwrite(out, mask.reshape(out.shape), values)


#: ``b``: PyTorch's float of a nonzero value of magnitude at most ``2**-b`` is surely 0. That is
#: the smallest denormal over 2 (below which round to nearest gives 0) over OVERFLOW_MARGIN: a
#: computed value is within a few ulps of the exact one; nearer the smallest denormal, where the
#: rounding decides between 0 and it, the exact value stays (PyTorch's is off by one denormal)
_UNDERFLOW_BITS = {"float32": 149 + 1 + 1, "float64": 1074 + 1 + 1}


def underflow_mask(out: Exact, dtype: str) -> np.ndarray | None:
    """The nonzero elements so small that PyTorch's float of them is surely 0 (IEEE underflow,
    gradual underflow included: :data:`_UNDERFLOW_BITS`; ``exp(-200)`` in float32: the exact value
    is about 1.4e-87, PyTorch's is 0, and ``log`` of it is -inf, not -200), None when none.
    Certified elements are decided on their balls; one whose ball holds 0 stays as it is;
    closed forms with free symbols are not sized (verify binds them)."""
    bits = _UNDERFLOW_BITS[dtype]
    if out.rational:
        if out.qa.den.bit_length() <= bits:
            return None   # no nonzero p/den is at most 2**-bits: one comparison for the tensor
        flat = [n != 0 and abs(int(n)) << bits <= out.qa.den for n in out.qa.num.reshape(-1).tolist()]
    elif out.kind == "real":
        balls = out.balls.reshape(-1)
        # the balls' midpoints as doubles, one C loop: a ball whose midpoint is above 2**-(bits - 1)
        # in size is no candidate (those below, and the doubles' underflow to 0, are decided on the ball)
        with np.errstate(all="ignore"):
            near = np.flatnonzero(np.abs(balls.astype(np.float64)) <= 2.0 ** -(bits - 1))
        if not len(near):
            return None   # (the common case: a comparison per element in numpy, not a ball's)
        tiny = E.flint.arb(E.fmpq(1, 2 ** bits))
        flat = np.zeros(len(balls), dtype=bool)
        for i in near.tolist():
            b = balls[i]
            flat[i] = abs(b) <= tiny and (b > 0 or b < 0)
    else:
        return None
    mask = np.asarray(flat, dtype=bool).reshape(out.shape)
    return mask if mask.any() else None


def zeroed(out: Exact, mask: np.ndarray, signed: bool = True) -> Exact:
    """``out`` with the elements under ``mask`` made PyTorch's 0: -0.0 where the exact value is
    negative (a rational or certified tensor); +0.0 everywhere unless ``signed`` (a sum of
    products that each rounded to a zero)."""
    if out.rational:
        num = out.qa.num
        negative = mask & np.array([n < 0 and signed for n in num.reshape(-1).tolist()],
                                   dtype=bool).reshape(out.shape)
        kept = num.copy()
        kept[mask] = 0
        result = Exact.from_q(QArray(kept, out.qa.den))
    else:
        from adjoint.values import ieee as I
        negative = mask & np.array([bool(b < 0) and signed for b in out.balls.reshape(-1).tolist()],
                                   dtype=bool).reshape(out.shape)
        result = I.overwrite(out, mask, [0.0] * int(mask.sum()))
    return result.with_negzero(negative if out.negzero is None else out.negzero | negative)   # (a -0.0 stays)


#: oneDNN's float32 logistic is 0 below this input (``round(x log2 e) <= -126``: -125.5 ln 2)
ONEDNN_LOGISTIC_ZERO = -86.9894

#: -log of each dtype's largest float, less a margin for the input's own rounding: below it a
#: kernel's exp(-a) surely overflows to inf (Op.exp_overflow_zero)
_EXP_OVERFLOW_INPUT = {"float32": -88.7228391 - 0.01, "float64": -709.782712893384 - 0.01}


def exp_overflow_mask(x: Exact, dtype: str) -> np.ndarray | None:
    """The elements of a kernel's input ``a`` where its exp(-a) surely overflows, None when none
    (the margin's few hundredths aside, where rounding decides, the exact value stays)."""
    values = x.floats_flat()
    if values is None:
        return None
    mask = np.array([v < _EXP_OVERFLOW_INPUT[dtype] for v in values], dtype=bool).reshape(x.shape)
    return mask if mask.any() else None


def _rational_in_range(out: Exact, dtype: str) -> bool:
    """Every element of a rational tensor is below the dtype's overflow threshold in size."""
    limit = _OVERFLOW[dtype]
    return out.qa.max_abs_num() < int(limit.p) * out.qa.den // int(limit.q)


def _certified_below(out: Exact, limit) -> bool:
    """Every certified element is surely below ``limit`` in size (checked on the balls)."""
    bound = E.flint.arb(limit)
    for b in out.balls.reshape(-1).tolist():
        if b.is_finite() and not (abs(b) < bound):
            return False
    return True


def _index(flat: int, shape) -> str:
    return str([int(i) for i in np.unravel_index(flat, shape)])


def _element(x: Exact, flat: int, out_shape) -> str:
    if x.size == 1:
        return x.strings_flat()[0]
    if x.size == 0:   # an empty operand (the mean of no element)
        return f"an empty tensor of shape {list(x.shape)}"
    try:
        shaped = broadcast_shape(x.shape, tuple(out_shape))
    except ValueError:  # a reduction's operand: no element of it corresponds to one of the result
        return f"a tensor of shape {list(x.shape)}"
    strings = np.empty(x.shape, dtype=object)
    strings.reshape(-1)[:] = x.strings_flat()
    return np.broadcast_to(strings, shaped).reshape(-1)[flat]
