"""Every built-in module type (adjoint/format/module_signatures.py) against the torch.nn class it names: the
constructor's arguments and defaults, the parameters and buffers it makes (names in
named_parameters() order, shapes, buffer defaults and dtypes), the forward's arguments and
the constructor's own refusals. The expected side is always real torch 2.13."""

import inspect
from fractions import Fraction

import pytest
import torch
import torch.nn as nn

import adjoint
from adjoint.format import module_signatures as nn_types
from adjoint.format.errors import ProblemError

#: Configurations per type: required arguments only first (so torch's defaults are compared), then
#: ones that change the parameters or buffers. Values in the form adjoint stores them (Conv's
#: int-or-tuple arguments as tuples; a file may write either, see test_int_or_list_arguments).
CONFIGS = {
    "ConvTranspose1d": [{"in_channels": 2, "out_channels": 3, "kernel_size": (2,)},
                        {"in_channels": 2, "out_channels": 4, "kernel_size": (3,), "stride": (2,), "padding": (1,),
                         "output_padding": (1,), "groups": 2, "bias": False}],
    "ConvTranspose2d": [{"in_channels": 2, "out_channels": 3, "kernel_size": (2, 3)},
                        {"in_channels": 1, "out_channels": 2, "kernel_size": (3, 3), "stride": (2, 2),
                         "dilation": (2, 2)}],
    "Upsample": [{"scale_factor": 2}, {"size": (4, 4), "mode": "bilinear", "align_corners": True}],
    "Linear": [{"in_features": 3, "out_features": 2}, {"in_features": 1, "out_features": 4, "bias": False}],
    "Bilinear": [{"in1_features": 3, "in2_features": 2, "out_features": 4},
                 {"in1_features": 1, "in2_features": 3, "out_features": 2, "bias": False}],
    "EmbeddingBag": [{"num_embeddings": 5, "embedding_dim": 3},
                     {"num_embeddings": 4, "embedding_dim": 2, "padding_idx": -1, "max_norm": Fraction(1),
                      "mode": "max", "include_last_offset": True},
                     {"num_embeddings": 3, "embedding_dim": 2, "mode": "sum", "scale_grad_by_freq": True,
                      "padding_idx": 0}],
    "ReLU": [{}, {"inplace": True}],
    "Tanh": [{}],
    "Sigmoid": [{}],
    "Identity": [{}],
    "Conv1d": [{"in_channels": 2, "out_channels": 4, "kernel_size": (3,)},
               {"in_channels": 4, "out_channels": 6, "kernel_size": (2,), "groups": 2, "bias": False,
                "padding": "same", "padding_mode": "reflect"}],
    "Conv2d": [{"in_channels": 1, "out_channels": 2, "kernel_size": (3, 3)},
               {"in_channels": 4, "out_channels": 2, "kernel_size": (3, 2), "stride": (2, 1), "padding": (1, 0),
                "dilation": (2, 2), "groups": 2}],
    "MaxPool2d": [{"kernel_size": 2}, {"kernel_size": (3, 2), "stride": 1, "padding": 1, "dilation": (1, 2),
                                       "ceil_mode": True}],
    "AvgPool2d": [{"kernel_size": 2}, {"kernel_size": 3, "stride": (1, 2), "count_include_pad": False,
                                       "divisor_override": 4}],
    "AdaptiveAvgPool2d": [{"output_size": 3}, {"output_size": (None, 2)}],
    "BatchNorm1d": [{"num_features": 3}, {"num_features": 2, "affine": False, "momentum": None},
                    {"num_features": 2, "track_running_stats": False, "bias": False, "eps": Fraction(1, 1000)}],
    "BatchNorm2d": [{"num_features": 2}, {"num_features": 3, "affine": False, "track_running_stats": False}],
    "LayerNorm": [{"normalized_shape": (4,)}, {"normalized_shape": (2, 3), "bias": False},
                  {"normalized_shape": (3,), "elementwise_affine": False}],
    **{f"{kind}Pad{rank}d": [{"padding": (1,) * (2 * rank)}, {"padding": tuple(range(2 * rank))}]
       for kind in ("Zero", "Reflection", "Replication") for rank in (1, 2, 3)},
    **{f"ConstantPad{rank}d": [{"padding": (1,) * (2 * rank), "value": Fraction(1, 2)},
                               {"padding": tuple(range(2 * rank)), "value": Fraction(-3)}] for rank in (1, 2, 3)},
    **{f"CircularPad{rank}d": [{"padding": (1,) * (2 * rank)}, {"padding": tuple(range(2 * rank))}]
       for rank in (1, 2, 3)},
    "RMSNorm": [{"normalized_shape": (4,)}, {"normalized_shape": (2, 3), "eps": Fraction(1, 1000)},
                {"normalized_shape": (3,), "elementwise_affine": False}],
    "GroupNorm": [{"num_groups": 2, "num_channels": 4}, {"num_groups": 1, "num_channels": 3, "affine": False},
                  {"num_groups": 3, "num_channels": 6, "bias": False}],
    "Dropout": [{}, {"p": Fraction(1, 4), "inplace": True}],
    **{name: [{}, {"p": Fraction(1, 4), "inplace": True}]
       for name in ("Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout")},
    "Embedding": [{"num_embeddings": 5, "embedding_dim": 3},
                  {"num_embeddings": 4, "embedding_dim": 2, "padding_idx": -1, "max_norm": Fraction(1),
                   "scale_grad_by_freq": True}],
    "Flatten": [{}, {"start_dim": 0, "end_dim": 1}],
    "CosineSimilarity": [{}, {"dim": 0, "eps": Fraction(1, 2)}],
    "Unfold": [{"kernel_size": 2}, {"kernel_size": (2, 1), "dilation": (1, 2), "padding": 1, "stride": (2, 1)}],
    "Fold": [{"output_size": (3, 4), "kernel_size": 2}, {"output_size": 4, "kernel_size": (2, 1), "dilation": (1, 2),
                                                         "padding": 1, "stride": (2, 1)}],
    "Unflatten": [{"dim": 1, "unflattened_size": (2, 3)}, {"dim": -1, "unflattened_size": (2, -1)}],
    "LeakyReLU": [{}, {"negative_slope": Fraction(1, 5)}],
    "PReLU": [{}, {"num_parameters": 3, "init": Fraction(1, 10)}],
    "GLU": [{}, {"dim": 0}],
    "Softsign": [{}],
    "Tanhshrink": [{}],
    "Softmin": [{}, {"dim": 1}],
    "PixelShuffle": [{"upscale_factor": 2}],
    "PixelUnshuffle": [{"downscale_factor": 3}],
    "GELU": [{}, {"approximate": "tanh"}],
    "SiLU": [{}],
    "ELU": [{}, {"alpha": Fraction(1, 2)}],
    "Softplus": [{}, {"beta": Fraction(2), "threshold": Fraction(10)}],
    "Softmax": [{}, {"dim": -1}],
    "LogSoftmax": [{}, {"dim": 1}],
    "Hardtanh": [{}, {"min_val": Fraction(-1, 2), "max_val": Fraction(3), "inplace": True}],
    "ReLU6": [{}, {"inplace": True}],
    "Hardswish": [{}, {"inplace": True}],
    "Mish": [{}, {"inplace": True}],
    "LogSigmoid": [{}],
    "SELU": [{}, {"inplace": True}],
    "CELU": [{}, {"alpha": Fraction(3, 10), "inplace": True}],
    "Hardsigmoid": [{}, {"inplace": True}],
    "Softshrink": [{}, {"lambd": Fraction(1)}],
    "Hardshrink": [{}, {"lambd": Fraction(1, 4)}],
    "Threshold": [{"threshold": Fraction(1, 10), "value": Fraction(-3)},
                  {"threshold": Fraction(0), "value": Fraction(2), "inplace": True}],
    "RNNCell": [{"input_size": 3, "hidden_size": 2}, {"input_size": 1, "hidden_size": 4, "bias": False,
                                                      "nonlinearity": "relu"}],
    "LSTMCell": [{"input_size": 3, "hidden_size": 2}, {"input_size": 2, "hidden_size": 1, "bias": False}],
    "GRUCell": [{"input_size": 3, "hidden_size": 2}, {"input_size": 2, "hidden_size": 3, "bias": False}],
    "MultiheadAttention": [{"embed_dim": 4, "num_heads": 2},
                           {"embed_dim": 4, "num_heads": 1, "kdim": 3, "vdim": 5, "add_bias_kv": True},
                           {"embed_dim": 6, "num_heads": 3, "bias": False, "batch_first": True, "add_zero_attn": True}],
    "MSELoss": [{}, {"reduction": "sum"}],
    "L1Loss": [{}],
    "SmoothL1Loss": [{}, {"beta": Fraction(1, 2)}],
    "HuberLoss": [{}, {"delta": Fraction(2)}],
    "CrossEntropyLoss": [{}, {"ignore_index": 1, "label_smoothing": Fraction(1, 10), "reduction": "none"}],
    "NLLLoss": [{}],
    "BCELoss": [{}],
    "BCEWithLogitsLoss": [{}],
    "KLDivLoss": [{}, {"log_target": True, "reduction": "sum"}],
    # margin losses (adjoint/engine/layers/margin_losses.py)
    "SoftMarginLoss": [{}, {"reduction": "sum"}],
    "MarginRankingLoss": [{}, {"margin": Fraction(1, 2), "reduction": "none"}],
    "HingeEmbeddingLoss": [{}, {"margin": Fraction(3, 2), "reduction": "sum"}],
    "CosineEmbeddingLoss": [{}, {"margin": Fraction(1, 4), "reduction": "none"}],
    "MultiLabelSoftMarginLoss": [{}, {"reduction": "sum"}],
    "PoissonNLLLoss": [{}, {"log_input": False, "full": True, "eps": Fraction(1, 4), "reduction": "sum"}],
    "TripletMarginLoss": [{}, {"margin": Fraction(5, 2), "p": Fraction(1), "eps": Fraction(1, 8), "swap": True,
                               "reduction": "none"}],
    "PairwiseDistance": [{}, {"p": Fraction(3), "eps": Fraction(1, 4), "keepdim": True}],
    "GaussianNLLLoss": [{}, {"full": True, "eps": Fraction(1, 8), "reduction": "sum"}],
    "RNN": [{"input_size": 3, "hidden_size": 2}, {"input_size": 2, "hidden_size": 3, "num_layers": 2,
                                                  "nonlinearity": "relu", "bias": False, "bidirectional": True}],
    "LSTM": [{"input_size": 3, "hidden_size": 2}, {"input_size": 2, "hidden_size": 1, "num_layers": 3,
                                                   "batch_first": True, "dropout": Fraction(1, 2)},
             {"input_size": 2, "hidden_size": 3, "proj_size": 2, "num_layers": 2, "bidirectional": True}],
    "GRU": [{"input_size": 3, "hidden_size": 2}, {"input_size": 1, "hidden_size": 2, "num_layers": 2,
                                                  "bidirectional": True, "bias": False}],
    "TransformerEncoderLayer": [{"d_model": 4, "nhead": 2},
                                {"d_model": 6, "nhead": 3, "dim_feedforward": 5, "dropout": Fraction(0),
                                 "activation": "gelu", "layer_norm_eps": Fraction(1, 1000), "batch_first": True,
                                 "norm_first": True, "bias": False}],
    "TransformerDecoderLayer": [{"d_model": 4, "nhead": 2},
                                {"d_model": 2, "nhead": 1, "dim_feedforward": 3, "bias": False, "norm_first": True}],
    "AdaptiveMaxPool1d": [{"output_size": 3}, {"output_size": 2, "return_indices": True}],
    "AdaptiveMaxPool2d": [{"output_size": 3}, {"output_size": (None, 2), "return_indices": True}],
    "Conv3d": [{"in_channels": 2, "out_channels": 4, "kernel_size": (3, 3, 3)},
               {"in_channels": 2, "out_channels": 4, "kernel_size": (1, 2, 3), "stride": (2, 1, 1),
                "padding": (0, 1, 1), "groups": 2, "bias": False}],
    "MaxPool3d": [{"kernel_size": 2}, {"kernel_size": (1, 2, 2), "stride": 1, "padding": (0, 1, 1), "dilation": 2,
                                       "return_indices": True, "ceil_mode": True}],
    "AvgPool3d": [{"kernel_size": 2}, {"kernel_size": (2, 2, 1), "stride": (1, 2, 1), "padding": 1, "ceil_mode": True,
                                       "count_include_pad": False, "divisor_override": 3}],
    "AdaptiveAvgPool3d": [{"output_size": 2}, {"output_size": (None, 2, 1)}],
    "MaxPool1d": [{"kernel_size": 2}, {"kernel_size": 3, "stride": 1, "padding": 1, "dilation": 2,
                                       "return_indices": True, "ceil_mode": True}],
    "AvgPool1d": [{"kernel_size": 2}, {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True,
                                       "count_include_pad": False}],
    "AdaptiveMaxPool3d": [{"output_size": 2}, {"output_size": (None, 2, 1), "return_indices": True}],
    "AdaptiveAvgPool1d": [{"output_size": 3}, {"output_size": (1,)}],
    "BatchNorm3d": [{"num_features": 2}, {"num_features": 3, "affine": False, "momentum": None},
                    {"num_features": 2, "track_running_stats": False, "bias": False}],
    **{f"InstanceNorm{rank}d": [{"num_features": 3}, {"num_features": 2, "affine": True, "track_running_stats": True},
                                {"num_features": 2, "affine": True, "bias": False, "momentum": None,
                                 "eps": Fraction(1, 1000)}] for rank in (1, 2, 3)},
}
CONTAINERS = ("Sequential", "ModuleList", "ModuleDict")
#: torch.__init__ parameters that are not arguments in a problem file: torch's own varargs, and
#: the private ones (``_weight``, ``_freeze`` of Embedding).
NOT_ARGUMENTS = {"self", "args", "kwargs", "_weight", "_freeze"}
#: How many constructor arguments torch does not keep under their own name (Linear and Conv: bias;
#: BatchNorm, LayerNorm, GroupNorm: bias; MultiheadAttention: bias, add_bias_kv; losses: the reduction
#: is kept, MSELoss and friends keep nothing else).
UNSTORED = {"ConvTranspose1d": 1, "ConvTranspose2d": 1, "Linear": 1, "Bilinear": 1, "Conv1d": 1, "Conv2d": 1, "Conv3d": 1, "BatchNorm1d": 1, "BatchNorm2d": 1, "LayerNorm": 1,
            "BatchNorm3d": 1, "InstanceNorm1d": 1, "InstanceNorm2d": 1, "InstanceNorm3d": 1,
            "GroupNorm": 1, "MultiheadAttention": 2, "PairwiseDistance": 1,   # PairwiseDistance keeps p as norm
            # the Transformer layers keep only norm_first (the rest lives on their submodules; activation and
            # dropout are a function and a submodule there)
            "TransformerEncoderLayer": 8, "TransformerDecoderLayer": 8}


