"""PyTorch 2.13 behaviours that surprise people, each pinned twice: a tiny problem solved
exactly, and the same thing written by hand in real torch. docs/semantics.md lists them."""

import warnings

import numpy as np
from conftest import require_torch

torch = require_torch()
import torch.nn as nn  # noqa: E402 (after the check)

import adjoint

warnings.filterwarnings("ignore")
F64 = torch.float64


def solve(text: str, variant: str | None = None):
    pred = adjoint.loads(text).solve()
    return pred.variant(variant) if variant else pred.variants[0]


def fl(v):
    if v is None:
        return None
    return np.array(v.floats(), dtype=float)


def same(pred, value) -> bool:
    if value is None or pred is None:
        return pred is None and value is None
    return np.allclose(fl(pred), np.asarray(value.detach(), dtype=float), rtol=1e-12, atol=1e-12)


def show(v):
    if v is None:
        return None
    if isinstance(v, tuple):
        return tuple(show(x) for x in v)
    return v.detach().clone()


# 1. full backward hook: zeros for an input that does not require grad, when another does
ZEROS = """
name: zeros
inputs:
  x: {value: [1, 2], requires_grad: true}
  u: [3, -1]
model:
  children:
    m: {inputs: [a, b], forward: "a * b"}
  inputs: [x, u]
  forward: "sum(m(x, u))"
hooks:
  - {module: m, kind: full_backward}
"""


def test_full_hook_hands_zeros_for_input_without_grad():
    class M(nn.Module):
        def forward(self, a, b):
            return a * b

    m = M()
    seen = []
    m.register_full_backward_hook(lambda mod, gi, go: seen.append(show(gi)))
    x = torch.tensor([1., 2.], dtype=F64, requires_grad=True)
    torch.sum(m(x, torch.tensor([3., -1.], dtype=F64))).backward()
    (call,) = solve(ZEROS).hook_calls
    gx, gu = call.args["grad_input"]
    assert same(gx, seen[0][0]) and same(gu, seen[0][1])
    assert gu.strings() == ["0", "0"]  # a zero tensor, not None


# 2. module backward hooks removed after the forward still fire
REMOVED = """
name: removed
inputs:
  x: {value: [[0.5]], requires_grad: true}
model: {type: Linear, params: {weight: [[2]], bias: [1]}}
hooks:
  - {module: model, kind: full_backward, remove: before_backward}
  - {module: model, kind: full_backward_pre, remove: before_backward}
  - {tensor: x, remove: before_backward}
"""


def test_module_hooks_removed_before_backward_still_fire():
    lin = nn.Linear(1, 1).double()
    seen = []
    h1 = lin.register_full_backward_hook(lambda *a: seen.append("full"))
    h2 = lin.register_full_backward_pre_hook(lambda *a: seen.append("pre"))
    x = torch.tensor([[0.5]], dtype=F64, requires_grad=True)
    h3 = x.register_hook(lambda g: seen.append("x"))
    y = lin(x)
    h1.remove()
    h2.remove()
    h3.remove()
    y.backward()
    v = solve(REMOVED)
    assert [c.kind for c in v.hook_calls] == ["full_backward_pre", "full_backward"]
    assert seen == ["pre", "full"]


# 3. torch.autograd.grad: tensor hooks and retain_grad of the inputs fire, their node hooks do not
GRAD_MODE = """
name: grad_mode
inputs:
  a: {value: 2, requires_grad: true}
model:
  inputs: [a]
  forward: |
    c = a * 3
    return c * c
backward: {method: grad, inputs: [c]}
hooks:
  - {tensor: c, returns: "grad + 1"}
  - {tensor: c, kind: retain_grad}
  - {node: c, kind: pre}
  - {node: c, kind: post}
"""


def test_grad_mode_fires_tensor_hooks_not_node_hooks():
    a = torch.tensor(2., dtype=F64, requires_grad=True)
    c = a * 3
    seen = []
    c.register_hook(lambda g: (seen.append("tensor"), g + 1)[1])
    c.retain_grad()
    c.grad_fn.register_prehook(lambda go: seen.append("pre"))
    c.grad_fn.register_hook(lambda gi, go: seen.append("post"))
    (gc,) = torch.autograd.grad(c * c, [c])
    v = solve(GRAD_MODE)
    assert [h.kind for h in v.hook_calls] == ["hook"] and seen == ["tensor"]
    assert same(v.returned["c"], gc)           # 12 + 1
    assert same(v.grads["c"], c.grad)          # retain_grad fired too
    assert same(v.grads["a"], a.grad) and a.grad is None  # .grad of leaves untouched


# 4. a tensor that autograd.grad captures *and* must run through (for another input) is
#    captured before its tensor hooks
CAPTURED_NEEDED = """
name: captured_needed
inputs:
  a: {value: 1, requires_grad: true}
model:
  inputs: [a]
  forward: |
    b = a * 2
    return b * 3
backward: {method: grad, inputs: [b, a]}
hooks:
  - {tensor: b, returns: "grad * 2"}
"""


def test_captured_and_needed_is_captured_before_hooks():
    a = torch.tensor(1., dtype=F64, requires_grad=True)
    b = a * 2
    b.register_hook(lambda g: g * 2)
    gb, ga = torch.autograd.grad(b * 3, [b, a])
    v = solve(CAPTURED_NEEDED)
    assert same(v.returned["b"], gb) and v.returned["b"].strings() == "3"
    assert same(v.returned["a"], ga) and v.returned["a"].strings() == "12"


# 5. backward(inputs=[non-leaf]) runs that tensor's grad_fn (its hooks fire, with None
#    grad_inputs) and retains its grad
BACKWARD_INPUTS = """
name: backward_inputs
inputs:
  a: {value: 2, requires_grad: true}
model:
  inputs: [a]
  forward: |
    c = a * 3
    return c * c
backward: {inputs: [c]}
hooks:
  - {node: c, kind: post}
"""


def test_backward_inputs_runs_the_inputs_node():
    a = torch.tensor(2., dtype=F64, requires_grad=True)
    c = a * 3
    seen = []
    c.grad_fn.register_hook(lambda gi, go: seen.append((show(gi), show(go))))
    (c * c).backward(inputs=[c])
    (call,) = solve(BACKWARD_INPUTS).hook_calls
    assert call.args["grad_inputs"] == (None, None) and seen[0][0] == (None, None)
    assert same(call.args["grad_outputs"][0], seen[0][1][0])
    assert same(solve(BACKWARD_INPUTS).grads["c"], c.grad)


