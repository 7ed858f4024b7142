"""What a benchmark reports: metrics, their targets, and how an outcome is judged.

A metric's name carries its unit: ``_s`` seconds, ``_mb`` megabytes; a name with a ``/`` is
a ratio (a plain number). Targets are issue 15's, written as a comparison.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: comparisons a target can make
OPS = ("<=", "<", ">=", "finishes")


@dataclass(frozen=True)
class Target:
    """``op`` one of :data:`OPS`; ``bound`` the number compared with (none for ``finishes``,
    which is met by any measured value: the work completed, without error, within the time)."""

    op: str
    bound: float | None = None

    def __post_init__(self):
        if self.op not in OPS:
            raise ValueError(f"target op must be one of {OPS}, not {self.op!r}")

    def met(self, value) -> bool:
        """Whether a measured ``value`` meets the target; a non-number (a timeout, a failure) never does."""
        if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value):
            return False
        if self.op == "finishes":
            return True
        if self.op == "<=":
            return value <= self.bound
        if self.op == "<":
            return value < self.bound
        return value >= self.bound

    def __str__(self) -> str:
        return "finishes" if self.op == "finishes" else f"{self.op} {self.bound:g}"


@dataclass(frozen=True)
class Metric:
    name: str
    target: Target | None = None


def at_most(bound: float) -> Target:
    return Target("<=", bound)


def under(bound: float) -> Target:
    return Target("<", bound)


def at_least(bound: float) -> Target:
    return Target(">=", bound)


FINISHES = Target("finishes")


@dataclass(frozen=True)
class Outcome:
    """A metric's result: ``value`` a number, or a string saying why there is none
    ("timeout after 8 s", "failed: ...", "skipped (--quick)")."""

    metric: Metric
    value: float | str

    @property
    def met(self) -> bool | None:
        """None when the metric has no target, or was skipped on purpose."""
        if self.metric.target is None or (isinstance(self.value, str) and self.value.startswith("skipped")):
            return None
        return self.metric.target.met(self.value)

    def to_json(self) -> dict:
        target = self.metric.target
        return {"name": self.metric.name, "value": self.value, "target": str(target) if target else None,
                "met": self.met}
