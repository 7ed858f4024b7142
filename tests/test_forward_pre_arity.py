"""A forward pre-hook that returns the wrong number of inputs for a built-in layer: CPython's
TypeError from ``Layer.forward(self, INPUTS)``, predicted for every layer type whose forward
takes only required inputs (engine/forward.py's ``forward_arity_error``). Checked here for
every such type against torch.nn's own forward (its signature and the very message binding
raises); tests/data/regressions/forward_pre_hook_wrong_number_of_inputs.yaml checks the
run (which hooks ran, when) through verify."""

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
