"""YAML text of a generated problem."""

from __future__ import annotations

import json
from fractions import Fraction as Fr

from .specs import BackwardSpec, HookSpec, Leaf, Mod, ProblemSpec
from .program import stmt_lines
from .steps import steps_yaml
from .trees import num_text, src

def _lit(shape: tuple, values: list) -> str:
    it = iter(values)

    def build(shp):
        if not shp:
            return _num_yaml(next(it))
        return "[" + ", ".join(build(shp[1:]) for _ in range(shp[0])) + "]"

    return build(tuple(shape))


def _num_yaml(v: Fr) -> str:
    t = num_text(v)
    return f'"{t}"' if "/" in t else t


def _q(text: str) -> str:
    return json.dumps(text)


def _leaf_yaml(leaf: Leaf, short_rg_false: bool) -> str:
    """An input (shorthand: requires_grad false) or a parameter (shorthand: true)."""
    lit = _lit(leaf.shape, leaf.values)
    if leaf.dtype is not None:
        return "{value: " + lit + f", dtype: {leaf.dtype}" + "}"
    if leaf.scale is not None:
        return "{" + f"value: {lit}, scale: {_q(num_text(leaf.scale))}, requires_grad: {str(leaf.rg).lower()}" + "}"
    if short_rg_false and not leaf.rg:
        return lit
    if not short_rg_false and leaf.rg:
        return lit
    return "{value: " + lit + f", requires_grad: {str(leaf.rg).lower()}" + "}"


def _key(name: str) -> str:
    return _q(name) if name.isdigit() else name


def _module_yaml(m: Mod, indent: int) -> list[str]:
    pad = " " * indent
    out = []
    if m.type is not None:
        out.append(f"{pad}type: {m.type}")
    if (m.write_inputs or m.inputs != ["x"]) and getattr(m, "layer", None) is None:
        out.append(f"{pad}inputs: [{', '.join(m.inputs)}]")
    if getattr(m, "yaml_head", None) is not None:     # tests/gen/layers.py: args, buffers, training, ...
        out.extend(m.yaml_head(pad))
    if m.params and not getattr(m, "init_params", False):
        out.append(f"{pad}params:")
        for p in m.params:
            out.append(f"{pad}  {p.name.rsplit('.', 1)[-1]}: {_leaf_yaml(p, short_rg_false=False)}")
        if m.type == "Linear" and not m.bias:
            out.append(f"{pad}  bias: false")
    elif m.type == "Linear":
        out.append(f"{pad}params: {{bias: false}}")
    if m.children:
        out.append(f"{pad}children:")
        for c in m.children:
            out.append(f"{pad}  {_key(c.name)}:")
            out.extend(_module_yaml(c, indent + 4))
    if m.type is None:
        if not m.lines:
            out.append(f"{pad}forward: {_q(src(m.ret))}")
        elif m.as_list:
            out.append(f"{pad}forward:")
            for line in m.lines:
                out.extend(f"{pad}  - {_q(text)}" for text in stmt_lines(line))
            out.append(f"{pad}  - {_q('return ' + src(m.ret))}")
        else:
            out.append(f"{pad}forward: |")
            for line in m.lines:
                out.extend(f"{pad}  {text}" for text in stmt_lines(line))
            out.append(f"{pad}  return {src(m.ret)}")
        if m.function is not None:
            out.append(f"{pad}function:")
            out.append(f"{pad}  name: {m.function.name}")
            if m.function.dirty:
                out.append(f"{pad}  dirty: [{', '.join(m.function.dirty)}]")
            if m.function.save:
                out.append(f"{pad}  save: [{', '.join(m.function.save)}]")
            if m.function.grads:
                out.append(f"{pad}  backward:")
                for slot, formula in m.function.grads.items():
                    out.append(f"{pad}    {slot}: {_q(formula)}")
            else:
                out.append(f"{pad}  backward: {{}}")
    return out


