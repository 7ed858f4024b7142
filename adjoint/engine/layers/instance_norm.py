"""``nn.InstanceNorm1d`` / ``2d`` / ``3d``: ``_InstanceNorm.forward`` of PyTorch 2.13
(torch/nn/modules/instancenorm.py), calling ``F.instance_norm``
(:mod:`adjoint.engine.bindings.instance_norm`).

In order: ``_check_input_dim`` (ValueError "expected 3D or 4D input (got 2D input)" for
InstanceNorm2d: a batched or an unbatched input); the feature dim (1 batched, 0 unbatched) of
another size than ``num_features`` is a ValueError with ``affine``, else a UserWarning on every
call; an unbatched input runs ``unsqueeze(0)``, the instance norm, ``squeeze(0)``
(``UnsqueezeBackward0`` ... ``SqueezeBackward1``). The input's own statistics are used in
training mode and whenever the running ones are not tracked; ``momentum=None`` passes 0. Unlike
BatchNorm, the forward never bumps ``num_batches_tracked``: the running statistics move by the
``copy_`` at the end of ``at::instance_norm`` (one version each per training call).
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.engine import warns
from adjoint.engine.bindings.instance_norm import instance_norm
from adjoint.engine.torch_errors import TorchError


def _instance_norm(rank: int):
    """The forward of InstanceNorm{rank}d, whose unbatched input has ``rank + 1`` dims."""
    no_batch = rank + 1

    def forward(c):
        rt, x = c.rt, c.args[0]
        nd = len(x.shape)
        if nd not in (no_batch, no_batch + 1):
            raise TorchError("ValueError", f"expected {no_batch}D or {no_batch + 1}D input (got {nd}D input)")
        feature_dim = nd - no_batch
        n = c.arg("num_features")
        if x.shape[feature_dim] != n:
            if c.arg("affine"):
                raise TorchError("ValueError", f"expected input's size at dim={feature_dim} to match num_features "
                                               f"({n}), but got: {x.shape[feature_dim]}.")
            warns.warn(rt, "UserWarning", f"input's size at dim={feature_dim} does not match num_features. You can "
                                          "silence this warning by not passing in num_features, which is not used "
                                          "because affine=False")
        if nd == no_batch:
            x = rt.apply("unsqueeze", [x], 0, c.loc)
        momentum = c.arg("momentum")
        tracking = c.arg("track_running_stats")
        out = instance_norm(rt, x, c.buffers.get("running_mean"), c.buffers.get("running_var"),
                            c.params.get("weight"), c.params.get("bias"), c.training or not tracking,
                            Fraction(0) if momentum is None else momentum, c.arg("eps"), c.loc)
        if nd == no_batch:
            out = rt.apply("squeeze_dim", [out], (0,), c.loc)
        return out
    forward.__name__ = f"instance_norm{rank}d_forward"
    return forward


FORWARDS = {f"InstanceNorm{rank}d": _instance_norm(rank) for rank in (1, 2, 3)}
