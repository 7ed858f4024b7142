"""Every op of the registry says how it reads in the derivation (``Op.math``), and what it says is
right: for each op's gradient-check cases, its formula tree, evaluated on the case's point by the
notation's own meaning (tests/mathcheck.py), equals the op's forward, and the tree's reverse mode
(``vjp_tree``), evaluated with a cotangent, equals the op's VJP, slot by slot, exactly.

A named function may declare its VJP generic (``J^T lambda``) or write it with an unspelt
derivative f'; those cannot be evaluated apart from the op, and are listed (the test fails if
such an op is not of a kind where that is the document's choice: module-level layers, losses,
selections with ties, activations written by name)."""

from __future__ import annotations

import pytest

from adjoint.values.arith import equal
from adjoint.values.backends.exact import ExactBackend
from adjoint.values.mathtree import TAtom, TLam, simplify, vjp_tree
from adjoint.engine.gradcheck import _point, case_inputs
from adjoint.engine.ops import REGISTRY
from mathcheck import Generic, evaluate

#: ops whose VJP the document writes as a declared J^T lambda or with a named derivative f' (the norm: for
#: an order other than 2 or over dims)
GENERIC = {"_weight_norm_interface", "var", "var_mean", "max_all", "min_all", "amax", "amin", "max_dim", "min_dim", "norm", "leaky_relu", "leaky_relu_",
           "gelu", "silu", "elu", "elu_", "softplus", "hardtanh", "clamp", "clamp_tensor", "softmax", "log_softmax",
           "maximum", "minimum", "where", "conj", "view_as_real", "view_as_complex", "angle", "sgn", "complex", "mse_loss", "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
           "binary_cross_entropy_w", "bce_with_logits", "bce_with_logits_w", "bce_with_logits_pw",
           "bce_with_logits_w_pw", "nll_loss", "nll_loss_w", "nll_loss2d", "nll_loss2d_w", "masked_fill", "xlogy",
           # the nn layers: one function per kernel, written by name (adjoint/engine/ops/{conv,pool,norm,embedding,attention}.py)
           "convolution", "constant_pad_nd", "max_pool2d_with_indices", "avg_pool2d", "adaptive_avg_pool2d", "adaptive_max_pool2d",
           "max_pool3d_with_indices", "avg_pool3d", "adaptive_avg_pool3d", "safe_softmax", "adaptive_max_pool3d",
           "native_batch_norm", "native_layer_norm", "native_group_norm", "embedding", "sdpa_flash_cpu", "repeat",
           # adjoint/engine/ops/masking.py, adjoint/engine/ops/swish.py
           "masked_fill_tensor", "masked_select", "hardswish", "mish", "diagonal", "unfold",
           # adjoint/engine/ops/transcendental.py
           "atan2",
           # adjoint/engine/ops/margin_losses.py
           "soft_margin_loss",
           # adjoint/engine/ops/conv.py
           "im2col", "col2im",
           # adjoint/engine/ops/padding.py
           *(f"{kind}_pad{rank}d" for kind in ("reflection", "replication") for rank in (1, 2, 3)), "_prelu_kernel", "glu", "pixel_shuffle", "pixel_unshuffle",
           # adjoint/engine/ops/trilinear.py: nn.Bilinear's node, by name
           "_trilinear",
           # adjoint/engine/ops/embedding_bag.py: nn.EmbeddingBag's node, by name
           "embedding_bag",
           # adjoint/engine/ops/recurrent.py: pack_padded_sequence's rows, written by name
           "pack_padded_sequence",
           # adjoint/engine/ops/distance.py: at::norm's node (pairwise_distance), the vector norm's math
           "norm_p",
           # adjoint/engine/ops/activations.py: the activations by name
           "log_sigmoid", "celu", "celu_", "hardsigmoid", "threshold", "threshold_", "softshrink", "hardshrink",
           # adjoint/engine/ops/indexing.py
           "index_1", "index_2", "index_3", "index_select", "gather", "scatter", "scatter_value", "scatter_add",
           "index_add", "index_put_1", "index_put_2", "index_put_3", "index_put_acc_1", "index_put_acc_2", "index_put_acc_3",
           "index_put_impl_acc_1", "index_put_impl_acc_2", "index_put_impl_acc_3",
           # adjoint/engine/ops/index_write.py
           "index_fill", "index_fill_tensor", "index_copy", "masked_scatter", "scatter_reduce", "scatter_legacy", "scatter_legacy_value",
           # adjoint/engine/ops/basics.py: the one-bound clamps by name (as clamp), std with var's declared J^T lambda
           "clamp_min", "clamp_max", "std",
           # adjoint/engine/ops/second.py: the softmax, log_softmax and nll_loss backward kernels by name (as their ops)
           "softmax_backward_data", "log_softmax_backward_data", "softshrink_backward", "hardshrink_backward", "nll_loss_backward", "nll_loss_backward_w", "elu_backward", "softplus_backward", "gelu_backward",
           "hardsigmoid_backward", "log_sigmoid_backward", "diagonal_backward",
           "hardtanh_backward", "native_layer_norm_backward", "hardswish_backward",
           # adjoint/engine/ops/second_layers.py: the prelu, glu and padding backward kernels by name
           "prelu_kernel_backward", "glu_backward", "embedding_dense_backward",
           *(f"{kind}_pad{rank}d_backward" for kind in ("reflection", "replication") for rank in (1, 2, 3)),
           # adjoint/engine/ops/second_conv.py: the convolution's backward kernel by name
           "convolution_backward", "native_batch_norm_backward", "avg_pool2d_backward", "max_pool2d_with_indices_backward",
           # adjoint/engine/ops/second_losses.py: the pointwise losses' backward kernels and logit, by name
           "binary_cross_entropy_backward", "binary_cross_entropy_backward_w", "smooth_l1_loss_backward",
           "huber_loss_backward", "logit",
           "avg_pool3d_backward", "max_pool3d_with_indices_backward", "adaptive_max_pool2d_backward",
           "adaptive_max_pool3d_backward", "adaptive_avg_pool2d_backward", "adaptive_avg_pool3d_backward",
           "upsample_nearest1d_backward", "upsample_nearest2d_backward", "upsample_linear1d_backward",
           "upsample_bilinear2d_backward",
           # adjoint/engine/ops/rearrange.py: one named function each, J^T lambda declared generic
           "logsumexp", "cumsum", "flip", "roll", "tril", "triu", "trace",
           # adjoint/engine/ops/prod.py
           "prod", "prod_dim", "cumprod", "sort", "sort_stable", "topk", "kthvalue", "median_dim", "median_all",
           # adjoint/engine/ops/upsample.py: one named function per kernel, J^T lambda declared generic
           "upsample_nearest1d", "upsample_nearest2d", "upsample_linear1d", "upsample_bilinear2d",
           # adjoint/engine/ops/activations.py: nan_to_num by name (its J^T lambda: g * isfinite(x))
           "nan_to_num",
           # adjoint/engine/ops/recurrent.py: oneDNN's LSTM layer, one named function per output
           "mkldnn_lstm_layer",
           # adjoint/engine/ops/scaled_products.py: beta * self + alpha * product, by name
           "baddbmm_ab", "addbmm", "addmv", "addr",
           # adjoint/engine/ops/moments.py, adjoint/engine/ops/hypot_heaviside.py: by name
           "std_mean", "nansum", "hypot", "heaviside",
           # adjoint/engine/ops/modulo.py: by name
           "fmod_tensor", "fmod_scalar", "remainder_tensor", "remainder_scalar", "logcumsumexp", "div_mode"}


