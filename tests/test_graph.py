"""``adjoint graph``: the backward graph as PyTorch builds it, hooks where they attach, module
boxes, None and materialized-zero edges; the command line around it; the picture in the LaTeX
document.

The drawn graph is read back from the DOT source (node names, sequence numbers, edges with
their slots) and compared with the graph real torch builds for the same model (torch-marked
tests); drawing it needs Graphviz's dot (graphviz-marked tests).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner

import adjoint
from adjoint.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SLINEAR = os.path.join(ROOT, "problems", "slinear.yaml")

NODE = re.compile(r'^\s*(n\d+) \[label=<.*?<B>(.*?)</B>.*?<FONT POINT-SIZE="9">(.*?)</FONT>', re.M)
EDGE = re.compile(r"^\s*(\w+) -> (\w+)(?: \[(.*)\])?$", re.M)
NOTE = re.compile(r'^\s*(hook\d+) \[label=<.*?<B>(.*?)</B>', re.M)


class Drawn:
    """The picture's DOT read back: nodes, edges (with their slot), hook notes and what they join."""

    def __init__(self, source: str):
        self.source = source
        self.nodes = {m[1]: (m[2], m[3]) for m in NODE.finditer(source)}
        self.notes = {m[1]: m[2] for m in NOTE.finditer(source)}
        self.edges = []
        for m in EDGE.finditer(source):
            attrs = m[3] or ""
            slot = re.search(r"taillabel=(\d+)", attrs)
            self.edges.append((m[1], m[2], int(slot[1]) if slot else 0, attrs))

    def ids(self, name: str, detail: str | None = None) -> list[str]:
        return [i for i, (n, d) in self.nodes.items() if n == name and (detail is None or detail in d)]

    def out(self, node: str) -> list[tuple[str, int, str]]:
        return sorted((b, slot, attrs) for a, b, slot, attrs in self.edges if a == node)

    def joined(self, note: str) -> set[str]:
        return {b if a == note else a for a, b, _, _ in self.edges if note in (a, b)}

    def chain(self, node: str):
        """The graph below ``node`` in nodechain's form (names, edges in slot order, leaves by name)."""
        name, detail = self.nodes[node]
        if name == "AccumulateGrad":
            return ("AccumulateGrad", detail.split(".grad:")[0])
        kids = [(slot, b) for b, slot, attrs in self.out(node) if b in self.nodes or "_none" in b]
        return (name, [None if "_none" in b else self.chain(b) for _, b in sorted(kids)])


def drawn(path: str = SLINEAR, variant: str = "legacy") -> Drawn:
    return Drawn(adjoint.load(path).solve()[variant].graph().source)


def test_legacy_hook_is_drawn_at_the_modules_last_node():
    d = drawn()
    (note,) = [n for n, text in d.notes.items() if "backward on f1" in text]
    assert d.notes[note].startswith("#1 ")
    (node,) = d.joined(note)
    assert d.nodes[node][0] == "PowBackward0" and "makes f1" in d.nodes[node][1]


def test_full_hook_is_drawn_at_the_inputs_backward_hook_function():
    d = drawn(variant="full")
    (note,) = d.notes
    (node,) = d.joined(note)
    assert d.nodes[node][0] == "BackwardHookFunctionBackward"
    # the input-side one: what it sends gradients to is f0's output node, outside f1
    (target,) = [b for b, _, _ in d.out(node) if b in d.nodes]
    assert d.nodes[target][0] == "ViewBackward0" and "makes f0" in d.nodes[target][1]


def test_modules_are_nested_boxes_and_leaves_show_their_grad_shape():
    d = drawn()
    source = d.source
    assert re.search(r"subgraph cluster_\d+ \{\s*graph \[.*label=<.*<B>f1 \[custom\]</B>", source)
    assert re.search(r"<B>f1\.f \[Linear\]</B>", source) and re.search(r"<B>f0 \[Linear\]</B>", source)
    f1 = source.index("f1 [custom]")
    f1f = source.index("f1.f [Linear]")
    assert f1 < f1f  # f1.f's box is inside f1's
    leaves = sorted(detail for name, detail in d.nodes.values() if name == "AccumulateGrad")
    assert leaves == ["f0.bias.grad: shape [1]", "f0.weight.grad: shape [1, 1]", "f1.f.bias.grad: shape [1]",
                      "f1.f.weight.grad: shape [1, 1]", "x.grad: shape [1]"]


