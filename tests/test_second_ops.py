"""Second order through addcmul, addcdiv, logsumexp, cosine_embedding_loss (SubBackward1), the
convolution (ConvolutionBackwardBackward0), the batch norm and instance norm
(NativeBatchNormBackwardBackward0), the group norm (its plain ops), 2-D and 3-D average and max pooling, the
adaptive pools, upsampling, sign (SignBackward0's zeros), a same-sizes view (ViewBackward0), abs / sgn (and
SgnBackward0's efficient zero tensor), x ** 0.5, clamp with tensor bounds and the vector norms of orders 1, inf and
others: the graph a create_graph backward records, node for node
(names and sequence_nr), and the grad of grad, against real torch 2.13 (all were refused before)."""

import pytest
from conftest import require_torch

torch = require_torch()

from test_second_order import _compare_selecting  # noqa: E402

F = torch.nn.functional
F64 = torch.float64


def _t(v):
    return torch.tensor(v, dtype=F64)


OPS = [  # (forward over h = a * b, b and idx; the same in torch)
    # AddcmulBackward0: grad * (tensor2 * value) (MulBackward1, MulBackward0), then tensor2's
    ("torch.addcmul(h, h, b, value=0.5)", lambda h, i, b: torch.addcmul(h, h, b, value=0.5)),
    ("torch.addcmul(h, h[0], b[:, :1])", lambda h, i, b: torch.addcmul(h, h[0], b[:, :1])),
    ("torch.addcmul(idx.double(), h, h * 3)", lambda h, i, b: torch.addcmul(i.double(), h, h * 3)),
    # AddcdivBackward0: value / tensor2 is a filled tensor divided in place (DivBackward0); tensor2's
    # -grad * ((value * tensor1) / (tensor2 * tensor2)): the denominator first
    ("torch.addcdiv(h, h, b, value=0.5)", lambda h, i, b: torch.addcdiv(h, h, b, value=0.5)),
    ("torch.addcdiv(h[1], idx.double() + 1, b, value=-2)", lambda h, i, b: torch.addcdiv(h[1], i.double() + 1, b, value=-2)),
    ("torch.addcdiv(b, h, b + h)", lambda h, i, b: torch.addcdiv(b, h, b + h)),
    # logsumexp_backward: grad and result unsqueezed, then grad * (self - result).exp()
    ("torch.logsumexp(h, 1)", lambda h, i, b: torch.logsumexp(h, 1)),
    ("torch.logsumexp(h, (0, 1))", lambda h, i, b: torch.logsumexp(h, (0, 1))),
    ("torch.logsumexp(h, 0, keepdim=True)", lambda h, i, b: torch.logsumexp(h, 0, keepdim=True)),
    ("torch.logsumexp(h[0], 0)", lambda h, i, b: torch.logsumexp(h[0], 0)),
    # cosine_embedding_loss: ``cos - margin`` is SubBackward1 (C++'s tensor - double)
    ("F.cosine_embedding_loss(h, b, torch.tensor([1., -1.], dtype=torch.float64))",
     lambda h, i, b: F.cosine_embedding_loss(h, b, _t([1., -1.]))),
    ("F.cosine_embedding_loss(h, b * 2, torch.tensor([1., -1.], dtype=torch.float64), margin=0.5, reduction='sum')",
     lambda h, i, b: F.cosine_embedding_loss(h, b * 2, _t([1., -1.]), margin=0.5, reduction="sum")),
    # ConvolutionBackward0: convolution_backward(...): one ConvolutionBackwardBackward0, three outputs
    ("F.conv2d(h.reshape(1, 1, 2, 3), b[:, :2].reshape(1, 1, 2, 2), b[0, :1])",
     lambda h, i, b: F.conv2d(h.reshape(1, 1, 2, 3), b[:, :2].reshape(1, 1, 2, 2), b[0, :1])),
    ("F.conv2d(h.reshape(1, 1, 2, 3), b[:, :2].reshape(1, 1, 2, 2))",
     lambda h, i, b: F.conv2d(h.reshape(1, 1, 2, 3), b[:, :2].reshape(1, 1, 2, 2))),
    ("F.conv1d(h.unsqueeze(0), b[:, :2].reshape(1, 2, 2), padding=1)",
     lambda h, i, b: F.conv1d(h.unsqueeze(0), b[:, :2].reshape(1, 2, 2), padding=1)),
    ("F.conv1d(h.unsqueeze(0), b.reshape(3, 2, 1) * 2, b[1])",
     lambda h, i, b: F.conv1d(h.unsqueeze(0), b.reshape(3, 2, 1) * 2, b[1])),
    ("F.conv1d(h.unsqueeze(1), b[:1, :2].unsqueeze(0), stride=2, padding=1)",
     lambda h, i, b: F.conv1d(h.unsqueeze(1), b[:1, :2].unsqueeze(0), stride=2, padding=1)),
    ("F.conv1d(h.reshape(1, 2, 3), b[:, :2].reshape(2, 1, 2), groups=2)",
     lambda h, i, b: F.conv1d(h.reshape(1, 2, 3), b[:, :2].reshape(2, 1, 2), groups=2)),
    ("F.conv_transpose1d(h.unsqueeze(0), b[:, :2].reshape(2, 1, 2), b[0, :1])",
     lambda h, i, b: F.conv_transpose1d(h.unsqueeze(0), b[:, :2].reshape(2, 1, 2), b[0, :1])),
    ("F.conv2d(h.reshape(1, 1, 2, 3), idx.double()[:, :2].reshape(1, 1, 2, 2))",
     lambda h, i, b: F.conv2d(h.reshape(1, 1, 2, 3), i.double()[:, :2].reshape(1, 1, 2, 2))),
    ("F.conv2d(idx.double().reshape(1, 1, 2, 3), h[:, :2].reshape(1, 1, 2, 2), dilation=(1, 1))",
     lambda h, i, b: F.conv2d(i.double().reshape(1, 1, 2, 3), h[:, :2].reshape(1, 1, 2, 2), dilation=(1, 1))),
    # NativeBatchNormBackward0: native_batch_norm_backward(...): one NativeBatchNormBackwardBackward0 (training and
    # eval; F.instance_norm runs it on views of the input)
    ("F.batch_norm(h, None, None, training=True)", lambda h, i, b: F.batch_norm(h, None, None, training=True)),
    ("F.batch_norm(h, None, None, b[0], b[1], training=True)",
     lambda h, i, b: F.batch_norm(h, None, None, b[0], b[1], training=True)),
    ("F.batch_norm(h.t(), None, None, b[0, :2], None, training=True, eps=0.5)",
     lambda h, i, b: F.batch_norm(h.t(), None, None, b[0, :2], None, training=True, eps=0.5)),
    ("F.batch_norm(h, torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64), b[0], b[1])",
     lambda h, i, b: F.batch_norm(h, torch.zeros(3, dtype=F64), torch.ones(3, dtype=F64), b[0], b[1])),
    ("F.batch_norm(h, torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64), b[0], b[1], "
     "training=True)",
     lambda h, i, b: F.batch_norm(h, torch.zeros(3, dtype=F64), torch.ones(3, dtype=F64), b[0], b[1], training=True)),
    ("F.batch_norm(h.reshape(2, 1, 3), torch.tensor([0.5], dtype=torch.float64), torch.tensor([2.0], "
     "dtype=torch.float64), b[0, :1], None)",
     lambda h, i, b: F.batch_norm(h.reshape(2, 1, 3), _t([0.5]), _t([2.0]), b[0, :1], None)),
    ("F.batch_norm(h, torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64))",
     lambda h, i, b: F.batch_norm(h, torch.zeros(3, dtype=F64), torch.ones(3, dtype=F64))),
    ("F.instance_norm(h.unsqueeze(0))", lambda h, i, b: F.instance_norm(h.unsqueeze(0))),
    ("F.instance_norm(h.reshape(1, 2, 3), weight=b[0, :2], bias=b[1, :2])",
     lambda h, i, b: F.instance_norm(h.reshape(1, 2, 3), weight=b[0, :2], bias=b[1, :2])),
    ("F.instance_norm(h.reshape(2, 1, 3), weight=b[0, :1], bias=None, eps=0.1)",
     lambda h, i, b: F.instance_norm(h.reshape(2, 1, 3), weight=b[0, :1], bias=None, eps=0.1)),
    # AvgPool2DBackward0 / MaxPool2DWithIndicesBackward0: their backward kernels (AvgPool2DBackwardBackward0,
    # MaxPool2DWithIndicesBackwardBackward0); the 1-d ones run them on an unsqueezed input
    ("F.avg_pool2d(h.reshape(1, 1, 2, 3), 2, stride=1)", lambda h, i, b: F.avg_pool2d(h.reshape(1, 1, 2, 3), 2, stride=1)),
    ("F.avg_pool1d(h.unsqueeze(0), 2)", lambda h, i, b: F.avg_pool1d(h.unsqueeze(0), 2)),
    ("F.avg_pool2d(h.reshape(1, 2, 3), (1, 2), padding=(0, 1), count_include_pad=False)",
     lambda h, i, b: F.avg_pool2d(h.reshape(1, 2, 3), (1, 2), padding=(0, 1), count_include_pad=False)),
    ("F.avg_pool2d(h.reshape(1, 1, 2, 3), 2, ceil_mode=True, divisor_override=3)",
     lambda h, i, b: F.avg_pool2d(h.reshape(1, 1, 2, 3), 2, ceil_mode=True, divisor_override=3)),
    ("F.max_pool2d(h.reshape(1, 1, 2, 3), 2, stride=1)", lambda h, i, b: F.max_pool2d(h.reshape(1, 1, 2, 3), 2, stride=1)),
    ("F.max_pool1d(h.unsqueeze(0), 2)", lambda h, i, b: F.max_pool1d(h.unsqueeze(0), 2)),
    ("F.max_pool2d(h.reshape(1, 2, 3), (1, 2), padding=(0, 1))",
     lambda h, i, b: F.max_pool2d(h.reshape(1, 2, 3), (1, 2), padding=(0, 1))),
    ("F.max_pool2d(torch.relu(F.conv2d(h.reshape(1, 1, 2, 3), b[:, :2].reshape(1, 1, 2, 2), padding=1)), 2)",
     lambda h, i, b: F.max_pool2d(torch.relu(F.conv2d(h.reshape(1, 1, 2, 3), b[:, :2].reshape(1, 1, 2, 2), padding=1)), 2)),
    # NativeGroupNormBackward0 under grad mode: infinitely_differentiable_native_group_norm_backward's plain ops
    # (views, SumBackward1 / UnsqueezeBackward1 pairs, the unused var's four nodes, muls, subs and adds)
    ("F.group_norm(h.reshape(1, 2, 3), 1)", lambda h, i, b: F.group_norm(h.reshape(1, 2, 3), 1)),
    ("F.group_norm(h.reshape(1, 2, 3), 2, b[0, :2], b[1, :2])",
     lambda h, i, b: F.group_norm(h.reshape(1, 2, 3), 2, b[0, :2], b[1, :2])),
    ("F.group_norm(h.reshape(2, 3, 1), 3, b[0], None, eps=0.1)",
     lambda h, i, b: F.group_norm(h.reshape(2, 3, 1), 3, b[0], None, eps=0.1)),
    ("F.group_norm(h.reshape(2, 1, 3, 1), 1, b[1, :1])",
     lambda h, i, b: F.group_norm(h.reshape(2, 1, 3, 1), 1, b[1, :1])),
    ("F.group_norm(h.t().unsqueeze(0), 3, b[1] * 2)", lambda h, i, b: F.group_norm(h.t().unsqueeze(0), 3, b[1] * 2)),
    ("F.group_norm(h.reshape(1, 6), 2, idx.double().reshape(6))",
     lambda h, i, b: F.group_norm(h.reshape(1, 6), 2, i.double().reshape(6))),
    # AvgPool3DBackward0, MaxPool3DWithIndicesBackward0, AdaptiveMaxPool{2,3}DBackward0, AdaptiveAvgPool{2,3}DBackward0:
    # their backward kernels (*BackwardBackward0: edges grad_output and self; the max ones save the indices)
    ("F.avg_pool3d(h.reshape(1, 1, 2, 3), (1, 2, 2), stride=1)",
     lambda h, i, b: F.avg_pool3d(h.reshape(1, 1, 2, 3), (1, 2, 2), stride=1)),
    ("F.avg_pool3d(h.reshape(1, 1, 1, 2, 3), (1, 2, 2), padding=(0, 1, 1), count_include_pad=False)",
     lambda h, i, b: F.avg_pool3d(h.reshape(1, 1, 1, 2, 3), (1, 2, 2), padding=(0, 1, 1), count_include_pad=False)),
    ("F.max_pool3d(h.reshape(1, 1, 1, 2, 3), (1, 2, 2), stride=1)",
     lambda h, i, b: F.max_pool3d(h.reshape(1, 1, 1, 2, 3), (1, 2, 2), stride=1)),
    ("F.max_pool3d(h.reshape(1, 1, 2, 3), 2, padding=1)", lambda h, i, b: F.max_pool3d(h.reshape(1, 1, 2, 3), 2, padding=1)),
    ("F.adaptive_max_pool2d(h.reshape(1, 1, 2, 3), (1, 2))",
     lambda h, i, b: F.adaptive_max_pool2d(h.reshape(1, 1, 2, 3), (1, 2))),
    ("F.adaptive_max_pool1d(h.unsqueeze(0), 2)", lambda h, i, b: F.adaptive_max_pool1d(h.unsqueeze(0), 2)),
    ("F.adaptive_max_pool2d(h.reshape(1, 2, 3), 2)", lambda h, i, b: F.adaptive_max_pool2d(h.reshape(1, 2, 3), 2)),
    ("F.adaptive_max_pool3d(h.reshape(1, 1, 2, 3), (1, 1, 2))",
     lambda h, i, b: F.adaptive_max_pool3d(h.reshape(1, 1, 2, 3), (1, 1, 2))),
    ("F.adaptive_avg_pool2d(h.reshape(1, 1, 2, 3), (1, 2))",
     lambda h, i, b: F.adaptive_avg_pool2d(h.reshape(1, 1, 2, 3), (1, 2))),
    ("F.adaptive_avg_pool1d(h.unsqueeze(0), 2)", lambda h, i, b: F.adaptive_avg_pool1d(h.unsqueeze(0), 2)),
    ("F.adaptive_avg_pool3d(h.reshape(1, 1, 2, 3), (1, 2, 2))",
     lambda h, i, b: F.adaptive_avg_pool3d(h.reshape(1, 1, 2, 3), (1, 2, 2))),
    # Upsample{Nearest1D,Nearest2D,Linear1D,Bilinear2D}Backward0: their backward kernels (one
    # *BackwardBackward0 node, one edge), whose derivative is the forward upsample
    ("F.interpolate(h.reshape(1, 1, 2, 3), scale_factor=2.0)",
     lambda h, i, b: F.interpolate(h.reshape(1, 1, 2, 3), scale_factor=2.0)),
    ("F.interpolate(h.reshape(1, 2, 3), size=5)", lambda h, i, b: F.interpolate(h.reshape(1, 2, 3), size=5)),
    ("F.interpolate(h.reshape(1, 1, 2, 3), size=(3, 4))", lambda h, i, b: F.interpolate(h.reshape(1, 1, 2, 3), size=(3, 4))),
    ("F.interpolate(h.reshape(1, 1, 2, 3), scale_factor=2.0, mode='bilinear')",
     lambda h, i, b: F.interpolate(h.reshape(1, 1, 2, 3), scale_factor=2.0, mode="bilinear")),
    ("F.interpolate(h.reshape(1, 1, 2, 3), size=(3, 5), mode='bilinear', align_corners=True)",
     lambda h, i, b: F.interpolate(h.reshape(1, 1, 2, 3), size=(3, 5), mode="bilinear", align_corners=True)),
    ("F.interpolate(h.reshape(1, 2, 3), size=5, mode='linear')",
     lambda h, i, b: F.interpolate(h.reshape(1, 2, 3), size=5, mode="linear")),
    ("F.interpolate(h.reshape(1, 2, 3), scale_factor=1.5, mode='linear', align_corners=True)",
     lambda h, i, b: F.interpolate(h.reshape(1, 2, 3), scale_factor=1.5, mode="linear", align_corners=True)),
    # SignBackward0: zeros_like(grad), summed with the other gradient by a recorded AddBackward0
    ("torch.sign(h) * h", lambda h, i, b: torch.sign(h) * h),
    ("torch.sign(h - 0.1) * b + h", lambda h, i, b: torch.sign(h - 0.1) * b + h),
    ("torch.sign(h).sum() * h", lambda h, i, b: torch.sign(h).sum() * h),
    # AbsBackward0: grad * self.sgn() (SgnBackward0, then MulBackward0); SgnBackward0's backward hands on a
    # ZeroTensor, summed with the other gradient out of place (a recorded AddBackward0 under create_graph)
    ("torch.abs(h)", lambda h, i, b: torch.abs(h)),
    ("h.abs() * b", lambda h, i, b: h.abs() * b),
    ("F.softsign(h)", lambda h, i, b: F.softsign(h)),
    ("F.l1_loss(h, b)", lambda h, i, b: F.l1_loss(h, b)),
    ("F.l1_loss(h, b, reduction='sum') * h", lambda h, i, b: F.l1_loss(h, b, reduction="sum") * h),
    ("torch.sgn(h) * h", lambda h, i, b: torch.sgn(h) * h),
    ("h.sgn() * b + h.abs()", lambda h, i, b: h.sgn() * b + h.abs()),
    # PowBackward0 of x ** 0.5: grad * (0.5 * self.pow(-0.5)) (PowBackward0, MulBackward1, MulBackward0)
    ("(h * h + b) ** 0.5", lambda h, i, b: (h * h + b) ** 0.5),
    ("(h * h) ** 0.5 * b", lambda h, i, b: (h * h) ** 0.5 * b),
    # ClampBackward0 (tensor bounds): min's and max's where first, then self's; each summed back to its shape
    ("torch.clamp(h, min=b * 0.5)", lambda h, i, b: torch.clamp(h, min=b * 0.5)),
    ("torch.clamp(h, max=b[0])", lambda h, i, b: torch.clamp(h, max=b[0])),
    ("torch.clamp(h, min=b[:, :1] - 1, max=b * 0.5)", lambda h, i, b: torch.clamp(h, min=b[:, :1] - 1, max=b * 0.5)),
    ("torch.clamp(h[0], min=b - 0.5, max=idx.double())", lambda h, i, b: torch.clamp(h[0], min=b - 0.5, max=i.double())),
    ("h.clamp(min=b * 0.5, max=b * 0.25)", lambda h, i, b: h.clamp(min=b * 0.5, max=b * 0.25)),
    # norm_backward of orders 1 (self.sgn() * grad) and +-inf (an unused AbsBackward0, then
    # self.sgn() * ((grad / count) * mask)): LinalgVectorNormBackward0, NormBackward1 (pairwise_distance)
    ("h.norm(1)", lambda h, i, b: h.norm(1)),
    ("torch.norm(h, 1, 1) * b[0, :2]", lambda h, i, b: torch.norm(h, 1, 1) * b[0, :2]),
    ("h.norm(float('inf'), 0, keepdim=True)", lambda h, i, b: h.norm(float("inf"), 0, keepdim=True)),
    ("(h * h).norm(float('inf'))", lambda h, i, b: (h * h).norm(float("inf"))),
    ("h.norm(float('-inf'), 1)", lambda h, i, b: h.norm(float("-inf"), 1)),
    ("F.pairwise_distance(h, b, p=1)", lambda h, i, b: F.pairwise_distance(h, b, p=1)),
    # other orders: self.abs().pow_(e) in place (PowBackward0, its saved clone drawing a sequence_nr), masked_fill_
    ("h.norm(3)", lambda h, i, b: h.norm(3)),
    ("torch.norm(h, 3, 1, keepdim=True) * b", lambda h, i, b: torch.norm(h, 3, 1, keepdim=True) * b),
    ("h.norm(1.5, 0)", lambda h, i, b: h.norm(1.5, 0)),
    ("h.norm(0.5, 1)", lambda h, i, b: h.norm(0.5, 1)),
    ("F.pairwise_distance(h, b, p=3)", lambda h, i, b: F.pairwise_distance(h, b, p=3)),
    ("F.pairwise_distance(h, b)", lambda h, i, b: F.pairwise_distance(h, b)),
    ("F.triplet_margin_loss(h, b, b * 0.5)", lambda h, i, b: F.triplet_margin_loss(h, b, b * 0.5)),
    # ViewBackward0's grad.reshape(self.sizes()) records a ViewBackward0 even when the sizes are the gradient's own
    ("h.view(2, 3) * h", lambda h, i, b: h.view(2, 3) * h),
    ("h.reshape(2, 3) * h", lambda h, i, b: h.reshape(2, 3) * h),
]