def torch_value(v):
    return float(v) if isinstance(v, Fraction) else v


def stored(v):
    """An attribute as torch keeps it, in the immutable form adjoint keeps (lists as tuples)."""
    if isinstance(v, list):
        return tuple(v)
    return v


def test_every_type_of_the_contract_is_there():
    contract = ("Linear ReLU Tanh Sigmoid Identity Sequential Conv1d Conv2d MaxPool2d AvgPool2d AdaptiveAvgPool2d "
                "BatchNorm1d BatchNorm2d LayerNorm GroupNorm Dropout Embedding Flatten Unflatten LeakyReLU GELU SiLU "
                "ELU Softplus Softmax LogSoftmax ModuleList MultiheadAttention MSELoss L1Loss SmoothL1Loss HuberLoss "
                "CrossEntropyLoss NLLLoss BCELoss BCEWithLogitsLoss KLDivLoss "
                "Hardtanh ReLU6 Hardswish Mish RNNCell LSTMCell GRUCell RNN LSTM GRU "
                "TransformerEncoderLayer TransformerDecoderLayer AdaptiveMaxPool1d AdaptiveMaxPool2d "
                "TransformerEncoder Conv3d MaxPool3d AvgPool3d AdaptiveAvgPool3d MaxPool1d AvgPool1d AdaptiveMaxPool3d").split()
    # the project's own (docs/format.md): nanoGPT's self.transformer; a UNet's or a GAN's upsampling
    additions = ["ModuleDict", "ConvTranspose1d", "ConvTranspose2d", "Upsample", "AdaptiveAvgPool1d",
                 # activations users write (tests/test_activations_more.py)
                 "LogSigmoid", "SELU", "CELU", "Hardsigmoid", "Softshrink", "Hardshrink", "Threshold",
                 "CosineSimilarity", "Unfold", "Fold",
                 # the stacks users train (tests/test_transformer_stacks.py)
                 "TransformerDecoder", "Transformer",
                 # Llama-style blocks (tests/data/regressions/rms_norm.yaml)
                 "RMSNorm",
                 # padding layers (CycleGAN-style generators; tests/data/regressions/padding_modules.yaml)
                 *(f"{kind}Pad{rank}d" for kind in ("Zero", "Constant", "Reflection", "Replication", "Circular")
                   for rank in (1, 2, 3)),
                 # learnable activations (tests/data/regressions/prelu_modules.yaml)
                 "PReLU", "GLU", "Softsign", "Tanhshrink", "Softmin",
                 # super-resolution upsampling (tests/data/regressions/pixel_shuffle_modules.yaml)
                 "PixelShuffle", "PixelUnshuffle",
                 # 3-D batch norm and instance norms (style transfer, 3-D U-Nets; tests/test_nn_instance_norm.py)
                 "BatchNorm3d", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d",

                 # margin losses (tests/test_margin_losses.py)
                 "SoftMarginLoss", "MarginRankingLoss", "HingeEmbeddingLoss",
                 "CosineEmbeddingLoss", "MultiLabelSoftMarginLoss",


                 # likelihood and distance losses (tests/test_nll_losses.py)
                 "PoissonNLLLoss", "TripletMarginLoss", "PairwiseDistance", "GaussianNLLLoss",

                 # two-input layers (tests/data/regressions/bilinear_modules.yaml)
                 "Bilinear",
                 # bags of embeddings (tests/data/regressions/embedding_bag_modules.yaml)
                 "EmbeddingBag",
                 # channel-wise and alpha dropout (CNNs; tests/test_feature_dropout.py)
                 "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout"]
    assert sorted(nn_types.TYPES) == sorted(contract + additions)
    # the stacks take a module as an argument or build two: tests/test_transformer_encoder.py and
    # tests/test_transformer_stacks.py check their trees
    assert sorted(CONFIGS) == sorted(set(contract + additions) - set(CONTAINERS)
                                     - {"TransformerEncoder", "TransformerDecoder", "Transformer"})


