"""Problem files for the benchmark workloads, generated from code.

Each generator returns the YAML text in a small record; the MLP's record also holds its
numbers, so that torch and the FLINT floor compute on exactly the same values. Numbers are
small dyadic rationals (k/8, k/16): exact in float64, short in YAML, and what ``adjoint``
reads as exact rationals. A seed makes every file reproducible.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from fractions import Fraction

#: the contract's activation module types the MLP workloads use
ACTIVATIONS = ("ReLU", "Tanh")
#: the two deep chains: residual layer ``u + ACT(A @ u)``
CHAIN_ACTIVATIONS = ("relu", "tanh")


@dataclass(frozen=True)
class MLPCase:
    """A Sequential of Linear layers with an activation between them, loss ``sum(y * y)``.

    ``weights[i]`` is (out, in) as ``nn.Linear`` stores it; every value a Fraction."""

    text: str
    activation: str
    x: list[list[Fraction]]
    weights: list[list[list[Fraction]]]
    biases: list[list[Fraction]]


@dataclass(frozen=True)
class ChainCase:
    """A Sequential of ``depth`` residual layers ``u + ACT(A @ u)`` on a 1-D input, loss ``sum(y * y)``."""

    text: str
    activation: str
    depth: int


@dataclass(frozen=True)
class SymbolicCase:
    """A scalar chain ``h = tanh(w_i * h + b_i)`` of Linear(1, 1) + Tanh layers whose weights and
    biases are free symbols ``w_i``, ``b_i``; loss ``sum(y * y)``. ``x`` is the input's value."""

    text: str
    depth: int
    x: Fraction


def _num(v: Fraction) -> str:
    """A dyadic rational as a YAML number (exact: a terminating decimal)."""
    if v.denominator == 1:
        return str(v.numerator)
    return repr(float(v)) if v.denominator & (v.denominator - 1) == 0 else f'"{v}"'


def _literal(value) -> str:
    if isinstance(value, list):
        return "[" + ",".join(_literal(v) for v in value) + "]"  # compact: the 4096-layer chain is near 1 MB
    return _num(value)


def _matrix(rng: random.Random, rows: int, cols: int, span: int, denom: int) -> list[list[Fraction]]:
    return [[Fraction(rng.randint(-span, span), denom) for _ in range(cols)] for _ in range(rows)]


