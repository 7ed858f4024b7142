"""What the hooks changed: the variant's answer next to the same variant with every hook only
observing.

The question a user asks of a hook that returns something is "what did that do to my
gradients?". The honest answer is a counterfactual: run the very same steps (forwards,
backwards, registrations, removals, ``zero_grad``, SGD) with the same hooks firing, but with
every hook's return value ignored -- ``returns`` and ``does`` dropped, a ``saved_tensors``
pack and unpack that hand the tensor through unchanged -- and compare. Hooks that raise still
raise and hooks that remove handles still remove them: only what a hook *returns* or *writes in
place* is taken away. This covers what the hook-free multipliers of the module boundaries cannot: forward
hooks that replace an output (the forward itself changes), several backward passes, SGD
steps between them, ``torch.autograd.grad``'s returned gradients.

Only variants where some hook call returned a value or wrote in place (or a ``saved_tensors``
pair is active) are run again; the others changed nothing by construction.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from fractions import Fraction

from adjoint.format.errors import ProblemError
from adjoint.values import exact as E
from adjoint.values import arith as A
from adjoint.values.arith import rational_ratio
from adjoint.values.exact import Exact
from adjoint.answer.prediction import VariantPrediction
from adjoint.format.syntax import Name
from adjoint.values.complexes import Cx


@dataclass
class Change:
    """One tensor whose answer differs: ``before`` (hooks only observing) -> ``after`` (this run)."""

    name: str
    what: str                        # "grad" (.grad), "returned" (autograd.grad's result), "loss"
    before: Exact | None
    after: Exact | None
    ratio: object = None             # after / before when it is one number for every element (fmpq), else None


@dataclass
class Effects:
    """The comparison for one variant. ``ran`` is False when no hook returned anything (nothing to
    compare); ``error`` is what PyTorch would raise without the returned values, when it would."""

    ran: bool
    changes: list[Change] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)   # names (".grad" entries) that are the same
    error: str | None = None
    refused: str | None = None       # the observing-only run is not a valid run (a ProblemError's text)

    @property
    def changed_anything(self) -> bool:
        return bool(self.changes) or self.error is not None


def returns_something(v: VariantPrediction) -> bool:
    """True when some hook call of the variant handed a value back or wrote in place (or
    saved-tensor hooks are active)."""
    if any(h.on in ("saved_tensors", "saved") for h in v.run.variant.hooks):
        return True
    return any((h.returned is not None or h.wrote) and h.kind not in ("pack", "unpack") for h in v.hook_calls)


def hook_effects(v: VariantPrediction) -> Effects:
    """Compare ``v`` with the same variant whose hooks only observe (see the module's docstring)."""
    mode = v.run.rt.B.name if v.run is not None else "exact"
    if v.error is not None or v.run is None or mode == "structure" or not returns_something(v):
        return Effects(ran=False)   # --structure has no values to tell a change by
    from adjoint.answer.solve import solve_variant

    problem, variant = v.run.problem, v.run.variant
    observing = dataclasses.replace(variant, hooks=tuple(_observing(h) for h in variant.hooks))
    try:
        base = solve_variant(problem, observing, v.run.rt.B.symbols, mode)  # the same symbols and mode
    except ProblemError as exc:
        return Effects(ran=True, refused=exc.line())
    if base.error is not None:
        return Effects(ran=True, error=f"{base.error.type}: {base.error.message}")
    out = Effects(ran=True)
    if v.loss is not None and base.loss is not None and not _same(v.loss, base.loss):
        out.changes.append(Change("loss", "loss", base.loss, v.loss, _ratio(base.loss, v.loss)))
    for name, after in (v.returned or {}).items():
        before = (base.returned or {}).get(name)
        if not _same(before, after):
            out.changes.append(Change(name, "returned", before, after, _ratio(before, after)))
    for name, after in v.grads.items():
        before = base.grads.get(name)
        if _same(before, after):
            out.unchanged.append(name)
        else:
            out.changes.append(Change(name, "grad", before, after, _ratio(before, after)))
    return out


def _observing(hook):
    """The hook with its return value taken away (it still fires, raises and removes)."""
    if hook.on in ("saved_tensors", "saved"):
        through = Name(hook.loc, "x")
        return dataclasses.replace(hook, pack=through, unpack=through)
    return dataclasses.replace(hook, returns=None, does=())


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return a.shape == b.shape and A.same(a, b)


def _ratio(before, after):
    """after / before when that is one nonzero rational for every element, else None. For closed
    forms (tanh(3/10), symbols) the factor is guessed from the decimals and then checked exactly."""
    if before is None or after is None or before.shape != after.shape:
        return None
    if isinstance(before, Cx) or isinstance(after, Cx):   # a complex factor is not said
        return None
    if not isinstance(before, Exact) or not isinstance(after, Exact):
        return _float_ratio(before.flat(), after.flat())   # --float64
    if before.rational and after.rational:
        ratio = rational_ratio(before, after)
        return ratio if ratio is not None and ratio != 0 and ratio != 1 else None
    b, a = before.floats(), after.floats()
    if b is None or a is None:
        guess = _symbolic_guess(before, after)
        if guess is None:
            return None
    else:
        pairs = [(x, y) for x, y in zip(_flat(b), _flat(a)) if x != 0 and math.isfinite(x) and math.isfinite(y)]
        if not pairs:
            return None
        guess = Fraction(pairs[0][1] / pairs[0][0]).limit_denominator(1000)
    if guess in (0, 1) or not A.equal(after, A.mul(before, Exact.full(before.shape, guess))):
        return None
    return E.q(guess)


def _float_ratio(before: list[float], after: list[float]):
    """after / before of float64 values when every nonzero element has the same small rational
    factor exactly (a hook doubling a gradient), else None."""
    ratio = None
    for x, y in zip(before, after):
        if x == 0 or not (math.isfinite(x) and math.isfinite(y)):
            if x != y:
                return None
            continue
        r = Fraction(y / x).limit_denominator(1000)
        if float(r) * x != y or (ratio is not None and r != ratio):
            return None
        ratio = r
    return E.q(ratio) if ratio is not None and ratio not in (0, 1) else None


#: closed forms larger than this (in characters) are not divided to look for a common factor
MAX_GUESS = 2000


def _symbolic_guess(before: Exact, after: Exact):
    """after / before of the first nonzero element when it cancels to a rational, else None."""
    import sympy

    for x, y in zip(before.flat(), after.flat()):
        x, y = E.s_sym(x), E.s_sym(y)
        if x == 0:
            continue
        if len(str(x)) + len(str(y)) > MAX_GUESS:
            return None
        r = sympy.cancel(y / x)
        return Fraction(int(r.p), int(r.q)) if r.is_Rational else None
    return None


def _flat(x) -> list:
    if isinstance(x, list):
        return [e for i in x for e in _flat(i)]
    return [x]
