"""Hook bodies that write in place (PyTorch 2.13), pinned as tests/test_semantics_torch.py pins the
engine's other rules: a tiny problem solved exactly, and the same thing written by hand in real
torch. docs/semantics.md ("Hooks that write in place") lists them; the aliasing model is
adjoint/engine/gradalias.py."""

import warnings

import numpy as np
import pytest
from conftest import require_torch

torch = require_torch()
import torch.nn as nn  # noqa: E402 (after the check)

import adjoint  # noqa: E402
from adjoint.render.console import render  # noqa: E402

warnings.filterwarnings("ignore")


def solve(text: str, variant: str | None = None):
    pred = adjoint.loads(text).solve()
    return pred.variant(variant) if variant else pred.variants[0]


def fl(v):
    return None if v is None else np.array(v.floats(), dtype=float)


def same(pred, value) -> bool:
    if value is None or pred is None:
        return pred is None and value is None
    return np.allclose(fl(pred), np.asarray(value.detach(), dtype=float), rtol=1e-6, atol=1e-6)


def inplace(f):
    """A hook that runs ``f`` for its in-place effect and returns None."""
    return lambda *args: (f(*args), None)[1]


def _lin(w, b):
    lin = nn.Linear(len(w[0]), len(w))
    with torch.no_grad():
        lin.weight.copy_(torch.tensor(w))
        lin.bias.copy_(torch.tensor(b))
    return lin


# 1. a tensor hook that clips its gradient in place and returns None: the clipped value flows on
CLIP = """
name: clip
inputs:
  x: {value: [[1.5, 0.5]]}
model:
  children:
    lin: {type: Linear, params: {weight: [[2.0, 1.0]], bias: [0.5]}}
  forward: |
    h = lin(x)
    return h * h
loss: "sum(y)"
hooks:
  - {tensor: lin.weight, does: "grad.clamp_(-0.5, 0.5)"}
  - {tensor: h, does: "grad *= 2"}
"""


def test_tensor_hook_writing_in_place_changes_what_flows_on():
    lin = _lin([[2.0, 1.0]], [0.5])
    x = torch.tensor([[1.5, 0.5]])
    h = lin(x)
    h.register_hook(inplace(lambda g: g.mul_(2)))
    lin.weight.register_hook(inplace(lambda g: g.clamp_(-0.5, 0.5)))
    (h * h).sum().backward()
    v = solve(CLIP)
    assert same(v.grads["lin.weight"], lin.weight.grad)
    assert same(v.grads["lin.bias"], lin.bias.grad)
    assert np.allclose(fl(v.grads["lin.weight"]), [[0.5, 0.5]])     # clipped: 16 * x = [24, 8] unclipped
    assert fl(v.grads["lin.bias"])[0] == 4 * float(h.detach()[0, 0])  # grad *= 2 reached the bias too
    report = render(adjoint.loads(CLIP).solve(), width=200)
    assert "ignores the change" not in report and "writes in place" in report


# 2. AddBackward0 hands one tensor to both branches: the branch run first writes what the other reads
SHARED = """
name: shared
inputs:
  a: {value: [1.0, 2.0], requires_grad: true}
  b: {value: [1.0, -1.0], requires_grad: true}
model:
  inputs: [a, b]
  forward: |
    pa = a * 2
    pb = b * 3
    return pa + pb
loss: "sum(y * y)"
hooks:
  - {tensor: pa, does: "grad.mul_(10)"}
  - {tensor: pb, does: "grad.mul_(100)"}
"""


def test_add_backward_buffer_is_shared_and_engine_order_decides():
    a = torch.tensor([1.0, 2.0], requires_grad=True)
    b = torch.tensor([1.0, -1.0], requires_grad=True)
    pa, pb = a * 2, b * 3
    seen = []
    pa.register_hook(lambda g: (seen.append(("pa", g.clone())), g.mul_(10))[0])
    pb.register_hook(lambda g: (seen.append(("pb", g.clone())), g.mul_(100))[0])
    y = pa + pb
    (y * y).sum().backward()
    v = solve(SHARED)
    assert [c.label for c in v.hook_calls] == ["hook@pb", "hook@pa"] == [f"hook@{n}" for n, _ in seen]
    assert same(v.hook_calls[1].args["grad"], seen[1][1])          # pa is handed pb's write
    assert np.allclose(fl(v.hook_calls[1].args["grad"]), 100 * fl(v.hook_calls[0].args["grad"]))
    assert same(v.grads["a"], a.grad) and same(v.grads["b"], b.grad)