def _hook_yaml(h: HookSpec) -> str:
    if h.on == "global":
        parts = [f"global: {h.kind}"]
    elif h.on == "multi_grad":
        parts = [f"multi_grad: [{', '.join(_q(n) for n in h.target.split(','))}]"]
        if h.kind == "any" or h.implicit_kind:
            parts.append(f"mode: {h.kind}")
    elif h.on == "saved_tensors":
        parts = [f"saved_tensors: {{pack: {_q(h.opts['pack'])}, unpack: {_q(h.opts['unpack'])}}}"]
        if h.opts.get("scope"):
            parts.append(f"scope: [{', '.join(_q(n) for n in h.opts['scope'])}]")
    else:
        parts = [f"{h.on}: {_q(h.target)}"]
        if not (h.on == "tensor" and h.kind == "hook" and h.implicit_kind):
            parts.append(f"kind: {h.kind}")
    for key in ("prepend", "with_kwargs", "always_call"):
        if h.opts.get(key):
            parts.append(f"{key}: true")
    if h.opts.get("raises"):
        parts.append(f"raises: {_q(h.opts['raises'])}")
    if h.opts.get("removes"):
        parts.append(f"removes: [{', '.join(map(str, h.opts['removes']))}]")
    if h.opts.get("optimizer"):
        parts.append(f"optimizer: {h.opts['optimizer']}")
    if h.does:
        parts.append(f"does: {_q(chr(10).join(_does_line(e) for e in h.does))}")
    if h.returns is not None:
        parts.append(f"returns: {_q(src(h.returns))}")
    if h.remove:
        parts.append(f"remove: {h.remove}")
    if h.when:
        parts.append(f"when: {h.when}")
    if h.label:
        parts.append(f"label: {_q(h.label)}")
    return "{" + ", ".join(parts) + "}"


def _backward_yaml(b: BackwardSpec, indent: int) -> list[str]:
    pad = " " * indent
    out = []
    if b.method != "backward":
        out.append(f"{pad}method: {b.method}")
    if b.inputs:
        out.append(f"{pad}inputs: [{', '.join(_q(n) for n in b.inputs)}]")
    if b.grad_output is not None:
        out.append(f"{pad}grad_output: {_lit(*b.grad_output)}")
    return out


def _backward_items(b: BackwardSpec) -> list[str]:
    out = []
    if b.method != "backward":
        out.append(f"method: {b.method}")
    if b.inputs:
        out.append(f"inputs: [{', '.join(_q(n) for n in b.inputs)}]")
    if b.grad_output is not None:
        out.append(f"grad_output: {_lit(*b.grad_output)}")
    return out


def to_yaml(p: ProblemSpec) -> str:
    out = [f"name: {p.name}", "description: generated by tests/gen"]
    if p.dtype is not None:          # None: left out, float32 by default
        out.append(f"dtype: {p.dtype}")
    if getattr(p, "init", None) is not None:
        out.append(f"init: {{seed: {p.init}}}")
    out.append("inputs:")
    for leaf in p.inputs:
        out.append(f"  {leaf.name}: {_leaf_yaml(leaf, short_rg_false=True)}")
    if p.targets:
        out.append("targets:")
        for leaf in p.targets:
            lit = _lit(leaf.shape, leaf.values)
            out.append(f"  {leaf.name}: " + ("{value: " + lit + f", dtype: {leaf.dtype}" + "}" if leaf.dtype else lit))
    out.append("model:")
    out.extend(_module_yaml(p.model, 2))
    if p.loss is not None:
        out.append(f"loss: {_q(src(p.loss))}")
    if p.hooks:
        out.append("hooks:")
        out.extend(f"  - {_hook_yaml(h)}" for h in p.hooks)
    if not p.backward.empty():
        out.append("backward:")
        out.extend(_backward_yaml(p.backward, 2))
    if p.steps:
        out.extend(steps_yaml(p.steps, 0, _leaf_yaml, _backward_items))
    if p.variants is not None:
        out.append("variants:")
        for v in p.variants:
            if not v.inputs and v.hooks is None and v.backward is None and not v.steps:
                out.append(f"  {v.name}:")
                continue
            out.append(f"  {v.name}:")
            if v.inputs:
                out.append("    inputs:")
                for leaf in v.inputs.values():
                    out.append(f"      {leaf.name}: {_leaf_yaml(leaf, short_rg_false=True)}")
            if v.hooks is not None:
                if v.hooks:
                    out.append("    hooks:")
                    out.extend(f"      - {_hook_yaml(h)}" for h in v.hooks)
                else:
                    out.append("    hooks: []")
            if v.backward is not None and not v.backward.empty():
                out.append("    backward:")
                out.extend(_backward_yaml(v.backward, 6))
            if v.steps:
                out.extend(steps_yaml(v.steps, 4, _leaf_yaml, _backward_items))
    return "\n".join(out) + "\n"


def _does_line(entry) -> str:
    """One ``does:`` statement: ``name = tree``, a call (name None), ``name op= tree``, or a
    line as written (one text: ``optim.step()``)."""
    if len(entry) == 1:
        return entry[0]
    if len(entry) == 3:
        name, op, t = entry
        return f"{name} {op}= {src(t)}"
    name, t = entry
    return src(t) if name is None else f"{name} = {src(t)}"
