"""Batch, layer and group norm, embedding and dropout against real torch (float64): node chains,
values, gradients, legacy-hook arguments, saved tensors, and the buffers a training forward
updates (after one and after two forwards)."""

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from nn_harness import (Case, TorchRecorder, assert_close, assert_legacy, assert_root_module, assert_saved, dyadic,
                        hooks, lit, module_problem, t64, torch_chain, torch_module_run)


def _bn_torch(m, params, x, passes: int, buffers: dict | None = None):
    m = m.double()
    with torch.no_grad():
        for name, value in params.items():
            m.get_parameter(name).copy_(t64(value))
        for name, value in (buffers or {}).items():
            m.get_buffer(name).copy_(torch.tensor(value))
    xt = t64(x, True)
    rec = TorchRecorder(m)
    y = None
    for _ in range(passes):
        with rec.saved():
            y = m(xt)
            (y * y).sum().backward()
    names = {"x": xt}
    names.update(dict(m.named_parameters()))
    return m, y, names, rec


@pytest.mark.parametrize("type_,args,shape,passes,training", [
    ("BatchNorm1d", {"num_features": 2}, (3, 2), 1, True),
    ("BatchNorm1d", {"num_features": 2, "momentum": 0.25, "eps": 0.5}, (2, 2, 3), 2, True),
    ("BatchNorm2d", {"num_features": 2}, (2, 2, 2, 2), 2, True),
    ("BatchNorm1d", {"num_features": 2, "momentum": None}, (4, 2), 2, True),
    ("BatchNorm1d", {"num_features": 2, "affine": False}, (3, 2), 1, True),
    ("BatchNorm2d", {"num_features": 2, "track_running_stats": False}, (2, 2, 1, 2), 1, True),
    ("BatchNorm1d", {"num_features": 2}, (3, 2), 1, False),
    ("BatchNorm2d", {"num_features": 2, "affine": False}, (1, 2, 2, 1), 2, False),
    ("BatchNorm2d", {"num_features": 2, "track_running_stats": False}, (2, 2, 1, 2), 1, False),
])
def test_batch_norm_module(type_, args, shape, passes, training):
    x = dyadic(shape, 1)
    affine = args.get("affine", True)
    params = {"weight": dyadic((2,), 2), "bias": dyadic((2,), 3)} if affine else {}
    buffers = {"running_mean": [0.5, -0.25], "running_var": [2.0, 0.5]} if args.get("track_running_stats", True) else {}
    keys = ("" if training else "  training: false\n") + (f"  buffers: {lit(buffers)}\n" if buffers else "")
    steps = "steps: [" + ", ".join(["forward, backward"] * passes) + "]\n"
    case = Case(module_problem(type_, args, params, x, module_keys=keys, extra=steps))
    m = getattr(nn, type_)(**args)
    if not training:
        m.eval()
    m, y, names, rec = _bn_torch(m, params, x, passes, buffers)
    assert case.chain("y") == torch_chain(y, names)
    assert_close(case.value("y"), y, "y")
    for name, t in names.items():
        assert_close(case.grad(name), t.grad, f"grad of {name}")
    assert_legacy(case, rec)
    assert_saved(case, rec)
    for name, t in m.named_buffers():
        assert_close(case.value(name), t, name)


def test_batch_norm_running_stats_do_not_move_their_version_but_the_count_does():
    case = Case(module_problem("BatchNorm1d", {"num_features": 2}, {"weight": [1, 1], "bias": [0, 0]},
                               dyadic((3, 2), 1), extra="steps: [forward, forward]\n"))
    m = nn.BatchNorm1d(2, dtype=torch.float64)   # (.double() would make fresh float buffers at version 0)
    before = [b._version for b in m.buffers()]
    m(t64(dyadic((3, 2), 1)))
    m(t64(dyadic((3, 2), 1)))
    moved = [b._version - v for b, v in zip(m.buffers(), before)]
    assert moved == [0, 0, 2]
    # the counters themselves, from the constructor's (reset_running_stats: one write each) on
    assert [b._version for b in m.buffers()] == [1, 1, 3]
    ours = [case.tensor(n).version.value for n in ("running_mean", "running_var", "num_batches_tracked")]
    assert ours == [b._version for b in m.buffers()]


