"""The torch side of verify for everything contract v2 has, against torch code written by hand.

Each test runs a file of tests/data/verify_v2/*.yaml through ``adjoint.torchside.run_variant``
and compares the observed JSON with what the same script, written out by hand in plain
PyTorch (float64) next to it, observes. The hand-written side records hook calls with
tests/pytorch/capture.py (independent of adjoint); the node a pack call is for is labelled by
hand from PyTorch's semantics (``log.op(NODE, TARGET)`` around the op), so the torch side's
own way of finding it (sequence numbers) is checked too. Nothing here reads adjoint's
predictions: ``solve`` is not called.
"""

from __future__ import annotations

import math
import os
import sys
import warnings
from fractions import Fraction

import pytest
from conftest import require_torch

torch = require_torch()
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import adjoint  # noqa: E402
from adjoint.format.errors import ProblemError  # noqa: E402
from adjoint.torchside import run_variant  # noqa: E402
from adjoint.torchside.values import round_float32  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "pytorch"))
from capture import Log, leaf, snap, tensor  # noqa: E402

warnings.filterwarnings("ignore", category=UserWarning)
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "verify_v2")
TOL = 1e-12


def observe(stem: str, variant: str = "default", dtype: str = "float64") -> dict:
    problem = adjoint.load(os.path.join(DATA, stem + ".yaml"))
    obs = run_variant(problem, problem.variant(variant), dtype)
    obs.pop("warnings")   # compared with the prediction's by tests/test_differential.py and test_warnings_errors.py
    return obs


# ----------------------------------------------------------------------------- comparing

def differences(obs, exp, where: str = "") -> list[str]:
    """Where the observed JSON differs from the expected (numbers within 1e-12; a call's
    free-text label is not compared; VALUE dtypes must agree)."""
    if exp is None or obs is None:
        return [] if exp is None and obs is None else [f"{where}: observed {_brief(obs)}, expected {_brief(exp)}"]
    if isinstance(exp, list):
        if not isinstance(obs, list) or len(obs) != len(exp):
            return [f"{where}: observed {_brief(obs)}, expected a list of {len(exp)}"]
        out = []
        for i, (o, e) in enumerate(zip(obs, exp)):
            out += differences(o, e, f"{where}[{i}]")
        return out
    if isinstance(exp, dict):
        if not isinstance(obs, dict):
            return [f"{where}: observed {_brief(obs)}, expected a mapping"]
        skip = {"label"} if "kind" in exp else set()
        keys = (set(obs) | set(exp)) - skip
        if "shape" in exp:
            keys |= {"dtype"}
        out = []
        for k in sorted(keys):
            if k not in obs and k != "dtype":
                out.append(f"{where}.{k}: missing in the observation")
            elif k not in exp and k != "dtype":
                out.append(f"{where}.{k}: observed but not expected ({_brief(obs[k])})")
            elif k == "value" and "shape" in exp:
                out += _numbers(obs[k], exp[k], f"{where}.value")
            else:
                out += differences(obs.get(k), exp.get(k), f"{where}.{k}")
        return out
    if isinstance(exp, float) or isinstance(obs, float):
        return _numbers(obs, exp, where)
    return [] if obs == exp else [f"{where}: observed {obs!r}, expected {exp!r}"]


def _numbers(obs, exp, where: str) -> list[str]:
    o, e = list(_flat(obs)), list(_flat(exp))
    if len(o) != len(e):
        return [f"{where}: {len(o)} numbers observed, {len(e)} expected"]
    bad = [i for i, (a, b) in enumerate(zip(o, e))
           if not (a == b or (math.isnan(a) and math.isnan(b)) or abs(a - b) <= TOL * (1 + abs(b)))]
    return [f"{where}[{bad[0]}]: observed {o[bad[0]]}, expected {e[bad[0]]}"] if bad else []


def _flat(x):
    if isinstance(x, list):
        for i in x:
            yield from _flat(i)
    else:
        yield x


def _brief(x) -> str:
    if isinstance(x, dict) and "shape" in x:
        return f"a tensor of shape {x['shape']}"
    if isinstance(x, list):
        return f"a list of {len(x)}"
    return repr(x)


def assert_same(obs: dict, exp: dict) -> None:
    problems = differences(obs, exp)
    assert not problems, "\n".join(problems[:12])


def values(named: dict) -> dict:
    """VALUEs of named tensors, int64 ones marked as the contract marks them, with the forward
    value's requires_grad and grad_fn (the node's type name) as the contract's v3 answer has them."""
    out = {}
    for name, t in named.items():
        v = snap(t)
        if t.dtype == torch.int64:
            v["dtype"] = "int64"
        v["requires_grad"] = t.requires_grad
        v["grad_fn"] = type(t.grad_fn).__name__ if t.grad_fn is not None else None
        out[name] = v
    return out


