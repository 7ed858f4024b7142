"""Graphviz at its limits (issue 28): a problem-file text longer than Graphviz takes in one
HTML-like label is cut, never a silent exit 1; ``dot`` does not outlive an interrupted
command. The only timing here is a hang guard."""

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from adjoint.cli import main

ROOT = os.path.join(os.path.dirname(__file__), "..")
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")


def _problem(tmp_path, hooks: str) -> str:
    path = tmp_path / "p.yaml"
    path.write_text("name: ll\ninputs:\n  x: {value: [0.3], requires_grad: true}\nmodel: {type: Tanh}\n"
                    f"loss: \"sum(y)\"\nhooks: [{hooks}]\n")
    return str(path)


@needs_dot
@pytest.mark.parametrize("hooks", [
    '{tensor: x, label: "' + "a" * 100_000 + '"}',
    '{tensor: x, label: "' + "<&>" * 30_000 + '"}',
    ", ".join('{tensor: x, label: "' + f"h{i}" * 30 + '"}' for i in range(600)),
], ids=["letters", "entities", "many-hooks"])
def test_a_huge_label_is_drawn(tmp_path, hooks):
    path = _problem(tmp_path, hooks)
    for args in (["graph", path, "-o", str(tmp_path / "p.svg")], ["latex", path, "--pdf", "-o", str(tmp_path / "p.pdf")]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, (result.exit_code, result.stderr, result.exception)
    svg = (tmp_path / "p.svg").read_text()
    assert svg.startswith("<?xml") and "</svg>" in svg


def test_a_label_is_cut_in_the_source_too(tmp_path):
    path = _problem(tmp_path, '{tensor: x, label: "' + "a" * 100_000 + '"}')
    result = CliRunner().invoke(main, ["graph", path, "-o", str(tmp_path / "p.dot")])
    assert result.exit_code == 0, result.stderr
    source = (tmp_path / "p.dot").read_text()
    assert "a" * 199 + "…" in source and "a" * 200 not in source


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/task/{p}/children") as fh:
                kids = [int(k) for k in fh.read().split()]
        except OSError:
            kids = []
        out += kids
        todo += kids
    return out


def _name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ")[1][0] not in "ZX"
    except OSError:
        return False


@needs_dot
@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="reads /proc")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_dot_does_not_outlive_an_interrupted_graph(tmp_path, sig):
    n = 600   # a chain whose layout keeps dot busy for minutes
    body = "\n".join(["    h0 = x * 1"] + [f"    h{i} = tanh(h{i - 1}) + h{max(0, i - 7)} * 0.5" for i in range(1, n)]
                     + [f"    return h{n - 1}"])
    path = tmp_path / "slow.yaml"
    path.write_text(f"name: slow\ninputs:\n  x: {{value: [0.3], requires_grad: true}}\nmodel:\n  forward: |\n{body}\n"
                    "loss: \"sum(y)\"\n")
    env = dict(os.environ, PYTHONPATH=os.path.abspath(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "adjoint", "graph", "--structure", str(path), "-o",
                             str(tmp_path / "slow.svg")], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))   # not an inherited SIG_IGN
    dots = []
    guard = time.monotonic() + 120
    while not dots and time.monotonic() < guard and proc.poll() is None:
        dots = [p for p in _descendants(proc.pid) if _name(p) == "dot"]
        time.sleep(0.1)
    assert dots, "dot never started"
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == (143 if sig == signal.SIGTERM else 130), err
    assert err.decode().strip() == ("terminated" if sig == signal.SIGTERM else "interrupted")
    guard = time.monotonic() + 10
    while any(_alive(d) for d in dots) and time.monotonic() < guard:
        time.sleep(0.1)
    assert not any(_alive(d) for d in dots)
    assert not (tmp_path / "slow.svg").exists()
