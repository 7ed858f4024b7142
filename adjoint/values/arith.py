"""Arithmetic on :class:`adjoint.values.exact.Exact` tensors, by kind (elementwise functions and
selections: :mod:`adjoint.values.pointwise`; joins and writes: :mod:`adjoint.values.joins`;
IEEE specials: :mod:`adjoint.values.ieee`).

Every operation takes the fast path its operands allow: two rational tensors stay integer
arrays over a common denominator (:mod:`adjoint.values.numbers.rational`); a certified operand
makes a certified result (:mod:`adjoint.values.numbers.balls`: one vectorised ball operation, its
recipe kept for refinement, closed forms carried while small); an operand of the
closed-form kind makes the result SymPy elements, with the element functions of
:mod:`adjoint.values.numbers.symbolic` (IEEE conventions included).

IEEE specials in certified tensors (``inf``, ``nan``: the closed form :class:`Special`) follow
float arithmetic element by element (:func:`_ieee`), the only per-element Python here.
"""

from __future__ import annotations

import flint
import numpy as np
from adjoint.values.numbers.sizes import broadcast_shape
from adjoint.values.numbers.sizes import broadcast_arrays

from adjoint.values import ieee as I
from adjoint.values.numbers import balls as Bl
from adjoint.values.numbers import forms as F
from adjoint.values.numbers import rational as R
from adjoint.values.numbers.symbolic import MAX_CLOSED_PRODUCTS, ExactLimit, s_div, s_mul, s_norm, s_sym, sympy
from adjoint.values.exact import Exact, Real, _is_special

fmpq = flint.fmpq
arb = flint.arb
_Q0 = fmpq(0)
_Q1 = fmpq(1)


def _kind(*xs: Exact) -> str:
    kinds = {x.kind for x in xs}
    if "elements" in kinds:
        return "elements"
    return "real" if "real" in kinds else "rational"


def _bshape(*xs: Exact) -> tuple[int, ...]:
    return broadcast_shape(*[x.shape for x in xs])


# ----------------------------------------------------------------------------- closed forms alongside balls

def _forms(op: str, xs: tuple, shape, exact_fn=None) -> np.ndarray | None:
    """Elementwise closed forms of ``op`` over ``xs`` (None where an operand has none or the form
    would be too big; None altogether when no element can have one). ``exact_fn`` computes
    the result of all-rational elements exactly."""
    if not all(_may_have_forms(x) for x in xs):
        return None
    arrays = [x.form_array() for x in xs]
    arrays = broadcast_arrays(*arrays)
    out = np.empty(shape, dtype=object)
    flat = out.reshape(-1)
    any_form = False
    for i, args in enumerate(zip(*[a.reshape(-1).tolist() for a in arrays])):
        v = None
        if exact_fn is not None and all(type(a) is fmpq for a in args):
            v = exact_fn(*args)
        if v is None and not any(type(a) is F.Special or a is None or type(a) is Real for a in args):
            v = F.make(op, *args)
        flat[i] = v
        any_form = any_form or v is not None
    return out if any_form else None


# ----------------------------------------------------------------------------- elementwise arithmetic

def _elements_binary(fn, x: Exact, y: Exact) -> Exact:
    a, b = broadcast_arrays(x.as_sym().elems if x.kind == "elements" else x.a,
                               y.as_sym().elems if y.kind == "elements" else y.a)
    out = np.empty(a.shape, dtype=object)
    flat = out.reshape(-1)
    for i, (e1, e2) in enumerate(zip(a.reshape(-1).tolist(), b.reshape(-1).tolist())):
        flat[i] = s_norm(fn(e1, e2))
    return _from_elements(out)


def _from_elements(out: np.ndarray) -> Exact:
    if all(type(e) is fmpq for e in out.reshape(-1).tolist()):
        return Exact(out, True)
    return Exact.from_elements(out)


def _sym_pair(x: Exact, y: Exact):
    return x.as_sym().elems, y.as_sym().elems


def add(x: Exact, y: Exact) -> Exact:
    k = _kind(x, y)
    if k == "rational":
        return Exact.from_q(R.add(x.qa, y.qa))
    if k == "elements":
        a, b = _sym_pair(x, y)
        return _wrap_sym(a + b)
    shape = _bshape(x, y)
    out = Exact.certified(shape, _ADD, (x, y), _forms("add", (x, y), shape, lambda p, r: p + r))
    return I.with_specials(out, "add", (x, y))


def sub(x: Exact, y: Exact) -> Exact:
    k = _kind(x, y)
    if k == "rational":
        return Exact.from_q(R.sub(x.qa, y.qa))
    if k == "elements":
        a, b = _sym_pair(x, y)
        return _wrap_sym(a - b)
    shape = _bshape(x, y)
    out = Exact.certified(shape, _SUB, (x, y), _forms("sub", (x, y), shape, lambda p, r: p - r))
    return I.with_specials(out, "sub", (x, y))


