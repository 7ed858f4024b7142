"""Running a user hook: its body, its effects (``raises``, ``removes``), and the log entry.

Every call of a user hook, a pack or an unpack goes through :class:`HookRunner`, which appends
one :class:`~adjoint.engine.runtime.CallRecord` to the runtime's log *before* the body runs (so a
raising hook is in the log, marked ``raised``), evaluates the body with the hook's arguments
as tensors (in the forward their ops join the graph; in the backward grad mode is off), and
converts what it returns.
"""

from __future__ import annotations

from functools import partial
from operator import attrgetter, is_

from adjoint.format.errors import ProblemError
from adjoint.format import syntax as S
from adjoint.engine.graph import Tensor, recorded
from adjoint.engine.interpreter import EnvScope, Interp
from adjoint.engine.runtime import CallRecord, TorchError
from adjoint.engine.checkpoint import StopRecomputation
from adjoint.format.raising import raises_now
from adjoint.engine.pyerrors import type_name
from adjoint.engine.returned_number import ReturnedNumber
from adjoint.engine.hookwrites import HookInterp, LeafGrads, Wrapped, wrap_args
from adjoint.engine.gradalias import held_tensor, unplaced
from adjoint.engine.complex_grad import tag_complex
from adjoint.engine.stash import StashScope
from adjoint.engine.pylist import PyList, sequence_name
from adjoint.engine.return_types import PackedSequence, ReturnTuple
from adjoint.engine.requires_grad import DIFFERENTIABLE
from adjoint.format.validate_tensors import INT_REQUIRES_GRAD

_GRAD = attrgetter("grad")


def run_hook_body(rt, hook, env: dict, grads: LeafGrads | None = None, named: dict | None = None):
    """Run a hook's ``does`` lines, then its ``returns`` expression (None when it has none).

    Rebinding a name changes nothing unless returned, as in Python; writing in place what the
    hook was handed writes the engine's tensors (adjoint.engine.hookwrites: ``grads`` tracks the
    leaves' ``.grad`` the body reads, writes and sets)."""
    env = dict(env)
    if getattr(hook, "optimizer", None) is not None:   # optim: torch.optim.Adam([tensor]) (adjoint.engine.adam)
        env["optim"] = rt.hooks_runner.optimizer_of(hook, env["tensor"])
    kind = "tensor hook" if hook.kind == "hook" else f"{hook.kind} hook"
    interp = HookInterp(rt, EnvScope(env, f"the {kind} '{hook.label}'", rt.names, named,
                                     later=S.bound_names(hook.does)),
                        grads if grads is not None else LeafGrads())
    for stmt in hook.does:
        interp.execute(stmt)
    if hook.returns is None:
        return None
    return interp.eval(hook.returns)


def snapshot(x, dtype: str | None = None):
    """What the log keeps of an argument or a result: values, not tensor objects (a tensor
    may later be modified in place); ``dtype``: the problem's (a tensor of another float dtype
    is kept with its dtype)."""
    if isinstance(x, Tensor):
        return recorded(x, dtype)
    if isinstance(x, tuple):
        return tuple(snapshot(i, dtype) for i in x)
    if isinstance(x, dict):
        return {k: snapshot(v, dtype) for k, v in x.items()}
    return x


def _tensor_args(env: dict, skip: set) -> list:
    """(argument name, tensor, its version) of each tensor a hook is handed (``input[0]`` for a
    tuple's element), leaving out those whose ids are in ``skip``."""
    out = []
    for name, v in env.items():
        items = [(f"{name}[{i}]", x) for i, x in enumerate(v)] if isinstance(v, tuple) else [(name, v)]
        for label, x in items:
            if isinstance(x, Tensor) and id(x) not in skip:
                out.append((label, x, x.version.value))
    return out


