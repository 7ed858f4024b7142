"""v2 hook kinds and options: global module hooks, ``prepend``, ``with_kwargs``,
``always_call``, ``post_accumulate_grad``, node hooks on a leaf's AccumulateGrad,
``multi_grad`` (all / any), ``saved_tensors`` pack/unpack, ``raises`` and ``removes``.

:class:`HookGenV2` is a mixin of :class:`modules.Gen`, called from ``HookGen.variant_hooks``:
:meth:`global_hooks` before the analysis (a global full backward hook wraps every module
call, which changes the edges other hooks see), :meth:`v2_extras` after it.
"""

from __future__ import annotations

from gen.inplace import INPLACE_P, NAMED_WRITE_P, named_write, optimizer_step
from .specs import HookSpec

GLOBAL_KINDS = [(2, "forward_pre"), (2, "forward"), (3, "full_backward"), (2, "full_backward_pre"), (1, "backward")]
#: pack/unpack pairs: identities, a scale undone, and one that changes every gradient
SAVED = [(3, ("x", "x")), (2, ("x * 2", "x / 2")), (1, ("x", "x * 2")), (1, ("x + 0", "x"))]


class HookGenV2:
    """Mixin of Gen (``self.s``, ``self.v2``)."""

    def global_hooks(self, module_hooks: list) -> list:
        """Global module hooks for this variant, and module hooks of the other backward
        family dropped (PyTorch allows a module's own legacy hooks next to global full ones,
        but adjoint and the contract keep one family; the mix is left out here)."""
        s = self.s
        if not (self.v2 and s.coin(0.25)):
            return module_hooks
        out = []
        for _ in range(s.weighted([(3, 1), (1, 2)])):
            kind = s.weighted(GLOBAL_KINDS)
            h = HookSpec("global", kind, kind)
            out.append(h)
        fams = {"legacy" if h.kind == "backward" else "full" for h in out if "backward" in h.kind}
        if len(fams) == 2:   # PyTorch refuses a global full hook after a global legacy one
            out = [h for h in out if h.kind != "backward"]
            fams = {"full"}
        if "legacy" in fams:
            module_hooks = [h for h in module_hooks if h.kind not in ("full_backward", "full_backward_pre")]
        elif "full" in fams:
            module_hooks = [h for h in module_hooks if h.kind != "backward"]
        return module_hooks + out

    def module_options(self, module_hooks: list) -> None:
        """prepend / with_kwargs / always_call on module hooks."""
        s = self.s
        if not self.v2:
            return
        for h in module_hooks:
            if h.on != "module":
                continue
            if h.kind != "backward" and s.coin(0.15):   # register_backward_hook takes no prepend
                h.opts["prepend"] = True
            if h.kind in ("forward", "forward_pre") and s.coin(0.2):
                h.opts["with_kwargs"] = True
                if h.returns is not None:
                    h.returns = ("tup", (("n", "input"), ("n", "kwargs"))) if h.kind == "forward_pre" and s.coin(0.5) else None
            if h.kind == "forward" and s.coin(0.2):
                h.opts["always_call"] = True

    def v2_extras(self, p, a, inputs: list, hooks: list) -> None:
        """New hooks of the v2 kinds, then raises / removes on some hook of the list."""
        s = self.s
        if not self.v2:
            return
        leaves = [leaf.name for leaf in inputs if leaf.rg] + [prm.name for m in p.model.walk() for prm in m.params
                                                             if prm.rg]
        used = [n for n in leaves if n in a.root.deps]
        rg_names = [n for n, inf in a.names.items() if inf.rg]
        extra = []
        if used and s.coin(0.6 if self.train else 0.3):
            for _ in range(s.int(1, 2)):
                h = HookSpec("tensor", s.choice(used), "post_accumulate_grad")
                if self.train and s.coin(0.6):   # its own torch.optim optimizer (tests/gen/train.py)
                    from .train import hook_optimizer
                    h.opts["optimizer"], h.does = hook_optimizer(s, self.v2_used)
                elif s.coin(INPLACE_P):
                    h.does = optimizer_step(s)
                others = [n for n in used if n != h.target and "." not in n]
                if others and s.coin(NAMED_WRITE_P):   # a write, by name, of another leaf (v3 §1, §8)
                    h.does = list(h.does) + named_write(s, s.choice(others))
                extra.append(h)
        if used and s.coin(0.25):
            nk = s.choice(["pre", "post"])
            h = HookSpec("node", s.choice(used), nk)
            if nk == "pre" and s.coin(0.4):
                h.returns = ("tup", (self.rescale(("idx", ("n", "grad_outputs"), 0)),))
            extra.append(h)
        if rg_names and s.coin(0.25):
            k = min(len(rg_names), s.int(1, 3))
            names = []
            for _ in range(k):
                n = self.pick_target(rg_names)
                if n not in names:
                    names.append(n)
            extra.append(HookSpec("multi_grad", ",".join(names), "any" if s.coin(0.4) else "all"))
        if s.coin(0.25):
            # a comparison's bool tensor may be saved (where's condition, a mask in a product): pack / unpack
            # arithmetic on it is integer arithmetic (x * 2 of a bool is int64), which solve does not model
            bools = any(k.startswith("cmp ") and k != "cmp hook" for k in self.v2_used)
            # so are int64 indices and bool masks layers save (tests/gen/layers.py): identities there too
            pack, unpack = ("x", "x") if bools or getattr(self, "int_saved", False) else s.weighted(SAVED)
            h = HookSpec("saved_tensors", "", "pack")
            h.opts["pack"], h.opts["unpack"] = pack, unpack
            paths = [m.path for m in p.model.walk() if m.path]
            if paths and s.coin(0.4):
                h.opts["scope"] = sorted({s.choice(paths) for _ in range(s.int(1, 2))})
                if not bools and getattr(self, "int_saved", False) and not set(h.opts["scope"]) & self.int_paths:
                    h.opts["pack"], h.opts["unpack"] = s.weighted(SAVED)   # layers that save floats only
            extra.append(h)
        for h in extra:
            hooks.insert(s.int(0, len(hooks)), h)
        if hooks and s.coin(0.07):
            h = s.choice(hooks)
            if h.kind != "retain_grad":
                h.opts["raises"] = s.choice(["stop", "hook refused"])
                h.returns, h.does = None, []   # a hook that raises returns nothing
        if len(hooks) >= 2 and s.coin(0.12):
            i = s.int(0, len(hooks) - 1)
            if hooks[i].kind != "retain_grad" and hooks[i].on != "saved_tensors":
                # with steps, a full backward hook removed by a hook is gone from the next forward, whose
                # graph then has no BackwardHookFunction there: a node hook's returns were sized by the
                # graph with it (sweep seed 151, problem 883)
                others = [j for j in range(len(hooks)) if hooks[j].kind != "retain_grad" and hooks[j].on != "saved_tensors"
                          and not hooks[j].replaces
                          and not (not self.timing and hooks[j].on in ("module", "global")
                                   and hooks[j].kind in ("full_backward", "full_backward_pre"))]
                if others:
                    hooks[i].opts["removes"] = sorted({s.choice(others) for _ in range(s.int(1, 2))})
