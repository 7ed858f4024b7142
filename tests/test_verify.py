"""``adjoint verify`` end to end (real torch), and ``compare`` on hand-made and corrupted JSON."""

import copy
import json
import subprocess
import sys

import pytest

import adjoint
from adjoint import ProblemError
from adjoint.torchside import verify
from adjoint.torchside.compare import compare, compare_fd

SLINEAR = "problems/slinear.yaml"


def run_quiet(files, **kw):
    out: list[str] = []
    args = dict(dtype=None, as_json=False, fd=False, variant=None)
    args.update(kw)
    code = verify.run(files, echo=out.append, **args)
    return code, "\n".join(out)


@pytest.mark.torch
@pytest.mark.parametrize("dtype, name", [("float32", "torch.FloatTensor"), ("float64", "torch.DoubleTensor")])
def test_dtype_override_predicts_in_that_dtype(dtype, name):
    """--dtype float32 on a float64 file: the prediction is made in float32 too, so a version error
    names torch.FloatTensor, as PyTorch's float32 run does (it said torch.DoubleTensor)."""
    path = "tests/data/regressions/hook_bodies_name_parameters_by_path.yaml"
    code, text = run_quiet([path], dtype=dtype, variant="fwd_hook_write_param_nograd")
    assert code == 0, text
    problem = adjoint.load(path)
    from dataclasses import replace
    out = replace(problem, dtype=dtype).solve(variant="fwd_hook_write_param_nograd").variants[0].to_json()
    assert f"[{name} [2, 2]]" in out["error"]["message"]


def value(shape, v):
    return {"shape": shape, "value": v}


# ----------------------------------------------------------------------------- run()

@pytest.mark.torch
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_slinear_passes(dtype):
    code, text = run_quiet([SLINEAR], dtype=dtype)
    assert code == 0, text
    assert text.splitlines()[-1].startswith("OK: 1 problem, 3 variants")
    for variant in ("full", "rescaled", "legacy"):
        assert f"== slinear :: {variant}  [{dtype}" in text
    assert "MISMATCH" not in text


@pytest.mark.torch
def test_fd_agrees_on_slinear():
    code, text = run_quiet([SLINEAR], fd=True, as_json=True)
    assert code == 0
    doc = json.loads(text)
    rows = {(r["variant"], row["item"]): row for r in doc["results"] for row in r["rows"] if row["section"] == "fd"}
    assert rows[("full", "fd x")]["ok"] and not rows[("full", "fd x")]["skipped"]
    assert rows[("full", "fd x")]["max_rel"] < 1e-6
    # a hook that returns a replacement gradient: FD measures the true derivative, so it is skipped
    skipped = [row for (v, _), row in rows.items() if v == "rescaled"]
    assert skipped and all(row["skipped"] for row in skipped)


@pytest.mark.torch
def test_fd_at_a_kink_is_inconclusive_not_a_mismatch(tmp_path):
    path = tmp_path / "kink.yaml"
    path.write_text("name: kink\ninputs:\n  x: {value: [0, 1], requires_grad: true}\n"
                    "model: {forward: \"relu(x) * 2\"}\nloss: \"sum(y)\"\n")
    code, text = run_quiet([str(path)], fd=True)
    assert code == 0, text
    assert "inconclusive: the forward passes a kink" in text and "relu'(0) = 0" in text
    assert "x[0]: predicted 0, finite differences 0.99999" in text   # FD sees the averaged slope 1


def corrupt_grad_input(vp, loc=None):
    doc = copy.deepcopy(vp.to_json())
    if doc["hook_calls"]:
        arg = doc["hook_calls"][0]["args"]["grad_input"][0]
        arg["value"] = [arg["value"][0] * 1.01]
        arg["exact"] = ["corrupted"]
    return doc


