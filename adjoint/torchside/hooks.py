"""The file's hooks, registered on real torch objects at the moments a PyTorch user would.

:class:`Hooks` turns each declared :class:`adjoint.format.problem.Hook` into real registrations and
keeps every handle, so ``remove``, ``removes`` and ``{remove: [...]}`` steps call exactly the
``handle.remove()`` a user would:

* module hooks: ``module.register_*_hook`` (``prepend``, ``with_kwargs``, ``always_call`` as
  declared), at once; global ones through ``torch.nn.modules.module.register_module_*_hook``
  (removed again when the run ends, whatever happens, and torch's memory of whether global
  backward hooks are legacy or full, which outlives their handles, is reset for the run and
  restored after it);
* tensor hooks (``register_hook``, ``retain_grad``, ``register_post_accumulate_grad_hook``)
  and node hooks on a non-leaf (``grad_fn.register_prehook`` / ``register_hook``) as soon as
  the forward binds the target's name (a later forward's new tensor gets them again; a leaf
  bound again keeps the ones it has), or, on a tensor that does not require grad there, right
  after the later statement of that forward that makes it (``feat.requires_grad_()``);
* node hooks on a leaf: on its ``AccumulateGrad``, found by walking the graphs the run built
  (after each forward, or at once when registered later); none found: there is none to hook;
* ``multi_grad``: ``torch.autograd.graph.register_multi_grad_hook`` as soon as every listed
  tensor exists in the current forward (the contract's rule);
* ``saved_tensors``: a ``torch.autograd.graph.saved_tensors_hooks`` context, entered by the
  run around the whole forward (loss included) or around the calls of the scoped modules.

Every call of a user hook goes through :meth:`Hooks.fire`: the call is logged (arguments
snapshotted) before the body runs, then ``removes`` are removed, then ``raises`` raises
``RuntimeError(TEXT)`` (the log entry says ``"raised": true``), else the body (``does``,
then ``returns``) runs on the hook's real arguments and its value is handed back to PyTorch.
"""

from __future__ import annotations

import contextlib

import torch
from torch.nn.modules import module as nn_module

from adjoint.format.errors import ProblemError
from adjoint.format.problem import Hook
from adjoint.torchside import graphs
from adjoint.torchside.program import EnvScope
from adjoint.torchside.values import snap
from adjoint.format.raising import raises_now
from adjoint.torchside.saved_hooks import StashScope, disabled, register_saved


class HookRaised(Exception):
    """The base of the custom exception classes a file's ``raises: {type: NAME}`` names."""


def exception_class(name: str) -> type:
    """``class NAME(Exception)``, as the user's script defines it (here under :class:`HookRaised`,
    so the run knows it as the file's own error)."""
    return type(name, (HookRaised,), {})

GLOBAL_REGISTER = {
    "forward_pre": nn_module.register_module_forward_pre_hook,
    "forward": nn_module.register_module_forward_hook,
    "full_backward_pre": nn_module.register_module_full_backward_pre_hook,
    "full_backward": nn_module.register_module_full_backward_hook,
    "backward": nn_module.register_module_backward_hook,
}


