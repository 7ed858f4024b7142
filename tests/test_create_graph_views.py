"""create_graph through backward formulas that reshape the gradient (ViewBackward0's
``grad.reshape(self.sizes())``, UnsafeViewBackward0, ReshapeAliasBackward0, ExpandBackward0's sum_to,
RepeatBackward0, the squeeze/unsqueeze restores, outer, flatten, group_norm's reshapes): at::reshape
records ``ViewBackward0`` when the gradient's strides allow a view and ``CloneBackward0`` +
``UnsafeViewBackward0`` when they do not, so the recorded graph depends on the gradient's layout (a
transposed gradient times a number stays transposed: TensorIterator keeps its operand's memory order).
Each chain, under two roots, compared node for node (names, sequence numbers) and value for value with
real torch 2.13."""

import warnings

import pytest
from conftest import require_torch

torch = require_torch()

from test_second_order import assert_same_graph, chain_ours, chain_torch, ours, start_seq  # noqa: E402

warnings.filterwarnings("ignore")
F64 = torch.float64
F = torch.nn.functional

TEMPLATE = """
name: cgview
dtype: float64
inputs:
  x: {value: [[0.3, -0.5, 0.2], [0.7, 0.1, -0.4]], requires_grad: true}
  w: {value: [[0.6, -0.2], [0.25, 0.5], [-0.3, 0.8]], requires_grad: true}
  v: {value: [0.5, -0.25, 0.75, 1.5, -1.0, 0.125], requires_grad: true}
model:
  inputs: [x, w, v]
  forward: "FORWARD"
loss: "LOSS"
steps:
  - forward
  - {backward: {method: grad, inputs: [x], create_graph: true, as: [gx]}}
"""