class HookRunner:
    def __init__(self, rt, registrations):
        self.rt = rt
        self.reg = registrations
        self._grad_leaves = None   # (leaf tensors, names requiring grad, their tensors): see grads_now
        self._leaf_index = None    # (leaf tensors, id -> names): see leaf_args
        self.written_leaves: dict = {}   # name -> leaf Tensor a hook body wrote in place (leaf_values)
        self.writes, self.returned_obj, self.leaf_changes = {}, None, []
        self.fresh_writes = False   # the last body wrote a tensor made to hold a value (Wrapped.fresh_written)
        self.grad_sources: dict = {}   # leaf -> leaf: .grad assigned another leaf's .grad tensor (LeafGrads.sources)

    def wrap(self, v):
        """A backend value as a tensor a hook can compute with (no grad), tuples element-wise."""
        if isinstance(v, tuple):   # a list stays a list (a pack hook's [x] is handed to unpack as one)
            return (PyList if isinstance(v, PyList) else tuple)(self.wrap(i) for i in v)
        if v is None or isinstance(v, Tensor) or not self.rt.B.is_value(v):
            return v
        return self.rt.tensor(v)

    def fire(self, hook, args: dict, node=None, call=None, kind: str | None = None, shown: dict | None = None,
             objs: dict | None = None):
        """Call ``hook`` with ``args``; returns its result as runtime objects (Tensor, tuple, None).
        ``shown``: what the log records as the arguments, when that is not ``args`` itself.
        ``objs``: which engine tensor (adjoint.engine.gradalias.GradObj) each argument is; after the call
        ``self.writes`` maps those the body wrote in place to their new values (adjoint.engine.hookwrites)."""
        rt = self.rt
        wrapped = Wrapped()
        env = wrap_args(rt, args, objs, wrapped)
        record = CallRecord(hook, kind or hook.kind, hook.target, snapshot(env if shown is None else shown, rt.dtype),
                            node=node, call=call, phase=rt.phase, is_global=hook.on == "global",
                            grads_seen=self.grads_now())
        record.recomputed, record.reentrant = rt.recomputing > 0, rt.reentrant
        rt.log.append(record)
        for index in hook.removes:
            self.reg.remove(index)
        for index in hook.registers:   # h = t.register_hook(fn) (or retain_grad, ...) in its body
            self.reg.register(index)
        if raises_now(hook, record.kind):
            record.raised = True
            raise TorchError(hook.raises_type, hook.raises, "hook_raised")
        grads = LeafGrads(wrapped)
        self.writes, self.returned_obj, self.leaf_changes, self.grad_sources = {}, None, [], {}
        leaves = self.leaf_args(env)
        # a forward(-pre) hook is handed the forward's own tensors: its in-place writes to them are
        # writes to the forward (a backward hook's arguments are gradients: ``wrapped`` sees those)
        handed = _tensor_args(env, {id(t) for _n, t, _v in leaves}) if rt.phase == "forward" else []
        named: dict = {}
        # a with_kwargs hook's kwargs is the dict _call_impl calls forward(**kwargs) with: a store
        # into it (kwargs["bias"] = v) changes the forward, whatever the hook returns
        dicts = {name: dict(v) for name, v in env.items() if isinstance(v, dict)}
        try:
            returned = run_hook_body(rt, hook, env, grads, named)
        except (TorchError, StopRecomputation):
            # its body raised (a None argument computed with, ...; an op whose save ends a checkpoint
            # recomputation early): PyTorch propagates it
            record.raised = True
            raise
        wrote_leaves = [name for name, t, version in leaves if t.version.value != version]
        for name, t, version in leaves:
            if t.version.value != version:
                self.written_leaves.setdefault(name, t)
        # what the body wrote by name (the forward's tensors, a parameter, an input): a leaf under each
        # of its names (leaf_values), any other tensor as itself (the answer says so)
        wrote_named = []
        names_of = self._leaf_names(self.reg.model) if self.reg.model is not None else {}
        switched = [f"requires_grad {name}={t.requires_grad}" for name, (t, _v, rg) in named.items()
                    if t.requires_grad != rg]
        # a .grad that is a tensor a hook assigned (``p.grad = x``, x an input or a parameter, or a
        # view of one) and the body wrote in place (``p.grad.mul_(2)``): the write is that leaf's
        aliased = {f"{self.leaf_name(leaf)}.grad": (t.base if t.base is not None else t, version, None)
                   for leaf, (t, version, _v) in grads.read_tensors.items() if leaf.grad_alias is not None}
        for name, (t, version, _rg) in list(named.items()) + list(aliased.items()):
            if t.version.value == version or (name in aliased and id(t) not in names_of):
                continue
            if id(t) not in names_of:
                wrote_named.append(name)
                continue
            for leaf in names_of[id(t)]:
                if leaf not in wrote_leaves:
                    wrote_leaves.append(leaf)
                self.written_leaves.setdefault(leaf, t)
        record.returned = snapshot(returned, rt.dtype)
        writes, unknown = wrapped.writes(rt.B)
        if unknown and rt.phase == "backward":
            raise ProblemError(hook.loc, unplaced(hook))
        self.writes = writes
        self.fresh_writes = wrapped.fresh_written()
        self.leaf_changes = grads.settle()
        self.grad_sources = grads.sources
        wrote_handed = [name for name, t, version in handed
                        if t.version.value != version and not any(t is u for u, _v, _rg in named.values())]
        record.wrote = (("gradient",) if writes else ()) + tuple(f"leaf {n}" for n in wrote_leaves) + tuple(
            f"tensor {n}" for n in wrote_named) + tuple(f"argument {n}" for n in wrote_handed) + tuple(
            f"{self.leaf_name(t)}.grad{' (assigned)' if how == 'assign' else ''}" for t, how in self.leaf_changes) + tuple(
            switched) + tuple(f"stored {name}[{key!r}]" for name, before in dicts.items() for key, v in env[name].items()
                              if key not in before or before[key] is not v)
        named_roots = {id(t.base if t.base is not None else t) for t, _v, _rg in named.values()}
        named_ids = {id(t) for t, _v, _rg in named.values()}
        grad_reads = {id(t) for t, _v, _g in grads.read_tensors.values()}

        def engine_tensor(r):
            obj = wrapped.obj_of(r)
            if obj is not None or not isinstance(r, Tensor):
                return obj
            if id(r) in grad_reads or id(r.base) in grad_reads:
                return held_tensor()    # another leaf's .grad: a write into it is not placed
            if id(r.base if r.base is not None else r) in named_roots:
                # a tensor of the file's (h, x): the file holds it too; a view or detach() of one
                # the body made: a new tensor, on the same memory, that nothing but the engine holds
                return held_tensor(r, held=id(r) in named_ids)
            return None
        if isinstance(returned, tuple):
            self.returned_obj = tuple(engine_tensor(r) for r in returned)
        else:
            self.returned_obj = engine_tensor(returned)
        return returned

    def leaf_args(self, env: dict) -> list:
        """(name, leaf, version) of each model leaf among a hook's arguments (a post_accumulate_grad
        hook's ``tensor``; a forward hook's inputs); the leaves a body names are found as it names
        them (``named`` in :meth:`fire`)."""
        model = self.reg.model
        if model is None:
            return []
        names_of = self._leaf_names(model)
        found = []
        stack = list(env.values())
        while stack:
            v = stack.pop()
            if isinstance(v, tuple):
                stack.extend(v)
            elif isinstance(v, Tensor) and v.is_leaf:
                for name in names_of.get(id(v), ()):
                    # every name: a tied Parameter's leaf_values are listed as its grads are
                    found.append((name, v, v.version.value))
                # a view or detach() of a leaf (a gradient that is one, after a hook returned
                # x.detach()): one memory and one version counter with the leaf, so a write into it
                # is the leaf's, as PyTorch's _version of the leaf tells
                if v.base is not None:
                    for name in names_of.get(id(v.base), ()):
                        found.append((name, v.base, v.base.version.value))
        return found

    def _leaf_names(self, model) -> dict:
        """id(leaf tensor) -> its names in ``model.leaves`` (in that order), made once per set of
        leaf tensors: a hook per layer of a deep model would otherwise scan every leaf per call."""
        leaves = tuple(model.leaves.values())
        cached = self._leaf_index
        if cached is None or len(cached[0]) != len(leaves) or not all(map(is_, cached[0], leaves)):
            index: dict = {}
            for name, t in model.leaves.items():
                index.setdefault(id(t), []).append(name)
            cached = self._leaf_index = (leaves, index)   # the tuple keeps the tensors (and their ids) alive
        return cached[1]

    def leaf_name(self, t) -> str:
        model = self.reg.model
        for name, x in (model.leaves.items() if model is not None else ()):
            if x is t:
                return name
        return "a leaf"

    def optimizer_of(self, hook, tensor):
        """The optimizer over ``[tensor]`` a hook with ``optimizer:`` steps, made when the hook was
        registered and kept across its calls (its state is made on its first step)."""
        made = self.__dict__.setdefault("optimizers", {})   # made at registration (adjoint.engine.adam)
        return made[hook.index]

    def leaf_values(self) -> dict:
        """The value now of every leaf a hook wrote (the answer's ``leaf_values``)."""
        return {name: t.value for name, t in self.written_leaves.items()}

    def grads_now(self) -> tuple | None:
        """``.grad`` of every leaf that requires grad, right now (what a hook would see), as
        (names, values): :attr:`CallRecord.grads_then` makes the dict when it is read.

        Taken at every hook call, so a model with a hook per layer takes it once per layer: the
        leaves requiring grad are found once per set of leaf tensors (a forward step's new
        inputs make a new set), and the snapshot is one C-level pass over them."""
        model = self.reg.model
        if model is None:
            return None
        leaves = tuple(model.leaves.values())
        if self._grad_leaves is None or self._grad_leaves[0] != leaves:
            decls = model.decls
            chosen = [(name, t) for name, t in model.leaves.items() if decls[name].requires_grad]
            self._grad_leaves = (leaves, tuple(name for name, _ in chosen), tuple(t for _, t in chosen))
        _, names, tensors = self._grad_leaves
        return names, tuple(map(_GRAD, tensors))

    def fire_values(self, hook, args: dict, node=None, call=None, objs: dict | None = None):
        """A backward hook: handed values, returns values (None, a value, or a tuple of them)."""
        before = self.rt.grad_enabled
        self.rt.grad_enabled = False
        try:
            returned = self.fire(hook, args, node, call, objs=objs)
        finally:
            self.rt.grad_enabled = before
        # the dtype of each tensor the hook returned (a tuple's items, or the one tensor): checked against
        # the gradient each replaces (check_single_result), and kept by a module's next hook (BackwardHook
        # passes the returned tuple itself: an int64 zeros grad_input handed on stays int64)
        items = returned if isinstance(returned, tuple) else (returned,)
        self.returned_dtypes = tuple(r.dtype if isinstance(r, Tensor) else None for r in items)
        return as_values(returned, hook, args)

    def fire_post_accumulate(self, hook, t: Tensor, node) -> None:
        """``register_post_accumulate_grad_hook``: handed the leaf itself (the log shows its
        ``.grad``); anything returned but the tensor itself makes PyTorch raise."""
        before = self.rt.grad_enabled
        # the engine's GradMode: on in a create_graph backward, where the body's ops on tensor.grad (the
        # tensor AccumulateGrad made, with its graph: LeafGrads.read) are recorded
        self.rt.grad_enabled = bool(self.rt.creating_graph)
        try:
            returned = self.fire(hook, {"tensor": t}, node, None, shown={"tensor": t.grad})
        finally:
            self.rt.grad_enabled = before
        if isinstance(returned, tuple):   # check_single_result first: not a Variable
            raise TorchError("TypeError", f"expected Variable, but hook returned '{sequence_name(returned)}'",
                             "hook_result")
        if returned is not None and not isinstance(returned, Tensor):   # a Python number: not a Variable either
            name = returned_type(returned, hook)
            if name is None:
                raise ProblemError(hook.loc, f"the post_accumulate_grad hook '{hook.label}' returns a number whose "
                                             "Python type (int or float) the file does not show: PyTorch's TypeError "
                                             "names it; return None")
            raise TorchError("TypeError", f"expected Variable, but hook returned '{name}'", "hook_result")
        if returned is not None and returned is not t:
            raise TorchError("RuntimeError", "Tensor post accumulate grad hooks should return None.", "hook_result")

    # ------------------------------------------------------------------ saved tensors
    def pack(self, hook, t: Tensor, node, slot: str | None = None):
        """Pack hook for ``t``, saved by ``node`` as ``slot`` (self, other, result, ...)."""
        if getattr(hook, "is_checkpoint", False):   # checkpoint's own hooks (adjoint.engine.checkpoint)
            return hook.pack(self.rt, t, node, slot)
        if hook.on == "save_on_cpu":   # PyTorch's own pair: no call of the answer
            from adjoint.engine.save_on_cpu import pack_to_cpu
            return pack_to_cpu(hook, t)
        before = self.rt.grad_enabled
        self.rt.grad_enabled = False
        self.rt.quiet += 1
        try:
            return self._saved_call(hook, hook.pack, "pack", {"x": t}, node, slot, t)
        finally:
            self.rt.grad_enabled = before
            self.rt.quiet -= 1

    def unpack(self, hook, packed, node, sv=None):
        """Unpack hook for what the pack hook returned for the saved variable ``sv`` of ``node``
        (run as the node runs: with grad mode off, as backward without create_graph has it)."""
        if getattr(hook, "is_checkpoint", False):
            return hook.unpack(self.rt, packed, node, sv)
        if hook.on == "save_on_cpu":
            from adjoint.engine.save_on_cpu import unpack_from_cpu
            return unpack_from_cpu(packed)
        before = self.rt.grad_enabled
        self.rt.grad_enabled = False
        try:
            return self._unpacked(hook, packed, node, sv).value
        finally:
            self.rt.grad_enabled = before

    def unpack_read(self, hook, packed, sv):
        """The unpack a read of ``grad_fn._saved_SLOT`` runs between steps (adjoint.engine.saved_reads):
        no node is running and grad mode is the script's; the tensor it returned (save_on_cpu: its value)."""
        if hook.on == "save_on_cpu":
            from adjoint.engine.save_on_cpu import unpack_from_cpu
            return unpack_from_cpu(packed)
        return self._unpacked(hook, packed, None, sv)

    def _unpacked(self, hook, packed, node, sv):
        if sv is not None:
            sv.unpack_error = None
        out = self._saved_call(hook, hook.unpack, "unpack", {"x": self.wrap(packed)}, node,
                               sv.name if sv is not None else None, sv.tensor if sv is not None else None)
        if not isinstance(out, Tensor):   # PySavedVariableHooks::call_unpack_hook checks the result
            # (a number pack returned, handed back as it is: its type is the pack expression's)
            names = {"x": type_name(packed, hook.pack)} if not isinstance(packed, (tuple, Tensor)) else None
            name = type_name(out, hook.unpack, names) if not isinstance(out, tuple) else sequence_name(out)
            if name is None:
                raise ProblemError(hook.unpack.loc, "the unpack hook must return a tensor (what the node's backward uses)")
            raise TorchError("TypeError", "Output of saved tensor unpack_hook expected to be a Tensor but got result "
                                          f"of type {name}", "hook_result")
        if sv is not None and sv.was_leaf and sv.requires_grad and out.dtype not in DIFFERENTIABLE:
            # SavedVariable::unpack makes a saved leaf anew, make_variable(data, requires_grad_): a
            # leaf that requires grad cannot hold an integer or bool tensor
            raise TorchError("RuntimeError", INT_REQUIRES_GRAD[1], "hook_result")
        if sv is not None and isinstance(sv.tensor, Tensor) and tuple(out.shape) != tuple(sv.tensor.shape):
            raise ProblemError(hook.unpack.loc, f"the unpack hook '{hook.label}' returns a tensor of shape "
                                                f"{list(out.shape)} for one saved with shape {list(sv.tensor.shape)}: "
                                                "each backward formula broadcasts it its own way, which is not "
                                                "modelled yet; return a tensor of the saved one's shape")
        mask_or_index = sv is not None and node is not None and isinstance(sv.tensor, Tensor) and out.dtype != sv.tensor.dtype \
                and sv.tensor.dtype in ("bool", "int64")
        if mask_or_index:
            # a mask or an index given back as another dtype: the node's kernel refuses it once every
            # saved tensor is unpacked (adjoint.engine.reverse.backward_error raises it)
            sv.unpack_error = index_dtype_error(node.name, sv.tensor.dtype, out.dtype, hook.unpack.loc, hook.label)
        if not mask_or_index and sv is not None and node is not None and node.kind == "op" and not node.op.elementwise \
                and isinstance(sv.tensor, Tensor) and out.dtype != sv.tensor.dtype:
            # a TensorIterator kernel promotes (the engine casts the result to the input's dtype); a
            # matrix product or convolution refuses mixed dtypes, each kernel in its own words, with
            # operands in an order that follows the saved tensors' strides
            raise ProblemError(hook.unpack.loc, f"the unpack hook '{hook.label}' returns a {out.dtype} tensor for a "
                                                f"{sv.tensor.dtype} one {node.name} saved: its backward kernel's dtype "
                                                "check (PyTorch raises RuntimeError in a matrix product) is not "
                                                "modelled; return the saved dtype")
        if sv is not None:   # the tensor the unpacked one shares storage with (adjoint.engine.function_does)
            sv.unpacked = out
        return out

    def _saved_call(self, hook, expr, kind: str, env: dict, node, slot=None, tensor=None):
        rt = self.rt
        record = CallRecord(hook, kind, None, snapshot(env, rt.dtype), node=node, phase=rt.phase, grads_seen=self.grads_now(),
                            saved=slot, tensor=tensor)
        record.recomputed, record.reentrant = rt.recomputing > 0, rt.reentrant
        rt.log.append(record)
        if raises_now(hook, kind):
            record.raised = True
            raise TorchError(hook.raises_type, hook.raises, "hook_raised")
        version = tensor.version.value if kind == "pack" and isinstance(tensor, Tensor) else None
        unpack_version = env["x"].version.value if kind == "unpack" and isinstance(env.get("x"), Tensor) else None
        try:
            returned = Interp(rt, StashScope(dict(env), f"the {kind} hook '{hook.label}'", kind,
                                             self.__dict__.setdefault("stashes", {}).setdefault(hook.index, []),
                                             rt.names)).eval(expr)
        except TorchError:
            record.raised = True
            raise
        record.returned = snapshot(returned, rt.dtype)
        handed = env.get("x")
        if kind == "unpack" and isinstance(handed, Tensor) and handed.version.value != unpack_version:
            raise ProblemError(hook.loc, f"the unpack hook '{hook.label}' writes what it is handed in place: not "
                                         "modelled yet (return a new value instead)")
        if version is not None and tensor.version.value != version:
            # SavedVariable checks the input's version once the pack hook returns
            record.wrote = ("pack input",)
            raise TorchError("RuntimeError", PACK_INPLACE, "pack_inplace")
        return returned


