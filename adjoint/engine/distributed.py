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

from adjoint.engine.return_types import ReturnTuple
from adjoint.engine.hook_runner import HookRunner
from adjoint.format.comm_hook import evaluate, reduces, run_writes
from adjoint.format.distributed import cap_bytes
from adjoint.format.errors import ProblemError
from adjoint.format.syntax import Bin, Call, Name, Neg, Num
from adjoint.engine.forward import Model
from adjoint.values.lowprec import compress_allreduce
from adjoint.engine.passes import (DEFAULT_STEPS, RunError, VariantRun, backward_request, nested_runners, run_backward,
                                   run_forward, sgd)
from adjoint.format.problem import Step
from adjoint.engine.reducer_hook import ReducerPostHook, SinkHook
from adjoint.engine.hook_registration import Registrations
from adjoint.engine.runtime import CallRecord, Runtime, TorchError
from adjoint.engine.graph import Node, Tensor
from adjoint.engine.gradalias import GradObj, grad_holders
from adjoint.engine import warns
from adjoint.engine.inplace import write_in_kernel

MIB = 1024 * 1024
DEFAULT_FIRST_BUCKET_BYTES = MIB          # dist._DEFAULT_FIRST_BUCKET_BYTES
DEFAULT_BUCKET_CAP_MB = 25
ITEMSIZE = {"float32": 4, "float64": 8, "complex64": 8, "complex128": 16}
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


@dataclass(frozen=True)
class PassReduction:
    """What one rank's Reducer did in one backward pass: whether it reduced (finalize_backward
    wrote .grad), the buckets it launched (index, parameters in buffer order, the flat buffer,
    the collective's result), and each parameter's .grad before the reduction was written."""

    number: int            # the backward pass, 1-based
    reduced: bool
    buckets: tuple         # ((k, names, flat, result), ...)
    local: dict            # parameter name -> .grad as this rank had it when the backward ended
    armed: bool = True     # the Reducer expected its hooks (a synchronized forward armed it)


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


def bucket_limits(spec) -> tuple[list[int], list[int]]:
    """(the first assignment's limits, the rebuild's) in bytes: _BucketCapacityConfig.create and its
    compute_bucket_size_limits, then the C++ Reducer's rebuild. ``bucket_cap_mb_list`` given (not
    empty): its limits for both, ``bucket_cap_mb`` ignored. Otherwise ``bucket_bytes_cap`` from
    ``bucket_cap_mb`` (25 MiB when not given) and ``first_bucket_bytes_cap`` (1 MiB when not given, else
    the same cap); the first assignment is one bucket (``sys.maxsize``) with ``static_graph`` or without
    ``find_unused_parameters``; a rebuild uses ``[first_bucket_bytes_cap, bucket_bytes_cap]``."""
    if spec.bucket_cap_mb_list:
        limits = [cap_bytes(c) for c in spec.bucket_cap_mb_list]
        return limits, limits
    cap = cap_bytes(spec.bucket_cap_mb) if spec.bucket_cap_mb is not None else DEFAULT_BUCKET_CAP_MB * MIB
    first = DEFAULT_FIRST_BUCKET_BYTES if spec.bucket_cap_mb is None else cap
    if spec.static_graph or not spec.find_unused_parameters:
        return [sys.maxsize], [first, cap]
    return ([first, cap] if first < cap else [cap]), [first, cap]


