"""Common Python hook idioms are translated into the format's own language, faithfully.

``tuple(g * 0.5 if g is not None else None for g in grad_input)``, an early ``return`` under
``if grad_input[0] is None:``, ``assert grad is not None``, ``gx, = grad_input``, a hook that
is an object with a ``__call__`` (``Clipper(0.01)``), ``print(module.__class__.__name__)``,
``max(0.5, 2)`` and ``7 // 2`` of Python numbers: each was refused at import (exit 2). Every
expected value is real torch running the user's module with its hooks as registered
(``verify --origin``, and the module run by hand), never adjoint's output.
"""

from __future__ import annotations

import math

import pytest
from conftest import import_to_file, require_torch, users_module_run

torch = require_torch()

from adjoint.format.errors import ProblemError  # noqa: E402
from adjoint.torchside.importer.userfile import call_factory  # noqa: E402
from adjoint.torchside.verify import predict, verify_variant  # noqa: E402
import adjoint  # noqa: E402

MODEL = '''\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 3)
        self.b = nn.Linear(3, 3)
        self.c = nn.Linear(3, 1)

    def forward(self, x):
        h = torch.tanh(self.a(x.detach())) + x
        return self.c(torch.tanh(self.b(h)))


def scale_grad(module, grad_input, grad_output):
    return tuple(g * 0.5 if g is not None else None for g in grad_input)


def guard(module, grad_input, grad_output):
    if grad_input[0] is None:
        return None
    gx, = grad_input
    return (gx * 3,)


def swap(module, grad_input, grad_output):
    g = grad_input[0]
    if not (g is not None):
        print("no gradient")
        return
    if g.abs().max() > 100:
        g = g / 100
    else:
        return (g * 2,)
    return (g,)


class Clipper:
    def __init__(self, c):
        self.c = c

    def __call__(self, grad):
        assert grad is not None
        return grad.clamp(-self.c, self.c)


def talk(module, grad_input, grad_output):
    print(module.__class__.__name__, grad_output[0].shape)


def make_bare():
    torch.manual_seed(0)
    return Net().double()


def make():
    m = make_bare()
    m.a.register_full_backward_hook(scale_grad)       # grad_input (None,): a's input is detached
    m.b.register_full_backward_hook(scale_grad)
    m.a.register_full_backward_hook(guard)            # returns None there
    m.c.register_full_backward_hook(guard)
    m.b.register_full_backward_hook(swap)
    m.b.weight.register_hook(Clipper(0.01))
    m.c.weight.register_hook(lambda g: g * max(0.5, 2) / (7 // 2))
    m.c.register_full_backward_hook(talk)
    return m
'''


def _agrees_with_the_users_module(out, problem, path, factory: str):
    """The imported file's answer (float64) against the user's module with its hooks, run by
    torch: every ``.grad``, then ``verify --origin`` call by call. The answer's JSON, the user's
    loss and gradients."""
    vp = predict(problem, None, "float64").variants[0]
    js = vp.to_json()
    loss, grads = users_module_run(problem, str(path), factory)
    for name, g in grads.items():
        assert torch.allclose(torch.tensor(js["grads"][name]["value"], dtype=torch.float64), g,
                              rtol=1e-10, atol=1e-12), name
    result = verify_variant(out, problem, vp, "float64", False, origin=True)
    assert result.ok, [(r.item, r.detail) for r in result.rows if not r.ok]
    return js, loss, grads


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    path = tmp_path_factory.mktemp("idioms") / "idioms.py"
    path.write_text(MODEL)
    return str(path)


def test_the_idioms_are_translated_and_equal_the_users_module(models):
    out, text, problem = import_to_file(models, "make", ["x=2x3"])
    for line in (
            '{module: a, kind: full_backward, returns: "tuple(g * 0.5 if g is not None else None for g in grad_input)"}',
            '{module: c, kind: full_backward, does: ["result = None", "if grad_input[0] is None:\\n    result = None'
            '\\nelse:\\n    gx, = grad_input\\n    result = (gx * 3,)"], returns: "result"}',
            '{tensor: b.weight, does: "assert grad is not None", returns: "grad.clamp(-0.01, 0.01)"}',
            '{tensor: c.weight, returns: "grad * 2 / (7 // 2)"}',
            '{module: c, kind: full_backward}'):
        assert line in text, text
    assert "if g is not None:" in text and "a Clipper object" in text
    # real torch: the user's module with its hooks, run by hand, and verify --origin call by call
    js, loss, grads = _agrees_with_the_users_module(out, problem, models, "make")
    assert abs(js["loss"]["value"] - loss.item()) <= 1e-12
    # the hooks change what flows: the module without them gives other gradients
    bare = call_factory(models, "make_bare")
    d = problem.variants[0].inputs[0]
    x = torch.tensor([float(v) for v in d.value.items], dtype=torch.float64).reshape(d.value.shape)
    bare(x.requires_grad_(True)).sum().backward()
    assert not torch.allclose(bare.b.weight.grad, grads["b.weight"])
    assert not torch.allclose(x.grad, grads["x"])


