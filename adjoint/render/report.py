"""What the glanceable report says, decided once for every output (terminal, notebook HTML).

A report answers, in this order, what a person opened it for:

1. the **hook calls**, in firing order, each with what it was handed and what it returned
   (grouped by step when the variant runs several forwards and backwards);
2. **what the hooks changed**: every ``.grad`` (and ``autograd.grad`` result, and the loss)
   that differs from the same variant with its hooks only observing (:mod:`adjoint.answer.effects`),
   before -> after;
3. the **grads** (``.grad`` after the run, and ``autograd.grad``'s returned values);
4. the forward values and the adjoint recursion (the multipliers at module boundaries)
   only when asked for or when they are short.

Nothing is said twice: what every variant shares (the loss, the forward values, a ``.grad``
with the same value as in the first variant, a note) is said once. This module only selects
and groups; :mod:`adjoint.render.console` and :mod:`adjoint.render.html` draw.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from adjoint.answer.effects import Effects, hook_effects
from adjoint.values.exact import Exact
from adjoint.answer.prediction import Boundary, HookRecord, Prediction, VariantPrediction
from adjoint.answer.silent import silent_hooks, unkept_grads
from adjoint.values.arith import same

#: forward values are shown without --values when there are at most this many, each this small
SHORT_VALUES = 6
SHORT_ELEMENTS = 4
#: the recursion is shown without --recursion for at most this many module boundaries
SHORT_BOUNDARIES = 3


@dataclass(frozen=True)
class Options:
    """What the reader asked for. ``values``/``recursion``: True show, False hide, None when short."""

    exact: bool = False
    values: bool | None = None
    recursion: bool | None = None


@dataclass
class Call:
    """A hook call numbered in firing order, as a report shows it."""

    number: int                       # firing order over the whole variant, 1-based
    hook: HookRecord


@dataclass
class Group:
    """Consecutive calls of one phase: a forward pass or one backward step."""

    title: str | None                 # None when the variant has one group only
    calls: list[Call]
    grads_after: dict | None = None   # a stepped variant's backward: .grad right after it


@dataclass
class VariantView:
    """One variant's part of a report, with what it shares with other variants."""

    v: VariantPrediction
    groups: list[Group]
    effects: Effects
    loss: Exact | None                # None: said in the header (shared) or there is none
    grads: dict                       # the .grad values to print
    same_grads: list[str]             # names whose .grad equals the reference variant's
    returned: dict | None             # autograd.grad's results
    values: dict | None               # forward values to print (None: not shown)
    values_same_as: str | None        # the values equal those of this earlier variant
    boundaries: list[Boundary] | None  # the recursion to print (None: not shown)
    boundaries_same_as: str | None
    notes: list[str]                  # variant notes not already said by an earlier variant
    silent: list = field(default_factory=list)     # hooks that never fired, with the reason (adjoint.answer.silent)
    unkept: list = field(default_factory=list)     # non-leaf names whose .grad stays None (no retain_grad)
    earlier_losses: list = field(default_factory=list)   # with ``loss``: the earlier forwards' losses, in order


@dataclass
class ReportView:
    """A report laid out for printing: the problem's variants and what is hidden."""

    name: str
    description: str
    numeric: bool
    loss: Exact | None                # the loss when every variant has the same one
    reference: str | None             # the variant the others' grads are compared with
    variants: list[VariantView] = field(default_factory=list)
    hidden_values: int = 0            # forward values not shown (how many), for the hint line
    hidden_boundaries: int = 0
    mode: str = "exact"               # the prediction's answer mode
    earlier_losses: list = field(default_factory=list)   # with ``loss``: the earlier forwards' losses, in order


def build(pred: Prediction, opts: Options = Options()) -> ReportView:
    problem = pred.problem
    ok = [v for v in pred.variants if v.error is None]
    losses = [[*v.earlier_losses, v.loss] for v in ok]   # every forward's, the last one the variant's loss
    shared = len(ok) > 1 and all(len(x) == len(losses[0]) and all(map(_same, losses[0], x)) for x in losses)
    shared_loss = ok[0].loss if shared else None
    report = ReportView(problem.name, " ".join((problem.description or "").split()), pred.numeric, shared_loss,
                        ok[0].name if len(ok) > 1 else None, mode=pred.mode,
                        earlier_losses=list(ok[0].earlier_losses) if shared else [])
    ref = ok[0] if ok else None
    said_notes: set[str] = set()
    for v in pred.variants:
        report.variants.append(_variant(v, ref, shared_loss, said_notes, opts, report))
    return report


def variant_view(v: VariantPrediction, opts: Options = Options()) -> VariantView:
    """One variant on its own (a notebook showing ``pred["legacy"]``): everything it has."""
    report = ReportView("", "", False, None, None)
    return _variant(v, None, None, set(), opts, report)


