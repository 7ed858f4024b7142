"""The picture: the backward graph of one variant as PyTorch builds it, with every hook where
it attaches and its number in the firing order.

What is drawn comes from the engine's own record of the run (``VariantPrediction.run``), not
from the problem file, so it is the graph the prediction was computed on:

* every autograd node reachable from what ``backward`` started from (the loss, or the
  output), named as PyTorch names it, with its ``sequence_nr``; ``AccumulateGrad`` nodes
  name their leaf and the shape of its final ``.grad``; the tensor a node produced is named
  when the forward bound a name to it;
* an arrow per edge (``next_functions``), in the direction gradients flow; an input slot
  without an edge (PyTorch's ``None`` in ``next_functions``: the input needs no gradient)
  ends in a grey ``None``; an edge along which the engine handed materialized zeros (a
  ``BackwardHookFunction`` or custom Function receiving no gradient for an output) is red
  and says ``zeros``; a node that did not run (``autograd.grad`` prunes the graph) is dashed;
* module calls as boxes (clusters), nested as the calls were;
* every hook call as a yellow note joined to the node it ran at (a tensor hook or a pre-hook
  above it, a post-hook below it), numbered in firing order (the numbers of the report);
  forward hooks sit in their module's box; hooks that never fired are listed in the title.

Drawing is Graphviz's ``dot`` through the ``graphviz`` Python package; only this module
needs them (``adjoint solve`` never imports it). Everything from the problem file is put
into the picture escaped (HTML-like labels; control characters shown as escapes).
"""

from __future__ import annotations

import html

from adjoint.format.errors import ProblemError
from adjoint.engine.graph import Node, Tensor
from adjoint.answer.prediction import VariantPrediction
from adjoint.render.safetext import terminal_safe
from adjoint.render.dot import run_dot

FORMATS = ("svg", "png", "pdf", "dot")
NEEDS_DOT = ("drawing the graph needs Graphviz's dot program, which is not installed: apt-get install graphviz "
             "(or brew install graphviz); -o FILE.dot writes the source without it")
#: the most characters of one problem-file text (a label, a name) drawn in the picture
MAX_TEXT = 200
#: the most characters of one HTML-like label (Graphviz refuses more than 16,384)
MAX_LABEL = 12_000
NEEDS_BINDING = "drawing the graph needs the Python package graphviz: pip install 'graphviz>=0.20'"

#: hooks drawn above the node they run at (they see its incoming gradient); the rest below
BEFORE = ("hook", "pre", "full_backward_pre", "multi_grad")
SIDE = ("pack", "unpack")

FONT = "Helvetica"
HOOK_FILL = "#fff1a8"
LEAF_FILL = "#dbeafe"
HOOKFN_FILL = "#ede9fe"
ZERO = "#c62828"
GREY = "#8a8a8a"
CLUSTER_FILLS = ("#f6f6f6", "#ececec", "#e2e2e2")


def _graphviz():
    try:
        import graphviz
    except ImportError:
        raise ProblemError(None, NEEDS_BINDING) from None
    return graphviz


class Picture:
    """One variant's graph. ``source`` is the DOT text; :meth:`render` draws it (needs ``dot``).
    In a notebook it shows itself as SVG."""

    def __init__(self, graph, title: str):
        self.graph = graph
        self.title = title

    @property
    def source(self) -> str:
        return self.graph.source

    def render(self, fmt: str, max_inches: float | None = None) -> bytes:
        """The picture as ``svg``, ``png``, ``pdf`` or ``dot`` (the source) bytes; with
        ``max_inches``, a larger drawing is scaled down to fit that square (a figure in the
        LaTeX document: TeX cannot take a picture over 16,383 pt, about 227 inches)."""
        if fmt not in FORMATS:
            raise ProblemError(None, f"cannot draw the graph as '{fmt}'; the formats are {', '.join(FORMATS)}")
        if fmt == "dot":
            return self.source.encode("utf-8")
        graph = self.graph
        if max_inches is not None:
            graph = graph.copy()
            graph.graph_attr["size"] = f"{max_inches},{max_inches}"
        return run_dot(graph.source, fmt, NEEDS_DOT)

    def svg(self) -> str:
        return self.render("svg").decode("utf-8")

    def _repr_mimebundle_(self, include=None, exclude=None):
        try:
            return {"image/svg+xml": self.svg(), "text/plain": repr(self)}
        except ProblemError as exc:  # shown in place of the picture: how to get it
            return {"text/plain": f"{self!r}: {exc.message}"}

    def __repr__(self) -> str:
        return f"<Picture {self.title}>"


