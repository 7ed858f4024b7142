"""The backward pass, exactly as PyTorch 2.13's autograd engine runs it.

This mirrors ``torch/csrc/autograd/engine.cpp`` on the CPU:

* dependencies are counted over the graph reachable from the root; a node is *ready* when
  every edge into it has delivered (gradients into one slot are summed first);
* ready nodes wait in a ``std::priority_queue`` keyed by ``sequence_nr`` (creation order;
  AccumulateGrad nodes have the maximal key and run as soon as they are ready). Ties are
  broken by libstdc++'s binary-heap algorithm, which :class:`ReadyQueue` reproduces;
* running a node: tensor pre-hooks (each tensor's ``register_hook`` dict, in the order the
  dicts were attached, each hook seeing the previous one's result), then ``retain_grad`` (so
  ``.grad`` sees the hooked value), then node pre-hooks, then the node (which unpacks its
  saved tensors first, even when no gradient arrived), then ``validate_outputs`` (which sums
  broadcast gradients back to each input's shape), then node post-hooks -- the module
  machinery (full backward hooks, backward-pre hooks, legacy hooks) lives among these;
  without ``retain_graph`` the node then frees its saved tensors;
* ``torch.autograd.grad`` (and ``backward(inputs=...)``) only run nodes on a path to the
  inputs; a captured node that need not run still calls its tensor pre-hooks; one that must
  run for another input is captured *before* its tensor hooks (PyTorch does the same);
* custom Functions (``BackwardHookFunction`` and user Functions) turn undefined incoming
  gradients into zeros before their backward runs (``materialize_grads``), which is where
  the zero ``grad_input`` of a full backward hook comes from; autograd-generated nodes pass
  undefined (None) through.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from adjoint.format.errors import ProblemError
from adjoint.values.exact import ExactLimit
from adjoint.values.numbers.sizes import expandable
from adjoint.engine.graph import Edge, Node, Tensor
from adjoint.engine.nn_module import (LegacyHook, ModuleInputHook, ModuleOutputHook, MultiGradInner, MultiGradState,
                      UserNodeHook)
from adjoint.engine.runtime import FREED_GRAPH, CallRecord, Runtime, TorchError
from adjoint.engine import warns, zerotensor
from adjoint.engine.gradalias import Aliases, gradient_strides, output_objs, root_gradient
from adjoint.engine.reducer_hook import ReducerPostHook
from adjoint.engine.returned_number import ReturnedNumber
from adjoint.engine.complex_grad import COMPLEX_DTYPES, call_vjp, is_complex, zeros as zeros_of
from adjoint.engine.torch_errors import changed_type
from adjoint.engine.inplace import write
from adjoint.engine.pylist import PyList, is_tuple, sequence_name


@dataclass
class BackwardRequest:
    """One call of backward() or autograd.grad: the root, grad_output, inputs and retain_graph."""

    root: Tensor
    grad_output: object | None        # backend value, or None for ones
    method: str = "backward"          # backward | grad
    inputs: tuple = ()                # ((name, Tensor, loc), ...)
    retain_graph: bool = False
    grad_obj: object | None = None    # the engine tensor grad_output is (gradalias.GradObj), when an
                                      # outer backward holds it too; None: a new tensor


@dataclass
class BackwardResult:
    """What one backward pass gives: captured gradients, the nodes run and the hook calls."""

    captured: list                    # torch.autograd.grad results, in inputs order
    seen: dict = field(default_factory=dict)   # Tensor id -> gradient its grad_fn received (after pre-hooks)
    order: list = field(default_factory=list)  # node names in execution order
    calls_start: int = 0              # index in the runtime's log where this backward's calls start
    vjps: dict = field(default_factory=dict)   # id(node) -> (node, incoming grads, need, grads): each VJP
                                               # computed on the node's own saved values, for reuse by the
                                               # boundary adjoints (adjoint.answer.solve.pure_vjp)
    sent: dict = field(default_factory=dict)   # id(node) -> (node, the gradients it handed its edges (its
                                               # post hooks done), the same before its post hooks): what
                                               # each module call passed its inputs


# ----------------------------------------------------------------------------- ready queue

class ReadyQueue:
    """std::priority_queue<NodeTask, vector, CompareNodeTaskTime> with libstdc++'s heap."""

    def __init__(self):
        self.heap: list = []

    @staticmethod
    def _less(a, b) -> bool:
        return a[0] < b[0]

    def __len__(self) -> int:
        return len(self.heap)

    def push(self, item) -> None:
        self.heap.append(item)
        self._push_heap(len(self.heap) - 1, 0, item)

    def _push_heap(self, hole: int, top: int, value) -> None:
        h = self.heap
        parent = (hole - 1) // 2
        while hole > top and self._less(h[parent], value):
            h[hole] = h[parent]
            hole = parent
            parent = (hole - 1) // 2
        h[hole] = value

    def pop(self):
        h = self.heap
        n = len(h)
        if n > 1:
            value = h[n - 1]
            h[n - 1] = h[0]
            self._adjust_heap(0, n - 1, value)
        return h.pop()

    def _adjust_heap(self, hole: int, length: int, value) -> None:
        h = self.heap
        top = hole
        child = hole
        while child < (length - 1) // 2:
            child = 2 * (child + 1)
            if self._less(h[child], h[child - 1]):
                child -= 1
            h[hole] = h[child]
            hole = child
        if (length & 1) == 0 and child == (length - 2) // 2:
            child = 2 * (child + 1)
            h[hole] = h[child - 1]
            hole = child - 1
        self._push_heap(hole, top, value)


# ----------------------------------------------------------------------------- engine

def n_slots(node: Node) -> int:
    return 1 if node.is_accumulate else len(node.outputs)


def slot_shape(node: Node, i: int) -> tuple | None:
    """The shape of output slot ``i`` (None: a custom Function's non-tensor output, never a gradient)."""
    if node.is_accumulate:
        return node.variable.shape
    return node.outputs[i][0] if node.outputs[i] is not None else None


