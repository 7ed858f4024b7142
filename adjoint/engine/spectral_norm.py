"""The weight of a module with ``torch.nn.utils.parametrizations.spectral_norm``
(adjoint.format.spectral_norm): each read of ``module.weight`` runs the ``ParametrizationList``
(its ``_SpectralNorm``) anew, as ``_SpectralNorm.forward`` (torch/nn/utils/parametrizations.py):

* ``weight_mat``: the weight with ``dim`` moved to the front (``permute``: PermuteBackward0, only
  when ``dim`` is not 0), ``flatten(1)`` (a 2-D tensor is itself; else ``reshape``: ViewBackward0,
  or CloneBackward0 and UnsafeViewBackward0 when the permuted weight cannot be viewed);
* in training mode ``_power_method(weight_mat, n_power_iterations)`` under ``no_grad`` (no node):
  each iteration ``_u = F.normalize(mv(weight_mat, _v), dim=0, eps, out=_u)``, then
  ``_v = F.normalize(mv(weight_mat.H, _u), dim=0, eps, out=_v)``: ``t / max(||t||, eps)``
  written into the buffer, each write one version of the buffer's counter;
* ``u = _u.clone()``, ``v = _v.clone()`` (no node: the buffers need no grad), ``sigma =
  vdot(u, mv(weight_mat, v))`` (MvBackward0, saving ``vec``; VdotBackward0, saving ``self``), and
  ``weight / sigma`` (DivBackward0). In eval mode there is no power iteration.

The values involve square roots (the norms): exact mode holds them as certified values, as
weight_norm's norms. As for weight_norm, a global module hook would fire on the
``ParametrizationList`` and ``_SpectralNorm``: refused."""

from __future__ import annotations

from adjoint.format.errors import ProblemError
from adjoint.format.spectral_norm import ORIGINAL, U, V


def spectral_weight(rt, own: dict, bufs: dict, mod, global_hooks: bool, loc=None):
    """``own``: the module's parameters, ``bufs`` its buffers, by their names relative to it."""
    loc = loc or mod.loc
    if global_hooks:
        raise ProblemError(loc, f"a global module hook is registered while '{mod.label}.weight' is read: it "
                                "would fire on spectral_norm's ParametrizationList and _SpectralNorm modules, "
                                "which is not modelled yet; drop the global hook or the spectral_norm")
    spec = mod.spectral_norm
    weight = own[ORIGINAL]
    mat = weight_matrix(rt, weight, spec.dim, loc)
    ubuf, vbuf = bufs[U], bufs[V]
    if mod.training:
        power_method(rt, mat, ubuf, vbuf, spec.n_power_iterations, spec.eps, loc)
    u = rt.apply("clone", [ubuf], None, loc)
    v = rt.apply("clone", [vbuf], None, loc)
    sigma = rt.apply("vdot", [u, rt.apply("mv", [mat, v], None, loc)], None, loc)
    return rt.apply("div", [weight, sigma], None, loc)


def weight_matrix(rt, weight, dim: int, loc):
    """``_reshape_weight_to_matrix``: ``weight.permute(dim, *others)`` when ``dim`` is not 0, then
    ``flatten(1)``."""
    from adjoint.engine.bindings.views import lower_flatten
    if dim != 0:
        nd = len(weight.shape)
        weight = rt.apply("permute", [weight], (dim,) + tuple(d for d in range(nd) if d != dim), loc)
    return lower_flatten(rt, {"input": weight, "start_dim": 1, "end_dim": -1}, loc)


def power_method(rt, mat, ubuf, vbuf, iterations: int, eps, loc) -> None:
    """``_SpectralNorm._power_method`` under ``no_grad``: the buffers written in place, one version each
    per iteration."""
    from adjoint.engine.inplace import write
    before = rt.grad_enabled
    rt.grad_enabled = False
    try:
        for _ in range(iterations):
            write(rt, ubuf, _normalize(rt, rt.apply("mv", [mat, vbuf], None, loc), eps, loc).value)
            mat_h = rt.apply("t", [mat], None, loc)   # weight_mat.H of a real matrix: its transpose
            write(rt, vbuf, _normalize(rt, rt.apply("mv", [mat_h, ubuf], None, loc), eps, loc).value)
    finally:
        rt.grad_enabled = before


def _normalize(rt, t, eps, loc):
    """F.normalize(t, dim=0, eps=eps, out=...)'s value: ``t / t.norm(2, 0, keepdim=True).clamp_min_(eps)
    .expand_as(t)`` (the division written into the buffer by the caller)."""
    from fractions import Fraction
    norm = rt.apply("norm", [t], (Fraction(2), (0,), True), loc)
    denom = rt.apply("expand", [rt.apply("clamp_min", [norm], eps, loc)], tuple(t.shape), loc)
    return rt.apply("div", [t, denom], None, loc)
