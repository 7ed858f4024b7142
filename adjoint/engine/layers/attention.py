"""``nn.MultiheadAttention``'s forward, as torch 2.13 runs it on the CPU with autograd: the
module's own ``forward`` (batch_first transposes, chosen by which of query, key and value are
the same tensor) and ``F.multi_head_attention_forward``, step by step:

* in-projection: one ``linear`` for self-attention, then ``unflatten(-1, (3, E))``,
  ``unsqueeze(0)``, ``transpose(0, -2)``, ``squeeze(-2)``, ``contiguous()`` and three selects;
  key is value: ``split([E, 2E])`` of weight and bias, two linears; otherwise ``chunk(3)`` and
  three linears (separate ``q/k/v_proj_weight`` when ``kdim``/``vdim`` differ);
* ``add_bias_kv``: ``cat`` of ``bias_k.repeat(1, N, 1)``; heads: ``view`` + ``transpose(0, 1)``;
  ``add_zero_attn``: ``cat`` of zeros;
* ``need_weights=True``: ``q * sqrt(1 / E)`` (E the head dim; an exact closed form where the
  float is not exact), ``bmm`` (``baddbmm`` with a mask), ``softmax``, ``bmm``,
  ``transpose``/``reshape``, ``linear``, ``view``; the weights ``view`` and ``mean(dim=1)``
  (``average_attn_weights``);
* ``need_weights=False``: ``scaled_dot_product_attention``, which on the CPU is one
  ``ScaledDotProductFlashAttentionForCpuBackward0`` (the math path when the mask requires grad,
  as ``F.scaled_dot_product_attention`` picks it), then ``permute``/``reshape``, ``linear``.

Masks are float tensors added to the scores, or bool tensors the module first turns into
float ones (``F._canonical_mask``: 0 where False, ``-inf`` where True; no node), as PyTorch
does. The fast path (``torch._native_multi_head_attention``: eval mode, ``batch_first``, self-attention
on one tensor, an even head count, in-projection biases, bool masks or none, nothing requiring
grad -- a frozen feature extractor's module, or one a hooked ``TransformerEncoderLayer`` calls)
makes no node and computes the same values, but hands back a contiguous output (the slow path's
is a transposed view, which decides a later ``Linear``'s nodes and whether ``.view`` works); with
a mask or ``is_causal`` it differs (a fully masked row is nan, not the slow path's zeros; it
ignores ``is_causal``): refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from adjoint.format.errors import Loc, ProblemError
from adjoint.engine.bindings import call_function
from adjoint.engine.graph import Tensor
from adjoint.engine.torch_errors import TorchError
from adjoint.engine.bindings.attention import sdpa_kernel
from adjoint.engine.ops.attention import mean_dims

_OPTIONAL = ("key_padding_mask", "need_weights", "attn_mask", "average_attn_weights", "is_causal")
_DEFAULTS = {"key_padding_mask": None, "need_weights": True, "attn_mask": None, "average_attn_weights": True,
             "is_causal": False}


class _Ops:
    """The functions the composite calls, by PyTorch's names (through the function table)."""

    def __init__(self, rt, loc: Loc):
        self.rt = rt
        self.loc = loc

    def fn(self, name: str, *args, **kwargs):
        return call_function(self.rt, name, [_number(a) for a in args], {k: _number(v) for k, v in kwargs.items()},
                             self.loc)

    def method(self, name: str, obj, *args, **kwargs):
        return call_function(self.rt, name, [_number(a) for a in args], {k: _number(v) for k, v in kwargs.items()},
                             self.loc, method_of=obj)

    def linear(self, x: Tensor, w: Tensor, b: Tensor | None) -> Tensor:
        """F.linear, as functions/core.linear runs it: a non-contiguous input of 3 or more dims
        (batch_first's transposed query) skips the view/addmm path: at::matmul (which folds into
        mm only when the weight requires grad or the input folds without a copy; a frozen
        weight and a transposed input give expand + bmm), then ``add_(bias)`` in place."""
        return self.fn("linear", x, w, b)

    def scalar(self, value) -> Tensor:
        """A Python float PyTorch wraps for an op (never saved, no edge), here its exact value."""
        t = self.rt.tensor(value)
        t.wrapped = True
        return t


def _number(v):
    """A Python int as the expression language hands numbers to functions (exact Fractions)."""
    if isinstance(v, bool) or isinstance(v, Tensor) or v is None:
        return v
    if isinstance(v, int):
        return Fraction(v)
    if isinstance(v, (tuple, list)):
        return type(v)(_number(x) for x in v)
    return v


