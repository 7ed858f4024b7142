"""Complex tensors in the engine: which primitives take them, their result dtypes, and the
backward in PyTorch's convention.

PyTorch's gradient of a complex tensor is the conjugate Wirtinger derivative (its autograd
note, "Autograd for Complex Numbers"): for a real loss L of z, ``z.grad`` is ``dL/dz*``, and
a node whose function f is holomorphic hands back ``grad * conj(f'(z))`` -- derivatives.yaml's
``grad * other.conj()`` for mul, ``grad.mm(mat2.t().conj())`` for mm, ``grad * result.conj()``
for exp. The op rules (:mod:`adjoint.engine.ops`) are written for real numbers as
``grad * f'(x)``; every primitive admitted here besides :data:`NATIVE` is a polynomial, a
quotient or exp with real coefficients, for which ``f'(conj z) = conj(f'(z))``: so its rule
run on the conjugated saved values is PyTorch's formula exactly (:func:`call_vjp`). The
:data:`NATIVE` rules are written in PyTorch's complex form already (``abs``: ``grad *
sgn(self)``, ``conj``, ``view_as_real``, ``view_as_complex``). A real input of a complex
node receives the real part of its gradient (derivatives.yaml's ``handle_r_to_c``).

Any other primitive with a complex operand is refused with the file's line: never a silent
wrong answer.
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.format.errors import ProblemError
from adjoint.format.gaussian import Gaussian
from adjoint.engine.torch_errors import TorchError
from adjoint.engine import float32_tensors

COMPLEX_DTYPES = ("complex64", "complex128")
_REAL_OF = {"complex64": "float32", "complex128": "float64"}
_COMPLEX_OF = {"float32": "complex64", "float64": "complex128"}

#: primitives modelled with complex operands
COMPLEX_OPS = frozenset((
    "add", "sub", "rsub", "mul", "div", "reciprocal", "neg", "pow_scalar", "exp", "abs",
    "sum", "mean", "sum_dim", "mean_dim", "mm", "mv", "dot", "bmm", "addmm",
    "reshape_alias", "t", "view", "unsafe_view", "squeeze_", "select", "slice", "transpose", "permute", "unsqueeze",
    "squeeze_all", "squeeze_dim", "squeeze_dims", "expand", "alias", "clone",
    "conj", "view_as_real", "view_as_complex", "neg_view", "cat", "stack",
    "sin", "cos", "tan", "sinh", "cosh", "tanh", "sigmoid", "log", "sqrt", "angle", "complex", "sgn"))
#: rules written in PyTorch's complex form already (no conjugation around them)
NATIVE = frozenset(("abs", "conj", "view_as_real", "view_as_complex", "angle", "complex", "sgn"))
#: results of real dtype from a complex operand
_TO_REAL = frozenset(("abs", "view_as_real", "angle"))
#: elementary functions of a complex tensor whose exact values are their parts' formulas (sin z =
#: sin a cosh b + i cos a sinh b, log z = log|z| + i atan2(b, a), ...: values/backends/complex.py)
FUNCTIONS = frozenset(("sin", "cos", "tan", "sinh", "cosh", "tanh", "sigmoid", "log", "sqrt", "angle", "sgn"))
#: of those, the ones whose kernels grow no intermediate value (no size limit)
_BOUNDED = frozenset(("angle", "sgn"))
#: the size of a part beyond which the exact mode refuses those (exp of it would overflow the
#: kernel's intermediate values, cosh b, exp(-z), where the exact value is finite)
_LARGEST_PART = {"complex64": 80, "complex128": 300}
#: products whose operands must share one dtype (ATen refuses a mix)
_SAME_DTYPE = frozenset(("mm", "mv", "dot", "bmm", "addmm"))


def is_complex(t) -> bool:
    return t is not None and getattr(t, "dtype", None) in COMPLEX_DTYPES


def zeros(B, shape, dtype: str | None):
    """Zeros of ``shape`` as a tensor of ``dtype`` holds them: complex zeros for a complex dtype
    (an undefined gradient PyTorch materializes, ``zeros_like`` of a complex tensor, is complex)."""
    if dtype in COMPLEX_DTYPES:
        return B.make(B.zeros(shape), B.zeros(shape)).tagged(dtype)
    return B.zeros(shape)


def check_numbers(B, opname: str, ins, params, loc) -> None:
    """A complex Python number (``2j``) in a file without complex tensors: refused (its values
    would need the complex backend the file does not set up); so is one as an op's parameter
    other than ``rsub``'s (``1j - x``): a complex exponent (``x ** 1j``, ``2j ** x``)."""
    if isinstance(params, Gaussian) and opname != "rsub":
        raise ProblemError(loc, f"a complex exponent ({opname}) is not modelled; complex tensors take integer powers")
    if not hasattr(B, "is_complex") and (isinstance(params, Gaussian) or any(isinstance(x, Gaussian) for x in ins)):
        raise ProblemError(loc, "a complex number (such as 2j) in a file without complex tensors is not modelled; "
                                "declare an input with dtype: complex64 or complex128")


