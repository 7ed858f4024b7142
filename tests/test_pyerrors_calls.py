"""A one-tensor function called on None in a hook body (an argument PyTorch handed as None):
PyTorch's own error, predicted by adjoint/engine/pyerrors.py's ``unary_function_none``, compared
here with what the callable the torch side resolves for the same call raises in real torch
(bare ``tanh`` is torch.nn.functional's, which calls the method: AttributeError; ``torch.exp``'s
argument parser: TypeError). The files in tests/data/regressions/ (always_call_hook_calls_
function_of_none_output.yaml, hook_body_calls_exp_of_none_gradient.yaml) check whole runs."""

import pytest

from adjoint.engine import pyerrors
from adjoint.engine.pyerrors import _UNARY_TORCH


_SPELLINGS = ("", "torch.", "F.", "nn.functional.", "torch.nn.functional.")


def _torch_raises(name: str, prefix: str, value):
    """What real torch raises for ``prefix + name`` (the callable the torch side resolves) of ``value``."""
    from adjoint.format.errors import Loc
    from adjoint.torchside.callables import function
    try:
        fn = function(name, prefix, Loc("<test>", 1, 1))
    except Exception:   # no such callable under that prefix
        return None
    try:
        fn(value)
    except Exception as e:
        return type(e).__name__, str(e)
    return "no error", ""


@pytest.mark.torch
def test_each_modelled_call_of_none_raises_what_torch_raises():
    checked = 0
    for name in sorted(_UNARY_TORCH):
        for prefix in _SPELLINGS:
            predicted = pyerrors.unary_function_none(name, prefix, 1, 0)
            if predicted is None:
                continue
            assert _torch_raises(name, prefix, None) == (predicted.type, predicted.message), (prefix, name)
            checked += 1
    assert checked >= 2 * len(_UNARY_TORCH)
    assert pyerrors.unary_function_none("tanh", "", 2, 0) is None        # other calls: not modelled here
    assert pyerrors.unary_function_none("sum", "", 1, 1) is None         # sum(None, dim=0): every signature listed


@pytest.mark.torch
def test_each_modelled_call_of_a_number_raises_what_torch_raises():
    """The same calls on an int, a float and a bool (``torch.exp(2)``), and on a sequence the
    program made (a tuple, a list, a torch.Size, a torch.return_types value): the parser's
    TypeError or the functional's AttributeError names the Python type."""
    import torch

    t = torch.ones(2)
    values = [(2, "int"), (2.5, "float"), (True, "bool"), ((t, t), "tuple"), ([t, t], "list"),
              (torch.Size([2]), "torch.Size"), (torch.max(torch.ones(2, 2), 0), "torch.return_types.max")]
    checked = 0
    for name in sorted(_UNARY_TORCH):
        for prefix in _SPELLINGS:
            for value, type_ in values:
                predicted = pyerrors.unary_function_not_tensor(name, prefix, 1, 0, type_)
                if predicted is None:
                    continue
                assert _torch_raises(name, prefix, value) == (predicted.type, predicted.message), \
                    (prefix, name, type_)
                checked += 1
    assert checked >= 14 * len(_UNARY_TORCH)


@pytest.mark.torch
def test_no_one_tensor_function_whose_parser_error_is_known_is_left_out():
    """Every function of the expression language whose first parameter is a tensor, under each
    spelling: where real torch refuses ``f(None)`` with the argument parser's own words, adjoint
    predicts that error (a refusal there would turn away a hook body PyTorch runs to its error:
    ``sum(h.grad)`` of a non-leaf)."""
    from adjoint.engine.bindings import FUNCTIONS

    missing = []
    for name in sorted(FUNCTIONS):
        fn = FUNCTIONS[name]
        if not (fn.params and fn.params[0].kind == "tensor"):
            continue
        for prefix in _SPELLINGS:
            expected = ("TypeError", f"{name}(): argument 'input' (position 1) must be Tensor, not NoneType")
            if _torch_raises(name, prefix, None) == expected and pyerrors.unary_function_none(name, prefix, 1, 0) is None:
                missing.append(prefix + name)
    # mul: torch.mul(None) is the parser's words, but torch.mul(2) another error; its number cases
    # are not told apart, so neither is modelled
    assert missing == ["mul", "torch.mul"], missing


