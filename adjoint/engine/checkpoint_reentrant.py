"""``checkpoint(FN, *args, use_reentrant=True)``: PyTorch 2.13's ``CheckpointFunction``.

* forward (``CheckpointFunction.apply(FN, preserve_rng_state, *args)``, a custom Function): its
  node ``CheckpointFunctionBackward`` takes the tensor arguments' edges (made only when grad mode
  is on and one requires grad); ``check_backward_validity`` warns "None of the inputs have
  requires_grad=True. Gradients will be None" when none does; the tensor arguments are saved
  (``ctx.save_for_backward``, packed after FN ran); FN runs with grad mode off, and what it returns
  becomes the node's output (the same tensor, now requiring grad).
* backward: ``_is_checkpoint_valid()`` is False under ``autograd.grad`` or ``backward(inputs=...)``
  (a graph task with exec_info): PyTorch's RuntimeError. Else the saved arguments are unpacked,
  detached (each a new leaf requiring grad as its argument did), FN runs again with grad mode on
  (its hook calls: ``recomputed``), and ``torch.autograd.backward(outputs that require grad,
  incoming gradients)`` runs a reentrant backward through the recomputed graph: every hook call
  in it is marked ``reentrant`` with its depth; the parameters inside FN accumulate their
  ``.grad`` there, and the detached arguments' ``.grad`` are the node's results.
"""

from __future__ import annotations

from adjoint.format.errors import ProblemError
from adjoint.engine.graph import Node, SavedVariable, Tensor
from adjoint.engine.runtime import TorchError
from adjoint.engine import warns

NO_INPUT_REQUIRES_GRAD = "None of the inputs have requires_grad=True. Gradients will be None"
NOT_VALID = ("When use_reentrant=True, torch.utils.checkpoint is incompatible with .grad() or passing an `inputs` "
             "parameter to .backward(). To resolve this error, you can either set use_reentrant=False, or call "
             ".backward() without passing the `inputs` argument.")
NO_OUTPUT_REQUIRES_GRAD = "none of output has requires_grad=True, this checkpoint() is not necessary"


class Reentrant:
    """What the node keeps: the region (for the recomputation) and its tensor arguments."""

    def __init__(self, run, child, args: list, loc):
        self.run = run
        self.child = child
        self.args = list(args)
        self.loc = loc
        self.calls: list = []
        self.recomputed = None         # (its nodes, its outputs, the detached arguments) of the last recomputation

    def pure_vjp(self, rt, grads: list) -> list:
        """J^T of the region through the last recomputation's nodes, hooks ignored (one value per edge)."""
        from adjoint.engine.adjoints import pure_vjp
        if self.recomputed is None:   # the backward stopped before the node ran: no recomputed graph
            return [None] * sum(isinstance(a, Tensor) for a in self.args)
        nodes, outs, detached = self.recomputed
        seeds = [(o, g) for o, g in zip(outs, grads) if isinstance(o, Tensor) and o.requires_grad]
        return pure_vjp(rt, nodes, seeds, detached)


def run_reentrant(run, child, args: list, loc):
    rt = run.rt
    tensors = [a for a in args if isinstance(a, Tensor)]
    rg = [t.requires_grad for t in tensors]
    if not any(rg):   # check_backward_validity, in forward
        warns.warn(rt, "UserWarning", NO_INPUT_REQUIRES_GRAD)
    state = Reentrant(run, child, args, loc)
    node = None
    if rt.grad_enabled and any(rg):
        edges = [rt.gradient_edge(t) if r else None for t, r in zip(tensors, rg)]
        node = Node(rt._new_seq(), "CheckpointFunctionBackward", edges, kind="checkpoint", params=state,
                    inputs=tuple(tensors), input_values=tuple(t.value for t in tensors),
                    module_call=rt.call_stack[-1] if rt.call_stack else None, loc=loc)
        rt.nodes.append(node)
    before = rt.grad_enabled
    rt.grad_enabled = False
    start = run.calls_mark()
    try:
        out = run.call_module(child, list(args), loc)
    finally:
        rt.grad_enabled = before
    state.calls = run.calls_since(start)
    if state.calls and run.replay is None:
        state.calls[0].checkpoint = ("reentrant: run under no_grad; its node CheckpointFunctionBackward recomputes it "
                                     "with grad and runs a reentrant backward through it")
    if node is None:
        return out
    outs = out if isinstance(out, tuple) else (out,)
    made = [o for o in outs if isinstance(o, Tensor)]
    if any(o is a for o in made for a in tensors) or len({id(o) for o in made}) != len(made):
        raise ProblemError(loc, "checkpoint(..., use_reentrant=True) of a region that returns one of its inputs "
                                "as it is, or the same tensor twice, is not modelled yet")
    if not made:
        raise ProblemError(loc, "checkpoint(..., use_reentrant=True) of a region that returns no tensor at its top "
                                "level is not modelled yet")
    # Function.apply makes FN's tensor results the node's outputs; anything else -- a nested tuple
    # such as an LSTM's (h_n, c_n), made under no_grad -- is handed back as it is (an output slot
    # without a tensor, whose gradient is None)
    for k, o in enumerate(outs):
        if isinstance(o, Tensor):
            o.requires_grad, o.grad_fn, o.output_nr, o.is_leaf = True, node, k, False
    if state.calls and run.replay is None:   # the region's call: its hook-free J^T is the node's (adjoint.engine.adjoints)
        state.calls[0].body_start = rt.nodes.index(node)
    node.outputs = [(o.shape, o.dtype) if isinstance(o, Tensor) else None for o in outs]
    node.output_values = [o.value if isinstance(o, Tensor) else None for o in outs]
    for i, t in enumerate(tensors):   # ctx.save_for_backward(*tensor_inputs), packed after forward
        sv = SavedVariable(f"saved{i}", t, t.version.value, False, t.value)
        if rt.saved_hooks:
            sv.hooks = rt.saved_hooks[-1]
            sv.packed = rt.hooks_runner.pack(sv.hooks, t, node, sv.name)
        node.saved.append(sv)
    return out


