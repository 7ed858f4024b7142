"""Registering and removing the file's hooks, at the moments a PyTorch user would.

A declared hook (:class:`adjoint.format.problem.Hook`) becomes one or more real registrations:

* module hooks go into the module's (or the global) hook dicts at once, and are captured by
  each module call from then on;
* tensor and node hooks wait for their tensor: a leaf's at once, an intermediate's as soon as
  the forward binds its name (after every forward pass: a new tensor gets the hook again, as
  if the user's ``register_hook`` line sat in the forward) -- or, when its tensor does not
  require grad there and a later statement of that forward makes it (``feat = f.detach()``,
  then ``feat.requires_grad_()``), right after that statement, where a user's ``register_hook``
  line must sit (before it, PyTorch refuses the registration); a node hook on a leaf on its
  ``AccumulateGrad`` once a forward pass has made it;
* a ``multi_grad`` hook once every listed tensor exists; ``saved_tensors`` hooks are active
  during the forward (or the calls of the modules in their ``scope``).

Each registration keeps its handle (the dict and the id), so ``remove``, ``removes`` and
``{remove: [...]}`` steps remove exactly what PyTorch's ``handle.remove()`` would.
"""

from __future__ import annotations

from contextlib import contextmanager

from adjoint.format.errors import ProblemError
from adjoint.engine.graph import HookDict, Tensor
from adjoint.engine.view_history import refresh, stale
from adjoint.engine.nn_module import MultiGradInner, MultiGradState, UserNodeHook, UserTensorHook
from adjoint.engine.runtime import held_by_an_edge
from adjoint.engine.runtime import TorchError
from adjoint.engine.saved_hooks import register_saved


