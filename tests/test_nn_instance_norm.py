"""InstanceNorm1d / 2d / 3d, F.instance_norm and BatchNorm3d against real torch (float64): node
chains (at::instance_norm's repeats, views and batch norm), values, gradients, legacy-hook
arguments, saved tensors, the running statistics a training forward writes (values and version
counters), and PyTorch's errors and warnings. Expected values always come from torch."""

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import adjoint

from nn_harness import (Case, TorchRecorder, assert_close, assert_root_module, assert_saved, dyadic, lit, module_problem,
                        t64, torch_chain)

LOSS = "sum(y * y * x)"


def _torch_module(type_: str, args: dict, params: dict, buffers: dict, training: bool):
    m = getattr(nn, type_)(**args, dtype=torch.float64)   # (.double() would remake the buffers at version 0)
    if not training:
        m.eval()
    with torch.no_grad():
        for name, value in params.items():
            m.get_parameter(name).copy_(t64(value))
        for name, value in buffers.items():
            m.get_buffer(name).copy_(t64(value))
    return m


def _run(m, x, passes: int):
    xt = t64(x, True)
    rec = TorchRecorder(m)
    y = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(passes):
            with rec.saved():
                y = m(xt)
                (y * y * xt).sum().backward()
    names = {"x": xt}
    names.update(dict(m.named_parameters()))
    return y, names, rec


MODULES = [
    ("InstanceNorm2d", {"num_features": 2}, (2, 2, 2, 3), 1, True),
    ("InstanceNorm2d", {"num_features": 2, "affine": True}, (2, 2, 2, 2), 1, True),
    ("InstanceNorm2d", {"num_features": 2, "affine": True, "track_running_stats": True, "momentum": 0.25},
     (3, 2, 2, 2), 2, True),
    ("InstanceNorm2d", {"num_features": 2, "affine": True, "track_running_stats": True}, (2, 2, 1, 3), 1, False),
    ("InstanceNorm2d", {"num_features": 2, "track_running_stats": True, "momentum": None}, (2, 2, 2, 2), 2, True),
    ("InstanceNorm2d", {"num_features": 2, "affine": True, "bias": False, "eps": 0.5}, (2, 3, 2), 1, True),
    ("InstanceNorm2d", {"num_features": 2, "affine": True}, (2, 2, 2), 1, False),
    ("InstanceNorm1d", {"num_features": 3, "affine": True, "track_running_stats": True}, (2, 3, 4), 2, True),
    ("InstanceNorm1d", {"num_features": 2}, (2, 3), 1, True),
    ("InstanceNorm1d", {"num_features": 2, "track_running_stats": True}, (2, 3), 1, False),
    ("InstanceNorm3d", {"num_features": 2, "affine": True, "track_running_stats": True}, (2, 2, 2, 1, 2), 2, True),
    ("InstanceNorm3d", {"num_features": 2}, (2, 2, 2, 2), 1, True),
    ("BatchNorm3d", {"num_features": 2}, (2, 2, 2, 1, 2), 2, True),
    ("BatchNorm3d", {"num_features": 2, "affine": False, "momentum": None}, (1, 2, 2, 2, 1), 2, True),
    ("BatchNorm3d", {"num_features": 2}, (2, 2, 1, 2, 1), 1, False),
    ("BatchNorm3d", {"num_features": 2, "track_running_stats": False}, (2, 2, 1, 1, 2), 1, False),
]


@pytest.mark.parametrize("type_,args,shape,passes,training", MODULES,
                         ids=[f"{m[0]}-{i}" for i, m in enumerate(MODULES)])
def test_module_against_torch(type_, args, shape, passes, training):
    x = dyadic(shape, 1)
    c = args["num_features"]
    affine = args.get("affine", type_.startswith("Batch"))
    params = {"weight": dyadic((c,), 2)} if affine else {}
    if affine and args.get("bias", True):
        params["bias"] = dyadic((c,), 3)
    tracked = args.get("track_running_stats", type_.startswith("Batch"))
    buffers = {"running_mean": dyadic((c,), 4), "running_var": [1.5 + k for k in range(c)]} if tracked else {}
    keys = ("" if training else "  training: false\n") + (f"  buffers: {lit(buffers)}\n" if buffers else "")
    steps = "steps: [" + ", ".join(["forward, backward"] * passes) + "]\n"
    case = Case(module_problem(type_, args, params, x, loss=LOSS, module_keys=keys, extra=steps))
    m = _torch_module(type_, args, params, buffers, training)
    y, names, rec = _run(m, x, passes)
    assert_root_module(case, y, names, rec)
    for name, t in m.named_buffers():
        assert_close(case.value(name), t, name)


