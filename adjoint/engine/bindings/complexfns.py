"""Complex tensors' functions: ``conj``, ``real``/``imag`` (also the attributes ``z.real``,
``z.imag``), ``view_as_real``, ``view_as_complex``, ``angle``, ``sgn``, ``complex``, lowered as ATen runs them.

``conj`` of a complex tensor is a lazy view with the conjugate bit set (ConjBackward0); of a
real tensor it is the tensor itself. ``resolve_conj`` of a tensor with the bit is a copy of it
without (CloneBackward0, preserve_format's layout); of any other it is the tensor itself. ``real(z)`` is ``select(view_as_real(z), -1, 0)``, and
of a tensor with the conjugate bit ``view_as_real(z._conj())`` first (one more
ConjBackward0); ``imag`` of such a tensor also negates the real view (``_neg_view``,
NegViewBackward0) before selecting. ``view_as_real`` refuses a tensor with the conjugate bit
and a real one; ``view_as_complex`` a tensor whose last dimension is not of size 2 with stride
1, or whose other strides or offset are odd -- each with PyTorch's RuntimeError.
"""

from __future__ import annotations

from adjoint.format.errors import Loc, ProblemError
from adjoint.engine.bindings.signature import Function, Param
from adjoint.engine.graph import Tensor
from adjoint.engine.torch_errors import TorchError
from adjoint.engine.complex_grad import is_complex
from adjoint.values.strides import preserve_format_strides

_RESOLVE = ("view_as_real doesn't work on unresolved conjugated tensors.  To resolve the conjugate tensor so you can "
            "view it as real, use self.resolve_conj(); however, be warned that the resulting tensor will NOT alias "
            "the original.")


def is_conj(t: Tensor) -> bool:
    return t.conj_bit


def conj(rt, z: Tensor, loc: Loc):
    if not is_complex(z):
        return z
    out = rt.apply("conj", [z], None, loc)
    out.conj_bit = not is_conj(z)
    return out


def resolve_conj(rt, z: Tensor, loc: Loc):
    """at::resolve_conj: ``self`` itself unless it has the conjugate bit, else its conjugated values
    materialized by a clone (CloneBackward0, the clone's preserve_format strides), without the bit."""
    if not is_conj(z):
        return z
    out = rt.apply("clone", [z], None, loc)
    out.conj_bit = False
    if z.strides and len(z.strides) == len(z.shape):
        out.strides = preserve_format_strides(z.shape, z.strides)
    return out


def _as_real(rt, z: Tensor, loc: Loc):
    out = rt.apply("view_as_real", [z], None, loc)
    out.of_complex = True   # it shares the complex tensor's memory: no in-place write modelled
    return out


def _real_view(rt, z: Tensor, loc: Loc):
    if is_conj(z):   # at::real / at::imag: view_as_real(self._conj()), which clears the bit
        w = rt.apply("conj", [z], None, loc)
        w.conj_bit = False
        return _as_real(rt, w, loc)
    return _as_real(rt, z, loc)


def real(rt, z: Tensor, loc: Loc):
    if not is_complex(z):
        return z
    r = _real_view(rt, z, loc)
    return rt.apply("select", [r], (len(r.shape) - 1, 0), loc)


def imag(rt, z: Tensor, loc: Loc):
    if not is_complex(z):
        raise TorchError("RuntimeError", "imag is not implemented for tensors with non-complex dtypes.", "dtype")
    r = _real_view(rt, z, loc)
    if is_conj(z):
        r = rt.apply("neg_view", [r], None, loc)
    return rt.apply("select", [r], (len(r.shape) - 1, 1), loc)


def view_as_real(rt, z: Tensor, loc: Loc):
    if not is_complex(z):
        raise TorchError("RuntimeError", "view_as_real is only supported for complex tensors", "dtype")
    if is_conj(z):
        raise TorchError("RuntimeError", _RESOLVE, "dtype")
    return _as_real(rt, z, loc)


def view_as_complex(rt, x: Tensor, loc: Loc):
    names = {"int64": "Long", "bool": "Bool"}
    if x.dtype not in ("float32", "float64"):
        kind = names.get(x.dtype, "ComplexFloat" if x.dtype == "complex64" else "ComplexDouble")
        raise TorchError("RuntimeError", "view_as_complex is only supported for half, float and double tensors, but "
                                         f"got a tensor of scalar type: {kind}", "dtype")
    if not x.shape:
        raise TorchError("RuntimeError", "Input tensor must have one or more dimensions", "dtype")
    if x.shape[-1] != 2:
        raise TorchError("RuntimeError", "Tensor must have a last dimension of size 2", "dtype")
    strides = x.strides or ()
    if strides and strides[-1] != 1:
        raise TorchError("RuntimeError", "Tensor must have a last dimension with stride 1", "dtype")
    if any(s % 2 for s in strides[:-1]):
        raise TorchError("RuntimeError", "Tensor must have a stride divisible by 2 for all but last dimension", "dtype")
    if (getattr(x, "offset", 0) or 0) % 2:
        raise TorchError("RuntimeError", "Tensor must have a storage_offset divisible by 2", "dtype")
    if getattr(rt.B, "is_complex", None) is None:   # a real backend would keep the real parts only
        raise ProblemError(loc, "view_as_complex in a file that declares no complex tensor is not modelled yet: its "
                                "values need complex numbers; declare one input or parameter complex (dtype: "
                                "complex64 or complex128)")
    return rt.apply("view_as_complex", [x], None, loc)