def mul(x: Exact, y: Exact) -> Exact:
    k = _kind(x, y)
    if k == "rational":
        return Exact.from_q(R.mul(x.qa, y.qa))
    if k == "elements":
        return _elements_binary(s_mul, x, y)
    shape = _bshape(x, y)
    out = Exact.certified(shape, _MUL, (x, y), _forms("mul", (x, y), shape, lambda p, r: p * r))
    return I.with_specials(out, "mul", (x, y))


def neg(x: Exact) -> Exact:
    if x.kind == "rational":
        return Exact.from_q(R.neg(x.qa))
    if x.kind == "elements":
        return _wrap_sym(-x.elems)
    out = Exact.certified(x.shape, _NEG, (x,), _forms("neg", (x,), x.shape, lambda p: -p), settle=False)
    return I.with_specials(out, "neg", (x,))


def _ADD(a, b):
    return a + b


def _SUB(a, b):
    return a - b


def _MUL(a, b):
    return a * b


def _NEG(a):
    return -a


def _DIV(a, b):
    return a / b


def div(x: Exact, y: Exact) -> Exact:
    k = _kind(x, y)
    if k == "elements":
        return _elements_binary(s_div, x, y)
    zeros = y.zero_mask()
    if k == "rational" and not zeros.any():
        q = R.div(x.qa, y.qa)
        if q is not None:
            return Exact.from_q(q)
        return _elements_binary(s_div, x, y)
    shape = _bshape(x, y)
    if not zeros.any():
        out = Exact.certified(shape, _DIV, (x, y), _forms("div", (x, y), shape, lambda p, r: p / r))
        return I.with_specials(out, "div", (x, y))
    return _div_by_zero(x, y, zeros, shape)


def _div_by_zero(x: Exact, y: Exact, zeros: np.ndarray, shape) -> Exact:
    """x / y where some y are exactly 0: IEEE (+-inf, nan for 0/0) there, the quotient elsewhere;
    a -0.0 divisor flips the infinity's sign (1 / -0.0 is -inf: a product that underflowed
    below zero, ``x * -1e-30 * 1e-30`` in float32)."""
    safe_y = where_mask(np.broadcast_to(zeros, y.shape), Exact.full(y.shape, 1), y)
    out = div(x, safe_y)
    zb = np.broadcast_to(zeros, shape)
    xs = np.broadcast_to(x.signs(), shape)
    ys = np.broadcast_to(y.negzero if y.negzero is not None else np.zeros(y.shape, dtype=bool), shape)
    return I.overwrite(out, zb, [I.ieee("div", [I.float_of_sign(s), -0.0 if neg else 0.0])
                                 for s, neg in zip(xs[zb].tolist(), ys[zb].tolist())])


def _wrap_sym(a) -> Exact:
    if not isinstance(a, np.ndarray):
        b = np.empty((), dtype=object)
        b[()] = a
        a = b
    out = np.empty(a.shape, dtype=object)
    flat = out.reshape(-1)
    for i, e in enumerate(a.reshape(-1).tolist()):
        flat[i] = s_norm(e)
    return _from_elements(out)


def binary(fn, x: Exact, y: Exact) -> Exact:
    """Elementwise fn over broadcast x, y with element helpers (s_div, s_pow, ...): the
    general, element-by-element path (results classified again)."""
    a, b = broadcast_arrays(x.a, y.a)
    out = np.empty(a.shape, dtype=object)
    flat = out.reshape(-1)
    for i, (e1, e2) in enumerate(zip(a.reshape(-1).tolist(), b.reshape(-1).tolist())):
        flat[i] = s_norm(fn(e1, e2))
    if x.kind == "elements" or y.kind == "elements":
        return _from_elements(out)
    return Exact(out)


def where(cond: Exact, x: Exact, y: Exact) -> Exact:
    """Elementwise choice on a 0/1 mask (an Exact of zeros and ones)."""
    return where_mask(cond.zero_mask() == False, x, y)  # noqa: E712


