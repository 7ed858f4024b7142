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


_KWARGS_PRE_HOOK = """
name: kwargs-pre-hook-returns
inputs:
  x: {value: [[1, -2]], requires_grad: true}
model:
  children:
    lin: {type: Linear, params: {weight: [[1, 2], [-1, 1]], bias: [0.1, 0.2]}}
  forward: "lin(x)"
loss: "sum(y)"
hooks:
  - {module: lin, kind: forward_pre, with_kwargs: true, returns: "RETURNS"}
EXTRA
"""


@pytest.mark.torch
@pytest.mark.parametrize("returns, extra, theirs", [
    ("(input[0], input[0])", "", "argument after ** must be a mapping, not Tensor"),
    ("(input, None)", "", "argument after ** must be a mapping, not NoneType"),
    ("(None, kwargs)", "", "argument after * must be an iterable, not NoneType"),
    # BackwardHook takes the tensor's rows, then torch.Tensor(*rows)
    ("(input[0], kwargs)", "  - {module: lin, kind: full_backward}", "takes 2 positional arguments but 3 were given"),
])
def test_with_kwargs_pre_hook_returning_what_forward_cannot_take_is_refused_in_one_line(returns, extra, theirs):
    """A with_kwargs forward_pre hook whose (args, kwargs) ``forward(*args, **kwargs)`` cannot
    take: CPython's TypeError names the forward by module and qualname, which adjoint cannot
    word for a module of the file, so it refuses at the hook's ``returns`` (it used to crash)."""
    import torch

    import adjoint
    from adjoint.format.errors import ProblemError

    lin = torch.nn.Linear(2, 2)
    hook = eval("lambda m, input, kwargs: " + returns)
    lin.register_forward_pre_hook(hook, with_kwargs=True)
    if extra:
        lin.register_full_backward_hook(lambda m, gi, go: None)
    with pytest.raises(TypeError, match=theirs.replace("*", r"\*")):
        lin(torch.tensor([[1., -2]], requires_grad=True))
    text = _KWARGS_PRE_HOOK.replace("RETURNS", returns).replace("EXTRA", extra)
    with pytest.raises(ProblemError) as ours:
        adjoint.loads(text).solve()
    assert "not modelled" in str(ours.value) and "\n" not in str(ours.value)