def _bind(c) -> dict:
    names = ("query", "key", "value") + _OPTIONAL
    if len(c.args) > len(names):
        raise ProblemError(c.loc, f"MultiheadAttention takes at most {len(names)} arguments, got {len(c.args)}: "
                                  "Python raises TypeError in forward()")
    bound = dict(zip(names, c.args))
    for k, v in c.kwargs.items():
        if k not in names:
            raise ProblemError(c.loc, f"MultiheadAttention.forward() got an unexpected keyword argument '{k}' (it "
                                      f"takes {', '.join(names)}): Python raises TypeError")
        if k in bound:
            raise ProblemError(c.loc, f"MultiheadAttention.forward() got multiple values for argument '{k}'")
        bound[k] = v
    for k in ("query", "key", "value"):
        if not isinstance(bound.get(k), Tensor):
            raise ProblemError(c.loc, f"MultiheadAttention needs a tensor for '{k}'")
    for k, default in _DEFAULTS.items():
        bound.setdefault(k, default)
        v = bound[k]
        if k.endswith("mask"):
            if v is not None and not isinstance(v, Tensor):
                raise ProblemError(c.loc, f"MultiheadAttention: '{k}' must be a tensor or None")
        elif not isinstance(v, bool):
            raise ProblemError(c.loc, f"MultiheadAttention: '{k}' must be True or False")
    return bound


def _fast_path(c, a: dict) -> bool:
    """Whether MultiheadAttention.forward takes its fast path (torch._native_multi_head_attention),
    its conditions in its order: no float mask, a batched self-attention on one tensor, the
    in-projection packed with its bias, the query's dtype, eval mode, an even head count,
    batch_first, no bias_k / zero attention, and nothing requiring grad where grad is enabled."""
    query, key, value = a["query"], a["key"], a["value"]
    if any(m is not None and m.dtype in _FLOAT_MASKS for m in (a["attn_mask"], a["key_padding_mask"])):
        return False
    if len(query.shape) != 3 or query is not key or key is not value:
        return False
    w, b = c.params.get("in_proj_weight"), c.params.get("in_proj_bias")
    if w is None or b is None or query.dtype != w.dtype:
        return False
    if c.training or c.arg("num_heads") % 2 or not c.arg("batch_first") or c.params.get("bias_k") is not None \
            or c.arg("add_zero_attn"):
        return False
    if not c.rt.grad_enabled:
        return True
    tensors = (query, w, b, c.params.get("out_proj.weight"), c.params.get("out_proj.bias"))
    return not any(t is not None and t.requires_grad for t in tensors)


_FLOAT_MASKS = ("float16", "bfloat16", "float32", "float64")


def mha_forward(c):
    """nn.MultiheadAttention.forward: returns (attn_output, attn_weights or None). The slow path;
    the fast path (see the module docstring) as its values made contiguous, or refused."""
    a = _bind(c)
    if _fast_path(c, a):
        if a["attn_mask"] is not None or a["key_padding_mask"] is not None or a["is_causal"]:
            raise ProblemError(c.loc, f"'{c.module.label}' takes PyTorch's fast path here "
                                      "(torch._native_multi_head_attention: eval mode, batch_first, self-attention, "
                                      "nothing requiring grad) with a mask or is_causal, where it differs from the "
                                      "slow path (a fully masked row is nan; is_causal is ignored), which adjoint "
                                      "does not model yet")
        out, weights = _slow_path(c, a)
        return _Ops(c.rt, c.loc).method("contiguous", out), weights
    return _slow_path(c, a)


def _slow_path(c, a: dict):
    query, key, value = a["query"], a["key"], a["value"]
    from adjoint.engine.layers.transformer import canonical_masks   # the module's F._canonical_mask of both
    a["attn_mask"], a["key_padding_mask"] = canonical_masks(c.rt, query, a["attn_mask"], a["key_padding_mask"],
                                                            "attn_mask", "key_padding_mask")
    ops = _Ops(c.rt, c.loc)
    batched = len(query.shape) == 3
    if c.arg("batch_first") and batched:
        if key is value:
            if query is key:
                query = key = value = ops.fn("transpose", query, 1, 0)
            else:
                query, key = (ops.fn("transpose", x, 1, 0) for x in (query, key))
                value = key
        else:
            query, key, value = (ops.fn("transpose", x, 1, 0) for x in (query, key, value))
    return attention_forward(c, ops, query, key, value, a)


