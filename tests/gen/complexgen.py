"""Random problems with complex tensors (docs/semantics.md, "Complex numbers"): their own small
generator.

``generate_complex(rng)`` -> (YAML text, feature counter). Problem ``i`` of seed ``s`` in
``benchmarks/sweep.py --kind complex`` is ``generate_complex(random.Random(f"{s}-{i}"))``.

What it builds, over the ops modelled on complex tensors:

* a model: a Sequential of complex ``Linear`` layers (1-D or 2-D input, complex weights and
  biases, ``complex64`` or ``complex128``); or a custom forward over complex leaves ``z``, ``w``
  and a real ``x`` (some requiring grad) with a named intermediate ``h``, composed of
  ``* + - /`` (with tensors, real numbers and complex numbers such as ``2j``), ``conj``,
  ``.real``, ``.imag``, ``abs``, ``exp`` (scaled), integer powers, ``view_as_real`` /
  ``view_as_complex``, ``sum`` and ``mean`` (over a dim too), indexing, ``cat``, ``stack``;
* a real loss (``|y|^2`` summed, ``y.real`` or ``y.imag`` summed, ``abs(y)`` averaged);
* hooks: tensor hooks (observing or rescaling) on leaves, ``h`` and ``y``, a full backward hook
  on a Linear, in one or two variants; sometimes a loss that stays complex (PyTorch's
  "grad can be implicitly created only for real scalar outputs").
"""

from __future__ import annotations

import random
from collections import Counter

UNARY = ["({}).conj()", "({}).real", "({}).imag", "({}).abs()", "torch.exp(0.25 * ({}))", "({}) ** 2", "({}) ** 3",
         "-({})", "({}) * 1.5", "({}) * 2j", "(1 - 2j) * ({})", "1j - ({})",
         "torch.view_as_complex(torch.view_as_real(({}) * (1 + 1j)) * 0.5)", "({}) / (2 + 1j)",
         "({0})[0] * ({0}).sum()", "({}).sum(dim=0, keepdim=True) * 0.5", "({})[1:] * 2",
         "torch.cat((({0})[:1], ({0})[1:] * 1j))", "torch.stack((({0}), ({0}) * 2), dim=1).mean(dim=1)"]
BINARY = ["({}) * ({})", "({}) + ({})", "({}) - ({})", "({}) / (({}).abs() ** 2 + 1)", "({}) * ({}).conj()"]


def _value(rng, n):
    return [rng.choice([-1, -0.5, -0.25, 0, 0.25, 0.5, 0.75, 1, 1.5]) for _ in range(n)]


def _complex(rng, shape_n: int, dtype: str, rg: bool | None = None) -> str:
    rgs = "" if rg is None else f", requires_grad: {str(rg).lower()}"
    return f"{{value: {_value(rng, shape_n)}, imag: {_value(rng, shape_n)}, dtype: {dtype}{rgs}}}"


def _expr(rng, names, depth, used):
    if depth == 0 or rng.random() < 0.25:
        name = rng.choice(names)
        used.add(name)
        return name
    if rng.random() < 0.55:
        op = rng.choice(UNARY)
        used.add(op)
        return op.format(_expr(rng, names, depth - 1, used))
    op = rng.choice(BINARY)
    used.add(op)
    return op.format(_expr(rng, names, depth - 1, used), _expr(rng, names, depth - 1, used))


def generate_complex(rng: random.Random):
    cov: Counter = Counter()
    dtype = rng.choice(["complex64", "complex128"])
    lines = ["name: complex", "dtype: float64" if dtype == "complex128" else "dtype: float32"]
    cov[dtype] += 1
    hook_targets: list[str] = []
    modules: list[str] = []
    if rng.random() < 0.4:
        two_d = rng.random() < 0.5
        width = rng.choice([1, 2, 3])
        x = _complex(rng, width, dtype, rng.random() < 0.8)
        if two_d:
            x = x.replace("value: [", "value: [[", 1).replace("], imag: [", "]], imag: [[", 1).replace("], dtype", "]], dtype", 1)
        lines += ["inputs:", f"  z: {x}", "model:", "  type: Sequential", "  children:"]
        n_in = width
        for k in range(rng.choice([1, 2])):
            out = rng.choice([1, 2])
            weight = [_value(rng, n_in) for _ in range(out)]
            wim = [_value(rng, n_in) for _ in range(out)]
            bias = "" if rng.random() < 0.2 else f", bias: {_complex(rng, out, dtype)}"
            args = "" if bias else ", args: {in_features: %d, out_features: %d, bias: false}" % (n_in, out)
            lines.append(f"    lin{k}: {{type: Linear{args}, params: {{weight: {{value: {weight}, imag: {wim}, "
                         f"dtype: {dtype}}}{bias}}}}}")
            modules.append(f"lin{k}")
            n_in = out
        hook_targets = ["z"] if "requires_grad: true" in lines[3] else []
        cov["sequential"] += 1
        cov["linear 2-D" if two_d else "linear 1-D"] += 1
    else:
        rg = {n: rng.random() < 0.8 for n in ("z", "w", "x")}
        if not any(rg.values()):
            rg["z"] = True
        lines += ["inputs:", f"  z: {_complex(rng, 2, dtype, rg['z'])}", f"  w: {_complex(rng, 2, dtype, rg['w'])}",
                  f"  x: {{value: {_value(rng, 2)}, requires_grad: {str(rg['x']).lower()}}}"]
        used: set = set()
        h = _expr(rng, ["z", "w", "x"], 2, used)
        out = _expr(rng, ["h", "z", "x"], 2, used)
        if "h" not in out:
            out = f"({out}) * h"
        lines += ["model:", "  inputs: [z, w, x]", "  forward: |", f"    h = {h}", f"    return {out}"]
        hook_targets = [n for n in ("z", "w", "x") if rg[n]] + ["h"]
        cov["custom forward"] += 1
        cov.update(f"op {u}" for u in used if u not in ("z", "w", "x", "h"))
    loss = rng.choice(["(y.abs() ** 2).sum()", "(y * 1.0).sum().abs()", "y.abs().mean()", "(y * (1 + 1j)).real.sum()"]
                      + (["(y * 1j).sum()"] if rng.random() < 0.1 else []))
    lines.append(f'loss: "{loss}"')
    cov[f"loss {loss}"] += 1
    variants = []
    for v in range(rng.choice([1, 2])):
        hooks = []
        for t in rng.sample(hook_targets + ["y"], min(len(hook_targets) + 1, rng.choice([1, 2]))):
            returns = ', returns: "grad * (0.5 - 1j)"' if t in ("z", "w") and rng.random() < 0.3 else ""
            hooks.append(f"      - {{tensor: {t}, kind: hook{returns}}}")
            cov["tensor hook" + (" returns" if returns else "")] += 1
        if modules and rng.random() < 0.6:
            hooks.append(f"      - {{module: {rng.choice(modules)}, kind: full_backward}}")
            cov["full_backward"] += 1
        variants.append(f"  v{v}:\n    hooks:\n" + "\n".join(hooks) if hooks else f"  v{v}: {{}}")
    lines += ["variants:"] + variants
    return "\n".join(lines) + "\n", cov
