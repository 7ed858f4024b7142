"""In-place writes by hook bodies in a ``create_graph: true`` backward, against real torch 2.13.

The engine runs a create_graph backward with grad mode on, so a hook's ``grad.mul_(2)`` on the
gradient it is handed is recorded: the tensor gets a ``MulBackward0`` (a ``CopySlices`` through a
view), its version moves, and that very tensor flows on -- to later hooks, the node, every holder
of it (AddBackward0's two branches, a ``.grad`` a hook assigned it), and AccumulateGrad, which
copies it into ``.grad`` (``CopyBackwards``). A body reading a leaf's ``.grad`` there reads the
tensor AccumulateGrad made, with its graph; a ``post_accumulate_grad`` body's ops on
``tensor.grad`` are recorded too. Every expected value, node name, version and message below is
real torch's."""

import warnings

import pytest
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402
from adjoint.format.errors import ProblemError  # noqa: E402
from test_second_order import _run, assert_same_graph, chain_ours, chain_torch, start_seq  # noqa: E402

warnings.filterwarnings("ignore")
F64 = torch.float64

HEAD = """
name: cg_hook_inplace
dtype: float64
inputs:
  x: {value: [0.5, -1.5, 2], requires_grad: true}
  w: {value: [1.5, 0.5, -1], requires_grad: true}
model:
  inputs: [x, w]
  forward: |
    h = x * w
    return (h * 3).tanh() + h
loss: "sum(y * y)"
"""

GRAD_STEPS = """steps:
  - forward
  - {backward: {method: grad, inputs: [x, w], create_graph: true, as: [gx, gw]}}
  - {backward: {method: grad, root: "sum(gx * gw)", inputs: [x, w], as: [ggx, ggw]}}
"""

BACKWARD_STEPS = """steps:
  - forward
  - {backward: {create_graph: true}}
  - {backward: {method: grad, root: "sum(x.grad * w.grad)", inputs: [x, w], as: [ggx, ggw]}}
"""


def _text(steps: str, hooks: list[str]) -> str:
    return HEAD + steps + "hooks:\n" + "".join(f"  - {h}\n" for h in hooks)


def _leaves():
    return (torch.tensor([0.5, -1.5, 2], dtype=F64, requires_grad=True),
            torch.tensor([1.5, 0.5, -1], dtype=F64, requires_grad=True))


def _forward(x, w, on_h=None):
    h = x * w
    if on_h is not None:
        on_h(h)
    y = (h * 3).tanh() + h
    return y, (y * y).sum()


def _mul2(g):
    g.mul_(2)


def _set_first(g):
    g[0] = 7


def _pre_mul2(grad_outputs):
    grad_outputs[0].mul_(2)


def _module_pre_mul2(module, grad_output):
    grad_output[0].mul_(2)


def _post_neg_second(grad_inputs, grad_outputs):
    grad_inputs[1].mul_(-1)


def _post_mul2_out(grad_inputs, grad_outputs):
    grad_outputs[0].mul_(2)


def _sub1(g):
    g.sub_(1)


def _full_half(module, grad_input, grad_output):
    grad_input[0].mul_(0.5)


def _add1(g):
    g.add_(1)


def _twins():
    # (id, hooks in the file, torch registration: fn(x, w, h) run right after h is made; y's hook after y)
    return [
        ("x_mul", ["{tensor: x, does: \"grad.mul_(2)\"}"], lambda x, w, h: x.register_hook(_mul2), None),
        ("h_mul", ["{tensor: h, does: \"grad.mul_(2)\"}"], lambda x, w, h: h.register_hook(_mul2), None),
        ("y_add", ["{tensor: y, does: \"grad.add_(1)\"}"], None, lambda y: y.register_hook(_add1)),
        ("h_node_pre", ["{node: h, kind: pre, does: \"grad_outputs[0].mul_(2)\"}"],
         lambda x, w, h: h.grad_fn.register_prehook(_pre_mul2), None),
        ("h_node_post_in", ["{node: h, kind: post, does: \"grad_inputs[1].mul_(-1)\"}"],
         lambda x, w, h: h.grad_fn.register_hook(_post_neg_second), None),
        ("h_slice", ["{tensor: h, does: \"grad[0] = 7\"}"], lambda x, w, h: h.register_hook(_set_first), None),
        ("x_mul_then_returns", ["{tensor: x, does: \"grad.mul_(2)\"}", "{tensor: x, returns: \"grad + 1\"}"],
         lambda x, w, h: (x.register_hook(_mul2), x.register_hook(lambda g: g + 1)), None),
    ]


