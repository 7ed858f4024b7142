"""Hand-written torch references for ports upgraded from "simplified" to "as written":
hook-dict sizes read with ``len(handle.hooks_dict_ref())`` (``registered`` steps), ...
Written from PyTorch's tests (test/nn/test_module_hooks.py, test/test_autograd.py), never
from adjoint's output; they replace the functions of the same name imported earlier."""

import math

import torch
from torch import nn

from capture import Log, grads, observation, snap, tensor


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
