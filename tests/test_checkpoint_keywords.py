"""``checkpoint``'s keyword arguments, against real torch. Keywords meant for the function
(``checkpoint(f, h, s=2.0)``) are PyTorch's ValueError "Unexpected keyword arguments: s" in the
reentrant variant (``use_reentrant=True``, or left out: its UserWarning first), before the
function runs; ``debug=True`` there is the other ValueError; ``debug=False`` is checkpoint's
default and changes nothing. adjoint refused them all ("not modelled"; found in stop 50).
The expected errors, warnings and hook calls come from the torch runs here, never from adjoint.
tests/data/regressions/checkpoint_reentrant_keyword_arguments.yaml."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402

FILE = Path(__file__).parent / "data" / "regressions" / "checkpoint_reentrant_keyword_arguments.yaml"
LINE = "a = checkpoint(f, h, s=2.0, t=1.0, preserve_rng_state=True, early_stop=False, use_reentrant=True)"

# (the forward line's checkpoint keywords as the file writes them, the same call in torch)
CASES = {
    "function_keywords": ("s=2.0, t=1.0, preserve_rng_state=True, early_stop=False, use_reentrant=True",
                          lambda cp, f, h: cp(f, h, s=2.0, t=1.0, preserve_rng_state=True, early_stop=False,
                                              use_reentrant=True)),
    "without_use_reentrant": ("s=2.0, debug=True", lambda cp, f, h: cp(f, h, s=2.0, debug=True)),
    "reentrant_debug": ("2.0, debug=True, use_reentrant=True",
                        lambda cp, f, h: cp(f, h, 2.0, debug=True, use_reentrant=True)),
    "debug_false": ("2.0, use_reentrant=True, debug=False",
                    lambda cp, f, h: cp(f, h, 2.0, use_reentrant=True, debug=False)),
    "debug_false_non_reentrant": ("2.0, use_reentrant=False, debug=False",
                                  lambda cp, f, h: cp(f, h, 2.0, use_reentrant=False, debug=False)),
}


class F(torch.nn.Module):
    def forward(self, x, s):
        return (x * s).tanh()


def _torch(call):
    """The file's model in plain torch: (error type and message or None, warning messages,
    hook calls in order, x.grad)."""
    from torch.utils.checkpoint import checkpoint
    calls = []
    f = F()
    f.register_forward_pre_hook(lambda m, i: calls.append("f"))
    x = torch.tensor([1.0, -2.0], requires_grad=True)
    w = torch.tensor([0.5, 0.25], requires_grad=True)
    calls.append("model")   # the root's forward pre-hook, before its forward runs
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            a = call(checkpoint, f, x * w)
            (a * a).sum().backward()
        except ValueError as e:
            return ("ValueError", str(e)), [str(c.message) for c in caught], calls, None
    return None, [str(c.message) for c in caught], calls, x.grad.tolist()


@pytest.mark.parametrize("case", sorted(CASES))
def test_checkpoint_keywords_are_torchs(case):
    keywords, call = CASES[case]
    error, warned, calls, grad = _torch(call)
    text = FILE.read_text()
    assert LINE in text
    text = text.replace(LINE, f"a = checkpoint(f, h, {keywords})")
    answer = adjoint.loads(text).solve().to_json()["variants"]["default"]
    got_error = answer.get("error")
    assert ((got_error["type"], got_error["message"]) if got_error else None) == error
    assert [w["message"] for w in answer.get("warnings", [])] == warned
    assert [c["target"] for c in answer["hook_calls"]] == calls
    if grad is not None:
        assert answer["grads"]["x"]["value"] == pytest.approx(grad, rel=1e-6)
