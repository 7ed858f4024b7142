"""How fast is loading? The 226 KB problem file of the performance issue (a ReLU MLP, width
64, 8 layers, batch 8, a full backward hook on every Linear and a tensor hook on every
activation), written to a temporary directory and read back, against libyaml's bare
``yaml.compose`` of the same text (the floor: building PyYAML's node graph in C) and
PyYAML's pure-Python compose (what the loader used before).

    python benchmarks/bench_load.py [--width 64] [--layers 8] [--batch 8] [--repeat 5]

Prints best-of-N seconds and each time as a ratio to the bare libyaml compose, all measured
in one run: ``read_yaml`` (file -> located tree) and ``adjoint.load`` (plus validation into a
Problem: the difference is the validation and conversion cost after libyaml's compose)."""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time

import yaml

import adjoint
from adjoint.format.loader import FAST, read_yaml


def mlp_text(width: int, layers: int, batch: int, seed: int = 0) -> str:
    rng = random.Random(seed)

    def mat(rows: int, cols: int) -> list:
        return [[rng.randint(-8, 8) / 8 for _ in range(cols)] for _ in range(rows)]

    lines = ["name: bench_load", "inputs:", f"  x: {{value: {mat(batch, width)}, requires_grad: true}}", "model:",
             "  type: Sequential", "  children:"]
    for i in range(layers):
        bias = [rng.randint(-4, 4) / 8 for _ in range(width)]
        lines.append(f"    fc{i}: {{type: Linear, params: {{weight: {mat(width, width)}, bias: {bias}}}}}")
        if i < layers - 1:
            lines.append(f"    act{i}: {{type: ReLU}}")
    lines += ['loss: "sum(y * y)"', "hooks:"]
    lines += [f"  - {{module: fc{i}, kind: full_backward}}" for i in range(layers)]
    lines += [f"  - {{tensor: act{i}}}" for i in range(layers - 1)]
    return "\n".join(lines) + "\n"


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    text = mlp_text(args.width, args.layers, args.batch)
    with tempfile.TemporaryDirectory(prefix="adjoint-bench-") as tmp:
        path = os.path.join(tmp, "mlp.yaml")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        rows = [("yaml.compose, libyaml (CSafeLoader)", best(lambda: yaml.compose(text, Loader=yaml.CSafeLoader),
                                                             args.repeat)),
                ("yaml.compose, pure Python (SafeLoader)", best(lambda: yaml.compose(text, Loader=yaml.SafeLoader),
                                                                max(1, args.repeat // 3))),
                ("adjoint.format.loader.read_yaml", best(lambda: read_yaml(path), args.repeat)),
                ("adjoint.load", best(lambda: adjoint.load(path), args.repeat))]
    floor = rows[0][1]
    print(f"{len(text) / 1000:.0f} KB problem file (width {args.width}, {args.layers} layers, batch {args.batch}); "
          f"loader uses {'libyaml' if FAST else 'the pure-Python parser'}; best of {args.repeat}")
    for name, seconds in rows:
        print(f"  {name:<40} {seconds:8.3f} s   {seconds / floor:6.2f}x libyaml compose")


if __name__ == "__main__":
    main()
