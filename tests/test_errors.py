"""Bad input: one line `FILE:LINE:COL: what is wrong; what would be right`, exit 2, no
traceback, nothing written -- for solve, latex and verify.

tests/errors/*.yaml holds one file per failure mode; its last line `# expect: L:C: message`
is the exact expected message (locations counted by hand; messages reviewed). A line
`# commands: ...` restricts the commands a file is run with."""

import glob
import os
import time

import pytest
from click.testing import CliRunner

from adjoint.cli import main

CORPUS = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "errors", "*.yaml")))
#: Files with several independent mistakes: every one is reported, one located line each, in file order.
MULTI = sorted(glob.glob(os.path.join(os.path.dirname(__file__), "errors-multi", "*.yaml")))


def expectation(path):
    expect, commands = None, ["solve", "latex", "verify"]
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            if line.startswith("# expect: "):
                expect = line[len("# expect: "):].rstrip("\n")
            elif line.startswith("# commands: "):
                commands = line[len("# commands: "):].split()
    return expect, commands


def run(args):
    result = CliRunner().invoke(main, args)
    return result.exit_code, result.stdout, result.stderr, result.exception


def check_one_line(code, out, err, exc, path, expect):
    assert code == 2, (code, err, exc)
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    if expect is not None:
        assert lines[0] == f"{path}:{expect}"


def test_corpus_is_big_enough():
    assert len(CORPUS) >= 60


@pytest.mark.parametrize("path", CORPUS, ids=os.path.basename)
def test_malformed_file(path, tmp_path):
    expect, commands = expectation(path)
    rel = os.path.relpath(path)
    for command in commands:
        args = [command, rel]
        target = tmp_path / "out.tex"
        if command == "latex":
            args += ["-o", str(target)]
        code, out, err, exc = run(args)
        check_one_line(code, out, err, exc, rel, expect)
        assert not target.exists()
        assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("path", MULTI, ids=os.path.basename)
def test_every_mistake_of_a_file_is_reported(path, tmp_path):
    with open(path, encoding="utf-8") as fh:
        expected = [line[len("# expect: "):].rstrip("\n") for line in fh if line.startswith("# expect: ")]
    assert len(expected) >= 3
    rel = os.path.relpath(path)
    for command in ("solve", "latex", "verify"):
        args = [command, rel] + (["-o", str(tmp_path / "out.tex")] if command == "latex" else [])
        code, out, err, exc = run(args)
        assert code == 2 and out == "" and "Traceback" not in err, (code, err, exc)
        assert err.splitlines() == [f"{rel}:{e}" for e in expected]
        assert list(tmp_path.iterdir()) == []


def test_failed_latex_run_does_not_clobber_existing_output(tmp_path):
    target = tmp_path / "keep.tex"
    target.write_text("precious")
    bad = os.path.relpath(os.path.join(os.path.dirname(__file__), "errors", "expr-division-by-zero.yaml"))
    code, out, err, exc = run(["latex", bad, "-o", str(target)])
    assert code == 2 and target.read_text() == "precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.tex"]


def test_unknown_variant_on_the_command_line():
    code, out, err, exc = run(["solve", "problems/slinear.yaml", "--variant", "nope"])
    assert code == 2 and out == ""
    assert err.strip() == "problems/slinear.yaml: no variant named 'nope'; the file has: full, rescaled, legacy"


def test_missing_file():
    code, out, err, exc = run(["solve", "no/such.yaml"])
    assert code == 2 and err.strip() == "no/such.yaml: no such file or directory"


def test_unbound_symbols_with_numeric():
    code, out, err, exc = run(["solve", "--numeric", os.path.relpath(os.path.join(
        os.path.dirname(__file__), "errors", "unbound-symbol-verify.yaml"))])
    assert code == 2 and len(err.splitlines()) == 1 and "w0" in err and "symbols:" in err


# ----------------------------------------------------------------------------- huge inputs

BASE = "name: big\ninputs:\n  x: {value: [1], requires_grad: true}\nmodel: {forward: \"%s\"}\n"


def _timed(args):
    start = time.perf_counter()
    result = run(args)
    return result, time.perf_counter() - start


def test_million_element_literal_is_refused_quickly(tmp_path):
    path = tmp_path / "million.yaml"
    path.write_text("name: big\ninputs:\n  x: [" + ", ".join(["1"] * 1_000_000) + "]\nmodel: {type: ReLU}\n")
    (code, out, err, exc), seconds = _timed(["solve", str(path)])
    check_one_line(code, out, err, exc, str(path), None)
    assert "larger than" in err and seconds < 5


def test_million_character_expression_is_refused_quickly(tmp_path):
    path = tmp_path / "long.yaml"
    path.write_text(BASE % " + ".join(["x"] * 250_000))
    (code, out, err, exc), seconds = _timed(["solve", str(path)])
    check_one_line(code, out, err, exc, str(path), None)
    assert seconds < 5


def test_long_but_legal_sized_expression(tmp_path):
    path = tmp_path / "long.yaml"
    path.write_text(BASE % " + ".join(["x"] * 5_000))  # 20,000 characters: over the expression limit
    (code, out, err, exc), seconds = _timed(["solve", str(path)])
    check_one_line(code, out, err, exc, str(path), None)
    assert "limited to 10000" in err and seconds < 5


def test_ten_thousand_deep_nesting(tmp_path):
    path = tmp_path / "deep.yaml"
    path.write_text("name: big\ninputs:\n  x: " + "[" * 10_000 + "1" + "]" * 10_000 + "\nmodel: {type: ReLU}\n")
    (code, out, err, exc), seconds = _timed(["solve", str(path)])
    check_one_line(code, out, err, exc, str(path), None)
    assert seconds < 5


def test_deeply_nested_parentheses_in_an_expression(tmp_path):
    path = tmp_path / "parens.yaml"
    path.write_text(BASE % ("(" * 3000 + "x" + ")" * 3000))
    (code, out, err, exc), seconds = _timed(["solve", str(path)])
    check_one_line(code, out, err, exc, str(path), None)
    assert seconds < 5


def test_huge_exponent_is_refused(tmp_path):
    path = tmp_path / "pow.yaml"
    path.write_text(BASE % "x * (0.3 ** 100000000)")
    (code, out, err, exc), seconds = _timed(["solve", str(path)])
    check_one_line(code, out, err, exc, str(path), None)
    assert seconds < 5


def test_output_into_a_missing_directory_is_one_line(tmp_path):
    target = tmp_path / "missing" / "out.tex"
    for extra in ([], ["--pdf"]):
        code, out, err, exc = run(["latex", "problems/slinear.yaml", "-o", str(target)] + extra)
        assert code == 2 and len(err.splitlines()) == 1 and "does not exist" in err
    assert list(tmp_path.iterdir()) == []
