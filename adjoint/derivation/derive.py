"""Building the derivation record (:mod:`.record`) from the engine's record of a run.

:func:`derive_variant` takes one :class:`~adjoint.engine.passes.VariantRun` and the prediction assembled
from it, and computes, once, what the document says: for every backward pass, its forward
pass as numbered equations (:mod:`.equations`), the analysis of symbols, steps and
multipliers (:mod:`.analysis`), and what each hook call involved (:mod:`.hookcalls`).
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.values.numbers.symbolic import sympy as load_sympy
from adjoint.values.exact import Exact
from adjoint.engine.graph import Tensor, Typed
from adjoint.values.mathtree import TConst, simplify, to_sympy, vjp_tree
from adjoint.engine.adjoints import boundaries_of
from adjoint.engine.observer import with_observed
from adjoint.derivation.analysis import Analysis, AStep
from adjoint.derivation.equations import equations
from adjoint.derivation.expressions import expr_tree, program_source, source, statement_source
from adjoint.derivation.hookcalls import hook_calls
from adjoint.derivation.record import (Arrival, ArrivalTerm, Boundary, BoundaryInput, CallInfo, Chain, ChainFactor, Change,
                     DeclaredHook, ErrorInfo, FunctionNote, Gradient, Ident, LocalDerivative, Step, StepInfo, Symbol,
                     TensorInfo, Unit, VariantDerivation, Version)
from adjoint.derivation.values import ratio, same
from adjoint.derivation.second import second_order, second_totals


def derive_variant(pred_variant) -> VariantDerivation:
    """The derivation of one solved variant (``VariantPrediction``), from its run: one unit per backward
    pass (and per forward pass no backward differentiates), the steps in order, the error."""
    run = pred_variant.run
    variant = run.variant
    functions = [FunctionNote(f.name, f.callid, f.slot, f.declared, f.true, f.matches) for f in pred_variant.functions]
    vd = VariantDerivation(variant.name, variant.description, [declared(h) for h in variant.hooks], [],
                           list(pred_variant.notes), functions, sorted({f.name for f in pred_variant.functions}),
                           stepped=run.stepped)
    records = [(i + 1, h, rec) for i, (h, rec) in enumerate(zip(pred_variant.hook_calls, run.rt.log))]
    passes = list(run.passes) + ([run.failed_pass] if run.failed_pass is not None else [])
    number_of = {id(f): i + 1 for i, f in enumerate(run.forwards)}
    differentiated = {id(p.forward) for p in passes}
    events = [(run.forward_steps[i], 0, f) for i, f in enumerate(run.forwards) if id(f) not in differentiated]
    events += [(p.step, 1, p) for p in passes]
    shown: set[int] = set()
    unit_of_step: dict[int, int] = {}
    first_unit: dict[int, int] = {}
    for step, is_pass, obj in sorted(events, key=lambda e: e[0]):
        fwd = obj.forward if is_pass else obj
        n = number_of[id(fwd)]
        builder = UnitBuilder(run, fwd, obj if is_pass else None, pred_variant, records, n,
                              passes.index(obj) + 1 if is_pass else None, n not in shown)
        vd.units.append(builder.build())
        first_unit.setdefault(n, len(vd.units) - 1)
        shown.add(n)
        unit_of_step[step] = len(vd.units) - 1
    vd.steps = _steps(run, vd, unit_of_step, first_unit, number_of, passes)
    called = {h.index for h in pred_variant.hook_calls}
    for h in vd.hooks:
        h.fires = h.index in called
    if run.error is not None:
        vd.error = _error(run, pred_variant, vd, records, passes, unit_of_step)
    return vd


def _steps(run, vd: VariantDerivation, unit_of_step: dict, first_unit: dict, number_of: dict, passes: list) -> list:
    out = []
    forwards = iter(run.forwards)
    backwards = iter(passes)
    failed = run.error.step if run.error is not None else None
    for index, step in enumerate(run.steps):
        info = StepInfo(index, step.kind, failed=index == failed, ran=failed is None or index <= failed)
        if step.kind == "forward" and info.ran and not info.failed:
            info.forward = number_of[id(next(forwards))]
            info.unit = first_unit.get(info.forward)
            info.inputs = [d.name for d in step.inputs]
            info.call = step.call
        elif step.kind == "backward":
            bw = step.backward or run.variant.backward
            info.retain_graph, info.method = bw.retain_graph, bw.method
            info.second = second_info(bw.second)
            info.inputs = [name for name, _ in bw.inputs]
            if info.ran and (not info.failed or run.failed_pass is not None):
                p = next(backwards, None)
                if p is not None:
                    info.backward = passes.index(p) + 1
                    info.forward = number_of[id(p.forward)]
                    info.unit = unit_of_step.get(index)
        elif step.kind in ("register", "remove"):
            info.hooks = list(step.hooks)
        elif step.kind == "step" and getattr(step, "optimizer", None) is not None:
            o = step.optimizer
            info.optimizer = (o.type, o.lr, tuple(o.betas), o.eps) if o.type == "Adam" and not o.weight_decay \
                and not o.maximize and not o.amsgrad else o.settings
        elif step.kind in ("clip_grad_norm", "clip_grad_value"):
            info.clip = step.clip
        elif step.kind == "step":
            info.lr = step.lr
            info.updates = list(run.updates.get(index, []))
        elif step.kind == "registered":
            info.counts = step.counts + (run.registered.get(step.counts[2]) if info.ran and not info.failed else None,)
        elif step.kind == "read":
            info.read = next((r for r in run.reads if r.step == index), None)
        out.append(info)
    return out


def second_info(s) -> dict | None:
    """A backward step's second-order options, as the document words them."""
    if s is None:
        return None
    from adjoint.format.syntax import to_source
    return {"create_graph": s.create_graph, "names": [n for n, _ in s.names],
            "roots": [to_source(e) for e in s.roots], "allow_unused": s.allow_unused,
            "materialize_grads": s.materialize_grads}


