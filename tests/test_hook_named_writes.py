"""A hook body that writes, by name, a parameter, an input or a forward tensor (contract v3, 1 and 8):
the prediction against a plain torch script written by hand (not the torch side, which records
leaf_values the same way the engine does, so a shared blind spot would pass the differential test)."""

import numpy as np
import pytest

import adjoint

FILE = "tests/data/regressions/hook_body_writes_tensors_it_names.yaml"


def _script(variant: str):
    import torch
    d = torch.float64
    x = torch.tensor([[0.5, -1], [2, 0.25]], dtype=d, requires_grad=True)
    W = torch.tensor([[1, -2], [0.5, 1]], dtype=d, requires_grad=True)
    def double_w(g):
        W.mul_(2)

    def step_x(t):
        x.sub_(0.5 * W.grad)

    if variant == "post_accumulate_writes_another_leaf":   # a leaf's hook: registered once, before the steps
        W.register_post_accumulate_grad_hook(step_x)
    losses = []
    for _ in range(2):   # steps: forward, backward, forward, backward
        h1 = x + W
        h2 = h1.tanh()
        y = h2 * x
        if variant == "write_param":
            h2.register_hook(double_w)
        elif variant == "write_param_through_a_view":
            h2.register_hook(lambda g: (W[0].mul_(2), None)[1])
        elif variant == "write_forward_unsaved":
            h2.register_hook(lambda g, h1=h1: (h1.add_(1), None)[1])
        loss = y.sum()
        losses.append(loss.item())
        loss.backward()
    return losses, {"x": x.detach().tolist(), "W": W.detach().tolist()}, x.grad.tolist(), W.grad.tolist()


@pytest.mark.torch
@pytest.mark.parametrize("variant, written", [
    ("write_param", ["W"]),
    ("write_param_through_a_view", ["W"]),
    ("write_forward_unsaved", []),
    ("post_accumulate_writes_another_leaf", ["x"]),
])
def test_named_writes_match_a_plain_script(variant, written):
    out = adjoint.load(FILE).solve(variant=variant).variants[0].to_json()
    losses, leaves, xgrad, wgrad = _script(variant)
    assert sorted(out.get("leaf_values", {})) == written
    for name in written:
        np.testing.assert_allclose(out["leaf_values"][name]["value"], leaves[name], rtol=1e-12, atol=1e-12)
    assert out["loss"]["value"] == pytest.approx(losses[-1], rel=1e-12)
    np.testing.assert_allclose(out["grads"]["x"]["value"], xgrad, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(out["grads"]["W"]["value"], wgrad, rtol=1e-12, atol=1e-12)


def test_the_answer_says_what_the_body_wrote():
    run = adjoint.load(FILE).solve(variant="write_forward_unsaved").variants[0]
    why = " ".join(w for call in run.hook_calls for w in call.why)
    assert "writes h1 (a tensor of the forward it names) in place" in why
    assert "only rebinds local names" not in why


@pytest.mark.torch
def test_grad_reads_and_assignments_match_a_plain_script():
    """The errors' text and the one warning per read, from a plain script (not the torch side,
    which read an attribute twice before: two warnings where a script issues one)."""
    import warnings

    import torch
    path = "tests/data/regressions/hook_body_grad_reads_and_assignments.yaml"
    d = torch.float64

    def run(body):
        x = torch.tensor([[0.5, -1], [2, 0.25]], dtype=d, requires_grad=True)
        W = torch.tensor([[1, -2], [0.5, 1]], dtype=d, requires_grad=True)
        h1 = x @ W
        h2 = h1.tanh()
        y = h2 * x
        h2.register_hook(lambda g: body(g, W, h1))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                y.sum().backward()
            except Exception as exc:
                return (type(exc).__name__, str(exc)), [str(w.message) for w in caught]
        return None, [str(w.message) for w in caught]

    def assign(W, v):
        W.grad = v

    scripts = {
        "grad_assign_wrong_shape": lambda g, W, h1: assign(W, g[0]),
        "grad_assign_number": lambda g, W, h1: assign(W, 3),
        "grad_assign_float": lambda g, W, h1: assign(W, 2.5),
        "read_grad_of_nonleaf": lambda g, W, h1: g + h1.grad,
        "read_grad_of_nonleaf_is_none": lambda g, W, h1: (h1.grad, None)[1],
    }
    problem = adjoint.load(path)
    for variant, body in scripts.items():
        error, warned = run(body)
        out = problem.solve(variant=variant).variants[0].to_json()
        predicted = out.get("error")
        assert (None if predicted is None else (predicted["type"], predicted["message"])) == error, variant
        assert [w["message"] for w in out["warnings"]] == warned, variant