def test_an_input_without_an_edge_is_a_none():
    d = drawn()
    (sub,) = d.ids("SubBackward0")
    slots = {slot: b for b, slot, _ in d.out(sub)}
    assert "_none" in slots[1] and d.nodes[slots[0]][0] == "PowBackward0"   # (y - 1): the 1 needs no gradient


ZEROS = """\
name: zeros
inputs:
  x: {value: [1.5, -2], requires_grad: true}
  z: {value: [3, 4], requires_grad: true}
model:
  inputs: [x, z]
  children:
    inner:
      inputs: [x, z]
      forward: "x * 2"
  forward: "inner(x, z)"
loss: "sum(y)"
hooks:
  - {module: inner, kind: full_backward, label: "sees zeros for z"}
"""


def test_materialized_zeros_are_marked(tmp_path):
    path = tmp_path / "zeros.yaml"
    path.write_text(ZEROS)
    d = drawn(str(path), "default")
    # z is an input of inner that its forward does not use: BackwardHookFunction materializes zeros for it
    (z_leaf,) = [i for i, (n, detail) in d.nodes.items() if n == "AccumulateGrad" and detail.startswith("z.grad")]
    (x_leaf,) = [i for i, (n, detail) in d.nodes.items() if n == "AccumulateGrad" and detail.startswith("x.grad")]
    into_z = [attrs for a, b, _, attrs in d.edges if b == z_leaf]
    into_x = [attrs for a, b, _, attrs in d.edges if b == x_leaf]
    assert len(into_z) == 1 and "label=zeros" in into_z[0]
    assert len(into_x) == 1 and "zeros" not in into_x[0]


def test_hostile_text_is_escaped_in_the_picture(tmp_path):
    path = tmp_path / "hostile.yaml"
    path.write_text('name: hostile\ninputs:\n  x: {value: [0.5], requires_grad: true}\nmodel: {forward: "x * 2"}\n'
                    'loss: "sum(y)"\nhooks:\n  - {tensor: x, label: "<B>bold</B> & \\"q\\" \\e]0;t\\a"}\n')
    source = adjoint.load(str(path)).solve().variants[0].graph().source
    assert "&lt;B&gt;bold&lt;/B&gt; &amp; &quot;q&quot; \\x1b]0;t\\x07" in source
    assert "\x1b" not in source and "\a" not in source


