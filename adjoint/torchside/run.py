"""One variant run in real PyTorch, step by step, with everything its hooks saw captured.

:func:`run_variant` returns the *observed* side of ``adjoint verify`` in the per-variant shape
of the contract's ``solve --json``: ``loss``, ``values``, ``grads``, ``hook_calls``, plus
``returned`` (``method: grad``) and ``passes`` (a variant with ``steps``); or, when PyTorch
raised while running the file, ``{"error": {type, message, during, after_call},
"hook_calls": [...]}``. It is a user's script written out: build the model
(:mod:`adjoint.torchside.build`), register the hooks (:mod:`adjoint.torchside.hooks`), run
the steps (default ``[forward, backward]``):

* ``forward``: inputs replaced entry by entry; every leaf bound by name; the saved-tensor
  hooks of the whole forward entered (outermost first, in declared order); the root called;
  the loss built; the value of every named tensor taken when the pass ends;
* ``backward``: ``loss.backward(gradient, retain_graph, inputs)`` or
  ``torch.autograd.grad``; hooks with ``remove: before_backward`` / ``after_backward`` are
  removed around the first one; each backward step is one entry of ``passes``;
* ``register`` / ``remove``; ``zero_grad`` (``.grad = None`` on every leaf); ``step``
  (``p -= lr * p.grad`` under ``no_grad`` on every parameter that has a gradient).

Names follow the contract: inputs, targets, parameters and buffers by their own names; a
module call's output ``PATH`` (``PATH#K`` for its K-th call, ``PATH[i]`` for a tuple); a
name assigned in a forward ``CALLID.NAME`` (the root's: ``NAME``); ``model``, ``y``,
``loss``. Every module call goes through :meth:`Session.call_module`, which counts it,
enters the saved-tensor hooks scoped to it, forces a Dropout's declared mask
(:mod:`adjoint.torchside.dropout`) and binds its output; every value a program makes is kept,
so the graphs stay alive for the whole run (as in a script that keeps its tensors: a leaf's
``AccumulateGrad`` lives as long as the run).

Each hook call is logged as the contract's call record; what a record only knows at the end
(the ``call`` number of a module called several times in its forward, the node and target of
a pack or unpack call) is filled in by :func:`finish_calls`. PyTorch's warnings about legacy
and full backward hooks are silenced.
"""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass, field

import torch

from adjoint.engine.warns import ONCE

from adjoint.format.errors import Loc, ProblemError
from adjoint.format.problem import OUTPUT, ROOT, Module, Problem, Step, Variant
from adjoint.torchside.saved_reads import read_torch
from adjoint.torchside import graphs
from adjoint.torchside.build import build, module_paths
from adjoint.torchside.setup_raised import SetupRaised
from adjoint.torchside.dropout import forced_mask
from adjoint.torchside.program import Program
from adjoint.torchside.savednodes import SavedNodes
from adjoint.torchside.unfinished import WatchPacks
from adjoint.torchside.values import DTYPES, leaf_tensor, literal_tensor, number, snap
from adjoint.torchside.second import second_backward
from adjoint.torchside.hooks import HookRaised, Hooks

DEFAULT_STEPS = ("forward", "backward")

#: What PyTorch raises when a file makes it fail (a hook that raises, a freed graph, a tensor
#: modified in place that backward needs, a shape it refuses): the run stops into ``error``.
#: Anything else is a bug of the torch side and propagates.
TORCH_ERRORS = (RuntimeError, ValueError, TypeError, IndexError, NotImplementedError, ZeroDivisionError,
                AttributeError, OverflowError)


@dataclass
class ForwardPass:
    """What one forward pass in torch gives: named tensors, counts, the output and loss."""

    index: int
    names: dict = field(default_factory=dict)      # name -> value, in binding order
    counts: dict = field(default_factory=dict)     # module label -> calls so far
    starts: dict = field(default_factory=dict)     # module label -> sequence_nr when its current call began
    output: object = None
    loss: torch.Tensor | None = None
    values: dict = field(default_factory=dict)     # name -> VALUE when the pass ended


