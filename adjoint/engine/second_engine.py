"""The engine for backward steps with second-order options (adjoint.format.second_steps).

:class:`SecondEngine` is :class:`adjoint.engine.reverse.Engine` plus:

* several roots (``roots:``): PyTorch's ``GraphRoot`` node (it takes a ``sequence_nr``), whose
  edges are the roots' gradient edges and which hands each its ``grad_outputs`` entry;
* ``allow_unused`` / ``materialize_grads``: an input that gets no gradient is None, or zeros
  (``torch.zeros_like(input, requires_grad=create_graph)``: a new leaf); without either, PyTorch's error
  is the answer (a :class:`~adjoint.engine.runtime.TorchError`, not bad input);
* ``create_graph``: gradients are tensors with their own ``grad_fn``. Every node runs its
  backward formula as recorded ops (adjoint.engine.second_formulas), two gradients reaching one slot
  are summed by a recorded ``add`` (InputBuffer::accumulate under grad mode), ``validate_outputs``
  sums broadcast gradients with recorded ``sum``/``view``, hooks run with grad mode on (what they
  return is part of the graph; what they write in place is recorded on the gradient tensor
  itself, which flows on: adjoint.engine.gradalias.Aliases.after_hook), and ``.grad`` is replaced
  out of place (a first gradient is copied into a new tensor: ``CopyBackwards``, at version 1; a
  later one is added: ``AddBackward0``).
"""

from __future__ import annotations

from adjoint.format.errors import ProblemError
from adjoint.engine.graph import Edge, Node, Tensor
from adjoint.engine.reverse import BackwardResult, Engine, backward_error, raise_unpack_error, slot_shape
from adjoint.engine.runtime import TorchError
from adjoint.engine import warns, zerotensor
from adjoint.engine.complex_grad import zeros as zeros_of
from adjoint.engine.second_formulas import FORMULAS as _FORMULAS, NotModelled, sum_to
from adjoint.engine.second_reductions import REDUCTIONS
from adjoint.engine.second_layers import LAYERS
from adjoint.engine.second_pointwise import POINTWISE
from adjoint.engine.second_binary import BINARY
from adjoint.engine.second_products import PRODUCTS
from adjoint.engine.second_nn import NN
from adjoint.engine.second_losses import LOSSES
from adjoint.engine.second_recurrent import RECURRENT

FORMULAS = {**_FORMULAS, **REDUCTIONS, **LAYERS, **POINTWISE, **NN, **LOSSES, **BINARY, **PRODUCTS,
            **RECURRENT}



def _plain_output_dtype(node, index: int, default: str) -> str:
    """The dtype of a node's output without gradient (max pooling's int64 indices: Op.out_dtypes)."""
    dtypes = node.op.out_dtypes
    return dtypes[index] if index < len(dtypes) and dtypes[index] else default


def grad_tensor(rt, t: Tensor) -> Tensor:
    """The tensor holding ``t.grad``: the one a create_graph backward made (with its graph), or,
    where ``.grad`` was set since, a new one of its value (no grad_fn)."""
    held = getattr(t, "grad_tensor", None)
    if held is None or held.value is not t.grad:
        held = rt.tensor(t.grad, dtype=t.dtype)
    return held

