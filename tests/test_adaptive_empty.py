"""Adaptive pools with an empty dimension, in the input or the output, against real torch.

An output size of 0 is no error in the forward: PyTorch computes the empty output (the max
pools' indices too, packed), and the node's backward refuses it: "adaptive_max_pool2d_backward():
Expected grad_output to have non-zero size for non-batch dimensions, but grad_output has sizes
[1, 0, 2] with dimension 1 being empty" (every dimension but the first). An input with an empty
dimension the kernel checks (adaptive_avg_pool2d: the last two; adaptive_avg_pool3d and the max
pools: every one but the first) is refused in the forward once the node has packed self; an
empty channel dimension that adaptive_avg_pool2d does not check gives an empty output whose
backward refuses it. Each case: the hook calls (kind and shape, in order: packs and the
backward's unpacks) and the error's type, message and phase, or that there is none.
"""

import pytest

import adjoint
from conftest import counting

TEMPLATE = """
name: case
dtype: float64
inputs:
  a: {{value: {x}, requires_grad: true}}
model:
  inputs: [a]
  forward: "{forward}"
loss: "sum(y)"
hooks:
  - {{saved_tensors: {{pack: "x", unpack: "x"}}}}
"""


def _cases():
    for kind, rank in (("avg", 2), ("avg", 3), ("max", 1), ("max", 2), ("max", 3)):
        for nd in (rank + 1, rank + 2):
            base = (2, 3, 4, 3, 2)[:nd]
            for empty in (None,) + tuple(range(nd)):
                for size in ((2,) * rank, (0,) + (2,) * (rank - 1), (2,) * (rank - 1) + (0,), (0,) * rank):
                    if empty is not None and size == (0,) * rank:
                        continue
                    yield kind, rank, base, empty, size


@pytest.mark.torch
def test_adaptive_pools_with_an_empty_dimension_as_torch():
    import torch
    import torch.nn.functional as F

    checked, phases = 0, set()
    for kind, rank, base, empty, size in _cases():
        call = f"adaptive_{kind}_pool{rank}d"
        arg = size[0] if rank == 1 else size
        index = "" if empty is None else "[" + ", ".join([":"] * empty + [":0"]) + "]"
        forward = f"F.{call}(a{index}, {arg})"
        v = adjoint.loads(TEMPLATE.format(x=counting(base), forward=forward), name="case").solve().variants[0]
        predicted = ([(c.kind, list(c.args["x"].shape)) for c in v.hook_calls],
                     None if v.error is None else (v.error.type, v.error.message, v.error.during))

        a = torch.tensor(counting(base), dtype=torch.float64, requires_grad=True)
        calls, error = [], None

        def pack(t):
            calls.append(("pack", list(t.shape)))
            return t

        def unpack(t):
            calls.append(("unpack", list(t.shape)))
            return t
        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            phase = "forward"
            try:
                x = a if empty is None else a[(slice(None),) * empty + (slice(0, 0),)]
                y = getattr(F, call)(x, arg)
                phase = "backward"
                y.sum().backward()
            except RuntimeError as exc:
                error = ("RuntimeError", str(exc), phase)
        assert predicted == (calls, error), forward
        checked += 1
        phases.add(None if error is None else error[2])
    assert checked == 141 and phases == {None, "forward", "backward"}, (checked, phases)
