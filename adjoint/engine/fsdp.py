"""FSDP2 (``torch.distributed.fsdp.fully_shard``), simulated: ``world_size`` ranks run in
lockstep, each on the ordinary engine, with a model of what fully_shard adds on top
(docs/distributed.md, "fully_shard").

What PyTorch 2.13 does (torch/distributed/fsdp/_fully_shard/_fsdp_state.py,
_fsdp_param_group.py, _fsdp_collectives.py; checked on real gloo processes on CPU):

* ``fully_shard(module)`` replaces each parameter it manages (its subtree's parameters that no
  module sharded before it manages, in post-order: children first, then the module's own) with a DTensor sharded on dim 0:
  rank r holds rows ``[r*c, min(n, (r+1)*c))`` with ``c = ceil(n / world_size)`` (possibly none).
  A hook a user registers on ``module.weight`` is registered on that sharded parameter.
* Its forward pre-hook (prepended, so it runs before the user's) all-gathers the parameters
  into unsharded ones, which the forward uses, and, when grad mode is on and some positional
  input requires grad, applies ``RegisterPostBackwardFunction`` to those inputs: one identity
  node, ``RegisterPostBackwardFunctionBackward``, whose backward runs the group's
  ``post_backward``. The module's ``BackwardHook`` (full backward hooks) wraps the inputs after
  it, so the module's full backward hook is called before the post-backward.
* ``post_backward``: the unsharded gradients that exist are taken (``.grad`` set back to None),
  reduce-scattered with ``ReduceOp.AVG`` (float32/64: the mean over ranks), and each rank's
  slice is assigned to the sharded parameter's ``.grad`` (added to it when it has one); then
  the sharded parameter's post-accumulate-grad hooks are called, handed that parameter, in
  parameter order. A tensor hook on the sharded parameter never fires (the forward does not
  use it): the engine takes the parameter's tensor hooks off it during a backward.
* A group whose post-backward did not run in the backward (its module's inputs do not
  require grad) runs it in the root's final callback, queued by the first pre-backward hook
  of the backward, at its end: modules in ``named_modules`` order.

The reduction needs every rank's gradient, so the post-backward on each rank takes its
gradients and logs its post-accumulate-grad calls where PyTorch makes them, and the
collectives are done when every rank's backward has ended (:func:`finalize`), which then fills
in what those calls were handed: a hook without a body cannot change anything that depends on
another rank before that (bodies are refused, adjoint.format.fsdp_block).
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.engine.distributed import hook_step, new_run
from adjoint.engine.graph import HookDict, Tensor
from adjoint.engine.passes import RunError, backward_request, run_backward, run_forward, sgd
from adjoint.engine.reducer_hook import ReducerPostHook
from adjoint.engine.runtime import TorchError
from adjoint.engine import warns
from adjoint.format.errors import ProblemError

POST_BACKWARD_NODE = "RegisterPostBackwardFunctionBackward"
VIEW_WARNING = ("FSDP2-wrapped module (FSDP{cls}) returned a view tensor. An in-place op on this view (e.g., `x += y`) "
                "will silently drop the pre-backward hook and skip the all-gather, which can cause backward to fail or "
                "produce wrong gradients. Use out-of-place ops (`out = out + y`, not `out += y`) or `.clone()` the "
                "output before any in-place op.")


class Group:
    """One fully_shard call's parameter group on one rank."""

    def __init__(self, label: str, params: list):
        self.label = label
        self.params = params          # [(name, Tensor)], the managed parameters in _get_managed_modules' order
        self.done = False             # post_backward ran in this backward (TrainingState.POST_BACKWARD)


class PostBackwardHook(ReducerPostHook):
    """``RegisterPostBackwardFunction.backward``: the group's post_backward, run as the node runs."""

    __slots__ = ("node",)

    def __init__(self, state, index: int, node):
        super().__init__(state, index)
        self.node = node

    def __call__(self) -> None:
        self.reducer.post_backward(self.index, self.node)


