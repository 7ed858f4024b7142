"""The ``init: {seed: N}`` generator: exact, dyadic, deterministic parameter values.

A problem file may leave out a built-in module's parameters when it gives a top-level
``init: {seed: N}``; each missing tensor is then filled by this generator, and the values
are ordinary literals from then on (``verify`` hands the same numbers to torch). The rule,
in full, so that anyone can reproduce the values without this code:

1. The tensor's **stream** is SplitMix64 (Steele, Lea and Flood 2014) started from the state
   ``FNV-1a-64(UTF-8 bytes of f"{seed}\\0{name}")``, where ``name`` is the full dotted
   parameter name (``enc.0.weight``) and FNV-1a-64 has offset basis 0xcbf29ce484222325 and
   prime 0x100000001b3. Each draw adds 0x9e3779b97f4a7c15 to the state (mod 2**64) and
   returns ``z`` mixed as ``z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9``, ``z = (z ^ (z >>
   27)) * 0x94d049bb133111eb``, ``z ^ (z >> 31)`` (mod 2**64).
2. Element ``i`` (row-major) takes the ``i``-th draw; ``k = (draw >> 56) - 128`` is a uniform
   integer in [-128, 127].
3. The element is ``bound * k / 128``, where ``bound`` is the largest power of two not above
   ``1 / sqrt(fan_in)``, i.e. ``2 ** -j`` for the least ``j >= 0`` with ``4 ** j >= fan_in``.
   ``fan_in`` is computed as ``torch.nn.init._calculate_fan_in_and_fan_out`` does
   (``shape[1]`` times the product of ``shape[2:]``), and is 1 for tensors of fewer than
   two dimensions -- except the ``bias`` of ``Linear``, ``Conv1d`` and ``Conv2d``, whose
   ``fan_in`` is its module's ``weight``'s, as PyTorch's ``reset_parameters`` draws it
   (``uniform_(bias, -1/sqrt(fan_in), 1/sqrt(fan_in))``): a bias is as small as the weights.

Every value is a dyadic rational (a float32 holds it exactly), of magnitude at most
``bound``, close to the scale of torch's default ``kaiming_uniform_(a=sqrt(5))``.
"""

from __future__ import annotations

from fractions import Fraction

_MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15
_FNV_BASIS = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3


def fnv1a64(data: bytes) -> int:
    h = _FNV_BASIS
    for byte in data:
        h = ((h ^ byte) * _FNV_PRIME) & _MASK
    return h


def splitmix64(state: int, count: int) -> list[int]:
    """``count`` draws of SplitMix64 from ``state``."""
    out = []
    for _ in range(count):
        state = (state + _GOLDEN) & _MASK
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
        out.append(z ^ (z >> 31))
    return out


def fan_in(shape: tuple[int, ...]) -> int:
    if len(shape) < 2:
        return 1
    receptive = 1
    for n in shape[2:]:
        receptive *= n
    return shape[1] * receptive


def bound(shape: tuple[int, ...]) -> Fraction:
    """The largest power of two not above ``1 / sqrt(fan_in)``."""
    return bound_of_fan_in(fan_in(shape))


def bound_of_fan_in(n: int) -> Fraction:
    """The largest power of two not above ``1 / sqrt(n)``."""
    j = 0
    while 4 ** j < n:
        j += 1
    return Fraction(1, 2 ** j)


#: module types whose ``bias`` PyTorch draws from U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with the
#: weight's fan_in (their ``reset_parameters``)
BIAS_FROM_WEIGHT = ("Linear", "Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d")


#: recurrent modules and their gate counts: ``reset_parameters`` draws every parameter from
#: U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)) (RNNBase, RNNCellBase)
RECURRENT_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4, "RNNCell": 1, "GRUCell": 3, "LSTMCell": 4}


def param_fan_in(module_type: str, param: str, shapes: dict[str, tuple[int, ...]]) -> int | None:
    """The fan_in a parameter's bound comes from when it is not its own (a Linear's or a
    convolution's bias: its weight's; a recurrent module's parameters: ``hidden_size``); None:
    its own shape's."""
    if module_type in BIAS_FROM_WEIGHT and param == "bias" and "weight" in shapes:
        return fan_in(shapes["weight"])
    if module_type in RECURRENT_GATES:
        first = shapes.get("weight_ih_l0", shapes.get("weight_ih"))
        if first is not None:
            return first[0] // RECURRENT_GATES[module_type]
    return None


def values(seed: int, name: str, shape: tuple[int, ...], fan: int | None = None) -> tuple[Fraction, ...]:
    """The generated elements of tensor ``name`` of ``shape``, row-major; ``fan``: the fan_in
    the bound comes from, when not the tensor's own (:func:`param_fan_in`)."""
    count = 1
    for n in shape:
        count *= n
    scale = bound_of_fan_in(fan_in(shape) if fan is None else fan) / 128
    return tuple(scale * (k - 128) for k in bytes_drawn(seed, name, count))


def bytes_drawn(seed: int, name: str, count: int) -> list[int]:
    """``count`` draws in [0, 256) for tensor ``name``: each splitmix64 output's top byte."""
    return [d >> 56 for d in splitmix64(fnv1a64(f"{seed}\0{name}".encode("utf-8")), count)]