def mlp_case(width: int = 64, layers: int = 8, batch: int = 8, activation: str = "ReLU",
             seed: int = 0) -> MLPCase:
    """Issue 15's ``mlp`` / ``mlp_tanh``: ``layers`` Linear(width, width), the activation between
    them (layers - 1 of them), input ``x`` (batch, width) requiring grad, a full backward hook on
    every Linear and a tensor hook on every activation's output; dtype float64 (what torch runs)."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {ACTIVATIONS}, not {activation!r}")
    rng = random.Random(seed)
    x = _matrix(rng, batch, width, 8, 8)
    weights = [_matrix(rng, width, width, 8, 8) for _ in range(layers)]
    biases = [_matrix(rng, 1, width, 4, 8)[0] for _ in range(layers)]
    lines = [f"name: mlp_{activation.lower()}", "dtype: float64", "inputs:",
             f"  x: {{value: {_literal(x)}, requires_grad: true}}", "model:", "  type: Sequential", "  children:"]
    for i in range(layers):
        lines.append(f"    fc{i}: {{type: Linear, params: {{weight: {_literal(weights[i])}, "
                     f"bias: {_literal(biases[i])}}}}}")
        if i < layers - 1:
            lines.append(f"    act{i}: {{type: {activation}}}")
    lines += ['loss: "sum(y * y)"', "hooks:"]
    lines += [f"  - {{module: fc{i}, kind: full_backward}}" for i in range(layers)]
    lines += [f"  - {{tensor: act{i}, kind: hook}}" for i in range(layers - 1)]
    return MLPCase("\n".join(lines) + "\n", activation, x, weights, biases)


def chain_case(depth: int, activation: str = "relu", width: int = 4, seed: int = 0) -> ChainCase:
    """Issue 15's ``deep``: ``depth`` residual layers ``u + ACT(A @ u)`` (A: width x width, entries
    in {-1/16, 0, 1/16}: small enough that the ReLU chain stays within float64 at depth 4096),
    u requiring grad, a full backward hook on every layer; dtype float64."""
    if activation not in CHAIN_ACTIVATIONS:
        raise ValueError(f"activation must be one of {CHAIN_ACTIVATIONS}, not {activation!r}")
    rng = random.Random(seed)
    u = [Fraction(rng.randint(-8, 8), 8) for _ in range(width)]
    matrices = [_matrix(rng, width, width, 1, 16) for _ in range(depth)]
    lines = [f"name: chain_{activation}_{depth}", "dtype: float64", "inputs:",
             f"  u: {{value: {_literal(u)}, requires_grad: true}}", "model:", "  type: Sequential", "  children:"]
    for i, a in enumerate(matrices):
        lines.append(f'    l{i}: {{inputs: [u], forward: "u + {activation}(A @ u)", params: {{A: {_literal(a)}}}}}')
    lines += ['loss: "sum(y * y)"', "hooks:"]
    lines += [f"  - {{module: l{i}, kind: full_backward}}" for i in range(depth)]
    return ChainCase("\n".join(lines) + "\n", activation, depth)


def symbolic_case(depth: int = 16, x: Fraction = Fraction(1, 2)) -> SymbolicCase:
    """Issue 15's ``symbolic``: Linear(1, 1) layers with weight ``[[w_i]]`` and bias ``[b_i]``, each
    followed by Tanh, on the input ``[[x]]`` (not requiring grad); no hooks."""
    lines = ["name: symbolic_chain", "dtype: float64", "inputs:", f"  x: [[{_num(x)}]]", "model:",
             "  type: Sequential", "  children:"]
    for i in range(depth):
        lines.append(f"    fc{i}: {{type: Linear, params: {{weight: [[w_{i}]], bias: [b_{i}]}}}}")
        lines.append(f"    act{i}: {{type: Tanh}}")
    lines.append('loss: "sum(y * y)"')
    return SymbolicCase("\n".join(lines) + "\n", depth, x)


# ----------------------------------------------------------------------------- models (issues 11 and 12)

@dataclass(frozen=True)
class ModelCase:
    """A generated model problem: its YAML text, and the side files it names (file name -> array),
    written next to it by :func:`write_model`."""

    name: str
    text: str
    files: dict


def write_model(case: ModelCase, directory: str) -> str:
    """Write ``case``'s problem file and side files into ``directory`` (made if missing); the
    problem's path. Side files have plain names (x.npy): one model per directory."""
    import os

    import numpy as np

    os.makedirs(directory, exist_ok=True)

    for name, array in case.files.items():
        np.save(os.path.join(directory, name), array, allow_pickle=False)
    path = os.path.join(directory, f"{case.name}.yaml")
    with open(path, "w") as fh:
        fh.write(case.text)
    return path


def _ints(rng: random.Random, shape: tuple, span: int = 4) -> str:
    """A nested literal of small integers (the file's ``scale:`` makes them dyadic)."""
    if len(shape) == 1:
        return "[" + ", ".join(str(rng.randint(-span, span)) for _ in range(shape[0])) + "]"
    return "[" + ", ".join(_ints(rng, shape[1:], span) for _ in range(shape[0])) + "]"