class Registrations:
    def __init__(self, hooks: tuple, rt, model=None):
        self.hooks = hooks
        self.rt = rt
        self.model = model
        self.active: set[int] = set()                 # hook indices currently registered
        self.handles: dict[int, list] = {}            # hook index -> [(HookDict, handle id)]
        self.attached: dict[int, set] = {}            # hook index -> ids of tensors / nodes it is on
        self.times: dict[int, int] = {}               # hook index -> register steps while on (each adds one)
        self.names: dict[str, Tensor] = {}            # the latest tensor of every bound name
        self.current: dict[str, Tensor] = {}          # the names bound by the current (or last) forward
        self.retained: dict[int, tuple] = {}          # tensor id -> (Tensor, [names]) with retain_grad, in order
        self._by_target: dict | None = None           # hook target -> hook indices (see _targeting)
        self._saved: list | None = None               # saved_tensors hook indices (see _saved_tensors_hooks)
        self._group: list | None = None               # inside together(): (hook index, tensor) to attach after it
        self.waiting: dict = {}                       # statement key -> (hook index, tensor) to attach after it

    # ------------------------------------------------------------------ lifecycle
    def register(self, index: int) -> None:
        hook = self.hooks[index]
        with _naming(hook):
            again = index in self.active and _repeats(hook)
            if again:   # registered again while on: PyTorch adds another registration
                self.times[index] = self.times.get(index, 1) + 1
                self._once_more(hook)
                return
            self.active.add(index)
            self.handles.setdefault(index, [])
            self.attached.setdefault(index, set())
            if hook.on in ("module", "global"):
                self.register_module_hook(hook)
            elif hook.on == "multi_grad":
                self.try_multi_grad(hook)
            elif hook.on in ("tensor", "saved") and hook.target in self.names:
                self.bound(hook.target, self.names[hook.target])
            elif hook.on == "node" and hook.target in self.names:
                t = self.names[hook.target]
                if grad_fn(self.rt, t) is not None:
                    self.bound(hook.target, t)
                else:
                    self.attach_accumulator(hook, t)

    def _once_more(self, hook) -> None:
        """One more registration of a hook that is on: on the tensor (or node) it is on now, or on
        the set of a multi_grad hook; a tensor bound later gets every registration (``times``)."""
        if hook.on == "multi_grad":
            if self.attached.get(hook.index):
                self.multi_grad(hook, [self.current[n] for n in hook.tensors])
            return
        t = self.names.get(hook.target)
        if hook.on == "node" and isinstance(t, Tensor) and grad_fn(self.rt, t) is None:   # on a leaf's AccumulateGrad
            node = t.grad_accumulator
            if node is not None and id(node) in self.attached.get(hook.index, ()):
                self._on_accumulator(hook, node, 1)
            return
        if isinstance(t, Tensor) and t.id in self.attached.get(hook.index, ()):
            self.attach(hook, t)

    def remove(self, index: int) -> None:
        self.times.pop(index, None)
        self.active.discard(index)
        for hooks, hid in self.handles.get(index, []):
            hooks.remove(hid)
        self.handles[index] = []
        # off every tensor it was on: registered again (the user's register_hook line runs
        # again), it goes back on them
        self.attached[index] = set()

    def bound(self, name: str, t, aliases: tuple = (), attach: bool = True, until=None) -> None:
        """The forward bound ``name`` to ``t``: attach the active hooks that target it (once per
        tensor: a leaf bound again by the next forward keeps its hooks). ``aliases``: other
        names of the same tensor (a tied parameter, already bound): their hooks and this
        name's go on in the order the file lists them, as the user registered them.
        ``attach=False``: named only; its hooks go on when a later name of it is bound with it
        as an alias (the root's output, named ``model`` and then ``y``). ``until``: the key of a
        later statement of the forward that makes ``t`` require grad in place: if ``t`` does not
        require grad now, its hooks go on right after that statement (:meth:`statement_ran`), a
        multi_grad hook on it once they have."""
        self.names[name] = t
        self.current[name] = t
        if not isinstance(t, Tensor) or not attach:
            return
        targeting = set(self._targeting(name)).union(*(self._targeting(a) for a in aliases))
        pairs = [(index, t) for index in self.active.intersection(targeting)]
        if until is not None and not t.needs_grad:
            self.waiting.setdefault(until, []).extend(pairs)
            return
        if self._group is not None:
            self._group.extend(pairs)
            return
        self._attach(pairs)

    @contextmanager
    def together(self):
        """Names one statement binds (``a, b = h.chunk(2)``, a module's tuple output): their hooks
        go on once the statement has bound them all, in the order the file lists them -- as a user's
        ``register_hook`` lines after that line run (the order decides which of two hooks on one
        node's outputs fires first). Nested: the outermost attaches."""
        if self._group is not None:
            yield
            return
        self._group = []
        try:
            yield
        except BaseException:
            self._group = None
            raise
        group, self._group = self._group, None
        self._attach(group)

    def statement_ran(self, key) -> None:
        """The forward's statement ``key`` (a ``NAME.requires_grad_()``) ran: the hooks waiting for
        it go on, in the file's order."""
        pairs = self.waiting.pop(key, None)
        if pairs is not None:
            self._attach(pairs)

    def _waits(self, t: Tensor) -> bool:
        """Whether ``t``'s hooks wait for a statement making it require grad."""
        return any(w is t for pairs in self.waiting.values() for _, w in pairs)

    def _attach(self, pairs: list) -> None:
        """Attach each (hook index, tensor), in the file's order of the hooks (stable for one hook's tensors)."""
        for index, t in sorted(pairs, key=lambda pair: pair[0]):
            hook = self.hooks[index]
            if hook.on == "multi_grad":
                self.try_multi_grad(hook)
                continue
            if t.id in self.attached.get(index, ()):
                continue
            if hook.on == "saved":   # t.grad_fn._raw_saved_SLOT.register_hooks(pack, unpack), once per tensor
                self.attached[index].add(t.id)
                register_saved(self.rt, hook, grad_fn(self.rt, t))
                continue
            if hook.on == "tensor" or (hook.on == "node" and grad_fn(self.rt, t) is not None):
                self.attached[index].add(t.id)
                for _ in range(self.times.get(index, 1)):   # (more than 1 only for a hook that _repeats)
                    self.attach(hook, t)

    def _targeting(self, name: str) -> list[int]:
        """Indices of the hooks whose target is ``name`` (a multi-grad hook's: one of its tensors),
        from an index made once: a deep model binds thousands of names, each of which would
        otherwise scan every hook."""
        if self._by_target is None:
            self._by_target = {}
            for index, hook in enumerate(self.hooks):
                names = hook.tensors if hook.on == "multi_grad" else (getattr(hook, "target", None),)
                for target in dict.fromkeys(names):
                    self._by_target.setdefault(target, []).append(index)
        return self._by_target.get(name, [])

    def _saved_tensors_hooks(self) -> list[int]:
        """Indices of the saved_tensors hooks, active or not (usually none: a module call then
        does not scan every hook of the file)."""
        if self._saved is None:
            self._saved = [i for i, h in enumerate(self.hooks)
                           if h.on in ("saved_tensors", "disable_saved_tensors_hooks", "save_on_cpu")]
        return self._saved

    def new_forward(self) -> None:
        """A forward pass begins: names bound by earlier passes are not its tensors (hooks left
        waiting by a pass that raised before their statement never go on)."""
        self.current = {}
        self.waiting = {}

    def forward_starts(self) -> list:
        """A forward pass starts: the saved-tensor hooks active over the whole forward."""
        return [self.hooks[i] for i in self._saved_tensors_hooks()
                if i in self.active and self.hooks[i].scope is None and self._now(self.hooks[i])]

    def saved_hooks_for(self, path: str) -> list:
        """The saved-tensor hooks whose scope names the module ``path``."""
        return [self.hooks[i] for i in self._saved_tensors_hooks()
                if i in self.active and self.hooks[i].scope is not None and path in self.hooks[i].scope
                and self._now(self.hooks[i])]

    def _now(self, hook) -> bool:
        """A ``saved_tensors`` block with ``during:`` is around the steps it lists only."""
        during = getattr(hook, "during", None)
        return during is None or getattr(self, "step", None) in during

    def saved_hooks_during_backward(self, step: int) -> list:
        """The saved-tensor blocks (``during:``) around backward step ``step``, outermost first."""
        return [self.hooks[i] for i in self._saved_tensors_hooks()
                if i in self.active and step in (getattr(self.hooks[i], "during", None) or ())]

    def forward_ends(self, names: dict) -> None:
        """A forward pass ended: node hooks on leaves go on the AccumulateGrad the pass made;
        multi_grad hooks whose tensors now all exist are registered. A node hook that went on the
        tensor's grad_fn when the forward bound it stays there: a ``detach_()`` after that (and
        ``requires_grad_()``, which makes it a leaf) moves no node hook, as PyTorch's live on the
        node object they were registered on."""
        for index in sorted(self.active):
            hook = self.hooks[index]
            t = names.get(hook.target) if hook.on == "node" else None
            unattached = t is not None and t.id not in self.attached.get(index, ())
            if unattached and t.grad_fn is None:
                self.attach_accumulator(hook, t)
            elif unattached and isinstance(t, Tensor) and not t.is_view:
                # bound without a grad_fn and not requiring grad, given one since (a module's output
                # inside a reentrant checkpoint's no-grad forward, which CheckpointFunction's apply
                # then gives its node): the script's t.grad_fn.register_prehook(...) ran when the
                # name was bound, on None
                method = "register_prehook" if hook.kind == "pre" else "register_hook"
                raise TorchError("AttributeError", f"'NoneType' object has no attribute '{method}'", "register")
            elif hook.on == "multi_grad":
                self.try_multi_grad(hook)

    def check_targets(self, names: dict) -> None:
        """Every tensor or node hook must name a tensor of the problem."""
        for index in sorted(self.active):
            hook = self.hooks[index]
            if hook.on in ("tensor", "node", "saved") and hook.target not in names:
                raise ProblemError(hook.loc, f"hook target '{hook.target}' is not a tensor of this problem"
                                             f"{_suggest(hook.target, names)}; tensors: {', '.join(names)}")

    # ------------------------------------------------------------------ module hooks
    def register_module_hook(self, hook) -> None:
        m = self.model
        if hook.on == "global":
            state = m.global_hooks
        else:
            if hook.target not in m.hooks:
                paths = list(m.hooks)
                raise ProblemError(hook.loc, f"hook target module '{hook.target}' does not exist"
                                             f"{_suggest(hook.target, paths)}; modules: {', '.join(paths)}")
            state = m.hooks[hook.target]
        if hook.kind in ("full_backward", "backward"):
            full = hook.kind == "full_backward"
            if state.is_full is not None and state.is_full != full:
                where = "as a global Module hook" if hook.on == "global" else "on a single Module"
                raise TorchError("RuntimeError", f"Cannot use both regular backward hooks and full backward hooks "
                                                 f"{where}. Please use only one of them.", "register")
            state.is_full = full
        hooks = state.dict_for(hook.kind)
        hid = self.rt.add_hook(hooks, _ModuleEntry(hook), hook.prepend)
        if hook.with_kwargs:
            state.with_kwargs.add(hid)
        if hook.always_call:
            state.always_called.add(hid)
        self.handles[hook.index].append((hooks, hid))
        # RemovableHandle's extra_dict: removing a module's forward(-pre) hook also drops its
        # with_kwargs (and always_call) mark; a global forward hook's with_kwargs mark stays
        extras = [state.always_called] + ([state.with_kwargs] if hook.on != "global" else [])
        if hook.kind in ("forward", "forward_pre"):
            self.handles[hook.index].append((_Marks(extras), hid))

    # ------------------------------------------------------------------ tensor and node hooks
    def attach(self, hook, t: Tensor) -> None:
        with _naming(hook):
            index = hook.index
            if hook.on == "tensor":
                if getattr(hook, "optimizer", None) is not None:   # optims[p] = torch.optim.Adam([p]), then register
                    from adjoint.engine.adam import make_hook_optimizer
                    make_hook_optimizer(self.rt, hook, t, grad_fn(self.rt, t) is not None and t.id not in self.retained)
                if not t.needs_grad:  # a view also requires grad when its base does (DifferentiableViewMeta)
                    if hook.kind == "retain_grad":
                        raise TorchError("RuntimeError", "can't retain_grad on Tensor that has requires_grad=False",
                                         "register")
                    raise TorchError("RuntimeError", "cannot register a hook on a tensor that doesn't require gradient",
                                     "register")
                if hook.kind == "retain_grad":
                    if not t.is_leaf:  # retain_grad() on a leaf is a no-op: its .grad is kept anyway (and on
                        # a view that has no grad_fn yet: is_leaf reads grad_fn_ as it is)
                        retain_grad(t, self.rt)
                        self.retained.setdefault(t.id, (t, []))[1].append(hook.target)
                    return
                if hook.kind == "post_accumulate_grad":
                    if grad_fn(self.rt, t) is not None:
                        raise TorchError("RuntimeError", "post accumulate grad hooks cannot be registered on non-leaf "
                                                         "tensors", "register")
                    if t.post_accumulate_hooks is None:
                        t.post_accumulate_hooks = HookDict()
                    hooks = t.post_accumulate_hooks
                else:
                    check_register_hook_crash(hook, hook.target, t)
                    check_first_hook_while_iterating(self.rt, hook, t)
                    hooks = tensor_hook_dict(t, self.rt)
                self.handles[index].append((hooks, self.rt.add_hook(hooks, UserTensorHook(hook))))
                return
            node = grad_fn(self.rt, t)
            if node is None:
                raise ProblemError(hook.loc, f"'{hook.target}' has no grad_fn (it is a leaf or does not require grad), so "
                                             "there is no autograd node to hook; hook the tensor instead (tensor:)")
            if getattr(hook, "next", ()):
                from adjoint.engine.next_functions import walk
                node = walk(node, hook)
            hooks = node.pre_hooks if hook.kind == "pre" else node.post_hooks
            self.handles[index].append((hooks, self.rt.add_hook(hooks, UserNodeHook(hook))))

    def try_multi_grad(self, hook) -> None:
        """register_multi_grad_hook as soon as every listed tensor exists in the current forward
        (once per set of tensors): a name the pass has not bound yet still means last pass's
        tensor, which is not what the user's code of this pass holds."""
        if not all(isinstance(self.current.get(n), Tensor) for n in hook.tensors):
            return
        tensors = [self.current[n] for n in hook.tensors]
        if self.waiting and any(self._waits(t) for t in tensors):   # registered after that statement
            return
        ids = {t.id for t in tensors}
        if self.attached[hook.index] != ids:
            self.attached[hook.index] = ids
            for _ in range(self.times.get(hook.index, 1)):
                self.multi_grad(hook, tensors)

    def attach_accumulator(self, hook, t: Tensor) -> None:
        """A node hook on a leaf: on its AccumulateGrad, if a graph holds one now (else it is
        put on an accumulator nothing holds, and lost, as in PyTorch)."""
        if not t.requires_grad:   # t.grad_fn is None: the script's t.grad_fn.register_hook(...) meets Python's error
            method = "register_prehook" if hook.kind == "pre" else "register_hook"
            raise TorchError("AttributeError", f"'NoneType' object has no attribute '{method}'", "register")
        node = t.grad_accumulator
        # found as a graph reaches it: one only a multi_grad hook or a running backward holds is not
        if node is None or id(node) in self.attached[hook.index] or not held_by_an_edge(node, self.rt.nodes):
            return
        self.attached[hook.index].add(id(node))
        self._on_accumulator(hook, node, self.times.get(hook.index, 1))   # once per registration

    def _on_accumulator(self, hook, node, times: int) -> None:
        """The node hook on a leaf's AccumulateGrad ``node`` (or the node ``next:`` walks to), ``times`` times."""
        if getattr(hook, "next", ()):
            from adjoint.engine.next_functions import walk
            node = walk(node, hook)
        hooks = node.pre_hooks if hook.kind == "pre" else node.post_hooks
        for _ in range(times):
            self.handles[hook.index].append((hooks, self.rt.add_hook(hooks, UserNodeHook(hook))))

    def multi_grad(self, hook, tensors: list) -> None:
        """register_multi_grad_hook. Mode all first reads every tensor's grad_fn (or grad
        accumulator: _get_grad_fn_or_grad_acc; an in-place op on a tensor later does not move it)
        and hooks every tensor; mode any reads no grad_fn and hooks only the tensors that
        require grad (register_hook reads grad_fn only when it makes the tensor's hook dict)."""
        if hook.mode not in ("all", "any"):   # register_multi_grad_hook checks it first
            raise TorchError("ValueError", f"Expects mode to be one of ('all', 'any') but got {hook.mode}", "register")
        nodes = None
        if hook.mode == "all":
            nodes = [grad_fn(self.rt, t) if grad_fn(self.rt, t) is not None else
                     (self.rt.grad_accumulator(t) if t.requires_grad and not t.edgeless else None) for t in tensors]
            for name, t in zip(hook.tensors, tensors):
                if not t.needs_grad:   # mode any skips such a tensor
                    raise TorchError("AssertionError", "Expected gradient function to be set", "register")
        if nodes is not None:   # the inner hooks' closures hold these grad_fns (alive while the hooks are)
            self.rt.captured_nodes.extend(n for n in nodes if n is not None)
        state = MultiGradState(hook, tensors, nodes=nodes)
        for i, t in enumerate(tensors):
            if hook.mode == "any":
                if not t.needs_grad:   # Tensor.requires_grad: a view's base counts
                    continue
                check_register_hook_crash(hook, hook.tensors[i], t)
            hooks = tensor_hook_dict(t, self.rt)
            self.handles[hook.index].append((hooks, self.rt.add_hook(hooks, MultiGradInner(state, i))))


