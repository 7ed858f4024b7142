"""Pack calls whose node no graph walk reaches: the op never finished (the pack hook raised, or
one after it did), or the node is wrapped inside a CopySlices (an in-place op on a view; see
:func:`name_wrapped`).

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

A call that may write its operands (an in-place op, a custom Function whose forward writes an
input and marks it dirty) is rerun on fresh copies of them, made before the rerun's first
number is read: on the operands themselves it would write them a second time and give a
dirty input a second new ``grad_fn``, so that the tensor no longer names the node the failed
pack was building (PyTorch's run rebased it once, onto that node).
"""

from __future__ import annotations

import torch
from torch.overrides import TorchFunctionMode

from adjoint.torchside import graphs


def _identity(x):
    return x


def name_unfinished(log: list, mark: int, start: int, rerun, args=None) -> None:
    """Name the node of every pack call logged since ``mark`` for a node numbered from ``start`` on
    that no tensor holds, by calling ``rerun()`` once more (see the module docstring); with
    ``args``, ``rerun(*copies)`` on fresh copies of them (a call that writes its operands)."""
    pending = [r for r in log[mark:] if r.get("kind") == "pack" and "_node" not in r
               and r.get("_seq") is not None and r["_seq"] >= start]
    if not pending:
        return
    with torch.autograd.graph.saved_tensors_hooks(_identity, _identity):
        try:
            copies = None if args is None else _fresh(args, {})
        except Exception:   # noqa: BLE001 -- only a name is sought
            return
        again = graphs.next_sequence_nr()
        try:
            out = rerun() if copies is None else rerun(*copies)
        except Exception:   # noqa: BLE001 -- the run has failed already; nothing more to learn
            return
    nodes = graphs.NodeIndex()
    nodes.scan(out)
    for r in pending:
        name = nodes.name(again + r["_seq"] - start)
        if name is not None:
            r["_node"] = name


class WatchPacks(TorchFunctionMode):
    """Around a forward: every outermost torch call that fails gets its unfinished packs named;
    one that packed and returned has its result's graph indexed at once (``index``), while its
    node is still reachable: a forward hook that raises next drops the result."""

    def __init__(self, log: list, index=None):
        super().__init__()
        self.log = log
        self.index = index

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        start = graphs.next_sequence_nr()
        mark = len(self.log)
        try:
            out = func(*args, **kwargs)
        except Exception:
            if _writes(func, kwargs):
                name_unfinished(self.log, mark, start, lambda a, k: func(*a, **k), (tuple(args), kwargs))
            else:
                name_unfinished(self.log, mark, start, lambda: func(*args, **kwargs))
            if _writes_a_view(func, args):   # a rerun that fails the same way (an overlap) names nothing
                name_wrapped(self.log, mark, func, args, kwargs)
            raise
        if _writes_a_view(func, args):
            name_wrapped(self.log, mark, func, args, kwargs)
        elif self.index is not None and any(r.get("kind") == "pack" for r in self.log[mark:]):
            self.index(out)   # just made: reading its grad_fn makes nothing new
        return out


def _writes_a_view(func, args) -> bool:
    """An in-place method (``mul_``, ``__imul__``) called on a view."""
    name = getattr(func, "__name__", "")
    inplace = (name.endswith("_") and not name.startswith("__")) or name in _AUGMENTED
    return inplace and bool(args) and isinstance(args[0], torch.Tensor) and args[0]._is_view()


def _writes(func, kwargs) -> bool:
    """A call that writes its first operand (or an ``out=`` tensor given by keyword)."""
    name = getattr(func, "__name__", "")
    return (name.endswith("_") and not name.startswith("__")) or name in _AUGMENTED or "out" in kwargs


