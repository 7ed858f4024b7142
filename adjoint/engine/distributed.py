"""DistributedDataParallel, simulated: ``world_size`` ranks run in lockstep, each on the ordinary
engine, with a model of DDP's C++ Reducer on top (docs/semantics.md, "DistributedDataParallel").

What the Reducer does, as PyTorch 2.13 does it (torch/nn/parallel/distributed.py and
torch/csrc/distributed/c10d/reducer.cpp, checked on real gloo processes):

* At construction it takes the parameters that require grad (``named_parameters`` order) and
  puts a post-hook on each one's AccumulateGrad (:class:`adjoint.engine.reducer_hook.ReducerPostHook`).
  The first buckets: with ``find_unused_parameters=False`` one bucket per dtype holding every
  parameter, in parameter order (bucket limit ``sys.maxsize``).
* A forward with grad enabled first rebuilds the buckets, once, if a synchronized backward
  has recorded the order its gradients became ready: buckets of at most
  ``[first_bucket_bytes_cap, bucket_bytes_cap]`` bytes, filled in that ready order (a bucket is
  closed as soon as it reaches its limit). Outside ``no_sync`` the forward then arms the
  reducer (``prepare_for_backward``); inside ``no_sync`` it does not, and the backward only
  accumulates locally.
* In an armed backward the post-hook marks its parameter ready (after the tensor hooks, the
  accumulation and the post-accumulate-grad hooks): the gradient is copied into the bucket
  (divided by world_size first when there is no comm hook). When a bucket is complete, and
  every bucket before it has been launched, it is launched: the comm hook is called with the
  bucket's flat buffer. After the last bucket the reducer queues ``finalize_backward``, which
  runs when the backward ends: each parameter's ``.grad`` is overwritten with its slice of the
  reduced bucket.

A comm hook's result needs every rank's bucket, so a synchronized backward is run on every
rank first, then the collectives are done (:meth:`DistributedRun.finalize`): nothing a hook on
one rank sees can depend on another rank before the backward ends (the results are only
written into ``.grad`` by ``finalize_backward``).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from fractions import Fraction

from adjoint.engine.hook_runner import HookRunner
from adjoint.format.comm_hook import evaluate
from adjoint.format.errors import ProblemError
from adjoint.engine.forward import Model
from adjoint.values.lowprec import compress_allreduce
from adjoint.engine.passes import DEFAULT_STEPS, RunError, VariantRun, backward_request, run_backward, run_forward, sgd
from adjoint.format.problem import Step
from adjoint.engine.reducer_hook import ReducerPostHook
from adjoint.engine.hook_registration import Registrations
from adjoint.engine.runtime import CallRecord, Runtime, TorchError

MIB = 1024 * 1024
DEFAULT_FIRST_BUCKET_BYTES = MIB          # dist._DEFAULT_FIRST_BUCKET_BYTES
DEFAULT_BUCKET_CAP_MB = 25
ITEMSIZE = {"float32": 4, "float64": 8}
COMPRESSED = {"fp16_compress": "float16", "bf16_compress": "bfloat16"}


@dataclass(frozen=True)
class CommHookDecl:
    """What a comm-hook call record says about its hook (the fields a HookRecord reads)."""

    target: str
    label: str
    index: None = None
    on: str = "comm"
    kind: str = "comm_hook"
    returns: object = None
    does: tuple = ()
    remove: None = None
    when: str = "before_forward"


def assign_buckets(order: list[int], nbytes: list[int], limits: list[int]) -> list[list[int]]:
    """``compute_bucket_assignment_by_size`` for one dtype: fill buckets in ``order``; a bucket is
    closed once its size reaches its limit (``limits[i]`` for the i-th bucket, the last limit
    for the rest)."""
    buckets: list[list[int]] = []
    current: list[int] = []
    size = 0
    for i in order:
        current.append(i)
        size += nbytes[i]
        if size >= limits[min(len(buckets), len(limits) - 1)]:
            buckets.append(current)
            current, size = [], 0
    if current:
        buckets.append(current)
    return buckets


class Reducer:
    """One rank's Reducer."""

    def __init__(self, spec, run: VariantRun, dtype: str):
        self.spec = spec
        self.run = run
        self.dtype = dtype
        self.B = run.rt.B
        seen: set = set()
        self.params = []      # (name, Tensor), the parameters DDP reduces, named_parameters order
        for name, t in run.model.params.items():
            if t.requires_grad and id(t) not in seen:
                seen.add(id(t))
                self.params.append((name, t))
        self.nbytes = [_numel(t.shape) * ITEMSIZE[t.dtype or dtype] for _, t in self.params]
        cap = spec.bucket_cap_mb if spec.bucket_cap_mb is not None else DEFAULT_BUCKET_CAP_MB
        self.cap = int(cap * MIB)
        self.first_cap = DEFAULT_FIRST_BUCKET_BYTES if spec.bucket_cap_mb is None else self.cap
        self.buckets = assign_buckets(list(range(len(self.params))), self.nbytes, [sys.maxsize])
        self.rebuilt_order: list[int] = []
        self.has_rebuilt = False
        self.expect_hooks = False
        self.pending: list[int] = []
        self.next_bucket = 0
        self.contents: dict[int, object] = {}
        self.launched: list = []         # (bucket index, flat buffer, CallRecord | None)
        self.finalize_queued = False
        for i, (_, t) in enumerate(self.params):
            node = run.rt.grad_accumulator(t)
            node.post_hooks.add(-1 - i, ReducerPostHook(self, i))

    # ------------------------------------------------------------ forward
    def pre_forward(self, synced: bool) -> None:
        if self.expect_hooks and self.contents:
            # the previous armed backward never finished its reduction (a parameter got no gradient)
            raise _unused(self)
        if self.rebuilt_order and not self.has_rebuilt:
            self.buckets = assign_buckets(self.rebuilt_order, self.nbytes, [self.first_cap, self.cap])
            self.has_rebuilt = True
            self.rebuilt_order = []

    def post_forward(self, synced: bool) -> None:
        if synced:
            self.expect_hooks = True
            self.pending = [len(b) for b in self.buckets]
            self.next_bucket = 0
            self.contents = {}
            self.launched = []
            self.finalize_queued = False

    # ------------------------------------------------------------ backward
    def autograd_hook(self, index: int) -> None:
        if not self.expect_hooks:
            return
        if not self.has_rebuilt:
            self.rebuilt_order.append(index)
        name, t = self.params[index]
        if t.grad is None:
            raise ProblemError(self.spec.loc, f"under DistributedDataParallel '{name}' became ready without a "
                                              "gradient (a hook returned None): not modelled yet")
        if index in self.contents:
            raise ProblemError(self.spec.loc, f"under DistributedDataParallel '{name}' became ready twice in one "
                                              "backward: PyTorch's error there is not modelled yet")
        self.contents[index] = t.grad
        b = next(k for k, bucket in enumerate(self.buckets) if index in bucket)
        self.pending[b] -= 1
        while self.next_bucket < len(self.buckets) and self.pending[self.next_bucket] == 0:
            self.launch(self.next_bucket, t.grad_accumulator)
            self.next_bucket += 1
        if self.next_bucket == len(self.buckets):
            self.finalize_queued = True

    def launch(self, k: int, node) -> None:
        """Bucket ``k`` to the comm hook, from the Reducer's post-hook on ``node`` (the
        AccumulateGrad whose parameter completed it, or a later bucket)."""
        B = self.B
        flat = B.concat([B.reshape(self.contents[i], (_numel(self.params[i][1].shape),)) for i in self.buckets[k]], 0)
        rec = None
        if self.spec.comm_hook is not None:
            names = tuple(self.params[i][0] for i in self.buckets[k])
            decl = CommHookDecl(f"bucket{k}", f"comm_hook@bucket{k}")
            rec = CallRecord(decl, "comm_hook", decl.target, {"bucket": flat, "parameters": names}, node=node)
            self.run.rt.log.append(rec)
        self.launched.append((k, flat, rec))


