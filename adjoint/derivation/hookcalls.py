"""What each hook call involved (:func:`hook_calls`): the module call or the tensor or node it ran
at, every argument it was handed identified with the tensor it is the gradient of (and, where
the document can say so, with the multiplier it is, the node's own vector-Jacobian product, the
chain rule or what arrived from the equations reading the tensor), what a legacy hook misses
compared with a full one, the hook's returned value as a tree, and the ``.grad`` of every leaf
at that moment.

Everything comes from the engine's log (:class:`~adjoint.runtime.CallRecord`: the hook, the
module call, the node) and the prediction's record of the same call (``HookRecord``)."""

from __future__ import annotations

from .mathtree import TAtom, TIndex, TName, TTuple, simplify, vjp_tree
from .expressions import expr_tree
from .record import HookArg, HookCall, LegacyRow
from .values import same


def hook_calls(b, records: list) -> list:
    """One HookCall per (HookRecord, CallRecord) pair, numbered from 1 in firing order."""
    return [_HookCallBuilder(b, i, h, rec).build() for i, (h, rec) in enumerate(records, 1)]


class _HookCallBuilder:
    def __init__(self, b, number: int, h, rec):
        self.b, self.a, self.g = b, b.a, b.g
        self.number, self.h, self.rec = number, h, rec

    def build(self) -> HookCall:
        h, rec, b = self.h, self.rec, self.b
        hook = rec.hook
        out = HookCall(self.number, h.index, h.label, h.kind, h.on, h.target, h.k, h.calls_of_module, h.phase,
                       h.node, [], h.returned, None, list(h.why), h.raised, h.is_global,
                       does=bool(hook.does), grads_then=dict(rec.grads_then), saved=rec.saved)
        self.call = self.module_call()
        out.call = self.call.index if self.call is not None else None
        if self.call is None and h.on in ("tensor", "node") and self.g.names.get(h.target) is not None:
            out.target_var = b.describe(self.g.names[h.target])
        arg_vars = self.arg_vars()
        slots, slot_arg = {}, {"backward": "grad_input", "post": "grad_inputs"}.get(h.kind)
        node = self.hook_node()
        if node is not None and slot_arg is not None and node.node is not None:
            out_arg = "grad_output" if h.kind == "backward" else "grad_outputs"
            out_shape = self.g.vars[node.outs[0]].shape
            slots, out.slot_vars = self.slot_formulas(node, TIndex(TName(out_arg), 0, out_shape))
        for name, value in h.args.items():
            items = value if isinstance(value, tuple) else (value,)
            vids = arg_vars.get(name, [])
            for j, item in enumerate(items):
                vid = vids[j] if j < len(vids) else None
                arg = HookArg(name, j if isinstance(value, tuple) else None, item, None)
                out.args.append(arg)
                if item is None:
                    arg.none_flows = bool(vids)
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
        if h.returned is not None and hook.returns is not None:
            tree = expr_tree(hook.returns, {})
            if isinstance(h.returned, tuple):
                out.returned_trees = (list(tree.items) if isinstance(tree, TTuple) and len(tree.items) == len(h.returned)
                                      else [None] * len(h.returned))
            else:
                out.returned_trees = tree
        return out

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
                return {"grad_output": list(call.outs), "grad_input": list(call.args)}
            if h.kind == "full_backward_pre":
                return {"grad_output": list(call.outs)}
            if h.kind == "backward" and cv.legacy_eqn is not None:
                eqn = g.eqns[cv.legacy_eqn]
                return {"grad_output": list(eqn.outs), "grad_input": list(eqn.edges)}
            return {}
        if h.on not in ("tensor", "node"):
            return {}
        vid = g.names.get(h.target)
        if vid is None:
            return {}
        if h.on == "tensor":
            return {"grad": [vid]}
        eqn = a.made_by.get(vid)
        if eqn is None or eqn.node is None:
            return {}
        if h.kind == "pre":
            return {"grad_outputs": list(eqn.outs)}
        return {"grad_inputs": list(eqn.edges), "grad_outputs": list(eqn.outs)}

    def hook_node(self):
        """The equation whose autograd node a legacy or node hook sees."""
        h, g = self.h, self.g
        if self.call is not None and h.kind == "backward":
            cv = g.calls[self.call.index]
            return g.eqns[cv.legacy_eqn] if cv.legacy_eqn is not None else None
        if h.on == "node":
            vid = g.names.get(h.target)
            return self.a.made_by.get(vid) if vid is not None else None
        return None

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
        got = self.h.args.get("grad_input")
        gi = bd.grad_input
        if isinstance(got, tuple) and len(got) == len(gi) and all(same(x, y) for x, y in zip(got, gi)):
            out.legacy_same = True
            return
        for i, (x, v) in enumerate(zip(call.args, gi)):
            if v is None:
                continue
            out.legacy_rows.append(LegacyRow(i, x, v, self.b.ident(x, v, strict=True)))
