"""A variant's name is any non-empty key, as written: the contract puts no rule on it (only the
top-level ``name`` has one). adjoint refused names outside [a-z0-9_-]+; now every place a name is
used takes it: the JSON's keys, --variant, the graph's file names (made safe and distinct) and the
LaTeX document's hint (quoted for a shell)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from adjoint.cli import _graph_targets, main

PROBLEM = Path(__file__).parent / "data" / "regressions" / "variant_names_as_written.yaml"
NAMES = ["Full", "with.dot", "1", "on", "a/b", "a_b", "two words"]


def test_every_name_is_answered_as_written():
    result = CliRunner().invoke(main, ["solve", "--json", str(PROBLEM)])
    assert result.exit_code == 0, result.output
    assert list(json.loads(result.stdout)["variants"]) == NAMES
    one = CliRunner().invoke(main, ["solve", "--json", "--variant", "two words", str(PROBLEM)])
    assert list(json.loads(one.stdout)["variants"]) == ["two words"]


def test_graph_file_names_are_safe_and_distinct():
    paths = [p for _, _, p in _graph_targets("p.yaml", "g.svg", None, NAMES + ["full"])]
    assert paths == ["g-Full.svg", "g-with.dot.svg", "g-1.svg", "g-on.svg", "g-a_b.svg", "g-a_b-2.svg",
                     "g-two_words.svg", "g-full-2.svg"]


def test_an_empty_name_is_refused(tmp_path):
    path = tmp_path / "e.yaml"
    path.write_text(PROBLEM.read_text().replace("  a_b: {}", '  "": {}'))
    result = CliRunner().invoke(main, ["solve", str(path)])
    assert result.exit_code == 2
    assert result.output.endswith("e.yaml:18:3: a variant name is empty; name it, e.g. full\n")
