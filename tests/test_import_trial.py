"""``adjoint import`` on what a trial of practitioners' model files found: a hook that raises (an
answer, not a reason to refuse the file), ``out=`` in a hook body, refusals that named a line of
the file never written instead of the user's, a float64 buffer, a hook registered inside a
forward, a dict output with a None value, and an op on a buffer alone.

Every expected value is real torch running the user's module as written here (its hooks
included), never adjoint's output; every refusal is checked for the user's ``file:line``.
"""

from __future__ import annotations

import os

import pytest
from conftest import import_to_file, line_of, require_torch, users_module_run

torch = require_torch()

import adjoint  # noqa: E402
from adjoint.format.errors import ProblemError  # noqa: E402
from adjoint.torchside.importer import import_file  # noqa: E402
from adjoint.torchside.importer.userfile import call_factory  # noqa: E402
from adjoint.torchside.verify import predict, verify_variant  # noqa: E402

MODELS = '''\
import math

import torch
import torch.nn.functional as F
from torch import nn

CALLS = []


class Two(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 3)
        self.b = nn.Linear(3, 1)

    def forward(self, x):
        return self.b(torch.tanh(self.a(x)))


def noted(module, grad_input, grad_output):
    CALLS.append("b")


def reshaped(g):
    CALLS.append("a.weight")
    return g.view(7)


def make_raising_tensor_hook():
    torch.manual_seed(0)
    m = Two().double()
    m.b.register_full_backward_hook(noted)
    m.a.weight.register_hook(reshaped)
    return m


class Embedded(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(5, 2)
        self.fc = nn.Linear(2, 1)

    def forward(self, idx):
        return self.fc(self.emb(idx))


def halved(module, grad_input, grad_output):
    CALLS.append("layer")
    return (grad_input[0] * 0.5,)


def make_halving_every_layer():
    torch.manual_seed(0)
    m = Embedded().double()
    for mod in m.modules():
        if isinstance(mod, (nn.Linear, nn.Embedding)):
            mod.register_full_backward_hook(halved)
    return m


def doubled_input(module, args):
    CALLS.append("a")
    args[0].mul_(2)


def make_leaf_written_by_pre_hook():
    torch.manual_seed(0)
    m = Two().double()
    m.a.register_forward_pre_hook(doubled_input)
    return m


def viewed(module, args, output):
    CALLS.append("a")
    return output.view(7)


def make_raising_forward_hook():
    torch.manual_seed(0)
    m = Two().double()
    m.a.register_forward_hook(viewed)
    return m


def clamped_out(g):
    torch.clamp(g, -0.01, 0.01, out=g)


def make_clamp_out():
    torch.manual_seed(0)
    m = Two().double()
    m.a.weight.register_hook(clamped_out)
    return m


class Padded(nn.Module):
    def __init__(self, mode):
        super().__init__()
        self.conv = nn.Conv2d(1, 1, 3, padding=1, padding_mode=mode)

    def forward(self, x):
        h = self.conv(x)
        return h.sum(dim=1)


class RepeatedCopy(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("idx", torch.tensor([1, 1]))

    def forward(self, x):
        h = x.index_copy(1, self.idx, x[:, :2] * 2)
        return h.sum(dim=1)


def make_repeated_copy():
    return RepeatedCopy().double()


def make_reflect():
    torch.manual_seed(0)
    return Padded("reflect").double()


class Casts(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, x):
        h = self.fc(x)
        return h + h.double().sum(dim=1, keepdim=True).float()


def make_casting():
    return Casts()


class Recurrent(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(3, 2, batch_first=True)
        self.fc = nn.Linear(2, 1)

    def forward(self, x):
        out, (h, c) = self.lstm(x)
        return self.fc(h[-1])


def make_float32_lstm():
    return Recurrent()


class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)
        self.register_buffer("scale", torch.tensor([1.0 / 3.0, 0.1, 2.0], dtype=torch.float64))

    def forward(self, x):
        return self.fc(x) * self.scale


def make_float64_buffer():
    return Scaled()


class HookInForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(3, 3)
        self.fc2 = nn.Linear(3, 1)

    def forward(self, x):
        h = torch.tanh(self.fc1(x))
        h.register_hook(lambda g: g * 0.5)
        return self.fc2(h)


def make_hook_in_forward():
    return HookInForward()


class Outputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 2)

    def forward(self, x, labels=None):
        logits = self.fc(x)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits, labels)
        return {"logits": logits, "loss": loss}


def make_dict_with_none():
    torch.manual_seed(0)
    return Outputs().double()


class Normalizer(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)
        self.register_buffer("var", torch.tensor([0.5, 0.25, 2.0], dtype=torch.float64))

    def forward(self, x):
        return self.fc(x) / torch.sqrt(self.var + 1e-5)


def make_normalizer():
    torch.manual_seed(0)
    return Normalizer().double()


class Rebinds(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)
        self.register_buffer("running", torch.ones(3, dtype=torch.float64))

    def forward(self, x):
        h = self.fc(x)
        self.running = 0.5 * self.running + 0.5 * h.detach().abs().mean(0)
        return h / (self.running + 1e-3)


def make_rebinding():
    torch.manual_seed(0)
    return Rebinds().double()


class InPlaceAverage(Rebinds):
    def forward(self, x):
        h = self.fc(x)
        self.running.mul_(0.5).add_(0.5 * h.detach().abs().mean(0))
        return h / (self.running + 1e-3)


def make_in_place_average():
    torch.manual_seed(0)
    return InPlaceAverage().double()


class Masked(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)
        self.register_buffer("tril", torch.tril(torch.ones(4, 4, dtype=torch.float64)))

    def forward(self, x):
        T = x.size(0)
        att = (self.fc(x) @ x.transpose(0, 1)) * (1.0 / math.sqrt(x.size(-1)))
        att = att.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
        return F.softmax(att, dim=-1)


def make_masked():
    torch.manual_seed(0)
    return Masked().double()
'''


