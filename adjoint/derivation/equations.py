"""A forward pass as numbered equations: one variable per tensor *version*, one equation per op.

:func:`equations` reads the engine's record of one forward pass (the runtime's
:class:`~adjoint.engine.graph.Application` list over ``ForwardResult.apps``) and numbers what it finds:
every leaf of the pass and every output of an op is a :class:`Var`; an in-place op makes a new
version of its tensor (a new Var), so ``b.mul_(2)`` reads as ``b' = 2 b``; a write through a view
(``copy_slices``) makes a new version of the base; a view read after its base changed is the
view regenerated from the base's new version (PyTorch's ``AsStridedBackward0``). Tensors no op
made (``detach()``, literals made in a forward) are constants. Names, module calls and the
root are resolved to the version that was current when the file bound them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from adjoint.engine.graph import Tensor


@dataclass(eq=False)
class Var:
    """A tensor of the derivation's equations: its shape, dtype, value and the equation that made it."""

    id: int
    tensor: Tensor
    shape: tuple
    dtype: str
    requires_grad: bool
    value: object
    leaf: bool = False               # a declared leaf of the problem (input, target, parameter, buffer)
    eqn: "Eqn | None" = None         # the equation that made it (None: a leaf or a constant)
    out_index: int = 0
    version_of: "Var | None" = None  # an in-place op's result, a regenerated view: the version before


@dataclass(eq=False)
class Eqn:
    """One equation of the derivation: a primitive applied to input variables, with the autograd node it made."""

    id: int
    prim: str
    ins: tuple                       # Var ids, or the value of a Python number PyTorch wrapped
    outs: tuple                      # Var ids
    params: object
    node: object                     # the autograd Node (None: no gradient flows through it)
    edges: tuple                     # per input slot: the Var id a gradient flows to, or None
    call: int | None                 # index of the module call (ForwardResult.calls) it ran in
    inplace: bool = False
    wrapped: bool = False            # an in-place op on a view: CopySlices calls its node (its own equation is
                                     # the copy_slices one that follows)
    loc: object = None


@dataclass
class CallView:
    """One module call as the derivation sees it: its arguments, outputs and the equations of its body."""

    index: int
    call: object                     # forward.Call
    args: tuple                      # Var ids of the positional inputs (after forward-pre hooks)
    outs: tuple                      # Var ids of the output(s)
    body: int                        # number of this pass's equations made before its body ran
    legacy_eqn: int | None           # the equation whose node carries legacy backward hooks


@dataclass
class Equations:
    """The forward pass written as equations over variables, with the lookups the derivation needs."""

    vars: list = field(default_factory=list)
    eqns: list = field(default_factory=list)
    leaves: dict = field(default_factory=dict)      # leaf name -> Var id (the pass's leaves, in order)
    names: dict = field(default_factory=dict)       # every bound name -> Var id (as bound)
    final: dict = field(default_factory=dict)       # every bound name -> Var id of its tensor when the pass ended
    calls: list = field(default_factory=list)       # CallView per module call, in order
    root: int = -1                                  # what backward starts from (the loss, or the output)
    var_of_node: dict = field(default_factory=dict) # (id(node), output_nr) -> Var id
    eqn_of_node: dict = field(default_factory=dict) # id(node) -> Eqn id
    leaf_var: dict = field(default_factory=dict)    # leaf Tensor id -> Var id

    def of(self, operand):
        """The value of an equation's operand (a Var id, or a wrapped number's value)."""
        return operand if not isinstance(operand, int) else self.vars[operand].value


def equations(run, fwd) -> Equations:
    """The numbered equations of forward pass ``fwd`` (a ForwardResult of ``run``)."""
    return _Builder(run, fwd).build()


