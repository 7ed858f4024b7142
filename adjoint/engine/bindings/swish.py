"""``F.relu6``, ``F.hardswish``, ``F.mish``: what PyTorch 2.13 runs for each (checked in real torch).

* ``F.relu6(input, inplace=False)`` is ``hardtanh(input, 0, 6)`` in ATen: one
  ``HardtanhBackward0`` (saves self; the gradient passes strictly inside (0, 6)); in place
  ``hardtanh_`` (self cloned and saved);
* ``F.hardswish(input, inplace=False)``: ``HardswishBackward0`` (saves self; in place a clone
  of self);
* ``F.mish(input, inplace=False)``: ``MishBackward0`` (saves self; in place a clone of self).

They are ``torch.nn.functional`` functions only (``torch.relu6`` does not exist).

Two more are Python in torch/nn/functional.py, made of ops adjoint has:

* ``F.softsign(input)`` is ``input / (input.abs() + 1)``: ``AbsBackward0`` (saves self; abs'(0)
  = sgn(0) = 0), ``AddBackward0`` (the Python 1 wrapped), ``DivBackward0`` (saves both);
* ``F.tanhshrink(input)`` is ``input - input.tanh()``: ``TanhBackward0`` (saves its result),
  ``SubBackward0``.

``F.prelu(input, weight)`` (also ``torch.prelu``, ``Tensor.prelu``; ``nn.PReLU``) is ATen's
composite ``at::prelu``: its checks in its order (the dtypes, the weight's numel against the
channel dim 1, a 0-d input with more than one weight, the weight's rank), then the weight
reshaped to broadcast over dim 1 when the ranks differ (a view: ``ViewBackward0``), then
``_prelu_kernel``: ``PreluKernelBackward0`` (saves self and the reshaped weight).

``F.glu(input, dim=-1)`` (``nn.GLU``; no ``torch.glu`` or ``Tensor.glu``): F.glu's own refusal
of a 0-d input, then ``GluBackward0`` (saves self): ``a * sigmoid(b)`` over the halves of
``dim``, whose size must be even (PyTorch's RuntimeError before any node).

``F.softmin(input, dim=None)`` is ``(-input).softmax(dim)`` (torch/nn/functional.py):
``NegBackward0``, then ``SoftmaxBackward0``; without ``dim``, F's legacy implicit dim and its
deprecation warning first (``dtype=`` is not taken).
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.engine.bindings.signature import Function
from adjoint.engine.bindings.signature import Param
from adjoint.engine.bindings.core import binary
from adjoint.engine.torch_errors import TYPE_NAMES, TorchError
_IN = Param("input", "tensor")
_INPLACE = Param("inplace", "bool", False)


def _lower(prim: str, params):
    def lower(rt, a, loc):
        if a["inplace"]:
            from adjoint.engine.inplace import apply_inplace
            return apply_inplace(rt, prim, a["input"], [], params, loc)
        return rt.apply(prim, [a["input"]], params, loc)
    lower.__name__ = f"lower_{prim}"
    return lower


RELU6_BOUNDS = (Fraction(0), Fraction(6))


def lower_softsign(rt, a, loc):
    """``input / (input.abs() + 1)`` (torch/nn/functional.py)."""
    x = a["input"]
    return binary(rt, "/", x, binary(rt, "+", rt.apply("abs", [x], None, loc), Fraction(1), loc), loc)


def lower_tanhshrink(rt, a, loc):
    """``input - input.tanh()`` (torch/nn/functional.py)."""
    x = a["input"]
    return binary(rt, "-", x, rt.apply("tanh", [x], None, loc), loc)


def prelu(rt, x, weight, loc):
    """``at::prelu`` (Activation.cpp): its checks, the weight's reshape, ``_prelu_kernel``."""
    from adjoint.engine.bindings.views import reshape
    numel = 1
    for n in weight.shape:
        numel *= n
    if x.dtype != weight.dtype:
        raise TorchError("RuntimeError", f"prelu: Type promoting not supported. Got {TYPE_NAMES[x.dtype]} and "
                                         f"{TYPE_NAMES[weight.dtype]}")
    if numel != 1:
        if not x.shape:
            raise TorchError("RuntimeError", "Not allow zero-dim input tensor.")
        channels = x.shape[1] if len(x.shape) > 1 else 1
        if channels != numel:
            raise TorchError("RuntimeError", "Mismatch of parameter numbers and input channel size. Found parameter "
                                             f"numbers = {numel} and channel size = {channels}.")
    if len(weight.shape) > 1:
        raise TorchError("RuntimeError", "prelu: Expected `weight` to be a scalar or 1D tensor, but got: ndim = "
                                         f"{len(weight.shape)}")
    if x.dtype not in ("float32", "float64"):
        raise TorchError("NotImplementedError", f'"prelu_cpu" not implemented for \'{TYPE_NAMES[x.dtype]}\'')
    if len(x.shape) != len(weight.shape):
        shape = [1] * len(x.shape)
        if len(x.shape) > 1:
            shape[1] = numel
        weight = reshape(rt, weight, tuple(shape), loc)
    return rt.apply("_prelu_kernel", [x, weight], None, loc)