@pytest.mark.torch
def test_the_drawn_graph_is_the_one_torch_builds():
    import torch

    from nodechain import chain

    class SLinear(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.f = torch.nn.Linear(1, 1)

        def forward(self, x):
            return self.f(x) ** 2

    for variant in ("full", "legacy"):
        model = torch.nn.Sequential()
        model.add_module("f0", torch.nn.Linear(1, 1))
        model.add_module("f1", SLinear())
        names = {id(p): n for n, p in model.named_parameters()}
        x = torch.tensor([0.3], requires_grad=True)
        names[id(x)] = "x"
        if variant == "full":
            model.f1.register_full_backward_hook(lambda m, gi, go: None)
        else:
            model.f1.register_backward_hook(lambda m, gi, go: None)
        loss = (model(x) - 1) ** 2
        theirs = _names_only(chain(loss, names))
        d = drawn(variant=variant)
        (root,) = [b for a, b, _, _ in d.edges if a == "root0"]
        assert d.chain(root) == theirs, variant


def _names_only(node):
    """nodechain's form without sequence ranks (the picture shows absolute sequence numbers)."""
    if node is None or node[0] == "AccumulateGrad":
        return node
    name, _, kids = node
    return (name, [_names_only(k) for k in kids])


# ---- drawing and the command line -------------------------------------------------------------

def graph(*args, env=None):
    result = CliRunner().invoke(main, ["graph", *args], env=env)
    return result.exit_code, result.stdout_bytes, result.stderr


@pytest.mark.graphviz
@pytest.mark.parametrize("fmt, magic", [("svg", b"<svg"), ("png", b"\x89PNG"), ("pdf", b"%PDF")])
def test_picture_formats(fmt, magic):
    data = adjoint.load(SLINEAR).solve()["legacy"].graph().render(fmt)
    assert magic in data[:400]


@pytest.mark.graphviz
def test_graph_writes_one_file_per_variant(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)          # by default into the current directory, not beside FILE
    code, out, err = graph(SLINEAR)
    assert code == 0, err
    written = [tmp_path / f"slinear-{v}.svg" for v in ("full", "rescaled", "legacy")]
    assert out.decode() == "wrote " + " and ".join(p.name for p in written) + "\n"
    assert not any(f.endswith(".svg") for f in os.listdir(os.path.dirname(SLINEAR)))
    assert all(b"<svg" in p.read_bytes()[:400] for p in written)
    code, out, err = graph(SLINEAR, "--variant", "legacy", "-o", str(tmp_path / "g.png"))
    assert code == 0 and (tmp_path / "g.png").read_bytes().startswith(b"\x89PNG")
    assert os.stat(tmp_path / "g.png").st_mode & 0o777 == 0o666 & ~_umask()


def test_dot_source_needs_no_graphviz_program(tmp_path):
    code, out, err = graph(SLINEAR, "--variant", "legacy", "-o", "-", "--format", "dot", env={"PATH": str(tmp_path)})
    assert code == 0, err
    assert out.startswith(b"digraph backward {") and b"PowBackward0" in out


def test_without_dot_one_line_says_what_to_install(tmp_path):
    env = {**os.environ, "PYTHONPATH": ROOT, "PATH": str(tmp_path)}
    run = subprocess.run([sys.executable, "-m", "adjoint", "graph", SLINEAR, "-o", str(tmp_path / "g.svg")],
                         capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 2 and len(run.stderr.strip().splitlines()) == 1
    assert "apt-get install graphviz" in run.stderr and not (tmp_path / "g.svg").exists()


@pytest.mark.parametrize("args, message", [
    (["-o", "-"], "-o - writes one picture and the problem has 3 variants (full, rescaled, legacy); add --variant"),
    (["-o", "g.jpg"], "g.jpg: the picture's format comes from the name; end it in .svg, .png, .pdf or .dot"),
    (["-o", "g.svg", "--format", "png"], "g.svg: the name says svg but --format says png; make them agree"),
])
def test_graph_refuses_unclear_outputs(args, message):
    code, out, err = graph(SLINEAR, *args)
    assert code == 2 and err.strip().startswith(message) and len(err.strip().splitlines()) == 1 and out == b""


def test_graph_never_writes_over_the_problem(tmp_path):
    path = tmp_path / "p.dot"
    path.write_text(open(SLINEAR).read())
    code, _, err = graph(str(path), "--variant", "full", "-o", str(path))
    assert code == 2 and "is the problem file being read" in err
    assert path.read_text() == open(SLINEAR).read()


def test_graph_from_standard_input_needs_an_output():
    result = CliRunner().invoke(main, ["graph", "-"], input=open(SLINEAR).read())
    assert result.exit_code == 2 and "add -o OUT.svg" in result.stderr


@pytest.mark.graphviz
@pytest.mark.latex
@pytest.mark.pdftoppm
def test_latex_pdf_includes_the_picture(tmp_path):
    out = tmp_path / "d.tex"
    run = subprocess.run([sys.executable, "-m", "adjoint", "latex", SLINEAR, "--variant", "legacy", "-o", str(out),
                          "--pdf"], capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT},
                         timeout=300)
    assert run.returncode == 0, run.stderr
    assert "\\IfFileExists{adjoint-graph-1.pdf}" in out.read_text()
    text = subprocess.run(["pdftotext", str(tmp_path / "d.pdf"), "-"], capture_output=True, text=True).stdout
    assert re.search(r"#1\s+backward on f1", text) and "AccumulateGrad" in text and "PowBackward0" in text


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
