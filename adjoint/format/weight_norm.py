"""A built-in module's ``weight_norm: {dim: D}`` (``torch.nn.utils.parametrizations.weight_norm(module,
"weight", dim=D)``): what the file may write and the parameters it makes.

PyTorch's ``register_parametrization`` replaces the module's ``weight`` by two parameters of the
child ``ParametrizationList``, ``parametrizations.weight.original0`` (g: the weight's 2-norms over
every dim but ``dim``, of shape 1 there) and ``parametrizations.weight.original1`` (v: the weight
itself), listed by ``named_parameters()`` after the module's own (``bias``); ``original0`` starts
at version 0 (``norm_except_dim``'s fresh result), ``original1`` at the weight's (1). Each access of
``module.weight`` computes ``torch._weight_norm(v, g, dim)`` anew (no caching). Modelled: Linear
and Conv1d/2d/3d, ``dim`` 0 to the weight's last dim, and -1 (``dim: null``: ``_WeightNorm`` keeps
None as -1, one norm of the whole weight, g 0-d); a dim outside the weight's range is PyTorch's
IndexError when ``weight_norm`` is applied (the constructor's error, the answer: :func:`dim_error`);
another negative dim and a ``name`` other than ``weight`` are refused.

``weight_norm: {dim: D, legacy: true}`` is the older, deprecated ``torch.nn.utils.weight_norm(module,
"weight", dim=D)`` (torch/nn/utils/weight_norm.py's ``WeightNorm``): the same ``_weight_norm(v, g,
dim)`` (same nodes, same dims), but the parameters are the module's own ``weight_g`` and
``weight_v`` (after ``bias``; both at version 0: ``Parameter(t.data)`` of a fresh tensor and of the
weight's data), and ``module.weight`` is a plain tensor attribute set by a forward pre-hook
registered on the module when weight_norm is applied: computed once per call, before the
``BackwardHookFunction`` of a full backward hook and before every forward pre-hook registered later
(the file's, unless ``prepend``), and read as it is (the last call's) in between
(adjoint.engine.weight_norm).
"""

from __future__ import annotations

from adjoint.format.checks import boolean, mapping, string
from adjoint.format.errors import ProblemError
from adjoint.format.literals import parse_int
from adjoint.format.loader import YScalar
from adjoint.format.module_signatures import ParamSpec

#: the built-in types whose weight may be normalised (their forwards read ``self.weight`` once,
#: first: computing it when the forward starts is where PyTorch computes it)
TYPES = ("Linear", "Conv1d", "Conv2d", "Conv3d")
PREFIX = "parametrizations.weight."
G, V = PREFIX + "original0", PREFIX + "original1"
#: the legacy ``torch.nn.utils.weight_norm``'s parameters (``weight_norm: {legacy: true}``)
LEGACY_G, LEGACY_V = "weight_g", "weight_v"


def read_weight_norm(node, mtype: str, weight_shape: tuple[int, ...] | None, what: str) -> int:
    """The ``dim`` of a module's ``weight_norm:`` mapping (``{}``: 0, PyTorch's default)."""
    if mtype not in TYPES:
        raise ProblemError(node.loc, f"weight_norm on a {mtype} is not modelled yet; it is modelled on "
                                     f"{', '.join(TYPES)}")
    m = mapping(node, f"the weight_norm of {what} (weight_norm: {{dim: 0}})", (), ("name", "dim", "legacy"))
    if m.get("name") is not None:
        name = string(m.get("name"), f"the weight_norm name of {what}")
        if name != "weight":
            raise ProblemError(m.get("name").loc, f"weight_norm of '{name}' is not modelled yet; only name: weight "
                                                  "(the default)")
    dim_node = m.get("dim")
    if dim_node is None:
        return 0
    if isinstance(dim_node, YScalar) and dim_node.kind == "null":
        return -1   # _WeightNorm(None) keeps dim = -1: one norm of the whole weight
    dim = parse_int(dim_node, f"the weight_norm dim of {what}")
    nd = len(weight_shape) if weight_shape is not None else None
    if nd is not None and -nd <= dim < -1:
        raise ProblemError(dim_node.loc, f"weight_norm with dim {dim} is not modelled yet (PyTorch transposes with "
                                         f"the negative dim itself); give it as {dim + nd}")
    return dim


def is_legacy(node, what: str) -> bool:
    """``legacy: true``: the older ``torch.nn.utils.weight_norm`` (a forward pre-hook), not the
    parametrization (the default)."""
    m = mapping(node, f"the weight_norm of {what} (weight_norm: {{dim: 0}})", (), ("name", "dim", "legacy"))
    return m.get("legacy") is not None and boolean(m.get("legacy"), f"the weight_norm legacy flag of {what}")


def dim_error(dim: int, weight_shape: tuple[int, ...]) -> tuple[str, str] | None:
    """PyTorch's error applying weight_norm with a dim outside the weight's (right_inverse's
    norm_except_dim transposes with it), or None."""
    nd = len(weight_shape)
    if dim == -1 or -nd <= dim < nd:
        return None
    return ("IndexError", f"Dimension out of range (expected to be in range of [{-nd}, {nd - 1}], but got {dim})")


def normed_specs(specs: tuple[ParamSpec, ...], dim: int, legacy: bool = False) -> tuple[ParamSpec, ...]:
    """The module's parameters once its weight is normalised, in ``named_parameters()``'s order
    (legacy: ``weight_g``, ``weight_v``, both at version 0)."""
    weight = next(s for s in specs if s.name == "weight")
    g = () if dim == -1 else tuple(n if i == dim else 1 for i, n in enumerate(weight.shape))
    names, v_version = ((LEGACY_G, LEGACY_V), 0) if legacy else ((G, V), 1)
    return tuple(s for s in specs if s.name != "weight") + (ParamSpec(names[0], g, None, version=0),
                                                           ParamSpec(names[1], weight.shape, None, version=v_version))


def names(legacy: bool) -> tuple[str, str]:
    """(g, v): the parameters' names relative to the module."""
    return (LEGACY_G, LEGACY_V) if legacy else (G, V)
