"""``adjoint latex`` of a second-order pass (a root reading gradients a create_graph backward returned): the
recorded backward formulas written as the forward of the second pass, the adjoint of the adjoint, and
what the pass returns. The numbers are checked against real PyTorch (float64) or derived by hand; the
node names against the graph PyTorch records."""

from __future__ import annotations

import os
import re
from collections import Counter

import pytest
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402
from adjoint.render.latex import render_document  # noqa: E402
from adjoint.render.pdf import compile_pdf, find_engine  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HV, GP = "problems/hessian_vector.yaml", "problems/gradient_penalty.yaml"
SUM = "tests/data/regressions/second_order_sum_and_full_hook.yaml"
_CACHE: dict = {}


def _tex(path: str) -> str:
    if path not in _CACHE:
        _CACHE[path] = render_document(adjoint.load(os.path.join(ROOT, path)).solve())
    return _CACHE[path]


def _section(tex: str) -> str:
    """The first variant's second-order section."""
    start = tex.index("\\subsection{Backward pass 2: second order}")
    return tex[start:tex.index("\\subsection", start + 10)]


def _row(section: str, lhs: str) -> str:
    """The row of an align* whose left side is ``lhs``, with its continuation lines."""
    lines = section.split("\n")
    i = next(k for k, line in enumerate(lines) if line.startswith(lhs + " &"))
    row = lines[i]
    while i + 1 < len(lines) and lines[i + 1].startswith("& "):
        i += 1
        row += " " + lines[i]
    return row


def _cell(text: str) -> float:
    return float(text.strip().replace("\\ldots", ""))


def _value(row: str) -> list[list[float]]:
    """The last value of a row: a matrix (rows of cells) or one number."""
    if row.rstrip(" \\").endswith("\\end{bmatrix}"):
        body = row[row.rindex("\\begin{bmatrix}") + len("\\begin{bmatrix}"):row.rindex("\\end{bmatrix}")]
        return [[_cell(c) for c in r.split("&")] for r in body.split("\\\\")]
    return [[_cell(row.rstrip(" \\").rsplit("= ", 1)[1])]]


def _close(row: str, expected) -> None:
    got = torch.tensor(_value(row), dtype=torch.float64)
    want = torch.as_tensor(expected, dtype=torch.float64).reshape(got.shape)
    # printed values are cut after 10 significant digits (a trailing 0 dropped)
    assert torch.allclose(got, want, rtol=1e-8, atol=1e-12), (row, want)


def _recorded_nodes(grads, forward_root) -> Counter:
    """The names of the nodes a create_graph backward recorded: reachable from its gradients, not from the
    forward's graph."""
    def reach(fns):
        seen, todo = set(), [f for f in fns if f is not None]
        while todo:
            f = todo.pop()
            if f in seen:
                continue
            seen.add(f)
            todo += [n for n, _ in f.next_functions if n is not None]
        return seen
    forward = reach([forward_root.grad_fn])
    return Counter(f.name() for f in reach([g.grad_fn for g in grads]) - forward
                   if f.name() != "torch::autograd::AccumulateGrad")


def _doc_nodes(section: str) -> Counter:
    nodes = section[section.index("Nodes: "):].split("\n", 1)[0]
    return Counter(re.findall(r"\\texttt\{(\w+)\}, from (?:the backward formula|PyTorch's engine)", nodes))


