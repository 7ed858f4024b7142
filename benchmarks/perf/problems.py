"""Problem files for the benchmark workloads, generated from code.

Each generator returns the YAML text in a small record; the MLP's record also holds its
numbers, so that torch and the FLINT floor compute on exactly the same values. Numbers are
small dyadic rationals (k/8, k/16): exact in float64, short in YAML, and what ``adjoint``
reads as exact rationals. A seed makes every file reproducible.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from fractions import Fraction

#: the contract's activation module types the MLP workloads use
ACTIVATIONS = ("ReLU", "Tanh")
#: the two deep chains: residual layer ``u + ACT(A @ u)``
CHAIN_ACTIVATIONS = ("relu", "tanh")


@dataclass(frozen=True)
class MLPCase:
    """A Sequential of Linear layers with an activation between them, loss ``sum(y * y)``.

    ``weights[i]`` is (out, in) as ``nn.Linear`` stores it; every value a Fraction."""

    text: str
    activation: str
    x: list[list[Fraction]]
    weights: list[list[list[Fraction]]]
    biases: list[list[Fraction]]


@dataclass(frozen=True)
class ChainCase:
    """A Sequential of ``depth`` residual layers ``u + ACT(A @ u)`` on a 1-D input, loss ``sum(y * y)``."""

    text: str
    activation: str
    depth: int


@dataclass(frozen=True)
class SymbolicCase:
    """A scalar chain ``h = tanh(w_i * h + b_i)`` of Linear(1, 1) + Tanh layers whose weights and
    biases are free symbols ``w_i``, ``b_i``; loss ``sum(y * y)``. ``x`` is the input's value."""

    text: str
    depth: int
    x: Fraction


def _num(v: Fraction) -> str:
    """A dyadic rational as a YAML number (exact: a terminating decimal)."""
    if v.denominator == 1:
        return str(v.numerator)
    return repr(float(v)) if v.denominator & (v.denominator - 1) == 0 else f'"{v}"'


def _literal(value) -> str:
    if isinstance(value, list):
        return "[" + ",".join(_literal(v) for v in value) + "]"  # compact: the 4096-layer chain is near 1 MB
    return _num(value)


def _matrix(rng: random.Random, rows: int, cols: int, span: int, denom: int) -> list[list[Fraction]]:
    return [[Fraction(rng.randint(-span, span), denom) for _ in range(cols)] for _ in range(rows)]


def mlp_case(width: int = 64, layers: int = 8, batch: int = 8, activation: str = "ReLU",
             seed: int = 0) -> MLPCase:
    """Issue 15's ``mlp`` / ``mlp_tanh``: ``layers`` Linear(width, width), the activation between
    them (layers - 1 of them), input ``x`` (batch, width) requiring grad, a full backward hook on
    every Linear and a tensor hook on every activation's output; dtype float64 (what torch runs)."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {ACTIVATIONS}, not {activation!r}")
    rng = random.Random(seed)
    x = _matrix(rng, batch, width, 8, 8)
    weights = [_matrix(rng, width, width, 8, 8) for _ in range(layers)]
    biases = [_matrix(rng, 1, width, 4, 8)[0] for _ in range(layers)]
    lines = [f"name: mlp_{activation.lower()}", "dtype: float64", "inputs:",
             f"  x: {{value: {_literal(x)}, requires_grad: true}}", "model:", "  type: Sequential", "  children:"]
    for i in range(layers):
        lines.append(f"    fc{i}: {{type: Linear, params: {{weight: {_literal(weights[i])}, "
                     f"bias: {_literal(biases[i])}}}}}")
        if i < layers - 1:
            lines.append(f"    act{i}: {{type: {activation}}}")
    lines += ['loss: "sum(y * y)"', "hooks:"]
    lines += [f"  - {{module: fc{i}, kind: full_backward}}" for i in range(layers)]
    lines += [f"  - {{tensor: act{i}, kind: hook}}" for i in range(layers - 1)]
    return MLPCase("\n".join(lines) + "\n", activation, x, weights, biases)


def chain_case(depth: int, activation: str = "relu", width: int = 4, seed: int = 0) -> ChainCase:
    """Issue 15's ``deep``: ``depth`` residual layers ``u + ACT(A @ u)`` (A: width x width, entries
    in {-1/16, 0, 1/16}: small enough that the ReLU chain stays within float64 at depth 4096),
    u requiring grad, a full backward hook on every layer; dtype float64."""
    if activation not in CHAIN_ACTIVATIONS:
        raise ValueError(f"activation must be one of {CHAIN_ACTIVATIONS}, not {activation!r}")
    rng = random.Random(seed)
    u = [Fraction(rng.randint(-8, 8), 8) for _ in range(width)]
    matrices = [_matrix(rng, width, width, 1, 16) for _ in range(depth)]
    lines = [f"name: chain_{activation}_{depth}", "dtype: float64", "inputs:",
             f"  u: {{value: {_literal(u)}, requires_grad: true}}", "model:", "  type: Sequential", "  children:"]
    for i, a in enumerate(matrices):
        lines.append(f'    l{i}: {{inputs: [u], forward: "u + {activation}(A @ u)", params: {{A: {_literal(a)}}}}}')
    lines += ['loss: "sum(y * y)"', "hooks:"]
    lines += [f"  - {{module: l{i}, kind: full_backward}}" for i in range(depth)]
    return ChainCase("\n".join(lines) + "\n", activation, depth)


def symbolic_case(depth: int = 16, x: Fraction = Fraction(1, 2)) -> SymbolicCase:
    """Issue 15's ``symbolic``: Linear(1, 1) layers with weight ``[[w_i]]`` and bias ``[b_i]``, each
    followed by Tanh, on the input ``[[x]]`` (not requiring grad); no hooks."""
    lines = ["name: symbolic_chain", "dtype: float64", "inputs:", f"  x: [[{_num(x)}]]", "model:",
             "  type: Sequential", "  children:"]
    for i in range(depth):
        lines.append(f"    fc{i}: {{type: Linear, params: {{weight: [[w_{i}]], bias: [b_{i}]}}}}")
        lines.append(f"    act{i}: {{type: Tanh}}")
    lines.append('loss: "sum(y * y)"')
    return SymbolicCase("\n".join(lines) + "\n", depth, x)
