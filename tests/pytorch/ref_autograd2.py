"""Hand-written torch references for the test/test_autograd.py ports added for second order,
reentrant backwards and hook bodies that write (issue 24): one function per problem file in
tests/pytorch/, named after it, written from PyTorch's test, never from adjoint's output.
"""

from __future__ import annotations

import contextlib

import torch

from capture import Log, error, grads, observation, snap, tensor


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


def _double_backward_with_hooks(pack_body, around: set):
    """One block of test_default_saved_tensors_hooks_double_backward: ``around`` says which of
    the forward (0), the create_graph grad (1) and the backward (2) the saved_tensors_hooks
    block is around. Pack calls made inside the grad's C++ formulas cannot name their node;
    they are named here by hand from FunctionsManual's pow_backward, grad * (3 * self.pow(2)):
    self.pow(2) saves a (PowBackward0, unnamed), the product saves grad (MulBackward0, g)."""
    log = Log()
    pack, unpack = log.saved_tensors(0, pack_body, lambda x: x)
    by_hand = []

    def labelled_pack(x):
        if not by_hand:                 # a forward op: named by log.op
            return pack(x)
        log._op = by_hand.pop(0)
        try:
            return pack(x)
        finally:
            log._op = None

    def block(step):
        return torch.autograd.graph.saved_tensors_hooks(labelled_pack, unpack) if step in around \
            else contextlib.nullcontext()

    a = tensor([0.5, -1, 2, 0.25, -1.5], requires_grad=True)
    with block(0):
        with log.op("PowBackward0", "y"):
            y = a**3
        s = torch.sum(y)
    log.name_nodes(y=y)
    returned = {}
    with log.backward_pass(lambda: grads(a=a), lambda: returned):
        with block(1):
            by_hand[:] = [("PowBackward0", None), ("MulBackward0", "g")]
            (g,) = torch.autograd.grad(s, (a,), create_graph=True)
            by_hand.clear()
        returned["a"] = snap(g)   # autograd.grad returns one gradient per input
    log.name_nodes(g=g)
    with log.backward_pass(lambda: grads(a=a)):
        with block(2):
            g.sum().backward()
    return observation(log, grads(a=a)), a


def test_default_saved_tensors_hooks_double_backward():
    out = {}
    obs, a = _double_backward_with_hooks(lambda x: x, {0, 1, 2})
    assert torch.equal(6 * a.detach(), a.grad)
    out["identity"] = obs
    obs, a = _double_backward_with_hooks(lambda x: 2 * x, {0})
    assert torch.equal(6 * 2 * a.detach(), a.grad)          # factor 2 because only a is saved once
    out["forward_only"] = obs
    obs, a = _double_backward_with_hooks(lambda x: 2 * x, {1, 2})
    assert torch.equal(6 * 4 * a.detach(), a.grad)          # pow_backward saves grad and a
    out["backward_only"] = obs
    obs, a = _double_backward_with_hooks(lambda x: 2 * x, {0, 1, 2})
    assert torch.equal(6 * 8 * a.detach(), a.grad)          # 2 * 4 = 8
    out["both"] = obs
    return out


def test_reentrant_with_leaf_variable_hook():
    log = Log()
    handle = None
    param = tensor([0.5, -1, 2], requires_grad=True)

    def add_gradient_penalty_to_grad(grad):
        handle.remove()
        old_param_grad = grad
        param.grad = None
        # Add some sort of gradient penalty by directly updating the gradients
        with torch.enable_grad():
            g = grad.detach().requires_grad_()
            new_param = param.detach().requires_grad_()
            out = ((g * 2) + new_param).sum()
            out.backward()
        res = g.grad + grad
        param.grad = old_param_grad
        return res

    handle = param.register_hook(log.tensor_hook(0, "param", fn=add_gradient_penalty_to_grad))
    # Forward pass
    tmp = param * param
    loss = tmp.sum()
    # Compute the gradients
    loss.backward()
    return observation(log, grads(param=param))


def _saved_original_double_backward(get_input, name: str):
    """The double-backward case of test_saved_variable_packing_unpacking_saved_original_with_hooks."""
    log = Log()
    leaves, a = get_input()
    y = a**3
    log.name_nodes(y=y)
    pack, unpack = log.saved_tensors(0)
    with log.op("PowBackward0", "y"):
        y.grad_fn._raw_saved_self.register_hooks(pack, unpack)
    s = torch.sum(y)
    returned = {}
    with log.backward_pass(lambda: grads(**leaves), lambda: returned):
        (g,) = torch.autograd.grad(s, (a,), create_graph=True)
        returned["a"] = snap(g)
    with log.backward_pass(lambda: grads(**leaves)):
        g.sum().backward()
    assert torch.equal(leaves[name].grad, 6 * a.detach())   # the test asserts it for the leaf
    return observation(log, grads(**leaves))


def test_saved_variable_packing_unpacking_saved_original_with_hooks__leaf_double_backward():
    def get_input():
        a = tensor([0.5, -1.5], requires_grad=True)
        return {"a": a}, a
    return _saved_original_double_backward(get_input, "a")

