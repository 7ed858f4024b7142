"""Everything the document says about one variant, computed from the exact graph before any text
is written (:class:`Analysis`): the named tensors x_k and the symbols of all tensors; one
:class:`Step` per named tensor (x_k = Phi_k(atoms): its tree, the eqns and autograd nodes behind
it, the module call it runs in); the hook-free multipliers lambda_k, swept through PyTorch's own
backward formulas; the gradients PyTorch actually carried (from the engine's record); local
derivatives and chain-rule paths of scalar problems."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction

import flint

from ... import exact as E
from ...exact import Exact
from ...expr import simple_program
from ...forward import literal_value
from ...ops import RULES
from ...prediction import Prediction, VariantPrediction
from ...reverse import function_vjp
from .expressions import expr_tree
from .printer import DerivationPrinter
from .text import _tex_escape_name, symbol_tex
from .trees import TT, TAtom, TBin, TCall, TConst, TFn, TInner, TLam, TMatMul, TNeg, TNode, _numel, _reshaped, \
    _t_shape, simplify
from .vjp import vjp_tree

fmpq = flint.fmpq

#: chain-rule expansions with more paths than this are summarised by the recursion
MAX_PATHS = 4


@dataclass(eq=False)
class Step:
    """One named tensor and the expression that defines it: x_k = Phi_k(atoms)."""

    var: int                     # canonical var it defines
    index: int | None            # k of x_k (None: the loss)
    tree: TNode
    eqns: list[int]              # eqns of the step (unnamed intermediates inlined)
    atoms: list[int]             # atoms read, in order of first appearance
    call: int | None             # module call its last op ran in
    nodes: list[str]             # autograd nodes it creates
    functions: dict = field(default_factory=dict)   # id(TCall) -> lam -> {slot: tree}


class Analysis:
    """Everything the document says about one variant, computed from the exact graph."""

    def __init__(self, pred: Prediction, v: VariantPrediction):
        self.pred = pred
        self.v = v
        g = self.g = v.graph
        self.fwd = v.forward
        self.symbols = pred.problem.symbols if pred.numeric else None
        self.alias: dict[int, int] = {}
        self.made_by: dict[int, object] = {}
        for eqn in g.eqns:
            for k, o in enumerate(eqn.outs):
                self.made_by[o] = eqn
                if eqn.prim == "bhf":
                    self.alias[o] = eqn.ins[k]
        self.names_of: dict[int, list[str]] = {}
        for name, vid in g.names.items():
            self.names_of.setdefault(self.canon(vid), []).append(name)
        self.leaves = [vid for vid in g.decls]
        self.root = self.canon(g.root)
        named = sorted(c for c in self.names_of if not g.vars[c].leaf)
        root_names = set(self.names_of.get(self.root, [])) - {"loss"}
        self.root_is_state = bool(root_names) or self.root in g.decls
        self.states = [c for c in named if c != self.root or self.root_is_state]
        self.atom_set = set(self.leaves) | set(self.states)
        self._symbols()
        self.steps: dict[int, Step] = {}
        for k, s in enumerate(self.states, 1):
            self.steps[s] = self._step(s, k)
        self.loss_step = None if self.root_is_state else self._step(self.root, None)
        if self.loss_step is not None:
            self.steps[self.root] = self.loss_step
        self.consumers: dict[int, list[Step]] = {}
        for st in self.steps.values():
            for a in st.atoms:
                self.consumers.setdefault(a, []).append(st)
        self.scalar = all(_numel(var.shape) == 1 for var in g.vars)
        self.seed = (literal_value(g.grad_output, self.symbols) if g.grad_output is not None
                     else Exact.full(g.vars[g.root].shape, 1))
        self.pure = self.sweep(range(len(g.eqns)), {self.root: self.seed})
        self.bwd = v.backward
        self.actual = {self.canon(vid): val for vid, val in self.bwd.seen.items()}
        self._contrib: dict = {}

    # ---- graph helpers -----------------------------------------------------
    def canon(self, vid: int) -> int:
        while vid in self.alias:
            vid = self.alias[vid]
        return vid

    def is_state(self, c: int) -> bool:
        return c in self.steps and self.steps[c].index is not None

    def _symbols(self) -> None:
        g = self.g
        self.sym: dict[int, str] = {}
        for vid, decl in g.decls.items():
            self.sym[vid] = self._leaf_symbol(decl.name)
        taken = set(self.sym.values())
        base = "z" if any(re.fullmatch(r"x_\{\d+\}", s) for s in taken) else "x"
        for k, s in enumerate(self.states, 1):
            self.sym[s] = f"{base}_{{{k}}}"
        if not self.root_is_state:
            self.sym[self.root] = "\\ell"
        self.names = {f"v#{vid}": tex for vid, tex in self.sym.items()}
        for k, s in enumerate(self.states, 1):
            self.names[f"l#{s}"] = f"\\lambda_{{{k}}}"
        self.names[f"l#{self.root}"] = self.names.get(f"l#{self.root}", "\\lambda_{\\ell}")

    def _leaf_symbol(self, name: str) -> str:
        module = None
        for m in self.pred.problem.model.walk():
            for p in m.params:
                if p.name == name:
                    module = m
        if module is None:
            return symbol_tex(name)
        base = name.rsplit(".", 1)[-1]
        if module.type == "Linear":
            sym = {"weight": "W", "bias": "b"}.get(base, symbol_tex(base))
        else:
            sym = symbol_tex(base)
        if not module.path:
            return sym
        path = f"\\mathrm{{{_tex_escape_name(module.path)}}}"
        return f"{sym}^{{({path})}}" if "_" in sym else f"{sym}_{{{path}}}"

    def describe(self, vid: int | None) -> str:
        """A tensor as math: its symbol, or the expression that makes it."""
        if vid is None:
            return "\\mathrm{None}"
        c = self.canon(vid)
        if c in self.sym:
            return self.sym[c]
        tree = self._tree(c, top=True, eqns=[], functions={})
        return DerivationPrinter(self.names).doprint(simplify(tree))

    # ---- steps -------------------------------------------------------------
    def _step(self, s: int, k: int | None) -> Step:
        eqns: list[int] = []
        functions: dict = {}
        tree = simplify(self._tree(s, True, eqns, functions))
        atoms: list[int] = []

        def walk(n: TNode) -> None:
            if isinstance(n, TAtom) and n.var not in atoms:
                atoms.append(n.var)
            for ch in n.children():
                walk(ch)

        walk(tree)
        for e in self._collect(s):
            if e not in eqns:
                eqns.append(e)
        eqns.sort()
        last = self.made_by.get(s)
        nodes = [self.g.eqns[e].node.name for e in eqns if self.g.eqns[e].node is not None]
        return Step(s, k, tree, eqns, atoms, last.call if last is not None else None, nodes, functions)

    def _collect(self, s: int) -> list[int]:
        out: list[int] = []
        stack = [s]
        seen = set()
        while stack:
            v = self.canon(stack.pop())
            if v in seen:
                continue
            seen.add(v)
            if v != s and v in self.atom_set:
                continue
            eqn = self.made_by.get(v)
            if eqn is None:
                continue
            out.append(eqn.id)
            stack.extend(i for i in eqn.ins if isinstance(i, int))
        return out

    def _linear_call(self, v: int):
        for call in self.g.calls:
            if call.module.type != "Linear" or self.canon(call.out) != v:
                continue
            if any(ev.call == call.id and ev.returned is not None and ev.reg.hook.kind == "forward"
                   for ev in self.g.forward_events):
                return None
            return call
        return None

    def _operand(self, i, eqns, functions) -> TNode:
        if isinstance(i, Exact):
            if i.size == 1 and i.rational:
                x = i.item()
                return TConst(Fraction(int(x.p), int(x.q)), i.shape)
            return TConst(i, i.shape)
        return self._tree(i, False, eqns, functions)

    def _tree(self, v: int, top: bool, eqns: list, functions: dict) -> TNode:
        g = self.g
        v = self.canon(v)
        shape = g.vars[v].shape
        if not top and v in self.atom_set:
            return TAtom(v, shape)
        eqn = self.made_by.get(v)
        if eqn is None:
            return TAtom(v, shape)
        call = self._linear_call(v)
        if call is not None:
            weight = g.names[f"{call.module.path}.weight" if call.module.path else "weight"]
            bias_name = f"{call.module.path}.bias" if call.module.path else "bias"
            x = self._tree(call.args[0], False, eqns, functions)
            W = TAtom(weight, g.vars[weight].shape)
            if len(x.shape) == 1:
                body = TMatMul(W, x, shape)
                if bias_name in g.names:
                    body = TBin("add", body, TAtom(g.names[bias_name], g.vars[g.names[bias_name]].shape), shape)
            else:
                body = TMatMul(x, TT(W, _t_shape(W.shape)), shape)
                if bias_name in g.names:
                    b = g.names[bias_name]
                    body = TBin("add", body, TT(TAtom(b, g.vars[b].shape), (1, g.vars[b].shape[0])), shape)
            return body
        ins = [self._operand(i, eqns, functions) for i in eqn.ins]
        return self.eqn_tree(eqn, ins, shape, TAtom(v, shape) if top else None, functions)

    def eqn_tree(self, eqn, ins: list, shape: tuple, out_atom: TNode | None, functions: dict) -> TNode:
        """One primitive applied to operand trees."""
        p = eqn.prim
        if p in ("add", "sub", "mul", "div"):
            return TBin(p, ins[0], ins[1], shape)
        if p == "rsub":
            return TBin("sub", TConst(_frac(eqn.params)), ins[0], shape)
        if p == "reciprocal":
            return TBin("div", TConst(Fraction(1)), ins[0], shape)
        if p == "neg":
            return TNeg(ins[0], shape)
        if p == "pow_scalar":
            return TBin("pow", ins[0], TConst(_frac(eqn.params)), shape)
        if p == "pow_tensor":
            return TBin("pow", ins[0], ins[1], shape)
        if p == "rpow":
            return TBin("pow", TConst(_frac(eqn.params)), ins[0], shape)
        if p in ("mm", "mv"):
            return TMatMul(ins[0], ins[1], shape)
        if p == "dot":
            return TInner(ins[0], ins[1], shape)
        if p == "addmm":
            bias = ins[0]
            if len(bias.shape) == 1:
                bias = TT(bias, (1, bias.shape[0]))
            return TBin("add", TMatMul(ins[1], ins[2], shape), bias, shape)
        if p == "t":
            return TT(ins[0], shape) if len(ins[0].shape) == 2 else ins[0]
        if p in ("view", "unsafe_view", "unsqueeze", "squeeze"):
            src = ins[0].shape
            if (len(src) == 1 and tuple(shape) == (1, src[0])) or (len(shape) == 1 and tuple(src) == (1, shape[0])):
                return TT(ins[0], shape)
            return _reshaped(ins[0], shape)
        if p in ("relu", "tanh", "sigmoid", "exp", "log", "sin", "cos", "sqrt", "abs", "sum", "mean", "norm"):
            return TFn(p, ins[0], shape)
        if p == "function":
            spec = eqn.params
            node = TCall(spec.decl.name, tuple(ins), shape)
            functions[id(node)] = self._function_formulas(spec, ins, out_atom if out_atom is not None else node)
            return node
        if p == "bhf":
            return ins[0]
        raise TypeError(f"no tree for primitive {p}")

    def _function_formulas(self, spec, ins: list, out_tree: TNode):
        def formulas(lam: TNode) -> dict:
            env = dict(zip(spec.slots, ins))
            env["output"] = out_tree
            for a in simple_program(spec.module.forward)[0]:
                env[a.name] = expr_tree(a.value, env)
            env["grad_output"] = lam
            out = {}
            for i, (slot, formula) in enumerate(spec.decl.grads):
                if formula is not None:
                    out[i] = expr_tree(formula, env)
            return out
        return formulas

    # ---- numbers -----------------------------------------------------------
    def sweep(self, eqn_ids, seeds: dict) -> dict:
        """J^T seed through the given eqns, hooks ignored: cotangents by canonical var."""
        g, fwd = self.g, self.fwd
        cot = dict(seeds)
        for eid in sorted(eqn_ids, reverse=True):
            eqn = g.eqns[eid]
            if eqn.node is None or eqn.prim == "bhf":
                continue
            gs = [cot.get(self.canon(o)) for o in eqn.outs]
            if all(x is None for x in gs):
                continue
            ins = [fwd.of(i) for i in eqn.ins]
            if eqn.prim == "function":
                res = function_vjp(eqn, ins, gs[0])
            else:
                need = [e is not None for e in eqn.node.edges]
                res = RULES[eqn.prim].vjp(gs[0], ins, fwd.values[eqn.outs[0]], eqn.params, need)
            for edge, r in zip(eqn.node.edges, res):
                if edge is None or r is None:
                    continue
                c = self.canon(edge)
                if r.shape != g.vars[c].shape:
                    r = E.sum_to(r, g.vars[c].shape)
                cot[c] = r if cot.get(c) is None else E.add(cot[c], r)
        return cot

    def contribution(self, step: Step, seed: Exact | None) -> dict:
        """J_step^T seed for each atom of the step."""
        if seed is None:
            return {}
        key = (step.var, id(seed))
        if key not in self._contrib:
            cot = self.sweep(step.eqns, {step.var: seed})
            self._contrib[key] = {a: cot.get(a) for a in step.atoms}
        return self._contrib[key]

    def local_derivative(self, step: Step, atom: int) -> Exact | None:
        """Scalar problems: d x_k / d atom, exactly as PyTorch's backward formulas give it."""
        ones = Exact.full(self.g.vars[step.var].shape, 1)
        key = (step.var, "ones")
        if key not in self._contrib:
            cot = self.sweep(step.eqns, {step.var: ones})
            self._contrib[key] = {a: cot.get(a) for a in step.atoms}
        return self._contrib[key].get(atom)

    def vjp_formulas(self, step: Step, tilde: bool = False) -> dict[int, TNode]:
        lam = self.seed_tree(step, tilde)
        out: dict = {}
        vjp_tree(step.tree, lam, out, step.functions)
        return {a: simplify(t) for a, t in out.items()}

    def seed_tree(self, step: Step, tilde: bool = False) -> TNode:
        shape = self.g.vars[step.var].shape
        if step.var == self.root and not self.root_is_state and not tilde:
            if all(e == 1 for e in self.seed.flat()) and self.seed.size == 1:
                return TConst(Fraction(1), shape)
        return TLam(step.var, shape, tilde)

    # ---- chain-rule paths (scalar problems) -----------------------------------
    def paths(self, vid: int, depth: int = 0) -> list[list[Step]] | None:
        """Every path of steps from ``vid`` up to the loss; None when there are too many."""
        if vid == self.root:
            return [[]]
        if depth > 12:
            return None
        out: list[list[Step]] = []
        for st in self.consumers.get(vid, []):
            rest = self.paths(st.var, depth + 1) if st.var != self.root else [[]]
            if rest is None:
                return None
            for r in rest:
                out.append([st] + r)
                if len(out) > MAX_PATHS:
                    return None
        return out


def _frac(x) -> Fraction:
    if isinstance(x, Fraction):
        return x
    if isinstance(x, int):
        return Fraction(x)
    if type(x) is fmpq:
        return Fraction(int(x.p), int(x.q))
    return Fraction(x)
