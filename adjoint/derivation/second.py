"""The second-order derivation: a backward pass from a ``root:`` that reads gradients an earlier
``create_graph=True`` backward returned (adjoint.engine.second_engine, adjoint.engine.second_run).

The create_graph backward ran every node's backward formula as recorded ops (the engine kept them:
``Pass.recorded``, each a :class:`~adjoint.engine.graph.Application` whose ``call`` is the node whose
formula it belongs to); the root expression's ops were kept too (``SecondRequest.root_ops``). Those ops,
the ones the root depends on, are the forward of the second pass: one equation each, written with the
op's own ``Math`` formula. The second pass's adjoint equations are the adjoint of the adjoint: a
multiplier ``\\bar\\lambda`` for every tensor of those equations, ``\\bar\\lambda_u = \\sum_j J_{ju}^\\top
\\bar\\lambda_j`` over the equations that read ``u``, each term the op's vector-Jacobian product as a tree,
and its value computed here with the op's own VJP, hooks ignored (what hooks handed and changed is the
hook-call section's, from the engine's log). Those values are the part of the derivative that flows
through the recorded ops; for a tensor of the forward pass PyTorch then carries it on through the
forward's graph, and the gradients the pass returned are the engine's values.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from adjoint.engine.graph import Tensor
from adjoint.engine.ops import REGISTRY
from adjoint.values import arith as A
from adjoint.values.mathtree import TAtom, TLam, simplify, vjp_tree


@dataclass
class SecondTensor:
    """One tensor of the second-order equations."""

    var: int                         # its index here (the trees' TAtom.var)
    name: str | None                 # the file's name for it (x, lin.weight, gw), if it has one
    role: str                        # forward | constant | recorded | root
    shape: tuple
    value: object                    # Exact: its value when the op read (or made) it
    grad_fn: str | None = None       # a forward tensor's node (TanhBackward0), None for a leaf
    bar: object = None               # its \bar\lambda through the recorded ops (hooks ignored), None: none reaches it
    key: tuple = ()                  # a forward tensor: ("node", id(grad_fn), output_nr) or ("leaf", id(tensor))


@dataclass
class SecondEquation:
    """``out = tree``: one recorded op."""

    out: int
    tree: object                     # mathtree over the SecondTensor vars
    prim: str
    node: str | None                 # the autograd node the op made (MmBackward0), None: it needs no gradient
    formula_of: str | None           # the first-order node whose backward formula ran it (None: a sum of two
                                     # gradients, a .grad update, or the root expression)
    stage: str                       # backward (the create_graph pass) | root


@dataclass
class SecondAdjoint:
    """``\\bar\\lambda_var = sum of terms``: one term per equation reading ``var``."""

    var: int
    terms: list                      # (equation's out var, tree of J^T \bar\lambda_out)


@dataclass
class SecondOrder:
    """What the document derives for a backward pass from a root that reads create_graph gradients."""

    passes: list                     # the create_graph passes whose recorded ops appear (1-based)
    roots: list                      # the SecondTensor var of each root
    seeds: list                      # the gradient each root starts with (Exact)
    tensors: list = field(default_factory=list)     # SecondTensor by var
    equations: list = field(default_factory=list)   # SecondEquation, in the order the ops ran
    adjoints: list = field(default_factory=list)    # SecondAdjoint, from the roots down
    recorded: int = 0                # how many ops the create_graph passes recorded in all
    skipped: list = field(default_factory=list)     # prims of needed ops without a formula here (none expected)
    totals: list = field(default_factory=list)      # SecondTotal per gradient the pass returns, when checked


@dataclass
class SecondTotal:
    """A gradient the pass returns as the sum of its two parts: the leaf's own lambda-bar (through the
    recorded formulas) and what the forward's graph carries back from the lambda-bar of the forward's
    tensors; written only when the sum is exactly the engine's value."""

    name: str
    var: int | None                  # the leaf's SecondTensor var (None: the formulas do not read it)
    direct: object                   # Exact or None
    through_forward: object          # Exact
    total: object                    # Exact


