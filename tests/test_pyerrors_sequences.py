"""Operators with a tuple, a list or a ``torch.return_types`` operand in a program of the file
(a hook body's ``grad_input + grad_output[0]``, ``grad / grad.max(1)``, ``grad_input +=
(g,)``): Python's concatenation or repetition where it applies, else CPython's TypeError
(adjoint/engine/pyerrors.py's ``sequence_operand``), compared here with the same source run by
CPython on real torch values, for every operator, both sides and the augmented forms. Whole runs
are checked by tests/data/regressions/hook_body_tuple_arithmetic_errors.yaml."""

import itertools

import pytest
from conftest import require_torch

torch = require_torch()

from adjoint.format.errors import Loc, ProblemError  # noqa: E402
from adjoint.format.expr import parse_statements  # noqa: E402
from adjoint.format.loader import YScalar  # noqa: E402
from adjoint.engine.graph import Tensor  # noqa: E402
from adjoint.engine.interpreter import EnvScope, Interp  # noqa: E402
from adjoint.engine.pylist import PyList, sequence_name  # noqa: E402
from adjoint.engine.runtime import Runtime  # noqa: E402
from adjoint.engine.torch_errors import TorchError  # noqa: E402
from adjoint.values.backends.exact import ExactBackend  # noqa: E402
from adjoint.values.exact import Exact  # noqa: E402

#: operands: a name bound below, or a literal whose text tells its Python type
OPERANDS = ("tup", "lst", "mx", "t", "p", "2", "2.0", "None")
SEQUENCES = ("tup", "lst", "mx")
OPS = ("+", "-", "*", "/", "@", "**")


def _program(text: str):
    loc = Loc("<test>", 1, 1)
    return parse_statements(YScalar(loc, text, "str", True, loc, None), "the test")


def _adjoint(text: str):
    rt = Runtime(ExactBackend("float64"), "float64")
    t = rt.leaf(Exact.of([1, 2], (2,)), False, name="t")
    p = rt.leaf(Exact.of([1, 2], (2,)), True, name="p", is_param=True)
    m = rt.leaf(Exact.of([1, 2, 3, 4], (2, 2)), False, name="m")
    env = {"t": t, "p": p, "m": m, "tup": (t,), "lst": PyList([t])}
    interp = Interp(rt, EnvScope(env, "the test"))
    interp.run(_program("mx = m.max(1)\n" + text))
    return env["r"]


def _torch(text: str):
    t = torch.tensor([1., 2.], dtype=torch.float64)
    m = torch.tensor([[1., 2.], [3., 4.]], dtype=torch.float64)
    env = {"t": t, "p": torch.nn.Parameter(t.clone()), "m": m, "tup": (t,), "lst": [t], "mx": m.max(1)}
    exec(text, env)
    return env["r"]


def _outcome(run, text: str):
    try:
        r = run(text)
    except (TorchError, TypeError) as e:
        return ("raises", type(e).__name__ if not isinstance(e, TorchError) else e.type,
                str(e) if not isinstance(e, TorchError) else e.message)
    if isinstance(r, (Tensor, torch.Tensor)):
        return ("Tensor",)
    name = sequence_name(r) if isinstance(r, tuple) and not isinstance(r, torch.Size) and run is _adjoint \
        else ("list" if isinstance(r, list) else "tuple")
    return (name, len(r))


def _cases():
    for a, b in itertools.product(OPERANDS, repeat=2):
        if a not in SEQUENCES and b not in SEQUENCES:
            continue
        for op in OPS:
            yield f"r = {a} {op} {b}"
            if a not in ("2", "2.0", "None"):
                yield f"r = {a}\nr {op}= {b}"


@pytest.mark.torch
def test_operators_with_a_sequence_are_pythons():
    checked = 0
    for text in _cases():
        try:
            got = _outcome(_adjoint, text)
        except ProblemError as e:
            pytest.fail(f"{text!r} refused: {e}")
        assert got == _outcome(_torch, text), text
        checked += 1
    assert checked > 400


@pytest.mark.torch
def test_unary_minus_of_a_tuple_is_pythons():
    text = "r = -tup"
    assert _outcome(_adjoint, text) == _outcome(_torch, text) == \
        ("raises", "TypeError", "bad operand type for unary -: 'tuple'")