def grads(named: dict) -> dict:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {name: snap(t.grad) for name, t in named.items()}


# ----------------------------------------------------------------------------- programs

def test_program_statements_and_expressions():
    log = Log()
    x = leaf([[1, -2, 3], [0.5, 2, -1]])
    v = leaf([0.25, -0.5, 1])
    a, b = x.chunk(2)
    h = x.clone()
    h.register_hook(log.tensor_hook(0, "h"))
    h[0] = v * 2
    part = h[1, 1:]             # x[i] += v is get, in-place add on the view, set
    part += v[:2]
    h[1, 1:] = part
    s = torch.softmax(h, dim=-1)
    h.mul_(3)
    with torch.no_grad():
        c = x.sum()
    m = h.T @ s
    q = x.mT.shape[0] + c
    n = torch.linalg.vector_norm(m[None, ..., -1])
    out = (a * b + n * q, torch.cat([a, b], dim=0).sum(dim=1, keepdim=True))
    loss = out[0].sum() + out[1].sum()
    named = values({"x": x, "v": v, "a": a, "b": b, "h": h, "s": s, "c": c, "m": m, "q": q, "n": n,
                    "model[0]": out[0], "model[1]": out[1], "loss": loss})
    loss.backward()
    expected = {"loss": snap(loss), "values": named, "grads": grads({"x": x, "v": v}), "hook_calls": log.calls}
    assert_same(observe("program"), expected)


def test_function_names_resolve_to_pytorch_callables():
    log = Log()
    x = leaf([[1, -2], [0.5, 3]])
    w = leaf([[0.5, 1], [-1, 2], [0.25, -0.5]])
    idx = torch.tensor([2, 0, 2])
    pack, unpack = log.saved_tensors(0)
    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        with log.op("EmbeddingBackward0", "e"):
            e = F.embedding(idx, w)                 # bare embedding: (input, weight)
        with log.op("LeakyReluBackward0", "l"):
            lr = F.leaky_relu(x, negative_slope=0.2)
        with log.op("GeluBackward0", "g"):
            g = F.gelu(x, approximate="tanh")
        with log.op("SoftmaxBackward0", "s"):
            s = torch.softmax(x, 1)
        with log.op("LinalgVectorNormBackward0", "n"):
            n = torch.linalg.vector_norm(x)         # norm: the 2-norm of every element
        out = e.sum() + lr.sum() + g.sum() + s[0, 1] + n
    log.name_nodes(e=e, l=lr, g=g, s=s, n=n)
    named = values({"x": x, "w": w, "idx": idx, "e": e, "l": lr, "g": g, "s": s, "n": n, "model": out, "y": out})
    out.backward()
    for call in log.calls:                      # the indices embedding saves are int64 (capture.py omits dtypes)
        if call["node"] == "EmbeddingBackward0":
            for v in (call["args"]["x"], call["returned"]):
                v.update(dtype="int64", value=[int(i) for i in v["value"]])
    expected = {"loss": None, "values": named, "grads": grads({"x": x, "w": w}), "hook_calls": log.calls}
    assert_same(observe("names"), expected)


# ----------------------------------------------------------------------------- modules

def _conv_bn_net():
    conv = nn.Conv2d(1, 2, kernel_size=2, padding=1, dtype=torch.float64)
    bn = nn.BatchNorm2d(2, momentum=0.5, dtype=torch.float64)
    fc = nn.Linear(8, 2, dtype=torch.float64)
    conv.weight = nn.Parameter(tensor([[[[0.5, -0.25], [0.125, 1]]], [[[-1, 0.5], [0.75, -0.5]]]]))
    conv.bias = nn.Parameter(tensor([0.25, -0.125]))
    bn.weight = nn.Parameter(tensor([1, 0.5]))
    bn.bias = nn.Parameter(tensor([0, 0.25]))
    bn.running_mean = tensor([0.5, -0.5])
    fc.weight = nn.Parameter(tensor([[0.5, -0.25, 0.125, 1, -1, 0.5, 0.75, -0.5],
                                     [0.25, 0.5, -0.75, 0.125, 1, -0.5, 0.25, 0.5]]))
    fc.bias = nn.Parameter(tensor([0.1, -0.2]))
    fc.requires_grad_(False)
    return conv, bn, fc


