"""Torch references for the ports of PyTorch's test/nn/test_module_hooks.py (see
references.py): one function per problem file, named after it, doing by hand in real torch
(float64) what PyTorch's test does, with the problem file's fixed values."""

from __future__ import annotations

from collections import OrderedDict

import torch
import torch.nn as nn
import torch.nn.functional as F

from capture import Log, error, fired, grads, leaf, observation, snap, tensor
from ref_common import linear, param_grads


def seq(*layers) -> nn.Sequential:
    """A Sequential whose children are named l0, l1, ... (as the problem files name them)."""
    return nn.Sequential(OrderedDict((f"l{i}", m) for i, m in enumerate(layers)))


class Net(nn.Module):
    """test_module_hooks.py's Net: seq2(seq1(x)), two Sequentials of two Linear layers."""

    def __init__(self, layers):
        super().__init__()
        self.seq1 = seq(linear(*layers[0]), linear(*layers[1]))
        self.seq2 = seq(linear(*layers[2]), linear(*layers[3]))

    def forward(self, x):
        return self.seq2(self.seq1(x))


class ToyModel(nn.Module):
    """test_module_hooks.py's ToyModel: net2(net1(x)), with Linear(2, 2) layers and the
    fixed weights of the problem files."""

    def __init__(self):
        super().__init__()
        self.net1 = Net([([[0.5, 1.5], [1, 0.75]], [-0.5, 0.0625]),
                         ([[-0.25, -0.5], [-0.75, -1]], [0.125, 1]),
                         ([[0.75, 1], [0.125, 0.25]], [0.75, -0.75]),
                         ([[-1, -0.75], [2, 1.5]], [-0.25, 0.25])])
        self.net2 = Net([([[0.25, 0.125], [-1.5, -0.5]], [0.5, -0.125]),
                         ([[1.5, 2], [0.5, 1]], [-0.375, 0.375]),
                         ([[-0.5, -1.5], [-0.25, -0.75]], [0.0625, -0.5]),
                         ([[1, 0.5], [0.75, 0.125]], [1, 0.125])])

    def forward(self, x):
        return self.net2(self.net1(x))


def _toy_two_passes(register, expected: list[int]) -> dict:
    """The ToyModel tests: register hooks, then out = model(x); out.sum().backward(); and
    model(x).sum().backward() again; ``expected`` is the firing order the test asserts
    (per forward + backward)."""
    model = ToyModel()
    log = Log(model)
    register(model, log)
    x = tensor([[0.5, -1]])
    for _ in range(2):
        out = model(x)
        with log.backward_pass(lambda: param_grads(model)):
            out.sum().backward()
    assert fired(log.calls) == expected + expected
    return observation(log, param_grads(model))


# ============================================================================= test_module_hooks.py
# ----------------------------------------------------------------------------- TestModuleHooks


def test_forward_hooks():
    def register(model, log):
        m = model.net1.seq2
        m.register_forward_hook(log.module_hook(0, "forward", "net1.seq2"))
        m.register_forward_hook(log.module_hook(1, "forward", "net1.seq2"), prepend=True)
        m.register_forward_hook(log.module_hook(2, "forward", "net1.seq2"))
        m.register_forward_hook(log.module_hook(3, "forward", "net1.seq2"))
        m.register_forward_hook(log.module_hook(4, "forward", "net1.seq2"), prepend=True)
    return _toy_two_passes(register, [4, 1, 0, 2, 3])


def test_forward_pre_hooks():
    def register(model, log):
        m = model.net2.seq1
        m.register_forward_pre_hook(log.module_hook(0, "forward_pre", "net2.seq1"), prepend=True)
        m.register_forward_pre_hook(log.module_hook(1, "forward_pre", "net2.seq1"))
        m.register_forward_pre_hook(log.module_hook(2, "forward_pre", "net2.seq1"))
        m.register_forward_pre_hook(log.module_hook(3, "forward_pre", "net2.seq1"))
        m.register_forward_pre_hook(log.module_hook(4, "forward_pre", "net2.seq1"), prepend=True)
    return _toy_two_passes(register, [4, 0, 1, 2, 3])


