"""What a test needs that a machine may not have, declared once: torch 2.13, a LaTeX engine,
pdftoppm, Graphviz (its ``dot`` and the ``graphviz`` Python package), a Jupyter kernel
(``nbclient`` and ``ipykernel``, to execute the notebook).

* A test (or a module, with ``pytestmark``) marked ``@pytest.mark.torch``,
  ``@pytest.mark.latex``, ``@pytest.mark.pdftoppm``, ``@pytest.mark.graphviz`` or
  ``@pytest.mark.notebook`` is skipped when that is missing, with the reason "torch 2.13 not
  installed: run scripts/setup-tests.sh" (and likewise).
* A module that imports torch at the top does it through ``torch = require_torch()``
  (``from conftest import require_torch``): the whole module is skipped the same way.
* With ``ADJOINT_REQUIRE_ALL=1`` in the environment (CI sets it, see .ci/run) every such skip
  is a failure instead: CI must run everything.

tests/test_requirements.py proves both ways in a subprocess with torch made unimportable.
"""

from __future__ import annotations

import functools
import os
import shutil

import pytest

TORCH_VERSION = "2.13"
SETUP = "run scripts/setup-tests.sh"
REQUIRE_ALL = "ADJOINT_REQUIRE_ALL"


@functools.lru_cache(maxsize=None)
def _torch_missing() -> str | None:
    """None when torch 2.13 imports; else why not (probed once per session)."""
    try:
        import torch
    except (ImportError, OSError) as exc:
        return f"torch {TORCH_VERSION} not installed: {SETUP} ({type(exc).__name__}: {exc})"
    if not torch.__version__.startswith(TORCH_VERSION + "."):
        return f"torch {TORCH_VERSION} not installed: {SETUP} (found torch {torch.__version__})"
    return None


def _latex_missing() -> str | None:
    from adjoint.render.pdf import find_engine

    return None if find_engine() else f"pdflatex not installed: {SETUP}"


def _pdftoppm_missing() -> str | None:
    return None if shutil.which("pdftoppm") else f"pdftoppm not installed: {SETUP}"


def _graphviz_missing() -> str | None:
    try:
        import graphviz  # noqa: F401
    except ImportError:
        return f"the graphviz Python package not installed: {SETUP}"
    return None if shutil.which("dot") else f"Graphviz (dot) not installed: {SETUP}"


def _notebook_missing() -> str | None:
    import importlib.util

    missing = [m for m in ("nbclient", "nbformat", "ipykernel") if importlib.util.find_spec(m) is None]
    return f"{', '.join(missing)} not installed: {SETUP}" if missing else None


#: marker name -> the probe that says what is missing (None: present)
PROBES = {"torch": _torch_missing, "latex": _latex_missing, "pdftoppm": _pdftoppm_missing,
          "graphviz": _graphviz_missing, "notebook": _notebook_missing}


def _missing(reason: str, module_level: bool = False):
    """Skip -- or, with ADJOINT_REQUIRE_ALL=1, fail -- because something is not installed."""
    if os.environ.get(REQUIRE_ALL) == "1":
        pytest.fail(f"{reason} [{REQUIRE_ALL}=1: a missing requirement fails]", pytrace=False)
    pytest.skip(reason, allow_module_level=module_level)


def require_torch():
    """``torch = require_torch()`` at the top of a module that needs torch everywhere."""
    reason = _torch_missing()
    if reason is not None:
        _missing(reason, module_level=True)
    import torch

    return torch


def pytest_configure(config):
    config.addinivalue_line("markers", "torch: needs torch 2.13 (skipped without it, unless ADJOINT_REQUIRE_ALL=1)")
    config.addinivalue_line("markers", "latex: needs pdflatex/lualatex/xelatex (skipped without, unless "
                                       "ADJOINT_REQUIRE_ALL=1)")
    config.addinivalue_line("markers", "pdftoppm: needs pdftoppm (skipped without, unless ADJOINT_REQUIRE_ALL=1)")
    config.addinivalue_line("markers", "graphviz: needs Graphviz's dot and the graphviz package (skipped without, "
                                       "unless ADJOINT_REQUIRE_ALL=1)")
    config.addinivalue_line("markers", "notebook: needs nbclient, nbformat and ipykernel (skipped without, unless "
                                       "ADJOINT_REQUIRE_ALL=1)")