CHAINS = [  # (forward in the file, the same in torch)
    ("x.t().reshape(6) * v", lambda x, w, v: x.t().reshape(6) * v),
    ("x.reshape(3, 2).t() * x", lambda x, w, v: x.reshape(3, 2).t() * x),
    ("x.view(3, 2).t()", lambda x, w, v: x.view(3, 2).t()),
    ("x.view(3, 2).t() * 2", lambda x, w, v: x.view(3, 2).t() * 2),
    ("(x.view(3, 2) * 2).t()", lambda x, w, v: (x.view(3, 2) * 2).t()),
    ("(x.view(3, 2) / 4 + 0.5).t()", lambda x, w, v: (x.view(3, 2) / 4 + 0.5).t()),
    ("(x.view(3, 2) * w * 2).t()", lambda x, w, v: (x.view(3, 2) * w * 2).t()),
    ("x.view(6).view(3, 2).t() + 1", lambda x, w, v: x.view(6).view(3, 2).t() + 1),
    ("(x.view(3, 2) * w).t()", lambda x, w, v: (x.view(3, 2) * w).t()),
    ("x.t().reshape(2, 3)", lambda x, w, v: x.t().reshape(2, 3)),
    ("x.t().reshape(2, 3).t() / 4", lambda x, w, v: x.t().reshape(2, 3).t() / 4),
    ("(x * w.t()).t().reshape(6)", lambda x, w, v: (x * w.t()).t().reshape(6)),
    ("x.flatten().view(3, 2).t()", lambda x, w, v: x.flatten().view(3, 2).t()),
    ("x.t().flatten() * v", lambda x, w, v: x.t().flatten() * v),
    ("x.unsqueeze(0).expand(4, 2, 3)", lambda x, w, v: x.unsqueeze(0).expand(4, 2, 3)),
    ("x.unsqueeze(0).expand(4, 2, 3).transpose(1, 2)", lambda x, w, v: x.unsqueeze(0).expand(4, 2, 3).transpose(1, 2)),
    ("x.t().unsqueeze(0).expand(2, 3, 2)", lambda x, w, v: x.t().unsqueeze(0).expand(2, 3, 2)),
    ("x.unsqueeze(1).transpose(0, 2)", lambda x, w, v: x.unsqueeze(1).transpose(0, 2)),
    ("x.unsqueeze(2).transpose(0, 1) * 3", lambda x, w, v: x.unsqueeze(2).transpose(0, 1) * 3),
    ("x.view(2, 3, 1).squeeze(2).t()", lambda x, w, v: x.view(2, 3, 1).squeeze(2).t()),
    ("x.repeat(2, 2)", lambda x, w, v: x.repeat(2, 2)),
    ("x.repeat(2, 1).t()", lambda x, w, v: x.repeat(2, 1).t()),
    ("x.t().repeat(2, 1)", lambda x, w, v: x.t().repeat(2, 1)),
    ("x.t().repeat(1, 2).t() * 2", lambda x, w, v: x.t().repeat(1, 2).t() * 2),
    ("x[0].unsqueeze(1) * x[1]", lambda x, w, v: x[0].unsqueeze(1) * x[1]),
    ("(x[0].unsqueeze(1) * v).t()", lambda x, w, v: (x[0].unsqueeze(1) * v).t()),
    ("(v.unsqueeze(1) * x[1]).t() * 0.5", lambda x, w, v: (v.unsqueeze(1) * x[1]).t() * 0.5),
    ("torch.stack([x.t() @ x[:, 0], x[0]], 1)", lambda x, w, v: torch.stack([x.t() @ x[:, 0], x[0]], 1)),
    ("torch.stack([x.amax(1), x[:, 0]], 1)", lambda x, w, v: torch.stack([x.amax(1), x[:, 0]], 1)),
    ("torch.stack([x.amax(1), x[:, 0]], 1).t()", lambda x, w, v: torch.stack([x.amax(1), x[:, 0]], 1).t()),
    ("x.unsqueeze(0).expand(3, 2, 3).sum(0).t() * 2", lambda x, w, v: x.unsqueeze(0).expand(3, 2, 3).sum(0).t() * 2),
    ("x.t().unsqueeze(1).expand(3, 4, 2).transpose(0, 2)",
     lambda x, w, v: x.t().unsqueeze(1).expand(3, 4, 2).transpose(0, 2)),
    ("F.group_norm(x.t().reshape(1, 6, 1), 2)", lambda x, w, v: F.group_norm(x.t().reshape(1, 6, 1), 2)),
    ("F.group_norm(x.reshape(1, 6, 1), 3).view(3, 2).t()",
     lambda x, w, v: F.group_norm(x.reshape(1, 6, 1), 3).view(3, 2).t()),
]

ROOTS = [  # (loss in the file, the same in torch)
    ("sum(y ** 2)", lambda y: (y ** 2).sum()),
    ("sum((y * 2) ** 2)", lambda y: ((y * 2) ** 2).sum()),
    ("sum(y.reshape(-1) ** 2)", lambda y: (y.reshape(-1) ** 2).sum()),
]


def _leaves():
    return (torch.tensor([[0.3, -0.5, 0.2], [0.7, 0.1, -0.4]], dtype=F64, requires_grad=True),
            torch.tensor([[0.6, -0.2], [0.25, 0.5], [-0.3, 0.8]], dtype=F64, requires_grad=True),
            torch.tensor([0.5, -0.25, 0.75, 1.5, -1.0, 0.125], dtype=F64, requires_grad=True))


@pytest.mark.parametrize("loss,root", ROOTS, ids=[r[0] for r in ROOTS])
@pytest.mark.parametrize("forward,twin", CHAINS, ids=[c[0] for c in CHAINS])
def test_reshaping_backward_records_torchs_nodes(forward, twin, loss, root):
    _, gx = ours(TEMPLATE.replace("FORWARD", forward).replace("LOSS", loss))
    base = start_seq()
    x, w, v = _leaves()
    g, = torch.autograd.grad(root(twin(x, w, v)), [x], create_graph=True)
    assert_same_graph(chain_ours(gx), chain_torch(g, base), forward)
    assert gx.value.a.ravel().tolist() == pytest.approx(g.detach().flatten().tolist(), abs=1e-12)
    assert tuple(gx.strides) == g.stride()