def test_full_backward_hooks():
    def register(model, log):
        m = model.net1
        m.register_full_backward_hook(log.module_hook(0, "full_backward", "net1"))
        m.register_full_backward_hook(log.module_hook(1, "full_backward", "net1"))
        m.register_full_backward_hook(log.module_hook(2, "full_backward", "net1"))
        m.register_full_backward_hook(log.module_hook(3, "full_backward", "net1"), prepend=True)
        m.register_full_backward_hook(log.module_hook(4, "full_backward", "net1"), prepend=True)
    return _toy_two_passes(register, [4, 3, 0, 1, 2])


def test_full_backward_pre_hooks__prepend():
    def register(model, log):
        m = model.net1
        m.register_full_backward_pre_hook(log.module_hook(0, "full_backward_pre", "net1"), prepend=True)
        m.register_full_backward_pre_hook(log.module_hook(1, "full_backward_pre", "net1"), prepend=True)
        m.register_full_backward_pre_hook(log.module_hook(2, "full_backward_pre", "net1"))
        m.register_full_backward_pre_hook(log.module_hook(3, "full_backward_pre", "net1"))
        m.register_full_backward_pre_hook(log.module_hook(4, "full_backward_pre", "net1"))
    return _toy_two_passes(register, [1, 0, 2, 3, 4])


def test_full_backward_pre_hooks__zeroed_grad_output():
    a = leaf([1, 1])
    model = linear([[0.5, -1], [1.5, 0.25]], [0.125, -0.5])
    log = Log(model)
    model.register_full_backward_pre_hook(
        log.module_hook(0, "full_backward_pre", "model", fn=lambda grad_output: (grad_output[0] * 0,)))
    out = model(a)
    out.sum().backward()
    return observation(log, param_grads(model, a=a))


def test_mixed_hooks():
    def register(model, log):
        model.register_forward_pre_hook(log.module_hook(0, "forward_pre", "model"))
        model.register_forward_hook(log.module_hook(1, "forward", "model"))
        model.register_full_backward_pre_hook(log.module_hook(2, "full_backward_pre", "model"))
        model.register_full_backward_hook(log.module_hook(3, "full_backward", "model"))
    return _toy_two_passes(register, [0, 1, 2, 3])


class KwargModel(nn.Module):
    """test_module_hooks.py's KwargModel (without its unused Nets): x + bias."""

    def forward(self, x, bias=None):
        if bias is not None:
            x = x + bias
        return x


class KwargRoot(nn.Module):
    """The problem's root: calls its child m as m(x, bias=bias)."""

    def __init__(self):
        super().__init__()
        self.m = KwargModel()

    def forward(self, x, bias):
        return self.m(x, bias=bias)


def _double_bias(args, kwargs):
    """kwarg_forward_pre_hook's body: kwargs["bias"] = 2 * kwargs["bias"]; return args, kwargs."""
    kwargs["bias"] = 2 * kwargs["bias"]
    return args, kwargs


def _add_bias(args, kwargs, out):
    """kwarg_forward_hook's (and internal_forward_hook's) body: out + kwargs["bias"]."""
    return out + kwargs["bias"]


def test_kwarg_hooks():
    out = {}
    for variant in ("pre", "pre_and_post", "member_method"):
        model = KwargRoot()
        log = Log(model)
        if variant == "pre":
            model.m.register_forward_pre_hook(
                log.module_hook(0, "forward_pre", "m", fn=_double_bias, with_kwargs=True), with_kwargs=True)
        elif variant == "pre_and_post":
            model.m.register_forward_hook(
                log.module_hook(0, "forward", "m", fn=_add_bias, with_kwargs=True), with_kwargs=True)
            model.m.register_forward_pre_hook(
                log.module_hook(1, "forward_pre", "m", fn=_double_bias, with_kwargs=True), with_kwargs=True)
        else:
            model.m.register_forward_hook(
                log.module_hook(0, "forward", "m", fn=_add_bias, with_kwargs=True), with_kwargs=True)
        y = model(tensor([[1, 1], [1, 1]]), tensor([[1, 1], [1, 1]]))
        assert torch.equal(y, torch.full((2, 2), {"pre": 3.0, "pre_and_post": 5.0, "member_method": 3.0}[variant],
                                         dtype=torch.float64))
        out[variant] = observation(log, {}, values={"model": snap(y)})
    return out