class Reducer:
    """One rank's Reducer (and the DistributedDataParallel wrapper's state around it)."""

    def __init__(self, spec, run: VariantRun, dtype: str, rank: int = 0):
        self.spec = spec
        self.run = run
        self.dtype = dtype
        self.rank = rank
        self.B = run.rt.B
        seen: set = set()
        self.params = []      # (name, Tensor), the parameters DDP reduces, named_parameters order
        last_name: dict = {}  # id -> the last of a tied parameter's names (DDP's index -> name map keeps it)
        for name, t in run.model.params.items():
            last_name[id(t)] = name
            if t.requires_grad and id(t) not in seen:
                seen.add(id(t))
                self.params.append((name, t))
        self.fqns = [last_name[id(t)] for _, t in self.params]
        if len({t.dtype or dtype for _, t in self.params}) > 1:
            raise ProblemError(spec.loc, "parameters of different dtypes under DistributedDataParallel (the Reducer "
                                         "buckets each dtype apart) are not modelled yet; give them one dtype")
        self.nbytes = [_numel(t.shape) * ITEMSIZE[t.dtype or dtype] for _, t in self.params]
        self.find_unused = spec.find_unused_parameters
        self.static = spec.static_graph
        self.view = spec.gradient_as_bucket_view
        limits, self.rebuild_limits = bucket_limits(spec)
        # the list reversed (DDP's _ddp_init_helper): buckets are expected to become ready last-parameters-first
        self.buckets = list(reversed(assign_buckets(list(range(len(self.params))), self.nbytes, limits)))
        self.rebuilt_order: list[int] = []
        self.has_rebuilt = False
        self.expect_hooks = False
        self.require_finalize = False
        self.pending: list[int] = []
        self.next_bucket = 0
        self.contents: dict[int, object] = {}
        self.ready: set = set()               # perIterationReadyParams_
        self.launched: list = []         # (bucket index, flat buffer, CallRecord | None)
        self.finalize_queued = False
        self.bwd_calls = 0                    # num_bwd_calls_: backwards whose hooks reached the Reducer
        self.first_hook_called = False        # first_autograd_hook_called_ (reset by finalize_backward)
        self.unused: list[int] = []           # unused_parameters_
        self.marked_unused = False            # has_marked_unused_parameters_
        self.local_used: set = set()          # local_used_map_ (find_unused, static graph's first iteration)
        self.static_used: set | None = None   # static graph: the parameters used on some rank in iteration 1
        self.triggered = [0] * len(self.params)   # numGradHooksTriggeredMap_
        self.per_iteration: list[int] = []    # numGradHooksTriggeredMapPerIteration_
        self.delay_enqueued = False           # DDP._static_graph_delay_allreduce_enqueued
        # DDP.require_forward_param_sync: set by each forward's _post_forward (grad enabled and not in
        # no_sync), read by the next forward's _pre_forward to decide whether it broadcasts the buffers
        self.forward_param_sync = True
        self.buffers = [run.model.leaves[d.name] for m in run.problem.model.walk() for d in m.buffers]
        self.buffer_source: list | None = None   # rank 0's buffer values before the forward step being run
        self.delay_queued = False             # reducer._delay_all_reduce queued by _DDPSink's backward
        self.order_source = self              # rank 0's Reducer: rebuilt buckets are broadcast from it
        self.results: dict = {}               # launched bucket j -> the collective's result on this rank
        self.written: dict = {}               # launched bucket j -> its buffer after the comm hook's local does:
        self.psgd_iter = 0                    # powerSGD: PowerSGDState.iter on this rank
        self.history: list[PassReduction] = []   # one per backward pass, for the derivation (adjoint.derivation.ddp)
        # gradient_as_bucket_view: parameter index -> the tensor (GradObj) of its bucket view, which the Reducer
        # made its .grad; a hook assigning .grad another tensor after that is finalize_backward's REDUCER_CHECK
        self.view_objs: dict[int, GradObj] = {}
        # the last bucket completed inside a reentrant backward: the depth whose end runs finalize_backward
        # (queue_callback on that inner graph task), then True once it ended (until the collectives run)
        self.early_finalize: int | bool | None = None
        run.ddp = self
        run.rt.grad_read_guard = self.read_guard
        run.rt.reentrant_end = self.reentrant_end
        for i, (_, t) in enumerate(self.params):
            node = run.rt.grad_accumulator(t)
            node.post_hooks.add(-1 - i, ReducerPostHook(self, i))

    def construct(self) -> None:
        """What DistributedDataParallel.__init__ does on this rank once it accepted the module (a module
        with no parameter requiring grad raised before any of it), in its order: the FutureWarning of
        a ``broadcast_buffers`` argument (deprecated in PyTorch 2.13, warned whatever its value; its
        own words when ``forward_sync_buffers`` is given too), then ``check_reduction=True``'s; unless ``init_sync=False``,
        ``_sync_module_states``, which broadcasts every parameter from rank 0 --
        ``dist._broadcast_coalesced`` copies the result back into each one (``copy_``, on rank 0
        too), so every parameter's ``_version`` is one more after the wrapping (frozen ones too;
        a tied one once) -- and the buffers unless ``broadcast_buffers=False`` alone (given,
        ``forward_sync_buffers`` leaves this broadcast on); then ``_set_static_graph``'s warning."""
        rt = self.run.rt
        if self.spec.broadcast_buffers is not None:
            warns.warn(rt, "FutureWarning", BROADCAST_BOTH if self.spec.forward_sync_buffers is not None
                       else BROADCAST_BUFFERS_DEPRECATED, "setup")
        if self.spec.check_reduction:
            warns.warn(rt, "FutureWarning", CHECK_REDUCTION_DEPRECATED, "setup")
        synced: set = set()
        for t in self.run.model.params.values() if self.spec.init_sync else ():   # a tied parameter once
            if id(t) not in synced:
                synced.add(id(t))
                t.version.value += 1
        if self.spec.init_syncs_buffers():   # init_sync_buffers: the buffers are broadcast too
            for t in self.buffers:
                t.version.value += 1
        if self.static and self.find_unused:   # DistributedDataParallel.__init__ -> _set_static_graph
            warns.warn(rt, "UserWarning", STATIC_AND_FIND_UNUSED, "setup")

    def static_first(self) -> bool:
        return self.static and self.bwd_calls == 1

    def static_later(self) -> bool:
        return self.static and self.bwd_calls > 1

    def should_rebuild(self) -> bool:
        return (self.static or not self.find_unused) and not self.has_rebuilt

    # ------------------------------------------------------------ forward
    def pre_forward(self, synced: bool) -> None:
        """DDP's _pre_forward: prepare_for_forward (synchronized only), then _rebuild_buckets,
        which first checks that the prior reduction finished."""
        if self.require_finalize:
            raise TorchError("RuntimeError", unfinished_message(self), "ddp_unfinished")
        order = self.order_source.rebuilt_order
        if order and self.should_rebuild():
            self.buckets = assign_buckets(list(order), self.nbytes, self.rebuild_limits)
            self.has_rebuilt = True
            if self.view:   # initialize_bucket_views: every defined .grad copied into its new bucket, and pointed at it
                self.view_objs = {}
                for i, (_, t) in enumerate(self.params):
                    if t.grad is not None:
                        self.point_at_view(i)

    def syncs_buffers(self) -> bool:
        """_pre_forward's _check_sync_bufs_pre_fwd: the buffers are broadcast from rank 0 when the
        previous forward left require_forward_param_sync set (the first forward too),
        forward_sync_buffers (broadcast_buffers when it is not given) is not False and the module has
        buffers."""
        return self.forward_param_sync and self.spec.forward_syncs() and bool(self.buffers)

    def sync_buffers(self, source: list) -> None:
        """_sync_buffers: rank 0's buffers (``source``: their values before this forward) broadcast
        into this rank's, under ``_unsafe_preserve_version_counter`` (no version moves)."""
        if self.syncs_buffers() and self.rank != 0:
            for t, value in zip(self.buffers, source):
                write_in_kernel(self.run.rt, t, value)

    def post_forward(self, synced: bool, out):
        """DDP's _post_forward on the root module's output: prepare_for_backward (synchronized
        only; with find_unused_parameters the graph is searched from the output for parameters
        it does not reach), then the output through _DDPSink when PyTorch puts it there."""
        self.forward_param_sync = synced and self.run.rt.grad_enabled
        if synced:
            self.expect_hooks = True
            self.pending = [len(b) for b in self.buckets]
            self.next_bucket = 0
            self.contents = {}
            self.ready = set()
            self.launched = []
            self.results = {}
            self.written = {}
            self.finalize_queued = False
            self.marked_unused = False
            self.per_iteration = list(self.triggered)
            if self.find_unused and not self.static:
                reached = _reached_accumulators(out)
                self.unused = [i for i, (_, t) in enumerate(self.params) if id(t.grad_accumulator) not in reached]
        if (self.find_unused and not self.static) or (self.static and not self.delay_enqueued):
            return self.sink(out)
        return out

    def sink(self, out):
        """``_DDPSink.apply(weakref, *outputs)``: one node, ``_DDPSinkBackward``, over the outputs that
        have a grad_fn; each output a clone (``_ddp_sink_clone``) made inside the Function."""
        rt = self.run.rt
        outs = _leaves(out)   # _tree_flatten_with_rref: a dict's values too (an HF-style output)
        idx = [i for i, v in enumerate(outs) if isinstance(v, Tensor) and v.grad_fn is not None]
        if not idx or not rt.grad_enabled:
            return out
        tensors = [outs[i] for i in idx]
        node = Node(rt._new_seq(), "_DDPSinkBackward", [rt.gradient_edge(t) for t in tensors], kind="ddpsink",
                    inputs=tuple(tensors), input_values=tuple(t.value for t in tensors),
                    module_call=rt.call_stack[-1] if rt.call_stack else None)
        rt.nodes.append(node)
        node.post_hooks.add(-1 - len(self.params), SinkHook(self, -1))
        made = []
        for k, t in enumerate(tensors):
            c = rt.tensor(t.value, True, node, k, dtype=t.dtype)
            c.creation = ("custom", "_DDPSink")
            made.append(c)
        node.outputs = [(t.shape, t.dtype) for t in made]
        node.output_values = [t.value for t in made]
        rt.record("bhf", tensors, made, None, node, None)
        for i, c in zip(idx, made):
            outs[i] = c
        return _rebuilt(out, iter(outs))

    def sink_backward(self) -> None:
        """_DDPSink.backward: with static_graph, the first time, queue_callback(reducer._delay_all_reduce)."""
        if self.static and not self.delay_enqueued:
            self.delay_queued = True
            self.delay_enqueued = True

    # ------------------------------------------------------------ backward
    def autograd_hook(self, index: int) -> None:
        name, t = self.params[index]
        if self.early_finalize is True:
            raise ProblemError(self.spec.loc, EARLY_FINALIZE_THEN.format(what=f"parameter {name}'s AccumulateGrad ran"))
        if not self.first_hook_called:
            self.first_hook_called = True
            self.bwd_calls += 1
        if (self.find_unused and not self.static) or self.static_first():
            if t.grad is not None:      # marked even outside an armed backward (no_sync)
                self.local_used.add(index)
        if self.static_first():
            self.triggered[index] += 1
            return
        if not self.expect_hooks:
            return
        if not self.marked_unused:
            self.marked_unused = True
            for u in self.unused:
                self.mark_ready(u, t.grad_accumulator)
        if self.static_later():
            if self.per_iteration[index] <= 0:
                raise TorchError("RuntimeError", GRAPH_CHANGED, "ddp_graph_changed")
            self.per_iteration[index] -= 1
            if self.per_iteration[index] != 0:
                return
        if self.should_rebuild():
            self.rebuilt_order.append(index)
        self.mark_ready(index, t.grad_accumulator)

    def copy_in(self, index: int) -> None:
        """mark_variable_ready_dense: the gradient into its bucket view (times 1/world_size when
        there is no comm hook); zeros when it has none. With gradient_as_bucket_view, .grad
        becomes that bucket view."""
        name, t = self.params[index]
        B = self.B
        if t.grad is None:
            self.contents[index] = B.zeros(t.shape)
            return
        value = t.grad
        if self.spec.comm_hook is None:
            value = B.mul(B.scalar(Fraction(1, self.spec.world_size)), value)
        self.contents[index] = value
        if self.view:
            t.grad = value
            if grad_holders(self.run.rt).get(t) is not self.view_objs.get(index):   # not grad.is_alias_of(view)
                self.point_at_view(index)

    def point_at_view(self, index: int) -> None:
        """gradient_as_bucket_view: ``grad = bucket_view``, .grad is from now on the bucket's view
        (another tensor than the one it was)."""
        _, t = self.params[index]
        obj = self.view_objs[index] = GradObj()
        grad_holders(self.run.rt)[t] = obj

    def is_view(self, index: int) -> bool:
        """gradient_as_bucket_view: is parameter ``index``'s .grad (still) its bucket view?"""
        _, t = self.params[index]
        return t.grad is not None and grad_holders(self.run.rt).get(t) is self.view_objs.get(index)

    def read_guard(self, leaf: Tensor, loc) -> None:
        """A hook body reading ``leaf.grad`` (gradient_as_bucket_view): once the bucket holding it
        is launched to the Reducer's own all-reduce or a built-in comm hook, .grad is a view of a
        buffer that collective writes in place from another thread (the allreduce hook divides it
        first): what the hook reads is a race. A written comm hook's all_reduce works on a copy and
        ends before the backward goes on. After a finalize_backward run at the end of a reentrant
        backward, .grad holds the other ranks' mean in the middle of this rank's backward."""
        if self.early_finalize is True and any(t is leaf for _, t in self.params):
            raise ProblemError(loc, EARLY_FINALIZE_THEN.format(what="a hook read a parameter's .grad"))
        if not self.view:
            return
        hook = self.spec.comm_hook
        if not self.expect_hooks or (hook is not None and hook.builtin is None):
            return
        for k, _flat, _rec in self.launched:
            if any(self.params[i][1] is leaf and self.is_view(i) for i in self.buckets[k]):
                raise ProblemError(loc, "reading a parameter's .grad after its bucket was launched, under "
                                        "gradient_as_bucket_view: .grad is a view of the bucket the all-reduce writes "
                                        "in place meanwhile (a race in PyTorch); not modelled (read it before its "
                                        "bucket is complete, or after the backward)")

    def check_view(self, index: int) -> None:
        """finalize_bucket_dense with gradient_as_bucket_view, for a parameter some rank used: a
        .grad of None becomes the bucket view; a .grad that is another tensor (a hook assigned it
        after the Reducer made it the view) is PyTorch's REDUCER_CHECK."""
        _, t = self.params[index]
        if t.grad is None:
            grad_holders(self.run.rt)[t] = self.view_objs.setdefault(index, GradObj())
            return
        cur = grad_holders(self.run.rt).get(t)
        if cur is self.view_objs.get(index):
            hook = self.spec.comm_hook
            if t.grad is not self.contents.get(index) and (hook is None or hook.returns is None):
                raise ProblemError(self.spec.loc, "under gradient_as_bucket_view a hook wrote a parameter's .grad "
                                                  "(its bucket view) in place after its bucket was launched: the "
                                                  "write races with the all-reduce of that bucket (a comm hook "
                                                  "with returns: would overwrite it); not modelled")
            return
        if any(cur is self.view_objs.get(j) for b in self.buckets if index in b for j in b):
            raise ProblemError(self.spec.loc, "under gradient_as_bucket_view a parameter's .grad assigned another "
                                              "parameter's .grad of the same bucket (a view of the same bucket, "
                                              "which PyTorch's check lets pass) is not modelled yet")
        raise TorchError("RuntimeError", NOT_BUCKET_VIEW, "ddp_not_bucket_view")

    def mark_ready(self, index: int, node) -> None:
        name, _ = self.params[index]
        if index in self.ready:   # checkAndRaiseMarkedTwiceError (a parameter used again in a reentrant backward)
            raise TorchError("RuntimeError", MARKED_TWICE + f"\nParameter at index {index} with name "
                             f"{self.fqns[index]} has been marked as ready twice. This means that multiple autograd "
                             "engine  hooks have fired for this particular parameter during this iteration.",
                             "ddp_marked_twice")
        self.ready.add(index)
        self.require_finalize = True
        self.copy_in(index)
        b = next(k for k, bucket in enumerate(self.buckets) if index in bucket)
        self.pending[b] -= 1
        while self.next_bucket < len(self.buckets) and self.pending[self.next_bucket] == 0:
            self.launch(self.next_bucket, node)
            self.next_bucket += 1
        if self.next_bucket == len(self.buckets):
            if self.run.rt.reentrant:   # queue_callback on the inner graph task: finalize when it ends
                self.early_finalize = self.run.rt.reentrant
            self.finalize_queued = True

    def reentrant_end(self, depth: int) -> None:
        """The reentrant backward at ``depth`` completed: the finalize_backward its graph task queued
        runs now (the collectives are done with the other ranks when the outer backward ends: nothing
        of this rank in between may read or write what it changes, else refused)."""
        if self.early_finalize == depth and self.early_finalize is not True:
            self.early_finalize = True

    def delay_all_reduce(self) -> None:
        """Reducer::delay_all_reduce, at the end of a static graph's first backward: every
        parameter copied into its bucket in parameter order (those whose hook never fired are
        the unused ones from now on), every bucket launched, then finalize_backward."""
        self.unused = [i for i in range(len(self.params)) if self.triggered[i] == 0]
        self.require_finalize = True
        for i in range(len(self.params)):
            self.copy_in(i)
        for k in range(len(self.buckets)):   # all_reduce_bucket hands GradBucket next_bucket_ (0), not k
            self.launch(k, None, self.next_bucket)
        if not self.expect_hooks:   # finalize_backward's TORCH_INTERNAL_ASSERT (the first forward ran in no_sync)
            raise TorchError("RuntimeError", UNARMED_FINALIZE, "ddp_unarmed_finalize")
        self.finalize_queued = True

    def skips(self, k: int) -> bool:
        """skip_all_reduce_unused_params (with find_unused_parameters): bucket ``k`` holds only
        parameters this rank's forward left unused, so it is not all-reduced -- no comm hook call,
        and their .grad stays as it was (checked on gloo)."""
        return (self.spec.skip_all_reduce_unused_params and self.find_unused and not self.static
                and all(i in self.unused for i in self.buckets[k]))

    def launch(self, k: int, node, index: int | None = None) -> None:
        """Bucket ``k`` to the comm hook, from the Reducer's post-hook on ``node`` (the
        AccumulateGrad whose parameter completed it, or a later bucket). ``index``: what the
        hook's ``GradBucket.index()`` says (``k`` but in a static graph's delayed all-reduce), which
        names the call and decides ``is_last()``."""
        index = k if index is None else index
        if self.skips(k):
            return
        B = self.B
        if self.view:   # .grad is its bucket view: what a hook wrote into it in place since is in the bucket
            for i in self.buckets[k]:
                if self.is_view(i):
                    self.contents[i] = self.params[i][1].grad
        flat = B.concat([_into_bucket(B, self.contents[i], self.params[i][1], self.dtype) for i in self.buckets[k]], 0)
        rec = None
        hook = self.spec.comm_hook
        if hook is not None and hook.builtin == "powerSGD":   # PowerSGDState.iter, counted at the last bucket
            if self.psgd_iter >= hook.state_arg("start_powerSGD_iter"):
                raise ProblemError(hook.loc, f"powerSGD_hook compresses from iteration "
                                             f"{hook.state_arg('start_powerSGD_iter')} on (a random projection and an "
                                             "orthogonalization): not modelled yet; only its first "
                                             "start_powerSGD_iter iterations, plain allreduce, are")
            if index == len(self.buckets) - 1:   # maybe_increase_iter: bucket.is_last()
                self.psgd_iter += 1
        if hook is not None:
            names = tuple(self.params[i][0] for i in self.buckets[k])
            decl = CommHookDecl(f"bucket{index}", f"comm_hook@bucket{index}")
            rec = CallRecord(decl, "comm_hook", decl.target, {"bucket": flat, "parameters": names}, node=node)
            self.run.rt.log.append(rec)
        self.launched.append((k, flat, rec))
        if hook is not None and hook.does and not reduces(hook.does):
            self.written[len(self.launched) - 1] = self.write_bucket(k, flat)

    def write_bucket(self, k: int, flat):
        """A written comm hook's ``does:`` on this rank's buffer, in the hook call: the buffer after
        the writes. With gradient_as_bucket_view each parameter's .grad is its view of the
        buffer, so the writes show in .grad at once (until finalize_backward copies the result)."""
        B = self.B
        (new,) = run_writes(self.spec.comm_hook.does, B, [flat], self.spec.world_size)
        if self.view:
            offset = 0
            for i in self.buckets[k]:
                _, t = self.params[i]
                view, n = _bucket_view(B, new, offset, t, self.dtype)
                if t.grad is not None and t.grad is self.contents.get(i):
                    t.grad = view
                    self.contents[i] = t.grad
                offset += n
        return new

    def operand(self, j: int):
        """Launched bucket ``j``'s buffer as the collective reads it (after a local ``does:``)."""
        return self.written.get(j, self.launched[j][1])


