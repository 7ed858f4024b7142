"""Torch references for the ports of the hook and engine tests of PyTorch's
test/test_autograd.py (see references.py): one function per problem file, named after it,
doing by hand in real torch (float64) what PyTorch's test does, with the problem file's
fixed values."""

from __future__ import annotations

import contextlib

import torch
import torch.nn as nn

from capture import Log, error, fired, grads, leaf, observation, raising, snap, tensor
from ref_common import linear, param_grads


# ============================================================================= test_autograd.py
# ----------------------------------------------------------------------------- engine, exec_info, hook order


def test_grad_nonleaf_many_outputs():
    log = Log()
    x = leaf([[0.5, -1], [2, 0.25], [-1.5, 1], [0.75, -0.5]])
    a, b = x.chunk(2)
    x.register_hook(log.tensor_hook(0, "x"))
    go = tensor([[1, -2], [0.5, 3]])
    grad_a, grad_b = torch.autograd.grad((a + 2 * b), [a, b], grad_outputs=go, create_graph=True)
    return observation(log, grads(x=x), returned={"a": snap(grad_a), "b": snap(grad_b)})


def test_grad_nonleaf_register_hook():
    log = Log()
    x = leaf([0.5, -1, 2, 0.25, -3])
    x_list = x.unbind()
    results = []
    hook = log.tensor_hook(0, "x0")
    x_list[0].register_hook(lambda g: (results.append(g), hook(g))[1])
    with log.backward_pass(lambda: grads(x=x)):
        x_list[0].backward()
    assert torch.equal(results[-1], torch.tensor(1.0, dtype=torch.float64))
    expected = torch.tensor([1.0, 0, 0, 0, 0], dtype=torch.float64)
    assert torch.equal(x.grad, expected) and x_list[0].grad is None
    for i in range(1, 5):
        with log.backward_pass(lambda: grads(x=x)):
            x_list[i].backward()
        assert results[-1] is None
        expected[i] = 1.0
        assert torch.equal(x.grad, expected) and x_list[i].grad is None
    return observation(log, grads(x=x))


def test_post_accumulate_grad_hook_multiple_hooks():
    log = Log()

    def hook1(tensor):
        tensor.sub_(tensor.grad)

    def hook2(tensor):
        tensor.mul_(4.0)

    tensor = leaf([0.5, -1, 2])
    tensor_ref = tensor.detach().clone()
    tensor.register_post_accumulate_grad_hook(log.post_acc_hook(0, "t", fn=hook1))
    tensor.register_post_accumulate_grad_hook(log.post_acc_hook(1, "t", fn=hook2))
    sum = tensor.sum()
    sum.backward()
    assert torch.equal(4.0 * (tensor_ref - 1.0), tensor.detach())   # both hooks ran, in order
    return observation(log, grads(t=tensor), leaf_values={"t": snap(tensor)})


def test_post_accumulate_grad_hook_multiple_tensors():
    log = Log()

    def hook(tensor):
        tensor.sub_(tensor.grad)

    tensor1, tensor2 = leaf([0.5, -1, 2]), leaf([1, 0.25, -0.5, 3, -2])
    tensor1_ref, tensor2_ref = tensor1.detach().clone(), tensor2.detach().clone()
    tensor1.register_post_accumulate_grad_hook(log.post_acc_hook(0, "tensor1", fn=hook))
    tensor2.register_post_accumulate_grad_hook(log.post_acc_hook(1, "tensor2", fn=hook))
    every = lambda: grads(tensor1=tensor1, tensor2=tensor2)   # noqa: E731
    with log.backward_pass(every):
        tensor1.sum().backward()
    with log.backward_pass(every):
        tensor2.sum().backward()
    assert torch.equal(tensor1_ref - 1.0, tensor1.detach()) and torch.equal(tensor2_ref - 1.0, tensor2.detach())
    return observation(log, every(), leaf_values={"tensor1": snap(tensor1), "tensor2": snap(tensor2)})


def test_post_accumulate_grad_hook_ordering():
    log = Log()
    tensor = leaf([0.5, -1, 2])

    def pre_hook(grad):
        return grad.sub(2.0)

    def acc_grad_node_pre_hook(grad_out):
        return (grad_out[0].div(5.0),)

    def post_acc_grad_hook(tensor):
        tensor.grad.add_(0.5)

    def acc_grad_node_post_hook(grad_in, grad_out):
        tensor.grad = grad_out[0].mul(10)

    acc_grad = tensor.view_as(tensor).grad_fn.next_functions[0][0]
    tensor.register_hook(log.tensor_hook(0, "t", fn=pre_hook))
    acc_grad.register_prehook(log.node_pre_hook(1, "t", fn=acc_grad_node_pre_hook))
    tensor.register_post_accumulate_grad_hook(log.post_acc_hook(2, "t", fn=post_acc_grad_hook))
    acc_grad.register_hook(log.node_post_hook(3, "t", fn=acc_grad_node_post_hook))
    tensor.sum().backward()
    assert torch.equal(torch.tensor([3.0, 3.0, 3.0], dtype=torch.float64), tensor.grad)
    return observation(log, grads(t=tensor))


