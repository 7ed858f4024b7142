"""The forward pass of one variant, run eagerly in the runtime, as a PyTorch user would run it.

:class:`Model` holds the leaves (inputs, targets, parameters) and the per-module hook dicts;
:meth:`Model.forward` runs the model and the loss once, following ``nn.Module._call_impl``
step by step for every module call:

1. forward-pre hooks (global ones first) run; a returned value replaces the positional inputs;
2. with full backward (or backward-pre) hooks, the tensor inputs go through
   ``BackwardHookFunction`` (one ``BackwardHookFunctionBackward`` node) if any requires grad;
3. the forward runs; 4. forward hooks run (a returned value replaces the output);
5. with full/pre hooks the output goes through ``BackwardHookFunction`` too;
6. legacy ``register_backward_hook`` hooks are attached as post-hooks to the output's
   ``grad_fn``, i.e. the *last node* of the module, whatever it is.

Names: every tensor gets the dotted name of the contract (``f1.h``, ``f1#2``, ``model``, ``y``,
``loss``); a tensor or node hook is registered on its tensor as soon as the name is bound
(:class:`adjoint.engine.hook_registration.Registrations` decides which hooks are active).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from adjoint.format import syntax as S
from adjoint.format.errors import Loc, ProblemError
from adjoint.engine.graph import Node, Tensor, recorded
from adjoint.engine.interpreter import Interp, unbound_local
from adjoint.engine.nn_module import BackwardHookState, LegacyHook, ModuleHooks, ModuleInputHook, ModuleOutputHook
from adjoint.engine.hook_registration import grad_fn
from adjoint.engine.view_history import grad_fn_name
from adjoint.format.problem import HOLDERS, OUTPUT, ROOT, Module, Problem, TensorDecl
from adjoint.format.validate_tensors import creation_error
from adjoint.engine.runtime import Runtime, TorchError
from adjoint.engine import pyerrors
from adjoint.engine import warns
from adjoint.engine import saved_hooks
from adjoint.engine.checkpoint import StopRecomputation, run_checkpoint
from adjoint.engine.inference import refuse_inside
from adjoint.engine.pylist import PyList, is_tuple, sequence_name
from adjoint.engine.pyfloat import python_number
from adjoint.engine.return_types import PackedSequence, ReturnTuple
from adjoint.values.numbers.sizes import check_leaf_size
from adjoint.values.strides import view_as_strides
from adjoint.format.module_signatures import lookup as nn_type


@dataclass(eq=False)
class Call:
    """One module call: the boundary the Lagrangian view puts a multiplier on."""

    id: int
    module: Module
    callid: str                       # "model", "f1", "f1#2"
    k: int
    parent: int | None
    args: tuple = ()                  # positional inputs after forward-pre hooks: grad_input is about these
    out: Tensor | None = None         # output as the caller receives it
    bw: BackwardHookState | None = None
    in_node: Node | None = None       # the inputs' BackwardHookFunctionBackward
    out_node: Node | None = None
    legacy_node: Node | None = None
    legacy_hooks: tuple = ()
    body_start: int = 0               # index into runtime.nodes after the input wrapping
    body_eqn: int = 0                 # index into runtime.applications after the input wrapping
    end: int = 0
    out_history: tuple = ()           # each output's (grad_fn, output_nr) when the call returned (a later
                                      # in-place op, outside the call, gives it another grad_fn)
    recomputes: "Call | None" = None  # a call checkpoint's recomputation made: the call it repeats
    checkpoint: str | None = None     # the call checkpoint(...) made: how it is recomputed (adjoint.engine.checkpoint)
    grad_enabled: bool = True         # grad mode when it was called (off: under no_grad, a reentrant checkpoint region)
    kwarg_tensors: tuple = ()         # the tensors handed by keyword (a full hook wraps the positional ones only)
    projections: tuple = ()           # MultiheadAttention's in-projection linears, and which arguments
                                      # each projects (adjoint.engine.layers.attention.Projection)

    @property
    def path(self) -> str:
        return self.module.label

    def body_nodes(self, rt: Runtime) -> list[Node]:
        return rt.nodes[self.body_start:self.end]


@dataclass
class ForwardResult:
    """What one forward pass leaves: named tensors, module calls, the output and loss, and the log."""

    names: dict                       # name -> Tensor, in binding order
    calls: list[Call]
    output: Tensor
    loss: Tensor | None
    notes: list = field(default_factory=list)   # (node name or primitive, loc, note)
    values: dict = field(default_factory=dict)  # name -> value when the pass (loss included) ended
    apps: range = range(0)            # its ops: indices into the runtime's applications
    log: range = range(0)             # the hook calls it made: indices into the runtime's log
    bound_at: dict = field(default_factory=dict)     # name -> how many ops had run when it was bound
    leaf_values: dict = field(default_factory=dict)  # leaf name -> value when the pass started
    meta: dict = field(default_factory=dict)         # name -> (requires_grad, grad_fn's type name) when it ended


class Model:
    """The leaves and module hook state of one variant, shared by all of its forward passes."""

    #: a wrapper's work on the root module's output (DistributedDataParallel's _post_forward:
    #: adjoint.engine.distributed), applied before the output is named; None: no wrapper
    root_wrapper = None
    #: a wrapper's forward pre-hook prepended on some modules (fully_shard's: adjoint.engine.fsdp),
    #: called as module_wrapper(forward, module, args, kwargs) -> (args, kwargs); None: no wrapper
    module_wrapper = None
    module_post = None     # and its forward hook registered before any user hook: module_post(module, output)

    def __init__(self, problem: Problem, inputs: tuple[TensorDecl, ...], rt: Runtime, registrations):
        self.p = problem
        self.rt = rt
        self.reg = registrations
        self.inputs = inputs
        self.leaves: dict[str, Tensor] = {}
        self.decls: dict[str, TensorDecl] = {}
        self.globals: dict[str, Tensor] = {}    # inputs and targets, by name
        self.params: dict[str, Tensor] = {}     # parameters, by full name
        self.hooks: dict[str, ModuleHooks] = {m.label: ModuleHooks() for m in problem.model.walk()}
        from adjoint.format.submodules import builtin_submodules
        for label in builtin_submodules(problem.model):   # attn.out_proj: hooks registered, never fired
            self.hooks[label] = ModuleHooks()
        self.global_hooks = ModuleHooks()
        for d in list(inputs) + list(problem.targets):
            self.globals[d.name] = self.leaf(d)
        for m in problem.model.walk():
            for d in m.params:
                if d.tied is None:
                    self.params[d.name] = self.leaf(d, is_param=True)
        for m in problem.model.walk():   # a tied parameter is the named one's leaf (adjoint.format.tying)
            for d in m.params:
                if d.tied is not None:
                    self.params[d.name] = self.leaves[d.name] = self.params[d.tied]
                    self.decls[d.name] = d
        for m in problem.model.walk():
            for d in m.buffers:
                self.leaf(d)

    def leaf(self, d: TensorDecl, is_param: bool = False) -> Tensor:
        check_leaf_size(d, self.rt.B)
        t = self.rt.leaf(self.rt.B.literal(d.value), d.requires_grad, dtype=d.dtype, name=d.name, is_param=is_param)
        t.version.value = d.version
        self.rt.B.check_literal(t.value, d)
        self.leaves[d.name] = t
        self.decls[d.name] = d
        return t

    def replace_inputs(self, decls) -> None:
        """A forward step's ``inputs``: new leaf tensors for those inputs (entry by entry)."""
        given = {d.name: d for d in decls}
        self.inputs = tuple(given.get(d.name, d) for d in self.inputs)
        for d in decls:
            if d.name not in self.globals:
                raise ProblemError(d.loc, f"a forward step sets input '{d.name}', which the problem does not declare")
            refused = creation_error(d)   # torch.tensor(..., requires_grad=True) of an int64 tensor: the step raises
            if refused is not None:
                raise TorchError(refused[0], refused[1], "tensor")
            self.globals[d.name] = self.leaf(d)

    # ------------------------------------------------------------------ one forward pass
    def forward(self, call: str | None = None) -> ForwardResult:
        """One forward pass: the root called with the inputs, or (``call``: a forward step's
        ``call: PATH``) only that child module, as a script calls ``module_1(input)``."""
        run = self.last_pass = _Pass(self)   # kept: a pass that raises leaves no ForwardResult
        run.only = call
        return run.run()


