"""Answer values used as data, the way a PyTorch tensor is: indexed (``v[0, 1]``, ``v[0]``,
``v[:, 1]``), measured (``len(v)``), iterated over its first dimension, converted
(``float(v)`` of one element, ``numpy.asarray(v)``, ``torch.as_tensor(v)``).

:class:`AsData` is mixed into the value classes of every answer mode (``Exact``, and ``F64``
of ``--float64``). Indexing keeps the value's kind: an element of an exact value is an exact
0-d value (``float()`` gives its decimal, ``.item()`` the exact number). Conversions give
float64, the nearest double of each exact element; ``torch.as_tensor(v)`` reads it through
DLPack (torch takes no ``__array__``), so it is a float64 tensor -- ``torch.as_tensor(v,
dtype=torch.float32)`` rounds it as the model would. Errors are PyTorch's own, with its words:
``len()`` and iteration of a 0-d value, an index out of range, too many indices.

Truth value stays what it was for every value (an object is true): the engine tests values
for None, never for truth, and a report must never change meaning on a tensor's contents.
"""

from __future__ import annotations

import numpy as np


class AsData:
    """Tensor-like indexing and conversions for an answer value (see the module docstring)."""

    __slots__ = ()

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        if not self.shape:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    def __bool__(self) -> bool:
        return True

    def __getitem__(self, key):
        key = _key(key)
        if not self.shape and len(key) == 1 and type(key[0]) is int and key[0] != 0:
            raise IndexError(f"index {key[0]} is out of bounds for dimension 0 with size 0")   # applySelect's
        if not self.shape and key != ():
            raise IndexError("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
                             "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number")
        _check(self.shape, key)
        return _take(self, key)

    def __array__(self, dtype=None, copy=None):
        out = np.asarray(self.floats(), dtype=np.float64)
        return out if dtype is None else out.astype(dtype)

    def __float__(self) -> float:
        if self.size != 1:
            raise ValueError("only one element tensors can be converted to Python scalars")
        return float(np.asarray(self.__array__()).reshape(-1)[0])

    def __dlpack__(self, *args, **kwargs):
        return np.array(self.__array__(), dtype=np.float64, order="C").__dlpack__(*args, **kwargs)   # 0-d stays 0-d

    def __dlpack_device__(self):
        return np.asarray(self.__array__()).__dlpack_device__()


def _key(key) -> tuple:
    """An index as a tuple of ints, slices, None, Ellipsis and integer or bool arrays (lists)."""
    parts = key if isinstance(key, tuple) else (key,)
    out = []
    for p in parts:
        if isinstance(p, (list, np.ndarray)):     # advanced indexing: integer or bool positions
            out.append(np.asarray(p))
            continue
        if isinstance(p, bool) or not (isinstance(p, (int, slice)) or p is None or p is Ellipsis
                                       or hasattr(p, "__index__")):
            raise IndexError("only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are "
                             "valid indices (got " + type(p).__name__ + ")")
        out.append(p.__index__() if not isinstance(p, (int, slice)) and p is not None and p is not Ellipsis else p)
    return tuple(out)


def _check(shape: tuple, key: tuple) -> None:
    """PyTorch's IndexError for an integer out of range or too many indices."""
    dims = [p for p in key if p is not None and p is not Ellipsis]
    if any(isinstance(p, np.ndarray) for p in key):
        return   # advanced indexing: numpy's own IndexError says what is out of range
    if len(dims) > len(shape):
        raise IndexError(f"too many indices for tensor of dimension {len(shape)}")
    if Ellipsis in key:
        at = key.index(Ellipsis)
        before = [p for p in key[:at] if p is not None]
        after = [p for p in key[at + 1:] if p is not None]
        pairs = list(zip(before, shape)) + list(zip(after, shape[len(shape) - len(after):]))
        dims_at = list(range(len(before))) + list(range(len(shape) - len(after), len(shape)))
    else:
        pairs = list(zip(dims, shape))
        dims_at = list(range(len(dims)))
    for (p, size), d in zip(pairs, dims_at):
        if isinstance(p, int) and not -size <= p < size:
            raise IndexError(f"index {p} is out of bounds for dimension {d} with size {size}")


def _take(value, key: tuple):
    def pick(a):
        return np.array(a[key], dtype=a.dtype, copy=True)

    if hasattr(value, "restructured"):           # Exact: elements rearranged, kind and -0.0 marks kept
        return value.restructured(pick)
    return type(value)(pick(np.asarray(value.a)))   # F64

