"""The ``distributed:`` block of a problem file (DistributedDataParallel), read and checked.

A file with ``distributed:`` describes ``world_size`` processes running the same script. Each
rank is validated as an ordinary problem file: the tree is rewritten once per rank (an
input's or a target's ``per_rank: [V0, V1, ...]`` becomes that rank's ``value: Vr``; a
``{no_sync: [STEP, ...]}`` step becomes its steps, whose locations are remembered as run
inside ``ddp.no_sync()``) and handed to the ordinary validator, so every location a message
names is the file's own. What is not modelled yet is refused here with one located line.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from fractions import Fraction

from adjoint.format.checks import boolean, mapping, unknown_keys
from adjoint.format.errors import Loc, ProblemError
from adjoint.format.literals import parse_int, parse_number
from adjoint.format.loader import YMap, YNode, YScalar, YSeq, kind_name

DISTRIBUTED_KEYS = ("world_size", "wrap", "args", "comm_hook", "shard")
#: DistributedDataParallel's keyword arguments the model knows, with their PyTorch defaults
DDP_ARGS = {"bucket_cap_mb": None, "find_unused_parameters": False, "static_graph": False,
            "gradient_as_bucket_view": False, "broadcast_buffers": True, "forward_sync_buffers": True,
            "init_sync": True, "check_reduction": False, "bucket_cap_mb_list": None,
            "skip_all_reduce_unused_params": False}
#: arguments whose non-default value is not modelled yet (what PyTorch does there is written
#: down in docs/semantics.md and docs/not-modelled.md)
NOT_YET: dict = {}
BUILTIN_HOOKS = ("allreduce", "fp16_compress", "bf16_compress", "powerSGD")
MODELLED_HOOKS = ("allreduce", "fp16_compress", "bf16_compress", "powerSGD")
#: PowerSGDState's keyword arguments (powerSGD_hook.py) and their defaults; only its vanilla
#: allreduce phase (the first start_powerSGD_iter iterations) is modelled
POWERSGD_STATE = {"matrix_approximation_rank": 1, "start_powerSGD_iter": 1000, "min_compression_rate": 2,
                  "use_error_feedback": True, "warm_start": True, "orthogonalization_epsilon": 0, "random_seed": 0,
                  "batch_tensors_with_same_shape": False}
COMPRESSING = ("fp16_compress", "bf16_compress")
MAX_WORLD_SIZE = 8
MIB = 1024 * 1024                  # distributed.py's _MB_TO_BYTES
#: a bucket limit beyond this many MiB is 2**63 bytes or more (a C++ size_t limit refuses 2**64 and negative ones)
MAX_CAP_MB = 2 ** 43


def cap_arg(mb: Fraction):
    """A file's number of MiB as the Python value the torch side passes DistributedDataParallel: an
    int when it is whole, else the float the file's decimal reads as."""
    return int(mb) if mb.denominator == 1 else float(mb)


def cap_bytes(mb: Fraction) -> int:
    """``int(cap_mb * _MB_TO_BYTES)`` as _BucketCapacityConfig.create computes it on :func:`cap_arg`'s
    value (an int exactly; a float times 2**20 is exact, then truncated)."""
    return int(cap_arg(mb) * MIB)


@dataclass(frozen=True)
class CommHook:
    """``comm_hook:``: a built-in (``builtin``) or written (``does`` writing ``bucket`` in place, then
    ``returns`` over ``bucket``; ``returns`` None with ``does``: the bucket's buffer itself)."""

    builtin: str | None
    returns: object | None        # syntax.Expr
    loc: Loc
    does: tuple = ()              # format.comm_hook.BucketWrite, in order
    state: tuple = ()             # powerSGD: PowerSGDState's keyword arguments, ((name, value), ...)

    def state_arg(self, name: str):
        return dict(self.state).get(name, POWERSGD_STATE[name])


