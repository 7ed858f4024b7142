"""How the answer objects show themselves in a notebook: compact HTML tables (and Markdown).

The content and its order are the terminal report's (:mod:`adjoint.render.report`): hook
calls first, what the hooks changed, the grads; what every variant shares said once. Values
are decimals, with the exact value in the cell's tooltip (``title``). Everything from the
problem file is HTML-escaped. The graph picture is ``pred["legacy"].graph()`` (it needs
Graphviz, which the tables never do).
"""

from __future__ import annotations

import html

from adjoint.values.exact import Exact
from adjoint.answer.prediction import (Boundary, ErrorRecord, FunctionCheck, HookRecord, PassRecord, Prediction,
                                       RanksPrediction, VariantPrediction)
from adjoint.render import values as fmt
from adjoint.render.report import Options, ReportView, VariantView, build, loss_note, recursion_caveat, variant_view
from adjoint.render.explain import silent_what, unkept_line
from adjoint.render.safetext import terminal_safe

TABLE = 'style="border-collapse:collapse;margin:0.2em 0 0.6em 0;font-size:90%"'
TH = 'style="text-align:left;padding:2px 10px 2px 0;border-bottom:1px solid #ccc"'
TD = 'style="text-align:left;vertical-align:top;padding:2px 10px 2px 0"'
NUM = 'style="text-align:left;vertical-align:top;padding:2px 10px 2px 0;font-family:monospace"'
MUTED = 'style="color:#777"'
CHANGED = 'style="color:#b35900;font-weight:bold"'


def html_of(obj) -> str:
    """The HTML of any answer object (``_repr_html_`` of :mod:`adjoint.answer.prediction`)."""
    if isinstance(obj, Prediction):
        return prediction_html(obj)
    if isinstance(obj, VariantPrediction):
        return _div(_variant(variant_view(obj), None, heading=True))
    if isinstance(obj, HookRecord):
        return _div(_calls_table([(None, obj)]))
    if isinstance(obj, Boundary):
        return _div(_recursion([obj]))
    if isinstance(obj, PassRecord):
        rows = [(None, h) for h in obj.hook_calls]
        return _div((_calls_table(rows) if rows else "") + _pairs_table(
            [(f"{_e(n)}.grad", _cell(x)) for n, x in obj.grads.items()], ("tensor", ".grad after this backward")))
    if isinstance(obj, ErrorRecord):
        where = f"after call #{obj.after_call + 1}" if obj.after_call is not None else "before any hook call"
        return _div(f"<p style=\"color:#b00020\"><b>PyTorch raises {_e(obj.type)}:</b> {_e(obj.message)} "
                    f"<span {MUTED}>(during the {_e(obj.during)}, {where})</span></p>")
    if isinstance(obj, FunctionCheck):
        verdict = "equals the true derivative" if obj.matches else f"differs from the true derivative {_e(obj.true)}"
        return _div(f"<p>custom Function <b>{_e(obj.name)}</b> ({_e(obj.callid)}): backward for {_e(obj.slot)} = "
                    f"<code>{_e(obj.declared)}</code> {verdict}</p>")
    raise TypeError(f"no HTML for {type(obj).__name__}")


def prediction_html(pred: Prediction, opts: Options = Options()) -> str:
    if any(isinstance(v, RanksPrediction) for v in pred.variants):
        return _ranks_html(pred)
    r = build(pred, opts)
    out = [f"<p><b>{_e(r.name)}</b> <span {MUTED}>&middot; {len(r.variants)} variant"
           f"{'s' if len(r.variants) != 1 else ''}{' (numeric)' if r.numeric else ''}</span></p>"]
    if r.description:
        out.append(f"<p {MUTED}>{_e(r.description)}</p>")
    if r.loss is not None:
        out.append(_loss(r.loss, r.earlier_losses, "every variant"))
    for vv in r.variants:
        out.append(_variant(vv, r, heading=True))
    return _div("".join(out))


def _loss(loss, earlier: list, scope: str | None = None) -> str:
    """``loss = X``: with several forwards (steps), X is the last one's and the earlier ones follow."""
    said = loss_note(earlier, _cell, _e(scope) if scope else None)
    return f"<p>loss = {_cell(loss)}" + (f" <span {MUTED}>({said})</span>" if said else "") + "</p>"


