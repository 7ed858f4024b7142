"""Whether a custom ``autograd.Function``'s declared backward is its true vector-Jacobian product:
each declared formula against J^T of the forward run with grad enabled, exactly, for a symbolic
incoming gradient (``g0, g1, ...``)."""

from __future__ import annotations

from dataclasses import dataclass

from adjoint.format.syntax import to_source
from adjoint.engine.adjoints import pure_vjp
from adjoint.engine.autograd_function import _PureScope, declared_vjp, slots_of
from adjoint.engine.interpreter import Interp
from adjoint.engine.reverse import expandable
from adjoint.engine.runtime import Runtime


@dataclass
class FunctionCheck:
    """Whether a custom Function's backward matches the true vector-Jacobian product."""

    callid: str
    name: str
    slot: str
    declared: str
    true: str
    matches: bool


def check_functions(run) -> list:
    """Compare each Function's declared backward formulas with the true vector-Jacobian product,
    exactly, for every incoming gradient (a symbolic cotangent ``g0, g1, ...``)."""
    rt = run.rt
    out = []
    for node in rt.nodes:
        if node.kind != "function":
            continue
        mod = node.params
        call = node.module_call
        values = list(node.input_values)
        cots = [rt.B.symbols_like(o[0], f"g{k}_" if len(node.outputs) > 1 else "g") if o is not None else None
                for k, o in enumerate(node.outputs)]
        declared = declared_vjp(rt, mod, values, cots if len(cots) > 1 else cots[0])
        true = _true_vjp(rt, mod, values, cots)
        for (slot, formula), d, t, v in zip(mod.function.grads, declared, true, values):
            if not rt.B.is_value(v):   # a Python argument: no gradient (tensor_slots checks it is None)
                continue
            d, t = _comparable(rt.B, d, t)
            matches = d is None or (rt.B.shape(d) == rt.B.shape(t) and rt.B.equals(d, t))
            text = to_source(formula) if formula is not None else "None"
            out.append(FunctionCheck(call.callid, mod.function.name, slot, text,
                                     "None" if t is None else str(rt.B.strings(t)), matches))
    return out


def _comparable(B, d, t):
    if d is not None and t is not None and B.shape(d) != B.shape(t) and expandable(B.shape(t), B.shape(d)):
        d = B.sum_to(d, B.shape(t))  # autograd's validate_outputs does this reduction too
    d = d if d is not None else (B.zeros(B.shape(t)) if t is not None else None)
    t = t if t is not None else (B.zeros(B.shape(d)) if d is not None else None)
    return d, t


def _true_vjp(rt, mod, values: list, cots: list) -> list:
    """Run the Function's forward with grad enabled on every input and pull ``cots`` back."""
    mini = Runtime(rt.B, rt.dtype)
    mini.quiet = 1
    leaves = [mini.leaf(v, True) if rt.B.is_value(v) else v for v in values]
    dirty = {name for name, _ in mod.function.dirty}   # written in place by the forward: a clone of the leaf
    ins = [mini.apply("clone", [t], None, mod.function.loc) if n in dirty else t
           for n, t in zip(slots_of(mod), leaves)]
    scope = _PureScope(mod, dict(zip(slots_of(mod), ins)))
    result = Interp(mini, scope).run(mod.forward)
    results = result if isinstance(result, tuple) else (result,)
    tensors = [t for t in leaves if rt.B.is_value(getattr(t, "value", None))]
    grads = iter(pure_vjp(mini, mini.nodes, [(r, c) for r, c in zip(results, cots)
                                             if c is not None and r.requires_grad], tensors))
    return [next(grads) if rt.B.is_value(v) else None for v in values]
