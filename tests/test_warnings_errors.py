"""Issue 21 §2: every PyTorch (or Python) error a well-formed file provokes is an answer, with
the calls before it; PyTorch's warnings are part of the answer; the differential check counts
a refusal where PyTorch raises as a disagreement.

The expected texts below were taken from real torch 2.13.0 / CPython 3.11 runs (the scripts
are quoted next to them); tests/test_differential.py checks the regression files named here
against torch itself."""

import os

import pytest

import adjoint
from adjoint.format import syntax as S
from adjoint.torchside.compare import compare
from adjoint.format.expr import parse_expression
from adjoint.format.loader import parse_yaml_text
from adjoint.engine.pyerrors import number_type

HERE = os.path.dirname(os.path.abspath(__file__))
REG = os.path.join(HERE, "data", "regressions")


def solve_json(name: str) -> dict:
    return adjoint.load(os.path.join(REG, name)).solve().to_json()["variants"]


def _expr(text: str) -> S.Expr:
    return parse_expression(parse_yaml_text("e: '" + text.replace("'", "''") + "'\n", "t.yaml").get("e"), "e")


@pytest.mark.parametrize("text, kind", [("2", "int"), ("2.0", "float"), ("0.5", "float"), ("-3", "int"),
                                        ("2 * 3", "int"), ("2 / 1", "float"), ("2 ** 2", "int"), ("2 ** -1", "float"),
                                        ("1 + 0.5", "float"), ("s", None), ("s * 2", None)])
def test_a_numbers_python_type_is_read_from_its_expression(text, kind):
    assert number_type(_expr(text)) == kind


def test_hook_body_errors_are_cpythons_words():
    # torch 2.13 / CPython 3.11:  None * 2, 0.5 * None, None ** 2, -None, None.mul, None.shape, None > 0,
    # g = None; g *= 2, (t,)[1], None[0], tensor * None
    v = solve_json("hook_body_none_argument_python_errors.yaml")
    got = {name: (r["error"]["type"], r["error"]["message"], r["error"]["during"], r["error"]["after_call"])
           for name, r in v.items()}
    assert got == {
        "times_int": ("TypeError", "unsupported operand type(s) for *: 'NoneType' and 'int'", "backward", 1),
        "float_times": ("TypeError", "unsupported operand type(s) for *: 'float' and 'NoneType'", "backward", 0),
        "power": ("TypeError", "unsupported operand type(s) for ** or pow(): 'NoneType' and 'int'", "backward", 0),
        "neg": ("TypeError", "bad operand type for unary -: 'NoneType'", "backward", 0),
        "method": ("AttributeError", "'NoneType' object has no attribute 'mul'", "backward", 0),
        "attr": ("AttributeError", "'NoneType' object has no attribute 'shape'", "backward", 0),
        "compare": ("TypeError", "'>' not supported between instances of 'NoneType' and 'int'", "backward", 0),
        "aug": ("TypeError", "unsupported operand type(s) for *=: 'NoneType' and 'int'", "backward", 0),
        "index": ("IndexError", "tuple index out of range", "backward", 0),
        "none_index": ("TypeError", "'NoneType' object is not subscriptable", "backward", 0),
        "tensor_times_none": ("TypeError", "unsupported operand type(s) for *: 'Tensor' and 'NoneType'", "backward", 0),
    }
    # the call whose body raised is marked raised; the call before it (times_int: g's hook) is not
    assert [c.get("raised", False) for c in v["times_int"]["hook_calls"]] == [False, True]


def test_registration_errors_say_when():
    v = solve_json("registration_errors.yaml")
    during = {name: r["error"]["during"] for name, r in v.items()}
    assert during == {"leaf_no_grad": "register", "leaf_no_grad_retain": "register",
                      "intermediate_no_grad": "forward", "post_acc_nonleaf": "forward",
                      "legacy_and_full": "register", "global_legacy_and_full": "register", "multi_all": "forward",
                      "multi_bad_mode": "forward", "after_forward": "register", "register_step": "register",
                      "register_step_ok_first": "register"}
    assert v["multi_bad_mode"]["error"]["message"] == "Expects mode to be one of ('all', 'any') but got some"
    assert v["multi_all"]["error"] == {"type": "AssertionError", "message": "Expected gradient function to be set",
                                       "during": "forward", "after_call": 0}


def test_unused_input_of_grad_raises_after_every_hook_call():
    err = solve_json("backward_call_errors.yaml")["grad_unused"]
    assert err["error"]["message"] == ("The differentiated Tensor at index 1 appears to not have been used in the "
                                       "graph. Set allow_unused=True if this is the desired behavior.")
    assert [c["label"] for c in err["hook_calls"]] == ["hook@h", "full_backward@f"]


