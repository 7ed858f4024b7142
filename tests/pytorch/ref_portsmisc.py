"""Hand-written torch references for ports upgraded from "simplified" to "as written":
hook-dict sizes read with ``len(handle.hooks_dict_ref())`` (``registered`` steps), ...
Written from PyTorch's tests (test/nn/test_module_hooks.py, test/test_autograd.py), never
from adjoint's output; they replace the functions of the same name imported earlier."""

import math
import warnings

import torch
from torch import nn

from capture import Log, error, grads, observation, snap, tensor


def _removable(kind: str) -> dict:
    """test_module_forward_preforward_hook_removable / test_module_forward_forward_hook_removable."""
    module = nn.Sigmoid()
    log = Log(module)
    handle = handle_2 = None

    def removable_hook(*args):
        handle.remove()
        return args[-1]

    def removable_hook_2(*args):
        handle_2.remove()
        return args[-1]
    register = module.register_forward_pre_hook if kind == "forward_pre" else module.register_forward_hook
    handle = register(log.module_hook(0, kind, "model", fn=removable_hook))
    handle_2 = register(log.module_hook(1, kind, "model", fn=removable_hook_2))
    registered = {"before": len(handle.hooks_dict_ref()), "before_2": len(handle_2.hooks_dict_ref())}
    assert registered == {"before": 2, "before_2": 2}   # "make sure hook register is successful"
    input = tensor([[0.5, -1], [2, -0.25]])
    output = module(input)
    assert torch.equal(torch.sigmoid(input), output)
    assert handle.id not in handle.hooks_dict_ref() and handle_2.id not in handle.hooks_dict_ref()
    registered.update(after=len(handle.hooks_dict_ref()), after_2=len(handle_2.hooks_dict_ref()))
    assert registered["after"] == 0 and registered["after_2"] == 0
    return observation(log, {}, values={"model": snap(output)}, registered=registered)


def test_module_forward_preforward_hook_removable():
    return _removable("forward_pre")


def test_module_forward_forward_hook_removable():
    return _removable("forward")


def test_module_global_hooks():
    """TestModuleGlobalHooks.test_module_global_hooks: three Sigmoid modules, global forward and
    legacy backward hooks; the counters are the logged calls (inc 2 is hooks 2 and 3)."""
    class Script(nn.Module):   # only for Log's module names: never called as a module
        def __init__(self):
            super().__init__()
            self.module_1, self.module_2, self.module_3 = nn.Sigmoid(), nn.Sigmoid(), nn.Sigmoid()
    script = Script()
    module_1, module_2, module_3 = script.module_1, script.module_2, script.module_3
    log = Log(script)
    input = torch.ones(2, 2, dtype=torch.float64, requires_grad=True)
    g = torch.ones(2, 2, dtype=torch.float64) * 2
    reg = nn.modules.module
    counter = {"forwards": 0, "backwards": 0}

    def fw_hook(inc):
        def body(input, output):
            assert isinstance(input, tuple) and isinstance(output, torch.Tensor)
            assert torch.equal(input[0], torch.ones(2, 2, dtype=torch.float64))
            assert torch.allclose(output, torch.full((2, 2), 1 / (1 + 1 / math.e), dtype=torch.float64))
            counter["forwards"] += inc
        return body

    def bw_hook(inc):
        def body(grad_input, grad_output):
            assert isinstance(grad_input, tuple) and isinstance(grad_output, tuple)
            assert torch.equal(grad_output[0], g)
            counter["backwards"] += inc
        return body

    def state():
        return lambda: grads(input=input)
    handles = []
    try:
        test_fwd = reg.register_module_forward_hook(log.module_hook(0, "forward", glob=True, fn=fw_hook(1)))
        handles.append(test_fwd)
        module_1(input)
        module_2(input)
        module_3(input)
        assert counter == {"forwards": 3, "backwards": 0}
        test_bwd = reg.register_module_backward_hook(log.module_hook(1, "backward", glob=True, fn=bw_hook(1)))
        handles.append(test_bwd)
        output_1 = module_1(input)
        output_2 = module_2(input)
        output_3 = module_3(input)
        assert counter == {"forwards": 6, "backwards": 0}
        with log.backward_pass(state()):
            output_1.backward(g, retain_graph=True)
        with log.backward_pass(state()):
            output_2.backward(g, retain_graph=False)
        with log.backward_pass(state()):
            output_3.backward(g, retain_graph=False)
        assert counter == {"forwards": 6, "backwards": 3}
        with log.backward_pass(state()):
            output_1.backward(g, retain_graph=True)
        assert counter == {"forwards": 6, "backwards": 4}
        test2_fwd = reg.register_module_forward_hook(log.module_hook(2, "forward", glob=True, fn=fw_hook(2)))
        handles.append(test2_fwd)
        module_1(input)
        module_2(input)
        module_3(input)
        assert counter == {"forwards": 15, "backwards": 4}
        test2_bwd = reg.register_module_backward_hook(log.module_hook(3, "backward", glob=True, fn=bw_hook(2)))
        handles.append(test2_bwd)
        out = module_1(input)
        with log.backward_pass(state()):
            out.backward(g)
        assert counter == {"forwards": 18, "backwards": 7}
        test2_bwd.remove()
        out = module_2(input)
        with log.backward_pass(state()):
            out.backward(g)
        assert counter == {"forwards": 21, "backwards": 8}
        test2_fwd.remove()
        out = module_3(input)
        with log.backward_pass(state()):
            out.backward(g)
        assert counter == {"forwards": 22, "backwards": 9}
    finally:
        for h in handles:
            h.remove()
    return observation(log, grads(input=input))


