"""How fast is exact? `adjoint solve` on MLPs of growing width, measured in one run against
(a) the same exact forward + backward written with sympy.Matrix (the representation we chose
not to use) and (b) real torch in float64 (what we predict).

    python benchmarks/bench_solve.py [--widths 8 16 32 64] [--layers 3] [--batch 4]

Prints, per width: solve seconds (trace, exact forward, the engine with a full backward hook
on every layer, Lagrangian adjoints), the time to format the JSON (every exact value as a
string and a float), the sympy.Matrix baseline (arithmetic only), torch, the ratios
sympy/solve and solve/torch, and solve's peak Python memory (tracemalloc, a separate run)."""

from __future__ import annotations

import argparse
import random
import time
import tracemalloc

import sympy

import adjoint


def mlp_yaml(width: int, layers: int, batch: int, rng: random.Random) -> tuple[str, list]:
    def mat(r, c):
        return [[rng.randint(-8, 8) / 8 for _ in range(c)] for _ in range(r)]

    x = mat(batch, width)
    weights = [(mat(width, width), [rng.randint(-4, 4) / 8 for _ in range(width)]) for _ in range(layers)]
    lines = ["name: bench", "inputs:", f"  x: {{value: {x}, requires_grad: true}}", "model:", "  type: Sequential",
             "  children:"]
    for i, (w, b) in enumerate(weights):
        lines.append(f"    fc{i}: {{type: Linear, params: {{weight: {w}, bias: {b}}}}}")
        if i < layers - 1:
            lines.append(f"    act{i}: {{type: ReLU}}")
    lines.append('loss: "sum(y * y)"')
    lines.append("hooks:")
    lines += [f"  - {{module: fc{i}, kind: full_backward}}" for i in range(layers)]
    return "\n".join(lines) + "\n", [x, weights]


def sympy_baseline(x, weights) -> float:
    """The same forward and backward with sympy.Matrix of Rationals: one object per element."""
    start = time.perf_counter()

    def M(rows):
        return sympy.Matrix([[sympy.Rational(v).limit_denominator(1000) for v in r] for r in rows])

    h = M(x)
    cache = []
    for i, (w, b) in enumerate(weights):
        W, B = M(w), M([b])
        z = h * W.T + sympy.ones(h.rows, 1) * B
        cache.append((h, W, z))
        h = z.applyfunc(lambda v: v if v > 0 else 0) if i < len(weights) - 1 else z
    g = 2 * h
    for i in reversed(range(len(weights))):
        hin, W, z = cache[i]
        if i < len(weights) - 1:
            g = g.multiply_elementwise(z.applyfunc(lambda v: 1 if v > 0 else 0))
        _ = g.T * hin  # weight grad
        g = g * W
    return time.perf_counter() - start


def torch_time(x, weights) -> float:
    import torch

    start = time.perf_counter()
    h = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    out = h
    params = []
    for i, (w, b) in enumerate(weights):
        W = torch.tensor(w, dtype=torch.float64, requires_grad=True)
        B = torch.tensor(b, dtype=torch.float64, requires_grad=True)
        params += [W, B]
        out = torch.nn.functional.linear(out, W, B)
        if i < len(weights) - 1:
            out = torch.relu(out)
    torch.sum(out * out).backward()
    return time.perf_counter() - start


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--widths", type=int, nargs="+", default=[8, 16, 32, 64])
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--batch", type=int, default=4)
    args = ap.parse_args()
    rng = random.Random(0)
    import torch  # imported once, outside the timings

    torch.set_num_threads(1)
    adjoint.loads(mlp_yaml(4, 2, 2, rng)[0]).solve().to_json()  # warm-up: imports, caches
    torch_time(*mlp_yaml(4, 2, 2, rng)[1])

    print(f"{'width':>5} {'solve s':>8} {'+JSON s':>8} {'sympy.Matrix s':>15} {'torch s':>9} {'sympy/solve':>12} "
          f"{'solve/torch':>12} {'peak MB':>8}")
    for width in args.widths:
        text, (x, weights) = mlp_yaml(width, args.layers, args.batch, rng)
        problem = adjoint.loads(text)
        ours = min(_timed(problem.solve) for _ in range(3))
        pred = problem.solve()
        fmt = min(_timed(pred.to_json) for _ in range(3))
        tracemalloc.start()  # a separate run: tracemalloc slows Python down several times
        problem.solve().to_json()
        peak = tracemalloc.get_traced_memory()[1] / 1e6
        tracemalloc.stop()
        base = min(sympy_baseline(x, weights) for _ in range(3))
        tt = min(torch_time(x, weights) for _ in range(20))
        print(f"{width:>5} {ours:>8.3f} {fmt:>8.3f} {base:>15.3f} {tt:>9.5f} {base / ours:>12.1f} {ours / tt:>12.0f} "
              f"{peak:>8.1f}")


if __name__ == "__main__":
    main()
