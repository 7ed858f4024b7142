"""Exact forward values over a traced graph (the first interpreter of the IR)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import sympy

from . import exact as E
from .errors import ProblemError
from .exact import Exact
from .graph import Eqn, Graph, evaluate_program
from .ops import RULES
from .problem import Literal, Sym
from .signed_zero import result_mask


@dataclass
class Forward:
    values: list            # per var: Exact
    notes: list[tuple[int, str]] = field(default_factory=list)   # (eqn id, kink convention note)

    def of(self, operand):
        return operand if isinstance(operand, Exact) else self.values[operand]


def literal_value(lit: Literal, symbols: dict | None = None) -> Exact:
    """A tensor literal as an Exact; free symbols become SymPy symbols (or their bound numbers)."""
    items = []
    for e in lit.items:
        if isinstance(e, Sym):
            if symbols is not None and e.name in symbols:
                items.append(E.q(symbols[e.name] * e.coeff))
            else:
                items.append(sympy.Rational(e.coeff.numerator, e.coeff.denominator) * sympy.Symbol(e.name, real=True))
        else:
            items.append(e)
    return Exact.of(items, lit.shape)


def evaluate(graph: Graph, symbols: dict | None = None, dtype: str = "float32") -> Forward:
    """Every forward value, exactly. Refuses a forward pass that PyTorch would carry on with
    inf or nan: an op making a non-finite value from finite operands, or a value (a literal,
    an op's result) beyond the dtype's range, which PyTorch rounds to inf."""
    fwd = Forward([None] * len(graph.vars))
    for vid, decl in graph.decls.items():
        fwd.values[vid] = literal_value(decl.value, symbols)
        _refuse_overflow(fwd.values[vid], dtype, decl.value.loc, f"the literal of '{decl.name}'")
    for eqn in graph.eqns:
        ins = [fwd.of(i) for i in eqn.ins]
        if eqn.prim == "bhf":
            outs = ins
        elif eqn.prim == "function":
            spec = eqn.params
            outs = [evaluate_program(spec.module, dict(zip(spec.slots, ins)))[0]]
            _refuse_overflow(outs[0], dtype, eqn.loc, f"{spec.decl.name}.forward")
        else:
            rule = RULES[eqn.prim]
            try:
                out = rule.forward(ins, eqn.params)
            except E.ExactLimit as exc:
                raise ProblemError(eqn.loc, f"{exc}; use a smaller power") from None
            outs = [out.with_negzero(result_mask(eqn.prim, ins, eqn.params, out))]
            _refuse_nonfinite(eqn, ins, outs[0])
            if eqn.prim not in _NO_GROWTH:
                _refuse_overflow(outs[0], dtype, eqn.loc, f"this op ({RULES[eqn.prim].node})")
            if rule.kink is not None:
                note = rule.kink(ins, eqn.params)
                if note:
                    fwd.notes.append((eqn.id, note))
        for vid, value in zip(eqn.outs, outs):
            fwd.values[vid] = value
    return fwd


_WHAT = {"div": "division by zero", "reciprocal": "division by zero (1/x)", "log": "log of zero or of a negative number",
         "sqrt": "sqrt of a negative number", "pow_scalar": "a power of zero with a negative exponent",
         "pow_tensor": "a power that is not a real number", "rpow": "a power that is not a real number"}


def _refuse_nonfinite(eqn: Eqn, ins: list[Exact], out: Exact) -> None:
    """PyTorch would carry inf/nan on silently; a forward pass that makes one is almost surely a mistake."""
    if out.rational or not out.has_nonfinite() or any(x.has_nonfinite() for x in ins):
        return
    flat = out.flat()
    for idx, e in enumerate(flat):
        if E.s_is_nonfinite(e):
            where = _index(idx, out.shape)
            operands = "; ".join(f"operand {k + 1} = {_element(x, idx, out.shape)}" for k, x in enumerate(ins))
            what = _WHAT.get(eqn.prim, "a non-finite value")
            raise ProblemError(eqn.loc, f"{what} at the given values ({RULES[eqn.prim].node}, element {where}: "
                                        f"{operands}) gives {E.s_str(e)} in PyTorch; change the values so the "
                                        "forward pass stays finite")


#: The smallest magnitude each dtype rounds to inf (round to nearest: max + half an ulp), and
#: the bits of numerator and denominator under which a rational is surely below it.
_OVERFLOW = {"float32": E.q(2 ** 128 - 2 ** 103), "float64": E.q(2 ** 1024 - 2 ** 970)}
_SAFE_BITS = {"float32": 127, "float64": 1023}
#: Ops whose results are no larger than their operands: nothing to size.
_NO_GROWTH = frozenset({"t", "view", "unsafe_view", "unsqueeze", "squeeze", "relu", "tanh", "sigmoid", "sin",
                        "cos", "abs", "neg"})
_MAX_TEXT = {"float32": "3.4e38", "float64": "1.8e308"}


def _refuse_overflow(out: Exact, dtype: str, loc, what: str) -> None:
    """A finite exact value PyTorch cannot hold: it becomes inf (and later nan), which no exact
    prediction follows. Closed forms are sized numerically; ones with free symbols are not
    checked (verify binds the symbols, and checks then)."""
    limit = _OVERFLOW[dtype]
    if out.rational and max(map(E.fmpq.height_bits, out.a.flat), default=0) <= _SAFE_BITS[dtype]:
        return  # |p/q| <= |p| < 2 ** height_bits: a fast bound for the common case
    approx_limit = E.s_approx(limit, 20)
    for idx, e in enumerate(out.flat()):
        if E.s_is_nonfinite(e):
            continue
        if type(e) is E.fmpq:
            big = abs(e) >= limit
        else:
            v = E.s_approx(e, 20)
            big = v is not None and abs(v) >= approx_limit
        if big:
            raise ProblemError(loc, f"{what} gives {E.s_sci(e)} at element {_index(idx, out.shape)}, beyond "
                                    f"{dtype}'s range (about ±{_MAX_TEXT[dtype]}): PyTorch makes it inf; change the "
                                    "values so the forward pass stays finite")


def _index(flat: int, shape) -> str:
    return str([int(i) for i in np.unravel_index(flat, shape)])


def _element(x: Exact, flat: int, out_shape) -> str:
    if x.size == 1:
        return E.s_str(x.item())
    b = np.broadcast_to(x.a, out_shape).reshape(-1)
    return E.s_str(b[flat])
