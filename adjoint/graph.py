"""Trace one variant of a problem into the IR the interpreters run over.

The IR is plain records: :class:`Var` (a tensor), :class:`Eqn` (one primitive application,
carrying its autograd :class:`Node` when PyTorch would create one), :class:`Call` (one
module call boundary) and the hook registrations. Tracing follows ``nn.Module._call_impl``
step by step, so the graph has exactly the nodes PyTorch 2.13 builds, created in the same
order (node ``seq`` mirrors ``sequence_nr``, which orders the backward engine):

1. forward-pre hooks run (a returned value replaces the positional inputs);
2. with full backward (or backward-pre) hooks, the inputs go through
   ``BackwardHookFunction`` (one ``BackwardHookFunctionBackward`` node) if any requires grad;
3. the forward runs; 4. forward hooks run (a returned value replaces the output);
5. with full/pre hooks the output goes through ``BackwardHookFunction`` too;
6. legacy ``register_backward_hook`` hooks are attached as post-hooks to the output's
   ``grad_fn``, i.e. the *last node* of the module, whatever it is.

Tensor and node hooks on a tensor are registered as soon as the tensor exists (for a
module output: right after the module call returns), in declared order; ``when:
after_forward`` defers them to after the loss is built.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from . import torch_names
from .errors import Loc, ProblemError
from .exact import Exact, q
from .expr import simple_program
from .lower import Lowerer, ValueBackend, result_shape, run_hook_body
from .ops import MODULE_PRIMS, RULES, UNARY_FUNCTIONS
from .problem import OUTPUT, Function, Hook, Literal, Module, Problem, TensorDecl, Variant
from .v1compat import refuse_unsupported


# ----------------------------------------------------------------------------- records

@dataclass(frozen=True)
class Var:
    id: int
    shape: tuple[int, ...]
    requires_grad: bool
    producer: int | None          # eqn whose node is this tensor's grad_fn (None: leaf, or no grad)
    output_nr: int
    leaf: bool                    # inputs, parameters, targets


@dataclass(frozen=True)
class Node:
    seq: int                      # creation order, as torch's sequence_nr
    name: str                     # e.g. AddmmBackward0
    edges: tuple[int | None, ...]  # per slot, the var whose gradient flows there (None: invalid edge)


@dataclass(frozen=True)
class FunctionSpec:
    """Params of a ``function`` eqn: a hand-written autograd.Function."""

    decl: Function
    module: Module
    slots: tuple[str, ...]        # names of the Function's inputs: module args, then params
    out_shape: tuple[int, ...]


@dataclass(frozen=True)
class Eqn:
    id: int
    prim: str                     # a key of ops.RULES, "bhf" or "function"
    ins: tuple                    # var ids, or Exact for a Python number torch wraps as a tensor
    outs: tuple[int, ...]
    params: object
    node: Node | None
    call: int | None              # innermost module call running when it was created
    loc: Loc | None


@dataclass(frozen=True)
class Registered:
    hook: Hook
    clock: int                    # global registration order
    removed: bool                 # removed before backward: registered, never fires in backward


@dataclass(frozen=True)
class PostHook:
    kind: str                     # user | module_in | module_out | legacy
    call: int | None
    reg: Registered | None


@dataclass
class Call:
    id: int
    module: Module
    callid: str                   # "model", "f1", "f1#2"
    k: int
    parent: int | None
    args: tuple[int, ...] = ()    # positional inputs after forward-pre hooks: grad_input is about these
    out: int = -1                 # output as the caller receives it
    bhf_in: int | None = None
    bhf_out: int | None = None
    full_hooks: tuple[Registered, ...] = ()
    pre_hooks: tuple[Registered, ...] = ()
    legacy_hooks: tuple[Registered, ...] = ()
    legacy_node: int | None = None
    body_start: int = 0           # first eqn after the input wrapping (J^T runs over [body_start, end))
    end: int = 0

    @property
    def path(self) -> str:
        return self.module.label


@dataclass(frozen=True)
class ForwardEvent:
    reg: Registered
    call: int
    inputs: tuple                 # trace values handed as `input`
    output: int | None            # forward hooks: the output handed in
    returned: object              # trace value returned (None: observed only)


@dataclass
class Graph:
    problem: Problem
    variant: Variant
    vars: list[Var] = field(default_factory=list)
    eqns: list[Eqn] = field(default_factory=list)
    names: dict[str, int] = field(default_factory=dict)
    decls: dict[int, TensorDecl] = field(default_factory=dict)   # leaf var -> declaration
    calls: list[Call] = field(default_factory=list)
    forward_events: list[ForwardEvent] = field(default_factory=list)
    tensor_hooks: dict[int, list[Registered]] = field(default_factory=dict)
    retained: dict[int, list[str]] = field(default_factory=dict)
    node_pre: dict[int, list[Registered]] = field(default_factory=dict)
    node_post: dict[int, list[PostHook]] = field(default_factory=dict)
    root: int = -1
    root_name: str = ""
    grad_output: Literal | None = None
    method: str = "backward"
    wrt: list[tuple[str, int]] = field(default_factory=list)

    def name_of(self, var: int) -> str | None:
        for n, v in self.names.items():
            if v == var:
                return n
        return None

    def nodes(self) -> list[Eqn]:
        return [e for e in self.eqns if e.node is not None]


# ----------------------------------------------------------------------------- builder

class GraphBuilder:
    """The trace backend of :class:`adjoint.lower.Lowerer`: records eqns and nodes."""

    def __init__(self, graph: Graph):
        self.g = graph
        self.seq = 0
        self.call_stack: list[int] = []

    def new_var(self, shape, requires_grad, producer=None, output_nr=0, leaf=False) -> int:
        v = Var(len(self.g.vars), tuple(shape), requires_grad, producer, output_nr, leaf)
        self.g.vars.append(v)
        return v.id

    def var(self, vid: int) -> Var:
        return self.g.vars[vid]

    # Backend protocol --------------------------------------------------------
    def constant(self, value):
        return Exact.scalar(q(value))

    def shape(self, value):
        return value.shape if isinstance(value, Exact) else self.g.vars[value].shape

    def is_tensor(self, value):
        return isinstance(value, (int, Exact)) and not isinstance(value, bool)

    def apply(self, prim, ins, params, loc):
        shapes = [self.shape(i) for i in ins]
        out_shape = result_shape(prim, shapes, params, loc)
        return self.emit(prim, ins, params, loc, [out_shape], RULES[prim].node if prim in RULES else prim)[0]

    def emit(self, prim, ins, params, loc, out_shapes, node_name, out_requires=None) -> list[int]:
        ins = tuple(ins)
        rg = [isinstance(i, int) and self.g.vars[i].requires_grad for i in ins]
        eid = len(self.g.eqns)
        node = None
        if any(rg):
            node = Node(self.seq, node_name, tuple(i if r else None for i, r in zip(ins, rg)))
            self.seq += 1
        outs = []
        for k, s in enumerate(out_shapes):
            req = node is not None if out_requires is None else out_requires[k]
            outs.append(self.new_var(s, req, eid if req else None, k if req else 0))
        self.g.eqns.append(Eqn(eid, prim, ins, tuple(outs), params, node,
                               self.call_stack[-1] if self.call_stack else None, loc))
        return outs


# ----------------------------------------------------------------------------- tracer

def trace(problem: Problem, variant: Variant) -> Graph:
    refuse_unsupported(problem, variant)
    return _Tracer(problem, variant).run()


class _Tracer:
    def __init__(self, problem: Problem, variant: Variant):
        self.p = problem
        self.v = variant
        self.g = Graph(problem, variant)
        self.b = GraphBuilder(self.g)
        self.clock = 0
        self.call_counts: dict[str, int] = {}
        self.module_hooks: dict[str, list[Registered]] = {}
        self.pending: dict[str, list[Hook]] = {}
        self.deferred: list[Hook] = []
        self.globals: dict[str, int] = {}
        self.param_vars: dict[str, int] = {}

    def tick(self) -> int:
        self.clock += 1
        return self.clock

    # --------------------------------------------------------------- naming
    def bind(self, name: str, var: int, loc: Loc | None) -> None:
        if name in self.g.names:
            raise ProblemError(loc, f"two tensors are named '{name}'; two things with one name are an error "
                                    "(rename one)")
        self.g.names[name] = var
        for hook in self.pending.pop(name, []):
            self.register_tensor_hook(hook, var)

    # --------------------------------------------------------------- top level
    def run(self) -> Graph:
        self.leaves()
        self.sort_hooks()
        root = self.p.model
        if len(root.inputs) != len(self.v.inputs):
            raise ProblemError(root.loc, f"the root module takes {len(root.inputs)} input(s) ({', '.join(root.inputs)}) "
                                         f"but the problem declares {len(self.v.inputs)} "
                                         f"({', '.join(d.name for d in self.v.inputs)}); inputs are passed in order")
        args = [self.g.names[d.name] for d in self.v.inputs]
        out = self.call_module(root, args, root.loc)
        if OUTPUT not in self.g.names:  # an input may be called y when no loss refers to the output
            self.bind(OUTPUT, out, None)
        root_var = out
        if self.p.loss is not None:
            scope = _LossScope(self)
            value = Lowerer(self.b, scope).eval(self.p.loss)
            if not self.b.is_tensor(value) or isinstance(value, Exact):
                raise ProblemError(self.p.loss.loc, "the loss must be a tensor expression of y (the model output)")
            root_var = value
            self.bind("loss", root_var, self.p.loss.loc)
        for hook in self.deferred:
            self.register_late(hook)
        for name, hooks in self.pending.items():
            raise ProblemError(hooks[0].loc, f"hook target '{name}' is not a tensor of this problem"
                                             f"{_suggest(name, self.g.names)}; tensors: {', '.join(self.g.names)}")
        self.backward_spec(root_var)
        return self.g

    def leaves(self) -> None:
        for d in list(self.v.inputs) + list(self.p.targets):
            self.leaf(d)
            self.globals[d.name] = self.g.names[d.name]
        for m in self.p.model.walk():
            for d in m.params:
                self.leaf(d)
                self.param_vars[d.name] = self.g.names[d.name]

    def leaf(self, d: TensorDecl) -> None:
        vid = self.b.new_var(d.value.shape, d.requires_grad, leaf=True)
        self.g.decls[vid] = d
        self.g.names[d.name] = vid

    def sort_hooks(self) -> None:
        paths = {m.label: m for m in self.p.model.walk()}
        modes: dict[str, set[str]] = {}
        for hook in self.v.hooks:
            if hook.on == "module":
                if hook.target not in paths:
                    raise ProblemError(hook.loc, f"hook target module '{hook.target}' does not exist"
                                                 f"{_suggest(hook.target, paths)}; modules: {', '.join(paths)}")
                mode = {"full_backward": "full", "backward": "legacy"}.get(hook.kind)
                if mode:
                    modes.setdefault(hook.target, set()).add(mode)
                    if len(modes[hook.target]) == 2:
                        raise ProblemError(hook.loc, f"module '{hook.target}' gets both a legacy backward hook and a "
                                                     "full backward hook: PyTorch raises 'Cannot use both regular "
                                                     "backward hooks and full backward hooks on a single Module'")
                if hook.when == "before_forward":
                    self.module_hooks.setdefault(hook.target, []).append(
                        Registered(hook, self.tick(), hook.remove == "before_backward"))
                continue
            if hook.when == "after_forward":
                self.deferred.append(hook)
            elif hook.target in self.g.names:
                self.register_tensor_hook(hook, self.g.names[hook.target])
            else:
                self.pending.setdefault(hook.target, []).append(hook)

    def register_late(self, hook: Hook) -> None:
        if hook.target not in self.g.names:
            raise ProblemError(hook.loc, f"hook target '{hook.target}' is not a tensor of this problem"
                                         f"{_suggest(hook.target, self.g.names)}")
        self.register_tensor_hook(hook, self.g.names[hook.target])

    def register_tensor_hook(self, hook: Hook, vid: int) -> None:
        var = self.g.vars[vid]
        removed = hook.remove == "before_backward"
        if hook.on == "tensor":
            if not var.requires_grad:
                what = "retain_grad on" if hook.kind == "retain_grad" else "a hook on"
                raise ProblemError(hook.loc, f"'{hook.target}' does not require grad, so PyTorch refuses {what} it "
                                             "('cannot register a hook on a tensor that doesn't require gradient')")
            if hook.kind == "retain_grad":
                if not var.leaf:  # retain_grad() on a leaf is a no-op: its .grad is kept anyway
                    self.g.retained.setdefault(vid, []).append(hook.target)
                return
            self.g.tensor_hooks.setdefault(vid, []).append(Registered(hook, self.tick(), removed))
            return
        if var.producer is None or self.g.eqns[var.producer].node is None:
            raise ProblemError(hook.loc, f"'{hook.target}' has no grad_fn (it is a leaf or does not require grad), so "
                                         "there is no autograd node to hook; hook the tensor instead (tensor:)")
        reg = Registered(hook, self.tick(), removed)
        if hook.kind == "pre":
            self.g.node_pre.setdefault(var.producer, []).append(reg)
        else:
            self.g.node_post.setdefault(var.producer, []).append(PostHook("user", None, reg))

    def backward_spec(self, root_var: int) -> None:
        g = self.g
        bw = self.v.backward
        var = g.vars[root_var]
        where = self.p.loss.loc if self.p.loss is not None else self.p.model.loc
        if not var.requires_grad:
            raise ProblemError(where, "nothing the backward starts from requires grad: PyTorch raises 'element 0 of "
                                      "tensors does not require grad and does not have a grad_fn'")
        if bw.grad_output is not None:
            if bw.grad_output.shape != var.shape:
                raise ProblemError(bw.grad_output.loc, f"backward.grad_output has shape {list(bw.grad_output.shape)} "
                                                       f"but the tensor backward starts from has shape {list(var.shape)}; "
                                                       f"give a literal of shape {list(var.shape)}")
        elif _numel(var.shape) != 1:
            raise ProblemError(where, f"backward starts from a tensor of shape {list(var.shape)}: PyTorch raises 'grad "
                                      "can be implicitly created only for scalar outputs'; add a loss or give "
                                      "backward.grad_output")
        g.root = root_var
        g.root_name = "loss" if self.p.loss is not None else OUTPUT
        g.grad_output = bw.grad_output
        g.method = bw.method
        for name, loc in bw.inputs:
            if name not in g.names:
                raise ProblemError(loc, f"backward input '{name}' is not a tensor of this problem"
                                        f"{_suggest(name, g.names)}; tensors: {', '.join(g.names)}")
            vid = g.names[name]
            if not g.vars[vid].requires_grad:
                raise ProblemError(loc, f"backward input '{name}' does not require grad: PyTorch raises 'One of the "
                                        "differentiated Tensors does not require grad'")
            g.wrt.append((name, vid))

    # --------------------------------------------------------------- module calls
    def call_module(self, mod: Module, args: list[int], loc: Loc) -> int:
        label = mod.label
        k = self.call_counts[label] = self.call_counts.get(label, 0) + 1
        callid = label if k == 1 else f"{label}#{k}"
        call = Call(len(self.g.calls), mod, callid, k, self.b.call_stack[-1] if self.b.call_stack else None)
        self.g.calls.append(call)
        self.b.call_stack.append(call.id)
        regs = self.module_hooks.get(label, [])
        by_kind = {kind: tuple(r for r in regs if r.hook.kind == kind) for kind in
                   ("forward_pre", "forward", "full_backward", "full_backward_pre", "backward")}
        args = list(args)
        for reg in by_kind["forward_pre"]:
            returned = self.hook_returns(reg, {"input": tuple(args)}, call)
            self.g.forward_events.append(ForwardEvent(reg, call.id, tuple(args), None, returned))
            if returned is not None:
                new = returned if isinstance(returned, tuple) else (returned,)
                self.check_forward_args(new, mod, reg.hook)
                args = list(new)
        call.args = tuple(args)
        call.full_hooks = by_kind["full_backward"]
        call.pre_hooks = by_kind["full_backward_pre"]
        call.legacy_hooks = by_kind["backward"]
        wrap = bool(call.full_hooks or call.pre_hooks)
        if wrap:
            args = self.backward_hook_function(args, call, "module_in")
        call.body_start = len(self.g.eqns)
        out = self.forward(mod, args, call, loc)
        for reg in by_kind["forward"]:
            returned = self.hook_returns(reg, {"input": tuple(args), "output": out}, call)
            self.g.forward_events.append(ForwardEvent(reg, call.id, tuple(args), out, returned))
            if returned is not None:
                if not self.b.is_tensor(returned) or isinstance(returned, Exact):
                    raise ProblemError(reg.hook.returns.loc, "a forward hook must return the replacement output "
                                                             "tensor (or nothing)")
                out = returned
        if wrap:
            out = self.backward_hook_function([out], call, "module_out")[0]
        if call.legacy_hooks:
            producer = self.g.vars[out].producer
            if producer is not None:
                call.legacy_node = producer
                for reg in call.legacy_hooks:
                    self.g.node_post.setdefault(producer, []).append(PostHook("legacy", call.id, reg))
        call.out = out
        call.end = len(self.g.eqns)
        self.b.call_stack.pop()
        self.bind(callid, out, loc)  # the root's output is "model" (and "y", bound by run())
        return out

    def check_forward_args(self, new: tuple, mod: Module, hook: Hook) -> None:
        if len(new) != len(mod.inputs):
            raise ProblemError(hook.returns.loc, f"the forward_pre hook returns {len(new)} input(s) but "
                                                 f"'{mod.label}' takes {len(mod.inputs)}: PyTorch raises TypeError "
                                                 "in forward()")
        for v in new:
            if not self.b.is_tensor(v) or isinstance(v, Exact):
                raise ProblemError(hook.returns.loc, "a forward_pre hook must return tensors (the new inputs)")

    def backward_hook_function(self, tensors: list[int], call: Call, role: str) -> list[int]:
        """``BackwardHookFunction.apply``: identity, one node, only if some input requires grad."""
        if not any(self.g.vars[t].requires_grad for t in tensors):
            return tensors
        shapes = [self.g.vars[t].shape for t in tensors]
        requires = [self.g.vars[t].requires_grad for t in tensors]  # the rest is marked non-differentiable
        outs = self.b.emit("bhf", tensors, role, None, shapes, "BackwardHookFunctionBackward", requires)
        eid = len(self.g.eqns) - 1
        setattr(call, "bhf_in" if role == "module_in" else "bhf_out", eid)
        self.g.node_post.setdefault(eid, []).append(PostHook(role, call.id, None))
        self.tick()
        return outs

    def hook_returns(self, reg: Registered, env: dict, call: Call):
        """A forward(-pre) hook body runs with grad enabled: its ops are graph nodes."""
        return run_hook_body(reg.hook, env, self.b)

    def forward(self, mod: Module, args: list[int], call: Call, loc: Loc) -> int:
        low = Lowerer(self.b, _ModuleScope(self, mod, call, {}))
        if mod.type == "Linear":
            weight = self.param_vars[f"{mod.path}.weight" if mod.path else "weight"]
            bias_name = f"{mod.path}.bias" if mod.path else "bias"
            bias = self.param_vars.get(bias_name)
            return low.linear(args[0], weight, bias, mod.loc)
        if mod.type in MODULE_PRIMS:
            return self.b.apply(MODULE_PRIMS[mod.type], [args[0]], None, mod.loc)
        if mod.type == "Identity":
            return args[0]
        if mod.type == "Sequential":
            x = args[0]
            for child in mod.children:
                x = self.call_module(child, [x], child.loc)
            return x
        if mod.function is not None:
            return self.function(mod, args, call)
        scope = _ModuleScope(self, mod, call, dict(zip(mod.inputs, args)))
        low = Lowerer(self.b, scope)
        assigns, returned = simple_program(mod.forward)
        for a in assigns:
            scope.assigning = a.name
            value = low.eval(a.value)
            scope.assigning = None
            scope.assign(a.name, value, a.loc)
        result = low.eval(returned)
        if isinstance(result, Exact) or not self.b.is_tensor(result):
            raise ProblemError(returned.loc, f"the forward of '{mod.label}' must return one tensor "
                                             "(tuples and plain numbers are not supported as outputs)")
        return result

    def function(self, mod: Module, args: list[int], call: Call) -> int:
        """A custom autograd.Function: the whole forward is one node, ``<Name>Backward``."""
        params = [self.param_vars[p.name] for p in mod.params]
        shape = function_output_shape(mod, [self.g.vars[a].shape for a in args])
        spec = FunctionSpec(mod.function, mod, tuple(mod.inputs) + tuple(p.name.rsplit(".", 1)[-1] for p in mod.params),
                            shape)
        return self.b.emit("function", list(args) + params, spec, mod.function.loc, [shape],
                           f"{mod.function.name}Backward")[0]


def function_output_shape(mod: Module, arg_shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    """Run a Function's forward on zeros of the right shapes to learn its output shape."""
    env = {n: Exact.zeros(s) for n, s in zip(mod.inputs, arg_shapes)}
    env.update({p.name.rsplit(".", 1)[-1]: Exact.zeros(p.value.shape) for p in mod.params})
    return evaluate_program(mod, env)[0].shape