def test_warnings_in_order_with_their_phase():
    v = solve_json("warnings_and_silenced_calls.yaml")
    inside = ("Using a non-full backward hook when the forward contains multiple autograd Nodes is deprecated and "
              "will be removed in future versions. This hook will be missing some grad_input. Please use "
              "register_full_backward_hook to get the documented behavior.")
    assert v["legacy_linear"]["warnings"] == [{"category": "FutureWarning", "message": inside, "during": "forward"}]
    assert v["legacy_twice"]["warnings"] == []   # g's second call: TanhBackward0's next_functions are the input's
    full = v["full_no_inputs_linear"]["warnings"]
    assert [(w["category"], w["during"]) for w in full] == [("UserWarning", "backward")]
    assert full[0]["message"].startswith("Full backward hook is firing when gradients are computed with respect to "
                                         "module outputs since no inputs require gradients.")
    silenced = v["always_call"]
    assert silenced["warnings"][0]["message"] == (
        "module forward hook with ``always_call=True`` raised an exception that was silenced as another error was "
        "raised in forward: also")
    assert [(c.get("raised", False), c.get("silenced", False)) for c in silenced["hook_calls"]] == \
        [(True, False), (False, True)]
    # every variant has the field, errored ones too
    assert all("warnings" in r for r in v.values())


def test_verify_compares_warnings():
    base = {"loss": None, "hook_calls": [], "grads": {},
            "warnings": [{"category": "UserWarning", "message": "m", "during": "backward"}]}
    ok = [r for r in compare(base, dict(base), "float64") if r.section == "warnings"]
    assert ok and all(r.ok for r in ok)
    for other in ([], [{"category": "UserWarning", "message": "m", "during": "forward"}],
                  [{"category": "FutureWarning", "message": "m", "during": "backward"}],
                  base["warnings"] * 2):
        rows = [r for r in compare(base, dict(base, warnings=other), "float64") if r.section == "warnings"]
        assert rows and not rows[0].ok, other


@pytest.mark.torch
def test_a_refusal_where_pytorch_raises_is_a_disagreement():
    """The differential check is strict: solve refusing (an int or a float it cannot tell) where
    PyTorch raises is 'refused', not 'both_raise'; the predicted error is 'both_raise' only when
    PyTorch raises exactly it."""
    from gen import check
    text = "\n".join([
        "name: strict", "dtype: float64", "inputs:", "  x: {value: [0.5, -1], requires_grad: false}",
        "model:", "  children:", "    f: {type: Linear, params: {weight: [[1, 2], [0.5, -1]], bias: [0.25, 0]}}",
        '  forward: "f(x)"', 'loss: "sum(y)"', "variants:",
        "  unknown_type:",
        '    hooks: [{module: f, kind: full_backward, does: ["s = 2", "t = s * grad_input[0]"]}]',
        "  predicted:",
        '    hooks: [{module: f, kind: full_backward, does: ["t = 2 * grad_input[0]"]}]', ""])
    outcome = check(text)
    status = {name: st for name, st, _ in outcome.variants}
    assert status == {"unknown_type": "refused", "predicted": "both_raise"}, outcome.report()
    assert "where PyTorch raises" in outcome.report()


@pytest.mark.torch
def test_bce_refuses_its_input_after_packing_it():
    """binary_cross_entropy's kernel checks the input's values after autograd packed self and
    target: the pack hook is called twice, then PyTorch raises (the torch side of verify
    cannot name the node of an op that raised, so this is pinned here, against torch itself)."""
    import torch
    import torch.nn.functional as F

    x = torch.tensor([0.5, -1.0], dtype=torch.float64, requires_grad=True)
    t = torch.tensor([1.0, 0.0], dtype=torch.float64)
    packed = []
    with torch.autograd.graph.saved_tensors_hooks(lambda v: packed.append(v.tolist()) or v, lambda v: v):
        with pytest.raises(RuntimeError) as exc:
            F.binary_cross_entropy(x * 2, t)
    text = "\n".join(["name: bce", "dtype: float64", "inputs:", "  x: {value: [0.5, -1], requires_grad: true}",
                      "  t: [1, 0]", "model:", "  inputs: [x, t]", '  forward: "F.binary_cross_entropy(x * 2, t)"',
                      'loss: "y"', "hooks:", '  - {saved_tensors: {pack: "x", unpack: "x"}}', ""])
    v = adjoint.loads(text).solve().to_json()["variants"]["default"]
    assert v["error"] == {"type": "RuntimeError", "message": str(exc.value), "during": "forward", "after_call": 1}
    assert [(c["kind"], c["args"]["x"]["value"], c["node"]) for c in v["hook_calls"]] == \
        [("pack", packed[0], "BinaryCrossEntropyBackward0"), ("pack", packed[1], "BinaryCrossEntropyBackward0")]
