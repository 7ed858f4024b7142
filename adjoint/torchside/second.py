"""The torch twin of a backward step with second-order options (adjoint.format.second_steps): the
user's own lines, ``torch.autograd.grad(roots, inputs, grad_outputs, create_graph=...,
allow_unused=..., materialize_grads=...)`` or ``torch.autograd.backward(roots, grad_tensors,
create_graph=..., inputs=...)``, with the ``as:`` names bound to what it returns."""

from __future__ import annotations

import torch

from adjoint.format.errors import Loc, ProblemError
from adjoint.torchside.values import literal_tensor, snap


class RootScope:
    """A root expression: the forward's named tensors and the names earlier steps made."""

    def __init__(self, names: dict):
        self.names = names

    def lookup(self, name: str, loc: Loc):
        if name in self.names:
            return self.names[name]
        raise ProblemError(loc, f"unknown name '{name}' in a root")

    def dotted(self, path: str | None):
        """``f.w``: the forward's tensor of that full name (a parameter), or None."""
        return self.names.get(path) if path is not None else None

    def assign(self, name, value, loc):
        raise ProblemError(loc, "a root is one expression")

    def child(self, name: str):
        return None

    def call_child(self, name: str, args: list, kwargs: dict, loc: Loc):
        raise ProblemError(loc, f"unknown function '{name}' in a root")


def second_backward(s, bw, made: dict) -> dict | None:
    """One backward step with ``bw.second``; returns what ``torch.autograd.grad`` returned, by
    name (None for backward). ``made``: the names bound by ``as:`` so far (updated)."""
    sec = bw.second
    fp = s.forwards[-1]
    names = {**fp.names, **made}
    kwargs = {}
    if sec.allow_unused is not None:
        kwargs["allow_unused"] = sec.allow_unused
    if sec.materialize_grads:
        kwargs["materialize_grads"] = True
    if sec.materialize_grads and sec.allow_unused is False:   # raised before the roots are touched
        torch.autograd.grad(fp.loss if fp.loss is not None else fp.output, [], **kwargs)
    if sec.roots:
        roots = []
        for e in sec.roots:
            r = s.program(RootScope(names)).eval(e)
            s.keep(r)
            roots.append(r)
    else:
        roots = [fp.loss if fp.loss is not None else fp.output]
    # no grad_outputs: None per root, as torch.autograd.backward([a, b]) has it (one None for two
    # roots would be PyTorch's 'got 2 tensors and 1 gradients')
    given = list(sec.grad_outputs) if sec.grad_outputs else [bw.grad_output] + [None] * (len(roots) - 1)
    grads = [literal_tensor(g, s.dtype, s.symbols) if g is not None else None for g in given]
    wrt = [names[name] for name, _ in bw.inputs]
    if bw.method == "grad":
        out = torch.autograd.grad(roots, wrt, grad_outputs=grads, retain_graph=_retain(bw),
                                  create_graph=sec.create_graph, **kwargs)
        if sec.create_graph:   # the nodes it recorded: pack calls made while it ran are named by them
            s.nodes.scan([g for g in out if g is not None])
        for (name, _), g in zip(sec.names, out):
            made[name] = g
            if g is not None:
                s.keep(g)
                try:   # the current forward's names: hooks on it (multi_grad too) are registered now
                    s.bind(name, g)
                except (RuntimeError, ValueError, AssertionError, AttributeError) as exc:
                    exc.adjoint_during = "register"   # after autograd.grad returned: a registration
                    raise
        return {name: snap(g, s.dtype) for (name, _), g in zip(bw.inputs, out)}
    torch.autograd.backward(roots, grad_tensors=grads, retain_graph=_retain(bw),
                            create_graph=sec.create_graph, inputs=wrt or None)
    if sec.create_graph:   # the nodes it recorded, behind the .grad it set
        s.nodes.scan([t.grad for t in list(s.leaves.values()) + list(wrt) if t.grad is not None])
    return None


def _retain(bw):
    """``retain_graph`` as the file gives it; not given: None (PyTorch's default, ``create_graph``)."""
    return bw.retain_graph if bw.retain_given else None