def finalize(reducers: list[Reducer]) -> None:
    """The collectives of one synchronized backward on every rank, then ``finalize_backward``."""
    first = reducers[0]
    if not all(r.finalize_queued for r in reducers):
        raise _unused(next(r for r in reducers if not r.finalize_queued))
    ws = len(reducers)
    B = first.B
    hook = first.spec.comm_hook
    for j, (k, _, _) in enumerate(first.launched):
        flats = [r.launched[j][1] for r in reducers]
        if hook is None:        # the reducer's own allreduce: grad * (1 / world_size) copied in, then summed
            parts = [B.mul(B.scalar(Fraction(1, ws)), f) for f in flats]
            results = [_sum(B, parts)] * ws
        elif hook.builtin == "allreduce":   # default_hooks.allreduce_hook: buffer.div_(world_size), all_reduce
            parts = [B.div(f, B.scalar(ws)) for f in flats]
            results = [_sum(B, parts)] * ws
        elif hook.builtin in COMPRESSED:    # fp16_compress_hook / bf16_compress_hook: rounded (adjoint.values.lowprec)
            results = [compress_allreduce(B, flats, COMPRESSED[hook.builtin], first.dtype, hook.loc)] * ws
        else:
            results = evaluate(hook.returns, B, flats, ws)
            shape = tuple(B.shape(flats[0]))
            for value in results:
                if isinstance(value, Fraction) or tuple(B.shape(value)) != shape:
                    raise ProblemError(hook.returns.loc, f"the comm hook must return a tensor of the bucket's shape "
                                                         f"{list(shape)}")
        for r, result in zip(reducers, results):
            _, _, rec = r.launched[j]
            if rec is not None:
                rec.returned = result
            offset = 0
            for i in r.buckets[k]:
                _, t = r.params[i]
                n = _numel(t.shape)
                t.grad = B.reshape(B.index(result, (slice(offset, offset + n),)), t.shape)
                offset += n
    for r in reducers:
        r.expect_hooks = False
        r.finalize_queued = False


