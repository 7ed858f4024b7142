"""Two UserWarnings PyTorch issues that the answer lacked: ``nn.Softmax()`` / ``nn.LogSoftmax()``
built without ``dim`` and ``F.softmax(x)`` without ``dim`` (F._get_softmax_dim, at each call; the
functional form was refused) and ``x.T`` of a tensor that is not 2-D
(a TORCH_WARN_ONCE: once per process). Found by a contract audit; the expected warnings are
real torch's, each case run in a fresh process here."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import require_torch

require_torch()

import adjoint  # noqa: E402

SOFTMAX = """
name: implicit_dim
inputs:
  x: {value: [[1, 2, 3], [0.5, -1, 2]], requires_grad: true}
model:
  children:
    sm: {type: Softmax}
    lsm: {type: LogSoftmax}
  forward: |
    a = sm(x)
    b = lsm(x)
    c = sm(x * 2)
    d = F.softmax(x)
    e = log_softmax(x * 3)
    return (a * b).sum() + c.sum() + (d * e).sum()
"""

TRANSPOSE = """
name: t_not_2d
inputs:
  x: {value: [[[1, 2], [3, 4]]], requires_grad: true}
  v: {value: [1, -2, 3], requires_grad: true}
model:
  inputs: [x, v]
  forward: |
    a = x.T
    b = v.T
    m = x[0].T
    return (a * 2).sum() + (b * b).sum() + m.sum()
"""

SCRIPTS = {
    "softmax": """
import torch
x = torch.tensor([[1., 2, 3], [0.5, -1, 2]], requires_grad=True)
sm, lsm = torch.nn.Softmax(), torch.nn.LogSoftmax()
a = sm(x); b = lsm(x); c = sm(x * 2)
d = torch.nn.functional.softmax(x); e = torch.nn.functional.log_softmax(x * 3)
((a * b).sum() + c.sum() + (d * e).sum()).backward()
""",
    "transpose": """
import torch
x = torch.tensor([[[1., 2], [3, 4]]], requires_grad=True)
v = torch.tensor([1., -2, 3], requires_grad=True)
a = x.T; b = v.T; m = x[0].T
((a * 2).sum() + (b * b).sum() + m.sum()).backward()
""",
}


def _torch_warnings(name: str) -> list[str]:
    code = ("import warnings, json\nwarnings.simplefilter('always')\n"
            "with warnings.catch_warnings(record=True) as caught:\n    warnings.simplefilter('always')\n"
            + "".join(f"    {line}\n" for line in SCRIPTS[name].strip().splitlines())
            + "print(json.dumps([str(w.message) for w in caught]))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.parametrize("name, text", [("softmax", SOFTMAX), ("transpose", TRANSPOSE)])
def test_the_warnings_are_torchs(name, text):
    got = adjoint.loads(text).solve().to_json()["variants"]["default"]["warnings"]
    want = _torch_warnings(name)
    assert [w["message"] for w in got] == want
    assert all(w["category"] == "UserWarning" for w in got)
    assert len(want) == (5 if name == "softmax" else 1)
