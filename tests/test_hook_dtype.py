"""A backward hook whose result has another dtype than the gradient it replaces: PyTorch refuses it
("hook 'hook' has changed the type of value (was torch.FloatTensor got CPUBoolType)"), checking
the dtype before the size, slot by slot; a module's full backward (pre-)hooks are checked once
the module's last hook returned (the earlier ones hand their tensors on). Found by trying adjoint
as a user would: a hook returning ``grad > 0`` was predicted to run on, and a full backward hook
returning a bool tensor crashed the solve.

Every expected message comes from real torch below, written out by hand.
"""

from __future__ import annotations

import itertools

import pytest

import adjoint
from adjoint.engine.torch_errors import TENSOR_TYPE_NAMES, changed_type

torch = pytest.importorskip("torch")

MODEL = """
name: dtype_change
inputs:
  x: {value: [[1, -2, 0.5], [0.25, 1, -1]], requires_grad: true}
model:
  type: Sequential
  children:
    fc1: {type: Linear, params: {weight: [[0.5, -0.25, 0.125], [0.25, 0.5, -0.5]], bias: [0, 0.25]}}
    act: {type: Tanh}
    fc2: {type: Linear, params: {weight: [[1, -0.5], [0.5, 0.5]], bias: [0.25, -0.25]}}
loss: "sum(y ** 2)"
variants:
  tensor_bool:
    hooks: [{tensor: act, returns: "grad > 0"}]
  tensor_long:
    hooks: [{tensor: act, returns: "grad.argmax(dim=1, keepdim=True).expand(2, 2)"}]
  tensor_double:
    hooks: [{tensor: act, returns: "grad.double()"}]
  leaf_bool:
    hooks: [{tensor: fc1.bias, returns: "grad > 0"}]
  type_before_size:
    hooks: [{tensor: act, returns: "grad.sum(0) > 0"}]
  node_size_first:
    hooks: [{node: fc2, kind: post, returns: "(grad_inputs[0], grad_inputs[1][0], grad_inputs[2] > 0)"}]
  node_type_first:
    hooks: [{node: fc2, kind: post, returns: "(grad_inputs[0] > 0, grad_inputs[1][0], grad_inputs[2])"}]
  full_bool:
    hooks: [{module: fc2, kind: full_backward, returns: "(grad_input[0] > 0,)"}]
  full_bool_then_float:
    hooks:
      - {module: fc2, kind: full_backward, returns: "(grad_input[0] > 0,)"}
      - {module: fc2, kind: full_backward, returns: "(grad_input[0].float() * 2,)"}
  full_bool_then_none:
    hooks:
      - {module: fc2, kind: full_backward, returns: "(grad_input[0] > 0,)"}
      - {module: fc2, kind: full_backward}
  pre_bool_then_float:
    hooks:
      - {module: fc2, kind: full_backward_pre, returns: "(grad_output[0] > 0,)"}
      - {module: fc2, kind: full_backward_pre, returns: "(grad_output[0].float() + 1,)"}
  pre_bool_then_none:
    hooks:
      - {module: fc2, kind: full_backward_pre, returns: "(grad_output[0] > 0,)"}
      - {module: fc2, kind: full_backward_pre}
"""

BOOL = "hook 'hook' has changed the type of value (was torch.FloatTensor got CPUBoolType)"
SIZE = "hook 'hook' has changed the size of value"


