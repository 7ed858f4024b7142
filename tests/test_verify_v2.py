"""``adjoint verify`` on contract v2: the PyTorch hook-test ports and problems/ end to end, the
v2 files of tests/data/ where the engine and PyTorch agree (and, strictly xfailed, where they
do not yet), and ``compare`` on hand-made v2 JSON (errors, passes, call marks, kwargs, int64)."""

from __future__ import annotations

import copy
import glob
import os
import sys

import pytest

from adjoint.torchside import verify
from adjoint.torchside.compare import compare

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def run_quiet(files, variant=None, dtype=None):
    out: list[str] = []
    code = verify.run(files, dtype, False, False, variant, out.append)
    return code, "\n".join(out)


# ----------------------------------------------------------------------------- end to end

def _port_files() -> list[str]:
    from test_pytorch_ports import BAD_INPUT, FILES, PENDING   # the ports the engine solves (see there)
    return [f for f in FILES if os.path.splitext(os.path.basename(f))[0] not in PENDING
            and os.path.splitext(os.path.basename(f))[0] not in BAD_INPUT]


@pytest.mark.torch
def test_pytorch_ports_and_problems_verify():
    files = _port_files() + sorted(glob.glob(os.path.join(os.path.dirname(HERE), "problems", "*.yaml")))
    code, text = run_quiet(files)
    assert code == 0, "\n".join(line for line in text.splitlines() if "MISMATCH" in line or "->" in line
                                or line.startswith(("==", "FAILED")))[:4000]
    assert text.splitlines()[-1].startswith(f"OK: {len(files)} problems")


DATA = os.path.join(HERE, "data", "verify_v2")
#: (file stem, variant): v2 files of tests/data whose prediction matches PyTorch.
AGREE = [("inplace", None), ("saved_inplace", None), ("errors", "freed"), ("saved", "whole"),
         ("saved", "scoped"), ("saved", "nested"), ("hooks", "prepend"),
         ("hooks", "global"), ("hooks", "multi"), ("hooks", "removes"),
         ("hooks", "raises"), ("errors", "stepped"), ("steps", None), ("reregister", None),
         ("tuples_and_views", None), ("multi_grad_passes", None), ("comparisons", None), ("hook_integer_inputs", None)]
#: Where the engine and PyTorch disagree today (findings for the engine; strict xfail: the day
#: one passes, the entry must go). Key: file stem::variant -> what differs.
DISAGREE: dict[str, str] = {}


@pytest.mark.torch
@pytest.mark.parametrize("stem, variant", AGREE + [(k.split("::")[0], None if k.endswith("::None") else k.split("::")[1])
                                                   for k in DISAGREE])
def test_v2_files_verify(stem, variant, request):
    key = f"{stem}::{variant}"
    if key in DISAGREE:
        request.applymarker(pytest.mark.xfail(strict=True, reason=DISAGREE[key]))
    code, text = run_quiet([os.path.join(DATA, stem + ".yaml")], variant=variant)
    assert code == 0, text[:3000]


# ----------------------------------------------------------------------------- compare on v2 JSON

def value(shape, v, dtype=None):
    out = {"shape": shape, "value": v}
    if dtype:
        out["dtype"] = dtype
    return out


CALL = {"hook": 0, "label": "h", "kind": "hook", "target": "x", "args": {"grad": value([1], [2.0])},
        "returned": None}
ERROR = {"type": "RuntimeError", "message": "boom", "during": "backward", "after_call": 0}


def rows_failing(pred, obs, dtype="float64"):
    return [r for r in compare(pred, obs, dtype) if not r.ok]


def test_matching_errors_compare_type_message_during_and_after_call():
    pred = {"error": dict(ERROR), "hook_calls": [dict(CALL, raised=True)]}
    obs = copy.deepcopy(pred)
    rows = compare(pred, obs, "float64")
    assert [r.section for r in rows] == ["run", "hook_calls"] and all(r.ok for r in rows)
    for key, other in (("message", "boom!"), ("during", "forward"), ("after_call", None), ("type", "ValueError")):
        bad = copy.deepcopy(obs)
        bad["error"][key] = other
        (row,) = rows_failing(pred, bad)
        assert row.section == "run" and row.detail == f"{key}: predicted {ERROR[key]!r}, observed {other!r}"


def test_an_error_on_one_side_only_is_a_mismatch():
    runs = {"loss": None, "values": {}, "grads": {}, "hook_calls": [dict(CALL)]}
    raises = {"error": dict(ERROR), "hook_calls": [dict(CALL)]}
    (row,) = rows_failing(runs, raises)
    assert row.detail == ("PyTorch raised RuntimeError: 'boom' during backward, after hook call #1; the prediction "
                          "says it runs")
    (row,) = rows_failing(raises, runs)
    assert row.detail.startswith("predicted PyTorch to raise RuntimeError: 'boom' during backward")
    assert row.detail.endswith("but it ran without error")


