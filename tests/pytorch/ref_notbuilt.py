"""Hand-written torch references for the ports of the tests docs/pytorch-tests.md once listed as
"Not built yet", written from PyTorch's tests (never from adjoint's output). references.py
imports every ``test_*`` function here."""

from __future__ import annotations

import torch
from torch import nn

from capture import Log, error, grads, leaf, observation, snap


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


def test_post_accumulate_grad_hook_e2e():
    """test/test_autograd.py TestAutograd.test_post_accumulate_grad_hook_e2e, as written: an Adam
    per parameter stepped (and zero_grad'ed) in its post-accumulate-grad hook (variant
    in_backward), five iterations against a deepcopy stepped by one Adam after each backward
    (variant copy); the handles removed, five more iterations leave the parameters as they
    were. Fixed values for the Linear and the input; the copy's last forward shows its
    parameters."""
    from copy import deepcopy

    log, log_copy = Log(), Log()
    model = nn.Linear(3, 2).double()
    with torch.no_grad():
        model.weight.copy_(torch.tensor([[0.5, -0.25, 1], [-1, 0.75, 0.125]], dtype=torch.float64))
        model.bias.copy_(torch.tensor([0.25, -0.5], dtype=torch.float64))
    input = torch.tensor([[0.5, 0.25, 0.75], [0.125, 1, 0.5]], dtype=torch.float64)   # torch.rand(2, 3)

    def setup_optim_in_bwd(model):
        optims = {}
        handles = []

        def optim_step_hook(param):
            optims[param].step()
            optims[param].zero_grad()

        for i, (name, p) in enumerate(model.named_parameters()):
            optims[p] = torch.optim.Adam([p])
            handles.append(p.register_post_accumulate_grad_hook(log.post_acc_hook(i, name, fn=optim_step_hook)))
        return handles

    handles = setup_optim_in_bwd(model)
    model_copy = deepcopy(model)
    optim_copy = torch.optim.Adam(model_copy.parameters())
    every = lambda: grads(weight=model.weight, bias=model.bias)   # noqa: E731
    every_copy = lambda: grads(weight=model_copy.weight, bias=model_copy.bias)   # noqa: E731

    def values():
        return {"weight": snap(model.weight), "bias": snap(model.bias)}

    def iterate():
        loss = model(input).sum()
        with log.backward_pass(every):
            loss.backward()
        log.passes[-1]["leaf_values"] = values()
        loss_copy = model_copy(input).sum()
        with log_copy.backward_pass(every_copy):
            loss_copy.backward()
        optim_copy.step()
        optim_copy.zero_grad()

    iters = 5
    for _ in range(iters):
        iterate()
    params_copy = []
    for p_reference, p in zip(model_copy.parameters(), model.parameters()):
        assert torch.equal(p_reference, p)   # self.assertEqual(p_reference, p)
        params_copy.append(p_reference.detach().clone())
    for h in handles:
        h.remove()
    for _ in range(iters):
        iterate()
    for p_static, p_reference, p in zip(params_copy, model_copy.parameters(), model.parameters()):
        assert torch.equal(p_static, p)                   # self.assertEqual(p_static, p)
        assert not torch.allclose(p_reference, p)         # self.assertNotEqual(p_reference, p)
    y = model_copy(input)   # the copy variant's last forward: its parameters, and its output
    copy_values = {"weight": snap(model_copy.weight), "bias": snap(model_copy.bias), "y": snap(y)}
    return {"in_backward": observation(log, every(), leaf_values=values()),
            "copy": observation(log_copy, every_copy(), values=copy_values)}


def test_saved_tensors_hook_version_counter_not_shared():
    """test/test_autograd.py TestAutograd.test_saved_tensors_hook_version_counter_not_shared, as
    written: the pack hook returns a_replacement (a clone of a made before the with block), the
    Function's backward writes its unpacked saved tensor in place and asserts a's version did not
    move. The root module runs the test's two lines; the with block is around the call of test."""
    log = Log()

    class Test(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sin()

        @staticmethod
        def backward(ctx, grad_output):
            (x,) = ctx.saved_tensors
            before = a._version
            x.add_(1)
            assert a._version == before   # self.assertEqual(a._version, before)
            return grad_output

    a = leaf(1.0)   # torch.tensor(1.0, requires_grad=True)
    a_replacement = a.clone()
    pack_hook, unpack_hook = log.saved_tensors(0, lambda x: a_replacement, lambda x: x)
    with torch.autograd.graph.saved_tensors_hooks(pack_hook, unpack_hook):
        with log.op("TestBackward", "test"):
            b = Test.apply(a)
    log.name_nodes(test=b)
    b.backward()
    return observation(log, grads(a=a))