class _Pass:
    """One forward pass: binds names, counts module calls, records calls for the boundaries."""

    def __init__(self, model: Model):
        self.m = model
        self.p = model.p
        self.rt = model.rt
        self.names: dict[str, Tensor] = {}
        self.calls: list[Call] = []
        self.call_counts: dict[str, int] = {}
        self.notes_start = len(self.rt.notes)
        self.apps_start = len(self.rt.applications)
        self.log_start = len(self.rt.log)
        self.bound_at: dict[str, int] = {}
        self.leaf_values = {name: t.value for name, t in model.leaves.items()}
        self.rt.names = self.names    # hook bodies may read the forward's named tensors
        self.replay = None            # while checkpoint recomputes: the region's original calls, in order
        self.root_output_pending = False   # while the root runs: its output, named model, is named y next
        self.replayed: list = []      # the original calls the recomputations repeated, in order
        self.closures: dict = {}      # module label -> {name: value} it reads from its caller (``uses:``)
        self.only: str | None = None  # a forward step's call: PATH (only that child is called)

    def capture(self, child: Module, lookup, loc: Loc) -> None:
        """``uses:``: what ``child``'s forward reads from its caller, as the caller has it now (the
        recomputation of a checkpointed call reads the same: names are never rebound)."""
        if child.uses and self.replay is None:
            self.closures[child.label] = {n: lookup(n, loc) for n in child.uses}

    def bind(self, name: str, t, loc: Loc | None, aliases: tuple = (), until=None) -> None:
        if self.replay is not None:   # checkpoint's recomputation names nothing (adjoint.engine.checkpoint)
            return
        if name in self.names:
            raise ProblemError(loc, f"two tensors are named '{name}'; two things with one name are an error "
                                    "(rename one)")
        self.names[name] = t
        self.bound_at[name] = len(self.rt.applications)
        if isinstance(t, Tensor) and t.name is None:
            t.name = name
        # the root's output is model and y at once: their hooks go on together, in the file's order
        self.m.reg.bound(name, t, aliases, attach=not (self.root_output_pending and name == ROOT), until=until)

    def run(self) -> ForwardResult:
        self.m.reg.new_forward()
        tied = {}   # a tied parameter's other names (adjoint.format.tying): its hooks go on in the file's order
        for name, d in self.m.decls.items():
            if d.tied is not None:
                tied.setdefault(d.tied, []).append(name)
        try:   # the leaves' hooks go on as a script registers them before its forward: every leaf
            # exists then, so they go on together, in the file's order (a multi_grad hook over two
            # leaves listed before a tensor hook on the first is registered before it)
            with self.m.reg.together():
                for name, t in self.m.leaves.items():
                    d = self.m.decls[name]
                    self.bind(name, t, None, tuple(tied.get(name, ())) + ((d.tied,) if d.tied is not None else ()))
        except TorchError as exc:
            exc.during = "register"
            raise
        root = self.p.model
        required = len([n for n in root.inputs if n not in dict(root.input_defaults)])
        if not required <= len(self.m.inputs) <= len(root.inputs):   # forward(self, x, temperature=2.0): x alone
            raise ProblemError(root.loc, f"the root module takes {len(root.inputs)} input(s) ({', '.join(root.inputs)}) "
                                         f"but the problem declares {len(self.m.inputs)} "
                                         f"({', '.join(d.name for d in self.m.inputs)}); inputs are passed in order")
        whole = saved_hooks.enter(self.rt, self.m.reg.forward_starts())
        try:
            out, loss = self.model_and_loss(root) if self.only is None else (self.call_only(self.only), None)
        finally:
            saved_hooks.leave(self.rt, whole)
        self.m.reg.forward_ends(self.names)
        values = {name: recorded(t, self.rt.dtype) for name, t in self.names.items() if isinstance(t, Tensor)}
        meta = {name: (t.needs_grad, grad_fn_name(t)) for name, t in self.names.items() if isinstance(t, Tensor)}
        return ForwardResult(self.names, self.calls, out, loss, self.rt.notes[self.notes_start:], values,
                             range(self.apps_start, len(self.rt.applications)), range(self.log_start, len(self.rt.log)),
                             self.bound_at, self.leaf_values, meta)

    def call_only(self, path: str):
        """A forward step's ``call: PATH``: the child module called with the problem's inputs in
        order (no root forward, no loss); its output is named PATH and is what backward starts from."""
        child = next((m for m in self.p.model.walk() if m.label == path and m is not self.p.model), None)
        if child is None:
            raise ProblemError(self.p.model.loc, f"a forward step calls module '{path}', which is not a child of "
                                                 "the model; name a child module's path")
        args = [self.m.globals[d.name] for d in self.m.inputs]
        if not child.input_defaults and not _arity_ok(child, len(args)) and not _custom(child):
            raise ProblemError(child.loc, f"a forward step calls module '{path}' with the {len(args)} input(s) of "
                                          f"the problem, but it takes {len(child.inputs)} ({', '.join(child.inputs)})")
        self.output = out = self.call_module(child, args, child.loc)
        return out

    def model_and_loss(self, root: Module):
        args = [self.m.globals[d.name] for d in self.m.inputs]
        self.root_output_pending = OUTPUT not in self.names
        try:
            out = self.call_module(root, args, root.loc)
        finally:
            self.root_output_pending = False
        if OUTPUT not in self.names and not isinstance(out, tuple):  # an input may be called y when no loss
            self.bind(OUTPUT, out, None, aliases=(ROOT,) if self.names.get(ROOT) is out else ())   # the output
        elif self.names.get(ROOT) is out:                                # is model[0], model[1], ... (y[0] in the loss)
            self.m.reg.bound(ROOT, out)
        self.output = out
        loss = None
        if self.p.loss is not None:
            value = Interp(self.rt, _LossScope(self)).eval(self.p.loss)
            if not isinstance(value, Tensor):
                raise ProblemError(self.p.loss.loc, "the loss must be a tensor expression of y (the model output)")
            loss = value
            self.bind("loss", loss, self.p.loss.loc)
        return out, loss

    # ------------------------------------------------------------------ module calls (_call_impl)
    def call_module(self, mod: Module, args: list, loc: Loc, kwargs: dict | None = None):
        rt = self.rt
        label = mod.label
        kwargs = dict(kwargs or {})
        scoped = saved_hooks.enter(rt, self.m.reg.saved_hooks_for(label))  # the with blocks around the call
        parent = rt.call_stack[-1].id if rt.call_stack else None
        if self.replay is not None:   # checkpoint's recomputation: the call repeats the region's next one
            call = self.replayed_call(mod, parent)
        else:
            k = self.call_counts[label] = self.call_counts.get(label, 0) + 1
            callid = label if k == 1 else f"{label}#{k}"
            call = Call(len(self.calls), mod, callid, k, parent, grad_enabled=rt.grad_enabled)
            self.calls.append(call)
        rt.call_stack.append(call)
        try:
            if mod.function is not None:   # a custom Function's apply inside inference_mode, or of an inference tensor
                refuse_inside(rt, loc, "a custom autograd Function")
                if any(isinstance(a, Tensor) and a.inference for a in args):
                    raise ProblemError(loc, "a custom autograd Function handed an inference tensor (made inside 'with "
                                            "inference_mode():') is not modelled; clone it first")
            if self.m.module_wrapper is not None and self.replay is None and not mod.plain:
                args, kwargs = self.m.module_wrapper(self, mod, list(args), kwargs)
            own, glob = (self.m.hooks[label], self.m.global_hooks) if not mod.plain else (None, None)
            if mod.plain or not (own.any() or glob.any()):   # a plain function: no nn.Module, no hook
                call.args = tuple(args)
                call.kwarg_tensors = _kwarg_tensors(kwargs)
                if mod.weight_norm_legacy:   # torch.nn.utils.weight_norm's forward pre-hook (its only one)
                    from adjoint.engine.weight_norm import legacy_recompute
                    legacy_recompute(rt, self.m, mod, loc)
                call.body_start, call.body_eqn = len(rt.nodes), len(rt.applications)
                refused = None if mod.plain else _builtin_arity(args, mod, kwargs)
                if refused is not None:
                    raise TorchError("TypeError", refused)
                out = self.module_forward(mod, list(args), kwargs, call, loc)
                if self.m.module_post is not None and self.replay is None and not mod.plain:
                    self.m.module_post(mod, out)
            else:
                out = self.call_with_hooks(mod, call, own, glob, list(args), kwargs, loc)
        finally:
            saved_hooks.leave(rt, scoped)
        call.out = out
        call.end = len(rt.nodes)
        call.out_history = tuple((t.grad_fn, t.output_nr) if isinstance(t, Tensor) else None
                                 for t in (out if isinstance(out, tuple) else (out,)))
        rt.call_stack.pop()
        if mod is self.p.model and self.m.root_wrapper is not None:
            out = self.m.root_wrapper(out)
        self.bind_output(call.callid, out, loc)  # the root's output is "model" (and "y", bound by run())
        return out

    def replayed_call(self, mod: Module, parent) -> Call:
        """A module call of checkpoint's recomputation: it repeats the region's next original call
        (same call number; its id, so reports place its hooks on the original's module box) and is
        not one of the forward's calls."""
        original = next(self.replay, None)
        self.replayed.append(original)
        if original is None or original.module is not mod:
            return Call(None, mod, mod.label, 1, parent)
        return Call(original.id, mod, original.callid, original.k, original.parent, recomputes=original)

    def calls_mark(self) -> int:
        """Where the calls made from now on start: in the forward's calls, or, while a region is
        recomputed, in the original calls it repeats (a checkpoint nested in it)."""
        return len(self.calls) if self.replay is None else len(self.replayed)

    def calls_since(self, mark: int) -> list:
        return self.calls[mark:] if self.replay is None else [c for c in self.replayed[mark:] if c is not None]

    def checkpoint(self, child: Module, args: list, kwargs: dict, loc: Loc):
        """``torch.utils.checkpoint.checkpoint(child, *args, ...)`` (adjoint.engine.checkpoint)."""
        return run_checkpoint(self, child, args, kwargs, loc)

    def bind_output(self, name: str, out, loc) -> None:
        """A module's output: ``PATH`` (``PATH[0]``, ``PATH[1]``, ... for a tuple)."""
        if is_tuple(out):
            with self.m.reg.together():   # their hooks go on together, in the file's order
                for i, t in enumerate(out):
                    if isinstance(t, Tensor):
                        self.bind(f"{name}[{i}]", t, loc)
        elif isinstance(out, (dict, PyList)):   # a dict or list output: its tensors are named where the caller assigns them
            return
        else:
            self.bind(name, out, loc)

    def call_with_hooks(self, mod: Module, call: Call, own: ModuleHooks, glob: ModuleHooks, args: list,
                        kwargs: dict, loc: Loc):
        """``nn.Module._call_impl`` with hooks: the always_call forward hooks still run when the
        call raises, handed the output as it then is (None when the forward did not finish).
        ``except Exception`` catches checkpoint's ``_StopRecomputationError`` too: a
        non-reentrant recomputation that stops early, in the backward, runs the always_call hooks
        of every module call it unwinds through, innermost first."""
        called: set = set()
        # a built-in layer called with the wrong count: forward(*args)'s TypeError, after the
        # forward_pre hooks (one returning other inputs decides anew)
        # "args": _call_impl's args as Python holds it -- a tuple, unless a with_kwargs forward_pre
        # hook made it something else (a list, a tensor: :func:`_star_args`)
        state = {"args": tuple(args), "kwargs": kwargs, "result": None, "refused": _builtin_arity(args, mod, kwargs)}
        try:
            return self._inner(mod, call, own, glob, state, called, loc)
        except (TorchError, StopRecomputation):
            for hooks, is_global in ((glob, True), (own, False)):
                # this path iterates the OrderedDict itself (``for hook_id, hook in
                # self._forward_hooks.items()``): a hook that removes a forward hook of the dict
                # makes the iterator's next step raise, replacing the forward's error -- unless it
                # was the last hook (odictiter_nextkey is done before it checks od_state)
                # (tests/data/regressions/always_call_hook_removes_forward_hook_after_error.yaml)
                start = hooks.forward.state
                for i, (hid, entry) in enumerate(hooks.forward.pairs()):
                    if i and hooks.forward.state != start:
                        raise TorchError("RuntimeError", "OrderedDict mutated during iteration")
                    if hid in hooks.always_called and hid not in called:
                        env = {"input": state["args"], "output": state["result"]}
                        if hid in hooks.with_kwargs and not is_global:
                            env = {"input": state["args"], "kwargs": state["kwargs"], "output": state["result"]}
                        elif entry.hook.with_kwargs:
                            # called without kwargs (a global hook always is, on this path): the
                            # TypeError is silenced like any error of these hooks, its body never runs
                            warns.always_call_silenced(self.rt, is_global, "hook() missing 1 required positional "
                                                                           "argument: 'output'")
                            continue
                        try:
                            returned = self.fire_forward(entry, env, call)
                        except TorchError as exc:   # silenced, with a warning, as another error was raised in forward
                            record = self.rt.log[-1] if self.rt.log else None
                            if record is not None and record.hook is entry.hook and record.raised:
                                record.raised, record.silenced = False, True
                            warns.always_call_silenced(self.rt, is_global, exc.message)
                            continue
                        if returned is not None:
                            state["result"] = returned
            raise

    def _forward_hooked(self, mod: Module) -> bool:
        """Has ``mod`` or a module under it (a built-in's own submodules too) a forward or
        forward_pre hook of its own right now? (Global hooks are not in those dicts.)"""
        labels = {k.label for k in mod.walk()}
        under = tuple(f"{label}." for label in labels)
        return any((h.forward or h.forward_pre) and (label in labels or label.startswith(under))
                   for label, h in self.m.hooks.items())

    def _inner(self, mod: Module, call: Call, own: ModuleHooks, glob: ModuleHooks, state: dict, called: set,
               loc: Loc):
        rt = self.rt
        pre_hooks = glob.backward_pre.snapshot() + own.backward_pre.snapshot()
        full = (glob.backward.snapshot() if glob.is_full is True else []) + \
               (own.backward.snapshot() if own.is_full is True else [])
        legacy = (glob.backward.snapshot() if glob.is_full is False else []) + \
                 (own.backward.snapshot() if own.is_full is False else [])
        pairs = glob.forward_pre.pairs() + own.forward_pre.pairs()
        legacy_hook = None
        if mod.weight_norm_legacy:   # torch.nn.utils.weight_norm's pre-hook: after the prepended ones
            legacy_hook = object()
            pos = len(glob.forward_pre) + sum(1 for _, e in own.forward_pre.pairs() if e.hook.prepend)
            pairs.insert(pos, (None, legacy_hook))
        for hid, entry in pairs:
            if entry is legacy_hook:
                from adjoint.engine.weight_norm import legacy_recompute
                legacy_recompute(rt, self.m, mod, loc)
                continue
            if hid in own.with_kwargs:
                returned = self.fire_forward(entry, {"input": state["args"], "kwargs": state["kwargs"]}, call)
                if returned is not None:
                    if not (is_tuple(returned) and len(returned) == 2):
                        shown = _plain_repr(returned, entry.hook.returns)
                        if shown is None:
                            raise ProblemError(entry.hook.returns.loc, "a forward_pre hook with with_kwargs must return "
                                                                       "None or a tuple (new_args, new_kwargs): PyTorch "
                                                                       "raises 'forward pre-hook must return None or a "
                                                                       "tuple of (new_args, new_kwargs), but got ...' "
                                                                       "with the result's repr, which adjoint does not "
                                                                       "word for tensors, nor for a float computed other "
                                                                       "than from number literals")
                        # _call_impl's check: the message shows what the hook returned (f"{result}")
                        raise TorchError("RuntimeError", "forward pre-hook must return None or a tuple of "
                                                         f"(new_args, new_kwargs), but got {shown}.", "hook_result")
                    new_args, new_kwargs = returned   # taken as they are: forward(*new_args, **new_kwargs)
                    _check_star_args(new_args, new_kwargs, entry.hook)
                    # a tensor's rows are counted when forward is called (:func:`_star_args`)
                    state["refused"] = forward_arity_error(new_args, mod, new_kwargs) \
                        if isinstance(new_args, tuple) else None
                    if isinstance(new_args, tuple):
                        self.check_forward_args(new_args, mod, entry.hook, new_kwargs, state["refused"] is None)
                    state["args"], state["kwargs"] = new_args, dict(new_kwargs)
            else:
                _called_without(entry, "kwargs")
                returned = self.fire_forward(entry, {"input": state["args"]}, call)
                if returned is not None:
                    new = returned if is_tuple(returned) else (returned,)   # a list is one input, as any non-tuple
                    new = _typed_numbers(new, returned, entry.hook, mod)
                    # the wrong count is forward's TypeError, unless a later pre-hook returns others
                    state["refused"] = forward_arity_error(new, mod, state["kwargs"])
                    self.check_forward_args(new, mod, entry.hook, state["kwargs"], state["refused"] is None)
                    state["args"] = tuple(new)
        args = state["args"]
        call.args = tuple(args) if isinstance(args, tuple) else ()
        call.kwarg_tensors = _kwarg_tensors(state["kwargs"])
        if full or pre_hooks:
            call.bw = BackwardHookState(call, full, pre_hooks)
            args = self.setup_input_hook(call, args, loc)
            state["args"] = args
        # forward(*args): a tensor's rows (an UnbindBackward0) are made by _call_impl before the
        # module's own forward runs, so they are the call's inputs, not part of its body
        positional = _star_args(rt, args, loc)
        call.body_start, call.body_eqn = len(rt.nodes), len(rt.applications)
        if not is_tuple(args):   # a tensor's rows, a list BackwardHook rebuilt as list(*items): counted now
            state["refused"] = forward_arity_error(tuple(positional), mod, state["kwargs"])
        if not isinstance(args, tuple):   # a tensor's rows: what forward is handed
            call.args = tuple(positional)
        if state.get("refused") is not None:   # forward(*args) of a built-in layer, handed the wrong count
            raise TorchError("TypeError", state["refused"])
        out = self.module_forward(mod, positional, state["kwargs"], call, loc)
        if self.m.module_post is not None and self.replay is None:   # a wrapper's first forward hook
            self.m.module_post(mod, out)
        state["result"] = out
        # _call_impl takes (*global hooks, *own hooks) as one tuple before running any: a hook that
        # removes another (even the module's own, from a global one) does not stop it this call
        snapshot = [(hooks, hooks.forward.pairs()) for hooks in (glob, own)]
        for hooks, pairs in snapshot:
            for hid, entry in pairs:
                if hid in hooks.always_called:
                    called.add(hid)
                if hid in hooks.with_kwargs:
                    env = {"input": args, "kwargs": state["kwargs"], "output": out}
                else:
                    _called_without(entry, "output")
                    env = {"input": args, "output": out}
                returned = self.fire_forward(entry, env, call)
                if returned is not None:
                    if isinstance(returned, (Fraction, bool)):
                        raise ProblemError(entry.hook.returns.loc, "a forward hook returning a Python number: PyTorch "
                                                                   "hands it to the caller as the module's output, "
                                                                   "whose next use of it raises Python's error; not "
                                                                   "modelled (return a tensor, or nothing)")
                    if not (_tensor_tuple(returned) or module_result(returned)):
                        raise ProblemError(entry.hook.returns.loc, "a forward hook must return the replacement output "
                                                                   "(a tensor, a tuple of them -- nested as the "
                                                                   "module's, with numbers or None beside --, or a "
                                                                   "dict of tensors), or nothing")
                    out = returned
                    state["result"] = out
        if call.bw is not None:
            if not (isinstance(out, Tensor) or is_tuple(out)):   # _call_impl warns, then BackwardHook finds no tensor
                kind = "list" if isinstance(out, PyList) else type(out).__name__
                warns.warn(rt, "UserWarning", "For backward hooks to be called, module output should be a Tensor or "
                                              f"a tuple of Tensors but received <class '{kind}'>")
            out = self.setup_output_hook(call, out, loc)
            state["result"] = out
        if legacy:
            first = _legacy_var(out, loc)
            # ``var.grad_fn`` as Python reads it: a view whose base was written in place since gets
            # its new grad_fn now, and the hooks go on that one
            node = grad_fn(rt, first)
            if node is not None:
                call.legacy_node = node
                call.legacy_hooks = tuple(legacy)
                for entry in legacy:
                    node.post_hooks.add(rt.new_handle(), LegacyHook(entry.hook, call))
                _warning_reads(rt, state["args"], out, node)
        return out

    def setup_input_hook(self, call: Call, args, loc: Loc):
        """``BackwardHook.setup_input_hook(args)``: ``args`` as ``_call_impl`` holds it, a tuple
        or what a with_kwargs forward_pre hook made it (a list)."""
        if not isinstance(args, tuple):   # a tensor: enumerate gives its rows, torch.Tensor(*rows) rebuilds
            raise ProblemError(loc, f"a with_kwargs forward_pre hook of '{call.module.label}' returns a tensor as "
                                    "its new args and the module has a full backward (pre-)hook: BackwardHook "
                                    "takes the tensor's rows and rebuilds them as torch.Tensor(*rows), which is "
                                    "not modelled; return a tuple (input[0],)")
        state = call.bw
        state.n_inputs = len(args)
        new, index, node = self.apply_on_tensors(args, loc)
        state.input_tensors_index = index
        if node is not None:
            call.in_node = node
            node.post_hooks.add(self.rt.new_handle(), ModuleInputHook(state))
        return new

    def setup_output_hook(self, call: Call, out, loc: Loc):
        state = call.bw
        outs = out if is_tuple(out) else (out,)   # a list is one value to BackwardHook
        state.n_outputs = len(outs)
        new, index, node = self.apply_on_tensors(outs, loc)
        state.output_tensors_index = index
        if node is not None:
            call.out_node = node
            node.post_hooks.add(self.rt.new_handle(), ModuleOutputHook(state))
        return new if is_tuple(out) else new[0]

    def apply_on_tensors(self, values: tuple, loc: Loc):
        """BackwardHook._apply_on_tensors: BackwardHookFunction over the tensors among ``values``
        when one requires grad and grad mode is on; returns (new values, tensor indices or None,
        node). The new values are rebuilt as ``type(values)(*items)`` unless ``values`` is a plain
        tuple: a list of two or more, or a ``torch.return_types`` value, raises Python's
        TypeError there (after the node is made), a list of one tensor is that tensor's rows."""
        idx = [i for i, v in enumerate(values) if isinstance(v, Tensor)]
        tensors = [values[i] for i in idx]
        if not (self.rt.grad_enabled and any(t.requires_grad for t in tensors)):
            return values, None, None
        if any(t.inference for t in tensors):   # BackwardHookFunction handed an inference tensor
            raise ProblemError(loc, "a module's full backward hooks wrapping an inference tensor (made inside 'with "
                                    "inference_mode():') are not modelled; clone it first")
        new, node = self.backward_hook_function(tensors)
        out = list(values)
        for i, t in zip(idx, new):
            out[i] = t
        if isinstance(values, ReturnTuple):   # structseq_new(type, sequence, dict=None)
            raise TorchError("TypeError", f"torch.return_types.{values.kind}() takes a dict as second arg, if any",
                             "python")
        if isinstance(values, PyList):   # list(*items)
            if len(out) > 1:
                raise TorchError("TypeError", f"list expected at most 1 argument, got {len(out)}", "python")
            return PyList(_star_args(self.rt, out[0], loc)), idx, node
        return tuple(out), idx, node

    def backward_hook_function(self, tensors: list):
        """``BackwardHookFunction.apply``: identity, one node; inputs that do not require grad
        are marked non-differentiable."""
        rt = self.rt
        edges = [rt.gradient_edge(t) if t.requires_grad else None for t in tensors]
        node = Node(rt._new_seq(), "BackwardHookFunctionBackward", edges, kind="hookfn", inputs=tuple(tensors),
                    input_values=tuple(t.value for t in tensors),
                    module_call=rt.call_stack[-1] if rt.call_stack else None)
        rt.nodes.append(node)
        outs = []
        # returned as-is by a custom Function: views PyTorch forbids to modify in place, and
        # when more than one is differentiable, as the outputs of a multi-output function
        kind = "multi" if sum(t.requires_grad for t in tensors) > 1 else "custom"
        for i, t in enumerate(tensors):
            rg = t.requires_grad
            if not rg:   # returned as-is: _view_as_self_with_no_grad, an autograd view of it made
                # under no_grad (no grad_fn; writes show through), which an in-place op that records
                # may not write, and which, once its base requires grad and was written, raises on its
                # next use ("A view was created in no_grad mode and its base or another view ...")
                out = rt.detach(t)
                out.is_detached = False
                out.detached_root = t.detached_root if t.is_view else (t if t.is_detached else None)
                out.view_version, out.data_version = t.version.shown, t.version.value
                out.creation = (kind, "BackwardHookFunction")
                out.strides = view_as_strides(t.shape, t.strides)
                outs.append(out)
                continue
            out = rt.tensor(t.value, rg, node, i, dtype=t.dtype)
            out.creation = (kind, "BackwardHookFunction")
            out.strides, out.offset = view_as_strides(t.shape, t.strides), t.offset
            # a view of what it wraps (an input returned as-is): one storage, one version counter,
            # so a later in-place write on either shows in the other, and a use or a saved
            # tensor's unpack after it raises PyTorch's custom-Function view error
            out.base = t.base if t.is_view else t
            out.detached_root = t.detached_root if t.is_view else None
            out.view_of = t.view_of if t.is_view else _same_value
            out.view_ops = t.view_ops if t.is_view else ()
            out.version = t.version
            out.view_version, out.data_version = t.version.shown, t.version.value
            outs.append(out)
        node.outputs = [(t.shape, t.dtype) for t in outs]
        node.output_values = [t.value for t in outs]
        rt.record("bhf", tensors, outs, None, node, None)
        return outs, node

    def check_forward_args(self, new: tuple, mod: Module, hook, kwargs: dict | None = None,
                           count: bool = True) -> None:
        """The inputs a forward_pre hook returned, as far as adjoint models them (``count=False``:
        a count forward refuses, :func:`forward_arity_error`, is an answer)."""
        # keyword arguments that are no input of the module (a built-in's options: need_weights=False) stay
        # as they are, PyTorch calling forward(*new_args, **kwargs); the others bind inputs
        given = len(new) + len([k for k in (kwargs or {}) if k in mod.inputs])
        # a built-in's optional inputs (an RNN's hx) may be passed on too
        optional = len(nn_type(mod.type).optional_inputs) if mod.type is not None and nn_type(mod.type) else 0
        if count and len(new) > len(mod.inputs) + optional or count and (
                not mod.input_defaults and not len(mod.inputs) <= given <= len(mod.inputs) + optional):
            raise ProblemError(hook.returns.loc, f"the forward_pre hook returns {len(new)} input(s) but "
                                                 f"'{mod.label}' takes {len(mod.inputs)}: forward()'s TypeError is "
                                                 "not modelled for this module (a function: module's forward, which "
                                                 "CPython names by the user's own class)")
        for i, v in enumerate(new):
            if i == 1 and mod.type in ("LSTM", "LSTMCell") and isinstance(v, tuple) and len(v) == 2 \
                    and all(isinstance(s, Tensor) for s in v):
                continue   # an LSTM's state (h0, c0), as it is called with
            if not isinstance(v, Tensor) and i == 0 and mod.type is not None:
                from adjoint.engine.layers.input_type import not_a_tensor_error
                if not_a_tensor_error(mod.type, v) is not None:
                    continue   # the built-in's first call refuses it (module_forward): PyTorch's error, an answer
            if not isinstance(v, Tensor):
                raise ProblemError(hook.returns.loc, "a forward_pre hook must return tensors (the new inputs)"
                                   + ("; an LSTM's second input is the pair (h0, c0)"
                                      if mod.type in ("LSTM", "LSTMCell") else ""))

    def fire_forward(self, entry, env: dict, call: Call):
        """A forward(-pre) hook body runs with grad enabled: its ops are graph nodes."""
        return self.rt.hooks_runner.fire(entry.hook, env, None, call)

    # ------------------------------------------------------------------ module forwards
    def module_forward(self, mod: Module, args: list, kwargs: dict, call: Call, loc: Loc):
        rt = self.rt
        if mod.type is not None:
            from adjoint.engine.layers import FORWARDS, LayerCall
            if args and not isinstance(args[0], Tensor) and mod.type not in ("Identity", "Sequential") \
                    and not (isinstance(args[0], PackedSequence) and mod.type in ("RNN", "GRU", "LSTM")):
                # fc(gru(x)): a built-in's input must be a tensor (an RNN's state may be a tuple, not its input)
                from adjoint.engine.layers.input_type import not_a_tensor_error
                known = not_a_tensor_error(mod.type, args[0])
                if known is not None:   # the forward's first call refuses it, after the pre-hooks
                    raise TorchError(*known, "not_a_tensor")
                from adjoint.engine.bindings.signature import PARSER_TYPE_ERROR, describe
                raise ProblemError(loc, f"module '{mod.label}' ({mod.type}) is handed {describe(args[0])} as its "
                                        f"input, not a Tensor: {PARSER_TYPE_ERROR}; index or unpack it first "
                                        "(out, h = gru(x))")
            args, kwargs = _bind_keyword_inputs(mod, args, kwargs)
            own, bufs = _own_tensors(self.m, mod)
            weight = _computed_weight(rt, self.m, mod, own, bufs)   # the forward's first read of self.weight
            if weight is not None:
                own["weight"] = weight
            return FORWARDS[mod.type](LayerCall(rt, mod, list(args), dict(kwargs), loc, own, bufs,
                                                lambda child, a, k: self.call_module(child, a, child.loc, k),
                                                lambda: self._forward_hooked(mod)))
        if mod.function is not None:
            return self.function(mod, args, call)
        scope = _ModuleScope(self, mod, call, bind_arguments(mod, args, kwargs, loc))
        result = Interp(rt, scope).run(mod.forward)
        ret = mod.forward[-1]
        if not module_result(result):
            raise ProblemError(ret.value.loc, f"the forward of '{mod.label}' must return a tensor or a tuple of "
                                              "tensors")
        return result

    def function(self, mod: Module, args: list, call: Call) -> Tensor:
        """A custom autograd.Function: the whole forward is one node, ``<Name>Backward``."""
        from adjoint.engine.autograd_function import apply_function
        params = [self.m.params[p.name] for p in mod.params]
        return apply_function(self.rt, mod, list(args) + params)


