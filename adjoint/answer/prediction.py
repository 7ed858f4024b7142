"""What ``adjoint solve`` answers: plain records, and their JSON form (the contract).

Each record has a short ``repr``; a :class:`Prediction` is indexed by variant name
(``pred["legacy"]``). How a record shows itself in a notebook, and the picture of a variant,
are the render layer's (:mod:`adjoint.render.notebook`): ``adjoint.load(...).solve()`` hands
back these records with that display added."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from functools import partial
from typing import TYPE_CHECKING, Callable

import numpy as np

from adjoint.values.numbers import symbolic
from adjoint.values.exact import Exact, nest
from adjoint.engine.graph import Typed
from adjoint.values.complexes import Cx, complex_json
from adjoint.values.numbers.gaussian import Gaussian
from adjoint.values.shown import signed_floats
from adjoint.engine.adjoints import Boundary
from adjoint.engine.function_checks import FunctionCheck

if TYPE_CHECKING:
    from adjoint.engine.passes import VariantRun


class _DerivationRecord:
    """:mod:`adjoint.derivation.record`, imported on first attribute access: the annotations
    below name its types (``typing.get_type_hints`` resolves them), but a solve that never asks
    for a derivation does not pay at start-up for creating its record classes."""

    def __getattr__(self, name: str):
        from adjoint.derivation import record

        return getattr(record, name)


_record = _DerivationRecord()


@dataclass(repr=False)
class HookRecord:
    """One hook call of the prediction, as reported: what it was handed and returned."""

    index: int                 # position in the hook list it was declared in
    label: str
    kind: str
    on: str                    # module | tensor | node
    target: str
    k: int | None              # module hooks: which call of the module fired (1-based)
    calls_of_module: int       # how many times that module was called
    phase: str                 # forward | backward
    node: str | None           # autograd node it ran at (backward hooks)
    args: dict                 # argument name -> Exact | None | tuple of those
    returned: object
    why: list[str] = field(default_factory=list)
    raised: bool = False       # the hook raised (the contract's ``"raised": true``)
    is_global: bool = False    # a global module hook (``"global": true``; ``target`` is the module that fired)
    silenced: bool = False     # it raised and PyTorch swallowed the error with a warning (``"silenced": true``)
    wrote: tuple = ()          # what its body wrote in place (runtime.CallRecord.wrote)
    recomputed: bool = False   # made by checkpoint's recomputation (``"recomputed": true``)
    reentrant: int = 0         # depth of the reentrant backward it ran in (``"reentrant": N``; absent at 0)
    declared_raise: str | None = None   # the class its ``raises:`` raises (None: its body raised, if it did)

    def __repr__(self) -> str:
        where = f" at {self.node}" if self.node else ""
        returned = "raised" if self.raised else ("returned a value" if self.returned is not None else "observed")
        return f"<HookRecord {self.kind} on {self.on} {self.target!r}{where}: {returned}>"


@dataclass
class ErrorRecord:
    """PyTorch raised while running the variant (a prediction, not bad input)."""

    type: str
    message: str
    during: str                       # forward | backward
    after_call: int | None            # index in hook_calls of the last call made before it left PyTorch
    waits: dict | None = None         # DDP: {"for": [ranks], "in": what}: blocked in a collective those ranks never join
    registering: str | None = None    # the hook whose registration PyTorch refused (the report names it; not in JSON)

    def to_json(self) -> dict:
        out = {"type": self.type, "message": self.message, "during": self.during, "after_call": self.after_call}
        if self.waits is not None:
            out["waits"] = dict(self.waits)
        return out


@dataclass(repr=False)
class PassRecord:
    """One backward step of ``steps``: the calls it made, the grads right after it."""

    hook_calls: list
    grads: dict
    returned: dict | None
    leaf_values: dict | None = None   # leaf name -> value after the pass, for leaves a hook wrote

    def __repr__(self) -> str:
        return f"<PassRecord: {_count(len(self.hook_calls), 'hook call')}, {_count(len(self.grads), 'grad')}>"

    def to_json(self, style: JsonStyle | None = None, leaves: bool = False) -> dict:
        """``leaves``: the run wrote a leaf, so this pass has ``leaf_values`` too (contract v3 9:
        "after the run and in each passes[i]"), ``{}`` before any hook wrote one."""
        out = {"hook_calls": [hook_json(h, style) for h in self.hook_calls],
               "grads": {k: value_json(v, style) for k, v in self.grads.items()}}
        # every pass has its returned, as the answer's format lists it: {} for a backward() pass
        out["returned"] = {k: value_json(v, style) for k, v in (self.returned or {}).items()}
        if self.leaf_values or leaves:
            out["leaf_values"] = {k: value_json(v, style) for k, v in (self.leaf_values or {}).items()}
        return out


@dataclass(repr=False)
class VariantPrediction:
    """The prediction for one variant: loss, gradients, hook calls, values and notes."""

    name: str
    method: str
    root: str
    loss: Exact | None
    values: dict[str, Exact]
    boundaries: list[Boundary]
    grads: dict[str, Exact | None]
    returned: dict[str, Exact | None] | None
    hook_calls: list[HookRecord]
    notes: list[str]
    functions: list[FunctionCheck]
    node_order: list[str]
    symbolic: bool
    kinks: list = field(default_factory=list)    # PyTorch's conventions at kinks the forward met (texts)
    run: VariantRun | None = None     # the engine's record of the run
    carried: dict = field(default_factory=dict)  # tensor name -> gradient PyTorch carries there (hooks
                                                 # included; None where none arrives), as its grad_fn sees it
    passes: list | None = None        # PassRecord per backward step (variants with steps)
    error: ErrorRecord | None = None
    warnings: list = field(default_factory=list)   # adjoint.engine.warns.Warned: every warning PyTorch issues, in order
    deriver: Callable | None = field(default=None, repr=False)   # VariantPrediction -> VariantDerivation
    _derivation: _record.VariantDerivation | None = field(default=None, repr=False)
    leaf_values: dict = field(default_factory=dict)   # leaf name -> value after the run, for leaves a hook wrote
    registered: dict = field(default_factory=dict)   # registered steps: name -> hooks in that module dict then
    reads: list = field(default_factory=list)   # ReadRecord per read step (adjoint.engine.saved_reads)
    earlier_losses: list = field(default_factory=list)   # steps: the loss of each forward before the last, in order
    value_meta: dict = field(default_factory=dict)   # name -> (requires_grad, grad_fn) of each forward value
                                                         # (``loss`` is the last forward's)

    @property
    def derivation(self) -> _record.VariantDerivation:
        """The derivation of this variant (adjoint.derivation), computed on first use: ``solve --json``
        never pays for it."""
        if self._derivation is None:
            self._derivation = self.deriver(self)
        return self._derivation

    def __repr__(self) -> str:
        if self.error is not None:
            return (f"<VariantPrediction {self.name!r}: {self.error.type} during {self.error.during}, "
                    f"{_count(len(self.hook_calls), 'hook call')}>")
        return (f"<VariantPrediction {self.name!r}: {_count(len(self.hook_calls), 'hook call')}, "
                f"{_count(len(self.grads), 'grad')}>")

    def to_json(self, style: JsonStyle | None = None) -> dict:
        """The contract's JSON of this variant (``style``: how values are written, see
        :class:`JsonStyle`; by default the contract's, with one printer for its closed forms)."""
        style = style if style is not None else JsonStyle(shared_printer())
        warned = [w.to_json() for w in self.warnings]
        if self.error is not None:
            out = {"error": self.error.to_json(),
                   "hook_calls": [hook_json(h, style) for h in self.hook_calls], "warnings": warned}
            if self.registered:
                out["registered"] = dict(self.registered)
            if self.reads:
                out["reads"] = reads_json(self.reads, style)
            return out
        out = {
            "loss": value_json(self.loss, style) if self.loss is not None else None,
            "values": {k: _with_meta(value_json(v, style), self.value_meta.get(k)) for k, v in self.values.items()},
            "adjoints": {b.callid: {"grad_output": [value_json(g, style) for g in b.grad_output],
                                    "grad_input": [value_json(g, style) for g in (b.passed or b.grad_input)]}
                         for b in self.boundaries},
            "grads": {k: value_json(v, style) for k, v in self.grads.items()},
            "hook_calls": [hook_json(h, style) for h in self.hook_calls],
        }
        if self.returned is not None:
            out["returned"] = {k: value_json(v, style) for k, v in self.returned.items()}
        if self.passes is not None:
            out["passes"] = [p.to_json(style, leaves=bool(self.leaf_values)) for p in self.passes]
        out["warnings"] = warned
        if self.leaf_values:
            out["leaf_values"] = {k: value_json(v, style) for k, v in self.leaf_values.items()}
        if self.registered:
            out["registered"] = dict(self.registered)
        if self.reads:
            out["reads"] = reads_json(self.reads, style)
        return out


