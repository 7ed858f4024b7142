"""Random DistributedDataParallel problem files (``distributed:``), for the DDP sweep
(``benchmarks/ddp_sweep.py``: problem ``i`` of seed ``s`` is ``generate(random.Random(f"{s}-{i}"))``).

What it builds: 1 to 3 ranks; a Sequential of one to three Linear layers (with and without
bias, some frozen: DDP leaves them out of its buckets) with ReLU, Tanh or nothing between;
per-rank inputs (requiring grad or not) and per-rank inputs of later forwards; a loss; hooks
on parameters (tensor hooks that observe or rescale, post-accumulate hooks), on the input and
full backward hooks on layers; no comm hook, the built-in ``allreduce``, ``powerSGD`` (below its
``start_powerSGD_iter``, or 1: PowerSGDState's error), ``fp16_compress`` or
``bf16_compress`` (up to 2 ranks) or a written one over ``bucket`` with ``all_reduce`` (some writing
the bucket in place first, ``does:``); the default buckets or tiny ``bucket_cap_mb`` (several
buckets after the rebuild), ``bucket_cap_mb_list`` and ``skip_all_reduce_unused_params`` (drawn apart:
:func:`_list_args`); steps of synchronized iterations, ``no_sync`` blocks (a whole
iteration, only its forward, only its backward, a forward inside one after an arming forward),
two forwards before a backward, ``zero_grad`` and SGD steps. DistributedDataParallel's
``find_unused_parameters``, ``static_graph`` (with ``no_sync`` too: a first iteration inside it is
PyTorch's internal assert) and
``gradient_as_bucket_view``, each drawn on its own; a model written as a program that leaves
one declared layer unused (without ``find_unused_parameters`` or ``static_graph``: the next
forward's "Expected to have finished reduction" error); a ``full_backward_pre`` hook returning
``(None,)`` (parameters without gradient); an error on one rank only (a batch of two rows there
with a hook on y keeping one, or an input one feature too wide): the others wait for it.
"""

from __future__ import annotations

import random

WRITTEN_HOOKS = ("all_reduce(bucket) / world_size", "all_reduce(bucket)", "all_reduce(bucket / world_size)",
                 "all_reduce(bucket * 2) / 4 - bucket * 0.5", "bucket * 2", "-all_reduce(-bucket) / 2")
#: written comm hooks that write the bucket in place (does:), with or without returns:; the last
#: all-reduces in does: (refused with gradient_as_bucket_view, so not drawn with it)
DOES_HOOKS = ('{does: "bucket.mul_(2)", returns: "all_reduce(bucket) / (2 * world_size)"}',
              '{does: "bucket *= 0.5"}',
              '{does: ["bucket.add_(1)", "bucket.sub_(bucket * 0.5)"], returns: "all_reduce(bucket)"}',
              '{does: "bucket.copy_(bucket * 3)", returns: "bucket - 1"}',
              '{does: ["bucket.div_(world_size)", "all_reduce(bucket)"]}')
CAPS = (None, None, "0.00001", "0.00002", "0.0001")
#: bucket_cap_mb_list's limits (MiB): 0 (a bucket per parameter), tens of bytes, whole MiB
LIST_CAPS = ("0", "0.00001", "0.00002", "0.00005", "1")


def _num(rng: random.Random) -> str:
    v = rng.randint(-8, 8) / 4
    return str(int(v)) if v == int(v) else str(v)


def _tensor(rng: random.Random, shape: tuple) -> str:
    if len(shape) == 1:
        return "[" + ", ".join(_num(rng) for _ in range(shape[0])) + "]"
    return "[" + ", ".join(_tensor(rng, shape[1:]) for _ in range(shape[0])) + "]"


def _ranks_and_dtype(rng: random.Random) -> tuple[int, str]:
    return rng.choice((2, 2, 2, 3, 1)), rng.choice(("float64", "float64", "float32"))


def _input_line(rng: random.Random, shapes, x_grad: bool) -> str:
    """``x``, one tensor per rank (of ``shapes[rank]``), requiring grad or not."""
    per_rank = ", ".join(_tensor(rng, shape) for shape in shapes)
    return f"  x: {{per_rank: [{per_rank}]{', requires_grad: true' if x_grad else ''}}}"


