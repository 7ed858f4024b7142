"""``torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm, norm_type, error_if_nonfinite,
foreach)`` and ``clip_grad_value_(model.parameters(), clip_value, foreach)`` as steps, as
``torch/nn/utils/clip_grad.py`` runs them (PyTorch 2.13):

    grads = [p.grad for p in parameters if p.grad is not None]
    norms = [vector_norm(g, norm_type) for g in grads]   # _foreach_norm on CPU: the same norms
    total_norm = vector_norm(stack(norms), norm_type)
    error_if_nonfinite and total_norm is nan or inf: RuntimeError
    clip_coef = max_norm / (total_norm + 1e-6)             # Tensor.__rtruediv__: reciprocal() * max_norm
    clip_coef_clamped = clamp(clip_coef, max=1.0)
    g.mul_(clip_coef_clamped) for each g                   # _foreach_mul_: in place, even by 1

With no gradient at all nothing is clipped (``_clip_grads_with_norm_`` returns early); over a
model without parameters (an empty generator) ``clip_grad_norm_`` warns first.
``clip_grad_value_`` groups the gradients with ``torch._C._group_tensors_by_device_and_dtype([grads])``
(whatever ``foreach`` is), which refuses an empty list: with no gradient at all it raises
``EMPTY_GRADS``; else it is ``_foreach_clamp_min_(grads, -clip_value)`` then
``_foreach_clamp_max_(grads, clip_value)``. A ``.grad`` is written in place, as
``zero_grad(set_to_none=False)`` writes it (adjoint.engine.gradalias.write_grads): a leaf whose
``.grad`` is the same tensor sees the write; that tensor listed twice is scaled twice.
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.format.errors import ProblemError
from adjoint.engine import warns
from adjoint.engine.gradalias import write_grad_in_place
from adjoint.engine.ops.reductions import norm_forward
from adjoint.engine.torch_errors import TorchError


# c10's TORCH_CHECK(!nested_tensorlist[0].empty()) in _group_tensors_by_device_and_dtype
EMPTY_GRADS = ("Expected !nested_tensorlist[0].empty() to be true, but got false.  (Could this error message be "
               "improved?  If so, please report an enhancement request to PyTorch.)")
EMPTY_GENERATOR = "`parameters` is an empty generator, no gradient clipping will occur."


def _parameters(run, loc) -> list:
    params = [t for name, t in run.model.params.items() if run.model.decls[name].tied is None]
    for p in params:
        if p.grad_fn is not None:   # reading a non-leaf's .grad warns
            warns.warn(run.rt, "UserWarning", warns.NON_LEAF_GRAD)
        if p.grad is not None and getattr(p, "dtype", None) in ("complex64", "complex128"):
            raise ProblemError(loc, "clipping a complex parameter's gradient is not modelled yet")
    return params


def clip_step(run, step) -> None:
    """One ``{clip_grad_norm: ...}`` / ``{clip_grad_value: ...}`` step over ``model.parameters()``."""
    B = run.rt.B
    params = _parameters(run, step.loc)
    held = [p for p in params if p.grad is not None]
    if step.kind == "clip_grad_value":
        if not held:
            raise TorchError("RuntimeError", EMPTY_GRADS)
        c = step.clip[0]
        for p in held:
            write_grad_in_place(run.rt, p, lambda g: B.clamp(B.clamp(g, lo=-c), hi=c), step.loc)
        return
    max_norm, norm_type, error_if_nonfinite = step.clip[0], step.clip[1], step.clip[2]
    if not params:
        warns.warn(run.rt, "UserWarning", EMPTY_GENERATOR)
    if not held:   # total_norm is torch.tensor(0.0); nothing to scale
        return
    order = norm_type if norm_type == "inf" else Fraction(norm_type)
    norms = [norm_forward(B, [p.grad], (order, tuple(range(len(B.shape(p.grad)))), False)) for p in held]
    total = norm_forward(B, [B.stack(norms, 0)], (order, (0,), False))
    if error_if_nonfinite and B.has_nonfinite(total):
        shown = "inf" if norm_type == "inf" else str(float(norm_type))
        raise TorchError("RuntimeError", f"The total norm of order {shown} for gradients from `parameters` is "
                                         "non-finite, so it cannot be clipped. To disable this error and scale the "
                                         "gradients by the non-finite norm anyway, set `error_if_nonfinite=False`")
    coef = B.mul(B.div(B.scalar(1), B.add(total, B.scalar(Fraction(1, 10 ** 6)))), B.scalar(max_norm))
    coef = B.clamp(coef, hi=Fraction(1))
    for p in held:
        write_grad_in_place(run.rt, p, lambda g: B.mul(g, coef), step.loc)
