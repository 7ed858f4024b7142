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


#: what `adjoint solve` of a rational file must not load at start-up: SymPy and torch (and mpmath,
#: SymPy's), the BLAS thread control (the --float64 mode's), the other commands' renderers
#: (LaTeX, PDF, graphs, notebooks), the derivation, the torch side beyond its environment check,
#: and what only an error message needs (difflib's suggestions, traceback's frames)
NOT_AT_START = ("sympy", "torch", "mpmath", "threadpoolctl", "difflib", "traceback", "adjoint.render.latex",
                "adjoint.render.pdf", "adjoint.render.graph", "adjoint.render.dot", "adjoint.render.html",
                "adjoint.render.notebook", "adjoint.derivation", "adjoint.torchside.verify",
                "adjoint.torchside.run", "adjoint.torchside.build", "adjoint.torchside.importer",
                # loaded on first use: a file's distributed: block, a steps: backward's second-order keys
                "adjoint.format.distributed", "adjoint.format.comm_hook", "adjoint.engine.distributed",
                "adjoint.engine.fsdp", "adjoint.values.lowprec", "adjoint.format.second_steps",
                # op, function and layer families a file's names do not reach (adjoint.engine.families)
                "adjoint.engine.ops.losses", "adjoint.engine.ops.nn", "adjoint.engine.ops.conv",
                "adjoint.engine.ops.attention", "adjoint.engine.ops.recurrent", "adjoint.engine.bindings.losses",
                "adjoint.engine.bindings.conv", "adjoint.engine.bindings.attention", "adjoint.engine.layers.nn",
                "adjoint.engine.layers.recurrent", "adjoint.engine.layers.transformer")

START = """
import sys
from adjoint.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    assert not exc.code, exc.code
print(sorted(m for m in sys.modules if m.split(".")[0] in ("sympy", "torch", "mpmath", "threadpoolctl", "difflib",
                                                             "traceback") or m.startswith("adjoint.")))
"""


def test_solve_start_up_loads_nothing_heavy():
    for args in (["solve", "problems/slinear.yaml"], ["solve", "--json", "problems/mlp_relu.yaml"]):
        out = subprocess.run([sys.executable, "-c", START, *args], capture_output=True, text=True, check=True)
        loaded = eval(out.stdout.strip().splitlines()[-1], {})  # a printed list of strings  # noqa: S307
        assert "adjoint.answer.solve" in loaded   # the program did solve
        bad = [m for m in loaded if any(m == p or m.startswith(p + ".") for p in NOT_AT_START)]
        assert bad == [], args


def test_what_start_up_leaves_out_loads_when_a_file_needs_it():
    """The distributed and second-order modules a plain solve does not load are loaded by the
    files that use them (and those files still solve)."""
    for path, wanted in (("problems/ddp.yaml", ("adjoint.format.distributed", "adjoint.engine.distributed")),
                         ("problems/hessian_vector.yaml", ("adjoint.format.second_steps",))):
        out = subprocess.run([sys.executable, "-c", START, "solve", path], capture_output=True, text=True, check=True)
        loaded = eval(out.stdout.strip().splitlines()[-1], {})  # a printed list of strings  # noqa: S307
        assert set(wanted) <= set(loaded), path


FAMILY_TABLES = """
import importlib
from adjoint.engine import bindings, layers, ops
for package, tables, records in ((ops, ("REGISTRY",), lambda m: [[(op.name, op) for op in m.OPS]]),
                                 (bindings, ("FUNCTIONS", "METHODS"),
                                  lambda m: [[(f.name, f) for f in m.FUNCTIONS if f.where in ("function", "both")],
                                             [(f.name, f) for f in m.FUNCTIONS if f.where in ("method", "both")]]),
                                 (layers, ("FORWARDS",), lambda m: [list(m.FORWARDS.items())])):
    eager = [[] for _ in tables]
    for family in package.FAMILIES:
        for i, pairs in enumerate(records(importlib.import_module(package.__name__ + "." + family))):
            eager[i] += pairs
    for name, pairs in zip(tables, eager):
        table = getattr(package, name)
        assert len({k for k, _ in pairs}) == len(pairs), (name, "a name defined twice")
        assert list(table.items()) == pairs, name
        try:
            table["no_such_name"]
        except KeyError:
            pass
        else:
            raise AssertionError(name)
        assert "no_such_name" not in table and table.get("no_such_name") is None
print("ok")
"""