def _suggest(word: str, options) -> str:
    import difflib   # only when a name is wrong: not on every start

    close = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


# ----------------------------------------------------------------------------- scopes

def _own_tensors(m, mod) -> tuple[dict, dict]:
    """A built-in module's parameters and buffers by their names relative to it (``weight``,
    ``parametrizations.weight.original``)."""
    prefix = f"{mod.path}." if mod.path else ""
    return ({p.name[len(prefix):]: m.params[p.name] for p in mod.params},
            {b.name[len(prefix):]: m.leaves[b.name] for b in mod.buffers})


def _computed_weight(rt, m, mod, own: dict, bufs: dict, loc=None):
    """``module.weight`` of a module whose weight is computed, None for any other: weight_norm's
    parametrization (adjoint.engine.weight_norm), the older weight_norm's stored tensor, spectral_norm's
    parametrization (adjoint.engine.spectral_norm); ``loc``: a read's, None for the forward's own."""
    if mod.weight_norm_legacy:
        from adjoint.engine.weight_norm import legacy_weight
        return legacy_weight(m, mod, loc)
    if mod.weight_norm is not None:
        from adjoint.engine.weight_norm import normalised_weight
        return normalised_weight(rt, own, mod, m.global_hooks.any(), loc)
    if mod.spectral_norm is not None:
        from adjoint.engine.spectral_norm import spectral_weight
        return spectral_weight(rt, own, bufs, mod, m.global_hooks.any(), loc)
    return None


