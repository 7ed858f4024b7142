"""Hooks and variants: where hooks go, what they return, what the backward is."""

from __future__ import annotations

from fractions import Fraction as Fr

from .analysis import Analysis, Info
from .cmpexprs import cmp_rescale
from .specs import BackwardSpec, HookSpec, Leaf, Mod, ProblemSpec, VariantSpec
from gen.inplace import INPLACE_P, write, writes_in_place
from gen.trees import src


#: How often a v2 problem's variant runs ``steps:`` instead of one forward and backward (its
#: hooks then take no ``when:`` / ``remove:``: which pass those would mean is not tested here).
STEPS_P = 0.3


class HookGen:
    """Mixin of :class:`modules.Gen`: hooks, their returns, variants."""

    def hooks_and_variants(self, p: ProblemSpec) -> None:
        s = self.s
        # one problem in five is hook-dense: 8-14 hooks a variant, most of them on a couple of
        # tensors and modules (ordering between many hooks at one node is where engines slip)
        self.dense = s.coin(0.2)
        self.focus_p = 0.8 if self.dense else 0.5
        mode = s.weighted([(3, "plain"), (3, "variants"), (1, "inherit")])
        self.timing = True
        if mode == "plain":
            stepped = self.v2 and (self.train or s.coin(STEPS_P))
            self.timing = not stepped
            p.hooks, p.backward = self.variant_hooks(p, p.inputs, self.hook_count())
            if stepped:
                p.steps = self.steps_for(p, p.inputs, p.hooks, p.backward)
            return
        if mode == "inherit":  # top-level hooks, variants that only change values or nothing
            p.hooks, p.backward = self.variant_hooks(p, p.inputs, self.hook_count())
            p.variants = []
            for i in range(s.int(1, 3)):
                new = {}
                if s.coin(0.5):
                    for l in p.inputs:
                        if s.coin(0.6):
                            new[l.name] = Leaf(l.name, l.shape, self.values(l.shape), l.rg)
                p.variants.append(VariantSpec(f"v{i}", new, None, None))
            return
        p.backward = BackwardSpec(grad_output=self.needs_grad_output(p))
        if s.coin(0.3):
            p.hooks, _ = self.variant_hooks(p, p.inputs, self.hook_count(), backward=False)
        p.variants = []
        for i in range(s.int(1, 3)):
            vname = s.choice(["v", "case", "run-"]) + str(i)
            new = {}
            if s.coin(0.35):
                for l in p.inputs:
                    if s.coin(0.5):
                        rg = l.rg if s.coin(0.5) else not l.rg
                        vals = self.values(l.shape) if s.coin(0.7) else list(l.values)
                        new[l.name] = Leaf(l.name, l.shape, vals, rg)
            inputs = [new.get(l.name, l) for l in p.inputs]
            if not Analysis(p, inputs, []).root.rg:
                new = {}
                inputs = list(p.inputs)
            stepped = self.v2 and (self.train or s.coin(STEPS_P))
            self.timing = not stepped
            hooks, back = self.variant_hooks(p, inputs, self.hook_count())
            self.timing = True
            if back.empty() and s.coin(0.5):
                back = None
            steps = self.steps_for(p, inputs, hooks, back if back is not None else p.backward) if stepped else None
            p.variants.append(VariantSpec(vname, new, hooks, back, steps))

    def hook_count(self) -> int:
        if self.dense:
            return self.s.int(8, 14)
        return self.s.weighted([(1, 0), (3, 1), (4, 2), (3, 3), (2, 5), (1, 8)])

    def needs_grad_output(self, p: ProblemSpec):
        if p.loss is None:
            shp = p.model.out_shape
            if shp != () or self.s.coin(0.2):
                return (shp, self.values(shp))
        return None

    def variant_hooks(self, p: ProblemSpec, inputs: list, n: int, backward: bool = True):
        s = self.s
        paths = [m.label for m in p.model.walk()
                 if not (m.path == "" and isinstance(m.ret, tuple) and m.ret[0] == "tup")]   # a tuple output
        mods = {m.label: m for m in p.model.walk()}
        # 1. module hooks: targets and kinds (legacy and full never on one module)
        module_hooks: list[HookSpec] = []
        mode: dict[str, str] = {}
        focus = [s.choice(paths) for _ in range(2)] if paths else []   # hooks pile up on a few modules and tensors
        for _ in range(n):
            if not s.coin(0.5) or not paths:
                continue
            target = s.choice(focus) if s.coin(self.focus_p) else s.choice(paths)
            kind = s.weighted([(4, "full_backward"), (2, "full_backward_pre"), (3, "backward"), (2, "forward"),
                               (2, "forward_pre")])
            fam = {"full_backward": "full", "backward": "legacy"}.get(kind)
            if fam and mode.setdefault(target, fam) != fam:
                continue
            h = HookSpec("module", target, kind)
            if self.timing and s.coin(0.05):
                h.when = "after_forward"  # too late for module hooks: never called, in torch and in adjoint
            if kind == "forward_pre" and s.coin(0.5):
                m = mods[target]
                keep = getattr(m, "int_inputs", ())   # int64 indices and class targets pass through
                if len(m.inputs) == 1 and s.coin(0.3) and not keep:
                    h.returns = self.fwd_replace(("idx", ("n", "input"), 0))
                else:
                    items = [self.fwd_replace(("idx", ("n", "input"), i)) if s.coin(0.6) and i not in keep
                             else ("idx", ("n", "input"), i) for i in range(len(m.inputs))]
                    h.returns = ("tup", tuple(items))
            elif kind == "forward" and s.coin(0.5) and not getattr(mods[target], "tuple_out", False):
                h.returns = self.fwd_replace(("n", "output"))
            if h.replaces:
                h.when = None
            module_hooks.append(h)
        module_hooks = self.global_hooks(module_hooks)
        self.module_options(module_hooks)
        # 2. what requires grad, in this variant, with these forward-time hooks
        a = Analysis(p, inputs, module_hooks)
        # 3. returns of module backward hooks
        for h in module_hooks:
            if h.on != "module":
                continue
            if h.kind in ("full_backward", "full_backward_pre", "backward") and s.coin(0.5):
                h.returns = self.module_returns(h, mods[h.target], [c for c in a.calls if c.path == h.target])
            if h.kind in ("full_backward", "backward"):
                self.tuple_does(h, "grad_input")
            elif h.kind == "full_backward_pre":
                self.tuple_does(h, "grad_output")
            if (self.v2 and h.kind in ("full_backward", "full_backward_pre", "backward") and h.returns is None
                    and not h.does and s.coin(INPLACE_P)):
                self.module_inplace(h, [c for c in a.calls if c.path == h.target])
        # 4. tensor and node hooks
        rg_names = [nm for nm, inf in a.names.items() if inf.rg]
        gf_names = [nm for nm, inf in a.names.items() if inf.gf]
        # the backward's form first: hooks then like to sit on the tensors it starts from or
        # is taken with respect to (captured vs executed nodes, retained non-leaf inputs)
        back = BackwardSpec(grad_output=self.needs_grad_output(p)) if backward else BackwardSpec()
        if backward:
            deps = sorted(a.root.deps)
            choice = s.weighted([(6, "plain"), (2, "inputs"), (2, "grad")])
            if choice != "plain" and deps:
                chosen = [d for d in deps if s.coin(0.4)] or [s.choice(deps)]
                back.method = "grad" if choice == "grad" else "backward"
                unreachable = [nm for nm in rg_names if nm not in a.root.deps and nm not in chosen]
                if unreachable and s.coin(0.1 if choice == "inputs" else 0.03):
                    # backward(inputs=) leaves its .grad None; autograd.grad raises (both sides)
                    chosen.insert(s.int(0, len(chosen)), s.choice(unreachable))
                back.inputs = chosen
        others: list[HookSpec] = []
        self.focus = [self.pick_target(rg_names) for _ in range(2)] if rg_names else []
        wrt = [nm for nm in back.inputs if nm in rg_names]
        if wrt and s.coin(0.7):
            self.focus[0] = s.choice(wrt)
        for _ in range(n):
            kind = s.weighted([(5, "tensor"), (2, "retain"), (3, "node")])
            if kind == "node" and gf_names:
                target = self.pick_target(gf_names)
                info = a.names[target]
                nk = s.weighted([(1, "pre"), (1, "post")])
                h = HookSpec("node", target, nk)
                if s.coin(0.5) and info.known:
                    h.returns = self.node_returns(nk, info)
                self.tuple_does(h, "grad_outputs" if nk == "pre" else "grad_inputs")
                if self.v2 and h.returns is None and not h.does and info.known and s.coin(INPLACE_P):
                    defined = [info.nr] if nk == "pre" else [k for k, e in enumerate(info.edges) if e]
                    if defined:
                        arg = "grad_outputs" if nk == "pre" else "grad_inputs"
                        h.does = write(s, ("idx", ("n", arg), s.choice(defined)))
            elif kind == "retain" and rg_names:
                h = HookSpec("tensor", self.pick_target(rg_names), "retain_grad")
            elif rg_names:
                h = HookSpec("tensor", self.pick_target(rg_names), "hook", implicit_kind=s.coin(0.5))
                self.tensor_returns(h)
                if self.v2 and h.returns is None and not h.does and s.coin(INPLACE_P):
                    h.does = write(s, ("n", "grad"), "grad")
            else:
                continue
            if self.timing and s.coin(0.1):
                h.when = "after_forward"
            others.append(h)
        for h in module_hooks + others:
            if self.timing and h.kind != "retain_grad" and s.coin(0.15) and not h.replaces:   # with steps: register/remove steps
                h.remove = s.choice(["before_backward", "after_backward"])
            if s.coin(0.1):
                h.label = f"hook {self.fresh('L')}"
        # 5. interleave, keeping each list's own order (forward-pre hooks chain in order)
        hooks = []
        i = j = 0
        while i < len(module_hooks) or j < len(others):
            if j >= len(others) or (i < len(module_hooks) and s.coin(0.5)):
                hooks.append(module_hooks[i])
                i += 1
            else:
                hooks.append(others[j])
                j += 1
        self.v2_extras(p, a, inputs, hooks)
        nones = any(h.returns is not None and "None" in src(h.returns) for h in hooks)
        for h in hooks:
            # a hook returning None somewhere, or a backward that computes only what its inputs need,
            # may leave a slot undefined that an in-place write reads (a Python error in the hook
            # body: not what these bodies are for)
            if writes_in_place(h) and (nones or (back.inputs and h.on in ("node", "module"))):
                h.does = []
        return hooks, back

    def pick_target(self, names: list) -> str:
        focus = [n for n in getattr(self, "focus", []) if n in names]
        if focus and self.s.coin(self.focus_p):
            return self.s.choice(focus)
        # prefer non-leaf, named intermediates and module outputs a little
        weighted = [(3 if ("." in n or n.startswith("h") or n in ("loss", "y", "model")) else 2, n) for n in names]
        return self.s.weighted(weighted)

    def fwd_replace(self, t):
        s = self.s
        return s.weighted([(3, ("b", "*", t, ("c", s.choice([Fr(2), Fr(-1), Fr(1, 2)])))),
                           (2, ("b", "+", t, ("c", Fr(1)))), (1, ("f", "tanh", t)), (1, ("neg", t)),
                           (1, ("b", "*", ("c", Fr(3)), t))])

    def rescale(self, t):
        s = self.s
        if self.v2 and s.coin(0.12):
            return cmp_rescale(s, self.v2_used, t)
        return s.weighted([(4, ("b", "*", ("c", s.choice([Fr(2), Fr(3), Fr(-1), Fr(1, 2)])), t)),
                           (2, ("b", "*", t, ("c", Fr(2)))),
                           (2, ("b", "+", ("b", "*", t, ("c", Fr(0))), ("c", Fr(1)))),   # replace by ones
                           (1, ("b", "+", t, ("c", Fr(1)))), (1, ("neg", t)), (1, ("b", "/", t, ("c", Fr(2))))])

    def tuple_returns(self, arg: str, defined: list, allow_none: bool = True):
        """(entry, ...) over slots: pass through, None, or rescale a slot known to be defined."""
        s = self.s
        items = []
        for i, ok in enumerate(defined):
            src_i = ("idx", ("n", arg), i)
            options = [(2, src_i)]
            if allow_none:
                options.append((1, ("none",)))
            if ok:
                options.append((5, self.rescale(src_i)))
            items.append(s.weighted(options))
        if all(it[0] == "none" for it in items) and s.coin(0.3):
            return ("none",)
        return ("tup", tuple(items))

    def module_returns(self, h: HookSpec, m: Mod, calls: list):
        s = self.s
        if h.kind == "full_backward":
            n = len(m.inputs)
            if any(not any(c.args_rg) for c in calls):
                # no input requires grad: PyTorch allows only None (or all-None) returns
                return ("tup", tuple(("none",) for _ in range(n))) if s.coin(0.5) else None
            defined = [all(c.args_rg[i] for c in calls) for i in range(n)]
            if n == 1 and m.in_shapes[0] == m.out_shape and defined[0] and s.coin(0.2):
                return ("tup", (self.rescale(("idx", ("n", "grad_output"), 0)),))
            return self.tuple_returns("grad_input", defined)
        if h.kind == "full_backward_pre":
            return s.weighted([(5, ("tup", (self.rescale(("idx", ("n", "grad_output"), 0)),))),
                               (1, ("tup", (("none",),))), (1, ("tup", (("idx", ("n", "grad_output"), 0),)))])
        # legacy: the grad_inputs of the last node of the module
        edges = {c.out.edges for c in calls if c.out.gf}
        if len(edges) != 1 or not all(c.out.known for c in calls if c.out.gf):
            return None
        return self.tuple_returns("grad_input", list(next(iter(edges))))

    def node_returns(self, kind: str, info: Info):
        s = self.s
        if kind == "pre":
            items = []
            for k in range(info.nouts):
                src_k = ("idx", ("n", "grad_outputs"), k)
                items.append(self.rescale(src_k) if k == info.nr else src_k)
            if s.coin(0.1):
                items[info.nr] = ("none",)
            return ("tup", tuple(items))
        return self.tuple_returns("grad_inputs", list(info.edges))

    def tensor_returns(self, h: HookSpec) -> None:
        s = self.s
        g = ("n", "grad")
        style = s.weighted([(4, "observe"), (5, "rescale"), (1, "does_only"), (1, "does_ret"), (1, "does_rebind")])
        if style == "rescale":
            h.returns = self.rescale(g)
        elif style == "does_only":
            h.does = [("grad", ("b", "*", g, ("c", Fr(3))))]       # rebinding a local: no effect
        elif style == "does_ret":
            h.does = [("g2", ("b", "*", g, ("c", Fr(3))))]
            h.returns = ("b", "-", ("n", "g2"), g)
        elif style == "does_rebind":                              # rebinding, then returning it: effect
            h.does = [("grad", ("b", "+", g, ("c", Fr(1)))), ("grad", ("b", "*", g, ("c", Fr(2))))]
            h.returns = g

    def module_inplace(self, h: HookSpec, calls: list) -> None:
        """A module backward hook that writes a slot it is handed in place (one every call defines)."""
        s = self.s
        if h.kind == "full_backward_pre":
            h.does = write(s, ("idx", ("n", "grad_output"), 0))
            return
        if h.kind == "full_backward":
            n = len(calls[0].args_rg) if calls else 0
            defined = [i for i in range(n) if calls and all(c.args_rg[i] for c in calls)]
            arg = "grad_input"
        else:   # legacy: the grad_inputs of the module's last node
            edges = {c.out.edges for c in calls if c.out.gf}
            if len(edges) != 1 or not all(c.out.known for c in calls if c.out.gf):
                return
            defined = [k for k, e in enumerate(next(iter(edges))) if e]
            arg = "grad_input"
        if defined:
            h.does = write(s, ("idx", ("n", arg), s.choice(defined)))

    def tuple_does(self, h: HookSpec, arg: str) -> None:
        """Module and node hooks: rebind the tuple argument in ``does:`` (no effect), or copy it
        and return the copy (the same values back)."""
        s = self.s
        if h.returns is None and s.coin(0.15):
            h.does = [(arg, ("none",))] if s.coin(0.5) else [("copy", ("n", arg))]
        elif h.returns is None and s.coin(0.1):
            h.does = [("copy", ("n", arg))]
            h.returns = ("n", "copy")
