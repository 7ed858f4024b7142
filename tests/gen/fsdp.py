"""Random ``wrap: fully_shard`` (FSDP2) problem files, for the FSDP sweep
(``benchmarks/ddp_sweep.py --kind fsdp``: problem ``i`` of seed ``s`` is
``generate(random.Random(f"{s}-{i}"))``).

What it builds: 1 to 3 ranks; a Sequential of one to three Linear layers (with and without
bias, some frozen) with ReLU, Tanh (float64) or nothing between, or the same layers called by
a program root with a parameter of its own (the root's group); ``shard:`` a random subset of
the layers in a random order (the root last); ``reshard_after_forward`` drawn; per-rank
inputs requiring grad or not (the final callback's post-backward); observing
post-accumulate-grad hooks and tensor hooks (never called) on parameters, tensor hooks on the
input and on activations (observing or rescaling), full backward hooks on layers (observing or
halving grad_input),
``retain_grad``, a hook raising on every rank; steps of iterations, two forwards before a
backward, ``zero_grad``, SGD steps and a later forward's own inputs.
"""

from __future__ import annotations

import random

from gen.ddp import (_after_step, _forward_step, _hooks_lines, _input_line, _linears, _loss_line,
                     _ranks_and_dtype, _tensor)


def generate(rng: random.Random) -> str:
    ws, dtype = _ranks_and_dtype(rng)
    n_layers = rng.randint(1, 3)
    dims = [rng.randint(1, 4) for _ in range(n_layers + 1)]
    batch = rng.randint(1, 2)
    x_grad = rng.random() < 0.4
    program = rng.random() < 0.35
    lines = ["name: fsdp-gen", f"dtype: {dtype}", "inputs:"]
    lines.append(_input_line(rng, [(batch, dims[0])] * ws, x_grad))
    lines.append("model:")
    if program:
        lines.append(f"  params: {{scale: {_tensor(rng, (dims[-1],))}}}")
    else:
        lines.append("  type: Sequential")
    lines.append("  children:")
    params, layers, calls, acts = _linears(rng, lines, dims, ("ReLU", "Tanh", None) if dtype == "float64"
                                           else ("ReLU", None))
    params = (["scale"] if program else []) + params
    if program:
        body = "x"
        for c in calls:
            body = f"{c}({body})"
        lines += ["  forward: |", f"    h = {body}", "    return h * scale"]
        acts.append("h")
    lines.append(_loss_line(rng))
    lines += ["distributed:", f"  world_size: {ws}", "  wrap: fully_shard"]
    shard = rng.sample(layers, rng.randint(0, len(layers)))
    if shard:
        lines.append(f"  shard: [{', '.join(shard)}]")
    r = rng.random()
    if r < 0.3:
        lines.append(f"  args: {{reshard_after_forward: {rng.choice(('true', 'false'))}}}")
    hooks = []
    for p in rng.sample(params, rng.randint(0, len(params))):
        r = rng.random()
        if r < 0.7:
            hooks.append(f"{{tensor: {p}, kind: post_accumulate_grad}}")
        elif r < 0.85:   # on the sharded parameter: never called
            hooks.append(f'{{tensor: {p}, kind: hook, returns: "grad * 2"}}')
        else:
            hooks.append(f"{{tensor: {p}, kind: hook}}")
    for a in rng.sample(acts, rng.randint(0, len(acts))):
        if rng.random() < 0.3:
            hooks.append(f'{{tensor: {a}, kind: hook, returns: "grad * 2"}}')
        elif rng.random() < 0.2:
            hooks.append(f"{{tensor: {a}, kind: retain_grad}}")
        else:
            hooks.append(f"{{tensor: {a}, kind: hook}}")
    if x_grad and rng.random() < 0.5:
        hooks.append("{tensor: x, kind: hook}")
    if rng.random() < 0.5:
        # (on a Sequential's last layer its output, the root's, is a view: FSDP warns)
        if rng.random() < 0.3:
            hooks.append(f'{{module: {rng.choice(layers)}, kind: full_backward, returns: "(grad_input[0] / 2,)"}}')
        else:
            hooks.append(f"{{module: {rng.choice(layers)}, kind: full_backward}}")
    if acts and rng.random() < 0.05:
        hooks.append(f'{{tensor: {rng.choice(acts)}, kind: hook, raises: {{type: HookError, message: "stop"}}}}')
    lines += _hooks_lines(rng, hooks)
    steps = []
    for it in range(rng.randint(1, 3)):
        forward = _forward_step(rng, it, ws, batch, dims, x_grad)
        if rng.random() < 0.2:
            steps += [forward, "forward", "backward"]
        else:
            steps += [forward, "backward"]
        _after_step(rng, steps, 0.2, 0.4)
    lines.append("steps: [" + ", ".join(steps) + "]")
    return "\n".join(lines) + "\n"