def test_every_op_declares_its_math():
    assert [name for name, op in REGISTRY.items() if op.math is None] == []


def _cases():
    return [(op, c) for op in REGISTRY.values() for c in op.checks if op.math is not None]


def _run(op, case):
    """(formula value, op forward, [(tree VJP value, op VJP value) per differentiable input]) or Generic."""
    B = ExactBackend("float64")
    ins, varied = case_inputs(case)
    diff = op.differentiable or (True,) * len(ins)
    need = [v and d for v, d in zip(varied, diff)]
    outs = op.forward(B, ins, case.params)
    outs = list(outs) if isinstance(outs, tuple) else [outs]
    atoms = {i: x for i, x in enumerate(ins) if x is not None}
    trees = [None if x is None else TAtom(i, tuple(B.shape(x))) for i, x in enumerate(ins)]
    results = []
    for k, out in enumerate(outs):
        shape = tuple(B.shape(out))
        tree = op.math.formula(trees, case.params, shape, k)
        value = evaluate(B, tree, atoms)
        g = _point(shape, 1 + k, False)
        grads = [None] * len(outs)
        grads[k] = g
        want = op.vjp(B, grads if len(outs) > 1 else [g], ins, outs, case.params, need)
        got: dict = {}
        vjp_tree(tree, TLam(-1, shape), got, {})
        pairs = []
        for i, x in enumerate(ins):
            if not need[i]:
                continue
            mine = evaluate(B, simplify(got[i]), atoms, g) if i in got else B.zeros(tuple(B.shape(x)))
            if B.shape(mine) != B.shape(x):     # an invisible reshape back, or a broadcast summed back
                mine = B.reshape(mine, x.shape) if mine.size == x.size else B.sum_to(mine, x.shape)
            pairs.append((mine, want[i] if want[i] is not None else B.zeros(tuple(B.shape(x)))))
        results.append((value, out, pairs))
    return results


