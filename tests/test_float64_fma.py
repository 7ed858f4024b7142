"""The float64 backend's fused multiply-add (``B.fma``: ATen's ``add(c, b, alpha=a)``, as torch.optim's
updates run it) is ``a * b + c`` rounded once. Expected values: the exact rational ``a * b + c``
rounded to the nearest double by Python (``Fraction.__float__`` rounds correctly), and, where
torch is installed, torch's own ``add(alpha=)`` on CPU, which fuses."""

from __future__ import annotations

import random
import warnings
from fractions import Fraction

import numpy as np
import pytest

from adjoint.values.backends.float64 import Float64Backend, _v


def rounded_once(x, y, z) -> np.ndarray:
    out = []
    for p, q, r in zip(x, y, z):
        if not (np.isfinite(p) and np.isfinite(q) and np.isfinite(r)):
            out.append(p * q + r)
            continue
        exact = Fraction(p) * Fraction(q) + Fraction(r)
        if exact == 0:
            out.append(p * q + r)
            continue
        try:
            out.append(float(exact))
        except OverflowError:
            out.append(np.inf if exact > 0 else -np.inf)
    return np.array(out)


def _number(rng: random.Random) -> float:
    c = rng.random()
    if c < 0.1:
        return rng.choice([0.0, -0.0, np.inf, -np.inf, np.nan, 5e-324, -5e-324, 1.7e308, -1.7e308, 2.0 ** 996,
                           2.0 ** -1000, 1.0, 0.5, 2.0 ** -53, 1 + 2.0 ** -52])
    if c < 0.5:   # short mantissas: products and sums that land on ties and exact cancellations
        return float(rng.randint(-2 ** 26, 2 ** 26)) * 2.0 ** rng.randint(-30, 30)
    if c < 0.8:
        return rng.uniform(-1, 1) * 2.0 ** rng.randint(-60, 60)
    return rng.uniform(-1, 1) * 2.0 ** rng.randint(-1074, 1023)


def test_fma_is_rounded_once_everywhere():
    rng = random.Random(5)
    B = Float64Backend()
    for _ in range(60):
        x = np.array([_number(rng) for _ in range(400)])
        y = np.array([_number(rng) for _ in range(400)])
        z = np.array([-a * b * (1 + rng.choice([0, 2.0 ** -52, -2.0 ** -53, 2.0 ** -60]))
                      if rng.random() < 0.3 and np.isfinite(a * b) else _number(rng) for a, b in zip(x, y)])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = rounded_once(x, y, z)
        got = np.asarray(B.fma(_v(x), _v(y), _v(z)).a)
        same = ((got == want) & (np.signbit(got) == np.signbit(want))) | (np.isnan(got) & np.isnan(want))
        assert same.all(), [(a, b, c, g, w) for a, b, c, g, w, s in zip(x, y, z, got, want, same) if not s][:5]


def test_fma_differs_from_two_roundings_where_torch_fuses():
    """0.1 * 3 + (-0.3): two roundings give 5.551115123125783e-17, one gives 2.7755575615628914e-17 (the exact value
    of the doubles' product minus the double 0.3, rounded once); torch's add(alpha=) agrees."""
    B = Float64Backend()
    got = float(np.asarray(B.fma(_v(np.array([0.1])), _v(np.array([3.0])), _v(np.array([-0.3]))).a)[0])
    assert got == float(Fraction(0.1) * 3 - Fraction(0.3)) == 2.7755575615628914e-17
    assert got != 0.1 * 3 - 0.3
    torch = pytest.importorskip("torch")
    fused = torch.tensor([-0.3] * 16, dtype=torch.float64).add(torch.tensor([3.0] * 16, dtype=torch.float64),
                                                               alpha=0.1)
    assert fused.tolist() == [got] * 16
