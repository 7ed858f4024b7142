"""Random second-order problems (create_graph, grad of grad): their own small generator.

``generate_second(rng)`` -> (YAML text, feature counter). Problem ``i`` of seed ``s`` in
``benchmarks/sweep.py --kind second`` is ``generate_second(random.Random(f"{s}-{i}"))``.

What it builds, over the ops whose create_graph recording is modelled (docs/not-modelled.md):

* a model: a Sequential of Linear (1-D or 2-D input), Tanh, Sigmoid, ReLU; or a custom forward
  over leaves x, w, c (some requiring grad) with a named intermediate ``h``, composed of
  ``* + - /``, powers, ``tanh sigmoid relu exp log sqrt sin cos``, ``1 - a``, ``clamp``,
  ``reciprocal``, ``leaky_relu``, ``maximum``, ``where``, a scalar factor, ``addcmul``, ``addcdiv``,
  ``logsumexp``, a 1-d convolution, a training batch norm, 1-d average and max pooling, ``x ** 0.5``,
  ``clamp`` with tensor bounds, ``atan2``,
  ``hypot``, tensor and number powers of a tensor, ``mv``, ``dot``, ``addmv``, ``addr``;
* a loss (``sum(y ** 2)``, ``mean(y)``, ``sum(y)``, ``sum(y * y * y)``);
* steps: a ``grad`` with ``create_graph`` (``as:`` names, sometimes ``materialize_grads``) or a
  ``backward(create_graph=True)``; then a backward or grad from a ``root:`` over the ``as:``
  names (sometimes with the loss, or ``roots:`` with ``grad_outputs``), sometimes with
  ``allow_unused`` and ``as:`` again, sometimes a third grad of grad;
* hooks: tensor hooks (observing or rescaling) on ``h`` / ``y`` and on ``as:`` names, node
  pre/post hooks on ``as:`` names, retain_grad, a multi_grad hook over two ``as:`` names, full
  backward hooks on a Linear, saved-tensor hooks around the forward or (``during:``) around
  chosen steps, in two or three variants.

PyTorch's errors (a root that does not require grad: the gradient of a linear function is
constant) are answers like any other; the differential check compares them.
"""

from __future__ import annotations

import random
from collections import Counter

UNARY = ["tanh({})", "sigmoid({})", "relu({})", "exp({})", "sin({})", "cos({})", "({}) ** 2", "({}) ** 3",
         "-({})", "({}) * 1.5", "log(({}) ** 2 + 0.5)", "sqrt(({}) ** 2 + 0.5)", "sinh({})", "cosh({})", "atan({})",
         "expm1({})", "tan(({}) * 0.5)", "log1p(({}) ** 2)", "rsqrt(({}) ** 2 + 0.5)", "1 - ({})",
         "clamp({}, -0.5, 0.75)", "(({}) ** 2 + 1).reciprocal()", "leaky_relu({}, 0.2)", "erf({})",
         "log2(({}) ** 2 + 0.5)", "log10(({}) ** 2 + 0.5)", "F.hardswish(({}) * 4)", "F.mish({})",
         "({0}) * ({0}).var()", "({0}) - ({0}).amax()", "F.layer_norm({0}, (2,)) * ({0})",
         "F.prelu({}, c * 0.5)", "F.glu(torch.cat([{0}, ({0}) * 0.5]))",
         "F.pad(({0}).unsqueeze(0), (2, 1), mode='replicate')[0, 1:-2] * ({0})",
         "F.conv1d(({0}).reshape(1, 1, 2), w.reshape(1, 1, 2), padding=1)[0, 0, :2]",
         "F.batch_norm(({0}).reshape(2, 1), None, None, training=True).reshape(2) * ({0})",
         "F.avg_pool1d(({0}).reshape(1, 1, 2), 2, stride=1, padding=1)[0, 0, 1:]",
         "F.max_pool1d(({0}).reshape(1, 1, 2), 2)[0, 0] * ({0})", "torch.logsumexp(torch.stack([{0}, ({0}) * 0.5]), 0)",
         "(({}) ** 2 + 0.25) ** 0.5",
         "1.5 ** ({})", "torch.stack([{0}, ({0}) * 2]) @ ({0})", "torch.addr(w, {0}, {0}, alpha=0.5)[0]"]
