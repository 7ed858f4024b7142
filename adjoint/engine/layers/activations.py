"""Built-in modules of the activations family: each forward as PyTorch's own.

LeakyReLU, PReLU, GLU, Softsign, Tanhshrink, Softmin, GELU, SiLU, ELU, Softplus, LogSigmoid, SELU, CELU, Hardsigmoid, Softshrink, Hardshrink,
Threshold, Softmax, LogSoftmax (torch/nn/modules/activation.py)
call the functional form with the module's arguments, ``inplace`` included, so the nodes are
the functions' (LeakyReluBackward1 for ``LeakyReLU(inplace=True)``, ...). Flatten and
Unflatten (torch/nn/modules/flatten.py) call ``input.flatten`` / ``input.unflatten``.

``Softmax()`` / ``LogSoftmax()`` without ``dim`` run F.softmax's legacy implicit dim (0 for
0-, 1- and 3-d inputs, else 1), as PyTorch does (with a deprecation warning).
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.engine.bindings import call_function
from adjoint.engine.bindings.activations import implicit_softmax_dim


def _arg(c, name: str):
    """A constructor argument as the expression language's values (ints as exact numbers)."""
    v = c.arg(name)
    if isinstance(v, int) and not isinstance(v, bool):
        return Fraction(v)
    if isinstance(v, tuple):
        return tuple(Fraction(i) for i in v)
    return v


def _call(c, name: str, *args, **kwargs):
    return call_function(c.rt, name, [c.args[0], *args], kwargs, c.module.loc)


def leaky_relu_forward(c):
    return _call(c, "leaky_relu", _arg(c, "negative_slope"), _arg(c, "inplace"))


def prelu_forward(c):
    """nn.PReLU (torch/nn/modules/activation.py): ``F.prelu(input, self.weight)``."""
    return _call(c, "prelu", c.params.get("weight"))


def glu_forward(c):
    """nn.GLU: ``F.glu(input, self.dim)``."""
    return _call(c, "glu", _arg(c, "dim"))


def softsign_forward(c):
    return _call(c, "softsign")


def tanhshrink_forward(c):
    return _call(c, "tanhshrink")


def softmin_forward(c):
    """nn.Softmin: ``F.softmin(input, self.dim, _stacklevel=5)`` (None: F's implicit dim, warned)."""
    return _call(c, "softmin", _arg(c, "dim"))


def pixel_shuffle_forward(c):
    """nn.PixelShuffle: ``F.pixel_shuffle(input, self.upscale_factor)``."""
    return _call(c, "pixel_shuffle", _arg(c, "upscale_factor"))


def pixel_unshuffle_forward(c):
    return _call(c, "pixel_unshuffle", _arg(c, "downscale_factor"))


def gelu_forward(c):
    return _call(c, "gelu", approximate=_arg(c, "approximate"))


def silu_forward(c):
    return _call(c, "silu", inplace=_arg(c, "inplace"))


def elu_forward(c):
    return _call(c, "elu", _arg(c, "alpha"), _arg(c, "inplace"))


def softplus_forward(c):
    return _call(c, "softplus", _arg(c, "beta"), _arg(c, "threshold"))


def logsigmoid_forward(c):
    return _call(c, "logsigmoid")


def selu_forward(c):
    return _call(c, "selu", _arg(c, "inplace"))


def celu_forward(c):
    return _call(c, "celu", _arg(c, "alpha"), _arg(c, "inplace"))


def hardsigmoid_forward(c):
    return _call(c, "hardsigmoid", _arg(c, "inplace"))


def softshrink_forward(c):
    return _call(c, "softshrink", _arg(c, "lambd"))


def hardshrink_forward(c):
    return _call(c, "hardshrink", _arg(c, "lambd"))


def threshold_forward(c):
    return _call(c, "threshold", _arg(c, "threshold"), _arg(c, "value"), _arg(c, "inplace"))


def _softmax(name: str):
    def forward(c):
        dim = _arg(c, "dim")
        if dim is None:
            from adjoint.engine import warns
            warns.warn(c.rt, "UserWarning", warns.implicit_dim(name))
            dim = Fraction(implicit_softmax_dim(len(c.args[0].shape)))
        return _call(c, name, dim)
    forward.__name__ = f"{name}_forward"
    return forward


def flatten_forward(c):
    return _call(c, "flatten", _arg(c, "start_dim"), _arg(c, "end_dim"))


def unflatten_forward(c):
    return _call(c, "unflatten", _arg(c, "dim"), _arg(c, "unflattened_size"))


def unfold_forward(c):
    """nn.Unfold (torch/nn/modules/fold.py): ``F.unfold(input, self.kernel_size, self.dilation,
    self.padding, self.stride)``."""
    return _call(c, "unfold", *(_arg(c, n) for n in ("kernel_size", "dilation", "padding", "stride")))


def fold_forward(c):
    """nn.Fold: ``F.fold(input, self.output_size, self.kernel_size, self.dilation, self.padding,
    self.stride)``."""
    return _call(c, "fold", *(_arg(c, n) for n in ("output_size", "kernel_size", "dilation", "padding", "stride")))


FORWARDS = {
    "Unfold": unfold_forward,
    "Fold": fold_forward,
    "LeakyReLU": leaky_relu_forward,
    "PReLU": prelu_forward,
    "GLU": glu_forward,
    "Softsign": softsign_forward,
    "Tanhshrink": tanhshrink_forward,
    "Softmin": softmin_forward,
    "PixelShuffle": pixel_shuffle_forward,
    "PixelUnshuffle": pixel_unshuffle_forward,
    "GELU": gelu_forward,
    "SiLU": silu_forward,
    "ELU": elu_forward,
    "Softplus": softplus_forward,
    "LogSigmoid": logsigmoid_forward,
    "SELU": selu_forward,
    "CELU": celu_forward,
    "Hardsigmoid": hardsigmoid_forward,
    "Softshrink": softshrink_forward,
    "Hardshrink": hardshrink_forward,
    "Threshold": threshold_forward,
    "Softmax": _softmax("softmax"),
    "LogSoftmax": _softmax("log_softmax"),
    "Flatten": flatten_forward,
    "Unflatten": unflatten_forward,
}
