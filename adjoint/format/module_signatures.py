"""The built-in module types: one record per ``torch.nn`` class a problem file may name.

Each :class:`NNType` says what PyTorch 2.13's class takes and makes, read from its
``__init__`` (and pinned against real torch in ``tests/test_parse.py``):

* ``args``: the constructor's keyword arguments, with PyTorch's names, defaults and accepted
  types (:class:`ArgSpec`; ``kernel_size: 3`` and ``[3, 3]`` both, where torch takes both);
  values are stored as the torch module stores them after construction (``Conv2d``'s
  ``kernel_size`` as a tuple, ``MaxPool2d``'s as given, its ``stride`` defaulting to
  ``kernel_size``), numbers exactly (``eps`` 1e-05 is 1/100000);
* ``params(args)``: the parameters' names and shapes, exactly as ``named_parameters()``
  names and orders them (``in_proj_weight``, ``in_proj_bias``, ``out_proj.weight``, ...);
* ``buffers(args)``: the buffers' names, shapes, defaults and dtype as ``named_buffers()``
  has them (``running_mean`` zeros, ``running_var`` ones, ``num_batches_tracked`` int64 0);
  a loss's ``weight`` / ``pos_weight`` are buffers in torch, so a file gives them there;
* ``check(args)``: the constructor's own refusals, with PyTorch's wording;
* ``inputs``: the forward's positional arguments as torch names them (``optional_inputs``
  may be left out);
* ``forward``: None here; the runtime fills in what a call computes.

The functions are named module-level functions (no anonymous rules). Nothing here imports
torch or YAML: :mod:`adjoint.format.validate_modules` reads the YAML into these shapes.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Callable, Mapping

Args = Mapping[str, object]

REQUIRED = "<required>"

#: Arg kinds. int / float / bool / str: one value (float exact, str one of ``choices``);
#: opt_int / opt_float / opt_bool: or None; ints: an int or ``rank`` ints, stored as a tuple; pool: an int or
#: ``rank`` ints, stored as given; opt_pool: the same or None; padding: "same", "valid", an int
#: or ``rank`` ints (tuple); shape: an int or a list of ints (tuple); sizes: a list of ints
#: (tuple); output_size: an int, None or ``rank`` entries each an int or None.
ARG_KINDS = ("int", "float", "bool", "str", "opt_int", "opt_float", "opt_bool", "ints", "pool", "opt_pool", "padding", "shape",
             "sizes", "output_size", "layer", "opt_layer")
#: layer / opt_layer: a module passed as an argument, given as the args of the type named by ``choices[0]``
#: (a mapping; opt_layer: or None), stored as a tuple of (name, value) pairs with defaults filled in.


@dataclass(frozen=True)
class ArgSpec:
    """One constructor argument of an nn layer: its kind, default and allowed values."""

    name: str
    kind: str
    default: object = REQUIRED
    minimum: int | None = None    # ints: each at least this
    choices: tuple[str, ...] = ()
    rank: int = 0                 # ints / pool / padding / output_size: how many entries a list has

    @property
    def required(self) -> bool:
        return self.default == REQUIRED


@dataclass(frozen=True)
class ParamSpec:
    """One parameter of an nn layer and its shape rule."""

    name: str                     # as named_parameters() names it, relative to the module
    shape: tuple[int, ...]
    #: "ones" | "zeros": the value reset_parameters() gives it, whatever the random state (a norm's
    #: weight and bias, attention's biases); a Fraction: every element that constant (PReLU's
    #: ``init``); None: a random draw, which a file must give
    default: str | Fraction | None = None
    #: its version counter when the constructor returns, kept when the file does not write it: each
    #: in-place initialisation moves it (``init.ones_``: 1; MultiheadAttention's ``out_proj.bias``,
    #: Linear's ``uniform_`` and then ``constant_(..., 0.)``: 2)
    version: int = 1


@dataclass(frozen=True)
class BufferSpec:
    """One buffer of an nn layer: its shape rule, default value and dtype."""

    name: str                     # as named_buffers() names it
    shape: tuple[int, ...] | None  # None: any shape (given by the file)
    default: str | None           # "zeros" | "ones" | None: absent unless the file gives it
    dtype: str | None = None      # None: the problem's float dtype; "int64"
    #: its version counter when the constructor returns, kept when the file does not write it
    #: (``reset_running_stats``: ``zero_()`` / ``fill_(1)``, one write each)
    version: int = 1


def _no_params(args: Args) -> tuple[ParamSpec, ...]:
    return ()


def _no_buffers(args: Args) -> tuple[BufferSpec, ...]:
    return ()


def _no_check(args: Args) -> tuple[tuple[str, str], ...]:
    return ()


def _as_given(args: dict) -> dict:
    return args


@dataclass(frozen=True)
class NNType:
    """An nn layer type (Linear, Conv2d, ...): its arguments, inputs, parameters, buffers and forward."""

    name: str
    args: tuple[ArgSpec, ...] = ()
    inputs: tuple[str, ...] = ("input",)
    optional_inputs: tuple[str, ...] = ()
    params: Callable[[Args], tuple[ParamSpec, ...]] = _no_params
    buffers: Callable[[Args], tuple[BufferSpec, ...]] = _no_buffers
    check: Callable[[Args], tuple[tuple[str, str], ...]] = _no_check   # (arg name, PyTorch's message)
    raises: str = "ValueError"    # the exception class the constructor's refusals (``check``) raise
    resolve: Callable[[dict], dict] = _as_given   # defaults torch derives from other args
    container: bool = False       # Sequential, ModuleList: children, no args
    loss: bool = False
    number_inputs: tuple[str, ...] = ()   # inputs that may also be a Python number (GaussianNLLLoss's var)
    forward: object = None        # filled by the runtime

    @property
    def has_params(self) -> bool:
        return self.params is not _no_params

    @property
    def has_buffers(self) -> bool:
        return self.buffers is not _no_buffers

    def arg(self, name: str) -> ArgSpec | None:
        for a in self.args:
            if a.name == name:
                return a
        return None


# ----------------------------------------------------------------------------- parameters

def _linear_params(a: Args) -> tuple[ParamSpec, ...]:
    out = (ParamSpec("weight", (a["out_features"], a["in_features"])),)
    return out + ((ParamSpec("bias", (a["out_features"],)),) if a["bias"] else ())


def _bilinear_params(a: Args) -> tuple[ParamSpec, ...]:
    out = (ParamSpec("weight", (a["out_features"], a["in1_features"], a["in2_features"])),)
    return out + ((ParamSpec("bias", (a["out_features"],)),) if a["bias"] else ())


def _conv_params(a: Args) -> tuple[ParamSpec, ...]:
    shape = (a["out_channels"], a["in_channels"] // a["groups"]) + tuple(a["kernel_size"])
    out = (ParamSpec("weight", shape),)
    return out + ((ParamSpec("bias", (a["out_channels"],)),) if a["bias"] else ())


def _conv_transpose_params(a: Args) -> tuple[ParamSpec, ...]:
    """A transposed convolution's weight is ``(in_channels, out_channels // groups, *kernel_size)``."""
    shape = (a["in_channels"], a["out_channels"] // a["groups"]) + tuple(a["kernel_size"])
    out = (ParamSpec("weight", shape),)
    return out + ((ParamSpec("bias", (a["out_channels"],)),) if a["bias"] else ())


def _batchnorm_params(a: Args) -> tuple[ParamSpec, ...]:
    if not a["affine"]:
        return ()
    n = (a["num_features"],)
    return (ParamSpec("weight", n, "ones"),) + ((ParamSpec("bias", n, "zeros"),) if a["bias"] else ())


def _batchnorm_buffers(a: Args) -> tuple[BufferSpec, ...]:
    if not a["track_running_stats"]:
        return ()
    n = (a["num_features"],)
    return (BufferSpec("running_mean", n, "zeros"), BufferSpec("running_var", n, "ones"),
            BufferSpec("num_batches_tracked", (), "zeros", "int64"))


def _layernorm_params(a: Args) -> tuple[ParamSpec, ...]:
    if not a["elementwise_affine"]:
        return ()
    shape = tuple(a["normalized_shape"])
    return (ParamSpec("weight", shape, "ones"),) + ((ParamSpec("bias", shape, "zeros"),) if a["bias"] else ())


def _rmsnorm_params(a: Args) -> tuple[ParamSpec, ...]:
    return (ParamSpec("weight", tuple(a["normalized_shape"]), "ones"),) if a["elementwise_affine"] else ()


def _prelu_params(a: Args) -> tuple[ParamSpec, ...]:
    # PReLU.reset_parameters: init.constant_(self.weight, self.init)
    return (ParamSpec("weight", (a["num_parameters"],), Fraction(a["init"])),)


def _groupnorm_params(a: Args) -> tuple[ParamSpec, ...]:
    if not a["affine"]:
        return ()
    n = (a["num_channels"],)
    return (ParamSpec("weight", n, "ones"),) + ((ParamSpec("bias", n, "zeros"),) if a["bias"] else ())


def _embedding_params(a: Args) -> tuple[ParamSpec, ...]:
    return (ParamSpec("weight", (a["num_embeddings"], a["embedding_dim"])),)


def _mha_params(a: Args) -> tuple[ParamSpec, ...]:
    e, kdim, vdim = a["embed_dim"], a["kdim"], a["vdim"]
    if kdim == e and vdim == e:
        out: tuple[ParamSpec, ...] = (ParamSpec("in_proj_weight", (3 * e, e)),)
    else:
        out = (ParamSpec("q_proj_weight", (e, e)), ParamSpec("k_proj_weight", (e, kdim)),
               ParamSpec("v_proj_weight", (e, vdim)))
    if a["bias"]:
        out += (ParamSpec("in_proj_bias", (3 * e,), "zeros"),)   # _reset_parameters: constant_(..., 0.)
    if a["add_bias_kv"]:
        out += (ParamSpec("bias_k", (1, 1, e)), ParamSpec("bias_v", (1, 1, e)))
    out += (ParamSpec("out_proj.weight", (e, e)),)
    if a["bias"]:
        out += (ParamSpec("out_proj.bias", (e,), "zeros", version=2),)
    return out


def _weighted_loss_buffers(a: Args) -> tuple[BufferSpec, ...]:
    return (BufferSpec("weight", None, None),)


def _bce_logits_buffers(a: Args) -> tuple[BufferSpec, ...]:
    return (BufferSpec("weight", None, None), BufferSpec("pos_weight", None, None))


# ----------------------------------------------------------------------------- checks

class UnknownPadding(str):
    """A convolution's ``padding`` string other than ``same`` and ``valid``, with where the file
    gives it: PyTorch's ValueError for it, "Invalid padding string 'foo', should be one of {'same',
    'valid'}", prints a set of two strings, whose order follows the process's string hash seed
    (``PYTHONHASHSEED``): no message can be predicted, so it is refused where the constructor
    would raise it (the ``groups`` checks before it are answers)."""

    def __new__(cls, text: str, loc):
        out = super().__new__(cls, text)
        out.loc = loc
        return out


def _conv_check(a: Args) -> tuple[tuple[str, str], ...]:
    out = []
    if a["in_channels"] % a["groups"]:
        out.append(("groups", "in_channels must be divisible by groups"))
    if a["out_channels"] % a["groups"]:
        out.append(("groups", "out_channels must be divisible by groups"))
    if isinstance(a["padding"], UnknownPadding) and not out:
        from adjoint.format.errors import ProblemError

        raise ProblemError(a["padding"].loc, f"padding {str(a['padding'])!r}: PyTorch's constructor raises ValueError "
                                             f"\"Invalid padding string {str(a['padding'])!r}, should be one of "
                                             "{'same', 'valid'}\" with the two strings in the order of the process's "
                                             "string hash seed (PYTHONHASHSEED), which no prediction can know; give "
                                             "padding: same, valid or numbers")
    if a["padding"] == "same" and any(s != 1 for s in a["stride"]):
        out.append(("padding", "padding='same' is not supported for strided convolutions"))
    return tuple(out)


def _groupnorm_check(a: Args) -> tuple[tuple[str, str], ...]:
    if a["num_channels"] % a["num_groups"]:
        return (("num_groups", f"num_channels ({a['num_channels']}) must be divisible by num_groups "
                               f"({a['num_groups']})"),)
    return ()


def _mha_check(a: Args) -> tuple[tuple[str, str], ...]:
    if a["embed_dim"] % a["num_heads"]:
        return (("num_heads", "embed_dim must be divisible by num_heads"),)
    return ()


#: TransformerEncoderLayer's and TransformerDecoderLayer's constructor arguments (activation: the strings)
_TRANSFORMER_ARGS = (
    ArgSpec("d_model", "int", minimum=1), ArgSpec("nhead", "int", minimum=1),
    ArgSpec("dim_feedforward", "int", 2048, 1), ArgSpec("dropout", "float", Fraction(1, 10)),
    ArgSpec("activation", "str", "relu", choices=("relu", "gelu")),
    ArgSpec("layer_norm_eps", "float", Fraction(1, 100000)), ArgSpec("batch_first", "bool", False),
    ArgSpec("norm_first", "bool", False), ArgSpec("bias", "bool", True))


def _transformer_check(a: Args) -> tuple[tuple[str, str], ...]:
    if a["d_model"] % a["nhead"]:
        return (("nhead", "embed_dim must be divisible by num_heads"),)
    return ()


def _hardtanh_check(a: Args) -> tuple[tuple[str, str], ...]:
    if a["max_val"] <= a["min_val"]:
        return (("max_val", f"max_val ({float(a['max_val'])}) must be greater than min_val ({float(a['min_val'])})"),)
    return ()


#: the dropout modules whose file gives the keep-mask in training mode (``mask:``)
DROPOUTS = ("Dropout", "Dropout1d", "Dropout2d", "Dropout3d")


def _dropout_check(a: Args) -> tuple[tuple[str, str], ...]:
    if not 0 <= a["p"] <= 1:
        return (("p", f"dropout probability has to be between 0 and 1, but got {float(a['p'])}"),)
    return ()


def _embedding_check(a: Args) -> tuple[tuple[str, str], ...]:
    idx, n = a["padding_idx"], a["num_embeddings"]
    if idx is not None and not -n <= idx < n:
        return (("padding_idx", "Padding_idx must be within num_embeddings"),)
    return ()


def _triplet_check(a: Args) -> tuple[tuple[str, str], ...]:
    if a["margin"] <= 0:
        return (("margin", f"TripletMarginLoss: expected margin to be greater than 0, got {float(a['margin'])} "
                           "instead"),)
    return ()


def _embedding_bag_check(a: Args) -> tuple[tuple[str, str], ...]:
    """EmbeddingBag's own assert, worded with a lowercase p (Embedding's has a capital)."""
    return tuple((arg, message[0].lower() + message[1:]) for arg, message in _embedding_check(a))


# ----------------------------------------------------------------------------- derived defaults

def _pool_resolve(a: dict) -> dict:
    """``self.stride = stride if (stride is not None) else kernel_size``."""
    if a.get("stride") is None:
        a = dict(a, stride=a["kernel_size"])
    return a


def _avg_pool1d_resolve(a: dict) -> dict:
    """AvgPool1d keeps ``_single(...)`` of its sizes: one-element tuples, where MaxPool1d keeps them as given."""
    a = _pool_resolve(a)
    return dict(a, **{k: (a[k],) if isinstance(a[k], int) else tuple(a[k]) for k in ("kernel_size", "stride", "padding")})


def _mha_resolve(a: dict) -> dict:
    """``kdim`` / ``vdim`` default to ``embed_dim``."""
    return dict(a, kdim=a["embed_dim"] if a["kdim"] is None else a["kdim"],
                vdim=a["embed_dim"] if a["vdim"] is None else a["vdim"])


def _embedding_resolve(a: dict) -> dict:
    """A negative ``padding_idx`` counts from the end, as torch stores it."""
    idx = a["padding_idx"]
    if idx is not None and -a["num_embeddings"] <= idx < 0:   # out of range: refused by the check
        a = dict(a, padding_idx=a["num_embeddings"] + idx)
    return a


# ----------------------------------------------------------------------------- the types

def _inplace() -> ArgSpec:
    return ArgSpec("inplace", "bool", False)


def _reduction(*more: str) -> ArgSpec:
    """Any string: a loss module's constructor keeps it, and its forward's functional raises
    PyTorch's ValueError for an unknown one (an answer; ``more``: the extra names it knows)."""
    return ArgSpec("reduction", "str", "mean")


def _conv(name: str, rank: int) -> NNType:
    return NNType(name, (
        ArgSpec("in_channels", "int", minimum=1), ArgSpec("out_channels", "int", minimum=1),
        ArgSpec("kernel_size", "ints", minimum=1, rank=rank), ArgSpec("stride", "ints", (1,) * rank, 1, rank=rank),
        ArgSpec("padding", "padding", (0,) * rank, 0, rank=rank),
        ArgSpec("dilation", "ints", (1,) * rank, 1, rank=rank), ArgSpec("groups", "int", 1, 1),
        ArgSpec("bias", "bool", True),
        ArgSpec("padding_mode", "str", "zeros", choices=("zeros", "reflect", "replicate", "circular"))),
        params=_conv_params, check=_conv_check)


def _conv_transpose(name: str, rank: int) -> NNType:
    """ConvTranspose1d / 2d (their constructor's order: output_padding before groups, dilation after
    bias; only padding_mode='zeros', PyTorch's ValueError otherwise)."""
    return NNType(name, (
        ArgSpec("in_channels", "int", minimum=1), ArgSpec("out_channels", "int", minimum=1),
        ArgSpec("kernel_size", "ints", minimum=1, rank=rank), ArgSpec("stride", "ints", (1,) * rank, 1, rank=rank),
        ArgSpec("padding", "ints", (0,) * rank, 0, rank=rank),
        ArgSpec("output_padding", "ints", (0,) * rank, 0, rank=rank), ArgSpec("groups", "int", 1, 1),
        ArgSpec("bias", "bool", True), ArgSpec("dilation", "ints", (1,) * rank, 1, rank=rank),
        ArgSpec("padding_mode", "str", "zeros", choices=("zeros",))),
        optional_inputs=("output_size",), params=_conv_transpose_params, check=_conv_check)


def _cell_params(gates: int):
    """weight_ih (G*H, I), weight_hh (G*H, H), bias_ih, bias_hh (G*H), as named_parameters() has them."""
    def params(a: Args) -> tuple[ParamSpec, ...]:
        g, h, i = gates * a["hidden_size"], a["hidden_size"], a["input_size"]
        out = (ParamSpec("weight_ih", (g, i)), ParamSpec("weight_hh", (g, h)))
        return out + ((ParamSpec("bias_ih", (g,)), ParamSpec("bias_hh", (g,))) if a["bias"] else ())
    params.__name__ = f"_cell_params_{gates}"
    return params


def _cell(name: str, gates: int, *extra: ArgSpec) -> NNType:
    """RNNCell / LSTMCell / GRUCell (adjoint/engine/layers/recurrent.py): ``hx`` optional."""
    return NNType(name, (ArgSpec("input_size", "int", minimum=1), ArgSpec("hidden_size", "int", minimum=1),
                         ArgSpec("bias", "bool", True)) + extra,
                  inputs=("input",), optional_inputs=("hx",), params=_cell_params(gates))


def _rnn_params(gates: int):
    """nn.RNN / LSTM / GRU: per layer and direction ``weight_ih_l{k}{sfx}``, ``weight_hh_l{k}{sfx}``,
    ``bias_ih_l{k}{sfx}``, ``bias_hh_l{k}{sfx}`` (``_reverse`` for the second direction), and an
    LSTM's ``weight_hr_l{k}{sfx}`` with ``proj_size``, in ``named_parameters()`` order; a layer
    above the first takes ``hidden * directions`` inputs (``proj_size * directions``)."""
    def params(a: Args) -> tuple[ParamSpec, ...]:
        g, h, dirs = gates * a["hidden_size"], a["hidden_size"], 2 if a["bidirectional"] else 1
        proj = a.get("proj_size", 0)
        real = proj or h
        out: tuple[ParamSpec, ...] = ()
        for layer in range(a["num_layers"]):
            n_in = a["input_size"] if layer == 0 else real * dirs
            for d in range(dirs):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                out += (ParamSpec(f"weight_ih{sfx}", (g, n_in)), ParamSpec(f"weight_hh{sfx}", (g, real)))
                if a["bias"]:
                    out += (ParamSpec(f"bias_ih{sfx}", (g,)), ParamSpec(f"bias_hh{sfx}", (g,)))
                if proj:
                    out += (ParamSpec(f"weight_hr{sfx}", (proj, h)),)
        return out
    params.__name__ = f"_rnn_params_{gates}"
    return params


def _rnn_check(a: Args) -> tuple[tuple[str, str], ...]:
    if not 0 <= a["dropout"] <= 1:
        return (("dropout", "dropout should be a number in range [0, 1] representing the probability of an "
                            "element being zeroed"),)
    if a.get("proj_size", 0) >= a["hidden_size"]:
        return (("proj_size", "proj_size has to be smaller than hidden_size"),)
    return ()


def _rnn(name: str, gates: int, nonlinearity: bool = False, proj: bool = False) -> NNType:
    """nn.RNN / LSTM / GRU (adjoint/engine/layers/recurrent_layers.py), PyTorch's argument order:
    ``hx`` optional (a pair ``(h_0, c_0)`` for LSTM)."""
    args = (ArgSpec("input_size", "int", minimum=1), ArgSpec("hidden_size", "int", minimum=1),
            ArgSpec("num_layers", "int", 1, minimum=1))
    if nonlinearity:
        args += (ArgSpec("nonlinearity", "str", "tanh", choices=("tanh", "relu")),)
    args += (ArgSpec("bias", "bool", True), ArgSpec("batch_first", "bool", False),
             ArgSpec("dropout", "float", Fraction(0)), ArgSpec("bidirectional", "bool", False))
    if proj:
        args += (ArgSpec("proj_size", "int", 0, minimum=0),)
    return NNType(name, args, inputs=("input",), optional_inputs=("hx",), params=_rnn_params(gates),
                  check=_rnn_check)


def _batchnorm(name: str) -> NNType:
    return NNType(name, (
        ArgSpec("num_features", "int", minimum=1), ArgSpec("eps", "float", Fraction(1, 100000)),
        ArgSpec("momentum", "opt_float", Fraction(1, 10)), ArgSpec("affine", "bool", True),
        ArgSpec("track_running_stats", "bool", True), ArgSpec("bias", "bool", True)),
        params=_batchnorm_params, buffers=_batchnorm_buffers)


def _instancenorm(name: str) -> NNType:
    """InstanceNorm1d / 2d / 3d (adjoint/engine/layers/instance_norm.py): _NormBase's arguments,
    parameters and buffers, with affine and track_running_stats False by default."""
    return NNType(name, (
        ArgSpec("num_features", "int", minimum=1), ArgSpec("eps", "float", Fraction(1, 100000)),
        ArgSpec("momentum", "opt_float", Fraction(1, 10)), ArgSpec("affine", "bool", False),
        ArgSpec("track_running_stats", "bool", False), ArgSpec("bias", "bool", True)),
        params=_batchnorm_params, buffers=_batchnorm_buffers)


def _loss(name: str, *extra: ArgSpec, buffers=_no_buffers, reduction: ArgSpec | None = None,
          inputs: tuple[str, ...] = ("input", "target")) -> NNType:
    return NNType(name, (reduction or _reduction(),) + extra, inputs=inputs, buffers=buffers, loss=True)


TYPES: dict[str, NNType] = {t.name: t for t in (
    # v1
    NNType("Linear", (ArgSpec("in_features", "int", minimum=1), ArgSpec("out_features", "int", minimum=1),
                      ArgSpec("bias", "bool", True)), params=_linear_params),
    NNType("ReLU", (_inplace(),)),
    NNType("Tanh"),
    NNType("Sigmoid"),
    NNType("Identity"),
    NNType("Sequential", container=True),
    # layers
    _conv("Conv1d", 1),
    _conv("Conv2d", 2),
    _conv_transpose("ConvTranspose1d", 1),
    _conv_transpose("ConvTranspose2d", 2),
    NNType("Upsample", (ArgSpec("size", "opt_pool", None, 1, rank=2), ArgSpec("scale_factor", "opt_float", None),
                        ArgSpec("mode", "str", "nearest", choices=("nearest", "linear", "bilinear")),
                        ArgSpec("align_corners", "opt_bool", None),
                        ArgSpec("recompute_scale_factor", "opt_bool", None))),
    NNType("MaxPool2d", (ArgSpec("kernel_size", "pool", minimum=1, rank=2),
                         ArgSpec("stride", "opt_pool", None, 1, rank=2), ArgSpec("padding", "pool", 0, 0, rank=2),
                         ArgSpec("dilation", "pool", 1, 1, rank=2), ArgSpec("return_indices", "bool", False),
                         ArgSpec("ceil_mode", "bool", False)), resolve=_pool_resolve),
    NNType("AvgPool2d", (ArgSpec("kernel_size", "pool", minimum=1, rank=2),
                         ArgSpec("stride", "opt_pool", None, 1, rank=2), ArgSpec("padding", "pool", 0, 0, rank=2),
                         ArgSpec("ceil_mode", "bool", False), ArgSpec("count_include_pad", "bool", True),
                         ArgSpec("divisor_override", "opt_int", None, 1)), resolve=_pool_resolve),
    NNType("AdaptiveAvgPool2d", (ArgSpec("output_size", "output_size", minimum=1, rank=2),)),
    _batchnorm("BatchNorm1d"),
    _batchnorm("BatchNorm2d"),
    NNType("LayerNorm", (ArgSpec("normalized_shape", "shape", minimum=1), ArgSpec("eps", "float", Fraction(1, 100000)),
                         ArgSpec("elementwise_affine", "bool", True), ArgSpec("bias", "bool", True)),
           params=_layernorm_params),
    *(NNType(f"{kind}Pad{rank}d", (ArgSpec("padding", "ints", rank=2 * rank),)
             + ((ArgSpec("value", "float"),) if kind == "Constant" else ()))
      for kind in ("Zero", "Constant", "Reflection", "Replication", "Circular") for rank in (1, 2, 3)),
    NNType("RMSNorm", (ArgSpec("normalized_shape", "shape", minimum=1), ArgSpec("eps", "opt_float", None),
                       ArgSpec("elementwise_affine", "bool", True)), params=_rmsnorm_params, inputs=("x",)),
    NNType("GroupNorm", (ArgSpec("num_groups", "int", minimum=1), ArgSpec("num_channels", "int", minimum=1),
                         ArgSpec("eps", "float", Fraction(1, 100000)), ArgSpec("affine", "bool", True),
                         ArgSpec("bias", "bool", True)), params=_groupnorm_params, check=_groupnorm_check),
    *(NNType(name, (ArgSpec("p", "float", Fraction(1, 2)), _inplace()), check=_dropout_check)
      for name in DROPOUTS + ("AlphaDropout", "FeatureAlphaDropout")),
    NNType("Embedding", (ArgSpec("num_embeddings", "int", minimum=1), ArgSpec("embedding_dim", "int", minimum=1),
                         ArgSpec("padding_idx", "opt_int", None), ArgSpec("max_norm", "opt_float", None),
                         ArgSpec("norm_type", "float", Fraction(2)), ArgSpec("scale_grad_by_freq", "bool", False),
                         ArgSpec("sparse", "bool", False)),
           params=_embedding_params, check=_embedding_check, resolve=_embedding_resolve,
           raises="AssertionError"),
    NNType("Flatten", (ArgSpec("start_dim", "int", 1), ArgSpec("end_dim", "int", -1))),
    NNType("Unfold", (ArgSpec("kernel_size", "pool", minimum=1, rank=2), ArgSpec("dilation", "pool", 1, 1, rank=2),
                      ArgSpec("padding", "pool", 0, 0, rank=2), ArgSpec("stride", "pool", 1, 1, rank=2))),
    NNType("Fold", (ArgSpec("output_size", "pool", minimum=1, rank=2), ArgSpec("kernel_size", "pool", minimum=1, rank=2),
                    ArgSpec("dilation", "pool", 1, 1, rank=2), ArgSpec("padding", "pool", 0, 0, rank=2),
                    ArgSpec("stride", "pool", 1, 1, rank=2))),
    NNType("Unflatten", (ArgSpec("dim", "int"), ArgSpec("unflattened_size", "sizes"))),
    NNType("LeakyReLU", (ArgSpec("negative_slope", "float", Fraction(1, 100)), _inplace())),
    NNType("PReLU", (ArgSpec("num_parameters", "int", 1), ArgSpec("init", "float", Fraction(1, 4))),
           params=_prelu_params),
    NNType("GLU", (ArgSpec("dim", "int", -1),)),
    NNType("Softsign"),
    NNType("Tanhshrink"),
    NNType("GELU", (ArgSpec("approximate", "str", "none", choices=("none", "tanh")),)),
    NNType("SiLU", (_inplace(),)),
    NNType("ELU", (ArgSpec("alpha", "float", Fraction(1)), _inplace())),
    NNType("Softplus", (ArgSpec("beta", "float", Fraction(1)), ArgSpec("threshold", "float", Fraction(20)))),
    NNType("Hardtanh", (ArgSpec("min_val", "float", Fraction(-1)), ArgSpec("max_val", "float", Fraction(1)), _inplace()),
           check=_hardtanh_check, raises="AssertionError"),
    NNType("ReLU6", (_inplace(),)),
    NNType("Hardswish", (_inplace(),)),
    NNType("Mish", (_inplace(),)),
    NNType("LogSigmoid"),
    NNType("SELU", (_inplace(),)),
    NNType("CELU", (ArgSpec("alpha", "float", Fraction(1)), _inplace())),
    NNType("Hardsigmoid", (_inplace(),)),
    NNType("Softshrink", (ArgSpec("lambd", "float", Fraction(1, 2)),)),
    NNType("Hardshrink", (ArgSpec("lambd", "float", Fraction(1, 2)),)),
    NNType("Threshold", (ArgSpec("threshold", "float"), ArgSpec("value", "float"), _inplace())),
    _cell("RNNCell", 1, ArgSpec("nonlinearity", "str", "tanh", choices=("tanh", "relu"))),
    _cell("LSTMCell", 4),
    _cell("GRUCell", 3),
    NNType("Softmax", (ArgSpec("dim", "opt_int", None),)),
    NNType("CosineSimilarity", (ArgSpec("dim", "int", 1), ArgSpec("eps", "float", Fraction(1, 10 ** 8))),
           inputs=("x1", "x2")),
    NNType("LogSoftmax", (ArgSpec("dim", "opt_int", None),)),
    NNType("Softmin", (ArgSpec("dim", "opt_int", None),)),
    NNType("PixelShuffle", (ArgSpec("upscale_factor", "int"),)),
    NNType("PixelUnshuffle", (ArgSpec("downscale_factor", "int"),)),
    NNType("ModuleList", inputs=(), container=True),
    NNType("ModuleDict", inputs=(), container=True),
    NNType("MultiheadAttention", (
        ArgSpec("embed_dim", "int", minimum=1), ArgSpec("num_heads", "int", minimum=1),
        ArgSpec("dropout", "float", Fraction(0)), ArgSpec("bias", "bool", True), ArgSpec("add_bias_kv", "bool", False),
        ArgSpec("add_zero_attn", "bool", False), ArgSpec("kdim", "opt_int", None, 1),
        ArgSpec("vdim", "opt_int", None, 1), ArgSpec("batch_first", "bool", False)),
        inputs=("query", "key", "value"),
        optional_inputs=("key_padding_mask", "need_weights", "attn_mask", "average_attn_weights", "is_causal"),
        params=_mha_params, check=_mha_check, resolve=_mha_resolve, raises="AssertionError"),
    # losses
    _loss("MSELoss"),
    _loss("L1Loss"),
    _loss("SmoothL1Loss", ArgSpec("beta", "float", Fraction(1))),
    _loss("HuberLoss", ArgSpec("delta", "float", Fraction(1))),
    _loss("CrossEntropyLoss", ArgSpec("ignore_index", "int", -100), ArgSpec("label_smoothing", "float", Fraction(0)),
          buffers=_weighted_loss_buffers),
    _loss("NLLLoss", ArgSpec("ignore_index", "int", -100), buffers=_weighted_loss_buffers),
    _loss("BCELoss", buffers=_weighted_loss_buffers),
    _loss("BCEWithLogitsLoss", buffers=_bce_logits_buffers),
    _loss("KLDivLoss", ArgSpec("log_target", "bool", False), reduction=_reduction("batchmean")),
    # margin losses (adjoint/engine/layers/margin_losses.py)
    _loss("SoftMarginLoss"),
    _loss("MarginRankingLoss", ArgSpec("margin", "float", Fraction(0)), inputs=("input1", "input2", "target")),
    _loss("HingeEmbeddingLoss", ArgSpec("margin", "float", Fraction(1))),
    _loss("CosineEmbeddingLoss", ArgSpec("margin", "float", Fraction(0)), inputs=("input1", "input2", "target")),
    _loss("MultiLabelSoftMarginLoss", buffers=_weighted_loss_buffers),
    # likelihood and distance losses (adjoint/engine/layers/nll_losses.py)
    NNType("PoissonNLLLoss", (ArgSpec("log_input", "bool", True), ArgSpec("full", "bool", False),
                              ArgSpec("eps", "float", Fraction(1, 10 ** 8)), _reduction()),
           inputs=("log_input", "target"), loss=True),
    NNType("TripletMarginLoss", (ArgSpec("margin", "float", Fraction(1)), ArgSpec("p", "float", Fraction(2)),
                                 ArgSpec("eps", "float", Fraction(1, 10 ** 6)), ArgSpec("swap", "bool", False),
                                 _reduction()),
           inputs=("anchor", "positive", "negative"), check=_triplet_check, loss=True),
    NNType("GaussianNLLLoss", (ArgSpec("full", "bool", False), ArgSpec("eps", "float", Fraction(1, 10 ** 6)),
                               _reduction()),
           inputs=("input", "target", "var"), number_inputs=("var",), loss=True),
    NNType("PairwiseDistance", (ArgSpec("p", "float", Fraction(2)), ArgSpec("eps", "float", Fraction(1, 10 ** 6)),
                                ArgSpec("keepdim", "bool", False)), inputs=("x1", "x2")),
    # recurrent layers
    _rnn("RNN", 1, nonlinearity=True),
    _rnn("LSTM", 4, proj=True),
    _rnn("GRU", 3),
    # built-ins made of built-ins: their submodules (adjoint/format/composite.py) own the parameters
    NNType("TransformerEncoderLayer", _TRANSFORMER_ARGS,
        inputs=("src",), optional_inputs=("src_mask", "src_key_padding_mask", "is_causal"),
        check=_transformer_check, raises="AssertionError"),
    NNType("AdaptiveMaxPool1d", (ArgSpec("output_size", "output_size", minimum=1, rank=1),
                                 ArgSpec("return_indices", "bool", False))),
    NNType("AdaptiveMaxPool2d", (ArgSpec("output_size", "output_size", minimum=1, rank=2),
                                 ArgSpec("return_indices", "bool", False))),
    NNType("TransformerDecoderLayer", _TRANSFORMER_ARGS,
           inputs=("tgt", "memory"),
           optional_inputs=("tgt_mask", "memory_mask", "tgt_key_padding_mask", "memory_key_padding_mask",
                            "tgt_is_causal", "memory_is_causal"),
           check=_transformer_check, raises="AssertionError"),
    # 3-D convolution and pools (adjoint/engine/layers/nn3d.py)
    _conv("Conv3d", 3),
    NNType("MaxPool3d", (ArgSpec("kernel_size", "pool", minimum=1, rank=3),
                         ArgSpec("stride", "opt_pool", None, 1, rank=3), ArgSpec("padding", "pool", 0, 0, rank=3),
                         ArgSpec("dilation", "pool", 1, 1, rank=3), ArgSpec("return_indices", "bool", False),
                         ArgSpec("ceil_mode", "bool", False)), resolve=_pool_resolve),
    NNType("AvgPool3d", (ArgSpec("kernel_size", "pool", minimum=1, rank=3),
                         ArgSpec("stride", "opt_pool", None, 1, rank=3), ArgSpec("padding", "pool", 0, 0, rank=3),
                         ArgSpec("ceil_mode", "bool", False), ArgSpec("count_include_pad", "bool", True),
                         ArgSpec("divisor_override", "opt_int", None, 1)), resolve=_pool_resolve),
    NNType("AdaptiveAvgPool3d", (ArgSpec("output_size", "output_size", minimum=1, rank=3),)),
    # a stack of deep copies of a layer passed as an argument (adjoint/format/validate_encoder.py)
    NNType("TransformerEncoder", (ArgSpec("encoder_layer", "layer", choices=("TransformerEncoderLayer",)),
                                  ArgSpec("num_layers", "int", minimum=1),
                                  ArgSpec("norm", "opt_layer", None, choices=("LayerNorm",)),
                                  ArgSpec("enable_nested_tensor", "bool", True), ArgSpec("mask_check", "bool", True)),
           inputs=("src",), optional_inputs=("mask", "src_key_padding_mask", "is_causal")),
    NNType("TransformerDecoder", (ArgSpec("decoder_layer", "layer", choices=("TransformerDecoderLayer",)),
                                  ArgSpec("num_layers", "int", minimum=1),
                                  ArgSpec("norm", "opt_layer", None, choices=("LayerNorm",))),
           inputs=("tgt", "memory"),
           optional_inputs=("tgt_mask", "memory_mask", "tgt_key_padding_mask", "memory_key_padding_mask",
                            "tgt_is_causal", "memory_is_causal")),
    # an encoder stack and a decoder stack its constructor builds (adjoint/format/validate_encoder.py)
    NNType("Transformer", (ArgSpec("d_model", "int", 512, 1), ArgSpec("nhead", "int", 8, 1),
                           ArgSpec("num_encoder_layers", "int", 6, 1), ArgSpec("num_decoder_layers", "int", 6, 1))
           + _TRANSFORMER_ARGS[2:],
           inputs=("src", "tgt"),
           optional_inputs=("src_mask", "tgt_mask", "memory_mask", "src_key_padding_mask", "tgt_key_padding_mask",
                            "memory_key_padding_mask", "src_is_causal", "tgt_is_causal", "memory_is_causal"),
           check=_transformer_check, raises="AssertionError"),
    NNType("AdaptiveMaxPool3d", (ArgSpec("output_size", "output_size", minimum=1, rank=3),
                                 ArgSpec("return_indices", "bool", False))),
    NNType("MaxPool1d", (ArgSpec("kernel_size", "pool", minimum=1, rank=1),
                         ArgSpec("stride", "opt_pool", None, 1, rank=1), ArgSpec("padding", "pool", 0, 0, rank=1),
                         ArgSpec("dilation", "pool", 1, 1, rank=1), ArgSpec("return_indices", "bool", False),
                         ArgSpec("ceil_mode", "bool", False)), resolve=_pool_resolve),
    NNType("AvgPool1d", (ArgSpec("kernel_size", "pool", minimum=1, rank=1),
                         ArgSpec("stride", "opt_pool", None, 1, rank=1), ArgSpec("padding", "pool", 0, 0, rank=1),
                         ArgSpec("ceil_mode", "bool", False), ArgSpec("count_include_pad", "bool", True)),
           resolve=_avg_pool1d_resolve),
    NNType("AdaptiveAvgPool1d", (ArgSpec("output_size", "output_size", minimum=1, rank=1),)),
    # 3-D batch norm (adjoint/engine/layers/nn3d.py), instance norms (adjoint/engine/layers/instance_norm.py)
    _batchnorm("BatchNorm3d"),
    _instancenorm("InstanceNorm1d"),
    _instancenorm("InstanceNorm2d"),
    _instancenorm("InstanceNorm3d"),
    NNType("Bilinear", (ArgSpec("in1_features", "int", minimum=1), ArgSpec("in2_features", "int", minimum=1),
                        ArgSpec("out_features", "int", minimum=1), ArgSpec("bias", "bool", True)),
           inputs=("input1", "input2"), params=_bilinear_params),
    NNType("EmbeddingBag", (ArgSpec("num_embeddings", "int", minimum=1), ArgSpec("embedding_dim", "int", minimum=1),
                            ArgSpec("max_norm", "opt_float", None), ArgSpec("norm_type", "float", Fraction(2)),
                            ArgSpec("scale_grad_by_freq", "bool", False), ArgSpec("mode", "str", "mean"),
                            ArgSpec("sparse", "bool", False), ArgSpec("include_last_offset", "bool", False),
                            ArgSpec("padding_idx", "opt_int", None)),
           optional_inputs=("offsets", "per_sample_weights"),
           params=_embedding_params, check=_embedding_bag_check, resolve=_embedding_resolve,
           raises="AssertionError"),
)}

#: Constructor arguments PyTorch has that a problem file does not set, and why.
NOT_ARGS = {
    "device": "the problem runs on the CPU",
    "dtype": "the problem's top-level dtype: sets it for every module (a complex parameter has its own: params: {weight: {value: ..., imag: ..., dtype: complex128}})",
    "size_average": "it is deprecated in PyTorch; use reduction",
    "reduce": "it is deprecated in PyTorch; use reduction",
    "min_value": "it is deprecated in PyTorch (Hardtanh); use min_val",
    "max_value": "it is deprecated in PyTorch (Hardtanh); use max_val",
    "custom_encoder": "a module passed in (nn.Transformer): write the model as a custom module calling its encoder and decoder",
    "custom_decoder": "a module passed in (nn.Transformer): write the model as a custom module calling its encoder and decoder",
}
#: Tensor-valued constructor arguments, which torch registers as buffers.
TENSOR_ARGS = ("weight", "pos_weight")


def lookup(name: str) -> NNType | None:
    return TYPES.get(name)


def resolved_args(t: NNType, given: dict) -> dict:
    """Defaults filled in, then the values torch derives (``stride`` from ``kernel_size``, ...)."""
    full = {a.name: given.get(a.name, a.default) for a in t.args}
    return t.resolve(full)