def checkpoint_backward(engine, node: Node, grads: list, backward) -> list:
    """CheckpointFunction.backward, run by the outer engine as the node's apply; ``backward(root,
    grad, slot)`` runs ``torch.autograd.backward(root, grad)`` on a new engine, ``grad`` being the
    very tensor the node was handed in output slot ``slot`` (a hook of the reentrant backward that
    writes it in place writes the outer backward's tensor)."""
    rt = engine.rt
    state: Reentrant = node.params
    if engine.exec_info:
        raise TorchError("RuntimeError", NOT_VALID, "checkpoint")
    values = [rt.unpack(node, sv) for sv in node.saved]
    # detach_variable: new leaves, requiring grad as the arguments did
    detached = {id(t): rt.tensor(v, t.requires_grad, dtype=t.dtype) for t, v in zip(node.inputs, values)}
    args = [detached[id(a)] if isinstance(a, Tensor) and id(a) in detached else a for a in state.args]
    run = state.run
    replay, before_grad, stack, first = run.replay, rt.grad_enabled, len(rt.call_stack), len(rt.nodes)
    run.replay = iter(state.calls)
    rt.grad_enabled = True
    rt.recomputing += 1
    try:
        out = run.call_module(state.child, list(args), state.loc)
    finally:
        rt.recomputing -= 1
        run.replay = replay
        rt.grad_enabled = before_grad
        del rt.call_stack[stack:]
    outs = out if isinstance(out, tuple) else (out,)
    state.recomputed = (rt.nodes[first:], outs, [detached[id(t)] for t in node.inputs])
    with_grad = [(o, g) for o, g in zip(outs, grads) if isinstance(o, Tensor) and o.requires_grad]
    if not with_grad:
        raise TorchError("RuntimeError", NO_OUTPUT_REQUIRES_GRAD, "checkpoint")
    if len(with_grad) > 1:
        raise ProblemError(state.loc, "checkpoint(..., use_reentrant=True) of a region with more than one output "
                                      "that requires grad is not modelled yet (its reentrant backward has several "
                                      "roots)")
    root, g = with_grad[0]
    slot = next(k for k, o in enumerate(outs) if o is root)
    _check_same_shape(root, node.outputs[slot])
    rt.reentrant += 1
    try:
        backward(root, g, slot)
        end = getattr(rt, "reentrant_end", None)   # DDP's Reducer: the callbacks this graph task queued
        if end is not None:
            end(rt.reentrant)
    finally:
        rt.reentrant -= 1
        rt.phase = "backward"
    return [d.grad for d in (detached[id(t)] for t in node.inputs)]


def _check_same_shape(root: Tensor, output) -> None:
    """``torch.autograd.backward(outputs_with_grad, args_with_grad)``: ``_make_grads`` checks each
    incoming gradient (shaped as the original forward's output, ``output``: (shape, dtype)) against
    the recomputed output it is handed with. A recomputation that differs from the forward (a
    module hook registered or removed since) gives another shape: PyTorch's RuntimeError."""
    shape = output[0] if output is not None else None
    if shape is not None and tuple(shape) != tuple(root.shape):
        raise TorchError("RuntimeError", f"Mismatch in shape: grad_output[0] has a shape of torch.Size({list(shape)}) "
                                         f"and output[0] has a shape of torch.Size({list(root.shape)}).", "autograd")
