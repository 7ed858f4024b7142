"""A built-in module's ``weight_norm: {dim: D}`` (``torch.nn.utils.parametrizations.weight_norm(module,
"weight", dim=D)``): what the file may write and the parameters it makes.

PyTorch's ``register_parametrization`` replaces the module's ``weight`` by two parameters of the
child ``ParametrizationList``, ``parametrizations.weight.original0`` (g: the weight's 2-norms over
every dim but ``dim``, of shape 1 there) and ``parametrizations.weight.original1`` (v: the weight
itself), listed by ``named_parameters()`` after the module's own (``bias``); ``original0`` starts
at version 0 (``norm_except_dim``'s fresh result), ``original1`` at the weight's (1). Each access of
``module.weight`` computes ``torch._weight_norm(v, g, dim)`` anew (no caching). Modelled: Linear
and Conv1d/2d/3d, ``dim`` 0 or the weight's last dim, where ``_weight_norm`` is the fused
``_weight_norm_interface`` (``WeightNormInterfaceBackward0``); another dim (PyTorch decomposes it
into ``norm_except_dim``'s transpose, view and norm nodes), ``dim: null`` and a ``name`` other than
``weight`` are refused.
"""

from __future__ import annotations

from adjoint.format.checks import mapping, string
from adjoint.format.errors import ProblemError
from adjoint.format.literals import parse_int
from adjoint.format.loader import YScalar
from adjoint.format.module_signatures import ParamSpec

#: the built-in types whose weight may be normalised (their forwards read ``self.weight`` once,
#: first: computing it when the forward starts is where PyTorch computes it)
TYPES = ("Linear", "Conv1d", "Conv2d", "Conv3d")
PREFIX = "parametrizations.weight."
G, V = PREFIX + "original0", PREFIX + "original1"


def read_weight_norm(node, mtype: str, weight_shape: tuple[int, ...] | None, what: str) -> int:
    """The ``dim`` of a module's ``weight_norm:`` mapping (``{}``: 0, PyTorch's default)."""
    if mtype not in TYPES:
        raise ProblemError(node.loc, f"weight_norm on a {mtype} is not modelled yet; it is modelled on "
                                     f"{', '.join(TYPES)}")
    m = mapping(node, f"the weight_norm of {what} (weight_norm: {{dim: 0}})", (), ("name", "dim"))
    if m.get("name") is not None:
        name = string(m.get("name"), f"the weight_norm name of {what}")
        if name != "weight":
            raise ProblemError(m.get("name").loc, f"weight_norm of '{name}' is not modelled yet; only name: weight "
                                                  "(the default)")
    dim_node = m.get("dim")
    if dim_node is None:
        return 0
    if isinstance(dim_node, YScalar) and dim_node.kind == "null":
        raise ProblemError(dim_node.loc, "weight_norm with dim: null (one norm of the whole weight: PyTorch's "
                                         "norm_except_dim composite) is not modelled yet; give dim: 0 or the "
                                         "weight's last dim")
    dim = parse_int(dim_node, f"the weight_norm dim of {what}")
    if weight_shape is not None and dim not in (0, len(weight_shape) - 1):
        raise ProblemError(dim_node.loc, f"weight_norm with dim {dim} is not modelled yet: PyTorch's _weight_norm "
                                             "fuses only dim 0 and the weight's last dim "
                                             f"({len(weight_shape) - 1}), else it runs norm_except_dim's composite; "
                                             f"give dim: 0 or dim: {len(weight_shape) - 1}")
    return dim


def normed_specs(specs: tuple[ParamSpec, ...], dim: int) -> tuple[ParamSpec, ...]:
    """The module's parameters once its weight is normalised, in ``named_parameters()``'s order."""
    weight = next(s for s in specs if s.name == "weight")
    g = tuple(n if i == dim else 1 for i, n in enumerate(weight.shape))
    return tuple(s for s in specs if s.name != "weight") + (ParamSpec(G, g, None, version=0),
                                                           ParamSpec(V, weight.shape, None, version=1))