def shard_rows(n: int, world_size: int, rank: int) -> tuple[int, int]:
    """The rows of dim 0 that rank ``rank`` holds (FSDP2's padded, chunked Shard(0))."""
    c = -(-n // world_size) if n else 0
    lo = min(n, rank * c)
    return lo, min(n, lo + c)


class FSDPRank:
    """One rank's fully_shard state: its groups, in ``named_modules`` order of the root."""

    def __init__(self, spec, run, rank: int):
        self.spec = spec
        self.run = run
        self.rank = rank
        self.B = run.rt.B
        problem = run.problem
        root = problem.model
        sharded = [label for label, _ in spec.shard] + [root.label]
        managed: set = set()
        by_label = {m.label: m for m in root.walk()}
        groups = {}
        done: set = set()
        for label in sharded:          # the order fully_shard is called in
            params = []
            for m in _managed_modules(by_label[label], done):
                for d in m.params:
                    t = run.model.params[d.name]
                    if id(t) in managed:
                        continue
                    managed.add(id(t))
                    params.append((d.name, t))
            groups[label] = Group(label, params)
            done.add(label)
        # FSDPState._lazy_init: the states in the root's named_modules order; a module with no
        # parameter of its own to manage has no param group (no node, no post_backward)
        self.groups = [groups[m.label] for m in root.walk() if m.label in groups]
        self.by_label = {g.label: i for i, g in enumerate(self.groups)}
        self.names = {name for g in self.groups for name, _ in g.params}
        self.pending: list = []       # (group index, [(name, Tensor, unsharded grad)], [(name, CallRecord)])
        self.sharded: dict = {}       # name -> the sharded .grad (the local rows) before this backward
        self.stashed: dict = {}       # name -> the post-accumulate-grad hooks moved off the unsharded parameter
        self.silent: dict = {}        # name -> its tensor hooks, off the parameter during a backward
        self.queued = False
        self.failed = False           # this rank's backward raised
        run.fsdp = self
        self.states = set(sharded)
        run.model.module_wrapper = self.pre_forward
        run.model.module_post = self.post_forward

    # ------------------------------------------------------------ forward
    def pre_forward(self, fwd, mod, args: list, kwargs: dict) -> tuple[list, dict]:
        """FSDPState._pre_forward -> FSDPParamGroup.pre_forward -> _register_post_backward_hook: one
        node over the tensors of (args, kwargs) that require grad, in that order."""
        i = self.by_label.get(mod.label)
        rt = self.run.rt
        if i is None or not self.groups[i].params or not rt.grad_enabled:
            return args, kwargs
        args, kwargs = list(args), dict(kwargs)
        slots = [(args, k) for k, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]
        slots += [(kwargs, k) for k, a in kwargs.items() if isinstance(a, Tensor) and a.requires_grad]
        if not slots:
            return args, kwargs
        outs, node = fwd.backward_hook_function([where[k] for where, k in slots])
        node.name = POST_BACKWARD_NODE
        for t in outs:
            t.creation = (t.creation[0], "RegisterPostBackwardFunction")
        node.post_hooks.add(-100000 - i, PostBackwardHook(self, i, node))
        for (where, k), t in zip(slots, outs):
            where[k] = t
        return args, kwargs

    def post_forward(self, mod, out) -> None:
        """FSDPState._post_forward -> _register_pre_backward_hook: PyTorch warns for each output
        that requires grad and is a view (a later in-place op would drop FSDP's hook)."""
        if mod.label not in self.states or not self.run.rt.grad_enabled:
            return
        stack, found = [out], []
        while stack:
            v = stack.pop(0)
            if isinstance(v, (tuple, list)):
                stack[:0] = list(v)
            elif isinstance(v, Tensor) and v.requires_grad and v.is_view:
                found.append(v)
        for _ in found:
            if mod.type is None:
                raise ProblemError(mod.loc, "under fully_shard this module returns a view, and PyTorch's warning then "
                                            "names the module's class, which the file does not give: not modelled")
            warns.warn(self.run.rt, "UserWarning", VIEW_WARNING.format(cls=mod.type))

    def shard_values(self, values: dict) -> None:
        """A parameter's value, as the file names it, is the sharded DTensor's: this rank's rows."""
        B = self.B
        for name in self.names:
            v = values.get(name)
            if v is not None:
                n = tuple(B.shape(v))[0] if tuple(B.shape(v)) else 0
                lo, hi = shard_rows(n, self.spec.world_size, self.rank)
                values[name] = B.index(v, (slice(lo, hi),))

    # ------------------------------------------------------------ backward
    def before_backward(self) -> None:
        """The sharded gradients put aside, and the user's post-accumulate-grad hooks off the
        parameters the forward used (in PyTorch they sit on the sharded parameters)."""
        self.queued = False
        self.failed = False
        self.log_start = len(self.run.rt.log)
        self.assigned: dict = {}      # name -> the log position at which its sharded .grad is assigned
        for g in self.groups:
            g.done = False
            for name, t in g.params:
                self.sharded[name] = t.grad
                t.grad = None
                self.stashed[name] = t.post_accumulate_hooks
                t.post_accumulate_hooks = HookDict()
                # a tensor hook on the parameter sits on the sharded one, which the backward never reaches
                self.silent[name], t.backward_hooks = t.backward_hooks, None

    def post_backward(self, i: int, node=None) -> None:
        """FSDPParamGroup.post_backward, from its node (``node``) or the final callback (None)."""
        g = self.groups[i]
        g.done = True
        self.queued = True
        taken = [(name, t, t.grad) for name, t in g.params if t.grad is not None]
        for _, t, _ in taken:
            t.grad = None
        if not taken:
            return
        records: list = []
        runner = self.run.rt.hooks_runner
        log = self.run.rt.log
        self.pending.append((i, taken, records))
        for k, (name, t, _) in enumerate(taken):
            self.assigned[name] = len(log)
            hooks = self.stashed.get(name)
            if not hooks:
                continue
            for entry in hooks.live():
                start = len(log)
                try:
                    # no node: the derivation reads a post-accumulate call's node as the AccumulateGrad
                    # that stored .grad, and the sharded parameter's is never run
                    runner.fire_post_accumulate(entry.hook, t, None)
                except TorchError:
                    # foreach_reduce stops there: the parameters after it keep their sharded .grad
                    if len(log) > start:
                        records.append((name, log[-1]))
                        log[-1].sharded = True
                    self.pending[-1] = (i, taken[:k + 1], records)
                    raise
                records.append((name, log[-1]))
                log[-1].sharded = True    # what it is handed is no gradient of this rank's run alone

    def grads_then(self, old: dict) -> None:
        """What each call of this backward saw as a parameter's .grad (the sharded parameter's): the
        one before the backward until FSDP assigned the new one."""
        log = self.run.rt.log
        for k in range(self.log_start, len(log)):
            then = log[k].grads_then
            for name in self.names:
                if name in then:
                    at = self.assigned.get(name)
                    then[name] = self.sharded.get(name) if at is not None and k >= at else old.get(name)

    def final_callback(self) -> None:
        """_root_post_backward_final_callback: the groups whose post_backward did not run."""
        if not self.queued and not any(t.grad is not None for g in self.groups for _, t in g.params):
            return
        for i, g in enumerate(self.groups):
            if not g.done:
                self.post_backward(i)

    def after_backward(self, failed: bool = False) -> None:
        """The sharded gradients back on the parameters. After a backward that raised, the unsharded
        gradients it accumulated stay on the unsharded parameters, which the file cannot name."""
        for g in self.groups:
            for name, t in g.params:
                if t.grad is not None and not failed:
                    raise ProblemError(self.spec.loc, f"under fully_shard the gradient of '{name}' arrives after its "
                                                      "group's post-backward ran: not modelled yet")
                t.grad = self.sharded.get(name)
                t.post_accumulate_hooks = self.stashed.get(name)
                t.backward_hooks = self.silent.get(name)
                g.done = False


def finalize(ranks: list[FSDPRank], step, failed: bool = False) -> None:
    """Every rank's final callback (not after an error: the engine drops queued callbacks), then
    the reduce-scatters (the mean over ranks, each rank's rows) in the order the post-backwards
    ran, and what the post-accumulate-grad calls were handed."""
    if not failed:
        for r in ranks:
            r.final_callback()
    shapes = {tuple((i, tuple(n for n, _, _ in taken)) for i, taken, _ in r.pending) for r in ranks}
    if len(shapes) != 1:
        raise ProblemError(step.loc, "under fully_shard the ranks reduce different parameter groups in this backward "
                                     "(a gradient on some ranks only): they would wait for each other; not modelled")
    ws = len(ranks)
    B = ranks[0].B
    old_grads = [dict(r.sharded) for r in ranks]
    for j, (i, taken, _) in enumerate(ranks[0].pending):
        for k, (name, t, _) in enumerate(taken):
            values = [r.pending[j][1][k][2] for r in ranks]
            total = values[0]
            for v in values[1:]:
                total = B.add(total, v)
            mean = B.div(total, B.scalar(Fraction(ws))) if ws > 1 else total
            n = tuple(B.shape(mean))[0] if tuple(B.shape(mean)) else 0
            for r in ranks:
                lo, hi = shard_rows(n, ws, r.rank)
                part = B.index(mean, (slice(lo, hi),))
                old = r.sharded.get(name)
                r.sharded[name] = part if old is None else B.add(old, part)
        for r in ranks:
            for name, record in r.pending[j][2]:
                record.args = dict(record.args)
                record.args["tensor"] = r.sharded[name]
    for r in ranks:
        r.pending = []
        r.grads_then(old_grads[r.rank])
        r.after_backward(failed)


def sgd_step(ranks: list[FSDPRank], step, index: int) -> None:
    """``p -= lr * p.grad`` on every sharded parameter with a gradient: each rank updates its rows
    with its rows of the gradient, so the parameter the next forward all-gathers is the whole one
    updated with the whole (concatenated) gradient -- which is what the engine computes."""
    B = ranks[0].B
    full = {}
    for name in sorted(ranks[0].names):
        parts = [r.run.model.params[name].grad for r in ranks]
        if all(p is not None for p in parts):
            full[name] = B.concat(parts, 0) if len(parts) > 1 else parts[0]
        elif any(p is not None for p in parts):
            raise ProblemError(step.loc, f"under fully_shard '{name}' has a gradient on some ranks only: not modelled")
    for r in ranks:
        kept = {}
        for name, value in full.items():
            t = r.run.model.params[name]
            kept[name], t.grad = t.grad, value
        try:
            sgd(r.run, step.lr, index)
        finally:
            for name, value in kept.items():
                r.run.model.params[name].grad = value


def _managed_modules(root, sharded: set) -> list:
    """_get_managed_modules: a post-order walk (children first, then the module), not entering a
    module fully_shard was already applied to."""
    out: list = []

    def dfs(m) -> None:
        if m is not root and m.label in sharded:
            return
        for c in m.children:
            dfs(c)
        out.append(m)
    dfs(root)
    return out


def run_fsdp_ranks(problem, name: str, make_backend) -> list:
    """Every rank's run of variant ``name`` under fully_shard, one step at a time on all ranks."""
    spec = problem.distributed
    runs = [new_run(p, p.variant(name), make_backend()) for p in spec.ranks]
    ranks = [FSDPRank(spec, run, rank) for rank, run in enumerate(runs)]
    steps = runs[0].steps
    variant = runs[0].variant
    later = variant.registered_later()
    for run in runs:
        for hook in variant.hooks:
            if hook.when == "before_forward" and hook.index not in later:
                run.reg.register(hook.index)
    first_forward = first_backward = True
    for index, step in enumerate(steps):
        during = "backward" if step.kind == "backward" else "forward"
        errors = []
        if step.kind == "step":
            if getattr(step, "optimizer", None) is not None:
                raise ProblemError(step.loc, "an optimizer step ({step: {optimizer: ...}}) is not modelled with "
                                             "fully_shard yet; use {step: {lr: ...}}")
            sgd_step(ranks, step, index)
            continue
        for run, r in zip(runs, ranks):
            try:
                _step(run, r, run.steps[index], index, first_forward, first_backward, later)
            except TorchError as exc:
                errors.append((run, exc))
        if errors:
            if len(errors) != len(runs):
                bad = ", ".join(str(runs.index(run)) for run, _ in errors)
                raise ProblemError(step.loc, f"PyTorch raises {errors[0][1].type} here on rank(s) {bad} only "
                                             f"({errors[0][1].message.splitlines()[0]}); the other ranks would wait "
                                             "for them in a collective: not modelled")
            for run, exc in errors:
                run.error = RunError(exc.type, exc.message, getattr(exc, "during", None) or during, exc.cause, index)
            if step.kind == "backward" and all(r.failed for r in ranks):
                finalize(ranks, step, failed=True)   # the reduce-scatters that ran before the error
            return runs
        if step.kind == "backward":
            starts = [len(run.rt.log) for run in runs]
            finalize(ranks, step)
            for run, s in zip(runs, starts):
                last = run.passes[-1]
                if len(run.rt.log) > s:    # calls made when the backward ends belong to it
                    last.calls = range(last.calls.start, len(run.rt.log))
                last.grads = run.grads()
                mine = ranks[runs.index(run)].before
                last.grads_before = {k: mine.get(k, v) for k, v in last.grads_before.items()}
            first_backward = False
        elif step.kind == "forward":
            first_forward = False
    return runs


def _step(run, r: FSDPRank, step, index: int, first_forward: bool, first_backward: bool, later: set) -> None:
    variant, reg = run.variant, run.reg
    if step.kind == "forward":
        run_forward(run, step)
        run.forward_steps.append(index)
        r.shard_values(run.forward.values)
        if first_forward:
            for hook in variant.hooks:
                if hook.when == "after_forward" and hook.index not in later:
                    reg.register(hook.index)
            reg.check_targets(run.forward.names)
    elif step.kind == "backward":
        request = backward_request(run.problem, step.backward or variant.backward, run, run.rt.B)
        if first_backward:
            for hook in variant.hooks:
                if hook.remove == "before_backward":
                    reg.remove(hook.index)
        r.before = {name: t.grad for g in r.groups for name, t in g.params}
        r.before_backward()
        try:
            run_backward(run, request, index)
        except TorchError:
            r.failed = True
            raise
        if first_backward:
            for hook in variant.hooks:
                if hook.remove == "after_backward":
                    reg.remove(hook.index)
    elif step.kind in ("register", "remove", "zero_grad"):
        hook_step(run, reg, step)
    else:
        raise ProblemError(step.loc, f"the step {step.kind} under fully_shard is not modelled yet")


__all__ = ["FSDPRank", "finalize", "run_fsdp_ranks", "shard_rows"]