@dataclass(frozen=True)
class Distributed:
    """A ``distributed:`` block, and the file as each rank sees it."""

    world_size: int
    wrap: str                                  # ddp
    bucket_cap_mb: Fraction | None             # None: PyTorch's default (25 MiB; a 1 MiB first bucket)
    find_unused_parameters: bool
    static_graph: bool
    gradient_as_bucket_view: bool
    comm_hook: CommHook | None
    loc: Loc
    no_sync: frozenset = frozenset()            # the Locs of the steps run inside ddp.no_sync()
    ranks: tuple = field(default=(), compare=False, repr=False)   # the Problem of each rank (rank 0's is the file's)
    shard: tuple = ()                           # fully_shard: ((submodule label, Loc), ...), sharded in this order
    reshard_after_forward: bool | None = None   # fully_shard's argument (None: PyTorch's default)
    #: DistributedDataParallel's broadcast_buffers as the file gives it (None: not given). PyTorch 2.13
    #: deprecates the argument: given at all, True or False, its constructor warns (FutureWarning)
    broadcast_buffers: bool | None = None
    #: forward_sync_buffers as the file gives it (None: not given), PyTorch 2.13's replacement of
    #: broadcast_buffers: it decides the broadcasts before a forward only (the buffers are broadcast at
    #: the construction whatever its value), and given, broadcast_buffers' value is ignored
    forward_sync_buffers: bool | None = None
    #: init_sync: False skips the constructor's broadcast of the parameters and buffers
    init_sync: bool = True
    #: check_reduction: deprecated and unused by PyTorch; True is the constructor's FutureWarning
    check_reduction: bool = False
    #: bucket_cap_mb_list: per-bucket limits in MiB, in order (() : not given, or empty, which PyTorch
    #: treats as not given). Given, bucket_cap_mb is ignored and both the first buckets and the rebuilt
    #: ones take the i-th limit for the i-th bucket (the last one for the rest)
    bucket_cap_mb_list: tuple = ()
    #: skip_all_reduce_unused_params: with find_unused_parameters, a bucket every parameter of which this
    #: rank's forward left unused is not all-reduced (no comm hook call); no effect without find_unused
    skip_all_reduce_unused_params: bool = False

    def forward_syncs(self) -> bool:
        """DDP.forward_sync_buffers: the buffers are broadcast before a forward (when due)."""
        if self.forward_sync_buffers is not None:
            return self.forward_sync_buffers
        return self.broadcast_buffers is not False

    def init_syncs_buffers(self) -> bool:
        """_sync_module_states' broadcast_buffers (init_sync_buffers): True when forward_sync_buffers
        is given, else broadcast_buffers' value (True when not given); nothing without init_sync."""
        if not self.init_sync:
            return False
        return self.forward_sync_buffers is not None or self.broadcast_buffers is not False

    def synced(self, step) -> bool:
        return step.loc not in self.no_sync


def has_distributed(tree: YNode) -> bool:
    return isinstance(tree, YMap) and tree.get("distributed") is not None


def build_distributed(tree: YMap, path: str, build_problem):
    """The Problem of a file with ``distributed:``: rank 0's, carrying the block and every rank's."""
    dnode = tree.get("distributed")
    spec = read_block(dnode)
    no_sync: set = set()
    problems = []
    for rank in range(spec.world_size):
        rewritten = _rank_tree(tree, rank, spec.world_size, no_sync)
        problems.append(build_problem(rewritten, path))
        for decl in problems[-1].model.walk():   # PyTorch's constructor error, answered in single-process files only
            if decl.setup_error is not None:
                raise ProblemError(decl.loc, f"PyTorch refuses this {decl.type}: '{decl.setup_error[1]}' (a "
                                             "constructor's error in a distributed file is not modelled yet)")
        _refuse_creation_errors(problems[-1])
    _refuse_reads(problems[0])
    if spec.wrap == "fully_shard":
        from adjoint.format.fsdp_block import check_fsdp_problem
        if no_sync:
            raise ProblemError(min(no_sync, key=lambda loc: (loc.line, loc.col)),
                               "no_sync is DistributedDataParallel's; under fully_shard it is not modelled yet")
        _refuse_registers(problems[0])
        check_fsdp_problem(problems[0], spec)
        return replace(problems[0], distributed=replace(spec, ranks=tuple(problems)))
    _refuse_unmodelled(problems[0], spec)
    spec = replace(spec, no_sync=frozenset(no_sync), ranks=tuple(problems))
    return replace(problems[0], distributed=spec)


