"""A hook body's ``backward(...)`` and ``torch.autograd.grad(...)`` check their arguments in
PyTorch's order (``_make_grads`` before the engine's checks), against a plain torch script
(tests/data/regressions/hook_body_backward_checks_in_make_grads_order.yaml)."""

import pytest

import adjoint

FILE = "tests/data/regressions/hook_body_backward_checks_in_make_grads_order.yaml"

# each variant's hook body, as the plain script calls it
CALLS = {
    "implicit_before_input": lambda torch, x, v, k: torch.autograd.grad(v, [k], retain_graph=True),
    "shape_before_output": lambda torch, x, v, k: torch.autograd.grad(k, [x], torch.ones(3), retain_graph=True),
    "shape_before_input": lambda torch, x, v, k: torch.autograd.grad(v, [k], torch.ones(3), retain_graph=True),
    "output_before_input": lambda torch, x, v, k: torch.autograd.grad(k, [k], retain_graph=True),
    "backward_shape_before_output": lambda torch, x, v, k: k.backward(torch.ones(3)),
    "backward_implicit": lambda torch, x, v, k: v.backward(retain_graph=True),
}


def _torch_error(name: str) -> tuple[str, str, int]:
    import torch
    d = torch.float64
    x = torch.tensor([0.5, -1], dtype=d, requires_grad=True)
    c = torch.tensor([1, 2], dtype=d)
    h = x * 2
    v = x * 3
    k = c * 2
    calls = []

    def hook(grad):
        calls.append(grad)
        CALLS[name](torch, x, v, k)

    h.register_hook(hook)
    with pytest.raises(RuntimeError) as err:
        (h * h).sum().backward()
    return "RuntimeError", str(err.value), len(calls)


@pytest.mark.torch
@pytest.mark.parametrize("name", sorted(CALLS))
def test_hook_body_backward_errors_in_pytorchs_order(name):
    out = {v.name: v.to_json() for v in adjoint.load(FILE).solve().variants}[name]
    kind, message, calls = _torch_error(name)
    assert out["error"]["type"] == kind
    assert out["error"]["message"] == message
    assert out["error"]["during"] == "backward"
    assert len(out["hook_calls"]) == calls == 1