@pytest.mark.parametrize("training", [True, False])
def test_instance_norm_running_stats_move_by_one_copy_each_and_the_count_never(training):
    """at::instance_norm copies the batch mean of the repeated statistics back (version + 1 per
    training call); eval mode copies nothing; _InstanceNorm.forward never bumps num_batches_tracked."""
    x = dyadic((2, 2, 3), 1)
    text = module_problem("InstanceNorm1d", {"num_features": 2, "track_running_stats": True}, {}, x, loss=LOSS,
                          module_keys="" if training else "  training: false\n",
                          extra="steps: [forward, forward]\n")
    case = Case(text)
    m = _torch_module("InstanceNorm1d", {"num_features": 2, "track_running_stats": True}, {}, {}, training)
    m(t64(x)), m(t64(x))
    theirs = {n: b._version for n, b in m.named_buffers()}
    assert theirs == ({"running_mean": 3, "running_var": 3, "num_batches_tracked": 1} if training else
                      {"running_mean": 1, "running_var": 1, "num_batches_tracked": 1})
    assert {n: case.tensor(n).version.value for n in theirs} == theirs


def _fn_problem(forward: str, x, extra_inputs: str = "") -> str:
    """A problem whose root's forward is ``h = FORWARD`` over ``x`` and the ``extra_inputs`` lines."""
    names = ["x"] + [line.split(":")[0].strip() for line in extra_inputs.splitlines()]
    return (f"name: t\ndtype: float64\ninputs:\n  x: {{value: {lit(x)}, requires_grad: true}}\n{extra_inputs}"
            f"model:\n  inputs: [{', '.join(names)}]\n  forward: |\n    h = {forward}\n    return h\nloss: \"{LOSS}\"\n"
            "hooks:\n  - {saved_tensors: {pack: \"x\", unpack: \"x\"}}\n")


STATS = "  m: [0.5, -1]\n  v: [2, 0.5]\n  w: {value: [1.5, -2], requires_grad: true}\n" \
        "  b: {value: [0.25, 1], requires_grad: true}\n"


@pytest.mark.parametrize("forward,torch_fn", [
    ("F.instance_norm(x * 2, m, v, w, b, momentum=0.25)",
     lambda x, m, v, w, b: F.instance_norm(x * 2, m, v, w, b, momentum=0.25)),
    ("F.instance_norm(x * 2, m, v, w, b, use_input_stats=False, eps=0.5)",
     lambda x, m, v, w, b: F.instance_norm(x * 2, m, v, w, b, use_input_stats=False, eps=0.5)),
    ("F.instance_norm(x.transpose(0, 1), None, None, w).transpose(0, 1)",
     lambda x, m, v, w, b: F.instance_norm(x.transpose(0, 1), None, None, w).transpose(0, 1)),
    ("F.instance_norm(x, bias=b)", lambda x, m, v, w, b: F.instance_norm(x, bias=b)),
])
def test_functional_against_torch(forward, torch_fn):
    x = dyadic((2, 2, 3), 2)
    case = Case(_fn_problem(forward, x, STATS))
    xt = t64(x, True)
    m, v = t64([0.5, -1]), t64([2, 0.5])
    w, b = t64([1.5, -2], True), t64([0.25, 1], True)
    versions = (m._version, v._version)
    rec = TorchRecorder()
    with rec.saved():
        y = torch_fn(xt, m, v, w, b)
        (y * y * xt).sum().backward()
    names = {"x": xt, "w": w, "b": b}
    assert case.chain("h") == torch_chain(y, names)
    assert_close(case.value("h"), y, "h")
    for name, t in names.items():
        assert_close(case.grad(name), t.grad, f"grad of {name}")
    assert_saved(case, rec)
    assert_close(case.value("m"), m, "running mean")
    assert_close(case.value("v"), v, "running var")
    assert (case.tensor("m").version.value, case.tensor("v").version.value) == (m._version - versions[0],
                                                                                  v._version - versions[1])


def _error(text: str) -> dict:
    """The error adjoint predicts for the problem (its type and message)."""
    error = adjoint.loads(text).solve().variants[0].to_json()["error"]
    return {"type": error["type"], "message": error["message"]}


