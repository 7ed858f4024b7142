"""A Python number (or a nested tuple) in a backward hook's returned tuple, where PyTorch expects a
tensor or None."""

from __future__ import annotations


class ReturnedNumber:
    """The hook runner hands it on in place of the number (its Python type as CPython names it);
    the engine checks the tuple's length first, then raises PyTorch's TypeError "expected
    Variable, but hook returned 'int'" where the node's hook result is checked
    (:meth:`adjoint.engine.reverse.Engine.check_tuple`)."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"ReturnedNumber({self.name})"
