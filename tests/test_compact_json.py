"""``solve --json --compact``: a rational tensor as its shared denominator and integer
numerators. The numbers below are worked out by hand; the corpus check compares the compact
document with the contract's, element by element."""

from __future__ import annotations

import glob
import json
import math
import os
from fractions import Fraction

from click.testing import CliRunner

from adjoint.cli import main
from adjoint.render.jsontext import dumps

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SQUARES = """\
name: squares
inputs:
  x: {value: [0.5, -0.25], requires_grad: true}
model:
  inputs: [x]
  forward: |
    return x * x * 3
loss: "sum(y)"
"""


def run(*args):
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_a_rational_tensor_over_its_shared_denominator(tmp_path):
    """x = [1/2, -1/4]: 3x^2 = [3/4, 3/16], loss 15/16, x.grad = 6x = [3, -3/2]."""
    path = tmp_path / "squares.yaml"
    path.write_text(SQUARES)
    code, out, _ = run("solve", str(path), "--json", "--compact")
    assert code == 0
    doc = json.loads(out)
    assert doc["compact"] is True
    answer = doc["variants"]["default"]
    # forward values also say requires_grad and grad_fn (x a leaf; 3 * x ** 2 a MulBackward0)
    assert answer["values"]["x"] == {"shape": [2], "den": "4", "num": [2, -1], "requires_grad": True,
                                     "grad_fn": None}
    assert {k: answer["values"]["model"][k] for k in ("shape", "den", "num")} == \
        {"shape": [2], "den": "16", "num": [12, 3]}
    assert answer["values"]["model"]["requires_grad"] is True
    assert answer["loss"] == {"shape": [], "den": "16", "num": 15}
    assert answer["grads"]["x"] == {"shape": [2], "den": "2", "num": [6, -3]}


def test_compact_needs_json(tmp_path):
    path = tmp_path / "squares.yaml"
    path.write_text(SQUARES)
    code, out, err = run("solve", str(path), "--compact")
    assert code == 2 and out == "" and "--compact is a form of --json's values" in err


def _pairs(contract, compact):
    """(contract VALUE, compact VALUE) for every tensor the compact document wrote compactly."""
    if isinstance(compact, dict) and "den" in compact and "num" in compact:
        yield contract, compact
    elif isinstance(compact, dict):
        assert isinstance(contract, dict) and contract.keys() == compact.keys() - {"compact"}
        for k in contract:
            yield from _pairs(contract[k], compact[k])
    elif isinstance(compact, list):
        assert isinstance(contract, list) and len(contract) == len(compact)
        for a, b in zip(contract, compact):
            yield from _pairs(a, b)
    else:
        assert contract == compact


def _flat(v):
    if isinstance(v, list):
        return [x for item in v for x in _flat(item)]
    return [v]


def test_the_corpus_says_the_same_in_both_forms():
    """Every problem file: each compact tensor's num[i] / den is the contract's exact element i,
    its -0.0 elements are the ones listed, and everything not written compactly is identical."""
    files = sorted(glob.glob(os.path.join(ROOT, "problems", "*.yaml")))
    code, contract_text, _ = run("solve", *files, "--json")
    assert code == 0
    code, compact_text, _ = run("solve", *files, "--json", "--compact")
    assert code == 0
    seen = 0
    for contract, compact in zip(json.loads(contract_text), json.loads(compact_text)):
        for full, short in _pairs(contract, compact):
            assert full["shape"] == short["shape"]
            den = int(short["den"])
            assert den > 0
            nums = _flat(short["num"])
            exact = [Fraction(s) for s in _flat(full["exact"])]
            assert [Fraction(n, den) for n in nums] == exact
            assert math.gcd(den, *nums) == 1   # lowest terms as a whole
            negative = [i for i, v in enumerate(_flat(full["value"])) if v == 0 and math.copysign(1, v) < 0]
            assert short.get("negative_zeros", []) == negative
            seen += 1
    assert seen > 100


def test_a_list_of_ints_is_written_as_json_writes_it():
    """The writer's fast path for numerators: ints joined; a bool among them (True is an int to
    Python) still written as true."""
    for doc in ([1, -2, 10 ** 40], [1, True, 0], [0, 1.5], [3, None], {"a": [7, 8]}):
        assert dumps(doc) == json.dumps(doc, indent=2)


def test_names_sharing_a_value_keep_their_own_grad_fn(tmp_path):
    """A root returning its child's output with a full backward hook on the root: lin's output is
    AddmmBackward0's, model and y are BackwardHookFunctionBackward's (one value, three names);
    --compact wrote the first name's grad_fn for all three."""
    path = tmp_path / "p.yaml"
    path.write_text("name: c\ndtype: float64\ninputs:\n  x: {value: [[1, -0.5]], requires_grad: true}\nmodel:\n"
                    "  children:\n    lin: {type: Linear, args: {in_features: 2, out_features: 2}, "
                    "params: {weight: [[1, 0], [0.5, 1]], bias: [0, 0]}}\n  forward: |\n    return lin(x)\n"
                    "loss: \"sum(y ** 2)\"\nhooks:\n  - {module: model, kind: full_backward}\n")
    metas = []
    for flags in ([], ["--compact"]):
        out = CliRunner().invoke(main, ["solve", str(path), "--json"] + flags).output
        values = json.loads(out)["variants"]["default"]["values"]
        metas.append({k: (v["requires_grad"], v["grad_fn"]) for k, v in values.items()})
    assert metas[0] == metas[1]
    assert metas[1]["y"][1] == "BackwardHookFunctionBackward" and metas[1]["lin"][1] == "AddmmBackward0"