@pytest.mark.torch
def test_corrupted_prediction_fails_run(monkeypatch):
    monkeypatch.setattr(verify, "predicted_json", corrupt_grad_input)
    code, text = run_quiet([SLINEAR], variant="full")
    assert code == 1
    assert "#1 full_backward@f1 hook 0 'SLinear full hook'" in text
    assert "grad_input[0][0]: predicted -0.4120402852, observed -0.40796065" in text
    assert text.splitlines()[-1].startswith("FAILED: 1 problem, 1 variant")


@pytest.fixture(scope="module")
def slinear_pair():
    from adjoint.torchside import run_variant

    problem = adjoint.load(SLINEAR)
    pred = problem.solve().variant("full").to_json()
    obs = run_variant(problem, problem.variant("full"), "float32")
    return pred, obs


@pytest.mark.torch
def test_compare_names_the_corrupted_value(slinear_pair):
    pred, obs = slinear_pair
    assert all(r.ok for r in compare(pred, obs, "float32"))
    bad = copy.deepcopy(pred)
    bad["hook_calls"][0]["args"]["grad_output"][0]["value"] = [-1.85]
    (row,) = [r for r in compare(bad, obs, "float32") if not r.ok]
    assert row.section == "hook_calls"
    assert row.item == "#1 full_backward@f1 hook 0 'SLinear full hook'"
    assert "grad_output[0][0]: predicted -1.85, observed -1.847648" in row.detail


@pytest.mark.torch
def test_compare_dropped_and_extra_calls(slinear_pair):
    pred, obs = slinear_pair
    dropped = copy.deepcopy(pred)
    dropped["hook_calls"] = []
    (row,) = [r for r in compare(dropped, obs, "float32") if not r.ok]
    assert "PyTorch called it but it was not predicted" in row.detail and "full_backward@f1" in row.item
    extra = copy.deepcopy(pred)
    ghost = copy.deepcopy(pred["hook_calls"][0])
    ghost.update(hook=7, kind="hook", target="x", label="ghost")
    extra["hook_calls"].append(ghost)
    (row,) = [r for r in compare(extra, obs, "float32") if not r.ok]
    assert row.item.startswith("#2 hook@x hook 7 'ghost'") and "predicted but PyTorch never called it" in row.detail


def test_compare_out_of_order():
    a = {"hook": 0, "label": "a", "kind": "hook", "target": "x", "args": {"grad": value([1], [1.0])}, "returned": None}
    b = {"hook": 1, "label": "b", "kind": "hook", "target": "z", "args": {"grad": value([1], [2.0])}, "returned": None}
    rows = compare({"hook_calls": [a, b]}, {"hook_calls": [b, a]}, "float64")
    bad = [r for r in rows if not r.ok]
    assert bad and all("another position in the firing order" in r.detail for r in bad)


def test_compare_none_pattern_and_shapes():
    pred = {"grads": {"x": None, "w": value([2], [0.0, 0.0]), "v": value([2], [1.0, 2.0])}}
    obs = {"grads": {"x": value([1], [0.0]), "w": None, "v": value([1, 2], [[1.0, 2.0]])}}
    rows = {r.item: r for r in compare(pred, obs, "float32")}
    assert "predicted None, observed tensor[1]" in rows["grad x"].detail   # zeros are not None
    assert "predicted tensor[2] [0, 0], observed None" in rows["grad w"].detail
    assert "predicted shape [2], observed shape [1, 2]" in rows["grad v"].detail
    tup = {"hook_calls": [{"hook": 0, "label": "h", "kind": "full_backward", "target": "m",
                           "args": {"grad_input": [None, value([1], [1.0])]}, "returned": None}]}
    obs_t = copy.deepcopy(tup)
    obs_t["hook_calls"][0]["args"]["grad_input"][0] = value([1], [0.0])
    (row,) = compare(tup, obs_t, "float32")
    assert not row.ok and "grad_input[0]: predicted None" in row.detail


