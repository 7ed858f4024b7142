"""The report's explanations and the adjoint recursion, held to what PyTorch does (a trial read
every line of the report against torch and found these claims wrong): the module's
grad_output where a later in-place op rewrote its output, J^T of a module that wrote its input
in place, None (not zeros) where no gradient reaches an input, every output of a tuple, and the
reasons given for a None gradient, a legacy hook and a hook that never fired. Values are from
torch run here or derived by hand in the docstrings."""

from __future__ import annotations

import os

import pytest
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402
from adjoint.render.console import render  # noqa: E402
from adjoint.render.report import Options  # noqa: E402

HERE = os.path.join(os.path.dirname(__file__), "data", "explanations")
GUIDED = os.path.join(os.path.dirname(__file__), "data", "regressions",
                      "guided_backprop_and_clipping_on_a_sequential.yaml")


def _text(name: str, recursion: bool | None = None) -> str:
    opts = Options(recursion=recursion)
    return " ".join(render(adjoint.load(os.path.join(HERE, name)).solve(), opts, width=200).split())


def _adjoints(path: str, variant: str | None = None) -> dict:
    j = adjoint.load(path).solve().to_json()["variants"]
    return j[variant or next(iter(j))]["adjoints"]


def test_grad_output_is_where_the_module_returned_its_output():
    """net.0's output is written by the in-place ReLU after it: its gradient as net.0 returned it
    is what a hook registered on it then is handed (the ReLU's mask applied), not the ReLU's
    own grad_output (adjoint said the latter)."""
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(inplace=True), torch.nn.Linear(4, 2)).double()
    with torch.no_grad():
        net[0].weight.copy_(torch.tensor([[1, -2, 0.5], [0.5, 1, -1], [-1, 0.25, 2], [0.75, -0.5, 1]]))
        net[0].bias.copy_(torch.tensor([0.25, -3, 0.5, 0]))
        net[2].weight.copy_(torch.tensor([[1, -1, 0.5, 2], [0.5, 0.25, -1, 1]]))
        net[2].bias.copy_(torch.tensor([0., 1]))
    seen = []
    net[0].register_forward_hook(lambda m, i, o: (o.register_hook(lambda g: seen.append(g.tolist())), None)[1])
    x = torch.tensor([[0.5, -1, 2], [2, 0.25, -0.5]], dtype=torch.float64, requires_grad=True)
    (net(x) ** 2).sum().backward()
    got = _adjoints(GUIDED, "legacy")["net.0"]["grad_output"][0]["value"]
    assert got == seen[0] and 0.0 in got[0]


def test_j_transpose_of_a_module_that_writes_its_input_in_place():
    """m is ReLU(inplace=True) after an identity Linear, x = [[1.25, -4.5]]: J^T [1, 1] is the
    ReLU's mask, [1, 0] (it said [1, 1], reading the written tensor's new history)."""
    text = _text("inplace_relu_after_linear.yaml", recursion=True)
    assert "m [ReLU] lambda_out = [[1, 1]] input <- lin lambda_in = [[1, 0]]" in text
    assert _adjoints(os.path.join(HERE, "inplace_relu_after_linear.yaml"))["m"]["grad_input"][0]["value"] == [[1.0, 0.0]]


def test_f_alone_multiplies_by_six():
    """f does x.mul_(2); return x * 3: J^T [12, -24] = 6 * [12, -24] = [72, -144]."""
    assert "f [custom] lambda_out = [12, -24] x <- t lambda_in = [72, -144]" in \
        _text("f7_inplace_on_module_input.yaml", recursion=True)


def test_an_input_no_gradient_reaches_is_none_not_zeros():
    """f(a, b) = a * b.detach(): PyTorch computes no gradient for c (autograd.grad with
    allow_unused gives None), and the recursion said [0, 0]."""
    x = torch.tensor([1., -2], requires_grad=True)
    c = torch.tensor([0.5, 2], requires_grad=True)
    assert torch.autograd.grad((x * c.detach()).sum(), [x, c], allow_unused=True)[1] is None
    text = _text("f2_no_path_input.yaml", recursion=True)
    assert "b <- c lambda_in = None (no gradient reaches it from the output)" in text
    assert "[0, 0]" not in text


def test_every_output_of_a_tuple_has_its_multiplier():
    """sp returns x.chunk(2) and only the second piece is used: a full hook on sp is handed
    grad_output (None, [6, 8]); the recursion said no gradient reached sp."""
    text = _text("f9_tuple_output.yaml", recursion=True)
    assert "sp [custom] lambda_out[0] = None (no gradient reaches it) lambda_out[1] = [6, 8]" in text


def test_a_none_gradient_of_an_unused_output_is_explained_as_such():
    a = torch.tensor([1., 2], requires_grad=True)
    a0, a1 = (a * 1).unbind()
    got = []
    a0.register_hook(lambda g: got.append(g))
    (a1 * 3).backward()
    assert got == [None]
    text = _text("m1_unbind_none_hook.yaml")
    assert "UnbindBackward0 has 2 outputs and runs because another of them got a gradient" in text
    assert "an earlier hook returned None" not in text


@pytest.mark.parametrize("name, said, not_said", [
    ("f4_legacy_single_op.yaml", "which here are the module's inputs: the module ran that one node on them",
     "not the module's inputs"),
    ("f8_legacy_first_output.yaml", "only MulBackward0, the grad_fn of its first output, is hooked", "the last"),
    ("f5_legacy_identity_leaf.yaml", "its module's output has no grad_fn (a leaf it returns as it is)",
     "no reason recorded"),
    ("f6_full_hook_input_detached.yaml", "its input-side BackwardHookFunctionBackward never ran",
     "no reason recorded"),
    ("f3_multi_grad.yaml", "none of its tensors was reached by the backward", "not every one"),
])
def test_reasons(name, said, not_said):
    text = _text(name)
    assert said in text and not_said not in text


def test_an_output_another_output_is_made_from_gets_only_its_outside_gradient():
    """f returns (a, a * a) and only the second is used: a full backward hook on f (whose
    BackwardHookFunction makes each output a tensor of its own) is handed grad_output (None, [1, 1]);
    adjoint gave a's whole gradient, the internal use included (found by a sequence-model trial:
    LSTMCell's c, which its h is made from)."""
    class F(torch.nn.Module):
        def forward(self, x):
            a = x * 2
            return a, a * a
    f = F()
    seen = []
    f.register_full_backward_hook(lambda m, gi, go: seen.append([None if g is None else g.tolist() for g in go]))
    x = torch.tensor([1.0, -0.5], requires_grad=True)
    a, b = f(x)
    b.sum().backward()
    got = _adjoints(os.path.join(HERE, "output_made_from_another_output.yaml"))["f"]["grad_output"]
    assert [None if g is None else g["value"] for g in got] == seen[0] == [None, [1.0, 1.0]]