def evaluate_program(mod: Module, env: dict):
    """Evaluate a custom forward exactly, building no graph (as inside autograd.Function.forward).

    Returns the output and the forward's local names."""
    scope = _PureScope(mod, env)
    low = Lowerer(ValueBackend(), scope)
    assigns, returned = simple_program(mod.forward)
    for a in assigns:
        scope.local[a.name] = low.eval(a.value)
    out = low.eval(returned)
    if not isinstance(out, Exact):
        raise ProblemError(returned.loc, f"the forward of '{mod.label}' must return one tensor")
    return out, scope.local


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _suggest(word: str, options) -> str:
    close = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


def _unknown_function(name: str, options, where: str = "") -> str:
    """A name PyTorch has is "not modelled yet", never a typo of another function; a typo is
    compared with what can be called here (functions and child modules) only."""
    if torch_names.is_function(name):
        return f"'{name}' is a PyTorch function adjoint does not model yet"
    return f"unknown function '{name}'{where}{_suggest(name, options)}"


# ----------------------------------------------------------------------------- scopes

class _ModuleScope:
    """Names inside a module's forward: locals, arguments, own params, targets, problem inputs."""

    def __init__(self, tracer: _Tracer, mod: Module, call: Call, args: dict[str, int]):
        self.t = tracer
        self.mod = mod
        self.record = call
        self.args = args
        self.local: dict[str, int] = {}
        self.assigning: str | None = None

    def tensor_name(self, name: str) -> str:
        return f"{self.record.callid}.{name}" if self.mod.path else name

    def assign(self, name: str, value, loc: Loc) -> None:
        if name in self.local or name in self.args or self.mod.param(name) or self.mod.child(name):
            raise ProblemError(loc, f"'{name}' is already a name in the forward of '{self.mod.label}'; "
                                    "two things with one name are an error (pick a new name)")
        if name in UNARY_FUNCTIONS:
            raise ProblemError(loc, f"'{name}' is a function name; pick another name for the tensor")
        if isinstance(value, tuple) or value is None:
            raise ProblemError(loc, f"'{name}' must be a tensor (tuples are only hook arguments)")
        if isinstance(value, Exact):
            raise ProblemError(loc, f"'{name}' would be a constant tensor; write the number inline")
        if not self.t.b.is_tensor(value):
            self.local[name] = value  # a plain number: Python keeps it as a number
            return
        self.local[name] = value
        self.t.bind(self.tensor_name(name), value, loc)

    def lookup(self, name: str, loc: Loc):
        if name in self.local:
            return self.local[name]
        if name in self.args:
            return self.args[name]
        p = self.mod.param(name)
        if p is not None:
            return self.t.param_vars[p.name]
        if self.mod.child(name) is not None:
            raise ProblemError(loc, f"'{name}' is a module; call it, as in {name}(x)")
        if name in self.t.globals:
            return self.t.globals[name]
        if name == self.assigning:
            raise ProblemError(loc, f"'{name}' is used in its own definition; a forward line may only use names "
                                    "defined before it")
        if self.mod.forward is not None and name in [a.name for a in simple_program(self.mod.forward)[0]]:
            raise ProblemError(loc, f"'{name}' is used before the line that assigns it; move that line up")
        options = list(dict.fromkeys(list(self.local) + list(self.args) +
                                     [p.name.rsplit(".", 1)[-1] for p in self.mod.params] + list(self.t.globals)))
        raise ProblemError(loc, f"unknown name '{name}' in the forward of '{self.mod.label}'{_suggest(name, options)}; "
                                f"known here: {', '.join(options) or 'nothing'}")

    def call(self, name: str, args: list, loc: Loc):
        child = self.mod.child(name)
        if child is None:
            options = list(UNARY_FUNCTIONS) + [c.name for c in self.mod.children]
            known = f"; allowed: {', '.join(UNARY_FUNCTIONS)}" + (
                f" and the child modules {', '.join(c.name for c in self.mod.children)}" if self.mod.children else "")
            raise ProblemError(loc, _unknown_function(name, options) + known)
        if len(args) != len(child.inputs):
            raise ProblemError(loc, f"module '{child.label}' takes {len(child.inputs)} input(s) "
                                    f"({', '.join(child.inputs)}), got {len(args)}")
        for a in args:
            if not self.t.b.is_tensor(a) or isinstance(a, Exact):
                raise ProblemError(loc, f"module '{child.label}' must be called with tensors")
        return self.t.call_module(child, list(args), loc)


