"""``torch.X`` names that are ATen's own bindings, whose signature or defaults differ from ``F.X``
(adjoint.engine.bindings.ATEN_SIGNATURES): each is refused in one line, never bound with F's
signature (``torch.batch_norm(x, w, b, rm, rv, True, 0.1, 1e-5)`` bound as F.batch_norm's was a
silent wrong answer; ``torch.embedding(weight, ids)`` was an error PyTorch does not raise). The
torch test shows what differs."""

from __future__ import annotations

import textwrap

import pytest

import adjoint
from adjoint import ProblemError
from adjoint.engine.bindings import ATEN_SIGNATURES

CALLS = {
    "batch_norm": "torch.batch_norm(x, w, b, rm, rv, True, 0.1, 1e-5, False)",
    "embedding": "torch.embedding(E, ids)",
    "binary_cross_entropy_with_logits": "torch.binary_cross_entropy_with_logits(x, rv)",
    "kl_div": "torch.kl_div(x, rv)",
    "instance_norm": "torch.instance_norm(x.unsqueeze(0), w, b, rm, rv, True, 0.1, 1e-5, False)",
    "cosine_embedding_loss": "torch.cosine_embedding_loss(x, x * 2, rv[:2])",
    "hinge_embedding_loss": "torch.hinge_embedding_loss(x, x.sign())",
    "margin_ranking_loss": "torch.margin_ranking_loss(x, x * 2, x.sign())",
}


def _file(expr: str) -> str:
    return textwrap.dedent(f"""\
        name: aten
        dtype: float64
        inputs:
          x: {{value: [[0.5, -1, 2], [1.5, 0.25, -0.5]], requires_grad: true}}
          w: [1, 2, 0.5]
          b: [0, 0.5, 1]
          rm: [0, 0, 0]
          rv: [1, 1, 1]
          E: {{value: [[1, 2, 3], [4, 5, 6]], requires_grad: true}}
          ids: {{value: [1, 0], dtype: int64}}
        model:
          inputs: [x, w, b, rm, rv, E, ids]
          forward: |
            c = {expr}
            return x * 2
        loss: "sum(y)"
        """)


def test_every_listed_name_has_a_call():
    assert set(CALLS) == set(ATEN_SIGNATURES)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_torch_namespace_aten_binding_is_refused(name):
    with pytest.raises(ProblemError, match=rf"torch\.{name} is ATen's binding .* call F\.{name}"):
        adjoint.loads(_file(CALLS[name])).solve()


def test_what_differs_in_torch():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    x, t = torch.tensor([[0.5, -1.0]]), torch.tensor([[0.25, 0.75]])
    assert torch.kl_div(x, t).shape == (1, 2) and F.kl_div(x, t, reduction="mean").shape == ()
    assert torch.binary_cross_entropy_with_logits(x, t).shape == (1, 2)
    assert F.binary_cross_entropy_with_logits(x, t).shape == ()
    y = torch.tensor([[1.0, -1.0]])   # the margin losses: reduction an int, none by default
    assert torch.margin_ranking_loss(x, t, y).shape == (1, 2) and F.margin_ranking_loss(x, t, y).shape == ()
    assert torch.hinge_embedding_loss(x, y).shape == (1, 2) and F.hinge_embedding_loss(x, y).shape == ()
    assert torch.cosine_embedding_loss(x, t, y[0, :1]).shape == (1,)
    with pytest.raises(TypeError, match="argument 'reduction' must be int, not str"):
        torch.margin_ranking_loss(x, t, y, reduction="sum")
    E, ids = torch.tensor([[1.0, 2.0], [3.0, 4.0]]), torch.tensor([1, 0])
    assert torch.equal(torch.embedding(E, ids), F.embedding(ids, E))