def picture(v: VariantPrediction) -> Picture:
    """The backward graph of ``v`` (see the module's docstring)."""
    graphviz = _graphviz()
    return _Drawing(v, graphviz).draw()


# ----------------------------------------------------------------------------- drawing

class _Drawing:
    def __init__(self, v: VariantPrediction, graphviz):
        self.v = v
        self.run = v.run
        self.gv = graphviz
        self.ids: dict[int, str] = {}          # id(Node) -> DOT node id
        self.nodes: list[Node] = []
        self.calls = {c.id: c for f in self.run.forwards for c in f.calls}

    def draw(self) -> Picture:
        v, run = self.v, self.run
        title = f"{run.problem.name}, variant {v.name}"
        g = self.gv.Digraph(name="backward", graph_attr={
            "rankdir": "TB", "fontname": FONT, "fontsize": "12", "labelloc": "t", "nodesep": "0.3",
            "ranksep": "0.35", "label": self._title(title), "newrank": "true"},
            node_attr={"fontname": FONT, "fontsize": "11", "shape": "box", "style": "rounded,filled",
                       "fillcolor": "white", "margin": "0.12,0.05"},
            edge_attr={"fontname": FONT, "fontsize": "9", "arrowsize": "0.7"})
        roots = self._roots()
        self._collect(roots)
        for i, n in enumerate(self.nodes):
            self.ids[id(n)] = f"n{i}"
        ran, zeros = self._engine_record()
        producers = self._producers()
        placed: dict[int | None, list] = {}     # call id (None: outside every module) -> DOT statements
        for n in self.nodes:
            call = n.module_call.id if n.module_call is not None and not n.is_accumulate else None
            placed.setdefault(call, []).append(("node", self.ids[id(n)], self._node_attrs(n, ran, producers)))
        notes = self._hook_notes(placed)
        self._clusters(g, placed)
        for k, (tensor, node) in enumerate(roots):
            entry = f"root{k}"
            g.node(entry, _label([(f"{_h(tensor.name or 'output')}.backward()" if v.method != "grad"
                                   else f"torch.autograd.grad({_h(tensor.name or 'output')}, ...)", True)]),
                   shape="oval", fillcolor="#e8f5e9")
            g.edge(entry, self.ids[id(node)])
        for n in self.nodes:
            self._edges(g, n, zeros)
        for dot_id, target, where in notes:
            if where == "before":
                g.edge(dot_id, target, style="dotted", arrowhead="none", color=GREY)
            elif where == "after":
                g.edge(target, dot_id, style="dotted", arrowhead="none", color=GREY)
            elif where == "side":
                g.edge(target, dot_id, style="dotted", arrowhead="none", color=GREY, constraint="false")
        return Picture(g, title)

    # ---- what to draw -------------------------------------------------------------
    def _roots(self) -> list[tuple[Tensor, Node]]:
        """(tensor, node) each backward started from: the loss (or output) of every forward."""
        out, seen = [], set()
        for f in self.run.forwards:
            t = f.loss if f.loss is not None else f.output
            for tensor in (t if isinstance(t, tuple) else (t,)):
                if not isinstance(tensor, Tensor) or not tensor.requires_grad:
                    continue
                node = tensor.grad_fn if tensor.grad_fn is not None else tensor.grad_accumulator
                if node is not None and id(node) not in seen:
                    seen.add(id(node))
                    out.append((tensor, node))
        return out

    def _collect(self, roots) -> None:
        seen: set[int] = set()
        stack = [node for _, node in roots]
        while stack:
            n = stack.pop()
            if id(n) in seen:
                continue
            seen.add(id(n))
            self.nodes.append(n)
            stack.extend(e.node for e in n.edges if e is not None)
        self.nodes.sort(key=lambda n: (n.is_accumulate, -n.seq if not n.is_accumulate else 0,
                                       n.variable.name or "" if n.is_accumulate else ""))

    def _engine_record(self):
        """(ids of nodes that ran, {(id(node), slot)} where the engine materialized zeros)."""
        ran: set[int] = set()
        zeros: set[tuple[int, int]] = set()
        by_id = {id(n): n for n in self.nodes}
        leaves = {n.variable.id: n for n in self.nodes if n.is_accumulate}
        for p in self.run.passes:
            for key, value in p.result.seen.items():
                if isinstance(key, tuple):
                    node = by_id.get(key[0])
                    if node is None:
                        continue
                    ran.add(key[0])
                    if value is None and node.kind in ("hookfn", "function"):
                        zeros.add(key)
                elif key in leaves:
                    ran.add(id(leaves[key]))
        return ran, zeros

    def _producers(self) -> dict[int, str]:
        out: dict[int, str] = {}
        for f in self.run.forwards:
            for name, t in f.names.items():
                if isinstance(t, Tensor) and t.grad_fn is not None:
                    out.setdefault(id(t.grad_fn), name)
        return out

    # ---- nodes and edges -------------------------------------------------------------
    def _node_attrs(self, n: Node, ran: set, producers: dict) -> dict:
        attrs: dict = {}
        if n.is_accumulate:
            t = n.variable
            name = t.name or "a leaf"
            grads = self.v.grads
            grad = grads.get(t.name) if t.name in grads else t.grad
            shape = "None" if grad is None else f"shape [{', '.join(map(str, grad.shape))}]"
            lines = [("AccumulateGrad", True), (f"{_h(name)}.grad: {shape}", False)]
            attrs["fillcolor"] = LEAF_FILL
        else:
            lines = [(_h(n.name), True), (f"seq {n.seq}", False)]
            made = producers.get(id(n))
            if made:
                lines[-1] = (f"seq {n.seq} &#183; makes {_h(made)}", False)
            if n.kind == "hookfn":
                attrs["fillcolor"] = HOOKFN_FILL
        if n.retains_grad_hooks:
            names = ", ".join(_h(t.name or "a tensor") for t in n.retains_grad_hooks.values())
            lines.append((f"retain_grad: {names}", False))
        if self.run.passes and id(n) not in ran:
            lines.append(("did not run", False))
            attrs.update(style="rounded,dashed", fontcolor=GREY, color=GREY)
        attrs["label"] = _label(lines)
        return attrs

    def _edges(self, g, n: Node, zeros: set) -> None:
        many = len(n.edges) > 1
        for i, e in enumerate(n.edges):
            slot = str(i) if many else ""
            if e is None:
                stub = f"{self.ids[id(n)]}_none{i}"
                if (id(n), i) in zeros and n.kind == "hookfn":   # zeros materialized for the hook, then dropped
                    g.node(stub, "zeros (materialized), no edge", shape="plaintext", style="", fontcolor=ZERO,
                           fontsize="9")
                    g.edge(self.ids[id(n)], stub, style="dashed", color=ZERO, arrowhead="none", taillabel=slot,
                           fontcolor=ZERO, label="zeros", penwidth="1.5")
                    continue
                g.node(stub, "None", shape="plaintext", style="", fontcolor=GREY, fontsize="9")
                g.edge(self.ids[id(n)], stub, style="dashed", color=GREY, arrowhead="none", taillabel=slot,
                       fontcolor=GREY)
                continue
            attrs = {"taillabel": slot} if slot else {}
            if (id(n), i) in zeros and n.kind == "hookfn":
                attrs.update(color=ZERO, fontcolor=ZERO, style="dashed", label="zeros", penwidth="1.5")
            g.edge(self.ids[id(n)], self.ids[id(e.node)], **attrs)
        if n.kind == "function":
            slots = sorted(i for (nid, i) in zeros if nid == id(n))
            if slots:
                stub = f"{self.ids[id(n)]}_zeros"
                g.node(stub, f"grad_output {', '.join(map(str, slots))}: zeros (materialized)", shape="plaintext",
                       style="", fontcolor=ZERO, fontsize="9")
                g.edge(stub, self.ids[id(n)], color=ZERO, style="dashed", arrowhead="none", constraint="false")

    # ---- hooks -------------------------------------------------------------------------
    def _hook_notes(self, placed: dict) -> list[tuple[str, str, str]]:
        """One note per (hook, kind, place) with every firing number there; returns how to join
        each to its node: (note id, node id, before | after | side | none)."""
        groups: dict[tuple, list] = {}
        order: list[tuple] = []
        for number, (rec, h) in enumerate(zip(self.run.rt.log, self.v.hook_calls), 1):
            node = rec.node if rec.node is not None and id(rec.node) in self.ids else None
            where = ("node", id(node)) if node is not None else (
                ("call", rec.call.id) if rec.call is not None else ("free", None))
            key = (h.index, h.kind, h.is_global, where)
            if key not in groups:
                groups[key] = []
                order.append(key)
            groups[key].append((number, h, node, rec.call))
        joins = []
        for k, key in enumerate(order):
            entries = groups[key]
            numbers = ", ".join(f"#{num}" for num, *_ in entries)
            _, h, node, call = entries[0]
            what = f"{'global ' if h.is_global else ''}{h.kind}"
            target = _h(h.target) if h.target else ""
            if h.kind in SIDE:
                where = f" for {target}" if target else ""
            elif h.is_global:
                where = f" (fired for {target})" if target else ""
            else:
                where = f" on {target}" if target else ""
            head = f"{numbers}  {_h(what)}{where}"
            lines = [(head, True)]
            if h.label and h.label != f"{h.kind}@{h.target}":
                lines.append((_h(h.label), False))
            if any(e[1].raised for e in entries):
                lines.append(("raised", False))
            elif any(e[1].returned is not None for e in entries) and h.kind not in SIDE:
                lines.append(("returned a value", False))
            note = f"hook{k}"
            attrs = {"label": _label(lines), "shape": "note", "fillcolor": HOOK_FILL, "fontsize": "10"}
            if node is not None:
                placement = "side" if h.kind in SIDE else ("before" if h.kind in BEFORE else "after")
                home = node.module_call.id if node.module_call is not None and not node.is_accumulate else None
                placed.setdefault(home, []).append(("node", note, attrs))
                joins.append((note, self.ids[id(node)], placement))
            else:
                home = call.id if call is not None and call.id in self._drawn_calls(placed) else None
                placed.setdefault(home, []).append(("node", note, attrs))
        return joins

    def _drawn_calls(self, placed: dict) -> set:
        """Calls that get a box: those with nodes, and their ancestors; forward hooks' modules too."""
        out: set = set()
        for cid in list(placed) + [c.call.id for c in self.run.rt.log if c.call is not None]:
            while cid is not None and cid not in out:
                out.add(cid)
                call = self.calls.get(cid)
                cid = call.parent if call is not None else None
        return out

    # ---- module boxes --------------------------------------------------------------------
    def _clusters(self, g, placed: dict) -> None:
        drawn = self._drawn_calls(placed)
        children: dict[int | None, list[int]] = {}
        for cid in sorted(drawn):
            call = self.calls.get(cid)
            parent = call.parent if call is not None and call.parent in drawn else None
            children.setdefault(parent, []).append(cid)

        def fill(graph, cid: int | None, depth: int) -> None:
            for kind, dot_id, attrs in placed.get(cid, []):
                graph.node(dot_id, **attrs)
            for child in children.get(cid, []):
                call = self.calls.get(child)
                if call is None:   # a call of a forward that raised (no record of it): no box of its own
                    fill(graph, child, depth)
                    continue
                sub = self.gv.Digraph(name=f"cluster_{child}", graph_attr={
                    "label": _label([(f"{_h(call.callid)} [{_h(call.module.type or 'custom')}]", True)]),
                    "labeljust": "l", "style": "rounded,filled", "color": "#b0b0b0",
                    "fillcolor": CLUSTER_FILLS[min(depth, len(CLUSTER_FILLS) - 1)], "fontsize": "11"})
                fill(sub, child, depth + 1)
                graph.subgraph(sub)

        fill(g, None, 0)

    def _title(self, title: str) -> str:
        fired = {h.index for h in self.v.hook_calls}
        silent = [h for h in self.run.variant.hooks if h.index not in fired]
        lines = [(_h(title), True),
                 ("gradients flow along the arrows; yellow notes are hook calls, numbered in firing order", False)]
        if silent:
            lines.append(("registered, never fired: " + ", ".join(_h(h.label) for h in silent), False))
        if self.v.error is not None:
            lines.append((f"PyTorch raises {_h(self.v.error.type)}: {_h(self.v.error.message)}", False))
        return _label(lines)


