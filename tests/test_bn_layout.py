"""native_batch_norm_backward on the CPU reads its gradient in the input's memory order when its
fast path is taken (adjoint.engine.bn_layout): checked against real torch 2.13 for every
permutation of the dims of small 4-D and 5-D shapes (size-1 dims included: the ambiguous cases of
pytorch#63224), in eval and training mode, with a contiguous and a channels-last input."""

import itertools

import numpy as np
import pytest

from adjoint.engine.bn_layout import grad_as_read
from adjoint.values.backends.float64 import F64, Float64Backend

SHAPES = [(1, 2, 2, 1), (2, 3, 1, 2), (1, 3, 2, 2), (2, 2, 3, 1), (1, 2, 1, 2, 2), (1, 2, 2, 2, 1)]


def _layouts(shape):
    """A tensor of ``shape`` laid out in each permutation of its dims (torch.permute of a
    contiguous one): its strides, and the permutation."""
    for perm in itertools.permutations(range(len(shape))):
        yield perm


@pytest.mark.torch
@pytest.mark.parametrize("shape", SHAPES)
def test_the_kernel_reads_the_gradient_as_predicted(shape):
    import torch
    B = Float64Backend()
    d = torch.float64
    rng = np.random.default_rng(7)
    c = shape[1]
    w, rm, rv = torch.rand(c, dtype=d) + 0.5, torch.zeros(c, dtype=d), torch.ones(c, dtype=d)
    inputs = {"contiguous": torch.tensor(rng.standard_normal(shape), dtype=d)}
    if len(shape) == 4:
        inputs["channels_last"] = inputs["contiguous"].contiguous(memory_format=torch.channels_last)
    checked = mixed = 0
    for (kind, x), perm, train in itertools.product(inputs.items(), _layouts(shape), (False, True)):
        values = rng.integers(-4, 5, size=shape).astype(np.float64)
        base = torch.tensor(values, dtype=d).permute(perm).contiguous()
        g = base.permute([perm.index(i) for i in range(len(shape))])     # values, laid out by perm
        assert g.tolist() == values.tolist()
        mean = x.mean(dim=[i for i in range(len(shape)) if i != 1]) if train else None
        invstd = 1 / (x.var(dim=[i for i in range(len(shape)) if i != 1], unbiased=False) + 1e-5).sqrt() if train else None
        _, _, gbias = torch.ops.aten.native_batch_norm_backward(g, x, w, rm, rv, mean, invstd, train, 1e-5,
                                                                [True, True, True])
        read = grad_as_read(B, F64(values), tuple(g.stride()), shape, tuple(x.stride())).a
        predicted = read.sum(axis=tuple(i for i in range(len(shape)) if i != 1))
        np.testing.assert_array_equal(predicted, gbias.numpy(), err_msg=f"{kind} {g.stride()} train={train}")
        checked += 1
        mixed += not np.array_equal(predicted, values.sum(axis=tuple(i for i in range(len(shape)) if i != 1)))
    assert checked >= 48
    if shape in ((1, 2, 2, 1), (1, 2, 2, 2, 1)):
        assert mixed > 0   # the ambiguous layouts do mix channels in PyTorch