@pytest.mark.parametrize("forward,twin", OPS, ids=[s[0] for s in OPS])
def test_second_order_through_the_op_against_torch(forward, twin):
    """The first gradients' recorded graphs node for node and the grad of grad, against torch 2.13."""
    _compare_selecting(forward, twin)


BIAS_NO_WEIGHT = """
name: bias-no-weight
dtype: float64
inputs:
  a: {value: [[0.5, -1, 0.25], [1, 0.5, -0.75]], requires_grad: true}
  b: {value: [[0.2, 0.4, 0.6], [0.8, 1.0, 1.2]], requires_grad: true}
model:
  inputs: [a, b]
  forward: |
    return F.batch_norm((a * b).reshape(1, 2, 3), None, None, None, b[1, :2], training=True)
loss: "sum(y ** 3)"
steps:
  - forward
  - {backward: {method: grad, inputs: [a, b], create_graph: true, as: [ga, gb]}}
  - {backward: {root: "sum(ga ** 2) + sum(gb * a)"}}
"""


def test_batch_norm_with_a_bias_and_no_weight_is_refused():
    """torch 2.13's batchnorm_double_backward raises "Expected a proper Tensor but got None" there (checked
    here): adjoint refuses the create_graph step in one line instead of answering."""
    import adjoint
    from adjoint.format.errors import ProblemError
    a = torch.tensor([[0.5, -1, 0.25], [1, 0.5, -0.75]], dtype=F64, requires_grad=True)
    b = torch.tensor([[0.2, 0.4, 0.6], [0.8, 1.0, 1.2]], dtype=F64, requires_grad=True)
    y = F.batch_norm((a * b).reshape(1, 2, 3), None, None, None, b[1, :2], training=True)
    ga, gb = torch.autograd.grad((y ** 3).sum(), [a, b], create_graph=True)
    with pytest.raises(RuntimeError, match="Expected a proper Tensor but got None"):
        ((ga ** 2).sum() + (gb * a).sum()).backward()
    with pytest.raises(ProblemError, match="create_graph through NativeBatchNormBackward0 with a bias and no weight"):
        adjoint.loads(BIAS_NO_WEIGHT).solve()


