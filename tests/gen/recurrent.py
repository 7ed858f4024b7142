"""Layer problems that each hold a recurrent layer (nn.RNN, LSTM, GRU: ``layers.LayerGen.rnn_stage``),
for a sweep aimed at them (``python benchmarks/sweep.py --kind rnn``): the ordinary layer
generator with its first fitting stage forced to a recurrent one."""

from __future__ import annotations

import random

from .emit import to_yaml
from .modules import Gen
from .rand import Src
from .trees import TRANSCENDENTAL_BUDGET, NoExpr


def generate_rnn_spec(rng: random.Random, budget: int = TRANSCENDENTAL_BUDGET):
    for _ in range(20):
        g = Gen(Src(rng=rng), budget, 1.0)
        g.layer_share = 1.0
        g.force_rnn = True
        try:
            spec = g.problem()
        except NoExpr:   # a dead end; draw again
            continue
        if getattr(g, "rnn_made", False):
            return spec
    raise RuntimeError("no recurrent layer drawn in 20 attempts")


def generate_rnn(rng: random.Random, budget: int = TRANSCENDENTAL_BUDGET) -> str:
    return to_yaml(generate_rnn_spec(rng, budget))
