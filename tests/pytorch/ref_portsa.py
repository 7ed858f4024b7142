"""Torch references for the ports of test/nn/test_module_hooks.py and the checkpoint /
save_on_cpu tests of test/test_autograd.py completed in contract v3 (errors and warnings
as answers, tuple results of hooks, save_on_cpu): one function per problem file, named
after it, written from PyTorch's test (see references.py, which imports these last)."""

from __future__ import annotations

import warnings

import torch
import torch.nn as nn

from capture import Log, error, grads, leaf, observation, tensor


def _warned(caught) -> list[dict]:
    return [{"category": w.category.__name__, "message": str(w.message)} for w in caught]


class _SigmoidRoot(nn.Module):
    """A root that calls nn.Sigmoid() as `module` on its first input; the second input is
    the fixed tensor standing for the test's torch.randn(2, 2)."""

    def __init__(self):
        super().__init__()
        self.module = nn.Sigmoid()

    def forward(self, input, noise):
        return self.module(input)


def test_hook_invalid_outputs():
    """TestModuleHookNN.test_hook_invalid_outputs: four `with register(...)` blocks, each
    running module(input).sum().backward() and asserting PyTorch's RuntimeError."""
    input_value = [[0.5, -1], [2, 0.25]]
    noise = tensor([[0.5, 1], [1.5, 2]])
    cases = {
        "bw_fail1": ("backward", lambda gi, go: gi[:-1], "got 0, but expected 1"),
        "bw_fail2": ("backward", lambda gi, go: gi + (noise,), "got 2, but expected 1"),
        "bw_pre_fail1": ("full_backward_pre", lambda go: (), "got 0, but expected 1"),
        "bw_pre_fail2": ("full_backward_pre", lambda go: go + (noise,), "got 2, but expected 1"),
    }
    out = {}
    for variant, (kind, body, expected) in cases.items():
        root = _SigmoidRoot()
        log = Log(root)
        module = root.module
        register = module.register_backward_hook if kind == "backward" else module.register_full_backward_pre_hook
        input = leaf(input_value)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            hook = log.module_hook(0, kind, "module", fn=body)
            hook.__name__ = "hook"   # PyTorch's message names the hook function; adjoint calls each `hook`
            with register(hook):
                y = root(input, noise)
                try:
                    y.sum().backward()
                except RuntimeError as e:
                    assert expected in str(e)
                    out[variant] = observation(log, error=error(e, "backward", log),
                                               warnings=_warned(caught))
                    continue
        raise AssertionError(f"{variant}: PyTorch did not raise")
    return out


def test_module_global_hook_invalid_outputs():
    """TestModuleGlobalHooks.test_module_global_hook_invalid_outputs: two `with
    register_module_backward_hook(...)` blocks, each asserting PyTorch's RuntimeError."""
    cases = {
        "bw_fail1": (lambda gi, go: gi[:-1], "got 0, but expected 1"),
        "bw_fail2": (lambda gi, go: gi + (input.detach(),), "got 2, but expected 1"),
    }
    out = {}
    for variant, (body, expected) in cases.items():
        module = nn.Sigmoid()
        log = Log(module)
        input = leaf([[0.5, -1], [2, 0.25]])
        hook = log.module_hook(0, "backward", glob=True, fn=body)
        hook.__name__ = "hook"   # PyTorch's message names the hook function; adjoint calls each `hook`
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with nn.modules.module.register_module_backward_hook(hook):
                try:
                    module(input).sum().backward()
                except RuntimeError as e:
                    assert expected in str(e)
                    out[variant] = observation(log, error=error(e, "backward", log), warnings=_warned(caught))
                    continue
        raise AssertionError(f"{variant}: PyTorch did not raise")
    return out


def test_hook_non_full_warning():
    """TestModuleHookNN.test_hook_non_full_warning: four MyModules, each with a legacy
    backward hook (noop), called once; each call warns. The four modules are children of one
    root, called in the test's order (no backward runs)."""
    def noop(*args):
        pass

    class ListInput(nn.Module):      # invalid input container
        def forward(self, l):
            return l[0].clone(), l[1].clone()

    class ListOutput(nn.Module):     # invalid output container
        def forward(self, a, b):
            return [a.clone(), b.clone()]

    class TwoNodes(nn.Module):       # outputs from different nodes
        def forward(self, a, b):
            return a.clone(), b.clone()

    class Chain(nn.Module):          # a forward with multiple nodes
        def forward(self, a):
            return a.clone().clone()

    class Root(nn.Module):
        def __init__(self):
            super().__init__()
            self.m1, self.m2, self.m3, self.m4 = ListInput(), ListOutput(), TwoNodes(), Chain()

        def forward(self, a, b):
            self.m1([a, b])
            self.m2(a, b)
            self.m3(a, b)
            return self.m4(a)

    root = Root()
    log = Log(root)
    for i, name in enumerate(("m1", "m2", "m3", "m4")):
        getattr(root, name).register_backward_hook(log.module_hook(i, "backward", name, fn=noop))
    a, b = leaf([0.5, -1]), leaf([2, 0.25])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        root(a, b)
    expected = ("does not take as input a single Tensor or a tuple of Tensors",
                "does not return a single Tensor or a tuple of Tensors",
                "outputs are generated by different autograd Nodes",
                "the forward contains multiple autograd Nodes")
    assert len(caught) == 4 and all(e in str(w.message) for e, w in zip(expected, caught))
    return observation(log, warnings=_warned(caught))


def test_save_on_cpu_and_checkpoint():
    """TestAutograd.test_save_on_cpu_and_checkpoint, with the file's fixed a: the three
    forwards first, then each backward (a.grad set to None between: the next backward
    refills it, as a.grad.zero_() then accumulating does)."""
    from torch.utils.checkpoint import checkpoint

    log = Log()
    a = leaf([[0.5, -0.75], [1.25, 0.25]])
    b = a.pow(2).pow(2).pow(2).pow(2)
    with torch.autograd.graph.save_on_cpu():
        h = a.pow(2)
        h = checkpoint(lambda x: x.pow(2).pow(2), h, use_reentrant=False)
        c = h.pow(2)

    def f(a):
        h = a.pow(2)
        with torch.autograd.graph.save_on_cpu():
            h = h.pow(2).pow(2)
        return h.pow(2)

    d = checkpoint(f, a, use_reentrant=False)
    with log.backward_pass(lambda: grads(a=a)):
        b.sum().backward()
    b_grad = a.grad.clone()
    a.grad = None
    with log.backward_pass(lambda: grads(a=a)):
        c.sum().backward()
    c_grad = a.grad.clone()
    a.grad = None
    with log.backward_pass(lambda: grads(a=a)):
        d.sum().backward()
    d_grad = a.grad.clone()
    assert torch.equal(b_grad, c_grad) and torch.equal(b_grad, d_grad)
    return observation(log, grads(a=a))

