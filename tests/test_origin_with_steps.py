"""``verify --origin`` runs the user's module once (one forward, ``loss.backward()``). A file with
``steps:`` (two backwards, an SGD step) or another backward was compared with that one run, and
the difference blamed on the module (a 2x .grad MISMATCH, or "predicted PyTorch to raise"). The
origin comparison now says it is not made, and why. Found by a user trial."""

from __future__ import annotations

from conftest import require_torch

require_torch()

from adjoint.torchside import verify  # noqa: E402
from adjoint.torchside.importer import import_file  # noqa: E402

MODEL = """
import torch


def make_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Tanh(), torch.nn.Linear(2, 1))
"""


def _verify(path: str) -> tuple[int, list[str]]:
    lines: list[str] = []
    code = verify.run([path], None, False, False, None, lines.append, origin=True)
    return code, lines


def test_a_file_with_steps_is_not_compared_with_one_run_of_the_module(tmp_path):
    (tmp_path / "model.py").write_text(MODEL)
    text = import_file(f"{tmp_path / 'model.py'}:make_model", ["x=2x2"], "sum(y)", str(tmp_path / "p.yaml"))
    plain = tmp_path / "p.yaml"
    plain.write_text(text)
    code, lines = _verify(str(plain))
    assert code == 0 and not any("not compared" in line for line in lines)
    stepped = tmp_path / "s.yaml"
    stepped.write_text(text + "steps: [forward, {backward: {retain_graph: true}}, backward]\n")
    code, lines = _verify(str(stepped))
    assert code == 0, "\n".join(lines)
    assert any("not compared: the variant has steps" in line for line in lines)
    assert not any("MISMATCH" in line for line in lines)