def test_passes_are_compared_pass_by_pass():
    def variant(g2):
        return {"loss": None, "values": {}, "grads": {"x": value([1], [g2])}, "hook_calls": [CALL, CALL],
                "passes": [{"hook_calls": [CALL], "grads": {"x": value([1], [1.0])}},
                           {"hook_calls": [CALL], "grads": {"x": value([1], [g2])}}]}
    assert not rows_failing(variant(2.0), variant(2.0))
    bad = rows_failing(variant(2.0), variant(3.0))
    assert [(r.section, r.item) for r in bad] == [("grads", "grad x"), ("passes", "pass 2: grad x")]
    short = variant(2.0)
    short["passes"] = short["passes"][:1]
    (row,) = rows_failing(variant(2.0), short)
    assert row.section == "passes" and row.detail == "predicted 2 backward passes, observed 1"


def test_call_marks_global_raised_node():
    base = {"loss": None, "values": {}, "grads": {}}
    for mark, p, o in (("global", True, None), ("raised", None, True), ("node", "MulBackward0", "ExpBackward0")):
        pc, oc = dict(CALL), dict(CALL)
        if p is not None:
            pc[mark] = p
        if o is not None:
            oc[mark] = o
        (row,) = rows_failing(dict(base, hook_calls=[pc]), dict(base, hook_calls=[oc]))
        assert row.section == "hook_calls" and row.detail.startswith(f"{mark}: predicted")


def test_kwargs_and_numbers():
    def call(scale, bias):
        return dict(CALL, kind="forward", args={"input": [value([1], [1.0])],
                                                "kwargs": {"scale": scale, "bias": bias},
                                                "output": value([1], [3.0])})
    base = {"loss": None, "values": {}, "grads": {}}
    same = dict(base, hook_calls=[call(3, value([1], [0.5]))])
    assert not rows_failing(same, copy.deepcopy(same))
    (row,) = rows_failing(same, dict(base, hook_calls=[call(4, value([1], [0.5]))]))
    assert "kwargs.scale: predicted 3, observed 4" in row.detail
    (row,) = rows_failing(same, dict(base, hook_calls=[call(3, None)]))
    assert "kwargs.bias: predicted tensor[1] [0.5], observed None" in row.detail
    zero_d = dict(base, hook_calls=[call(value([], 3.0), value([1], [0.5]))])   # a 0-d VALUE is its number
    assert not rows_failing(same, zero_d)


def test_int64_values_are_exact_and_dtypes_must_agree():
    def v(x, dtype="int64"):
        return {"loss": None, "grads": {}, "hook_calls": [], "values": {"t": value([2], x, dtype)}}
    assert not rows_failing(v([1, 0]), v([1, 0]))
    (row,) = rows_failing(v([1, 0]), v([1, 1]))
    assert row.detail == "t[1]: predicted 0, observed 1 (int64: compared exactly)"
    (row,) = rows_failing(v([1, 0], None), v([1, 0]))
    assert row.detail == "t: predicted dtype float64, observed int64"
    big = 2 ** 62 + 1   # beyond float64's integers: still exact
    (row,) = rows_failing(v([big, 0]), v([big - 1, 0]))
    assert "compared exactly" in row.detail


# ----------------------------------------------------------------------------- the torch side vs the ports' references

#: Ports whose hand-written reference and the torch side observe differently: stem -> why.
REFERENCE_DIFFERS: dict[str, str] = {}   # none left: the custom-error port's reference now says null too


def _loadable_ports():
    import adjoint
    from adjoint.format.errors import ProblemError
    from test_pytorch_ports import FILES
    out = []
    for f in FILES:
        stem = os.path.splitext(os.path.basename(f))[0]
        try:
            adjoint.load(f)
        except ProblemError:     # the validator refuses it today (PENDING in test_pytorch_ports)
            continue
        marks = [pytest.mark.xfail(strict=True, reason=REFERENCE_DIFFERS[stem])] if stem in REFERENCE_DIFFERS else []
        out.append(pytest.param(f, marks=marks, id=stem))
    return out


@pytest.mark.torch
@pytest.mark.parametrize("path", _loadable_ports())
def test_torch_side_observes_what_each_ports_reference_observes(path):
    """Every port the validator accepts, pending or not, run by the torch side: the same hook
    calls, grads, passes, errors and values as its hand-written PyTorch reference."""
    import adjoint
    from adjoint.torchside import run_variant
    from test_pytorch_ports import diff_variant, observed

    problem = adjoint.load(path)
    stem = os.path.splitext(os.path.basename(path))[0]
    problems = []
    for name, ref in observed(stem).items():
        problems += diff_variant(run_variant(problem, problem.variant(name), problem.dtype), ref, name)
    assert not problems, "\n".join(p.replace("predicted", "torch side") for p in problems)
