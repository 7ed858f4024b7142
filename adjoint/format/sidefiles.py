"""Large tensors in a side file: ``value: {file: weights.npy}`` (docs/format.md).

A real model's weights do not belong in YAML. A tensor's ``value`` may name a NumPy ``.npy``
file, or a ``.safetensors`` file with the tensor's ``key``, next to the problem file: the path
is relative to the problem's directory and may not leave it (no ``..``, no absolute path, no
symbolic link pointing outside), a problem read from standard input has no directory and
cannot name one. Floats are read exactly: every float16, bfloat16, float32 or float64 is a
dyadic rational (``m * 2**e``), held as integer numerators over one power-of-two denominator
(:class:`FileItems`), so a million weights cost one numpy pass, not a million Fractions. NaN
and infinities are refused (an exact prediction needs finite numbers), as are pickled
object arrays (a problem file is data: nothing in it is executed).
"""

from __future__ import annotations

import os
from fractions import Fraction

import numpy as np

from adjoint.format.errors import Loc, ProblemError
from adjoint.format.sidefile_formats import read_npy, read_safetensors

#: the most elements a side-file tensor may have
MAX_FILE_ELEMENTS = 50_000_000
#: the largest side file read (bytes)
MAX_FILE_BYTES = 2 << 30


class FileItems:
    """A literal's elements read from a file: ``num[i] / den``, row-major. It behaves as the
    tuple of Fractions a YAML literal has (iteration, ``len``, indexing, equality), and the
    value backends read ``num`` and ``den`` directly."""

    __slots__ = ("num", "den", "source", "_floats", "path", "negzero")

    def __init__(self, num: np.ndarray, den: int, source: str, path: str | None = None,
                 negzero: tuple[int, ...] = ()):
        self.path = path        # the file read (resolved), None for values made otherwise (init:)
        self.num = num          # 1-D: int64, or object (Python ints) when an int64 would overflow
        self.den = den
        self.source = source
        self.negzero = negzero  # the positions of the file's -0.0 (the literal's, adjoint.format.problem.Literal)
        self._floats = None

    def __len__(self) -> int:
        return int(self.num.size)

    def __iter__(self):
        den = self.den
        return (Fraction(int(n), den) for n in self.num.tolist())

    def __getitem__(self, i):
        if isinstance(i, slice):
            return tuple(self)[i]
        return Fraction(int(self.num[i]), self.den)

    def __eq__(self, other) -> bool:
        if isinstance(other, FileItems):
            return self.den == other.den and bool(np.array_equal(self.num, other.num))
        return tuple(self) == tuple(other) if isinstance(other, tuple) else NotImplemented

    def __hash__(self) -> int:
        return hash((self.den, self.num.size, self.source))

    def __repr__(self) -> str:
        return f"FileItems({self.source}: {self.num.size} elements)"

    def floats(self) -> np.ndarray:
        """Each element as a float64 (exact for float16/32/64 sources); computed once (the load's
        range check, the float64 mode and the torch side all ask), read-only."""
        if self._floats is None:
            den = self.den
            if self.num.dtype != object and den & (den - 1) == 0:   # n / 2**k: exact, or one rounding (subnormals)
                out = np.ldexp(self.num.astype(np.float64), -(den.bit_length() - 1))
            else:   # Python's int / int rounds once, however large den is (numpy's would overflow converting it)
                out = np.array([n / den for n in self.num.tolist()], dtype=np.float64)
            out.flags.writeable = False
            self._floats = out
        return self._floats

    def scaled(self, scale: Fraction) -> "FileItems | tuple":
        """The elements times ``scale`` (``{value: {file: ...}, scale: S}``)."""
        p, q = scale.numerator, scale.denominator
        num = self.num.astype(object) * p
        return FileItems(num, self.den * q, self.source, self.path)


def read(node_loc: Loc, spec: dict, what: str) -> tuple[tuple[int, ...], FileItems]:
    """The shape and elements of the side file ``spec`` names (``file``, and ``key`` for a
    safetensors file), for the literal at ``node_loc``."""
    path = _resolve(node_loc, spec["file"], what)
    size = os.path.getsize(path)
    if size > MAX_FILE_BYTES:
        raise ProblemError(node_loc, f"{what}: '{spec['file']}' is {size} bytes, more than a side file may have "
                                     f"({MAX_FILE_BYTES}); store fewer values")
    if path.endswith(".npy"):
        if spec.get("key") is not None:
            raise ProblemError(node_loc, f"{what}: a .npy file holds one array: drop key: (it is for .safetensors)")
        array = _read_npy(node_loc, path, spec["file"], what)
    elif path.endswith(".safetensors"):
        array = _read_safetensors(node_loc, path, spec["file"], spec.get("key"), what)
    else:
        raise ProblemError(node_loc, f"{what}: '{spec['file']}' is neither a .npy nor a .safetensors file; save the "
                                     "tensor with numpy.save or safetensors")
    if array.size > MAX_FILE_ELEMENTS:
        raise ProblemError(node_loc, f"{what}: '{spec['file']}' has {array.size} elements, more than "
                                     f"{MAX_FILE_ELEMENTS}; store a smaller tensor")
    if array.ndim and 0 in array.shape:
        raise ProblemError(node_loc, f"{what}: '{spec['file']}' holds an empty array (shape {list(array.shape)}); "
                                     "zero-size tensors are not modelled; store one with at least one element per dimension")
    items = exact_items(node_loc, array, spec["file"], what)
    items.path = path
    return tuple(int(d) for d in array.shape), items