#: SavedVariable's refusal of a pack hook that wrote its input (torch/csrc/autograd/saved_variable.cpp)
PACK_INPLACE = ("A saved tensor pack hook is modifying its input in place. Tensors provided as input to pack hook "
                "cannot be modified by in-place operations as this can lead to unexpected side-effects. Please open "
                "an issue if you need to perform in-place operations on the input to a pack hook.")


#: Python numbers whose type check_single_result names ("expected Variable, but hook returned 'complex'")
_NUMBER_TYPES = ("int", "float", "bool", "complex")


def returned_type(returned, hook) -> str | None:
    """The Python type name of a number a hook returned (``'int'``, ``'float'``), as its ``returns:``
    expression makes it; None where the file does not show it (PyTorch's TypeErrors name it)."""
    return type_name(returned, hook.returns) if hook.returns is not None else None


def as_values(returned, hook, args: dict | None = None):
    """What a backward hook returned, checked first as PyTorch checks it at once. A tensor hook's
    result meets ``check_single_result``: None passes; a hook handed None (the output of a
    multi-output node, a custom Function's, that no gradient reached while another did) may
    return nothing else, whatever it returns ("can't replace a None gradient with a non-None
    value", before the result's type is read); then a tuple or a number is not a Variable."""
    if returned is None or hook.on == "multi_grad":   # register_multi_grad_hook discards what its fn returns
        return None
    if hook.on == "tensor" and args is not None and "grad" in args and args["grad"] is None:
        raise TorchError("RuntimeError", "can't replace a None gradient with a non-None value", "hook_result")
    if hook.on == "tensor" and isinstance(returned, tuple):   # check_single_result: not a Variable
        raise TorchError("TypeError", f"expected Variable, but hook returned '{sequence_name(returned)}'",
                         "hook_result")
    if hook.on == "tensor" and not isinstance(returned, (tuple, Tensor)):
        # a tensor hook's result is checked at once (check_single_result): a Python number is
        # "expected Variable, but hook returned 'int'" (the type as the expression makes it)
        name = returned_type(returned, hook)
        if name in _NUMBER_TYPES:
            raise TorchError("TypeError", f"expected Variable, but hook returned '{name}'", "hook_result")
    if (hook.on, hook.kind) in NUMBER_CHECKED and not isinstance(returned, (tuple, Tensor)):
        # a Python number where a tuple is taken: a node's hook (a module's legacy hook is one) is
        # PyFunctionPreHook / PostHook's "expected tuple, but hook returned 'int'"; a full backward
        # (pre-)hook's result meets BackwardHook's len(), Python's TypeError
        name = returned_type(returned, hook)
        if name in ("int", "float", "bool"):
            raise TorchError("TypeError", f"object of type '{name}' has no len()" if hook.kind in (
                "full_backward", "full_backward_pre") else f"expected tuple, but hook returned '{name}'", "hook_result")
    if isinstance(returned, PackedSequence):
        raise ProblemError(hook.returns.loc, "a hook returning a PackedSequence is not modelled; return tensors")
    if isinstance(returned, tuple):
        # a list stays one, a torch.return_types one: PyTorch's messages tell them apart
        kind = PyList if isinstance(returned, PyList) else \
            partial(ReturnTuple, returned.kind, returned.fields) if isinstance(returned, ReturnTuple) else tuple
        if (hook.on, hook.kind) in NUMBER_CHECKED:
            items = getattr(hook.returns, "items", None)
            exprs = items if items is not None and len(items) == len(returned) else (None,) * len(returned)
            return kind(_number_or_value(r, hook, e) for r, e in zip(returned, exprs))
        return kind(_value(r, hook) for r in returned)
    return _value(returned, hook)


