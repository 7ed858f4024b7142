"""One forward pass analysed for its backward pass (:class:`Analysis`): the named tensors x_k and
the symbols of all tensors; one step per named tensor (x_k = Phi_k(atoms): its tree, the
equations and autograd nodes behind it, the module call it runs in); the hook-free multipliers
lambda_k, swept through PyTorch's own backward formulas; the gradients PyTorch actually carried
(from the engine's record); local derivatives and chain-rule paths of one-element problems.

How each primitive reads as a tree is its registry entry's ``math``; the three nodes that are
not registry primitives are written here: ``bhf`` (BackwardHookFunction: the identity),
``function`` (a custom Function: its declared backward formulas) and ``copy_slices`` (an
in-place op through a view: the base with the view's elements replaced).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fractions import Fraction

from adjoint.values import arith as A
from adjoint.format import syntax as S
from adjoint.values.exact import Exact
from adjoint.engine.autograd_function import declared_vjp, input_dtypes, slots_of
from adjoint.engine.inplace import copy_slices_backward
from adjoint.values.numbers.sizes import expandable
from adjoint.values.mathtree import (TT, TAtom, TBin, TCall, TConst, TLam, TMatMul, TNode, TPut, TTuple, numel, simplify,
                        t_shape, vjp_tree)
from adjoint.engine.ops import REGISTRY
from adjoint.engine.torch_errors import TorchError
from adjoint.derivation.equations import Equations
from adjoint.derivation.expressions import expr_tree
from adjoint.engine.complex_grad import call_vjp, complex_node
from adjoint.values.complexes import Cx

#: chain-rule expansions with more paths than this are summarised by the recursion
MAX_PATHS = 4


@dataclass(eq=False)
class AStep:
    """One named tensor and the expression that defines it: x_k = Phi_k(atoms)."""

    var: int
    index: int | None
    tree: TNode
    eqns: list
    atoms: list
    call: int | None
    nodes: list
    functions: dict = field(default_factory=dict)   # id(TCall) -> (lam -> {slot: tree})


class Analysis:
    """Everything the document says about one forward pass and its backward, from the equations."""

    def __init__(self, run, g: Equations, fwd, bwd, seed: Exact | None, grad_output):
        """``bwd`` (engine.BackwardResult) and ``seed`` (what backward starts from) are None for a forward
        pass no backward differentiates: then there are no multipliers."""
        self.run, self.g, self.fwd, self.bwd = run, g, fwd, bwd
        self.B = run.rt.B
        self.grad_output = grad_output
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
        self.leaves = list(g.leaves.values())
        self.root = self.canon(g.root) if g.root >= 0 else None
        made = {o for e in g.eqns for o in e.outs}
        # tensors no op made (detach(), a tensor made in the forward): named ones are given constants
        self.constants = [c for c in sorted(self.names_of) if not g.vars[c].leaf and c not in made]
        self.leaves += self.constants
        named = {c for c in self.names_of if not g.vars[c].leaf and c in made}
        named |= {self.canon(v) for v in self.versions()} | set(self.bases())
        named |= {c for c in made if g.vars[c].tensor is not None and g.vars[c].tensor.step_state}
        root_names = set(self.names_of.get(self.root, [])) - {"loss"}
        self.root_is_state = bool(root_names) or self.root in self.leaves or self.root is None
        self.states = [c for c in sorted(named) if c != self.root or self.root_is_state]
        self.atom_set = set(self.leaves) | set(self.states)
        self.steps: dict[int, AStep] = {}
        for k, s in enumerate(self.states, 1):
            self.steps[s] = self._step(s, k)
        self.loss_step = None if self.root_is_state else self._step(self.root, None)
        if self.loss_step is not None:
            self.steps[self.root] = self.loss_step
        self.consumers: dict[int, list[AStep]] = {}
        for st in self.steps.values():
            for a in st.atoms:
                self.consumers.setdefault(a, []).append(st)
        self.scalar = all(numel(var.shape) == 1 for var in g.vars)
        self.seed = seed
        self.pure = self.sweep(range(len(g.eqns)), {self.root: self.seed}) if seed is not None else {}
        self.actual: dict[int, object] = {}
        for key in bwd.seen if bwd is not None else ():
            vid = g.var_of_node.get(key) if isinstance(key, tuple) else g.leaf_var.get(key)
            if vid is not None:
                self.actual[self.canon(vid)] = bwd.seen[key]
        self._contrib: dict = {}

    # ---- graph helpers -----------------------------------------------------
    def versions(self) -> list[int]:
        """Later versions of named tensors that autograd tracks: an in-place op's result, a base written
        through a view (CopySlices), a view regenerated after its base changed (AsStridedBackward0). Each
        is a named tensor of the derivation, so that the document shows the versions PyTorch keeps."""
        out = []
        for e in self.g.eqns:
            if e.node is None or e.wrapped:
                continue
            for o in e.outs:
                var = self.g.vars[o]
                if var.version_of is not None and (var.tensor.name is not None or e.prim == "copy_slices"):
                    out.append(o)
        return out

    def bases(self) -> list[int]:
        """The versions of a base written through a view (CopySlices) reads: named tensors of the
        derivation too, so that the write reads base' = base[view <- value] with a name for base."""
        return [self.canon(e.ins[0]) for e in self.g.eqns if e.prim == "copy_slices" and isinstance(e.ins[0], int)
                and not self.g.vars[self.canon(e.ins[0])].leaf]

    def canon(self, vid: int) -> int:
        while vid in self.alias:
            vid = self.alias[vid]
        return vid

    def is_state(self, c: int) -> bool:
        return c in self.steps and self.steps[c].index is not None

    def z_states(self, leaf_letters: list) -> bool:
        """States are called z_k when a leaf is itself called like x_k."""
        return any(re.fullmatch(r"x_?\d+", letter) for letter in leaf_letters)

    def tree_of(self, vid: int) -> TNode:
        """A tensor that is neither a leaf nor a state, as the expression that makes it."""
        return simplify(self._tree(self.canon(vid), True, [], {}))

    # ---- steps -------------------------------------------------------------
    def _step(self, s: int, k: int | None) -> AStep:
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
        return AStep(s, k, tree, eqns, atoms, last.call if last is not None else None, nodes, functions)

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
            c = call.call
            if c.module.type != "Linear" or not call.outs or self.canon(call.outs[0]) != v:
                continue
            if not call.args:   # its input given by keyword (lin(input=x)): the ops it ran are read instead
                return None
            if c.module.weight_norm is not None or c.module.spectral_norm is not None:
                # its weight is computed (weight_norm, spectral_norm): the ops it ran
                return None
            for rec in (self.run.rt.log[i] for i in self.fwd.log):
                if rec.phase == "forward" and rec.call is c and rec.returned is not None and rec.hook.kind == "forward":
                    return None
            return call
        return None

    def operand(self, i, eqns: list, functions: dict) -> TNode | None:
        if i is None:                                   # an optional tensor argument not given
            return None
        if isinstance(i, Cx):                           # a complex Python number PyTorch wrapped (2j)
            return TConst(i, i.shape)
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
            if g.vars[v].leaf or v in self.atom_set:
                return TAtom(v, shape)
            value = g.vars[v].value                     # an unnamed constant: its value
            return self.operand(getattr(value, "value", value), eqns, functions)
        call = self._linear_call(v)
        if call is not None:
            return self._linear(call, shape, eqns, functions)
        ins = [self.operand(i, eqns, functions) for i in eqn.ins]
        return self.eqn_tree(eqn, ins, shape, TAtom(v, shape) if top else None, functions, g.vars[v].out_index)

    def _linear(self, call, shape, eqns, functions) -> TNode:
        """A Linear module reads W x + b (x W^T + b^T on a batch), whatever ops it ran."""
        g = self.g
        path = call.call.module.path
        weight = g.names[f"{path}.weight" if path else "weight"]
        bias_name = f"{path}.bias" if path else "bias"
        x = self._tree(call.args[0], False, eqns, functions)
        W = TAtom(weight, g.vars[weight].shape)
        if len(x.shape) == 1:
            body = TMatMul(W, x, shape)
            if bias_name in g.names:
                body = TBin("add", body, TAtom(g.names[bias_name], g.vars[g.names[bias_name]].shape), shape)
        else:
            body = TMatMul(x, TT(W, t_shape(W.shape)), shape)
            if bias_name in g.names:
                b = g.names[bias_name]
                body = TBin("add", body, TT(TAtom(b, g.vars[b].shape), (1, g.vars[b].shape[0])), shape)
        return body

    def eqn_tree(self, eqn, ins: list, shape: tuple, out_atom: TNode | None, functions: dict, k: int = 0) -> TNode:
        """One equation applied to operand trees: the registry's ``math``, or one of the three nodes
        that are not registry primitives."""
        if eqn.prim == "bhf":
            return ins[k]
        if eqn.prim == "function":
            node = TCall(eqn.params.function.name, tuple(ins), shape, k if len(eqn.outs) > 1 else None)
            n_out = len(eqn.node.outputs) if eqn.node is not None else len(eqn.outs)   # with non-tensor outputs
            functions[id(node)] = self._function_formulas(eqn.params, self._function_args(eqn, ins),
                                                          out_atom if out_atom is not None else node, k, n_out)
            return node
        if eqn.prim == "copy_slices":
            return self._copy_slices(eqn, ins, shape, functions)
        return REGISTRY[eqn.prim].math.formula(ins, eqn.params, shape, k)

    def _copy_slices(self, eqn, ins: list, shape, functions: dict) -> TNode:
        """base' = base with its view replaced by op(view of base, others): what CopySlices computes."""
        write = eqn.params

        def region(t: TNode) -> TNode:
            for opname, params, j, in_shape in write.view_ops:
                op = REGISTRY[opname]
                out = op.shape([tuple(in_shape)], params, None)
                t = op.math.formula([t], params, out[j] if op.outputs != 1 else out, j)
            return t

        view = region(ins[0])
        if write.prim == "function":   # a custom Function that marked a view dirty (adjoint/engine/dirty.py)
            mod = write.params
            value = TCall(mod.function.name, (view,) + tuple(ins[1:]), view.shape, None)
            functions[id(value)] = self._function_formulas(mod, [view] + list(ins[1:]), value, 0, 1)
            return TPut(ins[0], view, value, region, tuple(shape))
        value = REGISTRY[write.prim].math.formula([view] + list(ins[1:]), write.params, view.shape, 0)
        return TPut(ins[0], view, value, region, tuple(shape))

    @staticmethod
    def _function_args(eqn, ins: list) -> list:
        """The Function's arguments as trees: the tensors' (``ins``), a Python number as a constant."""
        values = eqn.node.input_values if eqn.node is not None else ()
        if len(values) == len(ins):
            return list(ins)
        trees = iter(ins)
        return [TConst(Fraction(v), ()) if isinstance(v, (bool, int, Fraction)) else next(trees) for v in values]

    def _function_formulas(self, mod, ins: list, out_tree: TNode, k: int, n_out: int):
        def formulas(lam: TNode) -> dict:
            env = dict(zip(slots_of(mod), ins))
            env["output"] = out_tree
            for a in mod.forward:
                if isinstance(a, S.Assign) and not isinstance(a.target, S.Attr):   # (t.requires_grad = flag binds nothing)
                    env[a.target.id] = expr_tree(a.value, env)
            if mod.function.save is not None:   # the formulas read saved[i]: ctx.save_for_backward's arguments
                env["saved"] = TTuple(tuple(expr_tree(e, env) for e in mod.function.save))
            if n_out > 1:
                env["grad_output"] = TTuple(tuple(lam if i == k else TConst(Fraction(0), lam.shape)
                                                  for i in range(n_out)))
            else:
                env["grad_output"] = lam
            out = {}
            for i, (slot, formula) in enumerate(mod.function.grads):
                if formula is not None:
                    out[i] = expr_tree(formula, env)
            return out
        return formulas

    # ---- numbers -----------------------------------------------------------
    def sweep(self, eqn_ids, seeds: dict) -> dict:
        """J^T seed through the given eqns, hooks ignored: cotangents by canonical var."""
        g = self.g
        cot = dict(seeds)
        for eid in sorted(eqn_ids, reverse=True):
            eqn = g.eqns[eid]
            if eqn.node is None or eqn.prim == "bhf":
                continue
            gs = [cot.get(self.canon(o)) for o in eqn.outs]
            if all(x is None for x in gs):
                continue
            try:
                res = self._vjp(eqn, gs)
            except TorchError:   # PyTorch's backward formula raises here (the answer's error): nothing flows on
                continue
            for edge, r in zip(eqn.edges, res):
                if edge is None or r is None:
                    continue
                c = self.canon(edge)
                ops = self.B if isinstance(r, Cx) or isinstance(cot.get(c), Cx) else A   # complex: its backend
                if r.shape != g.vars[c].shape:
                    if not expandable(g.vars[c].shape, r.shape):
                        # a custom Function's gradient of another shape: PyTorch's validate_outputs
                        # raises there (the answer's error), so nothing flows on along this edge
                        continue
                    r = ops.sum_to(r, g.vars[c].shape)
                cot[c] = r if cot.get(c) is None else ops.add(cot[c], r)
        return cot

    def _vjp(self, eqn, gs: list) -> list:
        """One equation's vector-Jacobian product, as PyTorch's backward formula computes it."""
        g, B = self.g, self.B
        ins = [g.of(i) for i in eqn.ins]
        outs = [g.vars[o].value for o in eqn.outs]
        if eqn.prim == "function":
            filled = [x if x is not None else B.zeros(g.vars[o].shape) for x, o in zip(gs, eqn.outs)]
            node = eqn.node
            if node is not None and (len(node.input_values) != len(ins) or None in node.outputs):
                # Python arguments and non-tensor outputs: the backward sees every slot (None for those)
                tensors, grads = iter(ins), iter(filled)
                args = [next(tensors) if B.is_value(v) else v for v in node.input_values]
                full = [next(grads) if o is not None else None for o in node.outputs]
                out = declared_vjp(self.run.rt, eqn.params, args, full if len(full) > 1 else full[0],
                                  dtypes=input_dtypes(node, B))
                return [x for v, x in zip(node.input_values, out) if B.is_value(v)]
            return declared_vjp(self.run.rt, eqn.params, ins, filled if len(filled) > 1 else filled[0],
                                dtypes=input_dtypes(node, B))
        if eqn.prim == "copy_slices":
            need = [e is not None for e in eqn.edges]
            return copy_slices_backward(self.run.rt, eqn.node, gs[0], need,
                                        lambda fn, grads, need: fn.op.vjp(B, grads, list(fn.input_values),
                                                                          list(fn.output_values), fn.params, need)
                                        if fn.kind != "function" else   # a Function that marked a view dirty
                                        declared_vjp(self.run.rt, fn.params, list(fn.input_values), grads[0],
                                                     dtypes=input_dtypes(fn, B)))
        need = [e is not None for e in eqn.edges]
        op = REGISTRY[eqn.prim]
        if complex_node(eqn.node):   # PyTorch's convention for complex values (adjoint.engine.complex_grad)
            one = op.outputs == 1
            return call_vjp(eqn.node, B, [gs[0]] if one else gs, ins, outs[:1] if one else outs, need)
        if op.outputs == 1:
            return op.vjp(B, [gs[0]], ins, outs[:1], eqn.params, need)
        return op.vjp(B, gs, ins, outs, eqn.params, need)

    def contribution(self, step: AStep, seed: Exact | None) -> dict:
        """J_step^T seed for each atom of the step."""
        if seed is None:
            return {}
        key = (step.var, id(seed))
        if key not in self._contrib:
            cot = self.sweep(step.eqns, {step.var: seed})
            self._contrib[key] = ({a: cot.get(a) for a in step.atoms}, seed)
        return self._contrib[key][0]

    def local_derivative(self, step: AStep, atom: int) -> Exact | None:
        """One-element problems: d x_k / d atom, exactly as PyTorch's backward formulas give it."""
        return self.contribution(step, self._ones(step.var)).get(atom)

    def _ones(self, vid: int) -> Exact:
        key = ("ones", vid)
        if key not in self._contrib:
            self._contrib[key] = Exact.full(self.g.vars[vid].shape, 1)
        return self._contrib[key]

    def vjp_formulas(self, step: AStep, tilde: bool = False) -> dict[int, TNode]:
        lam = self.seed_tree(step, tilde)
        out: dict = {}
        vjp_tree(step.tree, lam, out, step.functions)
        return {a: simplify(t) for a, t in out.items()}

    def seed_tree(self, step: AStep, tilde: bool = False) -> TNode:
        shape = self.g.vars[step.var].shape
        if step.var == self.root and not self.root_is_state and not tilde:
            if all(e == 1 for e in self.seed.flat()) and self.seed.size == 1:
                return TConst(Fraction(1), shape)
        return TLam(step.var, shape, tilde)

    # ---- chain-rule paths (one-element problems) -------------------------------
    def paths(self, vid: int, depth: int = 0) -> list[list[AStep]] | None:
        """Every path of steps from ``vid`` up to the loss; None when there are too many."""
        if vid == self.root:
            return [[]]
        if depth > 12:
            return None
        out: list[list[AStep]] = []
        for st in self.consumers.get(vid, []):
            rest = self.paths(st.var, depth + 1) if st.var != self.root else [[]]
            if rest is None:
                return None
            for r in rest:
                out.append([st] + r)
                if len(out) > MAX_PATHS:
                    return None
        return out
