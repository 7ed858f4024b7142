"""Complex values over a real backend: :class:`ComplexBackend` wraps the exact or float64 one.

A value is either the real backend's own (a real tensor) or a
:class:`adjoint.values.complexes.Cx`, the pair of its real and imaginary parts. Every method
an op rule calls on a complex value is written here over the parts, exactly:
``(a + bi)(c + di) = (ac - bd) + (ad + bc)i``, ``1/(c + di) = (c - di)/(c^2 + d^2)``,
``exp(a + bi) = e^a (cos b + i sin b)``, ``|a + bi| = sqrt(a^2 + b^2)``; linear methods
(sums, views, broadcasting, indexing) act on each part. Methods with real values only are the
real backend's. Which ops may meet a complex operand at all is decided before they run
(:mod:`adjoint.engine.complex_grad`), so no other method ever sees a :class:`Cx`.
"""

from __future__ import annotations

from adjoint.values.backends.composed import Composed
from adjoint.values.complexes import Cx
from adjoint.values.numbers.gaussian import Gaussian

#: the real backend's methods that act on each part alone (linear in the value)
_LINEAR = ("neg", "reshape", "t2", "broadcast_to", "index", "permute", "sum_to", "total", "sum_dims")
#: linear in their last argument (the gradient placed into zeros of a shape)
_PLACING = ("place", "place_add", "place_along")
#: methods bilinear in two values: complex product from four real ones
_BILINEAR = ("mul", "matmul2d", "outer", "bmm")


