"""The terminal report of ``adjoint solve``, designed for a glance (what it says and in which
order: :mod:`adjoint.render.report`).

Drawn with `rich`: it measures the terminal and wraps every value in its own column (a long
tensor folds under itself, not under the names), colours only when the output is a terminal
(none when piped, with ``NO_COLOR`` set, or ``TERM=dumb``; ``FORCE_COLOR`` forces it), and
exports the same report as SVG for the screenshots. Every piece of text that comes from the
problem file goes through :func:`adjoint.render.safetext.terminal_safe` and into a ``rich.text.Text``
(never parsed as rich markup), so a file cannot style, move or rewrite the terminal.
"""

from __future__ import annotations

import io
import re

from rich.console import Console, Group as Stack
from rich.padding import Padding
from rich.rule import Rule
from rich.table import Table
from rich.text import Text

from adjoint.answer.prediction import Boundary, HookRecord, Prediction
from adjoint.render.safetext import terminal_safe
from adjoint.render import values as fmt
from adjoint.render.report import Options, ReportView, VariantView, build, loss_note, recursion_caveat
from adjoint.render.explain import silent_what, unkept_line

#: spaces at the end of a line (before any closing colour codes)
_TRAILING = re.compile(r"[ ]+(?=(?:\x1b\[[0-9;]*m)*$)", re.MULTILINE)

# styles: a small fixed palette that reads on dark and light terminals
TITLE = "bold"
HEAD = "bold underline"
KIND = "bold cyan"
NODE = "magenta"
NUMBER = "bold"
DIM = "dim"
CHANGED = "bold yellow"
ERROR = "bold red"
NONE = "italic dim"


def console(file=None, width: int | None = None, color: bool | None = None, record: bool = False) -> Console:
    """A rich Console for the report. ``color`` None: decided by the output (a terminal, NO_COLOR)."""
    kwargs = dict(file=file, width=width, highlight=False, markup=False, emoji=False, record=record,
                  force_jupyter=False, legacy_windows=False, soft_wrap=False)
    if color is True:
        kwargs.update(force_terminal=True, color_system="standard")
    elif color is False:
        kwargs.update(no_color=True, color_system=None)
    return Console(**kwargs)


def render(pred: Prediction, opts: Options = Options(), width: int = 100, color: bool = False) -> str:
    """The report as a string (no colour unless asked for), ``width`` columns wide."""
    buf = io.StringIO()
    print_report([pred], opts, console(buf, width, color))
    return buf.getvalue()


def svg(pred: Prediction, opts: Options = Options(), width: int = 100, title: str = "adjoint solve") -> str:
    """The coloured report as an SVG picture of a terminal (the screenshots in docs/img)."""
    out = console(io.StringIO(), width, color=True, record=True)
    out.print(report(build(pred, opts), opts))
    return out.export_svg(title=title)


def print_report(preds: list[Prediction], opts: Options, out: Console) -> None:
    """Print the reports of ``preds`` on ``out``, without the spaces rich pads table cells with."""
    with out.capture() as captured:
        for i, pred in enumerate(preds):
            if i:
                out.print()
            if pred.problem.distributed is not None:   # DDP: the ranks side by side
                from adjoint.render.ranks import ranks_report
                out.print(ranks_report(pred, opts))
                continue
            out.print(report(build(pred, opts), opts))
    out.file.write(_TRAILING.sub("", captured.get()))
    out.file.flush()


def report(r: ReportView, opts: Options):
    """Every renderable of one problem's report, in order."""
    parts: list = []
    head = Text.assemble((_safe(r.name), TITLE), (f"  {len(r.variants)} variant{'s' if len(r.variants) != 1 else ''}"
                                                   + ("  (numeric)" if r.numeric else "")
                                                   + {"exact": "", "float64": "  (float64: decimals, not exact)",
                                                      "structure": "  (structure: shapes, no values)"}[r.mode], DIM))
    parts.append(head)
    if r.description:
        parts.append(Text(_safe(r.description), DIM))
    if r.loss is not None:
        parts.append(_loss(r.loss, r.earlier_losses, opts, "every variant"))
    for vv in r.variants:
        parts.append(Text(""))
        parts.extend(_variant(vv, r, opts))
    hint = _hint(r, opts)
    if hint:
        parts.append(Text(""))
        parts.append(Text(hint, DIM))
    return Stack(*parts)


