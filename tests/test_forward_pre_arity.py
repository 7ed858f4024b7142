"""A forward pre-hook that returns the wrong number of inputs for a built-in layer: CPython's
TypeError from ``Layer.forward(self, INPUTS)``, predicted for every layer type, optional
inputs included (engine/forward.py's ``forward_arity_error``). Checked here for every type
against torch.nn's own forward (its signature and the very message binding raises);
tests/data/regressions/forward_pre_hook_wrong_number_of_inputs.yaml and
forward_pre_hook_wrong_count_optional_inputs.yaml (a later pre-hook too) check the run
(which hooks ran, when) through verify."""

import inspect

import pytest

from adjoint.engine.forward import forward_arity_error
from adjoint.format.module_signatures import TYPES


class _Mod:
    def __init__(self, type_):
        self.type = type_


@pytest.mark.torch
def test_every_built_in_forward_refuses_a_wrong_count_as_predicted():
    import torch

    checked = 0
    for name, t in TYPES.items():
        if t.container or t.optional_inputs or not hasattr(torch.nn, name):
            continue
        forward = getattr(torch.nn, name).forward
        params = list(inspect.signature(forward).parameters.values())
        assert [p.name for p in params] == ["self", *t.inputs], name
        assert all(p.default is inspect.Parameter.empty for p in params), name
        for count in range(len(t.inputs) + 2):
            args = (object(),) * count
            predicted = forward_arity_error(args, _Mod(name), {})
            if count == len(t.inputs):
                assert predicted is None
                continue
            with pytest.raises(TypeError) as theirs:
                forward(object(), *args)
            assert predicted == str(theirs.value), (name, count)
        checked += 1
    assert checked >= 30


@pytest.mark.torch
def test_forward_with_optional_inputs_refuses_a_wrong_count_as_predicted():
    """A layer whose forward has optional inputs (an RNN's hx, attention's masks): every count
    of positional inputs, with and without a keyword, against CPython's own binding of
    torch.nn's forward (the message it raises, or that it binds)."""
    import torch

    checked = 0
    for name, t in TYPES.items():
        if t.container or not t.optional_inputs:
            continue
        forward = getattr(torch.nn, name).forward
        signature = inspect.signature(forward)
        assert [p.name for p in signature.parameters.values()] == ["self", *t.inputs, *t.optional_inputs], name
        for count in range(len(t.inputs) + len(t.optional_inputs) + 2):
            for kwargs in ({}, {t.optional_inputs[-1]: object()}, {"bogus": object()}):
                args = (object(),) * count
                predicted = forward_arity_error(args, _Mod(name), kwargs)
                try:
                    signature.bind(object(), *args, **kwargs)
                except TypeError:
                    with pytest.raises(TypeError) as theirs:
                        forward(object(), *args, **kwargs)
                    assert predicted == str(theirs.value), (name, count, list(kwargs))
                else:
                    assert predicted is None, (name, count, list(kwargs))
                checked += 1
    assert checked >= 100, checked


@pytest.mark.torch
@pytest.mark.parametrize("count,kwargs", [(0, {}), (2, {}), (3, {}), (1, {"scale": 2}),
                                          (1, {"input": 1})])
def test_sequential_refuses_a_wrong_count_as_predicted(count, kwargs):
    """nn.Sequential.forward(self, input), called by the real nn.Sequential (the torch side's twin
    only carries its qualname)."""
    import torch

    seq = torch.nn.Sequential(torch.nn.Identity())
    with pytest.raises(TypeError) as theirs:
        seq.forward(*(torch.zeros(1),) * count, **kwargs)
    assert forward_arity_error((object(),) * count, _Mod("Sequential"), kwargs) == str(theirs.value)
    assert forward_arity_error((object(),), _Mod("Sequential"), {}) is None
