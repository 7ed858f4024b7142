"""Finite differences: the third, independent opinion on a variant's final gradients (``verify --fd``).

The same model as :mod:`adjoint.torchside.run` builds, run forward only in float64 with every
leaf perturbed in turn, as ``torch.autograd.gradcheck`` does.
"""

from __future__ import annotations

import warnings

import torch

from adjoint.format.problem import Problem, Variant
from adjoint.torchside.run import Session
from adjoint.torchside.values import literal_tensor, snap


def finite_differences(problem: Problem, variant: Variant, names: list[str], eps: float = 1e-6) -> dict:
    """Central differences in float64 of ``sum(root * grad_output)`` (``sum(root)`` when no
    grad_output is given) with respect to each leaf in ``names``, as ``torch.autograd.gradcheck``
    does: ``(f(x + eps e_i) - f(x - eps e_i)) / (2 eps)`` element by element. Forward-phase
    module hooks stay registered (they are part of the function); every other hook is left out."""
    s = Session(problem, variant, "float64", forward_only=True)
    gout = (literal_tensor(variant.backward.grad_output, torch.float64, s.symbols)
            if variant.backward.grad_output is not None else None)
    out = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            for hook in variant.hooks:
                if hook.when == "before_forward":
                    s.hooks.register(hook.index)

            def f() -> float:
                fp = s.forward()
                root = fp.loss if fp.loss is not None else fp.output
                s.clear_kept()
                return float((root * gout).sum() if gout is not None else root.sum())

            with torch.no_grad():
                for name in names:
                    t = s.leaves[name]
                    flat = t.view(-1)
                    g = torch.zeros_like(flat)
                    for i in range(flat.numel()):
                        orig = flat[i].item()
                        flat[i] = orig + eps
                        plus = f()
                        flat[i] = orig - eps
                        minus = f()
                        flat[i] = orig
                        g[i] = (plus - minus) / (2 * eps)
                    out[name] = snap(g.view(t.shape), torch.float64)
        finally:
            s.close()
    return out
