"""tests/gen/train.py (``benchmarks/sweep.py --kind train``): training loops over gen's problems --
clipping, torch.optim steps, zero_grad in place, optimizers stepped in post_accumulate_grad hooks
-- checked against real PyTorch on a few seeds that between them draw every feature."""

import random

import pytest

from gen import check, coverage, generate_spec, to_yaml

SEEDS = [1, 22, 33, 36, 39]
BUDGET = 2


def _spec(seed):
    return generate_spec(random.Random(f"train-{seed}"), BUDGET, train=True)


def test_train_seeds_cover_the_loops():
    counts = {}
    for seed in SEEDS:
        for key, n in coverage(_spec(seed)).items():
            counts[key] = counts.get(key, 0) + n
    wanted = ["train optimizer " + k for k in ("SGD", "Adam", "AdamW", "in hook")]
    wanted += ["train clip_grad_norm " + k for k in ("1", "2", "inf")]
    wanted += ["train clip_grad_value", "train clip before backward", "train zero_grad in place", "train amsgrad",
               "train nesterov", "train weight_decay", "train maximize"]
    missing = [k for k in wanted if not counts.get(k)]
    assert not missing, f"the train SEEDS no longer cover: {missing}"


@pytest.mark.torch
@pytest.mark.parametrize("seed", SEEDS)
def test_train_problem_matches_torch(seed):
    text = to_yaml(_spec(seed))
    assert "{step: {optimizer:" in text or "optimizer: {type:" in text
    outcome = check(text, timeout=60.0)
    assert outcome.ok, f"adjoint and PyTorch disagree:\n{outcome.report()}\n--- problem ---\n{text}"