def _resolve(loc: Loc, name: str, what: str) -> str:
    problem = loc.file if loc is not None else None
    if not problem or problem.startswith("<") or problem == "-":
        raise ProblemError(loc, f"{what}: a problem read from standard input or a string has no directory to find "
                                f"'{name}' in; write the problem to a file next to it")
    if "\0" in name:
        raise ProblemError(loc, f"{what}: the file name {name!r} holds a NUL character, which no file name can; "
                                "name the file as it is saved")
    if os.path.isabs(name) or ".." in name.replace("\\", "/").split("/"):
        raise ProblemError(loc, f"{what}: '{name}' is outside the problem's directory; name a file in that directory "
                                "or below it (no absolute path, no '..')")
    base = os.path.realpath(os.path.dirname(os.path.abspath(problem)))
    path = os.path.realpath(os.path.join(base, name))
    if os.path.commonpath([base, path]) != base:
        raise ProblemError(loc, f"{what}: '{name}' leads outside the problem's directory (a symbolic link?); name a "
                                "file in that directory or below it")
    if not os.path.isfile(path):
        raise ProblemError(loc, f"{what}: there is no file '{name}' in the problem's directory; check the name")
    return path


def _read_npy(loc: Loc, path: str, name: str, what: str) -> np.ndarray:
    return read_npy(loc, path, name, what, MAX_FILE_ELEMENTS)


def _read_safetensors(loc: Loc, path: str, name: str, key, what: str) -> np.ndarray:
    return read_safetensors(loc, path, name, key, what, MAX_FILE_ELEMENTS)


def exact_items(loc: Loc, array: np.ndarray, name: str, what: str) -> FileItems:
    """The exact values of a numeric array: integers as they are, floats as dyadic rationals
    over one power-of-two denominator."""
    flat = np.ascontiguousarray(array).reshape(-1)
    if flat.dtype == np.bool_:
        return FileItems(flat.astype(np.int64), 1, name)
    if np.issubdtype(flat.dtype, np.integer):
        if flat.dtype == np.uint64 and flat.size and int(flat.max()) >= 2 ** 63:
            return FileItems(flat.astype(object), 1, name)
        return FileItems(flat.astype(np.int64), 1, name)
    if not np.issubdtype(flat.dtype, np.floating):
        raise ProblemError(loc, f"{what}: '{name}' holds {flat.dtype} values; tensors here hold real numbers")
    values = flat.astype(np.float64)  # exact: every float16 / float32 is a float64
    bad = ~np.isfinite(values)
    if bad.any():
        i = int(np.argmax(bad))
        raise ProblemError(loc, f"{what}: '{name}' holds {values[i]} at flat index {i}; tensors here hold finite "
                                "numbers")
    mantissa, exponent = np.frexp(values)          # value = mantissa * 2**exponent, 0.5 <= |mantissa| < 1
    ints = (mantissa * 2.0 ** 53).astype(np.int64)  # exact: a float64 mantissa has 53 bits
    shift = (53 - exponent.astype(np.int64))        # value = ints / 2**shift
    nonzero = ints != 0
    negzero = tuple(np.flatnonzero(np.signbit(values) & ~nonzero).tolist())   # -0.0, as torch.from_numpy keeps it
    if not nonzero.any():
        return FileItems(np.zeros(flat.size, dtype=np.int64), 1, name, negzero=negzero)
    # the common power of two first, on int64s: ints / 2**shift = (ints >> z) / 2**(shift - z) with z
    # the trailing zeros of ints (a float32 mantissa has 29 of its 53 bits zero), so that the
    # numerators over the common denominator usually fit in int64 (no Python ints, no object array)
    low = np.where(nonzero, ints & -ints, 1)
    zeros = np.round(np.log2(low.astype(np.float64))).astype(np.int64)   # exact: low is a power of two <= 2**53
    ints = np.where(nonzero, ints >> zeros, 0)
    shift = np.where(nonzero, shift - zeros, 0)
    top = int(shift[nonzero].max())
    if top <= 0:
        return FileItems(np.array([int(i) << -int(s) for i, s in zip(ints.tolist(), shift.tolist())], dtype=object),
                         1, name, negzero=negzero)
    ups = top - shift                                # each numerator scaled up to the common 2**top
    if int((ups + _bits(ints))[nonzero].max()) < 63:
        num = np.where(nonzero, ints << np.where(nonzero, ups, 0), 0).astype(np.int64)
    else:
        num = np.array([i << int(u) if i else 0 for i, u in zip(ints.tolist(), ups.tolist())], dtype=object)
    num, den = _reduce(num, 1 << top)
    return FileItems(num, den, name, negzero=negzero)


def _bits(ints: np.ndarray) -> np.ndarray:
    """The bit length of each |int| (int64 below 2**53)."""
    mags = np.abs(ints).astype(np.float64)
    _, exponent = np.frexp(mags)                     # mags < 2**exponent, exactly: these are exact floats
    return exponent.astype(np.int64)


def _reduce(num: np.ndarray, den: int) -> tuple[np.ndarray, int]:
    """Divide numerators and the power-of-two denominator by their common power of two."""
    if num.dtype != object:
        nz = num[num != 0]
        twos = int(np.min(nz & -nz)).bit_length() - 1 if nz.size else 0
    else:
        twos = min(((n & -n).bit_length() - 1 for n in num.tolist() if n), default=0)
    twos = min(twos, den.bit_length() - 1)
    if twos:
        num = num >> twos if num.dtype != object else np.array([n >> twos for n in num.tolist()], dtype=object)
        den >>= twos
    return num, den
