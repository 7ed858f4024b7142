"""Compare a predicted variant (``solve --json``) with what real PyTorch did (the observed side).

Pure Python, no torch. :func:`compare` returns one :class:`Row` per compared item:

* ``run``: the ``error`` of the variant (contract v2): PyTorch raised where the prediction
  says it runs, ran where the prediction says it raises, or raised otherwise than predicted
  (type, PyTorch's exact message, ``during``, ``after_call``); with an error only the hook
  calls are compared further, as only they are in the contract's answer;
* ``loss``;
* ``hook_calls``: the two call lists are aligned on (hook index, kind, target, call) with a
  longest-common-subsequence match, so a call predicted but absent, a call observed but not
  predicted and a call out of order are each named; matched calls compare the label, the
  marks ``global``, ``raised`` and ``node`` (pack / unpack), every argument (its None
  pattern: None stays None; tuple lengths; shapes; dtypes; values; a hook's ``kwargs``
  entry by entry) and what the hook returned;
* ``grads`` (every ``.grad``, including which are None) and ``returned`` (``method: grad``);
* ``passes`` (variants with ``steps``): per backward step, its calls, grads and returned;
* ``values`` (forward values of every named tensor, buffers included) unless ``values=False``;
* ``reads`` (read steps, also with an error): per ``as:`` name, the value read (as any tensor;
  a bool or None exactly) and its ``read``, ``step``, ``is``, ``grad_fn``, ``grad_fn_of`` and
  ``dtype`` exactly (:func:`compare_reads`).

Integer tensors (``"dtype": "int64"``) are compared exactly, and a dtype that differs is a
mismatch on its own. Float tensors, given the variant's bound run (``compare(..., bounds=)``,
:func:`adjoint.answer.bounds.bound_json`, as ``verify`` and the differential check give it):
each element within its own first-order bound on PyTorch's rounding in the dtype, floored at
:data:`FLOOR_ULPS` ulps of the predicted value (docs/verify.md, "How close is close
enough"); the row reports the largest bound (``bound``). Without one, or for an element whose
bound is unknown (``fallback``), the fixed

tolerance (the dtype PyTorch ran in; the prediction is exact), element by element:
``|observed - predicted| <= atol + rtol * max|predicted|``, the max taken over the tensor
the element belongs to (so every element is held to the scale of its tensor), with

=========  ========  =========
dtype      rtol      atol
=========  ========  =========
float32    1e-5      1e-6
float64    1e-10     1e-12
=========  ========  =========

float32 carries ~6e-8 relative rounding per op, so 1e-5 leaves room for a few dozen ops;
float64 carries ~1.1e-16, so 1e-10 is loose for these small graphs yet far below any
modelling mistake. The tensor-wide scale is what backward error analysis bounds: a tiny
element computed by cancellation (sigmoid'(13) = s(1 - s) in float32) is off by a rounding
of its *neighbours'* size, and a purely element-wise rule would flag float32 itself rather
than the prediction. Each row still reports the largest element-wise relative difference.
A float32 problem whose answer is ill-conditioned beyond that (a value that only exists by
cancellation of much larger ones) belongs in float64 (``dtype: float64`` or ``--dtype``).

``inf`` equals ``inf`` of the same sign and ``nan`` equals ``nan``; a None (no tensor)
never equals a tensor, zeros included. A mismatch where PyTorch overflowed (the exact value
is beyond the dtype's range) says so.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import asdict, dataclass

import numpy as np
from adjoint.torchside.compare_fast import suspects

TOLERANCES = {"float32": (1e-5, 1e-6), "float64": (1e-10, 1e-12)}
INTEGER_DTYPES = ("int64", "int32", "int16", "int8", "uint8", "bool")
FLOAT_MAX = {"float32": 3.4028234663852886e38, "float64": 1.7976931348623157e308}
FD_TOLERANCE = (1e-3, 1e-5)   # torch.autograd.gradcheck's defaults (rtol, atol)


@dataclass
class Row:
    """One compared item of a verify report: the section and item, whether it agrees, and the largest absolute and relative difference."""

    section: str            # run | loss | hook_calls | grads | returned | values | fd
    item: str               # what was compared, e.g. "#1 full_backward@f1 'SLinear full hook'"
    ok: bool
    max_abs: float | None   # largest |observed - predicted| over compared elements (None: nothing numeric)
    max_rel: float | None   # largest |observed - predicted| / |predicted| (predicted != 0)
    detail: str = ""        # for a mismatch: the argument, element, both values
    skipped: bool = False   # not compared (the detail says why); counts as ok
    bound: float | None = None   # the largest per-element rounding bound the elements were held to (None: none)
    fallback: bool = False  # some element had no rounding bound: held to the dtype's fixed tolerance instead

    def to_json(self) -> dict:
        return asdict(self)


class _Diff:
    """Accumulates the distance between two JSON values and the first mismatch found."""

    def __init__(self, rtol: float, atol: float, dtype: str | None = None, other: str = "observed"):
        self.other = other          # what the prediction is compared with, in messages
        self.rtol = rtol
        self.atol = atol
        self.dtype = dtype
        self.max_abs: float | None = None
        self.max_rel: float | None = None
        self.problems: list[str] = []
        self.bound: float | None = None     # the largest rounding bound used (see value's ``b``)
        self.fallback = False               # some element compared with the fixed tolerance, for want of a bound

    @property
    def ok(self) -> bool:
        return not self.problems

    def fail(self, msg: str) -> None:
        self.problems.append(msg)

    def value(self, where: str, p, o, b=None) -> None:
        """Compare VALUE | [VALUE|None, ...] | {NAME: ...} (a hook's kwargs) | number | None.

        ``b``: the same item of the bound run (:mod:`adjoint.answer.bounds`), whose VALUEs carry
        each element's rounding bound; None where there is none (the fixed tolerance then)."""
        if p is None or o is None:
            if p is None and o is None:
                return
            if p is None:
                self.fail(f"{where}: predicted None, {self.other} {_describe(o)}")
            else:
                self.fail(f"{where}: predicted {_describe(p)}, {self.other} None")
            return
        if isinstance(p, list) or isinstance(o, list):
            if not (isinstance(p, list) and isinstance(o, list)):
                self.fail(f"{where}: predicted {_describe(p)}, {self.other} {_describe(o)}")
                return
            if len(p) != len(o):
                self.fail(f"{where}: predicted a tuple of {len(p)}, {self.other} a tuple of {len(o)}")
                return
            bs = b if isinstance(b, list) and len(b) == len(p) else [None] * len(p)
            for i, (pi, oi) in enumerate(zip(p, o)):
                self.value(f"{where}[{i}]", pi, oi, bs[i])
            return
        if _is_mapping(p) or _is_mapping(o):
            if not (_is_mapping(p) and _is_mapping(o)) or set(p) != set(o):
                self.fail(f"{where}: predicted {_describe(p)}, {self.other} {_describe(o)}")
                return
            for k in p:
                self.value(f"{where}.{k}", p[k], o[k], b.get(k) if _is_mapping(b) else None)
            return
        if not isinstance(p, dict) or not isinstance(o, dict):
            self.plain(where, p, o)
            return
        if list(p.get("shape") or []) != list(o.get("shape") or []) or p.get("shape") is None or o.get("shape") is None:
            self.fail(f"{where}: predicted shape {p.get('shape')}, {self.other} shape {o.get('shape')}")
            return
        if p.get("dtype") != o.get("dtype"):
            self.fail(f"{where}: predicted dtype {p.get('dtype') or self.dtype or 'the float dtype'}, {self.other} "
                      f"{o.get('dtype') or self.dtype or 'the float dtype'}")
            return
        for key in ("requires_grad", "grad_fn"):   # a forward value's (contract v3), where both sides have it
            if key in p and key in o and p[key] != o[key]:
                self.fail(f"{where}: predicted {key} {p[key]}, {self.other} {o[key]}")
                return
        pv, ov = p.get("value"), o.get("value")
        if pv is None and p.get("exact") is None:
            return  # --structure: the prediction has shapes, no values; the shape and dtype matched
        if pv is None:
            self.fail(f"{where}: the prediction is symbolic here (no number to compare); bind the symbols")
            return
        if ov is None:
            self.fail(f"{where}: {self.other} no number ({o.get('note', 'missing value')})")
            return
        pf, of = _flat(pv), _flat(ov)
        shape = list(p["shape"]) + ([2] if p.get("dtype") in ("complex64", "complex128") else [])   # [re, im] pairs
        if p.get("dtype") in INTEGER_DTYPES:   # integers are exact on both sides
            # but an argmax PyTorch's floats may place on another element near the chosen one carries
            # a bound (the farthest such element's distance): that much is allowed there
            reach = _flat(b["exact"]) if isinstance(b, dict) and isinstance(b.get("exact"), list) else None
            if reach is not None and len(reach) != len(pf):
                reach = None
            for idx, (a, b) in enumerate(zip(of, pf)):
                if a != b and not (reach is not None and _is_number(reach[idx]) and abs(a - b) <= reach[idx]):
                    self.fail(f"{where}{_index(idx, shape)}: predicted {_num(b)}, {self.other} {_num(a)} "
                              f"({p['dtype']}: compared exactly)")
            return
        scale = max([abs(x) for x in pf if not _special(x)], default=0.0)
        tol = self.atol + self.rtol * scale
        bounds = element_bounds(b, shape, pf, self.dtype)
        if bounds is not None:
            held, fixed = bounds
            if fixed.any():
                self.fallback = True
                held = np.where(fixed, tol, held)
            if (~fixed).any():
                top = float(held[~fixed].max())
                self.bound = top if self.bound is None else max(self.bound, top)
            for idx in suspects(of, pf, held, self):
                self.number(f"{where}{_index(idx, shape)}", pf[idx], of[idx], float(held[idx]), scale,
                            bounded=not fixed[idx])
            return
        self.fallback = True
        for idx in suspects(of, pf, tol, self):   # the elements that may fail: the rest pass, counted at once
            self.number(f"{where}{_index(idx, shape)}", pf[idx], of[idx], tol, scale)

    def plain(self, where: str, p, o) -> None:
        """Two plain values: numbers (a 0-d VALUE counts as its number), strings, booleans."""
        p, o = _scalar(p), _scalar(o)
        if isinstance(p, bool) or isinstance(o, bool) or isinstance(p, str) or isinstance(o, str):
            if p != o or type(p) is not type(o):
                self.fail(f"{where}: predicted {p!r}, {self.other} {o!r}")
            return
        if not (_is_number(p) and _is_number(o)):
            self.fail(f"{where}: predicted {_describe(p)}, {self.other} {_describe(o)}")
            return
        scale = abs(p) if not _special(p) else 0.0
        self.number(where, float(p), float(o), self.atol + self.rtol * scale, scale)

    def number(self, where: str, b: float, a: float, tol: float, scale: float, bounded: bool = False) -> None:
        """Predicted ``b`` against observed ``a`` within ``tol``."""
        if _special(a) or _special(b):
            if not _same_special(a, b):
                why = ""
                if _special(a) and not _special(b) and self.dtype in FLOAT_MAX and abs(b) > FLOAT_MAX[self.dtype]:
                    why = f" (beyond {self.dtype}'s range, {FLOAT_MAX[self.dtype]:.4g}: PyTorch overflows)"
                elif _special(a) and not _special(b):
                    why = (" (PyTorch's value is not finite: look for an overflow upstream, e.g. a loss or value "
                           "predicted as inf because its exact value is beyond the dtype's range)")
                self.fail(f"{where}: predicted {_num(b)}, {self.other} {_num(a)}{why}")
            return
        d = abs(a - b)
        self.max_abs = d if self.max_abs is None else max(self.max_abs, d)
        if b != 0:
            r = d / abs(b)
            self.max_rel = r if self.max_rel is None else max(self.max_rel, r)
        if d > tol and bounded:
            self.fail(f"{where}: predicted {_num(b)}, {self.other} {_num(a)} (|diff| {d:.3g} > {tol:.3g}, the bound "
                      f"on PyTorch's {self.dtype} rounding of this element: not rounding)")
        elif d > tol:
            self.fail(f"{where}: predicted {_num(b)}, {self.other} {_num(a)} "
                      f"(|diff| {d:.3g} > {self.atol:g} + {self.rtol:g}*{scale:.3g}, the largest |predicted| "
                      "in this tensor)")


#: the floor of every element's bound, in units in the last place of the predicted value in the dtype
FLOOR_ULPS = 4


def element_bounds(b, shape: list, pf: list, dtype: str | None):
    """Each element's rounding bound from the bound run's VALUE ``b`` (its ``exact`` field holds
    them), floored at :data:`FLOOR_ULPS` ulps of the predicted value: ``(bounds, fixed)`` with
    ``fixed`` marking the elements without a finite bound (held to the fixed tolerance), or None
    when ``b`` has no bounds of this shape."""
    if not isinstance(b, dict) or list(b.get("shape") or []) != list(shape) or b.get("exact") is None:
        return None
    flat = _flat(b["exact"])
    if len(flat) != len(pf) or not all(_is_number(x) for x in flat):
        return None
    bounds = np.asarray(flat, dtype=np.float64)
    predicted = np.asarray(pf, dtype=np.float64)
    fixed = ~np.isfinite(bounds) & np.isfinite(predicted)   # an inf or nan prediction is compared as itself
    typ = np.float32 if dtype == "float32" else np.float64
    with np.errstate(all="ignore"):
        mag = np.abs(predicted).astype(typ)
        floor = FLOOR_ULPS * np.spacing(np.where(np.isfinite(mag), mag, typ(0))).astype(np.float64)
        held = np.maximum(np.where(np.isfinite(bounds), bounds, 0.0), floor)
        # where the bound run's own float64 value is not finite (it overflowed to inf or nan) but
        # the prediction is, its bound says nothing about this element: the fixed tolerance then
        own = _flat(b.get("value")) if b.get("value") is not None else None
        if own is not None and len(own) == len(pf) and all(_is_number(x) for x in own):
            fixed |= np.isfinite(predicted) & ~np.isfinite(np.asarray(own, dtype=np.float64))
    return held, fixed


def _is_mapping(v) -> bool:
    """A dict that is not a VALUE (a hook's ``kwargs``)."""
    return isinstance(v, dict) and "shape" not in v


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _scalar(v):
    """A 0-d VALUE as its number; anything else unchanged."""
    if isinstance(v, dict) and v.get("shape") == [] and not isinstance(v.get("value"), list):
        return v.get("value")
    return v


def _flat(v) -> list:
    """The numbers of a nested list; integers stay ints (int64 values are compared exactly)."""
    if isinstance(v, list):
        out: list = []
        for x in v:
            out.extend(_flat(x))
        return out
    return [v if isinstance(v, int) and not isinstance(v, bool) else float(v)]


def _special(x: float) -> bool:
    return math.isnan(x) or math.isinf(x)


def _same_special(a: float, b: float) -> bool:
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b


def _num(x: float) -> str:
    return str(x) if isinstance(x, int) else f"{x:.10g}"


def _index(flat: int, shape: list[int]) -> str:
    return str([int(i) for i in np.unravel_index(flat, shape)]) if shape else ""


def _describe(v) -> str:
    if v is None:
        return "None"
    if isinstance(v, list):
        return "(" + ", ".join(_describe(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    if _is_mapping(v):
        return "{" + ", ".join(f"{k}: {_describe(x)}" for k, x in v.items()) + "}"
    if not isinstance(v, dict):
        return repr(v) if not _is_number(v) else f"the number {_num(v)}"
    value = v.get("value")
    dtype = f" ({v['dtype']})" if v.get("dtype") else ""
    if value is None:
        return f"a tensor of shape {v.get('shape')}{dtype}"
    flat = _flat(value)
    shown = ", ".join(_num(x) for x in flat[:4]) + (", ..." if len(flat) > 4 else "")
    return f"tensor{v.get('shape')}{dtype} [{shown}]"


def _row(section: str, item: str, diff: _Diff) -> Row:
    return Row(section, item, diff.ok, diff.max_abs, diff.max_rel, "; ".join(diff.problems), bound=diff.bound,
               fallback=diff.fallback and diff.max_abs is not None)


# ----------------------------------------------------------------------------- hook calls

#: Marks a call record may carry besides its key, with the value their absence means: a global
#: hook's call, a hook that raised, the node a pack or unpack ran for.
CALL_MARKS = (("global", False), ("raised", False), ("silenced", False), ("node", None), ("recomputed", False),
              ("reentrant", None))


def call_key(c: dict) -> tuple:
    return (c.get("hook"), c.get("kind"), c.get("target"), c.get("call"))


def call_name(c: dict, n: int | None = None) -> str:
    where = c.get("target", "?")
    if c.get("call") is not None:
        where += f" (call {c['call']})"
    head = f"#{n} " if n is not None else ""
    return f"{head}{c.get('kind')}@{where} hook {c.get('hook')} '{c.get('label', '')}'"


def _compare_calls(pred: list[dict], obs: list[dict], rtol: float, atol: float, dtype: str,
                   section: str = "hook_calls", head: str = "", bounds: list | None = None) -> list[Row]:
    """Align the two call lists and compare matched calls; rows in ``section``, items prefixed ``head``.
    ``bounds``: the bound run's calls (the same list as ``pred``'s when its run went the same way)."""
    rows: list[Row] = []
    if not isinstance(bounds, list) or [call_key(c) for c in bounds] != [call_key(c) for c in pred]:
        bounds = [None] * len(pred)
    pk = [call_key(c) for c in pred]
    ok_ = [call_key(c) for c in obs]
    matcher = difflib.SequenceMatcher(None, pk, ok_, autojunk=False)
    missing: list[int] = []
    extra: list[int] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            for i, j in zip(range(i1, i2), range(j1, j2)):
                row = _compare_call(pred[i], obs[j], i + 1, j + 1, rtol, atol, dtype, bounds[i])
                row.section, row.item = section, head + row.item
                rows.append(row)
            continue
        missing.extend(range(i1, i2))
        extra.extend(range(j1, j2))
    extra_keys = [ok_[j] for j in extra]
    missing_keys = [pk[i] for i in missing]
    for i in missing:
        moved = pk[i] in extra_keys
        why = ("predicted here but observed at another position in the firing order" if moved
               else "predicted but PyTorch never called it")
        rows.append(Row(section, head + call_name(pred[i], i + 1), False, None, None,
                        f"{why} (predicted call #{i + 1} of {len(pred)}; observed {len(obs)} calls: "
                        f"{_sequence(obs)})"))
    for j in extra:
        moved = ok_[j] in missing_keys
        why = ("observed here but predicted at another position in the firing order" if moved
               else "PyTorch called it but it was not predicted")
        rows.append(Row(section, head + call_name(obs[j], j + 1), False, None, None,
                        f"{why} (observed call #{j + 1} of {len(obs)}; predicted {len(pred)} calls: "
                        f"{_sequence(pred)})"))
    return rows


def _sequence(calls: list[dict]) -> str:
    text = ", ".join(f"{c.get('kind')}@{c.get('target')}" + (f"#{c['call']}" if c.get("call") else "") for c in calls)
    return text or "none"


def _compare_call(p: dict, o: dict, n_pred: int, n_obs: int, rtol: float, atol: float, dtype: str,
                  b: dict | None = None) -> Row:
    diff = _Diff(rtol, atol, dtype)
    b = b or {}
    ba = b.get("args") or {}
    if p.get("label") != o.get("label"):
        diff.fail(f"label: predicted '{p.get('label')}', observed '{o.get('label')}'")
    pa, oa = p.get("args") or {}, o.get("args") or {}
    for name in pa:
        if name not in oa:
            diff.fail(f"argument '{name}' predicted but the hook was not handed it")
    for name in oa:
        if name not in pa:
            diff.fail(f"argument '{name}' handed by PyTorch but not predicted")
    for name in pa:
        if name in oa:
            diff.value(name, pa[name], oa[name], ba.get(name))
    for mark, default in CALL_MARKS:
        if mark == "node" and o.get("node_unseen") and o.get("node") is None:
            continue   # a pack for a node only a create_graph backward made and nothing reached: unnamed in torch
        if p.get(mark, default) != o.get(mark, default):
            diff.fail(f"{mark}: predicted {p.get(mark, default)!r}, observed {o.get(mark, default)!r}")
    diff.value("returned", p.get("returned"), o.get("returned"), b.get("returned"))
    name = call_name(p, n_pred)
    if n_obs != n_pred:
        name += f" (observed as #{n_obs})"
    return _row("hook_calls", name, diff)


# ----------------------------------------------------------------------------- tables of tensors

def _compare_table(section: str, label: str, pred: dict, obs: dict, rtol: float, atol: float,
                   dtype: str | None, bounds: dict | None = None) -> list[Row]:
    rows = []
    bounds = bounds if isinstance(bounds, dict) else {}
    for name, pv in pred.items():
        if name not in obs:
            rows.append(Row(section, f"{label} {name}", False, None, None,
                            f"predicted ({_describe(pv)}) but not observed"))
            continue
        diff = _Diff(rtol, atol, dtype)
        diff.value(name, pv, obs[name], bounds.get(name))
        rows.append(_row(section, f"{label} {name}", diff))
    for name, ov in obs.items():
        if name not in pred:
            rows.append(Row(section, f"{label} {name}", False, None, None,
                            f"observed ({_describe(ov)}) but not predicted"))
    return rows


def tolerance(dtype: str) -> tuple[float, float]:
    return TOLERANCES[dtype]


def compare(predicted: dict, observed: dict, dtype: str, values: bool = True, bounds: dict | None = None) -> list[Row]:
    """Rows comparing one predicted variant with one observed variant (both contract JSON).

    ``bounds``: the same variant's bound run (:func:`adjoint.answer.bounds.bound_json`): each
    float element is then held to its own bound on PyTorch's rounding, floored at a few ulps;
    without it (or where it has none) to the dtype's fixed tolerance."""
    rtol, atol = tolerance(dtype)
    b = bounds if isinstance(bounds, dict) and bounds.get("error") is None else {}
    rows: list[Row] = []
    perr, oerr = predicted.get("error"), observed.get("error")
    if perr is not None or oerr is not None:
        rows.append(_compare_error(perr, oerr))
        rows += _compare_calls(predicted.get("hook_calls") or [], observed.get("hook_calls") or [], rtol, atol, dtype,
                               bounds=(bounds or {}).get("hook_calls"))
        rows += _compare_warnings(predicted, observed)
        rows += _compare_registered(predicted, observed)
        rows += _reads(predicted, observed, rtol, atol, dtype, None)
        return rows
    rows += _compare_warnings(predicted, observed)
    rows += _compare_registered(predicted, observed)
    rows += _reads(predicted, observed, rtol, atol, dtype, b.get("reads"))
    diff = _Diff(rtol, atol, dtype)
    diff.value("loss", predicted.get("loss"), observed.get("loss"), b.get("loss"))
    if predicted.get("loss") is not None or observed.get("loss") is not None:
        rows.append(_row("loss", "loss", diff))
    rows += _compare_calls(predicted.get("hook_calls") or [], observed.get("hook_calls") or [], rtol, atol, dtype,
                           bounds=b.get("hook_calls"))
    rows += _compare_table("grads", "grad", predicted.get("grads") or {}, observed.get("grads") or {},
                           rtol, atol, dtype, b.get("grads"))
    if "returned" in predicted or "returned" in observed:
        rows += _compare_table("returned", "returned", predicted.get("returned") or {},
                               observed.get("returned") or {}, rtol, atol, dtype, b.get("returned"))
    if "passes" in predicted or "passes" in observed:
        rows += _compare_passes(predicted.get("passes") or [], observed.get("passes") or [], rtol, atol, dtype,
                                b.get("passes"))
    if "leaf_values" in predicted or "leaf_values" in observed:
        rows += _compare_table("leaf_values", "leaf value", predicted.get("leaf_values") or {},
                               observed.get("leaf_values") or {}, rtol, atol, dtype, b.get("leaf_values"))
    if values:
        rows += _compare_table("values", "value", predicted.get("values") or {}, observed.get("values") or {},
                               rtol, atol, dtype, b.get("values"))
    return rows


def _reads(predicted: dict, observed: dict, rtol, atol, dtype, bounds) -> list[Row]:
    """The read steps' answers (:func:`compare_reads`), when either side has any."""
    if not predicted.get("reads") and not observed.get("reads"):
        return []
    return compare_reads(predicted.get("reads") or {}, observed.get("reads") or {}, rtol, atol, dtype, bounds)


#: the fields of a read compared exactly (its ``value`` to the bound, as any tensor)
READ_FIELDS = ("read", "step", "is", "grad_fn", "grad_fn_of", "dtype")


def compare_reads(pred: dict, obs: dict, rtol: float, atol: float, dtype: str, bounds: dict | None = None) -> list:
    rows = []
    bounds = bounds if isinstance(bounds, dict) else {}
    for name in list(pred) + [n for n in obs if n not in pred]:
        if name not in pred or name not in obs:
            rows.append(Row("reads", f"read {name}", False, None, None,
                            "predicted but not observed" if name in pred else "observed but not predicted"))
            continue
        p, o = pred[name], obs[name]
        diff = _Diff(rtol, atol, dtype)
        for key in READ_FIELDS:
            if p.get(key) != o.get(key):
                diff.fail(f"{key}: predicted {p.get(key)!r}, observed {o.get(key)!r}")
        pv, ov = p.get("value"), o.get("value")
        if isinstance(pv, bool) or isinstance(ov, bool) or pv is None or ov is None:
            if pv != ov:
                diff.fail(f"value: predicted {pv!r}, observed {ov!r}")
        else:
            b = bounds.get(name)
            diff.value("value", pv, ov, b.get("value") if isinstance(b, dict) else None)
        rows.append(_row("reads", f"read {name} ({p.get('read')})", diff))
    return rows


def _compare_warnings(predicted: dict, observed: dict) -> list[Row]:
    """The ``warnings`` (contract v3): every warning PyTorch issued, in order, each time, as
    (category, exact message, during). Compared when both sides list them."""
    if "warnings" not in predicted or "warnings" not in observed:
        return []
    key = lambda w: (w.get("category"), w.get("message"), w.get("during"))   # noqa: E731
    p, o = [key(w) for w in predicted["warnings"]], [key(w) for w in observed["warnings"]]
    if p == o:
        return [Row("warnings", f"warnings ({len(p)})", True, None, None)]
    first = next((i for i, (a, b) in enumerate(zip(p, o)) if a != b), min(len(p), len(o)))
    said = lambda w: f"{w[0]} during {w[1 + 1]}: {w[1]!r}" if w is not None else "nothing"   # noqa: E731
    return [Row("warnings", "warnings", False, None, None,
                f"predicted {len(p)} warning(s), PyTorch issued {len(o)}; #{first + 1}: predicted "
                f"{said(p[first] if first < len(p) else None)}, PyTorch {said(o[first] if first < len(o) else None)}")]


def _compare_registered(predicted: dict, observed: dict) -> list[Row]:
    """The counts of ``registered`` steps (a module's hook dict's len() at that point): equal integers."""
    p, o = predicted.get("registered") or {}, observed.get("registered") or {}
    rows = []
    for name in dict.fromkeys(list(p) + list(o)):
        ok = p.get(name) == o.get(name)
        rows.append(Row("registered", f"registered {name}", ok, None, None,
                        "" if ok else f"predicted {p.get(name)} hooks, PyTorch has {o.get(name)}"))
    return rows


def _describe_error(e: dict) -> str:
    after = e.get("after_call")
    where = f"after hook call #{after + 1}" if isinstance(after, int) else "before any hook call"
    return f"{e.get('type')}: {e.get('message')!r} during {e.get('during')}, {where}"


def _compare_error(p: dict | None, o: dict | None) -> Row:
    """The ``error`` of a variant: type, PyTorch's exact message, during, after_call."""
    if p is None:
        return Row("run", "error", False, None, None,
                   f"PyTorch raised {_describe_error(o)}; the prediction says it runs")
    if o is None:
        return Row("run", "error", False, None, None,
                   f"predicted PyTorch to raise {_describe_error(p)}, but it ran without error")
    problems = [f"{key}: predicted {p.get(key)!r}, observed {o.get(key)!r}"
                for key in ("type", "message", "during", "after_call") if p.get(key) != o.get(key)]
    return Row("run", f"error {p.get('type')} during {p.get('during')}", not problems, None, None,
               "; ".join(problems))


def _compare_passes(pred: list[dict], obs: list[dict], rtol: float, atol: float, dtype: str,
                    bounds: list | None = None) -> list[Row]:
    """Each backward step's calls, grads and returned values (``passes``), pass by pass."""
    rows: list[Row] = []
    bounds = bounds if isinstance(bounds, list) and len(bounds) == len(pred) else [{}] * len(pred)
    if len(pred) != len(obs):
        rows.append(Row("passes", "passes", False, None, None,
                        f"predicted {len(pred)} backward passes, observed {len(obs)}"))
    for n, (p, o, b) in enumerate(zip(pred, obs, bounds), start=1):
        head = f"pass {n}: "
        b = b or {}
        rows += _compare_calls(p.get("hook_calls") or [], o.get("hook_calls") or [], rtol, atol, dtype,
                               section="passes", head=head, bounds=b.get("hook_calls"))
        for row in _compare_table("passes", f"{head}grad", p.get("grads") or {}, o.get("grads") or {},
                                  rtol, atol, dtype, b.get("grads")):
            rows.append(row)
        if p.get("returned") or o.get("returned"):
            rows += _compare_table("passes", f"{head}returned", p.get("returned") or {}, o.get("returned") or {},
                                   rtol, atol, dtype, b.get("returned"))
        if p.get("leaf_values") or o.get("leaf_values"):
            rows += _compare_table("passes", f"{head}leaf value", p.get("leaf_values") or {},
                                   o.get("leaf_values") or {}, rtol, atol, dtype, b.get("leaf_values"))
    return rows


def compare_fd(predicted: dict, fd: dict) -> list[Row]:
    """Rows comparing the predicted final gradients with central differences (gradcheck's tolerance).

    ``fd`` maps a tensor name to a VALUE, or to a string: the reason it was not checked."""
    rtol, atol = FD_TOLERANCE
    source = predicted.get("returned") if predicted.get("returned") is not None else predicted.get("grads") or {}
    rows = []
    reasons: dict[str, list[str]] = {}
    for name, value in fd.items():
        if isinstance(value, str):
            reasons.setdefault(value, []).append(name)
    for reason, names in reasons.items():
        rows.append(Row("fd", "fd " + ", ".join(names), True, None, None, reason, skipped=True))
    for name, value in fd.items():
        if isinstance(value, str):
            continue
        p = source.get(name)
        if p is None:  # no gradient reaches it: the function does not depend on it
            p = {"shape": value["shape"], "value": _zeros_like(value["value"])}
        diff = _Diff(rtol, atol, "float64", other="finite differences")
        diff.value(name, p, value)
        rows.append(_row("fd", f"fd {name}", diff))
    return rows


def _zeros_like(v):
    if isinstance(v, list):
        return [_zeros_like(x) for x in v]
    return 0.0