def reads_json(reads: list, style: JsonStyle | None = None) -> dict:
    """The answer's ``reads``: per read step's ``as:`` name, what it read (docs/format.md, "Reading
    saved tensors")."""
    out = {}
    for r in reads:
        entry = {"read": r.expr, "step": r.step,
                 "value": r.value if isinstance(r.value, bool) or r.value is None else value_json(r.value, style)}
        if not isinstance(r.value, bool):
            entry.update({"is": sorted(r.is_names), "grad_fn": r.grad_fn, "grad_fn_of": sorted(r.grad_fn_of),
                          "dtype": r.dtype})
        out[r.name] = entry
    return out


@dataclass(repr=False)
class Prediction:
    """The prediction for a whole problem: one VariantPrediction per variant."""

    problem: object
    variants: list[VariantPrediction]
    numeric: bool = False
    mode: str = "exact"               # the answer mode: exact, float64 or structure (docs/values.md)

    def variant(self, name: str) -> VariantPrediction:
        """The variant called ``name``; a KeyError naming the variants there are otherwise."""
        for v in self.variants:
            if v.name == name:
                return v
        raise KeyError(f"no variant named {name!r}; this prediction has: {', '.join(self.names)}")

    @property
    def names(self) -> list[str]:
        return [v.name for v in self.variants]

    def __getitem__(self, key: str | int) -> VariantPrediction:
        """``pred["legacy"]`` (by name) or ``pred[0]`` (in file order)."""
        if isinstance(key, str):
            return self.variant(key)
        return self.variants[key]

    def __iter__(self):
        return iter(self.variants)

    def __len__(self) -> int:
        return len(self.variants)

    def __contains__(self, name: object) -> bool:
        return name in self.names

    def __repr__(self) -> str:
        return f"<Prediction {self.problem.name!r}: {_count(len(self.variants), 'variant')} ({', '.join(self.names)})>"

    def to_json(self, lazy: bool = False, compact: bool = False) -> dict:
        """The contract's JSON. ``lazy``: each tensor's ``value`` and ``exact`` lists are left as
        callables making them (:func:`adjoint.render.jsontext.dump` writes such a document one
        tensor at a time, so the whole text never has to be in memory). ``compact``: a rational
        tensor is written over its one shared denominator instead (``solve --json --compact``,
        see :func:`value_json`)."""
        if self.mode == "exact":   # counted before any text is made (adjoint.answer.text_budget)
            from adjoint.answer.text_budget import check_exact_text
            check_exact_text(self.variants, getattr(self.problem, "loc", None))
        style = JsonStyle(shared_printer(), lazy, compact)
        doc = {"problem": self.problem.name,
               "variants": {v.name: v.to_json(style) for v in self.variants}}
        if compact:
            doc["compact"] = True
        return doc


