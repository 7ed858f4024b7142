"""``raises:`` -- a hook that raises, as a file says it (contract v2 and v3).

* ``raises: TEXT`` -- ``raise RuntimeError(TEXT)`` when the hook is called (a saved-tensors hook:
  in its pack, the first of its calls);
* ``raises: {type: NAME, message: TEXT, in: pack | unpack}`` -- ``raise NAME(TEXT)`` with a custom
  exception class (the user's ``class NAME(Exception)``); PyTorch lets it propagate unwrapped,
  so the answer's ``error.type`` is NAME. ``in`` (saved-tensors hooks only) says which of the
  pack or the unpack raises; the other runs its body.

The validated form is kept on the hook as ``raises`` (the message), ``raises_type`` and
``raises_in``; :func:`raises_now` says whether a call of a given kind raises.
"""

from __future__ import annotations

from adjoint.format.checks import mapping, string
from adjoint.format.errors import ProblemError
from adjoint.format.loader import YMap, YNode


def parse_raises(node: YNode, index: int, kind: str) -> tuple[str, str, str | None]:
    """(message, type, in) of a hook's ``raises:``."""
    what = f"raises of hook {index}"
    if not isinstance(node, YMap):
        return string(node, what), "RuntimeError", None
    m = mapping(node, what, ("message",), ("type", "in"))
    message = string(m.get("message"), f"the message of {what}")
    type_ = "RuntimeError"
    if m.get("type") is not None:
        type_ = string(m.get("type"), f"the type of {what}")
        if not type_.isidentifier() or type_.startswith("_"):
            raise ProblemError(m.get("type").loc, f"the type of {what} must be a Python class name such as "
                                                  f"MyError, not '{type_}'")
    where = None
    if m.get("in") is not None:
        if kind != "saved_tensors":
            raise ProblemError(m.get("in").loc, f"in: is taken by saved_tensors hooks only (which of pack or "
                                                f"unpack raises); drop it from hook {index}")
        where = string(m.get("in"), f"the in of {what}")
        if where not in ("pack", "unpack"):
            raise ProblemError(m.get("in").loc, f"the in of {what} must be pack or unpack, not '{where}'")
    return message, type_, where


def raises_now(hook, kind: str) -> bool:
    """Does this call of ``hook`` (``kind``: its call's kind, pack / unpack for saved tensors) raise?"""
    if hook.raises is None:
        return False
    where = getattr(hook, "raises_in", None)
    return where is None or where == kind