def _ranks_html(pred: Prediction) -> str:
    """A distributed file's answer: each variant's ranks one after another (every rank's answer
    is an ordinary variant answer, shown as one)."""
    out = [f"<p><b>{_e(pred.problem.name)}</b> <span {MUTED}>&middot; {len(pred.variants)} variant"
           f"{'s' if len(pred.variants) != 1 else ''}, one answer per rank</span></p>"]
    for rp in pred.variants:
        for rank, vp in enumerate(rp.ranks):
            out.append(f"<h4 style=\"margin:0.8em 0 0.2em 0\">variant {_e(rp.name)}, rank {rank}</h4>")
            out.append(_variant(variant_view(vp), None, heading=False))
    return _div("".join(out))


def _variant(vv: VariantView, r: ReportView | None, heading: bool) -> str:
    v = vv.v
    out = [f"<h4 style=\"margin:0.8em 0 0.2em 0\">variant {_e(v.name)}</h4>"] if heading else []
    if v.error is not None:
        where = (f"after call #{v.error.after_call + 1}" if v.error.after_call is not None else "before any hook call")
        out.append(f"<p style=\"color:#b00020\"><b>PyTorch raises {_e(v.error.type)}:</b> {_e(v.error.message)} "
                   f"<span {MUTED}>(during the {_e(v.error.during)}, {where})</span></p>")
    if vv.loss is not None:
        out.append(_loss(vv.loss, vv.earlier_losses))
    rows = []
    for g in vv.groups:
        for c in g.calls:
            rows.append((c.number, c.hook, g.title))
    out.append(_calls_table([(n, h) for n, h, _ in rows], titles=[t for *_, t in rows]) if rows
               else f"<p {MUTED}>no hook fired</p>")
    if vv.silent:
        out.append("<p style=\"margin:0.3em 0 0 0\"><b>hooks that never fired</b></p><ul style=\"margin:0.2em 0\">"
                   + "".join(f"<li>{_e(silent_what(s))} <span {MUTED}>{_e(s.label)}</span>: {_e(s.reason)}</li>"
                             for s in vv.silent) + "</ul>")
    for g in vv.groups:
        if g.grads_after:
            out.append(_pairs_table([(f"{_e(n)}.grad", _cell(x)) for n, x in g.grads_after.items()],
                                    ("tensor", f".grad after {_e(g.title)}")))
    if v.error is not None:
        return "".join(out)
    out.append(_changes(vv))
    out.append(_grads(vv, r))
    if vv.values is not None:
        out.append(_pairs_table([(_e(n), _cell(x)) for n, x in vv.values.items()], ("tensor", "forward value")))
    if vv.boundaries is not None:
        out.append(_recursion(vv.boundaries))
        caveat = recursion_caveat(vv)
        if caveat:
            out.append(f"<p {MUTED}>{_e(caveat)}</p>")
    if vv.notes:
        out.append("<ul style=\"margin:0.2em 0;color:#555;font-size:90%\">"
                   + "".join(f"<li>{_e(n)}</li>" for n in vv.notes) + "</ul>")
    return "".join(out)


