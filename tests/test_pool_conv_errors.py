"""Errors PyTorch raises on well-formed pooling and convolution calls are answers, not refusals.

Each case is solved by adjoint with a saved-tensor pack hook and run in real torch 2.13 under
``saved_tensors_hooks``: the same packs (the pools' ``self``, the convolution's input and weight,
packed before ATen's kernel refuses; none when the functional form refuses before any node), then
the same exception type and message, raised during the forward. The words and their order are
ATen's: ``pooling_output_shape``, ``pool2d_shape_check`` / ``pool3d_shape_check``,
``check_max_pool1d``, ``at::_convolution``'s ``check_shape_forward``. The torch side of ``verify``
checks the files tests/data/regressions/pool_errors.yaml and conv_errors.yaml the same way.
"""

import pytest

import adjoint
from conftest import counting

F_CASES = [   # (adjoint forward, torch forward on x, w, input shape, weight shape or None)
    # 2-d pools: the kernel's checks, after MaxPool2DWithIndicesBackward0 / AvgPool2DBackward0 packed self
    ("F.max_pool2d(x, 2, padding=2)", lambda F, x, w: F.max_pool2d(x, 2, padding=2), (1, 2, 3, 3), None),
    ("F.max_pool2d(x, 3, padding=2, dilation=2)", lambda F, x, w: F.max_pool2d(x, 3, padding=2, dilation=2),
     (1, 2, 5, 5), None),
    ("F.max_pool2d(x, 2, stride=0)", lambda F, x, w: F.max_pool2d(x, 2, stride=0), (1, 2, 3, 3), None),
    ("F.max_pool2d(x, 2, stride=-1)", lambda F, x, w: F.max_pool2d(x, 2, stride=-1), (1, 2, 3, 3), None),
    ("F.max_pool2d(x, 2, padding=-1)", lambda F, x, w: F.max_pool2d(x, 2, padding=-1), (1, 2, 3, 3), None),
    ("F.max_pool2d(x, 2, dilation=0)", lambda F, x, w: F.max_pool2d(x, 2, dilation=0), (1, 2, 3, 3), None),
    ("F.max_pool2d(x, 0, stride=1)", lambda F, x, w: F.max_pool2d(x, 0, stride=1), (1, 2, 3, 3), None),
    ("F.max_pool2d(x, 5, return_indices=True)", lambda F, x, w: F.max_pool2d(x, 5, return_indices=True),
     (1, 2, 3, 3), None),
    ("F.max_pool2d(x, 2)", lambda F, x, w: F.max_pool2d(x, 2), (3, 3), None),
    ("F.avg_pool2d(x, 2, padding=2)", lambda F, x, w: F.avg_pool2d(x, 2, padding=2), (1, 2, 3, 3), None),
    ("F.avg_pool2d(x, 2, divisor_override=0)", lambda F, x, w: F.avg_pool2d(x, 2, divisor_override=0),
     (1, 2, 3, 3), None),
    ("F.avg_pool2d(x, (1, 4))", lambda F, x, w: F.avg_pool2d(x, (1, 4)), (2, 3, 3), None),
    ("F.avg_pool2d(x, 2)", lambda F, x, w: F.avg_pool2d(x, 2), (3, 3), None),
    ("F.max_pool2d(x, (2, 2, 2))", lambda F, x, w: F.max_pool2d(x, (2, 2, 2)), (4, 4), None),
    ("F.max_pool2d(x, (0, 2), stride=(1, 1, 1))", lambda F, x, w: F.max_pool2d(x, (0, 2), stride=(1, 1, 1)),
     (1, 2, 4, 4), None),
    ("F.max_pool2d(x, 2, dilation=(1, 1, 1))", lambda F, x, w: F.max_pool2d(x, 2, dilation=(1, 1, 1)), (1, 4, 4), None),
    ("F.avg_pool2d(x, 2, padding=(1, 1, 1), divisor_override=0)",
     lambda F, x, w: F.avg_pool2d(x, 2, padding=(1, 1, 1), divisor_override=0), (1, 4, 4), None),
    ("F.max_pool3d(x, (2, 2))", lambda F, x, w: F.max_pool3d(x, (2, 2)), (1, 4, 4, 4), None),
    ("F.avg_pool3d(x, 2, stride=(1, 1))", lambda F, x, w: F.avg_pool3d(x, 2, stride=(1, 1)), (1, 4, 4, 4), None),
    ("F.avg_pool3d(x, (2, 2))", lambda F, x, w: F.avg_pool3d(x, (2, 2)), (4, 4, 4), None),
    # 3-d pools
    ("F.max_pool3d(x, 2, padding=2)", lambda F, x, w: F.max_pool3d(x, 2, padding=2), (1, 1, 3, 3, 3), None),
    ("F.max_pool3d(x, 5)", lambda F, x, w: F.max_pool3d(x, 5), (1, 3, 3, 3), None),
    ("F.max_pool3d(x, 3, padding=2, dilation=2)", lambda F, x, w: F.max_pool3d(x, 3, padding=2, dilation=2),
     (1, 5, 5, 5), None),
    ("F.max_pool3d(x, 2)", lambda F, x, w: F.max_pool3d(x, 2), (3, 3, 3), None),
    ("F.avg_pool3d(x, 5)", lambda F, x, w: F.avg_pool3d(x, 5), (1, 3, 3, 3), None),
    ("F.avg_pool3d(x, 2, stride=0)", lambda F, x, w: F.avg_pool3d(x, 2, stride=0), (1, 3, 3, 3), None),
    ("F.avg_pool3d(x, 2, divisor_override=0)", lambda F, x, w: F.avg_pool3d(x, 2, divisor_override=0),
     (1, 3, 3, 3), None),
    # 1-d pools: max_pool1d's own checks (no node), or the 2-d kernel's after unsqueeze
    ("F.max_pool1d(x, 2, padding=2)", lambda F, x, w: F.max_pool1d(x, 2, padding=2), (2, 3), None),
    ("F.max_pool1d(x, 2, dilation=0)", lambda F, x, w: F.max_pool1d(x, 2, dilation=0), (2, 3), None),
    ("F.max_pool1d(x, 5)", lambda F, x, w: F.max_pool1d(x, 5), (1, 2, 3), None),
    ("F.max_pool1d(x, (2, 2))", lambda F, x, w: F.max_pool1d(x, (2, 2)), (2, 3), None),
    ("F.max_pool1d(x, 2)", lambda F, x, w: F.max_pool1d(x, 2), (3,), None),
    ("F.max_pool1d(x, 3, padding=2, dilation=2, return_indices=True)",
     lambda F, x, w: F.max_pool1d(x, 3, padding=2, dilation=2, return_indices=True), (2, 5), None),
    ("F.max_pool1d(x, 2, stride=-1, return_indices=True)",
     lambda F, x, w: F.max_pool1d(x, 2, stride=-1, return_indices=True), (2, 3), None),
    ("F.max_pool1d(x, 2, return_indices=True)", lambda F, x, w: F.max_pool1d(x, 2, return_indices=True), (3,), None),
    ("F.avg_pool1d(x, 2, padding=2)", lambda F, x, w: F.avg_pool1d(x, 2, padding=2), (2, 3), None),
    ("F.avg_pool1d(x, -1)", lambda F, x, w: F.avg_pool1d(x, -1), (1, 2, 3), None),
    ("F.avg_pool1d(x, 2)", lambda F, x, w: F.avg_pool1d(x, 2), (1, 1, 2, 3), None),
    # adaptive pools: output_size's length and signs (avg: before any node), the input's rank (after the pack)
    ("F.adaptive_avg_pool2d(x, (2, 2, 2))", lambda F, x, w: F.adaptive_avg_pool2d(x, (2, 2, 2)), (1, 3, 3), None),
    ("F.adaptive_avg_pool2d(x, (2, 2, 2))", lambda F, x, w: F.adaptive_avg_pool2d(x, (2, 2, 2)), (1, 1, 3, 3), None),
    ("F.adaptive_avg_pool3d(x, (2, 2))", lambda F, x, w: F.adaptive_avg_pool3d(x, (2, 2)), (1, 2, 2, 2), None),
    ("F.adaptive_max_pool3d(x, (2, 2))", lambda F, x, w: F.adaptive_max_pool3d(x, (2, 2)), (1, 2, 2, 2), None),
    ("F.adaptive_avg_pool2d(x, (None, -1))", lambda F, x, w: F.adaptive_avg_pool2d(x, (None, -1)), (1, 3, 3), None),
    ("F.adaptive_avg_pool2d(x, 2)", lambda F, x, w: F.adaptive_avg_pool2d(x, 2), (3, 3), None),
    ("F.adaptive_avg_pool3d(x, (2, -1, 2))", lambda F, x, w: F.adaptive_avg_pool3d(x, (2, -1, 2)), (1, 3, 3, 3),
     None),
    ("F.adaptive_avg_pool3d(x, 2)", lambda F, x, w: F.adaptive_avg_pool3d(x, 2), (1, 1, 1, 3, 3, 3), None),
    ("F.adaptive_max_pool2d(x, 2)", lambda F, x, w: F.adaptive_max_pool2d(x, 2), (3, 3), None),
    ("F.adaptive_max_pool2d(x, (2, 2, 2))", lambda F, x, w: F.adaptive_max_pool2d(x, (2, 2, 2)), (1, 3, 3), None),
    ("F.adaptive_max_pool2d(x, (2, 2, 2))", lambda F, x, w: F.adaptive_max_pool2d(x, (2, 2, 2)), (1, 1, 3, 3), None),
    ("F.adaptive_max_pool2d(x, (2, -3))", lambda F, x, w: F.adaptive_max_pool2d(x, (2, -3)), (1, 1, 3, 3), None),
    ("F.adaptive_max_pool3d(x, 2)", lambda F, x, w: F.adaptive_max_pool3d(x, 2), (3, 3, 3), None),
    ("F.adaptive_max_pool3d(x, (2, -1, 2))", lambda F, x, w: F.adaptive_max_pool3d(x, (2, -1, 2)), (1, 3, 3, 3),
     None),
    ("F.adaptive_max_pool1d(x, -1)", lambda F, x, w: F.adaptive_max_pool1d(x, -1), (2, 3), None),
    ("F.adaptive_max_pool1d(x, 2)", lambda F, x, w: F.adaptive_max_pool1d(x, 2), (3,), None),
    ("F.adaptive_max_pool1d(x, (2, 2))", lambda F, x, w: F.adaptive_max_pool1d(x, (2, 2)), (2, 3), None),
    # convolutions: at::_convolution's checks after ConvolutionBackward0 packed input and weight
    ("F.conv2d(x, w)", lambda F, x, w: F.conv2d(x, w), (1, 2, 3, 3), (2, 3, 2, 2)),
    ("F.conv2d(x, w, groups=2)", lambda F, x, w: F.conv2d(x, w, groups=2), (1, 2, 3, 3), (3, 1, 2, 2)),
    ("F.conv2d(x, w, groups=4)", lambda F, x, w: F.conv2d(x, w, groups=4), (1, 4, 3, 3), (2, 1, 2, 2)),
    ("F.conv2d(x, w, groups=0)", lambda F, x, w: F.conv2d(x, w, groups=0), (1, 2, 3, 3), (2, 2, 2, 2)),
    ("F.conv2d(x, w, stride=0)", lambda F, x, w: F.conv2d(x, w, stride=0), (1, 2, 3, 3), (2, 2, 2, 2)),
    ("F.conv2d(x, w, padding=-1)", lambda F, x, w: F.conv2d(x, w, padding=-1), (2, 3, 3), (2, 2, 2, 2)),
    ("F.conv2d(x, w, dilation=(1, 0))", lambda F, x, w: F.conv2d(x, w, dilation=(1, 0)), (1, 2, 3, 3),
     (2, 2, 2, 2)),
    ("F.conv2d(x, w, dilation=2)", lambda F, x, w: F.conv2d(x, w, dilation=2), (1, 2, 2, 2), (2, 2, 2, 2)),
    ("F.conv2d(x, w, stride=2, padding='same')", lambda F, x, w: F.conv2d(x, w, stride=2, padding="same"),
     (1, 2, 3, 3), (2, 2, 2, 2)),
    ("F.conv2d(x, w, padding='full')", lambda F, x, w: F.conv2d(x, w, padding="full"), (1, 2, 3, 3), (2, 2, 2, 2)),
    ("F.conv2d(x, w)", lambda F, x, w: F.conv2d(x, w), (3, 3), (2, 2, 2, 2)),
    ("F.conv2d(x, w)", lambda F, x, w: F.conv2d(x, w), (1, 2, 4, 4), (2, 2, 2)),
    ("F.conv2d(x, w)", lambda F, x, w: F.conv2d(x, w), (2, 4, 4), (2, 2)),
    ("F.conv2d(x, w, groups=0)", lambda F, x, w: F.conv2d(x, w, groups=0), (1, 2, 4, 4), (2, 2, 2)),
    ("F.conv2d(x, w, stride=(1, 1, 1), padding=(1, 1, 1))",
     lambda F, x, w: F.conv2d(x, w, stride=(1, 1, 1), padding=(1, 1, 1)), (1, 2, 4, 4), (2, 2, 2, 2)),
    ("F.conv2d(x, w, padding=-1, dilation=(1, 1, 1))", lambda F, x, w: F.conv2d(x, w, padding=-1, dilation=(1, 1, 1)),
     (1, 2, 4, 4), (2, 2, 2, 2)),
    ("F.conv2d(x, w, padding='same')", lambda F, x, w: F.conv2d(x, w, padding="same"), (1, 3, 3, 3), (2, 2, 2, 2)),
    ("F.conv2d(x, w, padding='same', groups=2)", lambda F, x, w: F.conv2d(x, w, padding="same", groups=2),
     (1, 2, 3, 3), (3, 1, 3, 3)),
    ("F.conv2d(x, w, padding='valid')", lambda F, x, w: F.conv2d(x, w, padding="valid"), (1, 2, 3, 3), (2, 2, 4, 4)),
    ("F.conv1d(x, w, dilation=0)", lambda F, x, w: F.conv1d(x, w, dilation=0), (1, 2, 3), (2, 2, 2)),
    ("F.conv1d(x, w)", lambda F, x, w: F.conv1d(x, w), (2, 3), (2, 2, 5)),
    ("F.conv3d(x, w, padding=1)", lambda F, x, w: F.conv3d(x, w, padding=1), (1, 1, 2, 2, 2), (1, 1, 5, 5, 5)),
    ("F.conv3d(x, w)", lambda F, x, w: F.conv3d(x, w), (1, 2, 2, 2, 2), (1, 3, 1, 1, 1)),
]

