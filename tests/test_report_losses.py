"""The report's ``loss =`` line when a variant runs several forwards (``steps``): the loss is the
last forward's, and the report says so and lists the earlier ones (found by trying adjoint as a
user would: a two-step training loop showed one loss and did not say which forward it was).

Worked out by hand, checked in real torch below. x = [[1, 2]], w = [[1/2, -1/4]], b = 0,
t = 1, y = sigmoid(x w^T + b), loss = (y - t)^2:

* forward 1: z = 1/2 - 1/2 = 0, y = 1/2, loss = 1/4; dloss/dz = 2 (y - 1) y (1 - y) = -1/4,
  so w.grad = -1/4 * [1, 2] = [-1/4, -1/2] and b.grad = -1/4;
* SGD, lr 1/2: w = [5/8, 0], b = 1/8;
* forward 2: z = 5/8 + 1/8 = 3/4, loss = (sigmoid(3/4) - 1)^2 = 0.1029263...
* without the step, forward 2 repeats forward 1: loss 1/4 again.
"""

from __future__ import annotations

import math

import adjoint
from adjoint.render.console import render

STEPS = """
name: two_steps
inputs:
  x: {value: [[1, 2]], requires_grad: false}
targets:
  t: [[1]]
model:
  type: Sequential
  children:
    fc: {type: Linear, params: {weight: [[0.5, -0.25]], bias: [0]}}
    act: {type: Sigmoid}
loss: "mse_loss(y, t)"
variants:
  trained:
    steps: [forward, backward, {step: {lr: 0.5}}, zero_grad, forward, backward]
  accumulated:
    steps: [forward, backward, forward, backward]
"""

SECOND_LOSS = (1 / (1 + math.exp(-0.75)) - 1) ** 2   # 0.10292630706...


def _flat(text: str) -> str:
    return " ".join(text.split())


def _solve(tmp_path, text: str = STEPS, **kw):
    path = tmp_path / "p.yaml"
    path.write_text(text)
    return adjoint.load(str(path)).solve(**kw)


def test_the_loss_line_says_it_is_the_last_forwards(tmp_path):
    pred = _solve(tmp_path)
    trained, accumulated = pred.variants
    assert [float(x.item()) for x in trained.earlier_losses] == [0.25]
    assert math.isclose(float(trained.loss.floats()), SECOND_LOSS, rel_tol=1e-15)
    assert [float(x.item()) for x in accumulated.earlier_losses] == [0.25]
    assert float(accumulated.loss.item()) == 0.25
    text = _flat(render(pred, width=200))
    assert "loss = 0.1029263 (the last of 2 forwards; before it: 0.25)" in text
    assert "loss = 0.25 (the last of 2 forwards; before it: 0.25)" in text
    assert "every variant" not in text   # the last losses differ


def test_one_forward_has_no_earlier_losses(tmp_path):
    one = STEPS.replace("steps: [forward, backward, forward, backward]", "steps: [forward, backward]")
    pred = _solve(tmp_path, one, variant="accumulated")
    assert pred.variants[0].earlier_losses == []
    text = _flat(render(pred, width=200))
    assert "loss = 0.25" in text and "forwards" not in text


def test_variants_share_the_header_only_when_every_forward_agrees(tmp_path):
    """Two variants whose last losses are equal but whose first differ (other inputs first) do not
    share one ``loss =`` line; two identical runs do, with the earlier loss said once."""
    differ = STEPS.replace(
        "steps: [forward, backward, {step: {lr: 0.5}}, zero_grad, forward, backward]",
        "steps: [{forward: {inputs: {x: [[2, 0]]}}}, backward, {forward: {inputs: {x: [[1, 2]]}}}, backward]")
    text = _flat(render(_solve(tmp_path, differ), width=200))
    assert "every variant" not in text
    # forward 1 with x = [2, 0]: z = 1, loss (sigmoid(1) - 1)^2 = 0.0723295...; then 1/4 as the other's
    assert "loss = 0.25 (the last of 2 forwards; before it: 0.07232949)" in text
    assert "loss = 0.25 (the last of 2 forwards; before it: 0.25)" in text

    same = STEPS.replace("steps: [forward, backward, {step: {lr: 0.5}}, zero_grad, forward, backward]",
                         "steps: [forward, backward, forward, backward]")
    text = _flat(render(_solve(tmp_path, same), width=200))
    assert "loss = 0.25 (every variant; the last of 2 forwards; before it: 0.25)" in text


def test_torch_agrees():
    import torch

    x = torch.tensor([[1.0, 2.0]], dtype=torch.float64)
    t = torch.tensor([[1.0]], dtype=torch.float64)
    model = torch.nn.Sequential(torch.nn.Linear(2, 1), torch.nn.Sigmoid()).double()
    with torch.no_grad():
        model[0].weight.copy_(torch.tensor([[0.5, -0.25]]))
        model[0].bias.zero_()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    losses = []
    for _ in range(2):
        loss = torch.nn.functional.mse_loss(model(x), t)
        losses.append(loss.item())
        loss.backward()
        opt.step()
        opt.zero_grad()
    assert losses[0] == 0.25
    assert math.isclose(losses[1], SECOND_LOSS, rel_tol=1e-15)
