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