@dataclass(repr=False)
class RanksPrediction:
    """One variant of a distributed file: the usual variant answer of every rank."""

    name: str
    ranks: list

    def __repr__(self) -> str:
        return f"<RanksPrediction {self.name!r}: {len(self.ranks)} ranks>"

    def to_json(self, style: JsonStyle | None = None) -> dict:
        return {"ranks": [vp.to_json(style) for vp in self.ranks]}


def shared_printer():
    """One SymPy printer for a whole prediction's closed forms (they share subexpressions: each
    is printed once), or None when SymPy was never needed."""
    if not symbolic.loaded():
        return None
    return symbolic.memo_printer()


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


@dataclass(frozen=True)
class JsonStyle:
    """How a prediction's values are written: ``printer``, one SymPy printer shared by every
    closed form (None when SymPy was never needed); ``lazy``, each tensor's lists left as
    callables that make them (see :func:`value_json`); ``compact``, rational tensors over their
    shared denominator (``solve --json --compact``)."""

    printer: object = None
    lazy: bool = False
    compact: bool = False


_CONTRACT = JsonStyle()


def value_json(v, style: JsonStyle | None = None) -> dict | list | float | int | str | None:
    """A value as the contract writes it: VALUE for a tensor (shape, decimal value, exact text;
    null where a mode or a free symbol gives none), a list for a tuple, an object for a dict (a
    hook's kwargs), a plain number for a Python number, a string as is. ``style``: the shared
    printer, and whether the lists are made lazily (callables the JSON writer calls when it
    reaches them) or a rational tensor is written compactly (:func:`compact_json`)."""
    style = style if style is not None else _CONTRACT
    printer = style.printer
    if v is None:
        return None
    if isinstance(v, tuple):
        return [value_json(x, style) for x in v]
    if isinstance(v, dict):
        return {k: value_json(x, style) for k, x in v.items()}
    if isinstance(v, Fraction):
        return int(v) if v.denominator == 1 else float(v)
    if isinstance(v, Gaussian):   # a complex Python number (a hook returned 2j): [re, im], as a complex VALUE's pairs
        return [value_json(v.re, style), value_json(v.im, style)]
    if isinstance(v, (str, bool, int)):   # int: a key stash() returned
        return v
    if getattr(v, "printed_number", False):   # a hook returned x.item() of an irrational value: its float
        return v.value
    if isinstance(v, Typed) and v.dtype in ("complex64", "complex128"):   # adjoint.values.complexes
        return complex_json(v.value, v.dtype, printer) if v.value is not None and v.value.floats is not None else \
            {"shape": list(v.value.shape), "value": None, "exact": None, "dtype": v.dtype}
    if isinstance(v, Cx):   # a complex value: a gradient knows its tensor's dtype (adjoint.engine.complex_grad)
        return complex_json(v, v.dtype, printer)
    if isinstance(v, Typed) and v.dtype in ("float32", "float64"):   # a complex tensor's real view of the other width
        return {"shape": list(v.value.shape), "value": v.value.floats(), "exact": v.value.strings(), "dtype": v.dtype}
    if isinstance(v, Typed):   # an integer or bool tensor (--structure: no values, as for every tensor)
        return {"shape": list(v.value.shape), "value": v.elements(), "exact": v.value.strings(), "dtype": v.dtype}
    if not isinstance(v, Exact):  # the float64 and structure modes' values
        if style.lazy:
            return {"shape": list(v.shape), "value": v.floats, "exact": v.strings}
        return {"shape": list(v.shape), "value": v.floats(), "exact": v.strings()}
    if style.compact and v.rational:
        if style.lazy:   # the whole VALUE made when the writer reaches it, its text written once
            return Deferred(partial(compact_json, v), (id(v), "compact"))
        return compact_json(v)
    if style.lazy:
        return {"shape": list(v.shape), "value": Deferred(partial(signed_floats, v), (id(v), "value")),
                "exact": Deferred(partial(v.strings, printer), (id(v), "exact"))}
    return {"shape": list(v.shape), "value": signed_floats(v), "exact": v.strings(printer)}


