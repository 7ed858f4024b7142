"""Certified numbers: arrays of balls (python-flint ``arb``) that can be recomputed tighter.

A transcendental value (``tanh(3/8)``, and everything computed from one) is not a rational,
so it is carried as a ball: a midpoint and a radius with the guarantee that the true value
lies inside (FLINT's ball arithmetic rounds every operation outward). A certified tensor
holds one ball per element, computed at :data:`PREC` bits, and its *recipe*: the function
and input tensors that made it. When a ball is too wide for a decision (the sign at a kink,
a zero test) or for the digits shown, :func:`refine` recomputes the tensor and everything it
came from at twice the precision, up to :data:`MAX_PREC` bits, walking the recipes without
recursion (a 4096-layer chain is deeper than Python's stack).

What is shown (:func:`certified_text`): :data:`DIGITS` significant digits, every one of them
certified in FLINT's sense (the true value is within one unit of the last digit shown); a
ball that cannot give that many at :data:`MAX_PREC` shows the digits it can. Decimals for
floats (:func:`floats`) are the correctly rounded float64 of the true value: the precision
is raised until both ends of the ball round to the same float64.

python-flint keeps its working precision in a process-wide context; every computation here
sets it for its own extent only (``ctx.workprec``).
"""

from __future__ import annotations

import flint
import numpy as np

arb = flint.arb
arb_mat = flint.arb_mat
fmpq = flint.fmpq
ctx = flint.ctx

#: bits of working precision of a new certified value
PREC = 128
#: refinement stops here (bits); a decision still open is then reported as undecided
MAX_PREC = 8192
#: a ball within 2**-TINY_BITS of zero rounds to a float64 zero (below the smallest subnormal)
TINY_BITS = 1080
#: significant digits shown for a certified value
DIGITS = 20
#: relative accuracy (bits) that certifies DIGITS digits
DIGIT_BITS = int(DIGITS * 3.3219280948873626) + 4


def workprec(prec: int):
    return ctx.workprec(prec)


def vectorize(fn):
    """An elementwise function over object arrays of balls (keeps 0-d arrays as arrays)."""
    ufunc = np.frompyfunc(fn, 1, 1)

    def apply(a):
        return np.asarray(ufunc(a), dtype=object)
    return apply


def vectorize2(fn):
    ufunc = np.frompyfunc(fn, 2, 1)

    def apply(a, b):
        return np.asarray(ufunc(a, b), dtype=object)
    return apply


# ----------------------------------------------------------------------------- conversions

def of_rational(num: np.ndarray, den: int) -> np.ndarray:
    """Balls of num / den (at the context's precision)."""
    if den == 1:
        return _arb_int(num)
    d = arb(den)
    return _arb_div_int(num, d)