def _error(run, pv, vd: VariantDerivation, records: list, passes: list, unit_of_step: dict) -> ErrorInfo:
    err = run.error
    covered: set[int] = set()
    for f in run.forwards:
        covered.update(f.log)
    for p in passes:
        covered.update(p.calls)
    loose = [r for r in records if r[0] - 1 not in covered]
    raised = [number for number, h, _ in records if h.raised]
    info = ErrorInfo(err.type, err.message, err.during, err.cause, err.step,
                     pv.error.after_call + 1 if pv.error is not None and pv.error.after_call is not None else None,
                     hook_calls(None, loose), raised[-1] if raised else None, unit_of_step.get(err.step))
    return info


def declared(h) -> DeclaredHook:
    return DeclaredHook(h.index, h.label, h.kind, h.on, h.target,
                        expr_tree(h.returns, {}) if h.returns is not None else None,
                        [statement_source(x) for x in h.does], h.remove, h.when, h.prepend, h.with_kwargs,
                        h.always_call, tuple(h.tensors), h.mode,
                        source(h.pack) if h.pack is not None else None,
                        source(h.unpack) if h.unpack is not None else None,
                        h.scope, h.raises, tuple(h.removes), getattr(h, "raises_type", "RuntimeError"),
                        slot=h.slot, message=h.message, pin_memory=getattr(h, "pin_memory", False),
                        next=tuple(getattr(h, "next", ())))