#: backward hooks whose returned tuple PyTorch checks element by element (PyFunctionPreHook /
#: PyFunctionPostHook's check_single_result, on the node, or on BackwardHook's node for a module)
NUMBER_CHECKED = {("node", "pre"), ("node", "post"), ("module", "backward"), ("module", "full_backward"),
                  ("module", "full_backward_pre")}


def _number_or_value(v, hook, e):
    """A returned tuple's item: a Python number whose type the expression shows is handed on as a
    :class:`ReturnedNumber` (PyTorch's TypeError once the tuple's length is checked), and so is a
    nested tuple, list or ``torch.return_types`` (check_single_result names its type: "expected
    Variable, but hook returned 'tuple'")."""
    if v is None or isinstance(v, Tensor):
        return _value(v, hook)
    if isinstance(v, tuple):
        return ReturnedNumber(sequence_name(v))
    name = type_name(v, e) if e is not None else None
    if name in _NUMBER_TYPES:
        return ReturnedNumber(name)
    return _value(v, hook)


def _value(v, hook):
    if v is None:
        return None
    if isinstance(v, Tensor):
        return tag_complex(v.value, v.dtype)
    if isinstance(v, tuple):
        raise ProblemError(hook.returns.loc, "nested tuples are not valid hook results")
    # a plain Python number: PyTorch would reject it as a gradient
    raise ProblemError(hook.returns.loc, "the hook returns a plain number; PyTorch expects a tensor "
                                         "(write e.g. grad * 0 + 1)")