def check_operands(op, ts, params, loc) -> None:
    """Refuse a primitive with a complex operand that is not modelled (named, at the file's line)."""
    if not any(is_complex(t) for t in ts):
        return
    if op.name not in COMPLEX_OPS:
        raise ProblemError(loc, f"{op.name} ({op.node}) of a complex tensor is not modelled; complex tensors take "
                                "+ - * / (tensors, real and complex numbers), neg, conj, real, imag, abs, angle, sgn, exp, log, sqrt, sin, cos, "
                                "tan, tanh, sigmoid, sinh, cosh, integer pow, sum, mean, cat, stack, matmul/mm, Linear, view_as_real, view_as_complex and views (docs/ops.md)")
    if op.name == "pow_scalar" and not (isinstance(params, (int, Fraction)) and Fraction(params).denominator == 1):
        raise ProblemError(loc, f"a complex tensor to the power {params} is not modelled; an integer exponent is")
    if op.name in _SAME_DTYPE:
        dtypes = {t.dtype for t in ts if t is not None and not t.wrapped}
        if len(dtypes) > 1 and mixed_product_error(op.name, ts) is not None:
            return
        if len(dtypes) > 1:
            raise ProblemError(loc, f"{op.node} of {' and '.join(sorted(dtypes))} operands is not modelled (PyTorch "
                                    "refuses a product of mixed dtypes); give every operand the same complex dtype")


def check_exact_values(B, op, ts, loc) -> None:
    """In the exact mode, an elementary function (:data:`FUNCTIONS`) of a complex tensor with a
    part exactly 0 is refused: PyTorch's result then has zero parts whose sign (+0.0 or -0.0, as
    C's csin, clog ... make it) the parts' formulas do not follow, and log, sqrt and angle have
    their branch cut there (imaginary part 0, real part <= 0: pi or -pi by the sign of the zero);
    so is one with a part beyond :data:`_LARGEST_PART` in size, where the kernel's float
    intermediate values overflow. --float64 runs PyTorch's kernels and refuses neither."""
    if op.name not in FUNCTIONS or getattr(B, "name", None) != "exact" or not is_complex(ts[0]):
        return
    value, t = ts[0].value, ts[0]
    limit = _LARGEST_PART[t.dtype]
    for part, which in ((getattr(value, "re", None), "a real"), (getattr(value, "im", None), "an imaginary")):
        if part is None:
            continue
        zeros = part.zero_mask()
        if zeros.any():
            raise ProblemError(loc, f"{op.name} ({op.node}) of a complex tensor with {which} part exactly 0 "
                                    f"(element {_flat_index(zeros)}) is not modelled in the exact mode: PyTorch's "
                                    "zero parts of the result are signed (+0.0 or -0.0) and log, sqrt, angle have "
                                    "their branch cut there; use --float64, or give every part a nonzero value")
        if op.name in _BOUNDED:
            continue
        sizes = part.floats_flat()
        big = [i for i, v in enumerate(sizes or ()) if v is not None and not abs(v) <= limit]
        if big:
            raise ProblemError(loc, f"{op.name} ({op.node}) of a complex tensor with {which} part beyond {limit} in "
                                    f"size (element {big[0]}) is not modelled in the exact mode: the {t.dtype} "
                                    "kernel's intermediate values overflow there; use --float64")


def _flat_index(mask) -> list:
    import numpy as np
    return [int(i) for i in np.unravel_index(int(np.flatnonzero(mask)[0]), mask.shape)]


_C10 = {"float32": "float", "float64": "double", "complex64": "c10::complex<float>",
        "complex128": "c10::complex<double>"}
_SCALAR_TYPE = {"float32": "Float", "float64": "Double", "complex64": "ComplexFloat", "complex128": "ComplexDouble"}


def mixed_product_error(opname: str, ts):
    """PyTorch's RuntimeError for a matrix product of two dtypes (a real and a complex operand, or
    complex64 and complex128), raised by the kernel once the node is made and its inputs packed:
    mm's (``x @ W``, ``linear`` without a bias), addmm's (``linear`` with one: the bias against the
    weight first, then the input), dot's; None for another product (still refused)."""
    if not any(is_complex(t) for t in ts):
        return None
    if opname == "mm":
        a, b = ts
        if a.dtype != b.dtype:
            return TorchError("RuntimeError", "expected m1 and m2 to have the same dtype, but got: "
                                              f"{_C10[a.dtype]} != {_C10[b.dtype]}", "dtype")
    elif opname == "addmm":
        bias, m1, m2 = ts
        if bias.dtype != m2.dtype:
            return TorchError("RuntimeError", "self and mat2 must have the same dtype, but got "
                                              f"{_SCALAR_TYPE[bias.dtype]} and {_SCALAR_TYPE[m2.dtype]}", "dtype")
        if m1.dtype != m2.dtype:
            return TorchError("RuntimeError", "mat1 and mat2 must have the same dtype, but got "
                                              f"{_SCALAR_TYPE[m1.dtype]} and {_SCALAR_TYPE[m2.dtype]}", "dtype")
    elif opname == "dot":
        a, b = ts
        if a.dtype != b.dtype:
            return TorchError("RuntimeError", "dot : expected both vectors to have same dtype, but found "
                                              f"{_SCALAR_TYPE[a.dtype]} and {_SCALAR_TYPE[b.dtype]}", "dtype")
    return None