#: DistributedDataParallel.__init__ given check_reduction=True (an argument PyTorch no longer reads)
CHECK_REDUCTION_DEPRECATED = ("The `check_reduction` argument in `DistributedDataParallel` module is deprecated. "
                              "Please avoid using it.")
#: DistributedDataParallel.__init__ given broadcast_buffers and forward_sync_buffers (any values)
BROADCAST_BOTH = ("Both `broadcast_buffers` and `forward_sync_buffers` were specified. `broadcast_buffers` is "
                  "deprecated and its value is ignored when `forward_sync_buffers` is provided.")
#: DistributedDataParallel.__init__ given broadcast_buffers (either value) and no forward_sync_buffers
BROADCAST_BUFFERS_DEPRECATED = ("`broadcast_buffers` is deprecated. Use `forward_sync_buffers` instead. IMPORTANT: "
                                "unlike `broadcast_buffers=False`, `forward_sync_buffers=False` still syncs buffers at "
                                "init. If you rely on buffers NOT being synced at init (e.g. rank-local buffers), keep "
                                "using `broadcast_buffers=False` until `init_sync_buffers` is available.")

STATIC_AND_FIND_UNUSED = ("You passed find_unused_parameters=true to DistributedDataParallel, `_set_static_graph` will "
                          "detect unused parameters automatically, so you do not need to set find_unused_parameters=true, "
                          "just be sure these unused parameters will not change during training loop while calling "
                          "`_set_static_graph`.")