# 6. legacy hook on Identity: attached to the grad_fn of whatever produced the input
IDENTITY = """
name: identity
inputs:
  x: {value: [1, -2], requires_grad: true}
model:
  type: Sequential
  children:
    first: {inputs: [x], forward: "x * 2 + 1"}
    same: {type: Identity}
loss: "sum(y * y)"
hooks:
  - {module: same, kind: backward}
"""


def test_legacy_hook_on_identity_sees_previous_node():
    class First(nn.Module):
        def forward(self, x):
            return x * 2 + 1

    ident = nn.Identity()
    seen = []
    ident.register_backward_hook(lambda m, gi, go: seen.append((show(gi), show(go))))
    x = torch.tensor([1., -2.], dtype=F64, requires_grad=True)
    y = ident(First()(x))
    torch.sum(y * y).backward()
    (call,) = solve(IDENTITY).hook_calls
    assert call.node == "AddBackward0"
    gi, go = seen[0]
    assert len(call.args["grad_input"]) == len(gi) == 2 and gi[1] is None and call.args["grad_input"][1] is None
    assert same(call.args["grad_input"][0], gi[0]) and same(call.args["grad_output"][0], go[0])


# 7. a backward-pre hook's replacement flows into the module: its parameters' grads change,
#    and a legacy hook on the same module sees the BackwardHookFunction node
PRE_AND_LEGACY = """
name: pre_and_legacy
inputs:
  x: {value: [[1, 2]], requires_grad: true}
model: {type: Linear, params: {weight: [[1, -1]], bias: [0.5]}}
hooks:
  - {module: model, kind: full_backward_pre, returns: "(grad_output[0] * 3,)"}
  - {module: model, kind: backward}
"""


def test_pre_hook_replacement_and_legacy_on_bhf_node():
    lin = nn.Linear(2, 1).double()
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[1., -1.]]))
        lin.bias.copy_(torch.tensor([0.5]))
    seen = []
    lin.register_full_backward_pre_hook(lambda m, go: (go[0] * 3,))
    lin.register_backward_hook(lambda m, gi, go: seen.append((show(gi), show(go))))
    x = torch.tensor([[1., 2.]], dtype=F64, requires_grad=True)
    lin(x).backward()
    v = solve(PRE_AND_LEGACY)
    legacy = v.hook_calls[1]
    assert legacy.node == "BackwardHookFunctionBackward"
    assert same(legacy.args["grad_input"][0], seen[0][0][0])
    assert same(v.grads["weight"], lin.weight.grad)
    assert v.grads["weight"].strings() == [["3", "6"]]


# 8. undefined gradients: a full hook returning (None,) leaves everything upstream None,
#    and the tensor hooks upstream are called with None
NONE_UPSTREAM = """
name: none_upstream
inputs:
  x: {value: [[0.5]], requires_grad: true}
model:
  type: Sequential
  children:
    pre: {forward: "x * 2"}
    lin: {type: Linear, params: {weight: [[3]], bias: [1]}}
hooks:
  - {module: lin, kind: full_backward, returns: "(None,)"}
  - {tensor: pre}
  - {tensor: x}
"""


def test_none_from_a_full_hook_propagates_as_none():
    class Pre(nn.Module):
        def forward(self, x):
            return x * 2

    lin = nn.Linear(1, 1).double()
    lin.register_full_backward_hook(lambda m, gi, go: (None,))
    x = torch.tensor([[0.5]], dtype=F64, requires_grad=True)
    seen = []
    x.register_hook(lambda g: seen.append(g))
    h = Pre()(x)
    h.register_hook(lambda g: seen.append(g))
    lin(h).backward()
    v = solve(NONE_UPSTREAM)
    assert [c.args.get("grad", "n/a") for c in v.hook_calls[1:]] == [None, None] and seen == [None, None]
    assert v.grads["x"] is None and x.grad is None


# 9. a backward-pre hook returning None for grad_output: the module's inner nodes get no
#    gradient, and the full hook is handed *zeros* (BackwardHookFunction materializes them)
PRE_NONE = """
name: pre_none
inputs:
  x: {value: [[0.5, 1]], requires_grad: true}
model: {type: Linear, params: {weight: [[3, 1]], bias: [1]}}
hooks:
  - {module: model, kind: full_backward_pre, returns: "(None,)"}
  - {module: model, kind: full_backward}
"""


def test_pre_hook_none_gives_full_hook_zeros():
    lin = nn.Linear(2, 1).double()
    seen = []
    lin.register_full_backward_pre_hook(lambda m, go: (None,))
    lin.register_full_backward_hook(lambda m, gi, go: seen.append((show(gi), show(go))))
    x = torch.tensor([[0.5, 1.]], dtype=F64, requires_grad=True)
    lin(x).backward()
    v = solve(PRE_NONE)
    full = v.hook_calls[1]
    assert same(full.args["grad_input"][0], seen[0][0][0]) and full.args["grad_input"][0].strings() == [["0", "0"]]
    assert full.args["grad_output"] == (None,) and seen[0][1] == (None,)
    assert v.grads["weight"] is None and lin.weight.grad is None


# 10. `n / x` is two nodes, and a legacy hook on a module ending in `x + 2` sees None for 2
TWO_NODES = """
name: two_nodes
inputs:
  x: {value: [2, 4], requires_grad: true}
model:
  children:
    r: {forward: "3 / x"}
    s: {forward: "x + 2"}
  forward: "sum(s(r(x)))"
hooks:
  - {module: r, kind: backward}
  - {module: s, kind: backward}
"""


def test_rdiv_is_reciprocal_then_mul_and_scalar_edges_are_none():
    class R(nn.Module):
        def forward(self, x):
            return 3 / x

    class S(nn.Module):
        def forward(self, x):
            return x + 2

    r, s = R(), S()
    seen = []
    r.register_backward_hook(lambda m, gi, go: seen.append(show(gi)))
    s.register_backward_hook(lambda m, gi, go: seen.append(show(gi)))
    x = torch.tensor([2., 4.], dtype=F64, requires_grad=True)
    h = r(x)
    assert h.grad_fn.name() == "MulBackward0" and h.grad_fn.next_functions[0][0].name() == "ReciprocalBackward0"
    torch.sum(s(h)).backward()
    v = solve(TWO_NODES)
    assert [c.node for c in v.hook_calls] == ["AddBackward0", "MulBackward0"]
    for call, gi in zip(v.hook_calls, seen):
        assert len(call.args["grad_input"]) == len(gi) == 2
        assert call.args["grad_input"][1] is None and gi[1] is None
        assert same(call.args["grad_input"][0], gi[0])
    assert same(v.grads["x"], x.grad)