class _ModuleEntry:
    """What a module hook dict holds: the declared hook."""

    __slots__ = ("hook",)

    def __init__(self, hook):
        self.hook = hook


def check_register_hook_crash(hook, name: str, t: Tensor) -> None:
    """Tensor.register_hook on a stale view without a hook dict crashes PyTorch 2.13 -- unless
    the view may not be regenerated (a custom Function's or a multi-output op's, or one made
    under no_grad): reading its grad_fn then raises PyTorch's RuntimeError instead."""
    if t.backward_hooks is None and stale(t) and not (t.creation and t.creation[0] in ("custom", "multi", "no_grad", "inference")):
        raise ProblemError(hook.loc, f"PyTorch 2.13 crashes (segmentation fault) registering this hook: "
                                     f"'{name}' is a view whose base was written in place after it "
                                     "was made, so reading its grad_fn makes a new one, and "
                                     "Tensor.register_hook reads it just after creating the hook dict; "
                                     "register the hook before the in-place write, or use the view in an "
                                     "op (or read its grad_fn) first")


def check_first_hook_while_iterating(rt, hook, t: Tensor) -> None:
    """A hook of another output of a node registering (``registers:``) a tensor's first hook
    while the engine runs that node's tensor pre-hooks: ``_register_hook_dict`` pushes onto the
    vector ``call_tensor_pre_hooks``' range-for is iterating (it may reallocate under it:
    undefined behaviour in PyTorch), so no answer is exact."""
    if t.backward_hooks is not None or not rt.tensor_pre_hooks_of:
        return
    node = grad_fn(rt, t)
    if node is not None and any(n is node for n in rt.tensor_pre_hooks_of):
        raise ProblemError(hook.loc, f"'{hook.target}' gets its first hook while the engine runs the tensor hooks of "
                                     "its own grad_fn (a hook on another output of that node registers it): PyTorch "
                                     "appends to the list it is iterating, which is undefined behaviour; register a "
                                     "hook on it before the backward (one that observes is enough)")