@pytest.mark.torch
def test_custom_forward_binding_errors_are_cpythons():
    """``binding_error`` against CPython binding the torch twin's own CustomModule.forward
    signature (adjoint/torchside/build.py's ``signature_of``), over counts, keywords, defaults."""
    import itertools
    from types import SimpleNamespace

    from adjoint.torchside.build import signature_of

    checked = 0
    for names, defaults in ((["a"], []), (["a", "b"], []), (["a", "b", "c"], []), (["a", "b"], ["b"]),
                            (["a", "b", "c"], ["b", "c"]), ([], [])):
        decl = SimpleNamespace(inputs=names, input_defaults=[(n, 1) for n in defaults])
        fn = signature_of(decl)
        for nargs in range(len(names) + 3):
            for keywords in itertools.chain([[]], ([k] for k in names + ["q"]), [names[-1:] + ["q"]]):
                try:
                    fn(None, *range(nargs), **{k: 0 for k in keywords})
                    theirs = None
                except TypeError as exc:
                    theirs = str(exc)
                ours = pyerrors.binding_error("CustomModule.forward", names, set(defaults), nargs, keywords)
                assert ours == theirs, (names, defaults, nargs, keywords)
                checked += 1
    assert checked > 100


@pytest.mark.torch
@pytest.mark.parametrize("forward,fn", [
    ("x @ 2", lambda x: x @ 2),
    ("2.5 @ x", lambda x: 2.5 @ x),
    ("x * (2 @ 3)", lambda x: x * (2 @ 3)),
    ("x @ (1 / 2)", lambda x: x @ (1 / 2)),
    ("x @ (1 + 2j)", lambda x: x @ (1 + 2j)),
])
def test_matmul_with_a_number_is_pythons_type_error(forward, fn):
    """``@`` beside a Python number: CPython's TypeError naming both types, the answer."""
    import torch
    import adjoint

    text = f"name: m\ninputs:\n  x: {{value: [[1, 2], [3, 4]], requires_grad: true}}\nmodel: {{forward: \"{forward}\"}}\n"
    v = adjoint.loads(text).solve().variants[0]
    with pytest.raises(TypeError) as theirs:
        fn(torch.ones(2, 2, requires_grad=True))
    assert (v.error.type, v.error.message, v.error.during) == ("TypeError", str(theirs.value), "forward")


@pytest.mark.torch
def test_hook_body_summing_a_non_leaf_grad_is_torchs_type_error():
    """``sum(h.grad)`` in a hook body, ``h`` a non-leaf without retain_grad: PyTorch warns, hands
    None, and torch.sum's parser raises out of backward (tests/data/regressions/
    hook_body_reduces_a_none_gradient.yaml); written here in real torch."""
    import warnings

    import torch

    import adjoint

    x = torch.tensor([[0.5, -1.5]], dtype=torch.float64, requires_grad=True)
    z = torch.tensor([[1.0, 2.0]], dtype=torch.float64)
    lin = torch.nn.Linear(2, 2, bias=False).double()
    with torch.no_grad():
        lin.weight.copy_(torch.eye(2, dtype=torch.float64))
    h = lin(z) * x
    y = h * h

    def hook(grad):
        torch.sum(h.grad)

    x.register_hook(hook)
    with warnings.catch_warnings(record=True) as caught, pytest.raises(TypeError) as info:
        warnings.simplefilter("always")
        y.sum().backward()
    expected = (type(info.value).__name__, str(info.value))
    assert any(".grad attribute of a Tensor that is not a leaf" in str(w.message) for w in caught)

    from pathlib import Path
    text = (Path(__file__).parent / "data/regressions/hook_body_reduces_a_none_gradient.yaml").read_text()
    variant = adjoint.loads(text).solve().variant("sum_of_non_leaf_grad")
    assert variant.error is not None and (variant.error.type, variant.error.message) == expected