def test_family_tables_hold_every_family_in_order():
    """The tables that import a family when a name is first looked up in it end up holding every
    family's entries, in the families' order, each name once; a name no family defines is a
    KeyError (in a fresh process: the tables start empty)."""
    out = subprocess.run([sys.executable, "-c", FAMILY_TABLES], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "ok"


def test_a_name_looked_up_first_is_found_in_its_family():
    """A lookup of a late family's name (the first of the process) imports the families before it
    and finds it, as the eager table did."""
    program = ("from adjoint.engine.ops import REGISTRY; from adjoint.engine.bindings import METHODS;"
               "from adjoint.engine.layers import FORWARDS;"
               "print(REGISTRY['prod'].name, METHODS['relu'].name, FORWARDS['TransformerEncoder'].__module__)")
    out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["prod", "relu", "adjoint.engine.layers.transformer_stack"]


#: the create_graph (second-order) engine, the complex backend and the complex functions (``z.real``,
#: ``view_as_real``, ...): a file without second-order steps or complex tensors never needs them
SECOND_ORDER_AND_COMPLEX = ("adjoint.engine.second_engine", "adjoint.engine.second_formulas",
                            "adjoint.engine.second_reductions", "adjoint.engine.second_layers",
                            "adjoint.engine.second_pointwise", "adjoint.engine.second_binary",
                            "adjoint.engine.second_products", "adjoint.engine.second_nn",
                            "adjoint.engine.second_group_norm", "adjoint.engine.second_losses",
                            "adjoint.engine.second_recurrent", "adjoint.values.backends.complex",
                            "adjoint.engine.bindings.complexfns")

MODULES_AFTER = """
import sys
import adjoint
pred = adjoint.load(sys.argv[1]).solve()
pred.to_json()
print(sorted(m for m in sys.modules if m.startswith("adjoint.")))
"""


def _modules_after(program: str, *args: str) -> list[str]:
    out = subprocess.run([sys.executable, "-c", program, *args], capture_output=True, text=True, check=True)
    return eval(out.stdout.strip().splitlines()[-1], {})  # a printed list of strings  # noqa: S307


def test_first_order_rational_solve_loads_no_second_order_engine_nor_complex_backend():
    """Solving a first-order file of real rational tensors (through the API and the CLI) does not
    import the create_graph engine (adjoint.engine.second_engine and its formula modules) nor the
    complex value backend."""
    for loaded in (_modules_after(MODULES_AFTER, "problems/slinear.yaml"),
                   _modules_after(START, "solve", "problems/slinear.yaml"),
                   _modules_after(START, "solve", "--json", "problems/mlp_relu.yaml")):
        assert "adjoint.answer.solve" in loaded   # the program did solve
        assert [m for m in SECOND_ORDER_AND_COMPLEX if m in loaded] == []


def test_second_order_and_complex_files_load_what_they_need():
    """A create_graph file (a double backward, a gradient penalty's ``x.grad`` root) loads the
    second-order engine, a file with complex tensors the complex backend, and both solve."""
    for path, wanted in (("problems/hessian_vector.yaml", "adjoint.engine.second_engine"),
                         ("problems/gradient_penalty.yaml", "adjoint.engine.second_engine"),
                         ("problems/complex_layer.yaml", "adjoint.values.backends.complex")):
        for loaded in (_modules_after(MODULES_AFTER, path), _modules_after(START, "solve", path)):
            assert wanted in loaded, path
