"""The inputs of an imported problem: ``NAME=SHAPE`` on the command line, tensors from Python.

Values from the command line come from the project's ``init`` generator (:mod:`adjoint.format.init_draw`,
seed 0, the input's name as its stream), exact dyadic numbers, ``requires_grad: true``.
"""

from __future__ import annotations

import inspect
import re

import torch
from torch import nn

from adjoint.format import init_draw as init
from adjoint.format.errors import ProblemError
from adjoint.format import init_draw as init
from adjoint.format.errors import ProblemError
import math
from adjoint.format.problem import MAX_ELEMENTS

_SPEC = re.compile(r"([A-Za-z][A-Za-z0-9_]*)=([0-9]+(?:x[0-9]+)*)")
SEED = 0


def parse(spec: str) -> tuple[str, tuple[int, ...]]:
    m = _SPEC.fullmatch(spec)
    if not m:
        raise ProblemError(None, f"--input {spec}: write NAME=SHAPE with the dims joined by x, e.g. x=2x4")
    shape = tuple(int(d) for d in m.group(2).split("x"))
    if any(d == 0 for d in shape) or len(shape) > 6:
        raise ProblemError(None, f"--input {spec}: every dim must be at least 1 (and at most 6 dims); e.g. x=2x4")
    if math.prod(shape) > MAX_ELEMENTS:   # known before a value is drawn (10**10 hung)
        raise ProblemError(None, f"--input {spec}: {math.prod(shape):,} elements, more than a problem file's tensor "
                                 f"may have ({MAX_ELEMENTS:,}); give a smaller shape")
    return m.group(1), shape


def generated(name: str, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    values = [float(v) for v in init.values(SEED, name, shape)]
    return torch.tensor(values, dtype=dtype).reshape(shape)


def forward_names(model: nn.Module, count: int) -> list[str]:
    """Names for ``count`` example inputs: the forward's own parameter names (``x`` for a built-in)."""
    try:
        params = list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):
        params = []
    names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)][:count]
    if type(model).__module__.startswith("torch.nn") and count == 1:
        names = ["x"]
    while len(names) < count:
        names.append(f"x{len(names)}")
    return names


def check_count(model: nn.Module, names: list[str]) -> None:
    """The command line names as many inputs as the forward requires (at least)."""
    try:
        params = list(inspect.signature(model.forward).parameters.values())
    except (TypeError, ValueError):
        return
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p.name for p in positional if p.default is p.empty]
    if len(names) < len(required) or (len(names) > len(positional) and not any(p.kind == p.VAR_POSITIONAL
                                                                               for p in params)):
        want = " ".join(f"--input {n}=SHAPE" for n in (required or [p.name for p in positional]))
        raise ProblemError(None, f"{type(model).__name__}.forward takes ({', '.join(p.name for p in positional)}) "
                                 f"but {len(names)} input(s) were given; give {want}")