def test_prehook_ordering():
    log = Log()
    a = leaf(1.0)
    b = a.clone()
    double = lambda gs: tuple(g * 2 for g in gs)      # noqa: E731  (hook2 of the test)
    triple = lambda g: g * 3                          # noqa: E731  (hook1 of the test)
    b.grad_fn.register_prehook(log.node_pre_hook(0, "b", fn=double))
    b.register_hook(log.tensor_hook(1, "b", fn=triple))
    b.grad_fn.register_prehook(log.node_pre_hook(2, "b", fn=double))
    acc = b.grad_fn.next_functions[0][0]
    a.register_hook(log.tensor_hook(3, "a", fn=triple))
    acc.register_prehook(log.node_pre_hook(4, "a", fn=double))
    a.register_hook(log.tensor_hook(5, "a", fn=triple))
    loss = b.sum()

    def state():
        return lambda: grads(a=a, b=b)
    with log.backward_pass(state()):
        loss.backward(retain_graph=True)
    returned = {}
    with log.backward_pass(state(), lambda: returned):
        (ga,) = torch.autograd.grad(loss, inputs=(a,), retain_graph=True)
        returned["a"] = snap(ga)
    with log.backward_pass(state()):
        loss.backward(inputs=(b,))
    tensor_hooks, node_prehooks = {1, 3, 5}, {0, 2, 4}     # the test logs 1 and 2 for these
    logged = [[1 if h in tensor_hooks else 2 for h in fired(p["hook_calls"])] for p in log.passes]
    assert logged == [[1, 2, 2, 1, 1, 2], [1, 2, 2, 1, 1], [1, 2, 2]] and b.grad.item() == 3
    return observation(log, grads(a=a, b=b))


def test_retains_grad_can_always_observe_tensor_prehook():
    out = {}
    for variant in ("hook_retain_hook", "retain_hook"):
        log = Log()
        a = leaf(1.0)
        b = a.clone()
        if variant == "hook_retain_hook":
            b.register_hook(log.tensor_hook(0, "b", fn=lambda g: g * 2))
            b.retain_grad()
            b.register_hook(log.tensor_hook(2, "b", fn=lambda g: g * 2))
        else:
            b.retain_grad()
            b.register_hook(log.tensor_hook(1, "b", fn=lambda g: g * 2))
        b.clone().backward()
        out[variant] = observation(log, grads(a=a, b=b))
    return out


def test_accumulate_grad_posthooks_can_observe_tensor_prehook():
    log = Log()
    a = leaf(1.0)
    b = a.clone()
    acc = b.grad_fn.next_functions[0][0]
    acc.register_hook(log.node_post_hook(0, "a"))
    acc.register_prehook(log.node_pre_hook(1, "a"))
    a.register_hook(log.tensor_hook(2, "a", fn=lambda g: g * 2))
    b.backward()
    return observation(log, grads(a=a))


def test_accumulate_grad_posthooks_should_not_execute():
    log = Log()
    a = leaf(1.0)
    a.register_hook(log.tensor_hook(0, "a", fn=raising("")))
    b = leaf(1.0)
    c = a.clone()
    acc = c.grad_fn.next_functions[0][0]
    acc.register_hook(log.node_post_hook(1, "a", fn=raising("")))
    out = a + b + c
    out.sum().backward(inputs=[b])
    return observation(log, grads(a=a, b=b))


def test_hook_edge_case_when_called_with_grad():
    log = Log()
    a = leaf(1.0)
    b = a * 2
    c = b * 2
    a.register_hook(log.tensor_hook(0, "a"))
    b.register_hook(log.tensor_hook(1, "b"))
    acc = b.grad_fn.next_functions[0][0]
    acc.register_hook(log.node_post_hook(2, "a"))
    acc.register_prehook(log.node_pre_hook(3, "a"))
    b.grad_fn.register_hook(log.node_post_hook(4, "b"))
    b.grad_fn.register_prehook(log.node_pre_hook(5, "b"))

    def state():
        return lambda: grads(a=a, b=b)
    for inputs in ((b,), (a, b)):
        returned = {}
        with log.backward_pass(state(), lambda: returned):
            got = torch.autograd.grad(c, inputs=inputs, retain_graph=True)
            returned.update({name: snap(g) for name, g in zip(("b",) if len(inputs) == 1 else ("a", "b"), got)})
    with log.backward_pass(state()):
        c.backward(retain_graph=True)
    with log.backward_pass(state()):
        c.backward(inputs=(a, b), retain_graph=True)
    counts = [[sum(c["kind"] == k for c in p["hook_calls"]) for k in ("hook", "post", "pre")] for p in log.passes]
    assert counts == [[1, 0, 0], [2, 1, 1], [2, 2, 2], [2, 2, 2]]
    return observation(log, grads(a=a, b=b))


def test_grad_unreachable():
    return {"allow_unused": _grad_unreachable(True), "not_allowed": _grad_unreachable(False)}


def _grad_unreachable(allow: bool):
    log = Log()
    x, y = leaf([1.0]), leaf([1.0])
    z = x * 2  # noqa: F841 (x and y get their grad accumulators)
    w = y * 2  # noqa: F841
    fresh = leaf([1.0])   # the test's new z: no grad accumulator
    if not allow:
        try:
            torch.autograd.grad(x * 2, [x, y], allow_unused=False)
        except RuntimeError as e:
            assert "Set allow_unused=True" in str(e)
            return observation(log, error=error(e, "backward", log))
        raise AssertionError("PyTorch did not raise")
    first, second = {}, {}
    state = lambda: grads(x=x, y=y, z=fresh)  # noqa: E731
    with log.backward_pass(state, lambda: first):
        grad_x, grad_y = torch.autograd.grad(x * 2, [x, y], allow_unused=True)
        first.update(x=snap(grad_x), y=snap(grad_y))
    assert torch.equal(grad_x, x * 2) and grad_y is None
    with log.backward_pass(state, lambda: second):
        grad_x, grad_z = torch.autograd.grad(x * 2, [x, fresh], allow_unused=True)
        second.update(x=snap(grad_x), z=snap(grad_z))
    assert torch.equal(grad_x, x * 2) and grad_z is None
    return observation(log, grads(x=x, y=y, z=fresh), returned=second)