def _fresh(value, made: dict):
    """``value`` with every tensor in it (in tuples, lists and dicts of keyword arguments too)
    replaced by a fresh copy with the same ``requires_grad``, leafness and view-ness (a view: the
    same strides over a copy of its base); one tensor met twice is one copy."""
    if isinstance(value, (tuple, list)):
        return type(value)(_fresh(v, made) for v in value)
    if isinstance(value, dict):
        return {k: _fresh(v, made) for k, v in value.items()}
    if not isinstance(value, torch.Tensor):
        return value
    if id(value) in made:
        return made[id(value)]
    if value._is_view() and value._base is not None:
        base = _fresh(value._base, made)
        c = base.as_strided(value.size(), value.stride(), value.storage_offset())
    else:
        c = value.detach().clone()
        if value.requires_grad:
            c.requires_grad_()
            if not value.is_leaf:
                c = c * 1
    made[id(value)] = c
    return c


_AUGMENTED = {"__iadd__", "__isub__", "__imul__", "__itruediv__", "__ipow__"}


def name_wrapped(log: list, mark: int, func, args, kwargs) -> None:
    """Name the node of every pack call an in-place op on a view just made: PyTorch wraps that
    node inside the base's ``CopySlices``, where no graph walk reaches it, and only the
    backward's records would name it (a backward that never runs it leaves it unnamed). Every
    pack the call made is for that node (the copy of the original ``self`` it saves is made
    inside it), so the same op is run once more on plain copies of the operands (``self`` not a
    view, so its result's grad_fn is that node's kind), with pass-through saved-tensor hooks."""
    pending = [r for r in log[mark:] if r.get("kind") == "pack" and "_node" not in r]
    if not pending:
        return

    def plain(t, first):
        if not isinstance(t, torch.Tensor):
            return t
        c = t.detach().clone()
        if t.requires_grad:
            c.requires_grad_()
            if first:       # an in-place op may not write a leaf that requires grad
                c = c * 1
        return c

    with torch.autograd.graph.saved_tensors_hooks(_identity, _identity):
        try:
            out = func(*[plain(a, i == 0) for i, a in enumerate(args)],
                       **{k: plain(v, False) for k, v in kwargs.items()})
        except Exception:   # noqa: BLE001 -- only a name is sought; without it the record stays unnamed
            return
    node = graphs.grad_fn_of(out) if isinstance(out, torch.Tensor) else None
    if node is not None:
        for r in pending:
            r["_node"] = node.name()


def watch_call(log: list, fn, *args, node_name: str | None = None):
    """``fn(*args)`` (a custom Function's apply), its unfinished packs named if it fails. With
    ``node_name`` (the Function's backward class, ``<Name>Backward``): when the Function wrote a
    view it marked dirty, its node is wrapped inside the base's ``CopySlices``, where no graph walk
    reaches it, so the packs its ``save_for_backward`` made are named here (every pack of the call
    is its node's: the Function's forward runs without grad)."""
    start = graphs.next_sequence_nr()
    mark = len(log)
    try:
        out = fn(*args)
    except Exception:   # its forward may have written an input (dirty): the rerun writes copies
        name_unfinished(log, mark, start, fn, args)
        raise
    if node_name is not None:
        first = out[0] if isinstance(out, tuple) and out else out
        own = graphs.grad_fn_of(first) if isinstance(first, torch.Tensor) else None
        if own is not None and own.name() == node_name:
            # PyTorch's record of the apply carries the number read before the inputs' edges were
            # collected; collecting them can make a node (a view's grad_fn regenerated after an
            # in-place write), so the Function's node has a later number than its record says
            for r in log[mark:]:
                if r.get("kind") == "pack":
                    r["_seq"] = graphs.sequence_nr(own)
                    r["_seq_known"] = True
        base = first._base if isinstance(first, torch.Tensor) and first._is_view() else None
        node = graphs.grad_fn_of(base) if base is not None else None   # the view's is AsStridedBackward0
        if node is not None and node.name().endswith("CopySlices"):   # torch::autograd::CopySlices
            for r in log[mark:]:
                if r.get("kind") == "pack" and "_node" not in r:
                    r["_node"] = node_name
    return out