def _variant(v: VariantPrediction, ref: VariantPrediction | None, shared_loss, said_notes: set, opts: Options,
             report: ReportView) -> VariantView:
    groups = _groups(v)
    if v.error is not None:
        return VariantView(v, groups, Effects(ran=False), None, {}, [], None, None, None, None, None, [],
                           silent_hooks(v))
    effects = hook_effects(v)
    is_ref = ref is None or v is ref
    grads, same = {}, []
    for name, value in v.grads.items():
        if not is_ref and name in ref.grads and _same(ref.grads[name], value):
            same.append(name)
        else:
            grads[name] = value
    values, values_same = _values(v, ref, is_ref, opts, report)
    boundaries, boundaries_same = _boundaries(v, ref, is_ref, opts, report)
    notes = []
    for n in v.notes + v.kinks:
        if n not in said_notes and n not in notes and not _said_with_its_place(n, v.notes + v.kinks):
            notes.append(n)
    said_notes.update(notes)
    unkept = unkept_grads(v)
    if not is_ref and unkept == unkept_grads(ref):
        unkept = []   # said once, in the first variant
    own_loss = shared_loss is None
    return VariantView(v, groups, effects, v.loss if own_loss else None, grads, same, v.returned,
                       values, values_same, boundaries, boundaries_same, notes, silent_hooks(v), unkept,
                       list(v.earlier_losses) if own_loss else [])


def loss_note(earlier: list, show, scope: str | None = None) -> str:
    """What follows ``loss = X`` (empty: nothing): ``scope`` (every variant), and with several
    forwards that X is the last one's, the earlier ones in order, each written by ``show``."""
    said = [scope] if scope else []
    if earlier:
        said.append(f"the last of {len(earlier) + 1} forwards; before it: " + ", ".join(show(x) for x in earlier))
    return "; ".join(said)


def recursion_caveat(vv: VariantView) -> str | None:
    """What to say under the recursion of a variant whose hooks changed a gradient: each lambda_in
    there is J^T lambda_out through the module's own nodes as if no hook inside it ran, so it
    can differ from what PyTorch passed on (the root's from the inputs' .grad)."""
    if not vv.effects.changed_anything:
        return None
    return ("the hooks changed gradients in this variant: a lambda_in leaves out what the hooks inside "
            "its module did, so it can differ from what PyTorch passed on (the hook calls and the final "
            ".grad above say that, and --json's adjoints)")


def _values(v, ref, is_ref, opts: Options, report: ReportView):
    short = len(v.values) <= SHORT_VALUES and all(x.size <= SHORT_ELEMENTS for x in v.values.values())
    show = opts.values if opts.values is not None else short
    if not show:
        report.hidden_values = max(report.hidden_values, len(v.values))
        return None, None
    if not is_ref and _same_dict(ref.values, v.values):
        return None, ref.name
    return dict(v.values), None


def _boundaries(v, ref, is_ref, opts: Options, report: ReportView):
    show = opts.recursion if opts.recursion is not None else len(v.boundaries) <= SHORT_BOUNDARIES
    if not show:
        report.hidden_boundaries = max(report.hidden_boundaries, len(v.boundaries))
        return None, None
    if not is_ref and _same_boundaries(ref.boundaries, v.boundaries):
        return None, ref.name
    return list(v.boundaries), None


def _groups(v: VariantPrediction) -> list[Group]:
    """The calls in firing order, cut into forward stretches and backward steps.

    The engine's record says which calls each backward step made (``Pass.calls``, a range of
    the call log, which ``hook_calls`` follows one to one), so a step in which no hook fired
    still gets its place (and, in a stepped variant, its grads)."""
    calls = [Call(i, h) for i, h in enumerate(v.hook_calls, 1)]
    steps = v.run.passes if v.run is not None else []
    stepped = v.passes is not None and len(steps) > 1
    groups: list[Group] = []

    def by_phase(lo: int, hi: int) -> None:
        for c in calls[lo:hi]:
            if not groups or groups[-1].title != c.hook.phase or groups[-1].grads_after is not None:
                groups.append(Group(c.hook.phase, []))
            groups[-1].calls.append(c)

    pos = 0
    for i, step in enumerate(steps):
        by_phase(pos, step.calls.start)
        if stepped or len(step.calls):
            groups.append(Group(f"backward {i + 1}" if stepped else "backward", calls[step.calls.start:step.calls.stop],
                                v.passes[i].grads if stepped else None))
        pos = step.calls.stop
    by_phase(pos, len(calls))
    if stepped and groups and groups[-1].grads_after is not None and _same_dict(groups[-1].grads_after, v.grads):
        groups[-1].grads_after = None  # the last step's grads are the final ones, said once below
    forward_groups = [g for g in groups if g.title == "forward"]
    if len(forward_groups) > 1:
        for i, g in enumerate(forward_groups, 1):
            g.title = f"forward {i}"
    if len(groups) == 1 and not stepped:
        groups[0].title = None
    return groups


def _said_with_its_place(note: str, notes: list) -> bool:
    """A note that another note (or kink) says too, with the node and the place (``NODE at
    FILE:L:C: note``): said once, located."""
    return any(n != note and n.endswith(": " + note) for n in notes)


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, tuple) or isinstance(b, tuple):
        return isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b) and all(
            _same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a.shape == b.shape and same(a, b)


def _same_dict(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)


def _same_boundaries(a: list[Boundary], b: list[Boundary]) -> bool:
    return len(a) == len(b) and all(
        x.callid == y.callid and _same(x.grad_output, y.grad_output) and _same(x.grad_input, y.grad_input)
        for x, y in zip(a, b))
