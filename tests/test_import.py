"""``adjoint import`` and ``adjoint.from_module``: real models written as problem files.

Every expected value here comes from real torch running the user's own module (never from
adjoint's output): each example is imported, solved exactly, verified (which also compares
the file's autograd graph with the one the user's module builds), and its predicted loss and
gradients are compared with the user's module's own ``backward()``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from fractions import Fraction

import pytest
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402
from adjoint.format import init_draw as init
from adjoint.format.errors import ProblemError  # noqa: E402
from adjoint.torchside.importer import import_file  # noqa: E402
from adjoint.torchside.importer.userfile import call_factory  # noqa: E402
from adjoint.torchside.verify import predict, verify_variant  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples")

#: (file, factory, --input specs): each example and the shapes its docstring gives.
CASES = {
    "mlp": ("mlp.py", "make_model", ["x=2x4"]),
    "cnn": ("cnn.py", "make_model", ["images=1x1x4x4"]),
    "resnet": ("resnet.py", "make_model", ["x=2x2x3x3"]),
    "resnet_train": ("resnet.py", "make_training_block", ["x=2x1x2x2"]),
    "transformer": ("transformer.py", "make_model", ["x=1x1x2"]),
    "hooked": ("hooked.py", "make_model", ["x=2x3"]),      # gradient-changing hooks, translated
    "causal_lm": ("causal_lm.py", "make_model", ["ids=1x3:int64:0-5"]),   # token ids, a tied head, a clipping hook
}


def _write(tmp_path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def _imported(tmp_path, file: str, factory: str, specs: list[str], loss: str = "sum(y)"):
    if os.path.dirname(os.path.abspath(file)) != str(tmp_path):   # verify --origin runs only a file beside the problem
        copy = tmp_path / os.path.basename(file)
        copy.write_text(open(file).read())
        file = str(copy)
    out = str(tmp_path / "problem.yaml")
    text = import_file(f"{file}:{factory}", specs, loss, out)
    with open(out, "w") as fh:
        fh.write(text)
    return out, text, adjoint.load(out)


def _floats(decl) -> list[float]:
    return [float(v) for v in decl.value.items]


def _user_run(problem, file: str, factory: str, dtype=torch.float32):
    """The user's own module (its factory called again), on the file's input values: loss.backward()."""
    model = call_factory(file, factory)
    args = []
    for d in problem.variants[0].inputs:
        if d.dtype == "int64":      # token ids
            args.append(torch.tensor([int(v) for v in d.value.items], dtype=torch.int64).reshape(d.value.shape))
        else:
            args.append(torch.tensor(_floats(d), dtype=dtype).reshape(d.value.shape).requires_grad_(True))
    loss = model(*args).sum()
    loss.backward()
    grads = {d.name: a.grad for d, a in zip(problem.variants[0].inputs, args) if a.is_floating_point()}
    grads.update({n: p.grad for n, p in model.named_parameters()})
    return loss.detach(), grads


def _close(predicted: dict, observed: torch.Tensor, what: str) -> None:
    want = torch.tensor(predicted["value"], dtype=torch.float64)
    got = observed.detach().to(torch.float64)
    assert want.shape == got.shape, what
    assert torch.allclose(want, got, rtol=1e-4, atol=1e-6), f"{what}: predicted {want}, torch {got}"


# ----------------------------------------------------------------------------- the examples

@pytest.mark.parametrize("case", list(CASES))
def test_example_imports_solves_and_verifies_against_the_users_module(tmp_path, case):
    name, factory, specs = CASES[case]
    file = os.path.join(EXAMPLES, name)
    path, text, problem = _imported(tmp_path, file, factory, specs)
    if case == "hooked":        # the hooks' bodies translated: their effect is in the prediction
        assert '{module: fc2, kind: full_backward, returns: "(grad_input[0] * 0.5,)"}' in text
        assert '{tensor: fc1.weight, returns: "grad.clamp(-0.1, 0.1)"}' in text
        assert '{tensor: fc1.bias, does: "grad.clamp_(-0.05, 0.05)"}' in text      # in place, returns None
    if case == "causal_lm":     # head.weight = emb.weight: one Parameter, tied in the file
        assert "weight: {tied: emb.weight}" in text
        assert '{module: v, kind: full_backward_pre, returns: "(grad_output[0].clamp(-0.25, 0.25),)"}' in text
    if case == "transformer":   # the user's own names: h = self.ln1(x); x = x + attended (x taken: x_2)
        assert ("    h = ln1(x)\n    x_2 = x + attn(h, h, h, need_weights=False)[0]\n"
                "    return x_2 + mlp(ln2(x_2))\n") in text
    assert problem.origin is not None and problem.origin.factory == factory
    prediction = predict(problem, None)
    vp = prediction.variants[0]
    result = verify_variant(path, problem, vp, problem.dtype, False, origin=True)
    bad = [(r.section, r.item, r.detail) for r in result.rows if not r.ok]
    assert not bad, bad
    graph = [r for r in result.rows if r.section == "graph"]
    assert len(graph) == 1 and graph[0].ok
    assert any(r.section == "origin" and r.item.startswith("grad ") for r in result.rows)
    # the user's own module, run by torch on the same inputs: the same loss and gradients
    loss, grads = _user_run(problem, problem.origin.file, factory)
    js = vp.to_json()
    _close(js["loss"], loss, "loss")
    for tname, g in grads.items():
        assert tname in js["grads"], tname
        _close(js["grads"][tname], g, f"grad {tname}")
    if case == "hooked":        # the hooks change what flows: the module without them gives other gradients
        _, bare = _user_run(problem, problem.origin.file, "make_bare")
        for tname in ("x", "fc1.weight", "fc1.bias"):
            assert not torch.allclose(bare[tname], grads[tname]), tname
    if case == "causal_lm":     # one .grad, listed under both names; PyTorch's named_parameters lists the first
        assert "head.weight" not in grads
        assert js["grads"]["head.weight"]["value"] == js["grads"]["emb.weight"]["value"]


def test_resnet18_with_side_files_imports_solves_and_verifies_against_the_users_module(tmp_path):
    """examples/resnet18.py's eighteen layers (make_narrow: 8 to 64 channels; the full-size model
    is benchmarks/import_big.py's) on the smallest input it takes, its big tensors in a side file:
    solved in float64, verified against the user's module (graph, loss, every .grad)."""
    from adjoint.torchside.importer import side_file_for, side_path
    file = tmp_path / "resnet18.py"
    file.write_text(open(os.path.join(EXAMPLES, "resnet18.py")).read())
    out = str(tmp_path / "narrow.yaml")
    side = side_file_for(out)
    text = import_file(f"{file}:make_narrow", ["x=1x3x1x1"], "sum(y)", out, side=side)
    assert side.tensors and 'value: {file: "narrow.safetensors", key: "layer4.1.conv2.weight"}' in text
    with open(side_path(out, side), "wb") as fh:
        fh.write(side.data())
    with open(out, "w") as fh:
        fh.write(text)
    problem = adjoint.load(out)
    vp = predict(problem, None, "float64").variants[0]
    result = verify_variant(out, problem, vp, "float64", False, origin=True)
    assert result.ok, [(r.item, r.detail) for r in result.rows if not r.ok]
    assert [r.ok for r in result.rows if r.section == "graph"] == [True]
    loss, grads = _user_run(problem, str(file), "make_narrow")
    js = vp.to_json()
    _close(js["loss"], loss, "loss")
    assert len(grads) == 1 + 62                      # x and the 62 parameters
    for tname, g in grads.items():
        _close(js["grads"][tname], g, f"grad {tname}")


