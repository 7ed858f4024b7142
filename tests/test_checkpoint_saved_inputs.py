"""A non-reentrant checkpoint keeps its region's tensor arguments as saved tensors
(``_NoopSaveInputs``: ``ctx.save_for_backward(*tensors)``), and the recomputation reads them back
through ``input_saver.grad_fn.saved_tensors``, which checks each one's version. An argument written
in place after ``checkpoint`` saved it (by the caller, or by the region's own forward) is then
PyTorch's version error at the first unpack of the backward; adjoint recomputed from the written
values and answered with gradients (found by a user trial). The messages come from real torch,
run here on the same model.
"""

from __future__ import annotations

import textwrap

import pytest
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402
from gen import check  # noqa: E402

HEAD = """\
name: saved_inputs
dtype: float64
inputs:
  x: {value: [1, -2], requires_grad: true}
  c: [0.5, 0.25]
model:
  inputs: [x, c]
  children:
    f: {params: {w: [0.5, 3]}, forward: "(x * w).tanh()"}
    g:
      params: {w: [0.5, 3]}
      forward: |
        x.mul_(2)
        return (x * w).tanh()
  forward: |
"""


class F(torch.nn.Module):
    def __init__(self, write: bool = False):
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor([0.5, 3.0], dtype=torch.float64))
        self.write = write

    def forward(self, x):
        if self.write:
            x.mul_(2)
        return (x * self.w).tanh()


def _torch(case: str):
    """The same model in plain torch: the error's message, or None when the backward runs."""
    from torch.utils.checkpoint import checkpoint
    x = torch.tensor([1.0, -2.0], dtype=torch.float64, requires_grad=True)
    c = torch.tensor([0.5, 0.25], dtype=torch.float64)
    f, g = F(), F(write=True)
    if case == "written_after":
        h = x * 2
        z = checkpoint(f, h, use_reentrant=False)
        h.mul_(3)
        y = z.sum() + h.sum()
    elif case == "written_inside":
        y = checkpoint(g, x * 1, use_reentrant=False).sum()
    elif case == "plain_input_written_after":
        z = checkpoint(f, c, use_reentrant=False)
        c.mul_(3)
        y = z.sum() + (x * x).sum()
    else:   # the output written in place: nothing of the region's saved tensors changed
        z = checkpoint(f, x * 2, use_reentrant=False)
        z.mul_(3)
        y = z.sum()
    try:
        y.backward()
    except RuntimeError as exc:
        return str(exc)
    return None


FORWARDS = {
    "written_after": "h = x * 2\nz = checkpoint(f, h, use_reentrant=False)\nh.mul_(3)\nreturn z.sum() + h.sum()",
    "written_inside": "return checkpoint(g, x * 1, use_reentrant=False).sum()",
    "plain_input_written_after": "z = checkpoint(f, c, use_reentrant=False)\nc.mul_(3)\nreturn z.sum() + (x * x).sum()",
    "output_written_after": "z = checkpoint(f, x * 2, use_reentrant=False)\nz.mul_(3)\nreturn z.sum()",
}


def _text(case: str) -> str:
    return HEAD + textwrap.indent(FORWARDS[case], "    ") + "\n"


@pytest.mark.parametrize("case", list(FORWARDS))
def test_the_saved_arguments_version_decides_as_in_torch(case):
    message = _torch(case)
    answer = adjoint.loads(_text(case)).solve().to_json()["variants"]["default"]
    if message is None:
        assert "error" not in answer or answer["error"] is None
        assert answer["grads"]["f.w"] is not None
    else:
        assert "modified by an inplace operation" in message
        assert (answer["error"]["type"], answer["error"]["message"], answer["error"]["during"]) == \
            ("RuntimeError", message, "backward")


@pytest.mark.parametrize("case", list(FORWARDS))
def test_the_saved_arguments_verify_against_torch(case):
    outcome = check(_text(case), timeout=60)
    assert outcome.ok, outcome.report()
