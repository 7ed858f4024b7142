"""PyTorch's own hook tests, ported: every tests/pytorch/*.yaml is solved by adjoint and
compared call by call with its hand-written torch reference (tests/pytorch/references.py).

The references re-run PyTorch's tests (test/nn/test_module_hooks.py, the hook and engine
tests of test/test_autograd.py) by hand in real torch, float64; docs/pytorch-tests.md lists
every test, its problem file(s), and why a test is left out. A reference is written from
PyTorch's test, never from adjoint's output.

Files the engine cannot solve yet are listed in PENDING (file stem -> what is missing) and
xfail strictly: the day one starts passing, the suite says so and the entry must go.

Comparison (lenient only where the contract is): hook calls in order, each with the same
kind, target, hook index, call number, ``global``/``raised``/``node`` marks, argument names,
None-versus-tensor pattern, shapes and values (rtol 1e-10, atol 1e-12: both sides are exact
or float64); the free-text ``label`` is not compared. Then ``grads``, ``returned``,
``passes``, ``error`` (type, exact message, during, after_call), the ``values`` the
reference reports (only those its PyTorch test asserts on), the ``reads`` of read steps (every
field the reference gives) and, when it reports them, the ``warnings`` (category and message,
in order).
"""

from __future__ import annotations

import glob
import math
import os
import re
import sys
import warnings

import pytest

import adjoint
from adjoint.format.loader import YMap, YScalar, YSeq, read_yaml

HERE = os.path.dirname(os.path.abspath(__file__))
PORTS = os.path.join(HERE, "pytorch")
DOC = os.path.join(os.path.dirname(HERE), "docs", "pytorch-tests.md")
sys.path.insert(0, PORTS)

import references  # noqa: E402  (tests/pytorch/references.py)

warnings.filterwarnings("ignore", category=UserWarning)
warnings.filterwarnings("ignore", category=FutureWarning)

FILES = sorted(glob.glob(os.path.join(PORTS, "*.yaml")))
STEMS = [os.path.splitext(os.path.basename(f))[0] for f in FILES]
RTOL, ATOL = 1e-10, 1e-12

#: Ports the engine cannot solve yet: file stem -> the contract features it is missing.
PENDING: dict[str, str] = {}


# ----------------------------------------------------------------------------- comparing

def _close(a: float, b: float) -> bool:
    if isinstance(a, float) and isinstance(b, float) and (math.isnan(a) or math.isnan(b)):
        return math.isnan(a) and math.isnan(b)
    return a == b or abs(a - b) <= ATOL + RTOL * abs(b)


def _flat(x):
    if isinstance(x, list):
        for e in x:
            yield from _flat(e)
    else:
        yield x


def diff_value(pred, ref, where: str) -> list[str]:
    """Differences between a predicted and an observed VALUE / list of VALUEs / number."""
    if ref is None or pred is None:
        return [] if ref is None and pred is None else [f"{where}: predicted {_brief(pred)}, torch {_brief(ref)}"]
    if isinstance(ref, list):
        if not isinstance(pred, list) or len(pred) != len(ref):
            return [f"{where}: predicted {_brief(pred)}, torch a tuple of {len(ref)}"]
        out = []
        for i, (p, r) in enumerate(zip(pred, ref)):
            out += diff_value(p, r, f"{where}[{i}]")
        return out
    if isinstance(ref, dict) and "shape" in ref:
        if not isinstance(pred, dict) or "shape" not in pred:
            return [f"{where}: predicted {_brief(pred)}, torch a tensor"]
        if list(pred["shape"]) != list(ref["shape"]):
            return [f"{where}: shape {pred['shape']} predicted, {ref['shape']} in torch"]
        pv, rv = list(_flat(pred.get("value"))), list(_flat(ref["value"]))
        bad = [i for i, (p, r) in enumerate(zip(pv, rv)) if p is None or not _close(float(p), float(r))]
        if bad:
            i = bad[0]
            return [f"{where}: element {i} predicted {pv[i]}, torch {rv[i]} ({len(bad)} of {len(rv)} differ)"]
        return []
    if isinstance(ref, dict):
        if not isinstance(pred, dict) or set(pred) != set(ref):
            return [f"{where}: predicted keys {sorted(pred) if isinstance(pred, dict) else pred}, torch {sorted(ref)}"]
        out = []
        for k in ref:
            out += diff_value(pred[k], ref[k], f"{where}.{k}")
        return out
    if isinstance(pred, dict) and "value" in pred:   # a number in torch, a 0-d VALUE predicted
        pred = pred["value"]
    return [] if _close(float(pred), float(ref)) else [f"{where}: predicted {pred}, torch {ref}"]