def _calls_table(rows: list[tuple[int | None, HookRecord]], titles: list | None = None) -> str:
    head = f"<tr><th {TH}>#</th><th {TH}>hook</th><th {TH}>at</th><th {TH}>handed</th><th {TH}>returned</th></tr>"
    body = []
    last = None
    for i, (number, h) in enumerate(rows):
        title = titles[i] if titles else None
        if title is not None and title != last:
            body.append(f"<tr><td {TD} colspan=\"5\"><i>{_e(title)}</i></td></tr>")
        last = title
        what = f"{'global ' if h.is_global else ''}{_e(h.kind)} on {_e(h.on)} <b>{_e(h.target or '')}</b>"
        if h.k is not None and h.calls_of_module > 1:
            what += f" (call {h.k})"
        if h.label:
            what += f"<br><span {MUTED}>{_e(h.label)}</span>"
        handed = "<br>".join(
            f"tensor = <b>{_e(h.target)}</b> itself <span {MUTED}>(the leaf, not a gradient)</span><br>"
            f"{_e(h.target)}.grad = {_cell(x)}" if h.kind == "post_accumulate_grad" and k == "tensor"
            else f"{_e(k)} = {_cell(x)}" for k, x in h.args.items())
        if h.raised:
            returned = "<span style=\"color:#b00020\">raised</span>"
        elif h.returned is None:
            returned = f"<span {MUTED}>None</span>"
        else:
            returned = f"<span {CHANGED}>{_cell(h.returned)}</span>"
        body.append(f"<tr><td {TD}>{'' if number is None else number}</td><td {TD}>{what}</td>"
                    f"<td {TD}>{_e(h.node or h.phase)}</td><td {NUM}>{handed}</td><td {NUM}>{returned}</td></tr>")
        if h.why:
            body.append(f"<tr><td {TD}></td><td {TD} colspan=\"4\"><span {MUTED}><small>"
                        + "<br>".join(_e(w) for w in h.why) + "</small></span></td></tr>")
    return f"<table {TABLE}><caption style=\"text-align:left\"><b>hook calls</b></caption>{head}{''.join(body)}</table>"


def _changes(vv: VariantView) -> str:
    e = vv.effects
    if not e.ran:
        return ""
    caption = "<b>what the hooks changed</b> <span style=\"color:#777\">(against the same run with every hook only observing)</span>"
    if e.refused is not None:
        return f"<p>{caption}: not computed ({_e(e.refused)})</p>"
    if e.error is not None:
        return f"<p>{caption}: without the returned values PyTorch would raise {_e(e.error)}</p>"
    if not e.changes:
        return f"<p>{caption}: nothing</p>"
    rows = []
    for c in e.changes:
        label = {"grad": f"{c.name}.grad", "returned": f"{c.name} (returned)", "loss": "loss"}[c.what]
        factor = _e(fmt.ratio(c.ratio)) if c.ratio is not None else ""
        rows.append(f"<tr><td {TD}>{_e(label)}</td><td {NUM}>{_cell(c.before)}</td>"
                    f"<td {NUM}><span {CHANGED}>{_cell(c.after)}</span></td><td {TD}>{factor}</td></tr>")
    unchanged = (f"<tr><td {TD} colspan=\"4\"><span {MUTED}>unchanged: "
                 + _e(", ".join(n + ".grad" for n in e.unchanged)) + "</span></td></tr>") if e.unchanged else ""
    return (f"<table {TABLE}><caption style=\"text-align:left\">{caption}</caption><tr><th {TH}>tensor</th>"
            f"<th {TH}>hooks observing</th><th {TH}>with the hooks</th><th {TH}></th></tr>{''.join(rows)}"
            f"{unchanged}</table>")


def _grads(vv: VariantView, r: ReportView | None) -> str:
    out = []
    if vv.returned is not None:
        out.append(_pairs_table([(_e(n), _cell(x)) for n, x in vv.returned.items()],
                                ("tensor", "returned by torch.autograd.grad")))
    changed = {c.name for c in vv.effects.changes if c.what == "grad"}
    rows = [(f"{_e(n)}.grad", _cell(x)) for n, x in vv.grads.items() if n not in changed]
    notes = []
    said = [n for n in vv.grads if n in changed]
    if said:
        notes.append(_e(", ".join(said)) + " as changed above")
    if vv.same_grads and r is not None:
        notes.append(_e(", ".join(vv.same_grads)) + f" as in variant {_e(r.reference)}")
    if rows:
        out.append(_pairs_table(rows, ("tensor", "final .grad")))
    if notes:
        out.append(f"<p {MUTED}>.grad of {'; '.join(notes)}</p>")
    if vv.unkept:
        out.append(f"<p {MUTED}>{_e(unkept_line(vv.unkept))}</p>")
    return "".join(out)


