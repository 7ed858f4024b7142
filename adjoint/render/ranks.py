"""The terminal report of a distributed file (DistributedDataParallel): the ranks side by side.

For each variant and each backward pass: the hook calls in firing order, one column per rank
(a comm hook call shows its bucket's parameters in buffer order, the buffer it was handed and
what it returned), then every ``.grad`` right after the pass, one column per rank. A pass
inside ``no_sync`` is marked: its gradients stay local.
"""

from __future__ import annotations

from rich.console import Group as Stack
from rich.table import Table
from rich.text import Text

from adjoint.render.safetext import terminal_safe
from adjoint.render import values as fmt

TITLE = "bold"
HEAD = "bold underline"
KIND = "bold cyan"
DIM = "dim"


def ranks_report(pred, opts):
    """Every renderable of one distributed problem's report, in order."""
    spec = pred.problem.distributed
    parts: list = [Text.assemble((terminal_safe(pred.problem.name), TITLE),
                                 (f"  DistributedDataParallel, world_size {spec.world_size}"
                                  f"{_hook_words(spec)}" if spec.wrap != "fully_shard" else _fsdp_words(spec), DIM))]
    for v in pred.variants:
        parts.append(Text(""))
        parts.append(Text(f"variant {terminal_safe(v.name)}", HEAD))
        runs = [vp.run for vp in v.ranks]
        steps = runs[0].steps
        for i in range(min(len(vp.run.passes) for vp in v.ranks)):   # a rank that raised early has fewer
            step = runs[0].passes[i].step
            local = not spec.synced(steps[step])
            parts.append(Text.assemble((f"pass {i + 1}", TITLE), (f"  (step {step + 1})", DIM),
                                       (" inside no_sync: gradients stay local" if local else "", DIM)))
            parts.append(_calls(v.ranks, i, opts))
            parts.append(_grads(v.ranks, i, opts))
        if any(vp.error is not None for vp in v.ranks):
            parts.append(_error(v.ranks, opts))
        for r, vp in enumerate(v.ranks):
            for w in vp.warnings:
                parts.append(Text.assemble((f"rank {r}: {terminal_safe(w.category)}", "yellow"),
                                           (f" during {w.during}: ", DIM), terminal_safe(w.message)))
    return Stack(*parts)


def _error(ranks, opts) -> Stack:
    """The calls each rank made after its last finished backward pass, then the error it raised."""
    parts: list = []
    shown = min(len(vp.run.passes) for vp in ranks)      # the passes every rank finished, shown above
    done = [vp.run.passes[shown - 1].calls.stop if shown else 0 for vp in ranks]
    columns = [vp.hook_calls[start:] for vp, start in zip(ranks, done)]
    if any(columns):
        table = Table(box=None, pad_edge=False, show_header=True, header_style=DIM)
        table.add_column("#", style=DIM, justify="right")
        for r in range(len(ranks)):
            table.add_column(f"rank {r}")
        for n in range(max(len(c) for c in columns)):
            table.add_row(str(n + 1), *[_call(c[n], opts) if n < len(c) else Text("") for c in columns])
        parts.append(Text("until the error", TITLE))
        parts.append(table)
    for r, vp in enumerate(ranks):
        if vp.error is not None:
            parts.append(Text.assemble((f"rank {r}: PyTorch raises {terminal_safe(vp.error.type)}", "bold red"),
                                       (f" during {vp.error.during}: ", DIM), terminal_safe(vp.error.message)))
    return Stack(*parts)


def _hook_words(spec) -> str:
    options = "".join(f", {name}" for name in ("find_unused_parameters", "static_graph", "gradient_as_bucket_view")
                      if getattr(spec, name))
    if spec.comm_hook is None:
        return f"{options}, no comm hook (the reducer's own allreduce: grad / world_size, summed)"
    if spec.comm_hook.builtin is not None:
        return f"{options}, comm hook {spec.comm_hook.builtin}"
    return f"{options}, a written comm hook"


def _calls(ranks, i, opts) -> Table:
    table = Table(box=None, pad_edge=False, show_header=True, header_style=DIM)
    table.add_column("#", style=DIM, justify="right")
    for r in range(len(ranks)):
        table.add_column(f"rank {r}")
    columns = [[vp.hook_calls[j] for j in vp.run.passes[i].calls] for vp in ranks]
    for n in range(max((len(c) for c in columns), default=0)):
        table.add_row(str(n + 1), *[_call(c[n], opts) if n < len(c) else Text("") for c in columns])
    return table


def _call(h, opts) -> Text:
    text = Text.assemble((terminal_safe(h.label), KIND))
    for name, arg in h.args.items():
        if name == "parameters":
            shown = ", ".join(terminal_safe(p) for p in arg)
            text.append(f"\n  parameters: {shown}")
        else:
            text.append(f"\n  {terminal_safe(name)} = {_value(arg, opts)}")
    if h.returned is not None:
        text.append(f"\n  returned {_value(h.returned, opts)}")
    return text


def _grads(ranks, i, opts) -> Table:
    table = Table(box=None, pad_edge=False, show_header=True, header_style=DIM)
    table.add_column(".grad after", style=DIM)
    for r in range(len(ranks)):
        table.add_column(f"rank {r}")
    names = list(ranks[0].run.passes[i].grads)
    for name in names:
        table.add_row(terminal_safe(name), *[_value(vp.run.passes[i].grads.get(name), opts) for vp in ranks])
    return table


def _value(v, opts) -> str:
    if v is None:
        return "None"
    if isinstance(v, tuple):
        return "(" + ", ".join(_value(x, opts) for x in v) + ")"
    return terminal_safe(fmt.value(v, opts.exact))


def _fsdp_words(spec) -> str:
    shard = ", ".join(label for label, _ in spec.shard)
    order = f"{shard}, then the root" if shard else "the root"
    resh = ("" if spec.reshard_after_forward is None
            else f", reshard_after_forward={spec.reshard_after_forward}")
    return (f"  fully_shard (FSDP2), world_size {spec.world_size}: {order}{resh}; gradients reduce-scattered "
            "(the mean over ranks), each rank's .grad its dim-0 rows")