def _refuse_creation_errors(problem) -> None:
    """An input that ``torch.tensor`` refuses to make (an int64 one requiring grad): PyTorch's
    error, answered in single-process files only."""
    from adjoint.format.validate_tensors import creation_error

    for v in problem.variants:
        decls = list(v.inputs) + list(problem.targets)
        decls += [d for step in v.steps or () if step.kind == "forward" for d in step.inputs or ()]
        for d in decls:
            refused = creation_error(d)
            if refused is not None:
                raise ProblemError(d.loc, f"PyTorch refuses to make '{d.name}': {refused[0]} '{refused[1]}' (an "
                                          "error making a tensor in a distributed file is not modelled yet)")


def _refuse_reads(problem) -> None:
    """A read step ({read: ..., as: NAME}) is not modelled on the ranks of a distributed file."""
    for v in problem.variants:
        for step in v.steps or ():
            if step.kind == "read":
                raise ProblemError(step.loc, "a read step is not modelled in a distributed: file yet")


def read_block(node: YNode) -> Distributed:
    m = mapping(node, "distributed", ("world_size", "wrap"), ("args", "comm_hook", "shard"))
    for err in unknown_keys(m, "distributed", DISTRIBUTED_KEYS):
        raise err
    world_size = parse_int(m.get("world_size"), "distributed.world_size", 1, MAX_WORLD_SIZE)
    wrap_node = m.get("wrap")
    if not isinstance(wrap_node, YScalar) or wrap_node.text not in ("ddp", "fsdp", "fully_shard"):
        raise ProblemError(wrap_node.loc, "distributed.wrap must be ddp (DistributedDataParallel) or fully_shard "
                                          "(FSDP2)")
    if wrap_node.text == "fsdp":
        raise ProblemError(wrap_node.loc, "distributed.wrap: fsdp (FSDP) is not modelled yet (the "
                                          "FullyShardedDataParallel class); use wrap: fully_shard (FSDP2's "
                                          "fully_shard) or wrap: ddp")
    if wrap_node.text == "fully_shard":
        from adjoint.format.fsdp_block import read_fsdp_args
        f = read_fsdp_args(m)
        return Distributed(world_size, "fully_shard", None, False, False, False, None, node.loc,
                           shard=f["shard"], reshard_after_forward=f["reshard_after_forward"])
    if m.get("shard") is not None:
        raise ProblemError(m.key_loc("shard"), "distributed.shard is fully_shard's (wrap: fully_shard); "
                                               "DistributedDataParallel wraps the whole model")
    args = dict(DDP_ARGS)
    given: set = set()
    if m.get("args") is not None:
        a = m.get("args")
        if not isinstance(a, YMap):
            raise ProblemError(a.loc, f"distributed.args must be a mapping of DistributedDataParallel's keyword "
                                      f"arguments, not {kind_name(a)}")
        for key, value in a.entries:
            if key.text not in DDP_ARGS:
                raise ProblemError(key.loc, f"distributed.args: '{key.text}' is not modelled yet; the modelled "
                                            f"arguments are {', '.join(DDP_ARGS)}")
            given.add(key.text)
            if key.text == "bucket_cap_mb":
                cap = parse_number(value, "distributed.args.bucket_cap_mb")
                if cap < 0:   # PyTorch runs on, its negative int64 limit a huge size_t in the rebuild
                    raise ProblemError(value.loc, "distributed.args.bucket_cap_mb: a negative number of MiB is not "
                                                  "modelled; give 0 (a bucket per parameter) or more")
                args[key.text] = cap
            elif key.text == "bucket_cap_mb_list":
                args[key.text] = _cap_list(value)
            else:
                args[key.text] = boolean(value, f"distributed.args.{key.text}")
                if NOT_YET.get(key.text) is args[key.text]:
                    raise ProblemError(value.loc, f"distributed.args.{key.text}: {str(args[key.text]).lower()} is "
                                                  f"not modelled yet; use {str(not args[key.text]).lower()}")
    if args["skip_all_reduce_unused_params"] and args["static_graph"]:
        raise ProblemError(m.get("args").key_loc("skip_all_reduce_unused_params"),
                           "distributed.args.skip_all_reduce_unused_params with static_graph is not modelled yet (the "
                           "static graph finds its unused parameters in its first iteration, then reduces them "
                           "its own way); use it with find_unused_parameters")
    hook = None
    if m.get("comm_hook") is not None:
        hook = _comm_hook(m.get("comm_hook"))
        if hook.builtin == "fp16_compress" and world_size > 2:   # bf16_compress: PyTorch's error on CPU, any size
            raise ProblemError(m.get("comm_hook").get("builtin").loc,
                               f"distributed.comm_hook.builtin: {hook.builtin} on more than 2 ranks is not modelled "
                               "yet (gloo sums the 16-bit values in its ring order, rounding after each addition); "
                               "use world_size 2")
    if hook is not None and hook.does and args["gradient_as_bucket_view"]:
        from adjoint.format.comm_hook import reduces
        if reduces(hook.does):
            raise ProblemError(m.get("comm_hook").key_loc("does"),
                               "distributed.comm_hook.does: all_reduce in does: with gradient_as_bucket_view: true is "
                               "not modelled yet (.grad, the bucket's view, would show the other ranks' buffers "
                               "during the backward); use all_reduce in returns:, or gradient_as_bucket_view: false")
    return Distributed(world_size, "ddp", args["bucket_cap_mb"], args["find_unused_parameters"],
                       args["static_graph"], args["gradient_as_bucket_view"], hook, node.loc,
                       broadcast_buffers=args["broadcast_buffers"] if "broadcast_buffers" in given else None,
                       forward_sync_buffers=args["forward_sync_buffers"] if "forward_sync_buffers" in given else None,
                       init_sync=args["init_sync"], check_reduction=args["check_reduction"],
                       bucket_cap_mb_list=args["bucket_cap_mb_list"] or (),
                       skip_all_reduce_unused_params=args["skip_all_reduce_unused_params"])


