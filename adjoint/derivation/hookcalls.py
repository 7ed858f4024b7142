"""What each hook call involved (:func:`hook_calls`): the module call or the tensor or node it ran
at, every argument it was handed identified with the tensor it is the gradient of (and, where
the document can say so, with the multiplier it is, the node's own vector-Jacobian product, the
chain rule or what arrived from the equations reading the tensor), what a legacy hook misses
compared with a full one, the hook's returned value as a tree, and the ``.grad`` of every leaf
at that moment.

Everything comes from the engine's log (:class:`~adjoint.engine.runtime.CallRecord`: the hook, the
module call, the node) and the prediction's record of the same call (``HookRecord``)."""

from __future__ import annotations

from adjoint.engine.graph import Tensor
from adjoint.engine.ops import REGISTRY
from adjoint.derivation.expressions import expr_tree
from adjoint.values.mathtree import TAtom, TIndex, TName, TTuple, simplify, vjp_tree
from adjoint.derivation.record import HookArg, HookCall, LegacyRow
from adjoint.derivation.values import same


def hook_calls(b, records: list) -> list:
    """One HookCall per (number, HookRecord, CallRecord); ``b`` (a UnitBuilder) knows the forward pass
    the calls are about (None: a forward that did not finish, where only the values can be said)."""
    return [_HookCallBuilder(b, number, h, rec).build() for number, h, rec in records]