def _linears(rng: random.Random, lines: list, dims: list, activations: tuple):
    """``len(dims) - 1`` Linear layers ``l{i}`` (with and without bias, some frozen), one of
    ``activations`` (a type or None) ``a{i}`` between two: their parameters that require grad,
    the layers, the calls in order, the activations."""
    params: list[str] = []
    layers: list[str] = []
    calls: list[str] = []
    acts: list[str] = []
    n_layers = len(dims) - 1
    for i in range(n_layers):
        bias = rng.random() < 0.75
        frozen = rng.random() < 0.1
        w = _tensor(rng, (dims[i + 1], dims[i]))
        p = f"weight: {{value: {w}, requires_grad: false}}" if frozen else f"weight: {w}"
        if bias:
            p += f", bias: {_tensor(rng, (dims[i + 1],))}"
        extra = "" if bias else ", bias: false"
        lines.append(f"    l{i}: {{type: Linear{extra}, params: {{{p}}}}}")
        layers.append(f"l{i}")
        calls.append(f"l{i}")
        if not frozen:
            params.append(f"l{i}.weight")
        if bias:
            params.append(f"l{i}.bias")
        if i < n_layers - 1:
            act = rng.choice(activations)
            if act:
                lines.append(f"    a{i}: {{type: {act}}}")
                calls.append(f"a{i}")
                acts.append(f"a{i}")
    return params, layers, calls, acts


def _loss_line(rng: random.Random) -> str:
    return 'loss: "' + rng.choice(("(y ** 2).sum()", "y.sum()", "((y - 0.5) ** 2).mean()")) + '"'


def _hooks_lines(rng: random.Random, hooks: list) -> list:
    rng.shuffle(hooks)
    return ["hooks:"] + [f"  - {h}" for h in hooks] if hooks else []


def _forward_step(rng: random.Random, it: int, ws: int, batch: int, dims: list, x_grad: bool) -> str:
    """A forward; after the first iteration, sometimes with per-rank inputs of its own."""
    if it and rng.random() < 0.3:
        return ("{forward: {inputs: {x: {per_rank: [" + ", ".join(_tensor(rng, (batch, dims[0])) for _ in range(ws))
                + "]" + (", requires_grad: true" if x_grad else "") + "}}}}")
    return "forward"


def _after_step(rng: random.Random, steps: list, zero_grad: float, sgd: float) -> None:
    """``zero_grad`` with probability ``zero_grad``, else an SGD step up to probability ``sgd`` in all."""
    r = rng.random()
    if r < zero_grad:
        steps.append("zero_grad")
    elif r < sgd:
        steps.append("{step: {lr: 0.5}}")


