"""Hand-written torch references for the test/test_autograd.py ports added for second order,
reentrant backwards and hook bodies that write (issue 24): one function per problem file in
tests/pytorch/, named after it, written from PyTorch's test, never from adjoint's output.
"""

from __future__ import annotations

import torch

from capture import Log, error, observation, tensor


def test_post_accumulate_grad_hook_on_non_leaf():
    log = Log()

    def hook(tensor):
        tensor.sub_(1.0)

    leaf = tensor([0.5, -1, 2], requires_grad=True)
    non_leaf = 2.0 * leaf
    try:
        non_leaf.register_post_accumulate_grad_hook(log.post_acc_hook(0, "non_leaf", fn=hook))
    except RuntimeError as e:   # "post accumulate grad hooks cannot be registered on non-leaf tensors"
        return observation(log, error=error(e, "forward", log))
    raise AssertionError("PyTorch did not raise")


def test_multi_grad_hooks_invalid_mode():
    log = Log()
    t1 = tensor([0.5, -1], requires_grad=True)
    t2 = tensor([2, 0.25], requires_grad=True)
    try:
        torch.autograd.graph.register_multi_grad_hook(
            (t1, t2), log.multi_grad_hook(0, "t1,t2", fn=lambda _: None), mode="foo")
    except ValueError as e:     # "Expects mode to be one of ('all', 'any') but got foo"
        return observation(log, error=error(e, "register", log))
    raise AssertionError("PyTorch did not raise")
