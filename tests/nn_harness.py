"""Shared checks of the nn-layer tests (tests/test_nn_layers*.py): one problem solved by adjoint,
the same computation written by hand in float64 torch, compared piece by piece.

``Case`` runs the adjoint side (a problem with a legacy backward hook on the module under test
and saved-tensor hooks around the whole forward) and exposes what the torch side must match:
the node chain behind a tensor (tests/nodechain.py), values and gradients (rtol 1e-10), the
legacy hook's grad_input / grad_output, and the pack / unpack sequence (shape and values).
Expected values always come from torch, never from adjoint.
"""

from __future__ import annotations

import json
import warnings

import pytest
import torch

import adjoint
from nodechain import chain, leaf_names

RTOL = 1e-10
ATOL = 1e-12


def dyadic(shape, seed: int, denom: int = 4) -> list:
    """Small dyadic values (k / denom, k in -6..6, not all equal), deterministic, as nested lists."""
    n = 1
    for d in shape:
        n *= d
    flat = [(((i + 1) * (7 + 2 * seed) + 3 * seed) % 13 - 6) / denom for i in range(n)]
    return _nest(flat, tuple(shape))


def distinct(shape, seed: int, denom: int = 8) -> list:
    """Dyadic values that are pairwise distinct (max pooling without ties)."""
    n = 1
    for d in shape:
        n *= d
    step = 2 * seed + 3
    flat = [((i * step) % (2 * n + 1) - n) / denom for i in range(n)]
    return _nest(flat, tuple(shape))


def _nest(flat, shape):
    if not shape:
        return flat[0]
    k = len(flat) // shape[0]
    return [_nest(flat[i * k:(i + 1) * k], shape[1:]) for i in range(shape[0])]


def lit(values) -> str:
    """A nested list as a YAML flow literal (dyadic floats print exactly)."""
    return json.dumps(values)


def t64(values, requires_grad: bool = False) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64, requires_grad=requires_grad)


class Case:
    """The adjoint side of one problem: ``solve()`` once, then query."""

    def __init__(self, text: str):
        self.pred = adjoint.loads(text).solve()
        self.v = self.pred.variants[0]
        self.json = self.v.to_json()
        self.names = self.v.run.forward.names

    def tensor(self, name: str):
        return self.names[name]

    def chain(self, name: str):
        return chain(self.names[name], leaf_names(self.names))

    def value(self, name: str):
        return self.json["values"][name]["value"]

    def grad(self, name: str):
        g = self.json["grads"].get(name)
        return None if g is None else g["value"]

    def calls(self, kind: str) -> list:
        return [c for c in self.json["hook_calls"] if c["kind"] == kind]


def close(ours, theirs, rtol: float = RTOL, atol: float = ATOL) -> bool:
    if theirs is None or ours is None:
        return ours is None and theirs is None
    a = torch.tensor(ours, dtype=torch.float64)
    b = theirs.detach().to(torch.float64) if isinstance(theirs, torch.Tensor) else torch.tensor(theirs,
                                                                                                dtype=torch.float64)
    return a.shape == b.shape and torch.allclose(a, b, rtol=rtol, atol=atol)


def assert_close(ours, theirs, what: str = "") -> None:
    assert close(ours, theirs), f"{what}: adjoint {ours} != torch {theirs}"


def torch_chain(t: torch.Tensor, names: dict):
    return chain(t, leaf_names(names))


class TorchRecorder:
    """Torch's side of the hooks: a legacy backward hook on ``module`` and saved-tensor hooks."""

    def __init__(self, module: torch.nn.Module | None = None):
        self.legacy: list = []
        self.packs: list = []
        self.unpacks: list = []
        if module is not None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                module.register_backward_hook(self._legacy)

    def _legacy(self, module, grad_input, grad_output):
        self.legacy.append(([None if g is None else g.detach().clone() for g in grad_input],
                            [None if g is None else g.detach().clone() for g in grad_output]))

    def saved(self):
        def pack(x):
            self.packs.append(x.detach().clone())
            return x

        def unpack(x):
            self.unpacks.append(x.detach().clone())
            return x
        return torch.autograd.graph.saved_tensors_hooks(pack, unpack)


