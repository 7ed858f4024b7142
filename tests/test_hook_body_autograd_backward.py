"""``torch.autograd.backward(...)`` in a hook body, against a plain torch script
(tests/data/regressions/hook_body_torch_autograd_backward.yaml)."""

from conftest import assert_error_or_grads
import pytest

import adjoint

FILE = "tests/data/regressions/hook_body_torch_autograd_backward.yaml"


def _bodies(torch):
    bw = torch.autograd.backward
    return {
        "plain": lambda g, p, u: bw(p, retain_graph=True),
        "listed": lambda g, p, u: bw([u], [g], True),
        "keyword_tensors": lambda g, p, u: bw(tensors=u, grad_tensors=g * 2, retain_graph=True),
        "frees": lambda g, p, u: bw(p),
        "implicit": lambda g, p, u: bw([u], retain_graph=True),
        "none_gradient": lambda g, p, u: bw([p], [None], retain_graph=True),
        "twice_value": lambda g, p, u: bw(u, g, tensors=u),
        "missing": lambda g, p, u: bw(grad_tensors=g),
        "unexpected": lambda g, p, u: bw(u, gradient=g),
    }


def _torch_run(name):
    """(x.grad, w.grad) or (error type, message) of the plain script."""
    import torch
    d = torch.float64
    x = torch.tensor([0.5, -1, 2], dtype=d, requires_grad=True)
    w = torch.tensor([1.5, 0.25, -2], dtype=d, requires_grad=True)
    h = x * w
    p = (w * w).sum()
    u = w * 3
    body = _bodies(torch)[name]
    h.register_hook(lambda g: body(g, p, u))
    try:
        (h * h).sum().backward()
    except (RuntimeError, TypeError) as e:
        return type(e).__name__, str(e)
    return x.grad.tolist(), w.grad.tolist()


@pytest.mark.torch
@pytest.mark.parametrize("name", ["plain", "listed", "keyword_tensors", "frees", "implicit", "none_gradient",
                                  "twice_value", "missing", "unexpected"])
def test_hook_body_torch_autograd_backward_as_torch(name):
    out = {v.name: v.to_json() for v in adjoint.load(FILE).solve().variants}[name]
    assert_error_or_grads(out, _torch_run(name))