def test_builtin_modules_with_args_buffers_and_frozen_parameters():
    conv, bn, fc = _conv_bn_net()
    pool, flat, ce = nn.MaxPool2d(kernel_size=2), nn.Flatten(), nn.CrossEntropyLoss(label_smoothing=0.1)
    log = Log()
    bn.register_full_backward_hook(log.module_hook(0, "full_backward", "bn"))
    fc.register_backward_hook(log.module_hook(1, "backward", "fc"))
    x = leaf([[[[1, 2, 0], [0, -1, 1], [2, 1, -2]]], [[[0, 1, 1], [-1, 0, 2], [1, -1, 0]]]])
    t = torch.tensor([1, 0])
    c = conv(x)
    b = bn(c)
    p = pool(torch.relu(b))
    f = flat(p)
    out = fc(f)
    loss = ce(out, t)
    named = values({"x": x, "t": t, "conv.weight": conv.weight, "conv.bias": conv.bias, "bn.weight": bn.weight,
                    "bn.bias": bn.bias, "fc.weight": fc.weight, "fc.bias": fc.bias,
                    "bn.running_mean": bn.running_mean, "bn.running_var": bn.running_var,
                    "bn.num_batches_tracked": bn.num_batches_tracked, "conv": c, "bn": b, "pool": p, "flat": f,
                    "fc": out, "model": out, "y": out, "ce": loss, "loss": loss})
    loss.backward()
    expected = {"loss": snap(loss), "values": named, "hook_calls": log.calls,
                "grads": grads({"x": x, "conv.weight": conv.weight, "conv.bias": conv.bias,
                                "bn.weight": bn.weight, "bn.bias": bn.bias})}
    obs = observe("modules")
    obs.pop("warnings", None)
    assert_same(obs, expected)
    assert obs["values"]["bn.num_batches_tracked"] == {"shape": [], "value": 1, "dtype": "int64", "requires_grad": False,
                                                     "grad_fn": None}


def test_module_list_kwargs_defaults_tuple_outputs_and_attention():
    lin = nn.Linear(2, 2, dtype=torch.float64)
    lin.weight = nn.Parameter(tensor([[1, -0.5], [0.25, 2]]))
    lin.bias = nn.Parameter(tensor([0, 0.5]))
    layers = nn.ModuleList([lin, nn.Tanh()])
    attn = nn.MultiheadAttention(2, 1, dtype=torch.float64)
    attn.in_proj_weight = nn.Parameter(tensor([[0.5, -0.25], [0.125, 1], [-1, 0.5], [0.75, -0.5], [0.25, 0.5],
                                               [-0.75, 0.125]]))
    attn.in_proj_bias = nn.Parameter(tensor([0.1, -0.2, 0.05, 0, 0.3, -0.1]))
    attn.out_proj.weight = nn.Parameter(tensor([[1, 0.5], [-0.5, 0.25]]))
    attn.out_proj.bias = nn.Parameter(tensor([0.2, -0.3]))

    class Inner(nn.Module):
        def forward(self, u, scale=2):
            return u * scale, u.sum()

    inner = Inner()
    log = Log()
    inner.register_forward_hook(log.module_hook(0, "forward", "inner"))
    attn.register_forward_hook(log.module_hook(1, "forward", "attn"))
    lin.register_full_backward_hook(log.module_hook(2, "full_backward", "layers.0"))
    x = leaf([[[0.5, -1]], [[1, 0.25]]])
    l0 = layers[0](x)
    h = layers[1](l0)
    p, q = inner(h, scale=3)
    r, z = inner(h)
    for k, call in enumerate(c for c in log.calls if c["target"] == "inner"):   # inner runs twice: "call": K
        call["call"] = k + 1
    o, wts = attn(p, h, h)
    out = o.sum() + q + r.sum() + wts.sum()
    named = values({"x": x, "layers.0.weight": lin.weight, "layers.0.bias": lin.bias,
                    "attn.in_proj_weight": attn.in_proj_weight, "attn.in_proj_bias": attn.in_proj_bias,
                    "attn.out_proj.weight": attn.out_proj.weight, "attn.out_proj.bias": attn.out_proj.bias,
                    "layers.0": l0, "layers.1": h, "h": h, "inner[0]": p, "inner[1]": q, "p": p, "q": q,
                    "inner#2[0]": r, "inner#2[1]": z, "r": r, "z": z, "attn[0]": o, "attn[1]": wts, "o": o,
                    "wts": wts, "model": out, "y": out})
    out.backward()
    expected = {"loss": None, "values": named, "hook_calls": log.calls,
                "grads": grads({"x": x, "layers.0.weight": lin.weight, "layers.0.bias": lin.bias,
                                "attn.in_proj_weight": attn.in_proj_weight, "attn.in_proj_bias": attn.in_proj_bias,
                                "attn.out_proj.weight": attn.out_proj.weight,
                                "attn.out_proj.bias": attn.out_proj.bias})}
    assert_same(observe("containers"), expected)


# ----------------------------------------------------------------------------- dropout

