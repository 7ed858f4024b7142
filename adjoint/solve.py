"""``solve``: trace, run forward and backward exactly, and assemble the Prediction."""

from __future__ import annotations

import sympy

from . import exact as E
from .errors import ProblemError
from .exact import Exact
from .expr import simple_program
from .syntax import to_source
from .forward import Forward, evaluate
from .graph import Call, Graph, GraphBuilder, trace
from .lower import Lowerer
from .ops import RULES
from .prediction import Boundary, FunctionCheck, HookRecord, Prediction, VariantPrediction
from .problem import OUTPUT, ROOT, Problem, Variant
from .reverse import Backward, expandable, function_vjp, pure_vjp, run_backward


def solve_problem(problem: Problem, variant: str | None = None, numeric: bool = False) -> Prediction:
    symbols = None
    if numeric:
        missing = [s for s in problem.free_symbols() if s not in problem.symbols]
        if missing:
            where = next(d.value.loc for d in problem.all_tensors() if missing[0] in d.value.symbols)
            raise ProblemError(where, f"free symbol '{missing[0]}' has no value, and numbers are needed here "
                                      f"(verify, solve --numeric); add symbols: {{{missing[0]}: 0.5}} or another "
                                      "number")
        symbols = problem.symbols
    chosen = [problem.variant(variant)] if variant else list(problem.variants)
    return Prediction(problem, [solve_variant(problem, v, symbols) for v in chosen], numeric)


def solve_variant(problem: Problem, variant: Variant, symbols: dict | None = None) -> VariantPrediction:
    graph = trace(problem, variant)
    fwd = evaluate(graph, symbols, problem.dtype)
    bwd = run_backward(graph, fwd, symbols)
    return _assemble(problem, variant, graph, fwd, bwd)


# ----------------------------------------------------------------------------- assembly

def _assemble(problem: Problem, variant: Variant, g: Graph, fwd: Forward, bwd: Backward) -> VariantPrediction:
    values = {name: fwd.values[vid] for name, vid in g.names.items()}
    loss = fwd.values[g.names["loss"]] if "loss" in g.names else None
    grads: dict[str, Exact | None] = {}
    for vid, decl in g.decls.items():
        if decl.requires_grad:
            grads[decl.name] = bwd.grads.get(vid)
    for vid, names in bwd.retained.items():
        for name in names:
            grads[name] = bwd.grads.get(vid)
    returned = None
    if g.method == "grad":
        returned = {name: value for (name, _), value in zip(g.wrt, bwd.captured)}
    calls_per_module: dict[str, int] = {}
    for c in g.calls:
        calls_per_module[c.path] = calls_per_module.get(c.path, 0) + 1
    hook_calls = _forward_calls(g, fwd, calls_per_module) + _backward_calls(g, bwd, calls_per_module)
    notes = [f"{_where(g, eid)}: {note}" for eid, note in fwd.notes]
    notes += _variant_notes(g, bwd)
    symbolic = any(v.is_symbolic() for v in values.values())
    return VariantPrediction(
        name=variant.name, method=g.method, root=g.root_name, loss=loss, values=values,
        boundaries=_boundaries(g, fwd, bwd), grads=grads, returned=returned, hook_calls=hook_calls, notes=notes,
        functions=_function_checks(g, fwd), node_order=bwd.order, symbolic=symbolic, graph=g, forward=fwd,
        backward=bwd, carried={name: bwd.seen.get(vid) for name, vid in g.names.items()})


def _where(g: Graph, eid: int) -> str:
    eqn = g.eqns[eid]
    name = eqn.node.name if eqn.node else eqn.prim
    return f"{name} at {eqn.loc}" if eqn.loc else name


