"""Random checkpoint problems (torch.utils.checkpoint in a forward): their own small generator.

``generate_checkpoint(rng)`` -> (YAML text, feature counter). Problem ``i`` of seed ``s`` in
``benchmarks/sweep.py --kind checkpoint`` is ``generate_checkpoint(random.Random(f"{s}-{i}"))``.

What it builds:

* a root forward over an input ``x`` (requiring grad or not) and a root parameter ``w``: a
  prelude ``h = x * w`` (or ``x + w``), then one to three regions, each
  ``checkpoint(CHILD, prev, use_reentrant=...)`` with ``use_reentrant`` True, False or absent
  (PyTorch's warning) and, when False, ``early_stop`` True, False or absent; a region's child
  is a custom module (a Linear, an activation, sometimes a second Linear or an elementwise
  line, a named intermediate ``h``, sometimes the Linear's call itself checkpointed: nested) or a built-in (Linear, Tanh, Sigmoid, ReLU); sometimes a
  child is called a second time without checkpoint, or a region runs under ``no_grad``;
* a loss (``sum(y * y)``, ``sum(y)``, ``mean(y ** 2)``);
* hooks in two or three variants: module forward, forward-pre, full backward (and pre) and
  legacy backward hooks on the children and their submodules, global module hooks, tensor
  hooks on parameters and on named intermediates (a region's own, which the reentrant variant
  refuses to register: PyTorch's error), node hooks, post-accumulate hooks;
* a hook body that runs ``h.backward(...)`` (a reentrant backward; without retain_graph the outer
  backward then meets a freed graph; ``h.sum()`` computed in the backward has no graph: errors
  PyTorch raises, answers like any other);
* steps: one backward, two with ``retain_graph`` (each recomputes), or ``autograd.grad``
  (which the reentrant variant refuses: PyTorch's error).
"""

from __future__ import annotations

import random
from collections import Counter

ACTS = ["Tanh", "Sigmoid", "ReLU"]


def _v(rng, n):
    return [rng.choice([-1, -0.5, -0.25, 0.25, 0.5, 0.75, 1]) for _ in range(n)]


def _linear(rng, n_in, n_out):
    w = [_v(rng, n_in) for _ in range(n_out)]
    return (f"{{type: Linear, args: {{in_features: {n_in}, out_features: {n_out}}}, "
            f"params: {{weight: {w}, bias: {_v(rng, n_out)}}}}}")