TEMPLATE = """
name: case
dtype: float64
inputs:
  x: {{value: {x}, requires_grad: true}}
{w}model:
  inputs: [{names}]
  forward: "{forward}"
loss: "sum(y)"
hooks:
  - {{saved_tensors: {{pack: "x", unpack: "x"}}}}
"""


@pytest.mark.torch
def test_pool_and_conv_errors_are_torchs():
    import torch
    import torch.nn.functional as F

    for forward, fn, xs, ws in F_CASES:
        w_line = "" if ws is None else f"  w: {{value: {counting(ws)}, requires_grad: true}}\n"
        text = TEMPLATE.format(x=counting(xs), w=w_line, names="x" if ws is None else "x, w",
                               forward=forward)
        v = adjoint.loads(text, name="case").solve().variants[0]
        assert v.error is not None, forward
        predicted = ([list(c.args["x"].shape) for c in v.hook_calls if c.kind == "pack"],
                     v.error.type, v.error.message, v.error.during)

        x = torch.tensor(counting(xs), dtype=torch.float64, requires_grad=True)
        w = None if ws is None else torch.tensor(counting(ws), dtype=torch.float64, requires_grad=True)
        packs = []

        def pack(t):
            packs.append(list(t.shape))
            return t

        with pytest.raises(Exception) as caught:
            with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
                fn(F, x, w)
        observed = (packs, type(caught.value).__name__, str(caught.value), "forward")
        assert predicted == observed, forward