ZERO = """
name: zero-tensor
dtype: float64
inputs:
  x: {value: [0.5, -1, 0], requires_grad: true}
  w: {value: [0.25, 2, -0.5], requires_grad: true}
model:
  inputs: [x, w]
  forward: |
    return (FORWARD * w).sum()
loss: "y"
steps:
STEPS
"""
_GX = """  - forward
  - {backward: {method: grad, inputs: [x], create_graph: true, as: [gx]}}
  - {backward: {root: "sum(gx ** 2)"}}
"""


def _zero_run(forward="x.abs()", steps=_GX):
    import adjoint
    from adjoint.engine.passes import run_variant
    from adjoint.values.backends.float64 import Float64Backend
    problem = adjoint.loads(ZERO.replace("FORWARD", forward).replace("STEPS\n", steps))
    return run_variant(problem, problem.variants[0], Float64Backend(problem.dtype, None))


def _zero_torch(forward):
    x = _t([0.5, -1, 0]).requires_grad_()
    w = _t([0.25, 2, -0.5]).requires_grad_()
    gx, = torch.autograd.grad((forward(x) * w).sum(), [x], create_graph=True)
    (gx ** 2).sum().backward()
    return x, w


@pytest.mark.parametrize("forward,twin", [("x.abs()", torch.abs), ("x.sgn() * x", lambda x: x.sgn() * x)])
def test_abs_double_backward_leaves_a_zero_tensor_grad(forward, twin):
    """SgnBackward0's backward is _efficientzerotensor: alone at the leaf AccumulateGrad keeps it as .grad
    (torch 2.13: ``_is_zerotensor()``), zeros; w's gradient as torch's."""
    from adjoint.engine.zerotensor import grad_is_zero
    x, w = _zero_torch(twin)
    run = _zero_run(forward)
    assert run.error is None, run.error
    leaf = run.model.leaves["x"]
    assert x.grad._is_zerotensor() == grad_is_zero(leaf)
    assert leaf.grad.a.ravel().tolist() == x.grad.clone().tolist()
    assert run.model.leaves["w"].grad.a.ravel().tolist() == pytest.approx(w.grad.tolist(), abs=1e-12)


