"""``adjoint import`` of a model whose file runs ``torch.set_default_dtype(torch.float64)`` (as
people do to train an LSTM in double precision): a ``torch.zeros(B, H)`` initial state in its
forward is float64 there, but the file, read with PyTorch's own default, would make float32, so
import wrote ``torch.zeros(2, 4)`` and refused its own file ("torch.zeros() makes a float32
tensor here ... this run is float64"). The factory calls are now written with the dtype they
made; the file's answer is checked against the user's module run by torch."""

from __future__ import annotations

import textwrap

import numpy as np
from conftest import import_to_file, require_torch, users_module_run

torch = require_torch()

MODEL = textwrap.dedent("""
    import torch
    from torch import nn

    torch.set_default_dtype(torch.float64)


    class CellLoop(nn.Module):
        def __init__(self):
            super().__init__()
            self.cell = nn.LSTMCell(3, 4)
            self.head = nn.Linear(4, 2)

        def forward(self, x):
            h = torch.zeros(x.shape[0], 4)
            c = torch.full((x.shape[0], 4), 0.5)
            outs = []
            for t in range(x.shape[1]):
                h, c = self.cell(x[:, t], (h, c))
                outs.append(h)
            return self.head(torch.stack(outs, 1)) * torch.ones(2)


    def make():
        torch.manual_seed(0)
        return CellLoop()
""")


def test_factories_are_written_with_the_default_dtype_the_users_file_set(tmp_path):
    models = tmp_path / "cellloop.py"
    models.write_text(MODEL)
    try:
        path, text, problem = import_to_file(str(models), "make", ["x=2x3x3"])
        assert "torch.zeros(2, 4, dtype=torch.float64)" in text
        assert "torch.full((2, 4), 0.5, dtype=torch.float64)" in text
        assert "torch.ones(2, dtype=torch.float64)" in text
        v = problem.solve(mode="float64").variants[0]
        assert v.error is None
        loss, grads = users_module_run(problem, str(models), "make")
    finally:
        torch.set_default_dtype(torch.float32)
    assert np.isclose(float(v.loss.floats()), loss.item(), rtol=1e-12)
    for name, g in grads.items():
        assert np.allclose(np.array(v.grads[name].floats()), g.numpy(), rtol=1e-10, atol=1e-14), name