def _torch_run(variant: str):
    """The same model and hooks in plain torch: the error message, or None and x.grad."""
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Tanh(), torch.nn.Linear(2, 2))
    with torch.no_grad():
        m[0].weight.copy_(torch.tensor([[0.5, -0.25, 0.125], [0.25, 0.5, -0.5]]))
        m[0].bias.copy_(torch.tensor([0, 0.25]))
        m[2].weight.copy_(torch.tensor([[1, -0.5], [0.5, 0.5]]))
        m[2].bias.copy_(torch.tensor([0.25, -0.25]))
    x = torch.tensor([[1, -2, 0.5], [0.25, 1, -1]], requires_grad=True)

    def hook(fn):   # every hook function is called 'hook', as adjoint's verify names them
        def hook(*args):
            return fn(*args)
        return hook

    full = {"full_bool": [lambda mod, gi, go: (gi[0] > 0,)],
            "full_bool_then_float": [lambda mod, gi, go: (gi[0] > 0,), lambda mod, gi, go: (gi[0].float() * 2,)],
            "full_bool_then_none": [lambda mod, gi, go: (gi[0] > 0,), lambda mod, gi, go: None]}
    pre = {"pre_bool_then_float": [lambda mod, go: (go[0] > 0,), lambda mod, go: (go[0].float() + 1,)],
           "pre_bool_then_none": [lambda mod, go: (go[0] > 0,), lambda mod, go: None]}
    for f in full.get(variant, []):
        m[2].register_full_backward_hook(hook(f))
    for f in pre.get(variant, []):
        m[2].register_full_backward_pre_hook(hook(f))
    if variant == "leaf_bool":
        m[0].bias.register_hook(hook(lambda g: g > 0))
    h = m[1](m[0](x))
    tensor = {"tensor_bool": lambda g: g > 0, "tensor_long": lambda g: g.argmax(dim=1, keepdim=True).expand(2, 2),
              "tensor_double": lambda g: g.double(), "type_before_size": lambda g: g.sum(0) > 0}
    if variant in tensor:
        h.register_hook(hook(tensor[variant]))
    y = m[2](h)
    if variant == "node_size_first":
        y.grad_fn.register_hook(hook(lambda gi, go: (gi[0], gi[1][0], gi[2] > 0)))
    if variant == "node_type_first":
        y.grad_fn.register_hook(hook(lambda gi, go: (gi[0] > 0, gi[1][0], gi[2])))
    try:
        (y ** 2).sum().backward()
    except RuntimeError as exc:
        return str(exc), None
    return None, x.grad


EXPECTED = {   # written from the torch runs below (test_torch_says_so)
    "tensor_bool": BOOL,
    "tensor_long": "hook 'hook' has changed the type of value (was torch.FloatTensor got torch.LongTensor)",
    "tensor_double": "hook 'hook' has changed the type of value (was torch.FloatTensor got torch.DoubleTensor)",
    "leaf_bool": BOOL,
    "type_before_size": BOOL,
    "node_size_first": SIZE,
    "node_type_first": BOOL,
    "full_bool": BOOL,
    "full_bool_then_float": None,   # the second hook is handed the bool tensor and returns a float one
    "full_bool_then_none": BOOL,
    "pre_bool_then_float": None,
    "pre_bool_then_none": BOOL,
}


@pytest.fixture(scope="module")
def prediction(tmp_path_factory):
    path = tmp_path_factory.mktemp("dtype") / "p.yaml"
    path.write_text(MODEL)
    return adjoint.load(str(path)).solve()


@pytest.mark.parametrize("variant", sorted(EXPECTED))
def test_torch_says_so(variant):
    message, _ = _torch_run(variant)
    assert message == EXPECTED[variant]


@pytest.mark.parametrize("variant", sorted(EXPECTED))
def test_adjoint_predicts_it(prediction, variant):
    v = next(v for v in prediction.variants if v.name == variant)
    if EXPECTED[variant] is None:
        assert v.error is None
        _, grad = _torch_run(variant)
        ours = [e for row in v.grads["x"].floats() for e in row]
        assert ours == pytest.approx([e for row in grad.tolist() for e in row], rel=1e-6)
    else:
        assert v.error is not None and (v.error.type, v.error.message) == ("RuntimeError", EXPECTED[variant])
        assert v.error.during == "backward"


@pytest.mark.parametrize("original,result", [
    (a, b) for a, b in itertools.product(("float32", "float64", "complex64", "complex128"), TENSOR_TYPE_NAMES)
    if a != b])
def test_the_type_names_are_torchs(original, result):
    x = torch.ones(2, dtype=getattr(torch, original), requires_grad=True)
    y = x * 2

    def hook(g):
        return torch.ones(2, dtype=getattr(torch, result))

    y.register_hook(hook)
    with pytest.raises(RuntimeError) as exc:
        (y.abs() if y.is_complex() else y).sum().backward()
    assert str(exc.value) == changed_type(original, result).message
