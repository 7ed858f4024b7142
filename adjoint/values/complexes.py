"""Complex tensors: a pair of real tensors of one answer mode, the real and imaginary parts.

A :class:`Cx` holds ``re`` and ``im``, two values of the underlying backend (exact tensors in
the exact mode, float64 arrays with ``--float64``) of one shape: element ``k`` is
``re[k] + im[k]*i``, exactly (a Gaussian rational when both parts are rational:
:mod:`adjoint.values.numbers.gaussian`). The arithmetic is
:class:`adjoint.values.backends.complex.ComplexBackend`'s.

JSON (the contract's VALUE of a complex tensor): ``"value"`` holds, per element, the pair
``[re, im]`` of float64s (the layout of ``torch.view_as_real``: a complex tensor of shape
``[2, 3]`` gives a ``[2, 3, 2]`` nest), ``"exact"`` per element the text ``RE + IM*i``,
``"shape"`` the complex tensor's shape and ``"dtype"`` ``complex64`` or ``complex128``.
"""

from __future__ import annotations

from adjoint.values.arith import same
from adjoint.values.numbers.gaussian import complex_text


class Cx:
    """A complex tensor value: real part ``re`` and imaginary part ``im`` (same shape). As data:
    ``numpy.asarray(v)`` (complex128), ``complex(v)`` of one element, ``v[i]``, ``len(v)``."""

    __slots__ = ("re", "im", "dtype")

    def __init__(self, re, im, dtype: str | None = None):
        self.re, self.im = re, im
        self.dtype = dtype   # the dtype of the tensor it is the gradient of, when the engine knows it

    @property
    def shape(self) -> tuple:
        return tuple(self.re.shape)

    @property
    def size(self) -> int:
        return self.re.size

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def floats(self):
        """Nested ``[re, im]`` pairs of float64s (None where a part has no decimal)."""
        re, im = self.re.floats(), self.im.floats()
        if re is None or im is None:
            return None
        return _pairs(re, im)

    def strings(self, printer=None):
        try:
            re, im = self.re.strings(printer), self.im.strings(printer)
        except TypeError:   # a float64 value's strings() takes no printer
            re, im = self.re.strings(), self.im.strings()
        if re is None or im is None:
            return None
        return _texts(re, im)

    def __array__(self, dtype=None, copy=None):
        """``numpy.asarray(v)``: complex128, each part the nearest double."""
        import numpy as np

        pairs = self.floats()
        if pairs is None:
            raise TypeError("a complex value with free symbols has no decimal value")
        a = np.asarray(pairs, dtype=np.float64)
        out = a[..., 0] + 1j * a[..., 1]
        return out.astype(dtype) if dtype is not None else out

    def __complex__(self) -> complex:
        if self.size != 1:
            raise TypeError("only a one-element complex value converts to a Python complex")
        return complex(self.__array__().reshape(-1)[0])

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __getitem__(self, key) -> "Cx":
        return Cx(self.re[key], self.im[key], self.dtype)

    def tagged(self, dtype: str | None) -> "Cx":
        """The same value, as the gradient of a tensor of ``dtype``."""
        return self if dtype is None or dtype == self.dtype else Cx(self.re, self.im, dtype)

    def equals(self, other) -> bool:
        return isinstance(other, Cx) and same(self.re, other.re) and same(self.im, other.im)

    def __repr__(self) -> str:
        return f"Cx({self.strings()!r})"


def _pairs(re, im):
    if isinstance(re, list):
        return [_pairs(a, b) for a, b in zip(re, im)]
    return [re, im]


def _texts(re, im):
    if isinstance(re, list):
        return [_texts(a, b) for a, b in zip(re, im)]
    return complex_text(re, im)


def complex_json(v, dtype: str | None, printer=None) -> dict:
    """The contract's VALUE of a complex tensor (see the module docstring); ``v`` a :class:`Cx`,
    or a real value a complex tensor holds (materialized zeros): its imaginary part is 0."""
    if isinstance(v, Cx):
        out = {"shape": list(v.shape), "value": v.floats(), "exact": v.strings(printer)}
        if dtype is not None:
            out["dtype"] = dtype
        return out
    re = v.floats()
    strings = v.strings(printer) if printer is not None else v.strings()
    zero_f = _map(re, lambda _: 0.0) if re is not None else None
    return {"shape": list(v.shape), "value": _pairs(re, zero_f) if re is not None else None,
            "exact": _texts(strings, _map(strings, lambda _: "0")) if strings is not None else None,
            **({"dtype": dtype} if dtype is not None else {})}


def _map(x, f):
    return [_map(a, f) for a in x] if isinstance(x, list) else f(x)