@pytest.mark.parametrize("hook, words", [
    ('{tensor: x, does: "if grad.sum() > 0:\\n    return grad"}', "'return' inside an if block is not allowed"),
    ('{tensor: x, returns: "grad if grad is 2 else grad"}', "'is' and 'is not' are allowed with None only"),
    ('{tensor: x, returns: "[g for g in grad if g]"}', "a comprehension's 'if' clause is not allowed"),
    ('{tensor: x, returns: "grad * 2 if grad.sum() else grad"}', "its truth value as a condition is not modelled"),
])
def test_what_the_choices_do_not_take_is_refused_at_its_place(hook, words):
    text = ("name: t\ndtype: float64\ninputs:\n  x: {value: [1, -2], requires_grad: true}\nmodel:\n"
            "  forward: \"x * 2\"\nloss: \"sum(y)\"\nhooks:\n  - " + hook + "\n")
    with pytest.raises(ProblemError, match=words):
        adjoint.loads(text).solve()


def test_a_comprehension_in_a_forward_is_refused():
    text = ("name: t\ndtype: float64\ninputs:\n  x: {value: [1, -2], requires_grad: true}\nmodel:\n"
            "  forward: \"sum(tuple(v * 2 for v in (x, x))[0])\"\nloss: \"sum(y)\"\n")
    with pytest.raises(ProblemError, match="a comprehension is only allowed in a hook's returns: and does:"):
        adjoint.loads(text)


MATH_MODEL = '''\
import math
import torch
from torch import nn

D = 3


def rescale(grad):
    return grad / math.sqrt(2) * math.exp(-1.0) + grad * math.pi


def fan_in(module, grad_input, grad_output):
    return (grad_input[0] * math.sqrt(D) / math.log(D),)


def of_a_tensor(grad):
    return grad * math.sqrt(grad.norm())


def make():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(2, 3), nn.Tanh(), nn.Linear(3, 1)).double()
    m[0].weight.register_hook(rescale)
    m[2].register_full_backward_hook(fan_in)
    return m


def make_tensor():
    m = make()
    m[2].weight.register_hook(of_a_tensor)
    return m
'''


def test_pythons_math_of_captured_numbers_is_computed_as_python_does(tmp_path):
    """``math.sqrt(D)`` in a hook body was refused ("'math', a captured module"); it is a
    Python float, computed at import as Python computes it."""
    models = tmp_path / "mathhooks.py"
    models.write_text(MATH_MODEL)
    out, text, problem = import_to_file(str(models), "make", ["x=2x2"])
    assert f'returns: "grad / {math.sqrt(2)!r} * {math.exp(-1.0)!r} + grad * {math.pi!r}"' in text, text
    assert f'returns: "(grad_input[0] * {math.sqrt(3)!r} / {math.log(3)!r},)"' in text, text
    _agrees_with_the_users_module(out, problem, str(models), "make")
    with pytest.raises(ProblemError) as err:
        import_to_file(str(models), "make_tensor", ["x=2x2"])
    assert "the call math.sqrt(grad.norm()) (Python's math of a value that is not a captured number" in str(err.value)


PRUNE_MODEL = '''\
import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)
        self.layers = nn.ModuleList([nn.Linear(3, 2)])
        self.register_buffer("mask", (torch.arange(9).reshape(3, 3) % 2).double())

    def forward(self, x):
        return self.layers[0](torch.tanh(self.fc(x)))


def make():
    torch.manual_seed(0)
    m = Net().double()
    mask = m.mask
    m.fc.weight.register_hook(lambda g: g * mask)                                 # gradient masking (pruning)
    m.layers[0].weight.register_hook(lambda g: g + 0.01 * m.layers[0].weight)    # weight decay in a hook
    m.fc.register_full_backward_pre_hook(lambda mod, go: (go[0] * mod.weight.sum(),))
    m.register_full_backward_hook(lambda mod, gi, go: (gi[0] * mod.mask[0, 1],))
    return m


def shadowing(grad):
    mask = grad * 2
    return mask * Net.held.mask


def make_shadowing():
    m = make()
    Net.held = m
    m.layers[0].bias.register_hook(shadowing)
    return m
'''


