"""The op registry: one :class:`Op` record per primitive, holding everything about it.

A primitive is one ATen overload, hence one autograd node type (``sum`` and ``sum.dim_IntList``
are two primitives: ``SumBackward0`` and ``SumBackward1``). Its record holds the node's name,
how its output shape follows from the inputs (raising PyTorch's own complaint when there is
none), the exact forward and the vector-Jacobian product (written once, over a value backend
``B``: see :mod:`adjoint.values.backends`), which tensors the node saves for backward and in which
order (what ``saved_tensors_hooks`` see), the conventions at kinks, and what the exact backend
needs to follow PyTorch's floats (signed zeros, overflow, non-finite values).

The families live in the modules named in :data:`FAMILIES`; :data:`REGISTRY` maps each
primitive name to its record, importing a family when a name is first looked up in it
(:mod:`adjoint.engine.families`). A missing primitive is a ``KeyError`` (never a fallback), and
``tests/test_rules.py`` and ``tests/test_registry_math.py`` walk every entry and fail on an
incomplete one (no gradient checks, no ``math``).

Conventions of the rule functions (``forward(B, ins, p)``, ``vjp(B, gs, ins, outs, p, need)``):

* ``ins`` are exactly the op's tensor arguments in ATen's order (a Python number that PyTorch
  wraps as a tensor is an input too; an optional tensor argument not given is None, as in
  ATen, and has no edge value); ``p`` holds the non-tensor arguments (an exponent, a
  dim, a shape), as the op's own frozen record or plain tuple;
* ``gs`` has one incoming gradient per output (None where none arrived: only multi-output
  nodes see a mix); ``need[i]`` says whether slot ``i``'s gradient is wanted
  (``task_should_compute_output``); the VJP returns one value or None per input slot.
"""

from __future__ import annotations

from adjoint.engine.families import Families, Table, file_once
from adjoint.engine.ops.record import Check, Math, Op, Save

__all__ = ["FAMILIES", "REGISTRY", "Check", "Math", "Op", "Save"]

#: the family modules, in the order a lookup imports them (the common ones first)
FAMILIES = ("arith", "elementwise", "linalg", "reductions", "views", "activations", "nn", "losses", "masking", "swish",
            "indexing", "recurrent", "second", "complexops", "pool3d", "safe_softmax", "delayed", "basics",
            "transcendental", "rearrange", "prod", "upsample", "padding", "prelu", "glu", "pixel", "second_layers",
            "margin_losses", "distance", "trilinear",
            "embedding_bag", "addc",
            "scaled_products", "moments", "hypot_heaviside", "modulo", "logcumsumexp",
            "index_write", "weight_norm", "second_conv", "second_norm", "second_pool",
            "second_losses", "second_upsample")

_registry: dict[str, Op] = {}


def _file(family) -> None:
    for op in family.OPS:
        file_once(_registry, op.name, op, "primitive")


#: primitive name -> its record; a family is imported when a name is first looked up in it
REGISTRY: Table = Table(Families(__name__, FAMILIES, _file), _registry)