def test_hessian_vector_second_order_derivation():
    s = _section(_tex(HV))
    assert "\\subsubsection*{The recorded formulas: the forward of this pass}" in s
    assert "\\subsubsection*{The adjoint of the adjoint}" in s
    assert "This backward pass starts from \\texttt{sum(gw * v)}, not from the loss" in s
    x = torch.tensor([[0.3, -0.5, 0.2]], dtype=torch.float64, requires_grad=True)
    w = torch.tensor([[0.1, 0.2, -0.3], [0.4, -0.1, 0.5]], dtype=torch.float64, requires_grad=True)
    b = torch.tensor([0.1, -0.2], dtype=torch.float64, requires_grad=True)
    v = torch.tensor([[1.0, 0, 0], [0, 1, -1]], dtype=torch.float64)
    loss = (torch.tanh(torch.addmm(b, x, w.t())) ** 2).sum()
    gw, = torch.autograd.grad(loss, [w], create_graph=True)
    # the recorded formulas: the same nodes as PyTorch's create_graph graph, gw's own node first
    assert _doc_nodes(s) == _recorded_nodes([gw], loss)
    assert f"$\\mathtt{{gw}}$: \\texttt{{{gw.grad_fn.name()}}}, from" in s
    _close(_row(s, "\\mathtt{gw}"), gw.detach())
    # by hand: d(sum(gw * v))/d gw = v, and through gw = (g6 x)^T^T ... the multiplier of g6 is v x^T
    _close(_row(s, "\\bar\\lambda_{\\mathtt{gw}}"), v)
    _close(_row(s, "\\bar\\lambda_{g_{6}}"), [[0.3], [-0.7]])
    hv, hx = torch.autograd.grad((gw * v).sum(), [w, x], allow_unused=True)
    tail = s[s.index("What this pass returns"):]
    _close(_row(tail, "\\frac{\\partial r_{2}}{\\partial \\mathtt{lin.weight}}").replace("\\cdots &", ""),
           hv[:, [0, 2]])
    _close(_row(tail, "\\frac{\\partial r_{2}}{\\partial \\mathtt{x}}").replace("\\cdots &", ""), hx[:, [0, 2]])
    # x's own multiplier (through the recorded mm only): g5 v, g5 = dL/d(pre-activation) = 2 y (1 - y^2)
    y = torch.tanh(torch.addmm(b, x, w.t())).detach()
    _close(_row(s, "\\bar\\lambda_{\\mathtt{x}}"), (2 * y * (1 - y ** 2)) @ v)


def test_gradient_penalty_second_order_derivation():
    tex = _tex(GP)
    s = _section(tex)
    x = torch.tensor([[0.5, -1.0]], dtype=torch.float64, requires_grad=True)
    fc1 = torch.nn.Linear(2, 3).double()
    fc2 = torch.nn.Linear(3, 1).double()
    with torch.no_grad():
        fc1.weight.copy_(torch.tensor([[0.2, -0.4], [0.6, 0.1], [-0.3, 0.5]], dtype=torch.float64))
        fc1.bias.copy_(torch.tensor([0.1, 0, -0.2], dtype=torch.float64))
        fc2.weight.copy_(torch.tensor([[0.7, -0.5, 0.3]], dtype=torch.float64))
        fc2.bias.copy_(torch.tensor([0.05], dtype=torch.float64))
    loss = fc2(torch.tanh(fc1(x))).mean()
    gx, = torch.autograd.grad(loss, [x], create_graph=True)
    assert _doc_nodes(s) == _recorded_nodes([gx], loss)
    root = loss + 10 * (gx ** 2).sum()
    _close(_row(s, "\\mathtt{gx}"), gx.detach())
    _close(_row(s, "r_{4}"), root.detach())
    # by hand: d(loss + 10 sum(gx^2))/d gx = 20 gx; the root's own seed is 1 and loss's multiplier 1
    _close(_row(s, "\\bar\\lambda_{\\mathtt{gx}}"), 20 * gx.detach())
    _close(_row(s, "\\bar\\lambda_{\\mathtt{loss}}"), 1.0)
    root.backward()
    tail = s[s.index("What this pass returns"):]
    # each .grad: carried back through the forward's equations, equal to the engine's value and torch's
    _close(_row(tail, "\\frac{\\partial r_{4}}{\\partial \\mathtt{x}}"), x.grad)
    _close(_row(tail, "\\frac{\\partial r_{4}}{\\partial \\mathtt{fc1.weight}}"), fc1.weight.grad)
    _close(_row(tail, "\\frac{\\partial r_{4}}{\\partial \\mathtt{fc2.bias}}"), fc2.bias.grad)
    # the hooked variant: a full backward hook fires in both passes; its second pass is the same derivation
    hooked = tex[tex.index("\\section{Variant \\texttt{hooked}}"):]
    assert "\\subsection{Backward pass 2: second order}" in hooked and "full\\_backward" in hooked


