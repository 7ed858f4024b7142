"""How verify's per-element rounding bounds fare on random problems (tests/gen), in both dtypes.

    python benchmarks/bounds_sweep.py --n 150 --seed 5

For every variant that runs (no error): the exact prediction, PyTorch's run in the file's dtype
and in the other one, and the bound run of each (:func:`adjoint.answer.bounds.bound_json`).
Prints, per dtype, how many compared items agree within the bounds and within the fixed
tolerance, the items that fail either (problem index, variant, item, detail), and the
largest ratio |observed - exact| / bound over every bounded element (below 1: the bound
held everywhere; how far below says how pessimistic it is). Problem ``i`` of seed ``s`` is
``gen.generate(random.Random(f"{s}-{i}"))``, as in benchmarks/sweep.py.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
sys.path.insert(0, os.path.dirname(HERE))   # this checkout's adjoint, not an installed one

import gen as G  # noqa: E402


def _ratios(p, o, b, out: list) -> None:
    """Every bounded element's |o - p| / bound (the compare's own bound, floor included)."""
    from adjoint.torchside.compare import _flat, element_bounds

    if isinstance(p, dict) and "shape" in p and "value" in p:
        if not isinstance(o, dict) or not isinstance(p.get("value"), (list, float, int)) or o.get("value") is None:
            return
        if p.get("dtype") is not None:
            return
        pf, of = _flat(p["value"]), _flat(o["value"])
        got = element_bounds(b, p["shape"], pf, _ratios.dtype)
        if got is None or len(pf) != len(of):
            return
        held, fixed = got
        for x, y, h, f in zip(pf, of, held, fixed):
            if not f and abs(x) != float("inf") and x == x and y == y and abs(y) != float("inf"):
                out.append((abs(x - y) / h if h > 0 else (0.0 if x == y else float("inf"))))
        return
    if isinstance(p, dict) and isinstance(o, dict):
        for k in p:
            if k in o:
                _ratios(p[k], o[k], b.get(k) if isinstance(b, dict) else None, out)
    elif isinstance(p, list) and isinstance(o, list) and len(p) == len(o):
        bs = b if isinstance(b, list) and len(b) == len(p) else [None] * len(p)
        for x, y, z in zip(p, o, bs):
            _ratios(x, y, z, out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--seed", type=int, default=5)
    args = ap.parse_args()

    import adjoint
    from adjoint.answer.bounds import bound_json
    from adjoint.torchside import run_variant
    from adjoint.torchside.compare import compare

    stats = {d: {"variants": 0, "bound_fail": [], "fixed_fail": [], "ratio": (0.0, None), "fallback": 0}
             for d in ("float32", "float64")}
    skipped = 0
    for i in range(args.n):
        text = G.generate(random.Random(f"{args.seed}-{i}"))
        try:
            problem = adjoint.loads(text, name=f"{args.seed}-{i}")
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                pred = problem.solve(numeric=bool(problem.free_symbols()))
        except Exception:
            skipped += 1
            continue
        for vp in pred.variants:
            p = vp.to_json()
            if p.get("error") is not None:
                continue
            for dtype in ("float32", "float64"):
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        o = run_variant(problem, problem.variant(vp.name), dtype)
                        b = bound_json(problem, vp.name, dtype)
                except Exception:
                    skipped += 1
                    continue
                s = stats[dtype]
                s["variants"] += 1
                for r in compare(p, o, dtype, bounds=b):
                    s["fallback"] += r.fallback
                    if not r.ok:
                        s["bound_fail"].append(f"{i}::{vp.name} {r.item}: {r.detail[:300]}")
                for r in compare(p, o, dtype):
                    if not r.ok:
                        s["fixed_fail"].append(f"{i}::{vp.name} {r.item}: {r.detail[:300]}")
                out: list = []
                _ratios.dtype = dtype
                _ratios(p, o, b, out)
                if out and max(out) > s["ratio"][0]:
                    s["ratio"] = (max(out), f"{i}::{vp.name}")
    print(f"seed {args.seed}, {args.n} problems ({skipped} skipped: refused, or a run that failed)")
    for dtype, s in stats.items():
        print(f"{dtype}: {s['variants']} variants; fail within the bounds: {len(s['bound_fail'])} items; "
              f"fail the fixed tolerance: {len(s['fixed_fail'])} items; rows with elements lacking a bound: "
              f"{s['fallback']}; largest |diff|/bound {s['ratio'][0]:.3g} ({s['ratio'][1]})")
        for line in s["bound_fail"][:15]:
            print("   bound:", line)
        for line in s["fixed_fail"][:15]:
            print("   fixed:", line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
