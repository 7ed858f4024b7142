"""The second-order keys of a backward step: ``create_graph``, ``as:``, ``root:`` / ``roots:`` with
``grad_outputs:``, ``allow_unused``, ``materialize_grads`` -> one :class:`SecondOrder` record.

They say what a PyTorch user writes::

    gx, = torch.autograd.grad(loss, [x], create_graph=True)     # {backward: {method: grad, inputs: [x],
                                                                 #   create_graph: true, as: [gx]}}
    (gx ** 2).sum().backward()                                   # {backward: {root: "sum(gx ** 2)"}}
    torch.autograd.grad([a, b], [x], grad_outputs=[ga, gb])      # roots: [a, b], grad_outputs: [...]

A root expression may name ``loss``, the forward's named tensors and the names earlier steps
made with ``as:``. A combination PyTorch refuses only when it runs (``allow_unused: false`` with
``materialize_grads: true``) is well formed: PyTorch's error is the answer (adjoint.engine.second_run).
"""

from __future__ import annotations

from dataclasses import dataclass

from adjoint.format.checks import boolean, string
from adjoint.format.errors import Loc, ProblemError
from adjoint.format.expr import parse_expression
from adjoint.format.literals import parse_literal
from adjoint.format.loader import YScalar, YSeq, kind_name

SECOND_KEYS = ("create_graph", "as", "root", "roots", "grad_outputs", "allow_unused", "materialize_grads")


@dataclass(frozen=True)
class SecondOrder:
    """The second-order options of one backward step (all optional)."""

    loc: Loc
    create_graph: bool = False
    names: tuple = ()                 # as: ((name, loc), ...), one per input of method: grad
    roots: tuple = ()                 # syntax.Expr per root (root: is one root)
    grad_outputs: tuple = ()          # Literal | None per root (roots: only)
    allow_unused: bool | None = None  # None: not passed
    materialize_grads: bool = False

    @property
    def given(self) -> bool:
        return bool(self.create_graph or self.names or self.roots or self.allow_unused is not None
                    or self.materialize_grads)


def parse_second(b, method: str, inputs) -> SecondOrder | None:
    """The second-order keys of the backward mapping ``b`` (None when it has none)."""
    if not any(b.get(k) is not None for k in SECOND_KEYS):
        return None
    create = boolean(b.get("create_graph"), "create_graph") if b.get("create_graph") is not None else False
    names: tuple = ()
    if b.get("as") is not None:
        node = b.get("as")
        if method != "grad":
            raise ProblemError(node.loc, "as: names what torch.autograd.grad returns; it needs method: grad "
                                         "(backward() returns nothing: read .grad instead)")
        if not isinstance(node, YSeq) or not node.items:
            raise ProblemError(node.loc, "as: must be a list of names, one per entry of inputs, such as [gx]")
        seen: list = []
        for item in node.items:
            n = string(item, "a name in as:")
            if not n.isidentifier():
                raise ProblemError(item.loc, f"'{n}' is not a name; write a Python identifier such as gx")
            if n in seen:
                raise ProblemError(item.loc, f"'{n}' is listed twice in as:")
            if n in ("loss", "y"):
                raise ProblemError(item.loc, f"as: cannot rebind '{n}'; choose another name such as g{n}")
            seen.append(n)
            names += ((n, item.loc),)
        if len(names) != len(inputs):
            raise ProblemError(node.loc, f"as: gives {len(names)} name(s) for {len(inputs)} input(s); give one "
                                         "name per entry of inputs")
    if b.get("root") is not None and b.get("roots") is not None:
        raise ProblemError(b.get("roots").loc, "give root: (one expression) or roots: (a list), not both")
    roots: tuple = ()
    if b.get("root") is not None:
        roots = (parse_expression(b.get("root"), "root"),)
    elif b.get("roots") is not None:
        node = b.get("roots")
        if not isinstance(node, YSeq) or not node.items:
            raise ProblemError(node.loc, "roots: must be a non-empty list of expressions such as [loss, \"sum(gx)\"]")
        roots = tuple(parse_expression(item, "a root") for item in node.items)
    grad_outputs: tuple = ()
    if b.get("grad_outputs") is not None:
        node = b.get("grad_outputs")
        if b.get("roots") is None:
            raise ProblemError(node.loc, "grad_outputs: goes with roots: (one per root); with one root write "
                                         "grad_output:")
        if not isinstance(node, YSeq) or len(node.items) != len(roots):
            raise ProblemError(node.loc, f"grad_outputs: must be a list of {len(roots)} entries (one per root; "
                                         "null for ones), not " + (f"{len(node.items)}" if isinstance(node, YSeq)
                                                                   else kind_name(node)))
        grad_outputs = tuple(None if isinstance(item, YScalar) and item.kind == "null" else parse_literal(item, "a grad_outputs entry")
                             for item in node.items)
    allow = None
    mat = False
    for key in ("allow_unused", "materialize_grads"):
        if b.get(key) is not None and method != "grad":
            raise ProblemError(b.get(key).loc, f"{key} is an argument of torch.autograd.grad; it needs method: grad")
    if b.get("allow_unused") is not None:
        allow = boolean(b.get("allow_unused"), "allow_unused")
    if b.get("materialize_grads") is not None:
        mat = boolean(b.get("materialize_grads"), "materialize_grads")
    return SecondOrder(b.loc, create, names, roots, grad_outputs, allow, mat)
