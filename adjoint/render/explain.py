"""The words both reports (terminal and notebook) use for what a run did not do: the non-leaf
tensors whose ``.grad`` stays None, and the hooks that never fired (:mod:`adjoint.answer.silent`
finds them and their reasons in the engine's records)."""

from __future__ import annotations

#: non-leaf names listed by name with a None .grad; more are counted
UNKEPT_SHOWN = 6


def unkept_line(names: list[str]) -> str:
    """The non-leaf tensors whose .grad is None, and why (as PyTorch's warning says)."""
    shown = ", ".join(f"{n}.grad" for n in names[:UNKEPT_SHOWN])
    more = f" and {len(names) - UNKEPT_SHOWN} more" if len(names) > UNKEPT_SHOWN else ""
    them = "it" if len(names) == 1 else "them"
    return (f"{shown}{more}: None -- not {'a leaf' if len(names) == 1 else 'leaves'}, and retain_grad() was not "
            f"called on {them} (PyTorch fills .grad of leaves only; reading it warns)")


def silent_what(s) -> str:
    """A hook that never fired (an :class:`adjoint.answer.silent.Silent`), named as a call's title names it."""
    where = {"tensor": f"on tensor {s.target}", "node": f"on node {s.target}", "module": f"on module {s.target}",
             "global": "(global)", "multi_grad": f"on tensors {s.target}",
             "saved_tensors": "(saved_tensors_hooks)", "saved": f"on a saved tensor of {s.target}",
             "disable_saved_tensors_hooks": "(disable_saved_tensors_hooks)",
             "save_on_cpu": "(save_on_cpu)"}.get(s.on, s.target)
    return f"{s.kind} {where}"
