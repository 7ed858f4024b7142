"""Each worked problem in problems/, written out by hand in real PyTorch 2.13 (float64),
side by side with the exact prediction. The torch code here is deliberately independent of
adjoint's own torch side (adjoint.torchside), so it checks both."""

import warnings

import numpy as np
import pytest
from conftest import require_torch

torch = require_torch()
import torch.nn as nn  # noqa: E402 (after the check)

import adjoint

warnings.filterwarnings("ignore", category=UserWarning)
F64 = torch.float64


def f(v):
    """Prediction value (Exact, or tuple of them) as floats."""
    if v is None:
        return None
    if isinstance(v, tuple):
        return [f(x) for x in v]
    return np.array(v.floats(), dtype=float)


def close(pred, torch_value):
    if torch_value is None:
        return pred is None
    return np.allclose(pred, np.asarray(torch_value, dtype=float), rtol=1e-12, atol=1e-12)


def solve(name):
    return adjoint.load(f"problems/{name}.yaml").solve()


def t(x, grad=False):
    return torch.tensor(x, dtype=F64, requires_grad=grad)


# ----------------------------------------------------------------------------- adjoint_chain

def test_adjoint_chain_matches_torch():
    A = t([[1, -2, -1], [-2, 1, -2], [-1, -2, 1]]) / 4

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.A = nn.Parameter(A.clone())

        def forward(self, u):
            return u + self.A @ u

    model = nn.Sequential(Layer(), Layer(), Layer())
    seen = []
    for i, layer in enumerate(model):
        layer.register_full_backward_hook(lambda m, gi, go, i=i: seen.append((i, gi, go)))
    y = model(t([1, 2, -1]))
    loss = 0.5 * torch.linalg.vector_norm(y - t([0.5, -1, 2])) ** 2
    loss.backward()

    pred = solve("adjoint_chain").variants[0]
    assert close(f(pred.loss), loss.item())
    assert [h.target for h in pred.hook_calls] == ["l3", "l2", "l1"]
    for h, (i, gi, go) in zip(pred.hook_calls, seen):
        assert h.target == f"l{i + 1}"
        assert close(f(h.args["grad_output"])[0], go[0].detach())
        if gi[0] is None:
            assert h.args["grad_input"] == (None,)
        else:
            assert close(f(h.args["grad_input"])[0], gi[0].detach())
    for i, layer in enumerate(model):
        assert close(f(pred.grads[f"l{i + 1}.A"]), layer.A.grad)
    # the recursion: l2's grad_output is l3's grad_input (lambda_i = (I + A)^T lambda_{i+1})
    assert pred.hook_calls[0].args["grad_input"][0].strings() == pred.hook_calls[1].args["grad_output"][0].strings()


# ----------------------------------------------------------------------------- tensor_hooks

@pytest.mark.parametrize("variant, factor", [("observe", 1), ("doubling", 2), ("no_effect", 1)])
def test_tensor_hooks_by_hand(variant, factor):
    """o = w * (x + y): do/dz = w = 4, so x.grad = y.grad = 4 * factor; w.grad = z = 5."""
    v = solve("tensor_hooks").variant(variant)
    (call,) = v.hook_calls
    assert call.args["grad"].strings() == "4"
    assert v.grads["x"].strings() == str(4 * factor)
    assert v.grads["y"].strings() == str(4 * factor)
    assert v.grads["w"].strings() == "5"


def test_tensor_hook_rebinding_is_ignored_by_torch():
    x, y, w = t(2., True), t(3., True), t(4., True)
    z = x + y

    def rebinds(grad):
        grad = grad * 2  # noqa: F841 - the point: no effect
    z.register_hook(rebinds)
    (w * z).backward()
    v = solve("tensor_hooks").variant("no_effect")
    assert close(f(v.grads["x"]), x.grad) and close(f(v.grads["w"]), w.grad)


# ----------------------------------------------------------------------------- multi_hooks

def _multi(remove):
    a, b, d = t(2., True), t(3., True), t(4., True)
    calls = []
    c = a * b
    h1 = c.register_hook(lambda g: (calls.append(("c+2", g.item())), g + 2)[1])
    c.register_hook(lambda g: calls.append(("c", g.item())))
    c.retain_grad()
    d.register_hook(lambda g: (calls.append(("d+100", g.item())), g + 100)[1])
    e = c * d
    e.retain_grad()
    e.register_hook(lambda g: (calls.append(("e*2", g.item())), g * 2)[1])
    if remove == "before":
        h1.remove()
    e.backward()
    if remove == "after":
        h1.remove()
    return calls, {"a": a.grad, "b": b.grad, "d": d.grad, "c": c.grad, "e": e.grad}


@pytest.mark.parametrize("variant, remove", [("default", None), ("removed_before", "before"),
                                             ("removed_after", "after")])
def test_multi_hooks_matches_torch(variant, remove):
    calls, grads = _multi(remove)
    v = solve("multi_hooks").variant(variant)
    labels = {"e: grad * 2": "e*2", "d: grad + 100": "d+100", "c: grad + 2": "c+2", "c: observe": "c"}
    assert [(labels[h.label], float(h.args["grad"].floats())) for h in v.hook_calls] == calls
    for name, g in grads.items():
        assert close(f(v.grads[name]), g), name
    assert v.grads["e"].strings() == "2"  # retain_grad sees the hooked gradient (tutorials print 1)


# ----------------------------------------------------------------------------- mlp_relu

