"""Small checks shared by the validators: YAML shapes (mapping, string, boolean, choice, name),
suggestions, and the collector that lets validation report every mistake of a file.

:class:`Issues` runs one independent piece of validation at a time (a top-level key, a
module, a hook, a variant): a :class:`~adjoint.format.errors.ProblemError` it raises is recorded
and the caller carries on with the next piece, getting :data:`FAILED` for the one that
failed. Pieces that depend on a failed one are skipped by the caller, so one mistake gives
one line, not a cascade.
"""

from __future__ import annotations

import keyword
import re

from adjoint.format.errors import ProblemError, ProblemErrors, raise_all
from adjoint.format.literals import name_problem
from adjoint.format.loader import YMap, YNode, YScalar, kind_name


class _Failed:
    """The result of a piece of validation that raised (its error is in :class:`Issues`)."""

    def __repr__(self) -> str:
        return "FAILED"


FAILED = _Failed()

NAME_RE = re.compile(r"[a-z0-9_-]+")   # problem and variant names (fullmatch: no trailing newline)


class Issues:
    """Collects the ProblemErrors of independent pieces of validation."""

    def __init__(self) -> None:
        self.errors: list[ProblemError] = []

    def attempt(self, fn, *args, **kwargs):
        """``fn(*args, **kwargs)``, or :data:`FAILED` after recording the error it raised."""
        try:
            return fn(*args, **kwargs)
        except ProblemErrors as errs:
            self.errors.extend(errs.errors)
        except ProblemError as err:
            self.errors.append(err)
        return FAILED

    def add(self, err: ProblemError) -> None:
        self.errors.append(err)

    def raise_if_any(self) -> None:
        raise_all(self.errors)


def suggest(word: str, options) -> str:
    import difflib   # only when a name is wrong: not on every start

    close = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


REQUIRED_HINTS = {
    "name": "; add name: my-problem (lower case, digits, _ and -)",
    "inputs": "; add inputs: {x: {value: [0.3], requires_grad: true}}",
    "model": "; add model: {type: Linear, params: {weight: [[...]], bias: [...]}} or a custom forward",
    "value": "; write {value: [...]} with the tensor literal",
    "backward": "; write backward: {SLOT: \"gradient expression\"}",
}


def unknown_keys(node: YMap, what: str, allowed: tuple[str, ...]) -> list[ProblemError]:
    return [ProblemError(key.loc, f"unknown key '{key.text}' in {what}{suggest(key.text, allowed)}"
                                  f" (allowed: {', '.join(allowed)})")
            for key, _ in node.entries if key.text not in allowed]


def missing_keys(node: YMap, what: str, required: tuple[str, ...]) -> list[ProblemError]:
    return [ProblemError(node.loc, f"{what} is missing the required key '{key}'{REQUIRED_HINTS.get(key, '')}")
            for key in required if node.get(key) is None]


def mapping(node: YNode, what: str, required: tuple[str, ...], optional: tuple[str, ...]) -> YMap:
    """``node`` as a mapping with only the allowed keys and every required one (all mistakes
    of the mapping's keys reported together)."""
    if not isinstance(node, YMap):
        raise ProblemError(node.loc, f"{what} must be a mapping, not {kind_name(node)}")
    errors = unknown_keys(node, what, required + optional) or missing_keys(node, what, required)
    raise_all(errors)
    return node


def string(node: YNode, what: str) -> str:
    if not isinstance(node, YScalar) or node.kind != "str":
        raise ProblemError(node.loc, f"{what} must be a string, not {kind_name(node)}")
    return node.text


def boolean(node: YNode, what: str) -> bool:
    if not isinstance(node, YScalar) or node.kind != "bool":
        raise ProblemError(node.loc, f"{what} must be true or false, not {kind_name(node)}")
    return node.text.lower() in ("true", "yes", "on", "y")


def choice(node: YNode, what: str, options: tuple[str, ...]) -> str:
    if not isinstance(node, YScalar) or node.kind not in ("str",):
        raise ProblemError(node.loc, f"{what} must be one of {', '.join(options)}, not {kind_name(node)}")
    if node.text not in options:
        raise ProblemError(node.loc, f"{what} '{node.text}' is not one of {', '.join(options)}"
                                     f"{suggest(node.text, options)}")
    return node.text


def identifier(node: YScalar, what: str) -> str:
    """A key or string that must be a plain identifier (tensor, module, argument names); a Python
    keyword (``lambda``, ``None``, ``class``) is none: a forward's ``def forward(self, lambda)`` or
    ``h = lambda * 3`` is a SyntaxError."""
    why = name_problem(node.text, what)
    if why is None and keyword.iskeyword(node.text):
        why = f"'{node.text}' is a Python keyword, which is not a valid {what}; use another name, e.g. '{node.text}_'"
    if why is not None:
        raise ProblemError(node.loc, why)
    return node.text