class _LossScope:
    def __init__(self, tracer: _Tracer):
        self.t = tracer

    def lookup(self, name: str, loc: Loc):
        if name in self.t.g.names:
            return self.t.g.names[name]
        raise ProblemError(loc, f"unknown name '{name}' in the loss{_suggest(name, self.t.g.names)}; the loss can use "
                                f"y (the model output), inputs, targets and other tensor names")

    def call(self, name: str, args: list, loc: Loc):
        raise ProblemError(loc, _unknown_function(name, UNARY_FUNCTIONS, " in the loss") + "; allowed: "
                                f"{', '.join(UNARY_FUNCTIONS)} (modules are called from forwards)")


class _PureScope:
    def __init__(self, mod: Module, env: dict):
        self.mod = mod
        self.env = env
        self.local: dict = {}

    def lookup(self, name: str, loc: Loc):
        if name in self.local:
            return self.local[name]
        if name in self.env:
            return self.env[name]
        raise ProblemError(loc, f"unknown name '{name}' in the forward of '{self.mod.label}'"
                                f"{_suggest(name, list(self.env) + list(self.local))}")

    def call(self, name: str, args: list, loc: Loc):
        raise ProblemError(loc, f"unknown function '{name}'; a custom Function's forward may only call "
                                f"{', '.join(UNARY_FUNCTIONS)}")