def _recursion(bs: list[Boundary]) -> str:
    rows = []
    for b in bs:
        pad = "&nbsp;&nbsp;" * b.depth
        rows.append(f"<tr><td {TD}>{pad}<b>{_e(b.callid)}</b> <span {MUTED}>[{_e(b.type)}]</span></td>"
                    f"<td {TD}>grad_output</td><td {NUM}>{_cell(b.grad_output[0])}</td></tr>")
        for name, arg, g in zip(b.input_names, b.arg_names, b.grad_input):
            rows.append(f"<tr><td {TD}>{pad}&nbsp;&nbsp;<span {MUTED}>{_e(arg)} &larr; {_e(name)}</span></td>"
                        f"<td {TD}>J<sup>T</sup> grad_output</td><td {NUM}>{_cell(g)}</td></tr>")
    return (f"<table {TABLE}><caption style=\"text-align:left\"><b>adjoint recursion</b> <span {MUTED}>(hooks "
            f"aside)</span></caption>{''.join(rows)}</table>")


def _pairs_table(rows: list[tuple[str, str]], head: tuple[str, str]) -> str:
    body = "".join(f"<tr><td {TD}>{name}</td><td {NUM}>{value}</td></tr>" for name, value in rows)
    return f"<table {TABLE}><tr><th {TH}>{head[0]}</th><th {TH}>{head[1]}</th></tr>{body}</table>"


def _cell(x) -> str:
    """A value as decimals, its exact form in the tooltip."""
    text = fmt.value(x)
    exact = fmt.value(x, exact=True) if _has_exact(x) else ""
    if exact and exact != text:
        return f"<span title=\"{_e(exact)}\">{_e(text)}</span>"
    return _e(text)


def _has_exact(x) -> bool:
    if isinstance(x, Exact):
        return True
    if isinstance(x, (tuple, list)):
        return any(_has_exact(i) for i in x)
    if isinstance(x, dict):
        return any(_has_exact(i) for i in x.values())
    return False


def _div(body: str) -> str:
    return f"<div class=\"adjoint\" style=\"font-family:sans-serif\">{body}</div>"


def _e(text) -> str:
    """Problem-file text for HTML: controls, bidi overrides and lone surrogates shown as escapes
    (as the terminal, the graph and the LaTeX document show them), then HTML-escaped."""
    return html.escape(terminal_safe(str(text), keep_newlines=True), quote=True)


# ----------------------------------------------------------------------------- Markdown

def markdown_of(obj) -> str:
    """A short Markdown summary (frontends that show Markdown rather than HTML)."""
    if isinstance(obj, Prediction):
        lines = [f"**{_md(obj.problem.name)}**: {len(obj.variants)} variant(s)", "",
                 "| variant | hook calls | grads |", "|---|---|---|"]
        for v in obj.variants:
            for rank, vp in (enumerate(v.ranks) if isinstance(v, RanksPrediction) else [(None, v)]):
                name = v.name if rank is None else f"{v.name}, rank {rank}"
                lines.append(f"| {_md(name)} | {len(vp.hook_calls)} | {_md(_grads_md(vp))} |")
        return "\n".join(lines) + "\n"
    if isinstance(obj, VariantPrediction):
        lines = [f"**variant {_md(obj.name)}**", "", "| # | hook | at | returned |", "|---|---|---|---|"]
        for i, h in enumerate(obj.hook_calls, 1):
            returned = "raised" if h.raised else fmt.value(h.returned)
            lines.append(f"| {i} | {_md(h.kind)} on {_md(h.target or '')} | {_md(h.node or h.phase)} | {_md(returned)} |")
        lines += ["", _md(_grads_md(obj))]
        return "\n".join(lines) + "\n"
    raise TypeError(f"no Markdown for {type(obj).__name__}")


def _grads_md(v: VariantPrediction) -> str:
    if v.error is not None:
        return f"{v.error.type}: {v.error.message}"
    return "; ".join(f"{n}.grad = {fmt.value(x)}" for n, x in v.grads.items())


def _md(text) -> str:
    """Text for a Markdown table cell: HTML-escaped, pipes and Markdown's specials escaped."""
    out = html.escape(terminal_safe(" ".join(str(text).split())), quote=False)
    for ch in "\\|*_`[]#<>":
        out = out.replace(ch, "\\" + ch)
    return out