class UnitBuilder:
    """One backward pass (``passes.Pass``) with the forward pass it differentiates (``p`` None: a
    forward pass alone)."""

    def __init__(self, run, fwd, p, pred_variant, records: list, forward_number: int, backward_number: int | None,
                 first_of_forward: bool):
        self.run, self.p, self.pv, self.problem = run, p, pred_variant, run.problem
        self.records = records
        self.numbers = (forward_number, backward_number, first_of_forward)
        self.fwd = fwd
        self.g = equations(run, self.fwd)
        seed = grad_output = bwd = None
        if p is not None:
            root = self.g.vars[self.g.root]
            grad_output = p.request.grad_output
            seed = grad_output if grad_output is not None else Exact.full(root.shape, 1)
            bwd = p.result
        self.a = Analysis(run, self.g, self.fwd, bwd, seed, grad_output)
        self.B = run.rt.B
        self._chains: dict = {}
        self._arrivals: dict = {}
        self._vjp: dict = {}

    # ---- tensors ----------------------------------------------------------------------
    def build(self) -> Unit:
        a, g = self.a, self.g
        self.tensors = [self.tensor_info(v) for v in g.vars]
        self.assign_symbols()
        steps = [self.step(st) for st in a.steps.values()]
        self.calls = [self.call_info(c) for c in g.calls]
        p = self.p
        self.boundary_records = with_observed(boundaries_of(self.run.rt, self.fwd, p.result, passed=False),
                                              self.run.observed) if p is not None else []
        forward_number, backward_number, first = self.numbers
        forward_calls = hook_calls(self, [self.records[i] for i in self.fwd.log]) if first else []
        backward_calls = hook_calls(self, [self.records[i] for i in p.calls]) if p is not None else []
        calls = forward_calls + backward_calls
        unit = Unit(self.tensors, [a.canon(v) for v in a.leaves], list(a.states), steps, a.root, a.root_is_state,
                    next((s for s in steps if s.index is None), None), a.scalar, a.seed,
                    p.request.grad_output if p is not None else None, self.calls,
                    {k: [s.var for s in v] for k, v in a.consumers.items()},
                    calls, [], False, [], [], False, [], self.fwd.values.get("loss") if self.fwd.loss is not None
                    else None, p.request.method if p is not None else "backward",
                    [n for n, _, _ in p.request.inputs] if p is not None else [], forward_number, backward_number,
                    first, forward_calls, backward_calls, dict(p.grads_before) if p is not None else {},
                    p is self.run.failed_pass if p is not None else False,
                    p.request.retain_graph if p is not None else False)
        if p is not None:
            self.boundaries(unit)
            self.effects(unit, backward_calls)
            self.gradients(unit, calls)
            self.silent(unit, backward_calls)
            unit.second = second_order(self.run, p, list(self.run.passes) + [self.run.failed_pass], backward_number)
            if unit.second is not None:
                second_totals(unit.second, self.g, self.a, unit.gradients, same)
        return unit

    def silent(self, unit: Unit, calls: list) -> None:
        """Tensor and node hooks that do not fire in this backward pass although their tensor is in the graph."""
        fired = {h.hook for h in calls}
        removed = {h.index for h in self.run.variant.hooks if h.remove == "before_backward"}
        for step in self.run.steps[:self.p.step]:
            if step.kind == "remove":
                removed.update(step.hooks)
            elif step.kind == "register":
                removed.difference_update(step.hooks)
        later = {i for step in self.run.steps[self.p.step:] if step.kind == "register" for i in step.hooks}
        # a hook another hook registers (registers:) goes on while a backward runs: whether it was on for
        # this pass is the run's record (its calls), not something the steps show
        inside = {i for h in self.run.variant.hooks for i in h.registers}
        for h in self.run.variant.hooks:
            if h.index in fired or h.on not in ("tensor", "node") or h.kind in ("retain_grad", "post_accumulate_grad") \
                    or h.index in inside:
                continue
            if h.index in later and h.index not in {i for s in self.run.steps[:self.p.step] if s.kind == "register"
                                                    for i in s.hooks}:
                continue                              # registered only after this pass
            registered, last = self.g.names.get(h.target), self.g.final.get(h.target)
            if registered is None:
                continue
            registered, last = self.describe(registered), self.describe(last)
            if h.index in removed:
                why = "removed"
            elif last != registered:
                why = "stale"
            elif not self.g.vars[registered].requires_grad:
                why = "no_grad"
            elif self.p.request.inputs:
                why = "inputs"
            else:
                why = "unreached"
            unit.silent.append((h.index, registered, last, why))

    def tensor_info(self, v) -> TensorInfo:
        value = v.value if v.dtype in ("float32", "float64") or v.value is None else Typed(v.value, v.dtype)
        return TensorInfo(v.id, v.shape, v.dtype, v.requires_grad, v.leaf, value, [], None, None)

    def assign_symbols(self) -> None:
        a, t = self.a, self.tensors
        letters = {}
        for name, vid in self.g.leaves.items():
            if vid not in letters:      # a tied parameter reads as its first name's symbol
                letters[vid] = self.leaf_symbol(name)
        for vid in a.constants:
            letters[vid] = Symbol("leaf", a.names_of[vid][0])
        z = a.z_states([s.letter for s in letters.values() if not s.module])
        for vid, sym in letters.items():
            t[vid].symbol = sym
            t[vid].role = self.leaf_role(self.g.vars[vid].tensor.name or "")
        for vid in a.constants:
            t[vid].role = "detached" if self.g.vars[vid].tensor.is_detached else "made"
        for k, s in enumerate(a.states, 1):
            t[s].symbol = Symbol("state", index=k, base="z" if z else "x")
        if not a.root_is_state:
            t[a.root].symbol = Symbol("loss")
            t[a.root].role = "loss"
        for c, names in a.names_of.items():
            t[c].names = list(names)
        for i, c in enumerate(self.g.calls):
            for o in c.outs:
                if o is not None:
                    t[a.canon(o)].call = i
        for vid, info in enumerate(t):
            info.pure = a.pure.get(vid)
            info.has_carried = vid in a.actual
            info.carried = a.actual.get(vid)
            if not info.leaf and info.role == "":
                info.role = "output" if info.call is not None else "intermediate"
        for vid in a.versions():
            t[vid].version = self.version(vid)
        for vid in a.bases():
            if not t[vid].names and t[vid].role in ("", "intermediate"):
                views = [g_.tensor.name for g_ in self.g.vars if g_.tensor.base is self.g.vars[vid].tensor
                         and g_.tensor.name]
                t[vid].role = "base"
                t[vid].base_of = views[0] if views else None

    def version(self, vid: int) -> Version:
        """How a later version of a named tensor came to be."""
        g, a = self.g, self.a
        var = g.vars[vid]
        eqn = var.eqn
        prev = a.canon(var.version_of.id) if var.version_of is not None else None
        name = (a.names_of.get(prev) or [var.tensor.name])[-1] if prev is not None else var.tensor.name
        if eqn.prim == "copy_slices":
            view = g.eqns[eqn.id - 1].outs[0] if eqn.id and g.eqns[eqn.id - 1].wrapped else None
            view_name = g.vars[view].tensor.name if view is not None else None
            return Version("copy_slices", name, prev, _method(eqn.params.prim), view_name)
        if eqn.inplace:
            return Version("inplace", name, prev, _method(eqn.prim))
        return Version("regenerated", name, prev)

    def leaf_symbol(self, name: str) -> Symbol:
        module = None
        for m in self.problem.model.walk():
            for p in m.params + m.buffers:
                if p.name == name:
                    module = m
        if module is None:
            return Symbol("leaf", name)
        base = name.rsplit(".", 1)[-1]
        if module.type == "Linear" and base in ("weight", "bias"):
            base = {"weight": "W", "bias": "b"}[base]
        return Symbol("leaf", base, module.path)

    def leaf_role(self, name: str) -> str:
        if any(d.name == name for d in self.run.variant.inputs):
            return "input"
        if any(d.name == name for d in self.problem.targets):
            return "target"
        if any(b.name == name for m in self.problem.model.walk() for b in m.buffers):
            return "buffer"
        return "parameter"

    def describe(self, vid: int | None) -> int | None:
        """A tensor the document refers to: its canonical number, with the tree that describes it
        when it has no symbol of its own."""
        if vid is None:
            return None
        c = self.a.canon(vid)
        info = self.tensors[c]
        if info.symbol is None and info.tree is None:
            info.tree = self.a.tree_of(c)
        return c

    # ---- steps ------------------------------------------------------------------------
    def step(self, st: AStep) -> Step:
        a = self.a
        last = a.made_by.get(st.var)
        out = Step(st.var, st.index, st.tree, list(st.atoms), st.call, list(st.nodes),
                   last.id if last is not None else -1)
        for atom in st.atoms:
            self.describe(atom)
        out.pure_contrib = dict(a.contribution(st, a.pure.get(st.var)))
        self._vjp[st.var] = out
        if a.seed is None:                 # a forward pass no backward differentiates
            pass
        elif a.scalar:
            out.local_values = {at: a.local_derivative(st, at) for at in st.atoms}
            out.local = self.local_terms(st)
        else:
            self.vjp(st.var)
        return out

    def vjp(self, var: int) -> dict:
        """J^T lambda_k of the step defining ``var``, for each of its atoms (trees)."""
        record = self._vjp[var]
        if not record.vjp:
            record.vjp = self.a.vjp_formulas(self.a.steps[var])
        return record.vjp

    def local_terms(self, st: AStep) -> list:
        """(atom, SymPy derivative, exact value) for every atom needing a gradient."""
        trees: dict = {}
        vjp_tree(st.tree, TConst(Fraction(1), self.g.vars[st.var].shape), trees, st.functions)
        out = []
        for at in st.atoms:
            if at not in trees or not self.g.vars[at].requires_grad:
                continue
            sympy = load_sympy()
            d = sympy.factor_terms(to_sympy(simplify(trees[at]), lambda vid: sympy.Symbol(f"v#{vid}", real=True)))
            out.append(LocalDerivative(at, d, self.a.local_derivative(st, at)))
        return out

    def vjp_tilde(self, st: AStep) -> dict:
        record = self._vjp[st.var]
        if not record.vjp_tilde:
            record.vjp_tilde = self.a.vjp_formulas(st, tilde=True)
        return record.vjp_tilde

    # ---- calls ------------------------------------------------------------------------
    def call_info(self, cv) -> CallInfo:
        c = cv.call
        mod = c.module
        depth, parent = 0, c.parent
        while parent is not None:
            depth += 1
            parent = self.fwd.calls[parent].parent
        kind = "builtin" if mod.type else ("function" if mod.function is not None else "custom")
        info = CallInfo(cv.index, c.callid, c.path, c.k, depth, kind,
                        mod.type or (mod.function.name if mod.function is not None else None),
                        tuple(self.describe(x) for x in cv.args), tuple(self.describe(x) for x in cv.outs),
                        cv.body - 0.5, bool(c.bw is not None or c.legacy_hooks))
        if mod.forward is not None and mod.type is None:
            info.forward_source = program_source(mod.forward)
        info.checkpoint = c.checkpoint
        if mod.function is not None:
            info.backward_source = "; ".join(f"{slot}: {source(f) if f is not None else 'None'}"
                                             for slot, f in mod.function.grads)
        return info

    # ---- naming a gradient ----------------------------------------------------------
    def ident(self, c: int, value, strict: bool = False) -> Ident | None:
        """lambda_k, its hooked version, or dl/d(...); non-strict: what it is when it is none of these."""
        a = self.a
        pure, actual = a.pure.get(c), a.actual.get(c)
        if a.is_state(c):
            if same(value, pure):
                return Ident("lam", c)
            if same(value, actual):
                return Ident("lam_tilde", c)
            return None if strict else Ident("reaching", self.describe(c))
        if same(value, pure):
            return Ident("dl", self.describe(c))
        return None if strict else Ident("wrt", self.describe(c))

    def chain(self, vid: int) -> Chain | None:
        """dl/d vid summed over every path to the loss, factor by factor (one-element problems)."""
        a = self.a
        if not a.scalar:
            return None
        c = a.canon(vid)
        if c in self._chains:
            return self._chains[c]
        result = None
        paths = a.paths(c)
        if paths:
            out, total = [], None
            for path in paths:
                factors = []
                prev = c
                for st in path:
                    factors.append(ChainFactor(st.var, self.describe(prev), a.local_derivative(st, prev)))
                    prev = st.var
                if a.root_is_state and a.grad_output is not None:
                    factors.append(ChainFactor(None, None, a.seed))
                if not factors or any(f.value is None for f in factors):
                    continue
                factors.reverse()
                prod = factors[0].value
                for f in factors[1:]:
                    prod = self.B.mul(prod, f.value)
                total = prod if total is None else self.B.add(total, prod)
                out.append(factors)
            if out:
                result = Chain(out, total)
        self._chains[c] = result
        return result

    def arrival(self, c: int) -> Arrival:
        """The gradient flowing into tensor ``c`` from the equations that read it, with the gradients PyTorch
        actually carried into them (lambda~), before any hook on ``c``."""
        if c in self._arrivals:
            return self._arrivals[c]
        a = self.a
        total, terms = None, []
        for j in a.consumers.get(c, []):
            seed = a.actual.get(j.var, a.seed if j.var == a.root else None)
            contrib = a.contribution(j, seed).get(c) if seed is not None else None
            if contrib is None:
                continue
            total = contrib if total is None else self.B.add(total, contrib)
            hooked = not same(seed, a.pure.get(j.var))
            if a.scalar:
                plain = j.index is None and not hooked and all(e == 1 for e in seed.flat())
                terms.append(ArrivalTerm(j.var, j.index, hooked, seed, a.local_derivative(j, c), None, plain))
            else:
                f = (self.vjp_tilde(j) if hooked else self.vjp(j.var)).get(c)
                if f is not None:
                    terms.append(ArrivalTerm(j.var, j.index, hooked, seed, None, f))
        result = Arrival(terms, total)
        self._arrivals[c] = result
        return result

    # ---- results ----------------------------------------------------------------------
    def boundaries(self, unit: Unit) -> None:
        found = self.boundary_records
        calls = {c.callid: c for c in self.calls}
        hooked = {c.callid for c in self.calls if c.hooked}
        shown = [bd for bd in found if bd.callid in hooked] or list(found)
        unit.boundaries_partial = len(shown) < len(found)
        for bd in shown:
            call = calls.get(bd.callid)
            if call is None:
                continue
            go = bd.grad_output[0]
            out = call.outs[0] if call.outs else None
            # a call the graph does not mark (its output is its input, or one tensor fills several of
            # its inputs): its adjoints are what a watching full backward hook was handed, not the
            # tensor's whole gradient (adjoint.engine.observer)
            watched = bd.callid in self.run.observed
            requires = tuple(bd.requires) + (False,) * (len(bd.grad_input) - len(bd.requires))
            inputs = [BoundaryInput(x, gi, self.ident(x, gi, strict=True) if gi is not None and not watched else None,
                                    req) for x, gi, req in zip(call.args, bd.grad_input, requires)]
            outputs = [BoundaryInput(o, g, self._output_ident(o, g, watched) if g is not None else None)
                       for o, g in zip(call.outs, bd.grad_output)] if len(call.outs) > 1 else []
            unit.boundaries.append(Boundary(bd.callid, bd.type, call.index, go,
                                            self._output_ident(out, go, watched) if go is not None and out is not None
                                            else None, inputs, outputs))

    def _output_ident(self, out: int, value, watched: bool) -> Ident:
        """What a module's grad_output is: :meth:`ident`, or, at a call the graph does not mark, the
        gradient reaching the module's output (not the gradient of the tensor it returned)."""
        return Ident("at_output", out) if watched else self.ident(out, value)

    def grads(self) -> dict:
        return dict(self.p.grads)

    def effects(self, unit: Unit, calls: list) -> None:
        a, g = self.a, self.g
        for s in a.states:
            p, q = a.pure.get(s), a.actual.get(s)
            if p is None or q is None or same(p, q):
                continue
            unit.changes.append(Change(s, None, p, q, self._simple_ratio(p, q)))
        for name, value in self.grads().items():
            vid = g.final.get(name)
            value = self.added(name, value)
            if vid is None:
                continue
            c = a.canon(vid)
            p = a.pure.get(c)
            if a.is_state(c) or p is None or value is None or same(p, value):
                continue
            unit.changes.append(Change(self.describe(c), name, p, value, self._simple_ratio(p, value)))
        unit.unchanged = [name for name, value in self.grads().items() if self.added(name, value) is not None
                          and g.final.get(name) is not None
                          and same(self.added(name, value), a.pure.get(a.canon(g.final[name])))]
        unit.any_backward_return = any(h.returned is not None and h.phase == "backward" for h in calls)

    def added(self, name: str, value):
        """What this backward pass added to ``name``'s .grad (.grad accumulates across passes)."""
        before = self.p.grads_before.get(name)
        if before is None or value is None:
            return value
        return self.B.sub(value, before)

    @staticmethod
    def _simple_ratio(p, q):
        r = ratio(p, q)
        return r if r is not None and r not in (0, 1) and (r.q == 1 or abs(r.p) == 1) else None

    def gradients(self, unit: Unit, calls: list) -> None:
        if unit.method == "grad":
            for name, value in (self._returned() or {}).items():
                unit.gradients.append(self.gradient(name, value, True, calls))
        for name, value in self.grads().items():
            unit.gradients.append(self.gradient(name, value, False, calls))

    def _returned(self) -> dict | None:
        p = self.p
        if p.request.method != "grad":
            return None
        # a create_graph result the engine left as its tensor (as materialize_grads' zeros): its value
        return {name: value.value if isinstance(value, Tensor) else value
                for (name, _, _), value in zip(p.request.inputs, p.result.captured)}

    def gradient(self, name: str, value, returned: bool, calls: list) -> Gradient:
        a, g = self.a, self.g
        vid = g.final.get(name)
        if vid is None:
            return Gradient(name, None, value, returned, None)
        c = self.describe(vid)
        pure = a.pure.get(c)
        out = Gradient(name, c, value, returned, pure)
        if not returned and self.p.grads_before.get(name) is not None and value is not None:
            out.before = self.p.grads_before[name]
            value = out.added = self.added(name, value)
        if a.is_state(c):
            out.state = a.steps[c].index
        elif pure is not None:
            ch = self.chain(c)
            if ch is not None and same(ch.total, pure):
                out.chain = ch
            else:
                for j in a.consumers.get(c, []):
                    f = self.vjp(j.var).get(c)
                    if f is not None and a.contribution(j, a.pure.get(j.var)).get(c) is not None:
                        out.terms.append((j.var, j.index, f))
        if value is None:
            if unit_method(self) == "grad":
                out.none_reason = "grad"
            elif self.p.request.inputs and self.p.request.method == "backward":
                out.none_reason = "inputs"
            else:
                out.none_reason = "none"
            return out
        if pure is not None and same(value, pure):
            out.matches = True
            return out
        if a.is_state(c):
            return out
        arr = self.arrival(c)
        if arr.total is not None and same(arr.total, value) and arr.terms:
            out.arrival = arr
            out.hooked_steps = [j.index for j in a.consumers.get(c, []) if j.index is not None
                                and a.actual.get(j.var) is not None and not same(a.actual[j.var], a.pure.get(j.var))]
            return out
        out.tensor_hooks = [h.number for h in calls if h.on == "tensor" and h.returned is not None
                            and h.target_var == c]
        if out.tensor_hooks and arr.total is not None:
            out.arriving = arr
        return out


def unit_method(builder: UnitBuilder) -> str:
    return builder.p.request.method


def _method(prim: str) -> str:
    """The in-place method a primitive's in-place form is called by (mul -> mul_, pow_scalar -> pow_)."""
    base = {"pow_scalar": "pow", "pow_tensor": "pow"}.get(prim, prim)
    return base if base.endswith("_") else base + "_"
