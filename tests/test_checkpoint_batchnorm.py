"""A training-mode batch norm inside ``torch.utils.checkpoint``: the backward's recomputation
runs it again, so its running statistics move twice per step. With ``use_reentrant=False`` and
``early_stop`` the recomputation stops at the pack of the batch norm's last saved output
(``save_invstd``); ``native_batch_norm``'s kernel has written the statistics before that pack,
so they move anyway (adjoint wrote them after the packs, and the stop skipped the write).
The expected statistics come from the torch run here, never from adjoint.
tests/data/regressions/checkpoint_batchnorm_running_stats_recomputed.yaml."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import require_torch

torch = require_torch()
import torch.nn as nn  # noqa: E402

import adjoint  # noqa: E402

FILE = Path(__file__).parent / "data" / "regressions" / "checkpoint_batchnorm_running_stats_recomputed.yaml"
BUFFERS = [f"{m}.{b}" for m in ("a.bn", "b", "c", "seq.bn", "seq.bn2")
           for b in ("running_mean", "running_var", "num_batches_tracked")]


def _torch(dtype):
    """The file's model in plain torch, steps forward, backward, forward: its buffers after."""
    from torch.utils.checkpoint import checkpoint, checkpoint_sequential
    torch.set_default_dtype(dtype)
    try:
        lin = nn.Linear(2, 2)
        a = nn.Sequential()
        a.lin, a.bn = lin, nn.BatchNorm1d(2)
        b, c = nn.BatchNorm1d(2, momentum=0.5), nn.BatchNorm1d(2)
        seq = nn.Sequential()
        seq.lin, seq.bn, seq.act, seq.bn2 = nn.Linear(2, 2), nn.BatchNorm1d(2, momentum=0.25), nn.Tanh(), \
            nn.BatchNorm1d(2)
    finally:
        torch.set_default_dtype(torch.float32)
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[0.5, -0.25], [0.25, 0.5]])), lin.bias.copy_(torch.tensor([0, 0.5]))
        seq.lin.weight.copy_(torch.tensor([[1, -0.5], [0.5, 1]])), seq.lin.bias.copy_(torch.tensor([0.25, 0]))
    x = torch.tensor([[1, -2], [0.5, 0.25], [2, 1]], dtype=dtype, requires_grad=True)

    def forward():
        h = checkpoint(a, x, use_reentrant=False)
        g = checkpoint(b, h * h, use_reentrant=False, early_stop=False)
        r = checkpoint(c, g + x, use_reentrant=True)
        return checkpoint_sequential(seq, 2, r, use_reentrant=False)

    y = forward()
    (y * y).sum().backward()
    forward()
    mods = {"a.bn": a.bn, "b": b, "c": c, "seq.bn": seq.bn, "seq.bn2": seq.bn2}
    return {name: getattr(mods[name.rsplit(".", 1)[0]], name.rsplit(".", 1)[1]) for name in BUFFERS}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_running_statistics_move_in_the_recomputation_as_in_torch(dtype):
    text = FILE.read_text()
    if dtype == "float64":
        text = "dtype: float64\n" + text
    values = adjoint.loads(text).solve().variants[0].to_json()["values"]
    expected = _torch(getattr(torch, dtype))
    tol = 1e-6 if dtype == "float32" else 1e-13
    for name in BUFFERS:
        got = np.asarray(values[name]["value"], dtype=float)
        want = expected[name].detach().double().numpy()
        assert np.allclose(got, want, rtol=tol, atol=tol), (name, got, want)
    # the statistics did move in the recomputations: three updates, not two
    assert expected["a.bn.num_batches_tracked"].item() == 3
    assert not np.allclose(expected["a.bn.running_mean"].numpy(),
                           0.19 * np.asarray([0.6458333, 0.6666667]), atol=1e-4)
