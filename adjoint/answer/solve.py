"""``solve``: run every variant in the runtime and assemble the Prediction.

Three answer modes run the one engine on different values (:data:`MODES`): ``exact`` (exact
rationals, certified reals, closed forms: the default), ``float64`` (numpy doubles, for
models too large for exact arithmetic) and ``structure`` (shapes only: nodes, edges, hook
calls, None versus zeros; every value field null). A ``progress`` callable, when given, is
told ``progress(stage, done, total)`` as the work goes (stage ``forward``, ``backward`` or
``assemble``; ``total`` None where unknown); the CLI draws a bar from it.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager, nullcontext

from adjoint.values.backends.exact import ExactBackend
from adjoint.values.backends.float64 import Float64Backend, blas_limited
from adjoint.values.backends.structure import StructureBackend
from adjoint.format.errors import ProblemError
from adjoint.engine.forward import Call
from adjoint.engine.function_checks import check_functions
from adjoint.engine.graph import Node, Tensor, Typed
from adjoint.engine.adjoints import boundaries_of, seen_at
from adjoint.engine.complex_grad import COMPLEX_DTYPES
from adjoint.engine.observer import observe, with_observed
from adjoint.engine.passes import VariantRun, root_name, run_variant
from adjoint.answer.prediction import RanksPrediction
from adjoint.answer.prediction import Boundary, ErrorRecord, HookRecord, PassRecord, Prediction, VariantPrediction
from adjoint.format.problem import Problem, Variant


#: answer mode -> value backend class
MODES = {"exact": ExactBackend, "float64": Float64Backend, "structure": StructureBackend}


def with_complex(problem: Problem, backend):
    """``backend``, extended to complex values when the file declares a complex tensor
    (:func:`adjoint.values.backends.complex.for_problem`); the complex backend is imported only
    then, so a file of real tensors never loads it."""
    if not any(d.dtype in COMPLEX_DTYPES for d in problem.all_tensors()):
        return backend
    from adjoint.values.backends import complex as complex_values
    return complex_values.for_problem(problem, backend)


def solve_problem(problem: Problem, variant: str | None = None, numeric: bool = False, mode: str = "exact",
                  progress=None) -> Prediction:
    symbols = None
    if mode == "float64" and problem.free_symbols():
        numeric = True  # doubles need numbers for every symbol
    if numeric:
        missing = [s for s in problem.free_symbols() if s not in problem.symbols]
        if missing:
            where = next(d.value.loc for d in problem.all_tensors() if missing[0] in d.value.symbols)
            need = "--float64 computes in doubles" if mode == "float64" else "verify, solve --numeric"
            raise ProblemError(where, f"free symbol '{missing[0]}' has no value, and numbers are needed here "
                                      f"({need}); add symbols: {{{missing[0]}: 0.5}} or another number")
        symbols = problem.symbols
    chosen = [problem.variant(variant)] if variant else list(problem.variants)
    if problem.distributed is not None:   # DistributedDataParallel: one answer per rank (adjoint.engine.distributed)
        def make_backend():
            if mode == "exact":
                backend = ExactBackend(problem.dtype, symbols, symbols is None and bool(problem.free_symbols()))
            else:
                backend = MODES[mode](problem.dtype, symbols)
            return with_complex(problem, backend)
        with _cyclic_gc_paused():
            return Prediction(problem, solve_distributed(problem, variant, make_backend, progress), numeric, mode)
    with _cyclic_gc_paused(), (blas_limited() if mode == "float64" else nullcontext()):
        return Prediction(problem, [solve_variant(problem, v, symbols, mode, progress) for v in chosen], numeric,
                          mode)


@contextmanager
def _cyclic_gc_paused():
    """Python's cyclic garbage collector paused while a solve runs (and restored as it was).
    A solve builds a large graph of live objects (tensors, nodes, saved values) that nothing
    frees before the prediction is made; each collection walks it all again, which cost a
    quarter of the solve on a deep chain. Reference counting still frees what dies young."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def solve_variant(problem: Problem, variant: Variant, symbols: dict | None = None, mode: str = "exact",
                  progress=None) -> VariantPrediction:
    def make_backend():
        if mode == "exact":
            backend = ExactBackend(problem.dtype, symbols, symbols is None and bool(problem.free_symbols()))
        else:
            backend = MODES[mode](problem.dtype, symbols)
        return with_complex(problem, backend)
    return assemble(run_variant(problem, variant, make_backend(), progress), progress, make_backend)


# ----------------------------------------------------------------------------- assembly

