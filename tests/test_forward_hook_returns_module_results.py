"""A forward hook may hand back anything the module's forward may return: ``_call_impl`` takes
any non-None result as the output. adjoint refused a dict (``return output`` on a module
returning a dict, or a new dict) and a tuple with a Python number beside the tensor. Each
expected value is real torch's, run here: a legacy hook on a dict output goes on the grad_fn of
its first tensor (the hook's own ``* 2``) with the FutureWarning, and a full backward hook of a
tuple output is handed None in the number's slot."""

from __future__ import annotations

import warnings

import pytest
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402

PATH = "tests/data/regressions/forward_hook_returns_dict_or_tuple_with_numbers.yaml"


class F(torch.nn.Module):
    def forward(self, a):
        return {"h": a * 2, "k": a * 3}


class G(torch.nn.Module):
    def forward(self, a, n):
        return a * 2, n


def _torch(variant: str):
    f, g = F(), G()
    calls = []

    def rec(kind):
        def hook(m, *grads):
            calls.append((kind, [[None if t is None else t.tolist() for t in gs] for gs in grads]))
        return hook
    if variant == "new_dict_legacy":
        f.register_forward_hook(lambda m, i, o: {"h": o["h"] * 2, "k": o["k"]})
        f.register_backward_hook(rec("backward"))
    if variant == "tuple_number":
        g.register_forward_hook(lambda m, i, o: (o[0] * 2, o[1] + 1))
        g.register_full_backward_hook(rec("full_backward"))
        g.register_full_backward_pre_hook(rec("full_backward_pre"))
    x = torch.tensor([0.5, -1], dtype=torch.float64, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        d = f(x)
        h, n = g(x, 3)
        loss = (d["h"] * d["k"] + h * n).sum()
        loss.backward()
    return loss.item(), x.grad.tolist(), calls, [w.category.__name__ for w in caught]


def _adjoint(variant: str):
    got = adjoint.load(PATH).solve(variant).to_json()["variants"][variant]
    assert got.get("error") is None
    calls = [(c["kind"], [[None if t is None else t["value"] for t in c["args"][k]] for k in c["args"]])
             for c in got["hook_calls"] if c["kind"] != "forward"]
    return got["loss"]["value"], got["grads"]["x"]["value"], calls, [w["category"] for w in got["warnings"]]


@pytest.mark.parametrize("variant", ["new_dict_legacy", "tuple_number"])
def test_a_forward_hook_returning_what_forward_may_return(variant):
    loss, grad, calls, categories = _adjoint(variant)
    t_loss, t_grad, t_calls, t_categories = _torch(variant)
    assert loss == pytest.approx(t_loss, rel=1e-12)
    assert grad == pytest.approx(t_grad, rel=1e-12)
    assert calls == t_calls
    assert categories == t_categories
