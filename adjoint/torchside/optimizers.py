"""The torch twin of ``optimizer:`` (adjoint/format/optimizers.py): the real ``torch.optim``
optimizer over the hooked tensor, stepped by the hook body."""

from __future__ import annotations

import torch

from adjoint.format.errors import ProblemError


def make_optimizer(decl, params: list) -> torch.optim.Optimizer:
    """``torch.optim.Adam(params, lr=..., betas=(...), eps=..., weight_decay=..., maximize=...)``,
    ``AdamW`` likewise, or ``torch.optim.SGD(params, lr=..., momentum=..., dampening=...,
    weight_decay=..., nesterov=..., maximize=...)``: Python floats, as typed."""
    if decl.type == "SGD":
        return torch.optim.SGD(params, lr=float(decl.lr), momentum=float(decl.momentum),
                               dampening=float(decl.dampening), weight_decay=float(decl.weight_decay),
                               nesterov=decl.nesterov, maximize=decl.maximize)
    cls = torch.optim.AdamW if decl.type == "AdamW" else torch.optim.Adam
    return cls(params, lr=float(decl.lr), betas=tuple(float(b) for b in decl.betas), eps=float(decl.eps),
               weight_decay=float(decl.weight_decay), amsgrad=decl.amsgrad, maximize=decl.maximize)


def optimizer_method(optim: torch.optim.Optimizer, name: str, args: list, kwargs: dict, loc):
    if name not in ("step", "zero_grad") or args or kwargs:
        raise ProblemError(loc, f"verify runs optim.step() and optim.zero_grad(), not optim.{name}(...)")
    getattr(optim, name)()
    return None


def variant_optimizer(state, decl) -> torch.optim.Optimizer:
    """The optimizer over ``model.parameters()`` (a tied Parameter once) that a variant's
    ``{step: {optimizer: ...}}`` steps: made at the first such step, kept for the later ones."""
    made = state.__dict__.setdefault("optimizers", {})
    key = decl.settings
    if key not in made:
        made[key] = make_optimizer(decl, list({id(p): p for p in state.params.values()}.values()))
    return made[key]


def clip_step(state, step) -> None:
    """``torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm, norm_type=...,
    error_if_nonfinite=..., foreach=...)`` / ``clip_grad_value_(model.parameters(), clip_value,
    foreach=...)``: the parameters as a generator (a tied Parameter once), the numbers Python floats."""
    params = (p for p in {id(p): p for p in state.params.values()}.values())
    if step.kind == "clip_grad_value":
        value, foreach = step.clip
        torch.nn.utils.clip_grad_value_(params, float(value), foreach=foreach)
        return
    max_norm, norm_type, error, foreach = step.clip
    torch.nn.utils.clip_grad_norm_(params, float(max_norm), norm_type=float("inf") if norm_type == "inf" else
                                   float(norm_type), error_if_nonfinite=error, foreach=foreach)
