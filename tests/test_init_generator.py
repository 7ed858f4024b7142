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
    assert lin.params[1].value.items == init.values(5, "lin.bias", (3,), fan=2)   # the weight's fan_in
    assert all(p.requires_grad for p in lin.params)


def test_given_parameters_are_kept_and_only_missing_ones_generated():
    text = "name: t\ninputs:\n  x: [[1, 2]]\ninit: {seed: 0}\nmodel: {type: Linear, args: {in_features: 2, " \
           "out_features: 1}, params: {bias: [0.5]}}\n"
    lin = adjoint.loads(text).model
    assert lin.params[1].value.items == (Fraction(1, 2),)
    assert lin.params[0].value.items == init.values(0, "weight", (1, 2))


def test_a_bias_is_bounded_by_its_weights_fan_in_as_torch_draws_it():
    """A hand-written classifier's biases were up to 1 (fan_in of a 1-D tensor is 1): PyTorch
    draws a Linear's or a convolution's bias from U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with the
    weight's fan_in. Now the bias gets the weight's bound: 1/2 for in_features 4, 1/8 for a
    Conv2d with 2 input channels and a 3x3 kernel (fan_in 18: 1/4 > 1/sqrt(18) >= 1/8)."""
    text = ("name: t\ninputs:\n  x: [[[[1, 2], [3, 4]], [[1, 2], [3, 4]]]]\ninit: {seed: 3}\nmodel:\n  children:\n"
            "    lin: {type: Linear, args: {in_features: 4, out_features: 64}}\n"
            "    conv: {type: Conv2d, args: {in_channels: 2, out_channels: 64, kernel_size: 3, padding: 1}}\n"
            "    norm: {type: LayerNorm, args: {normalized_shape: [4]}}\n"
            "  forward: norm(lin(flatten(conv(x)[:, 0])))\n")
    model = adjoint.loads(text).model
    lin_bias = model.child("lin").params[1].value.items
    conv_bias = model.child("conv").params[1].value.items
    assert lin_bias == init.values(3, "lin.bias", (64,), fan=4)
    assert Fraction(1, 4) < max(abs(v) for v in lin_bias) <= Fraction(1, 2) and min(lin_bias) < 0 < max(lin_bias)
    assert conv_bias == init.values(3, "conv.bias", (64,), fan=18)
    assert Fraction(1, 16) < max(abs(v) for v in conv_bias) <= Fraction(1, 8)
    # a LayerNorm's parameters keep their own shape's rule (documented: not torch's ones and zeros)
    assert model.child("norm").params[1].value.items == init.values(3, "norm.bias", (4,))


@pytest.mark.torch
def test_torchs_bias_bound_is_the_weights_fan_in():
    import torch

    torch.manual_seed(0)
    lin = torch.nn.Linear(4, 4096)
    conv = torch.nn.Conv2d(2, 4096, 3)
    assert 0.49 < lin.bias.abs().max().item() <= 0.5                      # 1/sqrt(4)
    assert 0.23 < conv.bias.abs().max().item() <= 1 / 18 ** 0.5           # 1/sqrt(2 * 3 * 3)
    assert init.fan_in(tuple(conv.weight.shape)) == 18 and init.fan_in(tuple(lin.weight.shape)) == 4