def where_mask(keep: np.ndarray, x: Exact, y: Exact) -> Exact:
    """x where ``keep`` (a bool array), else y, broadcast."""
    shape = broadcast_shape(keep.shape, x.shape, y.shape)
    keep = np.broadcast_to(keep, shape)
    k = _kind(x, y)
    if k == "rational":
        if y.qa.den == 1 and not np.any(y.qa.num != 0):  # x or 0 (relu, its backward): no common denominator
            return Exact.from_q(R.QArray(np.where(keep, x.qa.num, 0).astype(object), x.qa.den, True))
        return Exact.from_q(R.where(keep, x.qa, y.qa))
    if k == "elements":
        a, b = broadcast_arrays(x.as_sym().elems, y.as_sym().elems)
        return _from_elements(np.where(keep, a, b).astype(object))
    fx, fy = x.form_array(), y.form_array()
    forms = None
    if fx is not None or fy is not None:
        fa = np.broadcast_to(fx if fx is not None else np.full(x.shape, None, dtype=object), shape)
        fb = np.broadcast_to(fy if fy is not None else np.full(y.shape, None, dtype=object), shape)
        forms = np.where(keep, fa, fb).astype(object)
        if all(f is None for f in forms.reshape(-1).tolist()):
            forms = None
    mask = keep.copy()

    def recipe(a, b):
        return np.where(mask, *broadcast_arrays(a, b)).astype(object)
    return Exact.certified(shape, recipe, (x, y), forms)


# ----------------------------------------------------------------------------- reductions and products

def total(x: Exact) -> Exact:
    """Sum of all elements, 0-d."""
    if x.kind == "rational":
        return Exact.from_q(R.total(x.qa))
    if x.kind == "elements":
        return Exact.scalar(s_norm(sympy().Add(*x.elems.reshape(-1).tolist())))
    forms = None
    if x.forms is not None and x.size + 1 <= F.FORM_LIMIT:
        f = F.make("sum", *x.forms.reshape(-1).tolist())
        if f is not None:
            forms = np.empty((), dtype=object)
            forms[()] = f
    out = Exact.certified((), _TOTAL, (x,), forms)
    return I.specials_by_elements(out, x, lambda fs: _ieee_sum(fs))


def _TOTAL(b):
    out = np.empty((), dtype=object)
    out[()] = Bl.total(b)
    return out


def _ieee_sum(values: list) -> float:
    s = 0.0
    for v in values:
        s += v
    return s


def sum_to(x: Exact, shape: tuple[int, ...]) -> Exact:
    """Reduce a broadcast gradient back to ``shape`` (torch's sum_to)."""
    shape = tuple(shape)
    if x.shape == shape:
        return x
    lead = x.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape) if n == 1 and x.shape[lead + i] != 1)
    if not axes:
        return x.reshape(shape)
    if x.kind == "rational":
        return Exact.from_q(R.sum_axes(x.qa, axes)).reshape(shape)
    if x.kind == "elements":
        r = np.apply_over_axes(_sym_sum_axis, x.elems, axes)
        return _wrap_sym(np.asarray(r, dtype=object).reshape(shape))
    if x.forms is not None and np.any(_is_special(x.forms)):
        return binary_reduce_slow(x, axes, shape)

    def recipe(b):
        return np.asarray(np.sum(b, axis=axes, keepdims=True), dtype=object).reshape(shape)
    forms = None
    if x.forms is not None:
        count = 1
        for a in axes:
            count *= x.shape[a]
        if count + 1 <= F.FORM_LIMIT:
            r = np.apply_over_axes(_form_sum_axis, x.forms, axes)
            forms = np.asarray(r, dtype=object).reshape(shape)
            if all(f is None for f in forms.reshape(-1).tolist()):
                forms = None
    return Exact.certified(shape, recipe, (x,), forms)


def binary_reduce_slow(x: Exact, axes, shape) -> Exact:
    """sum_to over a certified tensor with IEEE specials: element by element."""
    elems = np.apply_over_axes(_sym_sum_axis, x.as_sym().elems, axes)
    return Exact(np.asarray(elems, dtype=object).reshape(shape))


def _form_sum_axis(a: np.ndarray, axis: int) -> np.ndarray:
    moved = np.moveaxis(a, axis, -1)
    out = np.empty(moved.shape[:-1], dtype=object)
    flat = out.reshape(-1)
    for i, row in enumerate(moved.reshape(-1, moved.shape[-1])):
        row = row.tolist()
        flat[i] = sum(row[1:], row[0]) if all(type(f) is fmpq for f in row) else F.make("sum", *row)
    return np.expand_dims(out, axis)


def _sym_sum_axis(a: np.ndarray, axis: int) -> np.ndarray:
    moved = np.moveaxis(a, axis, -1)
    out = np.empty(moved.shape[:-1], dtype=object)
    flat = out.reshape(-1)
    sp = sympy()
    for i, row in enumerate(moved.reshape(-1, moved.shape[-1])):
        flat[i] = sp.Add(*[s_sym(e) for e in row.tolist()])
    return np.expand_dims(out, axis)