class Hooks:
    def __init__(self, run, hooks: tuple[Hook, ...], forward_only: bool = False):
        self.run = run
        self.hooks = hooks
        self.forward_only = forward_only       # finite differences: only forward-phase module hooks
        self.active: set[int] = set()
        self.handles: dict[int, list] = {}     # hook index -> RemovableHandles
        self.attached: dict[int, set] = {}     # hook index -> ids of the tensors / nodes it is on
        self.times: dict[int, int] = {}        # hook index -> register steps while on (each adds one)
        self.names: dict[str, object] = {}     # the latest value of every bound name
        self.retained: list[tuple[str, torch.Tensor]] = []   # (name, tensor) with retain_grad, in order
        self.fired: dict[tuple, int] = {}      # (node seq, module, hook) -> times fired (module calls sharing a node)
        self.group: list | None = None         # inside together(): (hook index, tensor) to attach after it
        self.waiting: dict = {}                # statement key -> (hook index, tensor) to attach after it
        # torch remembers whether the global backward hooks are legacy or full even after their
        # handles are removed; a run starts as a fresh script does (neither), and puts it back after
        self.global_mode_before = nn_module._global_is_full_backward_hook
        nn_module._global_is_full_backward_hook = None

    # ------------------------------------------------------------------ lifecycle
    def wanted(self, hook: Hook) -> bool:
        if not self.forward_only:
            return True
        return hook.on in ("module", "global") and hook.kind in ("forward", "forward_pre")

    def register(self, index: int) -> None:
        hook = self.hooks[index]
        if not self.wanted(hook):
            return
        if index in self.active and _repeats(hook):   # registered again while on: one more registration
            self.times[index] = self.times.get(index, 1) + 1
            self._once_more(hook)
            return
        self.active.add(index)
        self.handles.setdefault(index, [])
        self.attached.setdefault(index, set())
        if hook.on in ("module", "global"):
            self.register_module_hook(hook)
        elif hook.on in ("tensor", "saved") and hook.target in self.names:
            self.bound(hook.target, self.names[hook.target])
        elif hook.on == "node" and hook.target in self.names:
            t = self.names[hook.target]
            if isinstance(t, torch.Tensor) and t.grad_fn is not None:
                self.bound(hook.target, t)
            else:
                self.attach_accumulator(hook, t)
        elif hook.on == "multi_grad":
            self.try_multi_grad(hook)

    def _once_more(self, hook) -> None:
        """One more registration of a hook that is on (the tensor or node it is on now; a multi_grad
        hook's set); a tensor bound later gets every registration."""
        if hook.on == "multi_grad":
            if self.attached.get(hook.index):
                current = self.run.current_names()
                self._register_multi_grad(hook, [current[n] for n in hook.tensors])
            return
        t = self.names.get(hook.target)
        if hook.on == "node" and isinstance(t, torch.Tensor) and t.grad_fn is None:   # on a leaf's AccumulateGrad
            node = self.run.nodes.accumulator(t) if t.requires_grad else None
            if node is not None and id(node) in self.attached.get(hook.index, ()):
                self.attach_node(hook, node)
            return
        if isinstance(t, torch.Tensor) and id(t) in self.attached.get(hook.index, ()):
            self.attach(hook, t)

    def remove(self, index: int) -> None:
        """``handle.remove()`` on every registration of the hook; registered again later, it goes
        back on the tensors it was on (a user's ``register_hook`` line run again)."""
        self.times.pop(index, None)
        self.active.discard(index)
        for handle in self.handles.get(index, []):
            handle.remove()
        self.handles[index] = []
        self.attached[index] = set()

    def remove_all(self) -> None:
        """The end of the run: every handle goes (global module hooks would outlive it)."""
        for index in list(self.handles):
            self.remove(index)
        nn_module._global_is_full_backward_hook = self.global_mode_before

    def bound(self, name: str, value, aliases: tuple = (), attach: bool = True, until=None) -> None:
        """The forward bound ``name``: attach the active hooks that target it (once per tensor).
        ``aliases``: the tensor's other names (a tied Parameter): their hooks go on with this
        name's, in the order the file lists them, as a user's register_hook lines run.
        ``attach=False``: named only (the root's output, named ``model`` and then ``y``: their
        hooks go on together when ``y`` is bound with ``model`` as its alias). ``until``: the key of
        a later statement of the forward making ``value`` require grad in place: if it does not
        now, a user registers its hooks after that statement (:meth:`statement_ran`)."""
        self.names[name] = value
        if not isinstance(value, torch.Tensor) or not attach:
            return
        names = (name,) + tuple(aliases)
        pairs = [(index, value) for index in self.active
                 if (self.hooks[index].on == "multi_grad" and any(n in self.hooks[index].tensors for n in names))
                 or getattr(self.hooks[index], "target", None) in names]
        if until is not None and not value.requires_grad:
            self.waiting.setdefault(until, []).extend(pairs)
            return
        if self.group is not None:
            self.group.extend(pairs)
            return
        self.attach_pairs(pairs)

    @contextlib.contextmanager
    def together(self):
        """Names one statement binds (``a, b = h.chunk(2)``, a module's tuple output): a user's
        ``register_hook`` lines come after that statement, in the order the file lists the hooks."""
        if self.group is not None:
            yield
            return
        self.group = []
        try:
            yield
        except BaseException:
            self.group = None
            raise
        group, self.group = self.group, None
        self.attach_pairs(group)

    def statement_ran(self, key) -> None:
        """The forward's statement ``key`` (a ``NAME.requires_grad_()``) ran: the hooks waiting for it go on."""
        pairs = self.waiting.pop(key, None)
        if pairs is not None:
            self.attach_pairs(pairs)

    def new_forward(self) -> None:
        """A forward pass begins: hooks a pass that raised left waiting never go on."""
        self.waiting = {}

    def attach_pairs(self, pairs: list) -> None:
        for index, value in sorted(pairs, key=lambda pair: pair[0]):
            hook = self.hooks[index]
            if hook.on == "multi_grad":
                self.try_multi_grad(hook)
                continue
            if id(value) in self.attached[index]:
                continue
            if hook.on == "saved":   # t.grad_fn._raw_saved_SLOT.register_hooks(pack, unpack), once per tensor
                self.attached[index].add(id(value))
                register_saved(self, hook, value)
                continue
            if hook.on == "tensor" or (hook.on == "node" and value.grad_fn is not None):
                self.attached[index].add(id(value))
                for _ in range(self.times.get(index, 1)):   # (more than 1 only for a hook that _repeats)
                    self.attach(hook, value)

    def forward_ends(self) -> None:
        """Node hooks on leaves go on the AccumulateGrad the graphs now hold."""
        for index in sorted(self.active):
            hook = self.hooks[index]
            t = self.names.get(hook.target)
            # a view is never such a leaf, and reading its grad_fn may raise (a custom-Function
            # view whose base was written since): a user's script would not read it here
            # (one its grad_fn got when the forward bound it stays there: a later detach_() moves no node hook)
            if hook.on == "node" and isinstance(t, torch.Tensor) and id(t) not in self.attached.get(index, ()) and (
                    not t.requires_grad or (t._base is None and t.grad_fn is None)):
                self.attach_accumulator(hook, t)
            elif hook.on == "node" and isinstance(t, torch.Tensor) and id(t) not in self.attached.get(index, ()) \
                    and t._base is None and t.grad_fn is not None:
                # bound without a grad_fn and not requiring grad, given one since (a module's output inside
                # a reentrant checkpoint's no-grad forward): the script's registration ran when it was bound
                getattr(None, "register_prehook" if hook.kind == "pre" else "register_hook")   # AttributeError

    def any_saved_tensors(self) -> bool:
        return any(self.hooks[i].on == "saved_tensors" for i in self.active)

    def saved_hooks(self, scope_of: str | None) -> list[Hook]:
        """The active saved_tensors hooks over the whole forward (``scope_of`` None) or scoped to a module."""
        out = []
        for index in sorted(self.active):
            hook = self.hooks[index]
            if hook.on not in ("saved_tensors", "disable_saved_tensors_hooks", "save_on_cpu"):
                continue
            if getattr(hook, "during", None) is not None and getattr(self, "step", None) not in hook.during:
                continue   # a block around other steps only
            if (scope_of is None and hook.scope is None) or (scope_of is not None and hook.scope is not None
                                                             and scope_of in hook.scope):
                out.append(hook)
        return out

    # ------------------------------------------------------------------ module hooks
    def register_module_hook(self, hook: Hook) -> None:
        kind = hook.kind
        fire = self.fire

        if kind == "forward_pre" and hook.with_kwargs:
            def fn(module, args, kwargs):
                return fire(hook, {"input": args, "kwargs": kwargs}, module=module)
        elif kind == "forward_pre":
            def fn(module, args):
                return fire(hook, {"input": args}, module=module)
        elif kind == "forward" and hook.with_kwargs:
            def fn(module, args, kwargs, output):
                return fire(hook, {"input": args, "kwargs": kwargs, "output": output}, module=module)
        elif kind == "forward":
            def fn(module, args, output):
                return fire(hook, {"input": args, "output": output}, module=module)
        elif kind == "full_backward_pre":
            def fn(module, grad_output):
                return fire(hook, {"grad_output": grad_output}, module=module)
        else:   # full_backward, backward (legacy)
            def fn(module, grad_input, grad_output):
                return fire(hook, {"grad_input": grad_input, "grad_output": grad_output}, module=module)

        # Python's TypeError for a call that misses an argument names the function (a with_kwargs
        # hook removed during the call that runs it): adjoint names it ``hook``
        fn.__name__ = fn.__qualname__ = "hook"
        if hook.on == "global":
            extra = {}
            if kind == "forward":
                extra = {"with_kwargs": hook.with_kwargs, "always_call": hook.always_call}
            handle = GLOBAL_REGISTER[kind](fn, **extra)
        else:
            m = self.run.modules[hook.target]
            if kind == "forward_pre":
                handle = m.register_forward_pre_hook(fn, prepend=hook.prepend, with_kwargs=hook.with_kwargs)
            elif kind == "forward":
                handle = m.register_forward_hook(fn, prepend=hook.prepend, with_kwargs=hook.with_kwargs,
                                                 always_call=hook.always_call)
            elif kind == "full_backward_pre":
                handle = m.register_full_backward_pre_hook(fn, prepend=hook.prepend)
            elif kind == "full_backward":
                handle = m.register_full_backward_hook(fn, prepend=hook.prepend)
            else:
                handle = m.register_backward_hook(fn)
        self.handles[hook.index].append(handle)

    # ------------------------------------------------------------------ tensor and node hooks
    def attach(self, hook: Hook, t: torch.Tensor) -> None:
        if hook.on == "tensor":
            if hook.kind == "retain_grad":
                t.retain_grad()
                # took effect (not a leaf's no-op); unlike t.is_leaf, reading retains_grad does not make
                # a view's grad_fn, which would change what a later in-place op on it does
                if t.retains_grad:
                    self.retained.append((hook.target, t))
                return
            if hook.kind == "post_accumulate_grad":
                extra = {}
                if getattr(hook, "optimizer", None) is not None:   # optims[p] = torch.optim.Adam([p]), then the hook
                    from adjoint.torchside.optimizers import make_optimizer
                    extra["optim"] = make_optimizer(hook.optimizer, [t])
                handle = t.register_post_accumulate_grad_hook(
                    lambda tensor: self.fire(hook, {"tensor": tensor.grad}, env={"tensor": tensor, **extra}))
            else:
                def fn(grad):   # named 'hook' below: PyTorch's messages name the function
                    return self.fire(hook, {"grad": grad})
                fn.__name__ = fn.__qualname__ = "hook"
                handle = t.register_hook(fn)
            self.handles[hook.index].append(handle)
            return
        self.attach_node(hook, t.grad_fn)

    def attach_node(self, hook: Hook, node) -> None:
        for i in getattr(hook, "next", ()):   # next: [i, ...]: grad_fn.next_functions[i][0]...
            node = node.next_functions[i][0]
        if hook.kind == "pre":
            def fn(grad_outputs):
                return self.fire(hook, {"grad_outputs": grad_outputs})
            fn.__name__ = fn.__qualname__ = "hook"   # PyTorch's messages name the function
            handle = node.register_prehook(fn)
        else:
            def fn(grad_inputs, grad_outputs):
                return self.fire(hook, {"grad_inputs": grad_inputs, "grad_outputs": grad_outputs})
            fn.__name__ = fn.__qualname__ = "hook"
            handle = node.register_hook(fn)
        self.handles[hook.index].append(handle)

    def attach_accumulator(self, hook: Hook, leaf) -> None:
        """A node hook on a leaf: on its AccumulateGrad if a graph holds one (else it would be put
        on an accumulator nothing holds, and lost: there is nothing to do)."""
        if not isinstance(leaf, torch.Tensor):
            return
        if not leaf.requires_grad:   # no grad_fn, no AccumulateGrad: the script's t.grad_fn.register_hook(...)
            getattr(leaf.grad_fn, "register_prehook" if hook.kind == "pre" else "register_hook")   # AttributeError
        node = self.run.nodes.accumulator(leaf)
        if node is None or id(node) in self.attached[hook.index]:
            return
        self.attached[hook.index].add(id(node))
        for _ in range(self.times.get(hook.index, 1)):   # once per registration
            self.attach_node(hook, node)

    def try_multi_grad(self, hook: Hook) -> None:
        """Register a multi_grad hook once every listed tensor exists in the current forward."""
        current = self.run.current_names()
        if not all(isinstance(current.get(n), torch.Tensor) for n in hook.tensors):
            return
        tensors = [current[n] for n in hook.tensors]
        if any(w is t for pairs in self.waiting.values() for _, w in pairs for t in tensors):
            return   # one of them waits for the statement making it require grad
        ids = {id(t) for t in tensors}
        if self.attached[hook.index] == ids:
            return
        self.attached[hook.index] = ids
        for _ in range(self.times.get(hook.index, 1)):
            self._register_multi_grad(hook, tensors)

    def _register_multi_grad(self, hook: Hook, tensors: list) -> None:
        if hook.mode == "all":
            def fn(grads):
                return self.fire(hook, {"grads": tuple(grads)})
        else:
            def fn(grad):
                return self.fire(hook, {"grad": grad})
        handle = torch.autograd.graph.register_multi_grad_hook(tensors, fn, mode=hook.mode)
        self.handles[hook.index].append(handle)

    # ------------------------------------------------------------------ saved tensors
    @contextlib.contextmanager
    def saved_tensors(self, hook: Hook):
        """``with torch.autograd.graph.saved_tensors_hooks(pack, unpack):`` for one declared hook
        (``disable_saved_tensors_hooks(MESSAGE)`` for such an entry)."""
        if hook.on == "disable_saved_tensors_hooks":
            with disabled(hook):
                yield
            return
        if hook.on == "save_on_cpu":
            with torch.autograd.graph.save_on_cpu(pin_memory=hook.pin_memory):
                yield
            return
        def pack(x):   # the node being built: read from the run's records (savednodes), else the newest one
            seq = graphs.next_sequence_nr() - 1
            where = {"_seq": seq}
            if torch._C._current_graph_task_id() != -1:   # an op a create_graph backward records
                where["_in_backward"] = True
            return self.fire(hook, {"x": x}, kind="pack", body=hook.pack, where=where)

        def unpack(x):  # the node whose saved tensor it is: from the records, else the engine's current node
            node = graphs.current_node()
            where = {"_seq": graphs.sequence_nr(node) if node is not None else None,
                     "_node": node.name() if node is not None else None}
            return self.fire(hook, {"x": x}, kind="unpack", body=hook.unpack, where=where)

        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            yield

    # ------------------------------------------------------------------ firing
    def fire(self, hook: Hook, args: dict, *, env: dict | None = None, module=None, kind: str | None = None,
             body=None, where: dict | None = None):
        """Log one call of ``hook`` with ``args``, then run it (see the module docstring)."""
        run = self.run
        record = {"hook": hook.index, "label": hook.label, "kind": kind or hook.kind, "target": hook.target,
                  "args": {name: snap(v, run.dtype) for name, v in args.items()}, "returned": None}
        if hook.on == "global":
            record["global"] = True
        if module is not None:
            record.update(self.module_call(hook, module))
            if hook.on == "global":
                record["target"] = record["_label"]
        if where:
            record.update(where)
        if run.replay is not None:
            record["recomputed"] = True
        if run.reentrant:
            record["reentrant"] = run.reentrant
        run.log.append(record)
        if kind in ("pack", "unpack"):
            run.saved_nodes.mark(len(run.log) - 1)
        for index in hook.removes:
            self.remove(index)
        for index in hook.registers:   # h = t.register_hook(fn) (or retain_grad, ...) in its body
            self.register(index)
        if raises_now(hook, record["kind"]):
            record["raised"] = True
            raise (RuntimeError if hook.raises_type == "RuntimeError" else exception_class(hook.raises_type))(hook.raises)
        scope = EnvScope(dict(env if env is not None else args), f"the {record['kind']} hook '{hook.label}'", run) \
            if kind not in ("pack", "unpack") else \
            StashScope(dict(args), f"the {kind} hook '{hook.label}'", kind,
                       self.__dict__.setdefault("stashes", {}).setdefault(hook.index, []), run)
        # in the backward, a value the body makes is not kept alive by the run (a plain script keeps
        # none): an extra reference to the gradient would change what AccumulateGrad steals
        program = run.program(scope) if graphs.current_node() is None else run.backward_program(scope)
        # every leaf: the body may write those it is handed and those it names (a parameter, an input)
        leaves = [(name, t, t._version) for name, t in run.leaves.items()]
        try:
            if kind in ("pack", "unpack"):
                returned = program.eval(body)
            else:
                for stmt in hook.does:
                    program.execute(stmt)
                returned = program.eval(hook.returns) if hook.returns is not None else None
        except ProblemError:
            raise
        except Exception:
            record["raised"] = True   # its body raised: the error propagates as PyTorch lets it
            raise
        # a leaf written through ``.data`` keeps its _version: the alias's own counter moved
        written_data = [a for a in program.data_aliases if a._version > 0]
        for name, t, version in leaves:
            if t._version != version or any(_same_storage(a, t) for a in written_data):
                run.written_leaves.setdefault(name, t)
        record["returned"] = snap(returned, run.dtype)
        return returned

    def module_call(self, hook: Hook, module) -> dict:
        """Which call of which module fired: in the forward, the module's current call; in the
        backward, the call whose hook node the engine is running."""
        run = self.run
        label = run.label_of(module)
        node = graphs.current_node()
        if run.replay is not None and label in run.replay.current:   # a call checkpoint's recomputation made
            k, fi = run.replay.current[label]
            return {"_label": label, "_k": k, "_fi": fi}
        if node is None:
            fp = run.fpass
            return {"_label": label, "_k": fp.counts.get(label, 0), "_fi": fp.index}
        key = (graphs.sequence_nr(node), label, hook.index)
        nth = self.fired.get(key, 0)
        self.fired[key] = nth + 1
        found = run.nodes.call_at(node, label, nth)
        if found is None:
            return {"_label": label, "_k": None, "_fi": None}
        k, fi = found
        return {"_label": label, "_k": k, "_fi": fi}


def _tensors(args: dict) -> list:
    """The tensors among a hook's arguments (tuples flattened)."""
    out, stack = [], list(args.values())
    while stack:
        v = stack.pop()
        if isinstance(v, (tuple, list)):
            stack.extend(v)
        elif isinstance(v, torch.Tensor):
            out.append(v)
    return out


def _repeats(hook) -> bool:
    """A hook whose second registration is a second hook: a tensor hook (not retain_grad, kept
    once), a node hook (on a leaf's AccumulateGrad too), a multi_grad hook."""
    return hook.on in ("tensor", "node", "multi_grad") and hook.kind != "retain_grad"


def _same_storage(a: torch.Tensor, t: torch.Tensor) -> bool:
    """Whether ``a`` (a ``.data`` alias) lies on ``t``'s storage."""
    return a.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()