def _torch_grad_run(on_h, on_y):
    x, w = _leaves()
    base = start_seq()

    def hook_h(h):
        if on_h is not None:
            on_h(x, w, h)
    y, loss = _forward(x, w, hook_h)
    if on_y is not None:
        on_y(y)
    gx, gw = torch.autograd.grad(loss, [x, w], create_graph=True)
    ggx, ggw = torch.autograd.grad((gx * gw).sum(), [x, w])
    return base, gx, gw, ggx, ggw


@pytest.mark.parametrize("case", _twins(), ids=[c[0] for c in _twins()])
def test_method_grad_gradient_graph_version_and_second_order(case):
    """autograd.grad(create_graph=True) with a hook writing in place: gx's and gw's graphs node for
    node (the write's MulBackward0 / CopySlices on the handed tensor), their versions, their
    values, and the second backward through that graph."""
    _id, hooks, on_h, on_y = case
    run = _run(_text(GRAD_STEPS, hooks))
    assert run.error is None, run.error
    base, gx, gw, ggx, ggw = _torch_grad_run(on_h, on_y)
    for name, t in (("gx", gx), ("gw", gw)):
        ours = run.made[name]
        assert_same_graph(chain_ours(ours), chain_torch(t, base), name)
        assert ours.version.value == t._version, name
        assert ours.value.a.tolist() == pytest.approx(t.tolist(), rel=1e-12)
    for name, t in (("ggx", ggx), ("ggw", ggw)):
        assert run.made[name].value.a.tolist() == pytest.approx(t.tolist(), rel=1e-12), name


def test_leaf_hook_write_is_a_mul_node_on_the_handed_gradient():
    """The hook sees the gradient before the write (version 0, MulBackward0 of the loss's y * y) and
    after it a new MulBackward0 whose next function is the old one; the result is that tensor, at
    version 1."""
    x, w = _leaves()
    seen = []

    def hook(g):
        seen.append((g._version, g.grad_fn.name()))
        g.mul_(2)
        seen.append((g._version, g.grad_fn.name(), g.grad_fn.next_functions[0][0].name()))
    x.register_hook(hook)
    _, loss = _forward(x, w)
    gx, = torch.autograd.grad(loss, [x], create_graph=True)
    assert seen == [(0, "MulBackward0"), (1, "MulBackward0", "MulBackward0")]
    text = _text(GRAD_STEPS.replace("inputs: [x, w], create_graph", "inputs: [x], create_graph")
                 .replace("as: [gx, gw]", "as: [gx]").replace("sum(gx * gw)", "sum(gx * gx)"),
                 ["{tensor: x, does: \"grad.mul_(2)\"}"])
    run = _run(text)
    ours = run.made["gx"]
    assert (ours.version.value, ours.grad_fn.name, ours.grad_fn.edges[0].node.name) == (1, "MulBackward0", "MulBackward0")
    assert ours.value.a.tolist() == pytest.approx(gx.tolist(), rel=1e-12)


def _torch_backward_run(register):
    x, w = _leaves()
    base = start_seq()
    register(x, w)
    _, loss = _forward(x, w)
    loss.backward(create_graph=True)
    ggx, ggw = torch.autograd.grad((x.grad * w.grad).sum(), [x, w])
    return base, x, w, ggx, ggw


def _mul3(t):
    t.mul_(3)


def _add_into(t, other):
    t.add_(other)


def _post_mul(t):
    t.grad.mul_(2)


def _post_assign(t):
    t.grad = t.grad * 3