def grad_fn(rt, t: Tensor):
    """``t.grad_fn`` as Python reads it: a view whose base was written in place since its grad_fn
    was made gets a new one now (VariableHooks::grad_fn), and one made while its base did not
    require grad gets its first."""
    if t.is_view:
        refresh(rt, t)
    return t.grad_fn


def tensor_hook_dict(t: Tensor, rt) -> HookDict:
    """``Tensor.register_hook``: the tensor's ``_backward_hooks`` dict, attached to its grad_fn
    (as one tensor pre-hook for its output_nr) the first time (reading ``t.grad_fn``); a leaf
    keeps it on the tensor, where its AccumulateGrad finds it."""
    if t.backward_hooks is None:
        node = grad_fn(rt, t)  # before the dict is made: a new grad_fn starts without one
        t.backward_hooks = HookDict()
        if node is not None:
            node.tensor_pre_hooks.append((t.output_nr, t.backward_hooks))
    return t.backward_hooks


def retain_grad(t: Tensor, rt) -> None:
    """``Tensor.retain_grad``: a no-op on a leaf (is_leaf reads grad_fn_ as it is: a view that
    has no grad_fn yet counts as one); else a retains_grad hook on its grad_fn (``grad_fn()``)."""
    if t.is_leaf or t.retains_grad:
        return
    t.retains_grad = True
    grad_fn(rt, t).retains_grad_hooks[t.output_nr] = t


def _suggest(word: str, options) -> str:
    import difflib   # only when a name is wrong: not on every start

    close = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


class _Marks:
    """The mark sets a RemovableHandle's ``extra_dict`` clears when the hook is removed."""

    def __init__(self, marks: list):
        self.marks = marks

    def remove(self, hid: int) -> None:
        for marks in self.marks:
            marks.discard(hid)


@contextmanager
def _naming(hook):
    """PyTorch refusing a registration names nothing; the answer's report names the hook whose
    registration it was (``TorchError.hook_label``, for ``RunError.hook``)."""
    try:
        yield
    except TorchError as exc:
        if exc.cause == "register" and getattr(exc, "hook_label", None) is None:
            exc.hook_label = hook.label
        raise


def _repeats(hook) -> bool:
    """A hook whose second registration is a second hook: a tensor hook (not retain_grad, which
    PyTorch keeps once), a node hook (on a leaf's AccumulateGrad too), a multi_grad hook."""
    return hook.on in ("tensor", "node", "multi_grad") and hook.kind != "retain_grad"
