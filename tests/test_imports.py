"""What a command loads: SymPy only when a file needs a closed form (free symbols, or a
transcendental value small enough to be shown as one); torch never for solve."""

import subprocess
import sys

PROGRAM = """
import sys
import adjoint
from adjoint.render.jsontext import dumps
from adjoint.render.console import render
pred = adjoint.load(sys.argv[1]).solve()
dumps(pred.to_json()); render(pred)
print(sorted(m for m in ("sympy", "torch", "mpmath") if m in sys.modules))
"""


def _loaded(path: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", PROGRAM, path], capture_output=True, text=True, check=True)
    return eval(out.stdout.strip().splitlines()[-1], {})  # a printed list of strings  # noqa: S307


def test_rational_file_never_loads_sympy():
    assert _loaded("problems/slinear.yaml") == []
    assert _loaded("problems/mlp_relu.yaml") == []


def test_cli_solve_of_a_rational_file_never_loads_sympy():
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "adjoint", "solve", "--json",
                          "problems/mlp_relu.yaml"], capture_output=True, text=True, check=True)
    loaded = {line.split("|")[-1].strip().split(".")[0] for line in out.stderr.splitlines() if "|" in line}
    assert "sympy" not in loaded and "torch" not in loaded


def test_closed_forms_load_sympy_when_shown():
    assert "sympy" in _loaded("tests/data/verify_twice.yaml")


def test_every_dataclass_has_a_docstring():
    """A record says what it is; without a docstring, ``dataclass`` also calls
    ``inspect.signature`` to write one, at every start (14 ms of ``solve``'s start-up over 107
    classes, measured when they were added)."""
    import ast
    import pathlib

    missing = []
    for path in sorted(pathlib.Path("adjoint").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.ClassDef) and ast.get_docstring(node) is None
                    and any("dataclass" in ast.unparse(d) for d in node.decorator_list)):
                missing.append(f"{path}:{node.lineno} {node.name}")
    assert missing == []
