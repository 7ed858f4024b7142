"""A hook whose body registers another hook (``registers: [i]``: ``h = t.register_hook(fn)``,
``grad_fn.register_prehook(fn)``, ``t.retain_grad()``, ... run inside a hook) was refused as an
unknown key. PyTorch 2.13 decides by where the engine is: a tensor or node it has not reached
yet gets the hook in this pass, one it has passed from the next pass on, a dict whose hooks are
running (``_call_hooks`` runs a copy) from the next pass on, retain_grad from the tensor's own
hook at once (the retains_grad hooks run after the tensor hooks); a first hook on another output
of the node whose tensor hooks are running would be pushed onto the vector the engine iterates
(undefined behaviour): refused. Every expected value is what the plain torch script below does.
"""

from __future__ import annotations

import os

import pytest
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402
from adjoint.answer.silent import silent_hooks  # noqa: E402
from adjoint.format.errors import ProblemError  # noqa: E402
from gen import check  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILE = os.path.join(ROOT, "tests", "data", "regressions", "hooks_registered_from_inside_a_hook.yaml")


def _flat(v):
    if isinstance(v, (list, tuple)):
        return [y for x in v for y in _flat(x)]
    return [v]


def _torch(variant: str):
    """The variant as a user's script: returns the calls (label, the first argument's values)
    over both passes, and the gradients."""
    a = torch.tensor([1., 2], dtype=torch.float64, requires_grad=True)
    b = torch.tensor(3., dtype=torch.float64, requires_grad=True)
    c = a * b
    d = c * 2
    p, q = c.chunk(2)
    calls = []

    def hook(label, body=None):
        def fn(*args):
            first = args[0]
            calls.append((label, _flat(first.tolist() if isinstance(first, torch.Tensor) else
                                       [g.tolist() for g in first if g is not None])))
            return body(*args) if body is not None else None
        return fn

    def post_acc(label):
        return lambda t: calls.append((label, _flat(t.grad.tolist())))

    if variant == "not_reached_yet":
        d.register_hook(hook("d_hook", lambda g: [c.register_hook(hook("c_hook", lambda g: g * 10)), None][1]))
    elif variant == "already_passed":
        c.register_hook(hook("c_hook", lambda g: [d.register_hook(hook("d_hook")), None][1]))
    elif variant == "same_dict":
        c.register_hook(hook("c_hook", lambda g: [c.register_hook(hook("c_hook_2")), None][1]))
    elif variant == "retain_grad_from_own_hook":
        c.register_hook(hook("c_hook", lambda g: (c.retain_grad(), g + 1)[1]))
    elif variant == "retain_grad_from_node_pre_hook":
        c.grad_fn.register_prehook(hook("c_pre", lambda g: c.retain_grad()))
    elif variant == "node_hooks_of_the_same_node":
        def post(gi, go):
            calls.append(("c_post", _flat([x.tolist() for x in gi])))
            c.grad_fn.register_hook(lambda gi, go: calls.append(("c_post_2", _flat([x.tolist() for x in gi]))))

        def pre(g):
            calls.append(("c_pre", _flat(g[0].tolist())))
            c.grad_fn.register_hook(post)

        c.register_hook(hook("c_hook", lambda g: [c.grad_fn.register_prehook(pre), None][1]))
    elif variant == "leaf":
        d.register_hook(hook("d_hook", lambda g: [a.register_hook(hook("a_hook")),
                                                 a.register_post_accumulate_grad_hook(post_acc("a_post_acc")),
                                                 None][2]))
    elif variant == "chunk_sibling_with_a_dict":
        q.register_hook(hook("q_hook", lambda g: [p.register_hook(hook("p_hook", lambda g: g * 100)), None][1]))
        p.register_hook(hook("p_observe"))
    e = (d * d).sum() + (p * q).sum()
    e.backward(retain_graph=True)
    e.backward()
    grads = {"a": a.grad.tolist(), "b": b.grad.item()}
    if c.retains_grad:
        grads["c"] = c.grad.tolist()
    return calls, grads


VARIANTS = ["not_reached_yet", "already_passed", "same_dict", "retain_grad_from_own_hook",
            "retain_grad_from_node_pre_hook", "node_hooks_of_the_same_node", "leaf", "chunk_sibling_with_a_dict"]


@pytest.fixture(scope="module")
def answer():
    return adjoint.load(FILE).solve().to_json()["variants"]