# 11. modules called twice: one BackwardHook per call; the later call's hook fires first
TWICE = """
name: twice
inputs:
  x: {value: [[1, -1]], requires_grad: true}
model:
  children:
    f: {type: Linear, params: {weight: [[1, 2], [0, 1]], bias: false}}
  forward: "sum(f(f(x)))"
hooks:
  - {module: f, kind: full_backward}
  - {module: f, kind: forward}
"""


def test_module_called_twice():
    f = nn.Linear(2, 2, bias=False).double()
    with torch.no_grad():
        f.weight.copy_(torch.tensor([[1., 2.], [0., 1.]]))
    seen = []
    f.register_full_backward_hook(lambda m, gi, go: seen.append((show(gi), show(go))))
    x = torch.tensor([[1., -1.]], dtype=F64, requires_grad=True)
    torch.sum(f(f(x))).backward()
    v = solve(TWICE)
    back = [c for c in v.hook_calls if c.phase == "backward"]
    assert [c.k for c in back] == [2, 1]
    assert [c.k for c in v.hook_calls if c.phase == "forward"] == [1, 2]
    for c, (gi, go) in zip(back, seen):
        assert same(c.args["grad_input"][0], gi[0]) and same(c.args["grad_output"][0], go[0])
    doc = adjoint.loads(TWICE).solve().to_json()["variants"]["default"]
    assert [h["call"] for h in doc["hook_calls"]] == [1, 2, 2, 1]
    assert set(doc["adjoints"]) == {"model", "f", "f#2"}


# 12. signed zeros: x * 0 with x < 0 is -0.0 in PyTorch, and the infinite derivative of sqrt
#     (and of x ** 0.5, which PyTorch runs as sqrt) at -0.0 is -inf; kernels decide the sign
def test_signed_zero_signs_the_infinite_derivative():
    paths = {"sqrt(relu(h))": lambda h: torch.sqrt(torch.relu(h)), "h ** 0.5": lambda h: h ** 0.5,
             "h ** 0.25": lambda h: h ** 0.25, "sqrt(0 - h)": lambda h: torch.sqrt(0 - h),
             "sqrt(sum(h) + h * 0)": lambda h: torch.sqrt(torch.sum(h) + h * 0)}
    signs = {}
    for expr, fn in paths.items():
        x = torch.tensor([-0.5, 0.5, -2.], dtype=F64, requires_grad=True)
        h = x * 0
        seen = []
        h.register_hook(lambda g: seen.append(g.clone()))
        torch.sum(fn(h)).backward()
        text = ("name: z\ninputs:\n  x: {value: [-0.5, 0.5, -2], requires_grad: true}\nmodel:\n  inputs: [x]\n"
                f"  forward: |\n    h = x * 0\n    return {expr}\nloss: \"sum(y)\"\nhooks:\n  - {{tensor: h}}\n")
        (call,) = solve(text).hook_calls
        assert np.array_equal(fl(call.args["grad"]), seen[0].numpy(), equal_nan=True), expr
        signs[expr] = call.args["grad"].strings()
    assert signs["h ** 0.5"] == ["-inf", "inf", "-inf"] and signs["h ** 0.25"] == ["inf", "inf", "inf"]
    assert signs["sqrt(relu(h))"] == ["0", "0", "0"]  # relu's backward selects: the infinity stops there


def test_signed_zero_per_op():
    """Each op's -0.0 rule, against torch (the sign bit of each exact zero)."""
    from adjoint.values.signed_zero import sign_bits

    x = torch.tensor([-0.5, 0.5], dtype=F64)
    cases = {"x * 0": x * 0, "-(x * 0)": -(x * 0), "relu(x * 0)": torch.relu(x * 0), "tanh(x * 0)": torch.tanh(x * 0),
             "abs(x * 0)": torch.abs(x * 0), "x * 0 - 0": x * 0 - 0, "x * 0 + 0": x * 0 + 0, "0 - x * 0": 0 - x * 0,
             "(x * 0) ** 3": (x * 0) ** 3, "(x * 0) ** 2": (x * 0) ** 2, "(x * 0) / 2": (x * 0) / 2,
             "t(x * 0)": torch.t(x * 0), "x * 0 * (x * 0)": (x * 0) * (x * 0)}
    for expr, want in cases.items():
        text = f"name: z\ninputs:\n  x: {{value: [-0.5, 0.5], requires_grad: true}}\nmodel:\n  inputs: [x]\n" \
               f"  forward: |\n    h = {expr}\n    return sum(h * 0 + x)\n"
        pred = adjoint.loads(text).solve().variants[0]
        got = sign_bits(pred.values["h"]).tolist()
        assert got == torch.signbit(want).tolist(), expr


# 14. a finite value beyond the dtype's range: PyTorch rounds it to inf and carries on (here
# to a nan gradient); solve refuses it, pointing at the op, rather than predict numbers
# PyTorch does not make
def test_overflow_is_inf_in_torch_and_refused_by_solve():
    import pytest

    from adjoint.format.errors import ProblemError

    x = torch.tensor([89.0, 1.0], requires_grad=True)   # float32: e**89 ~ 4.5e38 > 3.4e38
    h = torch.exp(x)
    loss = torch.sum(h / h)
    loss.backward()
    assert torch.isinf(h[0]) and torch.isnan(x.grad[0]) and x.grad[1] == 0
    text = ("name: ov\ninputs:\n  x: {value: [89, 1], requires_grad: true}\nmodel:\n  inputs: [x]\n"
            "  forward: |\n    h = exp(x)\n    return h / h\nloss: \"sum(y)\"\n")
    with pytest.raises(ProblemError, match=r"ExpBackward0\) gives 4.49e\+38 at element \[0\], beyond float32's range"):
        solve(text)
    # e**88 ~ 1.65e38 fits float32; in float64 e**89 fits too: both solve, and match torch
    for value, dtype in ((88, "float32"), (89, "float64")):
        pred = solve(text.replace("[89, 1]", f"[{value}, 1]") + f"dtype: {dtype}\n")
        assert pred.grads["x"].strings() == ["0", "0"]
    # and a literal beyond the range is inf in torch.tensor already
    assert torch.isinf(torch.tensor([1e39], dtype=torch.float32))[0]