class _Identity(torch.autograd.Function):
    """An identity custom Function returning its input as-is (MyFunc / Function in the tests)."""

    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, grad):
        return grad


def _identity_function(name: str):
    """_Identity under the class name the test gives it (the node is NAMEBackward)."""
    return type(name, (_Identity,), {})


def test_grad_unreachable_discovery():
    return {name: _grad_unreachable_discovery(name) for name in ("grad", "grad_two_inputs", "backward_inputs")}


def _grad_unreachable_discovery(scenario: str):
    log = Log()
    MyFunc = _identity_function("MyFunc")
    u = leaf([0.5])
    y = leaf([-1])
    z = leaf([0.25])
    x = MyFunc.apply(u * 2)
    x.grad_fn.register_prehook(log.node_pre_hook(0, "f", fn=raising("This node should not be executed!")))
    state = lambda: grads(u=u, y=y, z=z)  # noqa: E731
    returned = {}
    with log.backward_pass(state, lambda: returned):
        if scenario == "grad":
            (gY,) = torch.autograd.grad(x, (y,), allow_unused=True)
            assert gY is None
            returned["y"] = snap(gY)
        elif scenario == "grad_two_inputs":
            (gY, gZ) = torch.autograd.grad(x + z, (y, z), allow_unused=True)
            assert gY is None and gZ is not None
            returned.update(y=snap(gY), z=snap(gZ))
        else:
            torch.autograd.backward(x, inputs=(y,))
            assert y.grad is None
    out = observation(log, state())
    if returned:
        out["returned"] = returned
    return out


def test_hooks__tensor_hooks():
    log = Log()
    x = leaf([[1, 1], [1, 1]])
    y = leaf([[4, 4], [4, 4]])
    ones = tensor([[1, 1], [1, 1]])
    z = x ** 2 + x * 2 + x * y + y
    x.register_hook(log.tensor_hook(0, "x"))
    test = z.register_hook(log.tensor_hook(1, "z"))

    def state():
        return lambda: grads(x=x, y=y)
    with log.backward_pass(state()):
        z.backward(ones, retain_graph=True)
    test2 = z.register_hook(log.tensor_hook(2, "z"))
    with log.backward_pass(state()):
        z.backward(ones, retain_graph=True)
    test2.remove()
    with log.backward_pass(state()):
        z.backward(ones, retain_graph=True)
    test.remove()
    z.register_hook(log.tensor_hook(3, "z", fn=lambda g: g.mul(2)))
    with torch.no_grad():
        y.grad.zero_()
    with log.backward_pass(state()):
        z.backward(ones, retain_graph=True)
    assert torch.equal(y.grad, (x.detach() + 1) * 2)
    y.register_hook(log.tensor_hook(4, "y", fn=lambda g: g.mul(2)))
    with torch.no_grad():
        y.grad.zero_()
    with log.backward_pass(state()):
        z.backward(ones)
    assert torch.equal(y.grad, (x + 1) * 4)
    return observation(log, grads(x=x, y=y))


def _mul2(use_custom_function: bool):
    if use_custom_function:
        class Mul2(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, gO):
                return gO * 2
        return Mul2.apply
    return lambda x: x * 2


def _grad_fn_prehooks(use_custom_function: bool, target: str) -> dict:
    mul2 = _mul2(use_custom_function)
    out = {}
    log = Log()
    a = leaf([1.0])
    b = mul2(a)
    double = lambda go: (go[0] * 2,)                  # noqa: E731
    b.grad_fn.register_hook(log.node_post_hook(0, target, fn=lambda gi, go: gi))
    b.grad_fn.register_hook(log.node_post_hook(1, target, fn=lambda gi, go: gi))
    b.grad_fn.register_prehook(log.node_pre_hook(2, target, fn=double))
    b.grad_fn.register_prehook(log.node_pre_hook(3, target))
    b.grad_fn.register_prehook(log.node_pre_hook(4, target, fn=double))
    b.grad_fn.register_prehook(log.node_pre_hook(5, target, fn=double))
    b.grad_fn.register_prehook(log.node_pre_hook(6, target, fn=lambda x: x))
    b.grad_fn.register_prehook(log.node_pre_hook(7, target))
    b.sum().backward()
    assert [c["hook"] for c in log.calls if c["hook"] in (0, 1)] == [0, 1]      # post_counter 2
    assert all(c["args"]["grad_outputs"][0]["value"] == [8.0] and c["args"]["grad_inputs"][0]["value"] == [16.0]
               for c in log.calls if c["kind"] == "post")
    out["first"] = observation(log, grads(a=a))
    log = Log()
    a = leaf([[0.5, -1, 2], [0.25, 1.5, -0.5], [1, -2, 0.75]])
    b = mul2(a)
    b.grad_fn.register_prehook(log.node_pre_hook(0, target))
    b.sum().backward()
    assert torch.equal(a.grad, torch.full((3, 3), 2.0, dtype=torch.float64))
    out["returns_none"] = observation(log, grads(a=a))
    return out


