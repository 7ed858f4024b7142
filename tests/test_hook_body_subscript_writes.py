"""A hook body's index assignment into a subscript of an expression (``grad[0][:, 0] = 0``,
``grad_input[0][:, 1] = 0``, ``tensor.grad[0] = 0``): the prediction against a plain torch script
written by hand (the torch side runs the same parsed body, so a shared blind spot would pass the
differential test)."""

import numpy as np
import pytest

import adjoint
from adjoint.format.errors import ProblemError

FILE = "tests/data/regressions/hook_body_writes_through_a_subscript_of_an_expression.yaml"


def _script(variant: str):
    """The file's model and hooks as a Python user writes them: (losses, x.grad, W.grad, b.grad), or
    (error type, message)."""
    import torch
    d = torch.float64
    x = torch.tensor([[[0.5, -1.0, 2.0], [0.25, 1.5, -0.5]], [[1.0, 0.5, -2.0], [-1.5, 0.75, 1.0]]], dtype=d,
                     requires_grad=True)
    lin = torch.nn.Linear(3, 2, dtype=d)
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[0.5, 1.0, -1.0], [2.0, -1.0, 0.5]], dtype=d))
        lin.bias.copy_(torch.tensor([0.1, 0.2], dtype=d))

    def full_backward(module, grad_input, grad_output):
        grad_input[0][:, 1] = 0

    def post_accumulate(t):
        t.grad[0] = 0

    def pre_input(module, args):
        args[0][0][1] = 0

    def pre_weight(module, args):
        module.weight[0][1] = 0

    registered = {"full_backward_grad_input": lambda: lin.register_full_backward_hook(full_backward),
                  "post_accumulate_grad": lambda: lin.weight.register_post_accumulate_grad_hook(post_accumulate),
                  "forward_pre_writes_its_input": lambda: lin.register_forward_pre_hook(pre_input),
                  "forward_pre_writes_a_view_of_a_parameter": lambda: lin.register_forward_pre_hook(pre_weight)}
    if variant in registered:
        registered[variant]()
    losses = []
    try:
        for _ in range(2 if variant == "post_accumulate_grad" else 1):
            h = x * 0.5
            k = h * h
            g = lin(h + k)
            y = g.tanh()

            def tensor_hook(grad):
                grad[0][:, 0] = 0

            def augmented(grad):
                grad[1][0] *= 3

            def shares(grad):
                grad[0][:, 2] = 0

            def version(grad):
                h[0][1] = 5

            def value_first(grad):
                grad[5][0] = grad.sum(dim=5)

            def zero_d(grad):
                grad[0][0][0][0] = 1

            on = {"tensor_hook_grad": (h, tensor_hook), "augmented": (h, augmented),
                  "gradient_add_backward_shares": (k, shares), "version_error_later": (g, version),
                  "value_before_target": (h, value_first), "zero_d_index": (g, zero_d)}
            if variant in on:
                on[variant][0].register_hook(on[variant][1])
            loss = (y * y).sum()
            losses.append(loss.item())
            loss.backward()
    except (RuntimeError, IndexError) as e:
        return type(e).__name__, str(e)
    return losses, x.grad.tolist(), lin.weight.grad.tolist(), lin.bias.grad.tolist()


VALUES = ["tensor_hook_grad", "augmented", "full_backward_grad_input", "post_accumulate_grad",
          "gradient_add_backward_shares", "forward_pre_writes_its_input"]
ERRORS = ["version_error_later", "value_before_target", "zero_d_index", "forward_pre_writes_a_view_of_a_parameter"]


@pytest.mark.torch
@pytest.mark.parametrize("variant", VALUES)
def test_writes_match_a_plain_script(variant):
    out = adjoint.load(FILE).solve(variant=variant).variants[0].to_json()
    losses, xgrad, wgrad, bgrad = _script(variant)
    assert "error" not in out
    assert out["loss"]["value"] == pytest.approx(losses[-1], rel=1e-12)
    for name, want in (("x", xgrad), ("lin.weight", wgrad), ("lin.bias", bgrad)):
        np.testing.assert_allclose(out["grads"][name]["value"], want, rtol=1e-12, atol=1e-12)


@pytest.mark.torch
def test_the_writes_change_what_flows_on():
    """Each written gradient differs from the run without the hook (a test that could not fail
    would compare two equal runs)."""
    plain = _script("none")
    for variant in VALUES:
        assert _script(variant)[1:] != plain[1:], variant


@pytest.mark.torch
@pytest.mark.parametrize("variant", ERRORS)
def test_errors_match_a_plain_script(variant):
    out = adjoint.load(FILE).solve(variant=variant).variants[0].to_json()
    kind, message = _script(variant)
    assert (out["error"]["type"], out["error"]["message"]) == (kind, message)


def test_value_before_target_is_pythons_order():
    """``grad[5][0] = grad.sum(dim=5)``: CPython evaluates the value first, so its dim error wins
    over ``grad[5]``'s index error (written here by hand: torch says the same, above)."""
    out = adjoint.load(FILE).solve(variant="value_before_target").variants[0].to_json()
    assert out["error"]["message"] == "Dimension out of range (expected to be in range of [-3, 2], but got 5)"


def test_a_forward_still_assigns_into_a_name_only(tmp_path):
    path = tmp_path / "f.yaml"
    path.write_text("inputs:\n  x: {value: [[1.0, 2.0]], requires_grad: true}\n"
                    "model:\n  forward: |\n    h = x * 2\n    h[0][1] = 0\n    return h\nloss: \"sum(y)\"\n")
    with pytest.raises(ProblemError, match="assign into a subscript of a name"):
        adjoint.load(str(path))
