"""One op (or module) solved by adjoint and run by hand in real torch, compared on everything a
hook can see.

:func:`compare` builds a problem whose root calls one child ``m`` (a custom module whose
forward is the expression under test, or a built-in module type) on the inputs, then reduces
``m``'s output with fixed weights (``(m(...) * W).sum()``, so every gradient is distinct);
the legacy backward hook on ``m`` and a saved-tensor hook around the whole forward are
registered. The torch side is the same computation written with torch itself (an
``nn.Module`` whose forward calls the torch function, or the real ``torch.nn`` module), in
float64. It returns what differs (empty: everything matches):

* the node chain behind ``m``'s output (:mod:`nodechain`: names, edges, creation order,
  AccumulateGrad leaves);
* ``m``'s output values and every input's ``.grad`` (exact values as floats, rtol 1e-10);
* the legacy hook's ``grad_input`` (the last node's gradients);
* every tensor packed and unpacked by the saved-tensor hooks, in order, with its dtype.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import torch
from torch import nn

import adjoint
from nodechain import chain, leaf_names

F64 = torch.float64


class Lambda(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def _weights(shape) -> np.ndarray:
    n = int(np.prod(shape)) if shape else 1
    vals = [(k % 5 + 1) * (-1 if k % 3 == 2 else 1) for k in range(n)]
    return np.array(vals, dtype=float).reshape(shape)


def problem_text(inputs: dict, child: str, out_shape, forward: str | None = None) -> str:
    """The YAML of a case: ``inputs`` name -> (value, requires_grad); ``child`` the mapping of ``m``."""
    names = list(inputs)
    lines = ["name: opcheck", "dtype: float64", "inputs:"]
    for n, (value, rg, *dtype) in inputs.items():   # (value, requires_grad[, "bool" | "int64"])
        kind = f", dtype: {dtype[0]}" if dtype else ""
        lines.append(f"  {n}: {{value: {json.dumps(value)}, requires_grad: {'true' if rg else 'false'}{kind}}}")
    lines.append("targets:")
    lines.append(f"  W: {json.dumps(_weights(out_shape).tolist())}")
    body = forward or f"h = m({', '.join(names)})\nreturn (h * W).sum()"
    lines += ["model:", "  children:", f"    m: {child}", f"  inputs: [{', '.join(names)}]",
              f"  forward: {json.dumps(body)}",
              "hooks:", "  - {module: m, kind: backward}", '  - {saved_tensors: {pack: "x", unpack: "x"}}']
    return "\n".join(lines) + "\n"


def expr_child(names, expr: str) -> str:
    return json.dumps({"inputs": list(names), "forward": expr})


def _arr(v):
    if v is None:
        return None
    if isinstance(v, torch.Tensor):
        return v.detach().to(torch.float64).numpy()
    v = getattr(v, "value", v)  # an int64 tensor's record carries its dtype (adjoint.engine.graph.Typed)
    f = v.floats()
    assert f is not None, f"symbolic value {v}"
    return np.array(f, dtype=float)


def _close(ours, theirs) -> bool:
    a, b = _arr(ours), _arr(theirs)
    if a is None or b is None:
        return a is None and b is None
    return a.shape == b.shape and np.allclose(a, b, rtol=1e-10, atol=1e-12, equal_nan=True)


def run_torch(inputs: dict, module: nn.Module):
    leaves = {n: torch.tensor(v, dtype=getattr(torch, dt[0]) if dt else F64, requires_grad=rg)
              for n, (v, rg, *dt) in inputs.items()}
    seen = []
    packs, unpacks = [], []

    def pack(t):
        packs.append(t.detach().clone())
        return t

    def unpack(t):
        unpacks.append(t.detach().clone())
        return t

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        module.register_backward_hook(lambda mod, gi, go: seen.append(gi))
        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            h = module(*leaves.values())
            weights = torch.tensor(_weights(tuple(h.shape)), dtype=F64)
            loss = (h * weights).sum()
        loss.backward()
    return leaves, h, seen, packs, unpacks


def compare(inputs: dict, child: str, module: nn.Module, forward: str | None = None,
            torch_run=None) -> list[str]:
    """Everything that differs between adjoint and torch for one case (see the module docstring)."""
    leaves, h, seen, packs, unpacks = (torch_run or run_torch)(inputs, module)
    text = problem_text(inputs, child, tuple(h.shape), forward)
    v = adjoint.loads(text).solve().variants[0]
    ours = v.run.forward.names
    out = []
    if chain(ours["m"], leaf_names({n: ours[n] for n in inputs})) != chain(h, leaf_names(leaves)):
        out.append(f"chain: {chain(ours['m'], leaf_names({n: ours[n] for n in inputs}))} != "
                   f"{chain(h, leaf_names(leaves))}")
    if not _close(ours["m"].value, h):
        out.append(f"value: {ours['m'].value} != {h}")
    for n, t in leaves.items():
        if not _close(v.grads.get(n), t.grad):
            out.append(f"grad {n}: {v.grads.get(n)} != {t.grad}")
    legacy = [c for c in v.hook_calls if c.kind == "backward"]
    if len(legacy) != len(seen):
        out.append(f"legacy hook calls: {len(legacy)} != {len(seen)}")
    else:
        for c, gi in zip(legacy, seen):
            ours_gi = c.args["grad_input"]
            if len(ours_gi) != len(gi) or not all(_close(a, b) for a, b in zip(ours_gi, gi)):
                out.append(f"legacy grad_input: {ours_gi} != {gi}")
    for kind, theirs in (("pack", packs), ("unpack", unpacks)):
        mine = [c for c in v.hook_calls if c.kind == kind]
        if len(mine) != len(theirs):
            out.append(f"{kind}: {len(mine)} calls != {len(theirs)}: {[c.node for c in mine]}")
            continue
        for k, (c, t) in enumerate(zip(mine, theirs)):
            if not _close(c.args["x"], t):
                out.append(f"{kind} {k} ({c.node}): {c.args['x']} != {t}")
    return out


def case(inputs: dict, expr: str, fn, forward: str | None = None) -> list[str]:
    """A custom child ``m`` whose forward is ``expr`` (of the input names), torch's twin ``fn``."""
    return compare(inputs, expr_child(list(inputs), expr), Lambda(fn), forward)
