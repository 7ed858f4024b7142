"""Contract v3 section 5 (saved tensors, completed) and var_mean, pinned against hand-written
torch: each case is solved by adjoint from a tiny problem and the same thing is written out
in real torch here (never taken from adjoint's output). docs/semantics.md, "Saved tensors"."""

import warnings

import pytest

from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402

warnings.filterwarnings("ignore")
F64 = torch.float64

BASE = """
dtype: float64
inputs:
  a: {value: [0.5, -1.5], requires_grad: true}
  c: {value: [2, 3]}
model:
  inputs: [a, c]
  forward: |
    h = a * a
    k = c * a
    e = h.exp()
    return e + k
loss: "sum(y)"
"""


def answer(hooks: str, steps: str = ""):
    text = "name: t" + BASE + "hooks:\n" + hooks + (("steps: " + steps + "\n") if steps else "")
    return adjoint.loads(text).solve().to_json()["variants"]["default"]


def torch_error(fn):
    try:
        fn()
    except Exception as exc:   # noqa: BLE001 -- the type and words are what is compared
        return type(exc).__name__, str(exc)
    raise AssertionError("torch did not raise")


def leaves():
    a = torch.tensor([0.5, -1.5], dtype=F64, requires_grad=True)
    c = torch.tensor([2.0, 3.0], dtype=F64)
    return a, c


def test_register_hooks_refusals_are_torchs():
    a, c = leaves()
    h, k = a * a, c * a
    e = h.exp()
    h.grad_fn._raw_saved_self.register_hooks(lambda x: x, lambda x: x)
    cases = {
        "  - {saved: h, slot: self, pack: x, unpack: x}\n  - {saved: h, slot: self, pack: x, unpack: x}\n":
            torch_error(lambda: h.grad_fn._raw_saved_self.register_hooks(lambda x: x, lambda x: x)),
        "  - {saved: h, slot: result, pack: x, unpack: x}\n":
            torch_error(lambda: h.grad_fn._raw_saved_result),
        "  - {saved: k, slot: other, pack: x, unpack: x}\n":
            torch_error(lambda: k.grad_fn._raw_saved_other.register_hooks(lambda x: x, lambda x: x)),
        "  - {saved: a, slot: self, pack: x, unpack: x}\n":
            torch_error(lambda: a.grad_fn._raw_saved_self),
    }
    e.sum().backward()
    freed = torch_error(lambda: e.grad_fn._raw_saved_result.register_hooks(lambda x: x, lambda x: x))
    for hooks, (kind, message) in cases.items():
        err = answer(hooks)["error"]
        assert (err["type"], err["message"]) == (kind, message), hooks
    err = answer("  - {saved: e, slot: result, pack: x, unpack: x, when: after_forward}\n",
                 "[forward, backward, {register: [0]}]")["error"]
    assert (err["type"], err["message"]) == freed


def test_hooks_on_one_saved_tensor_change_only_it():
    a, c = leaves()
    h = a * a
    calls = []
    h.grad_fn._raw_saved_self.register_hooks(lambda x: (calls.append("pack"), 2 * x)[1],
                                             lambda x: (calls.append("unpack"), x)[1])
    (h.exp() + c * a).sum().backward()
    got = answer("  - {saved: h, slot: self, pack: \"2 * x\", unpack: x}\n")
    assert [cl["kind"] for cl in got["hook_calls"]] == calls == ["pack", "unpack"]
    assert torch.allclose(torch.tensor(got["grads"]["a"]["value"], dtype=F64), a.grad, rtol=1e-12, atol=1e-12)


def test_disable_and_stash_as_torch_does():
    a, _ = leaves()
    with torch.autograd.graph.disable_saved_tensors_hooks("off"):
        inside = torch_error(lambda: torch.autograd.graph.saved_tensors_hooks(lambda x: x, lambda x: x).__enter__())
    with torch.autograd.graph.saved_tensors_hooks(lambda x: x, lambda x: x):
        around = torch_error(lambda: torch.autograd.graph.disable_saved_tensors_hooks("off too").__enter__())
    err = answer("  - {disable_saved_tensors_hooks: \"off\"}\n  - {saved_tensors: {pack: x, unpack: x}}\n")["error"]
    assert (err["type"], err["message"]) == inside
    err = answer("  - {saved_tensors: {pack: x, unpack: x}}\n  - {disable_saved_tensors_hooks: \"off too\"}\n")["error"]
    assert (err["type"], err["message"]) == around
    store = []
    with torch.autograd.graph.saved_tensors_hooks(lambda x: (store.append(x), len(store) - 1)[1],
                                                  lambda i: 2 * store[i]):
        h = a * a
    h.sum().backward()
    got = adjoint.loads("""name: s
dtype: float64
inputs:
  a: {value: [0.5, -1.5], requires_grad: true}
model:
  forward: "a * a"
loss: "sum(y)"
hooks:
  - {saved_tensors: {pack: "stash(x)", unpack: "unstash(x) * 2"}}
""").solve().to_json()["variants"]["default"]
    assert [cl["returned"] for cl in got["hook_calls"] if cl["kind"] == "pack"] == [0, 1]
    assert torch.allclose(torch.tensor(got["grads"]["a"]["value"], dtype=F64), a.grad, rtol=1e-12, atol=1e-12)