class SecondEngine(Engine):
    def __init__(self, rt, fire, second, loc, root_grads=None, root_tensors=()):
        super().__init__(rt, fire if not second.create_graph else self.fire_graph)
        self.second = second
        self.loc = loc                         # the backward step (where refusals point)
        self.create_graph = second.create_graph
        self.root_tensors = tuple(root_tensors)   # every root (several: a GraphRoot)
        self.root_grads = root_grads           # per root: gradient (value, or Tensor under create_graph)
        self.tensors: list = []                # create_graph: the captured gradients as tensors
        self.recorded: list = []               # create_graph: the ops it recorded (graph.Application, call = node)

    # ------------------------------------------------------------ start and end
    def start(self, req):
        roots = self.root_tensors
        grads = [g if g is not None else self.ones(t) for g, t in zip(self.root_grads, roots)]
        # THPEngine_run_backward makes the Identity nodes of unreachable inputs before execute()
        # makes the GraphRoot: they take their sequence_nr first
        self.identities = [super(SecondEngine, self).identity_node() for _, t, _ in req.inputs
                           if self.input_edge(t) is None]
        if len(roots) == 1:
            return self.rt.gradient_edge(roots[0], hold=False), grads[0]
        node = Node(self.rt._new_seq(), "torch::autograd::GraphRoot", [self.rt.gradient_edge(t) for t in roots],
                    kind="graphroot", params=tuple(grads), inputs=roots)
        node.outputs = [((), self.rt.dtype)]
        return Edge(node, 0), None

    def identity_node(self) -> Node:
        return self.identities.pop(0)

    def ones(self, t: Tensor):
        value = self.B.full(t.shape, 1)
        return self.rt.tensor(value) if self.create_graph else value

    def run(self, req) -> BackwardResult:
        before, creating = self.rt.grad_enabled, self.rt.creating_graph
        self.rt.grad_enabled = self.create_graph    # the engine's GradMode is create_graph
        self.rt.creating_graph = self.create_graph
        recording = self.rt.second_record
        if self.create_graph:     # every op it records, kept for the derivation (adjoint.derivation.second)
            self.rt.second_record = self.recorded
        try:
            result = super().run(req)
        except NotModelled as exc:
            raise ProblemError(self.loc, f"create_graph through {exc.prim} is not modelled yet; run this backward "
                                         "without create_graph, or use ops whose double backward is modelled "
                                         "(docs/not-modelled.md)") from None
        finally:
            self.rt.grad_enabled, self.rt.creating_graph = before, creating
            self.rt.second_record = recording
            if self.create_graph and req.method == "backward":
                # Engine::execute's TORCH_WARN_ONCE, issued in C++ while the backward starts; the
                # PyWarningHandler around run_backward hands it to Python only when the call
                # returns (or raises): after every warning Python code issued during the backward
                warns.warn_once(self.rt, "UserWarning", warns.CREATE_GRAPH_CYCLE, "backward")
        return result

    def check_unused(self, req, result) -> None:
        if req.method != "grad":
            return
        s = self.second
        if s.materialize_grads and s.allow_unused is False:
            return   # raised before the backward ran (adjoint.engine.second_run)
        self.tensors = list(result.captured)
        for i, ((name, t, loc), value) in enumerate(zip(req.inputs, result.captured)):
            if value is not None:
                if isinstance(value, Tensor):
                    result.captured[i] = value.value
                continue
            if s.materialize_grads:   # torch.zeros_like(input, requires_grad=create_graph)
                zeros = self.rt.leaf(zeros_of(self.B, t.shape, t.dtype), bool(s.create_graph), dtype=t.dtype)
                self.tensors[i] = zeros
                result.captured[i] = zeros.value
            elif not s.allow_unused:
                raise TorchError("RuntimeError", f"The differentiated Tensor at index {i} appears to not have been "
                                                 "used in the graph. Set allow_unused=True if this is the desired "
                                                 "behavior.", "unused")

    # ------------------------------------------------------------ recording (create_graph)
    def sum_into(self, current, new, sender=None):
        if not self.create_graph or current is None or new is None:
            return super().sum_into(current, new, sender)
        out = self.rt.apply("add", [current, new], None, self.loc)   # old_var + var
        zero_current, zero_new = zerotensor.is_zero(self, current), zerotensor.is_zero(self, new)
        if zero_current and zero_new:
            zerotensor.mark(self, out, self.loc)   # add_zerotensor of two: a ZeroTensor (neither requires grad: no node)
        elif zero_current or zero_new:   # add_zerotensor: a copy of the other operand (its -0.0 kept)
            out.value = (new if zero_current else current).value
            if out.grad_fn is not None:
                out.grad_fn.output_values = [out.value]
        return out

    def note_seen(self, node, inputs) -> None:
        super().note_seen(node, [x.value if isinstance(x, Tensor) else x for x in inputs])

    def tensor_pre_hooks(self, node, inputs):
        if not self.create_graph or node.is_accumulate or not node.retains_grad_hooks:
            return super().tensor_pre_hooks(node, inputs)
        retains = node.retains_grad_hooks
        node.retains_grad_hooks = {}
        try:
            inputs = super().tensor_pre_hooks(node, inputs)
        finally:
            node.retains_grad_hooks = retains
        for nr, t in retains.items():
            g = inputs[nr]
            if g is None:
                continue
            # retain_grad's hook under grad mode: grad.clone() (CloneBackward0), then .grad + grad (AddBackward0)
            if t.grad is None:
                new = self.rt.apply("clone", [g], None, self.loc)
            else:
                new = self.rt.apply("add", [grad_tensor(self.rt, t), g], None, self.loc)
            t.grad_tensor = new
            t.grad = new.value
        return inputs

    def fire_graph(self, hook, args, node=None, call=None, **how):
        """A hook in a create_graph backward: handed the gradient tensors, run with grad mode on;
        what it returns is a tensor of the graph (``how``: the runner's other arguments, such as
        which engine tensor each argument is)."""
        return self.rt.hooks_runner.fire(hook, args, node, call, **how)

    def check_same(self, hook, returned, shape, dtype=None, got=None) -> None:
        super().check_same(hook, returned.value if isinstance(returned, Tensor) else returned, shape, dtype,
                           got or self.returned_dtypes(returned)[0])

    def returned_dtypes(self, returned) -> tuple:
        """A hook under grad mode hands back the graph's tensors themselves: their dtypes (values:
        as the hook runner saw them)."""
        items = returned if isinstance(returned, tuple) else (returned,)
        if not any(isinstance(r, Tensor) for r in items):
            return super().returned_dtypes(returned)
        return tuple(r.dtype if isinstance(r, Tensor) else None for r in items)

    def check_tuple(self, hook, original, returned, shapes, *how, **kw):
        if isinstance(returned, tuple):
            kw.setdefault("got", self.returned_dtypes(returned))
            plain = tuple(r.value if isinstance(r, Tensor) else r for r in returned)
            super().check_tuple(hook, [o.value if isinstance(o, Tensor) else o for o in original], plain, shapes,
                                *how, **kw)
            return list(returned)
        return super().check_tuple(hook, original, returned, shapes, *how, **kw)

    def apply(self, node, inputs):
        if node.kind == "graphroot":
            return list(node.params)
        if not self.create_graph:
            return super().apply(node, inputs)
        rt = self.rt
        if node.kind == "hookfn":   # BackwardHookFunction: materialized zeros, the gradients handed on as they are
            return [x if x is not None else rt.tensor(self.B.zeros(slot_shape(node, i))) for i, x in enumerate(inputs)]
        if node.kind == "checkpoint" and self.exec_info:
            # CheckpointFunction.backward's first line, before anything it would record
            from adjoint.engine.checkpoint_reentrant import NOT_VALID
            raise TorchError("RuntimeError", NOT_VALID, "checkpoint")
        if node.kind == "op" and node.op.sequence_nr_max:
            # an Error node (DelayedError's, a generated NotImplemented one): Error::apply throws whatever it
            # is handed, with create_graph as without
            self.unpack_tensors(node)
            backward_error(node, [])
        if node.kind != "op" or node.op.name not in FORMULAS:
            raise NotModelled(node.name if node.kind != "op" else node.op.node)
        saved = self.unpack_tensors(node)
        if all(g is None for g in inputs):
            return [None] * len(node.edges)
        need = [e is not None and (not self.exec_info or self.should_execute(e.node)) for e in node.edges]
        if not any(need):
            return [None] * len(node.edges)
        raise_unpack_error(node)   # a mask or index an unpack hook gave back as another dtype: the kernel's error
        rt.second_from = node       # the ops recorded now are this node's backward formula (the document says so)
        try:
            grads = list(FORMULAS[node.op.name](rt, node, list(inputs), saved, need))
        finally:
            rt.second_from = None
        return [x if n else None for x, n in zip(grads, need)]

    def unpack_tensors(self, node) -> dict:
        """SavedVariable::unpack of every saved tensor (in pack order): an input as the tensor
        itself, an output as a tensor whose grad_fn is the node."""
        out = {}
        for sv in node.saved:
            value = self.rt.unpack(node, sv)   # freed or modified since: PyTorch's error; hooks (a checkpoint's
            # recomputation, save_on_cpu's kept tensor, a user's unpack hook): the unpack's result
            spec = next(s for s in node.op.saves if s.name == sv.name)
            if sv.hooks is not None and spec.what == "in" and getattr(sv.tensor, "clone_seq", None) is not None:
                # the unpack hook's result on the clone's grad_fn, as SavedVariable::unpack sets it
                out[sv.name] = self.saved_clone(node, spec, sv, value.value if isinstance(value, Tensor) else value)
            elif sv.hooks is not None:
                out[sv.name] = self.hooked(node, spec, value)
            elif spec.what == "in" and sv.tensor is not node.inputs[spec.index]:
                # an in-place op saved ``self.clone()`` (adjoint.engine.inplace.save_inputs): the value before
                # the write, on the clone's place in the graph -- CloneBackward0 hands its gradient to the
                # edge self had before the write, the node's own edge -- not the written tensor
                out[sv.name] = self.saved_clone(node, spec, sv)
            elif spec.what == "in":
                out[sv.name] = node.inputs[spec.index]
            elif spec.index >= len(node.outputs):   # a non-differentiable output (log_sigmoid's buffer): no graph
                out[sv.name] = self.rt.tensor(value.value if isinstance(value, Tensor) else value,
                                              dtype=_plain_output_dtype(node, spec.index, self.rt.dtype))
            else:
                shape, dtype = node.outputs[spec.index]
                out[sv.name] = self.rt.tensor(node.output_values[spec.index], True, node, spec.index, dtype=dtype)
        return out

    def saved_clone(self, node, spec, sv, value=None) -> Tensor:
        """The ``self.clone()`` an in-place op saved, unpacked (``value``: what an unpack hook
        returned): its grad_fn is the clone's own ``CloneBackward0`` (made in the forward, with the
        sequence_nr it took there; its one edge is self's before the write, the node's own edge),
        one node for every unpack."""
        seq = getattr(sv.tensor, "clone_seq", None)
        edge = node.edges[spec.index] if spec.index < len(node.edges) else None
        value = sv.value if value is None else value
        if seq is None or edge is None:
            return self.hooked(node, spec, value)
        clone = getattr(sv, "clone_node", None)
        if clone is None:
            from adjoint.engine.ops import REGISTRY
            original = node.inputs[spec.index]
            clone = self.rt.new_node("CloneBackward0", [edge], REGISTRY["clone"], None, (original,), node.loc,
                                     seq=seq)
            clone.outputs = [(tuple(original.shape), original.dtype)]
            clone.output_values = [sv.value]
            sv.clone_node = clone
        return self.rt.tensor(value, True, clone, 0, dtype=node.inputs[spec.index].dtype)

    def hooked(self, node, spec, value) -> Tensor:
        """SavedVariable::unpack with hooks: a new tensor holding what the unpack hook returned,
        on the saved tensor's place in the graph -- an output on the node itself; a non-leaf input
        on its grad_fn as saved (the node's edge); a leaf on the leaf's own AccumulateGrad
        (``set_grad_accumulator``), so a gradient through it reaches the leaf's ``.grad``."""
        rt = self.rt
        if isinstance(value, Tensor):
            value = value.value
        if spec.what != "in" and spec.index >= len(node.outputs):   # a non-differentiable output: no graph
            return rt.tensor(value, dtype=_plain_output_dtype(node, spec.index, rt.dtype))
        if spec.what != "in":
            dtype = node.outputs[spec.index][1]
            return rt.tensor(value, True, node, spec.index, dtype=dtype)
        original = node.inputs[spec.index]
        edge = node.edges[spec.index] if spec.index < len(node.edges) else None
        if edge is None:
            return rt.tensor(value, False, dtype=original.dtype)
        if edge.node.kind == "accumulate":
            t = rt.tensor(value, True, dtype=original.dtype)
            t.grad_accumulator = edge.node
            return t
        return rt.tensor(value, True, edge.node, edge.input_nr, dtype=original.dtype)

    def validate_outputs(self, node, outputs):
        if not self.create_graph:
            return super().validate_outputs(node, outputs)
        outputs = list(outputs)
        for i, edge in enumerate(node.edges):
            if edge is None or outputs[i] is None:
                continue
            want = tuple(node.inputs[i].shape)
            if tuple(outputs[i].shape) != want:
                outputs[i] = sum_to(self.rt, outputs[i], want, self.loc)
        return outputs

    def accumulate(self, node, grad) -> None:
        if not self.create_graph:
            return super().accumulate(node, grad)
        t = node.variable
        rt = self.rt
        if grad is not None and t.requires_grad and zerotensor.grad_is_zero(t):
            zerotensor.refuse(self.loc, "a create_graph backward accumulating into a .grad that is")
        if grad is not None and t.requires_grad:   # see ReverseEngine.accumulate; a ZeroTensor is cloned: zeros
            if t.grad is None:
                new = self.copy_of(grad)
            else:
                new = rt.apply("add", [grad_tensor(rt, t), grad], None, self.loc)   # variable_grad + new_grad
            t.grad_tensor = new
            t.grad = new.value
        if t.post_accumulate_hooks:
            for entry in t.post_accumulate_hooks.live():
                rt.hooks_runner.fire_post_accumulate(entry.hook, t, node)

    def copy_of(self, grad: Tensor) -> Tensor:
        """clone_obey_contract: ``new_grad.new_empty_strided(...).copy_(new_grad)`` under grad
        mode: a ``CopyBackwards`` node when the gradient requires grad."""
        rt = self.rt
        dst = rt.tensor(grad.value)
        dst.version.value = 1   # the copy_ into the new tensor: .grad._version is 1 (probed on 2.13)
        if not grad.requires_grad:
            return dst
        from adjoint.engine.ops import REGISTRY
        node = rt.new_node("torch::autograd::CopyBackwards", [None, rt.gradient_edge(grad)], REGISTRY["copy_"], None,
                           (dst, grad), self.loc)
        node.outputs = [(dst.shape, dst.dtype)]
        node.output_values = [dst.value]
        out = rt.tensor(grad.value, True, node, 0, dtype=grad.dtype)
        out.version.value = 1
        return out