BINARY = ["({}) * ({})", "({}) + ({})", "({}) - ({})", "({}) / (({}) ** 2 + 1)", "maximum({}, {})",
          "where(({0}) > 0, {0}, {1})", "torch.addcmul({0}, {0}, {1}, value=0.5)",
          "torch.addcdiv({0}, {1}, ({0}) ** 2 + 1, value=-1.5)", "torch.clamp({0}, min=({1}) * 0.5, max=({1}) ** 2)",
          "F.binary_cross_entropy(sigmoid({0}), sigmoid({1}), reduction='none')",
          "F.binary_cross_entropy(sigmoid({0}), sigmoid({1}) * 0.5, weight=torch.tensor([0.5, 2.0], dtype=torch.float64)) * ({0})",
          "F.binary_cross_entropy_with_logits({0}, sigmoid({1}), pos_weight=torch.tensor([1.5, 0.5], dtype=torch.float64), reduction='none')",
          "F.binary_cross_entropy_with_logits({0}, sigmoid({1}), weight=torch.tensor([2.0, 0.5], dtype=torch.float64)) * ({1})",
          "F.smooth_l1_loss({0}, {1}, beta=0.5, reduction='none')", "F.huber_loss({0}, {1}, delta=0.5) * ({0})",
          "torch.atan2({0}, ({1}) ** 2 + 0.5)",
          "torch.hypot({0}, ({1}) ** 2 + 0.5)", "(({0}) ** 2 + 0.5) ** ({1})", "(({0}) @ ({1})) * ({0})",
          "torch.addmv({0}, torch.stack([{0}, {1}]), {1}, beta=0.5)"]


def _value(rng, n):
    return [rng.choice([-1, -0.5, -0.25, 0.25, 0.5, 0.75, 1, 1.5]) for _ in range(n)]


def _expr(rng, names, depth, used):
    if depth == 0 or rng.random() < 0.25:
        name = rng.choice(names)
        used.add(name)
        return name
    if rng.random() < 0.5:
        op = rng.choice(UNARY)
        used.add(op.replace("({})", "").replace("{}", "").strip("() ") or op)
        return op.format(_expr(rng, names, depth - 1, used))
    op = rng.choice(BINARY)
    return op.format(_expr(rng, names, depth - 1, used), _expr(rng, names, depth - 1, used))


