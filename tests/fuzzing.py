"""Mutations of valid problem files, for the robustness fuzzer (tests/test_fuzz.py and
benchmarks/fuzz.py). A mutation drops, duplicates, retypes or renames keys, perturbs tensor
shapes, injects hostile or broken expressions, or corrupts the YAML text itself."""

from __future__ import annotations

import copy
import glob
import os

import yaml
from hypothesis import strategies as st

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEEDS = sorted(glob.glob(os.path.join(ROOT, "problems", "*.yaml")))

NASTY_EXPRESSIONS = [
    "x.__class__", "__import__('os').system('true')", "(lambda: x)()", "[v for v in x]", "x if x else x",
    "open('/etc/passwd')", "eval('1')", "x @ x @ x", "1 / 0", "log(0 * x)", "sqrt(-1 - x * x)", "relu(",
    "x[0]", "grad_input[7]", "(1, 2, 3)", "None", "x ** 99999999", "2 ** 99999999", "y", "model(x)",
    "sum(x, dim=0)", "x > 0", "'text'", "-", "x +", "((((((x))))))", "exp(exp(exp(exp(x))))",
    "norm(x - x)", "abs(x - x)", "x / (x - x)", "t(t(t(x)))", "mean(x) @ x", "grad * grad * grad",
    "(grad_input[0] * 2,)", "(None,)", "(None, None, None)", "grad_outputs[0]", "output * 2",
    "input[0] * 2", "x" * 300, "x + " * 50 + "x", "sin(x) ** 0.5", "x ** -1", "0 ** x", "(-1) ** x",
]

WEIRD_VALUES = [None, True, 0, -1, 3.5, "", "text", "1/0", "w0", [], [[]], {}, {"value": None}, [1, [2]],
                [[1, 2], [3]], 10 ** 30, "nan", ".inf", [True, False], {"x": {"y": {"z": 1}}}]


def load_seed(path: str) -> dict:
    with open(path, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def _paths(node, prefix=()):
    """Every (path, value) in a nested dict/list structure."""
    yield prefix, node
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, prefix + (i,))


def _get(doc, path):
    for p in path:
        doc = doc[p]
    return doc


def _set(doc, path, value):
    parent = _get(doc, path[:-1])
    parent[path[-1]] = value


@st.composite
def mutate_tree(draw, doc: dict) -> dict:
    doc = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p, _ in _paths(doc) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = _get(doc, path[:-1])
        value = _get(doc, path)
        op = draw(st.sampled_from(["drop", "duplicate", "retype", "rename", "shape", "inject", "swap"]))
        if op == "drop":
            if isinstance(parent, dict):
                del parent[path[-1]]
            elif len(parent) > 0:
                parent.pop(path[-1])
        elif op == "duplicate":
            if isinstance(parent, dict):
                parent[f"{path[-1]}_copy" if draw(st.booleans()) else str(path[-1])[::-1]] = copy.deepcopy(value)
            else:
                parent.append(copy.deepcopy(value))
        elif op == "retype":
            _set(doc, path, copy.deepcopy(draw(st.sampled_from(WEIRD_VALUES))))
        elif op == "rename" and isinstance(parent, dict):
            key = path[-1]
            new = draw(st.sampled_from([f"{key}x", str(key)[:-1] or "k", str(key).upper(), "__class__", "model",
                                        "y", "loss", "x", "bias", "1"]))
            parent[new] = parent.pop(key)
        elif op == "shape":
            if isinstance(value, list):
                choice = draw(st.integers(0, 3))
                if choice == 0 and value:
                    value.pop()
                elif choice == 1:
                    value.append(copy.deepcopy(value[0]) if value else 1)
                elif choice == 2:
                    _set(doc, path, [value])
                else:
                    _set(doc, path, [value, value])
            else:
                _set(doc, path, [value])
        elif op == "inject" and isinstance(value, str):
            _set(doc, path, draw(st.sampled_from(NASTY_EXPRESSIONS)))
        elif op == "swap" and isinstance(parent, dict) and len(parent) > 1:
            other = draw(st.sampled_from(sorted(map(str, parent))))
            if other in parent:
                parent[path[-1]], parent[other] = parent[other], parent[path[-1]]
    return doc


@st.composite
def mutated_text(draw) -> str:
    """A problem file's text after tree mutations, or after raw text corruption."""
    seed = draw(st.sampled_from(SEEDS))
    if draw(st.integers(0, 9)) == 0:
        text = open(seed, encoding="utf-8").read()
        cut = draw(st.integers(0, len(text)))
        junk = draw(st.sampled_from(["", ":", "[", "{", "- ", "\t", "&a", "*a", "!!python/name:os.system", "'",
                                     "\"", "%", "@", "\n  bad: [", "\x00"]))
        return text[:cut] + junk + text[cut + draw(st.integers(0, 5)):]
    doc = draw(mutate_tree(load_seed(seed)))
    return yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