def lower_glu(rt, a, loc):
    """torch/nn/functional.py's glu: a 0-d input refused, then ``torch._C._nn.glu(input, dim)``."""
    from adjoint.engine.bindings.signature import dim_index
    x = a["input"]
    if not x.shape:
        raise TorchError("RuntimeError", "glu does not support scalars because halving size must be even")
    d = dim_index(int(a["dim"]), len(x.shape), loc)
    if x.shape[d] % 2:
        raise TorchError("RuntimeError", f"Halving dimension must be even, but dimension {d} is size {x.shape[d]}")
    if x.dtype not in ("float32", "float64"):
        raise TorchError("NotImplementedError", f'"glu_cpu" not implemented for \'{TYPE_NAMES[x.dtype]}\'')
    return rt.apply("glu", [x], d, loc)


def lower_softmin(rt, a, loc):
    """``(-input).softmax(dim)``, the implicit dim (with its warning) chosen first."""
    from adjoint.engine.bindings.activations import implicit_softmax_dim, softmax_dim
    from adjoint.engine.bindings.core import neg
    x = a["input"]
    if a["dim"] is None:
        from adjoint.engine import warns
        warns.warn(rt, "UserWarning", warns.implicit_dim("softmin"))
        d = implicit_softmax_dim(len(x.shape))
    else:
        d = softmax_dim(x, a["dim"], loc, "softmin")
    return rt.apply("softmax", [neg(rt, x, loc)], d, loc)


FUNCTIONS = (
    Function("relu6", (_IN, _INPLACE), _lower("hardtanh", RELU6_BOUNDS), where="function",
             doc="hardtanh(input, 0, 6): HardtanhBackward0 (saves self; in place a clone of self)"),
    Function("hardswish", (_IN, _INPLACE), _lower("hardswish", None), where="function",
             doc="HardswishBackward0 (saves self; in place a clone of self)"),
    Function("mish", (_IN, _INPLACE), _lower("mish", None), where="function",
             doc="MishBackward0 (saves self; in place a clone of self)"),
    Function("softsign", (_IN,), lower_softsign, where="function",
             doc="input / (input.abs() + 1): AbsBackward0, AddBackward0, DivBackward0"),
    Function("tanhshrink", (_IN,), lower_tanhshrink, where="function",
             doc="input - input.tanh(): TanhBackward0, SubBackward0"),
    Function("prelu", (_IN, Param("weight", "tensor")), lambda rt, a, loc: prelu(rt, a["input"], a["weight"], loc),
             doc="at::prelu: the weight reshaped to broadcast over dim 1 (ViewBackward0) when the ranks differ, then "
                 "PreluKernelBackward0 (saves self, weight)"),
    Function("glu", (_IN, Param("dim", "int", -1)), lower_glu, where="function",
             doc="GluBackward0 (saves self): a * sigmoid(b), the halves of dim"),
    Function("softmin", (_IN, Param("dim", "int", None)), lower_softmin, where="function",
             doc="(-input).softmax(dim): NegBackward0, SoftmaxBackward0 (saves the result)"),
)