POWERSGD_START = ("Expect `start_powerSGD_iter` > 1 if `use_error_feedback` or `warm_start` is enabled, because "
                  "PowerSGD can only be applied after the first two iterations in DDP.")

#: DistributedDataParallel._check_comm_hook on a hook named bf16_compress_hook: a build without CUDA 11+ and
#: NCCL 2.10+ (or XPU and XCCL) -- every CPU build -- refuses it at register_comm_hook, before any forward
BF16_ON_CPU = "BF16 all reduce communication hook required CUDA 11+ and NCCL 2.10+ or XPU and XCCL"

#: mark_variable_ready_dense with a gradient that requires grad (create_graph): ``bucket_view.copy_(grad / world_size)``
#: is recorded, so the bucket and its views join .grad's graph; checked on gloo: with two parameters in a bucket
#: PyTorch raises "a leaf Variable that requires grad is being used in an in-place operation." at the second one,
#: with one per bucket .grad ends averaged with a graph through the bucket and c10d::allreduce_
CREATE_GRAPH = ("backward(create_graph=True) under DistributedDataParallel (a Reducer armed by a synchronized "
                "forward, or static_graph) is not modelled yet: the Reducer copies gradients that require grad into "
                "its bucket views with autograd recording (PyTorch's in-place error on a leaf when a bucket holds two "
                "parameters; else .grad's graph runs through the bucket and the all-reduce); run it inside no_sync")

#: Reducer::checkAndRaiseMarkedTwiceError's common words (autograd_hook has marked the unused parameters by then)
MARKED_TWICE = ("Expected to mark a variable ready only once. This error is caused by one of the following reasons: "
                "1) Use of a module parameter outside the `forward` function. Please make sure model parameters are "
                "not shared across multiple concurrent forward-backward passes. or try to use _set_static_graph() as "
                "a workaround if this module graph does not change during training loop.2) Reused parameters in "
                "multiple reentrant backward passes. For example, if you use multiple `checkpoint` functions to wrap "
                "the same part of your model, it would result in the same set of parameters been used by different "
                "reentrant backward passes multiple times, and hence marking a variable ready multiple times. DDP "
                "does not support such use cases in default. You can try to use _set_static_graph() as a workaround "
                "if your module graph does not change over iterations.")

#: mark_variable_ready queues finalize_backward with queue_callback on the CURRENT graph task: when the last
#: bucket completes inside a reentrant backward, .grad is averaged when that inner backward ends, and the
#: outer backward runs on with a disarmed Reducer. Modelled while the rest of the outer backward neither
#: reads a parameter's .grad nor runs a parameter's AccumulateGrad, nor raises (each would see the mean)
EARLY_FINALIZE_THEN = ("under DistributedDataParallel the last bucket was completed inside a reentrant backward "
                       "(checkpoint(..., use_reentrant=True), or a hook body's backward(...)), so PyTorch ran "
                       "finalize_backward when that inner backward ended, averaging .grad, and then {what} in the "
                       "outer backward: not modelled yet (use use_reentrant=False, or checkpoint a region whose "
                       "parameters are not the last to get gradients)")

#: Reducer::finalize_backward's first line, ``TORCH_INTERNAL_ASSERT(expect_autograd_hooks_)``, as the
#: torch 2.13.0 CPU wheel words it (its build path and line): a static graph's first iteration run
#: inside no_sync queues the delayed all-reduce, which finalizes a Reducer no forward armed
UNARMED_FINALIZE = ('expect_autograd_hooks_ INTERNAL ASSERT FAILED at "/__w/pytorch/pytorch/torch/csrc/distributed/'
                    'c10d/reducer.cpp":1732, please report a bug to PyTorch. ')

#: finalize_bucket_dense's REDUCER_CHECK with gradient_as_bucket_view: a used parameter's .grad is
#: not an alias of its bucket view (a hook assigned .grad a new tensor after the Reducer pointed it there)
NOT_BUCKET_VIEW = ("Detected at least one parameter gradient is not the expected DDP bucket view with "
                   "gradient_as_bucket_view=True. This may happen (for example) if multiple allreduce hooks were "
                   "registered onto the same parameter. If you hit this error, please file an issue with a minimal "
                   "repro.")