def generate_checkpoint(rng: random.Random):
    cov: Counter = Counter()
    n = 2
    regions = rng.choice([1, 2, 2, 3])
    children: list[str] = []
    lines = []
    hookable_modules: list[str] = []   # module paths
    named: list[str] = []              # tensor names hooks may go on (bound in the forward)
    reentrant_names: list[str] = []    # intermediates of reentrant regions (registering on them raises)
    forward = []
    pre = rng.choice(["x * w", "x + w"])
    forward.append(f"h = {pre}")
    named.append("h")
    prev = "h"
    any_reentrant = False
    for r in range(regions):
        name = f"f{r}"
        builtin = rng.random() < 0.3
        if builtin:
            kind = rng.choice(["Linear"] + ACTS)
            body = _linear(rng, n, n) if kind == "Linear" else f"{{type: {kind}}}"
            children.append(f"    {name}: {body}")
            hookable_modules.append(name)
            cov[f"builtin {kind}"] += 1
            inner_names = []
        else:
            act = rng.choice(ACTS)
            second = rng.random() < 0.4
            parts = [f"        lin: {_linear(rng, n, n)}", f"        act: {{type: {act}}}"]
            body_lines = ["h = lin(x)"]
            if rng.random() < 0.25:   # a checkpoint nested in the region
                inner = rng.choice(["False", "True"])
                body_lines = [f"h = checkpoint(lin, x, use_reentrant={inner}"
                              + (f", early_stop={rng.choice(['True', 'False'])})" if inner == "False" else ")")]
                cov[f"nested use_reentrant={inner}"] += 1
            ret = "act(h)"
            if second:
                parts.append(f"        lin2: {_linear(rng, n, n)}")
                ret = "lin2(act(h))"
                hookable_modules.append(f"{name}.lin2")
            if rng.random() < 0.4:
                ret = f"{ret} * {rng.choice(['2', 'x', 'h'])}"
            body_lines.append(f"return {ret}")
            children.append(f"    {name}:\n      children:\n" + "\n".join(parts) + "\n      forward: |\n"
                            + "".join(f"        {b}\n" for b in body_lines).rstrip("\n"))
            hookable_modules += [name, f"{name}.lin", f"{name}.act"]
            inner_names = [f"{name}.h"]
            cov[f"custom {act}"] += 1
        mode = rng.choice(["False", "False", "True", "absent"])
        kw = "" if mode == "absent" else f", use_reentrant={mode}"
        if mode == "False":
            es = rng.choice(["absent", "True", "False"])
            if es != "absent":
                kw += f", early_stop={es}"
            cov[f"non-reentrant early_stop={es}"] += 1
        else:
            any_reentrant = True
            cov[f"reentrant ({mode})"] += 1
        out = f"a{r}"
        call = f"{out} = checkpoint({name}, {prev}{kw})"
        if rng.random() < 0.1:
            forward.append("with no_grad():")
            forward.append(f"  z{r} = checkpoint({name}, {prev}{kw})")
            cov["under no_grad"] += 1
            inner_names = []   # bound in the no_grad call: no grad_fn, nothing to hook
        forward.append(call)
        named.append(out)
        if mode == "False":
            named += inner_names
        else:
            reentrant_names += inner_names
        if rng.random() < 0.2:
            forward.append(f"b{r} = {name}({out})")
            named.append(f"b{r}")
            out = f"b{r}"
            cov["called again"] += 1
        prev = out
    forward.append(f"return {prev}")
    loss = rng.choice(["sum(y * y)", "sum(y)", "mean(y ** 2)"])
    x_grad = rng.random() < 0.7
    cov["x requires grad" if x_grad else "x without grad"] += 1
    lines += ["name: checkpoint", "dtype: float64", "inputs:",
              f"  x: {{value: {_v(rng, n)}, requires_grad: {str(x_grad).lower()}}}",
              "model:", f"  params: {{w: {_v(rng, n)}}}", "  children:"]
    lines += children
    lines.append("  forward: |")
    lines += [f"    {f}" for f in forward]
    lines.append(f'loss: "{loss}"')
    params = ["w"] + [f"{m}.weight" for m in hookable_modules if m.endswith("lin") or m.endswith("lin2")]

    def hooks():
        out = []
        for _ in range(rng.randint(1, 5)):
            c = rng.random()
            if c < 0.45:
                m = rng.choice(hookable_modules)
                kind = rng.choice(["forward", "forward_pre", "full_backward", "full_backward_pre", "forward",
                                   "backward"])
                out.append(f"{{module: {m}, kind: {kind}}}")
                cov[f"module {kind}"] += 1
            elif c < 0.55:
                kind = rng.choice(["forward", "forward_pre", "full_backward"])
                out.append(f"{{global: {kind}}}")
                cov[f"global {kind}"] += 1
            elif c < 0.75:
                t = rng.choice(params)
                if rng.random() < 0.3:
                    out.append(f"{{tensor: {t}, kind: post_accumulate_grad}}")
                    cov["post_accumulate_grad"] += 1
                else:
                    out.append(f"{{tensor: {t}, returns: \"grad * 2\"}}" if rng.random() < 0.3 else f"{{tensor: {t}}}")
                    cov["tensor hook on a parameter"] += 1
            elif c < 0.9:
                pool = named + (reentrant_names if rng.random() < 0.2 else [])
                t = rng.choice(pool)
                out.append(f"{{tensor: {t}}}")
                cov["tensor hook on an intermediate"] += 1
            elif c < 0.95:
                t = rng.choice(named[1:] or named)
                out.append(f"{{node: {t}, kind: {rng.choice(['pre', 'post'])}}}")
                cov["node hook"] += 1
            else:   # a hook body that runs a backward: reentrant inside the backward
                t = rng.choice(named[1:] or named)
                body = rng.choice(["h.backward(h, retain_graph=True)", "h.backward(h)", "h.sum().backward()"])
                out.append(f"{{node: {t}, kind: {rng.choice(['pre', 'post'])}, does: \"{body}\"}}")
                cov["hook body runs a backward"] += 1
        # a hook twice on one module kind is fine; legacy and full on one module is PyTorch's error (an answer)
        return "[" + ", ".join(out) + "]"

    lines.append("variants:")
    for k in range(rng.choice([2, 3])):
        lines.append(f"  v{k}:")
        lines.append(f"    hooks: {hooks()}")
    c = rng.random()
    if c < 0.2:
        lines.append("steps: [forward, {backward: {retain_graph: true}}, backward]")
        cov["retain_graph, twice"] += 1
    elif c < 0.3:
        lines.append("backward: {method: grad, inputs: [w]}")
        cov["autograd.grad" + (" (reentrant: error)" if any_reentrant else "")] += 1
    return "\n".join(lines) + "\n", cov
