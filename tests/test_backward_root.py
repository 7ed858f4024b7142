"""``backward: {root: ...}`` on the top level and in a variant (contract v3, 8), against a plain script."""

import numpy as np
import pytest

import adjoint


@pytest.mark.torch
def test_a_top_level_backward_root_is_the_scripts_root():
    """backward: {root: ...} on the top level and in a variant (contract v3, 8), against a plain
    script's h2.sum().backward(), h1.sum().backward() and autograd.grad(h1.sum(), [x])."""
    import torch
    problem = adjoint.load("tests/data/regressions/backward_root_on_the_top_level.yaml")
    out = {v.name: v.to_json() for v in problem.solve().variants}
    d = torch.float64

    def fresh():
        x = torch.tensor([[0.5, -1], [2, 0.25]], dtype=d, requires_grad=True)
        W = torch.tensor([[1, -2], [0.5, 1]], dtype=d, requires_grad=True)
        h1 = x @ W
        return x, W, h1, h1.tanh()

    x, W, h1, h2 = fresh()
    h2.sum().backward()
    np.testing.assert_allclose(out["a"]["grads"]["x"]["value"], x.grad.tolist(), rtol=1e-12)
    np.testing.assert_allclose(out["a"]["grads"]["W"]["value"], W.grad.tolist(), rtol=1e-12)
    x, W, h1, h2 = fresh()
    h1.sum().backward()
    np.testing.assert_allclose(out["b"]["grads"]["x"]["value"], x.grad.tolist(), rtol=1e-12)
    x, W, h1, h2 = fresh()
    gx, = torch.autograd.grad(h1.sum(), [x])
    np.testing.assert_allclose(out["c"]["returned"]["x"]["value"], gx.tolist(), rtol=1e-12)
    assert out["c"]["grads"]["x"] is None