def test_cli_import_writes_a_loadable_file_and_refuses_bad_input(tmp_path):
    out = tmp_path / "mlp.yaml"
    env = dict(os.environ, PYTHONPATH=ROOT)
    cmd = [sys.executable, "-m", "adjoint", "import", os.path.join(EXAMPLES, "mlp.py") + ":make_model",
           "--input", "x=2x4", "-o", str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr
    problem = adjoint.load(str(out))
    assert problem.origin.file == os.path.join(EXAMPLES, "mlp.py")
    assert problem.origin.inputs == (("x", (2, 4)),)
    # inputs from the init generator, requires_grad: true
    x = problem.variants[0].inputs[0]
    assert x.requires_grad and x.value.shape == (2, 4)
    assert x.value.items == init.values(0, "x", (2, 4))
    # a shape the model does not take: one line, exit 2, nothing written
    bad = tmp_path / "bad.yaml"
    cmd[-3:] = ["x=2x3", "-o", str(bad)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(tmp_path))
    assert done.returncode == 2 and not bad.exists()
    assert done.stderr.count("\n") == 1 and "mat1 and mat2 shapes cannot be multiplied" in done.stderr


# ----------------------------------------------------------------------------- what cannot be imported

BAD_MODELS = """\
import torch
from torch import nn


class UsesCopysign(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)

    def forward(self, x):
        return torch.copysign(self.fc(x), x)


class HasLSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.RReLU()

    def forward(self, x):
        return self.rnn(x)[0]


class Grandchild(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = UsesCopysign()

    def forward(self, x):
        return self.inner.fc(x)


def copysign():
    return UsesCopysign()


def lstm():
    return HasLSTM()


def grandchild():
    return Grandchild()


def broken():
    raise ValueError("no weights file")
"""


@pytest.mark.parametrize("factory, line, words", [
    ("copysign", 11, "calls torch.copysign, which adjoint does not model"),
    ("lstm", 20, "module 'rnn' is torch.nn.RReLU, which adjoint does not model"),
    ("grandchild", 29, "calls 'inner.fc' directly, which is not one of its own children"),
    ("broken", 45, "broken() raised ValueError: no weights file"),
])
def test_what_cannot_be_imported_is_one_line_naming_the_users_line(tmp_path, factory, line, words):
    file = _write(tmp_path, "bad_models.py", BAD_MODELS)
    out = tmp_path / "out.yaml"
    env = dict(os.environ, PYTHONPATH=ROOT)
    done = subprocess.run([sys.executable, "-m", "adjoint", "import", f"{file}:{factory}", "--input", "x=1x2",
                           "-o", str(out)], capture_output=True, text=True, env=env, cwd=str(tmp_path))
    assert done.returncode == 2, done.stderr
    assert done.stdout == "" and not out.exists()
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith(f"bad_models.py:{line}: "), done.stderr
    assert words in done.stderr


# ----------------------------------------------------------------------------- custom forwards

CUSTOM = """\
import torch
import torch.nn.functional as F
from torch import nn


class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.tensor([0.5, -0.25]))
        self.layers = nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2)])

    def forward(self, x, temperature=2.0):
        a = self.layers[0](x)
        b = torch.tanh(self.layers[1](x)) * self.scale
        return a * b + a / temperature


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate = Gate()
        self.out = nn.Linear(2, 1)

    def forward(self, x):
        h = self.gate(x)
        h = F.relu(h) + self.gate(h, temperature=4.0)
        return self.out(h)


def make():
    torch.manual_seed(1)
    return Net()


def branchy():
    torch.manual_seed(0)
    return Branchy()


class Branchy(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 2)

    def forward(self, x):
        h = self.fc(x)
        if h.sum() > 100:
            return h * 2
        return h - 1
"""


def test_custom_module_forward_is_written_like_the_users_code(tmp_path):
    file = _write(tmp_path, "custom.py", CUSTOM)
    path, text, problem = _imported(tmp_path, file, "make", ["x=2x2"])
    assert ("      inputs: [x, {temperature: 2.0}]\n"
            "      forward: |\n"
            "        a = layers[0](x)\n"
            "        return a * (torch.tanh(layers[1](x)) * scale) + a / temperature\n") in text
    assert ("  forward: |\n"
            "    h = gate(x)\n"
            "    return out(F.relu(h) + gate(h, temperature=4.0))\n") in text
    assert "scale: [0.5, -0.25]" in text
    vp = predict(problem, None).variants[0]
    result = verify_variant(path, problem, vp, problem.dtype, False)
    assert result.ok, [(r.item, r.detail) for r in result.rows if not r.ok]
    loss, grads = _user_run(problem, file, "make")
    js = vp.to_json()
    _close(js["loss"], loss, "loss")
    for tname, g in grads.items():
        _close(js["grads"][tname], g, tname)


def test_when_fx_cannot_trace_the_path_the_example_takes_is_recorded(tmp_path):
    file = _write(tmp_path, "custom.py", CUSTOM)
    path, text, problem = _imported(tmp_path, file, "branchy", ["x=1x2"])
    assert "forward: |\n    return fc(x).sub(1)\n" in text   # h - 1 as __torch_function__ sees it
    # the file says so: a branch (or an .item()) is this call's constant (found by an import trial)
    assert "# RECORDED FROM ONE CALL: torch.fx could not trace these forwards" in text
    assert "# 'model' (Branchy): " in text
    vp = predict(problem, None).variants[0]
    assert verify_variant(path, problem, vp, problem.dtype, False).ok


def test_verify_reports_a_file_whose_graph_differs_from_the_users_module(tmp_path):
    path, text, problem = _imported(tmp_path, os.path.join(EXAMPLES, "mlp.py"), "make_model", ["x=2x4"])
    assert "return fc2(drop(F.relu(norm(fc1(x)))))" in text
    with open(path, "w") as fh:
        fh.write(text.replace("F.relu(norm(fc1(x)))", "torch.tanh(norm(fc1(x)))"))
    problem = adjoint.load(path)
    result = verify_variant(path, problem, predict(problem, None).variants[0], problem.dtype, False, origin=True)
    graph = [r for r in result.rows if r.section == "graph"]
    assert not graph[0].ok
    assert "node #5 in creation order differs: the file's model makes TanhBackward0" in graph[0].detail
    assert "makes ReluBackward0" in graph[0].detail


# ----------------------------------------------------------------------------- hooks and exact values

HOOKED = """\
import torch
from torch import nn

SEEN = []


def log_grad(module, grad_input, grad_output):
    SEEN.append(("full_backward", grad_output[0].detach().clone()))


def log_output(module, args, output):
    SEEN.append(("forward", output.detach().clone()))


def make():
    torch.manual_seed(2)
    model = nn.Sequential(nn.Linear(3, 2), nn.Tanh(), nn.Linear(2, 2))
    model[2].register_forward_hook(log_output)
    model[0].register_full_backward_hook(log_grad)
    return model
"""


def test_registered_hooks_become_observe_only_hooks_named_in_comments(tmp_path):
    file = _write(tmp_path, "hooked.py", HOOKED)
    path, text, problem = _imported(tmp_path, file, "make", ["x=1x3"])
    assert '  - {module: "2", kind: forward}  # log_output (hooked.py:11)' in text.replace(str(tmp_path) + "/", "")
    assert '  - {module: "0", kind: full_backward}  # log_grad (hooked.py:7)' in text.replace(str(tmp_path) + "/", "")
    hooks = problem.variants[0].hooks
    assert [(h.target, h.kind, h.returns) for h in hooks] == [("2", "forward", None), ("0", "full_backward", None)]
    vp = predict(problem, None).variants[0]
    calls = vp.to_json()["hook_calls"]
    assert [(c["kind"], c["target"]) for c in calls] == [("forward", "2"), ("full_backward", "0")]
    # what the user's own hooks saw in torch, on the same inputs
    import importlib.util
    spec = importlib.util.spec_from_file_location("hooked_user", file)
    user = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(user)
    model = user.make()
    x = torch.tensor(_floats(problem.variants[0].inputs[0])).reshape(1, 3).requires_grad_(True)
    model(x).sum().backward()
    seen = dict(user.SEEN)
    _close(calls[0]["args"]["output"], seen["forward"], "forward hook output")
    _close(calls[1]["args"]["grad_output"][0], seen["full_backward"], "full backward hook grad_output")
    assert verify_variant(path, problem, vp, problem.dtype, False).ok


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_parameter_values_round_trip_bit_for_bit(tmp_path, dtype):
    torch.manual_seed(3)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4), torch.nn.Conv1d(1, 2, 2))
    with torch.no_grad():
        model[1].weight.uniform_(-2, 2)
        model[1].bias[0] = 1e-30   # tiny, still a normal float32: written out exactly
    model = model.to(dtype)
    text = adjoint.from_module_text(model, torch.zeros(1, 1, 3, dtype=dtype))
    problem = adjoint.loads(text)
    assert problem.dtype == ("float64" if dtype == torch.float64 else "float32")
    decls = {d.name: d for m in problem.model.walk() for d in m.params}
    params = dict(model.named_parameters())
    assert set(decls) == set(params)
    for name, p in params.items():
        exact = [Fraction(v) for v in p.detach().flatten().tolist()]
        assert list(decls[name].value.items) == exact, name
        back = torch.tensor(_floats(decls[name]), dtype=dtype).reshape(p.shape)
        assert torch.equal(back.view(torch.int32 if dtype == torch.float32 else torch.int64),
                           p.detach().view(torch.int32 if dtype == torch.float32 else torch.int64)), name