def test_grad_fn_prehooks__mul2():
    return _grad_fn_prehooks(False, "b")


def test_grad_fn_prehooks__custom_function():
    return _grad_fn_prehooks(True, "mul2")


def _grad_fn_prehooks_remove_hooks(use_custom_function: bool, target: str) -> dict:
    mul2 = _mul2(use_custom_function)
    value = [[0.5, -1, 2], [0.25, 1.5, -0.5], [1, -2, 0.75]]
    out = {}
    log = Log()
    a = leaf(value)
    b = mul2(a)
    handle = b.grad_fn.register_prehook(log.node_pre_hook(0, target))
    b.grad_fn.register_prehook(log.node_pre_hook(1, target))
    handle.remove()
    b.sum().backward()
    assert fired(log.calls) == [1]
    out["removed_before"] = observation(log, grads(a=a))
    log = Log()
    a = leaf(value)
    b = mul2(a)
    handles = {}

    def prehook1(grad_output):
        handles[2].remove()
        handles[3].remove()                           # removing a removed hook is fine
    b.grad_fn.register_prehook(log.node_pre_hook(0, target, fn=prehook1))
    handles[2] = b.grad_fn.register_prehook(log.node_pre_hook(1, target))
    handles[3] = b.grad_fn.register_prehook(log.node_pre_hook(2, target))
    handles[3].remove()
    b.sum().backward()
    assert fired(log.calls) == [0, 1]                     # counter[0] == 1: handle2's hook still ran
    out["removed_during"] = observation(log, grads(a=a))
    return out


def test_grad_fn_prehooks_remove_hooks__mul2():
    return _grad_fn_prehooks_remove_hooks(False, "b")


def test_grad_fn_prehooks_remove_hooks__custom_function():
    return _grad_fn_prehooks_remove_hooks(True, "mul2")


def test_hooks_cpp():
    bn = nn.BatchNorm1d(2, affine=False, dtype=torch.float64)
    bn.eval()
    log = Log(bn)
    x = leaf([[1, 1], [1, 1]])
    z = bn(x)
    z.register_hook(log.tensor_hook(0, "model", fn=lambda g: g * 2))
    z.sum().backward()
    return observation(log, grads(x=x))


# ----------------------------------------------------------------------------- retain_grad, in-place, views


def test_retain_grad():
    log = Log()
    inp = leaf([[0.5, -1, 2]])
    h1 = inp * 3
    out = (h1 * h1).sum()
    h1.retain_grad()
    h1.retain_grad()

    def state():
        return lambda: grads(input=inp, h1=h1)
    with log.backward_pass(state()):
        out.backward(retain_graph=True)
    with log.backward_pass(state()):
        out.backward(retain_graph=True)
    inp.grad = None                                   # zero_grad (the test: input.grad.zero_())
    inp.retain_grad()
    inp.retain_grad()
    with log.backward_pass(state()):
        out.backward()
    assert torch.equal(inp.grad, inp * 18)
    return observation(log, grads(input=inp, h1=h1))


def test_retain_grad_inplace__mul():
    a0 = leaf([1.0])
    a = a0.clone()
    a.retain_grad()
    a.mul_(2)
    a.sum().backward()
    return observation(Log(), grads(a0=a0, a=a))


def test_retain_grad_inplace__mul_twice():
    a0 = leaf([1.0])
    a = a0.clone()
    a.retain_grad()
    a.mul_(2)
    a.mul_(2)
    a.sum().backward()
    return observation(Log(), grads(a0=a0, a=a))


def test_retain_grad_inplace__view():
    x0 = leaf([1.0])
    x = x0.clone()
    x.retain_grad()
    x_view = x[:]
    x_view *= 2
    x *= 2
    x.sum().backward()
    return observation(Log(), grads(x0=x0, x=x))


def test_retain_grad_inplace__base_without_grad():
    x = torch.zeros(4, dtype=torch.float64)
    r = leaf([[0.5, -1], [2, 0.25]])
    y = x.view(2, 2)
    y.add_(r)
    return observation(Log(), grads(r=r))


def test_retain_grad_inplace_over_view():
    base0 = leaf([1.0])
    base = base0.clone()
    view = base[:]
    view2 = base[:]
    view.retain_grad()
    view2.retain_grad()
    view.mul_(2)
    (view + view2).sum().backward()
    return observation(Log(), grads(base0=base0, view=view, view2=view2))


def test_tensor_hooks_inplace__once():
    log = Log()
    a = leaf([1.0])
    b = a.clone()
    b.register_hook(log.tensor_hook(0, "b", fn=lambda g: g * 2))
    b.mul_(2)
    b.register_hook(log.tensor_hook(1, "b", fn=lambda g: g * 2))
    b.sum().backward()
    assert [c["args"]["grad"]["value"] for c in log.calls] == [[1.0], [4.0]] and a.grad.tolist() == [8.0]
    return observation(log, grads(a=a))


def test_tensor_hooks_inplace__twice():
    log = Log()
    a = leaf([1.0])
    b = a.clone()
    b.register_hook(log.tensor_hook(0, "b", fn=lambda g: g * 2))
    b.mul_(2)
    b.mul_(2)
    b.sum().backward()
    return observation(log, grads(a=a))


