"""tests/conftest.py's switch, proved both ways: with torch made unimportable (a sitecustomize
on PYTHONPATH that blocks the import) or no LaTeX engine on PATH, a tiny suite skips what
needs them with the reason, and with ADJOINT_REQUIRE_ALL=1 the same skips fail."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

BLOCK_TORCH = '''
import sys

class _NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _NoTorch())
'''

TINY_TORCH = '''
import pytest

@pytest.mark.torch
def test_marked_torch():
    import torch

def test_needs_nothing():
    pass
'''

TINY_LATEX = '''
import pytest

@pytest.mark.latex
def test_marked_latex():
    pass

def test_needs_nothing():
    pass
'''

TINY_GRAPHVIZ = '''
import pytest

@pytest.mark.graphviz
def test_marked_graphviz():
    pass

def test_needs_nothing():
    pass
'''

TINY_MODULE = '''
from conftest import require_torch

torch = require_torch()

def test_whole_module_needs_torch():
    assert torch.ones(1).item() == 1.0
'''


def run_tiny(tmp_path, block_torch: bool, require_all: bool, no_latex: bool = False, tiny: str = TINY_LATEX):
    """The tiny suite: torch tests (a marked test, a module needing torch), or with ``no_latex``
    ``tiny`` (a LaTeX test by default) and no programs on PATH but Python; each with one test
    that needs nothing."""
    suite = tmp_path / "suite"
    suite.mkdir()
    shutil.copy(os.path.join(HERE, "conftest.py"), suite / "conftest.py")
    if no_latex:
        (suite / "test_tiny.py").write_text(tiny)
    else:
        (suite / "test_tiny.py").write_text(TINY_TORCH)
        (suite / "test_tiny_module.py").write_text(TINY_MODULE)
    paths = [ROOT]
    if block_torch:
        block = tmp_path / "block"
        block.mkdir()
        (block / "sitecustomize.py").write_text(BLOCK_TORCH)
        paths.insert(0, str(block))
    env = {k: v for k, v in os.environ.items() if k != "ADJOINT_REQUIRE_ALL"}
    env["PYTHONPATH"] = os.pathsep.join(paths)
    if require_all:
        env["ADJOINT_REQUIRE_ALL"] = "1"
    if no_latex:
        env["PATH"] = os.path.dirname(sys.executable)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rsfE", "-p", "no:cacheprovider",
                           "--continue-on-collection-errors", str(suite)],
                          capture_output=True, text=True, cwd=suite, env=env, timeout=300)


def test_without_torch_the_tests_that_need_it_skip_with_the_reason(tmp_path):
    proc = run_tiny(tmp_path, block_torch=True, require_all=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed, 2 skipped" in proc.stdout      # test_needs_nothing passes
    assert "SKIPPED [2] conftest.py" in proc.stdout  # the marked test and the whole module, one reason
    assert "torch 2.13 not installed: run scripts/setup-tests.sh (ModuleNotFoundError" in proc.stdout


def test_with_require_all_the_same_skips_fail(tmp_path):
    proc = run_tiny(tmp_path, block_torch=True, require_all=True)
    assert proc.returncode != 0
    assert "1 passed, 2 errors" in proc.stdout  # the marked test fails in set-up, the module at import
    # count in the error reports only: the short summary repeats the message, cut to the
    # terminal's width (COLUMNS), so its copies depend on where the suite runs
    reports = proc.stdout.split("short test summary info")[0]
    assert reports.count("torch 2.13 not installed: run scripts/setup-tests.sh") == 2
    assert reports.count("[ADJOINT_REQUIRE_ALL=1: a missing requirement fails]") == 2


def test_without_latex_the_latex_tests_skip_and_fail_when_required(tmp_path):
    (tmp_path / "lenient").mkdir()
    (tmp_path / "strict").mkdir()
    proc = run_tiny(tmp_path / "lenient", block_torch=False, require_all=False, no_latex=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed, 1 skipped" in proc.stdout
    assert "pdflatex not installed: run scripts/setup-tests.sh" in proc.stdout
    strict = run_tiny(tmp_path / "strict", block_torch=False, require_all=True, no_latex=True)
    assert strict.returncode != 0 and "1 passed, 1 error" in strict.stdout
    assert "pdflatex not installed: run scripts/setup-tests.sh [ADJOINT_REQUIRE_ALL=1" in strict.stdout


@pytest.mark.torch
def test_with_everything_installed_nothing_is_skipped(tmp_path):
    proc = run_tiny(tmp_path, block_torch=False, require_all=True)
    assert proc.returncode == 0 and "3 passed" in proc.stdout, proc.stdout + proc.stderr


def test_without_graphviz_the_graph_tests_skip_and_fail_when_required(tmp_path):
    (tmp_path / "lenient").mkdir()
    (tmp_path / "strict").mkdir()
    proc = run_tiny(tmp_path / "lenient", block_torch=False, require_all=False, no_latex=True, tiny=TINY_GRAPHVIZ)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "1 passed, 1 skipped" in proc.stdout
    assert "Graphviz (dot) not installed: run scripts/setup-tests.sh" in proc.stdout
    strict = run_tiny(tmp_path / "strict", block_torch=False, require_all=True, no_latex=True, tiny=TINY_GRAPHVIZ)
    assert strict.returncode != 0 and "1 passed, 1 error" in strict.stdout
    assert "Graphviz (dot) not installed: run scripts/setup-tests.sh [ADJOINT_REQUIRE_ALL=1" in strict.stdout