def _variant(vv: VariantView, r: ReportView, opts: Options) -> list:
    v = vv.v
    out: list = [Rule(Text(_safe(v.name), TITLE), align="left", characters="─", style=DIM)]
    if v.error is not None:
        out.append(Text.assemble(("PyTorch raises ", ERROR), (f"{_safe(v.error.type)}: {_safe(v.error.message)}", ERROR),
                                 (f"  during the {v.error.during}" + (
                                     f", registering {_safe(v.error.registering)}"
                                     if getattr(v.error, "registering", None) else "") + (
                                     f", after call #{v.error.after_call + 1}" if v.error.after_call is not None
                                     else ", before any hook call"), DIM)))
    if vv.loss is not None:
        out.append(_loss(vv.loss, vv.earlier_losses, opts))
    out.extend(_calls(vv, opts))
    out.extend(_silent(vv))
    out.extend(_warnings(v))
    out.extend(_registered(v))
    out.extend(_reads(v, opts))
    if v.error is not None:
        return out
    out.extend(_changes(vv, opts))
    out.extend(_grads(vv, r, opts))
    out.extend(_functions(vv))
    if vv.values is not None or vv.values_same_as is not None:
        out.append(Text("forward values", HEAD))
        if vv.values_same_as is not None:
            out.append(Text(f"  as in {_safe(vv.values_same_as)}", DIM))
        else:
            out.append(_pairs([(name, fmt.value(x, opts.exact), None) for name, x in vv.values.items()]))
    if vv.boundaries is not None or vv.boundaries_same_as is not None:
        out.append(Text.assemble(("adjoint recursion", HEAD),
                                 ("  lambda_out = grad_output at a module's output; lambda_in = J^T lambda_out, "
                                  "hooks aside", DIM)))
        if vv.boundaries_same_as is not None:
            out.append(Text(f"  as in {_safe(vv.boundaries_same_as)}", DIM))
        else:
            out.append(_recursion(vv.boundaries, opts))
        caveat = recursion_caveat(vv)
        if caveat:
            out.append(_pad(Text(caveat, DIM), (0, 0, 0, 2)))
    if vv.notes:
        out.append(Text("why", HEAD))
        notes = Table.grid(padding=(0, 1))
        notes.add_column(no_wrap=True)
        notes.add_column()
        for n in vv.notes:
            notes.add_row(Text("  -", DIM), Text(_safe(n), DIM))
        out.append(notes)
    return out


def _loss(loss, earlier: list, opts: Options, scope: str | None = None) -> Text:
    """``loss = X``: with several forwards (steps), X is the last one's and the earlier ones follow."""
    said = loss_note(earlier, lambda x: fmt.value(x, opts.exact), scope)
    return Text.assemble("loss = ", fmt.value(loss, opts.exact), (f"  ({said})" if said else "", DIM))


# ----------------------------------------------------------------------------- hook calls

def _calls(vv: VariantView, opts: Options) -> list:
    out: list = [Text("hook calls", HEAD)]
    if not vv.groups:
        out.append(Text("  none: no hook fired", DIM))
        return out
    for g in vv.groups:
        if g.title is not None:
            out.append(Text(f" {g.title}", "bold dim"))
        if not g.calls:
            out.append(_pad(Text("no hook fired", DIM), (0, 0, 0, 4)))
        for c in g.calls:
            out.append(_call(c.number, c.hook, opts))
        if g.grads_after:
            out.append(_pad(Text(f".grad after {g.title}", DIM), (0, 0, 0, 4)))
            out.append(_pad(_pairs([(f"{n}.grad", fmt.value(x, opts.exact), None) for n, x in g.grads_after.items()]),
                            (0, 0, 0, 4)))
    return out


def _call(number: int, h: HookRecord, opts: Options):
    grid = Table.grid(padding=(0, 1))
    grid.add_column(justify="right", no_wrap=True, min_width=3)
    grid.add_column()
    grid.add_row(Text(f"#{number}", NUMBER), _call_title(h))
    rows = []
    for name, x in h.args.items():
        if h.kind == "post_accumulate_grad" and name == "tensor":
            # handed the leaf itself (the parameter), not a gradient: the record holds its .grad
            rows.append(("tensor", Text.assemble(_safe(h.target), (" itself (the leaf, not a gradient)", DIM)), None))
            rows.append((f"{h.target}.grad", fmt.value(x, opts.exact), None))
            continue
        rows.append((name, fmt.value(x, opts.exact), None))
    if h.raised:
        rows.append(("raises", f"{h.declared_raise} (the hook's raises:)" if h.declared_raise
                     else "the error reported above (its body raised)", ERROR))
    elif h.returned is not None:
        rows.append(("returned", fmt.value(h.returned, opts.exact), CHANGED))
    elif getattr(h, "wrote", ()):
        acts = "changes requires_grad" if all(w.startswith("requires_grad ") for w in h.wrote) else \
            "stores into kwargs" if all(w.startswith("stored ") for w in h.wrote) else "writes in place"
        rows.append(("returned", f"None ({acts})", CHANGED))
    else:
        rows.append(("returned", "None (observes)", NONE))
    body = [_pairs(rows, indent=0)]
    for w in h.why:
        body.append(Text(_safe(w), DIM))
    grid.add_row(Text(""), Stack(*body))
    return grid


