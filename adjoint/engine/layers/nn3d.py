"""``nn.Conv3d``, ``nn.BatchNorm3d``, ``nn.MaxPool3d``, ``nn.AvgPool3d``, ``nn.AdaptiveAvgPool3d``,
``nn.AdaptiveMaxPool3d``: each forward as PyTorch's own (torch/nn/modules/conv.py, batchnorm.py,
pooling.py) calling ``F.conv3d``, ``F.batch_norm`` (``_check_input_dim``: a 5-D input only),
``F.max_pool3d``, ``F.avg_pool3d``, ``F.adaptive_avg_pool3d``, ``F.adaptive_max_pool3d``:
:mod:`adjoint.engine.layers.nn`'s forwards with the spatial rank 3."""

from __future__ import annotations

from adjoint.engine.layers.nn import (_batch_norm, _conv, adaptive_avg_pool_forward, adaptive_max_pool_forward,
                                      avg_pool_forward, max_pool_forward)

FORWARDS = {
    "Conv3d": _conv(3),
    "BatchNorm3d": _batch_norm((5,)),
    "MaxPool3d": max_pool_forward(3),
    "AvgPool3d": avg_pool_forward(3),
    "AdaptiveAvgPool3d": adaptive_avg_pool_forward(3),
    "AdaptiveMaxPool3d": adaptive_max_pool_forward(3),
}
