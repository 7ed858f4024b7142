"""The weight of a module with ``torch.nn.utils.parametrizations.weight_norm`` (adjoint.format.weight_norm):
each read of ``module.weight`` runs the ``ParametrizationList`` (its ``_WeightNorm``) anew, which
computes ``torch._weight_norm(original1, original0, dim)`` (WeightNorm.cpp). For ``dim`` 0 or the
weight's last dim that is the fused ``_weight_norm_interface``: one ``WeightNormInterfaceBackward0``
node, of which ``module.weight`` is output 0 (the norms, output 1, are saved by the node and have
no grad_fn). Any other dim (``-1``: ``dim=None``) runs ``v * (g / norm_except_dim(v, 2, dim))`` as
ATen ops: :func:`norm_except_dim`, then ``DivBackward0``, ``MulBackward0`` (checked in torch 2.13).

The ``ParametrizationList`` and its ``_WeightNorm`` are modules called through ``__call__``: no hook
of the file's can be on them, but a global module hook (``register_module_forward_hook`` and kin)
would fire on both, with a full backward hook's ``BackwardHook`` around the weight: not modelled,
refused when one is registered as the weight is read."""

from __future__ import annotations

from fractions import Fraction

from adjoint.format.errors import ProblemError
from adjoint.format.weight_norm import G, V
from adjoint.values.strides import is_contiguous


def normalised_weight(rt, own: dict, mod, global_hooks: bool, loc=None):
    """``own``: the module's parameters by their names relative to it (``parametrizations.weight.original0``...)."""
    if global_hooks:
        raise ProblemError(loc or mod.loc, f"a global module hook is registered while '{mod.label}.weight' is read: it "
                                           "would fire on weight_norm's ParametrizationList and _WeightNorm modules, "
                                           "which is not modelled yet; drop the global hook or the weight_norm")
    v, g, dim, loc = own[V], own[G], mod.weight_norm, loc or mod.loc
    if dim in (0, len(v.shape) - 1):   # can_use_fused (v and g contiguous: leaves the file gives)
        return rt.apply("_weight_norm_interface", [v, g], dim, loc)[0]
    return rt.apply("mul", [v, rt.apply("div", [g, norm_except_dim(rt, v, dim, loc)], None, loc)], None, loc)


def norm_except_dim(rt, v, dim: int, loc):
    """at::norm_except_dim(v, 2, dim): ``v.norm(2)`` (NormBackward0) for -1; for 0 (and the last dim)
    ``v.contiguous().view(n, -1).norm(2, 1).view(output_size)`` (CloneBackward0 only when not
    contiguous, ViewBackward0, NormBackward1, ViewBackward0); else the same of ``v.transpose(0,
    dim)``, transposed back (TransposeBackward0 on each side)."""
    shape, nd = tuple(v.shape), len(v.shape)
    if dim == -1:
        return rt.apply("norm_scalar", [v], (Fraction(2), (), False), loc)
    if dim in (0, nd - 1):
        c = v if is_contiguous(v.shape, v.strides) else rt.apply("clone", [v], None, loc)
        numel = 1
        for n in shape:
            numel *= n
        rows = (shape[0], numel // shape[0]) if dim == 0 else (numel // shape[-1], shape[-1])
        n = rt.apply("norm_p", [rt.apply("view", [c], rows, loc)], (Fraction(2), (1 if dim == 0 else 0,), False), loc)
        return rt.apply("view", [n], tuple(s if i == dim else 1 for i, s in enumerate(shape)), loc)
    t = rt.apply("transpose", [v], (0, dim), loc)
    return rt.apply("transpose", [norm_except_dim(rt, t, 0, loc)], (0, dim), loc)