@pytest.fixture
def models(tmp_path):
    path = tmp_path / "models.py"
    path.write_text(MODELS)
    return str(path)


def _refused(models: str, factory: str, specs=("x=2x3",), loss: str = "sum(y)") -> str:
    with pytest.raises(ProblemError) as err:
        import_file(f"{models}:{factory}", list(specs), loss, None)
    return str(err.value)


def _at(models: str, text: str) -> str:
    return f"{os.path.relpath(models) if not os.path.relpath(models).startswith('..') else models}:" \
           f"{line_of(models, text)}: "


def _users_run_raises(problem, models: str, factory: str):
    """The user's module, its own hooks noting their calls in CALLS, on the file's inputs:
    (the error it raises, in which phase, the calls noted before it)."""
    model = call_factory(models, factory)
    calls = model.__class__.__init__.__globals__["CALLS"]
    calls.clear()
    args = []
    for d in problem.variants[0].inputs:
        values = [float(v) for v in d.value.items]
        if d.dtype == "int64":
            args.append(torch.tensor([int(v) for v in values], dtype=torch.int64).reshape(d.value.shape))
        else:
            # a fresh leaf, as the file's input is (a reshape's result would be a view of one)
            args.append(torch.tensor(values, dtype=torch.float64).reshape(d.value.shape).clone().requires_grad_(True))
    during = "forward"
    try:
        out = model(*args)
        during = "backward"
        out.sum().backward()
    except Exception as exc:       # noqa: BLE001 -- whatever the user's hook raises is the answer
        return exc, during, list(calls)
    raise AssertionError("the user's module ran without error")


# ----------------------------------------------------------------------------- a hook that raises

@pytest.mark.parametrize("factory, specs, kinds", [
    # sum's gradient reaches b's hook, then a.weight's hook views 9 elements as 7
    ("make_raising_tensor_hook", ("x=2x3",), ["full_backward", "hook"]),
    # the Linear's hook runs; the Embedding's grad_input is (None,) (its input is int64): None * 0.5
    ("make_halving_every_layer", ("idx=2x3:int64:0-5",), ["full_backward", "full_backward"]),
    # a forward pre-hook writes the leaf input in place: PyTorch's leaf error, in the forward
    ("make_leaf_written_by_pre_hook", ("x=2x3",), ["forward_pre"]),
    # a forward hook views 6 elements as 7: the import's own run on the example inputs stopped
    # there too, and refused the model ("give inputs of the shapes the model takes")
    ("make_raising_forward_hook", ("x=2x3",), ["forward"]),
])
def test_a_hook_that_raises_is_imported_and_its_error_predicted(models, factory, specs, kinds):
    """The user's hook raising was PyTorch's answer, and the import refused the file ("raised:
    predicted True, observed False"): verify --origin never marked the user's call as raised.
    The file is written; its prediction is torch's error (type, message, phase) after the calls
    the user's hooks made, the last one marked raised; verify --origin agrees."""
    path, text, problem = import_to_file(models, factory, list(specs))
    exc, during, calls = _users_run_raises(problem, models, factory)
    vp = predict(problem, None, "float64").variants[0]
    js = vp.to_json()
    assert js["error"] == {"type": type(exc).__name__, "message": str(exc), "during": during,
                           "after_call": len(calls) - 1}
    assert [c["kind"] for c in js["hook_calls"]] == kinds and len(kinds) == len(calls)
    assert js["hook_calls"][-1].get("raised") is True
    assert not any(c.get("raised") for c in js["hook_calls"][:-1])
    result = verify_variant(path, problem, vp, "float64", False, origin=True)
    assert result.ok, [(r.item, r.detail) for r in result.rows if not r.ok]
    assert any(r.section == "origin" and r.item.startswith("error ") for r in result.rows)


