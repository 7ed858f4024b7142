"""The package's layering (docs/architecture.md), as pyproject.toml's import-linter contracts say
it: every import points down the layers, no import cycle anywhere (lazy imports inside functions
included), each output format independent of the others, the LaTeX renderer typesetting only
the derivation record, and torch, click and yaml each imported only where they belong."""

import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _lint_imports() -> subprocess.CompletedProcess:
    exe = shutil.which("lint-imports") or os.path.join(os.path.dirname(sys.executable), "lint-imports")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([exe, "--config", os.path.join(ROOT, "pyproject.toml")], cwd=ROOT, env=env,
                          capture_output=True, text=True)


def test_every_layering_contract_is_kept():
    run = _lint_imports()
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "0 broken" in run.stdout


def test_the_contract_can_fail(tmp_path):
    """The check is not vacuous: a module of the format layer importing the engine breaks it."""
    import tomllib

    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as fh:
        layers = next(c for c in tomllib.load(fh)["tool"]["importlinter"]["contracts"] if c["type"] == "layers")
    assert layers["layers"][-1] == "adjoint.format" and "adjoint.engine" in layers["layers"]
    import grimp

    graph = grimp.build_graph("adjoint")
    graph.add_import(importer="adjoint.format.problem", imported="adjoint.engine.reverse")
    illegal = graph.find_illegal_dependencies_for_layers(layers=layers["layers"], containers=set())
    assert any(d.importer == "adjoint.format" and d.imported == "adjoint.engine" for d in illegal)


def test_at_most_twelve_modules_lie_loose_at_the_top():
    loose = [f for f in os.listdir(os.path.join(ROOT, "adjoint")) if f.endswith(".py")]
    assert len(loose) <= 12, loose