def test_a_backward_into_a_zero_tensor_grad_raises_pytorchs_error():
    """``variable_grad += new_grad`` into the ZeroTensor .grad: PyTorch's RuntimeError, the answer."""
    x, w = _zero_torch(torch.abs)
    with pytest.raises(RuntimeError) as exc:
        (x.abs() * w).sum().backward()
    run = _zero_run(steps=_GX + "  - forward\n  - backward\n")
    assert run.error is not None and run.error.type == "RuntimeError"
    assert run.error.message == str(exc.value)


@pytest.mark.parametrize("steps,says", [
    ("  - {step: {lr: 0.1}}\n", "a step step on a .grad that is"),
    ("  - {zero_grad: {set_to_none: false}}\n", "a zero_grad step on a .grad that is"),
])
def test_a_step_on_a_zero_tensor_grad_is_refused(steps, says):
    from adjoint.format.errors import ProblemError
    with pytest.raises(ProblemError, match=says):
        _zero_run(steps=_GX + steps)


def test_a_zero_tensor_into_another_node_is_refused():
    """Which kernels keep a ZeroTensor one varies (torch 2.13: mm and sum materialize it, mul keeps it, neg makes
    -0.0): a ZeroTensor gradient reaching a node alone is refused, not guessed."""
    from adjoint.format.errors import ProblemError
    with pytest.raises(ProblemError, match="a gradient into MulBackward0 that is PyTorch's efficient zero tensor"):
        _zero_run("(x * 2).abs()")


