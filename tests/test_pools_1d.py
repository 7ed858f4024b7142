"""MaxPool1d / AvgPool1d and F.max_pool1d / F.avg_pool1d against real torch (float64): the node
chains (UnsqueezeBackward0, MaxPool2DWithIndicesBackward0 or AvgPool2DBackward0, SqueezeBackward1),
what the pool nodes pack, the indices and the gradient (tests/data/regressions/pools_1d.yaml checks
hooks through verify), and PyTorch's complaints about malformed arguments."""

import pytest

from conftest import require_torch

torch = require_torch()
from torch import nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import adjoint  # noqa: E402
from nn_harness import assert_close, torch_chain  # noqa: E402
from nodechain import chain, leaf_names  # noqa: E402

X = [[[1, 3, -1, 0.5, 2, 2], [0, 1, 2, -2, 1, 4]]]

POOLS = """name: t
dtype: float64
inputs:
  x: {value: %s, requires_grad: true}
model:
  children:
    m1: {type: MaxPool1d, args: {kernel_size: 3, stride: 2, padding: 1, return_indices: true}}
    m2: {type: MaxPool1d, args: {kernel_size: 2, dilation: 2, ceil_mode: true}}
    a1: {type: AvgPool1d, args: {kernel_size: 3, stride: 2, padding: 1, count_include_pad: false}}
    a2: {type: AvgPool1d, args: {kernel_size: 4, ceil_mode: true}}
  forward: |
    p, i = m1(x)
    q = m2(x * 2)
    r = a1(x)
    s = a2(x)
    t = F.max_pool1d(x[0], 2)
    u = F.avg_pool1d(x[0], 2, 1)
    return (p * p).sum() + q.sum() + (r * 3).sum() + s.sum() + (t * t).sum() + u.sum()
loss: "y"
""" % X


def test_pools_1d_match_torch():
    """Each 1-D pool is unsqueeze, the 2-D kernel over (1, k) windows, squeeze; ties (2, 2) go to
    the first; the 2-D kernels pack the unsqueezed input (and the max pool its 4-D indices)."""
    v = adjoint.loads(POOLS).solve().variants[0]
    js = v.to_json()
    x = torch.tensor(X, dtype=torch.float64, requires_grad=True)
    packed = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: packed.append((tuple(t.shape), t.dtype)) or t,
                                                  lambda t: t):
        p, i = nn.MaxPool1d(3, 2, 1, return_indices=True)(x)
    assert packed == [((1, 2, 1, 6), torch.float64), ((1, 2, 1, 3), torch.int64)]
    q = nn.MaxPool1d(2, dilation=2, ceil_mode=True)(x * 2)
    r = nn.AvgPool1d(3, 2, 1, count_include_pad=False)(x)
    s = nn.AvgPool1d(4, ceil_mode=True)(x)
    t = F.max_pool1d(x[0], 2)
    u = F.avg_pool1d(x[0], 2, 1)
    ((p * p).sum() + q.sum() + (r * 3).sum() + s.sum() + (t * t).sum() + u.sum()).backward()
    ours = v.run.forward.names
    for name, theirs in (("m1[0]", p), ("m2", q), ("a1", r), ("a2", s), ("t", t), ("u", u)):
        assert chain(ours[name], leaf_names(ours)) == torch_chain(theirs, {"x": x}), name
        assert_close(js["values"][name]["value"], theirs.detach(), name)
    assert js["values"]["m1[1]"]["value"] == i.tolist()
    assert_close(js["grads"]["x"]["value"], x.grad, "grad of x")


@pytest.mark.parametrize("call,theirs", [
    ("F.max_pool1d(x[0, 0], 2)", lambda x: F.max_pool1d(x[0, 0], 2)),
    ("F.avg_pool1d(x[0, 0], 2)", lambda x: F.avg_pool1d(x[0, 0], 2)),
    ("F.max_pool1d(x, 2, padding=2)", lambda x: F.max_pool1d(x, 2, padding=2)),
    ("F.max_pool1d(x, 7)", lambda x: F.max_pool1d(x, 7)),
    ("F.max_pool1d(x, [2, 2])", lambda x: F.max_pool1d(x, [2, 2])),
])
def test_pools_1d_raise_what_torch_raises(call, theirs):
    """A call PyTorch refuses is an answer: its RuntimeError, in its own words, during the forward."""
    x = torch.tensor(X, dtype=torch.float64, requires_grad=True)
    with pytest.raises(RuntimeError) as raised:
        theirs(x)
    text = POOLS.replace("return (p * p).sum()", f"return {call}.sum() + (p * p).sum()")
    error = adjoint.loads(text).solve().variants[0].error
    assert (error.type, error.message, error.during) == ("RuntimeError", str(raised.value), "forward")