def _brief(x) -> str:
    if x is None:
        return "None"
    if isinstance(x, dict) and "shape" in x:
        return f"a tensor of shape {x['shape']}"
    if isinstance(x, list):
        return f"a tuple of {len(x)}"
    return repr(x)


_MARKS = (("hook", None), ("kind", None), ("target", None), ("call", 1), ("global", False),
          ("raised", False), ("silenced", False))


def diff_calls(pred: list, ref: list, where: str) -> list[str]:
    out = []
    if len(pred) != len(ref):
        out.append(f"{where}: {len(pred)} calls predicted, {len(ref)} in torch\n"
                   f"    predicted: {_sketch(pred)}\n    torch:     {_sketch(ref)}")
    for i, (p, r) in enumerate(zip(pred, ref)):
        at = f"{where}[{i}] ({r['kind']} on {r['target']})"
        for key, default in _MARKS:
            if p.get(key, default) != r.get(key, default):
                out.append(f"{at}: {key} {p.get(key, default)!r} predicted, {r.get(key, default)!r} in torch")
        if "node" in r and p.get("node") != r["node"]:
            out.append(f"{at}: node {p.get('node')!r} predicted, {r['node']!r} in torch")
        if set(p.get("args", {})) != set(r["args"]):
            out.append(f"{at}: arguments {sorted(p.get('args', {}))} predicted, {sorted(r['args'])} in torch")
        else:
            for name in r["args"]:
                out += diff_value(p["args"][name], r["args"][name], f"{at}.{name}")
        out += diff_value(p.get("returned"), r["returned"], f"{at}.returned")
        if len(out) > 12:
            break
    return out


def _sketch(calls: list) -> str:
    return ", ".join(f"{c['kind']}@{c['target']}" for c in calls)


def diff_table(pred: dict | None, ref: dict, where: str) -> list[str]:
    pred = pred or {}
    out = []
    if set(pred) != set(ref):
        out.append(f"{where}: predicted {sorted(pred)}, torch {sorted(ref)}")
    for name in sorted(set(pred) & set(ref)):
        out += diff_value(pred[name], ref[name], f"{where}[{name}]")
    return out


def diff_variant(pred: dict, ref: dict, variant: str) -> list[str]:
    out = []
    at = f"variant {variant}"
    if "error" in ref or "error" in pred:
        if "error" not in pred or "error" not in ref:
            out.append(f"{at}: error predicted {pred.get('error')}, torch {ref.get('error')}")
        elif pred["error"] != ref["error"]:
            out.append(f"{at}: error predicted {pred['error']}, torch raised {ref['error']}")
    out += diff_calls(pred.get("hook_calls", []), ref["hook_calls"], f"{at} hook_calls")
    if "grads" in ref:
        out += diff_table(pred.get("grads"), ref["grads"], f"{at} grads")
    if "returned" in ref:
        out += diff_table(pred.get("returned"), ref["returned"], f"{at} returned")
    if "passes" in ref:
        passes = pred.get("passes") or []
        if len(passes) != len(ref["passes"]):
            out.append(f"{at}: {len(passes)} backward passes predicted, {len(ref['passes'])} in torch")
        for k, (p, r) in enumerate(zip(passes, ref["passes"])):
            out += diff_calls(p.get("hook_calls", []), r["hook_calls"], f"{at} pass {k + 1} hook_calls")
            out += diff_table(p.get("grads"), r["grads"], f"{at} pass {k + 1} grads")
            out += diff_table(p.get("returned"), r["returned"], f"{at} pass {k + 1} returned")
            if "leaf_values" in r:   # leaves a hook body wrote in place, after this pass
                out += diff_table(p.get("leaf_values"), r["leaf_values"], f"{at} pass {k + 1} leaf_values")
    for name, value in ref.get("values", {}).items():
        out += diff_value((pred.get("values") or {}).get(name), value, f"{at} values[{name}]")
    for name, r in ref.get("reads", {}).items():   # read steps: every field the reference gives
        p = (pred.get("reads") or {}).get(name)
        if p is None:
            out.append(f"{at} reads[{name}]: not predicted")
            continue
        for key, value in r.items():
            if key == "value" and isinstance(value, dict):
                out += diff_value(p.get("value"), value, f"{at} reads[{name}].value")
            elif p.get(key) != value:
                out.append(f"{at} reads[{name}].{key}: predicted {p.get(key)!r}, torch {value!r}")
    if set(pred.get("reads") or {}) - set(ref.get("reads", {})):
        out.append(f"{at} reads: predicted {sorted(pred['reads'])}, torch {sorted(ref.get('reads', {}))}")
    if "leaf_values" in ref:   # leaves a hook body wrote in place, after the last pass
        out += diff_table(pred.get("leaf_values"), ref["leaf_values"], f"{at} leaf_values")
    if "registered" in ref:   # registered steps: len() of a module's hook dict at that point
        if pred.get("registered") != ref["registered"]:
            out.append(f"{at} registered: predicted {pred.get('registered')}, torch {ref['registered']}")
    if "warnings" in ref:   # the UserWarnings PyTorch issued: category and message, in order
        got = [{k: w[k] for k in ("category", "message")} for w in pred.get("warnings") or []]
        if got != ref["warnings"]:
            out.append(f"{at} warnings: predicted {got}, torch {ref['warnings']}")
    return out