def test_the_models_parameters_and_buffers_read_in_a_hook_are_written_by_name(tmp_path):
    """A hook reading a parameter or buffer of the model -- a captured ``mask`` buffer,
    ``m.layers[0].weight``, the module argument's ``mod.weight`` -- was refused (a captured
    tensor; the module argument read); the file names it (``mask``, ``layers[0].weight``,
    ``fc.weight``), the same tensor when the hook runs."""
    models = tmp_path / "prune.py"
    models.write_text(PRUNE_MODEL)
    out, text, problem = import_to_file(str(models), "make", ["x=2x3"])
    for line in ('{tensor: fc.weight, returns: "grad * mask"}',
                 '{tensor: layers.0.weight, returns: "grad + 0.01 * layers[0].weight"}',
                 '{module: fc, kind: full_backward_pre, returns: "(grad_output[0] * fc.weight.sum(),)"}',
                 '{module: model, kind: full_backward, returns: "(grad_input[0] * mask[0, 1],)"}'):
        assert line in text, text
    _js, _loss, grads = _agrees_with_the_users_module(out, problem, str(models), "make")
    assert (grads["fc.weight"] != 0).sum() < grads["fc.weight"].numel()   # the mask cut gradients
    with pytest.raises(ProblemError) as err:
        import_to_file(str(models), "make_shadowing", ["x=2x3"])
    assert "is the model's mask, a name the hook's body also gives to a value of its own" in str(err.value)


FLAG_MODEL = '''\
import torch
from torch import nn

ENABLED = True
CFG = {"clip": True, "scale": 0.5, "debug": False}


def doubled(module, grad_input, grad_output):
    return (grad_input[0] * 2,) if ENABLED else None


def clipped(grad):
    if CFG["clip"]:
        return grad.clamp(-0.1, 0.1)
    return grad


def scaled(grad):
    if not ENABLED or CFG["debug"]:
        print("skipped")
        return None
    return grad * CFG["scale"]


def only_training(module, grad_input, grad_output):
    if module.training and CFG["scale"] > 0:
        return (grad_input[0] * CFG["scale"],)


def make():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(2, 3), nn.Tanh(), nn.Linear(3, 1)).double()
    m[2].register_full_backward_hook(doubled)
    m[0].weight.register_hook(clipped)
    m[0].bias.register_hook(scaled)
    m[0].register_full_backward_hook(only_training)
    return m


def make_eval():
    return make().eval()
'''


@pytest.mark.parametrize("factory, trained", [("make", True), ("make_eval", False)])
def test_a_test_of_captured_flags_takes_the_branch_python_takes(tmp_path, factory, trained):
    """``if CFG["clip"]:``, ``... if ENABLED else None``, ``module.training``: a test of
    captured values was written as ``True`` / ``False``, which the format refuses as a
    condition ("adjoint import made a file its own loader refuses (a bug of adjoint import)").
    It is decided at import, by value, as Python decides it when the hook runs."""
    models = tmp_path / "flags.py"
    models.write_text(FLAG_MODEL)
    out, text, problem = import_to_file(str(models), factory, ["x=2x2"])
    for line in ('{module: "2", kind: full_backward, returns: "(grad_input[0] * 2,)"}',
                 '{tensor: "0.weight", returns: "grad.clamp(-0.1, 0.1)"}',
                 '{tensor: "0.bias", returns: "grad * 0.5"}',
                 '{module: "0", kind: full_backward, returns: "(grad_input[0] * 0.5,)"}' if trained else
                 '{module: "0", kind: full_backward}'):
        assert line in text, text
    _agrees_with_the_users_module(out, problem, str(models), factory)


CAM_MODEL = '''\
import torch
from torch import nn


class GradCAM:
    """pytorch-grad-cam's recorder: bound methods storing what the hooks are handed on self."""

    def __init__(self, layer):
        self.gradients = None
        self.activations = None
        self.calls = 0
        layer.register_forward_hook(self.save_activation)
        layer.register_full_backward_hook(self.save_gradient)

    def save_activation(self, module, input, output):
        self.activations = output.detach()

    def save_gradient(self, module, grad_input, grad_output):
        self.gradients = grad_output[0].detach()
        self.calls += 1


class Mix(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(2, 2)

    def forward(self, x, z):
        return self.a(x) * z


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.mix = Mix()
        self.fc = nn.Linear(2, 2)
        self.head = nn.Linear(2, 1)

    def forward(self, x, z):
        return self.head(torch.relu(self.fc(self.mix(x, z))))


def spliced(module, grad_input, grad_output):
    return grad_input[0] * 0.5, *grad_input[1:]


def make():
    torch.manual_seed(0)
    m = Net().double()
    GradCAM(m.fc)
    m.mix.register_full_backward_hook(spliced)
    return m
'''