def pytest_runtest_setup(item):
    for name, probe in PROBES.items():
        if item.get_closest_marker(name) is not None:
            reason = probe()
            if reason is not None:
                _missing(reason)


def single_process(paths):
    """``paths`` without the distributed files (a top-level ``distributed:`` block): the tests
    that run one process's answer (LaTeX, the derivation record, one-process torch runs) skip
    those; tests/test_ddp.py covers them."""
    out = []
    for p in paths:
        with open(p, encoding="utf-8") as f:
            if not any(line.startswith("distributed:") for line in f):
                out.append(p)
    return out


def counting(shape, start=1):
    """A nested list of ``shape`` holding start, start + 1, ... in row-major order (distinct
    values for argument-error grids, where only shapes and messages matter)."""
    if not shape:
        return start
    step = 1
    for n in shape[1:]:
        step *= n
    return [counting(shape[1:], start + i * step) for i in range(shape[0])]


def line_of(path: str, text: str) -> int:
    """The 1-based number of the first line of ``path`` holding ``text`` (where a refusal must point)."""
    with open(path) as fh:
        for i, line in enumerate(fh, 1):
            if text in line:
                return i
    raise AssertionError(text)


def import_to_file(models: str, factory: str, specs, hooks_mode: str = "translate", notes=None):
    """``adjoint import MODELS:FACTORY`` (loss ``sum(y)``) written beside ``models`` as FACTORY.yaml:
    (its path, its text, the loaded problem)."""
    import adjoint
    from adjoint.torchside.importer import import_file
    out = os.path.join(os.path.dirname(models), f"{factory}.yaml")
    text = import_file(f"{models}:{factory}", list(specs), "sum(y)", out, hooks_mode, notes)
    with open(out, "w") as fh:
        fh.write(text)
    return out, text, adjoint.load(out)


def users_module_run(problem, models: str, factory: str):
    """The user's module with its own hooks (the factory called again), in float64, on the file's
    input values: ``sum(y).backward()``; (the loss, the gradients of the float inputs and of the
    parameters by name)."""
    import torch
    from adjoint.torchside.importer.userfile import call_factory
    model = call_factory(models, factory).double()
    args = []
    for d in problem.variants[0].inputs:
        if d.dtype == "bool":
            args.append(torch.tensor([bool(v) for v in d.value.items], dtype=torch.bool).reshape(d.value.shape))
        else:
            values = [float(v) for v in d.value.items]
            args.append(torch.tensor(values, dtype=torch.float64).reshape(d.value.shape).requires_grad_(True))
    loss = model(*args).sum()
    loss.backward()
    grads = {d.name: a.grad for d, a in zip(problem.variants[0].inputs, args) if a.is_floating_point()}
    grads.update({n: p.grad for n, p in model.named_parameters()})
    return loss.detach(), grads


def import_and_verify(model: str, specs: list[str], loss: str, out: str, origin: bool = False) -> str:
    """``adjoint import MODEL --input SPEC...`` written to ``out``, then ``verify`` (with ``origin``:
    ``--origin``, against the user's module) must pass; returns the file's text."""
    from adjoint.torchside import verify
    from adjoint.torchside.importer import import_file
    text = import_file(model, specs, loss, out)
    with open(out, "w") as fh:
        fh.write(text)
    lines: list[str] = []
    assert verify.run([out], None, False, False, None, lines.append, origin=origin) == 0, "\n".join(lines)
    assert lines[-1].startswith("OK: 1 problem")
    return text


def assert_error_or_grads(out: dict, expected: tuple, names=("x", "w")) -> None:
    """A variant's answer ``out`` against what a torch run returned: ``(error type, message)``,
    raised during the backward, or the ``.grad`` values of ``names`` in order."""
    import numpy as np

    if isinstance(expected[0], str):
        assert (out["error"]["type"], out["error"]["message"]) == expected
        assert out["error"]["during"] == "backward"
    else:
        assert "error" not in out
        for name, values in zip(names, expected):
            np.testing.assert_allclose(out["grads"][name]["value"], values, rtol=1e-12)