def test_tolerance_fits_the_dtype():
    pred = {"loss": value([], 1.0)}
    close32 = {"loss": value([], 1.0 + 3e-7)}    # float32 rounding of a few ops
    assert all(r.ok for r in compare(pred, close32, "float32"))
    assert not all(r.ok for r in compare(pred, close32, "float64"))
    assert all(r.ok for r in compare(pred, {"loss": value([], 1.0 + 1e-13)}, "float64"))
    assert not all(r.ok for r in compare(pred, {"loss": value([], 1.0 + 1e-4)}, "float32"))
    # inf/nan agree only with themselves
    special = {"loss": value([3], [float("inf"), float("nan"), 1.0])}
    assert all(r.ok for r in compare(special, copy.deepcopy(special), "float32"))
    flipped = {"loss": value([3], [float("-inf"), float("nan"), 1.0])}
    assert not all(r.ok for r in compare(special, flipped, "float32"))


def test_overflow_is_explained():
    rows = compare({"loss": value([], 1e300)}, {"loss": value([], float("inf"))}, "float32")
    assert not rows[0].ok and "beyond float32's range" in rows[0].detail


def test_compare_fd_skips_and_zero_fills():
    pred = {"grads": {"x": value([1], [2.0]), "u": None}}
    fd = {"x": value([1], [2.0000001]), "u": value([1], [0.0]), "h": "not a leaf"}
    rows = {r.item: r for r in compare_fd(pred, fd)}
    assert rows["fd x"].ok and rows["fd u"].ok and rows["fd h"].skipped


def test_compare_does_not_import_torch():
    code = "import sys, adjoint.torchside.compare, adjoint.torchside.verify; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_unknown_variant_is_bad_input():
    with pytest.raises(ProblemError):
        run_quiet([SLINEAR], variant="nope")


# ----------------------------------------------------------------------------- CLI

def cli(*args):
    return subprocess.run([sys.executable, "-m", "adjoint.cli", "verify", *args], capture_output=True, text=True)


@pytest.mark.torch
def test_cli_problems_directory_passes():
    out = cli("problems/", "--json")
    doc = json.loads(out.stdout)
    failing = [(r["problem"], r["variant"], [row for row in r["rows"] if not row["ok"]])
               for r in doc["results"] if not r["ok"]]
    assert out.returncode == 0, failing
    assert doc["summary"]["ok"] and doc["summary"]["problems"] >= 7
    assert {r["problem"] for r in doc["results"]} >= {"slinear", "tensor_hooks", "custom_function"}


def test_cli_bad_input_is_one_line_exit_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\ninputs: {x: [1]}\nmodel: {type: Linar}\n")
    out = cli(str(bad), str(SLINEAR))
    assert out.returncode == 2
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{bad}:3:") and "Linear" in lines[0]


@pytest.mark.torch
@pytest.mark.parametrize("path", ["tests/data/engine_unary_need.yaml", "tests/data/engine_relu_mask.yaml"])
def test_former_engine_disagreements(path):
    # verify flagged these before the engine fix in c23946e (single-input VJPs ignored `need`; relu's VJP
    # multiplied where torch selects); they must keep passing
    code, text = run_quiet([path], dtype="float64")
    assert code == 0, text


@pytest.mark.torch
def test_progress_is_reported_per_variant_when_many():
    """The CLI hands run() a progress bar; run() advances it once per variant, from 8 variants on."""
    import glob
    import os

    class Recorder:
        def __init__(self, total):
            self.total, self.items, self.finished = total, [], False

        def update(self, n, item):
            self.items.append(item)

        def finish(self):
            self.finished = True

    made = []

    def factory(total):
        made.append(Recorder(total))
        return made[-1]

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    files = sorted(glob.glob(os.path.join(root, "problems", "*.yaml")))
    lines = []
    assert verify.run(files, None, False, False, None, lines.append, progress=factory) == 0
    (bar,) = made
    assert bar.total == len(bar.items) >= 8 and bar.finished
    assert "adjoint_chain::default" in bar.items and any(i.startswith("slinear::") for i in bar.items)
    made.clear()
    assert verify.run(files[:1], None, False, False, None, lines.append, progress=factory) == 0
    assert made == []   # a single file's few variants: no bar
