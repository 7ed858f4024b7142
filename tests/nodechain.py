"""The autograd graph behind a tensor, in one comparable form, from adjoint and from real torch.

``chain(t)`` walks ``grad_fn`` and ``next_functions`` from a tensor: each node as
``(name, sequence rank, [edges...])`` where an edge is a nested node or None, AccumulateGrad
as ``("AccumulateGrad", leaf name)``. Sequence numbers are replaced by their rank among the
nodes reached (creation order is what matters; absolute numbers depend on what ran before).
The same function reads adjoint's :class:`adjoint.engine.graph.Tensor` and a torch tensor, so a test
asserts ``chain(ours) == chain(theirs)``.
"""

from __future__ import annotations


def _children(node):
    if hasattr(node, "next_functions") and callable(getattr(node, "name", None)):  # torch
        return [f for f, _ in node.next_functions]
    return [e.node if e is not None else None for e in node.edges]


def _name(node) -> str:
    name = node.name() if callable(getattr(node, "name", None)) else node.name
    return name.rsplit("::", 1)[-1]


def _seq(node) -> int:
    return node._sequence_nr() if callable(getattr(node, "_sequence_nr", None)) else node.seq


def _leaf_name(node, names: dict) -> str:
    var = node.variable
    return names.get(id(var), "?")


def chain(t, names: dict | None = None):
    """The graph behind ``t`` (adjoint Tensor or torch tensor); ``names`` maps id(leaf) -> name
    for AccumulateGrad leaves (optional)."""
    names = names or {}
    root = t.grad_fn
    if root is None:
        return None
    seqs = []

    def collect(node, seen):
        if node is None or id(node) in seen:
            return
        seen.add(id(node))
        if _name(node) != "AccumulateGrad":
            seqs.append(_seq(node))
        for c in _children(node):
            collect(c, seen)

    collect(root, set())
    rank = {s: i for i, s in enumerate(sorted(set(seqs)))}

    def walk(node):
        if node is None:
            return None
        if _name(node) == "AccumulateGrad":
            return ("AccumulateGrad", _leaf_name(node, names))
        return (_name(node), rank[_seq(node)], [walk(c) for c in _children(node)])

    return walk(root)


def leaf_names(mapping: dict) -> dict:
    """id(leaf tensor) -> name, from a name -> tensor mapping (adjoint's or torch's)."""
    return {id(t): n for n, t in mapping.items()}
