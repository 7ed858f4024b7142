"""Installing adjoint beside the user's own torch: the package never depends on torch (no extra
that would pin, downgrade or pull the CUDA build), only the test set-up pins the release the
predictions follow, and the README's install command, run in a fresh environment where another
torch is installed, leaves that torch alone."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _project() -> dict:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as fh:
        return tomllib.load(fh)["project"]


def _name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[(]", requirement, maxsplit=1)[0].lower()


def test_the_package_does_not_depend_on_torch():
    project = _project()
    assert [r for r in project["dependencies"] if _name(r) == "torch"] == []
    extras = project["optional-dependencies"]
    assert "torch" not in extras       # `pip install -e '.[torch]'` would replace the user's torch
    for extra, reqs in extras.items():
        if extra != "test":
            assert [r for r in reqs if _name(r) == "torch"] == [], extra


def test_the_test_setup_keeps_its_exact_pin():
    assert [r for r in _project()["optional-dependencies"]["test"] if _name(r) == "torch"] == ["torch==2.13.0"]
    script = open(os.path.join(ROOT, "scripts", "setup-tests.sh")).read()
    assert "pip install -q -e '.[test]'" in script
    ci = open(os.path.join(ROOT, ".ci", "run")).read()
    readme = open(os.path.join(ROOT, "README.md")).read()
    test_command = readme.split("```bash\n", 1)[1].splitlines()[1].split("#")[0].strip()
    assert test_command == "bash scripts/setup-tests.sh && python -m pytest -q" and test_command in ci


def test_the_readme_starts_with_two_commands_and_says_how_to_get_the_cpu_build():
    readme = open(os.path.join(ROOT, "README.md")).read()
    first = readme.split("```bash\n", 1)[1].split("```", 1)[0].strip().splitlines()
    assert len(first) == 2 and first[0].startswith("pip install -e . && adjoint solve problems/slinear.yaml")
    assert "\npip install torch --index-url https://download.pytorch.org/whl/cpu\n" in readme


def _fresh_env_with_torch(tmp_path, version: str) -> str:
    """A new virtual environment (seeing this Python's packages) in which torch ``version`` is
    installed: a distribution record and a package, which is all pip and ``import torch`` look at."""
    env = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(env)], check=True)
    python = str(env / "bin" / "python")
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    os.makedirs(os.path.join(site, "torch"))
    with open(os.path.join(site, "torch", "__init__.py"), "w") as fh:
        fh.write(f"__version__ = {version!r}\n")
    info = os.path.join(site, f"torch-{version}.dist-info")
    os.makedirs(info)
    with open(os.path.join(info, "METADATA"), "w") as fh:
        fh.write(f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n")
    open(os.path.join(info, "RECORD"), "w").close()
    return python


def _dry_run(python: str, target: str, tmp_path) -> tuple[int, list[tuple[str, str]], str]:
    report = tmp_path / "report.json"
    proc = subprocess.run([sys.executable, "-m", "pip", "--isolated", "--python", python, "install", "--dry-run",
                           "--no-index", "--no-build-isolation", "--report", str(report), "-q", "-e", target],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    if proc.returncode != 0:
        return proc.returncode, [], proc.stderr
    doc = json.loads(report.read_text())
    return 0, [(i["metadata"]["name"], i["metadata"]["version"]) for i in doc["install"]], proc.stderr


def test_the_readme_install_leaves_another_torch_alone(tmp_path):
    """The README's `pip install -e .`, in a fresh environment holding torch 2.14.1, installs adjoint
    and nothing else (a dry run, offline: every other dependency is already there); torch stays 2.14.1."""
    pip = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True, text=True)
    version = re.match(r"pip (\d+)\.(\d+)", pip.stdout)
    if version is None or tuple(map(int, version.groups())) < (22, 3):
        pytest.skip("pip --python (pip 22.3 or later) is needed to install into a fresh environment offline")
    python = _fresh_env_with_torch(tmp_path, "2.14.1")
    code, installed, err = _dry_run(python, ".", tmp_path)
    assert code == 0, err
    assert installed == [("adjoint", "0.1.0")]
    code, installed, err = _dry_run(python, ".[torch]", tmp_path)   # the old advice: no extra pins torch now
    assert code == 0 and installed == [("adjoint", "0.1.0")], err
    assert subprocess.run([python, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                          text=True, check=True).stdout == "2.14.1\n"