class Session:
    """One variant built in torch: leaves, modules, hooks, and the state of the run."""

    def __init__(self, problem: Problem, variant: Variant, dtype: str, forward_only: bool = False):
        self.p = problem
        self.v = variant
        self.dtype = DTYPES[dtype]
        self.symbols = dict(problem.symbols)
        self.log: list[dict] = []
        self.phase = "register"          # the phase of the step running (the ``during`` of warnings)
        self.kept: list = []
        self.kept_versions: dict[int, int] = {}   # id(tensor) -> its _version when first kept
        self.nodes = graphs.NodeIndex()
        self.forwards: list[ForwardPass] = []
        self.fpass: ForwardPass | None = None
        self.inputs = tuple(variant.inputs)
        self.leaves: dict[str, torch.Tensor] = {}
        self.written_leaves: dict[str, torch.Tensor] = {}   # leaves a hook body wrote in place (leaf_values)
        self.declared_grad = {d.name: d.requires_grad for d in list(variant.inputs) + list(problem.targets)}
        self.declared_grad.update({d.name: d.requires_grad for m in problem.model.walk() for d in m.params})
        self.backward_inputs = backward_inputs(variant)
        self.made: dict = {}                      # names bound by as: (adjoint.torchside.second)
        self.globals: dict[str, torch.Tensor] = {}
        try:   # the script makes its inputs and targets first, then the modules
            for d in list(variant.inputs) + list(problem.targets):
                self.globals[d.name] = self.leaves[d.name] = self.leaf(d)
        except (ValueError, RuntimeError) as exc:   # torch.tensor([1, 2], requires_grad=True): the script stops
            raise SetupRaised(exc) from None
        try:
            self.root, tensors = build(self, problem.model, self.dtype, self.symbols)
        except SetupRaised as raised:
            raised.warnings = list(self.__dict__.get("setup_warnings", ()))
            raise
        self.params = {d.name: tensors[d.name] for m in problem.model.walk() for d in m.params}
        for m in problem.model.walk():
            for d in m.params:
                self.leaves[d.name] = tensors[d.name]
        for m in problem.model.walk():
            for d in m.buffers:
                self.leaves[d.name] = tensors[d.name]
        self.modules = module_paths(self.root)
        self.labels = {id(m): label for label, m in self.modules.items()}
        self.decls = {m.label: m for m in problem.model.walk()}
        self.hooks = Hooks(self, variant.hooks, forward_only)
        self.saved_nodes = SavedNodes(not forward_only and any(h.on in ("saved_tensors", "saved") for h in variant.hooks))
        self.observers = [self.modules[label].register_forward_hook(self._observe(label)) for label in self.decls]
        self.registered: dict = {}   # registered steps: name -> len() of that module hook dict then
        self.reads: dict = {}  # the read steps' answers (adjoint.torchside.saved_reads)
        self.replay = None     # while checkpoint recomputes: adjoint.torchside.checkpoint.Replay
        self.root_output_pending = False   # while the root runs: its output, named model, is named y next
        self.closures: dict = {}   # module label -> {name: tensor} it reads from its caller (uses:)
        self.reentrant = 0     # depth of the reentrant backward running

    def leaf(self, d) -> torch.Tensor:
        return leaf_tensor(d, self.dtype, self.symbols)

    def close(self) -> None:
        self.hooks.remove_all()
        for handle in self.observers:
            handle.remove()

    # ------------------------------------------------------------------ what modules and hooks ask
    def program(self, scope) -> Program:
        return Program(scope, self.keep)

    def backward_program(self, scope) -> Program:
        """A hook body run by the engine: only values with a graph (create_graph) are kept."""
        return Program(scope, self.keep_graphs)

    def keep_graphs(self, value) -> None:
        # with grad mode off (a backward without create_graph) nothing the body makes has a graph, and
        # reading grad_fn of a view it made of a tensor it then wrote (W[0].mul_(2)) would raise
        # PyTorch's no_grad-view error, which a plain script never reads
        if torch.is_grad_enabled() and any(t.grad_fn is not None for t in graphs.tensors_in(value)):
            self.keep(value)

    def keep(self, value) -> None:
        """Keep every value the run makes alive (every node stays reachable), noting each
        tensor's version: a view unchanged since may have its grad_fn read (see readable)."""
        self.kept.append(value)
        for t in graphs.tensors_in(value):
            if not t.is_inference():   # (an inference tensor has no version counter to read)
                self.kept_versions.setdefault(id(t), t._version)  # first kept: just made, its grad_fn fresh
        # its graph is indexed now, while every node behind it can still be reached: a later
        # in-place write can make reading a view's grad_fn raise (a custom Function's output), and a
        # forward that raises then ends with no other way to a node a pack call was for
        self.nodes.scan(value, self.readable)

    def _kept_fresh(self, t, never_kept: bool) -> bool:
        """``t`` is not a view, or a view still at the version it was first kept at (just after it
        was made); a view the run never kept counts as ``never_kept``."""
        if not t._is_view():
            return True
        version = self.kept_versions.get(id(t))
        return never_kept if version is None else version == t._version

    def readable(self, t) -> bool:
        """Reading ``t.grad_fn`` changes nothing: not a view, or a kept view not written since (its
        grad_fn is as fresh as when it was made). Reading a stale view's grad_fn makes a new one,
        which the user's program did not do and which changes what a later in-place op on the
        view, retain_grad or register_hook does; a view the run never kept is not read either."""
        return self._kept_fresh(t, never_kept=False)

    def value_with_meta(self, t) -> dict:
        """A forward value as the contract writes it, with ``requires_grad`` and ``grad_fn`` (the
        node's type name); a view whose grad_fn reading would make a new one has no ``grad_fn``
        here (it is not read: see readable), and so is not compared."""
        out = snap(t, self.dtype)
        out["requires_grad"] = t.requires_grad
        if self.readable(t):
            try:   # a view of a custom Function's output written since raises when its grad_fn is read
                out["grad_fn"] = type(t.grad_fn).__name__ if t.grad_fn is not None else None
            except RuntimeError:
                pass
        return out

    def stale(self, t) -> bool:
        """A view the run kept and that has been written since: its grad_fn is not read."""
        return not self._kept_fresh(t, never_kept=True)

    def clear_kept(self) -> None:
        self.kept.clear()
        self.kept_versions.clear()

    def label_of(self, module) -> str:
        return self.labels[id(module)]

    def current_names(self) -> dict:
        return self.fpass.names if self.fpass is not None else {}

    def current_callid(self, label: str) -> str:
        k = self.fpass.counts.get(label, 1)
        return label if k == 1 else f"{label}#{k}"

    def lookup_global(self, name: str, loc: Loc, where: str):
        if name in self.globals:
            return self.globals[name]
        raise ProblemError(loc, f"unknown name '{name}' in {where}")

    def bind(self, name: str, value, aliases: tuple = (), until=None) -> None:
        if self.replay is not None:   # checkpoint's recomputation names nothing (adjoint.torchside.checkpoint)
            return
        self.fpass.names[name] = value
        self.hooks.bound(name, value, aliases, attach=not (self.root_output_pending and name == ROOT), until=until)

    def call_module(self, decl: Module, args: list, kwargs: dict):
        """One call of a module, as its parent's forward makes it."""
        fp = self.fpass
        label = decl.label
        if self.replay is not None:   # checkpoint's recomputation: the region's calls again, uncounted
            from adjoint.torchside.checkpoint import replayed_call
            return replayed_call(self, decl, args, kwargs)
        k = fp.counts[label] = fp.counts.get(label, 0) + 1
        fp.starts[label] = graphs.next_sequence_nr()
        module = self.modules[label]
        with contextlib.ExitStack() as stack:
            for hook in self.hooks.saved_hooks(label):
                stack.enter_context(self.hooks.saved_tensors(hook))
            if decl.mask is not None:
                stack.enter_context(forced_mask(decl, self.dtype, self.symbols))
            out = (module.forward if decl.plain else module)(*args, **kwargs)   # plain: a function, no _call_impl
        self.keep(out)
        legacy_read = _legacy_hooked_output(module, out)
        for t in graphs.tensors_in(out):
            if (self.readable(t) or t is legacy_read) and graphs.grad_fn_of(t) is not None:
                self.nodes.note_call(t.grad_fn, label, k, fp.index)
        callid = label if k == 1 else f"{label}#{k}"
        if isinstance(out, tuple):
            with self.hooks.together():   # their hooks go on together, in the file's order
                for i, t in enumerate(out):
                    if isinstance(t, torch.Tensor):
                        self.bind(f"{callid}[{i}]", t)
        else:
            self.bind(callid, out)
        return out

    def _observe(self, label: str):
        """A forward hook of ours on every module (registered before the file's): the inputs a
        module's forward got carry its BackwardHookFunctionBackward node when it has full
        backward hooks, where those hooks will run."""
        def observe(module, args, output):
            fp = self.fpass
            # the output's graph, indexed before the file's forward hooks run: one that raises
            # drops the output, and a pack call of the module's ops would be left without its node
            self.nodes.scan(output, self.readable)
            k, fi, start = fp.counts.get(label), fp.index, fp.starts.get(label, 0)
            if self.replay is not None and label in self.replay.current:   # checkpoint's recomputation
                (k, fi), start = self.replay.current[label], self.replay.starts[label]
            for t in graphs.tensors_in(args):
                # an argument the program kept and wrote since (a view written under no_grad) is
                # not one BackwardHookFunction just made: reading its grad_fn would make a new one
                node = graphs.grad_fn_of(t) if not self.stale(t) else None
                if (node is not None and node.name() == "BackwardHookFunctionBackward"
                        and graphs.sequence_nr(node) >= start):
                    self.nodes.note_call(node, label, k, fi)
        return observe

    # ------------------------------------------------------------------ steps
    def forward(self, step_inputs=(), call: str | None = None) -> ForwardPass:
        for d in step_inputs:
            self.globals[d.name] = self.leaves[d.name] = self.leaf(d)
            self.declared_grad[d.name] = d.requires_grad
            self.inputs = tuple(d if d.name == old.name else old for old in self.inputs)
        fp = ForwardPass(len(self.forwards))
        self.forwards.append(fp)
        self.fpass = fp
        self.hooks.new_forward()
        try:   # the leaves' hooks go on as a script registers them before its forward: all
            # together, in the file's order (every leaf exists then)
            with self.hooks.together():
                for name, t in self.leaves.items():   # a tied Parameter's names are aliases of one tensor
                    self.bind(name, t, tuple(n for n, o in self.leaves.items() if o is t and n != name))
        except (RuntimeError, ValueError, AssertionError, AttributeError) as exc:
            exc.adjoint_during = "register"
            raise
        with contextlib.ExitStack() as stack:
            if self.hooks.any_saved_tensors():
                stack.enter_context(WatchPacks(self.log, self.nodes.scan))
            for hook in self.hooks.saved_hooks(None):
                stack.enter_context(self.hooks.saved_tensors(hook))
            root = self.p.model
            if call is not None:   # a forward step's call: PATH: that child alone, with the inputs
                root = next(m for m in self.p.model.walk() if m.label == call)
            # the root's output is model and y at once: their hooks go on together, in the file's order
            self.root_output_pending = call is None and OUTPUT not in fp.names
            try:
                fp.output = self.call_module(root, [self.globals[d.name] for d in self.inputs], {})
            finally:
                self.root_output_pending = False
            if call is None and OUTPUT not in fp.names:
                self.bind(OUTPUT, fp.output, (ROOT,) if fp.names.get(ROOT) is fp.output else ())
            elif fp.names.get(ROOT) is fp.output:
                self.hooks.bound(ROOT, fp.output)
            if call is None and self.p.loss is not None:
                fp.loss = self.program(LossScope(self)).eval(self.p.loss)
                self.keep(fp.loss)
                self.bind("loss", fp.loss)
        self.nodes.scan(self.kept, self.readable)  # the run goes on: no view's grad_fn is made here
        self.hooks.forward_ends()
        fp.values = {name: self.value_with_meta(t) for name, t in fp.names.items() if isinstance(t, torch.Tensor)}
        return fp

    def backward(self, bw) -> dict | None:
        """One backward step; returns what ``torch.autograd.grad`` returned, by name (None for backward)."""
        if getattr(bw, "empty_inputs", False):   # inputs=[]: PyTorch's own error
            fp = self.forwards[-1]
            root = fp.loss if fp.loss is not None else fp.output
            if bw.method == "grad":
                torch.autograd.grad(root, [])
            torch.autograd.backward(root, inputs=[])
        if bw.second is not None:
            return second_backward(self, bw, self.made)
        fp = self.forwards[-1]
        root = fp.loss if fp.loss is not None else fp.output
        gradient = literal_tensor(bw.grad_output, self.dtype, self.symbols) if bw.grad_output is not None else None
        wrt = [fp.names[name] for name, _ in bw.inputs]
        if bw.method == "grad":
            grads = torch.autograd.grad(root, wrt, grad_outputs=gradient, retain_graph=bw.retain_graph)
            return {name: snap(g, self.dtype) for (name, _), g in zip(bw.inputs, grads)}
        root.backward(gradient=gradient, retain_graph=bw.retain_graph, inputs=wrt or None)
        return None

    def zero_grad(self, set_to_none: bool = True, only: tuple = ()) -> None:
        for t in ([self.leaves[n] for n in only] if only else self.leaves.values()):
            if set_to_none:
                t.grad = None
            elif t.grad is not None:   # Module.zero_grad(set_to_none=False)'s treatment of each .grad
                if t.grad.grad_fn is not None:
                    t.grad.detach_()
                else:
                    t.grad.requires_grad_(False)
                t.grad.zero_()

    def sgd(self, lr) -> None:
        with torch.no_grad():
            # a tied Parameter (two names, one tensor) is updated once, as model.parameters() lists it once
            for p in {id(p): p for p in self.params.values()}.values():
                if p.grad is not None:
                    p -= float(number(lr)) * p.grad   # lr is a Python float, as a user types it (1e30, not 10**30)

    def reset_params(self, index: int) -> None:
        """After SGD or optimizer step ``index``: keep what it made in ``stepped``, then set the parameters
        ``after_step`` gives for it (see :func:`run_variant`; nothing in a plain run)."""
        given = getattr(self, "after_step", {}).get(index)
        if not given:
            return
        self.stepped[index] = {name: snap(self.params[name].detach(), self.dtype) for name in given}
        with torch.no_grad():
            for name, values in given.items():
                p = self.params[name]
                p.data.copy_(torch.tensor(values, dtype=p.dtype))

    def leaf_values(self) -> dict:
        """The value now of every leaf a hook wrote in place."""
        return {name: snap(t.detach(), self.dtype) for name, t in self.written_leaves.items()}

    def grads(self) -> dict:
        """``.grad`` of every leaf declared to require grad, then of every tensor with retain_grad,
        then of every non-leaf a backward step names in ``inputs`` (``backward(inputs=...)``
        accumulates into its ``.grad``; listed in every pass, None until it gets one)."""
        out = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for name, t in self.leaves.items():
                if self.declared_grad.get(name) or (t.requires_grad and _is_leaf(t)):   # (or made to: requires_grad_())
                    out[name] = snap(t.grad, self.dtype)
            declared = {id(t) for t in self.leaves.values()}
            # a leaf the forward made (xh.requires_grad_()), or a backward step (as:): the zeros
            # materialize_grads makes under create_graph require grad
            for name, t in list(self.current_names().items()) + list(self.made.items()):
                if isinstance(t, torch.Tensor) and t.requires_grad and _is_leaf(t) and id(t) not in declared \
                        and name not in out:
                    out[name] = snap(t.grad, self.dtype)
            for name, t in self.hooks.retained:
                out[name] = snap(t.grad, self.dtype)
            names = self.current_names()
            for name in self.backward_inputs:
                t = names.get(name)
                if isinstance(t, torch.Tensor) and not _is_leaf(t):
                    out[name] = snap(t.grad, self.dtype)
        return out


