"""How much exact text an answer would make, counted before any of it is made.

The JSON contract (``solve --json``, and ``verify``, which holds PyTorch to that JSON) writes
every element's exact text. A rational's text is its digits, written fast; a closed form made
by the forward (``sqrt(913/7)``, ``tanh(1/3) * 2``) is printed through SymPy, which simplifies
it first (a square root of a rational factors its numerator and denominator): milliseconds
each. 60,000 of them took minutes. So the answer's closed-form elements are counted first --
a walk over the tensors, no text made -- and more than :data:`MAX_CLOSED_FORMS` is refused
with one located line that says how many and what would be right.
"""

from __future__ import annotations

from adjoint.format.errors import Loc, ProblemError
from adjoint.values.exact import Exact
from adjoint.values.numbers import forms as F

#: closed-form elements the exact JSON of one problem may hold (about a millisecond or more each)
MAX_CLOSED_FORMS = 50_000


def closed_forms(x) -> int:
    """The closed-form elements of one tensor (0 for rationals and the other modes' values)."""
    if not isinstance(x, Exact) or x.kind != "real" or x.forms is None:
        return 0
    flat = x.forms.reshape(-1).tolist()
    return sum(1 for f in flat if type(f) is F.Form)


def _tensors(obj, seen: dict) -> None:
    if obj is None:
        return
    if isinstance(obj, Exact):
        seen.setdefault(id(obj), obj)
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            _tensors(o, seen)
    elif isinstance(obj, dict):
        for o in obj.values():
            _tensors(o, seen)


def _variant_tensors(vp, seen: dict) -> None:
    for name in ("loss", "values", "grads", "returned", "leaf_values"):
        _tensors(getattr(vp, name, None), seen)
    for b in getattr(vp, "boundaries", None) or ():
        _tensors(b.grad_output, seen)
        _tensors(b.grad_input, seen)
    calls = list(getattr(vp, "hook_calls", None) or ())
    for p in getattr(vp, "passes", None) or ():
        calls.extend(p.hook_calls)
        _tensors(p.grads, seen)
        _tensors(p.returned, seen)
        _tensors(p.leaf_values, seen)
    for h in calls:
        _tensors(h.args, seen)
        _tensors(h.returned, seen)


def check_exact_text(variants, loc: Loc | None, limit: int | None = None) -> None:
    """Refuse (a located ProblemError) an answer whose exact JSON would print more than
    ``limit`` closed forms; nothing is printed before."""
    limit = MAX_CLOSED_FORMS if limit is None else limit
    seen: dict = {}
    for vp in variants:
        _variant_tensors(vp, seen)
    total, biggest = 0, None
    for x in seen.values():
        n = closed_forms(x)
        total += n
        if n and (biggest is None or n > biggest[0]):
            biggest = (n, x.shape)
    if total > limit:
        shape = "x".join(map(str, biggest[1])) or "0-d"
        raise ProblemError(loc, f"the exact answer holds {total} elements that are closed forms (the largest "
                                f"tensor of them {shape}: {biggest[0]}), more than the {limit} whose exact text "
                                "is written in reasonable time (each is simplified by SymPy); use --float64 (decimals, "
                                "no exact text), or for solve the report without --json (it shows a tensor's first "
                                "elements)")
