"""The command line's rough edges: ``python -m adjoint``, ``-`` for standard input, directory
expansion, --json's shape and strictness, Ctrl-C and SIGTERM, file names with control
characters, terminal injection from a problem file, and verify without (or with another)
torch."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

import adjoint
from adjoint.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SLINEAR = os.path.join(ROOT, "problems", "slinear.yaml")
BLOCK_TORCH = '''
import sys

class _NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _NoTorch())
'''


def run(*args, input=None, env=None):
    result = CliRunner().invoke(main, list(args), input=input, env=env)
    return result.exit_code, result.stdout, result.stderr


def cli(*args, env=None, input=None, cwd=ROOT):
    full = {**os.environ, "PYTHONPATH": ROOT, **(env or {})}
    return subprocess.run([sys.executable, "-m", "adjoint", *args], capture_output=True, text=True, env=full,
                          input=input, cwd=cwd, timeout=300)


def strict_json(text: str):
    """JSON as the standard defines it: NaN and Infinity are not numbers."""
    def refuse(name):
        raise ValueError(f"not JSON: {name}")
    return json.loads(text, parse_constant=refuse)


def test_python_dash_m_adjoint():
    proc = cli("solve", SLINEAR, "--json")
    assert proc.returncode == 0, proc.stderr
    assert strict_json(proc.stdout)["problem"] == "slinear"
    assert "Usage: adjoint" in cli("--help").stdout


# ----------------------------------------------------------------------------- inputs

def test_directory_expansion_takes_any_case_and_skips_hidden(tmp_path):
    text = open(SLINEAR).read()
    for name in ("a.yaml", "B.YAML", "c.Yml", ".hidden.yaml", "notes.txt"):
        (tmp_path / name).write_text(text.replace("name: slinear", f"name: n_{name.split('.')[0].lower() or 'hidden'}"))
    (tmp_path / "sub.yaml").mkdir()
    code, out, err = run("solve", "--json", str(tmp_path))
    assert code == 0, err
    assert [d["problem"] for d in strict_json(out)] == ["n_b", "n_a", "n_c"]  # sorted by file name: B.YAML first


def test_json_is_an_object_for_one_file_and_an_array_otherwise(tmp_path):
    (tmp_path / "only.yaml").write_text(open(SLINEAR).read())
    code, out, _ = run("solve", "--json", SLINEAR)
    assert isinstance(strict_json(out), dict)
    code, out, _ = run("solve", "--json", str(tmp_path))           # a directory, even of one file
    assert isinstance(strict_json(out), list) and len(strict_json(out)) == 1
    code, out, _ = run("solve", "--json", SLINEAR, SLINEAR)
    assert isinstance(strict_json(out), list) and len(strict_json(out)) == 2
    assert "an array" in run("solve", "--help")[1]


def test_solve_reads_standard_input():
    code, out, err = run("solve", "-", "--json", input=open(SLINEAR).read())
    assert code == 0, err
    assert strict_json(out)["problem"] == "slinear"


def test_errors_from_standard_input_are_named_stdin():
    code, out, err = run("solve", "-", input="name: x\ninputs: [1\n")
    assert code == 2 and out == ""
    assert err.startswith("<stdin>:3:1: YAML syntax error") and len(err.splitlines()) == 1


def test_standard_input_is_read_once():
    code, out, err = run("solve", "-", "-", input=open(SLINEAR).read())
    assert code == 2 and err.strip() == "-: standard input can be read only once; give - once"


def test_a_directory_without_problem_files(tmp_path):
    code, out, err = run("solve", str(tmp_path))
    assert code == 2 and err.strip() == f"{tmp_path}: no .yaml or .yml problem files in this directory"


# ----------------------------------------------------------------------------- strict JSON

INFINITE = """\
name: inf
inputs:
  x: {value: [0.5], requires_grad: true}
model: {forward: "x * 2"}
loss: "sum(y)"
hooks:
  - {tensor: x, returns: "grad / (grad * 0)"}