def test_batch_norm_function_in_a_forward_with_buffers():
    x = dyadic((4, 3), 2)
    text = (f"name: t\ndtype: float64\ninputs:\n  x: {{value: {lit(x)}, requires_grad: true}}\nmodel:\n  inputs: [x]\n"
            "  params: {w: [1, 0.5, -2]}\n  buffers: {rm: [0, 1, 0.5], rv: [1, 2, 0.25]}\n"
            "  forward: \"batch_norm(x, rm, rv, w, None, True, 0.5, 0.125)\"\nloss: \"sum(y * y)\"\n")
    case = Case(text)
    xt, w = t64(x, True), t64([1, 0.5, -2], True)
    rm, rv = t64([0, 1, 0.5]), t64([1, 2, 0.25])
    y = F.batch_norm(xt, rm, rv, w, None, True, 0.5, 0.125)
    (y * y).sum().backward()
    assert case.chain("y") == torch_chain(y, {"x": xt, "w": w})
    assert_close(case.value("y"), y)
    assert_close(case.grad("x"), xt.grad)
    assert_close(case.grad("w"), w.grad)
    assert_close(case.value("rm"), rm)
    assert_close(case.value("rv"), rv)


def test_an_eval_batch_norm_backward_reads_running_stats_a_later_training_call_updated():
    """The eval node saved running_var's storage; the training call writes it without a version bump."""
    x = [[1, 2], [0.5, -1], [2, 1]]
    text = (f"name: t\ndtype: float64\ninputs:\n  x: {{value: {lit(x)}, requires_grad: true}}\nmodel:\n  inputs: [x]\n"
            "  buffers: {rm: [0, 0], rv: [1, 1]}\n  forward: |\n    a = batch_norm(x, rm, rv, None, None, False)\n"
            "    b = batch_norm(x, rm, rv, None, None, True, 0.5)\n    return a * a + 0 * b\nloss: \"sum(y)\"\n")
    case = Case(text)
    xt = t64(x, True)
    rm, rv = t64([0, 0]), t64([1, 1])
    a = F.batch_norm(xt, rm, rv, None, None, False)
    b = F.batch_norm(xt, rm, rv, None, None, True, 0.5)
    (a * a + 0 * b).sum().backward()
    assert_close(case.grad("x"), xt.grad)
    assert not torch.allclose(xt.grad, 2 * a.detach())     # not the gradient at the stats it ran with


@pytest.mark.parametrize("args,shape,affine", [
    ({"normalized_shape": 3}, (2, 3), True),
    ({"normalized_shape": [2, 2], "eps": 0.25}, (2, 2, 2), True),
    ({"normalized_shape": 2, "bias": False}, (3, 2), True),
    ({"normalized_shape": [3], "elementwise_affine": False}, (2, 1, 3), False),
])
def test_layer_norm_module(args, shape, affine):
    x = dyadic(shape, 2)
    ns = args["normalized_shape"]
    ns = (ns,) if isinstance(ns, int) else tuple(ns)
    params = {}
    if affine:
        params["weight"] = dyadic(ns, 3)
        if args.get("bias", True):
            params["bias"] = dyadic(ns, 4)
    case = Case(module_problem("LayerNorm", args, params, x))
    y, names, rec = torch_module_run(nn.LayerNorm(**args), params, x)
    assert_root_module(case, y, names, rec)


def test_layer_norm_over_one_element_has_weight_grad_exactly_zero():
    """pytorch#188375: float64 torch gives ~1e-11; the exact answer is 0."""
    x = [[0.5], [0.25], [-3]]
    params = {"weight": [1.5], "bias": [0.25]}
    text = module_problem("LayerNorm", {"normalized_shape": 1}, params, x, loss="sum(y * t)")
    text = text.replace("model:", "targets:\n  t: [[1], [3], [-2]]\nmodel:", 1)
    case = Case(text)
    m = nn.LayerNorm(1).double()
    with torch.no_grad():
        m.weight.fill_(1.5), m.bias.fill_(0.25)
    xt = t64(x, True)
    (m(xt) * t64([[1], [3], [-2]])).sum().backward()
    assert case.json["grads"]["weight"]["exact"] == ["0"]
    assert case.json["grads"]["x"]["exact"] == [["0"], ["0"], ["0"]]
    assert abs(float(m.weight.grad)) < 1e-9                 # torch: 0 up to float rounding
    assert_close(case.grad("bias"), m.bias.grad)


@pytest.mark.parametrize("args,shape", [
    ({"num_groups": 2, "num_channels": 4}, (2, 4, 3)),
    ({"num_groups": 1, "num_channels": 2, "eps": 0.5}, (3, 2)),
    ({"num_groups": 2, "num_channels": 2, "affine": False}, (1, 2, 2, 2)),
])
def test_group_norm_module(args, shape):
    x = dyadic(shape, 3)
    c = args["num_channels"]
    params = {"weight": dyadic((c,), 1), "bias": dyadic((c,), 2)} if args.get("affine", True) else {}
    case = Case(module_problem("GroupNorm", args, params, x))
    y, names, rec = torch_module_run(nn.GroupNorm(**args), params, x)
    assert_root_module(case, y, names, rec)


