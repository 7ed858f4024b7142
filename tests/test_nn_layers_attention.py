"""MultiheadAttention against real torch (float64): the composite's node chains (attention output
and weights), values, gradients of the inputs and every parameter, the legacy hook's arguments
and the saved tensors, for the paths F.multi_head_attention_forward takes on the CPU."""

import torch
from torch import nn

from nn_harness import Case, TorchRecorder, assert_close, assert_legacy, assert_saved, dyadic, lit, t64, torch_chain

E, HEADS = 4, 2


def _nest_zeros(shape):
    return 0.0 if not shape else [_nest_zeros(shape[1:]) for _ in range(shape[0])]


def _params(args: dict, generic: bool = False) -> dict:
    """The key projection is zero unless ``generic``: every score is then the mask alone (0
    without one), so softmax stays rational or a few exponentials and the exact answer stays
    small; its gradient (dS^T q) is not zero, so every formula is still exercised."""
    e = args["embed_dim"]
    kdim, vdim = args.get("kdim") or e, args.get("vdim") or e
    out = {}
    if kdim == e and vdim == e:
        w = dyadic((3 * e, e), 1, 8)
        out["in_proj_weight"] = w if generic else w[:e] + _nest_zeros((e, e)) + w[2 * e:]
    else:
        out["q_proj_weight"] = dyadic((e, e), 1, 8)
        out["k_proj_weight"] = dyadic((e, kdim), 2, 8) if generic else _nest_zeros((e, kdim))
        out["v_proj_weight"] = dyadic((e, vdim), 3, 8)
    if args.get("bias", True):
        b = dyadic((3 * e,), 4, 8)
        out["in_proj_bias"] = b if generic else b[:e] + [0.0] * e + b[2 * e:]
    if args.get("add_bias_kv"):
        out["bias_k"] = dyadic((1, 1, e), 5, 8) if generic else _nest_zeros((1, 1, e))
        out["bias_v"] = dyadic((1, 1, e), 6, 8)
    out["out_proj.weight"] = dyadic((e, e), 7, 8)
    if args.get("bias", True):
        out["out_proj.bias"] = dyadic((e,), 8, 8)
    return out


def _run(args: dict, call: str, inputs: dict, masks: dict, kwargs: dict, training: bool = True,
         generic: bool = False):
    """adjoint: a root that calls the attention module ``attn`` with ``call``'s arguments; the loss
    is sum(out^2) (+ sum(weights^2) when weights are returned)."""
    params = _params(args, generic)
    need = kwargs.get("need_weights", True)
    decl = "".join(f"  {n}: {{value: {lit(v)}, requires_grad: true}}\n" for n, v in inputs.items())
    decl += "".join(f"  {n}: {lit(v)}\n" for n, v in masks.items())
    p = "".join(f"\n        {k}: {lit(v)}" for k, v in params.items())
    ret = "(out * out).sum() + (w * w).sum()" if need else "(out * out).sum()"
    text = (f"name: t\ndtype: float64\ninputs:\n{decl}model:\n  inputs: [{', '.join(list(inputs) + list(masks))}]\n"
            f"  children:\n    attn:\n      type: MultiheadAttention\n      args: {lit(args)}\n"
            + ("      training: false\n" if not training else "") + f"      params:{p}\n"
            + (f"  forward: |\n    out, w = attn({call})\n" if need else f"  forward: |\n    out = attn({call})[0]\n")
            + f"    return {ret}\nloss: \"y\"\n"
            "hooks:\n  - {module: attn, kind: backward}\n  - {saved_tensors: {pack: \"x\", unpack: \"x\"}}\n")
    case = Case(text)
    m = nn.MultiheadAttention(**args).double()
    if not training:
        m.eval()
    with torch.no_grad():
        for name, value in params.items():
            m.get_parameter(name).copy_(t64(value))
    ts = {n: t64(v, True) for n, v in inputs.items()}
    env = dict(ts)
    env.update({n: t64(v) for n, v in masks.items()})
    rec = TorchRecorder(m)
    positional = [env[a.strip()] for a in call.split(",") if "=" not in a]
    with rec.saved():
        out, w = m(*positional, **{k: (env[v] if isinstance(v, str) else v) for k, v in kwargs.items()})
        total = (out * out).sum() + ((w * w).sum() if w is not None else 0)
        total.backward()
    names = dict(ts)
    names.update({f"attn.{n}": t for n, t in m.named_parameters()})
    assert case.chain("attn[0]") == torch_chain(out, names)
    assert_close(case.value("attn[0]"), out, "attn_output")
    if w is not None:
        assert case.chain("attn[1]") == torch_chain(w, names)
        assert_close(case.value("attn[1]"), w, "attn_weights")
    else:
        assert "attn[1]" not in case.json["values"]
    for name, t in names.items():
        assert_close(case.grad(name), t.grad, f"grad of {name}")
    assert_legacy(case, rec)
    assert_saved(case, rec)