def _cap_list(node: YNode) -> tuple:
    """``bucket_cap_mb_list: [MiB, ...]``: each a number of MiB from 0 (a bucket per parameter) to
    MAX_CAP_MB; PyTorch's own TypeError for a negative one (the C++ size_t limit) is not modelled."""
    what = "distributed.args.bucket_cap_mb_list"
    if not isinstance(node, YSeq):
        raise ProblemError(node.loc, f"{what} must be a list of numbers of MiB, one per bucket, not {kind_name(node)}")
    caps = []
    for item in node.items:
        cap = parse_number(item, what)
        if cap < 0 or cap > MAX_CAP_MB:
            raise ProblemError(item.loc, f"{what}: {item.text} MiB is not modelled (PyTorch's TypeError from "
                                         f"_compute_bucket_assignment_by_size when a limit in bytes is negative or "
                                         f"beyond size_t); give a number of MiB from 0 to 2**43")
        caps.append(cap)
    return tuple(caps)


def _comm_hook(node: YNode) -> CommHook:
    m = mapping(node, "distributed.comm_hook", (), ("builtin", "returns", "does", "state"))
    written = m.get("returns") is not None or m.get("does") is not None
    if (m.get("builtin") is None) != written:
        raise ProblemError(node.loc, "distributed.comm_hook takes builtin: NAME, or does: [STMT, ...] and/or "
                                     "returns: EXPR (over bucket)")
    if m.get("builtin") is not None:
        b = m.get("builtin")
        if not isinstance(b, YScalar) or b.text not in BUILTIN_HOOKS:
            raise ProblemError(b.loc, f"distributed.comm_hook.builtin must be one of {', '.join(BUILTIN_HOOKS)}")
        if b.text not in MODELLED_HOOKS:
            raise ProblemError(b.loc, f"distributed.comm_hook.builtin: {b.text} is not modelled yet; the modelled "
                                      f"built-in is {', '.join(MODELLED_HOOKS)}")
        state = _powersgd_state(m.get("state")) if m.get("state") is not None else ()
        if state and b.text != "powerSGD":
            raise ProblemError(m.key_loc("state"), "distributed.comm_hook.state is PowerSGDState's arguments: only "
                                                   "with builtin: powerSGD")
        return CommHook(b.text, None, node.loc, state=state)
    if m.get("state") is not None:
        raise ProblemError(m.key_loc("state"), "distributed.comm_hook.state is PowerSGDState's arguments: only "
                                               "with builtin: powerSGD")
    from adjoint.format.comm_hook import parse_comm_expression, parse_comm_statements
    does = parse_comm_statements(m.get("does")) if m.get("does") is not None else ()
    returns = parse_comm_expression(m.get("returns")) if m.get("returns") is not None else None
    return CommHook(None, returns, node.loc, does)