@pytest.mark.parametrize("steps,hooks,says", [
    ("  - forward\n  - {backward: {method: grad, inputs: [x], create_graph: true, as: [gx]}}\n"
     "  - {backward: {method: grad, inputs: [x], root: \"sum(gx ** 2)\", as: [hx]}}\n", "",
     "autograd.grad's result being PyTorch's efficient zero tensor"),
    (_GX, "hooks:\n  - {tensor: x}\n", "a hook on x handed PyTorch's efficient zero tensor"),
    (_GX + "  - forward\n", "hooks:\n  - {tensor: w}\n", "a file with hooks where a .grad is PyTorch's efficient zero"),
])
def test_a_zero_tensor_a_hook_or_autograd_grad_would_see_is_refused(steps, hooks, says):
    """torch 2.13 hands these the ZeroTensor itself (a hook's in-place write raises "ZeroTensors are immutable",
    ``autograd.grad``'s result is one): refused, located at the abs that made it."""
    import adjoint
    from adjoint.format.errors import ProblemError
    text = ZERO.replace("FORWARD", "x.abs()").replace("STEPS\n", steps) + hooks
    with pytest.raises(ProblemError, match=says) as exc:
        adjoint.loads(text).solve()
    assert exc.value.loc is not None


GROUP_NORM_THIRD = """
name: group-norm-third
dtype: float64
inputs:
  a: {value: [[-0.3, -0.15, 0.4], [0.2, 0.35, -0.5]], requires_grad: true}
  b: {value: [[0.2, 0.4, 0.6], [0.8, 1.0, 1.2]], requires_grad: true}
model:
  inputs: [a, b]
  forward: |
    h = a * b
    return FORWARD
loss: "sum(y ** 3)"
steps:
  - forward
  - {backward: {method: grad, inputs: [a, b], create_graph: true, as: [ga, gb]}}
  - {backward: {method: grad, inputs: [a, b], root: "sum(ga * ga) + sum(gb ** 3)", create_graph: true, as: [ha, hb]}}
  - {backward: {method: grad, inputs: [a, b], root: "sum(ha ** 2) + sum(hb * a)", as: [ka, kb]}}
"""

