"""``movedim`` / ``moveaxis`` with an int for one dim argument and a tuple or list for the other:
neither of PyTorch's overloads, ``(int source, int destination)`` and ``(tuple of ints source,
tuple of ints destination)``, takes it, so its argument parser raises its TypeError before
anything runs. adjoint took the int as a one-dim list (a permute, or movedim's own count
RuntimeError). Each expected error is real torch's, raised here by the same call
(tests/data/regressions/movedim_int_beside_a_sequence.yaml)."""

from __future__ import annotations

import pytest
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402

TEXT = """
name: movedim_overloads
dtype: float64
inputs:
  x: {value: [[[1, 2, 3], [3, 4, 5]], [[5, 6, 7], [7, -8, 9]]], requires_grad: true}
model:
  forward: |
    h = x * 2
    a = CALL
    return a.sum()
"""

MIXED = {
    "h.movedim((0, 1), 1)": lambda h: h.movedim((0, 1), 1),
    "h.movedim(0, (1,))": lambda h: h.movedim(0, (1,)),
    "h.movedim([0, 1], 2)": lambda h: h.movedim([0, 1], 2),
    "h.movedim(0, [2, 1])": lambda h: h.movedim(0, [2, 1]),
    "torch.movedim(h, (0,), 1)": lambda h: torch.movedim(h, (0,), 1),
    "h.moveaxis((0, 1), 1)": lambda h: h.moveaxis((0, 1), 1),
    "torch.moveaxis(h, 0, [1])": lambda h: torch.moveaxis(h, 0, [1]),
    "h.movedim(source=(0, 1), destination=1)": lambda h: h.movedim(source=(0, 1), destination=1),
    "h.movedim((0, 1), destination=1)": lambda h: h.movedim((0, 1), destination=1),
    "h.movedim(destination=[1], source=0)": lambda h: h.movedim(destination=[1], source=0),
    "torch.movedim(input=h, source=0, destination=(1,))": lambda h: torch.movedim(input=h, source=0, destination=(1,)),
    "h.movedim((), 1)": lambda h: h.movedim((), 1),
    "h.movedim((0, 1, 2), 1)": lambda h: h.movedim((0, 1, 2), 1),
}

MATCHING = {
    "h.movedim(0, 1)": lambda h: h.movedim(0, 1),
    "h.movedim((0, 1), (1, 0))": lambda h: h.movedim((0, 1), (1, 0)),
    "h.movedim([0], [2])": lambda h: h.movedim([0], [2]),
}


def _torch_error(build):
    h = torch.tensor([[[1., 2, 3], [3, 4, 5]], [[5, 6, 7], [7, -8, 9]]], dtype=torch.float64, requires_grad=True) * 2
    try:
        build(h)
    except Exception as exc:   # noqa: BLE001 -- the error PyTorch raises is the expected value
        return type(exc).__name__, str(exc)
    return None


def _solve(call):
    return adjoint.loads(TEXT.replace("CALL", call)).solve().to_json()["variants"]["default"]


@pytest.mark.parametrize("call", sorted(MIXED))
def test_an_int_beside_a_sequence_is_the_parsers_type_error(call):
    want = _torch_error(MIXED[call])
    assert want is not None and want[0] == "TypeError"
    error = _solve(call).get("error")
    assert error is not None
    assert (error["type"], error["message"], error["during"]) == (*want, "forward")


@pytest.mark.parametrize("call", sorted(MATCHING))
def test_matching_overloads_still_permute(call):
    assert _torch_error(MATCHING[call]) is None
    got = _solve(call)
    assert got.get("error") is None
    assert got["values"]["a"]["grad_fn"] == "PermuteBackward0"


PARAM_TEXT = """
name: movedim_parameter
dtype: float64
inputs:
  x: {value: [[1, 2], [3, 4]]}
model:
  children:
    lin: {type: Linear, params: {weight: [[1, 2], [0.5, -1]], bias: [0.25, 0]}}
  forward: |
    a = CALL
    return lin(x).sum() + a.sum()
"""

PARAM_CALLS = {   # the parser marks a Parameter against "Tensor input" (function form)
    "torch.movedim(lin.weight, (0,), 1)": lambda w: torch.movedim(w, (0,), 1),
    "torch.movedim(input=lin.weight, source=0, destination=(1,))":
        lambda w: torch.movedim(input=w, source=0, destination=(1,)),
    "lin.weight.movedim([0], 1)": lambda w: w.movedim([0], 1),
}


@pytest.mark.parametrize("call", sorted(PARAM_CALLS))
def test_a_parameter_input_is_worded_as_the_parser_words_it(call):
    w = torch.nn.Parameter(torch.tensor([[1., 2], [0.5, -1]], dtype=torch.float64))
    with pytest.raises(TypeError) as raised:
        PARAM_CALLS[call](w)
    error = adjoint.loads(PARAM_TEXT.replace("CALL", call)).solve().to_json()["variants"]["default"]["error"]
    assert (error["type"], error["message"]) == ("TypeError", str(raised.value))