def test_tensor_hooks_inplace_over_view():
    log = Log()
    base0 = leaf([1.0])
    base = base0.clone()
    view = base[:]
    view2 = base[:]
    view.register_hook(log.tensor_hook(0, "view", fn=raising("fn0 must not fire")))
    view2.register_hook(log.tensor_hook(1, "view2", fn=raising("fn1 must not fire")))
    view.mul_(2)
    view2.grad_fn                                     # the test refreshes view2's grad_fn explicitly
    view2.register_hook(log.tensor_hook(2, "view2"))
    (view + view2).sum().backward()
    return observation(log, grads(base0=base0))


# ----------------------------------------------------------------------------- backward(inputs=...)


def _backward_with_inputs(empty: bool) -> dict:
    log = Log()
    x = leaf([[0.5, -1], [2, 0.25]])
    y = leaf([[1, -0.5], [-2, 1.5]])

    def fn():
        return x ** 2 + y * x + y ** 2

    gradient = tensor([[1, 1], [1, 1]])
    x_grad_expected = 2 * x.detach() + y.detach()
    y_grad_expected = x.detach() + 2 * y.detach()

    @torch.no_grad()
    def reset_grad():
        x.grad.zero_()
        y.grad.zero_()

    zeros = torch.zeros(2, 2, dtype=torch.float64)
    every = lambda: grads(x=x, y=y)   # noqa: E731
    passes = contextlib.nullcontext if empty else (lambda: log.backward_pass(every))   # an error answer has no passes
    with passes():
        torch.autograd.backward(fn(), gradient, inputs=[x, y])
    assert torch.equal(x.grad, x_grad_expected) and torch.equal(y.grad, y_grad_expected)
    reset_grad()
    with passes():
        torch.autograd.backward(fn(), gradient, inputs=[x])
    assert torch.equal(x.grad, x_grad_expected) and torch.equal(y.grad, zeros)
    reset_grad()
    with passes():
        torch.autograd.backward(fn(), gradient, inputs=[y])
    assert torch.equal(y.grad, y_grad_expected) and torch.equal(x.grad, zeros)
    reset_grad()
    with passes():
        torch.autograd.backward(fn(), gradient, inputs=y)
    assert torch.equal(y.grad, y_grad_expected) and torch.equal(x.grad, zeros)
    if not empty:
        return observation(log, every())
    reset_grad()
    try:
        torch.autograd.backward(fn(), gradient, inputs=[])
    except RuntimeError as e:   # "cannot be empty"
        return observation(log, error=error(e, "backward", log))
    raise AssertionError("PyTorch did not raise")


def test_backward_with_inputs():
    return {"inputs_listed": _backward_with_inputs(False), "inputs_empty": _backward_with_inputs(True)}


def test_backward_with_scalar_input():
    x = leaf(0.75)
    out = x ** 2
    out.backward(inputs=x)
    return observation(Log(), grads(x=x))


def test_backward_with_nonleaf_inputs():
    log = Log()
    x = leaf([[0.5, -1], [2, 0.25]])
    x_nonleaf = x * 1
    y = leaf([[1, -0.5], [-2, 1.5]])
    z = leaf([[0.25, 0.5], [-1, 3]])
    out = x_nonleaf ** 2 + y * x_nonleaf + y ** 2
    ones = tensor([[1, 1], [1, 1]])

    def state():
        return lambda: grads(x=x, y=y, z=z, x_nonleaf=x_nonleaf)
    with log.backward_pass(state()):
        out.backward(ones, create_graph=True, inputs=[x, y, x_nonleaf])
    assert torch.equal(y.grad, x + 2 * y) and torch.equal(x.grad, 2 * x + y)
    assert torch.equal(x_nonleaf.grad, 2 * x_nonleaf + y)
    with log.backward_pass(state()):
        out.backward(ones, create_graph=True, inputs=[z])
    assert z.grad is None
    return observation(log, grads(x=x, y=y, z=z, x_nonleaf=x_nonleaf))


def _logging_hooks(log, **tensors):
    """register_logging_hooks of test_current_graph_task_execution_order, in order."""
    for i, (name, t) in enumerate(tensors.items()):
        t.register_hook(log.tensor_hook(i, name))


def test_current_graph_task_execution_order__sequence_nr():
    log = Log()
    a, b = leaf(1.0), leaf(2.0)
    c = b.sin()
    d = a.cos()
    out = c * d
    _logging_hooks(log, a=a, b=b, c=c, d=d, out=out)
    out.backward()
    return observation(log, grads(a=a, b=b))


def test_current_graph_task_execution_order__accumulate_grad_two_inputs():
    log = Log()
    a = leaf(1.0)
    b = a.sin()
    c = a.cos()
    out = b * c
    _logging_hooks(log, a=a, b=b, c=c, out=out)
    out.backward()
    return observation(log, grads(a=a))


def test_current_graph_task_execution_order__next_node_none():
    log = Log()
    a = leaf(1.0)
    b = a * 2
    out = b.sin()
    _logging_hooks(log, a=a, b=b, out=out)
    out.backward()
    return observation(log, grads(a=a))


