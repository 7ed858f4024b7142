"""The documentation is complete and true: docs/format.md names every key, hook kind, function,
method and module type the validator accepts (so a new one cannot land undocumented), every
whole problem file shown in the docs solves, nothing links outside the repository, and the
pictures the README shows exist."""

from __future__ import annotations

import os
import re

import pytest

import adjoint
from adjoint.engine.bindings import FUNCTIONS, METHODS
from adjoint.engine.hook_kinds import GLOBAL_KINDS, KINDS
from adjoint.format.module_signatures import TYPES
from adjoint.format.validate import INPUT_KEYS, TOP_KEYS, VARIANT_KEYS
from adjoint.format.validate_hooks import BACKWARD_KEYS, HOOK_KEYS, STEP_KINDS
from adjoint.format.validate_modules import MODULE_KEYS
from adjoint.format.second_steps import SECOND_KEYS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = [os.path.join(ROOT, "README.md"), os.path.join(ROOT, "DEVELOPERS.md")] + sorted(
    os.path.join(ROOT, "docs", f) for f in os.listdir(os.path.join(ROOT, "docs")) if f.endswith(".md"))


def read(path: str) -> str:
    with open(path, encoding="utf-8") as fh:
        return fh.read()


FORMAT = read(os.path.join(ROOT, "docs", "format.md"))
FENCED = re.findall(r"```[a-z]*\n(.*?)```", FORMAT, re.S)
INLINE = re.findall(r"`([^`]+)`", re.sub(r"```[a-z]*\n.*?```", "", FORMAT, flags=re.S))
WORDS = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", " ".join(FENCED + INLINE)))  # names written as code


@pytest.mark.parametrize("what, names", [
    ("top-level key", TOP_KEYS), ("module key", MODULE_KEYS), ("variant key", VARIANT_KEYS),
    ("input key", INPUT_KEYS), ("hook key", HOOK_KEYS), ("backward key", BACKWARD_KEYS + ("retain_graph",) + SECOND_KEYS),
    ("step", STEP_KINDS), ("hook kind", tuple(k.kind for k in KINDS) + GLOBAL_KINDS),
    ("module type", tuple(TYPES)), ("function", tuple(FUNCTIONS)), ("method", tuple(METHODS)),
])
def test_format_reference_names_everything(what, names):
    missing = [n for n in names if n not in WORDS]
    assert not missing, f"docs/format.md does not mention the {what}(s) {missing}"


def _table_rows(heading: str) -> list[str]:
    """The first column of the first table under ``heading`` in docs/format.md."""
    section = FORMAT.split(heading, 1)[1]
    return re.findall(r"^\| `([^`]+)` \|", section.split("\n\n|", 1)[1].split("\n\n", 1)[0], re.M)


def test_the_key_tables_name_each_key_once():
    for heading in ("## Top-level keys", "\n## Hooks\n"):
        rows = _table_rows(heading)
        assert rows and len(rows) == len(set(rows)), f"{heading.strip()}: a key has two rows: {rows}"


def test_the_hook_and_json_references_give_every_form():
    raises = next(line for line in FORMAT.splitlines() if line.startswith("| `raises` |"))
    assert "{type: NAME, message: TEXT, in: pack \\| unpack}" in raises   # the mapping form (contract v3)
    assert '"kwargs": {NAME: VALUE | number}' in FORMAT   # a with_kwargs hook's args (contract v2)


def test_every_hook_kind_has_an_example():
    for k in KINDS:
        if k.on == "saved_tensors":
            assert "saved_tensors: {pack:" in FORMAT
        elif k.on == "multi_grad":
            assert "{multi_grad: [" in FORMAT
        else:
            assert re.search(rf"\{{{k.on}: [^}}]*kind: {k.kind}\b", FORMAT) or (
                k.kind == "hook" and "{tensor: h, returns:" in FORMAT), f"no example of {k.on} {k.kind}"


def yaml_blocks(text: str) -> list[str]:
    return re.findall(r"```yaml\n(.*?)```", text, re.S)


@pytest.mark.parametrize("path", [p for p in DOCS if yaml_blocks(read(p))], ids=os.path.basename)
def test_whole_problem_files_in_the_docs_solve(path):
    whole = [b for b in yaml_blocks(read(path)) if re.search(r"^name: ", b, re.M)]
    for block in whole:
        pred = adjoint.loads(block, os.path.basename(path)).solve()
        assert pred.variants


def test_nothing_links_outside_the_repository():
    for path in DOCS:
        text = read(path)
        assert "../shared" not in text and "shared/problem-format" not in text, path


def test_pictures_the_docs_show_exist():
    for path in DOCS:
        for target in re.findall(r"(?:!\[[^\]]*\]\(|<img src=\")([^)\"]+\.(?:png|svg))", read(path)):
            assert os.path.exists(os.path.join(os.path.dirname(path), target)), (path, target)


def test_readme_starts_with_the_two_commands_and_ci_runs_the_second():
    """The README opens (right under its title) with exactly two commands, install-and-run and
    install-and-test, and .ci/run ends with that same test command."""
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        lines = f.read().splitlines()
    assert lines[0] == "# adjoint" and lines[1] == "" and lines[2] == "```bash"
    end = lines.index("```", 3)
    commands = [line.split("#")[0].strip() for line in lines[3:end]]
    assert len(commands) == 2 and commands[0].startswith("pip install -e . && adjoint solve ")
    with open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8") as f:
        ci = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    assert ci[-1] == commands[1]


def test_the_repository_root_holds_only_the_project():
    """No scratch output lands at the top of the repository (stop 49 committed seven empty
    ``fh*.json`` / ``*.err`` files there): what git tracks at the root is this list."""
    import shutil
    import subprocess

    if not os.path.isdir(os.path.join(ROOT, ".git")) or shutil.which("git") is None:
        pytest.skip("not a git checkout")
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                             check=True).stdout.splitlines()
    top = {path.split("/")[0] for path in tracked}
    assert top <= {".ci", ".gitignore", "DEVELOPERS.md", "README.md", "pyproject.toml", "adjoint",
                   "benchmarks", "docs", "examples", "problems", "scripts", "tests"}, sorted(top)