def derive_variant(prediction: VariantPrediction):
    """``VariantPrediction.derivation``'s deriver: :mod:`adjoint.derivation.derive`, imported on
    first use (a plain solve never needs it; it is a tenth of the start-up's imports)."""
    from adjoint.derivation.derive import derive_variant as derive

    return derive(prediction)


def assemble(run: VariantRun, progress=None, make_backend=None) -> VariantPrediction:
    """The Prediction of a run (any backend: a value the mode does not have is None in JSON).
    ``make_backend``: makes a fresh backend of the run's mode, for the watched run that reads the
    adjoints of calls the graph does not mark (:mod:`adjoint.engine.observer`); without it those
    keep what the graph gives."""
    producers = _node_names(run)
    calls = _call_counts(run)
    hook_calls = [_record(run, rec, producers, calls) for rec in run.rt.log]
    if run.error is not None:
        err = run.error
        return VariantPrediction(name=run.variant.name, method="backward", root=root_name(run.problem), loss=None,
                                 values={}, boundaries=[], grads={}, returned=None, hook_calls=hook_calls, notes=[],
                                 functions=[], node_order=[], symbolic=False, run=run,
                                 error=ErrorRecord(err.type, err.message, err.during,
                                                   len(hook_calls) - 1 if hook_calls else None, err.waits,
                                                   getattr(err, "hook", None)),
                                 deriver=derive_variant, warnings=list(run.rt.warnings),
                                 registered=dict(run.registered), reads=list(run.reads))
    fwd, last = run.forward, run.last_pass
    values = dict(fwd.values)
    loss = fwd.values["loss"] if fwd.loss is not None else None
    returned = _returned(last) if last is not None else None
    notes = [f"{name} at {loc}: {note}" if loc else f"{name}: {note}" for name, loc, note in fwd.notes]
    notes += _variant_notes(run)
    notes += run.rt.B.notes()
    symbolic = any(run.rt.B.is_symbolic(v) for v in values.values() if not isinstance(v, Typed))
    passes = None
    if run.stepped:
        passes = [PassRecord([hook_calls[i] for i in p.calls], dict(p.grads), _returned(p), dict(p.leaf_values))
                  for p in run.passes]
    return VariantPrediction(
        name=run.variant.name, method=last.request.method if last else "backward", root=root_name(run.problem),
        loss=loss, values=values, boundaries=_boundaries(run, progress, make_backend), grads=run.grads(), returned=returned,
        hook_calls=hook_calls, notes=notes, functions=check_functions(run) if run.rt.B.name == "exact" else [],
        node_order=last.result.order if last else [], symbolic=symbolic,
        kinks=[note for _, _, note in fwd.notes], run=run,
        carried={name: seen_at(last.result, t) if last else None for name, t in fwd.names.items()}, passes=passes,
        deriver=derive_variant, warnings=list(run.rt.warnings), leaf_values=run.rt.hooks_runner.leaf_values(),
        registered=dict(run.registered), reads=list(run.reads),
        earlier_losses=[f.values["loss"] for f in run.forwards[:-1] if f.loss is not None],
        value_meta=dict(fwd.meta))


def _returned(p) -> dict | None:
    if p.request.method != "grad":
        return None
    return {name: value for (name, _, _), value in zip(p.request.inputs, p.result.captured)}


def _node_names(run: VariantRun) -> dict:
    """Node -> the name of the tensor it produced (the first name bound to one), for pack/unpack."""
    out: dict = {}
    last = getattr(run.model, "last_pass", None)   # a forward that raised left names but no ForwardResult
    passes = list(run.forwards) + ([last] if last is not None and all(f.names is not last.names
                                                                      for f in run.forwards) else [])
    for f in passes:
        for name, t in f.names.items():
            if isinstance(t, Tensor) and t.grad_fn is not None:
                out.setdefault(id(t.grad_fn), name)
    for name, t in (getattr(run, "made", None) or {}).items():   # as: names (a create_graph gradient's node)
        if isinstance(t, Tensor) and t.grad_fn is not None:
            out.setdefault(id(t.grad_fn), name)
    return out


def _call_counts(run: VariantRun) -> dict:
    """id(call) -> how many calls of its module the forward it ran in made (one pass over the calls)."""
    out: dict = {}
    for f in run.forwards:
        per_path: dict = {}
        for c in f.calls:
            per_path[c.path] = per_path.get(c.path, 0) + 1
        for c in f.calls:
            out.setdefault(id(c), per_path[c.path])
    return out