# 15. an in-place write into a view of a view PyTorch forbids writing (an output of
# BackwardHookFunction, which full backward hooks wrap, or of a multi-output op): the
# message names the newest view's own node, "Output 0 of Select", not the first view's
# (found by the differential sweep: tests/data/regressions/view_of_wrapped_output_inplace.yaml)
def test_inplace_on_a_view_of_a_forbidden_view_names_the_newest_view():
    def wrapped(write):
        m = nn.Identity()
        m.register_full_backward_hook(lambda *a: None)
        h = m(torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=F64, requires_grad=True) * 1)
        try:
            write(h)
        except RuntimeError as exc:
            return str(exc)

    def chunked(write):
        h = (torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=F64, requires_grad=True) * 1).chunk(2)[1]
        try:
            write(h)
        except RuntimeError as exc:
            return str(exc)

    cases = {"h[0, 0] = 5": (wrapped, lambda h: h.__setitem__((0, 0), 5.0)),
             "h[0:1].mul_(2)": (wrapped, lambda h: h[0:1].mul_(2)),
             "h.t().mul_(2)": (wrapped, lambda h: h.t().mul_(2)),
             "h.view(-1).relu_()": (wrapped, lambda h: h.view(-1).relu_()),
             "h.mul_(2)": (wrapped, lambda h: h.mul_(2)),
             "k = h.chunk(2)[1]\n    k[0].mul_(2)": (chunked, lambda h: h[0].mul_(2)),
             "k = h.chunk(2)[1]\n    k.mul_(2)": (chunked, lambda h: h.mul_(2))}
    for stmt, (make, write) in cases.items():
        want = make(write)
        assert want and "is a view and is being modified inplace" in want, stmt
        head = "    h = c0(x * 1)\n" if make is wrapped else "    h = x * 1\n"
        text = ("name: v\ndtype: float64\ninputs:\n  x: {value: [[1, 2], [3, 4]], requires_grad: true}\n"
                "model:\n  children:\n    c0: {type: Identity}\n  forward: |\n" + head + f"    {stmt}\n"
                "    return h\nloss: \"sum(y)\"\nhooks:\n  - {module: c0, kind: full_backward}\n")
        pred = solve(text)
        assert pred.error is not None and pred.error.message == want, (stmt, pred.error, want)


# 16. which in-place writes into views PyTorch refuses, and its words (CreationMeta): a view
# made under no_grad (or a piece of a multi-output op of a tensor that does not require
# grad: no node) "was created in no_grad mode"; a view of such a view names its own node;
# a write through the base is "indirect" and raises when the view is next used. Each forward
# below runs as written in real torch (exec) and in adjoint. (Found by the sweep: seed 1,
# problem 177 and others. A view made under no_grad of a tensor that requires grad is not
# modelled yet: tests/data/regressions/no_grad_view_requires_grad.yaml.)
VIEW_WRITES = {
    "no_grad view, then written": "with no_grad():\n    v = a[:2]\nv.mul_(2)\nr = v * 2",
    "chunk of a constant, written with grad": "k = t.chunk(2)[0]\nk.mul_(a[:2])\nr = k * a[2:]",
    "chunk of a constant, written with a number": "k = t.chunk(2)[0]\nk.mul_(2)\nr = k * a[2:]",
    "chunk, base written, piece used": "k = a.chunk(2)[1]\na.mul_(2)\nr = k * 2",
    "chunk under no_grad, written": "with no_grad():\n    k = a.chunk(2)[1]\nk.mul_(2)\nr = k * 2",
}


def test_view_writes_pytorch_refuses():
    for label, body in VIEW_WRITES.items():
        x = torch.tensor([1.0, -2.0, 3.0, 0.5], dtype=F64, requires_grad=True)
        env = {"a": x * 1, "t": torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=F64), "no_grad": torch.no_grad}
        try:
            exec(body, env)
            want = None
        except RuntimeError as exc:
            want = str(exc)
        forward = "a = x * 1\n" + body + "\nreturn r"
        text = ("name: v\ndtype: float64\ninputs:\n  x: {value: [1, -2, 3, 0.5], requires_grad: true}\n"
                "targets:\n  t: [1, 2, 3, 4]\nmodel:\n  forward: |\n"
                + "".join(f"    {line}\n" for line in forward.splitlines()) + "loss: \"sum(y)\"\n")
        pred = solve(text)
        got = pred.error.message if pred.error is not None else None
        assert got == want, (label, got, want)


# 17. full backward hooks wrap a module's inputs in one BackwardHookFunction: when more than
# one of them requires grad, its outputs are the views of a multi-output function, and an
# in-place write into one says so ("This view is the output of a function that returns
# multiple views"); with one, it is a custom Function's view (found by the sweep: seed 9)
def test_inplace_on_a_wrapped_input_of_a_two_input_module():
    class M(nn.Module):
        def forward(self, a, b):
            a.mul_(2)
            return a * b

    def torch_message(second_rg: bool):
        m = M()
        m.register_full_backward_hook(lambda *a: None)
        x = torch.tensor([1.0, 2.0], dtype=F64, requires_grad=True)
        u = torch.tensor([3.0, 4.0], dtype=F64, requires_grad=second_rg)
        try:
            m(x * 1, u * 1)
        except RuntimeError as exc:
            return str(exc)

    for second_rg in (True, False):
        text = ("name: w\ndtype: float64\ninputs:\n  x: {value: [1, 2], requires_grad: true}\n"
                f"  u: {{value: [3, 4], requires_grad: {str(second_rg).lower()}}}\nmodel:\n  inputs: [x, u]\n"
                "  children:\n    m:\n      inputs: [a, b]\n      forward: |\n        a.mul_(2)\n        return a * b\n"
                "  forward: \"m(x * 1, u * 1)\"\nloss: \"sum(y)\"\nhooks:\n  - {module: m, kind: full_backward}\n")
        pred = solve(text)
        assert pred.error is not None and pred.error.message == torch_message(second_rg), second_rg


# 18. an in-place write whose input overlaps the written tensor in memory, partly (not the
# same tensor): TensorIterator refuses it after autograd recorded the op, as it refuses
# writing into an expanded view (found by the sweep: seed 3, problem 173)
OVERLAPS = {
    "sub_ of an element of itself": "v = a[0:2]\nv -= a.unbind(0)[0]\nr = a * 1",
    "add_ of itself": "a.add_(a)\nr = a * 1",
    "add_ of a shifted slice": "v = a[0:2]\nv.add_(a[1:3])\nr = a * 1",
    "add_ of a disjoint slice": "v = a[0:2]\nv.add_(a[2:4])\nr = a * 1",
    "write into an expanded view": "e = a[0:1].expand(3)\ne.add_(1)\nr = a * 1",
    "assign a shifted slice": "a[0:2] = a[1:3]\nr = a * 1",
    "assign a disjoint slice": "a[0:2] = a[2:4]\nr = a * 1",
    "transpose onto itself": "m = a.view(2, 2)\nm.t().add_(m)\nr = a * 1",
}