BACKWARD_CASES = [
    # .grad is AccumulateGrad's copy of the written gradient (CopyBackwards), version 0
    ("x_hook_mul", "{tensor: x, does: \"grad.mul_(2)\"}", lambda x, w: x.register_hook(_mul2)),
    # the post hook's write is recorded on .grad: MulBackward0, version 1
    ("post_mul", "{tensor: x, kind: post_accumulate_grad, does: \"tensor.grad.mul_(2)\"}",
     lambda x, w: x.register_post_accumulate_grad_hook(_post_mul)),
    # .grad assigned a product: that tensor, its graph with it
    ("post_assign", "{tensor: x, kind: post_accumulate_grad, does: \"tensor.grad = tensor.grad * 3\"}",
     lambda x, w: x.register_post_accumulate_grad_hook(_post_assign)),
    # a hook reading another leaf's .grad reads AccumulateGrad's tensor, with its graph
    ("w_reads_x_grad", "{tensor: w, returns: \"grad + x.grad\"}",
     lambda x, w: w.register_hook(lambda g: g + x.grad)),
    ("w_writes_x_grad", "{tensor: w, does: \"x.grad.mul_(3)\"}",
     lambda x, w: w.register_hook(lambda g: _mul3(x.grad))),
    ("post_adds_other", "{tensor: w, kind: post_accumulate_grad, does: \"tensor.grad.add_(x.grad)\"}",
     lambda x, w: w.register_post_accumulate_grad_hook(lambda t: _add_into(t.grad, x.grad))),
]


@pytest.mark.parametrize("case", BACKWARD_CASES, ids=[c[0] for c in BACKWARD_CASES])
def test_backward_create_graph_leaf_grads(case):
    """backward(create_graph=True): each leaf's .grad -- graph, version, value -- and the second
    backward through .grad, as torch has them."""
    _id, hook, register = case
    run = _run(_text(BACKWARD_STEPS, [hook]))
    assert run.error is None, run.error
    base, x, w, ggx, ggw = _torch_backward_run(register)
    for name, t in (("x", x), ("w", w)):
        ours = run.model.leaves[name].grad_tensor
        assert ours.value is run.model.leaves[name].grad
        assert_same_graph(chain_ours(ours), chain_torch(t.grad, base), name)
        assert ours.version.value == t.grad._version, name
        assert ours.value.a.tolist() == pytest.approx(t.grad.tolist(), rel=1e-12), name
    for name, t in (("ggx", ggx), ("ggw", ggw)):
        assert run.made[name].value.a.tolist() == pytest.approx(t.tolist(), rel=1e-12), name


def _error_of(run_torch):
    with pytest.raises(RuntimeError) as exc:
        run_torch()
    return str(exc.value)


def test_writing_a_leaf_a_hook_returned_is_pytorchs_leaf_error():
    """A hook returns the leaf w as h's gradient; the next hook's mul_ on it, with grad mode on, is
    PyTorch's leaf error (a first-order backward writes it silently)."""
    def twin():
        x, w = _leaves()
        _, loss = _forward(x, w, lambda h: (h.register_hook(lambda g: w), h.register_hook(_mul2)))
        torch.autograd.grad(loss, [x, w], create_graph=True)
    message = _error_of(twin)
    assert message == "a leaf Variable that requires grad is being used in an in-place operation."
    run = _run(_text(GRAD_STEPS, ["{tensor: h, returns: \"w\"}", "{tensor: h, does: \"grad.mul_(2)\"}"]))
    assert (run.error.type, run.error.message) == ("RuntimeError", message)


def test_writing_a_gradient_the_recorded_formula_saved_is_pytorchs_version_error():
    """A post hook on h's MulBackward0 doubles grad_outputs[0], which that node's recorded formula
    (grad * w, grad * x) saved: the second backward's unpack raises PyTorch's version error."""
    def twin():
        x, w = _leaves()
        _, loss = _forward(x, w, lambda h: h.grad_fn.register_hook(_post_mul2_out))
        gx, gw = torch.autograd.grad(loss, [x, w], create_graph=True)
        torch.autograd.grad((gx * gw).sum(), [x, w])
    message = _error_of(twin)
    assert "is at version 1; expected version 0 instead" in message
    run = _run(_text(GRAD_STEPS, ["{node: h, kind: post, does: \"grad_outputs[0].mul_(2)\"}"]))
    assert (run.error.type, run.error.message) == ("RuntimeError", message)


