"""The loader's fast path for lists of plain numbers (format/loader.py, ``parse_yaml_text``).

A one-line flow list of numbers is read by a regular expression and handed to libyaml as an
empty list of the same length; everything else about the file is libyaml's. The tree must be
the one PyYAML's own composer makes of the original text (every node's kind, line, column,
text and resolved type), and a file the fast path cannot take (a list inside a string or a
comment, an anchor, a tag, a syntax error) is read from its own text: PyYAML's verdict."""

from __future__ import annotations

import random

import pytest
import yaml

from adjoint.format import loader
from adjoint.format.errors import ProblemError

_KIND = {"tag:yaml.org,2002:" + k: k for k in ("str", "int", "float", "bool", "null")}


@pytest.fixture(autouse=True)
def _every_file_packed(monkeypatch):
    monkeypatch.setattr(loader, "_PACK_MIN_CHARS", 0)   # small texts take the fast path too


def _same(ours, theirs) -> None:
    """Our located tree against PyYAML's composed nodes (``yaml.compose``)."""
    assert (ours.loc.line, ours.loc.col) == (theirs.start_mark.line + 1, theirs.start_mark.column + 1)
    if isinstance(theirs, yaml.ScalarNode):
        assert isinstance(ours, loader.YScalar)
        assert (ours.text, ours.kind) == (theirs.value, _KIND[theirs.tag])
    elif isinstance(theirs, yaml.SequenceNode):
        assert isinstance(ours, loader.YSeq)
        assert len(ours.items) == len(theirs.value)
        for a, b in zip(ours.items, theirs.value):
            _same(a, b)
    else:
        assert isinstance(ours, loader.YMap)
        assert len(ours.entries) == len(theirs.value)
        for (ka, va), (kb, vb) in zip(ours.entries, theirs.value):
            _same(ka, kb)
            _same(va, vb)


VALID = [
    "a: [1, 2]  # [3, 4]\nb: 1\n",
    "a: \"[1, 2]\"\nb: [1, 2]\n",
    "a: 'x [1, 2] y'\nb: [1]\n",
    "a: x [1, 2]\nb: [3]\n",
    "a: [1_000, 0x1F, 0o17, 1e5, .5, -.5, +1, 1/4, 3., 1e, 1.e5, 1.5e-3, -0, 00, 09]\n",
    "a: [1, 2,]\nb: [ ]\nc: [1 ,2]\nd: [  7  ,  8  ]\n",
    "a: |\n  [1, 2]\n  x\nb: >\n  [3, 4]\nc: [5]\n",
    "a: [[1, 2], [3, 4]]\nb: [[[1]], [[2]]]\nc: [[1, 2] , [3, 4] ,]\n",
    "a: [[1, 2],\n  [3, 4]]\nb: [1,\n 2]\nc: [1, [2, 3]]\n",
    "a:\n- [1, 2]\n- [3, 4]\n- {w: [5, 6], v: [[7]]}\n",
    "a: &x [1, 2]\nb: *x\nc: !!seq [3]\nd: [4]\n",
    "a: [yes, no, on, ~, null, x1]\n",
    "a: [1,2]#c\nb: [3]\n",   # '#' right after ']': libyaml reads a comment
    "a: [1 2]\nb: [3]\n",     # one plain scalar '1 2'

    "a: {b: [1, 2], c: [3]}\nf: \"g[0, 1] + 1\"\n",
    "a: [1] # c\nb: [1]   \nc: [2]\n",
    "a: [" + ", ".join(str(i / 8) for i in range(-300, 300)) + "]\n",
]


@pytest.mark.parametrize("text", VALID, ids=range(len(VALID)))
def test_tree_is_pyyaml_composers(text):
    _same(loader.parse_yaml_text(text, "f.yaml"), yaml.compose(text, Loader=yaml.SafeLoader))


def test_a_tensor_file_takes_the_fast_path():
    """A weight matrix is read without a node per number, and reads as PyYAML reads it."""
    rng = random.Random(5)
    rows = ", ".join("[" + ", ".join(str(rng.randint(-8, 8) / 8) for _ in range(40)) + "]" for _ in range(30))
    text = f"name: t\ninputs:\n  w: {{value: [{rows}], requires_grad: true}}\n"
    packed = loader._number_lists(text, "f.yaml")
    assert packed is not None and len(packed[1]) == 1
    tree = loader.parse_yaml_text(text, "f.yaml")
    value = tree.get("inputs").get("w").get("value")
    assert all(type(row) is loader.YNumberRow for row in value.items)
    _same(tree, yaml.compose(text, Loader=yaml.SafeLoader))


INVALID = [
    "a: [1,,2]\n",
    "a: [1]x\n",
    "a: [1, 2] : x\n",
    "a: [1, 2]\nb: [1, 2]\na: [3]\n",
    "a: [1]\n  [2]\n",
    "a: {[1, 2]: 3}\n",
    "a: [2001-12-14]\n",
    "a: [[1], ",             # the file ends inside a list of lists
    "a: [[1], [2]",
]


@pytest.mark.parametrize("text", INVALID, ids=range(len(INVALID)))
def test_refused_as_without_the_fast_path(text):
    """Each is refused at the line PyYAML's own reading fails at (or, when PyYAML composes it, at
    a line of the text: a duplicate key, a list as a key, a timestamp)."""
    with pytest.raises(ProblemError) as err:
        loader.parse_yaml_text(text, "f.yaml")
    try:
        yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        assert err.value.loc.line == mark.line + 1
    else:
        assert 1 <= err.value.loc.line <= text.count("\n")


def test_limits_hold_on_packed_lists(monkeypatch):
    """The value budget and the nesting limit see the numbers of a packed list."""
    monkeypatch.setattr(loader, "MAX_NODES", 1000)
    with pytest.raises(ProblemError, match="more than 1000 YAML values"):
        loader.parse_yaml_text("a: [" + ", ".join(["1"] * 1000) + "]\n", "f.yaml")
    loader.parse_yaml_text("a: [" + ", ".join(["1"] * 998) + "]\n", "f.yaml")
    deep = "a: " + "[" * 65 + "1" + "]" * 65 + "\n"
    with pytest.raises(ProblemError, match="nested more than 64 deep"):
        loader.parse_yaml_text(deep, "f.yaml")
