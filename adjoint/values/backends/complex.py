"""Complex values over a real backend: :class:`ComplexBackend` wraps the exact or float64 one.

A value is either the real backend's own (a real tensor) or a
:class:`adjoint.values.complexes.Cx`, the pair of its real and imaginary parts. Every method
an op rule calls on a complex value is written here over the parts, exactly:
``(a + bi)(c + di) = (ac - bd) + (ad + bc)i``, ``1/(c + di) = (c - di)/(c^2 + d^2)``,
``exp(a + bi) = e^a (cos b + i sin b)``, ``|a + bi| = sqrt(a^2 + b^2)``; linear methods
(sums, views, broadcasting, indexing) act on each part. Methods with real values only are the
real backend's. Which ops may meet a complex operand at all is decided before they run
(:mod:`adjoint.engine.complex_grad`), so no other method ever sees a :class:`Cx`.

Where a part is inf or nan the formulas are PyTorch's kernels step by step (:meth:`nonfinite`:
a real operand promoted to ``x + 0i``, at::add's ``a + 1 * b``, c10::complex's division), and a
real backend with kernels of its own (the float64 one: ``complex_div``, ``complex_abs``,
``complex_exp``) runs those, as PyTorch's CPU does on doubles.
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
            if name == "mul" and not (isinstance(x, Cx) and isinstance(y, Cx)) and self.nonfinite(x, y):
                # PyTorch multiplies x + 0i by the complex operand: an inf times that 0 is a nan
                x, y = Cx(*self.parts(x)), Cx(*self.parts(y))
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

    def nonfinite(self, *xs) -> bool:
        """Whether a part of one of ``xs`` is inf or nan. There PyTorch's complex kernels part from the
        parts' arithmetic: a real operand is promoted to ``x + 0i`` and multiplied in full, ``a + b`` is
        ``a + 1 * b`` with the complex 1 (at::add's alpha), ``a / b`` is c10::complex's division; an inf
        times a 0 of those is a nan."""
        f = getattr(self.inner, "has_nonfinite", None)
        return f is not None and any(f(p) for x in xs if x is not None for p in
                                     ((x.re, x.im) if isinstance(x, Cx) else (x,)))

    def _alpha(self, y, sign: int):
        """``alpha * y`` for alpha = ``sign`` + 0i, as at::add and at::sub multiply their second operand."""
        I = self.inner
        c, d = self.parts(y)
        zero = I.scalar(0)
        if sign < 0:
            c, d = I.neg(c), I.neg(d)
        return I.sub(c, I.mul(zero, d)), I.add(d, I.mul(zero, c))

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
        if self.nonfinite(y):   # a + 1 * b (see nonfinite)
            c, d = self._alpha(y, 1)
        return Cx(self.inner.add(a, c), self.inner.add(b, d), tag)

    def sub(self, x, y):
        if not isinstance(x, Cx) and not isinstance(y, Cx):
            return self.inner.sub(x, y)
        (a, b), (c, d) = self.parts(x), self.parts(y)
        if self.nonfinite(y):   # a + (-1) * b (see nonfinite)
            c, d = self._alpha(y, -1)
            return Cx(self.inner.add(a, c), self.inner.add(b, d))
        return Cx(self.inner.sub(a, c), self.inner.sub(b, d))

    def div(self, x, y):
        I = self.inner
        if not isinstance(y, Cx):
            if not isinstance(x, Cx):
                return I.div(x, y)
            if not self.nonfinite(x, y):
                return Cx(I.div(x.re, y), I.div(x.im, y))
        (a, b), (c, d) = self.parts(x), self.parts(y)
        kernel = getattr(I, "complex_div", None)
        if kernel is not None:   # the float64 backend: PyTorch's kernel on doubles
            return Cx(*kernel(a, b, c, d))
        if self.nonfinite(x, y):
            return Cx(*self._smith(a, b, c, d))
        n = self.mul(x, self.conj(y))
        d = self.norm2(y)
        re, im = self.inner.div(n.re, d), self.inner.div(n.im, d)
        if self.inner.any_zero(d):   # c10::complex's division by a complex zero: a / |c| and b / |d|
            zero, plus = self.inner.mask(d, lambda s: s == 0), self.inner.zeros(self.inner.shape(d))
            re = self.inner.choose(zero, "!=", self.inner.div(a, plus), re)
            im = self.inner.choose(zero, "!=", self.inner.div(b, plus), im)
        return Cx(re, im)

    def _smith(self, a, b, c, d):
        """(a + bi) / (c + di) as c10::complex's operator/ computes it (numpy's algorithm), step by
        step, so that its infinities and nans are PyTorch's."""
        I = self.inner
        one = I.scalar(1)
        rat = I.div(d, c)   # |c| >= |d|
        scl = I.div(one, I.add(c, I.mul(d, rat)))
        re1, im1 = I.mul(I.add(a, I.mul(b, rat)), scl), I.mul(I.sub(b, I.mul(a, rat)), scl)
        rat = I.div(c, d)   # |c| < |d|
        scl = I.div(one, I.add(d, I.mul(c, rat)))
        re2, im2 = I.mul(I.add(I.mul(a, rat), b), scl), I.mul(I.sub(I.mul(b, rat), a), scl)
        first = I.sub(I.abs(c), I.abs(d))
        re, im = I.choose(first, ">=", re1, re2), I.choose(first, ">=", im1, im2)
        zero = I.mul(I.mask(c, lambda s: s == 0), I.mask(d, lambda s: s == 0))   # a / |c|, b / |d|
        plus = I.zeros(I.shape(zero))
        return I.choose(zero, "!=", I.div(a, plus), re), I.choose(zero, "!=", I.div(b, plus), im)

    def float_pow(self, x, e):   # two Python floats: the real backend's
        return self.inner.float_pow(x, e)

    def pow_number(self, x, e):
        return self.inner.pow_number(x, e) if not isinstance(x, Cx) else self.pow(x, e)

    def pow(self, x, e):
        if not isinstance(x, Cx):
            return self.inner.pow(x, e)
        k = _integer(e, self.inner)
        if k is None and self.inner.name == "structure":   # shapes only: the power keeps the shape
            return x
        if k is None:
            raise NotImplementedError("a complex tensor's power with a non-integer exponent")
        if k == 0:
            return Cx(self.inner.full(x.shape, 1), self.inner.zeros(x.shape))
        # pow_tensor_scalar_optimized_kernel: x * x, x * x * x, 1 / x (reciprocal), 1 / (x * x); other
        # exponents are C's cpow, equal up to rounding to the repeated products here. Never 1 * x:
        # an inf part times the 0 of 1 + 0i would make a nan PyTorch does not
        if k == 3:
            out = self.mul(self.mul(x, x), x)
        else:
            base, out, n = x, None, abs(k)
            while n:
                if n & 1:
                    out = base if out is None else self.mul(out, base)
                n >>= 1
                if n:
                    base = self.mul(base, base)
        return self.div(self.inner.scalar(1), out) if k < 0 else out

    def exp(self, x):
        if not isinstance(x, Cx):
            return self.inner.exp(x)
        kernel = getattr(self.inner, "complex_exp", None)
        if kernel is not None:   # the float64 backend: C's cexp (exp(1000 + 0i) is inf + 0i, not inf * sin 0)
            return Cx(*kernel(x.re, x.im))
        r = self.inner.exp(x.re)
        return Cx(self.inner.mul(r, self.inner.cos(x.im)), self.inner.mul(r, self.inner.sin(x.im)))

    # ------------------------------------------------------------------ elementary functions of z = a + bi
    # over the parts, exactly (the real backend's sin, cosh, log, atan2 ... of real values); a real
    # backend with a kernel of its own (the float64 one: ``complex_function``, numpy's, which are
    # C's csin, ccosh, clog ... as PyTorch's CPU kernels) runs that instead
    def _kernel(self, name: str, x):
        kernel = getattr(self.inner, "complex_function", None)
        return None if kernel is None else Cx(*kernel(name, x.re, x.im))

    def _complex_fn(name: str):
        def method(self, x):
            if not isinstance(x, Cx):
                return getattr(self.inner, name)(x)
            out = self._kernel(name, x)
            return out if out is not None else getattr(self, "_" + name)(x.re, x.im)
        method.__name__ = name
        return method

    sin, cos, sinh, cosh = _complex_fn("sin"), _complex_fn("cos"), _complex_fn("sinh"), _complex_fn("cosh")
    tanh, sigmoid, log, sqrt = _complex_fn("tanh"), _complex_fn("sigmoid"), _complex_fn("log"), _complex_fn("sqrt")
    tan = _complex_fn("tan")
    del _complex_fn

    def _sin(self, a, b):        # sin a cosh b + i cos a sinh b
        I = self.inner
        return Cx(I.mul(I.sin(a), I.cosh(b)), I.mul(I.cos(a), I.sinh(b)))

    def _cos(self, a, b):        # cos a cosh b - i sin a sinh b
        I = self.inner
        return Cx(I.mul(I.cos(a), I.cosh(b)), I.neg(I.mul(I.sin(a), I.sinh(b))))

    def _sinh(self, a, b):       # sinh a cos b + i cosh a sin b
        I = self.inner
        return Cx(I.mul(I.sinh(a), I.cos(b)), I.mul(I.cosh(a), I.sin(b)))

    def _cosh(self, a, b):       # cosh a cos b + i sinh a sin b
        I = self.inner
        return Cx(I.mul(I.cosh(a), I.cos(b)), I.mul(I.sinh(a), I.sin(b)))

    def _tanh(self, a, b):       # (sinh 2a + i sin 2b) / (cosh 2a + cos 2b)
        I = self.inner
        a2, b2 = I.add(a, a), I.add(b, b)
        d = I.add(I.cosh(a2), I.cos(b2))
        return Cx(I.div(I.sinh(a2), d), I.div(I.sin(b2), d))

    def _tan(self, a, b):        # (sin 2a + i sinh 2b) / (cos 2a + cosh 2b)
        I = self.inner
        a2, b2 = I.add(a, a), I.add(b, b)
        d = I.add(I.cos(a2), I.cosh(b2))
        return Cx(I.div(I.sin(a2), d), I.div(I.sinh(b2), d))

    def _sigmoid(self, a, b):    # 1 / (1 + exp(-z))
        one = self.inner.scalar(1)
        return self.div(one, self.add(one, self.exp(Cx(self.inner.neg(a), self.inner.neg(b)))))

    def _log(self, a, b):        # log |z| + i atan2(b, a), log |z| = log(a^2 + b^2) / 2
        I = self.inner
        return Cx(I.div(I.log(self.norm2(Cx(a, b))), I.scalar(2)), I.atan2(b, a))

    def _sqrt(self, a, b):       # sqrt((|z| + a) / 2) + i sgn(b) sqrt((|z| - a) / 2), b != 0
        I = self.inner
        r, two = self.abs(Cx(a, b)), I.scalar(2)
        return Cx(I.sqrt(I.div(I.add(r, a), two)), I.mul(I.sgn(b), I.sqrt(I.div(I.sub(r, a), two))))

    def angle(self, x):
        """arg z = atan2(b, a) (std::arg), real."""
        if not isinstance(x, Cx):
            raise NotImplementedError("angle of a real value")
        return self.inner.atan2(x.im, x.re)

    def negate_at_negzero(self, x, ref):
        if isinstance(x, Cx) or isinstance(ref, Cx):   # complex division signs its own zeros
            return x
        return self.inner.negate_at_negzero(x, ref)

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
        kernel = getattr(self.inner, "complex_abs", None)
        if kernel is not None:   # the float64 backend: hypot, as std::abs
            return kernel(x.re, x.im)
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