def observed(stem: str) -> dict:
    """The reference's observation per variant name ("default" when the file has none)."""
    obs = getattr(references, stem)()
    return obs if "hook_calls" not in obs else {"default": obs}


# ----------------------------------------------------------------------------- the ports

#: Ports where PyTorch raises but the contract makes the file bad input (exit 2, one located line;
#: v1's answer, kept): file stem -> what the line says.
BAD_INPUT: dict[str, str] = {
}


@pytest.mark.parametrize("stem", sorted(BAD_INPUT))
def test_port_is_bad_input(stem):
    with pytest.raises(adjoint.ProblemError) as info:
        adjoint.load(os.path.join(PORTS, stem + ".yaml")).solve()
    assert BAD_INPUT[stem] in info.value.line()
    assert all("error" in obs for obs in observed(stem).values())  # and PyTorch does raise there


def _params():
    for stem in STEMS:
        if stem in BAD_INPUT:
            continue
        marks = [pytest.mark.xfail(strict=True, reason=PENDING[stem])] if stem in PENDING else []
        yield pytest.param(stem, marks=marks, id=stem)


@pytest.mark.parametrize("stem", list(_params()))
def test_port_matches_torch(stem):
    prediction = adjoint.load(os.path.join(PORTS, stem + ".yaml")).solve().to_json()
    ref = observed(stem)
    assert set(prediction["variants"]) == set(ref), \
        f"variants: predicted {sorted(prediction['variants'])}, reference {sorted(ref)}"
    problems = []
    for name, obs in ref.items():
        problems += diff_variant(prediction["variants"][name], obs, name)
    assert not problems, "\n".join(problems)


def test_pending_entries_name_existing_files():
    assert sorted(set(PENDING) - set(STEMS)) == []


# ----------------------------------------------------------------------------- the references

def _check_value(v, where):
    if v is None or isinstance(v, (int, float)):
        return
    if isinstance(v, list):
        for i, e in enumerate(v):
            _check_value(e, f"{where}[{i}]")
        return
    assert isinstance(v, dict), f"{where}: {v!r} is not a VALUE"
    if "shape" not in v:
        for k, e in v.items():
            _check_value(e, f"{where}.{k}")
        return
    assert set(v) == {"shape", "value"}, f"{where}: VALUE keys {sorted(v)}"
    assert math.prod(v["shape"]) == len(list(_flat(v["value"]))), f"{where}: shape and value disagree"


CALL_KEYS = {"hook", "kind", "target", "args", "returned", "call", "global", "raised", "silenced", "node"}
KINDS = {"forward_pre", "forward", "full_backward_pre", "full_backward", "backward", "hook", "pre",
         "post", "post_accumulate_grad", "multi_grad", "pack", "unpack"}
