"""`solve --json` streams its text (jsontext.dump over Prediction.to_json(lazy=True)): the same
bytes as the whole text made at once (json.dumps of the plain to_json()), on stdout and with -o."""

import json
import math

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

import adjoint
from adjoint.cli import main
from adjoint.render import jsontext
from adjoint.render.jsontext import dump, dumps, finite

FILES = ["problems/mlp_relu.yaml", "problems/complex_layer.yaml", "problems/ddp.yaml", "problems/symbolic.yaml",
         "problems/custom_function.yaml", "problems/v2/saved_tensors.yaml", "problems/hessian_vector.yaml",
         "tests/data/regressions/backward_call_errors.yaml", "tests/data/regressions/bool_neg_raises.yaml"]


def _streamed(doc, spill: int, monkeypatch) -> str:
    monkeypatch.setattr(jsontext, "SPILL_PARTS", spill)
    pieces: list[str] = []
    dump(doc, pieces.append)
    return "".join(pieces)


def _defer(doc, draw):
    """``doc`` with some of its values replaced by callables returning them."""
    if isinstance(doc, dict):
        doc = {k: _defer(v, draw) for k, v in doc.items()}
    elif isinstance(doc, list):
        doc = [_defer(v, draw) for v in doc]
    return (lambda: doc) if draw(st.booleans()) else doc


_scalars = (st.none() | st.booleans() | st.integers(-10 ** 30, 10 ** 30)
            | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=8))
_docs = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=5)
                     | st.dictionaries(st.text(max_size=6), inner, max_size=5), max_leaves=40)


@settings(max_examples=200, deadline=None, database=None)
@given(_docs, st.data(), st.sampled_from([1, 3, 2048]))
def test_dump_writes_what_json_dumps_writes(doc, data, spill):
    pieces: list[str] = []
    old = jsontext.SPILL_PARTS
    jsontext.SPILL_PARTS = spill
    try:
        dump(_defer(doc, data.draw), pieces.append)
    finally:
        jsontext.SPILL_PARTS = old
    assert "".join(pieces) == json.dumps(finite(doc), indent=2, allow_nan=False)


def test_deferred_rows_and_specials(monkeypatch):
    doc = {"value": lambda: [[0.5, -0.0], [math.inf, 2.5]], "exact": lambda: None, "k": [lambda: "1/3"]}
    plain = {"value": [[0.5, -0.0], [math.inf, 2.5]], "exact": None, "k": ["1/3"]}
    assert _streamed(doc, 1, monkeypatch) == json.dumps(finite(plain), indent=2) == dumps(doc)


@pytest.mark.parametrize("mode", ["exact", "float64", "structure"])
def test_streamed_prediction_is_the_old_text(mode, monkeypatch):
    for path in FILES:
        if mode != "exact" and path.endswith(("symbolic.yaml", "ddp.yaml", "complex_layer.yaml")):
            continue
        pred = adjoint.load(path).solve(mode=mode)
        old = json.dumps(finite(pred.to_json()), indent=2, allow_nan=False)
        assert old == dumps(pred.to_json())                     # the text before streaming
        assert _streamed(pred.to_json(lazy=True), 7, monkeypatch) == old, path


def test_cli_stdout_and_file_are_the_old_text(tmp_path):
    paths = FILES[:3]
    one = CliRunner().invoke(main, ["solve", "--json", paths[0]])
    assert one.exit_code == 0, one.output
    assert one.output == dumps(adjoint.load(paths[0]).solve().to_json()) + "\n"
    many = CliRunner().invoke(main, ["solve", "--json", *paths])
    assert many.exit_code == 0, many.output
    expected = json.dumps([finite(adjoint.load(p).solve().to_json()) for p in paths], indent=2) + "\n"
    assert many.output == expected
    out = tmp_path / "answer.json"
    wrote = CliRunner().invoke(main, ["solve", "--json", *paths, "-o", str(out)])
    assert wrote.exit_code == 0, wrote.output
    assert out.read_text() == expected


def test_lists_of_strings_quoted_as_json_quotes_them():
    """A list of strings is quoted by concatenation when none needs an escape: the text is still
    json.dumps's, for plain digit texts and for every character json escapes."""
    plain = ["-123/456", "7", "tanh(3/8)", " ~!"]
    docs = [plain, ["x" * 5000, "1/2"]] + [[*plain, c] for c in ('"', "\\", "\n", "\x00", "\x1f", "\x7f", "é", "\u2028")]
    docs.append(["ok", 1])   # a non-string among strings: the general path
    for doc in docs:
        assert dumps({"a": doc}) == json.dumps({"a": doc}, indent=2, allow_nan=False)


def test_a_deferred_tensor_written_again_at_other_levels(monkeypatch):
    """A deferred list that names its text (``Deferred.text_key``: one tensor in several places of
    an answer) is written once and its text written again, re-indented: the same bytes as
    json.dumps of the document with the list in each place; also past the memo's budget."""
    from adjoint.answer.prediction import Deferred

    rows = [[0.5, -0.25, 1e-300], [2.0, 3.5, -0.0]]
    made = []

    def make():
        made.append(1)
        return rows

    def doc(v, w):
        return {"a": v, "b": [{"c": {"d": [v]}}, w], "e": [[v]], "f": {"g": v}}

    plain = json.dumps(doc(rows, ["1/2", "x\ny"]), indent=2)
    value, exact = Deferred(make, ("t", "value")), Deferred(lambda: ["1/2", "x\ny"], ("t", "exact"))
    assert _streamed(doc(value, exact), 7, monkeypatch) == plain
    assert len(made) == 1
    monkeypatch.setattr(jsontext, "MEMO_CHARS", 10)
    made.clear()
    assert _streamed(doc(value, exact), 7, monkeypatch) == plain
    assert len(made) == 4