GROUP_NORM_THIRD_CASES = [
    ("F.group_norm(h.reshape(1, 2, 3), 2) * h", lambda h, b: F.group_norm(h.reshape(1, 2, 3), 2) * h),
    ("F.group_norm(h.reshape(2, 3, 1), 1, b[0], b[1]) * b.reshape(2, 3, 1)",
     lambda h, b: F.group_norm(h.reshape(2, 3, 1), 1, b[0], b[1]) * b.reshape(2, 3, 1)),
    # a transpose's backward hands the group norm a gradient in another dim order (3 * y ** 2 keeps y's layout)
    ("F.group_norm(h.reshape(1, 2, 3), 2).transpose(1, 2)", lambda h, b: F.group_norm(h.reshape(1, 2, 3), 2).transpose(1, 2)),
    ("F.group_norm(h.reshape(1, 2, 3), 2).transpose(1, 2).reshape(6)",
     lambda h, b: F.group_norm(h.reshape(1, 2, 3), 2).transpose(1, 2).reshape(6)),
    ("F.group_norm(h.reshape(1, 3, 2), 1, b[0], b[1]).transpose(1, 2).reshape(3, 2) * 2",
     lambda h, b: F.group_norm(h.reshape(1, 3, 2), 1, b[0], b[1]).transpose(1, 2).reshape(3, 2) * 2),
    ("F.group_norm(h.t().reshape(1, 3, 2), 3, b[0], b[1]).transpose(1, 2).reshape(6)",
     lambda h, b: F.group_norm(h.t().reshape(1, 3, 2), 3, b[0], b[1]).transpose(1, 2).reshape(6)),
]