"""


def test_json_never_prints_nan_or_infinity(tmp_path):
    path = tmp_path / "inf.yaml"
    path.write_text(INFINITE)
    code, out, err = run("solve", "--json", str(path))
    assert code == 0, err
    assert "Infinity" not in out and "NaN" not in out
    grad = strict_json(out)["variants"]["default"]["grads"]["x"]
    assert grad["value"][0] in ("inf", "-inf") and grad["exact"][0] in ("inf", "-inf")


def test_finite_json_conversion():
    from adjoint.render.jsontext import dumps

    doc = {"value": [float("inf"), float("-inf"), float("nan"), 1.5], "nested": ({"v": float("nan")},)}
    assert strict_json(dumps(doc)) == {"value": ["inf", "-inf", "nan", 1.5], "nested": [{"v": "nan"}]}


# ----------------------------------------------------------------------------- signals

def test_ctrl_c_is_one_line_exit_130(monkeypatch):
    def interrupted(path, check=True):
        raise KeyboardInterrupt

    monkeypatch.setattr(adjoint.api, "load", interrupted)   # what the CLI calls
    code, out, err = run("solve", SLINEAR)
    assert (code, out, err) == (130, "", "interrupted\n")


def _default_sigint():
    """In the child: Ctrl-C's default action, whatever the test process inherited (a process
    whose parent ignores SIGINT starts with it ignored, and Python then leaves it so)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _latex_in_background(tmp_path):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "adjoint", "latex", SLINEAR, "-o", str(tmp_path / "out.tex"),
                             "--pdf"], env=dict(os.environ, PYTHONPATH=ROOT, TMPDIR=str(tmpdir)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_default_sigint)
    deadline = time.monotonic() + 120  # hang guard only
    while not any(p.name.startswith("adjoint-latex-") for p in tmpdir.iterdir()):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)
    return proc, tmpdir


@pytest.mark.latex
@pytest.mark.parametrize("sig,code,line", [(signal.SIGTERM, 143, "terminated"), (signal.SIGINT, 130, "interrupted")])
def test_a_signal_during_latex_pdf_removes_its_temporary_directory(tmp_path, sig, code, line):
    proc, tmpdir = _latex_in_background(tmp_path)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert (proc.returncode, out, err) == (code, "", line + "\n")
    assert list(tmpdir.iterdir()) == []
    assert not (tmp_path / "out.tex").exists() and not (tmp_path / "out.pdf").exists()


# ----------------------------------------------------------------------------- terminal injection

def test_control_characters_in_a_file_name_do_not_split_the_line(tmp_path):
    name = str(tmp_path / "a\nb\x1b[2Jc.yaml")
    code, out, err = run("solve", name)
    assert code == 2
    assert err == f"{tmp_path}/a\\nb\\x1b[2Jc.yaml: no such file or directory\n"


def test_control_characters_in_a_located_error(tmp_path):
    path = tmp_path / "x\ny.yaml"
    path.write_text("name: [1\n")
    code, out, err = run("solve", str(path))
    assert code == 2 and len(err.splitlines()) == 1
    assert err.startswith(f"{tmp_path}/x\\ny.yaml:2:1: YAML syntax error")


HOSTILE = """\
name: hostile
description: "clear \\e[2J\\e]0;owned\\a and \\u202eevil\\u202c, \\x9b31m"
inputs:
  x: {value: [0.5], requires_grad: true}
model: {forward: "x * 2"}
loss: "sum(y)"
hooks:
  - {tensor: x, label: "\\e[31mred\\e[0m \\u2066iso\\u2069"}
"""


def test_problem_text_reaching_the_terminal_is_escaped(tmp_path):
    path = tmp_path / "hostile.yaml"
    path.write_text(HOSTILE)
    code, out, err = run("solve", str(path), env={"COLUMNS": "200"})  # wide: no label wrapped
    assert code == 0, err
    assert "\x1b" not in out and "\u202e" not in out and "\x9b" not in out and "\a" not in out
    assert "clear \\x1b[2J\\x1b]0;owned\\x07 and \\u202eevil\\u202c, \\x9b31m" in out
    assert "\\x1b[31mred\\x1b[0m \\u2066iso\\u2069" in out


def test_terminal_safe():
    from adjoint.render.safetext import terminal_safe

    assert terminal_safe("plain é λ 中 🙂") == "plain é λ 中 🙂"
    assert terminal_safe("a\nb\tc\x00\x7f\x85\u200f\u2028\ud800") == "a\\nb\\tc\\x00\\x7f\\x85\\u200f\\u2028\\ud800"
    assert terminal_safe("a\nb\x1b", keep_newlines=True) == "a\nb\\x1b"


# ----------------------------------------------------------------------------- verify and torch

def test_verify_without_torch_says_how_to_install_it(tmp_path):
    """torch missing is the environment, not the file: one line saying how to install the CPU build, exit 4."""
    (tmp_path / "sitecustomize.py").write_text(BLOCK_TORCH)
    proc = cli("verify", SLINEAR, env={"PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"})
    assert proc.returncode == 4 and proc.stdout == ""
    assert proc.stderr == ("adjoint verify runs PyTorch, which is not installed in this Python (ModuleNotFoundError: "
                           "No module named 'torch'); install the CPU build: pip install torch --index-url "
                           "https://download.pytorch.org/whl/cpu\n")