@pytest.mark.parametrize("name", sorted(nn_types.TYPES))
def test_constructor_arguments_are_torchs(name):
    t = nn_types.TYPES[name]
    params = inspect.signature(getattr(nn, name).__init__).parameters
    if name in ("RNN", "LSTM", "GRU"):   # __init__(*args, **kwargs): RNNBase's, after its mode; RNN takes
        base = dict(inspect.signature(nn.RNNBase.__init__).parameters)   # nonlinearity; proj_size is LSTM's
        del base["mode"]
        if name != "LSTM":
            del base["proj_size"]
        if name == "RNN":
            base["nonlinearity"] = inspect.Parameter("nonlinearity", inspect.Parameter.KEYWORD_ONLY, default="tanh")
            assert nn.RNN(1, 1).nonlinearity == "tanh"
        params = base
    torch_args = {p for p in params if p not in NOT_ARGUMENTS}
    ours = {a.name for a in t.args}
    if name in CONTAINERS:
        assert ours == set()
        return
    assert ours <= torch_args
    for left_out in torch_args - ours:   # each one refused with its reason
        assert left_out in nn_types.NOT_ARGS or left_out in nn_types.TENSOR_ARGS, left_out
    for a in t.args:
        assert params[a.name].default is inspect.Parameter.empty if a.required else \
            params[a.name].default is not inspect.Parameter.empty, a.name


