"""``function: {dirty: [a]}`` (``ctx.mark_dirty``): what is refused, located at its line, and
the module adjoint of a Function that rebased its input (hand-derived). What PyTorch does is
pinned by tests/data/regressions/function_mark_dirty*.yaml (tests/test_differential.py)."""

from __future__ import annotations

import pytest

import adjoint
from adjoint.format.errors import ProblemError

_BASE = """\
name: dirty
dtype: float64
inputs:
  x: {{value: [0.5, -1.5], requires_grad: true}}
model:
  children:
    f:
      inputs: [a]
      forward: |
        a.mul_(2)
        return a
      function:
        dirty: {dirty}
{save}        backward: {{a: "grad_output * 2"}}
  forward: |
{forward}
loss: "sum(y)"
"""
_SAVE = "        save: [a]\n"
_CALL = "    h = x * 3\n    return f(h) * x"


@pytest.mark.parametrize("dirty, save, forward, message, line", [
    ("a", _SAVE, _CALL, "function.dirty must be a list of input names", 13),
    ("[b]", _SAVE, _CALL, "'b' is not an input or parameter of", 13),
    ("[a, a]", _SAVE, _CALL, "'a' is listed twice in function.dirty", 13),
    ("[a]", "", _CALL, "a Function with dirty: declares save:", 13),
    # grad mode off: PyTorch returns a detached alias of an input that requires grad
    ("[a]", _SAVE, "    h = x * 3\n    with no_grad():\n        z = f(h)\n    return z + h",
     "PyTorch returns a detached alias of it, not modelled", 13),
])
def test_refusals_are_located_at_the_dirty_entry(dirty, save, forward, message, line):
    text = _BASE.format(dirty=dirty, save=save, forward=forward)
    with pytest.raises(ProblemError) as info:
        adjoint.loads(text).solve()
    assert message in str(info.value)
    assert info.value.loc is not None and info.value.loc.line == line, info.value.line()


def test_module_adjoint_reads_the_input_before_the_call():
    # f(a) = 2a in place: lambda_in = 2 * lambda_out; lambda_out of f's output is x (the loss is
    # sum(f(3x) * x)), so lambda_in = 2x = [1, -3], by hand -- not lambda_out, though the input
    # tensor is now the output
    text = _BASE.format(dirty="[a]", save=_SAVE, forward=_CALL)
    variant = adjoint.loads(text).solve().variants[0]
    f = next(b for b in variant.boundaries if b.path == "f")
    assert [float(v) for v in f.grad_output[0].tolist()] == [0.5, -1.5]
    assert [float(v) for v in f.grad_input[0].tolist()] == [1.0, -3.0]


def test_declared_backward_is_checked_against_the_derivative_at_the_input_before_the_write():
    # a.mul_(2) in place: the true VJP for a is 2 * grad_output (by hand); grad_output alone
    # forgets the factor, 2 * grad_output does not. The check runs the forward on a clone of
    # the input (a leaf written in place would be PyTorch's error).
    wrong = _BASE.format(dirty="[a]", save=_SAVE, forward=_CALL).replace('"grad_output * 2"', '"grad_output"')
    right = _BASE.format(dirty="[a]", save=_SAVE, forward=_CALL)
    [check] = adjoint.loads(wrong).solve().variants[0].functions
    assert (check.slot, check.matches) == ("a", False)
    [check] = adjoint.loads(right).solve().variants[0].functions
    assert (check.slot, check.matches) == ("a", True)


def test_a_dirty_view_that_is_not_the_first_argument_is_refused():
    # CopySlices pairs the base with the Function's first edge: a dirty view in another
    # position is not modelled
    text = _BASE.format(dirty="[a]", save=_SAVE, forward="    h = x * 3\n    return f(x * 1, h[0:1]) * 2")
    text = text.replace("      inputs: [a]", "      inputs: [b, a]")
    with pytest.raises(ProblemError) as info:
        adjoint.loads(text).solve()
    assert "is a view marked dirty that is not the Function's first argument" in str(info.value)
    assert info.value.loc.line == 13


def test_dirty_view_module_adjoint_and_document():
    # v = (3x)[0:1] written in place by f(a) = 2a, by hand: the loss sum(f(v) * 2) gives
    # lambda_out = [2] and lambda_in = 2 * lambda_out = [4]; the document writes the base's new
    # version as the base with the view's part replaced by the Function of it
    text = _BASE.format(dirty="[a]", save=_SAVE, forward="    h = x * 3\n    return f(h[0:1]) * 2")
    problem = adjoint.loads(text)
    variant = problem.solve().variants[0]
    f = next(b for b in variant.boundaries if b.path == "f")
    assert f.grad_output[0].tolist() == [2] and f.grad_input[0].tolist() == [4]
    from adjoint.render.latex import render_document
    doc = render_document(problem.solve())
    assert "\\leftarrow \\operatorname{FFunction}" in doc and "torch::autograd::CopySlices" in doc


def test_an_input_written_without_dirty_is_refused():
    text = _BASE.format(dirty="[a]", save=_SAVE, forward=_CALL).replace("        dirty: [a]\n", "")
    with pytest.raises(ProblemError) as info:
        adjoint.loads(text).solve()
    assert "writes its input 'a' in place without marking it dirty" in str(info.value)
    assert info.value.loc.line == 13   # the function: mapping