def test_backward_hook_relative_ordering():
    class MyModule(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = linear([[1, -0.5], [0.25, 2]], [0.5, -1])

        def forward(self, x):
            return self.linear(x)

    x = leaf([[0.5, -1], [2, 0.25]])
    module = MyModule()
    log = Log(module)
    order = []
    module.register_full_backward_hook(log.module_hook(0, "full_backward", "model", fn=lambda *_: order.append(
        "module_full_backward_hook_BackwardHookFunctionBackward0")))
    # the file's target for the node the test's walk numbers count: the tensor whose grad_fn it is
    # (a leaf: its AccumulateGrad), or the tensor its next: starts from
    targets = {1: "loss", 2: "model", 3: "linear", 4: "linear.bias", 5: "linear", 6: "x", 7: "linear",
               8: "linear.weight"}

    def make_pre_hook(id, count):
        return log.node_pre_hook(2 * count - 1, targets[count], fn=lambda _: order.append(f"pre_hook_{id}"))

    def make_post_hook(id, count):
        return log.node_post_hook(2 * count, targets[count], fn=lambda _1, _2: order.append(f"post_hook_{id}"))

    count = 0

    def register_hooks_on_all_nodes(nodes):
        nonlocal count
        for node, _ in nodes:
            count += 1
            id = f"{node.name()}_{count}"
            node.register_prehook(make_pre_hook(id, count))
            node.register_hook(make_post_hook(id, count))
            register_hooks_on_all_nodes(node.next_functions)

    loss = module(x).sum()
    register_hooks_on_all_nodes(((loss.grad_fn, None),))

    def make_tensor_pre_hook(id, hook, target):
        return log.tensor_hook(hook, target, fn=lambda _: order.append(f"tensor_pre_hook_{id}"))

    def make_post_acc_grad_hook(id, hook, target):
        return log.post_acc_hook(hook, target, fn=lambda _: order.append(f"post_acc_grad_hook_{id}"))

    x.register_hook(make_tensor_pre_hook("x", 17, "x"))
    module.linear.weight.register_hook(make_tensor_pre_hook("weight", 18, "linear.weight"))
    module.linear.bias.register_hook(make_tensor_pre_hook("bias", 19, "linear.bias"))
    x.register_post_accumulate_grad_hook(make_post_acc_grad_hook("x", 20, "x"))
    module.linear.weight.register_post_accumulate_grad_hook(make_post_acc_grad_hook("weight", 21, "linear.weight"))
    module.linear.bias.register_post_accumulate_grad_hook(make_post_acc_grad_hook("bias", 22, "linear.bias"))
    loss.backward()
    expected_order = [
        "pre_hook_SumBackward0_1", "post_hook_SumBackward0_1",
        "pre_hook_BackwardHookFunctionBackward_2", "post_hook_BackwardHookFunctionBackward_2",
        "pre_hook_AddmmBackward0_3", "post_hook_AddmmBackward0_3",
        "tensor_pre_hook_bias", "pre_hook_torch::autograd::AccumulateGrad_4", "post_acc_grad_hook_bias",
        "post_hook_torch::autograd::AccumulateGrad_4",
        "pre_hook_TBackward0_7", "post_hook_TBackward0_7",
        "tensor_pre_hook_weight", "pre_hook_torch::autograd::AccumulateGrad_8", "post_acc_grad_hook_weight",
        "post_hook_torch::autograd::AccumulateGrad_8",
        "pre_hook_BackwardHookFunctionBackward_5", "module_full_backward_hook_BackwardHookFunctionBackward0",
        "post_hook_BackwardHookFunctionBackward_5",
        "tensor_pre_hook_x", "pre_hook_torch::autograd::AccumulateGrad_6", "post_acc_grad_hook_x",
        "post_hook_torch::autograd::AccumulateGrad_6",
    ]
    assert order == expected_order, order
    return observation(log, param_grads(module, x=x))


def test_reentrant_with_non_leaf_variable_hook():
    log = Log()
    handle = None
    param = leaf([0.5, -1, 2])

    def manual_increase_gradient(grad):
        handle.remove()
        # Add some sort of gradient penalty by directly updating the gradients
        with torch.enable_grad():
            g = grad.detach().requires_grad_()
            out = ((g * 2) + 5).sum()
            out.backward()
        res = g.grad + grad
        return res

    # Forward pass
    tmp = param * param
    handle = tmp.register_hook(log.tensor_hook(0, "tmp", fn=manual_increase_gradient))
    loss = tmp.sum()
    # Compute the gradients
    loss.backward()
    assert torch.equal(param.grad, 6 * param.detach())
    return observation(log, grads(param=param))


def _hook_closure_cycle(use_custom_function: bool, use_tensor_hook: bool) -> dict:
    log = Log()
    a = leaf(1.0)
    if use_custom_function:
        b = _identity_function("Function").apply(a)
        target = "function"
    else:
        b = a.clone()
        target = "b"
    if use_tensor_hook:
        b.register_hook(log.tensor_hook(0, target))
    else:
        b.grad_fn.register_hook(log.node_post_hook(0, target))
    out = b.clone()
    with log.backward_pass(lambda: grads(a=a)):
        out.backward(retain_graph=True)
    with log.backward_pass(lambda: grads(a=a)):
        out.backward(retain_graph=True)
    return observation(log, grads(a=a))


def test_hook_closure_cycle__use_custom_function_true_use_tensor_hook_true():
    return _hook_closure_cycle(True, True)


def test_hook_closure_cycle__use_custom_function_true_use_tensor_hook_false():
    return _hook_closure_cycle(True, False)


def test_hook_closure_cycle__use_custom_function_false_use_tensor_hook_true():
    return _hook_closure_cycle(False, True)


def test_hook_closure_cycle__use_custom_function_false_use_tensor_hook_false():
    return _hook_closure_cycle(False, False)


def test_full_backward_hook_double_backward():
    log = Log()
    x = leaf([0.5])
    y = tensor([0.25])
    func = nn.MSELoss()
    func.register_full_backward_hook(log.module_hook(0, "full_backward", "func"))
    f = func(x, y)
    first, second = {}, {}
    with log.backward_pass(lambda: grads(x=x), lambda: first):
        (gradx_f,) = torch.autograd.grad(f, x, create_graph=True)
        first["x"] = snap(gradx_f)
    assert len(log.calls) == 1
    with log.backward_pass(lambda: grads(x=x), lambda: second):
        (gradx_x,) = torch.autograd.grad(gradx_f, x)
        second["x"] = snap(gradx_x)
    assert len(log.calls) == 1   # the second-order pass does not fire the hook
    return observation(log, grads(x=x), returned=second)


# ----------------------------------------------------------------------------- saved-tensor hooks


def test_unpack_hooks_exec_count():
    log = Log()
    pack, unpack = log.saved_tensors(0)
    x = leaf([1, 1, 1, 1])
    w = tensor([1, 1, 1, 1])
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        with log.op("MulBackward0", "model"):
            out_test = x * w
        loss = out_test.sum()
        log.name_nodes(model=out_test)
        loss.backward()
    return observation(log, grads(x=x))


def test_wrapped_number_saved_tensors_hooks():
    log = Log()
    err = raising("this hook should not be called")
    pack, unpack = log.saved_tensors(0, err, err)
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        a = leaf([0.5, -1])
        out = (a * 3).sum()
        (ga,) = torch.autograd.grad(out, (a,))
    return observation(log, grads(a=a), returned={"a": snap(ga)})


# ----------------------------------------------------------------------------- multi-grad hooks


def test_multi_grad_all_hooks():
    log = Log()
    leaves = [leaf([0.5, -1]), leaf([2, 0.25]), leaf([-1.5, 1]), leaf([0.75, -0.5])]

    class Foo(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a.clone()

        @staticmethod
        def backward(ctx, gO):
            return gO

    t1 = leaves[0].mul(2)
    t2 = Foo.apply(leaves[1])
    t3 = leaves[2].clone()
    t4 = leaves[3].clone()
    handle = torch.autograd.graph.register_multi_grad_hook((t1, t2, t3, t4), log.multi_grad_hook(0, "t1,t2,t3,t4"))
    out = t2 * t3
    loss = out.sum()

    def state():
        return lambda: grads(l1=leaves[0], l2=leaves[1], l3=leaves[2], l4=leaves[3], t1=t1, t2=t2, t3=t3, t4=t4)
    for k, inputs in enumerate(((t2, t3), (t1, t4), (t1, t3), (t1, t3))):
        if k == 3:
            handle.remove()
        with log.backward_pass(state()):
            loss.backward(inputs=inputs, retain_graph=True)
    res = [[[g is not None for g in c["args"]["grads"]] for c in p["hook_calls"]] for p in log.passes]
    assert res == [[[False, True, True, False]], [], [[False, False, True, False]], []]
    return observation(log, state()())


class MultiOutputModule(nn.Module):
    """test_multi_grad_any_hooks' MultiOutputModule: registers its hooks during forward."""

    def __init__(self, lin, register):
        super().__init__()
        self.lin = lin
        self.register = register

    def forward(self, x):
        z = self.lin(x)
        out = torch.sin(z), torch.cos(z)
        self.register(self, z, out)
        return out


def test_multi_grad_any_hooks():
    result = {}
    for variant in ("any_hooks", "removed"):
        log = Log()
        any_hook_handles = []
        hook_id = [0]

        def register(mod, z, out):
            path = "mod1" if mod is model.mod1 else "mod2"
            z.register_hook(log.tensor_hook(hook_id[0], f"{path}.z"))
            hook_id[0] += 1
            any_hook_handles.append(torch.autograd.graph.register_multi_grad_hook(
                out, log.multi_grad_hook(hook_id[0], f"{path}.s,{path}.c", mode="any"), mode="any"))
            hook_id[0] += 1

        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.mod1 = MultiOutputModule(linear([[0.5, -0.25, 1], [1, 0.5, -0.5], [-1, 0.25, 0.75]],
                                                     [0.25, -0.5, 0]), register)
                self.mod2 = MultiOutputModule(linear([[-0.5, 1, 0.25], [0.75, -1, 0.5], [0.25, 0.5, -0.25]],
                                                     [-0.25, 0.5, 1]), register)

            def forward(self, x):
                y = self.mod1(x)
                z = y[0] + y[1]
                return self.mod2(z)

        model = Model()
        out = model(tensor([[0.5, -1, 2], [0.25, 1.5, -0.5]]))
        if variant == "removed":
            for handle in any_hook_handles:
                handle.remove()
        (out[0] + out[1]).sum().backward()
        assert fired(log.calls) == ([3, 2, 1, 0] if variant == "any_hooks" else [2, 0])
        result[variant] = observation(log, param_grads(model))
    return result


# ----------------------------------------------------------------------------- multi-output custom Functions


def test_hook_none():
    class NoneGradientFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            assert ctx.needs_input_grad[0] and not ctx.needs_input_grad[1]
            return x, y

        @staticmethod
        def backward(ctx, grad_x, grad_y):
            return grad_x, None

    log = Log()
    x = leaf([[0.5, -1], [2, 0.25]])
    y = tensor([[1, -0.5], [-2, 1.5]])
    rx, ry = NoneGradientFunction.apply(x, y)
    rx.register_hook(log.tensor_hook(0, "f[0]"))
    ry.register_hook(log.tensor_hook(1, "f[1]"))
    sum(rx, ry).sum().backward()
    assert any(c["hook"] == 1 and c["args"]["grad"] is not None for c in log.calls)
    return observation(log, grads(x=x))


def test_return_leaf():
    class Identity(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            return a, a + b

        @staticmethod
        def backward(ctx, grad_a, grad_b):
            return grad_a + grad_b, grad_b

    log = Log()
    x = leaf([[0.5, -1], [2, 0.25]])
    y = leaf([[1, -0.5], [-2, 1.5]])
    q, p = Identity.apply(x, y)
    q.register_hook(log.tensor_hook(0, "f[0]"))
    (q + p + x).sum().backward()
    return observation(log, grads(x=x, y0=y))


class DoubleMul(torch.autograd.Function):
    """The tests' DoubleMul: (x * 2, x * 3), backward g1 * 2 + g2 * 3."""

    @staticmethod
    def forward(ctx, x):
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, g1, g2):
        return g1 * 2 + g2 * 3


B33 = [[0.5, -1, 2], [0.25, 1.5, -0.5], [1, -2, 0.75]]   # for torch.rand(3, 3)


def test_tensor_hooks_inplace_multiple_outputs():
    log = Log()
    b = leaf(B33)
    out1, out2 = DoubleMul.apply(b)
    out1.register_hook(log.tensor_hook(0, "out1"))
    out2.register_hook(log.tensor_hook(1, "out2"))
    out1.mul_(2)
    out1.register_hook(log.tensor_hook(2, "out1"))
    (out1 + out2 * 3).sum().backward()
    return observation(log, grads(b=b))


def test_retains_grad_inplace_multiple_outputs():
    b = leaf(B33)
    var, mean = DoubleMul.apply(b)
    var.retain_grad()
    mean.retain_grad()
    var.mul_(2)
    (var + mean).sum().backward()
    return observation(Log(), grads(b=b, var=var, mean=mean))


def test_post_accumulate_grad_hook_returns_not_none():
    log = Log()

    def bad_hook(tensor):
        return tensor.grad

    tensor = leaf([[0.5, -1, 2], [0.25, 1.5, -0.5]])
    tensor.register_post_accumulate_grad_hook(log.post_acc_hook(0, "t", fn=bad_hook))
    try:
        tensor.sum().backward()
    except RuntimeError as e:   # "hooks should return None."
        return observation(log, error=error(e, "backward", log))
    raise AssertionError("PyTorch did not raise")


# ----------------------------------------------------------------------------- torch.utils.checkpoint


def test_checkpointing_without_reentrant_parameter_used_in_an_out():
    from torch.utils.checkpoint import checkpoint
    log = Log()
    w = leaf([[0.5, -1], [2, 0.25]])
    w.register_hook(log.tensor_hook(0, "w"))
    x = leaf([[0.75, 0.5], [-0.25, 1]])
    h = w * x  # Using w outside the checkpoint
    out = checkpoint(lambda x: w * x, h, use_reentrant=False)  # Using w inside the checkpoint
    out.sum().backward()
    assert fired(log.calls) == [0]   # should only call hook once
    return observation(log, grads(w=w, x=x))


def _nested_checkpoint_same_graph(early_stop: bool):
    from torch.utils.checkpoint import checkpoint, set_checkpoint_early_stop
    log = Log()

    def fn(a):
        return a.sin().cos().sin()

    a = leaf(1.0)
    with set_checkpoint_early_stop(early_stop):
        out = checkpoint(fn, a, use_reentrant=False)
    # The hook is registered on the original graph
    out.grad_fn.next_functions[0][0].register_hook(log.node_post_hook(0, "fn.c"))
    # And backward is performed on the original graph
    out.backward()
    assert fired(log.calls) == [0]
    return observation(log, grads(a=a))


def test_nested_checkpoint_same_graph__early_stop_true():
    return _nested_checkpoint_same_graph(True)


def test_nested_checkpoint_same_graph__early_stop_false():
    return _nested_checkpoint_same_graph(False)


def _nested_checkpoint_reentrant_backwards(early_stop: bool):
    from torch.utils.checkpoint import checkpoint, set_checkpoint_early_stop
    log = Log()

    def fn(a):
        x = a.sin().cos()
        out = x.sin()
        return x, out

    def hook(*_unused_args):
        # do backward again, but skip over the part of the graph where
        # the hook was registered
        x.backward(retain_graph=True)

    a = leaf(1.0)
    a.register_hook(log.tensor_hook(1, "a"))
    with set_checkpoint_early_stop(early_stop):
        x, out = checkpoint(fn, a, use_reentrant=False)
    out.grad_fn.register_hook(log.node_post_hook(0, "out", fn=hook))
    out.backward(retain_graph=True)
    assert fired(log.calls) == [0, 1, 1]
    return observation(log, grads(a=a))


def test_nested_checkpoint_reentrant_backwards__early_stop_true():
    return _nested_checkpoint_reentrant_backwards(True)


def test_nested_checkpoint_reentrant_backwards__early_stop_false():
    return _nested_checkpoint_reentrant_backwards(False)


__all__ = [name for name in dir() if name.startswith("test_")]