def _sum(B, parts: list):
    total = parts[0]
    for p in parts[1:]:
        total = B.add(total, p)
    return total


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _unused(r: Reducer) -> ProblemError:
    missing = [name for i, (name, _) in enumerate(r.params) if i not in r.contents]
    return ProblemError(r.spec.loc, f"parameter(s) {', '.join(missing)} received no gradient in a synchronized "
                                    "backward: PyTorch's 'Expected to have finished reduction' error "
                                    "(find_unused_parameters) is not modelled yet")


# ----------------------------------------------------------------------------- the ranks in lockstep

def new_run(problem, variant, backend) -> VariantRun:
    """One rank's run, set up as :func:`adjoint.engine.passes.run_variant` sets it up."""
    rt = Runtime(backend, problem.dtype)
    reg = Registrations(variant.hooks, rt)
    model = Model(problem, variant.inputs, rt, reg)
    reg.model = model
    rt.hooks_runner = HookRunner(rt, reg)
    run = VariantRun(problem, variant, rt, model, stepped=variant.steps is not None, reg=reg)
    steps = variant.steps if variant.steps is not None else tuple(Step(k, variant.loc) for k in DEFAULT_STEPS)
    run.steps = tuple(steps)
    return run


def run_ranks(problem, name: str, make_backend) -> list[VariantRun]:
    """Every rank's run of variant ``name``: DDP wraps the model, then the hooks are registered,
    then the steps run on all ranks, one step at a time."""
    spec = problem.distributed
    runs = [new_run(p, p.variant(name), make_backend()) for p in spec.ranks]
    reducers = [Reducer(spec, run, p.dtype) for run, p in zip(runs, spec.ranks)]
    steps = runs[0].steps
    variant = runs[0].variant
    later = {i for s in steps if s.kind == "register" for i in s.hooks}
    for run in runs:
        for hook in variant.hooks:
            if hook.when == "before_forward" and hook.index not in later:
                run.reg.register(hook.index)
    first_forward = first_backward = True
    for index, step in enumerate(steps):
        synced = spec.synced(step)
        try:
            for run, reducer in zip(runs, reducers):   # a forward's inputs may be per rank: each its own step
                _step(run, reducer, run.steps[index], index, synced, first_forward, first_backward, later)
        except TorchError as exc:
            raise ProblemError(step.loc, f"PyTorch raises {exc.type} here on a rank ({exc.message}); an error "
                                         "under DistributedDataParallel is not modelled yet") from None
        if step.kind == "forward":
            first_forward = False
        elif step.kind == "backward":
            first_backward = False
            # an armed reducer whose hooks ran in this backward: finalize_backward, with the collectives
            # (a forward inside no_sync after the arming forward does not disarm it)
            if any(r.expect_hooks and r.contents for r in reducers):
                finalize(reducers)
                for run in runs:
                    run.passes[-1].grads = run.grads()
    return runs


def _step(run: VariantRun, reducer: Reducer, step, index: int, synced: bool, first_forward: bool,
          first_backward: bool, later: set) -> None:
    variant, reg = run.variant, run.reg
    if step.kind == "forward":
        reducer.pre_forward(synced)
        run_forward(run, step)
        run.forward_steps.append(index)
        reducer.post_forward(synced)
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
        run_backward(run, request, index)
        if first_backward:
            for hook in variant.hooks:
                if hook.remove == "after_backward":
                    reg.remove(hook.index)
    elif step.kind == "register":
        for i in step.hooks:
            reg.register(i)
    elif step.kind == "remove":
        for i in step.hooks:
            reg.remove(i)
    elif step.kind == "zero_grad":
        for t in run.model.leaves.values():
            t.grad = None
    elif step.kind == "step":
        sgd(run, step.lr, index)



__all__ = ["Reducer", "RunError", "assign_buckets", "finalize", "run_ranks"]