class _Builder:
    def __init__(self, run, fwd):
        self.run, self.fwd, self.rt = run, fwd, run.rt
        self.g = Equations()
        self.cur: dict[int, int] = {}          # tensor id -> current Var id
        self.history: dict[int, list] = {}     # tensor id -> [(ops done when made, Var id)]
        self.writes: dict[int, int] = {}       # storage root id -> writes so far
        self.gen: dict[int, int] = {}          # Var id -> writes of its root when made
        self.done = fwd.apps.start

    # ---- vars ------------------------------------------------------------------------
    @staticmethod
    def root_of(t: Tensor) -> Tensor:
        return t.base if t.base is not None else t

    def new_var(self, t: Tensor, value, leaf: bool = False, eqn: Eqn | None = None, k: int = 0) -> int:
        """A new version of ``t``; an op's output exists once the op is done (``self.done + 1``)."""
        vid = len(self.g.vars)
        prev = self.cur.get(t.id)
        rg = t.requires_grad if eqn is None else self.output_requires_grad(eqn, k, prev)
        self.g.vars.append(Var(vid, t, tuple(self.rt.B.shape(value)) if value is not None else t.shape, t.dtype,
                               rg, value, leaf, eqn, k, self.g.vars[prev] if prev is not None else None))
        self.cur[t.id] = vid
        self.history.setdefault(t.id, []).append((self.done + (eqn is not None), vid))
        self.gen[vid] = self.writes.get(self.root_of(t).id, 0)
        return vid

    def output_requires_grad(self, eqn: Eqn, k: int, prev: int | None) -> bool:
        """An op's output requires grad when the op made a node (a BackwardHookFunction output only
        when its own input does); an in-place op under no_grad keeps what the tensor had."""
        if eqn.node is None:
            return eqn.inplace and prev is not None and self.g.vars[prev].requires_grad
        if eqn.prim == "bhf":
            return isinstance(eqn.ins[k], int) and self.g.vars[eqn.ins[k]].requires_grad
        return True

    def read(self, t: Tensor, value) -> int:
        """The Var an op reads: the tensor's current version; a constant the first time a tensor no
        op made is read; a fresh version when its storage was written since with no equation for it."""
        vid = self.cur.get(t.id)
        if vid is None:
            return self.new_var(t, value)
        if self.gen[vid] != self.writes.get(self.root_of(t).id, 0):
            vid = self.new_var(t, value)           # written since with no equation saying how: a constant
        return vid

    def version_at(self, t: Tensor, done: int) -> int | None:
        """The Var of ``t`` once ``done`` ops of the run had been applied."""
        found = None
        history = self.history.get(t.id, [])
        for at, vid in history:
            if at <= done:
                found = vid
        if found is None and history and self.g.vars[history[0][1]].eqn is None:
            found = history[0][1]          # a constant (detach(), made in the forward): read only later
        return found

    # ---- build -----------------------------------------------------------------------
    def build(self) -> Equations:
        run, fwd, g = self.run, self.fwd, self.g
        for name in run.model.leaves:
            t = fwd.names.get(name)
            if isinstance(t, Tensor) and t.id in g.leaf_var:   # a tied parameter: the same leaf, another name
                g.leaves[name] = g.leaf_var[t.id]
            elif isinstance(t, Tensor):
                vid = self.new_var(t, fwd.leaf_values.get(name, t.value), leaf=True)
                g.leaves[name] = vid
                g.leaf_var[t.id] = vid
        calls = {id(c): i for i, c in enumerate(fwd.calls)}
        apps = self.rt.applications
        for index in fwd.apps:
            self.apply(apps[index], calls)
            self.done = index + 1
        for name, t in fwd.names.items():
            if isinstance(t, Tensor):
                vid = self.version_at(t, fwd.bound_at.get(name, fwd.apps.stop))
                if vid is not None:
                    g.names[name] = vid
                    g.final[name] = self.version_at(t, fwd.apps.stop)
        for i, c in enumerate(fwd.calls):
            outs = c.out if isinstance(c.out, tuple) else (c.out,)
            at = fwd.bound_at.get(c.callid, fwd.bound_at.get(f"{c.callid}[0]", fwd.apps.stop))
            legacy = self.g.eqn_of_node.get(id(c.legacy_node)) if c.legacy_node is not None else None
            g.calls.append(CallView(i, c, tuple(self.version_at(a, c.body_eqn) for a in c.args if isinstance(a, Tensor)),
                                    tuple(self.version_at(o, at) for o in outs if isinstance(o, Tensor)),
                                    c.body_eqn - fwd.apps.start, legacy))
        root = fwd.loss if fwd.loss is not None else fwd.output
        if isinstance(root, Tensor):
            g.root = self.version_at(root, fwd.apps.stop)
        return g

    def apply(self, app, calls: dict) -> None:
        g = self.g
        eqn = Eqn(len(g.eqns), app.prim, (), (), app.params, app.node, (), calls.get(id(app.call)),
                  loc=app.loc)
        ins = []
        for k, (t, value) in enumerate(zip(app.ins, app.in_values)):
            if t is None:               # an optional tensor argument not given (a bias): no variable
                ins.append(None)
            elif t.wrapped:
                ins.append(value)
            elif app.prim == "copy_slices" and k == 0:     # the base as it was before the write through its view
                ins.append(self.cur[t.id] if t.id in self.cur else self.read(t, value))
            else:
                ins.append(self.read(t, value))
        eqn.ins = tuple(ins)
        if app.prim == "copy_slices" and g.eqns and g.eqns[-1].node is app.node.params[1]:
            g.eqns[-1].wrapped = True
        eqn.inplace = app.prim != "copy_slices" and bool(app.outs) and app.outs[0] is app.ins[0]
        if eqn.inplace or app.prim == "copy_slices":
            root = self.root_of(app.outs[0])
            if eqn.inplace:
                self.writes[root.id] = self.writes.get(root.id, 0) + 1
        outs = []
        for k, (t, value) in enumerate(zip(app.outs, app.out_values)):
            outs.append(self.new_var(t, value, eqn=eqn, k=k))
        eqn.outs = tuple(outs)
        if app.node is not None:
            eqn.edges = tuple(ins[i] if e is not None else None for i, e in enumerate(app.node.edges))
            g.eqn_of_node[id(app.node)] = eqn.id
            for k, vid in enumerate(outs):
                g.var_of_node[(id(app.node), k)] = vid
        g.eqns.append(eqn)