GRAPH_CHANGED = ("Your training graph has changed in this iteration, e.g., one parameter is unused in first "
                 "iteration, but then got used in the second iteration. this is not compatible with static_graph "
                 "set to True.")


def unfinished_message(r: Reducer) -> str:
    """Reducer::ensure_prior_reduction_finished's words (TORCH_DISTRIBUTED_DEBUG unset)."""
    base = ("Expected to have finished reduction in the prior iteration before starting a new one. This error "
            "indicates that your module has parameters that were not used in producing loss. ")
    outputs = "making sure all `forward` function outputs participate in calculating loss. "
    bug = ("\nIf you already have done the above, then the distributed data parallel module wasn't able to locate "
           "the output tensors in the return value of your module's `forward` function. Please include the loss "
           "function and the structure of the return value of `forward` of your module when reporting this issue "
           "(e.g. list, dict, iterable).")
    if r.static:
        base = ("Expected to have finished reduction in the prior iteration before starting a new one. This error "
                "indicates that your training graph has changed in this iteration, e.g., one parameter is used in "
                "first iteration, but then got unused in the second iteration. this is not compatible with "
                "static_graph set to True.")
    elif not r.find_unused:
        base += ("You can enable unused parameter detection by passing the keyword argument "
                 "`find_unused_parameters=True` to `torch.nn.parallel.DistributedDataParallel`, and by \n"
                 + outputs + bug)
    else:
        base += ("Since `find_unused_parameters=True` is enabled, this likely  means that not all `forward` "
                 "outputs participate in computing loss. You can fix this by " + outputs + bug)
    missing = " ".join(str(i) for i in range(len(r.params)) if i not in r.ready)
    return (base + f"\nParameter indices which did not receive grad for rank {r.rank}: {missing}"
            "\n In addition, you can set the environment variable TORCH_DISTRIBUTED_DEBUG to either INFO or DETAIL "
            "to print out information about which particular parameters did not receive gradient on this rank as "
            "part of this error")


def _leaves(out) -> list:
    """The leaves of a module's output as torch.utils._pytree flattens it: tuples and lists in
    order, a dict's values in its keys' order, nested."""
    if isinstance(out, (tuple, list)):
        return [leaf for item in out for leaf in _leaves(item)]
    if isinstance(out, dict):
        return [leaf for item in out.values() for leaf in _leaves(item)]
    return [out]


def _rebuilt(out, leaves):
    """``out``'s structure over the next of ``leaves`` (the inverse of :func:`_leaves`)."""
    if isinstance(out, ReturnTuple):
        return ReturnTuple(out.kind, out.fields, [_rebuilt(item, leaves) for item in out])
    if isinstance(out, (tuple, list)):
        return type(out)(_rebuilt(item, leaves) for item in out)
    if isinstance(out, dict):
        return {k: _rebuilt(v, leaves) for k, v in out.items()}
    return next(leaves)


def _reached_accumulators(out) -> set:
    """The ids of the AccumulateGrad nodes the graph reaches from the output's grad_fns
    (Reducer::prepare_for_backward's search, over _find_tensors(output))."""
    outs = _leaves(out)
    stack = [t.grad_fn for t in outs if isinstance(t, Tensor) and t.grad_fn is not None]
    stack += [t.grad_accumulator for t in outs if isinstance(t, Tensor) and t.grad_fn is None
              and t.requires_grad and t.grad_accumulator is not None]
    seen: set = set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        for e in node.edges:
            if e is not None and id(e.node) not in seen:
                stack.append(e.node)
    return seen


def finalize(reducers: list[Reducer]) -> None:
    """The collectives of one synchronized backward on every rank, then ``finalize_backward``."""
    first = reducers[0]
    ws = len(reducers)
    B = first.B
    hook = first.spec.comm_hook
    # the parameters some rank used (local_used_map_ all-reduced), for find_unused_parameters and static_graph
    used = set().union(*(r.local_used for r in reducers))
    failed: dict = {}    # Reducer -> the error its finalize_bucket_dense raised (it writes no later .grad)
    if first.static and first.static_used is None:
        for r in reducers:
            r.static_used = used
    if first.spec.skip_all_reduce_unused_params and any(r.unused != first.unused for r in reducers):
        raise ProblemError(first.spec.loc, "skip_all_reduce_unused_params with parameters unused on some ranks "
                                           "only is not modelled (PyTorch requires the same unused parameters "
                                           "on every rank: the ranks would all-reduce different buckets)")
    for j, (k, _, _) in enumerate(first.launched):
        flats = [r.operand(j) for r in reducers]
        results = reduce_bucket(B, hook, flats, ws, first.dtype)
        for r, result in zip(reducers, results):
            _, _, rec = r.launched[j]
            r.results[j] = result
            if rec is not None:
                rec.returned = _returned(result)
        for r, result in zip(reducers, results):
            if not r.finalize_queued:
                continue
            if r in failed:
                continue
            if isinstance(result, HookNumber):   # finalize_backward: PythonCommHook::parseHookResult
                raise TorchError("RuntimeError", f"Unable to cast {result.text} to Tensor", "ddp_comm_hook_number")
            offset = 0
            for i in r.buckets[k]:
                _, t = r.params[i]
                view, n = _bucket_view(B, result, offset, t, r.dtype)
                globally_used = (not (r.static or r.find_unused) or i in used
                                 or (r.static and r.static_used is not None and i in r.static_used))
                if globally_used and r.view:
                    try:
                        r.check_view(i)
                    except TorchError as exc:
                        failed[r] = exc
                        break
                if globally_used:
                    t.grad = view
                offset += n
    if failed and any(r.early_finalize is not None for r in reducers):
        raise ProblemError(first.spec.loc, EARLY_FINALIZE_THEN.format(what="it raised"))
    if failed:
        if len(failed) != len(reducers):
            raise ProblemError(first.spec.loc, "a .grad that is not the bucket view under gradient_as_bucket_view "
                                               "on some ranks only (the others finish the backward and wait for "
                                               "them in the next collective) is not modelled yet")
        raise next(iter(failed.values()))
    for r in reducers:
        r.early_finalize = None
        if r.finalize_queued:
            r.expect_hooks = False
            r.finalize_queued = False
            r.require_finalize = False
            r.first_hook_called = False
            if r.find_unused and not r.static:
                r.local_used = set()
            if r.static_later() and r.should_rebuild():
                r.rebuilt_order.extend(r.unused)


def reduce_bucket(B, hook, flats: list, ws: int, dtype: str) -> list:
    """One bucket's collective: each rank's result."""
    if hook is None:        # the reducer's own allreduce: the buffers (grad / world_size) summed
        return [_sum(B, flats)] * ws
    if hook.builtin in ("allreduce", "powerSGD"):   # allreduce_hook, and powerSGD_hook's first iterations
        # (default._allreduce_fut): buffer.div_(world_size), all_reduce
        parts = [B.div(f, B.scalar(ws)) for f in flats]
        return [_sum(B, parts)] * ws
    if hook.builtin in COMPRESSED:    # fp16_compress_hook / bf16_compress_hook: rounded (adjoint.values.lowprec)
        return [compress_allreduce(B, flats, COMPRESSED[hook.builtin], dtype, hook.loc)] * ws
    if hook.does and reduces(hook.does):   # does: reads the other ranks (all_reduce): run here, on every rank
        flats = run_writes(hook.does, B, flats, ws)
    if hook.returns is None:          # the Future holds the buffer the hook wrote
        return list(flats)
    if not _tensor_valued(hook.returns):   # the Future holds a Python number
        return [HookNumber(repr(_python_number(hook.returns, ws)))] * ws
    results = evaluate(hook.returns, B, flats, ws)
    shape = tuple(B.shape(flats[0]))
    for value in results:
        if isinstance(value, Fraction) or tuple(B.shape(value)) != shape:
            raise ProblemError(hook.returns.loc, f"the comm hook must return a tensor of the bucket's shape "
                                                 f"{list(shape)}")
    return results


