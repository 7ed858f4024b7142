"""Matrix products of operands of the wrong rank are PyTorch's RuntimeError, an answer.

``mm`` and ``bmm`` check their operands' ranks in the kernel, after the autograd kernel has
made the node and packed what it saves (mat2, then self): saved-tensor pack hooks are called
first. ``matmul`` / ``@`` of a 0-d operand refuses before any node. A grid of ranks and
``requires_grad`` combinations, each compared with real torch: the pack calls (their shapes,
in order) and the error's type and message, or that there is none.
"""

import itertools

import pytest

import adjoint

TEMPLATE = """
name: ranks
dtype: float64
inputs:
  p: {{value: {p}, requires_grad: {rp}}}
  q: {{value: {q}, requires_grad: {rq}}}
  w: {{value: 1.5, requires_grad: true}}
model:
  inputs: [p, q, w]
  forward: "{forward}"
loss: "sum(y)"
hooks:
  - {{saved_tensors: {{pack: "x", unpack: "x"}}}}
"""

FORWARDS = {   # the file's expression: the torch call on a, b
    "mm(p, q) * w": lambda torch, a, b: torch.mm(a, b),
    "p.bmm(q) * w": lambda torch, a, b: a.bmm(b),
    "(p @ q) * w": lambda torch, a, b: a @ b,
    "matmul(p, q) * w": lambda torch, a, b: torch.matmul(a, b),
}


def _value(rank: int, size: int):
    """A nested list of ``rank`` dimensions of ``size`` with distinct small integers."""
    if rank == 0:
        return 3
    n = size ** rank
    flat = list(range(1, n + 1))

    def nest(items, dims):
        if len(dims) == 1:
            return items
        step = len(items) // dims[0]
        return [nest(items[i * step:(i + 1) * step], dims[1:]) for i in range(dims[0])]
    return nest(flat, [size] * rank)


def _cases():
    for forward in FORWARDS:
        ranks = range(0, 5) if "@" in forward or "matmul" in forward else range(1, 5)
        for ra, rb in itertools.product(ranks, ranks):
            for rp, rq in ((True, True), (True, False), (False, True)):
                yield forward, ra, rb, rp, rq


@pytest.mark.torch
def test_rank_errors_as_torch():
    import torch

    checked = errors = 0
    for forward, ra, rb, rp, rq in _cases():
        p, q = _value(ra, 2), _value(rb, 2)
        text = TEMPLATE.format(p=p, q=q, rp=str(rp).lower(), rq=str(rq).lower(), forward=forward)
        v = adjoint.loads(text, name="ranks").solve().variants[0]
        predicted = ([list(c.args["x"].shape) for c in v.hook_calls if c.kind == "pack"],
                     None if v.error is None else (v.error.type, v.error.message, v.error.during))

        a = torch.tensor(p, dtype=torch.float64, requires_grad=rp)
        b = torch.tensor(q, dtype=torch.float64, requires_grad=rq)
        w = torch.tensor(1.5, dtype=torch.float64, requires_grad=True)
        packs = []

        def pack(x):
            packs.append(list(x.shape))
            return x
        error = None
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda x: x):
            try:
                y = FORWARDS[forward](torch, a, b) * w
            except RuntimeError as exc:
                error = ("RuntimeError", str(exc), "forward")
        if error is None:
            y.sum().backward()
        assert predicted == (packs, error), (forward, ra, rb, rp, rq)
        checked += 1
        errors += error is not None
    assert checked == 246 and errors == 144, (checked, errors)