def cnn_case(batch: int = 4, size: int = 8, channels: int = 2, seed: int = 0) -> ModelCase:
    """Issue 11's CNN: block = Conv2d(channels -> 4, 3x3, padding 1), BatchNorm2d (training),
    ReLU; MaxPool2d(2), Flatten, Linear(4 * (size/2)^2 -> 10), CrossEntropyLoss; input
    (batch, channels, size, size) requiring grad, a full backward hook on the block; parameters
    from ``init: {seed: 0}``; dtype float64 (what torch runs)."""
    rng = random.Random(seed)
    feats = 4 * (size // 2) ** 2
    targets = "[" + ", ".join(str(rng.randrange(10)) for _ in range(batch)) + "]"
    text = f"""name: cnn_b{batch}_{size}x{size}
dtype: float64
init: {{seed: 0}}
inputs:
  x: {{value: {_ints(rng, (batch, channels, size, size))}, scale: "1/4", requires_grad: true}}
targets:
  t: {{value: {targets}, dtype: int64}}
model:
  children:
    block:
      type: Sequential
      children:
        conv: {{type: Conv2d, args: {{in_channels: {channels}, out_channels: 4, kernel_size: 3, padding: 1}}}}
        bn: {{type: BatchNorm2d, args: {{num_features: 4}}}}
        relu: {{type: ReLU}}
    pool: {{type: MaxPool2d, args: {{kernel_size: 2}}}}
    flat: {{type: Flatten}}
    fc: {{type: Linear, args: {{in_features: {feats}, out_features: 10}}}}
    ce: {{type: CrossEntropyLoss}}
  forward: "fc(flat(pool(block(x))))"
loss: "ce(y, t)"
hooks:
  - {{module: block, kind: full_backward}}
"""
    return ModelCase(f"cnn_b{batch}_{size}x{size}", text, {})


def transformer_case(width: int = 16, seq: int = 8, batch: int = 2, heads: int = 2, seed: int = 0) -> ModelCase:
    """Issue 11's transformer block (pre-LN, as problems/transformer_block.yaml): LayerNorm,
    MultiheadAttention (batch_first, self-attention, need_weights=False), residual, LayerNorm,
    Linear(width -> 4 width), GELU, Linear(4 width -> width), residual; loss a squared error;
    a full backward hook on the attention and on the MLP; ``init: {seed: 0}``; float64."""
    rng = random.Random(seed)
    text = f"""name: transformer_w{width}_s{seq}_b{batch}
dtype: float64
init: {{seed: 0}}
inputs:
  x: {{value: {_ints(rng, (batch, seq, width))}, scale: "1/4", requires_grad: true}}
targets:
  t: {{value: {_ints(rng, (batch, seq, width))}, scale: "1/4"}}
model:
  children:
    ln1: {{type: LayerNorm, args: {{normalized_shape: [{width}]}}}}
    attn: {{type: MultiheadAttention, args: {{embed_dim: {width}, num_heads: {heads}, batch_first: true}}}}
    ln2: {{type: LayerNorm, args: {{normalized_shape: [{width}]}}}}
    mlp:
      type: Sequential
      children:
        fc: {{type: Linear, args: {{in_features: {width}, out_features: {4 * width}}}}}
        act: {{type: GELU}}
        proj: {{type: Linear, args: {{in_features: {4 * width}, out_features: {width}}}}}
  forward: |
    a = ln1(x)
    h = x + attn(a, a, a, need_weights=False)[0]
    return h + mlp(ln2(h))
loss: "sum((y - t) ** 2) / 2"
hooks:
  - {{module: attn, kind: full_backward}}
  - {{module: mlp, kind: full_backward}}
"""
    return ModelCase(f"transformer_w{width}_s{seq}_b{batch}", text, {})


def _weights(files: dict, rng, name: str, shape: tuple, std: float):
    """A float32 side file of N(0, std) weights; the value text naming it."""
    import numpy as np

    files[f"{name}.npy"] = (rng.standard_normal(shape) * std).astype(np.float32)
    return f"{{value: {{file: {name}.npy}}}}"


def resnet18_case(size: int = 32, batch: int = 1, classes: int = 10, seed: int = 0) -> ModelCase:
    """Issue 12's ResNet-18 shape (the CIFAR stem: Conv2d 3x3 to 64 channels, no max-pool): four
    stages of two BasicBlocks (64, 128, 256, 512 channels; the first block of stages 2-4 strides 2
    with a 1x1 Conv2d + BatchNorm2d shortcut), AdaptiveAvgPool2d(1), Flatten, Linear(512 ->
    classes) as one Sequential, loss F.cross_entropy; BatchNorm in training mode; convolutions without bias, as
    torchvision's. Weights are float32 side files (He-scaled normals); input (batch, 3, size,
    size) of data; one full backward hook on the last block. dtype float64."""
    import numpy as np

    rng = np.random.default_rng(seed)
    files: dict = {}
    lines = ["name: resnet18", "dtype: float64", "inputs:",
             f"  x: {_weights(files, rng, 'x', (batch, 3, size, size), 1.0)}",
             "targets:", f"  t: {{value: {[int(v) for v in rng.integers(0, classes, batch)]}, dtype: int64}}",
             "model:", "  type: Sequential", "  children:"]

    def conv(path: str, cin: int, cout: int, k: int, stride: int, indent: str) -> None:
        w = _weights(files, rng, f"{path}.weight", (cout, cin, k, k), (2 / (cin * k * k)) ** 0.5)
        lines.append(f"{indent}{path.rsplit('.', 1)[-1]}: {{type: Conv2d, args: {{in_channels: {cin}, "
                     f"out_channels: {cout}, kernel_size: {k}, stride: {stride}, padding: {k // 2}, bias: false}}, "
                     f"params: {{weight: {w}}}}}")

    def bn(path: str, c: int, indent: str) -> None:
        lines.append(f"{indent}{path.rsplit('.', 1)[-1]}: {{type: BatchNorm2d, args: {{num_features: {c}}}, "
                     f"params: {{weight: {{value: {{file: ones{c}.npy}}}}, bias: {{value: {{file: zeros{c}.npy}}}}}}}}")
        files[f"ones{c}.npy"] = np.ones(c, dtype=np.float32)
        files[f"zeros{c}.npy"] = np.zeros(c, dtype=np.float32)

    conv("conv1", 3, 64, 3, 1, "    ")
    bn("bn1", 64, "    ")
    lines.append("    relu: {type: ReLU}")
    cin = 64
    blocks = []
    for stage, cout in enumerate((64, 128, 256, 512), start=1):
        for j in range(2):
            stride = 2 if stage > 1 and j == 0 else 1
            path = f"layer{stage}_{j}"
            blocks.append(path)
            lines += [f"    {path}:", "      children:"]
            conv(f"{path}.conv1", cin, cout, 3, stride, "        ")
            bn(f"{path}.bn1", cout, "        ")
            conv(f"{path}.conv2", cout, cout, 3, 1, "        ")
            bn(f"{path}.bn2", cout, "        ")
            shortcut = "x"
            if stride != 1 or cin != cout:
                lines += ["        down:", "          type: Sequential", "          children:"]
                conv(f"{path}.down.0", cin, cout, 1, stride, "            ")
                bn(f"{path}.down.1", cout, "            ")
                shortcut = "down(x)"
            lines += ["      forward: |", "        out = F.relu(bn1(conv1(x)))",
                      f"        return F.relu(bn2(conv2(out)) + {shortcut})"]
            cin = cout
    lines += ["    pool: {type: AdaptiveAvgPool2d, args: {output_size: 1}}", "    flat: {type: Flatten}",
              f"    fc: {{type: Linear, args: {{in_features: 512, out_features: {classes}}}, "
              f"params: {{weight: {_weights(files, rng, 'fc.weight', (classes, 512), 512 ** -0.5)}, "
              f"bias: {_weights(files, rng, 'fc.bias', (classes,), 0.01)}}}}}",
              'loss: "F.cross_entropy(y, t)"', "hooks:", f"  - {{module: {blocks[-1]}, kind: full_backward}}"]
    return ModelCase("resnet18", "\n".join(lines) + "\n", files)


def mlp_f64_case(width: int = 256, layers: int = 16, batch: int = 32, seed: int = 0) -> ModelCase:
    """Issue 29's ``--float64`` MLP: ``layers`` Linear(width, width) with ReLU between them, input
    (batch, width), a full backward hook on every Linear, loss ``sum(y * y)``; weights float32 side
    files (N(0, 1/width), so the values stay of order one), dtype float64."""
    import numpy as np

    rng = np.random.default_rng(seed)
    files: dict = {}
    lines = ["name: mlp_f64", "dtype: float64", "inputs:",
             f"  x: {_weights(files, rng, 'x', (batch, width), 1.0)}", "model:", "  type: Sequential",
             "  children:"]
    for i in range(layers):
        lines.append(f"    fc{i}: {{type: Linear, args: {{in_features: {width}, out_features: {width}}}, "
                     f"params: {{weight: {_weights(files, rng, f'fc{i}.weight', (width, width), width ** -0.5)}, "
                     f"bias: {_weights(files, rng, f'fc{i}.bias', (width,), 0.1)}}}}}")
        if i < layers - 1:
            lines.append(f"    act{i}: {{type: ReLU}}")
    lines += ['loss: "sum(y * y)"', "hooks:"] + [f"  - {{module: fc{i}, kind: full_backward}}" for i in range(layers)]
    return ModelCase(f"mlp_f64_w{width}_l{layers}_b{batch}", "\n".join(lines) + "\n", files)


def gpt2_case(layers: int = 12, width: int = 768, heads: int = 12, seq: int = 16, batch: int = 1,
              seed: int = 0) -> ModelCase:
    """Issue 12's GPT-2 shape: ``layers`` pre-LN blocks (LayerNorm, MultiheadAttention with
    ``heads`` heads, batch_first, causal mask; residual; LayerNorm, Linear(width -> 4 width),
    GELU (tanh), Linear(4 width -> width); residual), a final LayerNorm; the input is the
    (batch, seq, width) embedding itself (no vocabulary: the token embedding is a lookup, not
    part of the blocks), loss ``mean(y * y)``. Weights are float32 side files (N(0, 0.02), as
    GPT-2 initialises); one full backward hook on the last block's attention. dtype float64."""
    import numpy as np

    rng = np.random.default_rng(seed)
    files: dict = {}
    mask = np.triu(np.full((seq, seq), -np.inf, dtype=np.float32), 1)
    lines = ["name: gpt2", "dtype: float64", "inputs:",
             f"  x: {_weights(files, rng, 'x', (batch, seq, width), 1.0)}",
             "targets:", "  mask: {value: {file: mask.npy}}", "model:", "  type: Sequential", "  children:"]
    files["mask.npy"] = np.where(np.isinf(mask), -1e4, 0).astype(np.float32)   # side files refuse infinities
    w = width

    def ln(path: str, indent: str) -> str:
        files.setdefault(f"ones{w}.npy", np.ones(w, dtype=np.float32))
        files.setdefault(f"zeros{w}.npy", np.zeros(w, dtype=np.float32))
        return (f"{indent}{path}: {{type: LayerNorm, args: {{normalized_shape: [{w}]}}, "
                f"params: {{weight: {{value: {{file: ones{w}.npy}}}}, bias: {{value: {{file: zeros{w}.npy}}}}}}}}")

    def linear(path: str, cin: int, cout: int, indent: str) -> str:
        return (f"{indent}{path.rsplit('.', 1)[-1]}: {{type: Linear, args: {{in_features: {cin}, out_features: {cout}}}, "
                f"params: {{weight: {_weights(files, rng, path + '.weight', (cout, cin), 0.02)}, "
                f"bias: {_weights(files, rng, path + '.bias', (cout,), 0.02)}}}}}")

    for i in range(layers):
        p = f"h{i}"
        lines += [f"    {p}:", "      children:", ln("ln_1", "        "),
                  "        attn:", "          type: MultiheadAttention",
                  f"          args: {{embed_dim: {w}, num_heads: {heads}, batch_first: true}}",
                  "          params:",
                  f"            in_proj_weight: {_weights(files, rng, p + '.attn.in_proj_weight', (3 * w, w), 0.02)}",
                  f"            in_proj_bias: {_weights(files, rng, p + '.attn.in_proj_bias', (3 * w,), 0.02)}",
                  f"            out_proj.weight: {_weights(files, rng, p + '.attn.out_proj.weight', (w, w), 0.02)}",
                  f"            out_proj.bias: {_weights(files, rng, p + '.attn.out_proj.bias', (w,), 0.02)}",
                  ln("ln_2", "        "),
                  "        mlp:", "          children:",
                  linear(f"{p}.mlp.c_fc", w, 4 * w, "            "),
                  "            act: {type: GELU, args: {approximate: tanh}}",
                  linear(f"{p}.mlp.c_proj", 4 * w, w, "            "),
                  '          forward: "c_proj(act(c_fc(x)))"',
                  "      forward: |", "        a = ln_1(x)",
                  "        r = x + attn(a, a, a, need_weights=False, attn_mask=mask)[0]",
                  "        return r + mlp(ln_2(r))"]
    lines.append(ln("ln_f", "    "))
    lines += ['loss: "mean(y * y)"', "hooks:",
              f"  - {{module: h{layers - 1}.attn, kind: full_backward}}"]
    return ModelCase("gpt2", "\n".join(lines) + "\n", files)