def test_retained_gradient_after_a_write_is_a_clone_of_the_written_tensor():
    """retain_grad's hook (after the file's tensor hooks) clones the written gradient: h.grad is
    CloneBackward0 of the write's node."""
    x, w = _leaves()
    holder = {}

    def on_h(h):
        h.retain_grad()
        h.register_hook(_sub1)
        holder["h"] = h
    _, loss = _forward(x, w, on_h)
    loss.backward(create_graph=True)
    h = holder["h"]
    assert (h.grad.grad_fn.name(), h.grad.grad_fn.next_functions[0][0].name()) == ("CloneBackward0", "SubBackward0")
    text = _text(BACKWARD_STEPS.split("  - {backward: {method")[0],
                 ["{tensor: h, kind: retain_grad}", "{tensor: h, does: \"grad.sub_(1)\"}"])
    pred = adjoint.loads(text).solve().variants[0]
    assert [float(v) for v in pred.grads["h"].floats()] == pytest.approx(h.grad.tolist(), rel=1e-12)
    assert [float(v) for v in pred.grads["x"].floats()] == pytest.approx(x.grad.tolist(), rel=1e-12)
    run = _run(text)
    assert run.error is None


MODULE = """
name: cg_module_hook_inplace
dtype: float64
inputs:
  x: {value: [[0.5, -1.0]], requires_grad: true}
model:
  type: Sequential
  children:
    lin: {type: Linear, params: {weight: [[0.5, 1.0], [2.0, -1.0]], bias: [0.1, 0.2]}}
    act: {type: Tanh}
loss: "sum(y ** 2)"
steps:
  - forward
  - {backward: {method: grad, inputs: [x, lin.weight], create_graph: true, as: [gx, gw]}}
  - {backward: {method: grad, root: "sum(gx ** 2) + sum(gw * gw)", inputs: [x, lin.weight], as: [ggx, ggw]}}
hooks:
  - HOOK
"""


@pytest.mark.parametrize("hook,kind,write", [
    ("{module: lin, kind: full_backward, does: \"grad_input[0].mul_(0.5)\"}", "full", _full_half),
    ("{module: act, kind: full_backward_pre, does: \"grad_output[0].mul_(2)\"}", "pre", _module_pre_mul2),
], ids=["full_backward_grad_input", "full_backward_pre_grad_output"])
def test_module_full_backward_hooks_write_in_place(hook, kind, write):
    """BackwardHookFunctionBackward hands the gradient tensors on themselves: a full backward
    hook's write reaches what flows on, recorded (graphs and second order as torch's)."""
    run = _run(MODULE.replace("HOOK", hook))
    assert run.error is None, run.error
    lin = torch.nn.Linear(2, 2).double()
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[0.5, 1.0], [2.0, -1.0]], dtype=F64))
        lin.bias.copy_(torch.tensor([0.1, 0.2], dtype=F64))
    act = torch.nn.Tanh()
    model = torch.nn.Sequential(lin, act)
    if kind == "full":
        lin.register_full_backward_hook(write)
    else:
        act.register_full_backward_pre_hook(write)
    x = torch.tensor([[0.5, -1.0]], dtype=F64, requires_grad=True)
    base = start_seq()
    loss = (model(x) ** 2).sum()
    gx, gw = torch.autograd.grad(loss, [x, lin.weight], create_graph=True)
    ggx, ggw = torch.autograd.grad((gx ** 2).sum() + (gw * gw).sum(), [x, lin.weight])
    for name, t in (("gx", gx), ("gw", gw)):
        assert_same_graph(chain_ours(run.made[name]), chain_torch(t, base), name)
        assert run.made[name].value.a.ravel().tolist() == pytest.approx(t.flatten().tolist(), rel=1e-12)
    for name, t in (("ggx", ggx), ("ggw", ggw)):
        assert run.made[name].value.a.ravel().tolist() == pytest.approx(t.flatten().tolist(), rel=1e-12), name