def _is_leaf(t: torch.Tensor) -> bool:
    """``is_leaf`` as ``.grad`` reads it (C++: ``grad_fn_ == nullptr``). Python's ``Tensor.is_leaf``
    reads ``grad_fn``, which regenerates a view's and raises for a written view PyTorch refuses to
    regenerate (a BackwardHookFunction output whose base an SGD step wrote: sweep seed 109,
    problem 871); a user reading ``.grad`` meets no error. Such a view has a grad_fn unless it was
    made under no_grad."""
    try:
        return t.is_leaf
    except RuntimeError:
        return torch._C._autograd._get_creation_meta(t) == torch._C._autograd.CreationMeta.NO_GRAD_MODE


def backward_inputs(variant: Variant) -> list[str]:
    """Names in the ``inputs`` of any ``backward()`` (method backward) step, in order."""
    out: list[str] = []
    steps = variant.steps if variant.steps is not None else ()
    backs = [s.backward or variant.backward for s in steps if s.kind == "backward"] or [variant.backward]
    for bw in backs:
        if bw.method == "backward":
            out += [name for name, _ in bw.inputs if name not in out]
    return out


class LossScope:
    """The loss: any tensor named in the current forward; a child of the root may be called."""

    def __init__(self, run: Session):
        self.run = run

    def lookup(self, name: str, loc: Loc):
        names = self.run.current_names()
        if name in names:
            return names[name]
        raise ProblemError(loc, f"unknown name '{name}' in the loss")

    def assign(self, name, value, loc):
        raise ProblemError(loc, "the loss is one expression")

    def child(self, name: str):
        return self.run.p.model.child(name)

    def call_child(self, name: str, args: list, kwargs: dict, loc: Loc):
        return self.run.call_module(self.child(name), args, kwargs)