class ComplexBackend(Composed):
    """The real backend ``inner``'s methods, extended to :class:`Cx` values."""

    conv_patches = conv_fold = None   # conv.py's generic lowering (index, place_add on each part)

    def __init__(self, inner, complex_dtype: str = "complex128"):
        self.inner = inner
        self.complex_dtype = complex_dtype   # the dtype of a complex value made with none given
        for name in _LINEAR:
            if hasattr(inner, name):
                setattr(self, name, self._linear(name))
        for name in _BILINEAR:
            if hasattr(inner, name):
                setattr(self, name, self._bilinear(name))
        for name in _PLACING:
            if hasattr(inner, name):
                setattr(self, name, self._placing(name))

    def __getattr__(self, name):
        return getattr(self.inner, name)

    # ------------------------------------------------------------------ pieces
    def _linear(self, name):
        f = getattr(self.inner, name)

        def method(x, *args, **kw):
            if isinstance(x, Cx):
                return Cx(f(x.re, *args, **kw), f(x.im, *args, **kw))
            return f(x, *args, **kw)
        return method

    def _placing(self, name):
        f = getattr(self.inner, name)

        def method(*args):
            *head, g = args
            if name == "place_along":   # (shape, dim, indices, g, keepdim)
                *head, g, keepdim = args
                if isinstance(g, Cx):
                    return Cx(f(*head, g.re, keepdim), f(*head, g.im, keepdim))
                return f(*args)
            if isinstance(g, Cx):
                return Cx(f(*head, g.re), f(*head, g.im))
            return f(*args)
        return method

    def assign(self, base, key, new):
        if not isinstance(base, Cx) and not isinstance(new, Cx):
            return self.inner.assign(base, key, new)
        (a, b), (c, d) = self.parts(base), self.parts(new)
        return Cx(self.inner.assign(a, key, c), self.inner.assign(b, key, d))

    def _bilinear(self, name):
        f = getattr(self.inner, name)
        I = self.inner

        def method(x, y, *args):
            if not isinstance(x, Cx) and not isinstance(y, Cx):
                return f(x, y, *args)
            if not isinstance(x, Cx):
                return Cx(f(x, y.re, *args), f(x, y.im, *args))
            if not isinstance(y, Cx):
                return Cx(f(x.re, y, *args), f(x.im, y, *args))
            return Cx(I.sub(f(x.re, y.re, *args), f(x.im, y.im, *args)),
                      I.add(f(x.re, y.im, *args), f(x.im, y.re, *args)))
        return method

    def parts(self, x):
        """(re, im) of any value; a real one's imaginary part is zeros."""
        if isinstance(x, Cx):
            return x.re, x.im
        return x, self.inner.zeros(self.inner.shape(x))

    @staticmethod
    def is_complex(x) -> bool:
        return isinstance(x, Cx)

    # ------------------------------------------------------------------ construction, queries
    def literal(self, lit):
        imag = getattr(lit, "imag", None)
        if imag is None:
            return self.inner.literal(lit)
        return Cx(self.inner.literal(lit), self.inner.literal(imag))

    def scalar(self, value):
        if isinstance(value, Gaussian):   # a complex Python number (2j): a 0-d complex value
            return Cx(self.inner.scalar(value.re), self.inner.scalar(value.im))
        return self.inner.scalar(value)

    def make(self, re, im):
        return Cx(re, im)

    def shape(self, x):
        return tuple(x.shape) if isinstance(x, Cx) else self.inner.shape(x)

    def numel(self, x):
        return self.inner.numel(x.re if isinstance(x, Cx) else x)

    def is_value(self, x) -> bool:
        return isinstance(x, Cx) or self.inner.is_value(x)

    def equals(self, x, y) -> bool:
        if isinstance(x, Cx) or isinstance(y, Cx):
            (a, b), (c, d) = self.parts(x), self.parts(y)
            return self.inner.equals(a, c) and self.inner.equals(b, d)
        return self.inner.equals(x, y)

    def same_value(self, x, y) -> bool:
        return x is y if isinstance(x, Cx) or isinstance(y, Cx) else self.inner.same_value(x, y)

    def any_zero(self, x) -> bool:
        if isinstance(x, Cx):
            return self.inner.any_zero(self.norm2(x))
        return self.inner.any_zero(x)

    def all_zero(self, x) -> bool:
        if isinstance(x, Cx):
            return self.inner.all_zero(x.re) and self.inner.all_zero(x.im)
        return self.inner.all_zero(x)

    def is_symbolic(self, x) -> bool:
        if isinstance(x, Cx):
            return self.inner.is_symbolic(x.re) or self.inner.is_symbolic(x.im)
        return self.inner.is_symbolic(x)

    def strings(self, x):
        return x.strings() if isinstance(x, Cx) else self.inner.strings(x)

    # ------------------------------------------------------------------ arithmetic
    def add(self, x, y):
        if not isinstance(x, Cx) and not isinstance(y, Cx):
            return self.inner.add(x, y)
        (a, b), (c, d) = self.parts(x), self.parts(y)
        # two gradients of one tensor summed (an input buffer, .grad accumulating) keep its dtype
        tag = x.dtype if isinstance(x, Cx) and isinstance(y, Cx) and x.dtype == y.dtype else None
        return Cx(self.inner.add(a, c), self.inner.add(b, d), tag)

    def sub(self, x, y):
        if not isinstance(x, Cx) and not isinstance(y, Cx):
            return self.inner.sub(x, y)
        (a, b), (c, d) = self.parts(x), self.parts(y)
        return Cx(self.inner.sub(a, c), self.inner.sub(b, d))

    def div(self, x, y):
        if not isinstance(y, Cx):
            if not isinstance(x, Cx):
                return self.inner.div(x, y)
            return Cx(self.inner.div(x.re, y), self.inner.div(x.im, y))
        n = self.mul(x, self.conj(y))
        d = self.norm2(y)
        if isinstance(n, Cx):
            return Cx(self.inner.div(n.re, d), self.inner.div(n.im, d))
        return self.inner.div(n, d)

    def pow(self, x, e):
        if not isinstance(x, Cx):
            return self.inner.pow(x, e)
        k = _integer(e, self.inner)
        if k is None and self.inner.name == "structure":   # shapes only: the power keeps the shape
            return x
        if k is None:
            raise NotImplementedError("a complex tensor's power with a non-integer exponent")
        one = Cx(self.inner.full(x.shape, 1), self.inner.zeros(x.shape))
        base, out, n = x, one, abs(k)
        while n:
            if n & 1:
                out = self.mul(out, base)
            n >>= 1
            if n:
                base = self.mul(base, base)
        return self.div(self.inner.scalar(1), out) if k < 0 else out

    def exp(self, x):
        if not isinstance(x, Cx):
            return self.inner.exp(x)
        r = self.inner.exp(x.re)
        return Cx(self.inner.mul(r, self.inner.cos(x.im)), self.inner.mul(r, self.inner.sin(x.im)))

    def concat(self, xs, axis):
        return self._joined("concat", xs, axis)

    def stack(self, xs, axis):
        return self._joined("stack", xs, axis)

    def _joined(self, name: str, xs, axis):
        f = getattr(self.inner, name)
        xs = list(xs)
        if not any(isinstance(x, Cx) for x in xs):
            return f(xs, axis)
        parts = [self.parts(x) for x in xs]
        return Cx(f([p[0] for p in parts], axis), f([p[1] for p in parts], axis))

    # ------------------------------------------------------------------ complex-only functions
    def conj(self, x):
        if isinstance(x, Cx):
            return Cx(x.re, self.inner.neg(x.im))
        return x

    def real(self, x):
        return x.re if isinstance(x, Cx) else x

    def imag(self, x):
        return x.im if isinstance(x, Cx) else self.inner.zeros(self.inner.shape(x))

    def norm2(self, x):
        """|x|^2, real."""
        if not isinstance(x, Cx):
            return self.inner.mul(x, x)
        return self.inner.add(self.inner.mul(x.re, x.re), self.inner.mul(x.im, x.im))

    def abs(self, x):
        if not isinstance(x, Cx):
            return self.inner.abs(x)
        return self.inner.sqrt(self.norm2(x))

    def sgn(self, x):
        """z / |z|, and 0 at 0 (at::sgn)."""
        if not isinstance(x, Cx):
            return self.inner.sgn(x)
        a = self.abs(x)
        zero = self.inner.mask(a, lambda s: s == 0)
        safe = self.inner.add(a, zero)        # 1 where |z| = 0 (its parts are 0 there)
        return Cx(self.inner.div(x.re, safe), self.inner.div(x.im, safe))

    def view_as_real(self, x):
        re, im = self.parts(x)
        shape = tuple(self.inner.shape(re))
        return self.inner.concat([self.inner.reshape(re, shape + (1,)), self.inner.reshape(im, shape + (1,))], -1)

    def view_as_complex(self, x):
        shape = tuple(self.inner.shape(x))
        lead = tuple(slice(None) for _ in shape[:-1])
        return Cx(self.inner.index(x, lead + (0,)), self.inner.index(x, lead + (1,)))

    # ------------------------------------------------------------------ checks
    def after_op(self, op, ins, params, out, loc, check: bool):
        if isinstance(out, Cx):
            re = [self.real(x) if x is not None else None for x in ins]
            return Cx(self.inner.after_op(op, re, params, out.re, loc, False),
                      self.inner.after_op(op, re, params, out.im, loc, False))
        return self.inner.after_op(op, [self.real(x) if x is not None else None for x in ins], params, out, loc,
                                   check and not any(isinstance(x, Cx) for x in ins))

    def check_size(self, x, loc, what: str) -> None:
        for part in self.parts(x) if isinstance(x, Cx) else (x,):
            self.inner.check_size(part, loc, what)

    def after_backward(self, x, loc, what: str):
        if isinstance(x, Cx):
            re, im = self.inner.after_backward(x.re, loc, what), self.inner.after_backward(x.im, loc, what)
            return x if re is x.re and im is x.im else Cx(re, im, x.dtype)
        return self.inner.after_backward(x, loc, what)

    def check_output(self, value, loc, what: str) -> None:
        for part in self.parts(value) if isinstance(value, Cx) else (value,):
            self.inner.check_output(part, loc, what)

    def check_literal(self, value, decl) -> None:
        for part in self.parts(value) if isinstance(value, Cx) else (value,):
            self.inner.check_literal(part, decl)


def _integer(e, inner):
    """The exponent as a Python int, when it is an integer number (a 0-d value or a number)."""
    from fractions import Fraction
    if isinstance(e, int):
        return e
    if isinstance(e, Fraction):
        return int(e) if e.denominator == 1 else None
    try:
        v = e.item()
    except Exception:
        return None
    try:
        f = Fraction(str(v)) if not isinstance(v, (int, Fraction)) else Fraction(v)
    except (ValueError, TypeError):
        try:
            f = Fraction(int(v.p), int(v.q))
        except Exception:
            return None
    return int(f) if f.denominator == 1 else None


def for_problem(problem, backend):
    """``backend`` extended to complex values when the file declares a complex tensor (in the
    structure mode a complex value is a pair of shapes)."""
    first = next((d for d in problem.all_tensors() if d.dtype in ("complex64", "complex128")), None)
    if first is None:
        return backend
    wide = any(d.dtype == "complex128" for d in problem.all_tensors())
    return ComplexBackend(backend, "complex128" if wide else "complex64")