def _size(shape) -> str:
    """A torch.Size as Python prints it in F.multi_head_attention_forward's messages."""
    return f"torch.Size({list(shape)})"


def _shape_check(query, key, value, kpm, mask, heads: int, loc: Loc) -> bool:
    """F._mha_shape_check: batched (3-D) or unbatched (2-D) inputs, masks to match; its
    AssertionError before any op of its own."""
    q, k, v = len(query.shape), len(key.shape), len(value.shape)
    if q not in (2, 3):
        _assert(f"query should be unbatched 2D or batched 3D tensor but received {q}-D query tensor")
    word, kpm_rank = ("batched (3-D)", 2) if q == 3 else ("unbatched (2-D)", 1)
    if k != q or v != q:
        _assert(f"For {word} `query`, expected `key` and `value` to be {q}-D but found {k}-D and {v}-D tensors "
                "respectively")
    if kpm is not None and len(kpm.shape) != kpm_rank:
        _assert(f"For {word} `query`, expected `key_padding_mask` to be `None` or {kpm_rank}-D but found "
                f"{len(kpm.shape)}-D tensor instead")
    if mask is not None:
        if len(mask.shape) not in (2, 3):
            _assert(f"For {word} `query`, expected `attn_mask` to be `None`, 2-D or 3-D but found {len(mask.shape)}-D "
                    "tensor instead")
        want = (heads, query.shape[0], key.shape[0])
        if q == 2 and len(mask.shape) == 3 and tuple(mask.shape) != want:
            _assert(f"Expected `attn_mask` shape to be {want} but got {_size(mask.shape)}")
    return q == 3


def _assert(message: str):
    raise TorchError("AssertionError", message)


@dataclass(frozen=True)
class Projection:
    """One ``linear`` of F._in_projection(_packed), and which rows of its weight project which of
    the module's positional arguments. Where several positions are one tensor (self-attention's
    ``attn(x, x, x)``), PyTorch's graph adds their parts up on that tensor; a full backward hook on
    the module would hand each position its own part (its hook makes them different tensors, and
    the forward then projects them separately): the gradient at this linear's output, restricted
    to the position's rows, times those rows, back through the module's transpose or unsqueeze of
    the argument (:mod:`adjoint.engine.observer`)."""

    x: Tensor                 # the linear's input: the argument after the module's transpose / unsqueeze
    out: Tensor               # the linear's output
    weight: object            # the value of the weight it was handed (in_proj_weight, its rows, or
                              # q/k/v_proj_weight) then: the backward's, whatever a step does to it later
    first: int                # the runtime's node count before the linear, and after it
    after: int
    blocks: tuple             # (position in the call's arguments, first row, rows) per argument projected


def _projected(c, ops: _Ops, x, w, b, names: tuple):
    """``ops.linear(x, w, b)``, noted on the module call being run with the arguments ``names`` it
    projects, in row blocks of equal size (those passed by keyword have no position in
    ``grad_input`` and are left out)."""
    first = len(c.rt.nodes)
    out = ops.linear(x, w, b)
    call = c.rt.call_stack[-1] if c.rt.call_stack else None
    if call is not None:
        order = ("query", "key", "value")
        rows = w.shape[0] // len(names)
        blocks = tuple((order.index(n), i * rows, rows) for i, n in enumerate(names) if order.index(n) < len(c.args))
        call.projections = call.projections + (Projection(x, out, w.value, first, len(c.rt.nodes), blocks),)
    return out