X = dyadic((3, 2, E), 1)       # (L, N, E)
KV = dyadic((2, 2, E), 2)      # (S, N, E)


def test_self_attention_with_averaged_weights():
    _run({"embed_dim": E, "num_heads": HEADS}, "x, x, x", {"x": X}, {}, {})


def test_self_attention_with_generic_scores():
    """Scores that are not all equal: softmax of exponentials (one head of width 2, kept tiny)."""
    _run({"embed_dim": 2, "num_heads": 1}, "x, x, x", {"x": dyadic((2, 1, 2), 3)}, {}, {}, generic=True)


def test_self_attention_batch_first_without_weights_runs_flash_attention():
    _run({"embed_dim": E, "num_heads": HEADS, "batch_first": True}, "x, x, x, need_weights=False", {"x": X}, {},
         {"need_weights": False})


def test_key_is_value_batch_first_splits_the_packed_weight():
    _run({"embed_dim": E, "num_heads": HEADS, "batch_first": True}, "x, kv, kv", {"x": X, "kv": dyadic((3, 4, E), 2)},
         {}, {})


def test_separate_projections_per_head_weights_and_no_bias():
    _run({"embed_dim": E, "num_heads": HEADS, "kdim": 2, "vdim": 3, "bias": False},
         "q, k, v, average_attn_weights=False",
         {"q": X, "k": dyadic((2, 2, 2), 3), "v": dyadic((2, 2, 3), 4)}, {}, {"average_attn_weights": False})


def test_unbatched_with_masks_on_both_paths():
    q = dyadic((3, E), 5)
    am, kpm = [[0, -1, 0], [0, 0, 0], [0.5, 0, 0]], [0, 0, -2]   # few distinct exponentials: a small exact answer
    _run({"embed_dim": E, "num_heads": HEADS}, "q, q, q, attn_mask=am, key_padding_mask=kpm", {"q": q},
         {"am": am, "kpm": kpm}, {"attn_mask": "am", "key_padding_mask": "kpm"})
    _run({"embed_dim": E, "num_heads": HEADS}, "q, q, q, key_padding_mask=kpm, need_weights=False", {"q": q},
         {"kpm": kpm}, {"key_padding_mask": "kpm", "need_weights": False})


def test_bias_kv_and_zero_attention_in_eval_mode():
    _run({"embed_dim": E, "num_heads": HEADS, "add_bias_kv": True, "add_zero_attn": True, "dropout": 0.5},
         "x, kv, kv", {"x": X, "kv": KV}, {}, {}, training=False)


def test_causal_flash_attention():
    am = [[0, -8, -8], [0, 0, -8], [0, 0, 0]]
    _run({"embed_dim": E, "num_heads": HEADS}, "x, x, x, attn_mask=am, need_weights=False, is_causal=True",
         {"x": X}, {"am": am}, {"attn_mask": "am", "need_weights": False, "is_causal": True})


def test_attention_weights_are_a_tuple_output_with_hooks_handed_the_tuple():
    case = Case("name: t\ndtype: float64\ninit: {seed: 3}\ninputs:\n  x: {value: " + lit(dyadic((2, 1, E), 2)) +
                ", requires_grad: true}\nmodel:\n  inputs: [x]\n  children:\n    attn: {type: MultiheadAttention, "
                "args: {embed_dim: 4, num_heads: 1}}\n  forward: |\n    out, w = attn(x, x, x)\n    return out\n"
                "loss: \"sum(y)\"\nhooks:\n  - {module: attn, kind: forward}\n")
    call = case.calls("forward")[0]
    assert isinstance(call["args"]["output"], list) and len(call["args"]["output"]) == 2
    assert case.json["values"]["attn[1]"]["shape"] == [1, 2, 2]
