"""What the torch side learns about autograd nodes: which one a hook ran at, and what it is called.

PyTorch numbers every node it creates with a thread-local ``sequence_nr`` (``AccumulateGrad``
excepted: it has none), so a sequence number names a node for the whole run. Which number a
pack or unpack call is for is read from PyTorch's op records (:mod:`.savednodes`); without
them, a pack takes the newest node (``torch._C._autograd._get_sequence_nr() - 1``: the
counter is the *next* number) and an unpack the node the engine runs
(``torch._C._current_autograd_node()``, which is also how a module's backward hook or a node
hook learns where it runs).

:class:`NodeIndex` walks the graphs behind the tensors of the run (every tensor a program
made is kept alive, as in a script that keeps its tensors) and keeps, by sequence number,
each node's name, and for each leaf its ``AccumulateGrad`` node, holding no other node; it also remembers which module call
each node belongs to (the backward hook nodes and last nodes of module calls), so a module's
backward hook knows which call of the module fired.
"""

from __future__ import annotations

import torch

#: ``AccumulateGrad`` nodes have no sequence number: PyTorch gives them UINT64_MAX.
NO_SEQUENCE = 2 ** 64 - 1


def sequence_nr(node) -> int:
    return node._sequence_nr()


def next_sequence_nr() -> int:
    """The number the next node will get (the pack hook's node has this minus one)."""
    return torch._C._autograd._get_sequence_nr()


def current_node():
    """The node the autograd engine is running (None outside a backward)."""
    return torch._C._current_autograd_node()


def grad_fn_of(t):
    """``t.grad_fn``, or None where reading it raises: a view whose base was modified in place
    after the view was made where PyTorch forbids that (a custom Function's or a multi-output
    op's view) raises on ``.grad_fn`` -- the harness reads it, the user's program did not."""
    try:
        return t.grad_fn
    except RuntimeError:
        return None


class NodeIndex:
    """Names by sequence number, and each leaf's ``AccumulateGrad``. It keeps no other node alive:
    a node a user's script no longer holds dies, and PyTorch's version error names a node only
    while something holds it (the result an in-place op on a view saved names the view's grad_fn
    of then, else the node that saved it)."""

    def __init__(self):
        self.names: dict[int, str] = {}             # sequence_nr -> node name
        self.held: dict[int, object] = {}           # id(node) -> node, for nodes without a sequence_nr
        self.accumulators: dict[int, object] = {}   # id(leaf) -> its AccumulateGrad
        self.calls: dict[tuple[int, str], list[tuple[int, int]]] = {}   # (seq, module label) -> [(k, forward)]

    def scan(self, tensors, readable=None) -> None:
        """Walk the graphs behind ``tensors`` (tensors, or nested tuples/lists of them), starting
        only from those ``readable(t)`` allows (all of them for None): reading a view's ``grad_fn``
        makes a new one when its base was written since, which the user's program did not do."""
        stack = [grad_fn_of(t) for t in _tensors(tensors) if readable is None or readable(t)]
        while stack:
            node = stack.pop()
            if node is None:
                continue
            seq = sequence_nr(node)
            if seq != NO_SEQUENCE:   # numbers are never reused: the name is enough to keep
                if seq in self.names:
                    continue
                self.names[seq] = node.name()
            else:   # AccumulateGrad (the graph holds it; a leaf only weakly) and the rare others
                if id(node) in self.held:
                    continue
                self.held[id(node)] = node
                if hasattr(node, "variable"):
                    self.accumulators[id(node.variable)] = node
            stack.extend(n for n, _ in node.next_functions)

    def name(self, seq: int | None) -> str | None:
        return self.names.get(seq) if seq is not None else None

    def accumulator(self, leaf: torch.Tensor):
        node = self.accumulators.get(id(leaf))
        return node if node is not None and node.variable is leaf else None

    # ------------------------------------------------------------------ module calls
    def note_call(self, node, label: str, k: int, forward: int) -> None:
        """``node`` is where a module call's backward hooks run (its BackwardHookFunctionBackward
        nodes, or the grad_fn of its output for the legacy hook)."""
        entries = self.calls.setdefault((sequence_nr(node), label), [])
        if (k, forward) not in entries:
            entries.append((k, forward))

    def call_at(self, node, label: str, nth: int) -> tuple[int, int] | None:
        """The module call (k, forward index) whose hooks run at ``node``; when several calls share
        the node, the ``nth`` time a hook fires there is the nth call."""
        if node is None:
            return None
        entries = self.calls.get((sequence_nr(node), label))
        if not entries:
            return None
        return entries[min(nth, len(entries) - 1)]


def _tensors(x):
    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (tuple, list)):
        for i in x:
            yield from _tensors(i)
    elif isinstance(x, dict):
        for i in x.values():
            yield from _tensors(i)


def tensors_in(x) -> list[torch.Tensor]:
    """The tensors in a value (a tensor, or nested tuples, lists and dicts of them)."""
    return list(_tensors(x))
