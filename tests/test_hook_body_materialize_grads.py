"""``torch.autograd.grad(..., materialize_grads=True)`` in a hook body, against a plain torch
script (tests/data/regressions/hook_body_autograd_grad_materialize_grads.yaml)."""

from conftest import assert_error_or_grads
import pytest

import adjoint

FILE = "tests/data/regressions/hook_body_autograd_grad_materialize_grads.yaml"


def _bodies(torch):
    ag = torch.autograd.grad
    return {
        "materialize": lambda g, p, x, w: (lambda r: g + r[0] + r[1] * 5 + 1)(
            ag(p, [w, x], retain_graph=True, materialize_grads=True)),
        "materialize_allow_true": lambda g, p, x, w: (lambda r: g + r[0].exp())(
            ag(p, [x], retain_graph=True, allow_unused=True, materialize_grads=True)),
        "materialize_allow_false": lambda g, p, x, w: ag(p, [x], retain_graph=True, allow_unused=False,
                                                         materialize_grads=True) and None,
        "materialize_false": lambda g, p, x, w: ag(p, [x], retain_graph=True, materialize_grads=False) and None,
        "materialize_allow_false_empty": lambda g, p, x, w: ag(p, [], allow_unused=False,
                                                               materialize_grads=True) and None,
        "materialize_write": lambda g, p, x, w: (lambda r: (r[0].add_(g), r[0] * 2)[1])(
            ag(p, [x], retain_graph=True, materialize_grads=True)),
    }


def _torch_run(name):
    """(x.grad, w.grad) or (error type, message) of the plain script."""
    import torch
    d = torch.float64
    x = torch.tensor([0.5, -1, 2], dtype=d, requires_grad=True)
    w = torch.tensor([1.5, 0.25, -2], dtype=d, requires_grad=True)
    h = x * w
    p = (w * w).sum()
    body = _bodies(torch)[name]
    h.register_hook(lambda g: body(g, p, x, w))
    try:
        (h * h).sum().backward()
    except (RuntimeError, ValueError) as e:
        return type(e).__name__, str(e)
    return x.grad.tolist(), w.grad.tolist()


@pytest.mark.torch
@pytest.mark.parametrize("name", ["materialize", "materialize_allow_true", "materialize_allow_false",
                                  "materialize_false", "materialize_allow_false_empty", "materialize_write"])
def test_hook_body_grad_materialize_grads_as_torch(name):
    out = {v.name: v.to_json() for v in adjoint.load(FILE).solve().variants}[name]
    assert_error_or_grads(out, _torch_run(name))