def test_from_module_returns_the_loaded_problem(tmp_path):
    torch.manual_seed(4)
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Sigmoid())
    x = torch.tensor([[0.5, -1.0]], requires_grad=True)
    problem = adjoint.from_module(model, x)
    assert isinstance(problem, adjoint.Problem) and problem.origin is None
    js = problem.solve().variants[0].to_json()
    xx = x.detach().clone().requires_grad_(True)
    model(xx).sum().backward()
    _close(js["grads"]["x"], xx.grad, "x")
    _close(js["grads"]["0.weight"], model[0].weight.grad, "0.weight")
    # an example input that does not require grad is written so: its .grad stays None and a full
    # backward hook on the first layer is handed (None,), with PyTorch's warning (found by a user trial)
    plain = torch.tensor([[0.5, -1.0]])
    observed = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Sigmoid())
    observed.load_state_dict(model.state_dict())
    model[0].register_full_backward_hook(lambda m, gi, go: None)
    js = adjoint.from_module(model, plain).solve().variants[0].to_json()
    handed = []
    observed[0].register_full_backward_hook(lambda m, gi, go: handed.append(gi))
    with pytest.warns(UserWarning, match="Full backward hook is firing when gradients are computed"):
        observed(plain).sum().backward()
    assert handed[-1] == (None,)
    assert js["hook_calls"][0]["args"]["grad_input"] == [None]
    assert "x" not in js["grads"] or js["grads"]["x"] is None
    with pytest.raises(ProblemError, match="floating-point, int64 or bool tensors as example inputs, not list"):
        adjoint.from_module(model, [1, 2])
    with pytest.raises(ProblemError, match="not torch.int32"):
        adjoint.from_module(model, torch.tensor([[1, 2]], dtype=torch.int32))