def test_var_mean_one_node_and_its_undefined_gradient():
    x = torch.tensor([[0.5, -1, 2], [1.5, 0.25, -0.5]], dtype=F64, requires_grad=True)
    v, m = torch.var_mean(x, dim=1)
    seen = []
    v.grad_fn.register_prehook(lambda go: seen.append([g is None for g in go]))
    assert v.grad_fn is m.grad_fn and type(v.grad_fn).__name__ == "VarMeanBackward0"
    (m * 3).sum().backward()
    got = adjoint.loads("""name: vm
dtype: float64
inputs:
  x: {value: [[0.5, -1, 2], [1.5, 0.25, -0.5]], requires_grad: true}
model:
  forward: |
    v, m = torch.var_mean(x, dim=1)
    return m * 3
loss: "sum(y)"
hooks:
  - {node: v, kind: pre}
""").solve().to_json()["variants"]["default"]
    (call,) = got["hook_calls"]
    assert [g is None for g in call["args"]["grad_outputs"]] == seen[0] == [True, False]
    assert torch.allclose(torch.tensor(got["grads"]["x"]["value"], dtype=F64), x.grad, rtol=1e-12, atol=1e-12)


def test_function_backward_reads_what_it_saved():
    class SavedExp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            h = a.exp()
            out = h * 2
            ctx.save_for_backward(h, a, out)
            return out

        @staticmethod
        def backward(ctx, grad_output):
            h, a, out = ctx.saved_tensors
            return grad_output * h * 2 + 0 * a + 0 * out

    x = torch.tensor([0.5, -1.5], dtype=F64, requires_grad=True)
    packed = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: (packed.append(t.clone()), t)[1], lambda t: 2 * t):
        y = SavedExp.apply(x)
    (y * x).sum().backward()
    got = adjoint.loads("""name: f
dtype: float64
inputs:
  x: {value: [0.5, -1.5], requires_grad: true}
model:
  children:
    f:
      inputs: [a]
      forward: |
        h = a.exp()
        return h * 2
      function:
        name: SavedExp
        save: [h, a, output]
        backward: {a: "grad_output * saved[0] * 2 + 0 * saved[1] + 0 * saved[2]"}
  forward: "f(x) * x"
loss: "sum(y)"
hooks:
  - {saved_tensors: {pack: "x", unpack: "x * 2"}, scope: [f]}
""").solve().to_json()["variants"]["default"]
    packs = [cl["args"]["x"]["value"] for cl in got["hook_calls"] if cl["kind"] == "pack"]
    assert len(packs) == len(packed) == 3
    for p, t in zip(packs, packed):
        assert torch.allclose(torch.tensor(p, dtype=F64), t, rtol=1e-12, atol=1e-12)
    assert torch.allclose(torch.tensor(got["grads"]["x"]["value"], dtype=F64), x.grad, rtol=1e-12, atol=1e-12)


UNPACK_SHAPE = """
name: unpack_changes_shape
dtype: float64
inputs:
  x: {value: [0.5, -1.5], requires_grad: true}
model:
  inputs: [x]
  forward: "(x.exp() * x).sum()"
loss: "y"
hooks:
  - {saved_tensors: {pack: "x", unpack: "UNPACK"}}
"""


@pytest.mark.parametrize("unpack", ["x.sum()", "x[:1]", "x.unsqueeze(0)"])
def test_an_unpack_changing_the_shape_is_refused(unpack):
    """PyTorch hands each backward formula what unpack returned, and each broadcasts it its own
    way (MulBackward0's grad * other takes a 0-d one silently: x.grad [0, 0] here); adjoint
    answered with a size error PyTorch never raises (found by a contract-v3 trial). Refused."""
    x = torch.tensor([0.5, -1.5], dtype=torch.float64, requires_grad=True)
    ops = {"x.sum()": lambda t: t.sum(), "x[:1]": lambda t: t[:1], "x.unsqueeze(0)": lambda t: t.unsqueeze(0)}
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t, ops[unpack]):
        y = (x.exp() * x).sum()
    y.backward()                      # PyTorch runs: no shape error
    assert x.grad is not None
    with pytest.raises(adjoint.ProblemError, match="returns a tensor of shape .* for one saved with shape"):
        adjoint.loads(UNPACK_SHAPE.replace("UNPACK", unpack)).solve()