# 3. AccumulateGrad takes an unshared gradient itself as .grad (its post-hook's grad_outputs[0] is
#    .grad), copies a shared one, and adds into an existing .grad in place
STEAL = """
name: steal
inputs:
  x: {value: [1.0, -2.0], requires_grad: true}
  w: {value: [0.5, 3.0], requires_grad: true}
  u: {value: [1.5, -1.0], requires_grad: true}
model:
  inputs: [x, w, u]
  forward: |
    h = x * 2
    return w * x + (u + h) * x
loss: "sum(y)"
variants:
  steal:
    hooks:
      - {node: w, kind: post, does: "grad_outputs[0].add_(1)"}
  copy:
    hooks:
      - {node: u, kind: post, does: "grad_outputs[0].add_(1)"}
  second:
    steps: [forward, backward, forward, backward]
    hooks:
      - {node: w, kind: post, does: "grad_outputs[0].add_(1)"}
"""


def _steal_torch(on: str, passes: int = 1):
    x = torch.tensor([1.0, -2.0], requires_grad=True)
    w = torch.tensor([0.5, 3.0], requires_grad=True)
    u = torch.tensor([1.5, -1.0], requires_grad=True)
    out = []
    for _ in range(passes):
        h = x * 2
        y = w * x + (u + h) * x
        leaf = {"w": w, "u": u}[on]
        acc = y.grad_fn.next_functions[0][0].next_functions[0][0] if on == "w" else \
            y.grad_fn.next_functions[1][0].next_functions[0][0].next_functions[0][0]
        assert acc.variable is leaf
        acc.register_hook(inplace(lambda gi, go: go[0].add_(1)))
        y.sum().backward()
        out.append(leaf.grad.clone())
    return out


def test_accumulate_grad_steals_unshared_copies_shared_adds_in_place():
    steal, copy = solve(STEAL, "steal"), solve(STEAL, "copy")
    w1, = _steal_torch("w")
    u1, = _steal_torch("u")
    assert same(steal.grads["w"], w1) and np.allclose(w1, [2.0, -1.0])   # 1, -2 plus the write
    assert same(copy.grads["u"], u1) and np.allclose(u1, [1.0, -2.0])     # a copy: the write is lost
    second = solve(STEAL, "second")
    t1, t2 = _steal_torch("w", passes=2)
    assert same(second.passes[0].grads["w"], t1) and same(second.passes[1].grads["w"], t2)
    assert np.allclose(t2 - t1, [1.0, -2.0])   # the second write went to the incoming gradient only


# 4. full backward hooks: grad_input written in place flows upstream; through x + 1 grad_output and
#    grad_input are one tensor
MODULE = """
name: module
inputs:
  x: {value: [[0.5, -1.0]], requires_grad: true}
model:
  type: Sequential
  children:
    lin: {type: Linear, params: {weight: [[0.5, 1.0], [2.0, -1.0]], bias: [0.1, 0.2]}}
    act:
      forward: "x + 1"
    out: {type: Linear, params: {weight: [[1.0, 3.0]], bias: [0.0]}}
loss: "sum(y ** 2)"
variants:
  full:
    hooks:
      - {module: lin, kind: full_backward, does: "grad_input[0].mul_(0.1)"}
  one_tensor:
    hooks:
      - {module: act, kind: full_backward, does: "grad_output[0].mul_(3)"}
"""


class _Add1(nn.Module):
    def forward(self, x):
        return x + 1