def angle(rt, z: Tensor, loc: Loc):
    """AngleBackward0: arg z, real, of a complex tensor; a real tensor's angle (0, or pi where x < 0)
    is not modelled."""
    if not is_complex(z):
        raise ProblemError(loc, "angle of a real tensor is not modelled (PyTorch: 0, or pi where the element is "
                                "negative, with zero gradients); angle of a complex tensor is")
    return rt.apply("angle", [z], None, loc)


def sgn(rt, z: Tensor, loc: Loc):
    """SgnBackward0. Of a real tensor its backward hands on an efficient zero tensor
    (``_efficientzerotensor``: zeros with no storage, "ZeroTensors are immutable"): what the engine
    models of one is adjoint.engine.zerotensor's, the rest refused there."""
    return rt.apply("sgn", [z], None, loc)


_SCALAR_TYPE = {"float32": "Float", "float64": "Double", "int64": "Long", "bool": "Bool", "complex64": "ComplexFloat",
                "complex128": "ComplexDouble"}


def complex_(rt, re: Tensor, im: Tensor, loc: Loc):
    """torch.complex(real, imag): ComplexBackward0, the operands broadcast; both of one float dtype
    (PyTorch's RuntimeErrors otherwise)."""
    if re.dtype not in ("float32", "float64") or im.dtype not in ("float32", "float64"):
        raise TorchError("RuntimeError", "Expected both inputs to be Half, Float or Double tensors but got "
                                         f"{_SCALAR_TYPE[re.dtype]} and {_SCALAR_TYPE[im.dtype]}", "dtype")
    if re.dtype != im.dtype:
        raise TorchError("RuntimeError", f"Expected object of scalar type {_SCALAR_TYPE[re.dtype]} but got scalar "
                                         f"type {_SCALAR_TYPE[im.dtype]} for second argument", "dtype")
    if getattr(rt.B, "is_complex", None) is None:
        raise ProblemError(loc, "torch.complex in a file that declares no complex tensor is not modelled yet: its "
                                "values need complex numbers; declare one input or parameter complex (dtype: "
                                "complex64 or complex128)")
    return rt.apply("complex", [re, im], None, loc)


def attribute(rt, x: Tensor, name: str, loc: Loc):
    """``z.real`` and ``z.imag``; KeyError for any other name."""
    if name == "real":
        return real(rt, x, loc)
    if name == "imag":
        return imag(rt, x, loc)
    raise KeyError(name)


_IN = (Param("input", "tensor"),)

FUNCTIONS = (
    Function("conj", _IN, lambda rt, a, loc: conj(rt, a["input"], loc), where="both",
             doc="ConjBackward0 on a complex tensor; a real one is returned as is"),
    Function("resolve_conj", _IN, lambda rt, a, loc: resolve_conj(rt, a["input"], loc), where="both",
             doc="CloneBackward0 of a tensor with the conjugate bit (the bit cleared); any other is returned as is"),
    Function("real", _IN, lambda rt, a, loc: real(rt, a["input"], loc), where="function",
             doc="select(view_as_real(z), -1, 0)"),
    Function("imag", _IN, lambda rt, a, loc: imag(rt, a["input"], loc), where="function",
             doc="select(view_as_real(z), -1, 1)"),
    Function("view_as_real", _IN, lambda rt, a, loc: view_as_real(rt, a["input"], loc), where="function",
             doc="ViewAsRealBackward0"),
    Function("view_as_complex", _IN, lambda rt, a, loc: view_as_complex(rt, a["input"], loc), where="function",
             doc="ViewAsComplexBackward0"),
    Function("complex", (Param("real", "tensor"), Param("imag", "tensor")),
             lambda rt, a, loc: complex_(rt, a["real"], a["imag"], loc), where="function",
             doc="ComplexBackward0 (real and imaginary parts, broadcast)"),
    Function("sgn", _IN, lambda rt, a, loc: sgn(rt, a["input"], loc), where="both",
             doc="SgnBackward0 (z / |z|, 0 at 0; of a real tensor its sign, zero gradient)"),
    Function("angle", _IN, lambda rt, a, loc: angle(rt, a["input"], loc), where="both",
             doc="AngleBackward0 (a complex tensor's arg, real)"),
)
