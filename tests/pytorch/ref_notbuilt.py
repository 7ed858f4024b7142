"""Hand-written torch references for the ports of the tests docs/pytorch-tests.md once listed as
"Not built yet", written from PyTorch's tests (never from adjoint's output). references.py
imports every ``test_*`` function here."""

from __future__ import annotations

import torch
from torch import nn

from capture import Log, error, grads, leaf, observation


def test_hook_requires_grad():
    """test/nn/test_module_hooks.py TestModuleHookNN.test_hook_requires_grad, as written:
    MyModule's forward asserts arg1 and arg3 require grad and arg2 does not; called as
    mod(inp, inp.detach(), inp) without a hook, then with a full backward hook."""

    class MyModule(nn.Module):
        def forward(self, arg1, arg2, arg3):
            assert arg1.requires_grad          # test_self.assertTrue(arg1.requires_grad)
            assert not arg2.requires_grad      # test_self.assertFalse(arg2.requires_grad)
            assert arg3.requires_grad
            return arg1.sum() + arg2.sum() + arg3.sum()

    class Root(nn.Module):
        def __init__(self):
            super().__init__()
            self.mod = MyModule()

        def forward(self, inp):
            return self.mod(inp, inp.detach(), inp)

    model = Root()
    log = Log(model)
    inp = leaf([0.5, 0.25])   # torch.rand(2, requires_grad=True)
    try:
        model(inp)
        model.mod.register_full_backward_hook(log.module_hook(0, "full_backward", "mod"))
        model(inp)
    except AssertionError as e:
        return observation(log, grads(inp=inp), error=error(e, "forward", log))
    return observation(log, grads(inp=inp))