def test_verify_without_torch_still_reports_bad_input_first(tmp_path):
    (tmp_path / "sitecustomize.py").write_text(BLOCK_TORCH)
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [\n")
    proc = cli("verify", str(bad), env={"PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"})
    assert proc.returncode == 2 and proc.stderr.startswith(f"{bad}:2:1: YAML syntax error")


@pytest.mark.parametrize("body, detail", [
    ("raise OSError('libtorch_cpu.so: cannot open shared object file: No such file or directory')\n",
     "OSError: libtorch_cpu.so: cannot open shared object file: No such file or directory"),
    ("import a_dependency_torch_lost\n",
     "ModuleNotFoundError: No module named 'a_dependency_torch_lost'"),
    ("from . import _C\n", "ImportError: cannot import name '_C' from "),
    ("raise AttributeError(\"module 'numpy' has no attribute 'bool8'\")\n",
     "AttributeError: module 'numpy' has no attribute 'bool8'"),
])
def test_a_broken_torch_is_an_environment_problem_not_a_bug(tmp_path, body, detail):
    """A torch whose import fails (a missing shared library, a dependency it lost, a half-removed
    package, an incompatible numpy) is said as what is wrong with the environment, exit 4 -- not
    "internal error ... please report it" (exit 3)."""
    torch_dir = tmp_path / "torch"
    torch_dir.mkdir()
    (torch_dir / "__init__.py").write_text(body)
    for args in (("verify", SLINEAR), ("import", "examples/mlp.py:make_model", "--input", "x=2x4")):
        proc = cli(*args, env={"PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"})
        assert proc.returncode == 4 and proc.stdout == "", proc.stderr
        line = proc.stderr
        assert line.startswith(f"adjoint {args[0]} runs PyTorch, and the torch installed at "
                               f"{os.path.realpath(torch_dir)} fails to import ({detail}")
        assert line.endswith("the installation is broken or incomplete: reinstall it, e.g. pip install "
                             "--force-reinstall torch --index-url https://download.pytorch.org/whl/cpu\n")
        assert len(line.splitlines()) == 1 and "internal error" not in line


def test_a_bug_in_adjoint_is_still_a_bug(monkeypatch):
    """Only failures raised by torch's own import are the environment's: ours stay exit 3."""
    from adjoint.torchside import torchenv

    try:
        raise KeyError("ours")
    except KeyError as exc:
        assert torchenv.classify(exc, "adjoint verify") is None


def test_bare_adjoint_prints_its_help_as_lines():
    proc = cli()
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout.startswith("Usage: adjoint [OPTIONS] COMMAND [ARGS]...\n\n")
    assert "\\n" not in proc.stdout and proc.stdout == cli("--help").stdout


@pytest.mark.torch
def test_verify_names_its_torch_and_says_which_semantics_on_another(monkeypatch):
    import torch

    from adjoint.torchside import verify

    code, out, err = run("verify", SLINEAR)
    assert code == 0 and out.startswith(f"verified against torch {torch.__version__}\n") and err == ""
    assert "semantics" not in out
    monkeypatch.setattr(verify, "torch_version", lambda: "2.13.1+cpu")   # a patch release: 2.13's semantics
    code, out, err = run("verify", SLINEAR)
    assert code == 0 and out.startswith("verified against torch 2.13.1+cpu\n== ") and err == ""
    monkeypatch.setattr(verify, "torch_version", lambda: "2.14.1+cpu")
    code, out, err = run("verify", SLINEAR)
    assert code == 0 and err == ""
    assert out.startswith("verified against torch 2.14.1+cpu\nnote: the predictions follow PyTorch 2.13.0 "
                          "semantics and this run uses torch 2.14.1+cpu; no difference between the two is known "
                          "to adjoint, but none is ruled out; a mismatch may be a change between releases\n== ")
    code, out, err = run("verify", "--json", SLINEAR)
    doc = strict_json(out)
    assert doc["torch"] == "2.14.1+cpu" and doc["semantics"] == "2.13.0" and doc["note"].startswith("note: the ")


def test_solve_progress_bar_draws_after_its_delay(capsys, monkeypatch):
    from adjoint import cli

    bar = cli._SolveProgress("p.yaml")
    bar("backward", 3, 12)  # within the first second: nothing
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(cli._SolveProgress, "DELAY", 0.0)
    bar = cli._SolveProgress("p.yaml")
    bar("backward", 3, 12)
    bar.finish()
    err = capsys.readouterr().err
    assert "solving p.yaml" in err and "backward 3/12" in err and "[######" in err and err.endswith("\r")


def test_answer_mode_flags():
    """--float64: decimals, exact fields null; --structure: every value field null, shapes kept;
    both at once: a usage error (exit 2)."""
    path = os.path.join(ROOT, "problems", "slinear.yaml")
    code, out, _ = run("solve", path, "--json", "--variant", "rescaled")
    exact = strict_json(out)["variants"]["rescaled"]
    code, out, _ = run("solve", path, "--json", "--variant", "rescaled", "--float64")
    assert code == 0
    f64 = strict_json(out)["variants"]["rescaled"]
    assert f64["grads"]["x"]["exact"] is None
    assert f64["grads"]["x"]["value"] == pytest.approx(exact["grads"]["x"]["value"], rel=1e-12)
    # doubled by the hook (the README's hand-derived -11951973/48828125), to double rounding
    assert f64["grads"]["x"]["value"] == [pytest.approx(-11951973 / 48828125, rel=1e-14)]
    code, out, _ = run("solve", path, "--json", "--variant", "rescaled", "--structure")
    assert code == 0
    shaped = strict_json(out)["variants"]["rescaled"]
    assert shaped["grads"]["x"] == {"shape": [1], "value": None, "exact": None}
    assert [c["kind"] for c in shaped["hook_calls"]] == [c["kind"] for c in exact["hook_calls"]]
    code, _, err = run("solve", path, "--float64", "--structure")
    assert code == 2 and "two answer modes" in err


@pytest.mark.torch
def test_verify_in_each_mode():
    path = os.path.join(ROOT, "problems", "slinear.yaml")
    for flag in ("--float64", "--structure"):
        code, out, _ = run("verify", path, flag)
        assert code == 0, out
        assert "0 mismatches" in out


# ----------------------------------------------------------------------------- where output goes

def test_solve_writes_the_report_or_json_with_dash_o(tmp_path):
    report = tmp_path / "r.txt"
    code, out, err = run("solve", SLINEAR, "-o", str(report))
    assert code == 0 and out == f"wrote {report}\n" and err == ""
    _, printed, _ = run("solve", SLINEAR)
    assert report.read_text() == printed            # the same plain report as piped output
    doc = tmp_path / "r.json"
    code, out, err = run("solve", SLINEAR, "--json", "-o", str(doc))
    assert code == 0 and strict_json(doc.read_text())["problem"] == "slinear" and doc.read_text().endswith("}\n")
    code, out, err = run("solve", SLINEAR, "--json", "-o", "-")
    assert code == 0 and strict_json(out)["problem"] == "slinear"


def test_solve_dash_o_never_overwrites_a_problem_file(tmp_path):
    problem = tmp_path / "p.yaml"
    problem.write_text(open(SLINEAR).read())
    code, out, err = run("solve", str(problem), "-o", str(problem))
    assert code == 2 and out == "" and "is the problem file being read" in err
    assert problem.read_text() == open(SLINEAR).read()


def test_latex_and_graph_write_into_the_current_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run("latex", SLINEAR)
    assert code == 0 and out == "wrote slinear.tex\n" and (tmp_path / "slinear.tex").exists()
    assert not os.path.exists(os.path.join(ROOT, "problems", "slinear.tex"))
    code, out, err = run("graph", SLINEAR, "--variant", "legacy", "--format", "dot")
    assert code == 0 and out == "wrote slinear.dot\n" and (tmp_path / "slinear.dot").read_text().startswith("digraph")


def test_graph_dash_o_with_several_variants_is_one_file_each_and_the_help_says_so(tmp_path):
    code, out, err = run("graph", SLINEAR, "-o", str(tmp_path / "g.dot"))
    names = [f"g-{v}.dot" for v in ("full", "rescaled", "legacy")]
    assert code == 0 and out == "wrote " + " and ".join(str(tmp_path / n) for n in names) + "\n"
    assert sorted(os.listdir(tmp_path)) == sorted(names)
    help_text = " ".join(run("graph", "--help")[1].split())
    assert "-o g.svg writes g-VARIANT.svg for each" in help_text and "in the current directory" in help_text


@pytest.mark.parametrize("command", ["solve", "verify", "latex", "graph"])
def test_a_second_variant_is_refused_not_dropped(command, tmp_path):
    """click keeps the last of a repeated option; ``--variant a --variant b`` must not answer for
    b alone as if a had not been asked for: it is a usage error naming both, nothing written."""
    path = os.path.join(ROOT, "problems", "tensor_hooks.yaml")
    code, out, err = run(command, path, "--variant", "doubling", "--variant", "observe")
    assert code == 2
    assert "--variant given 2 times (doubling, observe)" in err
    assert out == ""


def test_one_variant_is_still_one_variant():
    path = os.path.join(ROOT, "problems", "tensor_hooks.yaml")
    code, out, _ = run("solve", path, "--json", "--variant", "doubling")
    assert code == 0 and list(strict_json(out)["variants"]) == ["doubling"]