def _warnings(v) -> list:
    """The warnings PyTorch issues, one line each, in order."""
    if not v.warnings:
        return []
    out: list = [Text(f"warnings ({len(v.warnings)})", HEAD)]
    for w in v.warnings:
        out.append(Text.assemble("  ", (_safe(w.category), ERROR), (f" during the {w.during}: ", DIM),
                                 _safe(w.message)))
    return out


def _registered(v) -> list:
    """The ``registered`` steps' counts: how many hooks a module's dict held at that point."""
    if not getattr(v, "registered", None):
        return []
    out: list = [Text("hooks registered (registered steps)", HEAD)]
    for name, count in v.registered.items():
        out.append(Text.assemble("  ", (_safe(name), KIND), f" = {count}"))
    return out


def _call_title(h: HookRecord) -> Text:
    t = Text()
    if h.is_global:
        t.append("global ", KIND)
    t.append(_safe(h.kind), KIND)
    if h.kind in ("pack", "unpack"):
        t.append(" (register_hooks on one saved tensor)" if h.on == "saved" else " (saved_tensors_hooks)", DIM)
        if h.target:
            t.append(" for ")
            t.append(_safe(h.target))
    elif h.on == "global" or h.is_global:
        t.append(" fired for module ")
        t.append(_safe(h.target or ""))
    elif h.on == "multi_grad":
        t.append(" on tensors ")
        t.append(_safe((h.target or "").replace(",", ", ")))
    else:
        t.append(f" on {h.on} ")
        t.append(_safe(h.target))
    if h.k is not None and h.calls_of_module > 1:
        t.append(f" (call {h.k})")
    if h.node:
        t.append(" at ", DIM)
        t.append(_safe(h.node), NODE)
    if h.phase == "forward":
        t.append("  [forward]", DIM)
    if getattr(h, "silenced", False):
        t.append("  raised, silenced by PyTorch (a warning)", DIM)
    if getattr(h, "recomputed", False):
        t.append("  [recomputed by checkpoint]", DIM)
    if getattr(h, "reentrant", 0):
        t.append(f"  [reentrant backward, depth {h.reentrant}]", DIM)
    if h.label:
        t.append("  ")
        t.append(_safe(h.label), DIM)
    return t


# ----------------------------------------------------------------------------- what changed, grads

def _changes(vv: VariantView, opts: Options) -> list:
    e = vv.effects
    if not e.ran:
        return []
    out: list = [Text.assemble(("what the hooks changed", HEAD),
                               ("  against the same run with every hook only observing", DIM))]
    if e.refused is not None:
        out.append(Text(f"  not computed: without the returned values the run is refused ({_safe(e.refused)})", DIM))
        return out
    if e.error is not None:
        out.append(Text(f"  without the returned values PyTorch would raise {_safe(e.error)}", CHANGED))
        return out
    if not e.changes:
        out.append(Text("  nothing: every result equals the observing-only run", DIM))
        return out
    rows = []
    for c in e.changes:
        label = {"grad": f"{c.name}.grad", "returned": f"{c.name} (returned)", "loss": "loss"}[c.what]
        ratio = f"  {fmt.ratio(c.ratio)}" if c.ratio is not None else ""
        rows.append((label, Text.assemble(fmt.value(c.before, opts.exact), (" → ", DIM),
                                          (fmt.value(c.after, opts.exact), CHANGED), (ratio, "bold")), None))
    out.append(_pairs(rows))
    if e.unchanged:
        out.append(Text("  unchanged: " + ", ".join(f"{_safe(n)}.grad" for n in e.unchanged), DIM))
    return out


def _grads(vv: VariantView, r: ReportView, opts: Options) -> list:
    v = vv.v
    out: list = []
    if vv.returned is not None:
        out.append(Text.assemble(("returned by torch.autograd.grad", HEAD)))
        out.append(_pairs([(n, fmt.value(x, opts.exact), None) for n, x in vv.returned.items()]))
    changed = {c.name for c in vv.effects.changes if c.what == "grad"}
    shown = {n: x for n, x in vv.grads.items() if n not in changed}
    title = "final .grad" + ("  (autograd.grad leaves .grad alone)" if v.method == "grad" else "")
    out.append(Text(title, HEAD))
    if shown:
        out.append(_pairs([(f"{n}.grad", fmt.value(x, opts.exact), NONE if x is None else None)
                           for n, x in shown.items()]))
    rest = []
    said = [n for n in vv.grads if n in changed]
    if said:
        rest.append(f"{_names(said)} as changed above")
    if vv.same_grads:
        rest.append(f"{_names(vv.same_grads)} as in {_safe(r.reference)}")
    if rest:
        out.append(Text("  " + "; ".join(rest), DIM))
    if not shown and not rest:
        out.append(Text("  none: nothing requires grad", DIM))
    if vv.unkept:
        out.append(_pad(Text(_safe(unkept_line(vv.unkept)), NONE), (0, 0, 0, 2)))
    if v.leaf_values:
        out.append(Text("leaf values after the run  (hooks wrote these leaves in place)", HEAD))
        out.append(_pairs([(n, fmt.value(x, opts.exact), CHANGED) for n, x in v.leaf_values.items()]))
    return out


