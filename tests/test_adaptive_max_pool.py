"""AdaptiveMaxPool1d / AdaptiveMaxPool2d and their functions against real torch (float64): the
node chains (1d: UnsqueezeBackward0, AdaptiveMaxPool2DBackward0, SqueezeBackward1), the indices
and the gradient (tests/data/regressions/adaptive_max_pools.yaml checks hooks through verify)."""

from conftest import require_torch

torch = require_torch()
from torch import nn  # noqa: E402

import adjoint  # noqa: E402
from nn_harness import assert_close, torch_chain  # noqa: E402
from nodechain import chain, leaf_names  # noqa: E402



POOLS = """name: t
dtype: float64
inputs:
  x: {value: [[[1, 3, -1, 0.5, 2], [0, 1, 2, -2, 1]]], requires_grad: true}
model:
  children:
    p1: {type: AdaptiveMaxPool1d, args: {output_size: 3}}
    p2: {type: AdaptiveMaxPool2d, args: {output_size: [1, 2], return_indices: true}}
  forward: |
    a = p1(x)
    b, i = p2(x)
    return (a * a).sum() + b.sum()
loss: "y"
"""


def test_adaptive_max_pools_match_torch():
    """AdaptiveMaxPool1d: unsqueeze, AdaptiveMaxPool2DBackward0, squeeze; 2d on a 3-D input (one
    plane per channel); overlapping windows, and a tie (1, 1 in the second row's last window)."""
    v = adjoint.loads(POOLS).solve().variants[0]
    js = v.to_json()
    x = torch.tensor([[[1, 3, -1, 0.5, 2], [0, 1, 2, -2, 1]]], dtype=torch.float64, requires_grad=True)
    a = nn.AdaptiveMaxPool1d(3)(x)
    b, i = nn.AdaptiveMaxPool2d((1, 2), return_indices=True)(x)
    ((a * a).sum() + b.sum()).backward()
    ours = v.run.forward.names
    assert chain(ours["p1"], leaf_names(ours)) == torch_chain(a, {"x": x})
    assert chain(ours["p2[0]"], leaf_names(ours)) == torch_chain(b, {"x": x})
    assert js["values"]["p2[1]"]["value"] == i.tolist()
    assert_close(js["grads"]["x"]["value"], x.grad, "grad of x")


def test_import_writes_a_kept_size_as_null():
    """``adjoint import`` of AdaptiveMaxPool2d((None, 2)) / AdaptiveAvgPool2d((None, 2)): None is YAML's null
    (it was written as the string None, which the loader refused)."""
    x = torch.tensor([[[1, 3, -1, 0.5], [0, 1, 2, -2], [2, -1, 0.25, 1]]], dtype=torch.float64, requires_grad=True)
    for pool in (nn.AdaptiveMaxPool2d((None, 2)), nn.AdaptiveAvgPool2d((None, 2))):
        text = adjoint.from_module_text(nn.Sequential(pool), x)
        assert "output_size: [null, 2]" in text
        js = adjoint.loads(text).solve().variants[0].to_json()
        y = pool(x)
        x.grad = None
        y.sum().backward()
        assert_close(js["grads"]["x"]["value"], x.grad, type(pool).__name__)


POOL3D = """name: t
dtype: float64
inputs:
  x: {value: [[[[1, 3, -1], [0.5, 2, 2]], [[0, 1, 2], [-2, 1, 4]], [[2, 2, 0], [1, -3, 5]]]], requires_grad: true}
model:
  children:
    p1: {type: AdaptiveMaxPool3d, args: {output_size: [2, null, 2], return_indices: true}}
  forward: |
    a, i = p1(x)
    b, j = F.adaptive_max_pool3d(x.unsqueeze(0), 1, return_indices=True)
    return (a * a).sum() + b.sum()
loss: "y"
"""


def test_adaptive_max_pool3d_matches_torch():
    """AdaptiveMaxPool3d / F.adaptive_max_pool3d: one AdaptiveMaxPool3DBackward0 on a 4-D
    (unbatched) and a 5-D input, overlapping windows with a tie (2, 2 at d=2, h=0), the flat
    (d * H + h) * W + w indices, what the node saves (self, then the indices) and the gradient."""
    v = adjoint.loads(POOL3D).solve().variants[0]
    js = v.to_json()
    x = torch.tensor([[[[1, 3, -1], [0.5, 2, 2]], [[0, 1, 2], [-2, 1, 4]], [[2, 2, 0], [1, -3, 5]]]],
                     dtype=torch.float64, requires_grad=True)
    packed = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: packed.append((tuple(t.shape), t.dtype)) or t,
                                                  lambda t: t):
        a, i = nn.AdaptiveMaxPool3d((2, None, 2), return_indices=True)(x)
    b, j = torch.nn.functional.adaptive_max_pool3d(x.unsqueeze(0), 1, return_indices=True)
    ((a * a).sum() + b.sum()).backward()
    assert a.grad_fn.name() == "AdaptiveMaxPool3DBackward0"
    assert packed == [((1, 3, 2, 3), torch.float64), ((1, 2, 2, 2), torch.int64)]
    ours = v.run.forward.names
    assert chain(ours["p1[0]"], leaf_names(ours)) == torch_chain(a, {"x": x})
    assert chain(ours["b"], leaf_names(ours)) == torch_chain(b, {"x": x})
    assert js["values"]["p1[1]"]["value"] == i.tolist()
    assert js["values"]["j"]["value"] == j.tolist()
    assert_close(js["grads"]["x"]["value"], x.grad, "grad of x")
