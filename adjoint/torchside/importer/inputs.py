"""The inputs of an imported problem: ``NAME=SHAPE[:DTYPE[:LO-HI]]`` on the command line, tensors from Python.

Float values from the command line come from the project's ``init`` generator
(:mod:`adjoint.format.init_draw`, seed 0, the input's name as its stream), exact dyadic numbers,
``requires_grad: true``. ``ids=2x8:int64:0-100`` is an int64 tensor (token ids, class
indices) of values in ``[0, 100)``, ``mask=2x8:bool`` a bool tensor: drawn with
``torch.randint`` / ``torch.bernoulli`` from a ``torch.Generator`` seeded with :data:`SEED`
plus the input's position, which the file's header records; they never require grad.
"""

from __future__ import annotations

import inspect
import re

import torch
from torch import nn

from adjoint.format import init_draw as init
from adjoint.format.errors import ProblemError
import math
from adjoint.format.problem import MAX_ELEMENTS

_SPEC = re.compile(r"([A-Za-z][A-Za-z0-9_]*)=([0-9]+(?:x[0-9]+)*)(?::([a-z0-9]+)(?::(-?[0-9]+)-(-?[0-9]+))?)?")
SEED = 0
DTYPES = ("float", "int64", "bool")


def parse(spec: str, option: str = "--input") -> tuple[str, tuple[int, ...]]:
    """(name, shape) of ``NAME=SHAPE``; :func:`parse_full` for the dtype and range too."""
    name, shape, _, _ = parse_full(spec, option)
    return name, shape


def parse_full(spec: str, option: str = "--input") -> tuple[str, tuple[int, ...], str, tuple[int, int] | None]:
    """(name, shape, dtype, (lo, hi) or None) of ``NAME=SHAPE[:DTYPE[:LO-HI]]``."""
    m = _SPEC.fullmatch(spec)
    if not m:
        raise ProblemError(None, f"{option} {spec}: write NAME=SHAPE with the dims joined by x, e.g. x=2x4, or "
                                 "NAME=SHAPE:int64:LO-HI for integers in [LO, HI) (ids=2x8:int64:0-100), "
                                 "NAME=SHAPE:bool for a mask")
    shape = tuple(int(d) for d in m.group(2).split("x"))
    if any(d == 0 for d in shape) or len(shape) > 6:
        raise ProblemError(None, f"{option} {spec}: every dim must be at least 1 (and at most 6 dims); e.g. x=2x4")
    if math.prod(shape) > MAX_ELEMENTS:   # known before a value is drawn (10**10 hung)
        raise ProblemError(None, f"{option} {spec}: {math.prod(shape):,} elements, more than a problem file's tensor "
                                 f"may have ({MAX_ELEMENTS:,}); give a smaller shape")
    dtype = m.group(3) or "float"
    if dtype not in DTYPES:
        raise ProblemError(None, f"{option} {spec}: unknown dtype '{dtype}'; write float (the default), int64 or bool")
    span = None
    if m.group(4) is not None:
        span = (int(m.group(4)), int(m.group(5)))
        if dtype == "bool" or span[1] <= span[0]:
            raise ProblemError(None, f"{option} {spec}: a range LO-HI is for int64 and float inputs and needs LO < HI "
                                     "(values in [LO, HI)), e.g. ids=2x8:int64:0-100, x=3x4:float:0-1")
    elif dtype == "int64":
        raise ProblemError(None, f"{option} {spec}: give an int64 input its range of values, e.g. {m.group(1)}="
                                 f"{m.group(2)}:int64:0-100 (values in [0, 100))")
    return m.group(1), shape, dtype, span


def drawn(position: int, shape: tuple[int, ...], dtype: str, span) -> torch.Tensor:
    """An int64 or bool input: drawn from a generator seeded with ``SEED + position``."""
    g = torch.Generator().manual_seed(SEED + position)
    if dtype == "int64":
        return torch.randint(span[0], span[1], shape, generator=g, dtype=torch.int64)
    return torch.bernoulli(torch.full(shape, 0.5, dtype=torch.float64), generator=g).to(torch.bool)


def generated(name: str, shape: tuple[int, ...], dtype: torch.dtype, span=None) -> torch.Tensor:
    """A float input: the init generator's values (dyadic: exact in float32), or with ``span``
    (``x=3x4:float:0-1``) values LO + (HI - LO) * k / 256 for k in [0, 256), from the same draws."""
    if span is None:
        values = [float(v) for v in init.values(SEED, name, shape)]
    else:
        lo, hi = span
        values = [lo + (hi - lo) * (k / 256) for k in init.bytes_drawn(SEED, name, math.prod(shape))]
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