def test_inplace_overlap_refused_as_pytorch_does():
    for label, body in OVERLAPS.items():
        x = torch.tensor([1.0, -2.0, 3.0, 0.5], dtype=F64, requires_grad=True)
        env = {"a": x * 1}
        try:
            exec(body, env)
            want = None
        except RuntimeError as exc:
            want = str(exc)
        forward = "a = x * 1\n" + body + "\nreturn r"
        text = ("name: o\ndtype: float64\ninputs:\n  x: {value: [1, -2, 3, 0.5], requires_grad: true}\n"
                "model:\n  forward: |\n" + "".join(f"    {line}\n" for line in forward.splitlines()) + "loss: \"sum(y)\"\n")
        pred = solve(text)
        got = pred.error.message if pred.error is not None else None
        assert got == want, (label, got, want)


# 19. the saved-tensor version message names the saved input's grad_fn as reading it makes it:
# a view whose base was written since gets a fresh AsStridedBackward0 ("output 0 of
# AsStrided"), not the view's own node (found by the sweep: seed 1, problem 221)
SAVED_VIEWS = {
    "view saved, base written": "v = a.view(2, 2)\nb = v.sin()\na.mul_(2)\nr = b",
    "view saved, written itself": "v = a.view(2, 2)\nb = v.sin()\nv.mul_(2)\nr = b",
    "slice saved, another view written": "v = a[0:2]\nb = v.sin()\na[2:].mul_(2)\nr = b",
}


def test_saved_view_version_message_names_the_regenerated_node():
    for label, body in SAVED_VIEWS.items():
        x = torch.tensor([1.0, -2.0, 3.0, 0.5], dtype=F64, requires_grad=True)
        env = {"a": x * 1}
        exec(body, env)
        try:
            env["r"].sum().backward()
            want = None
        except RuntimeError as exc:
            want = str(exc)
        forward = "a = x * 1\n" + body + "\nreturn r"
        text = ("name: s\ndtype: float64\ninputs:\n  x: {value: [1, -2, 3, 0.5], requires_grad: true}\n"
                "model:\n  forward: |\n" + "".join(f"    {line}\n" for line in forward.splitlines()) + "loss: \"sum(y)\"\n")
        pred = solve(text)
        got = pred.error.message if pred.error is not None else None
        assert got == want, (label, got, want)
def test_full_hook_slots_follow_the_output_tuple_and_the_positional_inputs():
    """MultiheadAttention(need_weights=False) returns (out, None): its full and pre hooks get
    grad_output = (g, None); self-attention's one tensor is three grad_input slots, each its own."""
    text = open("tests/data/regressions/none_output_slot.yaml").read()
    attn = nn.MultiheadAttention(2, 1, batch_first=True, dtype=F64)
    with torch.no_grad():
        attn.in_proj_weight.copy_(torch.tensor([[0.5, -0.25], [0.125, 1], [-1, 0.5], [0.75, -0.5], [0.25, 0.5],
                                                [-0.75, 0.125]], dtype=F64))
        attn.in_proj_bias.copy_(torch.tensor([0.1, -0.2, 0.05, 0, 0.3, -0.1], dtype=F64))
        attn.out_proj.weight.copy_(torch.tensor([[1, 0.5], [-0.5, 0.25]], dtype=F64))
        attn.out_proj.bias.copy_(torch.tensor([0.2, -0.3], dtype=F64))
    seen = []
    attn.register_full_backward_pre_hook(lambda m, go: seen.append(("pre", show(go))))
    attn.register_full_backward_hook(lambda m, gi, go: seen.append(("full", show(gi), show(go))))
    x = torch.tensor([[[0.5, -1], [1, 0.25]]], dtype=F64, requires_grad=True)
    y = attn(x, x, x, need_weights=False)[0]
    (y * y).sum().backward()
    (_, pre_go), (_, gi, go) = seen
    assert len(pre_go) == len(go) == 2 and pre_go[1] is None and go[1] is None and len(gi) == 3
    full = solve(text, "full").hook_calls[0].args
    pre = solve(text, "pre").hook_calls[0].args
    assert len(full["grad_output"]) == len(pre["grad_output"]) == 2
    assert full["grad_output"][1] is None and pre["grad_output"][1] is None
    assert same(full["grad_output"][0], go[0]) and same(pre["grad_output"][0], pre_go[0])
    assert len(full["grad_input"]) == 3 and all(same(a, b) for a, b in zip(full["grad_input"], gi))
    assert not same(full["grad_input"][0], gi[1])          # three different gradients, not their sum


# 20. PyTorch's messages name a node without "Backward", keeping an overload number other than
# 0: "output 0 of Pow2" (PowBackward2), "Output 0 of Squeeze1" (found by the sweep: seed 1,
# problem 1343)
def test_messages_keep_the_overload_number():
    x = torch.tensor([1.0, 2.0, 3.0], dtype=F64, requires_grad=True)
    out = 2 ** (x * 1)
    out.add_(1)
    try:
        out.sum().backward()
    except RuntimeError as exc:
        want = str(exc)
    text = ("name: p\ndtype: float64\ninputs:\n  x: {value: [1, 2, 3], requires_grad: true}\nmodel:\n  forward: |\n"
            "    out = 2 ** (x * 1)\n    out.add_(1)\n    return out\nloss: \"sum(y)\"\n")
    pred = solve(text)
    assert "output 0 of Pow2," in want and pred.error.message == want


# 21. A view's grad_fn is made when asked for: a view made while its base did not require grad
# counts as a leaf for an in-place op on it until something asks (found by the sweep: seed 19,
# problem 1695); and the first register_hook on a view whose grad_fn must be remade crashes
# PyTorch 2.13 (adjoint refuses it: tests/errors/hook-on-stale-view-crashes-torch.yaml)
def test_unasked_view_grad_fn_is_a_leaf():
    def run(read_first: bool):
        b = torch.tensor([[0.25, 0.25, 0.75]], dtype=F64)
        p = torch.tensor([-1.5], dtype=F64, requires_grad=True)
        c = b * 1
        v = c.t()
        w = c[0:1]
        w += p
        if read_first:
            v * 2
        try:
            v.mul_(2)
        except RuntimeError as exc:
            return str(exc)
        return None

    want = run(False)
    assert want == "a leaf Variable that requires grad is being used in an in-place operation."
    assert run(True) is None
    text = ("name: p\ndtype: float64\ninputs:\n  p: {value: [-1.5], requires_grad: true}\n"
            "  b: [[0.25, 0.25, 0.75]]\nmodel:\n  inputs: [p, b]\n  forward: |\n    c = b * 1\n"
            "    v = c.t()\n    w = c[0:1]\n    w += p\n    v.mul_(2)\n    return v * 3\nloss: \"sum(y)\"\n")
    assert solve(text).error.message == want
    assert solve(text.replace("    v.mul_(2)", "    s = v * 2\n    v.mul_(2)")).error is None