def generate(rng: random.Random) -> str:
    ws, dtype = _ranks_and_dtype(rng)
    hook = rng.choice(("none", "allreduce", "written", "written", "powerSGD")
                      + (("compress",) * 2 if ws <= 2 else ()))
    # Tanh only in float64 (1 - tanh(z)**2 cancels in float32 for |z| of a few units, beyond verify's
    # float32 tolerance: a single-process matter) and not under 16-bit compression (whose rounding
    # is modelled for rational values only)
    tanh = dtype == "float64" and hook != "compress"
    n_layers = rng.randint(1, 3)
    dims = [rng.randint(1, 3) for _ in range(n_layers + 1)]
    batch = rng.randint(1, 2)
    x_grad = rng.random() < 0.3
    lines = ["name: ddp-gen", f"dtype: {dtype}", "inputs:"]
    # an error on one rank only: its batch has two rows where the others have one (a hook on y
    # keeping one row raises there), or its input is one feature too wide (its forward raises)
    partial = rng.choice(("rows", "width")) if ws > 1 and rng.random() < 0.12 else None
    bad = rng.randrange(ws)
    if partial == "rows":
        batch = 1
    shapes = [(2 if partial == "rows" and r == bad else batch, dims[0] + (partial == "width" and r == bad))
              for r in range(ws)]
    lines.append(_input_line(rng, shapes, x_grad))
    # DistributedDataParallel's options (each drawn on its own); a model may leave a layer unused
    # (a program that never calls it): with find_unused_parameters it is marked ready by the
    # Reducer, with static_graph it is the first iteration's unused one, and with neither the
    # next forward raises "Expected to have finished reduction ..."
    find_unused = rng.random() < 0.35
    static = rng.random() < 0.25
    as_view = rng.random() < 0.3
    unused_layer = rng.random() < 0.35
    lines += ["model:"] + ([] if unused_layer else ["  type: Sequential"]) + ["  children:"]
    params, layers, calls, _ = _linears(rng, lines, dims, ("ReLU", "Tanh", None) if tanh else ("ReLU", None))
    if not params:   # DDP needs a parameter that requires grad
        lines.append(f"    extra: {{type: Linear, bias: false, params: {{weight: {_tensor(rng, (1, dims[-1]))}}}}}")
        params.append("extra.weight")
        layers.append("extra")
        calls.append("extra")
    if unused_layer:   # declared where the program's order puts it, never called
        where = rng.randint(0, len(lines) - lines.index("  children:") - 1)
        unused = f"    u: {{type: Linear, params: {{weight: {_tensor(rng, (1, dims[0]))}, bias: [{_num(rng)}]}}}}"
        lines.insert(lines.index("  children:") + 1 + where, unused)
        body = "x"
        for c in calls:
            body = f"{c}({body})"
        lines += ["  forward: |", f"    return {body}"]
    lines.append(_loss_line(rng))
    lines += ["distributed:", f"  world_size: {ws}", "  wrap: ddp"]
    cap = rng.choice(CAPS)
    args = [f"bucket_cap_mb: {cap}"] if cap is not None else []
    args += ["find_unused_parameters: true"] if find_unused else []
    args += ["static_graph: true"] if static else []
    args += ["gradient_as_bucket_view: true"] if as_view else []
    args += _list_args(random.Random(repr(lines)), find_unused and not static)
    if args:
        lines.append(f"  args: {{{', '.join(args)}}}")
    if hook == "allreduce":
        lines.append("  comm_hook: {builtin: allreduce}")
    elif hook == "compress":
        lines.append(f"  comm_hook: {{builtin: {rng.choice(('fp16_compress', 'bf16_compress'))}}}")
    elif hook == "powerSGD":   # at most 3 iterations: start 3 or 4 never compresses; 1 is PowerSGDState's error
        lines.append(f"  comm_hook: {{builtin: powerSGD, state: {{start_powerSGD_iter: {rng.choice((3, 4, 4, 1))}}}}}")
    elif hook == "written" and rng.random() < 0.4:
        lines.append(f"  comm_hook: {rng.choice(DOES_HOOKS[:-1] if as_view else DOES_HOOKS)}")
    elif hook == "written":
        lines.append(f'  comm_hook: {{returns: "{rng.choice(WRITTEN_HOOKS)}"}}')
    hooks = []
    for p in rng.sample(params, rng.randint(0, len(params))):
        kind = rng.choice(("hook", "hook", "post_accumulate_grad"))
        if kind == "hook" and rng.random() < 0.3:
            hooks.append(f'{{tensor: {p}, kind: hook, returns: "grad * 2"}}')
        elif kind == "hook" and rng.random() < 0.2:   # written in place: what the rank hands the Reducer
            hooks.append(f'{{tensor: {p}, kind: hook, does: "grad.mul_(2)"}}')
        elif kind == "post_accumulate_grad" and rng.random() < 0.4:   # optimizer in backward: leaf_values per rank
            body = rng.choice(("tensor.sub_(0.25 * tensor.grad)", "tensor.grad.mul_(0.5)"))
            hooks.append(f'{{tensor: {p}, kind: post_accumulate_grad, does: "{body}"}}')
        else:
            hooks.append(f"{{tensor: {p}, kind: {kind}}}")
    if x_grad and rng.random() < 0.5:
        hooks.append("{tensor: x, kind: hook}")
    if rng.random() < 0.4:
        hooks.append(f"{{module: {rng.choice(layers)}, kind: full_backward}}")
    if rng.random() < 0.05:   # without x requiring grad PyTorch refuses it: each rank's error
        hooks.append("{tensor: x, kind: hook}")
    if rng.random() < 0.05:   # raises on every rank: each rank's error
        hooks.append(f'{{tensor: {rng.choice(params)}, kind: hook, raises: {{type: HookError, message: "stop"}}}}')
    if partial == "rows":
        hooks.append('{tensor: y, kind: hook, returns: "grad[:1]"}')
    if rng.random() < 0.1:   # no gradient reaches the layer's parameters: the Reducer copies zeros
        hooks.append(f'{{module: {rng.choice(layers)}, kind: full_backward_pre, returns: "(None,)"}}')
    lines += _hooks_lines(rng, hooks)
    steps = []
    for it in range(rng.randint(1, 3)):
        forward = _forward_step(rng, it, ws, batch, dims, x_grad)
        mode = rng.choice(("sync", "sync", "no_sync", "fwd_only", "bwd_only", "rearmed", "twice"))
        if mode == "sync":
            steps += [forward, "backward"]
        elif mode == "no_sync":
            steps.append(f"{{no_sync: [{forward}, backward]}}")
        elif mode == "fwd_only":
            steps += [f"{{no_sync: [{forward}]}}", "backward"]
        elif mode == "bwd_only":
            steps += [forward, "{no_sync: [backward]}"]
        elif mode == "rearmed":     # armed, then a forward inside no_sync: the backward is still reduced
            steps += [forward, "{no_sync: [forward]}", "backward"]
        else:
            steps += [forward, "forward", "backward"]
        _after_step(rng, steps, 0.15, 0.3)
    lines.append("steps: [" + ", ".join(steps) + "]")
    return "\n".join(lines) + "\n"


def _list_args(extra: random.Random, find_unused: bool) -> list[str]:
    """PyTorch 2.13's ``bucket_cap_mb_list`` (1 to 3 limits) and, with ``find_unused_parameters``,
    ``skip_all_reduce_unused_params``: drawn from ``extra``, a generator seeded by the file so far, so
    the main draws (and every problem without them) stay as they were."""
    args = []
    if extra.random() < 0.3:
        args.append(f"bucket_cap_mb_list: [{', '.join(extra.choice(LIST_CAPS) for _ in range(extra.randint(1, 3)))}]")
    if find_unused and extra.random() < 0.5:
        args.append("skip_all_reduce_unused_params: true")
    return args