_arb_int = vectorize(arb)
_arb_div_int = vectorize2(lambda n, d: arb(n) / d)


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(m, k) @ (k, n) of ball arrays: one arb_mat product."""
    (m, k), n = a.shape, b.shape[1]
    if m * k * n == 0:
        out = np.empty((m, n), dtype=object)
        out.fill(arb(0))
        return out
    prod = arb_mat(m, k, a.reshape(-1).tolist()) * arb_mat(k, n, b.reshape(-1).tolist())
    return objects(prod.entries()).reshape(m, n)


def matmul_by_matrix(a: np.ndarray, mat, right: bool) -> np.ndarray:
    """``a @ mat`` (``right``) or ``mat @ a`` for a ball array ``a`` and an ``arb_mat``."""
    am = arb_mat(a.shape[0], a.shape[1], a.reshape(-1).tolist())
    prod = am * mat if right else mat * am
    return objects(prod.entries()).reshape(prod.nrows(), prod.ncols())


def objects(items: list) -> np.ndarray:
    """A 1-d object array of ``items`` (FLINT numbers). ``np.fromiter``: numpy's slice assignment
    from a list inspects each FLINT object as a possible sequence, about ten times slower."""
    return np.fromiter(items, dtype=object, count=len(items))


def total(a: np.ndarray) -> arb:
    s = arb(0)
    for x in a.reshape(-1).tolist():
        s += x
    return s


# ----------------------------------------------------------------------------- decisions

def _sign(b) -> int:
    if b > 0:
        return 1
    if b < 0:
        return -1
    if b.is_zero():
        return 0
    return 2


#: sign of each ball: -1, 0 (exactly zero), 1, or 2 (the ball contains zero and other numbers)
signs = vectorize(_sign)


def accuracy_bits(a: np.ndarray) -> np.ndarray:
    """Relative accuracy of each ball in bits (large for exact balls)."""
    return np.asarray(_accuracy(a), dtype=np.int64)


_accuracy = np.frompyfunc(lambda b: b.rel_accuracy_bits(), 1, 1)


_TINY = arb(2) ** -TINY_BITS


def _float_of(b) -> float:
    lo, hi = float(b.lower()), float(b.upper())
    if lo == hi:
        # a ball around zero (a certified zero, as exp(x) - exp(x), whose ball cannot be exact)
        # rounds to -0.0 at its lower end and +0.0 at its upper: its float is +0.0 (IEEE's x - x);
        # a -0.0 PyTorch holds is the value's own -0.0 mask (adjoint.values.signed_zero)
        return 0.0 if lo == 0 and not b < 0 else lo
    if abs(b) < _TINY:
        return 0.0  # every value in the ball rounds to zero in float64
    return float("nan")


_certain_floats = np.frompyfunc(_float_of, 1, 1)


def certain_floats(a: np.ndarray, prec: int) -> np.ndarray:
    """The correctly rounded float64 of each ball (of ``prec`` bits), nan where the ball does
    not decide it."""
    with np.errstate(invalid="ignore"), workprec(prec):
        return np.asarray(_certain_floats(a), dtype=object)


def _text(b) -> str:
    if b.is_exact():
        return ""
    return b.str(DIGITS, radius=False)


def certified_text(b, wide: bool) -> str:
    """``~`` and the certified digits of a non-exact ball (``wide``: refinement gave up, show
    the ball as FLINT writes it when not a single digit is certain)."""
    text = b.str(DIGITS, radius=False)
    if text.startswith("[") or wide and not _digit_count(text):
        return b.str(3)
    return "~" + text


def _digit_count(text: str) -> int:
    mantissa = text.split("e")[0].lstrip("-").replace(".", "").lstrip("0")
    return len(mantissa)


def needs_digits(a: np.ndarray) -> np.ndarray:
    """Mask of balls too wide to show DIGITS certified digits (exact balls and balls within
    2**-TINY_BITS of zero never are: those show as FLINT writes them, ``[+/- 1e-330]``)."""
    return np.asarray(_too_wide(a), dtype=bool)


def _is_too_wide(b) -> bool:
    return b.rel_accuracy_bits() < DIGIT_BITS and not b.is_exact() and not abs(b) < _TINY


_too_wide = np.frompyfunc(_is_too_wide, 1, 1)
_exact_any = np.frompyfunc(lambda b: b.is_exact(), 1, 1)
_exact_arb = np.frompyfunc(arb.is_exact, 1, 1)   # the C method itself: no Python frame per element


def _exact(a: np.ndarray) -> np.ndarray:
    """``b.is_exact()`` of every ball (an object array); arb balls without a Python call each."""
    try:
        return _exact_arb(a)
    except TypeError:   # an element that is not an arb
        return _exact_any(a)


def exact_value(b) -> fmpq:
    """The rational an exact (radius 0) ball is."""
    man, exp = b.mid().man_exp()
    man, exp = int(man), int(exp)
    return fmpq(man * 2 ** exp) if exp >= 0 else fmpq(man, 2 ** -exp)


# ----------------------------------------------------------------------------- refinement

def next_precision(prec: int, accuracy: int | None, need: int) -> int:
    """The precision to recompute at when balls of ``prec`` bits have ``accuracy`` bits of
    relative accuracy (the worst of those that matter; None when that tells nothing, e.g. a
    ball around zero) and ``need`` bits are wanted. Ball arithmetic loses a fixed number of bits
    through a computation whatever the precision, so the deficit is added at once (one
    recomputation of a deep chain, not one per doubling); without a measure, double. Always a
    power of two: tensors refined one after another then share their ancestors' recomputation
    instead of each asking for a few bits more."""
    if accuracy is None or accuracy <= 0:
        want = 2 * prec
    else:
        want = max(prec + 32, prec + (need - accuracy) + 32)
    return min(MAX_PREC, 1 << (want - 1).bit_length())


def worst_accuracy(a: np.ndarray) -> int | None:
    """The smallest relative accuracy (bits) over balls not around zero; None if there are none."""
    acc = [b.rel_accuracy_bits() for b in a.reshape(-1).tolist() if not b.contains(0)]
    return min(acc) if acc else None


def refine(root, prec: int) -> None:
    """Recompute ``root`` (a certified Exact) and the certified tensors it was made from at
    ``prec`` bits, where they are below it. Iterative post-order over the recipes."""
    order = []
    seen = set()
    stack = [(root, False)]
    while stack:
        x, expanded = stack.pop()
        if expanded:
            order.append(x)
            continue
        if x.kind != "real" or x.prec >= prec or id(x) in seen:
            continue
        seen.add(id(x))
        stack.append((x, True))
        stack.extend((i, False) for i in x.inputs)
    for x in order:
        with workprec(prec):
            x.balls = as_array(x.recipe(*[balls_at(i, prec) for i in x.inputs]), x.shape)
            _pin_exact(x)
        x.prec = prec


def _pin_exact(x) -> None:
    """Elements whose form is an exact rational keep that value when recomputed: an IEEE special
    settled them (``exp(-inf)`` is exactly 0), and the recipe, which sees the special as a nan
    ball, would otherwise make them nan at the new precision."""
    if x.forms is None:
        return
    flat_f = x.forms.reshape(-1).tolist()
    flat_b = x.balls.reshape(-1)
    for i, f in enumerate(flat_f):
        if type(f) is flint.fmpq and not flat_b[i].is_exact():
            flat_b[i] = flint.arb(f)


def as_array(v, shape) -> np.ndarray:
    """An object array of ``shape`` from a recipe's result (numpy gives 0-d results as scalars)."""
    if type(v) is np.ndarray:
        return v.astype(object, copy=False).reshape(shape)
    out = np.empty((), dtype=object)
    out[()] = v
    return out.reshape(shape)


def balls_at(x, prec: int) -> np.ndarray:
    """The balls of a rational or certified Exact at (at least) ``prec`` bits."""
    if x.kind == "real":
        if x.prec < prec:
            refine(x, prec)
        return x.balls
    return x.rational_balls(prec)