def _in_projection(c, ops: _Ops, query, key, value, e: int):
    """F._in_projection_packed / F._in_projection."""
    w, b = c.params.get("in_proj_weight"), c.params.get("in_proj_bias")
    if w is not None:
        if key is value:
            if query is key:
                proj = _projected(c, ops, query, w, b, ("query", "key", "value"))
                proj = ops.fn("unflatten", proj, -1, (3, e))
                proj = ops.fn("unsqueeze", proj, 0)
                proj = ops.fn("transpose", proj, 0, -2)
                proj = ops.fn("squeeze", proj, -2)
                proj = ops.method("contiguous", proj)
                return tuple(ops.fn("select", proj, 0, i) for i in range(3))
            w_q, w_kv = ops.fn("split", w, [e, 2 * e])
            b_q, b_kv = ops.fn("split", b, [e, 2 * e]) if b is not None else (None, None)
            q_proj = _projected(c, ops, query, w_q, b_q, ("query",))
            kv = _projected(c, ops, key, w_kv, b_kv, ("key", "value"))
            kv = ops.fn("unflatten", kv, -1, (2, e))
            kv = ops.fn("unsqueeze", kv, 0)
            kv = ops.fn("transpose", kv, 0, -2)
            kv = ops.fn("squeeze", kv, -2)
            kv = ops.method("contiguous", kv)
            return q_proj, ops.fn("select", kv, 0, 0), ops.fn("select", kv, 0, 1)
        w_q, w_k, w_v = ops.fn("chunk", w, 3)
        b_q, b_k, b_v = ops.fn("chunk", b, 3) if b is not None else (None, None, None)
        return (_projected(c, ops, query, w_q, b_q, ("query",)), _projected(c, ops, key, w_k, b_k, ("key",)),
                _projected(c, ops, value, w_v, b_v, ("value",)))
    b_q, b_k, b_v = ops.fn("chunk", b, 3) if b is not None else (None, None, None)
    wq, wk, wv = c.params["q_proj_weight"], c.params["k_proj_weight"], c.params["v_proj_weight"]
    eq, ek, ev = query.shape[-1], key.shape[-1], value.shape[-1]
    for name, wt, want in (("query", wq, (eq, eq)), ("key", wk, (eq, ek)), ("value", wv, (eq, ev))):
        if tuple(wt.shape) != want:
            _assert(f"expecting {name} weights shape of {want}, but got {_size(wt.shape)}")
    return (_projected(c, ops, query, wq, b_q, ("query",)), _projected(c, ops, key, wk, b_k, ("key",)),
            _projected(c, ops, value, wv, b_v, ("value",)))


def attention_forward(c, ops: _Ops, query, key, value, a: dict):
    """F.multi_head_attention_forward on the slow path."""
    rt, loc = c.rt, c.loc
    heads, e_check = c.arg("num_heads"), c.arg("embed_dim")
    kpm, mask = a["key_padding_mask"], a["attn_mask"]
    need_weights, is_causal = a["need_weights"], a["is_causal"]
    batched = _shape_check(query, key, value, kpm, mask, heads, loc)
    if not batched:
        query, key, value = (ops.fn("unsqueeze", x, 1) for x in (query, key, value))
        if kpm is not None:
            kpm = ops.fn("unsqueeze", kpm, 0)
    tgt, bsz, e = query.shape
    src = key.shape[0]
    if is_causal and mask is None:
        raise TorchError("RuntimeError", "Need attn_mask if specifying the is_causal hint. You may use the Transformer "
                                         "module method `generate_square_subsequent_mask` to create this mask.")
    if is_causal and kpm is None and not need_weights:
        mask = None
    elif kpm is not None:
        is_causal = False
    if e != e_check:
        _assert(f"was expecting embedding dimension of {e_check}, but got {e}")
    head_dim = e // heads
    separate = c.params.get("in_proj_weight") is None
    if separate and tuple(key.shape[:2]) != tuple(value.shape[:2]):
        _assert(f"key's sequence and batch dims {_size(key.shape[:2])} do not match value's {_size(value.shape[:2])}")
    if not separate and tuple(key.shape) != tuple(value.shape):
        _assert(f"key shape {_size(key.shape)} does not match value shape {_size(value.shape)}")
    q, k, v = _in_projection(c, ops, query, key, value, e)
    if mask is not None:
        if len(mask.shape) == 2:
            if tuple(mask.shape) != (tgt, src):
                raise TorchError("RuntimeError", f"The shape of the 2D attn_mask is {_size(mask.shape)}, but should be "
                                                 f"{(tgt, src)}.")
            mask = ops.fn("unsqueeze", mask, 0)
        elif tuple(mask.shape) != (bsz * heads, tgt, src):
            raise TorchError("RuntimeError", f"The shape of the 3D attn_mask is {_size(mask.shape)}, but should be "
                                             f"{(bsz * heads, tgt, src)}.")
    bias_k, bias_v = c.params.get("bias_k"), c.params.get("bias_v")
    if bias_k is not None and bias_v is not None:
        k = ops.fn("cat", (k, rt.apply("repeat", [bias_k], (1, bsz, 1), loc)))
        v = ops.fn("cat", (v, rt.apply("repeat", [bias_v], (1, bsz, 1), loc)))
        if mask is not None:
            mask = rt.apply("constant_pad_nd", [mask], (0, 1), loc)
        if kpm is not None:
            kpm = rt.apply("constant_pad_nd", [kpm], (0, 1), loc)
    q = ops.fn("transpose", ops.method("view", q, tgt, bsz * heads, head_dim), 0, 1)
    k = ops.fn("transpose", ops.method("view", k, k.shape[0], bsz * heads, head_dim), 0, 1)
    v = ops.fn("transpose", ops.method("view", v, v.shape[0], bsz * heads, head_dim), 0, 1)
    if c.arg("add_zero_attn"):
        zeros = rt.tensor(rt.B.zeros((bsz * heads, 1, head_dim)), dtype=k.dtype)
        k = ops.fn("cat", (k, zeros), dim=1)
        zeros = rt.tensor(rt.B.zeros((bsz * heads, 1, head_dim)), dtype=v.dtype)
        v = ops.fn("cat", (v, zeros), dim=1)
        if mask is not None:
            mask = rt.apply("constant_pad_nd", [mask], (0, 1), loc)
        if kpm is not None:
            kpm = rt.apply("constant_pad_nd", [kpm], (0, 1), loc)
    src = k.shape[1]
    if kpm is not None:
        for d, want in enumerate((bsz, src)):   # F._check_key_padding_mask
            if kpm.shape[d] != want:
                _assert(f"Expected key_padded_mask.shape[{d}] to be {want}, but got {kpm.shape[d]}")
        kpm = ops.method("view", kpm, bsz, 1, 1, src)
        kpm = ops.method("expand", kpm, -1, heads, -1, -1)
        kpm = ops.fn("reshape", kpm, bsz * heads, 1, src)
        mask = kpm if mask is None else _add(rt, mask, kpm, loc)
    if need_weights:
        return _with_weights(c, ops, q, k, v, mask, tgt, bsz, src, e, heads, batched, a["average_attn_weights"])
    return _with_sdpa(c, ops, q, k, v, mask, is_causal, tgt, bsz, src, e, heads, head_dim, batched)


