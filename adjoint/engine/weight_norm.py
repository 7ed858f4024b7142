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
refused when one is registered as the weight is read.

The older ``torch.nn.utils.weight_norm`` (``weight_norm: {legacy: true}``) computes the same
``_weight_norm(weight_v, weight_g, dim)`` in a forward pre-hook (``WeightNorm.__call__``) that
stores it as the plain attribute ``module.weight``: :func:`legacy_recompute` runs where that hook
runs in ``_call_impl`` (after the global forward pre-hooks and the module's prepended ones, before
its others and before a full backward hook's ``BackwardHookFunction``), and the forward and any
read of ``PATH.weight`` take the stored tensor (:func:`legacy_weight`). No extra module is called:
global module hooks are fine. The tensor ``WeightNorm.apply`` computes at registration (what
``PATH.weight`` is before the module's first call) is not modelled: such a read is refused."""

from __future__ import annotations

from fractions import Fraction

from adjoint.format.errors import ProblemError
from adjoint.format.weight_norm import G, LEGACY_G, LEGACY_V, V
from adjoint.values.strides import is_contiguous


def normalised_weight(rt, own: dict, mod, global_hooks: bool, loc=None):
    """``own``: the module's parameters by their names relative to it (``parametrizations.weight.original0``...)."""
    if global_hooks:
        raise ProblemError(loc or mod.loc, f"a global module hook is registered while '{mod.label}.weight' is read: it "
                                           "would fire on weight_norm's ParametrizationList and _WeightNorm modules, "
                                           "which is not modelled yet; drop the global hook or the weight_norm")
    return _weight_norm(rt, own[V], own[G], mod.weight_norm, loc or mod.loc)


def _weight_norm(rt, v, g, dim: int, loc):
    """``torch._weight_norm(v, g, dim)``."""
    if dim in (0, len(v.shape) - 1):   # can_use_fused (v and g contiguous: leaves the file gives)
        return rt.apply("_weight_norm_interface", [v, g], dim, loc)[0]
    return rt.apply("mul", [v, rt.apply("div", [g, norm_except_dim(rt, v, dim, loc)], None, loc)], None, loc)


_STORE = "weight_norm.weight"   # the key of module.weight in the model's module_attrs store


def legacy_recompute(rt, model, mod, loc) -> None:
    """``WeightNorm.__call__``: ``module.weight = _weight_norm(weight_v, weight_g, dim)`` (grad mode as
    the call's)."""
    from adjoint.engine.module_attrs import _store
    prefix = f"{mod.path}." if mod.path else ""
    g, v = model.params[prefix + LEGACY_G], model.params[prefix + LEGACY_V]
    _store(model)[(mod.label, _STORE)] = _weight_norm(rt, v, g, mod.weight_norm, loc or mod.loc)


def legacy_weight(model, mod, loc):
    """``module.weight`` as the last call's pre-hook left it."""
    from adjoint.engine.module_attrs import _store
    w = _store(model).get((mod.label, _STORE))
    if w is None:
        raise ProblemError(loc or mod.loc, f"'{mod.label}.weight' is read before '{mod.label}' is called: the weight "
                                           "the older torch.nn.utils.weight_norm computes when it is applied is not "
                                           "modelled yet; read it after a call")
    return w


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
