"""``nn.Conv3d``, ``nn.MaxPool3d``, ``nn.AvgPool3d``, ``nn.AdaptiveAvgPool3d``: each forward as
PyTorch's own (torch/nn/modules/conv.py, pooling.py) calling ``F.conv3d``, ``F.max_pool3d``,
``F.avg_pool3d``, ``F.adaptive_avg_pool3d`` (:mod:`adjoint.engine.bindings.conv3d`)."""

from __future__ import annotations

from adjoint.engine.bindings.conv3d import adaptive_avg_pool3d, avg_pool3d, max_pool3d
from adjoint.engine.layers.nn import _conv


def max_pool3d_forward(c):
    return max_pool3d(c.rt, c.args[0], c.arg("kernel_size"), c.arg("stride"), c.arg("padding"), c.arg("dilation"),
                      c.arg("ceil_mode"), c.arg("return_indices"), c.loc)


def avg_pool3d_forward(c):
    return avg_pool3d(c.rt, c.args[0], c.arg("kernel_size"), c.arg("stride"), c.arg("padding"), c.arg("ceil_mode"),
                      c.arg("count_include_pad"), c.arg("divisor_override"), c.loc)


def adaptive_avg_pool3d_forward(c):
    size = c.arg("output_size")
    return adaptive_avg_pool3d(c.rt, c.args[0], tuple(size) if isinstance(size, (tuple, list)) else size, c.loc)


FORWARDS = {
    "Conv3d": _conv(3),
    "MaxPool3d": max_pool3d_forward,
    "AvgPool3d": avg_pool3d_forward,
    "AdaptiveAvgPool3d": adaptive_avg_pool3d_forward,
}
