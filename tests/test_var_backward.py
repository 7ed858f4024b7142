"""var / std / var_mean's backward as PyTorch 2.13's ``var_backward`` computes it, against real
torch: with a dim given, N is the product of the given dims' sizes (1 for ``dim=()``, though the
forward reduces every dim), so ``2 / (N - correction)`` may be negative or infinite; with no dim
and ``numel <= correction`` the gradient is ``grad * where(self == mean, nan, inf)``. Solved
exactly and in --float64 (the exact answer refuses an infinite forward value)."""

from __future__ import annotations

import math
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conftest import require_torch  # noqa: E402

torch = require_torch()

import adjoint  # noqa: E402

X = [[0.3, -0.2, 0.5], [1.0, 2.0, -1.0]]
AT_MEAN = [[0.0, 1.0, 2.0]]   # the middle element is the mean: nan there, inf elsewhere

CASES = [   # (forward, torch function, input, exact too: the forward is finite)
    ("x.var(dim=(), correction=0)", lambda x: x.var(dim=(), correction=0), X, True),
    ("x.var(dim=(), correction=1)", lambda x: x.var(dim=(), correction=1), X, True),
    ("x.std(dim=[])", lambda x: x.std(dim=[]), X, True),
    ("torch.var_mean(x, dim=(), correction=0)[0] + torch.var_mean(x, dim=())[1]",
     lambda x: torch.var_mean(x, dim=(), correction=0)[0] + torch.var_mean(x, dim=())[1], X, True),
    ("x.var(dim=(0, 1), correction=7)", lambda x: x.var(dim=(0, 1), correction=7), X, False),
    ("x.var(correction=7)", lambda x: x.var(correction=7), X, False),
    ("x.var(correction=3)", lambda x: x.var(correction=3), AT_MEAN, False),
    ("x.std(correction=7)", lambda x: x.std(correction=7), X, False),
    ("torch.var_mean(x, correction=6)[0]", lambda x: torch.var_mean(x, correction=6)[0], X, False),
]


def _same(a, b) -> bool:
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(u, v) for u, v in zip(a, b))
    if math.isnan(b) or math.isinf(b):
        return (math.isnan(a) and math.isnan(b)) or a == b
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-15)


@pytest.mark.parametrize("forward, fn, value, exact", CASES, ids=[c[0] for c in CASES])
def test_grad_is_var_backward(forward, fn, value, exact):
    x = torch.tensor(value, dtype=torch.float64, requires_grad=True)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")   # degrees of freedom <= 0
        fn(x).backward()
    want = x.grad.tolist()
    text = (f"name: v\ndtype: float64\ninputs:\n  x: {{value: {value}, requires_grad: true}}\nmodel:\n"
            f"  forward: \"{forward}\"\n")
    for mode in ("float64", "exact") if exact else ("float64",):
        got = adjoint.loads(text).solve(mode=mode).to_json()["variants"]["default"]["grads"]["x"]["value"]
        assert _same(got, want), (mode, got, want)