# ----------------------------------------------------------------------------- out= in a hook body

def test_out_in_a_hook_body_is_refused_at_its_line_naming_the_in_place_write(models):
    """``torch.clamp(g, -0.01, 0.01, out=g)`` was read as an observing call and dropped: the
    file's hook did nothing, and the self-check blamed the forward. In PyTorch it writes g in place
    as ``g.clamp_(-0.01, 0.01)`` does (one version bump, the same values) while nothing requires
    grad; it is refused at the hook's line, naming that write."""
    g, h = torch.tensor([0.5, -0.005, -2.0]), torch.tensor([0.5, -0.005, -2.0])
    torch.clamp(g, -0.01, 0.01, out=g)
    h.clamp_(-0.01, 0.01)
    assert torch.equal(g, h) and g._version == h._version == 1
    msg = _refused(models, "make_clamp_out")
    assert msg.startswith(_at(models, "torch.clamp(g, -0.01, 0.01, out=g)")), msg
    assert "through out=" in msg and "write g.clamp_(-0.01, 0.01)" in msg


# ----------------------------------------------------------------------------- the user's line

@pytest.mark.parametrize("factory, specs, line, words", [
    # solve refuses the file's line: told at the user's line of the op it points at
    ("make_repeated_copy", ("x=2x3",), "h = x.index_copy(1, self.idx, x[:, :2] * 2)", "names one slice twice"),
    ("make_casting", ("x=2x3",), "h + h.double()", "model.double() before importing"),
])
def test_what_the_file_cannot_answer_is_told_at_the_users_line(models, factory, specs, line, words):
    """These named "line N of the file it would have written", a file the user never sees."""
    msg = _refused(models, factory, specs)
    assert msg.startswith(_at(models, line)), msg
    assert words in msg and "file it would have written" not in msg


def test_a_float64_buffer_is_named_at_its_line(models):
    """It said "the model mixes float32 and float64 parameters", naming neither the buffer nor a
    line (PyTorch promotes float32 * float64 to float64: a problem holds one float dtype)."""
    assert (torch.ones(2) * torch.ones(2, dtype=torch.float64)).dtype == torch.float64
    msg = _refused(models, "make_float64_buffer")
    assert msg.startswith(_at(models, 'register_buffer("scale"')), msg
    assert "its buffer 'scale' is float64" in msg and "model.float()" in msg


def test_a_hook_registered_in_the_forward_names_the_files_tensor_hook(models):
    """It said "register the hook on the model before importing", which an intermediate cannot
    be; the file's {tensor: h} hook is what does it."""
    msg = _refused(models, "make_hook_in_forward")
    assert msg.startswith(_at(models, "h.register_hook(")), msg
    assert "{tensor: h, returns: ...}" in msg and "register the hook on the model" not in msg


# ----------------------------------------------------------------------------- what now imports

def test_a_float32_lstm_imports_and_answers_as_the_users_module(models):
    """A float32 nn.LSTM was refused ("return model.double() from the factory"): PyTorch runs it
    through oneDNN's MkldnnRnnLayerBackward0, modelled now. The file's gradients are the user's
    module's within float32 rounding."""
    out = os.path.join(os.path.dirname(models), "lstm32.yaml")
    text = import_file(f"{models}:make_float32_lstm", ["x=1x2x3"], "sum(y)", out)
    with open(out, "w") as fh:
        fh.write(text)
    problem = adjoint.load(out)
    assert problem.dtype == "float32" and "type: LSTM" in text
    vp = predict(problem, None, "exact").variants[0]
    assert vp.to_json().get("error") is None, vp.to_json().get("error")
    assert verify_variant(out, problem, vp, problem.dtype, False, origin=True).ok