def test_remove_kwarg_hooks():
    model = KwargRoot()
    log = Log(model)
    x, bias = tensor([[1, 1], [1, 1]]), tensor([[1, 1], [1, 1]])
    forward_hook_handle = model.m.register_forward_hook(
        log.module_hook(0, "forward", "m", fn=_add_bias, with_kwargs=True), with_kwargs=True)
    forward_pre_hook_handle = model.m.register_forward_pre_hook(
        log.module_hook(1, "forward_pre", "m", fn=_double_bias, with_kwargs=True), with_kwargs=True)
    model(x, bias)                      # x + 4 * bias
    forward_hook_handle.remove()
    model(x, bias)                      # x + 2 * bias
    forward_pre_hook_handle.remove()
    y = model(x, bias)                  # x + bias
    return observation(log, {}, values={"model": snap(y)})


class FailsInForwardModel(nn.Module):
    """test_module_hooks.py's FailsInForwardModel, called with fail=False: net1(x)."""

    def __init__(self):
        super().__init__()
        self.net1 = ToyModel().net1

    def forward(self, x):
        return self.net1(x)


# ----------------------------------------------------------------------------- TestModuleGlobalHooks


SMALL = [[0.5, -1], [2, -0.25]]        # the fixed input standing for torch.randn(5, 5)


def test_module_backward_global_hook_writeable():
    module = nn.Sigmoid()
    log = Log(module)
    inp = leaf(SMALL)
    h = nn.modules.module.register_module_backward_hook(
        log.module_hook(0, "backward", glob=True, fn=lambda gi, go: tuple(g * 2 for g in gi)))
    try:
        module(inp).backward(tensor([[1, 1], [1, 1]]))
    finally:
        h.remove()
    return observation(log, grads(input=inp))


def test_module_global_forward_preforward_hook_writeable():
    module = nn.Sigmoid()
    log = Log(module)
    inp = leaf(SMALL)
    reg = nn.modules.module
    h1 = reg.register_module_forward_pre_hook(
        log.module_hook(0, "forward_pre", glob=True, fn=lambda args: F.relu(args[0])))
    h2 = reg.register_module_forward_hook(log.module_hook(1, "forward", glob=True, fn=lambda args, out: -out))
    try:
        output = module(inp)
        with log.backward_pass(lambda: grads(input=inp)):
            output.backward(tensor([[2, 2], [2, 2]]), retain_graph=True)
    finally:
        h1.remove()
        h2.remove()
    return observation(log, grads(input=inp), values={"model": snap(output)})


def _removable(kind: str) -> dict:
    module = nn.Sigmoid()
    log = Log(module)
    handles = {}

    def body(i):
        def remove_own_handle(*args):
            handles[i].remove()
            return args[-1] if kind == "forward" else args[0]
        return remove_own_handle
    register = module.register_forward_pre_hook if kind == "forward_pre" else module.register_forward_hook
    handles[0] = register(log.module_hook(0, kind, "model", fn=body(0)))
    handles[1] = register(log.module_hook(1, kind, "model", fn=body(1)))
    inp = tensor(SMALL)
    module(inp)
    output = module(inp)
    return observation(log, {}, values={"model": snap(output)})