def matmul2d(x: Exact, y: Exact) -> Exact:
    """(m, k) @ (k, n), exact."""
    (m, k), (k2, n) = x.shape, y.shape
    assert k == k2
    kind = _kind(x, y)
    if m * k * n == 0:
        return Exact.zeros((m, n))
    if kind == "rational":
        return Exact.from_q(R.matmul(x.qa, y.qa))
    if kind == "elements":
        if m * k * n > MAX_CLOSED_PRODUCTS:
            raise ExactLimit(f"a product of ({m}, {k}) and ({k}, {n}) closed forms (free symbols) needs {m * k * n:,} "
                             f"symbolic products, more than {MAX_CLOSED_PRODUCTS:,}; give the symbols values "
                             "(symbols:) and solve with --numeric, or use smaller matrices")
        a, b = x.as_sym().elems, y.as_sym().elems
        sp = sympy()
        out = np.empty((m, n), dtype=object)
        for i in range(m):
            for j in range(n):
                out[i, j] = s_norm(sp.Add(*[s_mul(a[i, t], b[t, j]) for t in range(k)]))
        return _from_elements(out)
    if _has_specials(x) or _has_specials(y):
        r = matmul2d(x.as_sym(), y.as_sym())
        return r if r.kind == "rational" else Exact(r.elems)
    forms = None
    fx = fy = None
    if 3 * k + 1 <= F.FORM_LIMIT and _may_have_forms(x) and _may_have_forms(y):
        fx, fy = x.form_array(), y.form_array()
    if fx is not None and fy is not None:
        forms = np.empty((m, n), dtype=object)
        for i in range(m):
            for j in range(n):
                terms = [F.make("mul", fx[i, t], fy[t, j]) for t in range(k)]
                forms[i, j] = F.make("sum", *terms)
        if all(f is None for f in forms.reshape(-1).tolist()):
            forms = None
    if y.kind == "rational":  # a weight: its arb matrix is made once (rational values never need refining)
        qa = y.qa

        def recipe(a):
            return Bl.matmul_by_matrix(a, qa.arb_matrix(flint.ctx.prec), right=True)
        return Exact.certified((m, n), recipe, (x,), forms)
    if x.kind == "rational":
        qa = x.qa

        def recipe(b):
            return Bl.matmul_by_matrix(b, qa.arb_matrix(flint.ctx.prec), right=False)
        return Exact.certified((m, n), recipe, (y,), forms)
    return Exact.certified((m, n), Bl.matmul, (x, y), forms)


def _may_have_forms(x: Exact) -> bool:
    """Can elements of ``x`` have closed forms (a certified tensor without any has none)?"""
    return x.kind != "real" or x.forms is not None


def _has_specials(x: Exact) -> bool:
    return x.kind == "real" and x.forms is not None and bool(np.any(_is_special(x.forms)))


def outer(x: Exact, y: Exact) -> Exact:
    return matmul2d(x.reshape((x.size, 1)), y.reshape((1, y.size)))


def negate_where(x: Exact, mask) -> Exact:
    """-x where ``mask`` (a bool array broadcastable to x), else x."""
    if mask is None or not np.any(mask):
        return x
    return where_mask(np.broadcast_to(mask, x.shape), neg(x), x)


# ----------------------------------------------------------------------------- equality

def same(x, y) -> bool:
    """Equal values of any answer mode: exact tensors compared exactly (:func:`equal`), any
    other value by its own ``equals``."""
    if isinstance(x, Exact):
        return isinstance(y, Exact) and equal(x, y)
    return x.equals(y)


def equal(x: Exact, y: Exact) -> bool:
    if x.shape != y.shape:
        return False
    if x.kind == "rational" and y.kind == "rational":
        return bool(np.all(x.qa.num * y.qa.den == y.qa.num * x.qa.den))
    if x.kind == "elements" or y.kind == "elements" or _has_specials(x) or _has_specials(y):
        return _equal_elements(x, y)
    d = sub(x, y)
    if d.kind == "rational":
        return not bool(np.any(d.qa.num != 0))
    signs = d.signs()
    return all(s == 0 for s in signs.reshape(-1).tolist())


def _equal_elements(x: Exact, y: Exact) -> bool:
    from adjoint.values.numbers.symbolic import is_zero
    S = sympy().S
    for a, b in zip(x.flat(), y.flat()):
        if type(a) is fmpq and type(b) is fmpq:
            if a != b:
                return False
            continue
        sa, sb = s_sym(a), s_sym(b)
        if sa is S.NaN or sb is S.NaN:
            if not (sa is S.NaN and sb is S.NaN):
                return False
            continue
        if sa == sb:
            continue
        if not is_zero(sa - sb):
            return False
    return True


def rational_ratio(p: Exact, q: Exact):
    """c with q == c * p elementwise, both rational (p nonzero somewhere), else None."""
    if p.shape != q.shape or not (p.rational and q.rational):
        return None
    c = None
    for x, y in zip(p.flat(), q.flat()):
        if x == 0:
            if y != 0:
                return None
            continue
        r = y / x
        if c is None:
            c = r
        elif r != c:
            return None
    return c