def test_first_hook_on_a_stale_view_crashes_torch():
    import subprocess
    import sys
    code = ("import torch\np = torch.tensor([-1.5, 2.0], requires_grad=True)\nc = p * 1\nv = c[0:1]\n"
            "c.mul_(2)\nv.register_hook(lambda g: g)\nprint('survived')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "survived" not in done.stdout   # -11: SIGSEGV
    fine = code.replace("c.mul_(2)\n", "c.mul_(2)\nv.grad_fn\n")
    assert subprocess.run([sys.executable, "-c", fine], capture_output=True, text=True, timeout=120).returncode == 0


# 22. relu's backward at a nan output passes the gradient: threshold_backward is ATen's
# `x <= 0 ? 0 : grad`, and nan <= 0 is false. A nan gets there from an SGD step on a nan .grad
# (sqrt'(0) * 0); found by the sweep (seed 7, problem 1307)
def test_relu_backward_passes_the_gradient_at_nan():
    x = torch.tensor([2.0], dtype=F64, requires_grad=True)
    p = torch.tensor([1.0], dtype=F64, requires_grad=True)
    seen = []
    for _ in range(2):
        h = torch.sqrt(p * 0)
        h.register_hook(lambda g: seen.append(g.clone()))
        torch.sum(x * torch.relu(h)).backward()
        with torch.no_grad():
            p -= 0.5 * p.grad
    assert torch.isnan(p).all() and seen[1].tolist() == [2.0]
    text = ("name: n\ndtype: float64\ninputs:\n  x: {value: [2], requires_grad: true}\nmodel:\n  inputs: [x]\n"
            "  params: {p: [1]}\n  forward: |\n    h = sqrt(p * 0)\n    return x * relu(h)\nloss: \"sum(y)\"\n"
            "hooks:\n  - {tensor: h}\nsteps: [forward, backward, {step: {lr: 0.5}}, forward, backward]\n")
    calls = solve(text).hook_calls
    assert [fl(c.args["grad"]).tolist() for c in calls] == [s.tolist() for s in seen]


# 23. under saved_tensors_hooks a saved tensor written in place raises nothing
# (SavedVariable::unpack checks versions only without hooks): relu's backward selects on the
# written result it saved, not on its input; found by the sweep (seed 7, problem 1410)
def test_relu_backward_reads_its_saved_result_written_under_hooks():
    p = torch.tensor(0.125, dtype=F64, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(lambda x: x, lambda x: x):
        h = torch.relu(p)
        h += -1
        y = h * 3
    (want,) = torch.autograd.grad(y, [p])
    text = ("name: n\ndtype: float64\ninputs:\n  x: [1]\nmodel:\n  inputs: [x]\n  params: {p: 0.125}\n"
            "  forward: |\n    h = relu(p)\n    h += -1\n    return h * 3\nloss: \"sum(y)\"\n"
            "hooks:\n  - {saved_tensors: {pack: \"x\", unpack: \"x\"}}\nbackward: {method: grad, inputs: [p]}\n")
    v = solve(text)
    assert want.item() == 0.0 and same(v.returned["p"], want)


# 24. torch.maximum / torch.minimum propagate nan, and their backward hands all of g to both
# operands where one is nan (derivatives.yaml: where(self == other, g / 2, g), masked to 0
# where self < other: every comparison with nan is false); two equal infinities are a tie
def test_maximum_minimum_at_nan_and_equal_infinities():
    inf, nan = float("inf"), float("nan")
    a = torch.tensor([nan, 1.0, -inf, 2.0], dtype=F64, requires_grad=True)
    b = torch.tensor([2.0, nan, -inf, 3.0], dtype=F64, requires_grad=True)
    y = torch.maximum(a, b)
    y.backward(torch.full((4,), 4.0, dtype=F64))
    assert y.detach().isnan().tolist() == [True, True, False, False]
    assert a.grad.tolist() == [4.0, 4.0, 2.0, 0.0] and b.grad.tolist() == [4.0, 4.0, 2.0, 4.0]
    text = ("name: m\ndtype: float64\ninputs:\n  x: {value: [2, -1], requires_grad: true}\nmodel:\n  inputs: [x]\n"
            "  params: {p: [1, 3]}\n  forward: |\n    h = sqrt(p * 0) + 0\n    m = maximum(h, x)\n    return m\n"
            "loss: \"sum(y)\"\nhooks:\n  - {node: m, kind: post}\n"
            "steps: [forward, backward, {step: {lr: 0.5}}, forward, backward]\n")
    v = solve(text)
    assert [fl(g).tolist() for g in v.hook_calls[-1].args["grad_inputs"]] == [[1.0, 1.0], [1.0, 1.0]]
    assert np.isnan(fl(v.values["m"])).all()


# 25. a leaf's AccumulateGrad is held only by graphs (the tensor's pointer is weak): a backward
# whose root is the leaf itself makes one for the run and frees it after, so a node hook put on
# it is not called by the next backward; found by the sweep (seed 17, problem 1695)
def test_leaf_root_accumulator_is_freed_after_the_backward():
    calls = []
    x = torch.tensor([0.5, -1.5], dtype=F64, requires_grad=True)

    def on_x(grad):
        if not calls:   # in the first backward: on the accumulator that backward made
            torch._C._current_autograd_node().register_hook(lambda gi, go: calls.append("post"))
        calls.append("hook")

    x.register_hook(on_x)
    x.backward(torch.ones(2, dtype=F64))
    x.backward(torch.ones(2, dtype=F64))
    assert calls == ["hook", "post", "hook"]
    text = ("name: n\ndtype: float64\ninputs:\n  x: {value: [0.5, -1.5], requires_grad: true}\nmodel:\n"
            "  inputs: [u]\n  forward: \"u\"\nbackward:\n  grad_output: [1, 1]\n"
            "hooks:\n  - {tensor: x}\n  - {node: x, kind: post}\nsteps: [forward, backward, forward, backward]\n")
    assert [c.kind for c in solve(text).hook_calls] == ["hook", "hook"]
    held = text.replace("forward: \"u\"", "forward: |\n    z = u * 2\n    return u")
    assert [c.kind for c in solve(held).hook_calls] == ["hook", "post", "hook", "post"]


# 26. every elementwise function at the IEEE specials (nan, inf, -inf) is what torch computes:
# sigmoid(nan) is nan (the float rule compared v > -700 first, false for nan, and gave 0); found
# by the sweep (seed 17, problem 1532: sigmoid of a parameter an SGD step on a nan .grad made nan)
def test_elementary_functions_at_ieee_specials():
    import math

    from adjoint.values.numbers.elementary import ELEMENTARY
    from adjoint.values.ieee import ieee

    for name in ELEMENTARY:
        for v in (math.nan, math.inf, -math.inf):
            want = getattr(torch, name)(torch.tensor(v, dtype=F64)).item()
            got = ieee(name, [v])
            assert (math.isnan(got) and math.isnan(want)) or got == want, (name, v, got, want)
    text = ("name: n\ndtype: float64\ninputs:\n  x: {value: [2], requires_grad: true}\nmodel:\n  inputs: [x]\n"
            "  params: {p: [1]}\n  forward: |\n    h = sqrt(p * 0) + 0\n    return x * sigmoid(h)\nloss: \"sum(y)\"\n"
            "steps: [forward, backward, {step: {lr: 0.5}}, forward]\n")
    p = torch.tensor([1.0], dtype=F64, requires_grad=True)
    x = torch.tensor([2.0], dtype=F64, requires_grad=True)
    torch.sum(x * torch.sigmoid(torch.sqrt(p * 0) + 0)).backward()
    with torch.no_grad():
        p -= 0.5 * p.grad
    y = x * torch.sigmoid(torch.sqrt(p * 0) + 0)
    assert torch.isnan(y).all() and np.isnan(fl(solve(text).values["model"])).all()


# 27. `x[i] op= v` evaluates its target before v (CPython: the subscript, then the right-hand
# side, then the in-place op): making x[i] of a written BackwardHookFunction output raises
# before anything in v runs; found by the sweep (seed 107, problem 493)
def test_augmented_index_assignment_evaluates_the_target_first():
    order = []
    c0 = nn.Linear(2, 1).double()
    c1 = nn.Sigmoid()
    c0.register_full_backward_hook(lambda m, gi, go: None)
    c1.register_forward_hook(lambda m, a, out: order.append("c1"))
    x = torch.tensor([1.0, 2.0], dtype=F64, requires_grad=True)
    h0 = c0(torch.tensor([[-1.0, -0.5], [0.0, 1.25]], dtype=F64))
    h0.detach().mul_(2)

    def rhs():
        order.append("rhs")
        return torch.sum(c1(x))
    try:
        h0[1, 0] *= rhs()
        raised = None
    except RuntimeError as e:
        raised = str(e)
    assert order == [] and raised.startswith("Output 0 of BackwardHookFunction is a view and its base")
    text = open("tests/data/regressions/aug_index_target_before_value.yaml").read()
    pred = solve(text)
    assert pred.error.message == raised and pred.hook_calls == []


# 28. `x[i] = v` copies as set_item's copy_to does: the same sizes are copy_, a 0-d value is
# fill_, anything else is first viewed without its leading size-1 dimensions (a ViewBackward0
# even when none is dropped) and expanded to the indexed part (an ExpandBackward0) when the
# sizes still differ. Found by the sweep (seed 161, problem 1699, reduced): a value of shape
# [1] written into a 0-d element was an internal error.
SETITEM_CASES = [((2, 2), "0", (1, 2)), ((2,), "0", (1,)), ((2, 2), "0", (1,)), ((2, 2), "0", (2,)),
                 ((2, 2), ":", (2,)), ((2, 2), ":", (1, 2)), ((2,), "0", (1, 1)), ((3,), "0:2", (1,)),
                 ((), "...", ()), ((2,), ":", ()), ((2,), "...", (1,)), ((), "...", (1,)),
                 ((2, 3), "0:2, 1", (2,)), ((2, 3), "..., 0:2", (1, 1, 2))]


def test_index_assignment_views_and_expands_the_value_as_copy_to_does():
    import json

    from nodechain import chain, leaf_names

    def index(text):   # the index as Python reads "0:2, 1" (no eval)
        def one(part):
            part = part.strip()
            if part == "...":
                return Ellipsis
            if ":" in part:
                lo, hi = part.split(":")
                return slice(int(lo) if lo else None, int(hi) if hi else None)
            return int(part)
        items = tuple(one(p) for p in text.split(","))
        return items[0] if len(items) == 1 else items

    for dst, ix, vs in SETITEM_CASES:
        a = torch.arange(1, 1 + torch.Size(dst).numel(), dtype=F64).reshape(dst).requires_grad_()
        v = (torch.arange(1, 1 + torch.Size(vs).numel(), dtype=F64) * 0.5).reshape(vs).requires_grad_()
        h = a * 1
        h[index(ix)] = v * 3
        (h * h).sum().backward()
        text = (f"name: si\ndtype: float64\ninputs:\n  a: {{value: {json.dumps(a.tolist())}, requires_grad: true}}\n"
                f"  v: {{value: {json.dumps(v.tolist())}, requires_grad: true}}\nmodel:\n  inputs: [a, v]\n"
                f"  forward: |\n    h = a * 1\n    h[{ix}] = v * 3\n    return (h * h).sum()\n")
        pred = adjoint.loads(text).solve().variants[0]
        ours = pred.run.forward.names
        assert chain(ours["h"], leaf_names({"a": ours["a"], "v": ours["v"]})) == chain(h, leaf_names({"a": a, "v": v})), \
            (dst, ix, vs)
        for name, t in (("a", a), ("v", v)):
            assert np.allclose(np.array(pred.grads[name].floats(), dtype=float).reshape(-1), t.grad.reshape(-1).numpy(),
                               rtol=0, atol=1e-12), (dst, ix, vs, name)


# 29. When a stale view (its base written in place since it was made) gets its new grad_fn
# (AsStridedBackward0), relative to the node that reads it: an op's node is made first and
# then collects its next edges (so the new node comes after it), a custom Function (and
# BackwardHookFunction) collects its edges before its PyNode is made; _call_impl reads the
# output's grad_fn to register a legacy backward hook there, and _maybe_warn_non_full_backward_hook
# then reads the inputs' grad_fn. Found by the sweep (seed 161, problem 1699: a legacy hook
# PyTorch ran on a regenerated node was not predicted).
class Twice(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        return a * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


class _Half(nn.Module):
    def forward(self, a, b=None):
        return a * 2


STALE_VIEW_READS = {   # name -> (forward line, children and hooks of the file, torch's twin)
    "op": ("h = b * k[0:1]", "", lambda b, k: b * k[0:1]),
    "in place": ("b.mul_(3)\n    h = b", "", lambda b, k: b.mul_(3)),
    "custom Function": ("h = c0(b)", '  children:\n    c0: {inputs: [a], function: {name: Twice, backward: {a: '
                        '"grad_output * 2"}}, forward: "a * 2"}\n', lambda b, k: Twice.apply(b)),
    "full hook": ("h = c0(b)", '  children:\n    c0: {inputs: [a], forward: "a * 2"}\nhooks:\n  - {module: c0, '
                  'kind: full_backward}\n', "full"),
    "legacy hook, unused input": ("h = c0(k, b)", '  children:\n    c0: {inputs: [a, b], forward: "a * 2"}\nhooks:\n'
                                  '  - {module: c0, kind: backward}\n', "legacy"),
}


def test_stale_view_grad_fn_is_made_where_pytorch_reads_it():
    from nodechain import chain, leaf_names

    for label, (line, extra, twin) in STALE_VIEW_READS.items():
        x = torch.tensor([1.0, 2.0], dtype=F64, requires_grad=True)
        base = x * 1
        b = base[0:1]
        base.mul_(2)
        k = x * 3
        if twin in ("full", "legacy"):
            c0 = _Half()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if twin == "full":
                    c0.register_full_backward_hook(lambda m, gi, go: None)
                    h = c0(b)
                else:
                    c0.register_backward_hook(lambda m, gi, go: None)
                    h = c0(k, b)
        else:
            h = twin(b, k)
        out = (h + k[0:1] + base[1:2] + b * 1).sum()
        model, _, hooks = extra.partition("hooks:\n")
        text = ("name: stale\ndtype: float64\ninputs:\n  x: {value: [1, 2], requires_grad: true}\nmodel:\n"
                f"  inputs: [x]\n{model}  forward: |\n    base = x * 1\n    b = base[0:1]\n    base.mul_(2)\n"
                f"    k = x * 3\n    {line}\n    return (h + k[0:1] + base[1:2] + b * 1).sum()\n"
                + (f"hooks:\n{hooks}" if hooks else ""))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ours = adjoint.loads(text).solve().variants[0].run.forward.names
        assert chain(ours["model"], leaf_names({"x": ours["x"]})) == chain(out, leaf_names({"x": x})), label


SDPA_LAYOUT = """name: heads-last
dtype: float64
inputs:
  x: {value: [[[[2, 0.125, 0.75], [0.25, 0.125, -0.75], [0, -1, -2]], [[-1.25, -0.25, -0.5], [0.25, 0.5, 0.25], [-0.75, 0, 1.25]]]], requires_grad: true}
model:
  forward: |
    return F.scaled_dot_product_attention(x, x, x, is_causal=True)
loss: "sum(y * y)"
hooks:
  - {tensor: x, kind: post_accumulate_grad, does: "tensor.grad.clamp_(-0.25, 0.25)"}
  - {node: x, kind: post}
"""


def test_flash_attention_gradients_are_heads_last_so_accumulate_grad_copies():
    import torch.nn.functional as F
    x = torch.tensor([[[[2, 0.125, 0.75], [0.25, 0.125, -0.75], [0, -1, -2]],
                       [[-1.25, -0.25, -0.5], [0.25, 0.5, 0.25], [-0.75, 0, 1.25]]]], dtype=F64, requires_grad=True)
    y = F.scaled_dot_product_attention(x, x, x, is_causal=True)
    seen = []
    def clamp(t):
        t.grad.clamp_(-0.25, 0.25)
    x.register_post_accumulate_grad_hook(clamp)
    y.grad_fn.next_functions[0][0].register_hook(lambda gi, go: seen.append(go[0].clone()))
    assert torch.autograd.grad((y * y).sum(), x, retain_graph=True)[0].stride() == (18, 3, 6, 1)   # (L*H*E, E, H*E, 1)
    (y * y).sum().backward()
    assert seen[0].abs().max() > 0.25 and x.grad.abs().max() <= 0.25     # the hook's clamp hit a copy
    call = [c for c in solve(SDPA_LAYOUT).to_json()["hook_calls"] if c["kind"] == "post"][0]
    assert same_list(call["args"]["grad_outputs"][0]["value"], seen[0])


def same_list(ours, theirs) -> bool:
    return np.allclose(np.asarray(ours, dtype=float), theirs.detach().numpy(), rtol=1e-10, atol=1e-12)



# signed zeros from -inf (issue 28, round three): 1 / x, n / x and odd negative powers of -inf
# are -0.0 (C's pow), even and fractional ones +0.0; the sign bit of each exact zero against torch
def test_signed_zero_from_minus_inf():
    from adjoint.values.signed_zero import sign_bits

    x = torch.tensor([1.0, 2.0], dtype=F64)
    h = x.masked_fill(torch.tensor([True, False]), float("-inf"))
    cases = {"1 / h": 1 / h, "2 / h": 2 / h, "h ** -1": h ** -1, "h ** -3": h ** -3, "h ** -2": h ** -2,
             "h ** -1.5": h ** -1.5, "-1 / h": -1 / h}
    for expr, want in cases.items():
        text = ("name: z\ndtype: float64\ninputs:\n  x: {value: [1, 2], requires_grad: true}\n"
                "  m: {value: [true, false], dtype: bool}\nmodel:\n  inputs: [x, m]\n  forward: |\n"
                f"    h = x.masked_fill(m, float(\"-inf\"))\n    z = {expr}\n    return z + x\nloss: \"sum(y)\"\n")
        pred = adjoint.loads(text).solve().variants[0]
        assert pred.values["z"].strings()[0] == "0", expr
        assert sign_bits(pred.values["z"]).tolist() == torch.signbit(want).tolist(), expr


INPLACE_CLONE = """
name: inplace-clone
dtype: float64
inputs:
  x: {value: [0.5, -1.5], requires_grad: true}
model:
  inputs: [x]
  forward: |
    t = torch.ones(2, dtype=torch.float64)
    t.mul_(x)
    u = x * 1
    u.mul_(x)
    return t * u
loss: "sum(y)"
"""


def test_inplace_op_clones_self_with_a_node_only_when_self_requires_grad():
    """An in-place op whose derivative needs the original self (mul_ by a tensor that requires grad) saves
    self.clone(); under grad mode the clone is a CloneBackward0, one more sequence_nr, only when self
    requires grad: ``ones(2).mul_(x)`` takes one number, ``(x * 1).mul_(x)`` two (torch 2.13)."""
    from test_second_order import _run, assert_same_graph, chain_ours, chain_torch, start_seq
    run = _run(INPLACE_CLONE)
    assert run.error is None, run.error
    base = start_seq()
    x = torch.tensor([0.5, -1.5], dtype=F64, requires_grad=True)
    t = torch.ones(2, dtype=F64)
    t.mul_(x)
    u = x * 1
    u.mul_(x)
    y = t * u
    assert [t.grad_fn._sequence_nr() - base, u.grad_fn._sequence_nr() - base, y.grad_fn._sequence_nr() - base] == \
        [0, 2, 4]
    assert_same_graph(chain_ours(run.forward.output), chain_torch(y, base), "t * u")