def test_a_reflect_padded_conv_imports_and_answers_as_the_users_module(models):
    """Conv2d(padding_mode='reflect') was refused; it pads with F.pad(mode='reflect')
    (ReflectionPad2DBackward0), then convolves without padding, as _ConvNd._conv_forward does."""
    out = os.path.join(os.path.dirname(models), "reflect.yaml")
    text = import_file(f"{models}:make_reflect", ["x=1x1x4x4"], "sum(y)", out)
    with open(out, "w") as fh:
        fh.write(text)
    problem = adjoint.load(out)
    assert "padding_mode" in text and "reflect" in text
    vp = predict(problem, None, "exact").variants[0]
    assert vp.to_json().get("error") is None, vp.to_json().get("error")
    assert verify_variant(out, problem, vp, problem.dtype, False, origin=True).ok


def test_a_dict_output_with_a_none_value_imports(models):
    """``return {"logits": t, "loss": None}`` (no labels given) was refused ("must return a
    tensor or a tuple of tensors") though a dict of tensors imports; the loss reads y["logits"]."""
    out = os.path.join(os.path.dirname(models), "dict.yaml")
    text = import_file(f"{models}:make_dict_with_none", ["x=2x3"], 'sum(y["logits"])', out)
    with open(out, "w") as fh:
        fh.write(text)
    problem = adjoint.load(out)
    assert '"loss": None}' in text
    model = call_factory(models, "make_dict_with_none")
    x = torch.tensor([float(v) for v in problem.variants[0].inputs[0].value.items],
                     dtype=torch.float64).reshape(2, 3).requires_grad_(True)
    result = model(x)
    assert result["loss"] is None
    result["logits"].sum().backward()
    vp = predict(problem, None, "float64").variants[0]
    js = vp.to_json()
    assert torch.allclose(torch.tensor(js["grads"]["x"]["value"], dtype=torch.float64), x.grad, rtol=1e-10, atol=1e-12)
    assert torch.allclose(torch.tensor(js["grads"]["fc.weight"]["value"], dtype=torch.float64), model.fc.weight.grad,
                          rtol=1e-10, atol=1e-12)
    assert verify_variant(out, problem, vp, "float64", False, origin=True).ok
    # the default loss, sum(y), on the dict: told as --loss, the dict's keys named
    msg = _refused(models, "make_dict_with_none")
    assert msg.startswith('--loss "sum(y)": sum() needs a tensor, got a dict'), msg


@pytest.mark.parametrize("factory, forward", [
    # fx ran self.var + 1e-5 while tracing (the buffer was a real tensor): a constant, refused
    ("make_normalizer", "return fc(x) / torch.sqrt(var + 1e-05)"),
    # an in-place running average of a buffer: traced, written in place
    ("make_in_place_average", "running.mul_(0.5)"),
    # a causal mask sliced by a size, and math.sqrt of a size (fx would make it a node the format
    # does not have): recorded from one call, the size a number
    ("make_masked", "tril[:2, :2]"),
])
def test_an_op_on_a_buffer_alone_is_traced(models, factory, forward):
    path, text, problem = import_to_file(models, factory, ["x=2x3"])
    assert forward in text
    vp = predict(problem, None, "float64").variants[0]
    js = vp.to_json()
    loss, grads = users_module_run(problem, models, factory)
    assert abs(js["loss"]["value"] - loss.item()) <= 1e-12
    for name, g in grads.items():
        assert torch.allclose(torch.tensor(js["grads"][name]["value"], dtype=torch.float64), g, rtol=1e-10,
                              atol=1e-12), name
    assert verify_variant(path, problem, vp, "float64", False, origin=True).ok


def test_a_buffer_rebound_in_the_forward_is_refused_at_its_line(models):
    """``self.running = 0.5 * self.running + ...`` binds a new tensor: fx and a recorded call see
    no attribute assignment, so the file would keep the old buffer (and fx's trace left a Proxy
    in the user's module); refused at the assignment, the module left as it was."""
    model = call_factory(models, "make_rebinding")
    before = model.running
    model(torch.ones(2, 3, dtype=torch.float64))
    assert model.running is not before          # PyTorch: a new tensor bound to the buffer's name
    msg = _refused(models, "make_rebinding")
    assert msg.startswith(_at(models, "self.running = 0.5 * self.running")), msg
    assert "binds its buffer 'running' to a new tensor" in msg and "in place" in msg