def _forward_calls(g: Graph, fwd: Forward, per_module: dict) -> list[HookRecord]:
    out = []
    for ev in g.forward_events:
        call = g.calls[ev.call]
        hook = ev.reg.hook
        args = {"input": tuple(_val(fwd, x) for x in ev.inputs)}
        if ev.output is not None:
            args["output"] = fwd.values[ev.output]
        returned = _val(fwd, ev.returned)
        why = []
        if returned is not None:
            why.append("the returned value replaces the module's " + ("inputs" if hook.kind == "forward_pre"
                                                                        else "output") + "; its ops join the graph")
        out.append(HookRecord(hook.index, hook.label, hook.kind, "module", hook.target, call.k,
                              per_module[call.path], "forward", None, args, returned, why))
    return out


def _val(fwd: Forward, x):
    if x is None:
        return None
    if isinstance(x, tuple):
        return tuple(_val(fwd, i) for i in x)
    if isinstance(x, Exact):
        return x
    if isinstance(x, int):
        return fwd.values[x]
    return Exact.scalar(E.q(x))  # a plain number


def _backward_calls(g: Graph, bwd: Backward, per_module: dict) -> list[HookRecord]:
    out = []
    for hc in bwd.calls:
        hook = hc.hook
        k = hc.call.k if hc.call is not None else None
        count = per_module.get(hc.call.path, 1) if hc.call is not None else 1
        out.append(HookRecord(hook.index, hook.label, hook.kind, hook.on, hook.target, k, count, "backward",
                              hc.node, hc.args, hc.returned, _why(g, hc)))
    return out


def _why(g: Graph, hc) -> list[str]:
    hook = hc.hook
    why = []
    call: Call | None = hc.call
    if hook.kind == "backward" and call is not None:
        nodes = [g.eqns[i].node.name for i in range(call.body_start, call.end) if g.eqns[i].node is not None]
        node = g.eqns[call.legacy_node]
        edges = ", ".join(_describe_var(g, v) for v in node.node.edges)
        msg = (f"legacy register_backward_hook is a post-hook on the output's grad_fn {node.node.name}; grad_input "
               f"are that node's gradients w.r.t. its own inputs ({edges}), not the module's inputs")
        if len(nodes) > 1:
            msg += f"; '{call.path}' ran {len(nodes)} nodes ({', '.join(nodes)}) and only the last is hooked"
        why.append(msg)
    if hook.kind == "full_backward" and call is not None:
        if call.bhf_in is None:
            why.append("no input of the module requires grad: the hook fires as soon as grad_output is known, "
                       "with every grad_input None")
        else:
            zeros = [call.module.inputs[i] for i, a in enumerate(call.args) if not g.vars[a].requires_grad]
            if zeros:
                why.append(f"input(s) {', '.join(zeros)} do not require grad: PyTorch hands a zero tensor there "
                           "(BackwardHookFunction materializes the missing gradient)")
        if hook.remove == "before_backward":
            why.append("removed before backward yet it fires: the module captured its hook list when it ran")
    if hook.kind == "full_backward_pre" and hc.returned is not None:
        why.append("the returned grad_output flows into the module: its inner gradients (parameters included) "
                   "change too")
    if hook.on == "tensor" and hc.returned is not None:
        why.append("the returned tensor replaces the gradient for later hooks, retain_grad and the node")
    if hook.on == "tensor" and hc.args.get("grad") is None:
        why.append("the gradient is undefined here (an earlier hook returned None for it)")
    if hook.kind == "post" and hc.returned is not None:
        why.append("the returned tuple replaces the node's grad_inputs, which flow upstream")
    if hook.does and hook.returns is None:
        why.append("the hook rebinds a local name but returns nothing: PyTorch ignores the change")
    return why


def _describe_var(g: Graph, vid: int | None) -> str:
    if vid is None:
        return "a constant (None)"
    name = g.name_of(vid)
    if name:
        return name
    var = g.vars[vid]
    if var.producer is not None:
        return f"output of {g.eqns[var.producer].node.name}"
    return "a tensor"


def _variant_notes(g: Graph, bwd: Backward) -> list[str]:
    notes = []
    if g.method == "grad":
        notes.append("torch.autograd.grad runs only the nodes between the root and the inputs, does not run the "
                     "inputs' own grad_fn (so their node hooks stay silent) and leaves .grad untouched")
    for vid, names in bwd.retained.items():
        if vid in g.tensor_hooks:
            notes.append(f"{names[0]}.grad is taken after all of its tensor hooks ran (retain_grad runs last)")
    return notes