@pytest.mark.parametrize("forward,twin", GROUP_NORM_THIRD_CASES, ids=[c[0] for c in GROUP_NORM_THIRD_CASES])
def test_group_norm_create_graph_through_its_mean_and_rstd_against_torch(forward, twin):
    """A create_graph backward through the graph the first one recorded reaches NativeGroupNormBackward0's mean and
    rstd outputs: torch 2.13's formula adds dvar = -0.5 * rstd_cube * drstd.view(...) and var_mean_backward(...) to
    dX (ViewBackward0s, MeanBackward1, ExpandBackward0, DivBackward1, ...): that graph node for node (names and
    sequence_nr) and the gradient of it, against torch."""
    from test_second_order import _run, _two_leaves, assert_same_graph, chain_ours, chain_torch, start_seq
    run = _run(GROUP_NORM_THIRD.replace("FORWARD", forward))
    assert run.error is None, str(run.error)
    base = start_seq()
    a, b = _two_leaves()
    ga, gb = torch.autograd.grad((twin(a * b, b) ** 3).sum(), [a, b], create_graph=True)
    ha, hb = torch.autograd.grad((ga * ga).sum() + (gb ** 3).sum(), [a, b], create_graph=True)
    assert_same_graph(chain_ours(run.made["ha"]), chain_torch(ha, base), forward + " ha")
    assert_same_graph(chain_ours(run.made["hb"]), chain_torch(hb, base), forward + " hb")
    assert run.made["ha"].value.a.ravel().tolist() == pytest.approx(ha.flatten().tolist(), abs=1e-10, rel=1e-12)
    ka, kb = torch.autograd.grad((ha ** 2).sum() + (hb * a).sum(), [a, b])
    assert run.made["ka"].value.a.ravel().tolist() == pytest.approx(ka.flatten().tolist(), abs=1e-8, rel=1e-10)
    assert run.made["kb"].value.a.ravel().tolist() == pytest.approx(kb.flatten().tolist(), abs=1e-8, rel=1e-10)