class _ModuleScope:
    """Names inside a module's forward: locals, arguments, own params, targets, problem inputs."""

    def __init__(self, run: _Pass, mod: Module, call: Call, args: dict):
        self.run = run
        self.mod = mod
        self.call_record = call
        self.args = args
        self.local: dict = {}
        self.assigning: str | None = None
        self.assigned = [s.target.id for s in mod.forward if isinstance(s, S.Assign) and isinstance(s.target, S.Name)]
        self.later = S.bound_names(mod.forward)   # Python's locals of the forward (see binds_later)
        # name -> the statement making its tensor require grad in place (its hooks may wait for it)
        self.enabling = S.requires_grad_statements(mod.forward)

    def tensor_name(self, name: str) -> str:
        return f"{self.call_record.callid}.{name}" if self.mod.path else name

    def together(self):
        """Names one statement binds (``a, b = ...``): their hooks go on after it, in the file's order."""
        return self.run.m.reg.together()

    def assign(self, name: str, value, loc: Loc) -> None:
        if name in self.local or name in self.args or self.mod.param(name) or self.mod.child(name):
            raise ProblemError(loc, f"'{name}' is already a name in the forward of '{self.mod.label}'; "
                                    "two things with one name are an error (pick a new name)")
        if value is None:   # o, _ = attn(x, x, x, need_weights=False): Python binds None
            self.local[name] = None
            return
        if isinstance(value, tuple):
            # a tuple kept whole (u = x.unbind(1); then u[0]): indexed later, never a tensor name itself
            # (or of Python numbers: s = x.shape, a torch.Size, then s[0]; or an LSTM's whole
            # (output, (h_n, c_n)), out = lstm(x), then out[1][0])
            if not all(isinstance(v, (Tensor, Fraction)) or v is None or _tensor_pair(v) for v in value):
                raise ProblemError(loc, f"'{name}' must be a tensor, or a tuple of tensors, numbers or None")
            self.local[name] = value
            return
        self.local[name] = value
        if isinstance(value, Tensor):
            later = self.enabling.get(name)
            self.run.bind(self.tensor_name(name), value, loc, until=None if later is None else (id(self), id(later)))

    def statement_ran(self, stmt) -> None:
        """A statement of the forward ran: if it made a name's tensor require grad, the hooks on
        that name that could not go on at its line go on now (Registrations.statement_ran)."""
        if self.enabling and any(s is stmt for s in self.enabling.values()):
            self.run.m.reg.statement_ran((id(self), id(stmt)))

    def has_child(self, name: str) -> bool:
        return self.find_child(name) is not None

    def find_child(self, name: str):
        """A child by name, or a ModuleList item by its dotted path (``layers.0``)."""
        mod = self.mod
        for part in name.split("."):
            mod = mod.child(part) if mod is not None else None
        return mod

    def assign_again(self, name: str, value, loc: Loc) -> None:
        """``n += 1`` on a plain number: Python rebinds the name."""
        if isinstance(value, Tensor):
            raise ProblemError(loc, f"'{name}' would name a second tensor; two things with one name are an error")
        self.local[name] = value

    def lookup(self, name: str, loc: Loc):
        if name in self.local:
            return self.local[name]
        if name in self.args:
            return self.args[name]
        p = self.mod.param(name)
        if p is not None:
            return self.run.m.params[p.name]
        if name in self.mod.uses:   # a closure's name: the caller's tensor
            if name not in self.run.closures.get(self.mod.label, {}):
                raise ProblemError(loc, f"'{self.mod.label}' reads '{name}' from its caller (uses:), but its caller "
                                        "has no such name (only a custom forward's call passes its names on)")
            return self.run.closures[self.mod.label][name]
        b = self.mod.buffer(name)   # a custom module's buffers (running statistics for batch_norm, ...)
        if b is not None:
            return self.run.m.leaves[b.name]
        if self.mod.child(name) is not None:
            raise ProblemError(loc, f"'{name}' is a module; call it, as in {name}(x)")
        if name in self.run.m.globals:
            if self.binds_later(name):   # a local throughout the forward, not the script's variable
                raise unbound_local(name, loc, f"reading '{name}'")
            return self.run.m.globals[name]
        if name == self.assigning:
            raise ProblemError(loc, f"'{name}' is used in its own definition; a forward line may only use names "
                                    "defined before it")
        if name in self.assigned:
            raise ProblemError(loc, f"'{name}' is used before the line that assigns it; move that line up")
        options = list(dict.fromkeys(list(self.local) + list(self.args) +
                                     [p.name.rsplit(".", 1)[-1] for p in self.mod.params + self.mod.buffers] +
                                     list(self.run.m.globals)))
        raise ProblemError(loc, f"unknown name '{name}' in the forward of '{self.mod.label}'{_suggest(name, options)}; "
                                f"known here: {', '.join(options) or 'nothing'}")

    def bound(self, name: str):
        """A name the forward's Python code binds itself: its arguments and locals, a closure's
        name (``uses:``), an input or a target (the script's variables). Its parameters and
        buffers are ``self.NAME`` in Python, which hides nothing."""
        for names in (self.local, self.args):
            if name in names:
                return (names[name],)
        if name in self.mod.uses and name in self.run.closures.get(self.mod.label, {}):
            return (self.run.closures[self.mod.label][name],)
        if name in self.run.m.globals:
            return (self.run.m.globals[name],)
        return None

    def binds_later(self, name: str) -> bool:
        """A name a later line of the forward binds (Python's local throughout it), not bound yet:
        a call of it here is UnboundLocalError in Python (Interp.check_shadowing)."""
        return name in self.later and name not in self.local and name not in self.args

    def set_module_attribute(self, name: str, value, loc: Loc) -> None:
        """``self.NAME = value`` (adjoint.engine.module_attrs)."""
        from adjoint.engine.module_attrs import set_attribute
        set_attribute(self.run.m, self.mod, name, value, loc)

    def module_attribute(self, path: str, name: str, loc: Loc):
        """``PATH.NAME``: the module's parameter or buffer (``F.linear(h, emb.weight)``), or a tensor
        its forward stored (adjoint.engine.module_attrs)."""
        from adjoint.engine.module_attrs import get_attribute
        mod = self.find_child(path)
        if mod.param(name) is not None:
            return self.run.m.params[mod.param(name).name]
        if name == "weight" and (mod.weight_norm_legacy or mod.weight_norm is not None or mod.spectral_norm is not None):
            # a parametrization runs at each read; the older weight_norm's is the last call's stored tensor
            own, bufs = _own_tensors(self.run.m, mod)
            return _computed_weight(self.run.rt, self.run.m, mod, own, bufs, loc)
        if mod.buffer(name) is not None:
            return self.run.m.leaves[mod.buffer(name).name]
        return get_attribute(self.run.m, mod, name, loc)

    def checkpoint_sequential(self, name: str, segments, inp, kwargs: dict, loc: Loc):
        from adjoint.engine.checkpoint_sequential import run_checkpoint_sequential
        return run_checkpoint_sequential(self, name, segments, inp, kwargs, loc)

    def checkpoint(self, name: str, args: list, kwargs: dict, loc: Loc):
        child = self.find_child(name)
        if child is None:
            children = [c.name for c in self.mod.children]
            raise ProblemError(loc, f"checkpoint's function '{name}' is not a child module of '{self.mod.label}'; "
                                    "checkpoint(CHILD, *args, use_reentrant=...) takes a child's name"
                                    + (f" ({', '.join(children)})" if children else " (it has no children)"))
        from adjoint.engine.checkpoint import unexpected_keywords
        unexpected_keywords(self.run.rt, kwargs)   # the reentrant variant's ValueError comes before any call
        if not child.input_defaults and not _arity_ok(child, len(args)):
            raise ProblemError(loc, f"module '{child.label}' takes {len(child.inputs)} input(s) "
                                    f"({', '.join(child.inputs)}), got {len(args)} after checkpoint's function; "
                                    f"pass them in order: checkpoint({name}, {', '.join(child.inputs)}, ...)")
        if not any(isinstance(a, Tensor) for a in args):
            raise ProblemError(loc, f"checkpoint(...) hands '{child.label}' no tensor: give its tensor inputs")
        self.run.capture(child, self.lookup, loc)
        return self.run.checkpoint(child, args, kwargs, loc)

    def call(self, name: str, args: list, kwargs: dict, loc: Loc):
        child = self.find_child(name)
        if child is None and "." in name:
            holder, _, item = name.rpartition(".")
            found = self.find_child(holder)
            if found is not None and found.type in HOLDERS:
                kind = "item" if found.type == "ModuleDict" else "index"
                raise ProblemError(loc, f"the {found.type} '{found.label}' has no {kind} '{item}' (its items: "
                                        f"{', '.join(c.name for c in found.children)})")
        if child is None:
            from adjoint.engine.interpreter import unknown_function
            children = [c.name for c in self.mod.children]
            close = _suggest(name, children)
            raise ProblemError(loc, unknown_function(name, f"in the forward of '{self.mod.label}'", close)
                                    + (f" (child modules here: {', '.join(children)})" if children else ""))
        if not kwargs and not child.input_defaults and not _arity_ok(child, len(args)) and not _custom(child) \
                and _builtin_arity(args, child, kwargs) is None and child.type not in HOLDERS:
            # (a built-in's TypeError, and a ModuleList's missing forward, are answers, in its call)
            raise ProblemError(loc, f"module '{child.label}' takes {len(child.inputs)} input(s) "
                                    f"({', '.join(child.inputs)}), got {len(args)}")
        if child.type is not None and not _builtin_args_ok(child, args):
            raise ProblemError(loc, f"module '{child.label}' must be called with tensors")
        self.run.capture(child, self.lookup, loc)
        return self.run.call_module(child, list(args), loc, kwargs)


