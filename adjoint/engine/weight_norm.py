"""The weight of a module with ``torch.nn.utils.parametrizations.weight_norm`` (adjoint.format.weight_norm):
each read of ``module.weight`` runs the ``ParametrizationList`` (its ``_WeightNorm``) anew, which
computes ``torch._weight_norm(original1, original0, dim)``. For ``dim`` 0 or the weight's last
dim (the only ones a file may give) that is the fused ``_weight_norm_interface``: one
``WeightNormInterfaceBackward0`` node, of which ``module.weight`` is output 0 (the norms, output 1,
are saved by the node and have no grad_fn).

The ``ParametrizationList`` and its ``_WeightNorm`` are modules called through ``__call__``: no hook
of the file's can be on them, but a global module hook (``register_module_forward_hook`` and kin)
would fire on both, with a full backward hook's ``BackwardHook`` around the weight: not modelled,
refused when one is registered as the weight is read."""

from __future__ import annotations

from adjoint.format.errors import ProblemError
from adjoint.format.weight_norm import G, V


def normalised_weight(rt, own: dict, mod, global_hooks: bool, loc=None):
    """``own``: the module's parameters by their names relative to it (``parametrizations.weight.original0``...)."""
    if global_hooks:
        raise ProblemError(loc or mod.loc, f"a global module hook is registered while '{mod.label}.weight' is read: it "
                                           "would fire on weight_norm's ParametrizationList and _WeightNorm modules, "
                                           "which is not modelled yet; drop the global hook or the weight_norm")
    return rt.apply("_weight_norm_interface", [own[V], own[G]], mod.weight_norm, loc or mod.loc)[0]