def test_group_norm_of_a_transposed_input_is_made_contiguous_first():
    x = dyadic((3, 2, 2), 1)
    text = (f"name: t\ndtype: float64\ninputs:\n  x: {{value: {lit(x)}, requires_grad: true}}\nmodel:\n  inputs: [x]\n"
            "  forward: \"group_norm(x.transpose(0, 1), 1)\"\nloss: \"sum(y * y)\"\n")
    case = Case(text)
    xt = t64(x, True)
    y = F.group_norm(xt.transpose(0, 1), 1)
    (y * y).sum().backward()
    assert case.chain("y") == torch_chain(y, {"x": xt})
    assert_close(case.grad("x"), xt.grad)


# ----------------------------------------------------------------------------- embedding

@pytest.mark.parametrize("args,idx", [
    ({"num_embeddings": 4, "embedding_dim": 2}, [[0, 2, 2], [3, 1, 0]]),
    ({"num_embeddings": 4, "embedding_dim": 3, "padding_idx": -2}, [2, 0, 2, 1]),
    ({"num_embeddings": 3, "embedding_dim": 2, "padding_idx": 0, "scale_grad_by_freq": True}, [[1, 1, 0], [2, 1, 0]]),
])
def test_embedding_module(args, idx):
    w = dyadic((args["num_embeddings"], args["embedding_dim"]), 2)
    text = (f"name: t\ndtype: float64\ninputs:\n  i: {{value: {lit(idx)}, dtype: int64}}\n"
            f"model:\n  type: Embedding\n  args: {lit(args)}\n  params: {{weight: {lit(w)}}}\n"
            "loss: \"sum(y * y)\"\n" + hooks())
    case = Case(text)
    m = nn.Embedding(**args).double()
    with torch.no_grad():
        m.weight.copy_(t64(w))
    it = torch.tensor(idx)
    rec = TorchRecorder(m)
    with rec.saved():
        y = m(it)
        (y * y).sum().backward()
    assert case.chain("y") == torch_chain(y, {"weight": m.weight})
    assert y.grad_fn.next_functions.__len__() == 1 and len(case.tensor("y").grad_fn.edges) == 1
    assert_close(case.value("y"), y)
    assert_close(case.grad("weight"), m.weight.grad)
    assert_legacy(case, rec)
    assert_saved(case, rec)


# ----------------------------------------------------------------------------- dropout

class ForcedMask(TorchDispatchMode):
    """Torch's own Dropout with its random draw replaced by the file's keep-mask: the CPU path
    draws ``noise.bernoulli_(1 - p)``; this mode writes the mask there instead."""

    def __init__(self, mask):
        super().__init__()
        self.mask = mask

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.aten.bernoulli_.float:
            assert self.mask is not None, "torch drew a mask the test did not give"
            return args[0].copy_(torch.tensor(self.mask, dtype=args[0].dtype))
        return func(*args, **(kwargs or {}))


def _dropout_problem(args: dict, x, mask, training=True) -> str:
    keys = f"  mask: {lit(mask)}\n" if mask is not None else ""
    keys += "" if training else "  training: false\n"
    text = (f"name: t\ndtype: float64\ninputs:\n  x: {{value: {lit(x)}, requires_grad: true}}\nmodel:\n  inputs: [x]\n"
            f"  children:\n    drop:\n      type: Dropout\n      args: {lit(args)}\n"
            + "".join("    " + line + "\n" for line in keys.splitlines())
            + "  forward: \"drop(x * 2)\"\nloss: \"sum(y * y)\"\n" + hooks("drop"))
    return text


@pytest.mark.parametrize("args,mask,training", [
    ({"p": 0.5}, [[1, 0, 1], [0, 0, 1]], True),
    ({"p": 0.25, "inplace": True}, [[1, 1, 0], [1, 0, 1]], True),
    ({"p": 1.0}, None, True),
    ({"p": 1.0, "inplace": True}, None, True),
    ({"p": 0.5}, None, False),
    ({"p": 0.0}, None, True),
])
def test_dropout_module_with_its_mask(args, mask, training):
    x = dyadic((2, 3), 1)
    case = Case(_dropout_problem(args, x, mask, training))
    m = nn.Dropout(**args)
    if not training:
        m.eval()
    xt = t64(x, True)
    rec = TorchRecorder(m)
    with rec.saved(), ForcedMask(mask):
        y = m(xt * 2)
        (y * y).sum().backward()
    assert_legacy(case, rec)
    assert case.chain("y") == torch_chain(y, {"x": xt})
    assert_close(case.value("y"), y)
    assert_close(case.grad("x"), xt.grad)
    assert_saved(case, rec)


def test_dropout_function_in_training_mode_is_refused_for_its_random_mask():
    text = ("name: t\ndtype: float64\ninputs:\n  x: {value: [1, 2], requires_grad: true}\nmodel:\n  inputs: [x]\n"
            "  forward: \"dropout(x, 0.5)\"\nloss: \"sum(y)\"\n")
    with pytest.raises(Exception) as err:
        Case(text)
    assert "Dropout module with mask" in str(err.value)