def _label(lines: list[tuple[str, bool]]) -> str:
    """An HTML-like label: the first bold line(s) as given, the others small; text already escaped.
    Lines past what Graphviz takes in one label (16,384 characters) are counted, not drawn."""
    rows = []
    used = 0
    for i, (text, bold) in enumerate(lines):
        used += len(text) + 80
        if used > MAX_LABEL:
            rows.append(f'<TR><TD><FONT POINT-SIZE="9">… ({len(lines) - i} more lines)</FONT></TD></TR>')
            break
        if len(text) > MAX_LABEL // 2:   # one line joining many texts: cut, never inside an &entity;
            text = text[:MAX_LABEL // 2]
            if text.rfind("&") > text.rfind(";"):
                text = text[:text.rfind("&")]
            text += "…"
        cell = f"<B>{text}</B>" if bold else f'<FONT POINT-SIZE="9">{text}</FONT>'
        rows.append(f"<TR><TD>{cell}</TD></TR>")
    return f'<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="0" CELLPADDING="1">{"".join(rows)}</TABLE>>'


def _h(text: str) -> str:
    """Problem-file text made safe inside an HTML-like label (and free of control characters),
    cut to MAX_TEXT characters: Graphviz refuses a label over 16,384."""
    text = str(text)
    if len(text) > MAX_TEXT:
        text = text[:MAX_TEXT - 1] + "…"
    return html.escape(terminal_safe(text), quote=True).replace("&#x27;", "&#39;")