class _LossScope:
    assigning = None

    def __init__(self, run: _Pass):
        self.run = run

    def lookup(self, name: str, loc: Loc):
        if name == OUTPUT and isinstance(getattr(self.run, "output", None), tuple):
            return self.run.output  # a model returning a tuple: the loss indexes it, y[0]
        if name in self.run.names:
            return self.run.names[name]
        raise ProblemError(loc, f"unknown name '{name}' in the loss{_suggest(name, self.run.names)}; the loss can use "
                                f"y (the model output), inputs, targets and other tensor names")

    def has_child(self, name: str) -> bool:
        return self.run.p.model.child(name) is not None

    def bound(self, name: str):
        """The script's own names where the loss is computed: ``y``, the inputs and the targets (a
        forward's locals, which the loss may also name, are not variables of that script)."""
        if name == OUTPUT or name in self.run.m.globals:
            return (self.lookup(name, None),)
        return None

    def call(self, name: str, args: list, kwargs: dict, loc: Loc):
        """``loss: "ce(y, t)"``: a child of the root, called like any module (its hooks fire)."""
        from adjoint.engine.interpreter import unknown_function
        root = self.run.p.model
        child = root.child(name)
        if child is None:
            children = [c.name for c in root.children]
            raise ProblemError(loc, unknown_function(name, "in the loss")
                                    + (f" (the root's children, which the loss may call: {', '.join(children)})"
                                       if children else " (the loss may call the root's children; it has none)"))
        if not kwargs and not child.input_defaults and not _arity_ok(child, len(args)) and not _custom(child) \
                and _builtin_arity(args, child, kwargs) is None and child.type not in HOLDERS:
            # (a built-in's TypeError, and a ModuleList's missing forward, are answers, in its call)
            raise ProblemError(loc, f"module '{child.label}' takes {len(child.inputs)} input(s) "
                                    f"({', '.join(child.inputs)}), got {len(args)}")
        if not any(isinstance(a, Tensor) for a in list(args) + list(kwargs.values())) or \
                (child.type is not None and not _builtin_args_ok(child, args)):
            raise ProblemError(loc, f"module '{child.label}' must be called with tensors")
        return self.run.call_module(child, list(args), loc, kwargs)

    def assign(self, name, value, loc):
        raise ProblemError(loc, "the loss is one expression")


