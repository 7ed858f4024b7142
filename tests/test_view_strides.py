"""The strides a view of an expanded gradient gets (adjoint.values.strides.view_strides, ATen's
computeStride, which the alias model of adjoint.engine.gradalias uses), against real torch's ``as_strided(...).view(...)``: a view where torch makes one,
None (reshape copies) where torch's view refuses."""

import itertools

import pytest

from conftest import require_torch

torch = require_torch()

from adjoint.values.strides import view_strides  # noqa: E402

CASES = [((3, 36), (0, 0), (3, 3, 4, 3)), ((3, 4), (0, 1), (12,)), ((3, 4), (1, 0), (12,)),
         ((2, 3, 4), (0, 4, 1), (2, 12)), ((2, 3, 4), (0, 4, 1), (6, 4)), ((2, 3, 4), (0, 0, 1), (6, 4)),
         ((2, 3), (3, 1), (3, 2)), ((4,), (0,), (2, 2)), ((1, 6), (6, 1), (2, 3)), ((2, 1, 3), (0, 5, 1), (2, 3)),
         ((2, 2, 2), (0, 1, 0), (4, 2)), ((2, 2, 2), (0, 1, 0), (2, 4)), ((6,), (0,), (1, 6, 1))]


@pytest.mark.parametrize("shape,strides,new", CASES + [
    ((2, 3), st, new) for st, new in itertools.product([(0, 0), (0, 1), (1, 0), (3, 1), (1, 2)], [(6,), (3, 2), (1, 6)])])
def test_view_strides_are_torchs(shape, strides, new):
    t = torch.empty(64).as_strided(shape, strides)
    try:
        expected = tuple(t.view(new).stride())
    except RuntimeError:
        expected = None
    assert view_strides(shape, strides, new) == expected