def _powersgd_state(node: YNode) -> tuple:
    """``state:`` of ``builtin: powerSGD``: PowerSGDState(process_group=None, **state)."""
    if not isinstance(node, YMap):
        raise ProblemError(node.loc, f"distributed.comm_hook.state must be a mapping of PowerSGDState's keyword "
                                     f"arguments, not {kind_name(node)}")
    out = []
    for key, value in node.entries:
        if key.text not in POWERSGD_STATE:
            raise ProblemError(key.loc, f"distributed.comm_hook.state: '{key.text}' is not PowerSGDState's; its "
                                        f"arguments are {', '.join(POWERSGD_STATE)}")
        what = f"distributed.comm_hook.state.{key.text}"
        default = POWERSGD_STATE[key.text]
        if isinstance(default, bool):
            out.append((key.text, boolean(value, what)))
        elif isinstance(default, int) and key.text != "min_compression_rate":
            out.append((key.text, parse_int(value, what, 0 if key.text == "random_seed" else
                                            (1 if key.text == "matrix_approximation_rank" else -2 ** 31), 2 ** 31)))
        else:
            out.append((key.text, parse_number(value, what)))
    return tuple(out)


# ----------------------------------------------------------------------------- one rank's file

def _rank_tree(tree: YMap, rank: int, world_size: int, no_sync: set) -> YMap:
    entries = []
    for key, value in tree.entries:
        if key.text == "distributed":
            continue
        if key.text in ("inputs", "targets"):
            value = _rank_inputs(value, rank, world_size, key.text[:-1])
        elif key.text == "steps":
            value = _flat_steps(value, no_sync, rank, world_size)
        elif key.text == "variants" and isinstance(value, YMap):
            value = YMap(value.loc, tuple((k, _rank_variant(v, rank, world_size, no_sync)) for k, v in value.entries))
        entries.append((key, value))
    return YMap(tree.loc, tuple(entries))


def _rank_variant(node: YNode, rank: int, world_size: int, no_sync: set) -> YNode:
    if not isinstance(node, YMap):
        return node
    entries = []
    for key, value in node.entries:
        if key.text == "inputs":
            value = _rank_inputs(value, rank, world_size)
        elif key.text == "steps":
            value = _flat_steps(value, no_sync, rank, world_size)
        entries.append((key, value))
    return YMap(node.loc, tuple(entries))


def _rank_inputs(node: YNode, rank: int, world_size: int, what: str = "input") -> YNode:
    """Inputs (or targets: ``what``) with ``per_rank: [V0, V1, ...]`` given rank ``rank``'s ``value:``."""
    if not isinstance(node, YMap):
        return node
    out = []
    for key, decl in node.entries:
        if isinstance(decl, YMap) and decl.get("per_rank") is not None:
            values = decl.get("per_rank")
            if decl.get("value") is not None:
                raise ProblemError(decl.key_loc("per_rank"), f"{what} '{key.text}' has both value and per_rank; "
                                                             "give one of them")
            if not isinstance(values, YSeq) or len(values.items) != world_size:
                n = len(values.items) if isinstance(values, YSeq) else kind_name(values)
                raise ProblemError(values.loc, f"{what} '{key.text}': per_rank must list one value per rank "
                                               f"({world_size}, distributed.world_size), not {n}")
            kloc = decl.key_loc("per_rank")
            vkey = YScalar(kloc, "value", "str", False, kloc, None)
            decl = YMap(decl.loc, tuple((vkey, values.items[rank]) if k.text == "per_rank" else (k, v)
                                        for k, v in decl.entries))
        out.append((key, decl))
    return YMap(node.loc, tuple(out))