def _mlp(x, kind):
    fc1, fc2 = nn.Linear(3, 4).double(), nn.Linear(4, 1).double()
    with torch.no_grad():
        fc1.weight.copy_(t([[1, 2, 3], [-4, -5, -6], [7, 8, 9], [-10, -11, -12]]))
        fc1.bias.copy_(t([1, 2, 3, 4]))
        fc2.weight.copy_(t([[1, 2, 3, 4]]))
        fc2.bias.copy_(t([1]))
    model = nn.Sequential(fc1, nn.ReLU(), fc2)
    calls = []
    for name, mod in zip(["fc1", "relu", "fc2"], model):
        if kind == "forward":
            mod.register_forward_hook(lambda m, i, o, n=name: calls.append((n, i, o)))
        elif kind == "legacy":
            mod.register_backward_hook(lambda m, gi, go, n=name: calls.append((n, gi, go)))
        elif kind == "full" and not (name == "relu" and len(x.shape) == 1):
            mod.register_full_backward_hook(lambda m, gi, go, n=name: calls.append((n, gi, go)))
    y = model(x)
    y.backward(torch.ones_like(y))
    return calls, x.grad, fc1.weight.grad


@pytest.mark.parametrize("variant, shape1d, kind", [("forward", False, "forward"), ("legacy", False, "legacy"),
                                                    ("full", False, "full"), ("vector_legacy", True, "legacy"),
                                                    ("vector_full", True, "full")])
def test_mlp_relu_matches_torch(variant, shape1d, kind):
    x = t([1, 1, 1] if shape1d else [[1, 1, 1]], True)
    calls, xgrad, wgrad = _mlp(x, kind)
    v = solve("mlp_relu").variant(variant)
    assert [h.target for h in v.hook_calls] == [c[0] for c in calls]
    for h, (_, first, second) in zip(v.hook_calls, calls):
        names = ("input", "output") if kind == "forward" else ("grad_input", "grad_output")
        for argname, value in zip(names, (first, second)):
            pv = h.args[argname]
            if isinstance(value, tuple):
                assert len(pv) == len(value)
                for p_i, v_i in zip(pv, value):
                    assert close(f(p_i), None if v_i is None else v_i.detach())
            else:
                assert close(f(pv), value.detach())
    assert close(f(v.grads["x"]), xgrad)
    assert close(f(v.grads["fc1.weight"]), wgrad)


# ----------------------------------------------------------------------------- hook_order

def test_hook_order_matches_torch():
    log = []

    def rec(n):
        return lambda *a: log.append(n)

    lin = nn.Linear(2, 2).double()
    with torch.no_grad():
        lin.weight.copy_(t([[1, 2], [3, -1]]))
        lin.bias.copy_(t([0.5, 0]))

    class Sq(nn.Module):
        def forward(self, x):
            return x * x

    sq = Sq()
    lin.register_forward_pre_hook(rec("1 lin forward_pre"))
    lin.register_forward_hook(rec("2 lin forward"))
    lin.register_full_backward_pre_hook(rec("3 lin full_backward_pre"))
    lin.register_full_backward_hook(rec("4 lin full_backward"))
    sq.register_backward_hook(rec("5 sq legacy"))
    x = t([[0.5, -1]], True)
    x.register_hook(rec("9 leaf hook on x"))
    lin.weight.register_hook(rec("10 leaf hook on lin.weight"))
    lin.bias.register_hook(rec("11 leaf hook on lin.bias"))
    h = lin(x)
    h.register_hook(rec("6 tensor hook on lin's output"))
    h.retain_grad()
    h.grad_fn.register_prehook(rec("7 node pre-hook on lin's grad_fn"))
    h.grad_fn.register_hook(rec("8 node post-hook on lin's grad_fn"))
    loss = torch.sum(sq(h))
    loss.register_hook(rec("12 hook on the loss"))
    loss.backward()

    v = solve("hook_order").variants[0]
    assert [c.label for c in v.hook_calls] == log
    assert close(f(v.grads["lin"]), h.grad)
    assert close(f(v.grads["x"]), x.grad)


# ----------------------------------------------------------------------------- custom_function

class LinearFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, b):
        ctx.save_for_backward(x, w)
        return x @ torch.t(w) + b

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        return g @ w, torch.t(g) @ x, g


class SquareFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x  # the factor 2 is missing on purpose, as in the problem


def test_custom_function_matches_torch():
    w = nn.Parameter(t([[0.5, -1], [2, 0.25]]))
    b = nn.Parameter(t([0.1, -0.2]))
    x = t([[1, 2], [-1, 0.5]], True)
    post = []
    h = LinearFunction.apply(x, w, b)
    assert h.grad_fn.name() == "LinearFunctionBackward"
    h.grad_fn.register_hook(lambda gi, go: post.append((gi, go)))
    y = SquareFunction.apply(h)
    torch.sum((y - t([[1, 0], [0, 1]])) ** 2).backward()

    v = solve("custom_function").variant("hooked")
    (gi, go) = post[0]
    call = [c for c in v.hook_calls if c.kind == "post"][0]
    assert call.node == "LinearFunctionBackward"
    for p_i, t_i in zip(call.args["grad_inputs"], gi):
        assert close(f(p_i), t_i)
    assert close(f(v.grads["x"]), x.grad)
    assert close(f(v.grads["lin.weight"]), w.grad)
    assert close(f(v.grads["lin.bias"]), b.grad)
    checks = {(c.name, c.slot): c.matches for c in v.functions}
    assert checks == {("LinearFunction", "x"): True, ("LinearFunction", "weight"): True,
                      ("LinearFunction", "bias"): True, ("SquareFunction", "x"): False}
