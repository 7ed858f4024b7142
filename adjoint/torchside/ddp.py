"""A distributed file run for real: ``world_size`` processes, torch.distributed with gloo on
127.0.0.1 (rank 0's TCPStore on a port the OS assigns, handed to the other ranks), each
wrapping its model in DistributedDataParallel and running the steps.

:func:`run_distributed` starts the processes (forked from this one: torch is already
imported, so they start in well under a second), waits for them within ``timeout`` seconds
and ends every one it started, also when one fails or hangs. Each returns the observed JSON
of :func:`adjoint.torchside.run.run_variant` as its rank saw it; a comm hook call is logged
as ``{hook: null, kind: comm_hook, target: bucketK, label: comm_hook@bucketK, args: {bucket,
parameters}, returned}``, the bucket's buffer copied when the hook is called.
"""

from __future__ import annotations

import contextlib
import functools
import os
import queue
import time
import traceback
from datetime import timedelta

import torch
import torch._dynamo  # noqa: F401  DistributedDataParallel.__init__ imports it (8-14 s here): once, before forking
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook
from torch.nn.parallel import DistributedDataParallel

from adjoint.format.errors import ProblemError
from adjoint.format.comm_hook import OPS
from adjoint.format.distributed import cap_arg
from adjoint.format.syntax import Bin, Call, Name, Neg, Num
from adjoint.torchside.rank_run import run_one_rank
from adjoint.torchside.run import Session, run_steps
from adjoint.torchside.values import snap

#: the file's built-in comm hooks: torch.distributed.algorithms.ddp_comm_hooks.default_hooks
BUILTIN_HOOKS = {"allreduce": default_hooks.allreduce_hook, "fp16_compress": default_hooks.fp16_compress_hook,
                 "bf16_compress": default_hooks.bf16_compress_hook}
DEFAULT_TIMEOUT = 90.0     # seconds for the whole run (process start, init, every step)


def run_distributed(problem, variant: str, dtype: str, timeout: float = DEFAULT_TIMEOUT,
                    alone: bool = False) -> list[dict]:
    """The observed JSON of every rank, in rank order. Raises RuntimeError (with the failing
    rank's traceback) when a process fails, and TimeoutError when they do not finish in time.
    ``alone``: a run where some ranks raise and the others wait for them in a collective: each
    process ends as the script would (its process group not destroyed), so the waiting ranks
    see their peers go."""
    return run_distributed_many([(problem, variant, dtype)], timeout, alone)[0]


def run_distributed_many(jobs: list, timeout: float = DEFAULT_TIMEOUT, alone: bool = False) -> list[list[dict]]:
    """Several (problem, variant, dtype) runs of one world_size in one start of the processes
    and their process group (each run wraps its own model in a new DistributedDataParallel):
    every run's observed JSON per rank, in job order. ``timeout`` is for the whole batch."""
    world_size = jobs[0][0].distributed.world_size
    if any(p.distributed.world_size != world_size for p, _, _ in jobs):
        raise ValueError("the runs of one batch must have one world_size")
    ctx = mp.get_context("fork")
    results = ctx.Queue()
    ports = ctx.Queue()     # rank 0's store port, once per other rank (the OS picks it: no race for a port)
    procs = [ctx.Process(target=_worker, args=(jobs, rank, world_size, ports, results, timeout, alone), daemon=True)
             for rank in range(world_size)]
    out: dict[int, list] = {}
    deadline = time.monotonic() + timeout
    try:
        for p in procs:
            p.start()
        while len(out) < len(procs):
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"the {world_size} DDP processes did not finish within {timeout:.0f} s")
            try:
                status, rank, payload = results.get(timeout=min(left, 1.0))
            except queue.Empty:
                dead = [p for p in procs if p.exitcode not in (None, 0)]
                if dead:
                    raise RuntimeError(f"a DDP process exited with code {dead[0].exitcode} before reporting")
                continue
            if status != "ok":
                raise RuntimeError(f"rank {rank} failed:\n{payload}")
            out[rank] = payload
    finally:
        for p in procs:
            if p.is_alive():
                p.kill()
        for p in procs:
            p.join(5)
        results.close()
        ports.close()
    return [[out[r][j] for r in range(len(procs))] for j in range(len(jobs))]


