"""QArray.strings and QArray.floats (values/numbers/rational.py): the exact text and the decimal
of every element, against Python's own Fraction, for each of its reductions (int64, power-of-two denominators below and
above 63 bits, a general denominator) and for FLINT integers as a matrix product leaves them."""

from __future__ import annotations

import random
from fractions import Fraction

import flint
import numpy as np
import pytest

from adjoint.values.numbers.rational import QArray


def _fraction_text(f: Fraction) -> str:
    return str(f.numerator) if f.denominator == 1 else f"{f.numerator}/{f.denominator}"


@pytest.mark.parametrize("den_bits, num_bits", [(3, 10), (50, 83), (62, 90), (63, 70), (70, 200), (0, 80)])
@pytest.mark.parametrize("power_of_two", [True, False])
def test_strings_are_fractions(den_bits, num_bits, power_of_two):
    rng = random.Random(den_bits * 1000 + num_bits + power_of_two)
    den = 1 << den_bits if power_of_two else (1 << den_bits) + 3 * (den_bits > 0)
    nums = [rng.randint(-(1 << num_bits), 1 << num_bits) >> rng.randint(0, num_bits) for _ in range(300)]
    nums += [0, 1, -1, den, -den, 2 * den, den // 2 or 1, -(den // 4 or 1), (1 << num_bits) * den]
    q = QArray(np.array(nums, dtype=object), den, reduced=True)
    want = [_fraction_text(Fraction(n, den)) for n in nums]
    assert q.strings() == want
    z = QArray.lazy(flint.fmpz_mat(1, len(nums), nums), den)   # FLINT integers, as matmul leaves them
    assert z.strings() == want
    floats = [float(Fraction(n, den)) for n in nums]   # correctly rounded
    assert q.floats().tolist() == floats and z.floats().reshape(-1).tolist() == floats
    assert z.strings() == want   # after floats(): the same ints serve both
