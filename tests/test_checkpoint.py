"""``checkpoint(CHILD, *args, ...)`` (torch.utils.checkpoint) without torch: the answer's call
markers derived by hand from PyTorch 2.13's torch/utils/checkpoint.py, the document's words,
and the refusals. Agreement with real torch is tests/test_differential.py's (the regression
files tests/data/regressions/checkpoint_*.yaml) and tests/test_pytorch_ports.py's."""

from __future__ import annotations

import os

import pytest

import adjoint
from adjoint.format.errors import ProblemError
from adjoint.render.latex import render_document

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REGIONS = os.path.join(ROOT, "tests", "data", "regressions", "checkpoint_regions.yaml")


_SOLVED: dict = {}


def _solved(path: str):
    """Every variant of ``path`` solved once for the whole module."""
    if path not in _SOLVED:
        _SOLVED[path] = adjoint.load(path).solve()
    return _SOLVED[path]


def _calls(path: str, variant: str) -> tuple[dict, list]:
    v = _solved(path).to_json()["variants"][variant]
    return v, [(c["label"], c.get("recomputed", False), c.get("reentrant", 0)) for c in v["hook_calls"]]


def test_recomputed_and_reentrant_calls_where_pytorch_makes_them():
    """f: non-reentrant, early_stop (Linear, Tanh, * 2); g: non-reentrant, early_stop=False;
    k: reentrant. The backward reaches k first: CheckpointFunctionBackward recomputes k (its
    Linear's forward hook) and runs a reentrant backward (the Tanh's full backward hook, the
    weight's tensor hook: depth 1); then g's first unpack recomputes all of g (every forward
    hook); then f's recomputes f up to tanh, which saves the last tensor (`* 2` saves none):
    f.act's forward hook does not run again; f.h's tensor hook fires on the original graph."""
    _, calls = _calls(REGIONS, "observe")
    assert calls == [
        ("forward_pre@f", False, 0), ("forward@f.lin", False, 0), ("forward@f.act", False, 0),
        ("forward_pre@g.lin", False, 0), ("forward@g.act", False, 0), ("forward@g", False, 0),
        ("forward@k.lin", False, 0),
        ("forward@k.lin", True, 0), ("full_backward@k.act", False, 1), ("hook@k.lin.weight", False, 1),
        ("forward_pre@g.lin", True, 0), ("forward@g.act", True, 0), ("forward@g", True, 0),
        ("forward_pre@f", True, 0), ("forward@f.lin", True, 0),
        ("hook@f.h", False, 0),
    ]


def test_each_backward_recomputes_and_grad_refuses_the_reentrant_variant():
    """retain_graph: the second backward is a new graph task, so every region is recomputed
    again; autograd.grad: CheckpointFunction's _is_checkpoint_valid() is False."""
    v, calls = _calls(REGIONS, "twice")
    recomputed = [label for label, again, _ in calls if again]
    assert recomputed == ["forward@k.lin", "forward_pre@g.lin", "forward@g.act", "forward@g", "forward_pre@f",
                          "forward@f.lin"] * 2
    v, calls = _calls(REGIONS, "grad")
    assert v["error"]["type"] == "RuntimeError"
    assert v["error"]["message"].startswith("When use_reentrant=True, torch.utils.checkpoint is incompatible with "
                                            ".grad()")
    assert not any(again for _, again, _ in calls)


def test_warnings_of_checkpoint_itself():
    path = os.path.join(ROOT, "tests", "data", "regressions", "checkpoint_warnings.yaml")
    v = _solved(path).to_json()["variants"]["observe"]
    messages = [w["message"] for w in v["warnings"]]
    assert messages[0].startswith("torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly.")
    assert messages[1] == "None of the inputs have requires_grad=True. Gradients will be None"
    assert v["grads"]["f.lin.weight"] is None   # the region ran under no_grad and has no node


def test_document_says_which_region_is_recomputed():
    text = render_document(_solved(REGIONS))
    assert "called through \\texttt{checkpoint} (non-reentrant, early\\_stop=True" in text
    assert "called through \\texttt{checkpoint} (non-reentrant, early\\_stop=False" in text
    assert "called through \\texttt{checkpoint} (reentrant" in text
    assert "This call is made by \\texttt{checkpoint}'s recomputation" in text
    assert "It runs in a reentrant backward (depth 1)" in text


_BASE = """
name: refused
inputs: {{x: {{value: [1, 2], requires_grad: true}}}}
model:
  children:
    f: {{type: Tanh}}
  forward: "{forward}"
{more}
"""


@pytest.mark.parametrize("forward, more, message", [
    ("checkpoint(g, x, use_reentrant=False)", "", "checkpoint's function 'g' is not a child module of 'model'"),
    ("checkpoint(f, x, use_reentrant=False, debug=True)", "", "checkpoint(...) keyword 'debug' is not modelled"),
    ("checkpoint(f, x, use_reentrant=1)", "", "checkpoint(...)'s use_reentrant must be True or False"),
    ("checkpoint(f, x, use_reentrant=False)", "hooks: [{saved_tensors: {pack: x, unpack: x}}]",
     "checkpoint(..., use_reentrant=False) inside the scope of saved_tensors hooks is not modelled yet"),
])
def test_refusals_name_what_is_not_modelled(forward, more, message):
    with pytest.raises(ProblemError) as info:
        adjoint.loads(_BASE.format(forward=forward, more=more)).solve()
    assert message in str(info.value)


def test_report_marks_recomputed_and_reentrant_calls():
    from click.testing import CliRunner

    from adjoint.cli import main
    out = CliRunner().invoke(main, ["solve", REGIONS, "--variant", "observe"]).output
    text = " ".join(out.split())   # the report wraps long lines
    assert "#8 forward on module k.lin [recomputed by checkpoint]" in text
    assert "#9 full_backward on module k.act at BackwardHookFunctionBackward [reentrant backward, depth 1]" in text
