"""Before ``adjoint import`` writes anything: is the file it made the user's model?

Translating a forward can lose what the user's Python does around the ops it records -- a custom
``torch.autograd.Function``'s backward, a grad-mode switch in a helper function, an in-place
update of a buffer, a child whose forward takes another branch on its second call, Python
attributes the forward changes, a ``forward`` replaced on one instance. Each makes a file that
``solve`` answers confidently and ``verify`` passes (it checks the file against PyTorch, not
against the user's code). So the import checks its own file the way ``verify --origin`` does
(:mod:`.graphcheck`, :mod:`.originrun`), without the exact solve: the file, written to a
temporary directory with its side file, is loaded and

* its model (as verify builds it, in torch) must build the autograd graph the module a fresh
  ``FACTORY()`` call makes builds, node for node and edge for edge;
* its torch run (the loss, every hook call, every ``.grad``, or the error) must agree with the
  module's own run, with the user's hooks running as the user's Python, within verify's
  tolerances. With ``--hooks observe`` a hook's effect is left out on purpose: then the graph
  and the loss are compared, not the hook calls and gradients.

The first difference refuses the import (one line, nothing written), naming what differs. So
does a file that ``solve`` itself refuses (a translated line naming what the format does not
model yet, found by a solve in doubles): import answers for it before anything is written.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile

from adjoint.format.errors import ProblemError


def check_faithful(text: str, side, model_file: str, hooks_mode: str = "translate", at: dict | None = None) -> None:
    """Refuse (``ProblemError``) the file ``text`` (with ``side``'s tensors) when its model is not
    the module ``model_file``'s factory builds; see the module docstring. ``at``: where the user's
    code has each line of a forward (a line the file cannot answer is told there)."""
    from adjoint.format.validate import load
    with tempfile.TemporaryDirectory(prefix="adjoint-import-") as tmp:
        path = os.path.join(tmp, "imported.yaml")
        if side is not None and side.tensors:
            with open(os.path.join(tmp, side.name), "wb") as fh:
                fh.write(side.data())
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        try:
            problem = load(path)
        except ProblemError as err:
            raise ProblemError(None, "adjoint import made a file its own loader refuses (a bug of adjoint import: "
                                     "please report it); nothing was written: "
                                     f"{' '.join(str(err).split())[:300]}") from None
        if problem.origin is None:
            return
        unmodelled = _unanswered(problem, text, at or {})
        if unmodelled is not None:
            raise ProblemError(None, unmodelled)
        problem = dataclasses.replace(problem, origin=dataclasses.replace(problem.origin,
                                                                          file=os.path.abspath(model_file)))
        difference = first_difference(problem, hooks_mode)
    if difference is not None and difference.startswith(CUSTOM):
        raise ProblemError(None, f"adjoint import cannot write this model, so nothing was written: {difference}")
    if difference is not None:
        raise ProblemError(None, f"adjoint import wrote a model that is not yours, so nothing was written: "
                                 f"{difference} (the file's model first, yours second). Something your forward (or a "
                                 "function it calls) does is not in the file; docs/import.md lists what import "
                                 "translates")


def _unanswered(problem, text: str, at: dict) -> str | None:
    """What ``solve`` (in doubles: no exact arithmetic needed to find it) refuses in the file: a
    line of the translated forward or of a hook body that names what the format does not model.
    A forward's line is told at the user's line of the op the refusal points at (``at``: per line
    of the file, each op's written text and the user's line), else by its line in the file."""
    from adjoint.answer.solve import solve_problem
    try:
        solve_problem(problem, mode="float64")
    except ProblemError as err:
        lines = text.splitlines()
        message = " ".join(err.message.split())
        line = err.loc.line if err.loc is not None and 0 < err.loc.line <= len(lines) else None
        if line is None:
            return f"adjoint import made a file that adjoint cannot answer, so nothing was written: {message}"
        written = lines[line - 1].strip()[:120]
        where = _user_line(lines[line - 1], err.loc.col, at.get(line, ()))
        if where is not None:
            return f"{where}: this line of your forward cannot be imported (written in the file as {written!r}): " \
                   f"{message}"
        if lines[line - 1].startswith("loss: "):    # the top-level key: the loss --loss gave
            return f"--loss {lines[line - 1][len('loss: '):]}: {message}"
        return f"adjoint import made a file that adjoint cannot answer, so nothing was written: line {line} of the " \
               f"file it would have written ({written!r}): {message}"
    return None


def _user_line(line: str, col: int, ops: tuple) -> str | None:
    """The user's line of the op written at column ``col`` (1-based) of ``line``: the innermost of
    the ops whose written text starts there, else the one user line all of the line's ops come
    from (None when they come from several, or none is known)."""
    starting = [(len(t), w) for t, w in ops if t and line.startswith(t, max(col - 1, 0))]
    if starting:
        return min(starting)[1]
    known = {w for _, w in ops}
    return known.pop() if len(known) == 1 else None


CUSTOM = "your forward runs the custom torch.autograd.Function"


def first_difference(problem, hooks_mode: str = "translate") -> str | None:
    """None when every variant's model agrees with the module origin builds; else what differs."""
    from adjoint.torchside.importer.graphcheck import compare_graphs, custom_functions
    from adjoint.torchside.importer.originrun import origin_rows
    from adjoint.torchside.run import run_variant

    dtype = problem.dtype
    for decl in problem.variants:
        same, detail = compare_graphs(problem, decl, dtype)
        if not same:
            custom = custom_functions(problem, decl, dtype)
            if custom:   # its backward is the user's Python: what fx wrote is the forward's ops
                return (f"{CUSTOM} {', '.join(custom)}, whose backward "
                        "import cannot read (the file has its forward's ops instead); write it in the file as a "
                        "function: block (docs/format.md, custom autograd.Function)")
            return f"the autograd graphs differ ({detail})"
        observed = run_variant(problem, decl, dtype)
        for row in origin_rows(problem, decl, observed, dtype):
            if hooks_mode != "translate" and not row.item.startswith(("loss", "error")):
                continue   # --hooks observe: a hook's effect is left out on purpose
            if not row.ok and not row.skipped:
                return f"{row.item}: {' '.join(str(row.detail or 'differs').split())}"
    return None