def generate_second(rng: random.Random):
    cov: Counter = Counter()
    lines = ["name: second", "dtype: float64"]
    grad_leaves: list[str] = []
    forward_names: list[str] = []
    modules: list[str] = []
    forward_text = ""
    if rng.random() < 0.5:
        # a Sequential of layers
        two_d = rng.random() < 0.5
        width = rng.choice([2, 3])
        x = _value(rng, width)
        lines += ["inputs:", f"  x: {{value: {[x] if two_d else x}, requires_grad: {str(rng.random() < 0.8).lower()}}}"]
        lines += ["model:", "  type: Sequential", "  children:"]
        n_in = width
        for k in range(rng.choice([1, 2])):
            out = rng.choice([1, 2, 3])
            weight = [_value(rng, n_in) for _ in range(out)]
            lines.append(f"    lin{k}: {{type: Linear, params: {{weight: {weight}, bias: {_value(rng, out)}}}}}")
            modules.append(f"lin{k}")
            act = rng.choice(["Tanh", "Sigmoid", "ReLU", None])
            if act:
                lines.append(f"    act{k}: {{type: {act}}}")
                cov[f"layer {act}"] += 1
            n_in = out
        grad_leaves = (["x"] if "requires_grad: true" in lines[2] else []) + [f"{m}.weight" for m in modules]
        cov["sequential"] += 1
        cov["linear 2-D" if two_d else "linear 1-D"] += 1
    else:
        rg = {n: rng.random() < 0.8 for n in ("x", "w", "c")}
        if not any(rg.values()):
            rg["x"] = True
        lines += ["inputs:",
                  f"  x: {{value: {_value(rng, 2)}, requires_grad: {str(rg['x']).lower()}}}",
                  f"  w: {{value: {_value(rng, 2)}, requires_grad: {str(rg['w']).lower()}}}",
                  f"  c: {{value: {_value(rng, 1)}, requires_grad: {str(rg['c']).lower()}}}"]
        used: set = set()
        h = _expr(rng, ["x", "w", "c"], 2, used)
        out = _expr(rng, ["h", "x", "w"], 2, used)
        if "h" not in out:
            out = f"({out}) * h"
        lines += ["model:", "  inputs: [x, w, c]", "  forward: |", f"    h = {h}", f"    return {out}"]
        forward_text = h + out
        grad_leaves = [n for n in ("x", "w", "c") if rg[n]]
        forward_names = ["h"]
        cov["custom forward"] += 1
        cov.update(f"op {u}" for u in used if u not in ("x", "w", "c", "h"))
    loss = rng.choice(["sum(y ** 2)", "mean(y)", "sum(y)", "sum(y * y * y)"])
    lines.append(f'loss: "{loss}"')
    cov[f"loss {loss}"] += 1
    if not grad_leaves:
        grad_leaves = [f"{modules[0]}.bias"]
    wrt = rng.sample(grad_leaves, rng.randint(1, len(grad_leaves)))
    names = [f"g{i}" for i in range(len(wrt))]
    steps = ["  - forward"]
    if rng.random() < 0.8:
        mat = rng.random() < 0.5
        steps.append(f"  - {{backward: {{method: grad, inputs: [{', '.join(wrt)}], create_graph: true, "
                     f"{'materialize_grads: true, ' if mat else ''}as: [{', '.join(names)}]}}}}")
        cov["grad create_graph"] += 1
        cov["materialize_grads"] += mat
        pieces = [rng.choice(["sum({0} * {0})", "sum({0})", "sum({0} ** 3)", "sum(tanh({0}))"]).format(g)
                  for g in names]
        root = " + ".join(pieces)
        if rng.random() < 0.3:
            root = f"loss + {root}"
            cov["root with loss"] += 1
        kind = rng.random()
        if kind < 0.4:
            steps.append(f'  - {{backward: {{root: "{root}"}}}}')
            cov["backward from root"] += 1
        elif kind < 0.7:
            wrt2 = rng.sample(grad_leaves, rng.randint(1, len(grad_leaves)))
            steps.append(f'  - {{backward: {{method: grad, inputs: [{", ".join(wrt2)}], root: "{root}", '
                         f'allow_unused: true}}}}')
            cov["grad of grad"] += 1
        else:
            steps.append(f'  - {{backward: {{roots: ["{root}", loss], grad_outputs: [null, 0.5]}}}}')
            cov["roots"] += 1
    else:
        steps.append("  - {backward: {create_graph: true}}")
        names = []
        cov["backward create_graph"] += 1
        steps.append(f'  - {{backward: {{method: grad, inputs: [{wrt[0]}], root: "{loss.replace("y", "y")}", '
                     'create_graph: true, as: [g0]}}')
        steps.append('  - {backward: {root: "sum(g0 * g0)"}}')
        names = ["g0"]
    lines.append("steps:")
    lines += steps
    # hooks, per variant
    lines.append("variants:")
    lines.append("  plain: {}")
    for v in range(rng.choice([1, 2])):
        hooks = []
        for _ in range(rng.randint(1, 3)):
            choice = rng.random()
            if choice < 0.3 and names:
                g = rng.choice(names)
                ret = rng.random() < 0.4
                hooks.append("{tensor: " + g + (', returns: "grad * 2"' if ret else "") + "}")
                cov["hook on as: name"] += 1
            elif choice < 0.45 and names:
                hooks.append(f"{{node: {rng.choice(names)}, kind: {rng.choice(['pre', 'post'])}}}")
                cov["node hook on as: name"] += 1
            elif choice < 0.6 and forward_names:
                ret = rng.random() < 0.4
                hooks.append("{tensor: h" + (', returns: "grad * 3"' if ret else "") + "}")
                cov["tensor hook on forward tensor"] += 1
            elif choice < 0.7 and forward_names:
                hooks.append("{tensor: h, kind: retain_grad}")
                cov["retain_grad"] += 1
            elif choice < 0.8 and len(names) >= 2:
                # mode any: an as: name whose gradient is constant does not require grad, and mode all
                # over it is refused (PyTorch's AssertionError at registration; v1 refuses the file)
                hooks.append(f"{{multi_grad: [{names[0]}, {names[1]}], mode: any}}")
                cov["multi_grad on as: names"] += 1
            elif choice < 0.88:
                # saved-tensor hooks around the forward, or (during:) around chosen steps: a
                # create_graph backward's recorded ops pack through a block around it
                pack, unpack = rng.choice([("x", "x"), ("x * 2", "x"), ("x", "x / 2"), ("x * 2", "x / 2")])
                if any(f in forward_text for f in ("where(", "maximum(", "clamp(")):
                    # their backward formulas save bool masks, and arithmetic on a bool tensor (an
                    # int64 result) is not modelled: the hooks hand the saved tensors on as they are
                    pack, unpack = "x", "x"
                block = f'{{saved_tensors: {{pack: "{pack}", unpack: "{unpack}"}}'
                if rng.random() < 0.7:
                    during = sorted(rng.sample(range(len(steps)), rng.randint(1, len(steps))))
                    block += f", during: [{', '.join(map(str, during))}]"
                    cov["saved_tensors during steps"] += 1
                else:
                    cov["saved_tensors around the forward"] += 1
                hooks.append(block + "}")
            elif modules:
                hooks.append(f"{{module: {rng.choice(modules)}, kind: full_backward}}")
                cov["full_backward"] += 1
            else:
                hooks.append("{tensor: y" + (', returns: "grad * 2"' if rng.random() < 0.4 else "") + "}")
                cov["tensor hook on y"] += 1
        hooks = list(dict.fromkeys(hooks))
        # one legacy-free, duplicate-free list; a module gets one full hook at most
        lines.append(f"  hooked{v}:")
        lines.append("    hooks:")
        lines += [f"      - {h}" for h in hooks]
    return "\n".join(lines) + "\n", cov