class _HookCallBuilder:
    def __init__(self, b, number: int, h, rec):
        self.b, self.a, self.g = b, (b.a if b is not None else None), (b.g if b is not None else None)
        self.number, self.h, self.rec = number, h, rec

    def build(self) -> HookCall:
        h, rec, b = self.h, self.rec, self.b
        hook = rec.hook
        out = HookCall(self.number, h.index, h.label, h.kind, h.on, h.target, h.k, h.calls_of_module, h.phase,
                       h.node, [], h.returned, None, list(h.why), h.raised, h.is_global,
                       does=bool(hook.does), grads_then=dict(rec.grads_then), saved=rec.saved, wrote=tuple(rec.wrote),
                       recomputed=rec.recomputed, reentrant=rec.reentrant)
        if b is None:
            out.args = [HookArg(name, pos, item, None) for name, value in h.args.items()
                        for pos, item in _items(value)]
            self.returned(out)
            return out
        self.call = self.module_call()
        out.call = self.call.index if self.call is not None else None
        self.tensor = self.hook_var() if h.on in ("tensor", "node") else None
        if self.call is None and self.tensor is not None:
            out.target_var = b.describe(self.tensor)
            tensor = self.g.vars[self.tensor].tensor
            out.later = [b.describe(v.id) for v in self.g.vars[self.tensor + 1:]
                         if v.tensor is tensor and v.eqn is not None and not v.eqn.wrapped]
        arg_vars = self.arg_vars()
        slots, slot_arg = {}, {"backward": "grad_input", "post": "grad_inputs"}.get(h.kind)
        node = self.hook_node()
        if node is not None and slot_arg is not None and node.node is not None:
            out_arg = "grad_output" if h.kind == "backward" else "grad_outputs"
            out_shape = self.g.vars[node.outs[0]].shape
            slots, out.slot_vars = self.slot_formulas(node, TIndex(TName(out_arg), 0, out_shape))
        if rec.saved is not None:
            out.saved_var = self.saved_var()
        for name, value in h.args.items():
            vids = arg_vars.get(name, [])
            for j, (pos, item) in enumerate(_items(value)):
                vid = vids[j] if j < len(vids) else None
                arg = HookArg(name, pos, item, None)
                out.args.append(arg)
                if item is None:
                    not_tensor = (name == "grad_output" and h.kind in ("full_backward", "full_backward_pre")
                                  and j < len(vids) and vid is None)      # a module output that is None
                    arg.none_flows = bool(vids) and not not_tensor
                    continue
                if vid is None or h.phase != "backward":
                    continue
                c = b.describe(vid)
                arg.var, arg.backward = c, True
                if name == slot_arg and j in slots:
                    arg.slot_formula = slots[j]
                elif h.kind == "full_backward" and name == "grad_input":
                    arg.full_vjp = True
                arg.ident = b.ident(c, item, strict=True)
                if arg.ident is not None:
                    ch = b.chain(c) if arg.ident.kind != "lam_tilde" else None
                    if ch is not None and same(ch.total, item) and len(ch.paths) == 1 and len(ch.paths[0]) > 1:
                        arg.chain = ch
                elif arg.slot_formula is None and not arg.full_vjp:
                    arr = b.arrival(c)
                    if arr.total is not None and same(arr.total, item) and arr.terms:
                        arg.arrival = arr
        if h.kind == "backward" and h.phase == "backward":
            self.legacy_contrast(out)
        self.returned(out)
        return out

    def returned(self, out: HookCall) -> None:
        """The hook's ``returns`` as a tree (a list of item trees when it returned a tuple)."""
        h, hook = self.h, self.rec.hook
        if h.returned is None or hook.returns is None:
            return
        tree = expr_tree(hook.returns, {})
        if isinstance(h.returned, tuple):
            out.returned_trees = (list(tree.items) if isinstance(tree, TTuple) and len(tree.items) == len(h.returned)
                                  else [None] * len(h.returned))
        else:
            out.returned_trees = tree

    # ---- what the call is about ----------------------------------------------------
    def module_call(self):
        """The module call that fired (module and global hooks)."""
        call = self.rec.call
        if call is None or self.h.on not in ("module", "global"):
            return None
        for cv, info in zip(self.g.calls, self.b.calls):
            if cv.call is call:
                return info
        return None

    def arg_vars(self) -> dict:
        """Argument name -> the tensors (var ids, None for a slot without one) whose gradients it holds."""
        h, g, a = self.h, self.g, self.a
        if self.call is not None:
            call = self.call
            cv = g.calls[call.index]
            if h.kind == "full_backward":
                return {"grad_output": _by_position(cv.call.out, call.outs), "grad_input": list(call.args)}
            if h.kind == "full_backward_pre":
                return {"grad_output": _by_position(cv.call.out, call.outs)}
            if h.kind == "backward" and cv.legacy_eqn is not None:
                eqn = g.eqns[cv.legacy_eqn]
                return {"grad_output": list(eqn.outs), "grad_input": list(eqn.edges)}
            return {}
        if h.on == "multi_grad":
            tensors = [g.final.get(name) for name in self.rec.hook.tensors]
            return {"grads": tensors} if self.rec.hook.mode == "all" else {}
        if h.on not in ("tensor", "node"):
            return {}
        vid = self.tensor
        if vid is None:
            return {}
        if h.on == "tensor" and getattr(self.rec, "sharded", False):
            return {}   # fully_shard: this rank's rows of the mean over ranks (adjoint.engine.fsdp), no gradient of one run
        if h.on == "tensor":
            return {"tensor": [vid]} if h.kind == "post_accumulate_grad" else {"grad": [vid]}
        if self.rec.node is not None and self.rec.node.is_accumulate:
            return {"grad_outputs": [vid]}
        eqn = a.made_by.get(vid)
        if eqn is None or eqn.node is None:
            return {}
        if h.kind == "pre":
            return {"grad_outputs": list(eqn.outs)}
        return {"grad_inputs": list(eqn.edges), "grad_outputs": list(eqn.outs)}

    def saved_var(self) -> int | None:
        """pack / unpack: the tensor the node saved (an input or an output of its equation)."""
        g, rec = self.g, self.rec
        eqn_id = g.eqn_of_node.get(id(rec.node)) if rec.node is not None else None
        if eqn_id is None:
            return None
        eqn = g.eqns[eqn_id]
        if eqn.prim == "function":
            slot = int(rec.saved[len("saved"):])
            vid = eqn.ins[slot] if slot < len(eqn.ins) else None
        elif eqn.prim in REGISTRY:
            spec = next((x for x in REGISTRY[eqn.prim].saves if x.name == rec.saved), None)
            if spec is None:
                return None
            vid = (eqn.ins if spec.what == "in" else eqn.outs)[spec.index]
        else:
            return None
        return self.b.describe(vid) if isinstance(vid, int) else None

    def hook_node(self):
        """The equation whose autograd node a legacy or node hook sees."""
        h, g = self.h, self.g
        if self.call is not None and h.kind == "backward":
            cv = g.calls[self.call.index]
            return g.eqns[cv.legacy_eqn] if cv.legacy_eqn is not None else None
        if h.on == "node":
            return self.a.made_by.get(self.tensor) if self.tensor is not None else None
        return None

    def hook_var(self) -> int | None:
        """The tensor a tensor or node hook is about, as the hook saw it: the output of the node it ran at
        (a hook registered before an in-place op stays on the old version's node), else the version the
        name was bound to."""
        g, node = self.g, self.rec.node
        named = g.names.get(self.h.target)
        if node is None:
            return named
        if node.is_accumulate:
            return g.leaf_var.get(node.variable.id, named)
        eqn_id = g.eqn_of_node.get(id(node))
        if eqn_id is None:
            return named
        outs = g.eqns[eqn_id].outs
        if named is not None:
            for o in outs:
                if g.vars[o].tensor is g.vars[named].tensor:
                    return o
        return outs[0] if len(outs) == 1 or named is None else named

    def slot_formulas(self, eqn, lam) -> tuple[dict, dict]:
        """J_slot^T lam for each input slot of one autograd node, over atoms -(k+1) standing for the
        node's input k; and which tensor each of those atoms is."""
        a, b = self.a, self.b
        ins, slot_vars = [], {}
        for k, i in enumerate(eqn.ins):
            if isinstance(i, int):
                fid = -(k + 1)
                ins.append(TAtom(fid, self.g.vars[i].shape))
                slot_vars[fid] = b.describe(i)
            else:
                ins.append(a.operand(i, [], {}))
        functions: dict = {}
        out_shape = self.g.vars[eqn.outs[0]].shape
        tree = a.eqn_tree(eqn, ins, out_shape, TAtom(a.canon(eqn.outs[0]), out_shape), functions)
        trees: dict = {}
        vjp_tree(tree, lam, trees, functions)
        return {-fid - 1: simplify(t) for fid, t in trees.items() if fid < 0}, slot_vars

    def legacy_contrast(self, out: HookCall) -> None:
        """A legacy hook's grad_input against what a full backward hook on the same module gets."""
        call = self.call
        if call is None:
            return
        bd = next((x for x in self.b.boundary_records if x.callid == call.callid), None)
        if bd is None or not bd.grad_input:
            return
        cv = self.g.calls[call.index]
        if cv.call.in_node is None and len(set(call.args)) < len(call.args):
            return      # an argument passed twice with no input hook node to tell them apart: no per-argument answer
        got = self.h.args.get("grad_input")
        gi = bd.grad_input
        if isinstance(got, tuple) and len(got) == len(gi) and all(same(x, y) for x, y in zip(got, gi)):
            out.legacy_same = True
            return
        for i, (x, v) in enumerate(zip(call.args, gi)):
            if v is None:
                continue
            out.legacy_rows.append(LegacyRow(i, x, v, self.b.ident(x, v, strict=True)))


def _items(value) -> list:
    """An argument as (position, item) pairs: a tuple by index, a dict (kwargs) by key, else one item;
    a tuple nested in a tuple (an LSTM's output ``(out, (h_n, c_n))``) item by item, at ``(i, j)``."""
    if isinstance(value, tuple):
        return [((i, j), x) if isinstance(item, tuple) else (i, item)
                for i, item in enumerate(value) for j, x in (enumerate(item) if isinstance(item, tuple) else [(0, item)])]
    if isinstance(value, dict):
        return list(value.items())
    return [(None, value)]


def _by_position(out, vids: tuple) -> list:
    """The module's output Vars one per slot of its output tuple, as the hook's grad_output has them
    (BackwardHook._pack_with_none): None where an output is not a tensor (attention weights not asked for)."""
    items = out if isinstance(out, tuple) else (out,)
    it = iter(vids)
    return [next(it, None) if isinstance(v, Tensor) else None for v in items]
