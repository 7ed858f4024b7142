"""``origin: {file: PATH, factory: NAME, inputs: {NAME: [dims]}}``: where an imported file came from.

``adjoint import`` writes it; ``verify`` uses it to rebuild the user's module (running the
user's factory, which the user asked for by importing it) and to check that the file's model
builds the same autograd graph. ``file`` is relative to the problem file's directory.
Reading it runs nothing.
"""

from __future__ import annotations

import os

from adjoint.format.checks import string, unknown_keys
from adjoint.format.errors import ProblemError, raise_all
from adjoint.format.literals import parse_int
from adjoint.format.loader import YMap, YNode, YSeq, kind_name
from adjoint.format.problem import Origin

KEYS = ("file", "factory", "inputs")


def read_origin(node: YNode, path: str) -> Origin:
    if not isinstance(node, YMap):
        raise ProblemError(node.loc, f"origin must be a mapping {{file: ..., factory: ..., inputs: ...}}, not "
                                     f"{kind_name(node)}")
    raise_all(unknown_keys(node, "origin", KEYS))
    for key in KEYS:
        if node.get(key) is None:
            raise ProblemError(node.loc, f"origin is missing '{key}'; write origin: {{file: model.py, factory: "
                                         "make_model, inputs: {x: [2, 4]}}")
    file = string(node.get("file"), "origin's file")
    factory_node = node.get("factory")
    factory = string(factory_node, "origin's factory")
    if not factory.isidentifier():
        raise ProblemError(factory_node.loc, f"origin's factory '{factory}' must be the name of a Python function")
    inputs_node = node.get("inputs")
    if not isinstance(inputs_node, YMap):
        raise ProblemError(inputs_node.loc, f"origin's inputs must be a mapping NAME: [dims], not "
                                            f"{kind_name(inputs_node)}")
    inputs = []
    for key, value in inputs_node.entries:
        if not isinstance(value, YSeq):
            raise ProblemError(value.loc, f"the shape of origin input '{key.text}' must be a list of dims, e.g. [2, 4]")
        inputs.append((key.text, tuple(parse_int(d, f"a dim of origin input '{key.text}'", 1, 2 ** 31)
                                       for d in value.items)))
    base = os.path.dirname(os.path.abspath(path)) if path and not path.startswith("<") else os.getcwd()
    return Origin(os.path.normpath(os.path.join(base, file)), factory, tuple(inputs), node.loc)