@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_dropout_mask_is_forced_on_pytorchs_own_node(dtype):
    dt = getattr(torch, dtype)
    log = Log()
    keep = torch.tensor([[1, 0, 1], [1, 1, 0]], dtype=dt)

    class Drop(nn.Module):
        """What nn.Dropout(p=0.25) computes on the CPU when its draw is ``keep``:
        input * (bernoulli(1 - p) / (1 - p)), one MulBackward0 that saves the scaled mask."""

        def forward(self, h):
            with log.op("MulBackward0", "drop"):
                return h * (keep / 0.75)

    drop = Drop()
    drop.register_backward_hook(log.module_hook(1, "backward", "drop"))
    x = torch.tensor([[1, -2, 3], [0.5, 2, -1]], dtype=dt, requires_grad=True)
    h = x * 2
    with torch.autograd.graph.saved_tensors_hooks(*log.saved_tensors(0)):
        out = drop(h)
    log.name_nodes(drop=out)
    loss = (out * out).sum()
    named = values({"x": x, "drop": out, "model": out, "y": out, "loss": loss})
    loss.backward()
    expected = {"loss": snap(loss), "values": named, "grads": grads({"x": x}), "hook_calls": log.calls}
    assert_same(observe("dropout", dtype=dtype), expected)


def test_dropout_mask_of_the_wrong_shape_is_refused():
    problem = adjoint.loads("""
name: badmask
inputs: {x: {value: [1, 2, 3], requires_grad: true}}
model:
  children:
    drop: {type: Dropout, mask: [1, 0]}
  forward: "drop(x)"
loss: "sum(y)"
""", name="badmask.yaml")
    with pytest.raises(ProblemError) as err:
        run_variant(problem, problem.variants[0], "float64")
    line = err.value.line()
    assert line.startswith("badmask.yaml:6:") and "mask of shape [3]" in line and "drop" in line


# ----------------------------------------------------------------------------- hooks