def test_summed_gradients_and_full_hooks_typeset():
    tex = _tex(SUM)
    s = _section(tex)
    x = torch.tensor([[0.5, -1.0]], dtype=torch.float64, requires_grad=True)
    fc = torch.nn.Linear(2, 2).double()
    with torch.no_grad():
        fc.weight.copy_(torch.tensor([[0.2, -0.4], [0.6, 0.1]], dtype=torch.float64))
        fc.bias.copy_(torch.tensor([0.1, -0.3], dtype=torch.float64))
    y = torch.tanh(fc(x))
    loss = (y * y).sum()
    gx, = torch.autograd.grad(loss, [x], create_graph=True)
    nodes = _recorded_nodes([gx], loss)
    assert nodes["AddBackward0"] == 1          # the two gradients of y summed under grad mode
    assert _doc_nodes(s) == nodes
    assert "\\texttt{AddBackward0}, from PyTorch's engine (two gradients summed" in s
    assert "g_{4} & = g_{3} + g_{2}" in s
    _close(_row(s, "\\mathtt{gx}"), gx.detach())
    # both variants typeset their second pass; the hooked one lists the hook's calls in it
    hooked = tex[tex.index("\\section{Variant \\texttt{hooked}}"):]
    assert "\\subsection{Backward pass 2: second order}" in hooked
    assert "\\subsection{Backward pass 2: hook calls, in firing order}" in hooked


@pytest.mark.latex
@pytest.mark.skipif(find_engine() is None, reason="no pdflatex")
@pytest.mark.parametrize("path", [HV, GP])
def test_second_order_documents_compile(path):
    compile_pdf(_tex(path), None, strict=True)


def test_failed_create_graph_pass_typesets():
    """A create_graph grad that PyTorch stops (an unused input): the failed pass's document is written."""
    path = "tests/data/regressions/create_graph_unused_input_error.yaml"
    tex = _tex(path)
    w = torch.tensor([-0.25, 1.5], dtype=torch.float64, requires_grad=True)
    c = torch.tensor([1.5], dtype=torch.float64, requires_grad=True)
    x = torch.tensor([-0.5, 1.5], dtype=torch.float64)
    h = x / (w ** 2 + 1) + (x - w)
    loss = ((x - h) * w).mean()
    with pytest.raises(RuntimeError) as err:
        torch.autograd.grad(loss, [c, w], create_graph=True)
    assert str(err.value).split(".")[0] in tex


def test_second_pass_gradients_are_not_compared_with_the_loss():
    """Variant hvp has no hook: PyTorch's second pass returns H v and the mixed derivative because its
    root is sum(gw * v), not because a hook changed anything. The pass's gradients are PyTorch's
    values (checked against torch here), with no "without hooks" chain rule of the loss beside them
    and no "What the hooks changed" (the loss's multipliers are not this root's)."""
    tex = _tex(HV)
    hvp = tex[tex.index("\\section{Variant \\texttt{hvp}}"):tex.index("\\section{Variant \\texttt{observed}}")]
    second = hvp[hvp.index("\\subsection{Backward pass 2: second order}"):]
    assert "What the hooks changed" not in second and "with the hooks" not in second
    assert "Without hooks" not in second and "because hooks changed" not in second
    x = torch.tensor([[0.3, -0.5, 0.2]], dtype=torch.float64, requires_grad=True)
    lin = torch.nn.Linear(3, 2).double()
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[0.1, 0.2, -0.3], [0.4, -0.1, 0.5]], dtype=torch.float64))
        lin.bias.copy_(torch.tensor([0.1, -0.2], dtype=torch.float64))
    v = torch.tensor([[1.0, 0, 0], [0, 1, -1]], dtype=torch.float64)
    gw, = torch.autograd.grad((torch.tanh(lin(x)) ** 2).sum(), [lin.weight], create_graph=True)
    hv, hx = torch.autograd.grad((gw * v).sum(), [lin.weight, x], allow_unused=True)
    grads = second[second.index("\\subsection{Backward pass 2: gradients}"):]
    _close(_row(grads, "\\text{returned}_{\\mathtt{lin.weight}}"), hv)
    _close(_row(grads, "\\text{returned}_{\\mathtt{x}}"), hx)