def _flat_steps(node: YNode, no_sync: set, rank: int, world_size: int) -> YNode:
    if not isinstance(node, YSeq):
        return node
    items: list = []
    for item in node.items:
        if isinstance(item, YMap) and len(item.entries) == 1 and item.entries[0][0].text == "no_sync":
            body = item.entries[0][1]
            if not isinstance(body, YSeq) or not body.items:
                raise ProblemError(body.loc, "no_sync takes a non-empty list of steps, such as "
                                             "{no_sync: [forward, backward]}")
            for inner in body.items:
                if isinstance(inner, YMap) and len(inner.entries) == 1 and inner.entries[0][0].text == "no_sync":
                    raise ProblemError(inner.loc, "no_sync inside no_sync: write one no_sync with all the steps")
                no_sync.add(inner.loc)
                items.append(_rank_step(inner, rank, world_size))
        else:
            items.append(_rank_step(item, rank, world_size))
    return YSeq(node.loc, tuple(items))


def _rank_step(node: YNode, rank: int, world_size: int) -> YNode:
    """``{forward: {inputs: {x: {per_rank: [...]}}}}``: that rank's value."""
    if not (isinstance(node, YMap) and len(node.entries) == 1 and node.entries[0][0].text == "forward"):
        return node
    key, body = node.entries[0]
    if not isinstance(body, YMap) or body.get("inputs") is None:
        return node
    body = YMap(body.loc, tuple((k, _rank_inputs(v, rank, world_size) if k.text == "inputs" else v)
                                for k, v in body.entries))
    return YMap(node.loc, ((key, body),))


def _refuse_registers(problem) -> None:
    """The ranks' engines register a file's hooks at the start and by register steps only."""
    for v in problem.variants:
        for h in v.hooks:
            if h.registers:
                raise ProblemError(h.loc, "registers: (a hook registering hooks while the backward runs) in a "
                                          "distributed file is not modelled yet")


def _refuse_unmodelled(problem, spec: Distributed) -> None:
    """What a distributed run does not model yet: one located line each."""
    _refuse_registers(problem)
    for v in problem.variants:
        for h in v.hooks:
            if h.on == "global":   # ddp(x) is a module call of its own: the wrapper's calls fire them too
                raise ProblemError(h.loc, "global module hooks under DistributedDataParallel are not modelled yet "
                                          "(the DDP wrapper is a module too, whose forward and backward those hooks "
                                          "also see); register them on the model's modules")
        for step in v.steps or ():
            if step.kind == "registered" or (step.kind == "forward" and step.call is not None):
                raise ProblemError(step.loc, "a registered step or a forward step's call: under "
                                             "DistributedDataParallel is not modelled yet")
            if step.kind == "backward" and step.backward is not None:
                bw = step.backward
                if bw.method != "backward":
                    raise ProblemError(bw.loc or step.loc, "torch.autograd.grad under DistributedDataParallel "
                                                           "is not modelled yet; use method: backward")
                if bw.inputs:
                    raise ProblemError(bw.inputs[0][1], "backward(inputs=...) under DistributedDataParallel is "
                                                        "not modelled yet")
        bw = v.backward
        if bw.method != "backward":
            raise ProblemError(bw.loc or v.loc, "torch.autograd.grad under DistributedDataParallel is not "
                                                "modelled yet; use method: backward")
        if bw.inputs:
            raise ProblemError(bw.inputs[0][1], "backward(inputs=...) under DistributedDataParallel is not "
                                                "modelled yet")