# ----------------------------------------------------------------------------- the variant

def _as_fresh_process(warned: list[dict]) -> list[dict]:
    """The warnings as a fresh script issues them: a TORCH_WARN_ONCE only the first time."""
    out, seen = [], set()
    for w in warned:
        text = w.get("message", "")
        once = next((m for m in ONCE if text.startswith(m)), None)
        if once is not None:
            if once in seen:
                continue
            seen.add(once)
        out.append(w)
    return out


def _without_meta(value: dict | None) -> dict | None:
    """The loss as the answer's ``loss`` has it: the VALUE alone (``requires_grad`` and ``grad_fn``
    are said of it under ``values``)."""
    if value is None:
        return None
    return {k: v for k, v in value.items() if k not in ("requires_grad", "grad_fn")}


def run_variant(problem: Problem, variant: Variant, dtype: str, after_step: dict | None = None,
                observe=None) -> dict:
    """Build, register, run every step in real torch; the observed JSON (see the module docstring).

    ``after_step``: ``{step index: {parameter: values}}``, the parameters' values set right after
    that SGD step, through ``.data`` (no version change), and the values the step itself made
    returned as ``stepped``; none in a plain run. The sweep's checker uses it to tell rounding
    carried across a step from a modelling error (tests/gen/check.py). ``observe``: called with the
    session once it is built, before anything runs (the adjoints' observers:
    :mod:`adjoint.torchside.adjoints_run`)."""
    try:
        s = Session(problem, variant, dtype)
    except SetupRaised as raised:   # a constructor refused its arguments: the script ends there
        return {"error": {"type": type(raised.exc).__name__, "message": str(raised.exc), "during": "setup",
                          "after_call": None}, "hook_calls": [], "warnings": raised.warnings}
    s.after_step, s.stepped = after_step or {}, {}
    if observe is not None:
        observe(s)
    steps = variant.steps if variant.steps is not None else tuple(Step(k, variant.loc) for k in DEFAULT_STEPS)
    passes: list[dict] = []
    returned = None
    error = None
    warned: list[dict] = list(s.__dict__.get("setup_warnings", ()))   # the constructors' (TransformerEncoder)
    always = torch.is_warn_always_enabled()
    torch.set_warn_always(True)   # a TORCH_WARN_ONCE is issued again in this process: kept once below
    with warnings.catch_warnings():
        warnings.simplefilter("always")   # every warning each time it is issued, as the contract lists them
        warnings.showwarning = _recorder(s, warned)
        try:
            with s.saved_nodes.recording():
                error = run_steps(s, steps, passes)
        finally:
            s.close()
            torch.set_warn_always(always)
    warned = _as_fresh_process(warned)
    s.nodes.scan(s.kept)
    s.saved_nodes.resolve(s.log)
    finish_calls(s)
    if error is not None:
        out = {"error": error, "hook_calls": s.log, "warnings": warned}
        if s.registered:
            out["registered"] = dict(s.registered)
        if s.reads:
            out["reads"] = s.reads
        return out
    fp = s.forwards[-1] if s.forwards else None
    observed = {"loss": _without_meta(fp.values.get("loss")) if fp is not None and fp.loss is not None else None,
                "values": fp.values if fp is not None else {}, "grads": s.grads(), "hook_calls": s.log}
    if passes:
        returned = passes[-1].get("returned")
    if returned is not None:
        observed["returned"] = returned
    if variant.steps is not None:
        observed["passes"] = passes
    observed["warnings"] = warned
    if s.written_leaves:
        observed["leaf_values"] = s.leaf_values()
        for entry in passes:   # in each passes[i] (contract v3 9), {} before a hook wrote a leaf
            entry.setdefault("leaf_values", {})
    if s.registered:
        observed["registered"] = dict(s.registered)
    if s.reads:
        observed["reads"] = s.reads
    if s.stepped:
        observed["stepped"] = s.stepped
    return observed