# ----------------------------------------------------------------------------- test_always_called_forward_hooks

def _always_called_sequence() -> dict:
    """TestModuleHooks.test_always_called_forward_hooks run as written, on one model, one call
    after another; each call's hook calls (and the hook-dict sizes read before it) become one
    variant of the two port files. Hook indices are the ones each variant declares."""
    from ref_module_hooks import ToyModel

    class FailsInForwardModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.net1 = ToyModel().net1

        def forward(self, x, fail=True):
            if fail:
                raise RuntimeError("failing in forward")
            return self.net1(x)

    class DummyContextManager:
        def __init__(self, stack):
            self.stack = stack

        def __enter__(self):
            self.stack.append(2)

        def __exit__(self, *args):
            self.stack.append(-1)

    x = tensor([[1, 1]])
    model = FailsInForwardModel()
    stack = []
    ctx = None
    cur = {"log": None, "index": {}}

    def logged(name, kind, body, glob=False):
        def hook(m, *args):
            h = cur["log"].module_hook(cur["index"][name], kind, None if glob else "model", glob=glob,
                                       fn=lambda *a: body(m, *a))
            return h(m, *args)
        return hook

    def setup_context():
        nonlocal ctx
        ctx = DummyContextManager(stack)

    def ctx_setup_hook(m, i):
        setup_context()
        ctx.__enter__()

    def ctx_setup_failure_hook(m, i):
        setup_context()
        ctx.__enter__()
        raise RuntimeError("failing in ctx setup")

    def ctx_shutdown_hook(m, i, o):
        ctx.__exit__()

    def ctx_shutdown_failure_hook(m, i, o):
        ctx.__exit__()
        raise RuntimeError("failing in ctx shutdown")

    def throw_hook(m, i, o):
        raise RuntimeError("failing in throw")

    out = {}

    def call(variant, index, registered=None, **kwargs):
        cur["log"], cur["index"] = Log(model), index
        try:
            with warnings.catch_warnings():    # PyTorch warns that it silenced an always_call hook's error
                warnings.simplefilter("ignore", UserWarning)
                model(x, **kwargs)
            obs = observation(cur["log"], {name: snap(p.grad) for name, p in model.named_parameters()})
        except RuntimeError as e:
            # the forward (or a pre-hook) raised first, so a forward hook that raised ran in
            # _call_impl's except branch, which silenced its error with a warning
            for entry in cur["log"].calls:
                if entry["kind"] == "forward" and entry.pop("raised", False):
                    entry["silenced"] = True
            obs = observation(cur["log"], error=error(e, "forward", cur["log"]))
        if registered is not None:
            obs["registered"] = registered
        out[variant] = obs

    pre = {"ctx_setup_hook": 0, "ctx_shutdown_hook": 1}
    forward_pre_hook_handle = model.register_forward_pre_hook(logged("ctx_setup_hook", "forward_pre", ctx_setup_hook))
    forward_hook_handle = model.register_forward_hook(logged("ctx_shutdown_hook", "forward", ctx_shutdown_hook),
                                                      always_call=True)
    assert len(model._forward_hooks_always_called) == 1
    call("forward_raises", pre, {"always_called": len(model._forward_hooks_always_called)})
    assert out["forward_raises"]["error"]["message"] == "failing in forward" and stack == [2, -1]
    call("no_error", pre, fail=False)
    assert stack == [2, -1, 2, -1]
    forward_pre_hook_handle.remove()
    model.register_forward_pre_hook(logged("ctx_setup_failure_hook", "forward_pre", ctx_setup_failure_hook))
    failing = {"ctx_setup_failure_hook": 0, "ctx_shutdown_hook": 1, "throw_hook": 2, "ctx_shutdown_failure_hook": 3}
    call("setup_fails", failing, fail=False)
    assert out["setup_fails"]["error"]["message"] == "failing in ctx setup" and stack == [2, -1] * 3
    forward_hook_handle2 = model.register_forward_hook(logged("throw_hook", "forward", throw_hook),
                                                       prepend=True, always_call=True)
    call("throw_prepended", failing, fail=False)
    assert out["throw_prepended"]["error"]["message"] == "failing in ctx setup" and stack == [2, -1] * 4
    forward_hook_handle.remove()
    forward_hook_handle2.remove()
    assert len(model._forward_hooks_always_called) == 0
    registered = {"always_called": len(model._forward_hooks_always_called)}
    forward_hook_handle3 = model.register_forward_hook(
        logged("ctx_shutdown_failure_hook", "forward", ctx_shutdown_failure_hook), always_call=True)
    call("shutdown_fails", failing, registered, fail=False)
    assert out["shutdown_fails"]["error"]["message"] == "failing in ctx setup" and stack == [2, -1] * 5
    forward_hook_handle3.remove()
    reg = nn.modules.module
    glob = {"ctx_setup_failure_hook": 0, "ctx_shutdown_hook": 1}
    global_forward_hook_handle = reg.register_module_forward_hook(
        logged("ctx_shutdown_hook", "forward", ctx_shutdown_hook, glob=True), always_call=True)
    try:
        assert len(reg._global_forward_hooks_always_called) == 1
        call("global_always_call", glob, {"global_always_called": len(reg._global_forward_hooks_always_called)},
             fail=False)
        assert out["global_always_call"]["error"]["message"] == "failing in ctx setup" and stack == [2, -1] * 6
    finally:
        global_forward_hook_handle.remove()
    assert len(reg._global_forward_hooks_always_called) == 0
    call("all_removed", glob, {"global_always_called": len(reg._global_forward_hooks_always_called)})
    assert out["all_removed"]["error"]["message"] == "failing in ctx setup" and stack == [2, -1] * 6 + [2]
    return out