def _module_torch(which: str):
    model = nn.Sequential()
    model.add_module("lin", _lin([[0.5, 1.0], [2.0, -1.0]], [0.1, 0.2]))
    model.add_module("act", _Add1())
    model.add_module("out", _lin([[1.0, 3.0]], [0.0]))
    seen = []
    if which == "full":
        model.lin.register_full_backward_hook(inplace(lambda m, gi, go: gi[0].mul_(0.1)))
    else:
        def hook(m, gi, go):
            seen.append(gi[0] is go[0])
            go[0].mul_(3)
        model.act.register_full_backward_hook(hook)
    x = torch.tensor([[0.5, -1.0]], requires_grad=True)
    (model(x) ** 2).sum().backward()
    return x, model, seen


def test_full_hook_in_place_writes_flow_upstream():
    for name in ("full", "one_tensor"):
        v = solve(MODULE, name)
        x, model, seen = _module_torch(name)
        assert same(v.grads["x"], x.grad)
        assert same(v.grads["lin.weight"], model.lin.weight.grad)
        if seen:
            assert seen == [True]    # grad_input[0] is grad_output[0]: one tensor


# 5. optimizer in backward: a post-accumulate hook steps its leaf; leaf values after each pass
SGD = """
name: sgd
inputs:
  x: {value: [1.0, 2.0]}
model:
  children:
    lin: {type: Linear, params: {weight: [[0.5, 1.0]], bias: [0.25]}}
  forward: "lin(x)"
loss: "sum(y ** 2)"
steps: [forward, backward, forward, backward]
hooks:
  - {tensor: lin.weight, kind: post_accumulate_grad, does: ["tensor.sub_(0.125 * tensor.grad)", "tensor.grad = None"]}
"""


def test_post_accumulate_hook_steps_the_leaf_and_leaf_values_are_reported():
    lin = _lin([[0.5, 1.0]], [0.25])
    x = torch.tensor([1.0, 2.0])

    def step(p):
        p.sub_(0.125 * p.grad)
        p.grad = None
    lin.weight.register_post_accumulate_grad_hook(step)
    after = []
    for _ in range(2):
        (lin(x) ** 2).sum().backward()
        after.append(lin.weight.detach().clone())
    v = solve(SGD)
    assert same(v.passes[0].leaf_values["lin.weight"], after[0])
    assert same(v.passes[1].leaf_values["lin.weight"], after[1])
    assert same(v.leaf_values["lin.weight"], after[1])
    assert v.grads["lin.weight"] is None and lin.weight.grad is None
    assert "leaf_values" in v.to_json() and "leaf_values" in v.to_json()["passes"][0]


# 6. a pack hook writing its input: PyTorch's error once the hook returns
PACK = """
name: pack
inputs:
  x: {value: [1.0, 2.0], requires_grad: true}
model:
  forward: |
    h = x * 3
    return h.exp()
loss: "sum(y)"
hooks:
  - {saved_tensors: {pack: "x.mul_(2)", unpack: "x"}}
"""


def test_pack_hook_writing_its_input_is_pytorchs_error():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError) as err:
        with torch.autograd.graph.saved_tensors_hooks(lambda t: t.mul_(2), lambda t: t):
            (x * 3).exp()
    v = solve(PACK)
    assert v.error is not None and v.error.type == "RuntimeError" and v.error.during == "forward"
    assert v.error.message == str(err.value)
    assert v.error.message.startswith("A saved tensor pack hook is modifying its input in place.")


# 7. sum's gradient is expanded (stride 0): writing it in place is PyTorch's internal-overlap error
EXPANDED = """
name: expanded
inputs:
  x: {value: [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad: true}
model:
  forward: |
    h = x * 2
    s = h.sum(1)
    return s * s
loss: "sum(y)"
hooks:
  - {tensor: h, does: "grad.add_(1)"}
"""


def test_writing_an_expanded_sum_gradient_raises():
    x = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    h = x * 2
    h.register_hook(inplace(lambda g: g.add_(1)))
    s = h.sum(1)
    with pytest.raises(RuntimeError) as err:
        (s * s).sum().backward()
    v = solve(EXPANDED)
    assert v.error is not None and v.error.message == str(err.value)
    assert "more than one element of the written-to tensor" in v.error.message


