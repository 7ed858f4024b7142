"""A Python list a program builds (``[a, b]``): a tuple everywhere a sequence is read (``cat([a,
b])``, ``dim=[0, 1]``, ``l[0]``), but not a tuple where PyTorch asks ``isinstance(x, tuple)``:
``nn.Module``'s legacy-hook check (``_maybe_warn_non_full_backward_hook``) and ``BackwardHook``,
which look into tuples only."""

from __future__ import annotations

from adjoint.engine.return_types import PackedSequence, ReturnTuple, TorchSize


class PyList(tuple):
    """``[a, b]`` as written in a forward or a hook body."""

    __slots__ = ()


def is_tuple(v) -> bool:
    """``isinstance(v, tuple)`` as Python answers it for the program's value."""
    return isinstance(v, tuple) and not isinstance(v, PyList)


def sequence_name(v) -> str:
    """The type name CPython's messages give a sequence the program made (``tp_name``): ``list``,
    ``tuple``, ``torch.Size``, or ``torch.return_types.max`` for what ``max(dim=...)`` and its kind
    return."""
    if isinstance(v, TorchSize):
        return "torch.Size"
    if isinstance(v, PackedSequence):
        return "PackedSequence"
    if isinstance(v, ReturnTuple):
        return f"torch.return_types.{v.kind}"
    return "list" if isinstance(v, PyList) else "tuple"