def _with_meta(doc, meta):
    """A forward value's VALUE with its ``requires_grad`` and ``grad_fn`` (the type name of the
    node, as ``type(t.grad_fn).__name__``, or null) as the pass left them (contract v3)."""
    if meta is None or doc is None:
        return doc
    extra = {"requires_grad": meta[0], "grad_fn": meta[1]}
    if isinstance(doc, Deferred):   # a compact VALUE made when written: the fields added then
        # its text is kept per key: names sharing a value (a module's output, y) differ in their meta
        return Deferred(lambda: {**doc(), **extra}, (doc.text_key, "meta", meta[0], meta[1]))
    return {**doc, **extra}


def compact_json(v: Exact) -> dict:
    """A rational tensor over its one shared denominator: ``{"shape", "den", "num"}``, element i
    being ``num[i] / den`` (``den`` a decimal string, ``num`` nested JSON integers of any size,
    the tensor's layout; in lowest terms as a whole: no factor divides den and every num); ``"negative_zeros"``: the row-major indices of the zeros PyTorch holds
    as -0.0, when there are any. What the contract's ``value`` and ``exact`` say, without a
    decimal and a fraction's text per element (``solve --json --compact``)."""
    qa = v.qa
    ints, den = qa.flat_ints(), qa.den
    common = math.gcd(den, *ints)   # a matrix product's numerators are not reduced until read
    if common > 1:
        ints, den = [n // common for n in ints], den // common
    out = {"shape": list(v.shape), "den": str(den), "num": nest(ints, tuple(v.shape))}
    if v.negzero is not None and np.any(v.negzero):
        out["negative_zeros"] = np.flatnonzero(np.broadcast_to(v.negzero, v.shape)).tolist()
    return out


class Deferred:
    """A tensor's ``value`` or ``exact`` list in a lazy ``to_json``: made when called (by the JSON
    writer, when it reaches it). ``text_key`` names that tensor's field, the same wherever the
    tensor appears in the answer (a hook's argument is often also a module's adjoint or a final
    grad): a writer may write the text it made for the first appearance again
    (:func:`adjoint.render.jsontext.dump`). The key holds while the document that holds this
    object does (it keeps the tensor alive)."""

    __slots__ = ("make", "text_key")

    def __init__(self, make, text_key):
        self.make, self.text_key = make, text_key

    def __call__(self):
        return self.make()


def hook_json(h: HookRecord, style: JsonStyle | None = None) -> dict:
    out = {"hook": h.index, "label": h.label, "kind": h.kind, "target": h.target,
           "args": {k: value_json(v, style) for k, v in h.args.items()},
           "returned": value_json(h.returned, style)}
    if h.on in ("module", "global") and h.calls_of_module > 1:
        out["call"] = h.k
    if h.is_global:
        out["global"] = True
    if h.raised:
        out["raised"] = True
    if h.silenced:
        out["silenced"] = True
    if h.recomputed:
        out["recomputed"] = True
    if h.reentrant:
        out["reentrant"] = h.reentrant
    if h.kind in ("pack", "unpack"):
        out["node"] = h.node
    return out