def second_order(run, p, passes: list, number: int) -> SecondOrder | None:
    """The second-order derivation of pass ``p`` (``number``: its 1-based index in ``passes``), or None when
    it is not a pass from a root that reads a create_graph pass's gradients."""
    second = getattr(p.request, "second", None)
    if second is None or not second.second.roots:
        return None
    earlier = [(i + 1, q) for i, q in enumerate(passes[:number - 1]) if q.recorded]
    if not earlier:
        return None
    apps = [(q_number, "backward", app) for q_number, q in earlier for app in q.recorded]
    apps += [(None, "root", app) for app in getattr(second, "root_ops", [])]
    made = {}
    for i, (_, _, app) in enumerate(apps):
        for t in app.outs:
            made[id(t)] = i
    # the ops the roots depend on, through tensors made by these ops
    need: set[int] = set()
    todo = [id(r) for r in second.roots if id(r) in made]
    while todo:
        i = made[todo.pop()]
        if i in need:
            continue
        need.add(i)
        todo += [id(t) for t in apps[i][2].ins if isinstance(t, Tensor) and id(t) in made]
    used = [apps[i] for i in sorted(need)]
    rec = SecondOrder(sorted({n for n, _, _ in used if n is not None}), [], [],
                      recorded=sum(len(q.recorded) for _, q in earlier))
    var_of: dict[int, int] = {}
    roles = {id(t): stage for _, stage, app in used for t in app.outs}

    def var(t: Tensor, value) -> int:
        if id(t) not in var_of and id(t) not in roles and t.grad_fn is not None:
            # an unpacked saved tensor is a new Tensor object of the same autograd output: one variable
            key = ("fn", id(t.grad_fn), t.output_nr)
            if key in var_of:
                var_of[id(t)] = var_of[key]
                rec.tensors[var_of[key]].name = rec.tensors[var_of[key]].name or t.name
            else:
                var_of[key] = len(rec.tensors)
        if id(t) not in var_of:
            role = roles.get(id(t))
            if role is None:
                role = "forward" if t.requires_grad else "constant"
            else:
                role = "recorded" if role == "backward" else "root"
            grad_fn = t.grad_fn.name if role == "forward" and t.grad_fn is not None else None
            var_of[id(t)] = len(rec.tensors)
            key = (("node", id(t.grad_fn), t.output_nr) if t.grad_fn is not None else ("leaf", id(t))) \
                if role == "forward" else ()
            rec.tensors.append(SecondTensor(len(rec.tensors), t.name, role, tuple(t.shape), value, grad_fn, key=key))
        return var_of[id(t)]

    for _, stage, app in used:
        op = REGISTRY.get(app.prim)
        if op is None or getattr(op, "math", None) is None:
            rec.skipped.append(app.prim)
            continue
        # an optional tensor argument not given (a layer norm's weight or bias) is None, as in the forward's equations
        args = [TAtom(var(t, v), tuple(t.shape)) if t is not None else None for t, v in zip(app.ins, app.in_values)]
        for k, (t, v) in enumerate(zip(app.outs, app.out_values)):
            out = var(t, v)
            tree = op.math.formula(args, app.params, tuple(t.shape), k)
            frm = app.call.name if app.call is not None and hasattr(app.call, "edges") else None
            rec.equations.append(SecondEquation(out, tree, app.prim, app.node.name if app.node is not None else None,
                                                frm, stage))
    rec.roots = [var_of[id(r)] for r in second.roots if id(r) in var_of]
    B = run.rt.B
    rec.seeds = [g.value if isinstance(g, Tensor) else g if g is not None else B.full(r.shape, 1)
                 for r, g in zip(second.roots, second.grads)]
    _adjoints(rec, used, var_of, B)
    return rec


def _adjoints(rec: SecondOrder, used: list, var_of: dict, B) -> None:
    """The adjoint equations as trees, and their values by the ops' own VJPs, from the roots down."""
    bars = {v: s for v, s in zip(rec.roots, rec.seeds)}
    terms: dict[int, list] = {}
    by_out = {e.out: e for e in rec.equations}
    for _, _, app in reversed(used):
        op = REGISTRY.get(app.prim)
        if op is None or getattr(op, "math", None) is None:
            continue
        outs = [var_of[id(t)] for t in app.outs]
        gs = [bars.get(o) for o in outs]
        if all(g is None for g in gs):
            continue
        for o in outs:
            contrib: dict = {}
            vjp_tree(by_out[o].tree, TLam(o, rec.tensors[o].shape), contrib, {})
            for v, tree in contrib.items():
                terms.setdefault(v, []).append((o, simplify(tree)))
        ins = [var_of[id(t)] if t is not None else None for t in app.ins]
        need = [v is not None and rec.tensors[v].role != "constant" for v in ins]
        if not any(need):
            continue
        filled = [g if g is not None else B.zeros(rec.tensors[o].shape) for g, o in zip(gs, outs)]
        res = op.vjp(B, filled[:1] if op.outputs == 1 else filled, list(app.in_values),
                     list(app.out_values)[:1] if op.outputs == 1 else list(app.out_values), app.params, need)
        for v, r, n in zip(ins, res, need):
            if r is None or not n or v is None:
                continue
            shape = rec.tensors[v].shape
            if tuple(B.shape(r)) != shape:
                r = A.sum_to(r, shape)
            bars[v] = r if bars.get(v) is None else A.add(bars[v], r)
    for t in rec.tensors:
        t.bar = bars.get(t.var)
    order = sorted(terms, key=lambda v: -max((i for i, e in enumerate(rec.equations) if e.out == v), default=-1))
    rec.adjoints = [SecondAdjoint(v, terms[v]) for v in order if rec.tensors[v].role != "constant"]


def second_totals(rec: SecondOrder, g, a, gradients: list, same) -> None:
    """Carry the lambda-bar of the forward's tensors back through the forward's equations (``g``, ``a``: the
    unit's Equations and Analysis; hooks ignored) and split each returned gradient into its two parts; kept
    only when their sum is exactly the engine's value (``same``)."""
    seeds: dict = {}
    direct: dict = {}
    for t in rec.tensors:
        if t.role != "forward" or t.bar is None:
            continue
        kind = t.key[0] if t.key else None
        vid = g.var_of_node.get(t.key[1:]) if kind == "node" else g.leaf_var.get(t.key[1]) if kind == "leaf" else None
        if vid is None and kind == "leaf" and t.name:
            vid = g.leaves.get(t.name)    # a saved leaf unpacks as another Tensor object of the same leaf
        if vid is None:
            return                        # a tensor the forward's equations do not show: no split
        c = a.canon(vid)
        seeds[c] = t.bar if c not in seeds else A.add(seeds[c], t.bar)
        if kind == "leaf":
            direct[c] = t
    if not seeds:
        return
    cot = a.sweep(range(len(g.eqns)), dict(seeds))
    for gr in gradients:
        vid = g.final.get(gr.name)
        if vid is None or gr.value is None:
            continue
        c = a.canon(vid)
        total = cot.get(c)
        if total is None or not same(gr.value, total):
            continue
        leaf = direct.get(c)
        own = leaf.bar if leaf is not None else None
        rest = A.sub(total, own) if own is not None else total
        rec.totals.append(SecondTotal(gr.name, leaf.var if leaf is not None else None, own, rest, total))