def _worker(jobs: list, rank: int, world_size: int, ports, results, timeout: float, alone: bool = False):
    try:
        torch.set_num_threads(1)
        wait = timedelta(seconds=timeout)
        if rank == 0:   # the rendezvous store, on a port the OS gives it
            store = dist.TCPStore("127.0.0.1", 0, world_size, is_master=True, timeout=wait, wait_for_workers=False)
            for _ in range(world_size - 1):
                ports.put(store.port)
        else:
            store = dist.TCPStore("127.0.0.1", ports.get(timeout=timeout), world_size, is_master=False, timeout=wait)
        dist.init_process_group("gloo", store=store, rank=rank, world_size=world_size, timeout=wait)
        if alone:    # reported, then the process ends as the script would: the ranks waiting for it see it go
            results.put(("ok", rank, [run_rank(problem, variant, dtype, rank) for problem, variant, dtype in jobs]))
            return
        try:
            observed = [_runner(problem)(problem, variant, dtype, rank) for problem, variant, dtype in jobs]
        finally:
            dist.destroy_process_group()
        results.put(("ok", rank, observed))
    except BaseException:   # reported to the parent, which ends every process
        results.put(("error", rank, traceback.format_exc()))
    finally:
        results.close()
        results.join_thread()
        os._exit(0)


def _runner(problem):
    """One rank's run of a file: DistributedDataParallel's, or fully_shard's (adjoint.torchside.fsdp)."""
    if problem.distributed.wrap == "fully_shard":
        from adjoint.torchside.fsdp import run_fsdp_rank
        return run_fsdp_rank
    return run_rank


class DDPSession(Session):
    """A Session whose root module is called through its DistributedDataParallel wrapper."""

    ddp = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.comm_futures: list = []     # every comm hook call's Future, in call order

    def call_module(self, decl, args, kwargs):
        if decl is not self.p.model or self.ddp is None:
            return super().call_module(decl, args, kwargs)
        label = decl.label
        inner = self.modules[label]
        self.modules[label] = self.ddp
        try:
            return super().call_module(decl, args, kwargs)
        finally:
            self.modules[label] = inner


def run_rank(problem, variant: str, dtype: str, rank: int) -> dict:
    return run_one_rank(problem, variant, dtype, rank, _wrap_and_run, DDPSession)


def _wrap_and_run(s: DDPSession, spec, steps, passes: list) -> dict | None:
    """DistributedDataParallel around the root, the comm hook registered, the steps; every comm
    hook's Future given the time to complete."""
    kwargs = {"find_unused_parameters": spec.find_unused_parameters, "static_graph": spec.static_graph,
              "gradient_as_bucket_view": spec.gradient_as_bucket_view}
    if spec.bucket_cap_mb is not None:
        kwargs["bucket_cap_mb"] = cap_arg(spec.bucket_cap_mb)
    if spec.bucket_cap_mb_list:
        kwargs["bucket_cap_mb_list"] = [cap_arg(c) for c in spec.bucket_cap_mb_list]
    if spec.broadcast_buffers is not None:   # passed only when the file gives it: PyTorch warns when it is given
        kwargs["broadcast_buffers"] = spec.broadcast_buffers
    if spec.forward_sync_buffers is not None:
        kwargs["forward_sync_buffers"] = spec.forward_sync_buffers
    if not spec.init_sync:
        kwargs["init_sync"] = False
    if spec.check_reduction:
        kwargs["check_reduction"] = True
    if spec.skip_all_reduce_unused_params:
        kwargs["skip_all_reduce_unused_params"] = True
    try:
        s.ddp = DistributedDataParallel(s.root, **kwargs)
    except RuntimeError as exc:   # the constructor refuses the module (no parameter requires grad)
        return {"type": "RuntimeError", "message": str(exc), "during": "setup", "after_call": None}
    error = None
    if spec.comm_hook is not None:
        try:
            state = (powerSGD_hook.PowerSGDState(None, **dict(spec.comm_hook.state))
                     if spec.comm_hook.builtin == "powerSGD" else None)
        except ValueError as exc:   # PowerSGDState refuses its arguments: the registration line raises
            error = {"type": "ValueError", "message": str(exc), "during": "register", "after_call": None}
        else:
            try:
                s.ddp.register_comm_hook(state, _logged_hook(s, spec.comm_hook, world_size=dist.get_world_size()))
            except (TypeError, ValueError) as exc:   # _check_comm_hook refuses it (bf16_compress_hook on CPU)
                error = {"type": type(exc).__name__, "message": str(exc), "during": "register", "after_call": None}
    if error is None:
        error = _run_steps(s, steps, passes, spec)
    _settle(s.comm_futures)
    return error


