"""The float64 backend's convolution kernels (values/backends/float64_conv.py: im2col from strided
windows, col2im by strided adds) against real torch in float64: the convolution op's forward and
its three gradients, 1-D to 3-D, with strides, padding, dilation, groups, batches and layouts
(a Fortran-ordered input, a non-contiguous weight); one torch call per case, all cases in one test."""

import numpy as np
import pytest

from adjoint.engine.ops.conv import ConvSpec, conv_forward, conv_vjp
from adjoint.engine.ops.conv_checks import conv_refusal
from adjoint.values.backends.float64 import F64, Float64Backend


def _cases(n: int, seed: int):
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        nd = int(rng.integers(1, 4))
        groups = int(rng.choice([1, 1, 2, 3]))
        batch = int(rng.integers(1, 3))
        c, o = groups * int(rng.integers(1, 4)), groups * int(rng.integers(1, 4))
        k = tuple(int(v) for v in rng.integers(1, 4, nd))
        size = tuple(int(v) for v in rng.integers(1, 9 if nd < 3 else 6, nd))
        spec = ConvSpec(tuple(int(v) for v in rng.integers(1, 4, nd)), tuple(int(v) for v in rng.integers(0, 3, nd)),
                        tuple(int(v) for v in rng.integers(1, 3, nd)), groups)
        xs, ws = (batch, c) + size, (o, c // groups) + k
        if conv_refusal(xs, ws, None, spec.stride, spec.padding, spec.dilation, groups) is not None:
            continue
        out.append((xs, ws, spec, bool(rng.random() < 0.5), rng))
    return out


@pytest.mark.torch
def test_float64_convolution_kernels_match_torch():
    torch = pytest.importorskip("torch")
    conv = {1: torch.nn.functional.conv1d, 2: torch.nn.functional.conv2d, 3: torch.nn.functional.conv3d}
    B = Float64Backend()
    assert B.conv_patches is not None and B.conv_fold is not None   # the kernels, not the generic lowering
    for i, (xs, ws, spec, bias, rng) in enumerate(_cases(120, 29)):
        x = rng.standard_normal(xs)
        if i % 4 == 1:
            x = np.asfortranarray(x)
        w = rng.standard_normal(ws[::-1]).T if i % 4 == 2 else rng.standard_normal(ws)   # a transposed weight
        b = rng.standard_normal(ws[0]) if bias else None
        ins = [F64(x), F64(w), F64(b) if bias else None]
        y = conv_forward(B, ins, spec)
        g = rng.standard_normal(y.shape)
        gx, gw, gb = conv_vjp(B, [F64(g)], ins, [y], spec, (True, True, True))
        xt, wt = (torch.tensor(np.array(v), requires_grad=True) for v in (x, w))
        bt = torch.tensor(b, requires_grad=True) if bias else None
        yt = conv[len(xs) - 2](xt, wt, bt, spec.stride, spec.padding, spec.dilation, spec.groups)
        yt.backward(torch.tensor(g))
        for mine, theirs in ((y, yt), (gx, xt.grad), (gw, wt.grad)) + (((gb, bt.grad),) if bias else ()):
            np.testing.assert_allclose(mine.a, theirs.detach().numpy(), rtol=1e-12, atol=1e-12,
                                       err_msg=f"case {i}: input {xs}, weight {ws}, {spec}")
        if not bias:
            assert gb is None
