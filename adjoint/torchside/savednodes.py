"""Which node each pack and unpack call is for, read from PyTorch's own op records.

A pack hook runs inside the autograd kernel of the op that saves the tensor, while that op's
node is being built; an unpack hook runs inside the node's backward. Neither can ask for
the node, so the run is recorded with PyTorch's profiler (``torch.autograd.profiler_legacy``:
the same records, without the kineto profiler's start/stop lines on stderr) and every pack
and unpack call drops a marker (``record_function``) while it runs. Afterwards each marker's
innermost enclosing record that carries a sequence number is the op or node it ran in:

* for a pack, the forward op's record, whose sequence number is the number of the node the
  op builds (PyTorch's own link from a forward op to its backward node). A counter rule
  would not do: an in-place op clones the original input (a ``CloneBackward0``) before
  saving it, and an in-place op on a view saves its result after ``CopySlices`` and the
  view's new node exist;
* for an unpack, the node's own record in the backward (named as the node: ``MulBackward0``),
  also for a node run inside another: the op a ``CopySlices`` wraps, whose saved tensors
  ``torch._C._current_autograd_node()`` would attribute to the ``CopySlices``.

Node names come from the graphs the run built (:class:`~adjoint.torchside.graphs.NodeIndex`)
and, for a node no graph walk reaches (the op inside a ``CopySlices``), from the backward's
records. The profiler runs only for variants with saved-tensor hooks.
"""

from __future__ import annotations

import contextlib

from torch.autograd import profiler, profiler_legacy

MARK = "adjoint::saved::"
EVALUATE = "autograd::engine::evaluate_function: "


class SavedNodes:
    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.events = None
        self.names: dict[int, str] = {}        # sequence_nr -> node name, from the backward's records
        self.ops: dict[int, tuple[str, list | None]] = {}   # sequence_nr -> (forward op, its arguments' shapes)

    @contextlib.contextmanager
    def recording(self):
        """Around the whole run (one profiler: it is not reentrant)."""
        if not self.enabled:
            yield
            return
        prof = profiler_legacy.profile(record_shapes=True)   # the argument count names an op's overload
        try:
            with prof:
                yield
        finally:
            self.events = prof.function_events

    def mark(self, index: int) -> None:
        """Inside a pack or unpack hook: a marker for the call logged at ``index``."""
        if self.enabled:
            with profiler.record_function(f"{MARK}{index}"):
                pass

    def resolve(self, log: list) -> None:
        """Give each marked pack / unpack record its node: ``_seq`` (and ``_node`` for an unpack)."""
        if self.events is None:
            return
        for e in self.events:
            if e.sequence_nr >= 0 and _is_node(e):
                self.names.setdefault(e.sequence_nr, e.name)
        for e in self.events:
            if not e.name.startswith(MARK):
                continue
            index = int(e.name[len(MARK):])
            owner = e.cpu_parent
            while owner is not None and owner.sequence_nr < 0:
                owner = owner.cpu_parent
            if owner is None or index >= len(log):
                continue
            record = log[index]
            if record.get("_seq_known"):   # a custom Function's pack, named by watch_call
                continue
            record["_seq"] = owner.sequence_nr
            if record["kind"] == "pack" and not _is_node(owner):
                shapes = owner.input_shapes
                self.ops.setdefault(owner.sequence_nr, (owner.name, list(shapes) if shapes is not None else None))
            if record["kind"] == "unpack" and _is_node(owner):
                record["_node"] = owner.name

    def name(self, seq: int | None) -> str | None:
        return self.names.get(seq) if seq is not None else None

    def op_node(self, seq: int | None) -> str | None:
        """The node the forward op numbered ``seq`` built, from the op's name alone (a node its
        op dropped when it raised after the pack hooks ran: :mod:`.opnodes`)."""
        from adjoint.torchside.opnodes import node_of_op

        op = self.ops.get(seq) if seq is not None else None
        return node_of_op(*op) if op is not None else None


def _is_node(e) -> bool:
    """A record of a node's backward: under the engine's evaluate_function record, or run by
    another node (CopySlices runs the op it wraps)."""
    parent = e.cpu_parent
    if parent is None or e.name.startswith("aten::"):
        return False
    if parent.name.startswith(EVALUATE):
        return True
    return parent.sequence_nr >= 0 and _is_node(parent)