@dataclass(frozen=True)
class HookNumber:
    """A written comm hook's result that is a Python number, not a tensor (``returns: "world_size * 0.5"``):
    its call returns it, and finalize_backward cannot cast it (``text``: its Python repr)."""

    text: str


def _returned(result):
    """What a comm hook call's record says it returned: nothing for a number (not a tensor)."""
    return None if isinstance(result, HookNumber) else result


def _tensor_valued(e) -> bool:
    """Whether a written comm hook's expression is a tensor: it reads ``bucket`` or calls ``all_reduce``."""
    if isinstance(e, Call):
        return True
    if isinstance(e, Name):
        return e.id == "bucket"
    if isinstance(e, Bin):
        return _tensor_valued(e.left) or _tensor_valued(e.right)
    if isinstance(e, Neg):
        return _tensor_valued(e.operand)
    return False


def _python_number(e, ws: int):
    """A number-valued comm hook expression as Python computes it in the hook (an integral literal an
    int, another a float, ``/`` true division), so its repr is the one PyTorch's message shows."""
    if isinstance(e, Num):
        return int(e.value) if e.value.denominator == 1 else float(e.value)
    if isinstance(e, Name):
        return ws
    if isinstance(e, Neg):
        return -_python_number(e.operand, ws)
    a, b = _python_number(e.left, ws), _python_number(e.right, ws)
    return {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "/": lambda: a / b}[e.op]()


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


def _is_complex(t: Tensor, dtype: str) -> bool:
    return (t.dtype or dtype).startswith("complex")


def _into_bucket(B, value, t: Tensor, dtype: str):
    """A parameter's gradient as its slice of the flat bucket: a complex parameter's bucket holds
    its real view (``torch.view_as_real``, each element's real and imaginary parts interleaved),
    so the buffer a comm hook sees is real (float64 for complex128), twice the parameter's numel."""
    if _is_complex(t, dtype):
        value = B.view_as_real(value)
        return B.reshape(value, (2 * _numel(t.shape),))
    return B.reshape(value, (_numel(t.shape),))


def _bucket_view(B, flat, offset: int, t: Tensor, dtype: str):
    """Parameter ``t``'s view of a flat bucket from ``offset`` (the inverse of :func:`_into_bucket`),
    and how many elements of the buffer it takes."""
    n = _numel(t.shape)
    if _is_complex(t, dtype):
        part = B.reshape(B.index(flat, (slice(offset, offset + 2 * n),)), tuple(t.shape) + (2,))
        view = B.view_as_complex(part)
        view.dtype = t.dtype or dtype   # a gradient knows its tensor's dtype (adjoint.values.complexes.Cx)
        return view, 2 * n
    return B.reshape(B.index(flat, (slice(offset, offset + n),)), t.shape), n


# ----------------------------------------------------------------------------- the ranks in lockstep

NOTHING_TO_REDUCE = ("DistributedDataParallel is not needed when a module doesn't have any parameter that requires a "
                     "gradient.")


def new_run(problem, variant, backend) -> VariantRun:
    """One rank's run, set up as :func:`adjoint.engine.passes.run_variant` sets it up: each rank's
    script builds the model, so the constructors' warnings (``during: setup``) are on every rank,
    before DistributedDataParallel's own (a constructor's error is refused at load in a
    ``distributed:`` file)."""
    from adjoint.engine.layers.setup_warnings import construct
    rt = Runtime(backend, problem.dtype)
    if construct(rt, problem.model) is not None:
        raise AssertionError("a constructor's error in a distributed: file is refused at load")
    reg = Registrations(variant.hooks, rt)
    model = Model(problem, variant.inputs, rt, reg)
    reg.model = model
    rt.hooks_runner = HookRunner(rt, reg)
    nested_runners(rt)
    run = VariantRun(problem, variant, rt, model, stepped=variant.steps is not None, reg=reg)
    steps = variant.steps if variant.steps is not None else tuple(Step(k, variant.loc) for k in DEFAULT_STEPS)
    run.steps = tuple(steps)
    return run


def run_ranks(problem, name: str, make_backend) -> list[VariantRun]:
    """Every rank's run of variant ``name``: DDP wraps the model, then the hooks are registered,
    then the steps run on all ranks, one step at a time. A PyTorch error raised on every rank
    at one step ends every rank's run there (each rank's ``error``). One raised on some ranks
    only ends theirs; the others run on alone until they wait in a collective the dead ranks
    never join (their ``error`` then says where: ``waits``), and what cannot be told exactly is
    refused."""
    spec = problem.distributed
    runs = [new_run(p, p.variant(name), make_backend()) for p in spec.ranks]
    reducers = [Reducer(spec, run, p.dtype, rank) for rank, (run, p) in enumerate(zip(runs, spec.ranks))]
    for r in reducers:
        r.order_source = reducers[0]
    steps = runs[0].steps
    variant = runs[0].variant
    later = variant.registered_later()
    hook = spec.comm_hook
    if not any(d.requires_grad for m in problem.model.walk() for d in m.params):
        for run in runs:   # DistributedDataParallel(model) itself raises, on every rank
            run.error = RunError("RuntimeError", NOTHING_TO_REDUCE, "setup", "ddp_constructor", -1)
        return runs
    for r in reducers:
        r.construct()
    if hook is not None and hook.builtin == "powerSGD" and hook.state_arg("start_powerSGD_iter") <= 1 and (
            hook.state_arg("use_error_feedback") or hook.state_arg("warm_start")):
        for run in runs:     # PowerSGDState(...) raises, at the comm hook's registration
            run.error = RunError("ValueError", POWERSGD_START, "register", "ddp_powersgd_state", -1)
        return runs
    if hook is not None and hook.builtin == "bf16_compress":
        for run in runs:     # register_comm_hook's _check_comm_hook, by the hook's __name__ (a CPU build)
            run.error = RunError("TypeError", BF16_ON_CPU, "register", "ddp_bf16_cpu", -1)
        return runs
    refused = []
    for run in runs:   # PyTorch refusing a registration: each rank's error, before the first step
        try:
            for hook in variant.hooks:
                if hook.when == "before_forward" and hook.index not in later:
                    run.reg.register(hook.index)
        except TorchError as exc:
            refused.append((run, exc))
    if refused:
        if len(refused) != len(runs):
            raise ProblemError(variant.loc, "PyTorch refuses a hook's registration on some ranks only: not modelled")
        for run, exc in refused:
            run.error = RunError(exc.type, exc.message, "register", exc.cause, -1)
        return runs
    first_forward = first_backward = True
    died: dict = {}      # rank -> (the step it raised in, the buckets it had launched in that pass)
    for index, step in enumerate(steps):
        live = [i for i, run in enumerate(runs) if run.error is None]
        if not live:
            break
        synced = spec.synced(step)
        during = "backward" if step.kind == "backward" else "forward"
        errors = []
        bufsync = step.kind == "forward" and any(reducers[i].syncs_buffers() for i in live)
        if bufsync and (died or 0 not in live):
            raise ProblemError(step.loc, "under DistributedDataParallel a forward that broadcasts the buffers "
                                         "(broadcast_buffers) after some ranks raised is not modelled yet")
        for r in reducers:   # rank 0's buffers as the broadcast reads them, before any rank's forward
            r.buffer_source = [t.value for t in reducers[0].buffers] if bufsync else None
        for i in live:   # a forward's inputs may be per rank: each its own step
            run, reducer = runs[i], reducers[i]
            if died and step.kind == "forward" and _rebuilds(reducer):
                _block(run, index, "forward", died, "the broadcast of the rebuilt buckets (sync_bucket_indices, "
                                                    "at the start of the forward)")
                continue
            try:
                _step(run, reducer, run.steps[index], index, synced, first_forward, first_backward, later)
            except TorchError as exc:
                errors.append((run, exc))
        if bufsync and errors and len(errors) != len(runs):
            raise ProblemError(step.loc, "under DistributedDataParallel an error on some ranks only in a forward "
                                         "that broadcasts the buffers (broadcast_buffers) is not modelled yet")
        ran = [i for i in live if runs[i].error is None or i in {runs.index(run) for run, _ in errors}]
        live = [i for i in live if runs[i].error is None]
        if step.kind == "backward" and not errors and not died:
            errors = _end_backward(runs, reducers, step)
        if errors and any(reducers[i].early_finalize is not None for i in ran):
            raise ProblemError(step.loc, EARLY_FINALIZE_THEN.format(what="the backward raised"))
        if errors and len(errors) == len(runs):     # every rank: each rank's error
            for run, exc in errors:
                run.error = RunError(exc.type, exc.message, getattr(exc, "during", None) or during, exc.cause, index)
            _complete_launched(reducers, strict=False)
            return runs
        for run, exc in errors:                     # some ranks only: the others run on to a collective
            i = runs.index(run)
            run.error = RunError(exc.type, exc.message, getattr(exc, "during", None) or during, exc.cause, index)
            died[i] = (index, len(reducers[i].launched) if step.kind == "backward" else 0)
        if died and step.kind == "backward":
            for i in live:
                if runs[i].error is None:
                    _survivor_backward(runs[i], reducers[i], ran, reducers, died, index, step)
        for i in live:   # a rank waiting from now on joins no later collective either
            if runs[i].error is not None and i not in died:
                died[i] = (index, len(reducers[i].launched))
        if step.kind == "forward":
            first_forward = False
        elif step.kind == "backward":
            first_backward = False
    return runs