ARGS = {"forward_pre": {"input"}, "forward": {"input", "output"}, "full_backward_pre": {"grad_output"},
        "full_backward": {"grad_input", "grad_output"}, "backward": {"grad_input", "grad_output"},
        "hook": {"grad"}, "pre": {"grad_outputs"}, "post": {"grad_inputs", "grad_outputs"},
        "post_accumulate_grad": {"tensor"}, "pack": {"x"}, "unpack": {"x"}}


def _check_calls(calls, where):
    assert isinstance(calls, list), f"{where} is not a list"
    for i, c in enumerate(calls):
        at = f"{where}[{i}]"
        assert CALL_KEYS >= set(c) >= {"hook", "kind", "target", "args", "returned"}, f"{at}: keys {sorted(c)}"
        assert c["kind"] in KINDS, f"{at}: kind {c['kind']}"
        names = set(c["args"]) - {"kwargs"}
        if c["kind"] == "multi_grad":
            assert names in ({"grads"}, {"grad"}), f"{at}: args {sorted(names)}"
        else:
            assert names == ARGS[c["kind"]], f"{at}: args {sorted(names)} for {c['kind']}"
        for name, v in c["args"].items():
            _check_value(v, f"{at}.args.{name}")
        _check_value(c["returned"], f"{at}.returned")


@pytest.mark.parametrize("stem", STEMS)
def test_reference_runs_and_is_well_formed(stem):
    """Every reference runs green in torch now and answers in the contract's JSON shape."""
    for variant, obs in observed(stem).items():
        where = f"{stem}/{variant}"
        assert set(obs) <= {"hook_calls", "grads", "returned", "passes", "error", "values", "warnings",
                            "leaf_values", "registered", "reads"}, sorted(obs)
        _check_calls(obs["hook_calls"], f"{where} hook_calls")
        for key in ("grads", "returned", "values", "leaf_values"):
            for name, v in obs.get(key, {}).items():
                _check_value(v, f"{where} {key}[{name}]")
        for k, p in enumerate(obs.get("passes", [])):
            assert set(p) - {"leaf_values"} == {"hook_calls", "grads", "returned"}
            _check_calls(p["hook_calls"], f"{where} pass {k + 1}")
        if "error" in obs:
            e = obs["error"]
            assert set(e) == {"type", "message", "during", "after_call"} and \
                e["during"] in ("register", "forward", "backward", "read")
            assert e["after_call"] is None or 0 <= e["after_call"] < len(obs["hook_calls"])


# ----------------------------------------------------------------------------- the files

def _plain(node):
    if isinstance(node, YMap):
        return {k.text: _plain(v) for k, v in node.entries}
    if isinstance(node, YSeq):
        return [_plain(v) for v in node.items]
    assert isinstance(node, YScalar)
    return node.text


@pytest.mark.parametrize("stem", STEMS)
def test_file_is_a_wellformed_port(stem):
    """YAML syntax (adjoint's own reader: no tags, bounded aliases), the contract's
    top-level keys, ``name`` = file stem, a description naming the PyTorch test it
    ports, and one reference function of the same name."""
    top = _plain(read_yaml(os.path.join(PORTS, stem + ".yaml")))
    assert set(top) <= {"name", "description", "inputs", "model", "targets", "loss", "hooks", "variants",
                        "backward", "symbols", "dtype", "steps", "init"}, sorted(top)
    assert top["name"] == stem and re.fullmatch(r"[a-z0-9_-]+", stem)
    assert top.get("dtype") == ("float32" if stem.endswith("__float32") else "float64"), \
        "references run in float64 (a test's float32 case: a __float32 file)"
    test = stem.split("__")[0]
    assert test in " ".join(top.get("description", "").split()).lower(), f"the description should name {test}"
    assert callable(getattr(references, stem, None)), f"references.py has no function {stem}()"


def test_every_reference_has_a_file():
    funcs = {n for n in dir(references) if n.startswith("test_")}
    assert sorted(funcs - set(STEMS)) == []


def test_table_lists_every_file():
    """docs/pytorch-tests.md names every problem file, and names no file that is missing."""
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    named = set(re.findall(r"`(test_[a-z0-9_]+)\.yaml`", text))
    assert sorted(set(STEMS) - named) == [], "files missing from the table"
    assert sorted(named - set(STEMS)) == [], "the table names files that do not exist"