def test_global_and_local_hooks_order():
    module = nn.Sigmoid()
    log = Log(module)
    inp = leaf(SMALL)
    reg = nn.modules.module
    handles = [reg.register_module_forward_pre_hook(log.module_hook(0, "forward_pre", glob=True, fn=lambda i: i))]
    module.register_forward_pre_hook(log.module_hook(1, "forward_pre", "model", fn=lambda i: i))
    handles.append(reg.register_module_forward_hook(log.module_hook(2, "forward", glob=True, fn=lambda i, o: o)))
    module.register_forward_hook(log.module_hook(3, "forward", "model", fn=lambda i, o: o))
    handles.append(reg.register_module_backward_hook(log.module_hook(4, "backward", glob=True, fn=lambda i, o: i)))
    module.register_backward_hook(log.module_hook(5, "backward", "model", fn=lambda i, o: i))
    try:
        output = module(inp)
        with log.backward_pass(lambda: grads(input=inp)):
            output.backward(tensor([[1, 1], [1, 1]]), retain_graph=True)
    finally:
        for h in handles:
            h.remove()
    return observation(log, grads(input=inp))


# ----------------------------------------------------------------------------- TestModuleHookNN


def test_hooks():
    out = {}
    g2 = tensor([[2, 2], [2, 2]])
    for register_fn, kind in (("register_backward_hook", "backward"),
                              ("register_full_backward_hook", "full_backward"),
                              ("register_full_backward_pre_hook", "full_backward_pre")):
        module = nn.Sigmoid()
        log = Log(module)
        inp = leaf([[1, 1], [1, 1]])

        def step():
            return lambda: grads(input=inp)
        module.register_forward_hook(log.module_hook(0, "forward", "model"))
        module(inp)
        module(inp)
        getattr(module, register_fn)(log.module_hook(1, kind, "model"))
        output = module(inp)
        with log.backward_pass(step()):
            output.backward(g2, retain_graph=True)
        with log.backward_pass(step()):
            output.backward(g2, retain_graph=True)
        test2_fwd = module.register_forward_hook(log.module_hook(2, "forward", "model"))
        module(inp)
        test2_bwd = getattr(module, register_fn)(log.module_hook(3, kind, "model"))
        y = module(inp)
        with log.backward_pass(step()):
            y.backward(g2)
        test2_bwd.remove()
        y = module(inp)
        with log.backward_pass(step()):
            y.backward(g2)
        test2_fwd.remove()
        y = module(inp)
        with log.backward_pass(step()):
            y.backward(g2)
        inc = {0: 1, 1: 1, 2: 2, 3: 2}
        forwards = sum(inc[c["hook"]] for c in log.calls if c["kind"] == "forward")
        backwards = sum(inc[c["hook"]] for c in log.calls if c["kind"] != "forward")
        assert (forwards, backwards) == (13, 7)
        out[register_fn] = observation(log, grads(input=inp))
    return out


def test_hook_cpp():
    bn = nn.BatchNorm1d(2, dtype=torch.float64)
    log = Log(bn)
    bn.register_full_backward_hook(log.module_hook(0, "full_backward", "model"))
    x = leaf([[0.5, -1], [2, 0.25], [-1.5, 1]])
    bn(x).sum().backward()
    return observation(log, param_grads(bn, x=x))


def test_backward_hooks_interaction():
    module = nn.Sigmoid()
    log = Log(module)
    module.register_full_backward_pre_hook(
        log.module_hook(0, "full_backward_pre", "model", fn=lambda go: (go[0] * 0.5,)))
    module.register_full_backward_hook(log.module_hook(1, "full_backward", "model", fn=lambda gi, go: go))
    t = leaf([[1, 1]])
    module(t).sum().backward()
    return observation(log, grads(t=t))


def _linear_2_3():
    return linear([[1, -0.5], [0.5, 2], [-1.5, 0.25]], [0.5, -1, 0])


def test_hook_no_requires_grad__returns_none_or_grad_input():
    out = {}
    for variant, body in (("returns_none", None), ("returns_grad_input", lambda gi, go: gi)):
        mod = _linear_2_3()
        log = Log(mod)
        mod.register_full_backward_hook(log.module_hook(0, "full_backward", "model", fn=body))
        inp = tensor([[0.25, -0.5]])
        mod(inp).sum().backward()
        out[variant] = observation(log, param_grads(mod))
    return out