def _rebuilds(r) -> bool:
    """Whether this rank's next forward broadcasts rebuilt buckets (Reducer::rebuild_buckets after
    ensure_prior_reduction_finished, which raises first)."""
    return not r.require_finalize and bool(r.rebuilt_order) and r.should_rebuild()


def _block(run, index: int, during: str, died: dict, what: str, upto=None) -> None:
    """This rank waits in a collective the ranks in ``died`` never join: its run ends there
    (``upto``: the call record it waits in; the calls after it are never made)."""
    if upto is not None:
        pos = next(k for k, rec in enumerate(run.rt.log) if rec is upto)
        del run.rt.log[pos + 1:]
        # nor the warnings issued after that call (DDP sweep seed 65, problem 10: a full hook's
        # no-inputs warning later in the backward)
        run.rt.warnings[:] = [w for w in run.rt.warnings if w.at < 0 or w.at <= pos]
    if during == "backward" and run.passes and run.passes[-1].step == index:
        run.passes.pop()      # the backward never returns: not a finished pass
    ranks = sorted(died)
    names = ", ".join(str(r) for r in ranks)
    message = (f"waits in {what} for rank(s) {names}, which raised before joining it: PyTorch raises gloo's "
               "RuntimeError here when their processes end ('Connection closed by peer') or when the process "
               "group's timeout passes; those words (a port, a time) are not predicted")
    run.error = RunError("RuntimeError", message, during, "ddp_blocked", index, {"for": ranks, "in": what})


def _survivor_backward(run, r, ran: list, reducers: list, died: dict, index: int, step) -> None:
    """The end of a backward on a rank that did not raise while other ranks did: where it waits
    for them, or (a pass that reduces nothing) how it runs on. ``ran``: the ranks that ran this
    backward (those that raised in it included)."""
    hook = r.spec.comm_hook
    written = hook is not None and hook.builtin is None
    sync = written and _hook_collective(hook)           # the hook's own all_reduce, in the call
    nocoll = written and not sync                       # a written hook that reduces nothing: no wait for it
    usedmap = r.find_unused and not r.static            # the used-parameter map's all-reduce, waited in finalize
    joined = min(n if at == index else 0 for at, n in died.values())   # buckets every dead rank launched
    if sync:   # the written hook's all_reduce runs in the hook call: the results of the joined buckets are known
        for j in range(min(joined, len(r.launched))):
            results = reduce_bucket(r.B, hook, [reducers[k].operand(j) for k in ran], len(reducers), r.dtype)
            for k, result in zip(ran, results):
                rec = reducers[k].launched[j][2]
                if rec is not None:
                    rec.returned = _returned(result)
    if sync and len(r.launched) > joined:
        k = r.launched[joined][0]
        _block(run, index, "backward", died, f"the all_reduce of its comm hook call on bucket {k}",
               upto=r.launched[joined][2])
        return
    if r.delay_queued:          # static graph, first iteration: the delayed all-reduce at the end of the backward
        r.delay_queued = False
        start = len(r.launched)
        try:
            r.delay_all_reduce()
        except TorchError as exc:   # finalize_backward's assert: after the launches, so a written hook's
            if sync and len(r.launched) > start:   # all_reduce in the first of them waits first
                _block(run, index, "backward", died, f"the all_reduce of its comm hook call on bucket "
                                                     f"{r.launched[start][0]}", upto=r.launched[start][2])
            else:
                run.error = RunError(exc.type, exc.message, "backward", exc.cause, index)
                if nocoll:   # the written hook's Futures completed in their calls, from this rank's buffers
                    _complete_local(r, len(reducers))
            return
        if sync:
            _block(run, index, "backward", died, f"the all_reduce of its comm hook call on bucket "
                                                 f"{r.launched[start][0]}", upto=r.launched[start][2])
        elif nocoll:
            _block(run, index, "backward", died, "finalize_backward's wait for the all-reduce of the used-parameter "
                                                 "map (static graph, first iteration)")
        else:
            _block(run, index, "backward", died, "finalize_backward's wait for the buckets' all-reduces")
        return
    if r.finalize_queued:
        if sync or nocoll:
            if not usedmap:
                raise ProblemError(step.loc, "under DistributedDataParallel some ranks raise here, and the others' "
                                             "written comm hook leaves them no collective to wait in (all joined, or "
                                             "none): they would finish the backward alone; not modelled yet")
            _block(run, index, "backward", died, "finalize_backward's wait for the all-reduce of the used-parameter "
                                                 "map (find_unused_parameters)")
            return
        if joined >= len(r.launched):
            raise ProblemError(step.loc, "under DistributedDataParallel some ranks raise here after launching every "
                                         "bucket: whether their all-reduces complete before their processes end is "
                                         "a race; not modelled")
        _block(run, index, "backward", died, f"finalize_backward's wait for the all-reduce of bucket "
                                             f"{r.launched[joined][0]}")
        return
    if r.expect_hooks and r.view and r.launched:
        raise ProblemError(step.loc, "under DistributedDataParallel some ranks raise here while the others leave "
                                     "their reduction pending with gradient_as_bucket_view (.grad, the bucket views, "
                                     "would take all-reduces that never complete): not modelled yet")
    # a pass that reduces nothing (no_sync), or whose reduction stays pending (a bucket never complete):
    # nothing waits, the rank runs on; the all-reduces it launched never complete (no value)
    if nocoll and r.launched:
        raise ProblemError(step.loc, "under DistributedDataParallel some ranks raise here while the others leave "
                                     "their reduction pending with a comm hook that reduces nothing: not modelled yet")
    _end_backward([run], [r], step)
    for j, (_, _, rec) in enumerate(r.launched):
        if rec is not None and not (sync and j < joined):   # a written hook's joined all_reduce has its value
            rec.returned = None
    r.results = {}