def slot_dtype(node: Node, i: int) -> str | None:
    """The dtype of output slot ``i``: the dtype of the gradient a hook there is handed."""
    if node.is_accumulate:
        return node.variable.dtype
    return node.outputs[i][1] if node.outputs[i] is not None else None


class Engine:
    def __init__(self, rt: Runtime, fire, outer: "Engine | None" = None):
        self.rt = rt
        self.outer = outer                     # the backward this one runs inside (a reentrant checkpoint's)
        self.B = rt.B
        self.fire_hook = fire                  # (hook, args, node, call) -> returned value(s)
        self.exec_info: dict[Node, dict] = {}
        self.deps: dict[Node, int] = {}
        self.multi_states: dict[int, MultiGradState] = {}   # this backward's state of each multi-grad hook
        self.zero_grads: dict[int, object] = {}   # this backward's ZeroTensor gradients (adjoint.engine.zerotensor)

    # ------------------------------------------------------------ run
    def run(self, req: BackwardRequest) -> BackwardResult:
        rt = self.rt
        root = req.root
        result = BackwardResult([None] * len(req.inputs), calls_start=len(rt.log))
        self.result = result
        self.retain_graph = req.retain_graph
        root_edge, root_grad = self.start(req)
        self.deps = self.dependencies(root_edge.node)
        self.root_node = root_edge.node
        if req.inputs:
            self.init_exec_info(root_edge.node, req)
        queue = ReadyQueue()
        not_ready: dict[Node, list] = {}
        buf = [None] * n_slots(root_edge.node)
        buf[root_edge.input_nr] = root_grad
        self.alias = Aliases(self, self.outer.alias if self.outer is not None else None)
        self.alias.deliver(root_edge.node, root_edge.input_nr, req.grad_obj or root_gradient(), True, buf)
        queue.push((root_edge.node.seq, root_edge.node, buf))
        rt.phase = "backward"
        outer_task, rt.graph_task = rt.graph_task, object()   # a new GraphTask (checkpoint recomputes per task)
        total = len(self.deps) + 1
        try:
            while len(queue):
                _, node, inputs = queue.pop()
                outputs = self.evaluate(node, inputs)
                if rt.progress is not None:
                    rt.progress("backward", len(result.order), total)
                if outputs is None:
                    continue
                out_objs = self.alias.out_objs
                for out, edge, obj in zip(outputs, node.edges, out_objs):
                    if edge is None:
                        continue
                    target, nr = edge.node, edge.input_nr
                    self.deps[target] -= 1
                    ready = self.deps[target] == 0
                    if target not in not_ready:
                        if self.exec_info and not self.should_execute(target):
                            continue
                        b = [None] * n_slots(target)
                        b[nr] = self.sum_into(None, out)
                        if out is not None:
                            self.alias.deliver(target, nr, obj, True, b)
                        if ready:
                            queue.push((target.seq, target, b))
                        else:
                            not_ready[target] = b
                    else:
                        b = not_ready[target]
                        if out is not None:
                            self.alias.deliver(target, nr, obj, b[nr] is None, b)
                        b[nr] = self.sum_into(b[nr], out, node)
                        if ready:
                            del not_ready[target]
                            queue.push((target.seq, target, b))
        finally:
            rt.phase = "forward"
            rt.graph_task = outer_task
            if root_edge.node.is_accumulate:
                rt.release_accumulator(root)
        self.check_unused(req, result)
        return result

    def start(self, req: BackwardRequest):
        """The edge the backward starts from and the gradient handed to it."""
        root_edge = self.rt.gradient_edge(req.root, hold=False)   # a leaf root: this backward alone may hold its accumulator
        return root_edge, req.grad_output if req.grad_output is not None else self.B.full(req.root.shape, 1)

    def sum_into(self, current, new, sender: Node | None = None):
        """InputBuffer::add: a second gradient into one slot is summed (in PyTorch's float, which
        may overflow: ``sender``, the node whose gradient is added, locates a refusal)."""
        if new is None or current is None:
            return current if new is None else new
        if self.zero_grads and (zerotensor.is_zero(self, current) or zerotensor.is_zero(self, new)):
            # old_var + var out of place (can_accumulate_inplace refuses a ZeroTensor): add_zerotensor's copy
            # of the other operand, a ZeroTensor when both are
            return new if zerotensor.is_zero(self, current) else current
        return self.B.after_backward(self.B.add(current, new), sender.loc if sender is not None else None,
                                     "the sum of two gradients" + (f" (one from {sender.name})" if sender is not None else ""))

    def check_unused(self, req: BackwardRequest, result: BackwardResult) -> None:
        if req.method == "grad":
            for i, value in enumerate(result.captured):
                if value is None:   # after the whole backward ran: every hook call before it happened
                    raise TorchError("RuntimeError", f"The differentiated Tensor at index {i} appears to not have "
                                                     "been used in the graph. Set allow_unused=True if this is the "
                                                     "desired behavior.", "autograd")

    def dependencies(self, root: Node) -> dict[Node, int]:
        deps: dict[Node, int] = {}
        seen = {root}
        stack = [root]
        while stack:
            node = stack.pop()
            for edge in node.edges:
                if edge is None:
                    continue
                target = edge.node
                deps[target] = deps.get(target, 0) + 1
                if target not in seen:
                    seen.add(target)
                    stack.append(target)
        return deps

    def init_exec_info(self, root: Node, req: BackwardRequest) -> None:
        """GraphTask::init_to_execute: which nodes run, which capture (autograd.grad / inputs=)."""
        accumulate = req.method == "backward"
        for idx, (name, t, loc) in enumerate(req.inputs):
            edge = self.input_edge(t)
            if accumulate and not t.is_leaf:  # run_backward retains grad of non-leaf inputs
                from adjoint.engine.hook_registration import retain_grad
                retain_grad(t, self.rt)
            if edge is None:   # NOTE [ Autograd Unreachable Input ]: an edge to a new Identity node, which no
                edge = Edge(self.identity_node(), 0)   # graph reaches
            info = self.exec_info.setdefault(edge.node, {"needed": False, "captures": []})
            if accumulate:
                info["needed"] = True
            else:
                info["captures"].append((edge.input_nr, idx))
        memo: dict[Node, bool] = {}

        def needed(node: Node) -> bool:
            if node in memo:
                return memo[node]
            memo[node] = False
            result = self.exec_info.get(node, {}).get("needed", False)
            for edge in node.edges:
                if edge is not None and (needed(edge.node) or self.exec_info.get(edge.node, {}).get("captures")):
                    result = True
            if result:
                self.exec_info.setdefault(node, {"needed": False, "captures": []})["needed"] = True
            memo[node] = result
            return result

        needed(root)

    def identity_node(self) -> Node:
        """The Identity node THPEngine_run_backward makes for an unreachable input: a Node like any
        other, so it takes the next sequence_nr."""
        return Node(self.rt._new_seq(), "torch::autograd::Identity", [], kind="identity")

    def input_edge(self, t):
        """THPEngine_run_backward's edge for an ``inputs=`` tensor: its grad_fn, else the leaf's
        accumulator only if one is alive (try_get_grad_accumulator: none is made for it); None
        when there is neither."""
        if t.is_view or t.grad_fn is not None:
            return self.rt.gradient_edge(t)
        node = self.rt.existing_grad_accumulator(t)
        return Edge(node, 0) if node is not None else None

    def should_execute(self, node: Node) -> bool:
        info = self.exec_info.get(node)
        return bool(info and (info["needed"] or info["captures"]))

    # ------------------------------------------------------------ one node
    def evaluate(self, node: Node, inputs: list):
        if self.zero_grads:
            zerotensor.check_inputs(self, node, inputs)
        alias = self.alias
        alias.objs = alias.take(node, len(inputs))
        alias.out_objs = []
        alias.frames = [[inputs, alias.objs]]
        if self.exec_info:
            info = self.exec_info.get(node, {"needed": False, "captures": []})
            if not info["needed"]:
                inputs = self.tensor_pre_hooks(node, inputs)
            for nr, idx in info["captures"]:
                self.result.captured[idx] = inputs[nr]
                alias.capture(idx, alias.objs[nr])
            if not info["needed"]:
                alias.frames = []
                return None
        return self.call_function(node, inputs)

    def call_function(self, node: Node, inputs: list) -> list:
        inputs = self.tensor_pre_hooks(node, inputs)
        inputs = self.node_pre_hooks(node, inputs)
        self.note_seen(node, inputs)
        self.result.order.append(node.name)
        alias = self.alias
        if node.is_accumulate:
            self.accumulate(node, inputs[0])
            return self.post_hooks(node, [], inputs)
        outputs = self.apply(node, inputs)
        if zerotensor.makes_zero(node):   # sgn_backward of a real self: _efficientzerotensor
            outputs = [zerotensor.mark(self, g, node.loc) for g in outputs]
        if not self.retain_graph:
            for sv in node.saved:
                sv.released = True
            node.released = True
        outputs = self.validate_outputs(node, outputs)
        alias.out_objs = output_objs(node, alias.objs, outputs, self.B.shape, inputs)
        # the engine keeps a node's inputs alive for its post hooks only (call_function copies them)
        alias.frames = [[outputs, alias.out_objs]] + ([[inputs, alias.objs]] if len(node.post_hooks) else [])
        before = outputs
        outputs = self.post_hooks(node, outputs, inputs)
        self.result.sent[id(node)] = (node, outputs, before)
        return outputs

    def note_seen(self, node: Node, inputs: list) -> None:
        if node.is_accumulate:
            self.result.seen[node.variable.id] = inputs[0]
            return
        for nr, value in enumerate(inputs):
            self.result.seen[(id(node), nr)] = value

    def accumulate(self, node: Node, grad) -> None:
        """AccumulateGrad: ``.grad`` += grad (first time: the gradient itself; nothing when None),
        then its post-accumulate hooks."""
        t = node.variable
        # AccumulateGrad::apply returns at once for a leaf that no longer requires grad (a hook
        # ran requires_grad_(False) on it after the forward): its .grad is left as it is
        if grad is not None and t.requires_grad:
            if zerotensor.grad_is_zero(t):   # variable_grad += new_grad, into a ZeroTensor
                raise TorchError("RuntimeError", zerotensor.IMMUTABLE)
            first = t.grad is None
            if first and zerotensor.is_zero(self, grad):   # new_grad.detach(): .grad is the ZeroTensor
                t.zero_grad_value = grad
            self.alias.accumulated(t, first, self.alias.objs[0])
            held = getattr(t, "grad_tensor", None)   # a .grad a create_graph backward made: a tensor with a graph
            current = held is not None and held.value is t.grad and held.grad_fn is not None
            if first:
                t.grad = grad
                shared = self.alias.objs[0]
                if shared is not None and shared.tensor is not None and not shared.held and \
                        self.alias.grads.get(t) is shared:
                    # AccumulateGrad took a view or detach() of a file tensor a hook returned as .grad
                    # itself (``new_grad.detach()``: nothing else held it): .grad is that memory, so a
                    # later write of the tensor (an SGD step on the leaf) is seen in .grad, and
                    # ``.grad += new_grad`` writes the tensor
                    t.grad_alias = (shared.tensor, lambda v, r=shared.tensor: write(self.rt, r, v))
            else:   # variable_grad += new_grad: in place, into the tensor .grad is (one a hook assigned, too)
                t.write_grad(self.B.after_backward(self.B.add(t.grad, grad), node.loc, "AccumulateGrad's .grad += gradient"))
            if first:
                self.alias.grad_obj(t).value = t.grad
            else:
                self.alias.added_into(t)
                if current:   # grad mode off: variable_grad += new_grad, in place; it keeps its grad_fn
                    held.value = t.grad
                    held.version.value += 1
        # PyTorch 2.13 calls them also when no gradient arrived (a hook replaced it with None):
        # handed the tensor, its .grad as it is
        if t.post_accumulate_hooks:
            runner = self.rt.hooks_runner
            for entry in t.post_accumulate_hooks.live():
                runner.fire_post_accumulate(entry.hook, t, node)
                self.alias.leaf_writes(runner.leaf_changes, entry.hook, runner.grad_sources)

    def tensor_pre_hooks(self, node: Node, inputs: list) -> list:
        inputs = list(inputs)
        if node.is_accumulate:
            dicts = [(0, node.variable.backward_hooks)] if node.variable.backward_hooks else []
        else:
            dicts = node.tensor_pre_hooks
        alias = self.alias
        objs = alias.objs
        alias.frames[0][0] = inputs
        # a hook registering a tensor's first hook on this node now would append to the vector
        # call_tensor_pre_hooks is iterating (adjoint.engine.hook_registration.tensor_hook_dict)
        self.rt.tensor_pre_hooks_of.append(node)
        try:
            self._tensor_pre_hooks(node, dicts, inputs, objs)
        finally:
            self.rt.tensor_pre_hooks_of.pop()
        if not node.is_accumulate:
            for nr, t in node.retains_grad_hooks.items():
                if inputs[nr] is not None:
                    t.grad = inputs[nr] if t.grad is None else self.B.add(t.grad, inputs[nr])
        return inputs

    def _tensor_pre_hooks(self, node: Node, dicts: list, inputs: list, objs: list) -> None:
        alias = self.alias
        for nr, hooks in dicts:
            for entry in hooks.live():
                value = inputs[nr]
                if isinstance(entry, MultiGradInner):
                    alias.frames[0][0] = inputs
                    self.multi_grad(entry, value, objs[nr])
                    continue
                returned = self.fire_hook(entry.hook, {"grad": value}, node, None, objs={"grad": objs[nr]})
                alias.after_hook(entry.hook)
                if returned is not None:
                    self.check_same(entry.hook, returned, slot_shape(node, nr), slot_dtype(node, nr))
                    inputs[nr] = returned
                    objs[nr] = alias.returned(objs[nr])

    def node_pre_hooks(self, node: Node, inputs: list) -> list:
        alias = self.alias
        for entry in node.pre_hooks.live():
            alias.frames[0][0] = inputs
            returned = self.fire_hook(entry.hook, {"grad_outputs": tuple(inputs)}, node, None,
                                      objs={"grad_outputs": tuple(alias.objs)})
            alias.after_hook(entry.hook)
            if returned is not None:
                inputs = self.check_tuple(entry.hook, inputs, returned,
                                          [slot_shape(node, i) for i in range(n_slots(node))],
                                          dtypes=[slot_dtype(node, i) for i in range(n_slots(node))])
                alias.objs[:] = alias.returned_tuple(alias.objs)
        alias.frames[0][0] = inputs
        return inputs

    def apply(self, node: Node, inputs: list) -> list:
        B = self.B
        if node.kind == "ddpsink":   # DistributedDataParallel's _DDPSink: set_materialize_grads(False), identity
            return list(inputs)
        if node.kind in ("hookfn", "function", "checkpoint"):
            # PyNode::apply: materialize_grads turns undefined incoming gradients into zeros
            inputs = [x if x is not None or slot_shape(node, i) is None else
                      zeros_of(B, slot_shape(node, i), slot_dtype(node, i))
                      for i, x in enumerate(inputs)]
            if node.kind == "checkpoint":   # CheckpointFunction.backward: a reentrant backward
                from adjoint.engine.checkpoint_reentrant import checkpoint_backward
                # torch.autograd.backward(outputs, grads) hands the engine the very gradient
                # tensors this node was handed (a materialized zero is a new one)
                objs = list(self.alias.objs)
                return checkpoint_backward(self, node, inputs, lambda root, grad, slot: Engine(
                    self.rt, self.rt.hooks_runner.fire_values, self).run(BackwardRequest(
                        root, grad, grad_obj=objs[slot] if slot < len(objs) else None)))
            if node.kind == "hookfn":
                return list(inputs)
            from adjoint.engine.autograd_function import function_backward
            return function_backward(self.rt, node, inputs)
        if node.kind == "copyslices":
            return self.copy_slices(node, inputs)
        saved = {id(sv): self.rt.unpack(node, sv) for sv in node.saved}
        if getattr(node.op, "sequence_nr_max", False):   # Error::apply throws whatever it is handed
            backward_error(node, [])
        if all(g is None for g in inputs):
            return [None] * len(node.edges)
        need = [e is not None and (not self.exec_info or self.should_execute(e.node)) for e in node.edges]
        if not any(need):
            return [None] * len(node.edges)
        if node.op.reads_grad is not None and self.alias.objs:
            # the kernel reads its gradient in a memory order of its own (adjoint.engine.bn_layout)
            x = node.inputs[0]
            inputs = [node.op.reads_grad(B, inputs[0], gradient_strides(self.alias.objs[0], x.shape), x.shape,
                                         x.strides)] + list(inputs[1:])
        ins = list(node.input_values)
        outs = list(node.output_values)
        for sv in node.saved:
            spec = next(s for s in node.op.saves if s.name == sv.name)
            (ins if spec.what == "in" else outs)[spec.index] = saved[id(sv)]
        backward_error(node, need)
        try:
            grads = call_vjp(node, B, list(inputs), ins, outs, need)
        except ExactLimit as exc:
            raise ProblemError(node.loc, f"the backward of {node.name}: {exc}") from None
        grads = [B.after_backward(g, node.loc, f"the backward of {node.name}") if g is not None else None
                 for g in grads]
        unread = node.op.vjp_unread(node.params) if node.op.vjp_unread is not None else ()
        if all(a is b or i in unread for i, (a, b) in enumerate(zip(ins, node.input_values))) and \
                all(a is b for a, b in zip(outs, node.output_values)):
            self.result.vjps[id(node)] = (node, tuple(inputs), tuple(need), grads)
        # autograd-generated nodes compute only the slots task_should_compute_output allows (a
        # TensorList argument is one range: all its slots, once one is needed)
        if node.op.list_argument:
            return list(grads)
        return [x if n else None for x, n in zip(grads, need)]

    def copy_slices(self, node: Node, inputs: list) -> list:
        """CopySlices: the base's gradient, with the written view's part replaced by what the
        in-place op's node (called directly: its hooks do not run) gives for it."""
        from adjoint.engine.inplace import check_copy_slices_overlap, copy_slices_backward
        view, fn = node.params
        g = inputs[0]
        if g is None:
            return [None] * len(node.edges)
        if node.released:  # release_variables dropped its fn: CopySlices::apply_impl throws ERR_BACKWARD_TWICE
            raise TorchError("RuntimeError", FREED_GRAPH, "freed_graph")
        need = [e is not None and (not self.exec_info or self.should_execute(e.node)) for e in node.edges]
        out = copy_slices_backward(self.rt, node, g, [True] + need[1:], self.op_vjp)
        if need[0] and out[0] is not None:
            check_copy_slices_overlap(view)
        if not self.retain_graph:
            for sv in fn.saved:
                sv.released = True
        # like every node, it hands on (and its post hooks see) only what an edge needs
        return [x if n else None for x, n in zip(out, need)]

    def op_vjp(self, node: Node, grads: list, need: list) -> list:
        if node.kind == "function":   # a custom Function that marked a view dirty (adjoint/engine/dirty.py)
            from adjoint.engine.autograd_function import function_backward
            return [x if n else None for x, n in zip(function_backward(self.rt, node, grads), need)]
        saved = {id(sv): self.rt.unpack(node, sv) for sv in node.saved}
        ins = list(node.input_values)
        outs = list(node.output_values)
        for sv in node.saved:
            spec = next(s for s in node.op.saves if s.name == sv.name)
            (ins if spec.what == "in" else outs)[spec.index] = saved[id(sv)]
        backward_error(node, need)
        grads = call_vjp(node, self.B, grads, ins, outs, need)
        return [x if n else None for x, n in zip(grads, need)]

    def validate_outputs(self, node: Node, outputs: list) -> list:
        outputs = list(outputs)
        for i, edge in enumerate(node.edges):
            if edge is None or outputs[i] is None:
                continue
            want = node.inputs[i].shape
            got = tuple(self.B.shape(outputs[i]))
            if got != want:
                if expandable(want, got):
                    outputs[i] = self.B.sum_to(outputs[i], want)
                else:
                    # engine.cpp's validate_outputs, after the node ran and before its post hooks
                    raise TorchError("RuntimeError", f"Function {node.name} returned an invalid gradient at index {i} "
                                                     f"- got {list(got)} but expected shape compatible with "
                                                     f"{list(want)}")
        return outputs

    def post_hooks(self, node: Node, outputs: list, inputs: list) -> list:
        alias = self.alias
        for entry in node.post_hooks.live():
            alias.set_outputs(outputs)
            if isinstance(entry, UserNodeHook):
                returned = self.fire_hook(entry.hook, {"grad_inputs": tuple(outputs), "grad_outputs": tuple(inputs)},
                                          node, None, objs={"grad_inputs": tuple(alias.out_objs),
                                                            "grad_outputs": tuple(alias.objs)})
                alias.after_hook(entry.hook)
                if returned is not None:
                    outputs = self.check_tuple(entry.hook, outputs, returned, self.edge_shapes(node),
                                               dtypes=self.edge_dtypes(node))
                    alias.out_objs[:] = alias.returned_tuple(alias.out_objs)
            elif isinstance(entry, LegacyHook):
                returned = self.fire_hook(entry.hook, {"grad_input": tuple(outputs), "grad_output": tuple(inputs)},
                                          node, entry.call, objs={"grad_input": tuple(alias.out_objs),
                                                                  "grad_output": tuple(alias.objs)})
                alias.after_hook(entry.hook)
                if returned is not None:
                    outputs = self.check_tuple(entry.hook, outputs, returned, self.edge_shapes(node),
                                               dtypes=self.edge_dtypes(node))
                    alias.out_objs[:] = alias.returned_tuple(alias.out_objs)
            elif isinstance(entry, ModuleOutputHook):
                outputs = self.module_output_hook(entry.state, inputs, node)
            elif isinstance(entry, ModuleInputHook):
                outputs = self.module_input_hook(entry.state, outputs, node)
            elif isinstance(entry, ReducerPostHook):   # DistributedDataParallel's (adjoint.engine.distributed)
                entry()
        return outputs

    def edge_shapes(self, node: Node) -> list:
        return [node.inputs[i].shape if e is not None else None for i, e in enumerate(node.edges)]

    def edge_dtypes(self, node: Node) -> list:
        return [node.inputs[i].dtype if e is not None else None for i, e in enumerate(node.edges)]

    def returned_dtypes(self, returned) -> tuple:
        """The dtype of each item of a tuple a hook returned (None for anything but a tensor), or of
        the tensor it returned alone, as the hook runner saw them before they became values."""
        n = len(returned) if isinstance(returned, tuple) else 1
        got = getattr(self.rt.hooks_runner, "returned_dtypes", None)
        return got if got is not None and len(got) == n else (None,) * n

    def slot_kinds(self, returned, n: int) -> tuple:
        """The dtype of each of ``n`` slots after a hook returned ``returned`` (a tuple, or a tensor
        whose rows are the slots)."""
        got = self.returned_dtypes(returned)
        return tuple(got) if isinstance(returned, tuple) else got * n

    def as_returned(self, grads: tuple, kinds) -> tuple:
        """A module's next hook is handed the returned tensors themselves (BackwardHook passes the
        tuple on): one of another dtype than the problem's float (bool, int64) keeps it."""
        return tuple(self.rt.tensor(g, dtype=d) if g is not None and d is not None and d != self.rt.dtype
                     and d not in COMPLEX_DTYPES and not isinstance(g, Tensor) else g for g, d in zip(grads, kinds))

    def check_slots(self, indices, grads, shapes: list, dtypes, kinds) -> None:
        """The check of BackwardHook's hook result, slot by slot (``check_single_result``): its dtype
        (``kinds``, against ``dtypes``), then its shape."""
        for i in indices:
            r = grads[i].value if isinstance(grads[i], Tensor) else grads[i]
            error = self.slot_error(r, shapes[i], dtypes[i], kinds[i]) if r is not None else None
            if error is not None:
                raise error

    def slot_error(self, result, shape, dtype: str | None, got: str | None) -> TorchError | None:
        """``check_single_result`` of one hook result against its slot, once it is a tensor: its
        dtype (``got`` against ``dtype``), then its shape; None when it passes."""
        if dtype is not None and got is not None and got != dtype:
            return changed_type(dtype, got)
        if shape is not None and tuple(self.B.shape(result)) != tuple(shape):
            return TorchError("RuntimeError", "hook 'hook' has changed the size of value", "hook_result")
        return None

    # ------------------------------------------------------------ nn.Module machinery (torch/utils/hooks.py)
    def module_output_hook(self, state, grad_output: list, node: Node) -> list:
        """BackwardHook.setup_output_hook's post-hook on the output BackwardHookFunctionBackward."""
        call = state.call
        alias = self.alias
        grads = _pack_with_none(state.output_tensors_index, grad_output, state.n_outputs)
        gobjs = _pack_with_none(state.output_tensors_index, alias.objs, state.n_outputs)
        state.grad_outputs = grads
        alias.hold(state, gobjs)
        dtypes = _dtypes(call.out)
        kinds = dtypes   # the dtype of each slot's gradient now (a hook's result may have another)
        state.pre_replaced = False
        bare = None   # a tensor a pre-hook returned for the tuple: BackwardHook hands it on as it is
        for hook in state.user_pre_hooks:
            arg, arg_objs = (grads, gobjs) if bare is None else bare
            returned = self.fire_hook(hook.hook, {"grad_output": arg}, node, call, objs={"grad_output": arg_objs})
            grads = alias.refresh(grads, gobjs, alias.after_hook(hook.hook))
            if returned is None:
                continue
            handed = grads
            last = hook is state.user_pre_hooks[-1] and (state.input_tensors_index is not None or not state.user_hooks)
            # no input requires grad: BackwardHook warns (and calls the full hooks) before the check
            grads = tuple(self.check_tuple(hook.hook, list(grads), returned, _shapes(call.out), "grad_output", last,
                                           dtypes=dtypes, defer=state.input_tensors_index is None))
            kinds = self.slot_kinds(returned, len(grads))
            grads = self.as_returned(grads, kinds)
            # another value than it was handed (returning grad_output itself, or equal values, is not)
            state.pre_replaced = state.pre_replaced or any(self._other_value(a, b) for a, b in zip(handed, grads))
            bare = None if is_tuple(returned) else (returned, alias.returned(None))
            gobjs = tuple(alias.returned_tuple(gobjs))
            state.grad_outputs = grads
            alias.hold(state, gobjs)
        local = grads
        if state.input_tensors_index is None:
            warns.warn(self.rt, "UserWarning", warns.FULL_HOOK_NO_INPUTS)
            grad_input = (None,) * state.n_inputs
            for hook in state.user_hooks:
                arg, arg_objs = (grads, gobjs) if bare is None else bare
                returned = self.fire_hook(hook.hook, {"grad_input": grad_input, "grad_output": arg}, node, call,
                                          objs={"grad_input": grad_input, "grad_output": arg_objs})
                grads = local = alias.refresh(grads, gobjs, alias.after_hook(hook.hook))
                if returned is not None and not (is_tuple(returned) and all(r is None for r in returned)):
                    raise TorchError("RuntimeError", "Backward hook for Modules where no input requires gradient "
                                                     "should always return None or None for all gradients.",
                                     "hook_result")
            state.grad_outputs = None
            alias.release(state)
        # BackwardHook's pre-hook returns: the node's pre-hook check compares each gradient with
        # its output's shape (a pre-hook but the last may have changed one: the later hooks ran)
        self.check_slots(state.output_tensors_index, local, _shapes(call.out), dtypes, kinds)
        alias.out_objs[:] = _unpack_none(state.output_tensors_index, gobjs)
        return _unpack_none(state.output_tensors_index, local)

    def _other_value(self, a, b) -> bool:
        """Is the gradient ``b`` a hook returned another value than ``a`` it was handed (None, a
        tensor of another dtype, or other numbers)?"""
        if a is b:
            return False
        if a is None or b is None or isinstance(a, Tensor) or isinstance(b, Tensor):
            return True   # (an engine tensor: a result of another dtype the hook made)
        return not self.B.same_value(a, b)

    def module_input_hook(self, state, grad_input: list, node: Node) -> list:
        """BackwardHook._set_user_hook's post-hook on the input BackwardHookFunctionBackward."""
        call = state.call
        if state.grad_outputs is None:
            return grad_input
        res = _pack_with_none(state.input_tensors_index, grad_input, state.n_inputs)
        # the zeros BackwardHookFunction materialized for an input without a gradient are
        # zeros_like(input): an int64 or bool input's grad_input keeps that dtype
        res = tuple(self.rt.tensor(g, dtype=a.dtype) if g is not None and isinstance(a, Tensor)
                    and a.dtype != self.rt.dtype and not is_complex(a) else g for g, a in zip(res, call.args))
        alias = self.alias
        robjs = _pack_with_none(state.input_tensors_index, alias.out_objs, state.n_inputs)
        dtypes = _dtypes(call.args)
        kinds = dtypes   # the dtype of each slot's gradient now (a hook's result may have another)
        for hook in state.user_hooks:
            returned = self.fire_hook(hook.hook, {"grad_input": res, "grad_output": state.grad_outputs}, node, call,
                                      objs={"grad_input": robjs, "grad_output": alias.held(state)})
            res = alias.refresh(res, robjs, alias.after_hook(hook.hook))
            if returned is None:
                continue
            res = tuple(self.check_tuple(hook.hook, list(res), returned, _shapes(call.args), "grad_input",
                                         hook is state.user_hooks[-1], dtypes=dtypes))
            kinds = self.slot_kinds(returned, len(res))
            robjs = tuple(alias.returned_tuple(robjs))
            res = self.as_returned(res, kinds)
        # BackwardHook's hook returns: its node's post-hook check compares each gradient with the
        # one the node computed (a hook but the last may have changed a dtype or a shape: the later ones ran)
        self.check_slots(state.input_tensors_index, res, _shapes(call.args), dtypes, kinds)
        state.grad_outputs = None
        alias.release(state)
        alias.out_objs[:] = _unpack_none(state.input_tensors_index, robjs)
        return _unpack_none(state.input_tensors_index, res)

    # ------------------------------------------------------------ multi-grad hooks
    def multi_grad(self, entry: MultiGradInner, grad, obj=None) -> None:
        # register_multi_grad_hook keys its count, buffer and "ran" flag by the graph task
        # (torch._C._current_graph_task_id()): every backward starts them afresh. Its nb_calls is
        # one closure variable of the registration (entry.state), shared by every graph task and
        # set again on each task's first call: a backward run inside another (a reentrant
        # checkpoint's, a hook body's) resets it under the outer one, which then fires when its
        # own count meets that number, not its own (often never)
        state = self.multi_states.setdefault(id(entry.state), MultiGradState(entry.state.hook, entry.state.tensors,
                                                                                   nodes=entry.state.nodes))
        hook = state.hook
        alias = self.alias
        if hook.mode == "any":   # the first of its tensors' gradients in each backward call (graph task)
            if not state.ran:
                state.ran = True
                self.fire_hook(hook, {"grad": grad}, None, None, objs={"grad": obj})
                alias.after_hook(hook)
            return
        if state.count == 0:
            nodes = state.nodes or [None] * len(state.tensors)
            entry.state.nb_calls = sum(self.will_execute(t, n) for t, n in zip(state.tensors, nodes))
            state.buffer = [None] * len(state.tensors)
        state.count += 1
        state.buffer[entry.index] = grad
        held = alias.held(state) or (None,) * len(state.buffer)
        alias.hold(state, held[:entry.index] + (obj,) + held[entry.index + 1:])
        if state.count == entry.state.nb_calls:
            self.fire_hook(hook, {"grads": tuple(state.buffer)}, None, None, objs={"grads": alias.held(state)})
            alias.after_hook(hook)
            state.count = 0
            state.buffer = None
            alias.release(state)

    def will_execute(self, t: Tensor, node=None) -> bool:
        """torch._C._will_engine_execute_node of the tensor's grad_fn (or grad accumulator).

        The backward's own root node is never in the graph task's node set (it is where the
        walk starts), so it answers False: a multi-grad hook over the tensor backward starts
        from waits for one call fewer (and fires once per call when that was its only other
        tensor). During autograd.grad, the accumulator of a leaf whose gradient is captured
        makes PyTorch raise. ``node``: the one the hook captured when it was registered (PyTorch's
        ``grad_fns``), else the tensor's own now."""
        if node is None:
            node = t.grad_fn if t.grad_fn is not None else t.grad_accumulator
        if node is None or node is self.root_node or node not in self.deps:
            return False
        if not self.exec_info:
            return True
        if node.kind == "accumulate" and self.exec_info.get(node, {}).get("captures"):
            raise TorchError("RuntimeError", "A leaf node was passed to _will_engine_execute_node but we are currently "
                                             "running autograd.grad(). This is currently not supported.")
        return self.should_execute(node)

    # ------------------------------------------------------------ checks
    def check_same(self, hook, returned, shape, dtype: str | None = None, got: str | None = None) -> None:
        """A tensor hook's result, checked as ``check_single_result`` does (its ``hook 'hook'``: the
        function's name; adjoint calls every hook function ``hook``): a tensor, of the gradient's
        dtype (``dtype``; ``got``: the result's, else as the hook runner saw it), then of its shape."""
        if isinstance(returned, tuple):
            raise TorchError("TypeError", f"expected Variable, but hook returned '{sequence_name(returned)}'",
                             "hook_result")
        if not self.B.is_value(returned):
            raise ProblemError(hook.returns.loc, "a tensor hook must return a tensor (the new gradient) or nothing")
        error = self.slot_error(returned, shape, dtype, got or self.returned_dtypes(returned)[0])
        if error is not None:
            raise error

    def check_tuple(self, hook, original: list, returned, shapes: list, module: str | None = None,
                    last: bool = True, dtypes=None, got=None, defer: bool = False) -> list:
        """A hook's returned tuple, checked as PyTorch checks it: a node hook (and the legacy module
        hook, a post-hook on its node) by ``PyFunctionPostHook`` / ``PyFunctionPreHook`` right after
        it returns; a full backward (pre-)hook (``module``: ``grad_input`` / ``grad_output``) by
        ``BackwardHook`` for its count, right after it returns, and for its shapes by the engine
        once BackwardHook's own ``hook`` returns -- after the module's later hooks (``last``: none
        follows; otherwise a full backward (pre-)hook's gradients are handed on and checked by
        :meth:`module_input_hook` / :meth:`module_output_hook` once the last ran). ``dtypes``: each
        slot's dtype; ``got``: each returned item's (else as the hook runner saw them); a tensor of
        another dtype is refused before its size is read."""
        where = hook.returns.loc
        if module is None and isinstance(returned, PyList):   # PyFunctionPre/PostHook's check_result: PyTuple_Check
            raise TorchError("TypeError", "expected tuple, but hook returned 'list'", "hook_result")
        if not isinstance(returned, tuple) and module is not None and self.B.is_value(returned):
            return self._tensor_for_tuple(hook, original, returned, shapes, module, last, dtypes, defer)
        if not isinstance(returned, tuple):
            if module is None and self.B.is_value(returned):
                raise TorchError("TypeError", "expected tuple, but hook returned 'Tensor'", "hook_result")
            raise ProblemError(where, f"the {hook.kind} hook must return a tuple such as (2 * grad_input[0],): "
                                      "PyTorch expects one gradient per slot")
        if len(returned) != len(original):
            if module == "grad_input":
                message = f"Backward hook returned an invalid number of grad_input, got {len(returned)}, but " \
                          f"expected {len(original)}"
            elif module == "grad_output":
                message = f"Backward pre hook returned an invalid number of grad_output, got {len(returned)}, " \
                          f"but expected {len(original)}"
            else:
                message = f"hook 'hook' has returned an incorrect number of values (got {len(returned)}, but " \
                          f"expected {len(original)})"
            raise TorchError("RuntimeError", message, "hook_result")
        dtypes = dtypes or (None,) * len(returned)
        got = got or self.returned_dtypes(returned)
        if module is None:
            # PyFunctionPre/PostHook's check_result: check_single_result slot by slot, in order --
            # None passes, a value where the hook was handed None is refused before its type is
            # read, then a number's type, then the dtype, then the size
            for r, o, s, d, g in zip(returned, original, shapes, dtypes, got):
                if r is None:
                    continue
                if o is None:
                    raise TorchError("RuntimeError", "can't replace a None gradient with a non-None value",
                                     "hook_result")
                if isinstance(r, ReturnedNumber):
                    raise TorchError("TypeError", f"expected Variable, but hook returned '{r.name}'", "hook_result")
                error = self.slot_error(r, s, d, g)
                if error is not None:
                    raise error
            return list(returned)
        number = next((r for r in returned if isinstance(r, ReturnedNumber)), None)
        if number is not None:
            if module is not None and not last:
                raise ProblemError(where, f"the hook returns a Python {number.name} where PyTorch expects a tensor or "
                                          "None; the module's later hooks would be handed it, which adjoint does not "
                                          "model yet")
            raise TorchError("TypeError", f"expected Variable, but hook returned '{number.name}'", "hook_result")
        for r, s, d, g in zip(returned, shapes, dtypes, got):
            if r is None or s is None:
                continue
            error = self.slot_error(r, s, d, g)
            if error is not None:
                if not last or defer:
                    return list(returned)   # the module's later hooks are handed it; checked once they ran
                raise error
        return list(returned)


    def _tensor_for_tuple(self, hook, original: list, returned, shapes: list, module: str, last: bool,
                          dtypes=None, defer: bool = False) -> list:
        """A full backward (pre-)hook that returns a tensor where BackwardHook expects a tuple: its
        ``len(out)`` is the tensor's first size (a 0-d tensor has none: TypeError) and its slots
        are the tensor's rows, so PyTorch refuses the count, or the rows' shape once the module's
        last hook returned (the later hooks are handed the tensor itself: module_output_hook). A
        tensor whose rows pass both checks runs on with them: not modelled."""
        shape = tuple(self.B.shape(returned))
        if not shape:
            raise TorchError("TypeError", "len() of a 0-d tensor", "hook_result")
        rows = tuple(self.B.index(returned, (i,)) for i in range(shape[0]))
        if len(rows) == len(original) and last and all(
                s is None or tuple(shape[1:]) == tuple(s) for s in shapes):
            raise ProblemError(hook.returns.loc, f"the {hook.kind} hook returns a tensor whose rows PyTorch would take "
                                                 "as the gradients (one per slot); not modelled: return a tuple")
        return self.check_tuple(hook, original, rows, shapes, module, last, dtypes,
                                self.returned_dtypes(returned) * len(rows), defer)