def test_always_called_forward_hooks():
    out = _always_called_sequence()
    return {v: out[v] for v in ("no_error", "setup_fails", "throw_prepended", "shutdown_fails", "global_always_call")}


def test_always_called_forward_hooks__forward_fails():
    out = _always_called_sequence()
    return {v: out[v] for v in ("forward_raises", "all_removed")}


# ----------------------------------------------------------------------------- test_copy_slices_graph_task_updates

def _copy_slices_sequence() -> dict:
    """TestAutograd.test_copy_slices_graph_task_updates as written: f1 and f2, each called five
    times with y_safe = DelayedError("Boom!", 1)(y), then f3. Returns {file: {variant: observation}}."""
    from capture import raising

    def f1(x, y):
        out = x.clone().view(-1)
        out += y
        return out

    def f2(x, y):
        out = x.clone().view(-1)
        b = out * 2
        out += y
        return out + b

    x = torch.tensor([0.5, 0.25], dtype=torch.float64, requires_grad=True)
    y = torch.tensor([1, -2], dtype=torch.float64, requires_grad=True)
    y_safe = torch._C._functions.DelayedError("Boom!", 1)(y)
    out_all = {}
    for name, f in (("f1", f1), ("f2", f2)):
        obs = {}
        for variant, inputs in (("backward", None), ("grad_y", (y,))):
            log = Log()
            out = f(x, y_safe)
            try:
                if inputs is None:
                    out.sum().backward()
                else:
                    torch.autograd.grad(out.sum(), inputs)
                raise AssertionError("the test expects RuntimeError 'Boom!'")
            except RuntimeError as e:
                assert "Boom!" in str(e)
                obs[variant] = observation(log, error=error(e, "backward", log))
        log = Log()
        state = lambda: {"x": snap(x.grad), "y0": snap(y.grad)}   # noqa: E731
        for inputs, names in (((x,), ("x",)), ((y_safe,), ("y_safe",)), ((x, y_safe), ("x", "y_safe"))):
            out = f(x, y_safe)
            got = []
            with log.backward_pass(state, lambda: dict(zip(names, map(snap, got)))):
                got = torch.autograd.grad(out.sum(), inputs)
        obs["not_asked"] = observation(log, state(), returned=dict(zip(names, map(snap, got))))
        out_all[name] = obs

    def f3(x, y, log):
        out = x.clone().view(-1)
        out.register_hook(log.tensor_hook(0, "out", fn=raising("This should never be called!")))
        b = out + y
        out += y
        return out + b, b

    log = Log()
    out, b = f3(x, y_safe, log)
    returned = torch.autograd.grad(out.sum(), (b, y_safe))
    out_all["f3"] = observation(log, {"x": snap(x.grad), "y0": snap(y.grad)},
                                returned={"b": snap(returned[0]), "y_safe": snap(returned[1])})
    return out_all


def test_copy_slices_graph_task_updates__f1():
    return _copy_slices_sequence()["f1"]


def test_copy_slices_graph_task_updates__f2():
    return _copy_slices_sequence()["f2"]


def test_copy_slices_graph_task_updates():
    return _copy_slices_sequence()["f3"]