def _add(rt, x, y, loc):
    """attn_mask + key_padding_mask (Tensor.__add__)."""
    from adjoint.engine.bindings.core import binary
    return binary(rt, "+", x, y, loc)


def _with_weights(c, ops: _Ops, q, k, v, mask, tgt, bsz, src, e, heads, batched, average):
    rt, loc = c.rt, c.loc
    head_dim = q.shape[-1]
    scale = ops.scalar(rt.B.sqrt(rt.B.scalar(Fraction(1, head_dim))))
    q_scaled = rt.apply("mul", [q, scale], None, loc)
    kt = ops.fn("transpose", k, -2, -1)
    if mask is not None:
        weights = rt.apply("baddbmm", [mask, q_scaled, kt], None, loc)
    else:
        weights = ops.fn("bmm", q_scaled, kt)
    weights = ops.fn("softmax", weights, dim=-1)
    out = ops.fn("bmm", weights, v)
    out = ops.fn("reshape", ops.fn("transpose", out, 0, 1), tgt * bsz, e)
    out = ops.linear(out, c.params["out_proj.weight"], c.params.get("out_proj.bias"))
    out = ops.method("view", out, tgt, bsz, out.shape[1])
    weights = ops.method("view", weights, bsz, heads, tgt, src)
    if average:
        weights = rt.apply("mean_dim", [weights], mean_dims(4, 1, False, loc), loc)
    if not batched:
        out = ops.fn("squeeze", out, 1)
        weights = ops.fn("squeeze", weights, 0)
    return _batch_first_out(c, ops, out, batched), weights


def _with_sdpa(c, ops: _Ops, q, k, v, mask, is_causal, tgt, bsz, src, e, heads, head_dim, batched):
    rt, loc = c.rt, c.loc
    if mask is not None:
        if mask.shape[0] == 1 and len(mask.shape) == 3:
            mask = ops.fn("unsqueeze", mask, 0)
        else:
            mask = ops.method("view", mask, bsz, heads, -1, src)
    q = ops.method("view", q, bsz, heads, tgt, head_dim)
    k = ops.method("view", k, bsz, heads, src, head_dim)
    v = ops.method("view", v, bsz, heads, src, head_dim)
    out = sdpa_kernel(rt, q, k, v, mask, is_causal, None, loc)
    out = ops.fn("reshape", ops.fn("permute", out, (2, 0, 1, 3)), bsz * tgt, e)
    out = ops.linear(out, c.params["out_proj.weight"], c.params.get("out_proj.bias"))
    out = ops.method("view", out, tgt, bsz, out.shape[1])
    if not batched:
        out = ops.fn("squeeze", out, 1)
    return _batch_first_out(c, ops, out, batched), None


def _batch_first_out(c, ops: _Ops, out, batched: bool):
    if c.arg("batch_first") and batched:
        return ops.fn("transpose", out, 1, 0)
    return out
