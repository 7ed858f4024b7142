"""Hand-written torch references for ports upgraded from "simplified" to "as written":
hook-dict sizes read with ``len(handle.hooks_dict_ref())`` (``registered`` steps), ...
Written from PyTorch's tests (test/nn/test_module_hooks.py, test/test_autograd.py), never
from adjoint's output; they replace the functions of the same name imported earlier."""

import torch
from torch import nn

from capture import Log, observation, snap, tensor


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
