"""Embedding's ``max_norm`` against real torch (float64): F.embedding runs
``torch.embedding_renorm_(weight.detach(), ids, max_norm, norm_type)`` under no_grad before the
lookup, so the weight's rows change in place (the values, the later forwards' reads, the weight's
gradient and the version error of a node that saved the weight before are compared;
tests/data/regressions/embedding_max_norm*.yaml check the same through verify, float64 and
float32)."""

from fractions import Fraction

import pytest

from conftest import require_torch

torch = require_torch()
import torch.nn.functional as F  # noqa: E402

import adjoint  # noqa: E402
from nn_harness import assert_close, lit, t64  # noqa: E402

W = [[1, 2], [0.5, 1], [1, 1], [-3, 1], [0, -2.5]]
IDS = [[3, 0], [3, 1], [4, 4]]


def _file(forward: str, w=W, ids=IDS, steps: str = "[forward, backward]", emb: str | None = None) -> str:
    child = "" if emb is None else f"""
  children:
    emb: {{type: Embedding, args: {{num_embeddings: {len(w)}, embedding_dim: 2, {emb}}},
          params: {{weight: {lit(w)}}}}}"""
    return f"""name: t
dtype: float64
inputs:
  ids: {{value: {lit(ids)}, dtype: int64}}
model:{child}
  params: {{w: {lit(w)}}}
  forward: "{forward}"
loss: "sum(y * y)"
steps: {steps}
"""


def _json(text: str) -> dict:
    return adjoint.loads(text).solve().variants[0].to_json()


def _torch_steps(fn, w, ids, forwards: int):
    w = t64(w, True)
    for _ in range(forwards):
        y = fn(torch.tensor(ids), w)
        (y * y).sum().backward()
    return w, y


@pytest.mark.parametrize("norm_type", [1, 2, 3])
def test_functional_max_norm_two_forwards(norm_type):
    # rows 0 (norm sqrt 5 > 2 for p=2) and 3 over, row 1 under, row 2 not indexed, row 4 repeated
    j = _json(_file(f"F.embedding(ids, w, max_norm=1.5, norm_type={norm_type})",
                    steps="[forward, backward, forward, backward]"))
    w, y = _torch_steps(lambda i, w: F.embedding(i, w, max_norm=1.5, norm_type=norm_type), W, IDS, 2)
    assert_close(j["values"]["y"]["value"], y, "y")
    assert_close(j["values"]["w"]["value"], w, "weight after the forwards")
    assert_close(j["grads"]["w"]["value"], w.grad, "grad of w")
    assert w._version == 2   # one bump per call


def test_module_max_norm_and_norm_type():
    j = _json(_file("emb(ids)", emb="max_norm: 2, norm_type: 1"))
    w, y = _torch_steps(lambda i, w: F.embedding(i, w, max_norm=2, norm_type=1), W, IDS, 1)
    assert_close(j["values"]["y"]["value"], y, "y")
    assert_close(j["values"]["emb.weight"]["value"], w, "emb.weight after the forward")
    assert_close(j["grads"]["emb.weight"]["value"], w.grad, "grad of emb.weight")


def test_exact_rows_and_a_row_at_max_norm():
    # [6, 8] has norm 10 > 5: scaled by 5 / (10 + 1e-7) exactly; [-4, 3] at max_norm 5 stays (norm > max_norm only)
    j = _json(_file("F.embedding(ids, w, max_norm=5)", w=[[6, 8], [-4, 3]], ids=[0, 1, 0]))
    scale = Fraction(5) / (10 + Fraction(1, 10 ** 7))
    assert j["values"]["w"]["exact"] == [[str(6 * scale), str(8 * scale)], ["-4", "3"]]
    w, y = _torch_steps(lambda i, w: F.embedding(i, w, max_norm=5), [[6, 8], [-4, 3]], [0, 1, 0], 1)
    assert_close(j["values"]["y"]["value"], y, "y")
    assert w[1].tolist() == [-4, 3]


def test_weight_saved_before_fails_the_version_check():
    text = _file("(v @ w.T).sum() * F.embedding(ids, w, max_norm=2)").replace(
        "params: {w:", "params: {v: [0.5, -1], w:")
    j = _json(text)
    w, v = t64(W, True), t64([0.5, -1], True)
    with pytest.raises(RuntimeError) as e:
        y = (v @ w.T).sum() * F.embedding(torch.tensor(IDS), w, max_norm=2)
        (y * y).sum().backward()
    assert j["error"]["type"] == "RuntimeError" and j["error"]["during"] == "backward"
    assert j["error"]["message"] == str(e.value)


@pytest.mark.parametrize("ids, w", [([5, 0], W), ([-6, 0], W), ([-1, 0], W), ([0, 1], [1, 2, 3])])
def test_errors_are_torchs(ids, w):
    j = _json(_file("F.embedding(ids, w, max_norm=1)", w=w, ids=ids))
    with pytest.raises(Exception) as e:
        F.embedding(torch.tensor(ids), t64(w, True), max_norm=1)
    assert (j["error"]["type"], j["error"]["message"]) == (type(e.value).__name__, str(e.value).strip("'"))


def test_float_indices_error():
    text = _file("F.embedding(ids, w, max_norm=1)").replace("dtype: int64", "dtype: float64")
    j = _json(text)
    with pytest.raises(RuntimeError) as e:
        F.embedding(torch.tensor(IDS, dtype=torch.float64), t64(W, True), max_norm=1)
    assert j["error"]["message"] == str(e.value)


def test_sparse_stays_refused():
    with pytest.raises(adjoint.ProblemError, match="sparse=True"):
        _json(_file("F.embedding(ids, w, max_norm=1, sparse=True)"))


def test_free_symbols_refused():
    # whether [a, 1] exceeds max_norm 1 depends on a: refused, never a silent unscaled row
    text = _file("F.embedding(ids, w, max_norm=1)", w=[[1, 1], [0.5, 0.5]], ids=[0, 1]).replace(
        "[[1, 1], [0.5, 0.5]]", "[[a, 1], [0.5, 0.5]]") + "symbols: {a: 2}\n"
    with pytest.raises(adjoint.ProblemError, match="free symbols"):
        _json(text)