# 8. a write through a view reaches the gradient it views, which another branch still holds
VIEW = """
name: view
inputs:
  a: {value: [[1.0, 2.0], [3.0, -1.0]], requires_grad: true}
  b: {value: [[1.0, -1.0], [0.5, 2.0]], requires_grad: true}
model:
  inputs: [a, b]
  forward: |
    pa = a * 2
    q = b * 3
    return pa + q.t()
loss: "sum(y * y)"
hooks:
  - {tensor: q, does: "grad[0, 1] = 100"}
"""


def test_write_through_a_transposed_view_reaches_the_other_branch():
    a = torch.tensor([[1.0, 2.0], [3.0, -1.0]], requires_grad=True)
    b = torch.tensor([[1.0, -1.0], [0.5, 2.0]], requires_grad=True)
    pa, q = a * 2, b * 3

    def hook(g):
        g[0, 1] = 100
    q.register_hook(hook)
    y = pa + q.t()
    (y * y).sum().backward()
    v = solve(VIEW)
    assert same(v.grads["a"], a.grad) and same(v.grads["b"], b.grad)
    assert fl(v.grads["a"])[1, 0] == 100 * 2     # q's write at [0, 1] is pa's gradient at [1, 0]


# 9. cat's pieces are narrows of its gradient: a write through one reaches the gradient another
# branch still holds; a piece laid out as its input becomes .grad itself (a view of that gradient)
CAT = """
name: cat
inputs:
  x: {value: [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], requires_grad: true}
  a: {value: [[1.0, -1.0], [0.5, 0.25]], requires_grad: true}
  b: {value: [[3.0, 1.0]], requires_grad: true}
targets:
  w: [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]
model:
  inputs: [x, a, b]
  forward: |
    m = x * 1
    return m + torch.cat([a, b])
loss: "sum(y * w)"
hooks:
  - {tensor: b, does: "grad.mul_(0.5)"}
  - {tensor: m, does: "grad.mul_(10)"}
"""


def test_write_through_a_cat_piece_reaches_the_gradient_it_narrows():
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], requires_grad=True)
    a = torch.tensor([[1.0, -1.0], [0.5, 0.25]], requires_grad=True)
    b = torch.tensor([[3.0, 1.0]], requires_grad=True)
    w = torch.tensor([[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]])
    m = x * 1
    b.register_hook(inplace(lambda g: g.mul_(0.5)))
    m.register_hook(inplace(lambda g: g.mul_(10)))
    ((m + torch.cat([a, b])) * w).sum().backward()
    v = solve(CAT)
    for name, t in (("x", x), ("a", a), ("b", b)):
        assert same(v.grads[name], t.grad), name
    # b's write halved row 2 of the gradient m's hook then scaled: a.grad and b.grad (taken as
    # views of that gradient) were scaled with it
    assert fl(v.grads["x"])[2, 1] == 5 * 0.5 * 10 and fl(v.grads["a"])[0, 1] == 10


# 9b. stack's pieces of a transposed gradient are selects of it, laid out after it: y * y of the
# transposed y hands on a transposed gradient (TensorIterator follows y's strides), TBackward0
# transposes it back (row-major), so pb's piece is a row-major select of the storage pa's
# piece is another select of: the write (once refused) stays in pb's elements
def test_write_through_a_stack_piece_of_a_transposed_gradient():
    a = torch.tensor([1.0, 2.0], requires_grad=True)
    b = torch.tensor([1.0, -1.0], requires_grad=True)
    pa, pb = a * 2, b * 3
    pb.register_hook(inplace(lambda g: g.mul_(100)))
    seen = []
    pa.register_hook(lambda g: seen.append(g.clone()))
    y = torch.stack([pa, pb]).t()
    (y * y).sum().backward()
    text = SHARED.replace("    return pa + pb", "    return torch.stack([pa, pb]).t()")
    text = text.replace('  - {tensor: pa, does: "grad.mul_(10)"}\n', '  - {tensor: pa, label: sees}\n')
    v = solve(text)
    assert same(v.grads["a"], a.grad) and same(v.grads["b"], b.grad)
    call = [c for c in v.hook_calls if c.label == "sees"][0]
    assert np.allclose(fl(call.args["grad"]), seen[0].numpy())