def test_a_grad_assigned_the_handed_gradient_sees_a_later_write():
    """A hook assigns c.grad the gradient it is handed; a later hook doubles that tensor in place:
    c.grad is that very tensor, doubled, with the write's graph."""
    text = HEAD.replace("  w: {value: [1.5, 0.5, -1], requires_grad: true}\n",
                        "  w: {value: [1.5, 0.5, -1], requires_grad: true}\n  c: {value: [1, 2, 3], requires_grad: true}\n")
    text = text.replace("inputs: [x, w]\n", "inputs: [x, w, c]\n").replace("(h * 3).tanh() + h", "(h * 3).tanh() + h * c")
    text += """steps:
  - forward
  - {backward: {create_graph: true}}
  - {backward: {method: grad, root: "sum(x.grad * w.grad) + sum(c.grad ** 2)", inputs: [x, w, c], as: [a, b, d]}}
hooks:
  - {tensor: x, does: "c.grad = grad"}
  - {tensor: x, does: "grad.mul_(2)"}
"""
    run = _run(text)
    assert run.error is None, run.error
    x, w = _leaves()
    c = torch.tensor([1.0, 2, 3], dtype=F64, requires_grad=True)

    def assign(g):
        c.grad = g
    x.register_hook(assign)
    x.register_hook(_mul2)
    h = x * w
    y = (h * 3).tanh() + h * c
    (y * y).sum().backward(create_graph=True)
    got = torch.autograd.grad((x.grad * w.grad).sum() + (c.grad ** 2).sum(), [x, w, c])
    for name, t in zip(("a", "b", "d"), got):
        assert run.made[name].value.a.tolist() == pytest.approx(t.tolist(), rel=1e-12), name
    # the third backward's hooks ran too: c.grad is the doubled gradient they were handed there
    assert run.model.leaves["c"].grad.a.tolist() == pytest.approx(c.grad.tolist(), rel=1e-12)


def test_a_plain_backward_writing_a_create_graph_grad_keeps_its_graph():
    """After backward(create_graph=True), a plain backward's hook writes x.grad in place (grad mode
    off: its version moves, its grad_fn stays): a later root reading x.grad differentiates through
    the graph it had (was: a tensor without graph, and a wrong 'does not require grad' error)."""
    text = HEAD + """steps:
  - forward
  - {backward: {create_graph: true}}
  - {backward: {root: "sum(x.grad * w.grad)", inputs: [w], retain_graph: true}}
  - {backward: {method: grad, root: "sum(x.grad ** 2)", inputs: [x, w], as: [a, b]}}
hooks:
  - {tensor: w, does: "x.grad.mul_(3)"}
"""
    run = _run(text)
    assert run.error is None, run.error
    x, w = _leaves()
    w.register_hook(lambda g: _mul3(x.grad))
    _, loss = _forward(x, w)
    loss.backward(create_graph=True)
    torch.autograd.backward([(x.grad * w.grad).sum()], inputs=[w], retain_graph=True)
    got = torch.autograd.grad((x.grad ** 2).sum(), [x, w])
    for name, t in zip(("a", "b"), got):
        assert run.made[name].value.a.tolist() == pytest.approx(t.tolist(), rel=1e-12), name
    ours = run.model.leaves["x"].grad_tensor
    # the create_graph pass's write recorded (MulBackward0, version 2: CopyBackwards' copy_, then mul_),
    # the plain passes' not (versions 3 and 4, the same grad_fn)
    assert (x.grad.grad_fn.name(), x.grad._version) == ("MulBackward0", 4)
    assert (ours.grad_fn.name, ours.version.value) == ("MulBackward0", 4)


def test_assigning_another_leafs_create_graph_grad_stays_refused():
    """Two leaves sharing one .grad tensor with a graph (x.grad = w.grad in a create_graph
    backward) is refused at the line, never guessed."""
    text = _text(BACKWARD_STEPS, ["{tensor: w, kind: post_accumulate_grad, does: \"x.grad = tensor.grad\"}"])
    with pytest.raises(ProblemError, match="assigning another leaf's .grad to .grad in a create_graph backward"):
        _run(text)
