"""The sweep's checker tells rounding carried across an SGD step from a modelling error
(tests/gen/check.py ``_rounding_across_steps``): PyTorch is run again with each stepped parameter
set, right after the step, to the exact post-step value; that is trusted only where PyTorch's own
step made those values up to rounding."""

import pytest

from gen.check import _rounding_across_steps, check

TEXT = """\
name: two-passes-with-a-step
dtype: float64
inputs:
  x: {value: [[1, 2], [3, -1]], requires_grad: true}
model:
  type: Linear
  args: {in_features: 2, out_features: 1}
  params: {weight: [[0.5, -0.25]], bias: [0.125]}
loss: "sum(y * y)"
hooks:
  - {module: model, kind: full_backward}
steps:
  - forward
  - backward
  - {step: {lr: 0.5}}
  - forward
  - backward
"""


@pytest.mark.torch
def test_the_rerun_starts_from_the_given_parameters_and_reports_what_the_step_made():
    import adjoint
    from adjoint.torchside import run_variant

    problem = adjoint.loads(TEXT, name="<test>")
    v = problem.variants[0]
    zeros = {2: {"weight": [[0.0, 0.0]], "bias": [0.0]}}
    observed = run_variant(problem, v, "float64", after_step=zeros)
    # by hand: pass 1, y = x w^T + b = [0.125 + 0.5 - 0.5, 1.5 + 0.25 + 0.125] = [0.125, 1.875];
    # dL/dy = 2y; dL/dw = sum 2y x = [2*0.125*1 + 2*1.875*3, 2*0.125*2 + 2*1.875*(-1)] = [11.5, -3.25];
    # dL/db = 2*(0.125 + 1.875) = 4; after lr 0.5: w = [0.5 - 5.75, -0.25 + 1.625] = [-5.25, 1.375], b = -1.875
    assert observed["stepped"][2]["weight"]["value"] == [[-5.25, 1.375]]
    assert observed["stepped"][2]["bias"]["value"] == [-1.875]
    # pass 2 from the zeros: y = 0, so the loss is 0 and the weight's gradient adds nothing to pass 1's
    assert observed["loss"]["value"] == 0.0
    assert observed["grads"]["weight"]["value"] == [[11.5, -3.25]]


@pytest.mark.torch
def test_a_file_that_agrees_passes_the_step_test_too():
    import adjoint
    from adjoint.torchside import run_variant
    from adjoint.torchside.compare import compare

    problem = adjoint.loads(TEXT, name="<test>")
    v = problem.variants[0]
    vp = problem.solve(variant=v.name).variants[0]
    assert _rounding_across_steps(problem, v, vp, vp.to_json(), compare, run_variant)


@pytest.mark.torch
def test_a_wrong_step_is_a_mismatch_not_rounding_carried_across_it(monkeypatch):
    """With adjoint's SGD step deliberately taking twice the learning rate, pass 2 disagrees, and
    the step test does not call it rounding: PyTorch's own step made other values."""
    import adjoint
    from adjoint.engine import passes
    from adjoint.torchside import run_variant
    from adjoint.torchside.compare import compare

    right = passes.sgd
    monkeypatch.setattr(passes, "sgd", lambda run, lr, step=0: right(run, 2 * lr, step))
    outcome = check(TEXT)
    assert outcome.status == "mismatch", outcome.report()
    problem = adjoint.loads(TEXT, name="<test>")
    v = problem.variants[0]
    vp = problem.solve(variant=v.name).variants[0]
    assert not _rounding_across_steps(problem, v, vp, vp.to_json(), compare, run_variant)