def _record(run: VariantRun, rec, producers: dict, calls: dict) -> HookRecord:
    hook = rec.hook
    call: Call | None = rec.call
    k = call.k if call is not None else None
    count = 1
    if call is not None:
        count = calls.get(id(call.recomputes if call.recomputes is not None else call))
        if count is None:
            # a forward that raised is in no ForwardResult: its calls so far (the pass in progress) count
            last = getattr(run.model, "last_pass", None)
            so_far = last.calls if last is not None else []
            count = sum(1 for c in so_far if c.path == call.path) if any(c is call for c in so_far) \
                else max(call.k or 1, 1)
    node = rec.node.name if rec.node is not None else None
    if rec.kind in ("pack", "unpack"):
        target = producers.get(id(rec.node)) if rec.node is not None else None
    elif hook.on == "global":
        target = call.path if call is not None else None
    elif hook.on == "multi_grad":
        target = ",".join(hook.tensors)
    else:
        target = hook.target
    why = _why_forward(rec) if rec.phase == "forward" else _why(run, rec)
    return HookRecord(hook.index, hook.label, rec.kind, hook.on, target, k, count, rec.phase, node, rec.args,
                      rec.returned, why, raised=rec.raised, is_global=rec.is_global, silenced=rec.silenced, wrote=rec.wrote,
                      recomputed=rec.recomputed, reentrant=rec.reentrant,
                      declared_raise=hook.raises_type if getattr(hook, "raises", None) is not None else None)


def _why_forward(rec) -> list[str]:
    if rec.kind not in ("forward", "forward_pre"):  # a pack hook's return is what it stores
        return []
    why = _written(rec)
    if rec.returned is not None:
        what = "inputs" if rec.hook.kind == "forward_pre" else "output"
        why.insert(0, f"the returned value replaces the module's {what}; its ops join the graph")
    return why


def _written(rec) -> list[str]:
    """What a hook's body wrote in place, besides a gradient it was handed (any phase)."""
    why = []
    for what in rec.wrote:
        if what.startswith("leaf "):
            why.append(f"the hook writes the {what} in place: its value changes from now on (later forwards use it; "
                       "a node that saved it can no longer run)")
        elif what.startswith("argument "):
            why.append(f"the hook writes its {what[len('argument '):]} in place: that is the forward's own tensor, "
                       "so everything computed from it afterwards uses the new value (a node that saved it and has "
                       "not run yet can no longer run)")
        elif what.startswith("stored "):
            why.append(f"the hook stores into {what[len('stored '):]}: " + (
                "that dict is the one PyTorch calls the forward with, so the forward takes the stored value, "
                "whatever the hook returns" if rec.kind == "forward_pre" else
                "the forward has run already, so nothing it computed changes"))
        elif what.startswith("tensor "):
            why.append(f"the hook writes {what[len('tensor '):]} (a tensor of the forward it names) in place: its "
                       "version moves, so a node that saved it and has not run yet can no longer run; nodes that "
                       "ran already used the old value")
        elif what.endswith("(assigned)"):
            why.append(f"the hook sets {what[:-len(' (assigned)')]}: it is another tensor from now on")
        elif what.endswith(".grad"):
            why.append(f"the hook writes {what} in place: the accumulated gradient changes")
        elif what.startswith("requires_grad "):
            name, _, flag = what[len("requires_grad "):].partition("=")
            why.append(f"the hook sets {name}.requires_grad to {flag}" + (
                ": AccumulateGrad skips a leaf that no longer requires grad, so its .grad stays as it is (its "
                "post_accumulate_grad hooks still run)" if flag == "False" else
                ": the graph already recorded stays as it is (only later forwards see the change)"))
    return why