def result_dtype(op, ts, default: str, params=None) -> str | None:
    """The output dtype when a complex tensor is involved (None otherwise): ``abs`` and
    ``view_as_real`` of a complex tensor are real, ``view_as_complex`` of a real one is
    complex; otherwise the promoted dtype of the operands (a float64 or complex128 operand
    makes complex128, as torch.result_type does)."""
    operands = [t for t in ts if t is not None and not t.wrapped]
    if op.name in ("view_as_complex", "complex"):
        return _COMPLEX_OF.get(operands[0].dtype) if operands else None
    if (isinstance(params, Gaussian) or any(t is not None and t.wrapped and is_complex(t) for t in ts)) \
            and not any(is_complex(t) for t in operands):
        # a real tensor and a complex number (x * 1j): complex of the tensor's width
        floats = [t.dtype for t in operands if t.dtype in _COMPLEX_OF]
        return "complex128" if "float64" in floats else "complex64"
    if not any(is_complex(t) for t in operands):
        # the real view of a complex64 tensor in a float64 file (or the reverse): a float dtype
        # not the file's own, promoted as torch.result_type does
        floats = {t.dtype for t in operands if t.dtype in ("float32", "float64")}
        if floats and floats != {default}:   # at::result_type: operands with dims before 0-d ones
            return float32_tensors.promoted(operands)
        return None
    if op.name in _TO_REAL:
        return _REAL_OF[operands[0].dtype]
    wide = any(t.dtype in ("complex128", "float64") for t in operands)
    return "complex128" if wide else "complex64"


def value_dtype(B, value) -> str | None:
    """The dtype of a tensor made from a complex value with no dtype given (a gradient handed
    to a hook): the file's complex dtype."""
    is_cx = getattr(B, "is_complex", None)
    if is_cx is None or not is_cx(value):
        return None
    return value.dtype or B.complex_dtype


def tag_complex(value, dtype: str):
    """A complex value as the value of a tensor of ``dtype`` (a hook's returned gradient)."""
    tagged = getattr(value, "tagged", None)
    return tagged(dtype) if tagged is not None and dtype in COMPLEX_DTYPES else value


def complex_node(node) -> bool:
    return any(is_complex(t) for t in node.inputs) or any(d in COMPLEX_DTYPES for _, d in node.outputs)


def call_vjp(node, B, gs, ins, outs, need) -> list:
    """``node.op.vjp`` in PyTorch's convention for complex values (see the module docstring)."""
    op = node.op
    if not complex_node(node) or not hasattr(B, "conj"):
        return op.vjp(B, gs, ins, outs, node.params, need)
    if op.name in NATIVE:
        grads = op.vjp(B, gs, ins, outs, node.params, need)
    else:
        conj = B.conj
        grads = op.vjp(B, gs, [conj(x) if x is not None else None for x in ins],
                       [conj(x) if x is not None else None for x in outs], node.params, need)
    grads = list(grads)
    for i, t in enumerate(node.inputs):
        if i < len(grads) and grads[i] is not None and t is not None:
            if not is_complex(t):
                grads[i] = B.real(grads[i])      # handle_r_to_c: a real input's gradient is real
            elif B.is_complex(grads[i]):
                grads[i] = grads[i].tagged(t.dtype)   # the engine's validate_outputs: the input's dtype
            else:                                     # a real rule's zeros (x ** 0): a complex zero
                grads[i] = B.make(grads[i], B.zeros(B.shape(grads[i]))).tagged(t.dtype)
    return grads


def refuse_complex_inplace(ts, prim: str, loc) -> None:
    """An in-place write into or from a complex tensor, or into the real view of one (``z.real``,
    ``view_as_real(z)``, which share the complex tensor's memory in PyTorch), is not modelled."""
    target = ts[0]
    inside = getattr(target, "of_complex", False) or (target.base is not None and getattr(target.base, "of_complex", False))
    if inside or any(is_complex(t) for t in ts):
        raise ProblemError(loc, f"the in-place {prim} on a complex tensor (or on its real view) is not modelled; "
                                "write it out of place (z = z * 2)")