@pytest.mark.parametrize("op,case", _cases(), ids=lambda x: getattr(x, "name", None) or f"{x.shapes}-{x.params}")
def test_formula_and_its_vjp_are_the_op(op, case):
    try:
        results = _run(op, case)
    except Generic as exc:
        assert op.name in GENERIC, f"{op.name}: its math cannot be checked ({exc}); declare it in GENERIC or spell it"
        return
    for value, out, pairs in results:
        assert equal(value, out), f"{op.name}: formula {value} != forward {out}"
        for i, (mine, want) in enumerate(pairs):
            assert equal(mine, want), f"{op.name} input {i}: the tree's J^T lambda {mine} != the op's VJP {want}"


def test_the_check_catches_a_wrong_formula():
    """A math entry that reads tanh as sigmoid is caught by the forward comparison."""
    from dataclasses import replace

    from adjoint.engine.ops import Check, Math
    from adjoint.engine.ops.elementwise import SIGMOID
    from adjoint.values.mathtree import applied
    bad = replace(REGISTRY["tanh"], math=Math(applied(SIGMOID)))
    value, out, _ = _run(bad, Check(((2, 2),)))[0]
    assert not equal(value, out)


def test_the_check_catches_a_wrong_vjp():
    """A derivative written with the wrong sign (tanh' = -tanh) is caught by the VJP comparison."""
    from dataclasses import replace

    from adjoint.values.mathtree import TFn, TNeg, elementwise
    from adjoint.engine.ops import Check, Math
    wrong = elementwise("tanh", "\\tanh\\left(#0\\right)", lambda n: TNeg(n, n.shape))
    bad = replace(REGISTRY["tanh"], math=Math(lambda a, p, shape, k: TFn(wrong, (a[0],), shape)))
    (value, out, pairs), = _run(bad, Check(((2, 2),)))
    assert equal(value, out) and not equal(pairs[0][0], pairs[0][1])


def test_generic_ops_are_generic():
    """Every op listed as generic has at least one case the evaluator cannot follow (the list is current)."""
    stale = []
    for name in sorted(GENERIC):
        op = REGISTRY[name]
        try:
            for case in op.checks:
                _run(op, case)
        except Generic:
            continue
        stale.append(name)
    assert stale == []
