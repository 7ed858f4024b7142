"""The run as the derivation reads it: tensors numbered ``0..n`` in creation order, one
equation per op of the forward, the gradient PyTorch carried to each tensor.

:class:`GraphView` turns the engine's record of a variant (:class:`adjoint.passes.VariantRun`:
the runtime's :class:`~adjoint.graph.Application` list, its tensors and nodes, the backward's
record) into plain numbered records the document's analysis walks: ``vars`` (shape, leaf),
``eqns`` (primitive, operand ids or constants, output ids, params, node name and edges, module
call), ``names``, ``decls``, ``calls``, the forward ``values`` and the ``seen`` gradients.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...graph import Tensor
from ...solve import seen_at


@dataclass(frozen=True)
class VVar:
    id: int
    shape: tuple
    requires_grad: bool
    leaf: bool


@dataclass(frozen=True)
class VNode:
    name: str
    edges: tuple                      # per input slot: var id, or None (no gradient flows there)


@dataclass(frozen=True)
class VEqn:
    id: int
    prim: str
    ins: tuple                        # var ids, or backend values for Python numbers
    outs: tuple
    params: object
    node: VNode | None
    call: int | None
    loc: object


@dataclass
class VCall:
    id: int
    module: object
    callid: str
    k: int
    parent: int | None
    args: tuple
    out: int
    legacy_node: int | None
    body_start: int
    hooked: bool                      # the call has module backward hooks (full, pre or legacy)

    @property
    def path(self) -> str:
        return self.module.label


@dataclass(frozen=True)
class VFunctionSpec:
    decl: object
    module: object
    slots: tuple


@dataclass(frozen=True)
class VForwardEvent:
    call: int
    returned: object
    kind: str


@dataclass
class GraphView:
    run: object
    vars: list = field(default_factory=list)
    eqns: list = field(default_factory=list)
    names: dict = field(default_factory=dict)
    decls: dict = field(default_factory=dict)
    calls: list = field(default_factory=list)
    values: dict = field(default_factory=dict)
    seen: dict = field(default_factory=dict)
    forward_events: list = field(default_factory=list)
    root: int = -1
    grad_output: object = None
    variant: object = None

    def of(self, operand):
        return operand if not isinstance(operand, int) else self.values[operand]


def build_view(run) -> GraphView:
    rt, fwd, model = run.rt, run.forward, run.model
    view = GraphView(run, variant=run.variant, grad_output=run.variant.backward.grad_output)
    ids: dict[int, int] = {}
    leaf_ids = {t.id for t in model.leaves.values()}
    by_edge: dict = {}

    def var(t: Tensor) -> int:
        if t.id not in ids:
            ids[t.id] = len(view.vars)
            view.vars.append(VVar(ids[t.id], t.shape, t.requires_grad, t.id in leaf_ids))
            view.values[ids[t.id]] = t.value
            by_edge[(id(t.grad_fn), t.output_nr) if t.grad_fn is not None else t.id] = t
        return ids[t.id]

    for name, t in model.leaves.items():
        view.decls[var(t)] = model.decls[name]
    eqn_of_node: dict[int, int] = {}
    call_ids = {id(c): c.id for c in fwd.calls}
    for app in rt.applications:
        ins = tuple(app.ins[i].value if app.ins[i].wrapped else var(app.ins[i]) for i in range(len(app.ins)))
        outs = tuple(var(t) for t in app.outs)
        node = None
        if app.node is not None:
            edges = tuple(ins[i] if e is not None else None for i, e in enumerate(app.node.edges))
            node = VNode(app.node.name, edges)
            eqn_of_node[id(app.node)] = len(view.eqns)
        params = app.params
        if app.prim == "function":
            from ...function import slots_of
            params = VFunctionSpec(app.params.function, app.params, slots_of(app.params))
        view.eqns.append(VEqn(len(view.eqns), app.prim, ins, outs, params, node,
                              call_ids.get(id(app.call)) if app.call is not None else None, app.loc))
    for c in fwd.calls:
        view.calls.append(VCall(c.id, c.module, c.callid, c.k, c.parent, tuple(var(a) for a in c.args), var(c.out),
                                eqn_of_node.get(id(c.legacy_node)) if c.legacy_node is not None else None,
                                c.body_eqn, bool(c.bw is not None or c.legacy_hooks)))
    for name, t in fwd.names.items():
        view.names[name] = var(t)
    root = fwd.loss if fwd.loss is not None else fwd.output
    view.root = var(root)
    for rec in rt.log:
        if rec.phase == "forward" and rec.call is not None:
            view.forward_events.append(VForwardEvent(rec.call.id, rec.returned, rec.hook.kind))
    bwd = run.last_pass.result
    for key in bwd.seen:
        t = by_edge.get(key)
        if t is not None:
            view.seen[ids[t.id]] = seen_at(bwd, t)
    return view