def test_hook_no_requires_grad__invalid():
    mod = _linear_2_3()
    log = Log(mod)
    inp = tensor([[0.25, -0.5]])
    mod.register_full_backward_hook(log.module_hook(0, "full_backward", "model", fn=lambda gi, go: inp))
    loss = mod(inp).sum()
    try:
        loss.backward()
    except RuntimeError as e:
        return observation(log, error=error(e, "backward", log))
    raise AssertionError("PyTorch did not raise")


def test_hook_last_arg_requires_grad():
    class Root(nn.Module):
        def __init__(self):
            super().__init__()
            self.mod = nn.L1Loss()

        def forward(self, inp):
            return self.mod(inp.detach(), inp)

    model = Root()
    log = Log(model)
    model.mod.register_full_backward_hook(log.module_hook(0, "full_backward", "mod"))
    inp = leaf([0.5])
    model(inp)
    return observation(log, grads(inp=inp))


class _InplaceModule(nn.Module):
    """test_hook_inplace's MyModule for one value of do_inplace."""

    def __init__(self, do_inplace):
        super().__init__()
        self.do_inplace = do_inplace

    def forward(self, inp):
        self.inp = inp
        if self.do_inplace:
            inp += 1
        return inp.clone()


def _hook_inplace(scenario: str) -> dict:
    out = {}
    for variant, register in (("full_backward", "register_full_backward_hook"),
                              ("full_backward_pre", "register_full_backward_pre_hook")):
        mod = _InplaceModule(do_inplace=scenario == "input")
        log = Log()
        getattr(mod, register)(log.module_hook(0, variant, "mod"))
        inp = leaf([0.5, -1, 2])
        try:
            if scenario == "none":
                mod(inp).sum().backward()
            elif scenario == "input":
                mod(inp.clone())
            elif scenario == "stored":   # re-using the stored input view after its base was modified
                local_inp = inp.clone()
                mod(local_inp)
                local_inp[0] *= 1
                mod.inp + 2
            else:
                y = mod(inp)
                y += 1
            out[variant] = observation(log, grads(inp=inp))
        except RuntimeError as e:
            out[variant] = observation(log, error=error(e, "forward", log))
    return out


def test_hook_inplace__no_inplace():
    return _hook_inplace("none")


def test_hook_inplace__input_inplace():
    return _hook_inplace("input")


def test_hook_inplace__output_inplace():
    return _hook_inplace("output")


def test_hook_inplace__stored_view():
    return _hook_inplace("stored")


def test_hook_backward_size():
    class MyModule(nn.Module):
        def forward(self, arg1, arg2):
            tmp = arg1.sum() * arg2
            tmp = tmp + arg2.sum() * arg1.sum()
            tmp = tmp.sum().view(1)
            tmp = tmp.expand(4).contiguous()
            return tmp

    module = MyModule()
    log = Log()
    inp1 = leaf([[0.5, -1], [2, 0.25]])
    inp2 = leaf([[1, -0.5, 0.25], [0, 2, -1], [1.5, 0.5, -2]])
    with module.register_full_backward_hook(log.module_hook(0, "full_backward", "module")):
        module(inp1, inp2).sum().backward()
    return observation(log, grads(inp1=inp1, inp2=inp2))


def test_hook_backward_writeable():
    module = nn.Sigmoid()
    log = Log(module)
    inp = leaf(SMALL)
    module.register_backward_hook(log.module_hook(0, "backward", "model", fn=lambda gi, go: tuple(g * 2 for g in gi)))
    module(inp).backward(tensor([[1, 1], [1, 1]]))
    return observation(log, grads(input=inp))


def test_hook_forward_preforward_writable():
    module = nn.Sigmoid()
    log = Log(module)
    inp = leaf(SMALL)
    module.register_forward_pre_hook(log.module_hook(0, "forward_pre", "model", fn=lambda args: F.relu(args[0])))
    module.register_forward_hook(log.module_hook(1, "forward", "model", fn=lambda args, out: -out))
    output = module(inp)
    output.backward(tensor([[2, 2], [2, 2]]), retain_graph=True)
    return observation(log, grads(input=inp), values={"model": snap(output)})

__all__ = [name for name in dir() if name.startswith("test_")]