def _arity_ok(child: Module, n: int) -> bool:
    """A call's positional count: a built-in's optional inputs may be given positionally
    (``cell(x, hx)``, ``lstm(x, (h, c))``)."""
    if n == len(child.inputs):
        return True
    from adjoint.format.module_signatures import lookup
    t = lookup(child.type) if child.type is not None else None
    return t is not None and tuple(child.inputs) == t.inputs and \
        len(t.inputs) <= n <= len(t.inputs) + len(t.optional_inputs)


def _builtin_args_ok(child: Module, args: list) -> bool:
    """A built-in module's positional arguments: its inputs are tensors (or tuples of them, an
    LSTM's ``(h, c)``); past them, an optional input its forward declares may be given
    positionally as by keyword (``attn(q, k, v, None, False)``: key_padding_mask=None,
    need_weights=False), the layer checking what each may be."""
    from adjoint.format.module_signatures import lookup
    t = lookup(child.type)
    required = len(t.inputs) if t is not None and tuple(child.inputs) == t.inputs and t.optional_inputs \
        else len(args)
    numbers = {t.inputs.index(n) for n in t.number_inputs} if t is not None else set()
    return all(isinstance(a, Tensor) or _tensor_tuple(a) or (k >= required and _optional_arg(a))
               or (k in numbers and isinstance(a, Fraction) and not isinstance(a, bool))
               for k, a in enumerate(args))