def hook_step(run, reg, step) -> None:
    """A rank's ``register`` / ``remove`` / ``zero_grad`` step (DDP's and fully_shard's alike)."""
    if step.kind == "register":
        for i in step.hooks:
            reg.register(i)
    elif step.kind == "remove":
        for i in step.hooks:
            reg.remove(i)
    else:
        for t in run.model.leaves.values():
            t.grad = None


def _complete_local(r: Reducer, world_size: int) -> None:
    """A rank raising at the end of a backward after it launched buckets while another rank is gone:
    a written comm hook without a collective (``bucket * 2``) completes its Future at once from
    this rank's own buffer, so its result is known (seed 64, problem 27 of the DDP sweep: static
    graph, the delayed all-reduce's launches, then finalize_backward's assert); a hook with one
    waits for the gone rank and never completes (its result stays unknown)."""
    hook = r.spec.comm_hook
    if hook is None or hook.builtin is not None or _hook_collective(hook):
        return
    for j, (_, _, rec) in enumerate(r.launched):
        if rec is not None and rec.returned is None:
            result = reduce_bucket(r.B, hook, [r.operand(j)], world_size, r.dtype)[0]
            r.results[j] = result
            rec.returned = _returned(result)


def _hook_collective(hook) -> bool:
    """Whether a written comm hook calls all_reduce (synchronously, in the hook call)."""
    def has(e) -> bool:
        if isinstance(e, Call):
            return True
        if isinstance(e, Bin):
            return has(e.left) or has(e.right)
        if isinstance(e, Neg):
            return has(e.operand)
        return False
    return reduces(hook.does) or (hook.returns is not None and has(hook.returns))


def _end_backward(runs: list, reducers: list, step) -> list:
    """What the end of a backward does on every rank: _DDPSink's queued delay_all_reduce (static
    graph, first iteration), then the Reducer's finalize_backward when its last bucket was
    launched (the collectives done across the ranks). Returns the errors PyTorch raises there
    (rank, TorchError): finalize_backward refusing a Reducer no forward armed."""
    start = [len(run.rt.log) for run in runs]
    armed = [r.expect_hooks for r in reducers]
    if any(r.delay_queued for r in reducers):
        if not all(r.delay_queued for r in reducers):
            raise ProblemError(step.loc, "the ranks differ in whether _DDPSink's delayed all-reduce runs: not "
                                         "modelled")
        errors = []
        for run, r in zip(runs, reducers):
            r.delay_queued = False
            try:
                r.delay_all_reduce()
            except TorchError as exc:
                errors.append((run, exc))
        if errors:   # every rank (each ran the same first iteration inside no_sync)
            return errors
    queued = [r.finalize_queued for r in reducers]
    if len({r.early_finalize for r in reducers}) > 1:
        raise ProblemError(step.loc, "the ranks differ in whether their last bucket completed inside a reentrant "
                                     "backward (finalize_backward at its end on some ranks only): not modelled")
    locals_ = [{name: t.grad for name, t in r.params} for r in reducers]
    if any(queued):
        if not all(queued) or len({len(r.launched) for r in reducers}) != 1:
            raise ProblemError(step.loc, "the ranks launch different buckets in this backward (a parameter gets a "
                                         "gradient on some ranks only): they would wait for each other in a "
                                         "collective; not modelled")
        try:
            finalize(reducers)
        except TorchError as exc:   # every rank's finalize_backward raises the same
            return [(run, exc) for run in runs]
    else:
        _complete_launched(reducers)
    for r, q, before, a in zip(reducers, queued, locals_, armed):
        buckets = tuple((k, tuple(r.params[i][0] for i in r.buckets[k]), flat, r.results.get(j))
                        for j, (k, flat, _) in enumerate(r.launched)) if r.expect_hooks or q else ()
        r.history.append(PassReduction(len(r.run.passes), q, buckets, before, a))
        if q or not r.expect_hooks:
            r.launched, r.results, r.written = [], {}, {}
    for run, s in zip(runs, start):
        last = run.passes[-1]
        if len(run.rt.log) > s:   # calls made when the backward ends belong to it
            last.calls = range(last.calls.start, len(run.rt.log))
        last.grads = run.grads()
    return []


def _complete_launched(reducers: list, strict: bool = True) -> None:
    """Buckets launched in a backward whose reduction does not finish: their collectives still
    complete (every rank launched them), so a comm hook's result is known; .grad is not written."""
    counts = {len(r.launched) for r in reducers}
    if len(counts) != 1:
        if not strict:
            return
        raise ProblemError(reducers[0].spec.loc, "the ranks launch different buckets before a reduction that does "
                                                 "not finish: they would wait for each other; not modelled")
    first = reducers[0]
    for j in range(len(first.launched)):
        if all(r.launched[j][2] is None or r.launched[j][2].returned is not None for r in reducers):
            continue
        results = reduce_bucket(first.B, first.spec.comm_hook, [r.operand(j) for r in reducers], len(reducers),
                                first.dtype)
        for r, result in zip(reducers, results):
            r.results[j] = result
            if r.launched[j][2] is not None:
                r.launched[j][2].returned = _returned(result)


def _step(run: VariantRun, reducer: Reducer, step, index: int, synced: bool, first_forward: bool,
          first_backward: bool, later: set) -> None:
    variant, reg = run.variant, run.reg
    if step.kind == "forward":
        reducer.pre_forward(synced)
        if reducer.buffer_source is not None:
            reducer.sync_buffers(reducer.buffer_source)
        run.model.root_wrapper = lambda out: reducer.post_forward(synced, out)
        run_forward(run, step)
        run.forward_steps.append(index)
        if first_forward:
            for hook in variant.hooks:
                if hook.when == "after_forward" and hook.index not in later:
                    reg.register(hook.index)
            reg.check_targets(run.forward.names)
    elif step.kind == "backward":
        bw = step.backward or variant.backward
        if bw is not None and bw.second is not None and bw.second.create_graph and (reducer.expect_hooks
                                                                                    or reducer.static):
            raise ProblemError(step.loc, CREATE_GRAPH)
        request = backward_request(run.problem, bw, run, run.rt.B)
        if first_backward:
            for hook in variant.hooks:
                if hook.remove == "before_backward":
                    reg.remove(hook.index)
        run_backward(run, request, index)
        if first_backward:
            for hook in variant.hooks:
                if hook.remove == "after_backward":
                    reg.remove(hook.index)
    elif step.kind in ("register", "remove", "zero_grad"):
        hook_step(run, reg, step)
    elif step.kind == "step" and getattr(step, "optimizer", None) is not None:
        # each rank's own optimizer over its own parameters and .grad (the mean after a reduced
        # backward, the rank's accumulation after a no_sync one), as in one process
        from adjoint.engine.adam import optimizer_step
        optimizer_step(run, step.optimizer)
    elif step.kind == "step":
        sgd(run, step.lr, index)
    elif step.kind in ("clip_grad_norm", "clip_grad_value"):
        # clip_grad_norm_ over model.parameters() on each rank: a local norm of this rank's .grad
        # (no collective), written in place -- into the bucket views with gradient_as_bucket_view
        from adjoint.engine.clip import clip_step
        clip_step(run, step)



__all__ = ["Reducer", "RunError", "assign_buckets", "finalize", "run_ranks"]
