"""What the float64 and structure backends share: none of the exact backend's refusals (IEEE
arithmetic is PyTorch's own, and shapes have no values to refuse), no exact text, no notes."""

from __future__ import annotations


class NoExactChecks:
    """The exact backend's checks and exact-only outputs, as no-ops (mixed into
    :class:`~adjoint.values.backends.float64.Float64Backend` and
    :class:`~adjoint.values.backends.structure.StructureBackend`)."""

    def notes(self) -> list[str]:
        return []

    def check_literal(self, value, decl) -> None:
        return None

    def check_output(self, value, loc, what: str) -> None:
        return None

    def check_size(self, x, loc, what: str) -> None:
        return None   # no closed forms here

    def after_backward(self, x, loc, what: str):
        return x      # IEEE arithmetic: an overflow is already inf

    def strings(self, x):
        return None   # the contract's ``exact`` is null in these modes

    def after_op(self, op, ins, params, out, loc, check: bool):
        return out