THIRD_CASES = [  # a third backward through the backward kernels the second one recorded
    ("F.interpolate(h.reshape(1, 1, 2, 3), scale_factor=2.0, mode='bilinear')",
     lambda h, b: F.interpolate(h.reshape(1, 1, 2, 3), scale_factor=2.0, mode="bilinear")),
    ("F.interpolate(h.reshape(1, 2, 3), size=5, mode='linear', align_corners=True)",
     lambda h, b: F.interpolate(h.reshape(1, 2, 3), size=5, mode="linear", align_corners=True)),
    ("F.interpolate(h.reshape(1, 1, 2, 3), size=(3, 4))", lambda h, b: F.interpolate(h.reshape(1, 1, 2, 3), size=(3, 4))),
    ("F.interpolate(h.reshape(1, 2, 3), scale_factor=2.0)", lambda h, b: F.interpolate(h.reshape(1, 2, 3), scale_factor=2.0)),
    ("F.avg_pool2d(h.reshape(1, 1, 2, 3), 2, stride=1)", lambda h, b: F.avg_pool2d(h.reshape(1, 1, 2, 3), 2, stride=1)),
    ("F.avg_pool3d(h.reshape(1, 1, 1, 2, 3), (1, 2, 2), padding=(0, 1, 1), count_include_pad=False)",
     lambda h, b: F.avg_pool3d(h.reshape(1, 1, 1, 2, 3), (1, 2, 2), padding=(0, 1, 1), count_include_pad=False)),
    ("F.adaptive_avg_pool2d(h.reshape(1, 2, 3), (2, 2))", lambda h, b: F.adaptive_avg_pool2d(h.reshape(1, 2, 3), (2, 2))),
    ("F.adaptive_avg_pool3d(h.reshape(1, 1, 2, 3), (1, 1, 2))",
     lambda h, b: F.adaptive_avg_pool3d(h.reshape(1, 1, 2, 3), (1, 1, 2))),
    ("F.max_pool2d(h.reshape(1, 1, 2, 3), 2, stride=1)", lambda h, b: F.max_pool2d(h.reshape(1, 1, 2, 3), 2, stride=1)),
    ("F.max_pool1d(h.unsqueeze(0), 2)", lambda h, b: F.max_pool1d(h.unsqueeze(0), 2)),
    ("F.max_pool3d(h.reshape(1, 1, 2, 3), 2, padding=1)", lambda h, b: F.max_pool3d(h.reshape(1, 1, 2, 3), 2, padding=1)),
    ("F.adaptive_max_pool2d(h.reshape(2, 1, 3), (1, 2))", lambda h, b: F.adaptive_max_pool2d(h.reshape(2, 1, 3), (1, 2))),
    ("F.adaptive_max_pool3d(h.reshape(1, 1, 2, 3), (1, 2, 2))",
     lambda h, b: F.adaptive_max_pool3d(h.reshape(1, 1, 2, 3), (1, 2, 2))),
    ("F.max_pool2d(h.reshape(1, 2, 3), 2, 1, 1)", lambda h, b: F.max_pool2d(h.reshape(1, 2, 3), 2, 1, 1)),
    # a gradient in another dim order (cloned by grad.contiguous(): CloneBackward0)
    ("F.max_pool2d(h.reshape(1, 1, 2, 3).transpose(2, 3), 2, stride=1)",
     lambda h, b: F.max_pool2d(h.reshape(1, 1, 2, 3).transpose(2, 3), 2, stride=1)),
    ("F.max_pool2d(h.reshape(1, 1, 2, 3).transpose(2, 3) * 2, 2, stride=1).transpose(2, 3)",
     lambda h, b: F.max_pool2d(h.reshape(1, 1, 2, 3).transpose(2, 3) * 2, 2, stride=1).transpose(2, 3)),
]


@pytest.mark.parametrize("forward,twin", THIRD_CASES, ids=[c[0] for c in THIRD_CASES])
def test_third_backward_through_upsample_and_pool_kernels_against_torch(forward, twin):
    """Upsample*BackwardBackward0's formula is the forward upsample (its node again), AvgPool{2,3}DBackwardBackward0's
    and AdaptiveAvgPool{2,3}DBackwardBackward0's the forward pool and zeros for self, the max pools' kernels
    max_pool_double_backward's view / gather / view and zeros for self: the graph of a create_graph
    backward through them node for node, and the gradient of it, against torch 2.13."""
    test_group_norm_create_graph_through_its_mean_and_rstd_against_torch(
        f"({forward}).pow(2).sum() * h", lambda h, b: twin(h, b).pow(2).sum() * h)
