"""Whether a custom ``autograd.Function``'s declared backward is its true vector-Jacobian product:
each declared formula against J^T of the forward run with grad enabled, exactly, for a symbolic
incoming gradient (``g0, g1, ...``)."""

from __future__ import annotations

from dataclasses import dataclass

from adjoint.format.errors import ProblemError
from adjoint.format.syntax import to_source
from adjoint.engine.adjoints import pure_vjp
from adjoint.engine.autograd_function import _PureScope, declared_vjp, input_dtypes, slots_of
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


#: gradient symbols x input elements a Function's check may expand (each element of J^T g is a
#: sum of up to that many symbolic terms; a 12x12 ``x @ x`` is 20,736, a 24x24 one 331,776)
MAX_CHECK_TERMS = 200_000


def check_size(rt, mod, node, values: list, limit: int | None = None) -> None:
    """Refuse, before any symbol is made, a check whose symbolic expansion would be too large:
    ``g`` has one symbol per output element, and each input element's J^T g may hold them all."""
    limit = MAX_CHECK_TERMS if limit is None else limit
    symbols = sum(_size(o[0]) for o in node.outputs if o is not None)   # (shape, ...) per output
    elements = sum(_size(rt.B.shape(v)) for v in values if rt.B.is_value(v))
    if symbols * elements > limit:
        raise ProblemError(mod.function.loc, f"checking Function {mod.function.name}'s declared backward exactly "
                           f"expands J^T g for {symbols} gradient symbols over {elements} input elements "
                           f"({symbols * elements} terms, more than {limit}); use --float64 (no exact check), or "
                           "check the Function on smaller inputs")


def _size(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def check_functions(run, limit: int | None = None) -> list:
    """Compare each Function's declared backward formulas with the true vector-Jacobian product,
    exactly, for every incoming gradient (a symbolic cotangent ``g0, g1, ...``); a check too large
    to expand is refused first (:func:`check_size`)."""
    rt = run.rt
    out = []
    for node in rt.nodes:
        if node.kind != "function":
            continue
        mod = node.params
        if mod.function.does:   # a backward with statements (side effects) is not re-run to check it
            continue
        call = node.module_call
        values = list(node.input_values)
        check_size(rt, mod, node, values, limit)
        cots = [rt.B.symbols_like(o[0], f"g{k}_" if len(node.outputs) > 1 else "g") if o is not None else None
                for k, o in enumerate(node.outputs)]
        declared = declared_vjp(rt, mod, values, cots if len(cots) > 1 else cots[0],
                                dtypes=input_dtypes(node, rt.B))
        dtypes = input_dtypes(node, rt.B)
        true = _true_vjp(rt, mod, values, cots, dtypes)
        for (slot, formula), d, t, v, dt in zip(mod.function.grads, declared, true, values, dtypes):
            if not rt.B.is_value(v) or dt in ("int64", "bool"):
                # a Python argument (tensor_slots checks its gradient is None), or an index or mask:
                # no derivative (the engine drops what the backward returns for it)
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


def _true_vjp(rt, mod, values: list, cots: list, dtypes: tuple | None = None) -> list:
    """Run the Function's forward with grad enabled on every floating input (an int64 or bool
    one, an index or a mask, has its dtype and no gradient) and pull ``cots`` back."""
    mini = Runtime(rt.B, rt.dtype)
    mini.quiet = 1
    dtypes = dtypes if dtypes is not None else (None,) * len(values)
    leaves = [mini.leaf(v, d not in ("int64", "bool"), dtype=d) if rt.B.is_value(v) else v
              for v, d in zip(values, dtypes)]
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