# 9c. a post hook on the loss's node zeroing sum's expanded gradient zeroes the ones(()) the
# engine started from: every element is that one element (zero_ checks no overlap)
def test_zeroing_the_loss_nodes_expanded_gradient_zeroes_the_root_gradient():
    x = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = x * 2
    loss = y.sum()
    seen = []
    loss.grad_fn.register_hook(inplace(lambda gi, go: gi[0].zero_()))
    loss.grad_fn.register_hook(lambda gi, go: seen.append(go[0].clone()))
    loss.backward()
    v = solve("""
name: zero_root
inputs:
  x: {value: [1.0, -2.0, 3.0], requires_grad: true}
model:
  inputs: [x]
  forward: "x * 2"
loss: "sum(y)"
hooks:
  - {node: loss, kind: post, does: "grad_inputs[0].zero_()"}
  - {node: loss, kind: post, label: sees}
""")
    assert same(v.grads["x"], x.grad) and float(seen[0]) == 0.0
    call = [c for c in v.hook_calls if c.label == "sees"][0]
    assert fl(call.args["grad_outputs"][0]).tolist() == 0.0


# 9d. a custom Function whose backward returns grad_output hands on that tensor itself
def test_custom_function_returning_grad_output_hands_on_the_tensor():
    class PassF(torch.autograd.Function):
        @staticmethod
        def forward(ctx, u):
            return u * 2

        @staticmethod
        def backward(ctx, g):
            return g
    u = torch.tensor([1.0, -1.0], requires_grad=True)
    y = PassF.apply(u)
    same_tensor = []
    y.grad_fn.register_hook(lambda gi, go: same_tensor.append(gi[0] is go[0]))
    y.grad_fn.register_hook(inplace(lambda gi, go: gi[0].mul_(3)))
    seen = []
    y.grad_fn.register_hook(lambda gi, go: seen.append(go[0].clone()))
    (y * y).sum().backward()
    v = solve("""
name: passf
inputs:
  x: {value: [1.0, -1.0], requires_grad: true}
model:
  inputs: [u]
  forward: "u * 2"
  function:
    name: PassF
    backward:
      u: "grad_output"
loss: "sum(y * y)"
hooks:
  - {node: model, kind: post, does: "grad_inputs[0].mul_(3)"}
  - {node: model, kind: post, label: sees}
""")
    assert same_tensor == [True]
    assert same(v.grads["x"], u.grad)
    call = [c for c in v.hook_calls if c.label == "sees"][0]
    assert np.allclose(fl(call.args["grad_outputs"][0]), seen[0].numpy())


# 10. every answer says what the write did: the report, the JSON's leaf_values, the LaTeX document
def test_latex_and_report_say_the_hook_writes_in_place():
    from adjoint.render.latex import render_document
    for text in (CLIP, SGD):
        pred = adjoint.loads(text).solve()
        tex = render_document(pred)
        assert "writes in place" in tex and "PyTorch ignores" not in tex
        assert "ignores the change" not in render(pred, width=200)
    tex = render_document(adjoint.loads(SGD).solve())
    assert "leaf lin.weight" in tex