@pytest.mark.torch
def test_the_order_of_the_checks_is_atens_on_a_grid():
    """The refusal rules alone (no solve), against torch over a grid of wrong and right arguments:
    every pool with kernel, stride, padding, dilation, ceil_mode and divisor in and out of range,
    and float64 convolutions with wrong groups, channels, bias, stride, padding, dilation."""
    import itertools

    import torch
    import torch.nn.functional as F

    from adjoint.engine.ops.conv_checks import conv_refusal
    from adjoint.engine.ops.pool import PoolSpec
    from adjoint.engine.ops.pool_checks import pool_refusal

    def raised(fn):
        try:
            fn()
        except Exception as exc:   # noqa: BLE001 -- any of torch's errors is the expectation
            return (type(exc).__name__, str(exc))
        return None

    n = 0
    for what in ("max_pool2d", "avg_pool2d", "max_pool3d", "avg_pool3d"):
        rank = 3 if "3" in what else 2
        shapes = [(1, 2) + (3,) * rank, (2,) + (3,) * rank, (3,) * rank, (1, 2, 0) + (3,) * (rank - 1)]
        kernels = [0, 2, 3, -1, (2, 3) if rank == 2 else (2, 3, 1)]
        for shape, k, s, pad, d, ceil, div in itertools.product(shapes, kernels, [None, 0, 2, -1], [0, 1, 2, -1],
                                                                [1, 0, 2], [False, True], [None, 0]):
            if (what[0] == "m" and div is not None) or (what[0] == "a" and d != 1):
                continue
            args = dict(kernel_size=k, stride=s, padding=pad, ceil_mode=ceil)
            args.update(dilation=d) if what[0] == "m" else args.update(divisor_override=div)
            x = torch.ones(shape, dtype=torch.float64, requires_grad=True)
            full = lambda v: tuple(v) if isinstance(v, tuple) else (v,) * rank   # noqa: E731
            spec = PoolSpec(full(k), full(k) if s is None else full(s), full(pad),
                            full(d) if what[0] == "m" else (1,) * rank, ceil, True, div)
            assert pool_refusal(shape, spec, what) == raised(lambda: getattr(F, what)(x, **args)), (what, shape, args)
            n += 1
    for rank in (1, 2):
        conv = getattr(F, f"conv{rank}d")
        for x, w, bias, s, pad, d, g in itertools.product(
                [(1, 2) + (3,) * rank, (2, 4) + (2,) * rank], [(2, 2) + (2,) * rank, (3, 1) + (2,) * rank,
                                                             (4, 1) + (3,) * rank, (1, 2) + (1,) * rank],
                [None, "ok", "bad"], [1, 0], [0, -1, 1], [1, 0, 2], [1, 2, 0]):
            b = None if bias is None else (w[0],) if bias == "ok" else (w[0] + 1,)
            xt = torch.ones(x, dtype=torch.float64, requires_grad=True)
            wt, bt = torch.ones(w, dtype=torch.float64), None if b is None else torch.ones(b, dtype=torch.float64)
            theirs = raised(lambda: conv(xt, wt, bt, stride=s, padding=pad, dilation=d, groups=g))
            assert conv_refusal(x, w, b, (s,) * rank, (pad,) * rank, (d,) * rank, g) == theirs, (x, w, b, s, pad, d, g)
            n += 1
    assert n > 3000
