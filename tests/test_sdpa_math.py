"""F.scaled_dot_product_attention on PyTorch's math path (adjoint/engine/bindings/sdpa_math.py)
against real torch (float64), one solve and one torch run: the node chain of each call (MulBackward1,
TransposeBackward0, MulBackward1, the matmul's nodes, AddBackward0 for a mask added in place,
SafeSoftmaxBackward0, the second matmul), values and gradients, a row that attends to nothing
(0, not nan), and the RuntimeError for is_causal with an explicit mask
(tests/data/regressions/sdpa_math_path.yaml checks hooks and saved tensors through verify)."""

from conftest import require_torch

torch = require_torch()
import torch.nn.functional as F  # noqa: E402

import adjoint  # noqa: E402
from nn_harness import assert_close, torch_chain  # noqa: E402
from nodechain import chain, leaf_names  # noqa: E402

Q = [[[0.5, -1, 0.25, 0], [1, 0, -0.5, 0.5], [0, 0.75, 0.5, -1]]]
K = [[[1, 0.5, 0, -1], [0.25, -0.5, 1, 0], [0, 0, 0.5, 0.5], [-1, 1, 0, 0.25]]]
V = [[[1, 2, 0, -1], [0, 1, 1, 0], [0.5, 0, -0.5, 2], [1, 1, 1, 1]]]
M = [[0, 0.5, -1, 0], [0.25, 0, 0, -0.5], [0, 0, 1, 0]]
KEEP = [[True, True, False, True], [False, False, False, False], [True, False, True, True]]
Q4 = [[[[0.5, -1], [1, 0]], [[0, 0.75], [0.25, 0.5]]]]

FILE = f"""name: t
dtype: float64
inputs:
  q: {{value: {Q}, requires_grad: true}}
  k: {{value: {K}, requires_grad: true}}
  v: {{value: {V}, requires_grad: true}}
  m: {{value: {M}, requires_grad: true}}
  keep: {{value: {KEEP}, dtype: bool}}
  q4: {{value: {Q4}, requires_grad: true}}
  m4: {{value: [[0, 1], [0.5, 0]], requires_grad: true}}
model:
  inputs: [q, k, v, m, keep, q4, m4]
  forward: |
    a = F.scaled_dot_product_attention(q, k, v, attn_mask=m)
    b = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    c = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3)
    d = F.scaled_dot_product_attention(q[0], k[0], v[0], scale=-0.5)
    e = F.scaled_dot_product_attention(q4, q4, q4, attn_mask=m4)
    return a.sum() + (b * b).sum() + (c * a).sum() + d.pow(2).sum() + e.sum()
loss: "y"
"""


def test_math_path_matches_torch():
    v_ = adjoint.loads(FILE).solve().variants[0]
    js = v_.to_json()
    t = {name: torch.tensor(val, dtype=torch.float64, requires_grad=True)
         for name, val in (("q", Q), ("k", K), ("v", V), ("m", M), ("q4", Q4), ("m4", [[0, 1], [0.5, 0]]))}
    q, k, v = t["q"], t["k"], t["v"]
    a = F.scaled_dot_product_attention(q, k, v, attn_mask=t["m"])
    b = F.scaled_dot_product_attention(q, k, v, attn_mask=torch.tensor(KEEP))
    c = F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3)
    d = F.scaled_dot_product_attention(q[0], k[0], v[0], scale=-0.5)
    e = F.scaled_dot_product_attention(t["q4"], t["q4"], t["q4"], attn_mask=t["m4"])
    (a.sum() + (b * b).sum() + (c * a).sum() + d.pow(2).sum() + e.sum()).backward()
    ours = v_.run.forward.names
    mine = leaf_names(ours)
    for name, x in (("a", a), ("b", b), ("c", c), ("d", d), ("e", e)):
        assert chain(ours[name], mine) == torch_chain(x, t), name
        assert_close(js["values"][name]["value"], x.detach(), name)
    assert js["values"]["b"]["value"][0][1] == [0, 0, 0, 0]   # the row that attends to nothing
    for name, x in t.items():
        assert_close(js["grads"][name]["value"], x.grad, f"grad of {name}")