@pytest.mark.parametrize("name", sorted(nn_types.TYPES))
def test_forward_arguments_are_torchs(name):
    t = nn_types.TYPES[name]
    if name in ("ModuleList", "ModuleDict"):   # no forward of their own: nn.Module's, which raises
        assert t.inputs == () and getattr(nn, name).forward is nn.Module.forward
        return
    params = list(inspect.signature(getattr(nn, name).forward).parameters.values())[1:]
    assert t.inputs == tuple(p.name for p in params if p.default is inspect.Parameter.empty)
    assert t.optional_inputs == tuple(p.name for p in params if p.default is not inspect.Parameter.empty)


CASES = [(name, i, args) for name, configs in CONFIGS.items() for i, args in enumerate(configs)]


@pytest.mark.parametrize("name,i,args", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_parameters_buffers_and_stored_arguments_match_torch(name, i, args):
    t = nn_types.TYPES[name]
    assert t.check(nn_types.resolved_args(t, args)) == ()
    full = nn_types.resolved_args(t, args)
    m = getattr(nn, name)(**{k: torch_value(v) for k, v in args.items()})
    from adjoint.format.composite import CHILDREN
    specs = [(p.name, p.shape) for p in t.params(full)]
    if name in CHILDREN:   # built-ins made of built-ins: the parameters are their submodules'
        specs = [(f"{c}.{p.name}", p.shape) for c, ct, cargs in CHILDREN[name](full)
                 for p in nn_types.TYPES[ct].params(nn_types.resolved_args(nn_types.TYPES[ct], cargs))]
    assert specs == [(n, tuple(p.shape)) for n, p in m.named_parameters()]
    buffers = [b for b in t.buffers(full) if b.default is not None]
    assert [(b.name, b.shape) for b in buffers] == [(n, tuple(b.shape)) for n, b in m.named_buffers()]
    for spec, (_, real) in zip(buffers, m.named_buffers()):
        assert real.dtype == (torch.int64 if spec.dtype == "int64" else torch.float32)
        assert torch.equal(real, torch.full(spec.shape, 1 if spec.default == "ones" else 0, dtype=real.dtype))
    compared = 0
    for a in t.args:
        real = getattr(m, a.name, inspect.Parameter.empty)
        if real is inspect.Parameter.empty or isinstance(real, (torch.Tensor, nn.Module)) or callable(real) or \
                (a.kind == "bool" and not isinstance(real, bool)):
            continue   # not kept as an attribute (Linear's bias is the Parameter, or None)
        assert stored(real) == torch_value(full[a.name]), a.name
        compared += 1
    assert compared >= len(t.args) - UNSTORED.get(name, 0)


REFUSALS = [
    ("Conv2d", {"in_channels": 3, "out_channels": 2, "kernel_size": 3, "groups": 2}),
    ("Conv2d", {"in_channels": 2, "out_channels": 3, "kernel_size": 3, "groups": 2}),
    ("Conv1d", {"in_channels": 1, "out_channels": 1, "kernel_size": 3, "padding": "same", "stride": (2,)}),
    ("GroupNorm", {"num_groups": 3, "num_channels": 4}),
    ("MultiheadAttention", {"embed_dim": 5, "num_heads": 2}),
    ("TransformerEncoderLayer", {"d_model": 5, "nhead": 2}),
    ("Dropout", {"p": Fraction(3, 2)}),
    ("Dropout2d", {"p": Fraction(-1, 2)}),
    ("AlphaDropout", {"p": Fraction(3, 2)}),
    ("Embedding", {"num_embeddings": 3, "embedding_dim": 2, "padding_idx": 3}),
    ("Embedding", {"num_embeddings": 3, "embedding_dim": 2, "padding_idx": -4}),
    ("EmbeddingBag", {"num_embeddings": 3, "embedding_dim": 2, "padding_idx": 3}),
    ("EmbeddingBag", {"num_embeddings": 3, "embedding_dim": 2, "padding_idx": -4}),
    ("GRU", {"input_size": 1, "hidden_size": 2, "dropout": Fraction(3, 2)}),
    ("LSTM", {"input_size": 1, "hidden_size": 2, "proj_size": 2}),
    ("TripletMarginLoss", {"margin": Fraction(0)}),
    ("TripletMarginLoss", {"margin": Fraction(-3, 2)}),
]


@pytest.mark.parametrize("name,args", REFUSALS, ids=[f"{r[0]}-{i}" for i, r in enumerate(REFUSALS)])
def test_constructor_refusals_use_torchs_words(name, args):
    t = nn_types.TYPES[name]
    with pytest.raises((ValueError, AssertionError)) as info:
        getattr(nn, name)(**{k: torch_value(v) for k, v in args.items()})
    messages = [msg for _, msg in t.check(nn_types.resolved_args(t, args))]
    assert messages and messages[0] == str(info.value)


def test_loss_weights_are_buffers_in_torch():
    ce = nn.CrossEntropyLoss(weight=torch.ones(3))
    bce = nn.BCEWithLogitsLoss(weight=torch.ones(2), pos_weight=torch.ones(2))
    assert [n for n, _ in ce.named_buffers()] == [b.name for b in nn_types.TYPES["CrossEntropyLoss"].buffers({})]
    assert [n for n, _ in bce.named_buffers()] == [b.name for b in nn_types.TYPES["BCEWithLogitsLoss"].buffers({})]


# ----------------------------------------------------------------------------- through a problem file

def yaml_value(v):
    if isinstance(v, tuple):
        return "[" + ", ".join("null" if x is None else str(x) for x in v) + "]"
    if isinstance(v, Fraction):
        return f'"{v}"'
    if isinstance(v, bool):
        return "true" if v else "false"
    return "null" if v is None else str(v)


@pytest.mark.parametrize("name,i,args", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_a_file_with_init_builds_what_torch_builds(name, i, args):
    items = ", ".join(f"{k}: {yaml_value(v)}" for k, v in args.items())
    extra = ", training: false" if name in ("Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout",
                                            "FeatureAlphaDropout", "MultiheadAttention", "TransformerEncoderLayer",
                                            "TransformerDecoderLayer") else ""
    text = f"name: t\ninputs:\n  x: [1]\ninit: {{seed: 3}}\nmodel:\n  children:\n    m: {{type: {name}, " \
           f"args: {{{items}}}{extra}}}\n  forward: m(x)\n"
    mod = adjoint.loads(text).model.child("m")
    real = getattr(nn, name)(**{k: torch_value(v) for k, v in args.items()})
    assert [(p.name, p.value.shape, p.requires_grad) for sub in mod.walk() for p in sub.params] == \
        [("m." + n, tuple(p.shape), p.requires_grad) for n, p in real.named_parameters()]
    assert [(b.name, b.value.shape, b.dtype) for b in mod.buffers] == \
        [("m." + n, tuple(b.shape), "int64" if b.dtype == torch.int64 else None) for n, b in real.named_buffers()]
    for n, b in real.named_buffers():
        ours = next(d for d in mod.buffers if d.name == "m." + n)
        assert [float(v) for v in ours.value.items] == b.flatten().tolist()


def test_embedding_padding_row_starts_at_zero_as_in_torch():
    text = "name: t\ninputs:\n  x: [1]\ninit: {seed: 0}\nmodel:\n  children:\n    e: {type: Embedding, args: " \
           "{num_embeddings: 3, embedding_dim: 2, padding_idx: 1}}\n  forward: x\n"
    weight = adjoint.loads(text).model.child("e").params[0].value
    real = nn.Embedding(3, 2, padding_idx=1).weight
    assert list(weight.items[2:4]) == [0, 0] and real[1].tolist() == [0.0, 0.0]
    assert any(weight.items[:2]) and any(weight.items[4:])


def test_int_or_list_arguments():
    def conv(kernel: str):
        text = f"name: t\ninputs:\n  x: [1]\ninit: {{seed: 0}}\nmodel:\n  children:\n    c: {{type: Conv2d, args: " \
               f"{{in_channels: 1, out_channels: 1, kernel_size: {kernel}, padding: 1}}}}\n  forward: x\n"
        return adjoint.loads(text).model.child("c")
    three, pair = conv("3"), conv("[3, 3]")
    assert three.args == pair.args and three.arg("kernel_size") == (3, 3) and three.arg("padding") == (1, 1)
    assert nn.Conv2d(1, 1, 3, padding=1).kernel_size == (3, 3)
    assert [p.value.shape for p in three.params] == [(1, 1, 3, 3), (1,)]


def test_linear_args_and_params_must_agree():
    text = "name: t\ninputs:\n  x: [1, 2]\nmodel: {type: Linear, args: {in_features: 3, out_features: 1}, " \
           "params: {weight: [[1, 2]], bias: [0]}}\n"
    with pytest.raises(ProblemError) as info:
        adjoint.loads(text, name="f.yaml")
    assert info.value.line() == "f.yaml:4:81: parameter 'weight' has shape [1, 2] but this Linear (in_features=3, " \
                                "out_features=1) has [1, 3]"