#: ScalarType names (``toString``) and C type names (``c10::toString`` of a TypeMeta) of the dtypes a
#: file's tensors have, as the kernels' messages print them
_SCALAR_NAMES = {"float32": "Float", "float64": "Double", "int64": "Long", "bool": "Bool"}
_C_NAMES = {"float32": "float", "float64": "double", "int64": "long int", "bool": "bool"}

#: the nodes whose backward kernel checks a saved boolean mask's dtype, and their words (torch 2.13)
_MASK_KERNELS = {
    "WhereBackward0": lambda d: f"where expected condition to be a boolean tensor, but got a tensor with dtype "
                                f"{_SCALAR_NAMES[d]}",
    "MaskedFillBackward0": lambda d: f"masked_fill_ only supports boolean masks, but got mask with dtype {_C_NAMES[d]}",
    "MaskedScatterBackward0": lambda d: f"masked_fill_ only supports boolean masks, but got mask with dtype "
                                        f"{_C_NAMES[d]}",
    "MaskedSelectBackward0": lambda d: f"masked_scatter_ only supports boolean masks, but got mask with dtype "
                                       f"{_SCALAR_NAMES[d]}",
}


def index_dtype_error(node_name: str, saved: str, given: str, loc, label: str):
    """What the backward of ``node_name`` does with a saved bool mask or int64 index that an unpack hook
    gave back as ``given``: the kernel's RuntimeError (a mask of where, masked_fill, masked_scatter,
    masked_select: torch 2.13's words), else a refusal -- the index kernels read another dtype in
    their own ways (a bool mask turned int64 indexes by position), which is not modelled."""
    if saved == "bool" and node_name in _MASK_KERNELS and given in _SCALAR_NAMES:
        return TorchError("RuntimeError", _MASK_KERNELS[node_name](given), "dtype")
    return ProblemError(loc, f"the unpack hook '{label}' returns a {given} tensor for the {saved} one {node_name} "
                             "saved (a mask or an index): how its backward kernel reads it is not modelled; return "
                             f"a {saved} tensor")