def test_causal_with_a_mask_raises_on_the_math_path():
    text = FILE.replace("is_causal=True, scale=0.3)", "attn_mask=m, is_causal=True)")
    js = adjoint.loads(text).solve().variants[0].to_json()
    with_torch = None
    try:
        F.scaled_dot_product_attention(torch.zeros(1, 3, 4, dtype=torch.float64, requires_grad=True),
                                       torch.zeros(1, 4, 4, dtype=torch.float64),
                                       torch.zeros(1, 4, 4, dtype=torch.float64),
                                       attn_mask=torch.zeros(3, 4, dtype=torch.float64), is_causal=True)
    except RuntimeError as exc:
        with_torch = str(exc)
    assert js["error"]["type"] == "RuntimeError"
    assert js["error"]["message"] == with_torch


GQ = [[[[0.5, -1], [1, 0], [0, 0.75]], [[0.25, 0], [-0.5, 0.5], [0.5, -1]],
       [[1, 1], [0, -0.25], [0.5, 0.5]], [[-1, 0], [0.25, 0.25], [0, 1]]]]
GK = [[[[1, 0.5], [0, -1], [0.25, -0.5]], [[1, 0], [0, 0.5], [0.5, 0]]]]
GV = [[[[1, 2], [0, -1], [0, 1]], [[1, 0], [0.5, 0], [-0.5, 2]]]]
GV1 = [[[[1, -1], [0.5, 0], [0, 2]]]]
GM = [[0, 0.5, -1], [0.25, 0, 0], [0, 0, 1]]
GQA_FILE = f"""name: t
dtype: float64
inputs:
  q: {{value: {GQ}, requires_grad: true}}
  k: {{value: {GK}, requires_grad: true}}
  v: {{value: {GV}, requires_grad: true}}
  v1: {{value: {GV1}, requires_grad: true}}
  m: {{value: {GM}, requires_grad: true}}
model:
  inputs: [q, k, v, v1, m]
  forward: |
    a = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    b = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    c = F.scaled_dot_product_attention(q, k, v1, enable_gqa=True)
    d = F.scaled_dot_product_attention(q[0], k[0], v[0], enable_gqa=True, scale=0.5)
    e = F.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=True)
    return (a * b).sum() + c.pow(2).sum() + (d * a[0]).sum() + e.sum()
loss: "y"
"""


def test_grouped_query_attention_matches_torch():
    """enable_gqa: the fused kernel's one node for 4-D key and value with a head count dividing the
    query's (a, b: saving key and value with their own heads); the math path's repeat_interleave
    of key and value (c: value with 1 head, key with 2; d: 3-D; e: a mask that requires grad)."""
    v_ = adjoint.loads(GQA_FILE).solve().variants[0]
    js = v_.to_json()
    t = {name: torch.tensor(val, dtype=torch.float64, requires_grad=True)
         for name, val in (("q", GQ), ("k", GK), ("v", GV), ("v1", GV1), ("m", GM))}
    q, k, v = t["q"], t["k"], t["v"]
    a = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    b = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    c = F.scaled_dot_product_attention(q, k, t["v1"], enable_gqa=True)
    d = F.scaled_dot_product_attention(q[0], k[0], v[0], enable_gqa=True, scale=0.5)
    e = F.scaled_dot_product_attention(q, k, v, attn_mask=t["m"], enable_gqa=True)
    assert a.grad_fn.name() == "ScaledDotProductFlashAttentionForCpuBackward0"
    assert tuple(a.grad_fn._saved_key.shape) == (1, 2, 3, 2)
    ((a * b).sum() + c.pow(2).sum() + (d * a[0]).sum() + e.sum()).backward()
    ours = v_.run.forward.names
    mine = leaf_names(ours)
    for name, x in (("a", a), ("b", b), ("c", c), ("d", d), ("e", e)):
        assert chain(ours[name], mine) == torch_chain(x, t), name
        assert_close(js["values"][name]["value"], x.detach(), name)
    for name, x in t.items():
        assert_close(js["grads"][name]["value"], x.grad, f"grad of {name}")


def test_grouped_heads_that_do_not_divide_raise_torchs_error():
    text = GQA_FILE.replace("v1: {value: " + str(GV1), "v1: {value: " + str([[GV1[0][0]] * 3]))
    js = adjoint.loads(text).solve().variants[0].to_json()
    try:
        F.scaled_dot_product_attention(torch.zeros(1, 4, 3, 2, dtype=torch.float64, requires_grad=True),
                                       torch.zeros(1, 2, 3, 2, dtype=torch.float64),
                                       torch.zeros(1, 3, 3, 2, dtype=torch.float64), enable_gqa=True)
    except RuntimeError as exc:
        message = str(exc)
    assert js["error"]["type"] == "RuntimeError"
    assert js["error"]["message"] == message == "Number of heads in key and value must divide the number of heads in "