def _why(run: VariantRun, rec) -> list[str]:
    hook = rec.hook
    why = []
    call: Call | None = rec.call
    if hook.kind == "backward" and call is not None:
        nodes = [n.name for n in call.body_nodes(run.rt)]
        node = call.legacy_node
        edges = ", ".join(_describe_input(node, i) for i in range(len(node.edges)))
        args = {id(a) for a in call.args if isinstance(a, Tensor)}
        own = [node.inputs[i] for i, e in enumerate(node.edges) if e is not None]
        first = "first " if isinstance(call.out, tuple) else ""
        msg = (f"legacy register_backward_hook is a post-hook on the {first}output's grad_fn {node.name}; grad_input "
               f"are that node's gradients w.r.t. its own inputs ({edges})")
        if len(nodes) == 1 and own and all(id(t) in args for t in own):
            msg += ", which here are the module's inputs: the module ran that one node on them"
        else:
            msg += ", not the module's inputs"
        if len(nodes) > 1:
            msg += (f"; '{call.path}' ran {len(nodes)} nodes ({', '.join(nodes)}) and only {node.name}, the grad_fn "
                    f"of its {first}output, is hooked")
        why.append(msg)
    if hook.kind == "full_backward" and call is not None:
        if call.in_node is None:
            why.append("no input of the module requires grad: the hook fires as soon as grad_output is known, "
                       "with every grad_input None")
        else:
            zeros = [call.module.inputs[i] if i < len(call.module.inputs) else f"#{i}"
                     for i, a in enumerate(call.args) if isinstance(a, Tensor) and not a.requires_grad]
            if zeros:
                which = f"input {zeros[0]} does not" if len(zeros) == 1 else f"inputs {', '.join(zeros)} do not"
                why.append(f"{which} require grad: PyTorch hands a zero tensor there "
                           "(BackwardHookFunction materializes the missing gradient)")
        if hook.remove == "before_backward":
            why.append("removed before backward yet it fires: the module captured its hook list when it ran")
    if hook.kind == "full_backward_pre" and rec.returned is not None:
        why.append("the returned grad_output flows into the module: its inner gradients (parameters included) "
                   "change too")
    if hook.on == "tensor" and rec.returned is not None:
        why.append("the returned tensor replaces the gradient for later hooks, retain_grad and the node")
    if hook.on == "tensor" and rec.args.get("grad", 0) is None:
        node = rec.node
        if node is not None and len(getattr(node, "outputs", ()) or ()) > 1:
            why.append(f"the gradient is undefined here: {node.name} has {len(node.outputs)} outputs and runs "
                       "because another of them got a gradient; none reached this one, and PyTorch hands its "
                       "hooks None, not zeros")
        else:
            why.append("the gradient is undefined here: what reached this tensor was None (a hook downstream "
                       "replaced its gradient with None)")
    if hook.kind == "post" and rec.returned is not None:
        why.append("the returned tuple replaces the node's grad_inputs, which flow upstream")
    if "gradient" in rec.wrote:
        why.append("the hook writes in place a gradient it was handed: that is the engine's own tensor, so the "
                   "written value flows on (to later hooks, the node and .grad, and to every gradient that is the "
                   "same tensor), although the hook returns " + ("a value" if rec.returned is not None else "None"))
    why += _written(rec)
    if rec.raised and getattr(hook, "raises", None) is None:
        why.append("its body raised: the error leaves the hook, and PyTorch's backward or forward with it")
    elif not rec.wrote and hook.does and hook.returns is None and not rec.raised:
        why.append("the hook only rebinds local names and returns nothing: nothing it computed flows on")
    return why


def _describe_input(node: Node, i: int) -> str:
    if node.edges[i] is None:
        return "a constant (None)"
    t = node.inputs[i]
    if t.name:
        return t.name
    if t.grad_fn is not None:
        return f"output of {t.grad_fn.name}"
    return "a tensor"


def _variant_notes(run: VariantRun) -> list[str]:
    notes = []
    if run.last_pass is not None and run.last_pass.request.method == "grad":
        notes.append("torch.autograd.grad runs only the nodes between the root and the inputs, does not run the "
                     "inputs' own grad_fn (so their node hooks stay silent) and leaves .grad untouched")
    for t, names in run.retained:
        if t.backward_hooks:
            notes.append(f"{names[0]}.grad is taken after all of its tensor hooks ran (retain_grad runs last)")
    return notes


def _boundaries(run: VariantRun, progress=None, make_backend=None) -> list[Boundary]:
    last = run.last_pass
    if last is None:
        return []
    # a second-order pass (create_graph, roots:) reaches the forward's nodes from its own graph too:
    # what it passes an input is not derived from the module's grad_output alone (the J^T is kept)
    passed = getattr(last.request, "second", None) is None
    found = boundaries_of(run.rt, last.forward, last.result, progress, passed)
    if make_backend is not None:
        run.observed = observe(run, make_backend, found)
    return with_observed(found, run.observed)


def solve_distributed(problem, variant: str | None, backend_class, progress=None) -> list[RanksPrediction]:
    """Every rank of a distributed file run in lockstep (adjoint.engine.distributed), each answered as
    an ordinary variant."""
    chosen = [variant] if variant else [v.name for v in problem.variants]
    out = []
    for name in chosen:
        problem.variant(name)   # the ProblemError naming the variants when there is none of that name
        if problem.distributed.wrap == "fully_shard":
            from adjoint.engine.fsdp import run_fsdp_ranks
            runs = run_fsdp_ranks(problem, name, backend_class)
        else:
            from adjoint.engine.distributed import run_ranks
            runs = run_ranks(problem, name, backend_class)
        out.append(RanksPrediction(name, [assemble(run, progress) for run in runs]))
    return out
