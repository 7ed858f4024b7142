"""Operators and the v1 functions: what PyTorch runs for each (ATen's dispatch).

``2 - x`` is ``rsub``, ``2 / x`` is ``reciprocal`` then ``mul``, ``v @ M`` with a 1-D ``v``
is ``unsqueeze``/``mm``/``squeeze_``, ``F.linear`` on a 1-D input is ``view``/``t``/``addmm``/
``view``, a batched ``a @ b`` is at::matmul's fold into ``mm``/``mv`` or its expand / reshape /
``bmm`` / ``_unsafe_view`` chain (decided from ranks, strides and ``requires_grad``, as
``_matmul_impl`` and ``should_fold`` decide): each lowering decides, from the operands' shapes
and kinds, which primitives (:mod:`adjoint.engine.ops`) PyTorch applies, in which order, and hands
them to the runtime. Shape errors are worded as PyTorch words them. The v1 one-tensor
functions (``tanh``, ``exp``, ...) are Tensor methods too.
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.format.errors import Loc, ProblemError
from adjoint.values.exact import MAX_EXACT_EXPONENT
from adjoint.engine.graph import Tensor
from adjoint.engine.pyerrors import binary_none, sequence_operand
from adjoint.engine.torch_errors import TorchError
from adjoint.values.strides import contiguous_strides, is_contiguous, view_strides
from adjoint.engine.bindings.signature import Function, Param
from adjoint.engine.inplace import refuse_atan2_operands, scaled_by_alpha
from adjoint.format.gaussian import Gaussian


def is_number(v) -> bool:
    return isinstance(v, (Fraction, Gaussian))


# ----------------------------------------------------------------------------- operators

def binary(rt, op: str, a, b, loc: Loc):
    """``a op b`` for tensors and Python numbers, as Tensor's dunder methods dispatch it. A tuple or
    None operand (a layer adding what a child's forward hook returned instead of its tensor) is
    Python's TypeError: Tensor's operators return NotImplemented for it."""
    for v in (a, b):
        if isinstance(v, tuple):
            raise sequence_operand(op, a, None, b, None, None, loc)
        if v is None:
            raise binary_none(op, a, None, b, None, loc)
    na, nb = is_number(a), is_number(b)
    if na and nb:
        return fold(op, a, b, loc)
    ap = rt.apply
    if op == "+":
        if na:
            return ap("add", [b, a], None, loc)  # 2 + x runs x.__radd__(2)
        return ap("add", [a, b], None, loc)
    if op == "-":
        if na:
            return ap("rsub", [b], a, loc)
        return ap("sub", [a, b], None, loc)
    if op == "*":
        if na:
            return ap("mul", [b, a], None, loc)
        return ap("mul", [a, b], None, loc)
    if op == "/":
        if na:  # Tensor.__rtruediv__: self.reciprocal() * other
            return ap("mul", [ap("reciprocal", [b], None, loc), a], None, loc)
        return ap("div", [a, b], None, loc)
    if op == "**":
        if nb:
            return ap("pow_scalar", [a], b, loc)
        if na:
            return ap("rpow", [b], a, loc)
        return ap("pow_tensor", [a, b], None, loc)
    if op == "@":
        if na or nb:
            raise ProblemError(loc, "@ with a number operand: Python's TypeError names the number's type (int or "
                                    "float), which is not known here (not modelled); give two tensors")
        return matmul(rt, a, b, loc)
    raise AssertionError(op)


def fold(op: str, a: Fraction, b: Fraction, loc: Loc) -> Fraction:
    """Python arithmetic on two number literals (no tensor, no node)."""
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        if b == 0:
            raise ProblemError(loc, "division by zero between two numbers: Python raises ZeroDivisionError"
                               if not isinstance(b, Gaussian) else "complex division by zero: Python raises "
                               "ZeroDivisionError")
        return a / b
    if op == "**" and (isinstance(a, Gaussian) or isinstance(b, Gaussian)):
        raise ProblemError(loc, "a power of complex numbers is not modelled; write the product out")
    if op == "**":
        if b.denominator == 1 and abs(b) > MAX_EXACT_EXPONENT and abs(a) not in (0, 1):
            raise ProblemError(loc, f"the exponent {b} is too large to compute exactly (at most "
                                    f"{MAX_EXACT_EXPONENT} in size); use a smaller power")
        if b.denominator == 1 and not (a == 0 and b < 0):
            return a ** int(b)
        root = _exact_sqrt(a) if b.denominator == 2 and abs(b) <= MAX_EXACT_EXPONENT and not (a == 0 and b < 0) else None
        if root is not None:   # a perfect square to a half-integer power (d ** 0.5 of a size 4, 16, ...): exact
            return root ** int(2 * b)
        raise ProblemError(loc, f"the number {a} ** {b} is not an exact rational; write the value as a tensor "
                                "or a symbol")
    raise ProblemError(loc, "@ of two numbers: Python's TypeError names their types (int or float), which are not "
                            "known here (not modelled)")


def _exact_sqrt(a: Fraction) -> Fraction | None:
    """The square root of ``a`` when it is a rational (Python's ``a ** 0.5`` is then exactly it)."""
    from math import isqrt
    if a < 0:
        return None
    n, d = isqrt(a.numerator), isqrt(a.denominator)
    return Fraction(n, d) if n * n == a.numerator and d * d == a.denominator else None


def neg(rt, v, loc: Loc):
    return -v if is_number(v) else rt.apply("neg", [v], None, loc)


# ----------------------------------------------------------------------------- matmul and linear

def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def aten_reshape(rt, x: Tensor, shape: tuple, loc: Loc) -> Tensor:
    """at::reshape inside ATen: ``view`` of a contiguous tensor, ``_reshape_alias`` when the strides
    allow a view (ReshapeAliasBackward0), else ``clone`` then ``_unsafe_view``."""
    if is_contiguous(x.shape, x.strides):
        return rt.apply("view", [x], tuple(shape), loc)
    if view_strides(x.shape, x.strides, tuple(shape)) is not None:
        return rt.apply("reshape_alias", [x], tuple(shape), loc)
    return rt.apply("unsafe_view", [rt.apply("clone", [x], None, loc)], tuple(shape), loc)


def _mT(rt, x: Tensor, loc: Loc) -> Tensor:
    nd = len(x.shape)
    return rt.apply("transpose", [x], (nd - 2, nd - 1), loc)


def _contiguous(rt, x: Tensor, loc: Loc) -> Tensor:
    return x if is_contiguous(x.shape, x.strides) else rt.apply("clone", [x], None, loc)


def should_fold(rt, a: Tensor, b: Tensor) -> bool:
    """at::native::should_fold: fold the larger operand's batch into mm/mv rows when the smaller
    one requires grad (a smaller gradient in backward), or when it folds without a copy."""
    a_larger = len(a.shape) >= len(b.shape)
    if a_larger:
        shape, strides = a.shape, a.strides
        small = b
    else:
        if rt.grad_enabled and b.requires_grad:
            rt._new_seq()  # tensor2.mT() is made (a TransposeBackward0 node) and dropped
        shape = b.shape[:-2] + (b.shape[-1], b.shape[-2])
        strides = b.strides[:-2] + (b.strides[-1], b.strides[-2])
        small = a
    if not (len(shape) >= 3 and len(small.shape) <= 2):
        return False
    if small.requires_grad:
        return True
    if len(a.shape) == 2:
        return False
    if _numel(shape) == 0:
        return True
    return all(strides[i] == strides[i + 1] * shape[i + 1] for i in range(len(shape) - 2))


def matmul(rt, a: Tensor, b: Tensor, loc: Loc):
    """at::matmul (_matmul_impl) for every rank combination: dot, mv, mm; the fold of a batch into
    mm / mv (should_fold); otherwise expand the batches, reshape, bmm, _unsafe_view."""
    sa, sb = a.shape, b.shape
    da, db = len(sa), len(sb)
    ap = rt.apply
    if da == 0 or db == 0:
        # before any node
        raise TorchError("RuntimeError", f"both arguments to matmul need to be at least 1D, but they are {da}D and {db}D")
    if da == 1 and db == 1:
        return ap("dot", [a, b], None, loc)
    if da == 2 and db == 1:
        return ap("mv", [a, b], None, loc)
    if da == 1 and db == 2:   # mismatched sizes: mm refuses, after the unsqueeze (an answer)
        u = ap("unsqueeze", [a], 0, loc)
        m = ap("mm", [u, b], None, loc)
        return ap("squeeze_", [m], 0, loc)
    if da == 2 and db == 2:
        return ap("mm", [a, b], None, loc)
    if should_fold(rt, a, b):
        return _folded(rt, a, b, loc)
    return _batched(rt, a, b, loc)


def _folded(rt, a: Tensor, b: Tensor, loc: Loc):
    transpose = len(b.shape) > len(a.shape)
    t1 = _mT(rt, b, loc) if transpose else a
    t2 = (rt.apply("t", [a], None, loc) if len(a.shape) == 2 else a) if transpose else b
    out_shape = t1.shape[:-1]
    folded = aten_reshape(rt, t1, (_numel(out_shape), t1.shape[-1]), loc)
    if len(t2.shape) == 2:
        out = rt.apply("unsafe_view", [rt.apply("mm", [folded, t2], None, loc)], out_shape + (t2.shape[1],), loc)
        return _contiguous(rt, _mT(rt, out, loc), loc) if transpose else out
    return rt.apply("unsafe_view", [rt.apply("mv", [folded, t2], None, loc)], out_shape, loc)


def _batched(rt, a: Tensor, b: Tensor, loc: Loc):
    sa, sb = a.shape, b.shape
    da, db = len(sa), len(sb)
    n = sa[-2] if da > 1 else 1
    m1 = sa[-1]
    m2 = sb[-2] if db > 1 else sb[0]
    p = sb[-1] if db > 1 else 1
    batch_a, batch_b = sa[:max(da - 2, 0)], sb[:max(db - 2, 0)]
    if da == 3 and db == 3 and batch_a[0] != batch_b[0]:
        # a batch of 1 that requires grad is squeezed away, so that the fold applies
        if batch_a[0] == 1 and a.requires_grad:
            return matmul(rt, rt.apply("squeeze_dim", [a], (0,), loc), b, loc)
        if batch_b[0] == 1 and b.requires_grad:
            return matmul(rt, a, rt.apply("squeeze_dim", [b], (0,), loc), loc)
    batch = _matmul_batch(batch_a, batch_b)
    count = _numel(batch)
    a3 = aten_reshape(rt, rt.apply("expand", [a], batch + (n, m1), loc), (count, n, m1), loc)
    if db == 1:
        b_exp = aten_reshape(rt, rt.apply("expand", [b], batch + (m2,), loc), (count, m2), loc)
        b3 = rt.apply("unsqueeze", [b_exp], 2, loc)
    else:
        b3 = aten_reshape(rt, rt.apply("expand", [b], batch + (m2, p), loc), (count, m2, p), loc)
    out_shape = batch + ((n,) if da > 1 else ()) + ((p,) if db > 1 else ())
    out = rt.apply("bmm", [a3, b3], None, loc)
    if db == 1:
        out = rt.apply("squeeze_dim", [out], (2,), loc)
    return rt.apply("unsafe_view", [out], out_shape, loc)


def _matmul_batch(a: tuple, b: tuple) -> tuple:
    """_matmul_impl's ``at::infer_size(batch_tensor1, batch_tensor2)``: the broadcast batch, or
    its RuntimeError, raised before any node is made; infer_size walks the dimensions from the
    last, so the first mismatch from the right is the one named (its index in the broadcast)."""
    n = max(len(a), len(b))
    pa, pb = (1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b)
    for i in range(n - 1, -1, -1):
        if pa[i] != pb[i] and pa[i] != 1 and pb[i] != 1:
            raise TorchError("RuntimeError", f"The size of tensor a ({pa[i]}) must match the size of tensor b "
                                             f"({pb[i]}) at non-singleton dimension {i}")
    return tuple(max(x, y) for x, y in zip(pa, pb))


def linear(rt, x: Tensor, weight: Tensor, bias: Tensor | None, loc: Loc):
    """F.linear as torch 2.13 runs it (see docs/ops.md for the node chains)."""
    sx, sw = x.shape, weight.shape
    ap = rt.apply
    if not sx or not sw:   # at::linear's first check, before any node
        raise TorchError("RuntimeError", f"both arguments to linear need to be at least 1D, but they are {len(sx)}D "
                                         f"and {len(sw)}D")
    if bias is not None:
        if len(sx) == 2:
            return ap("addmm", [bias, x, ap("t", [weight], None, loc)], None, loc)
        if not is_contiguous(sx, x.strides or contiguous_strides(sx)):
            # at::linear: a non-contiguous input skips the flattened addmm: matmul, then
            # output.add_(bias) in place (AddBackward0 is the last node)
            from adjoint.engine.inplace import apply_inplace
            out = matmul(rt, x, ap("t", [weight], None, loc), loc)
            return apply_inplace(rt, "add", out, [bias], None, loc)
        rows = 1
        for n in sx[:-1]:
            rows *= n
        flat = ap("view", [x], (rows, sx[-1]), loc)
        out = ap("addmm", [bias, flat, ap("t", [weight], None, loc)], None, loc)
        return ap("view", [out], tuple(sx[:-1]) + (sw[0],), loc)
    return matmul(rt, x, ap("t", [weight], None, loc), loc)


# ----------------------------------------------------------------------------- functions

def _unary(prim: str):
    def lower(rt, a: dict, loc: Loc):
        x = a["input"]
        if prim == "t" and len(x.shape) > 2:
            raise TorchError("RuntimeError", f"t() expects a tensor with <= 2 dimensions, but self is {len(x.shape)}D")
        return rt.apply(prim, [x], None, loc)
    lower.__name__ = f"lower_{prim}"
    return lower


def _arith(op: str):
    def lower(rt, a: dict, loc: Loc):
        alpha = a.get("alpha", Fraction(1))
        other = a["other"]
        if alpha != 1 or a.types.get("alpha") == "float":   # alpha=1.0 beside integer tensors: PyTorch's error
            other = scaled_by_alpha(rt, "add" if op == "+" else "sub", [a["input"], other], alpha, loc, a.types)
        return binary(rt, op, a["input"], other, loc)
    lower.__name__ = f"lower_{ {'+': 'add', '-': 'sub', '*': 'mul', '/': 'div'}[op]}"
    return lower


def lower_atan2(rt, a: dict, loc: Loc):
    """torch.atan2(input, other), Tensor.atan2 (and their arctan2 aliases): one Atan2Backward0
    (saves other, then self), the operands broadcast; finite values without free symbols."""
    y, x = a["input"], a["other"]
    refuse_atan2_operands(rt, [y, x], loc)
    return rt.apply("atan2", [y, x], None, loc)


def lower_neg(rt, a: dict, loc: Loc):
    return neg(rt, a["input"], loc)


def lower_matmul(rt, a: dict, loc: Loc):
    return matmul(rt, a["input"], a["other"], loc)


def lower_mm(rt, a: dict, loc: Loc):
    # an operand of another rank: the kernel's "self/mat2 must be a matrix", after the packs
    return rt.apply("mm", [a["input"], a["mat2"]], None, loc)


def lower_bmm(rt, a: dict, loc: Loc):
    return rt.apply("bmm", [a["input"], a["mat2"]], None, loc)


def lower_pow(rt, a: dict, loc: Loc):
    x, e = a["input"], a["exponent"]
    if is_number(x) and is_number(e):
        raise ProblemError(loc, "pow() of two numbers: not modelled (PyTorch's TypeError lists pow's signatures and "
                                "the arguments' Python types, int or float, as they were passed); write the number "
                                "itself")
    return binary(rt, "**", x, e, loc)


def lower_linear(rt, a: dict, loc: Loc):
    return linear(rt, a["input"], a["weight"], a["bias"], loc)


_X = (Param("input", "tensor"),)

FUNCTIONS = tuple(Function(name, _X, _unary(name), doc=f"one op: {name}")
                  for name in ("tanh", "sigmoid", "exp", "log", "sin", "cos", "sqrt", "abs", "t")) + tuple(
    Function(name, _X, _unary(name), doc=f"one op: {name}")
    for name in ("rsqrt", "log1p", "expm1", "atan", "erf", "sinh", "cosh", "tan", "log2", "log10")) + (
    Function("add", (_X[0], Param("other", "scalar"), Param("alpha", "number", Fraction(1), keyword_only=True)),
             _arith("+"), doc="as the + operator"),
    Function("sub", (_X[0], Param("other", "scalar"), Param("alpha", "number", Fraction(1), keyword_only=True)),
             _arith("-"), doc="as the - operator"),
    Function("mul", (_X[0], Param("other", "scalar")), _arith("*"), doc="as the * operator"),
    Function("div", (_X[0], Param("other", "scalar")), _arith("/"), doc="as the / operator"),
    Function("neg", _X, lower_neg, doc="NegBackward0"),
    *(Function(name, (_X[0], Param("other", "tensor")), lower_atan2,
               doc="Atan2Backward0 (saves other, self): g * b / (a^2 + b^2), -g * a / (a^2 + b^2)")
      for name in ("atan2", "arctan2")),
    Function("matmul", (Param("input", "tensor"), Param("other", "tensor")), lower_matmul,
             doc="as the @ operator: dot, mv, mm, the folded mm / mv, or expand + bmm"),
    Function("mm", (Param("input", "tensor"), Param("mat2", "tensor")), lower_mm, doc="MmBackward0"),
    Function("bmm", (Param("input", "tensor"), Param("mat2", "tensor")), lower_bmm, doc="BmmBackward0"),
    Function("pow", (Param("input", "scalar"), Param("exponent", "scalar")), lower_pow, where="function",
             doc="as **: PowBackward0 (number exponent), PowBackward1 (tensors), PowBackward2 (number base)"),
    Function("pow", (Param("self", "tensor"), Param("exponent", "scalar")),
             lambda rt, a, loc: binary(rt, "**", a["self"], a["exponent"], loc), where="method",
             doc="as **"),
    Function("linear", (Param("input", "tensor"), Param("weight", "tensor"), Param("bias", "tensor", None)),
             lower_linear, where="function", doc="F.linear: addmm (2-D), view/addmm/view, or matmul without bias"),
)
