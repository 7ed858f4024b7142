"""A float tensor of another dtype than the problem's (a pack hook's ``x.double()`` in a float32
problem) reads as its decimals, with its dtype, in the report and the notebook HTML: as the
JSON answer and the LaTeX document have it, and as torch hands it (checked here), not truncated
to integers."""

from __future__ import annotations

import os

from click.testing import CliRunner
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402
from adjoint.cli import main  # noqa: E402
from adjoint.render.html import prediction_html  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PATH = os.path.join(ROOT, "tests", "data", "regressions",
                    "saved_tensor_hook_handed_what_pack_returned_of_another_dtype.yaml")


def _torch_packs():
    packed, unpacked = [], []

    def pack(x):
        packed.append((x.tolist(), x.double()))
        return x.double()

    def unpack(x):
        unpacked.append((x.dtype, x.tolist()))
        return x

    x = torch.tensor([0.5, -1.0], requires_grad=True)
    w = torch.tensor([2.0, 3.0], requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        h = x * w
        y = (h * h).tanh()
    y.sum().backward()
    return packed, unpacked


def test_float64_values_of_a_float32_problem_are_decimals():
    packed, unpacked = _torch_packs()
    assert [p[1].dtype for p in packed] == [torch.float64] * 5
    assert packed[1][1].tolist() == [0.5, -1.0]                       # x, saved by x * w, as pack returned it
    tanh = packed[4][1].tolist()                                      # the tanh result, float64
    assert abs(tanh[0] - 0.7615942) < 1e-6 and unpacked[0][0] == torch.float64
    out = CliRunner().invoke(main, ["solve", PATH, "--variant", "backward"], env={"COLUMNS": "120"}).stdout
    assert "returned  [0.5, -1] (float64)" in out
    assert "returned  [0.7615942, 1] (float64)" in out
    assert "x         [0.7615942, 1] (float64)" in out                 # the unpack is handed that float64 tensor
    assert "[0, -1]" not in out and "[0, 0]" not in out
    html = prediction_html(adjoint.load(PATH).solve())
    assert "[0.5, -1] (float64)" in html and "[0.7615942, 1] (float64)" in html