# 11. an in-place op reading an unchecked alias of what it writes: where every such read comes
# before its place is written in TensorIterator's order (adjoint.engine.inplace.iteration_rank),
# PyTorch's result is the one computed from the old values
def test_alias_reads_before_writes_in_loop_order_read_old_values():
    from adjoint.engine.loop_order import iteration_rank
    accepted = 0
    layouts = [((2, 4), (1, 3)), ((4, 2), (3, 1)), ((2, 2, 2), (1, 6, 3)), ((2, 2, 2), (6, 1, 3)),
               ((3, 2), (1, 4)), ((2, 3), (5, 1))]
    for shape, strides in layouts:
        span = 1 + sum((n - 1) * s for n, s in zip(shape, strides))
        for t_off in range(0, 3):
            for o_off in range(0, 3):
                for o_strides in (strides, tuple(reversed(strides)) if len(set(shape)) == 1 else strides):
                    size = span + 4
                    base = torch.arange(1.0, size + 1, dtype=torch.float64) * 1.5
                    t = base.as_strided(shape, strides, t_off)
                    o = base.as_strided(shape, o_strides, o_off)
                    addr = lambda st, off: off + sum(np.arange(n).reshape([-1 if k == d else 1 for k in range(len(shape))]) * s
                                                     for d, (n, s) in enumerate(zip(shape, st)))
                    w, r = np.broadcast_to(addr(strides, t_off), shape), np.broadcast_to(addr(o_strides, o_off), shape)
                    rank = iteration_rank(shape, [strides, o_strides])
                    writer = dict(zip(w.reshape(-1).tolist(), rank.reshape(-1).tolist()))
                    ok = all(writer.get(a, -1) == -1 or a == wa or writer[a] > k
                             for a, wa, k in zip(r.reshape(-1).tolist(), w.reshape(-1).tolist(), rank.reshape(-1).tolist()))
                    if not ok:
                        continue
                    expected = t.clone() * o.clone()
                    t.mul_(o)
                    assert torch.equal(t, expected), (shape, strides, t_off, o_strides, o_off)
                    accepted += 1
    assert accepted > 20


# a squeeze that squeezed nothing hands on the gradient itself (unsqueeze_to's ``result = grad``)
SQUEEZE_NOTHING = """
name: squeeze-nothing
inputs:
  x: {value: [[0.5, -1.0], [2.0, 0.3]], requires_grad: true}
  z: {value: [[1.5, 2.0], [-2.0, 0.7]], requires_grad: true}
model:
  inputs: [x, z]
  forward: |
    b = z * 2
    h = x.SQUEEZE
    s = h + b
    return s * s
loss: "sum(y * y)"
hooks:
  - {tensor: b, does: "grad.mul_(10)"}
"""


@pytest.mark.parametrize("squeeze, stolen", [("squeeze()", False), ("squeeze(0)", False), ("squeeze((0, 1))", False),
                                             ("unsqueeze(0).squeeze(0)", True)])
def test_a_squeeze_that_squeezes_nothing_hands_on_the_gradient_itself(squeeze, stolen):
    """torch 2.13: SqueezeBackward's gradient for x is the AddBackward0 gradient b's branch also
    holds (``gi[0] is go[0]``), so AccumulateGrad copies it and b's later write (x10) misses
    x.grad = [[171.5, 108], [-32, 19.652]]; a squeeze of a size-1 dim hands on a view, which
    AccumulateGrad steals, and the write reaches x.grad. z.grad is 2 * the written gradient."""
    run = solve(SQUEEZE_NOTHING.replace("SQUEEZE", squeeze))
    g = np.array([[171.5, 108.0], [-32.0, 19.652]])
    np.testing.assert_allclose(fl(run.grads["x"]), g * 10 if stolen else g, rtol=1e-9)
    np.testing.assert_allclose(fl(run.grads["z"]), g * 20, rtol=1e-9)


@pytest.mark.parametrize("repeat, same", [("repeat(1, 1)", True), ("repeat(1, 1, 1)[0]", False)])
def test_repeat_of_ones_hands_on_the_gradient_itself(repeat, same):
    """torch 2.13: x.repeat(1, 1)'s RepeatBackward0 returns its incoming gradient (the one b's
    branch also holds); x's hook runs first and writes it (x10), so b's branch reads it written:
    z.grad = 2 * 10 * [[171.5, 108], [-32, 19.652]]. repeat(1, 1, 1) sums the added dim away (a
    new tensor): z.grad = 2 * [[171.5, ...]]."""
    text = SQUEEZE_NOTHING.replace("SQUEEZE", repeat).replace('{tensor: b, does: "grad.mul_(10)"}',
                                                               '{tensor: x, does: "grad.mul_(10)"}')
    run = solve(text)
    g = np.array([[171.5, 108.0], [-32.0, 19.652]])
    np.testing.assert_allclose(fl(run.grads["x"]), g * 10, rtol=1e-9)
    np.testing.assert_allclose(fl(run.grads["z"]), g * (20 if same else 2), rtol=1e-9)
