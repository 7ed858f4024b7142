"""Feature counts of one generated problem, for the sweep's report and the coverage test."""

from __future__ import annotations

from collections import Counter

from gen.inplace import writes_in_place
from .analysis import Analysis
from .specs import ProblemSpec
from .trees import op_names, src


def _line_names(line, c: Counter) -> None:
    if isinstance(line, tuple):
        op_names(line[1], c)
        return
    c[f"stmt {line.label}"] += 1
    for t in ([line.tree] if line.tree is not None else []) + [a for a in line.args if a[0] not in ("lit", "kw")]:
        op_names(t, c)
    for b in line.body:
        _line_names(b, c)


def coverage(p: ProblemSpec) -> Counter:
    """Feature counts of one problem: module types, expression ops, hook kinds, backward forms."""
    c: Counter = Counter()
    c.update(p.features)
    for m in p.model.walk():
        if m.type == "Linear":
            ranks = {len(s) for s in m.in_shapes}
            c[f"module Linear{'' if m.bias else ' (no bias)'} {'/'.join(f'{r}-D' for r in sorted(ranks))}"] += 1
        elif m.type is not None:
            c[f"module {m.type}"] += 1
        elif m.function is not None:
            c[f"module Function ({'correct' if m.function.correct else 'wrong'})"] += 1
            if m.function.dirty:
                c["module Function dirty"] += 1
            op_names(m.ret, c)
        else:
            c["module custom" + (" multi-input" if len(m.inputs) > 1 else "") +
              (" multi-line" if m.lines else "")] += 1
            for line in m.lines:
                _line_names(line, c)
            op_names(m.ret, c)
            calls = Counter(ln[1][1] for ln in m.lines if isinstance(ln, tuple) and ln[1][0] == "call")
            if any(v > 1 for v in calls.values()):
                c["child called twice"] += 1
        for prm in m.params:
            if not prm.rg:
                c["param requires_grad false"] += 1
    if p.loss is not None:
        c["loss"] += 1
        op_names(p.loss, c)
    else:
        c["no loss"] += 1
    if p.targets:
        c["targets"] += 1
    for leaf in p.inputs:
        c["input requires grad" if leaf.rg else "input no grad"] += 1
    hook_lists = [p.hooks] + [v.hooks for v in (p.variants or []) if v.hooks]
    backs = [p.backward] + [v.backward for v in (p.variants or []) if v.backward]
    if p.variants is not None:
        c["variants"] += 1
    a = Analysis(p, p.inputs, p.hooks)
    c.update(a.ops)
    leaves = {leaf.name for leaf in p.inputs} | {leaf.name for m in p.model.walk() for leaf in m.params}
    outputs = {ci.callid for ci in a.calls} | {"y", "model"}
    for hooks in hook_lists:
        for h in hooks:
            tag = f"hook {h.on}:{h.kind}"
            c[tag] += 1
            if h.on == "tensor":
                what = ("the loss" if h.target == "loss" else "a leaf" if h.target in leaves
                        else "a module output" if h.target in outputs else "an intermediate")
                c[f"{'retain_grad' if h.kind == 'retain_grad' else 'tensor hook'} on {what}"] += 1
            if h.returns is not None:
                c[tag + " returns"] += 1
                if "None" in src(h.returns):
                    c["hook returns None entries"] += 1
            if h.does:
                c["hook does:"] += 1
                if writes_in_place(h):
                    c["hook writes in place"] += 1
            for key in h.opts:
                if key not in ("pack", "unpack"):
                    c[f"hook option {key}"] += 1
            if h.on == "node" and h.target in leaves:
                c["hook node on a leaf (AccumulateGrad)"] += 1
            if h.remove:
                c[f"hook remove {h.remove}"] += 1
            if h.when:
                c["hook when after_forward"] += 1
    for b in backs:
        if b.method == "grad":
            c["backward method grad"] += 1
        elif b.inputs:
            c["backward(inputs=...)"] += 1
        if b.grad_output is not None:
            c["backward grad_output"] += 1
    return c
