"""The node of a pack call whose op never finished (the pack hook raised, or one after it did).

A pack call's node is normally named from its sequence number once the forward is over
(:mod:`adjoint.torchside.graphs`). When a pack hook raises, PyTorch abandons the op: its
node is freed with no tensor pointing at it, and nothing can name it afterwards. So the
torch side watches the calls that could fail that way and, when one does, runs the same
call once more with pass-through saved-tensor hooks pushed on top (so no hook of the file
runs again) and takes the node created at the same position: the op creates its nodes in
the same order both times, so the node numbered ``start' + (seq - start)`` in the rerun is
the one the failed pack was building. The rerun happens only on the way out of a run that
has already failed, so what it computes changes nothing that is reported.

Which calls are watched: every torch call a forward makes from Python, through a
``TorchFunctionMode`` active during forwards with saved-tensor hooks (it sees the outermost
calls: ``torch.sin``, ``F.linear`` inside ``nn.Linear``, ``Tensor.mul``; each rerun covers
the nodes its call makes inside), and a custom Function's ``apply`` (whose
``save_for_backward`` packs after its forward returned), through :func:`watch_call`.
"""

from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode

from . import graphs


def _identity(x):
    return x


def name_unfinished(log: list, mark: int, start: int, rerun) -> None:
    """Name the node of every pack call logged since ``mark`` for a node numbered from ``start`` on
    that no tensor holds, by calling ``rerun()`` once more (see the module docstring)."""
    pending = [r for r in log[mark:] if r.get("kind") == "pack" and "_node" not in r
               and r.get("_seq") is not None and r["_seq"] >= start]
    if not pending:
        return
    with torch.autograd.graph.saved_tensors_hooks(_identity, _identity):
        again = graphs.next_sequence_nr()
        try:
            out = rerun()
        except Exception:   # noqa: BLE001 -- the run has failed already; nothing more to learn
            return
    nodes = graphs.NodeIndex()
    nodes.scan(out)
    for r in pending:
        name = nodes.name(again + r["_seq"] - start)
        if name is not None:
            r["_node"] = name


class WatchPacks(TorchFunctionMode):
    """Around a forward: every outermost torch call that fails gets its unfinished packs named."""

    def __init__(self, log: list):
        super().__init__()
        self.log = log

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        start = graphs.next_sequence_nr()
        mark = len(self.log)
        try:
            return func(*args, **kwargs)
        except Exception:
            name_unfinished(self.log, mark, start, lambda: func(*args, **kwargs))
            raise


def watch_call(log: list, fn, *args):
    """``fn(*args)`` (a custom Function's apply), its unfinished packs named if it fails."""
    start = graphs.next_sequence_nr()
    mark = len(log)
    try:
        return fn(*args)
    except Exception:
        name_unfinished(log, mark, start, lambda: fn(*args))
        raise
