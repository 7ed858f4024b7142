"""A one-tensor function called on None in a hook body (an argument PyTorch handed as None):
PyTorch's own error, predicted by adjoint/engine/pyerrors.py's ``unary_function_none``, compared
here with what the callable the torch side resolves for the same call raises in real torch
(bare ``tanh`` is torch.nn.functional's, which calls the method: AttributeError; ``torch.exp``'s
argument parser: TypeError). The files in tests/data/regressions/ (always_call_hook_calls_
function_of_none_output.yaml, hook_body_calls_exp_of_none_gradient.yaml) check whole runs."""

import pytest

from adjoint.engine import pyerrors
from adjoint.engine.pyerrors import _UNARY_TORCH


@pytest.mark.torch
def test_each_modelled_call_of_none_raises_what_torch_raises():
    from adjoint.format.errors import Loc
    from adjoint.torchside.callables import function

    checked = 0
    for name in sorted(_UNARY_TORCH):
        for prefix in ("", "torch.", "F."):
            predicted = pyerrors.unary_function_none(name, prefix, 1, 0)
            if predicted is None:
                continue
            fn = function(name, prefix, Loc("<test>", 1, 1))
            with pytest.raises(Exception) as info:
                fn(None)
            assert (type(info.value).__name__, str(info.value)) == (predicted.type, predicted.message), (prefix, name)
            checked += 1
    assert checked >= 2 * len(_UNARY_TORCH)
    assert pyerrors.unary_function_none("tanh", "", 2, 0) is None        # other calls: not modelled here


@pytest.mark.torch
def test_each_modelled_call_of_a_number_raises_what_torch_raises():
    """The same calls on an int, a float and a bool (``torch.exp(2)``): the parser's TypeError
    or the functional's AttributeError names the Python type."""
    from adjoint.format.errors import Loc
    from adjoint.torchside.callables import function

    checked = 0
    for name in sorted(_UNARY_TORCH):
        for prefix in ("", "torch.", "F."):
            for value in (2, 2.5, True):
                predicted = pyerrors.unary_function_not_tensor(name, prefix, 1, 0, type(value).__name__)
                if predicted is None:
                    continue
                with pytest.raises(Exception) as info:
                    function(name, prefix, Loc("<test>", 1, 1))(value)
                assert (type(info.value).__name__, str(info.value)) == (predicted.type, predicted.message), \
                    (prefix, name, value)
                checked += 1
    assert checked >= 6 * len(_UNARY_TORCH)


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
