"""The ``init: {seed: N}`` generator (adjoint/format/init_draw.py): its primitives against their published
test vectors, and the properties its docstring promises (deterministic, dyadic, bounded by
the largest power of two under 1/sqrt(fan_in), fan_in as torch computes it)."""

from fractions import Fraction

import numpy as np
import pytest
import torch

import adjoint
from adjoint.format import init_draw as init


def test_splitmix64_reference_vectors():
    # Vigna's splitmix64.c: seed 0 and seed 1234567
    assert init.splitmix64(0, 4) == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F, 0xF88BB8A8724C81EC]
    assert init.splitmix64(1234567, 1) == [6457827717110365317]


def test_fnv1a64_reference_vectors():
    assert init.fnv1a64(b"") == 0xCBF29CE484222325
    assert init.fnv1a64(b"a") == 0xAF63DC4C8601EC8C
    assert init.fnv1a64(b"foobar") == 0x85944171F73967E8


@pytest.mark.parametrize("shape", [(3, 2), (4, 5), (6, 2, 3), (2, 3, 3, 3), (7, 1)])
def test_fan_in_is_torchs(shape):
    fan_in, _ = torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(shape))
    assert init.fan_in(shape) == fan_in


@pytest.mark.parametrize("shape,bound", [((5,), 1), ((), 1), ((3, 1), 1), ((3, 2), Fraction(1, 2)),
                                         ((3, 4), Fraction(1, 2)), ((4, 5), Fraction(1, 4)),
                                         ((2, 3, 3, 3), Fraction(1, 8)), ((1, 64), Fraction(1, 8)),
                                         ((1, 65), Fraction(1, 16))])
def test_bound_is_the_largest_power_of_two_under_one_over_sqrt_fan_in(shape, bound):
    # by hand: 1/sqrt(2) = 0.707 -> 1/2; 1/sqrt(4) = 1/2; 1/sqrt(5) = 0.447 -> 1/4; 1/sqrt(27) = 0.19 -> 1/8;
    # 1/sqrt(64) = 1/8 exactly; 1/sqrt(65) < 1/8 -> 1/16
    assert init.bound(shape) == bound


def test_values_are_deterministic_per_seed_and_name():
    a = init.values(7, "enc.0.weight", (3, 4))
    assert a == init.values(7, "enc.0.weight", (3, 4))
    assert a != init.values(8, "enc.0.weight", (3, 4))
    assert a != init.values(7, "enc.1.weight", (3, 4))


def test_values_are_dyadic_bounded_and_cover_the_range():
    shape = (64, 64)                       # fan_in 64: bound 1/8
    vals = init.values(0, "w", shape)
    k = [v * 8 * 128 for v in vals]
    assert all(x.denominator == 1 and -128 <= x <= 127 for x in k)
    assert min(k) == -128 and max(k) == 127
    assert all(float(np.float32(float(v))) == v for v in vals)   # a float32 holds each exactly


def test_element_is_the_documented_draw():
    state = init.fnv1a64("5\0lin.bias".encode())
    draws = init.splitmix64(state, 3)
    expected = tuple(Fraction((d >> 56) - 128, 128) for d in draws)   # 1-D: bound 1
    assert init.values(5, "lin.bias", (3,)) == expected


def test_a_file_gets_the_generated_values_as_literals():
    text = "name: t\ninputs:\n  x: [[1, 2]]\ninit: {seed: 5}\nmodel:\n  children:\n    lin: {type: Linear, args: " \
           "{in_features: 2, out_features: 3}}\n  forward: lin(x)\n"
    lin = adjoint.loads(text).model.child("lin")
    assert lin.params[0].value.items == init.values(5, "lin.weight", (3, 2))
    assert lin.params[1].value.items == init.values(5, "lin.bias", (3,))
    assert all(p.requires_grad for p in lin.params)


def test_given_parameters_are_kept_and_only_missing_ones_generated():
    text = "name: t\ninputs:\n  x: [[1, 2]]\ninit: {seed: 0}\nmodel: {type: Linear, args: {in_features: 2, " \
           "out_features: 1}, params: {bias: [0.5]}}\n"
    lin = adjoint.loads(text).model
    assert lin.params[1].value.items == (Fraction(1, 2),)
    assert lin.params[0].value.items == init.values(0, "weight", (1, 2))