def _hook_net():
    """hooks's model: h = lin(x); inner(h, scale=3).sin(), inner(u, scale=2) = u * scale."""
    lin = nn.Linear(2, 2, dtype=torch.float64)
    lin.weight = nn.Parameter(tensor([[0.5, -1], [2, 0.25]]))
    lin.bias = nn.Parameter(tensor([0.5, -0.5]))

    class Inner(nn.Module):
        def forward(self, u, scale=2):
            return u * scale

    class Root(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = lin
            self.inner = Inner()
            self.on_h = []          # what a user's forward does with h as soon as it exists

        def forward(self, x):
            self.h = self.lin(x)
            for register in self.on_h:
                register(self.h)
            return self.inner(self.h, scale=3).sin()

    model = Root()
    return model, Log(model), leaf([1, -2])


def _check_hooks(variant: str, log: Log, model, x) -> dict:
    obs = observe("hooks", variant)
    assert_same(obs["hook_calls"], log.calls)
    assert_same(obs["grads"], grads({"x": x, "lin.weight": model.lin.weight, "lin.bias": model.lin.bias}))
    return obs


def test_prepend():
    model, log, x = _hook_net()
    lin = model.lin
    lin.register_forward_hook(log.module_hook(0, "forward", "lin"))
    lin.register_forward_hook(log.module_hook(1, "forward", "lin"), prepend=True)
    lin.register_full_backward_pre_hook(log.module_hook(2, "full_backward_pre", "lin"))
    lin.register_full_backward_pre_hook(log.module_hook(3, "full_backward_pre", "lin"), prepend=True)
    lin.register_full_backward_hook(log.module_hook(4, "full_backward", "lin"))
    lin.register_full_backward_hook(log.module_hook(5, "full_backward", "lin"), prepend=True)
    model(x).sum().backward()
    _check_hooks("prepend", log, model, x)
    assert [c["hook"] for c in log.calls] == [1, 0, 3, 2, 5, 4]


def test_with_kwargs():
    model, log, x = _hook_net()
    model.inner.register_forward_pre_hook(
        log.module_hook(0, "forward_pre", "inner", fn=lambda args, kwargs: (args, kwargs), with_kwargs=True),
        with_kwargs=True)
    model.inner.register_forward_hook(log.module_hook(1, "forward", "inner", with_kwargs=True), with_kwargs=True)
    model(x).sum().backward()
    obs = _check_hooks("kwargs", log, model, x)
    assert obs["hook_calls"][1]["args"]["kwargs"] == {"scale": 3}


def test_global_hooks_fire_for_every_module_and_are_removed_after_the_run():
    from torch.nn.modules import module as nn_module

    model, log, x = _hook_net()
    mode_before = nn_module._global_is_full_backward_hook   # torch keeps it after handles go: a fresh script's
    nn_module._global_is_full_backward_hook = None
    handles = [nn_module.register_module_forward_pre_hook(log.module_hook(0, "forward_pre", glob=True)),
               nn_module.register_module_forward_hook(log.module_hook(1, "forward", glob=True)),
               nn_module.register_module_full_backward_hook(log.module_hook(2, "full_backward", glob=True)),
               nn_module.register_module_full_backward_pre_hook(log.module_hook(3, "full_backward_pre", glob=True))]
    try:
        model(x).sum().backward()
    finally:
        for handle in handles:
            handle.remove()
        nn_module._global_is_full_backward_hook = mode_before
    _check_hooks("global", log, model, x)
    assert nn_module._global_is_full_backward_hook is mode_before
    assert {c["target"] for c in log.calls} == {"model", "lin", "inner"}
    for registry in ("_global_forward_pre_hooks", "_global_forward_hooks", "_global_backward_hooks",
                     "_global_backward_pre_hooks"):
        assert not getattr(nn_module, registry), f"verify left a global hook in {registry}"


def _accumulators(t) -> dict:
    """Leaf id -> its AccumulateGrad node, reached through the graph behind ``t``."""
    out, stack, seen = {}, [t.grad_fn], set()
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if hasattr(node, "variable"):
            out[id(node.variable)] = node
        stack.extend(n for n, _ in node.next_functions)
    return out


def test_hooks_on_a_leafs_accumulate_grad_and_post_accumulate_grad():
    model, log, x = _hook_net()
    model.lin.bias.register_post_accumulate_grad_hook(log.post_acc_hook(2, "lin.bias"))
    y = model(x)
    acc = _accumulators(y)              # after the forward, through the graph that uses the leaves
    acc[id(x)].register_prehook(log.node_pre_hook(0, "x"))
    acc[id(model.lin.weight)].register_hook(log.node_post_hook(1, "lin.weight"))
    y.sum().backward()
    _check_hooks("leaf_nodes", log, model, x)
    assert [c["kind"] for c in log.calls] == ["post_accumulate_grad", "post", "pre"]


def test_multi_grad_hooks():
    model, log, x = _hook_net()
    model.on_h.append(lambda h: torch.autograd.graph.register_multi_grad_hook((h, x), log.multi_grad_hook(0, "h,x")))
    model.on_h.append(lambda h: torch.autograd.graph.register_multi_grad_hook(
        (h, model.lin.weight), log.multi_grad_hook(1, "h,lin.weight", mode="any"), mode="any"))
    model(x).sum().backward()
    _check_hooks("multi", log, model, x)
    assert [c["hook"] for c in log.calls] == [1, 0]


def test_multi_grad_goes_on_as_soon_as_its_tensors_exist():
    # lin's output is bound (as "lin") before the forward names it h: the multi-grad hook on
    # [lin] is registered first, so it runs before h's tensor hook and sees the unscaled grad
    model, log, x = _hook_net()
    model.on_h.append(lambda h: torch.autograd.graph.register_multi_grad_hook((h,), log.multi_grad_hook(1, "lin")))
    model.on_h.append(lambda h: h.register_hook(log.tensor_hook(0, "h", fn=lambda grad: grad * 2)))
    model(x).sum().backward()
    _check_hooks("multi_soon", log, model, x)
    assert [c["hook"] for c in log.calls] == [1, 0]


def test_removes_remove_and_when():
    model, log, x = _hook_net()
    handles = {2: x.register_hook(log.tensor_hook(2, "x")),
               3: model.lin.register_full_backward_hook(log.module_hook(3, "full_backward", "lin")),
               5: x.register_hook(log.tensor_hook(5, "x"))}
    model.on_h.append(lambda h: handles.__setitem__(1, h.register_hook(log.tensor_hook(1, "h"))))
    y = model(x)
    y.register_hook(log.tensor_hook(0, "y", fn=lambda grad: handles[1].remove()))   # removes: [1]
    loss = y.sum()
    loss.register_hook(log.tensor_hook(4, "loss"))       # when: after_forward
    handles[2].remove()                                  # remove: before_backward
    handles[3].remove()                                  # a module's, too: the call captured it, it still fires
    loss.backward()
    handles[5].remove()                                  # remove: after_backward
    _check_hooks("removes", log, model, x)
    assert [c["hook"] for c in log.calls] == [4, 0, 3, 5]


def test_a_hook_that_raises_in_the_backward():
    model, log, x = _hook_net()

    def refuse(grad):
        raise RuntimeError("no gradients today")
    model.lin.register_full_backward_hook(log.module_hook(1, "full_backward", "lin"))
    model.on_h.append(lambda h: h.register_hook(log.tensor_hook(0, "h", fn=refuse)))
    y = model(x)
    with pytest.raises(RuntimeError) as exc:
        y.sum().backward()
    expected = {"error": {"type": "RuntimeError", "message": str(exc.value), "during": "backward",
                          "after_call": len(log.calls) - 1}, "hook_calls": log.calls}
    assert_same(observe("hooks", "raises"), expected)


def test_always_call_runs_while_a_forward_error_propagates():
    model, log, x = _hook_net()

    def fail(args):
        raise RuntimeError("pre fails")
    model.inner.register_forward_pre_hook(log.module_hook(0, "forward_pre", "inner", fn=fail))
    model.inner.register_forward_hook(log.module_hook(1, "forward", "inner"), always_call=True)
    model.lin.register_forward_hook(log.module_hook(2, "forward", "lin"), always_call=True)
    with pytest.raises(RuntimeError) as exc:
        model(x)
    assert log.calls[2]["args"]["output"] is None
    expected = {"error": {"type": "RuntimeError", "message": str(exc.value), "during": "forward",
                          "after_call": 2}, "hook_calls": log.calls}
    assert_same(observe("hooks", "always_call"), expected)


# ----------------------------------------------------------------------------- saved tensors

def _saved_script(log, whole, scoped, pack_body=None, unpack_body=None):
    """saved's model with saved-tensor hooks ``whole`` (hook index or None) around the
    forward and the loss, and ``scoped`` around f's call."""
    x = leaf([0.5, -1])
    with _maybe(log, whole, pack_body, unpack_body):
        with log.op("SinBackward0", "h"):
            h = x.sin()
        with _maybe(log, scoped, None, None):
            with log.op("ExpBackward0", None):
                ex = h.exp()
            with log.op("MulBackward0", "f"):
                f = ex * h
        with log.op("MulBackward0", "model"):
            out = f * h
        with log.op("MulBackward0", None):
            sq = out * out
        loss = sq.sum()
    log.name_nodes(h=h, f=f, model=out)
    named = values({"x": x, "h": h, "f": f, "model": out, "y": out, "loss": loss})
    loss.backward()
    return {"loss": snap(loss), "values": named, "grads": grads({"x": x}), "hook_calls": log.calls}


class _maybe:
    def __init__(self, log, index, pack_body, unpack_body):
        self.cm = (torch.autograd.graph.saved_tensors_hooks(*log.saved_tensors(index, pack_body, unpack_body))
                   if index is not None else None)

    def __enter__(self):
        return self.cm.__enter__() if self.cm is not None else None

    def __exit__(self, *exc):
        return self.cm.__exit__(*exc) if self.cm is not None else None


@pytest.mark.parametrize("variant, whole, scoped, bodies", [
    ("whole", 0, None, (lambda x: x * 2, lambda x: x / 2)),
    ("scoped", None, 0, (None, None)),
    ("nested", 0, 1, (None, None)),
])
def test_saved_tensor_hooks_name_their_node_and_tensor(variant, whole, scoped, bodies):
    expected = _saved_script(Log(), whole, scoped, *bodies)
    assert_same(observe("saved", variant), expected)


def test_a_pack_hook_that_raises_names_the_node_it_was_building():
    log = Log()
    x = leaf([0.5, -1])

    def refuse(t):
        raise RuntimeError("pack refused")
    with pytest.raises(RuntimeError) as exc:
        with torch.autograd.graph.saved_tensors_hooks(*log.saved_tensors(0, refuse)):
            with log.op("SinBackward0", None):   # the op never finishes: no tensor, no name
                x.sin()
    expected = {"error": {"type": "RuntimeError", "message": str(exc.value), "during": "forward", "after_call": 0},
                "hook_calls": log.calls}
    assert_same(observe("saved", "pack_raises"), expected)


# ----------------------------------------------------------------------------- steps

def test_steps_passes_and_sgd():
    lin = nn.Linear(2, 2, dtype=torch.float64)
    lin.weight = nn.Parameter(tensor([[0.5, -1], [2, 0.25]]))
    lin.bias = nn.Parameter(tensor([0.5, -0.5]))
    log = Log()
    lin.register_full_backward_hook(log.module_hook(1, "full_backward", "lin"))
    lin.weight.register_post_accumulate_grad_hook(log.post_acc_hook(2, "lin.weight"))

    def forward(x, *hooks):
        h = lin(x)
        handles = [h.register_hook(log.tensor_hook(i, "h")) for i in hooks]
        return h, (h * h).sum(), handles

    def state(x, h):
        return lambda: grads({"x": x, "lin.weight": lin.weight, "lin.bias": lin.bias, "h": h})

    x = leaf([1, -2])
    h, loss, (handle3,) = forward(x, 3)       # hook 0 waits for its register step
    with log.backward_pass(state(x, h)):
        loss.backward(retain_graph=True)
    returned = {}
    with log.backward_pass(state(x, h), lambda: returned):
        gh, gx = torch.autograd.grad(loss, (h, x), retain_graph=True)
        returned.update(h=snap(gh), x=snap(gx))
    handle3.remove()                            # {remove: [3]}
    with log.backward_pass(state(x, h)):
        loss.backward(gradient=tensor(2), inputs=[h])
    for t in (x, lin.weight, lin.bias):         # zero_grad: every leaf
        t.grad = None
    x2 = leaf([0.5, 0.5])                       # a forward with a new input
    h2, loss2, _ = forward(x2)
    with log.backward_pass(state(x2, h2)):
        loss2.backward()
    with torch.no_grad():                       # {step: {lr: 0.5}}
        for p in (lin.weight, lin.bias):
            p -= 0.5 * p.grad
    h2.register_hook(log.tensor_hook(0, "h"))   # {register: [0]}: on the h that exists now, and on
    h3, loss3, _ = forward(x2, 0)               # the next forward's
    with log.backward_pass(state(x2, h3)):
        loss3.backward()
    obs = observe("steps")
    for p in log.passes:
        if not p["returned"]:
            del p["returned"]
    assert_same(obs["passes"], log.passes)
    assert_same(obs["hook_calls"], log.calls)
    assert_same(obs["grads"], grads({"x": x2, "lin.weight": lin.weight, "lin.bias": lin.bias, "h": h3}))
    assert_same(obs["values"]["lin.weight"], dict(snap(lin.weight), requires_grad=True, grad_fn=None))
    assert_same(obs["loss"], snap(loss3))
    assert "returned" not in obs


# ----------------------------------------------------------------------------- errors

def _errors_script(steps):
    lin = nn.Linear(2, 1, dtype=torch.float64)
    lin.weight = nn.Parameter(tensor([[0.5, -1]]))
    lin.bias = nn.Parameter(tensor([0.25]))
    log = Log()
    x = leaf([1, 2])
    g = x.sin()
    g.register_hook(log.tensor_hook(0, "g"))
    loss = lin(g).sum()
    try:
        steps(loss, lin)
    except RuntimeError as exc:
        return {"error": {"type": "RuntimeError", "message": str(exc), "during": "backward",
                          "after_call": len(log.calls) - 1}, "hook_calls": log.calls}
    raise AssertionError("PyTorch was expected to raise")


def test_backward_through_a_freed_graph():
    def steps(loss, lin):
        loss.backward()
        loss.backward()
    expected = _errors_script(steps)
    assert "backward through the graph a second time" in expected["error"]["message"]
    assert_same(observe("errors", "freed"), expected)


def test_sgd_on_a_saved_parameter_then_backward():
    def steps(loss, lin):
        loss.backward(retain_graph=True)
        with torch.no_grad():
            for p in lin.parameters():
                p -= 0.5 * p.grad
        loss.backward()
    expected = _errors_script(steps)
    assert "is at version 1; expected version 0" in expected["error"]["message"]
    assert_same(observe("errors", "stepped"), expected)


def test_a_saved_tensor_modified_in_place():
    log = Log()
    x = leaf([1, 2])
    h = x * 1
    g = h.sin()
    g.register_hook(log.tensor_hook(0, "g"))
    h += 1
    with pytest.raises(RuntimeError) as exc:
        (g * 2).sum().backward()
    expected = {"error": {"type": "RuntimeError", "message": str(exc.value), "during": "backward",
                          "after_call": 0}, "hook_calls": log.calls}
    assert_same(observe("inplace"), expected)


# ----------------------------------------------------------------------------- values

def test_float32_literals_are_rounded_once():
    # 1 + 2**-24 + 2**-60: float64 rounds it to 1 + 2**-24, exactly halfway between two float32
    # values, and float32 then rounds that tie to even (1.0); rounding once gives 1 + 2**-23
    q = 1 + Fraction(1, 2 ** 24) + Fraction(1, 2 ** 60)
    assert float(torch.tensor(float(q), dtype=torch.float32)) == 1.0
    assert round_float32(q) == 1 + 2 ** -23
    assert round_float32(Fraction(1, 10)) == float(torch.tensor(0.1, dtype=torch.float32))
    assert round_float32(1 + Fraction(1, 2 ** 24)) == 1.0                # a true tie: to even
    assert round_float32(Fraction(2 ** 128)) == math.inf
    assert round_float32(-Fraction(2 ** 128) + Fraction(2 ** 103) - 1) == -math.inf
    assert round_float32(Fraction(2 ** 128) - Fraction(2 ** 103) - 1) == float(torch.finfo(torch.float32).max)


def test_leaves_are_fresh_tensors():
    from adjoint.torchside.run import Session

    problem = adjoint.load(os.path.join(DATA, "modules.yaml"))
    s = Session(problem, problem.variants[0], "float64")
    defaults = {d.name for m in problem.model.walk() for d in tuple(m.params) + tuple(m.buffers) if d.default}
    assert "bn.running_var" in defaults
    for name, t in s.leaves.items():   # a default keeps its constructor's counter (reset_running_stats: 1)
        assert t._base is None and t._version == (1 if name in defaults else 0), name
    assert s.leaves["fc.weight"] is s.modules["fc"].weight and not s.leaves["fc.weight"].requires_grad
    assert type(s.modules["bn"]) is nn.BatchNorm2d and s.modules["bn"].training
    s.close()


def test_training_false_is_eval_mode_with_the_running_statistics():
    problem = adjoint.loads("""
name: bn_eval
dtype: float64
inputs: {x: {value: [[1, 2], [3, -1]], requires_grad: true}}
model:
  children:
    bn:
      type: BatchNorm1d
      args: {num_features: 2}
      params: {weight: [2, 1], bias: [0.5, 0]}
      buffers: {running_mean: [1, -1], running_var: [4, 0.25]}
      training: false
  forward: "bn(x)"
loss: "sum(y * y)"
""")
    bn = nn.BatchNorm1d(2, dtype=torch.float64).eval()
    bn.weight, bn.bias = nn.Parameter(tensor([2, 1])), nn.Parameter(tensor([0.5, 0]))
    bn.running_mean, bn.running_var = tensor([1, -1]), tensor([4, 0.25])
    x = leaf([[1, 2], [3, -1]])
    out = bn(x)
    loss = (out * out).sum()
    named = values({"x": x, "bn.weight": bn.weight, "bn.bias": bn.bias, "bn.running_mean": bn.running_mean,
                    "bn.running_var": bn.running_var, "bn.num_batches_tracked": bn.num_batches_tracked, "bn": out,
                    "model": out, "y": out, "loss": loss})
    loss.backward()
    expected = {"loss": snap(loss), "values": named, "hook_calls": [],
                "grads": grads({"x": x, "bn.weight": bn.weight, "bn.bias": bn.bias})}
    obs = run_variant(problem, problem.variants[0], "float64")
    obs.pop("warnings", None)
    assert_same(obs, expected)
    assert obs["values"]["bn.num_batches_tracked"]["value"] == 0      # eval: no statistics update


def test_int64_values_are_integers_marked_int64():
    obs = observe("int64")
    assert obs["values"]["i"] == {"shape": [2], "value": [1, 0], "dtype": "int64", "requires_grad": False,
                                  "grad_fn": None}
    assert obs["values"]["x"] == {"shape": [2], "value": [1.0, -2.0], "requires_grad": True, "grad_fn": None}
    assert all(type(v) is int for v in obs["values"]["i"]["value"])


def test_hooks_removed_and_registered_again_are_back_on_their_tensors():
    log = Log()
    x = leaf([1, -2])
    h = x * 3
    loss = (h * h).sum()
    first = [h.register_hook(log.tensor_hook(0, "h")), x.register_hook(log.tensor_hook(1, "x"))]
    for handle in first:
        handle.remove()
    h.register_hook(log.tensor_hook(0, "h"))
    x.register_hook(log.tensor_hook(1, "x"))
    with log.backward_pass(lambda: grads({"x": x})):
        loss.backward()
    obs = observe("reregister")
    for p in log.passes:
        del p["returned"]
    assert_same(obs["passes"], log.passes)
    assert [c["hook"] for c in obs["hook_calls"]] == [0, 1]


def test_saved_tensors_of_in_place_ops_and_of_ops_run_inside_copy_slices():
    log = Log()
    x = leaf([1, -2, 0.5])
    with torch.autograd.graph.saved_tensors_hooks(*log.saved_tensors(0)):
        h = x * 1
        v = h[:2]
        o = x[1:]
        with log.op("MulBackward0", None):    # runs inside h's first CopySlices: no tensor has it as grad_fn
            v.mul_(o)
        g = x * 2
        with log.op("MulBackward0", "g"):     # g's grad_fn now
            g.mul_(x)
        w = h[1:]
        with log.op("ExpBackward0", None):    # inside h's second CopySlices
            w.exp_()
        out = h + g
        loss = out.sum()
    log.name_nodes(g=g)
    named = values({"x": x, "h": h, "v": v, "g": g, "w": w, "model": out, "y": out, "loss": loss})
    for stale in ("v", "w"):   # views of h written since: verify does not read their grad_fn (it makes a new node)
        named[stale].pop("grad_fn")
    loss.backward()
    # capture.py names an unpack by torch._C._current_autograd_node(): for an op a CopySlices runs,
    # that is the CopySlices; the node whose saved tensor it is, is the op it wraps: h's second
    # CopySlices (run first) wraps w.exp_()'s ExpBackward0, the first wraps v.mul_()'s MulBackward0
    copy_slices = [c for c in log.calls if c["kind"] == "unpack" and c["node"] == "torch::autograd::CopySlices"]
    assert len(copy_slices) == 3
    for call, node in zip(copy_slices, ("ExpBackward0", "MulBackward0", "MulBackward0")):
        call["node"], call["target"] = node, None
    expected = {"loss": snap(loss), "values": named, "grads": grads({"x": x}), "hook_calls": log.calls}
    assert_same(observe("saved_inplace"), expected)