def test_a_grad_cam_recorder_and_a_spliced_grad_input_are_translated(tmp_path):
    """``self.activations = output.detach()`` in a bound-method hook (the Grad-CAM recorder) was
    refused as an untranslatable statement, and ``return g * 0.5, *grad_input[1:]`` as an
    expression: the first only records (observe-only), the second is the tuple sum
    ``(g * 0.5,) + grad_input[1:]``."""
    models = tmp_path / "cam.py"
    models.write_text(CAM_MODEL)
    out, text, problem = import_to_file(str(models), "make", ["x=2x2", "z=2x2"])
    for line in ("{module: fc, kind: forward}  # a GradCAM object's save_activation",
                 "{module: fc, kind: full_backward}  # a GradCAM object's save_gradient",
                 '{module: mix, kind: full_backward, returns: "(grad_input[0] * 0.5,) + grad_input[1:]"}'):
        assert line.split("  #")[0] in text, text
    _agrees_with_the_users_module(out, problem, str(models), "make")


FUSED_MODEL = '''\
import torch
from torch import nn

optimizer_dict = {}


def optimizer_hook(parameter) -> None:
    optimizer_dict[parameter].step()
    optimizer_dict[parameter].zero_grad()


def make():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 3), nn.Tanh(), nn.Linear(3, 1)).double()
    optimizer_dict.clear()
    for p in model.parameters():
        optimizer_dict[p] = torch.optim.Adam([p], lr=0.01, betas=(0.8, 0.99), foreach=False)
    for p in model.parameters():
        p.register_post_accumulate_grad_hook(optimizer_hook)
    return model


def make_sgd():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 3), nn.Tanh(), nn.Linear(3, 1)).double()
    opts = {p: torch.optim.SGD([p], lr=0.1, momentum=0.9, weight_decay=0.01) for p in model.parameters()}
    for p in model.parameters():
        p.register_post_accumulate_grad_hook(lambda q: opts[q].step())
    return model


def make_rmsprop():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(2, 3), nn.Tanh(), nn.Linear(3, 1)).double()
    opts = {p: torch.optim.RMSprop([p], lr=0.1) for p in model.parameters()}
    for p in model.parameters():
        p.register_post_accumulate_grad_hook(lambda q: opts[q].step())
    return model
'''


def test_pytorchs_optimizer_in_backward_recipe_is_imported_with_its_optimizer(tmp_path):
    """The tutorial's ``optimizer_dict[p] = torch.optim.Adam([p]); optimizer_dict[parameter].step();
    optimizer_dict[parameter].zero_grad()`` was refused ("the call .step(): adjoint cannot tell
    what it changes"); it is the format's ``optimizer:`` with ``optim.step()``, the Adam's own
    settings written."""
    models = tmp_path / "fused.py"
    models.write_text(FUSED_MODEL)
    out, text, problem = import_to_file(str(models), "make", ["x=2x2"])
    assert ('{tensor: "0.weight", kind: post_accumulate_grad, optimizer: {type: Adam, lr: 0.01, betas: [0.8, 0.99], '
            'eps: 1e-08}, does: ["optim.step()", "optim.zero_grad()"]}') in text, text
    js = predict(problem, None, "float64").variants[0].to_json()
    model = call_factory(str(models), "make")
    d = problem.variants[0].inputs[0]
    x = torch.tensor([float(v) for v in d.value.items], dtype=torch.float64).reshape(d.value.shape)
    model(x).sum().backward()
    for name, p in model.named_parameters():
        assert p.grad is None and js["grads"][name] is None, name       # zero_grad: None
        assert torch.allclose(torch.tensor(js["leaf_values"][name]["value"], dtype=torch.float64), p.detach(),
                              rtol=1e-10, atol=1e-12), name
    with pytest.raises(ProblemError) as err:
        import_to_file(str(models), "make_rmsprop", ["x=2x2"])
    assert "'opts[q].step()' steps a torch.optim.RMSprop, which adjoint does not model" in str(err.value)


def test_an_sgd_with_momentum_stepped_in_a_hook_is_imported(tmp_path):
    """``torch.optim.SGD([p], lr=0.1, momentum=0.9, weight_decay=0.01)`` stepped by a
    post-accumulate-grad hook (refused before: only Adam was imported): the format's
    ``optimizer: {type: SGD, ...}``; the stepped parameters agree with torch's bit for bit in
    --float64."""
    models = tmp_path / "fused.py"
    models.write_text(FUSED_MODEL)
    out, text, problem = import_to_file(str(models), "make_sgd", ["x=2x2"])
    assert "optimizer: {type: SGD, lr: 0.1, momentum: 0.9, weight_decay: 0.01}" in text, text
    model = call_factory(str(models), "make_sgd")
    d = problem.variants[0].inputs[0]
    x = torch.tensor([float(v) for v in d.value.items], dtype=torch.float64).reshape(d.value.shape)
    model(x).sum().backward()
    js = predict(problem, None, "float64").variants[0].to_json()
    for name, p in model.named_parameters():
        assert js["leaf_values"][name]["value"] == p.detach().tolist(), name
