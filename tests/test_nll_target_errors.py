"""nll_loss's own checks on a 1-D or 2-D input are PyTorch's errors, an answer.

``nll_loss_forward`` checks its target and weight once the autograd kernel has made
``NllLossBackward0`` and packed self, target and weight (not the total weight: an output),
in this order: the target's rank ("0D or 1D target tensor expected, multi-target not
supported"), its dtype, a 1-D input's target of more or fewer than one element (ValueError
"For 1D input, 1D target must have size 1, ..."), the weight's size, then the kernel's class
bounds (IndexError "Target 7 is out of bounds."). ``cross_entropy`` reaches it after its
``log_softmax`` (and, with label smoothing, before the smoothing term). A grid of inputs,
targets, weights, reductions and the three callers, each compared with real torch: the pack
calls (their shapes, in order) and the error's type and message, or that there is none.
"""

import itertools

import pytest

import adjoint

TEMPLATE = """
name: nll
dtype: float64
inputs:
  a: {{value: {x}, requires_grad: true}}
  t: {{value: {t}{tdtype}}}
  w: {{value: {w}}}
model:
  inputs: [a, t, w]
  forward: "{forward}"
loss: "sum(y)"
hooks:
  - {{saved_tensors: {{pack: "x", unpack: "x"}}}}
"""

X = {1: [0.5, -1, 2], 2: [[0.5, -1, 2], [1, 0, -0.5]]}
TARGETS = {   # input rank: (value, dtype) targets
    1: [(1, "int64"), ([0], "int64"), ([2, 1], "int64"), ([0, 1, 2], "int64"), ([[0, 1]], "int64"),
        ([0.0, 1.0], "float64"), ([1.0], "float64"), ([True], "bool"), ([7], "int64"), ([7, 8], "int64")],
    2: [([0, 2], "int64"), ([[0, 1], [1, 0]], "int64"), ([0.0, 1.0], "float64"), ([7, 1], "int64"),
        ([1, -3], "int64")],
}
WEIGHTS = {None: "", "ok": "[0.5, 2, 1.5]", "short": "[1, 2]"}
CALLERS = {   # the file's call (w: the weight or nothing): the torch call
    "nll_loss(a, t{w}, reduction='{r}')": lambda F, x, t, w, r: F.nll_loss(x, t, w, reduction=r),
    "cross_entropy(a, t{w}, reduction='{r}')": lambda F, x, t, w, r: F.cross_entropy(x, t, w, reduction=r),
    "cross_entropy(a, t{w}, reduction='{r}', label_smoothing=0.25)":
        lambda F, x, t, w, r: F.cross_entropy(x, t, w, reduction=r, label_smoothing=0.25),
}


def _cases():
    for rank, caller, weight, r in itertools.product((1, 2), CALLERS, WEIGHTS, ("mean", "none")):
        for target, dtype in TARGETS[rank]:
            yield rank, caller, weight, r, target, dtype


@pytest.mark.torch
def test_nll_checks_after_the_packs_as_torch():
    import torch
    import torch.nn.functional as F

    dtypes = {"int64": torch.int64, "float64": torch.float64, "float32": torch.float32, "bool": torch.bool}
    checked, errors = 0, set()
    for rank, caller, weight, r, target, dtype in _cases():
        forward = caller.format(w=", w" if weight else "", r=r)
        text = TEMPLATE.format(x=X[rank], t=str(target).replace("True", "true"), tdtype="" if dtype == "float64" else f", dtype: {dtype}",
                               w=WEIGHTS[weight] or "[1]", forward=forward)
        x = torch.tensor(X[rank], dtype=torch.float64, requires_grad=True)
        t = torch.tensor(target, dtype=dtypes[dtype])
        w = torch.tensor(eval(WEIGHTS[weight]), dtype=torch.float64) if weight else None   # noqa: S307 (a test literal)
        packs, error = [], None

        def pack(p):
            packs.append(list(p.shape))
            return p
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda p: p):
            try:
                CALLERS[caller](F, x, t, w, r)
            except (RuntimeError, ValueError, IndexError) as exc:
                error = (type(exc).__name__, str(exc), "forward")
        case = (forward, target, dtype, weight)
        v = adjoint.loads(text, name="nll").solve().variants[0]
        predicted = ([list(c.args["x"].shape) for c in v.hook_calls if c.kind == "pack"],
                     None if v.error is None else (v.error.type, v.error.message, v.error.during))
        assert predicted == (packs, error), case
        checked += 1
        if error is not None:
            errors.add(error[0] + ": " + error[1].split(",")[0].split(" but")[0])
    assert checked == 270 and errors == {
        "RuntimeError: 0D or 1D target tensor expected", "RuntimeError: expected target dtype to be Long or Byte",
        "ValueError: For 1D input", "RuntimeError: weight tensor should be defined either for all 3 classes or no classes",
        "IndexError: Target 7 is out of bounds.", "IndexError: Target -3 is out of bounds.",
        "RuntimeError: Expected floating point type for target with class probabilities",
        "RuntimeError: output with shape [] doesn't match the broadcast shape [1]"}, (checked, errors)
