"""The ``init:`` generator (:mod:`adjoint.format.init_draw`) on whole arrays: the same values, drawn with
numpy's wrapping uint64 arithmetic instead of one Python integer at a time, and held as a
:class:`adjoint.format.sidefiles.FileItems` (integer numerators over one power-of-two denominator),
so that a generated 2000 x 2000 weight costs milliseconds, not a minute. The number of
elements is checked before anything is drawn."""

from __future__ import annotations

import math

import numpy as np

from adjoint.format import init_draw as init
from adjoint.format.errors import Loc, ProblemError
from adjoint.format.sidefiles import MAX_FILE_ELEMENTS, FileItems, _reduce

#: the most elements ``init:`` generates for one tensor (as many as a side file may hold)
MAX_GENERATED = MAX_FILE_ELEMENTS


def draws(state: int, count: int) -> np.ndarray:
    """:func:`adjoint.format.init_draw.splitmix64` as a uint64 array (the i-th draw mixes ``state + (i+1) * golden``)."""
    with np.errstate(over="ignore"):
        z = np.arange(1, count + 1, dtype=np.uint64) * np.uint64(init._GOLDEN) + np.uint64(state)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def generated(loc: Loc, seed: int, name: str, shape: tuple[int, ...], what: str, fan: int | None = None) -> FileItems:
    """The elements :func:`adjoint.format.init_draw.values` gives (``fan``: the fan_in the bound comes from when
    not the tensor's own, as there), as integer numerators over one denominator."""
    count = math.prod(shape)
    if count > MAX_GENERATED:
        raise ProblemError(loc, f"init: would generate {count:,} values for {what} (shape {list(shape)}), more than "
                                f"{MAX_GENERATED:,}; use smaller shapes")
    k = (draws(init.fnv1a64(f"{seed}\0{name}".encode("utf-8")), count) >> np.uint64(56)).astype(np.int64) - 128
    scale = init.bound_of_fan_in(init.fan_in(shape) if fan is None else fan) / 128          # 1 / 2**m
    num, den = _reduce(k, scale.denominator)
    return FileItems(num, den, f"init {name}")