def _pack_with_none(indices: list, values, size: int) -> tuple:
    """BackwardHook._pack_with_none: one slot per positional input (or output), the gradients of
    the tensors at ``indices``, None at every other position (a non-tensor argument or output)."""
    res = [None] * size
    for i, v in zip(indices, values):
        res[i] = v
    return tuple(res)


def _unpack_none(indices: list, values) -> list:
    """BackwardHook._unpack_none: the slots of the tensors back, in order."""
    return [values[i] for i in indices]


def _shapes(values) -> list:
    """The shape of each tensor among a module's inputs (or its output, or outputs), None elsewhere."""
    items = values if isinstance(values, tuple) else (values,)
    return [getattr(v, "shape", None) for v in items]


def _dtypes(values) -> tuple:
    """The dtype of each tensor among a module's inputs (or its output, or outputs), None elsewhere."""
    items = values if isinstance(values, tuple) else (values,)
    return tuple(v.dtype if isinstance(v, Tensor) else None for v in items)


def raise_unpack_error(node: Node) -> None:
    """A saved mask or index an unpack hook gave back as another dtype: the error its backward kernel
    raises once every saved tensor is unpacked (adjoint.engine.hook_runner.index_dtype_error)."""
    for sv in node.saved:
        error = getattr(sv, "unpack_error", None)
        if error is not None:
            sv.unpack_error = None
            raise error


def backward_error(node: Node, need: list) -> None:
    """The node's backward refuses its inputs' dtypes (``x ** b`` for a bool ``b``: ``b - 1``), once
    its saved tensors are unpacked (the generated ``apply`` unpacks every one first); or a saved mask or index
    an unpack hook gave back as another dtype (adjoint.engine.hook_runner.index_dtype_error)."""
    raise_unpack_error(node)
    if node.op.backward_error is not None:
        message = node.op.backward_error(tuple(t.dtype if t is not None else None for t in node.inputs),
                                         node.params, need)
        if isinstance(message, tuple):   # (type, message, cause): a node that always raises (DelayedError's)
            raise TorchError(*message)
        if message:
            raise TorchError("RuntimeError", message, "dtype")


__all__ = ["BackwardRequest", "BackwardResult", "Engine", "ReadyQueue", "TorchError", "CallRecord", "expandable"]
