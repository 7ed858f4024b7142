"""Convolution and pooling against real torch (float64): node chains, values, gradients, the
legacy backward hook's arguments and the saved-tensor pack / unpack sequence, for the modules
and the functions, batched and unbatched."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from nn_harness import (Case, TorchRecorder, assert_close, assert_root_module, distinct, dyadic, hooks, lit,
                        module_problem, t64, torch_chain, torch_module_run)

CONV2D = [
    ({"in_channels": 2, "out_channels": 2, "kernel_size": 2}, (2, 2, 3, 3)),
    ({"in_channels": 2, "out_channels": 4, "kernel_size": [2, 3], "stride": 2, "padding": 1, "groups": 2},
     (1, 2, 4, 5)),
    ({"in_channels": 1, "out_channels": 2, "kernel_size": 2, "padding": "same", "dilation": 1}, (1, 1, 3, 3)),
    ({"in_channels": 1, "out_channels": 1, "kernel_size": 3, "padding": "same", "dilation": 2, "bias": False},
     (1, 1, 4, 4)),
    ({"in_channels": 2, "out_channels": 1, "kernel_size": 2, "padding": "valid", "bias": False}, (2, 3, 3)),
    ({"in_channels": 1, "out_channels": 2, "kernel_size": [2, 1], "padding": "same"}, (1, 3, 2)),
]


def _conv_params(args: dict, rank: int) -> dict:
    k = args["kernel_size"]
    k = tuple(k) if isinstance(k, list) else (k,) * rank
    out = {"weight": dyadic((args["out_channels"], args["in_channels"] // args.get("groups", 1)) + k, 2)}
    if args.get("bias", True):
        out["bias"] = dyadic((args["out_channels"],), 3)
    return out


@pytest.mark.parametrize("args,shape", CONV2D)
def test_conv2d_module(args, shape):
    params = _conv_params(args, 2)
    x = dyadic(shape, 1)
    case = Case(module_problem("Conv2d", args, params, x))
    y, names, rec = torch_module_run(nn.Conv2d(**args), params, x)
    assert_root_module(case, y, names, rec)


@pytest.mark.parametrize("args,shape", [
    ({"in_channels": 2, "out_channels": 3, "kernel_size": 2, "stride": 2, "padding": 1}, (2, 2, 5)),
    ({"in_channels": 2, "out_channels": 2, "kernel_size": 4, "padding": "same", "groups": 2}, (2, 5)),
])
def test_conv1d_module(args, shape):
    params = _conv_params(args, 1)
    x = dyadic(shape, 4)
    case = Case(module_problem("Conv1d", args, params, x))
    y, names, rec = torch_module_run(nn.Conv1d(**args), params, x)
    assert_root_module(case, y, names, rec)


def test_conv_without_grad_on_the_input_saves_both_and_has_a_none_edge():
    args = {"in_channels": 1, "out_channels": 1, "kernel_size": 2, "padding": "same"}
    params = _conv_params(args, 2)
    x = dyadic((1, 1, 3, 3), 5)
    case = Case(module_problem("Conv2d", args, params, x, x_requires_grad=False))
    y, names, rec = torch_module_run(nn.Conv2d(**args), params, x, x_requires_grad=False)
    assert y.grad_fn.next_functions[0][0] is None      # no ConstantPadNd node either
    assert_root_module(case, y, names, rec)


def test_conv2d_function_with_tuple_arguments():
    x, w = dyadic((1, 2, 4, 4), 1), dyadic((2, 1, 2, 2), 2)
    text = (f"name: t\ndtype: float64\ninputs:\n  x: {{value: {lit(x)}, requires_grad: true}}\n"
            f"model:\n  params: {{w: {lit(w)}}}\n  inputs: [x]\n"
            "  forward: \"conv2d(x, w, None, (1, 2), [1, 0], 1, 2)\"\nloss: \"sum(y * y)\"\n")
    case = Case(text)
    xt, wt = t64(x, True), t64(w, True)
    y = F.conv2d(xt, wt, None, (1, 2), [1, 0], 1, 2)
    (y * y).sum().backward()
    assert case.chain("y") == torch_chain(y, {"x": xt, "w": wt})
    assert_close(case.value("y"), y)
    assert_close(case.grad("x"), xt.grad)
    assert_close(case.grad("w"), wt.grad)


# ----------------------------------------------------------------------------- pooling

@pytest.mark.parametrize("args,shape", [
    ({"kernel_size": 2}, (1, 2, 4, 4)),
    ({"kernel_size": 3, "stride": 2, "padding": 1}, (2, 1, 5, 5)),
    ({"kernel_size": 2, "stride": 1, "dilation": 2, "ceil_mode": True}, (1, 4, 5)),
    ({"kernel_size": [2, 3], "stride": [2, 1], "ceil_mode": True}, (1, 1, 5, 4)),
])
def test_max_pool2d_module(args, shape):
    x = distinct(shape, 2)
    case = Case(module_problem("MaxPool2d", args, {}, x))
    y, names, rec = torch_module_run(nn.MaxPool2d(**args), {}, x)
    assert_root_module(case, y, names, rec)


def test_max_pool_ties_go_to_the_first_maximum_and_overlaps_add_up():
    x = [[[[1, 1, 0], [1, 2, 2], [0, 2, 2]]]]
    case = Case(module_problem("MaxPool2d", {"kernel_size": 2, "stride": 1}, {}, x))
    y, names, rec = torch_module_run(nn.MaxPool2d(2, stride=1), {}, x)
    assert_root_module(case, y, names, rec)
    # every window's first maximum is the 2 at (1, 1): four times 2 * 2 (by hand)
    assert case.grad("x") == [[[[0.0, 0.0, 0.0], [0.0, 16.0, 0.0], [0.0, 0.0, 0.0]]]]
    assert any("first (row-major)" in note for _, _, note in case.v.run.forward.notes)


def test_max_pool_return_indices_gives_int64_indices_without_gradient():
    x = distinct((1, 1, 4, 4), 3)
    text = (f"name: t\ndtype: float64\ninputs:\n  x: {{value: {lit(x)}, requires_grad: true}}\nmodel:\n"
            "  inputs: [x]\n  children:\n    pool: {type: MaxPool2d, args: {kernel_size: 2, return_indices: true}}\n"
            "  forward: |\n    out, idx = pool(x)\n    return out * 3\nloss: \"sum(y)\"\n")
    case = Case(text)
    idx = case.tensor("pool[1]")
    assert idx.dtype == "int64" and not idx.requires_grad and idx.grad_fn is None
    xt = t64(x, True)
    yt, it = F.max_pool2d(xt, 2, return_indices=True)
    assert case.json["values"]["pool[1]"]["value"] == it.tolist()
    assert case.chain("pool[0]") == torch_chain(yt, {"x": xt})
    (yt * 3).sum().backward()
    assert_close(case.grad("x"), xt.grad)


@pytest.mark.parametrize("args,shape", [
    ({"kernel_size": 2}, (1, 2, 4, 4)),
    ({"kernel_size": 3, "stride": 2, "padding": 1}, (1, 1, 5, 5)),
    ({"kernel_size": 3, "stride": 2, "padding": 1, "count_include_pad": False}, (1, 1, 5, 4)),
    ({"kernel_size": 2, "stride": 2, "padding": 1, "ceil_mode": True}, (1, 3, 4)),
    ({"kernel_size": 2, "ceil_mode": True, "divisor_override": 3}, (1, 1, 3, 5)),
])
def test_avg_pool2d_module(args, shape):
    x = dyadic(shape, 2)
    case = Case(module_problem("AvgPool2d", args, {}, x))
    y, names, rec = torch_module_run(nn.AvgPool2d(**args), {}, x)
    assert_root_module(case, y, names, rec)


@pytest.mark.parametrize("size,shape", [((2, 3), (1, 2, 5, 4)), (3, (1, 5, 5)), ([None, 2], (1, 1, 3, 5)),
                                        (1, (2, 2, 3, 3)), ((1, 1), (1, 3, 2))])
def test_adaptive_avg_pool2d_module(size, shape):
    x = dyadic(shape, 3)
    case = Case(module_problem("AdaptiveAvgPool2d", {"output_size": size}, {}, x))
    y, names, rec = torch_module_run(nn.AdaptiveAvgPool2d(size), {}, x)
    assert_root_module(case, y, names, rec)


def test_a_small_cnn_chain():
    """conv -> relu -> max pool -> flatten -> linear, as modules in a Sequential."""
    x = dyadic((2, 1, 4, 4), 1)
    w, b = dyadic((2, 1, 3, 3), 2), dyadic((2,), 3)
    lw, lb = dyadic((3, 8), 4), dyadic((3,), 5)
    text = (f"name: t\ndtype: float64\ninputs:\n  x: {{value: {lit(x)}, requires_grad: true}}\nmodel:\n  inputs: [x]\n"
            f"  children:\n    conv: {{type: Conv2d, args: {{in_channels: 1, out_channels: 2, kernel_size: 3, "
            f"padding: 1}}, params: {{weight: {lit(w)}, bias: {lit(b)}}}}}\n"
            "    pool: {type: MaxPool2d, args: {kernel_size: 2}}\n"
            f"    fc: {{type: Linear, args: {{in_features: 8, out_features: 3}}, params: {{weight: {lit(lw)}, "
            f"bias: {lit(lb)}}}}}\n"
            "  forward: |\n    h = pool(relu(conv(x)))\n    return fc(h.flatten(1))\nloss: \"sum(y * y)\"\n"
            + hooks("conv"))
    case = Case(text)
    conv, fc = nn.Conv2d(1, 2, 3, padding=1).double(), nn.Linear(8, 3).double()
    with torch.no_grad():
        conv.weight.copy_(t64(w)), conv.bias.copy_(t64(b)), fc.weight.copy_(t64(lw)), fc.bias.copy_(t64(lb))
    xt = t64(x, True)
    rec = TorchRecorder(conv)
    with rec.saved():
        yt = fc(F.max_pool2d(F.relu(conv(xt)), 2).flatten(1))
        (yt * yt).sum().backward()
    names = {"x": xt, "conv.weight": conv.weight, "conv.bias": conv.bias, "fc.weight": fc.weight, "fc.bias": fc.bias}
    assert case.chain("y") == torch_chain(yt, names)
    assert_close(case.value("y"), yt)
    for n, t in names.items():
        assert_close(case.grad(n), t.grad, n)
    from nn_harness import assert_legacy, assert_saved
    assert_legacy(case, rec)
    assert_saved(case, rec)


# ----------------------------------------------------------------------------- the functions, called by name

_A = dyadic((1, 2, 4, 4), 1)
_W = dyadic((2, 3), 2)
_FUNCTIONS = [
    ("max_pool2d(a, 2, 1, 1, 1, True)", lambda a: F.max_pool2d(a, 2, 1, 1, 1, True), {"a": distinct((2, 3, 3), 1)}),
    ("max_pool2d(a, (2, 1), dilation=(1, 2))", lambda a: F.max_pool2d(a, (2, 1), dilation=(1, 2)),
     {"a": distinct((1, 1, 4, 5), 2)}),
    ("avg_pool2d(a, 3, 2, 1, False, False)", lambda a: F.avg_pool2d(a, 3, 2, 1, False, False), {"a": _A}),
    ("avg_pool2d(a, kernel_size=2, divisor_override=5)", lambda a: F.avg_pool2d(a, kernel_size=2, divisor_override=5),
     {"a": dyadic((2, 4, 3), 3)}),
    ("adaptive_avg_pool2d(a, (3, None))", lambda a: F.adaptive_avg_pool2d(a, (3, None)), {"a": _A}),
    ("adaptive_avg_pool2d(a, 1)", lambda a: F.adaptive_avg_pool2d(a, 1), {"a": dyadic((2, 3, 3), 2)}),
    ("conv1d(a, w, None, 1, 'same', 2)", lambda a, w: F.conv1d(a, w, None, 1, 'same', 2),
     {"a": dyadic((1, 2, 5), 1), "w": dyadic((3, 2, 2), 2)}),
    ("layer_norm(a, [4], w)", lambda a, w: F.layer_norm(a, [4], w), {"a": _A, "w": dyadic((4,), 4)}),
    ("group_norm(a, 2, w[:, 1], w[:, 0], 0.5)", lambda a, w: F.group_norm(a, 2, w[:, 1], w[:, 0], 0.5),
     {"a": _A, "w": _W}),
    ("embedding(i, w, 1)", lambda i, w: F.embedding(i, w, 1), {"i": [1, 0, 1], "w": _W}),
    ("dropout(a, 1.0)", lambda a: F.dropout(a, 1.0), {"a": dyadic((2, 2), 1)}),
    ("dropout(a, 0.5, False) * 2", lambda a: F.dropout(a, 0.5, False) * 2, {"a": dyadic((2, 2), 1)}),
    ("softmax(a, dim=1) * a", lambda a: F.softmax(a, dim=1) * a, {"a": [[0.0, 0.5], [-1.0, 0.25]]}),
    ("bmm(a, w)", lambda a, w: torch.bmm(a, w), {"a": dyadic((2, 2, 3), 1), "w": dyadic((2, 3, 1), 2)}),
]


@pytest.mark.parametrize("expr,fn,leaves", _FUNCTIONS, ids=[e for e, _, _ in _FUNCTIONS])
def test_function(expr, fn, leaves):
    decl = "".join(f"  {n}: {{value: {lit(v)}, dtype: int64}}\n" if n == "i" else
                   f"  {n}: {{value: {lit(v)}, requires_grad: true}}\n" for n, v in leaves.items())
    case = Case(f"name: t\ndtype: float64\ninputs:\n{decl}model:\n  inputs: [{', '.join(leaves)}]\n"
                f"  forward: \"{expr}\"\nloss: \"sum(y * y)\"\n")
    ts = {n: (torch.tensor(v) if n == "i" else t64(v, True)) for n, v in leaves.items()}
    y = fn(*ts.values())
    (y * y).sum().backward()
    names = {n: t for n, t in ts.items() if t.requires_grad}
    assert case.chain("y") == torch_chain(y, names)
    assert_close(case.value("y"), y)
    for n, t in names.items():
        assert_close(case.grad(n), t.grad, n)


@pytest.mark.parametrize("expr,message", [
    ("conv2d(a, w)", "Given groups=1, weight of size [1, 1, 2, 2], expected input[1, 2, 4, 4] to have 1 channels, "
                     "but got 2 channels instead"),
    ("conv2d(a, w, padding='same', stride=2)", "padding='same' is not supported for strided convolutions"),
    ("conv2d(a, w, padding='full')", "Invalid padding string: 'full'"),
    ("max_pool2d(a, 2, padding=2)", "pad should be at most half of effective kernel size, but got pad=2, "
                                    "kernel_size=2 and dilation=1"),
    ("max_pool2d(a, 5)", "Given input size: (2x4x4). Calculated output size: (2x0x0). Output size is too small"),
])
def test_bad_conv_and_pool_calls_are_pytorchs_errors(expr, message):
    """A call PyTorch refuses is an answer: its RuntimeError, in its words, during the forward."""
    import adjoint
    text = (f"name: t\ndtype: float64\ninputs:\n  a: {lit(_A)}\nmodel:\n  params: {{w: {lit(dyadic((1, 1, 2, 2), 1))}}}\n"
            f"  inputs: [a]\n  forward: \"{expr}\"\nloss: \"sum(y)\"\n")
    error = adjoint.loads(text).solve().variants[0].error
    a, w = t64(_A, True), t64(dyadic((1, 1, 2, 2), 1), True)
    call = {"conv2d(a, w)": lambda: F.conv2d(a, w),
            "conv2d(a, w, padding='same', stride=2)": lambda: F.conv2d(a, w, padding="same", stride=2),
            "conv2d(a, w, padding='full')": lambda: F.conv2d(a, w, padding="full"),
            "max_pool2d(a, 2, padding=2)": lambda: F.max_pool2d(a, 2, padding=2),
            "max_pool2d(a, 5)": lambda: F.max_pool2d(a, 5)}[expr]
    with pytest.raises(RuntimeError) as theirs:
        call()
    assert (error.type, error.message, error.during) == ("RuntimeError", str(theirs.value), "forward") == \
        ("RuntimeError", message, "forward")


@pytest.mark.parametrize("expr,kind,message", [
    ("layer_norm(a, [3])", "RuntimeError", "Given normalized_shape=[3], expected input with shape [*, 3], but got input "
                                           "of size[1, 2, 4, 4]"),
    ("group_norm(a, 3)", "RuntimeError", "Expected number of channels in input to be divisible by num_groups, but got "
                                         "input of shape [1, 2, 4, 4] and num_groups=3"),
    ("embedding(a, w[0, 0])", "RuntimeError", "Expected tensor for argument #1 'indices' to have one of the following "
                                              "scalar types: Long, Int; but got torch.DoubleTensor instead (while "
                                              "checking arguments for embedding)"),
    ("embedding(a, w)", "RuntimeError", "'weight' must be 2-D"),
    ("batch_norm(a, None, None)", "RuntimeError", "running_mean must be defined in evaluation mode"),
    ("batch_norm(a, None, None, w[0, 0], training=True)", "RuntimeError", "weight should contain 2 elements not 4"),
    ("dropout(a, 1.5)", "ValueError", "dropout probability has to be between 0 and 1, but got 1.5"),
])
def test_bad_norm_calls_are_pytorchs_errors(expr, kind, message):
    """A call PyTorch refuses is an answer: its error, in its words, during the forward."""
    import adjoint
    text = (f"name: t\ndtype: float64\ninputs:\n  a: {lit(_A)}\nmodel:\n  params: {{w: {lit(dyadic((1, 1, 2, 2), 1))}}}\n"
            f"  inputs: [a]\n  forward: \"{expr}\"\nloss: \"sum(y)\"\n")
    error = adjoint.loads(text).solve().variants[0].error
    a, w = t64(_A, True), t64(dyadic((1, 1, 2, 2), 1), True)
    call = {"layer_norm(a, [3])": lambda: F.layer_norm(a, [3]),
            "group_norm(a, 3)": lambda: F.group_norm(a, 3),
            "embedding(a, w[0, 0])": lambda: F.embedding(a, w[0, 0]),
            "embedding(a, w)": lambda: F.embedding(a, w),
            "batch_norm(a, None, None)": lambda: F.batch_norm(a, None, None),
            "batch_norm(a, None, None, w[0, 0], training=True)":
                lambda: F.batch_norm(a, None, None, w[0, 0], training=True),
            "dropout(a, 1.5)": lambda: F.dropout(a, 1.5)}[expr]
    with pytest.raises(Exception) as theirs:
        call()
    assert (error.type, error.message, error.during) == (type(theirs.value).__name__, str(theirs.value), "forward") \
        == (kind, message, "forward")