def _bind_keyword_inputs(mod: Module, args: list, kwargs: dict) -> tuple[list, dict]:
    """A built-in's inputs given by keyword (``lin(input=x)``, ``attn(query=q, key=k, value=v)``)
    bound to their places, as Python binds ``forward(self, input)``: the layer computes the same.
    Only the forward sees them so: ``_call_impl`` hands its hooks ``args`` as the call passed them
    (``()`` for ``lin(input=x)``), and ``BackwardHook`` wraps no keyword argument, so a full
    backward hook is then handed ``grad_input = ()`` and fires from the output's node, with
    PyTorch's warning that no input requires gradients."""
    args, kwargs = list(args), dict(kwargs)
    for name in mod.inputs[len(args):]:
        if name not in kwargs:
            break
        args.append(kwargs.pop(name))
    return args, kwargs


def _optional_arg(v) -> bool:
    """What an optional input of a built-in's forward may be besides a tensor: None, a bool, a number."""
    return v is None or isinstance(v, (bool, int, Fraction))


def _tensor_tuple(v) -> bool:
    """A tuple of tensors (or None), nested too: an LSTM's ``(output, (h_n, c_n))``."""
    return isinstance(v, tuple) and all(isinstance(x, Tensor) or x is None or _tensor_tuple(x) for x in v)


def _custom(mod: Module) -> bool:
    """A custom module with a forward program: a wrong count of inputs is CPython's TypeError when
    its forward is called (after the forward pre-hooks), predicted by :func:`bind_arguments`."""
    return mod.type is None and mod.function is None and bool(mod.forward)


def bind_arguments(mod: Module, args: list, kwargs: dict, loc: Loc) -> dict:
    """Python's binding of a call's arguments to the forward's parameters (``inputs``), with
    the declared defaults; a mismatch is the TypeError PyTorch's forward would raise."""
    names = list(mod.inputs)
    if mod.type is None and mod.function is None:   # CustomModule.forward(self, INPUTS): CPython's binding
        refused = pyerrors.binding_error(pyerrors.CUSTOM_FORWARD, names, {n for n, _ in mod.input_defaults},
                                         len(args), list(kwargs))
        if refused is not None:
            raise TorchError("TypeError", refused)
    if len(args) > len(names):
        raise ProblemError(loc, f"module '{mod.label}' takes {len(names)} input(s) ({', '.join(names)}), got "
                                f"{len(args)}: Python raises TypeError in forward()")
    bound = dict(zip(names, args))
    for k, v in kwargs.items():
        if k not in names:
            raise ProblemError(loc, f"module '{mod.label}' has no input named '{k}' (inputs: {', '.join(names)}): "
                                    "Python raises TypeError in forward()")
        if k in bound:
            raise ProblemError(loc, f"input '{k}' of module '{mod.label}' is given twice: Python raises TypeError")
        bound[k] = v
    defaults = dict(mod.input_defaults)
    for n in names:
        if n not in bound:
            if n not in defaults:
                raise ProblemError(loc, f"module '{mod.label}' is called without its input '{n}': Python raises "
                                        "TypeError in forward()")
            bound[n] = defaults[n]
    return bound


def module_result(v) -> bool:
    """What a custom module's forward (and so a forward hook replacing its output) may return: a
    tensor, a tuple with a tensor among tensors, plain values and tuples of tensors, or a dict of
    tensors."""
    return isinstance(v, Tensor) or tensor_dict(v) or (
        isinstance(v, tuple) and any(isinstance(r, Tensor) for r in v)
        and all(isinstance(r, Tensor) or plain_value(r) or _tensor_pair(r) for r in v))


def tensor_dict(v) -> bool:
    """A dict of tensors a custom module takes or returns (PyTorch's BackwardHook sees no tensor in
    it), some values None (``{"logits": h, "loss": None}``, a model called without targets)."""
    return isinstance(v, dict) and any(isinstance(x, Tensor) for x in v.values()) and \
        all(isinstance(k, str) and (isinstance(x, Tensor) or x is None) for k, x in v.items())


def _tensor_pair(v) -> bool:
    """A tuple of tensors nested in a module's output tuple (an LSTM-like ``h, (h, c)``): PyTorch's
    BackwardHook and legacy hook look into the outer tuple only (its slot is None)."""
    return is_tuple(v) and bool(v) and all(isinstance(t, Tensor) for t in v)


def plain_value(v) -> bool:
    """A non-tensor a module may return among tensors (a bool flag, a number, None): PyTorch's
    backward hooks give its slot None."""
    return v is None or isinstance(v, (bool, int, float, Fraction))


def _same_value(value):
    """The view function of a tensor returned as-is: the base's value is its value."""
    return value


def _warning_reads(rt, args, result, node) -> None:
    """``Module._maybe_warn_non_full_backward_hook``, run after a legacy hook is registered: its
    FutureWarnings (adjoint.engine.warns), and the ``grad_fn`` reads it makes -- of every output (a
    tensor or a tuple of tensors) and, when they have exactly the hooked node among them, of
    every input (all tensors): each read makes a stale view's new grad_fn then (a node, in
    creation order)."""
    warns.non_full_backward_hook(rt, args, result, node, grad_fn, Tensor)


def _check_star_args(args, kwargs, hook) -> None:
    """What a with_kwargs forward_pre hook returned, as ``forward(*args, **kwargs)`` will take it:
    a tuple or list of inputs, or a tensor (its rows); kwargs a dict. Otherwise CPython raises
    TypeError naming the forward by its module and qualname ("...Linear.forward() argument after
    ** must be a mapping, not Tensor"), which adjoint cannot word for a module of the file:
    refused."""
    if not isinstance(kwargs, dict):
        kind = pyerrors.type_name(kwargs, None) or "a non-mapping"
        raise ProblemError(hook.returns.loc, f"a with_kwargs forward_pre hook returns {kind} as its new kwargs: "
                                             "PyTorch's forward call raises TypeError ('...forward() argument after "
                                             f"** must be a mapping, not {kind}'), which is not modelled; return a "
                                             "dict (kwargs)")
    if not isinstance(args, (tuple, Tensor)):
        kind = pyerrors.type_name(args, None) or "a non-sequence"
        raise ProblemError(hook.returns.loc, f"a with_kwargs forward_pre hook returns {kind} as its new args: "
                                             "PyTorch's forward call raises TypeError ('...forward() argument after "
                                             f"* must be an iterable, not {kind}'), which is not modelled; return a "
                                             "tuple of inputs")