def _arg_values(call):
    args = call["args"]
    if call["kind"] == "post":
        first = args["grad_inputs"]
    elif call["kind"] == "pre":
        first = args["grad_outputs"]
    else:
        first = next(iter(args.values()))
    items = first if isinstance(first, list) else [first]
    return _flat([x["value"] for x in items if x is not None])


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_hook_registered_in_a_hook_fires_where_torch_fires_it(answer, variant):
    calls, grads = _torch(variant)
    got = answer[variant]
    assert got.get("error") is None
    assert [(c["label"], _arg_values(c)) for c in got["hook_calls"]] == calls
    assert {k: v["value"] for k, v in got["grads"].items()} == grads


def test_the_expected_calls_are_not_trivial():
    """The torch runs show each rule the docstring names."""
    assert [c[0] for c in _torch("not_reached_yet")[0]] == ["d_hook", "c_hook", "d_hook", "c_hook", "c_hook"]
    assert [c[0] for c in _torch("already_passed")[0]] == ["c_hook", "d_hook", "c_hook"]
    assert _torch("retain_grad_from_own_hook")[1]["c"] == [62.0, 104.0]
    assert _torch("retain_grad_from_node_pre_hook")[1]["c"] == [30.0, 51.0]


SIBLING = """
name: first_hook_on_a_sibling_output
dtype: float64
inputs:
  a: {value: [1, 2], requires_grad: true}
model:
  inputs: [a]
  forward: |
    c = a * 2
    p, q = c.chunk(2)
    return (p * q).sum()
hooks:
  - {tensor: q, registers: [1], label: q_hook}
  - {tensor: p, label: p_hook}
"""


def test_a_first_hook_on_an_output_of_the_running_node_is_refused():
    with pytest.raises(ProblemError, match="undefined behaviour"):
        adjoint.loads(SIBLING).solve()


def test_registering_a_module_or_multi_grad_hook_is_refused():
    text = SIBLING.replace("{tensor: p, label: p_hook}", "{multi_grad: [p, q], label: mg}")
    with pytest.raises(ProblemError, match="not modelled yet"):
        adjoint.loads(text).solve()


def test_it_verifies_against_torch():
    with open(FILE) as f:
        outcome = check(f.read(), timeout=120)
    assert outcome.ok, outcome.report()


def test_why_a_registered_hook_never_fired():
    text = SIBLING.replace("""hooks:
  - {tensor: q, registers: [1], label: q_hook}
  - {tensor: p, label: p_hook}""", """hooks:
  - {tensor: a, registers: [1], label: a_hook}
  - {tensor: c, label: c_hook}""")
    # torch: c's hook, registered from the leaf's hook, comes after MulBackward0 ran
    a = torch.tensor([1., 2], dtype=torch.float64, requires_grad=True)
    c = a * 2
    p, q = c.chunk(2)
    fired = []
    a.register_hook(lambda g: [fired.append("a_hook"), c.register_hook(lambda g: fired.append("c_hook")), None][2])
    (p * q).sum().backward()
    assert fired == ["a_hook"]
    got = adjoint.loads(text).solve()
    assert [c["label"] for c in got.to_json()["variants"]["default"]["hook_calls"]] == fired
    silent = {s.label: s.reason for s in silent_hooks(got.variants[0])}
    assert "registered inside a_hook (registers:)" in silent["c_hook"]


REFUSED = os.path.join(ROOT, "tests", "data", "regressions", "hook_registered_inside_a_hook_refused_by_pytorch.yaml")


def _torch_refusal(variant: str):
    x = torch.tensor([1., 2, 3], dtype=torch.float64, requires_grad=True)
    c = x * 1
    k = c.detach()
    c2 = c * 2
    register = {"nograd": lambda: k.register_hook(lambda g: None), "retain_nograd": k.retain_grad,
                "postacc_nonleaf": lambda: c.register_post_accumulate_grad_hook(lambda t: None),
                "node_none": lambda: k.grad_fn.register_prehook(lambda g: None)}[variant]
    c2.register_hook(lambda g: [register(), None][1])
    with pytest.raises(Exception) as info:
        (c2 * c2).sum().backward()
    return type(info.value).__name__, str(info.value)


@pytest.mark.parametrize("variant", ["nograd", "retain_nograd", "postacc_nonleaf", "node_none"])
def test_pytorchs_refusal_of_a_registration_inside_a_hook_is_the_answer(variant):
    got = adjoint.load(REFUSED).solve().to_json()["variants"][variant]
    assert (got["error"]["type"], got["error"]["message"]) == _torch_refusal(variant)
    assert got["error"]["during"] == "backward"
    assert [c["label"] for c in got["hook_calls"]] == ["c2h"]
