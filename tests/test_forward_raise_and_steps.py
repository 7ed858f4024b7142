"""A forward's ``raise`` line, the ``registered`` step and ``{forward: {call: PATH}}``, as the
format reads them (docs/format.md). What they do is checked against torch by
tests/test_pytorch_ports.py (test_always_called_forward_hooks*, test_module_*_hook_removable,
test_module_global_hooks) and tests/data/regressions/forward_raise_in_child_always_call_hooks.yaml."""

import pytest

import adjoint
from adjoint.format.syntax import Raise, With

X = "name: t\ndtype: float64\ninputs:\n  x: {value: [0.5, -1], requires_grad: true}\n"


def _error(text: str) -> str:
    with pytest.raises(adjoint.ProblemError) as info:
        adjoint.loads(text)
    return info.value.line()


def test_raise_lines_are_parsed_as_written():
    p = adjoint.loads(X + "model:\n  inputs: [x]\n  forward: |\n    with no_grad():\n      raise NotImplementedError\n"
                          "    raise ValueError('no')\n    return x\n")
    prog = p.model.forward
    assert isinstance(prog[0], With) and prog[0].body[0] == Raise(prog[0].body[0].loc, "NotImplementedError", "")
    assert (prog[1].type, prog[1].message) == ("ValueError", "no")


@pytest.mark.parametrize("line, why", [
    ("raise KeyError('k')", "raise KeyError is not offered"),
    ("raise RuntimeError('a', 'b')", "one string literal"),
    ("raise RuntimeError(f'{x}')", "one string literal"),
    ("raise RuntimeError('a') from None", "one string literal"),
])
def test_raise_lines_refused(line, why):
    assert why in _error(X + f"model:\n  inputs: [x]\n  forward: |\n    {line}\n    return x\n")


def test_raise_is_not_a_hook_statement():
    assert "raise is not allowed" in _error(
        X + "model: {type: Tanh}\nhooks:\n  - {tensor: x, does: \"raise RuntimeError('no')\"}\n")


def test_registered_and_call_steps():
    p = adjoint.loads(X + "model:\n  plain: true\n  inputs: [x]\n  children:\n    m1: {type: Tanh}\n"
                          "  forward: m1(x)\nsteps:\n  - {registered: {module: m1, kind: forward_always_call, as: n}}\n"
                          "  - {forward: {call: m1}}\n")
    steps = p.variants[0].steps
    assert p.model.plain and steps[0].counts == ("m1", "forward_always_call", "n") and steps[1].call == "m1"
    assert "not one of" in _error(X + "model: {type: Tanh}\nsteps:\n  - forward\n"
                                      "  - {registered: {module: model, kind: forward_kwargs, as: n}}\n")
