"""``hstack``, ``vstack`` / ``row_stack``, ``dstack`` and ``column_stack`` were refused ("a PyTorch
function adjoint does not model yet"). They are ATen composites (TensorShape.cpp): each tensor
made at least 1-, 2- or 3-d (a 0-d one reshaped: ViewBackward0; a 1-d one unsqueezed:
UnsqueezeBackward0; column_stack reshapes a tensor of at most one dim to ``(numel, 1)``:
ViewBackward0, or ReshapeAliasBackward0 for a strided one), then one ``cat`` (CatBackward0).
Expected values come from real torch, run here: the chain of nodes, the hooks' gradients, the
leaf's gradient, a hook's ``grad.view(-1)`` on a piece, and PyTorch's errors."""

from __future__ import annotations

import pytest
from conftest import require_torch

torch = require_torch()

import glue_harness as glue  # noqa: E402

X = [[1, 2, 3], [4, 5, -6]]

TEXT = """
name: stacks
dtype: float64
inputs:
  x: {value: VALUE, requires_grad: true}
model:
  forward: |
    h = x * 2
    a = PIECE_A
    b = PIECE_B
    o = FUNC((a, b))
    return (o * o * o).sum() + (o * o).view(-1)[0]
loss: "y"
hooks:
  - {tensor: o, label: on_o}
  - {tensor: a, label: on_a, does: "DOES"}
  - {tensor: b, label: on_b}
"""

PIECES = {
    "zero_d": ("h[0, 1]", "h[1, 2]", lambda h: (h[0, 1], h[1, 2])),
    "one_d": ("h[0]", "h[1]", lambda h: (h[0], h[1])),
    "strided": ("h[:, 0]", "h[:, 2]", lambda h: (h[:, 0], h[:, 2])),
    "two_d": ("h", "h * 3", lambda h: (h, h * 3)),
    "transposed": ("h.t()", "h.t()[:, :1]", lambda h: (h.t(), h.t()[:, :1])),
    "three_d": ("h.unsqueeze(0)", "h.unsqueeze(0)", lambda h: (h.unsqueeze(0), h.unsqueeze(0))),
    "mixed": ("h", "h[0]", lambda h: (h, h[0])),
}

FUNCS = ("hstack", "vstack", "row_stack", "dstack", "column_stack")


def _chain(fn):
    names = []

    def walk(f):
        if f is None or type(f).__name__ == "AccumulateGrad":
            return
        names.append(type(f).__name__)
        for g, _ in f.next_functions:
            walk(g)
    walk(fn)
    return names


def _torch(func, build, view_hook):
    x = torch.tensor(X, dtype=torch.float64, requires_grad=True)
    h = x * 2
    a, b = build(h)
    calls = {"on_o": [], "on_a": [], "on_b": []}
    try:
        o = getattr(torch, func)((a, b))
    except RuntimeError as exc:
        return glue.raised(exc)
    chain = _chain(o.grad_fn)
    for t, label in ((o, "on_o"), (a, "on_a"), (b, "on_b")):
        t.register_hook(lambda g, label=label: calls[label].append(g.tolist()))
    a.register_hook(glue.h_hook(view_hook))
    try:
        ((o * o * o).sum() + (o * o).view(-1)[0]).backward()
    except RuntimeError as exc:
        return glue.raised(exc)
    return x.grad.tolist(), calls, chain[0], list(o.shape)


def _solve(func, piece_a, piece_b, does):
    got = glue.solve(glue.fill(TEXT, VALUE=X, PIECE_A=piece_a, PIECE_B=piece_b, FUNC="torch." + func, DOES=does))
    return glue.error(got) or (got["grads"]["x"]["value"], {k: glue.hook_grads(got, k) for k in ("on_o", "on_a", "on_b")},
                               got["values"]["o"]["grad_fn"], got["values"]["o"]["shape"])


@pytest.mark.parametrize("view_hook", [False, True])
@pytest.mark.parametrize("pieces", sorted(PIECES))
@pytest.mark.parametrize("func", FUNCS)
def test_stacks_match_torch(func, pieces, view_hook):
    piece_a, piece_b, build = PIECES[pieces]
    want = _torch(func, build, view_hook)
    got = _solve(func, piece_a, piece_b, glue.does(view_hook))
    assert got == want


@pytest.mark.parametrize("pieces", ["zero_d", "one_d", "strided", "two_d"])
@pytest.mark.parametrize("func", FUNCS)
def test_the_nodes_before_the_cat_are_torchs(func, pieces):
    """The chain from o's CatBackward0 down to the piece's own node (through next_functions[0]):
    as many nodes as torch's, each pre-hook handed torch's gradients (their shapes tell a
    reshape from an unsqueeze)."""
    piece_a, _, build = PIECES[pieces]
    x = torch.tensor(X, dtype=torch.float64, requires_grad=True)
    a, _ = build(x * 2)
    o = getattr(torch, func)((a,))
    nodes, fn = [], o.grad_fn
    while True:
        nodes.append(fn)
        if fn is a.grad_fn:
            break
        fn = fn.next_functions[0][0]
    seen = []
    for k, n in enumerate(nodes):
        n.register_prehook(lambda g, k=k: seen.append((k, [t.tolist() for t in g])))
    (o * o).sum().backward()
    hooks = "".join("  - {node: o, %skind: pre, label: n%d}\n" % (f"next: {[0] * k}, " if k else "", k)
                    for k in range(len(nodes)))
    text = ("name: one\ndtype: float64\ninputs:\n  x: {value: %s, requires_grad: true}\nmodel:\n  forward: |\n"
            "    h = x * 2\n    a = %s\n    o = torch.%s((a,))\n    return (o * o).sum()\nloss: \"y\"\nhooks:\n%s")
    got = glue.solve(text % (X, piece_a, func, hooks))
    assert got["values"]["o"]["grad_fn"] == type(nodes[0]).__name__
    assert [(int(c["label"][1:]), [g["value"] for g in c["args"]["grad_outputs"]]) for c in got["hook_calls"]] == seen


@pytest.mark.parametrize("func", FUNCS)
def test_an_empty_list_is_pytorchs_error(func):
    with pytest.raises(RuntimeError) as exc:
        getattr(torch, func)([])
    text = ("name: one\ndtype: float64\ninputs:\n  x: {value: %s, requires_grad: true}\nmodel:\n  forward: |\n"
            "    o = torch.%s([])\n    return x.sum()\nloss: \"y\"\n") % (X, func)
    assert glue.error(glue.solve(text)) == glue.raised(exc.value)