def _torch_error(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            fn()
        except Exception as e:   # noqa: BLE001 (any of torch's errors is the expectation)
            return {"type": type(e).__name__, "message": str(e)}
    raise AssertionError("torch did not raise")


@pytest.mark.parametrize("forward,torch_fn", [
    ("F.instance_norm(x[:, :, :1])", lambda x, m, v, w, b: F.instance_norm(x[:, :, :1])),
    ("F.instance_norm(x[0, 0])", lambda x, m, v, w, b: F.instance_norm(x[0, 0])),
    ("F.instance_norm(x[0, 0], m, v, use_input_stats=False)",
     lambda x, m, v, w, b: F.instance_norm(x[0, 0], m, v, use_input_stats=False)),
    ("F.instance_norm(x, m, None, use_input_stats=False)",
     lambda x, m, v, w, b: F.instance_norm(x, m, None, use_input_stats=False)),
    ("F.instance_norm(x, m, None, w, b)", lambda x, m, v, w, b: F.instance_norm(x, m, None, w, b)),
    ("F.instance_norm(x, None, v)", lambda x, m, v, w, b: F.instance_norm(x, None, v)),
    ("F.instance_norm(x, weight=b[:1])", lambda x, m, v, w, b: F.instance_norm(x, weight=b[:1])),
    ("F.instance_norm(x, m[:1], v[:1])", lambda x, m, v, w, b: F.instance_norm(x, m[:1], v[:1])),
    ("F.instance_norm(x, weight=w.reshape(2, 1))", lambda x, m, v, w, b: F.instance_norm(x, weight=w.reshape(2, 1))),
    ("F.instance_norm(x[:0], weight=w)", lambda x, m, v, w, b: F.instance_norm(x[:0], weight=w)),
    ("F.instance_norm(x, w.detach().requires_grad_(), v)",
     lambda x, m, v, w, b: F.instance_norm(x, w.detach().requires_grad_(), v)),
])
def test_functional_errors_are_torchs(forward, torch_fn):
    x = dyadic((2, 2, 3), 2)
    theirs = _torch_error(lambda: torch_fn(t64(x, True), t64([0.5, -1]), t64([2, 0.5]), t64([1.5, -2], True),
                                           t64([0.25, 1], True)))
    assert _error(_fn_problem(forward, x, STATS)) == theirs


@pytest.mark.parametrize("type_,args,shape", [
    ("InstanceNorm2d", {"num_features": 2}, (2, 2)),
    ("InstanceNorm2d", {"num_features": 2}, (1, 2, 2, 2, 2)),
    ("InstanceNorm1d", {"num_features": 3, "affine": True}, (2, 2, 3)),
    ("InstanceNorm3d", {"num_features": 3, "affine": True}, (2, 2, 2, 3)),
    ("InstanceNorm2d", {"num_features": 2}, (2, 2, 1, 1)),
    ("InstanceNorm2d", {"num_features": 2}, (2, 1, 1)),
    ("BatchNorm3d", {"num_features": 2}, (2, 2, 2, 2)),
])
def test_module_errors_are_torchs(type_, args, shape):
    x = dyadic(shape, 1)
    theirs = _torch_error(lambda: getattr(nn, type_)(**args, dtype=torch.float64)(t64(x, True)))
    assert _error(module_problem(type_, args, {}, x, loss=LOSS)) == theirs


@pytest.mark.parametrize("shape", [(2, 3, 2), (3, 2)])
def test_num_features_mismatch_without_affine_warns_on_every_call(shape):
    x = dyadic(shape, 1)
    case = Case(module_problem("InstanceNorm1d", {"num_features": 4}, {}, x, loss=LOSS,
                               extra="steps: [forward, forward, backward]\n"))
    m = nn.InstanceNorm1d(4, dtype=torch.float64)
    TorchRecorder(m)   # the problem's legacy hook, whose FutureWarning each call also gives
    xt = t64(x, True)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        m(xt)
        y = m(xt)
    (y * y * xt).sum().backward()
    ours = [(w["category"], w["message"]) for w in case.json["warnings"]]
    assert ours == [(w.category.__name__, str(w.message)) for w in seen]
    assert [c for c, _ in ours].count("UserWarning") == 2
    assert_close(case.grad("x"), xt.grad, "grad of x")


def test_batch_norm_refuses_one_running_statistic_and_statistics_that_require_grad():
    """Two of at::batch_norm's errors (F.batch_norm's too): a running statistic that requires grad
    (check_no_requires_grad, before the node), one without the other in training (the kernel's
    ValueError, after the packs)."""
    x = dyadic((2, 2), 1)
    extra = "  m: {value: [0, 1], requires_grad: true}\n  v: [1, 2]\n"
    for forward, fn in (("F.batch_norm(x, m, v, training=True)",
                         lambda xt, m, v: F.batch_norm(xt, m, v, training=True)),
                        ("F.batch_norm(x, v, None, training=True)",
                         lambda xt, m, v: F.batch_norm(xt, v, None, training=True))):
        theirs = _torch_error(lambda: fn(t64(x, True), t64([0, 1], True), t64([1, 2])))
        assert _error(_fn_problem(forward, x, extra)) == theirs
