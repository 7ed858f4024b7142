"""The name of the node a forward op builds, for a node no graph holds: its op raised after saving.

An op's autograd kernel builds its node and saves its inputs (the pack hooks run) before the
kernel itself runs; when the kernel then raises (``binary_cross_entropy`` of a value outside
[0, 1]), the node is dropped with the error, and no graph walk or backward record can name it.
The run's profiler records still hold the forward op (its ``aten::`` name, its sequence
number, how many arguments it had). The node's class is PyTorch's generated one, named by
torchgen from ``derivatives.yaml`` (``BinaryCrossEntropyBackward0``: the op's name in camel
case, ``Backward``, and a counter over the overloads): read here with torchgen's own loader,
from the copies of ``derivatives.yaml`` and ``native_functions.yaml`` torch ships in
``torchgen/packaged``. Loaded on first use only (a few seconds), for such a pack call.
"""

from __future__ import annotations

import functools
import os


@functools.lru_cache(maxsize=1)
def _nodes_by_op() -> dict[str, list[tuple[tuple[bool, ...], str]]]:
    """op base name (``add``) -> [(per argument: is it a tensor, node class name)] over its overloads."""
    import torchgen
    from torchgen.packaged.autograd.load_derivatives import load_derivatives

    base = os.path.join(os.path.dirname(torchgen.__file__), "packaged")
    infos, _ = load_derivatives(os.path.join(base, "autograd", "derivatives.yaml"),
                                os.path.join(base, "ATen", "native", "native_functions.yaml"),
                                os.path.join(base, "ATen", "native", "tags.yaml"))
    out: dict[str, list[tuple[int, str]]] = {}
    for schema, per_key in infos.items():
        info = per_key.get("Default")
        if info is not None and info.op:
            tensors = tuple(a.type.is_tensor_like() for a in schema.arguments.flat_all)
            out.setdefault(str(schema.name.name.base), []).append((tensors, info.op))
    return out


def node_of_op(op: str, shapes: list | None) -> str | None:
    """The node class ``op`` (a profiler record's name: ``aten::binary_cross_entropy``, or an
    in-place ``aten::mul_``, whose node is the functional op's) builds, when its overloads
    decide it: one node name, or one overload its recorded argument ``shapes`` fit (as many
    arguments; one with dims is a tensor: ``mul_(x[:, 2:3])`` is mul.Tensor's MulBackward0, where
    ``mul_(2)`` and a 0-d tensor both record ``[]``); None otherwise."""
    if not op.startswith("aten::"):
        return None
    name = op[len("aten::"):]
    try:
        table = _nodes_by_op()
    except Exception:   # a torch without torchgen's packaged files: the node stays unnamed
        return None
    candidates = table.get(name) or table.get(name.rstrip("_")) or []
    names = {n for _, n in candidates}
    if len(names) == 1:
        return names.pop()
    if shapes is not None:
        matching = {n for tensors, n in candidates if len(tensors) == len(shapes)
                    and all(t or not shape for t, shape in zip(tensors, shapes))}
        if len(matching) == 1:
            return matching.pop()
    return None