def _settle(futures: list, patience: float = 5.0) -> None:
    """Give every comm hook's Future DDP never waited for (a backward that raised) the time to
    complete, so its call records its value: a collective every rank launched completes within
    milliseconds; one some rank never joined never does (no value; not waited for beyond
    ``patience`` seconds, so a run does not hang on it)."""
    deadline = time.monotonic() + patience
    for fut in futures:
        while not fut.done() and time.monotonic() < deadline:
            time.sleep(0.005)


def _logged_hook(s: Session, hook, world_size: int):
    """The comm hook registered: the file's hook, each call logged. A built-in hook's wrapper
    carries its name and signature (functools.wraps), so register_comm_hook's _check_comm_hook
    judges it as it judges the hook itself (it refuses bf16_compress_hook by name on a CPU build)."""
    names: dict = {}    # a tied parameter by its first name, as named_parameters() (and DDP's Reducer) list it
    for name, t in s.params.items():
        names.setdefault(id(t), name)
    builtin = (powerSGD_hook.powerSGD_hook if hook.builtin == "powerSGD"
               else BUILTIN_HOOKS[hook.builtin] if hook.builtin is not None else None)

    def comm_hook(state, bucket):     # state: the PowerSGDState registered with it (powerSGD), else None
        k = bucket.index()
        rec = {"hook": None, "label": f"comm_hook@bucket{k}", "kind": "comm_hook", "target": f"bucket{k}",
               "args": {"bucket": snap(bucket.buffer().clone(), s.dtype),
                        "parameters": [names[id(p)] for p in bucket.parameters()]},
               "returned": None}
        s.log.append(rec)
        if builtin is not None:
            fut = builtin(state, bucket)
        else:
            buffer = bucket.buffer()
            for w in hook.does:     # written in place, in the hook call
                _write(w, buffer, world_size)
            fut = torch.futures.Future()
            fut.set_result(buffer if hook.returns is None else _evaluate(hook.returns, buffer, world_size))

        def done(f):
            value = f.value()
            value = value[0] if isinstance(value, list) else value
            if isinstance(value, torch.Tensor):   # a number is handed on as it is: finalize_backward refuses it
                rec["returned"] = snap(value.clone(), s.dtype)
            return value
        out = fut.then(done)
        s.comm_futures.append(out)
        return out
    return comm_hook if builtin is None else functools.wraps(builtin)(comm_hook)


def _write(w, buffer: torch.Tensor, world_size: int) -> None:
    """One ``does:`` line of a written comm hook (adjoint.format.comm_hook.BucketWrite), in torch."""
    if w.op == "all_reduce":
        dist.all_reduce(buffer)
        return
    value = _evaluate(w.operand, buffer, world_size)
    if w.op is None:
        buffer.copy_(value)
    else:
        {"*": buffer.mul_, "/": buffer.div_, "+": buffer.add_, "-": buffer.sub_}[w.op](value)


def _evaluate(e, buffer: torch.Tensor, world_size: int):
    """A written comm hook's expression in torch (the language of adjoint.format.comm_hook)."""
    if isinstance(e, Num):
        v = e.value
        return int(v) if v.denominator == 1 else float(v)
    if isinstance(e, Name):
        return buffer if e.id == "bucket" else world_size
    if isinstance(e, Neg):
        return -_evaluate(e.operand, buffer, world_size)
    if isinstance(e, Call):
        t = _evaluate(e.args[0], buffer, world_size)
        t = t.clone() if isinstance(t, torch.Tensor) else torch.tensor(t, dtype=buffer.dtype)
        dist.all_reduce(t)
        return t
    if isinstance(e, Bin) and e.op in OPS:
        a, b = _evaluate(e.left, buffer, world_size), _evaluate(e.right, buffer, world_size)
        return {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "/": lambda: a / b}[e.op]()
    raise ProblemError(e.loc, "not modelled in a comm hook")


def _run_steps(s: DDPSession, steps, passes: list, spec) -> dict | None:
    """:func:`adjoint.torchside.run.run_steps`, each step a rank's script runs inside
    ``ddp.no_sync()`` when the file puts it in a ``no_sync`` block."""
    return run_steps(s, steps, passes, pass_extras=False,
                     in_step=lambda step: s.ddp.no_sync() if not spec.synced(step) else contextlib.nullcontext())