def _reads(v, opts: Options) -> list:
    """The read steps' answers (``{read: ..., as: NAME}``), in step order."""
    if not v.reads:
        return []
    out: list = [Text("reads", HEAD)]
    for r in v.reads:
        out.append(Text.assemble(f"  {_safe(r.name)} = ", (_safe(r.expr), DIM), f"  (step {r.step})"))
        if isinstance(r.value, bool) or r.value is None:
            out.append(Text(f"    {r.value}", NONE if r.value is None else None))
            continue
        out.append(Text.assemble("    ", fmt.value(r.value, opts.exact)))
        facts = [f"is {_names(list(r.is_names))}" if r.is_names else "a new tensor"]
        facts.append(f"grad_fn {r.grad_fn}" + (f" (that of {_names(list(r.grad_fn_of))})" if r.grad_fn_of else "")
                     if r.grad_fn else "no grad_fn")
        out.append(Text("    " + _safe("; ".join(facts)), DIM))
    return out


def _silent(vv: VariantView) -> list:
    if not vv.silent:
        return []
    out: list = [Text("hooks that never fired", HEAD)]
    rows = Table.grid(padding=(0, 1))
    rows.add_column(no_wrap=True)
    rows.add_column()
    for s in vv.silent:
        rows.add_row(Text("  -", DIM), Text.assemble((_safe(silent_what(s)), KIND), "  ", (_safe(s.label), DIM),
                                                     "\n", _safe(s.reason)))
    out.append(rows)
    return out


def _functions(vv: VariantView) -> list:
    out = []
    for f in vv.v.functions:
        verdict = ("equals the true derivative", DIM) if f.matches else (
            f"DIFFERS from the true derivative {_safe(f.true)}", CHANGED)
        out.append(Text.assemble(f"custom Function {_safe(f.name)} ({_safe(f.callid)}): backward for "
                                 f"{_safe(f.slot)} = {_safe(f.declared)} ", verdict))
    return out


def _recursion(bs: list[Boundary], opts: Options):
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column()
    for b in bs:
        pad = "  " * (b.depth + 1)
        head = Text.assemble(pad, (_safe(b.callid), "bold"), (f" [{_safe(b.type)}]", DIM))
        outs = b.grad_output
        if all(g is None for g in outs):
            grid.add_row(head, Text("no gradient reaches its output" + ("s" if len(outs) > 1 else ""), DIM))
            continue
        for k, g in enumerate(outs):   # a tuple output: one multiplier per output (None: no gradient reaches it)
            label = "lambda_out = " if len(outs) == 1 else f"lambda_out[{k}] = "
            shown = fmt.value(g, opts.exact) if g is not None else "None (no gradient reaches it)"
            grid.add_row(head if k == 0 else Text(""), Text.assemble((label, DIM), shown))
        for i, (name, arg, g) in enumerate(zip(b.input_names, b.arg_names, b.grad_input)):
            requires = b.requires[i] if i < len(b.requires) else False
            shown = fmt.value(g, opts.exact) if g is not None else \
                "None (no gradient reaches it from the output)" if requires else "None (does not require grad)"
            grid.add_row(Text(f"{pad}  {_safe(arg)} <- {_safe(name)}", DIM),
                         Text.assemble(("lambda_in = ", DIM), shown))
    return grid


# ----------------------------------------------------------------------------- helpers

def _pairs(rows: list, indent: int = 2):
    """name  value rows, names aligned; the value column wraps within itself."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(no_wrap=True)
    grid.add_column(overflow="fold")
    for name, value, style in rows:
        cell = value if isinstance(value, Text) else Text(_safe(value), style or "")
        grid.add_row(Text(_safe(name)), cell)
    return _pad(grid, (0, 0, 0, indent)) if indent else grid


def _pad(renderable, pad):
    return Padding(renderable, pad, expand=False)


def _names(names: list[str]) -> str:
    return ", ".join(_safe(n) for n in names)


def _hint(r: ReportView, opts: Options) -> str:
    parts = []
    if r.hidden_values:
        parts.append(f"--values: the {r.hidden_values} forward values")
    if r.hidden_boundaries:
        parts.append(f"--recursion: the adjoints at {r.hidden_boundaries} module boundaries")
    if not opts.exact and r.mode == "exact":
        parts.append("--exact: exact values")
    return "; ".join(parts)


def _safe(text) -> str:
    return terminal_safe(str(text))