def count_registered(s: Session, step) -> int:
    """A ``registered`` step in torch: ``len()`` of the module's hook dict, less the forward hook
    this session put on every module to observe its calls."""
    from torch.nn.modules import module as module_py
    path, kind, _ = step.counts
    if path == "global":
        return len({"forward_pre": module_py._global_forward_pre_hooks, "forward": module_py._global_forward_hooks,
                    "full_backward_pre": module_py._global_backward_pre_hooks,
                    "forward_always_call": module_py._global_forward_hooks_always_called}
                   .get(kind, module_py._global_backward_hooks))
    if path not in s.modules:
        raise ProblemError(step.loc, f"the registered step names module '{path}', which does not exist")
    m = s.modules[path]
    hooks = {"forward_pre": m._forward_pre_hooks, "forward": m._forward_hooks,
             "full_backward_pre": m._backward_pre_hooks,
             "forward_always_call": m._forward_hooks_always_called}.get(kind, m._backward_hooks)
    ours = sum(1 for h in s.observers if h.id in hooks) if kind == "forward" else 0
    return len(hooks) - ours


#: the start of the warning ``_call_impl`` issues when it silences an always_call forward hook's error
SILENCED = "with ``always_call=True`` raised an exception that was silenced as another error was raised in forward"


def _recorder(s: Session, warned: list):
    """A ``warnings.showwarning`` that lists each warning (category, message, the phase of the
    step running); the silencing warning marks the hook call it silenced (the last one logged)."""
    def show(message, category, filename, lineno, file=None, line=None):
        text = str(message)
        warned.append({"category": category.__name__, "message": text, "during": s.phase})
        mark_silenced(text, s.log)
    return show


