"""The answer's records as a notebook shows them: each record of :mod:`adjoint.answer.prediction`
with ``_repr_html_`` (a compact table, :mod:`adjoint.render.html`), the variant and the whole
prediction with ``_repr_markdown_``, and a variant's :meth:`ShownVariant.graph` (the picture,
:mod:`adjoint.render.graph`).

:func:`shown` hands back the same record tree with these classes: every record is a subclass
of the answer's own, so what it holds, its JSON and its ``repr`` are unchanged; records shared
in the tree (a hook call listed in ``hook_calls`` and in a pass) stay shared."""

from __future__ import annotations

from adjoint.answer import prediction as P
from adjoint.engine.adjoints import Boundary
from adjoint.engine.function_checks import FunctionCheck
from adjoint.render.graph import picture
from adjoint.render.html import html_of, markdown_of


class _Html:
    """Notebook display of a record: an HTML table (IPython calls ``_repr_html_``)."""

    def _repr_html_(self) -> str:
        return html_of(self)


class ShownHookRecord(P.HookRecord, _Html):
    """A hook call, shown as a table."""


class ShownBoundary(Boundary, _Html):
    """A module boundary (its multipliers), shown as a table."""


class ShownFunctionCheck(FunctionCheck, _Html):
    """A custom Function's backward check, shown."""


class ShownError(P.ErrorRecord, _Html):
    """PyTorch's error, shown."""


class ShownPass(P.PassRecord, _Html):
    """One backward step, shown."""


class ShownVariant(P.VariantPrediction, _Html):
    """A variant's prediction, shown; with its picture."""

    def _repr_markdown_(self) -> str:
        return markdown_of(self)

    def graph(self):
        """The backward graph as PyTorch builds it, hooks drawn where they attach
        (:class:`adjoint.render.graph.Picture`: ``.dot`` source, ``.svg()``, shown in a notebook;
        drawing needs Graphviz)."""
        return picture(self)


class ShownPrediction(P.Prediction, _Html):
    """A whole prediction, shown."""

    def _repr_markdown_(self) -> str:
        return markdown_of(self)


_SHOWN = {P.HookRecord: ShownHookRecord, Boundary: ShownBoundary, FunctionCheck: ShownFunctionCheck,
          P.ErrorRecord: ShownError, P.PassRecord: ShownPass, P.VariantPrediction: ShownVariant,
          P.Prediction: ShownPrediction}


def shown(record, _memo: dict | None = None):
    """``record`` (a :class:`~adjoint.answer.prediction.Prediction` or any record in one) with
    notebook display, its nested records too; other values are handed back as they are."""
    memo = {} if _memo is None else _memo
    if isinstance(record, list):
        return [shown(x, memo) for x in record]
    cls = _SHOWN.get(type(record))
    if cls is None:
        return record
    if id(record) in memo:
        return memo[id(record)]
    out = object.__new__(cls)
    memo[id(record)] = out
    out.__dict__.update({k: shown(v, memo) for k, v in vars(record).items()})
    return out
