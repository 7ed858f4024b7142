"""Training loops (``benchmarks/sweep.py --kind train``): the problems of :func:`gen.generate`,
every one v2 and stepped as a user trains -- forward, backward, gradient clipping
(``clip_grad_norm_`` of order 1, 2 or inf, ``clip_grad_value_``), ``torch.optim`` SGD / Adam /
AdamW steps with their settings, ``zero_grad`` (set to None or zeroed in place), two or three
iterations -- and some ``post_accumulate_grad`` hooks stepping their own optimizer
(``optimizer:`` with ``optim.step()`` / ``optim.zero_grad()``: the optimizer in backward).
Some draws are PyTorch's errors on purpose: ``clip_grad_value_`` before any backward (no
``.grad``), an optimizer over a model without parameters.

Only drawn when ``Gen.train`` is set, so :func:`gen.generate`'s seeds make the problems they
always made.
"""

from __future__ import annotations

from fractions import Fraction as Fr

#: the coverage keys, "train <name>"
OPTIMIZERS = ("SGD", "Adam", "AdamW")


def _num(x) -> str:
    return str(float(x))


def optimizer_text(s, cov) -> str:
    """An inline ``{type: ..., settings}`` as ``torch.optim`` takes them (some left at defaults)."""
    kind = s.choice(OPTIMIZERS)
    cov[f"train optimizer {kind}"] += 1
    parts = [f"type: {kind}", f"lr: {_num(s.choice([Fr(1, 10), Fr(1, 20), Fr(1, 100), Fr(1, 4)]))}"]
    if kind == "SGD":
        if s.coin(0.6):
            m = s.choice([Fr(9, 10), Fr(1, 2)])
            parts.append(f"momentum: {_num(m)}")
            if s.coin(0.3):
                parts.append("nesterov: true")
                cov["train nesterov"] += 1
            elif s.coin(0.3):
                parts.append(f"dampening: {_num(s.choice([Fr(1, 10), Fr(1, 2)]))}")
    else:
        if s.coin(0.4):
            parts.append(f"betas: [{_num(s.choice([Fr(9, 10), Fr(4, 5), Fr(1, 2)]))}, "
                         f"{_num(s.choice([Fr(999, 1000), Fr(99, 100), Fr(9, 10)]))}]")
        if s.coin(0.3):
            parts.append(f"eps: {_num(s.choice([Fr(1, 1000), Fr(1, 100000)]))}")
        if s.coin(0.2):
            parts.append("amsgrad: true")
            cov["train amsgrad"] += 1
    if s.coin(0.3):
        parts.append(f"weight_decay: {_num(s.choice([Fr(1, 100), Fr(1, 10)]))}")
        cov["train weight_decay"] += 1
    if s.coin(0.15):
        parts.append("maximize: true")
        cov["train maximize"] += 1
    return "{" + ", ".join(parts) + "}"


def clip_text(s, cov) -> str:
    if s.coin(0.6):
        norm = s.choice(["2", "1", "inf"])
        cov[f"train clip_grad_norm {norm}"] += 1
        extra = "" if norm == "2" else f", norm_type: {norm}"
        if s.coin(0.2):
            extra += ", foreach: false"
        return f"{{clip_grad_norm: {{max_norm: {_num(s.choice([Fr(1, 2), Fr(1), Fr(5)]))}{extra}}}}}"
    cov["train clip_grad_value"] += 1
    return f"{{clip_grad_value: {{clip_value: {_num(s.choice([Fr(1, 4), Fr(1), Fr(1, 10)]))}}}}}"


def train_steps(s, cov) -> list:
    """Two or three iterations of one loop: ``("raw", text)`` items beside the plain step names."""
    F, B = "forward", "backward"
    opt = ("raw", f"{{step: {{optimizer: {optimizer_text(s, cov)}}}}}") if s.coin(0.85) else None
    clip = ("raw", clip_text(s, cov)) if s.coin(0.5) else None
    keep = s.coin(0.25)   # zero_grad(set_to_none=False): the next backward accumulates onto zeros
    zero = ("raw", "{zero_grad: {set_to_none: false}}") if keep else "zero_grad"
    cov["train zero_grad in place" if keep else "train zero_grad"] += 1
    steps = []
    if clip is not None and s.coin(0.1):   # clipped before any backward: clip_grad_value_ raises
        steps.append(clip)
        cov["train clip before backward"] += 1
    for i in range(s.int(2, 3)):
        steps += [F, B]
        if clip is not None:
            steps.append(clip)
        if opt is not None:
            steps.append(opt)
        elif s.coin(0.5):
            steps.append(("step", Fr(1, 10)))
        if s.coin(0.8):
            steps.append(zero)
    return steps + [F, B] if s.coin(0.6) else steps + [F]


def hook_optimizer(s, cov) -> tuple[str, list]:
    """A post_accumulate_grad hook's ``optimizer:`` text and its ``does:`` lines."""
    does = [("optim.step()",)]
    if s.coin(0.6):
        does.append(("optim.zero_grad()",))
    cov["train optimizer in hook"] += 1
    return optimizer_text(s, cov), does