def mark_silenced(warning: str, log: list) -> None:
    """The hook call ``_call_impl``'s silencing ``warning`` is about, marked ``silenced`` rather
    than ``raised``: it is the last one logged -- unless Python refused to call it at all (a
    with_kwargs hook called without kwargs): then nothing of it was logged."""
    if SILENCED in warning and log and log[-1].get("raised") and log[-1]["kind"] == "forward" \
            and "required positional argument" not in warning:
        del log[-1]["raised"]
        log[-1]["silenced"] = True


def register_after_forward(s: Session, hooks, later) -> None:
    """The file's ``when: after_forward`` hooks, registered once the first forward ran (those
    that a step registers ``later`` wait for it)."""
    for hook in hooks:
        if hook.when == "after_forward" and hook.index not in later:
            s.hooks.register(hook.index)


def remove_before_backward(s: Session, hooks) -> None:
    """The file's ``remove: before_backward`` hooks, removed before the first backward."""
    for hook in hooks:
        if hook.remove == "before_backward":
            s.hooks.remove(hook.index)


def run_steps(s: Session, steps, passes: list, in_step=None, pass_extras: bool = True) -> dict | None:
    """Run the steps in order; the contract's ``error`` when PyTorch raised, else None.

    ``in_step(step)``: a context each step runs in (DDP: ``ddp.no_sync()`` for a step of a
    ``no_sync`` block; none by default). ``pass_extras``: a pass records ``returned`` beside its
    calls, grads and ``leaf_values`` (a DDP or FSDP rank's passes do not: a rank's answer has no
    ``returned``)."""
    hooks = s.v.hooks
    later = s.v.registered_later()
    s.phase = "register"
    try:
        for hook in hooks:
            if hook.when == "before_forward" and hook.index not in later:
                s.hooks.register(hook.index)
    except TORCH_ERRORS + (AssertionError, HookRaised) as exc:   # PyTorch refuses a registration
        return _error(exc, "register", s)
    first_forward = first_backward = True
    for index, step in enumerate(steps):
        registering = False
        s.hooks.step = index   # saved_tensors blocks with during: are around the steps they list
        s.phase = "backward" if step.kind == "backward" else "register" if step.kind == "register" else "forward"
        try:
            with (in_step(step) if in_step is not None else contextlib.nullcontext()):
                if step.kind == "forward":
                    s.forward(step.inputs, step.call)
                    if first_forward:
                        first_forward = False
                        registering = True
                        register_after_forward(s, hooks, later)
                elif step.kind == "backward":
                    bw = step.backward or s.v.backward
                    if first_backward:
                        remove_before_backward(s, hooks)
                    start = len(s.log)
                    s.hooks.fired.clear()   # which call fired at a shared node counts afresh in every backward
                    with contextlib.ExitStack() as blocks:   # during: [this step]
                        for hook in s.hooks.saved_hooks(None):
                            if getattr(hook, "during", None) is not None:
                                blocks.enter_context(s.hooks.saved_tensors(hook))
                        returned = s.backward(bw)
                    entry = {"hook_calls": s.log[start:], "grads": s.grads()}
                    if s.written_leaves:
                        entry["leaf_values"] = s.leaf_values()
                    if pass_extras and returned is not None:
                        entry["returned"] = returned
                    passes.append(entry)
                    if first_backward:
                        first_backward = False
                        for hook in hooks:
                            if hook.remove == "after_backward":
                                s.hooks.remove(hook.index)
                elif step.kind == "register":
                    registering = True
                    for i in step.hooks:
                        s.hooks.register(i)
                elif step.kind == "remove":
                    for i in step.hooks:
                        s.hooks.remove(i)
                elif step.kind == "zero_grad":
                    s.zero_grad(step.set_to_none, step.leaves)
                elif step.kind == "step" and getattr(step, "optimizer", None) is not None:
                    from adjoint.torchside.optimizers import variant_optimizer
                    variant_optimizer(s, step.optimizer).step()
                    s.reset_params(index)
                elif step.kind == "step":
                    s.sgd(step.lr)
                    s.reset_params(index)
                elif step.kind in ("clip_grad_norm", "clip_grad_value"):
                    from adjoint.torchside.optimizers import clip_step
                    clip_step(s, step)
                elif step.kind == "registered":
                    s.registered[step.counts[2]] = count_registered(s, step)
                elif step.kind == "read":
                    name, entry = read_torch(s, step, index)
                    s.reads[name] = entry
        except ProblemError:
            raise
        except TORCH_ERRORS + (AssertionError, HookRaised) as exc:
            during = "register" if registering or getattr(exc, "adjoint_during", None) == "register" else \
                "backward" if step.kind == "backward" else "read" if step.kind == "read" else "forward"
            return _error(exc, during, s)
    return None