def _star_args(rt, args, loc: Loc) -> list:
    """The positional inputs ``forward(*args)`` is handed: the items of a tuple or list; a
    tensor's rows (``Tensor.__iter__`` is ``iter(self.unbind(0))``: one UnbindBackward0 node;
    a 0-d tensor raises TypeError "iteration over a 0-d tensor")."""
    if isinstance(args, tuple):
        return list(args)
    if not args.shape:
        raise TorchError("TypeError", "iteration over a 0-d tensor", "python")
    return list(rt.apply("unbind", [args], 0, loc))


def _legacy_var(out, loc: Loc) -> Tensor:
    """The tensor whose ``grad_fn`` ``_call_impl`` puts a module's legacy backward hooks on: from
    the output, ``var = var[0]`` while var is not a Tensor, a dict giving its first Tensor value.
    Python's own error when the walk meets what cannot be indexed so (``return None, x * 2``:
    "'NoneType' object is not subscriptable"), an empty sequence, or a dict without a tensor
    (``next()``'s StopIteration): raised in the forward, before any backward hook."""
    var = out
    while not isinstance(var, Tensor):
        if isinstance(var, dict):
            var = next((v for v in var.values() if isinstance(v, Tensor)), None)
            if var is None:
                raise TorchError("StopIteration", "", "python")
        elif isinstance(var, tuple):   # a tuple, a list, a torch.return_types value
            if not var:
                raise TorchError("IndexError", f"{sequence_name(var)} index out of range", "python")
            var = var[0]
        else:
            name = pyerrors.type_name(var, None)
            if name is None:
                raise ProblemError(loc, "a module with a legacy backward hook returns a Python number (or another non-tensor) first: "
                                        "PyTorch's _call_impl raises TypeError ('int' or 'float' object is not "
                                        "subscriptable), which adjoint cannot word (the number's type is not known)")
            raise TorchError("TypeError", f"'{name}' object is not subscriptable", "python")
    return var


def _typed_numbers(new: tuple, returned, hook, mod: Module) -> tuple:
    """A forward_pre hook's new first input that is a Python number (``return 2``: PyTorch wraps it
    as ``(2,)``), handed to a built-in module: a :class:`ReturnedNumber` of its Python type as the
    hook's expression tells it, which the layer's first line refuses in PyTorch's words
    (adjoint.engine.layers.input_type). Anything else is left as it is (refused where it is used)."""
    from adjoint.engine.layers.input_type import NOT_A_TENSOR
    from adjoint.engine.returned_number import ReturnedNumber
    if not new or mod.type not in NOT_A_TENSOR or isinstance(new[0], (Tensor, tuple)) or new[0] is None:
        return new
    expr = hook.returns if not is_tuple(returned) else \
        (hook.returns.items[0] if isinstance(hook.returns, S.Tup) and len(hook.returns.items) == len(new) else None)
    name = pyerrors.type_name(new[0], expr) if expr is not None else None
    if name not in ("int", "float", "bool"):
        return new
    return (ReturnedNumber(name),) + tuple(new[1:])


def _plain_repr(value, expr) -> str | None:
    """Python's ``str()`` of a hook's result made of numbers, None and tuples or lists of them
    (``2``, ``2.5``, ``()``, ``(1, None)``, ``[1]``), their types as ``expr`` (the hook's
    ``returns:``) shows them; None for anything else (a tensor's repr is not worded here, nor a
    float not made of number literals and arithmetic: its digits are Python's rounding's)."""
    if value is None:
        return "None"
    if isinstance(value, tuple) and not isinstance(value, Tensor):
        items = getattr(expr, "items", None)
        if items is None or len(items) != len(value) or type(value) not in (tuple, PyList):
            return None
        shown = [_plain_repr(v, e) for v, e in zip(value, items)]
        if any(s is None for s in shown):
            return None
        if isinstance(value, PyList):
            return "[" + ", ".join(shown) + "]"
        return "(" + ", ".join(shown) + ("," if len(shown) == 1 else "") + ")"
    if isinstance(value, Tensor):
        return None
    name = pyerrors.type_name(value, expr) if expr is not None else None
    if name == "bool":
        return repr(bool(value))
    if name == "int":
        return repr(int(value))
    if name == "float" and isinstance(value, (Fraction, int, float)):
        # Python's own float: adjoint's numbers are exact (0.1 + 0.2 is 3/10, Python prints
        # 0.30000000000000004), so only a float Python's rounding can be followed for is worded
        computed = python_number(expr)
        return repr(computed) if isinstance(computed, float) else None
    return None


def _called_without(entry, missing: str) -> None:
    """A hook registered with ``with_kwargs`` whose mark is gone -- removed by a hook that ran
    before it in the same call: ``_call_impl`` iterates a snapshot of the hooks but asks the
    live with_kwargs dict -- is called without ``kwargs``, and Python raises TypeError before
    its body runs (the last parameter missing: ``kwargs`` for a forward pre-hook, ``output``
    for a forward hook). PyTorch's message names the function; adjoint names it ``hook``."""
    if entry.hook.with_kwargs:
        raise TorchError("TypeError", f"hook() missing 1 required positional argument: '{missing}'", "hook_result")


#: built-in layers whose forward is inherited (torch 2.13): the defining class's name
FORWARD_OWNER = {"BatchNorm1d": "_BatchNorm", "BatchNorm2d": "_BatchNorm", "BatchNorm3d": "_BatchNorm",
                 "ReLU6": "Hardtanh", **{f"InstanceNorm{rank}d": "_InstanceNorm" for rank in (1, 2, 3)},
                 **{f"{kind}Pad{rank}d": f"_{'Constant' if kind == 'Zero' else kind}PadNd"
                    for kind in ("Zero", "Constant", "Reflection", "Replication", "Circular") for rank in (1, 2, 3)}}


def _builtin_arity(args, mod: Module, kwargs: dict) -> str | None:
    """forward(*args)'s TypeError for a built-in layer (or Sequential) called with the wrong count
    (``lin(x, x)``, a loss without its target), None otherwise; a custom module's binding is its
    own forward's."""
    if mod.type is None or mod.function is not None or (not kwargs and _arity_ok(mod, len(args))):
        return None
    return forward_arity_error(tuple(args), mod, kwargs)


def forward_arity_error(new: tuple, mod: Module, kwargs: dict) -> str | None:
    """CPython's TypeError when a built-in layer's ``forward(self, INPUTS)`` (every input required,
    as torch.nn declares them: tests/test_forward_pre_arity.py) is called with the ``new`` inputs
    a forward_pre hook returned; None when the count is right or the layer is not such a one."""
    from adjoint.format.module_signatures import lookup

    if mod.type is None and mod.function is None:   # a custom module: CPython's binding of CustomModule.forward
        return pyerrors.binding_error(pyerrors.CUSTOM_FORWARD, list(mod.inputs), {n for n, _ in mod.input_defaults},
                                      len(new), list(kwargs))
    t = lookup(mod.type) if mod.type is not None else None
    if t is not None and t.name == "Sequential":   # nn.Sequential.forward(self, input)
        return pyerrors.binding_error("Sequential.forward", ["input"], set(), len(new), list(kwargs))
    if t is None or t.container:
        return None
    owner = FORWARD_OWNER.get(t.name, t.name)   # the class that defines forward: CPython names its qualname
    # forward(self, INPUTS, OPTIONAL=default...): CPython's binding, keywords too
    return pyerrors.binding_error(f"{owner}.forward", list(t.inputs + t.optional_inputs), set(t.optional_inputs),
                                  len(new), list(kwargs))


def _kwarg_tensors(kwargs) -> tuple:
    """The tensors among a call's keyword arguments (in a tuple value too)."""
    out = []
    stack = list(kwargs.values()) if isinstance(kwargs, dict) else []
    while stack:
        v = stack.pop(0)
        if isinstance(v, Tensor):
            out.append(v)
        elif isinstance(v, (tuple, list)):
            stack[:0] = list(v)
    return tuple(out)