UNUSED = """\
import torch
from torch import nn


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(2, 2)
        self.b = nn.Linear(2, 2)

    def forward(self, x):
        probe = self.b(x)
        return self.a(x)


def make():
    torch.manual_seed(0)
    m = M()
    m.b.register_forward_hook(lambda mod, args, out: None)
    return m
"""


def test_a_childs_call_whose_value_is_unused_is_kept_and_its_hooks_fire(tmp_path):
    file = _write(tmp_path, "unused.py", UNUSED)
    path, text, problem = _imported(tmp_path, file, "make", ["x=1x2"])
    assert "  forward: |\n    probe = b(x)\n    return a(x)\n" in text
    vp = predict(problem, None).variants[0]
    assert [(c["kind"], c["target"]) for c in vp.to_json()["hook_calls"]] == [("forward", "b")]
    assert verify_variant(path, problem, vp, problem.dtype, False).ok


def test_running_the_model_to_import_it_leaves_its_batchnorm_statistics_as_the_factory_made_them(tmp_path):
    """Found by a user scenario: a custom module whose forward is recorded (an in-place residual)
    calls its training-mode BatchNorm children for real; the file used to get the running
    statistics of that extra call (running_var 0.9, num_batches_tracked 1) instead of the
    model's own (1 and 0, as torch's constructor makes them)."""
    file = _write(tmp_path, "block.py", """
        import torch
        import torch.nn as nn

        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(1, 1, 3, padding=1, bias=False)
                self.bn = nn.BatchNorm2d(1)
                self.relu = nn.ReLU(inplace=True)
            def forward(self, x):
                out = self.bn(self.conv(x))
                out += x
                return self.relu(out)

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.block = Block()
            def forward(self, x):
                return self.block(x)

        def make_model():
            torch.manual_seed(0)
            return Net()
        """)
    path, text, problem = _imported(tmp_path, file, "make_model", ["x=1x1x3x3"])
    assert "num_batches_tracked" not in text and "running_var" not in text, text   # the defaults, left out
    result = verify_variant(path, problem, predict(problem, None).variants[0], problem.dtype, False, origin=True)
    assert all(r.ok for r in result.rows), [(r.section, r.item, r.detail) for r in result.rows if not r.ok]