def _error(exc: BaseException, during: str, s: Session) -> dict:
    """The contract's ``error`` for what PyTorch (or Python) raised."""
    return {"type": type(exc).__name__, "message": str(exc), "during": during,
            "after_call": len(s.log) - 1 if s.log else None}


def finish_calls(s: Session) -> None:
    """What each call record only knows at the end: ``call`` (module called more than once in its
    forward), pack/unpack ``node`` and ``target`` (the first name bound to a tensor that node
    produced, forwards in order)."""
    producers: dict[int, str] = {}
    for fp in s.forwards:
        for name, t in fp.names.items():
            if isinstance(t, torch.Tensor) and graphs.grad_fn_of(t) is not None:
                seq = graphs.sequence_nr(t.grad_fn)
                producers.setdefault(seq, name)
    for record in s.log:
        label = record.pop("_label", None)
        k = record.pop("_k", None)
        fi = record.pop("_fi", None)
        if label is not None:
            if fi is not None:
                calls = s.forwards[fi].counts.get(label, 1)
            else:   # a backward hook at a node no call of the module noted: unknown call (None) if it matters
                calls = max((fp.counts.get(label, 1) for fp in s.forwards), default=1)
            if calls > 1:
                record["call"] = k
        if record["kind"] in ("pack", "unpack"):
            seq = record.pop("_seq", None)
            record.pop("_seq_known", None)
            name = record.pop("_node", None)
            record["node"] = name or s.nodes.name(seq) or s.saved_nodes.name(seq) or s.saved_nodes.op_node(seq)
            if record.pop("_in_backward", False) and record["node"] is None:
                # a node a create_graph backward recorded that no later graph reaches: the torch
                # side has no way to name it (the comparison does not hold it against the prediction)
                record["node_unseen"] = True
            record["target"] = producers.get(seq) if seq is not None else None


__all__ = ["run_variant", "Session", "ForwardPass"]


def _legacy_hooked_output(module, out):
    """The output tensor whose grad_fn ``_call_impl`` has just read to register a legacy backward
    hook (the first tensor of the result), or None when the module has none: reading it again
    makes nothing new."""
    from torch.nn.modules import module as module_py
    own = bool(module._backward_hooks) and module._is_full_backward_hook is False
    glob = bool(module_py._global_backward_hooks) and module_py._global_is_full_backward_hook is False
    if not (own or glob):
        return None
    var = out
    while isinstance(var, (tuple, list)) and var:
        var = var[0]
    return var if isinstance(var, torch.Tensor) else None