def assert_legacy(case: Case, rec: TorchRecorder) -> None:
    ours = case.calls("backward")
    assert len(ours) == len(rec.legacy)
    for call, (gi, go) in zip(ours, rec.legacy):
        gin, gout = call["args"]["grad_input"], call["args"]["grad_output"]
        assert len(gin) == len(gi) and len(gout) == len(go)
        for a, b in zip(gin, gi):
            assert_close(None if a is None else a["value"], b, "legacy grad_input")
        for a, b in zip(gout, go):
            assert_close(None if a is None else a["value"], b, "legacy grad_output")


def assert_saved(case: Case, rec: TorchRecorder) -> None:
    """The pack and unpack sequences: same count, shapes and values, in order."""
    for kind, theirs in (("pack", rec.packs), ("unpack", rec.unpacks)):
        ours = case.calls(kind)
        assert [tuple(c["args"]["x"]["shape"]) for c in ours] == [tuple(t.shape) for t in theirs], kind
        for c, t in zip(ours, theirs):
            if t.numel():
                assert_close(c["args"]["x"]["value"], t, kind)


HOOKS = """hooks:
  - {module: MODULE, kind: backward}
  - {saved_tensors: {pack: "x", unpack: "x"}}
"""


def hooks(module: str = "model") -> str:
    return HOOKS.replace("MODULE", module)


def module_problem(type_: str, args: dict, params: dict, x, loss: str = "sum(y * y)", extra: str = "",
                   x_requires_grad: bool = True, module_keys: str = "") -> str:
    """A problem whose root is one built-in module fed the input ``x``."""
    p = "".join(f"\n    {k}: {lit(v)}" for k, v in params.items())
    return (f"name: t\ndtype: float64\ninputs:\n  x: {{value: {lit(x)}, requires_grad: "
            f"{'true' if x_requires_grad else 'false'}}}\n"
            f"model:\n  type: {type_}\n  args: {json.dumps(args)}\n" + (f"  params:{p}\n" if params else "")
            + module_keys + f"loss: \"{loss}\"\n" + hooks() + extra)


def expr_problem(expr: str, x) -> str:
    """A problem of one input ``x`` (requires grad) whose forward is ``h = EXPR``, loss ``sum(y^3)``."""
    return (f"name: t\ndtype: float64\ninputs:\n  x: {{value: {lit(x)}, requires_grad: true}}\n"
            f"model:\n  forward: |\n    h = {expr}\n    return h\nloss: \"sum(y * y * y)\"\n")


def assert_expr_matches_torch(expr: str, torch_fn, x) -> None:
    """:func:`expr_problem` solved, against ``torch_fn`` run on ``x`` in float64: the node chain
    behind ``h``, its value and the gradient of ``x``."""
    case = Case(expr_problem(expr, x))
    xt = t64(x, True)
    h = torch_fn(xt)
    (h * h * h).sum().backward()
    assert case.chain("h") == torch_chain(h, {"x": xt})
    assert_close(case.value("h"), h, "h")
    assert_close(case.grad("x"), xt.grad, "grad of x")


def assert_error_matches_torch(text: str, torch_call) -> None:
    """The problem ``text`` solved against ``torch_call()`` (the same computation in torch): the
    answer's error has the type and message of the exception torch raises."""
    js = adjoint.loads(text).solve().variants[0].to_json()
    with pytest.raises(Exception) as info:
        torch_call()
    assert js["error"]["type"] == type(info.value).__name__
    assert js["error"]["message"] == str(info.value)


def torch_module_run(m: torch.nn.Module, params: dict, x, x_requires_grad: bool = True, loss=None):
    """Torch: ``m`` in float64 with the given parameter values, one forward, the loss, backward."""
    m = m.double()
    with torch.no_grad():
        for name, value in params.items():
            m.get_parameter(name).copy_(t64(value))
    xt = t64(x, x_requires_grad)
    rec = TorchRecorder(m)
    with rec.saved():
        y = m(xt)
        out = y[0] if isinstance(y, tuple) else y
        total = (out * out).sum() if loss is None else loss(y)
    total.backward()
    names = {"x": xt}
    names.update(dict(m.named_parameters()))
    return y, names, rec


def assert_root_module(case: Case, y, names: dict, rec: TorchRecorder) -> None:
    """Chain, output values, every leaf's gradient, the legacy hook, the saved tensors."""
    out = y[0] if isinstance(y, tuple) else y
    assert case.chain("y") == torch_chain(out, names)
    assert_close(case.value("y"), out, "y")
    for name, t in names.items():
        assert_close(case.grad(name), t.grad, f"grad of {name}")
    assert_legacy(case, rec)
    assert_saved(case, rec)
