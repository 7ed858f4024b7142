"""Structure with several tensors: concatenating and stacking, writing into a part
(``setitem``, ``index_put_`` with accumulation), for every kind of :class:`adjoint.values.exact.Exact`.
"""

from __future__ import annotations

import math

import flint
import numpy as np

from adjoint.values.numbers import rational as R
from adjoint.values.numbers.symbolic import sympy
from adjoint.values.exact import Exact
from adjoint.values import ieee as I
from adjoint.values.arith import _from_elements, _kind, _wrap_sym

arb = flint.arb


def _promote_to(x: Exact, kind: str) -> Exact:
    return x.as_sym() if kind == "elements" else x


def join(xs: list, fn) -> Exact:
    """``fn`` (np.concatenate / np.stack over a list of arrays) applied to the tensors' values,
    the -0.0 marks joined the same way."""
    kind = _kind(*xs)
    if kind == "rational":
        den = math.lcm(*[x.qa.den for x in xs])
        out = Exact.from_q(R.QArray(np.asarray(fn([x.qa.num * (den // x.qa.den) for x in xs]), dtype=object), den))
    elif kind == "elements":
        out = _from_elements(np.asarray(fn([x.as_sym().elems for x in xs]), dtype=object))
    else:
        arrays = [x.form_array() for x in xs]
        forms = np.asarray(fn(arrays), dtype=object) if all(a is not None for a in arrays) else None

        def recipe(*bs):
            return np.asarray(fn(list(bs)), dtype=object)
        shape = np.shape(fn([np.empty(x.shape, dtype=object) for x in xs]))
        out = Exact.certified(shape, recipe, tuple(xs), forms)
    if any(x.negzero is not None for x in xs):
        mask = np.asarray(fn([x.negzero if x.negzero is not None else np.zeros(x.shape, bool) for x in xs]))
        out.negzero = mask if mask.any() else None
    return out


def _put(a: np.ndarray, key, values, shape) -> None:
    """``a[key] = values`` broadcast to ``shape``; one element is written as the element itself
    (numpy would store a 0-d array inside an object array)."""
    v = np.broadcast_to(np.asarray(values, dtype=object), shape)   # object: a Python int stays one
    a[key] = v[()] if v.ndim == 0 else v


def assign(base: Exact, key, new: Exact) -> Exact:
    """``base`` with ``base[key] = new`` (new broadcast), the -0.0 marks following the elements."""
    kind = _kind(base, new)
    target_shape = np.shape(np.empty(base.shape, dtype=np.int8)[key])
    if kind == "rational":
        den = math.lcm(base.qa.den, new.qa.den)
        a = base.qa.num * (den // base.qa.den)
        a = np.array(a, dtype=object, copy=True)
        _put(a, key, new.qa.num * (den // new.qa.den), target_shape)
        result = Exact.from_q(R.QArray(a, den))
    elif kind == "elements":
        a = np.array(base.as_sym().elems, dtype=object, copy=True)
        _put(a, key, new.as_sym().elems, target_shape)
        result = _from_elements(a)
    else:
        fb, fn_ = base.form_array(), new.form_array()
        forms = None
        if fb is not None or fn_ is not None:
            forms = np.array(fb if fb is not None else np.full(base.shape, None, dtype=object), dtype=object,
                             copy=True)
            _put(forms, key, fn_ if fn_ is not None else np.full(new.shape, None, dtype=object), target_shape)

        def recipe(b, n):
            out = np.array(b, dtype=object, copy=True)
            _put(out, key, n, target_shape)
            return out
        result = Exact.certified(base.shape, recipe, (base, new), forms)
    if base.negzero is not None or new.negzero is not None:
        mask = np.array(base.negzero if base.negzero is not None else np.zeros(base.shape, bool), copy=True)
        mask[key] = np.broadcast_to(new.negzero if new.negzero is not None else False, np.shape(mask[key]))
        result.negzero = mask if mask.any() else None
    return result


def place_add(shape, key, g: Exact) -> Exact:
    """zeros(shape) with ``g`` added at ``key`` (repeated indices add up: index_put_ accumulate)."""
    shape = tuple(shape)
    target_shape = np.shape(np.empty(shape, dtype=np.int8)[key])
    if g.kind == "rational":
        a = np.zeros(shape, dtype=object)
        a.fill(0)
        np.add.at(a, key, np.broadcast_to(g.qa.num, target_shape))
        return Exact.from_q(R.QArray(a, g.qa.den))
    if g.kind == "elements":
        a = np.empty(shape, dtype=object)
        a.fill(sympy().S.Zero)
        np.add.at(a, key, np.broadcast_to(g.elems, target_shape))
        return _wrap_sym(a)

    def recipe(b):
        out = np.empty(shape, dtype=object)
        out.fill(arb(0))
        np.add.at(out, key, np.broadcast_to(b, target_shape))
        return out
    out = Exact.certified(shape, recipe, (g,), None)
    positions = np.arange(math.prod(shape), dtype=np.int64).reshape(shape)[key]
    return I.specials_placed(out, np.broadcast_to(positions, target_shape), g.broadcast_to(target_shape))
