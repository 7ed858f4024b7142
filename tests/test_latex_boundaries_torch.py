"""The LaTeX document's module boundaries say why a ``grad_input`` is None as PyTorch has it:
"does not require grad" only for an input whose ``requires_grad`` is False in torch; an input
that requires grad but that no gradient reaches (the module ran under ``no_grad`` /
``set_grad_enabled(False)``, or detached it) is said to get no gradient from the output. The
facts (``requires_grad``, what the full backward hook is handed) come from real torch here."""

from __future__ import annotations

import os

from click.testing import CliRunner
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402
from adjoint.cli import main  # noqa: E402
from adjoint.render.latex import render_document  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SGE = os.path.join(ROOT, "tests", "data", "regressions", "set_grad_enabled_blocks.yaml")
DETACHED = os.path.join(ROOT, "tests", "data", "regressions", "boundary_input_requires_grad_but_gets_none.yaml")


def _boundary(tex: str, module: str) -> str:
    part = tex.split("\\subsection{Module boundaries}")[1].split("\\subsection{", 1)[0]
    return part.split("\\textbf{" + module + "}")[1].split("\\end{align*}")[0]


def test_backbone_under_set_grad_enabled_false():
    x = torch.tensor([[1.0, 2.0], [3.0, -1.0]], requires_grad=True, dtype=torch.float64)
    backbone = torch.nn.Linear(2, 2).double()
    with torch.set_grad_enabled(False):
        h = backbone(x)
    assert x.requires_grad and not h.requires_grad        # the backbone's input requires grad, its output not
    tex = render_document(adjoint.load(SGE).solve())
    backbone_part = _boundary(tex, "backbone")
    assert "does not require grad" not in backbone_part
    assert "no gradient reaches it from the output" in backbone_part
    assert "x_{1}\\text{ does not require grad" in _boundary(tex, "head")   # h: requires_grad False in torch
    loss = (torch.nn.Linear(2, 1).double()(h) * (x * h).sum()).pow(2).sum()
    loss.backward()
    assert backbone.weight.grad is None                    # it influences the loss, but no node recorded that
    block = tex.split("\\subsubsection*{\\texttt{backbone.\\allowbreak{}weight.\\allowbreak{}grad}}")[1]
    assert "recorded no node for its use" in block.split("\\subsubsection*")[0]


def test_input_detached_inside_the_module():
    class Detaching(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.k = torch.nn.Parameter(torch.tensor([2.0, 1.0], dtype=torch.float64))

        def forward(self, u):
            return u.detach() * self.k

    seen = []
    m = Detaching()
    m.register_full_backward_hook(lambda mod, gi, go: seen.append(gi))
    x = torch.tensor([1.5, -2.0], requires_grad=True, dtype=torch.float64)
    w = torch.tensor([0.5, 3.0], requires_grad=True, dtype=torch.float64)
    u = x * w
    out = m(u)
    (out * w).sum().backward()
    assert u.requires_grad and out.requires_grad and seen == [] and x.grad is None
    assert m.k.grad.tolist() == [0.375, -18.0] and w.grad.tolist() == [1.5, -6.0]
    pred = adjoint.load(DETACHED).solve()
    assert pred.variants[0].hook_calls == []
    tex = render_document(pred)
    part = _boundary(tex, "inner")
    assert "does not require grad" not in part
    assert "no gradient reaches it from the output" in part


def test_console_says_the_same():
    out = CliRunner().invoke(main, ["solve", DETACHED, "--recursion"], env={"COLUMNS": "200"}).stdout
    assert "u <- output of MulBackward0 lambda_in = None (no gradient reaches it from the output)" in out