def _boundaries(g: Graph, fwd: Forward, bwd: Backward) -> list[Boundary]:
    out = []
    depth_of: dict[int, int] = {}
    for call in g.calls:
        depth = 0 if call.parent is None else depth_of[call.parent] + 1
        depth_of[call.id] = depth
        gout = bwd.seen.get(call.out) if g.vars[call.out].requires_grad else None
        if gout is not None:
            start = call.bhf_in if call.bhf_in is not None else call.body_start
            gin = tuple(pure_vjp(g, fwd, range(start, call.end), call.out, gout, call.args))
            if call.module.type == "Identity":
                gin = (gout if g.vars[call.args[0]].requires_grad else None,)
        else:
            gin = tuple(None for _ in call.args)
        nodes = [g.eqns[i].node.name for i in range(call.body_start, call.end) if g.eqns[i].node is not None]
        names = tuple(_describe_var(g, a) for a in call.args)
        out.append(Boundary(call.callid, call.path, call.k, call.module.type or "custom", call.module.inputs, names,
                            OUTPUT if call.path == ROOT else call.callid, nodes, (gout,), gin, depth))
    return out


# ----------------------------------------------------------------------------- custom Functions

def _function_checks(g: Graph, fwd: Forward) -> list[FunctionCheck]:
    """Compare each declared backward formula with the true vector-Jacobian product."""
    out = []
    for eqn in g.eqns:
        if eqn.prim != "function":
            continue
        spec = eqn.params
        call = g.calls[eqn.call]
        values = [fwd.of(i) for i in eqn.ins]
        out_shape = fwd.values[eqn.outs[0]].shape
        cot = Exact.of([sympy.Symbol(f"g{i}", real=True) for i in range(_numel(out_shape))], out_shape)
        declared = function_vjp(eqn, values, cot)
        true = _true_vjp(spec, values, cot)
        for (slot, formula), d, t in zip(spec.decl.grads, declared, true):
            if d is not None and t is not None and d.shape != t.shape and expandable(t.shape, d.shape):
                d = E.sum_to(d, t.shape)  # autograd's validate_outputs does this reduction too
            d = d if d is not None else (Exact.zeros(t.shape) if t is not None else None)
            t = t if t is not None else (Exact.zeros(d.shape) if d is not None else None)
            matches = d is None or (d.shape == t.shape and d.equals(t))
            text = to_source(formula) if formula is not None else "None"
            out.append(FunctionCheck(call.callid, spec.decl.name, slot, text, _fmt(t), matches))
    return out


def _fmt(v) -> str:
    return "None" if v is None else str(v.strings())


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _true_vjp(spec, values: list[Exact], cot: Exact) -> list[Exact | None]:
    """Trace the Function's forward with grad enabled on every input and pull ``cot`` back."""
    mini = Graph(None, None)
    builder = GraphBuilder(mini)
    leaves = [builder.new_var(v.shape, True, leaf=True) for v in values]
    env = dict(zip(spec.slots, leaves))

    class Scope:
        def lookup(self, name, loc):
            if name in env:
                return env[name]
            raise ProblemError(loc, f"unknown name '{name}'")

        def call(self, name, args, loc):
            raise ProblemError(loc, f"unknown function '{name}'")

    low = Lowerer(builder, Scope())
    assigns, returned = simple_program(spec.module.forward)
    for a in assigns:
        env[a.name] = low.eval(a.value)
    result = low.eval(returned)
    mfwd = Forward([None] * len(mini.vars))
    for vid, v in zip(leaves, values):
        mfwd.values[vid] = v
    for e in mini.eqns:
        mfwd.values[e.outs[0]] = RULES[e.prim].forward([mfwd.of(i) for i in e.ins], e.params)
    return pure_vjp(mini, mfwd, range(len(mini.eqns)), result, cot, tuple(leaves))
