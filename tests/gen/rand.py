"""Randomness: one source of choices, drawn from Hypothesis or a ``random.Random``."""

from __future__ import annotations

import random


class Src:
    """Draws from Hypothesis (``draw``) or from a ``random.Random``. Hypothesis shrinks every
    draw toward 0, so the first option of a choice is the simplest one."""

    def __init__(self, draw=None, rng: random.Random | None = None):
        self._draw = draw
        self._rng = rng
        if draw is not None:
            from hypothesis import strategies as st
            self._st = st

    def int(self, lo: int, hi: int) -> int:
        if self._draw is not None:
            return self._draw(self._st.integers(lo, hi))
        return self._rng.randint(lo, hi)

    def coin(self, p: float) -> bool:
        """True with probability p (shrinks to False)."""
        return self.int(0, 999) >= round((1 - p) * 1000)

    def choice(self, seq):
        seq = list(seq)
        return seq[self.int(0, len(seq) - 1)]

    def weighted(self, pairs):
        """pairs: [(weight, value)]; shrinks toward the first."""
        pairs = [(w, v) for w, v in pairs if w > 0]
        total = sum(w for w, _ in pairs)
        r = self.int(0, total - 1)
        for w, v in pairs:
            if r < w:
                return v
            r -= w
        raise AssertionError

    def subset(self, seq, p: float):
        return [x for x in seq if self.coin(p)]
