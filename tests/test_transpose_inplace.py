"""The in-place transposes ``x.t_()`` (TBackward1) and ``x.transpose_(dim0, dim1)`` (TransposeBackward1) against
real torch 2.13: the tensor's new sizes, its version, the node and its place in the graph; the hooks and
retain_grad a tensor had stay on its old grad_fn (set_history, not rebase_history); the errors (a leaf that
requires grad, ``t_`` of more than 2 dims, a dim out of range) and the refusal of a view; create_graph through
the nodes (TBackward0 / TransposeBackward0 recorded), node for node, and the grad of grad."""

import pytest
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402
from adjoint.format.errors import ProblemError  # noqa: E402
from test_second_order import _compare_selecting, _run  # noqa: E402

F64 = torch.float64

PROGRAM = """
name: transpose-in-place
dtype: float64
inputs:
  a: {value: [[-0.3, -0.15, 0.4], [0.2, 0.35, -0.5]], requires_grad: true}
  w: {value: [[0.5, 1.5], [-1, 2], [0.25, -0.5]], requires_grad: true}
model:
  inputs: [a, w]
  forward: |
BODY
loss: "sum(y)"
steps:
  - forward
  - backward
"""


def _program(body: str) -> str:
    return PROGRAM.replace("BODY", "\n".join("    " + line for line in body.splitlines()))


def _grad(run, name):
    return run.last_pass.grads[name].a.ravel().tolist()


def _leaves():
    return (torch.tensor([[-0.3, -0.15, 0.4], [0.2, 0.35, -0.5]], dtype=F64, requires_grad=True),
            torch.tensor([[0.5, 1.5], [-1, 2], [0.25, -0.5]], dtype=F64, requires_grad=True))


def test_t_in_place_is_the_tensor_transposed_with_a_TBackward1():
    run = _run(_program("h = a * 2\nr = h.t_()\nreturn r * w"))
    assert run.error is None, run.error
    a, w = _leaves()
    h = a * 2
    r = h.t_()
    assert r is h and h._version == 1 and h.grad_fn.name() == "TBackward1"
    assert h.grad_fn.next_functions[0][0].name() == "MulBackward0"
    (r * w).sum().backward()
    ours = run.forward.names["h"]
    assert tuple(ours.shape) == tuple(h.shape) == (3, 2)
    assert tuple(ours.strides) == h.stride() == (1, 3)
    assert ours.version.shown == h._version
    assert ours.grad_fn.name == h.grad_fn.name()
    assert ours.grad_fn.edges[0].node.name == "MulBackward0"
    assert _grad(run, "a") == pytest.approx(a.grad.flatten().tolist())


@pytest.mark.parametrize("body,make", [
    ("h = a * 1\nh.transpose_(-1, 0)\nreturn h * w", lambda a, w: (a * 1).transpose_(-1, 0) * w),
    ("h = a.unsqueeze(0) * 1\nh.transpose_(2, 0)\nreturn h.sum(2) * w", lambda a, w: (a.unsqueeze(0) * 1).transpose_(2, 0).sum(2) * w),
    ("h = a[0] * 1\nh.t_()\nreturn h * w[:, 0]", lambda a, w: (a[0] * 1).t_() * w[:, 0]),
])
def test_transpose_in_place_gradients_against_torch(body, make):
    run = _run(_program(body))
    assert run.error is None, run.error
    a, w = _leaves()
    make(a, w).sum().backward()
    assert _grad(run, "a") == pytest.approx(a.grad.flatten().tolist())
    assert _grad(run, "w") == pytest.approx(w.grad.flatten().tolist())


@pytest.mark.parametrize("body,make", [
    ("h = (a * 1).unsqueeze(0)\nh.t_()\nreturn h", lambda a: (a * 1).unsqueeze(0).t_()),
    ("a.t_()\nreturn a", lambda a: a.t_()),
    ("a.transpose_(0, 3)\nreturn a", lambda a: a.transpose_(0, 3)),
    ("h = a * 1\nh.transpose_(0, 2)\nreturn h", lambda a: (a * 1).transpose_(0, 2)),
])
def test_transpose_in_place_errors_are_torch_s(body, make):
    a, _ = _leaves()
    with pytest.raises((RuntimeError, IndexError)) as caught:
        make(a)
    run = _run(_program(body))
    assert (run.error.type, run.error.message) == (type(caught.value).__name__, str(caught.value))


@pytest.mark.parametrize("body", ["h = a * 1\nv = h[0:1]\nv.t_()\nreturn v", "h = a * 1\nv = h.view(3, 2)\nh.t_()\nreturn v"])
def test_transpose_in_place_of_a_view_or_a_base_is_refused(body):
    with pytest.raises(ProblemError, match="of a view, or of a tensor with views, is not modelled"):
        adjoint.loads(_program(body)).solve()


def test_hooks_and_retain_grad_stay_on_the_old_grad_fn():
    """torch 2.13's t_ / transpose_ set the history without update_tensor_hooks_on_new_gradfn: a hook and a
    retain_grad registered before stay on the old grad_fn and see the gradient before the transpose."""
    text = _program("h = a * 1\nk = h.clone()\nk.transpose_(1, 0)\nreturn k * w").replace(
        "steps:", "hooks:\n  - {tensor: k}\n  - {tensor: k, kind: retain_grad}\nsteps:")
    run = _run(text)
    a, w = _leaves()
    k = (a * 1).clone()
    seen = []
    k.register_hook(lambda g: seen.append(g.clone()))
    k.retain_grad()
    k.transpose_(1, 0)
    (k * w).sum().backward()
    assert tuple(seen[0].shape) == tuple(k.grad.shape) == (2, 3)
    assert tuple(run.last_pass.grads["k"].a.shape) == (2, 3)
    assert _grad(run, "k") == pytest.approx(k.grad.flatten().tolist())


OPS = [  # create_graph through TBackward1 / TransposeBackward1: grad.t() (TBackward0), grad.transpose (TransposeBackward0)
    ("k = h * 1\n    k.t_()\n    return k.t() * b", lambda h, i, b: (h * 1).t_().t() * b),
    ("k = h * b\n    k.transpose_(0, 1)\n    return (k * h.t()).t()", lambda h, i, b: ((h * b).transpose_(0, 1) * h.t()).t()),
    ("k = h[0] * 1\n    k.t_()\n    return k * b", lambda h, i, b: (h[0] * 1).t_() * b),
]


@pytest.mark.parametrize("forward,twin", OPS, ids=[s[0] for s in OPS])
def test_second_order_through_the_in_place_transposes_against_torch(forward, twin):
    _compare_selecting(forward, twin, statements=True)
