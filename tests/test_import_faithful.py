"""``adjoint import`` holds to the user's own code: hooks translated (or refused at their line),
nothing of the forward dropped silently, and ``verify --origin`` proving it against the user's
module with its real hooks.

Every expected value is real torch running the user's module as written here (its hooks
included), never adjoint's output; every refusal is checked for the user's ``file:line``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from conftest import import_to_file, line_of, require_torch, users_module_run

torch = require_torch()

import adjoint  # noqa: E402
from adjoint.format.errors import ProblemError  # noqa: E402
from adjoint.torchside.importer import import_file  # noqa: E402
from adjoint.torchside.importer.userfile import call_factory  # noqa: E402
from adjoint.torchside.verify import predict, verify_variant  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MODELS = '''\
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

SCALE = 0.5
CALLS = []


class Two(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 3)
        self.b = nn.Linear(3, 1)

    def forward(self, x):
        return self.b(torch.tanh(self.a(x)))


def halve(module, grad_input, grad_output):
    CALLS.append(grad_output[0].norm().item())
    g = grad_input[0] * SCALE
    return (g,)


def make_halving():
    torch.manual_seed(0)
    m = Two().double()
    m.a.register_full_backward_hook(halve)
    return m


def make_clamped():
    torch.manual_seed(1)
    m = Two().double()
    limit = 0.05
    m.a.weight.register_hook(lambda g: g.clamp(-limit, limit))
    m.b.register_full_backward_pre_hook(lambda mod, go: (2 * go[0],))
    return m


def choose(module, grad_input, grad_output):
    out = []
    for g in grad_input:
        out.append(g * 0.25)
    return tuple(out)


def make_untranslatable():
    torch.manual_seed(0)
    m = Two().double()
    m.a.register_full_backward_hook(choose)
    return m


def in_place_body(module, grad_input, grad_output):
    grad_input[0].mul_(2)


def make_in_place_body():
    m = Two().double()
    m.a.register_full_backward_hook(in_place_body)
    return m


def not_modelled_in_place(module, grad_input, grad_output):
    grad_input[0].fill_diagonal_(0)


def make_not_modelled_in_place():
    m = Two().double()
    m.a.register_full_backward_hook(not_modelled_in_place)
    return m


class NoGrad(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 3)

    def forward(self, x):
        with torch.no_grad():
            h = self.a(x)
        return h * x


class SetsRequiresGrad(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 3)

    def forward(self, x):
        h = self.a(x).detach()
        h.requires_grad = True
        return h * x


class Checkpointed(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 3)

    def forward(self, x):
        return checkpoint(lambda t: self.a(t) * 2, x, use_reentrant=False)


class HookInForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 3)

    def forward(self, x):
        h = self.a(x)
        h.register_hook(lambda g: g * 2)
        return h


class Residual(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 3)
        self.b = nn.Linear(3, 3)

    def forward(self, x):
        h = self.a(x)
        h += x
        h = h * 3
        h *= 2
        return self.b(h) * (h > 0)


def make_residual():
    torch.manual_seed(2)
    return Residual().double()


class SavedThenWritten(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 3)

    def forward(self, x):
        h = torch.tanh(self.a(x))
        h *= 2
        return h


def make_saved_then_written():
    return SavedThenWritten().double()


class Constant(nn.Module):
    def forward(self, x):
        return x + torch.ones(3)


class Decorated(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 3)

    @torch.no_grad()
    def forward(self, x):
        return self.a(x)


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Linear(3, 3, bias=False)
        self.head = nn.Linear(3, 3, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, x):
        return self.head(self.emb(x))


def make_repeated():
    torch.manual_seed(5)
    lin = nn.Linear(3, 3)
    return nn.Sequential(lin, nn.Tanh(), lin)


def make_repeated_activation():
    torch.manual_seed(3)
    act = nn.Tanh()
    return nn.Sequential(nn.Linear(3, 3), act, nn.Linear(3, 3), act).double()


def make_lstm():
    return nn.RReLU()


def make_exiting():
    raise SystemExit(0)


class Stored(nn.Module):
    def __init__(self, how):
        super().__init__()
        self.a = nn.Linear(3, 3)
        self.b = nn.Linear(3, 1)
        self.how = how

    def forward(self, x):
        h = self.a(x)
        if self.how == "zero":
            h[:, 0] = 0.0
        elif self.how == "row":
            h[0] = x[1] * 2
        else:
            h[:, 0] += 1
        return self.b(h)


def make_stored_zero():
    torch.manual_seed(7)
    return Stored("zero").double()


def make_stored_row():
    torch.manual_seed(7)
    return Stored("row").double()


def make_stored_add():
    torch.manual_seed(7)
    return Stored("add").double()


def doubled(module, grad_output):
    return (grad_output[0] * 2,)


def plus_one(module, grad_output):
    return (grad_output[0] + 1,)


def tripled(module, args, out):
    return out * 3


def minus_one(module, args, out):
    return out - 1


class ReadsData(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 3)

    def forward(self, x):
        h = self.a(x)
        return h + h.data * 0


class WritesItsInput(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 3)

    def forward(self, x):
        x[:, 0] = 0.0
        return self.a(x)


def make_writes_its_input():
    torch.manual_seed(0)
    return WritesItsInput().double()


def make_dropping():
    torch.manual_seed(2)
    return nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.5), nn.Linear(4, 1)).double()


def make_prepended():
    torch.manual_seed(0)
    m = Two().double()
    m.b.register_full_backward_pre_hook(doubled)
    m.b.register_full_backward_pre_hook(plus_one, prepend=True)
    m.a.register_forward_hook(tripled)
    m.a.register_forward_hook(minus_one, prepend=True)
    return m
'''


@pytest.fixture
def models(tmp_path):
    path = tmp_path / "models.py"
    path.write_text(MODELS)
    return str(path)


def _import(models: str, factory: str, specs=("x=2x3",), hooks_mode="translate", notes=None):
    return import_to_file(models, factory, specs, hooks_mode, notes)


def _refused(models: str, factory: str, specs=("x=2x3",)) -> str:
    with pytest.raises(ProblemError) as err:
        import_file(f"{models}:{factory}", list(specs), "sum(y)", None)
    return str(err.value)


def _assert_same(problem, models, factory):
    vp = predict(problem, None, "float64").variants[0]
    js = vp.to_json()
    loss, grads = users_module_run(problem, models, factory)
    assert abs(js["loss"]["value"] - loss.item()) <= 1e-12
    for name, g in grads.items():
        want = torch.tensor(js["grads"][name]["value"], dtype=torch.float64)
        assert torch.allclose(want, g, rtol=1e-10, atol=1e-12), (name, want, g)
    return vp


# ----------------------------------------------------------------------------- hooks translated

def test_a_gradient_changing_def_hook_is_translated_and_its_effect_predicted(models):
    path, text, problem = _import(models, "make_halving")
    # the list append observes; g = grad_input[0] * SCALE with SCALE captured by value
    assert ('{module: a, kind: full_backward, does: "g = grad_input[0] * 0.5", returns: "(g,)"}'
            f"  # halve ({os.path.relpath(models) if not os.path.relpath(models).startswith('..') else models}:"
            f"{line_of(models, 'def halve')})") in text
    vp = _assert_same(problem, models, "make_halving")
    # the hook halves x's gradient: without it torch gives twice that
    model = call_factory(models, "make_halving").double()
    for h in list(model.a._backward_hooks):
        del model.a._backward_hooks[h]
    d = problem.variants[0].inputs[0]
    x = torch.tensor([float(v) for v in d.value.items], dtype=torch.float64).reshape(d.value.shape)
    x.requires_grad_(True)
    model(x).sum().backward()
    assert torch.allclose(2 * torch.tensor(vp.to_json()["grads"]["x"]["value"], dtype=torch.float64), x.grad)


def test_lambda_hooks_on_a_parameter_and_a_module_are_translated(models):
    path, text, problem = _import(models, "make_clamped")
    assert '{tensor: a.weight, returns: "grad.clamp(-0.05, 0.05)"}' in text
    assert '{module: b, kind: full_backward_pre, returns: "(2 * grad_output[0],)"}' in text
    vp = _assert_same(problem, models, "make_clamped")
    calls = vp.to_json()["hook_calls"]
    assert [(c["kind"], c["target"]) for c in calls] == [("full_backward_pre", "b"), ("hook", "a.weight")]


def test_a_hook_that_cannot_be_translated_is_refused_at_its_line(models):
    msg = _refused(models, "make_untranslatable")
    assert msg.startswith(f"{models}:{line_of(models, 'for g in grad_input:')}: the full_backward hook on "
                          "'a' (choose) cannot be translated into the problem format: a 'for' loop")
    assert "--hooks observe" in msg and "\n" not in msg
    msg = _refused(models, "make_not_modelled_in_place")
    assert msg.startswith(f"{models}:{line_of(models, 'grad_input[0].fill_diagonal_(0)')}:")
    assert "the in-place call .fill_diagonal_(), which adjoint does not model" in msg


def test_hooks_observe_writes_it_observe_only_and_verify_origin_shows_the_effect_left_out(models):
    notes: list = []
    path, text, problem = _import(models, "make_untranslatable", hooks_mode="observe", notes=notes)
    assert len(notes) == 1 and "imported observe-only: its effect on the gradients is left out" in notes[0]
    assert "# LEFT OUT (--hooks observe)" in text and "OBSERVE-ONLY, its effect is left out" in text
    vp = predict(problem, None, "float64").variants[0]
    result = verify_variant(path, problem, vp, "float64", False, origin=True)
    bad = [r for r in result.rows if not r.ok]
    assert bad and all(r.section == "origin" for r in bad)
    assert any(r.item.startswith("grad x") for r in bad)


def test_verify_origin_compares_the_users_hooks_calls_and_grads(models):
    path, text, problem = _import(models, "make_halving")
    vp = predict(problem, None, "float64").variants[0]
    result = verify_variant(path, problem, vp, "float64", False, origin=True)
    assert result.ok, [(r.item, r.detail) for r in result.rows if not r.ok]
    origin = [r.item for r in result.rows if r.section == "origin"]
    assert "#1 full_backward@a hook 0 'full_backward@a' (your module)" in origin
    assert "grad a.weight (your module)" in origin
    # an edited returns: is caught against the user's hook
    with open(path) as fh:
        edited = fh.read().replace('returns: "(g,)"', 'returns: "(2 * g,)"')
    with open(path, "w") as fh:
        fh.write(edited)
    problem = adjoint.load(path)
    vp = predict(problem, None, "float64").variants[0]
    result = verify_variant(path, problem, vp, "float64", False, origin=True)
    assert not result.ok
    assert {r.item for r in result.rows if not r.ok} >= {"grad x (your module)"}


# ----------------------------------------------------------------------------- the forward kept

def test_an_in_place_write_of_a_saved_tensor_is_predicted_as_torchs_error(models):
    path, text, problem = _import(models, "make_saved_then_written")
    assert "h.mul_(2)" in text
    error = predict(problem, None, "float64").variants[0].to_json()["error"]
    model = call_factory(models, "make_saved_then_written")
    with pytest.raises(RuntimeError) as raised:
        model(torch.ones(2, 3, dtype=torch.float64, requires_grad=True)).sum().backward()
    assert error["type"] == "RuntimeError" and error["during"] == "backward"
    assert error["message"].split("[")[0] == str(raised.value).split("[")[0]


def test_in_place_residuals_and_comparisons_import_in_place(models):
    path, text, problem = _import(models, "make_residual")
    # h += x is Tensor.__iadd__, i.e. add_ (recorded from a real call: fx would write h + x)
    assert "    h = a(x)\n    h.add_(x)\n    h_2 = h.mul(3)\n    h_2.mul_(2)\n" in text
    assert "h_2.gt(0)" in text
    _assert_same(problem, models, "make_residual")
    vp = predict(problem, None, "float64").variants[0]
    assert verify_variant(path, problem, vp, "float64", False, origin=True).ok


@pytest.mark.parametrize("factory, line", [
    ("make_stored_zero", "    h[:, 0] = 0.0\n"),
    ("make_stored_row", "    h[0] = x[1].mul(2)\n"),
    # h[:, 0] += 1 is Python's three steps: the view, its add_, and the store of it (a CopySlices)
    ("make_stored_add", "    getitem = h[:, 0]\n    getitem.add_(1)\n    h[:, 0] = getitem\n"),
])
def test_a_store_into_a_tensor_is_written_not_dropped(models, factory, line):
    """``h[...] = v`` returns nothing, so it left no trace in the recorded ops and the import
    wrote a different model that verify passed; it is written as the user wrote it, and the
    prediction equals the user's module (and its graph, under verify --origin)."""
    path, text, problem = _import(models, factory)
    assert line in text
    _assert_same(problem, models, factory)
    vp = predict(problem, None, "float64").variants[0]
    result = verify_variant(path, problem, vp, "float64", False, origin=True)
    assert result.ok, [(r.item, r.detail) for r in result.rows if not r.ok]


def test_verify_origin_draws_the_files_dropout_mask(models):
    """Import writes a training-mode Dropout's keep-mask as data; verify --origin runs the user's
    module with that mask too (it drew its own before, and every gradient differed)."""
    path, text, problem = _import(models, "make_dropping")
    assert "mask:" in text
    vp = predict(problem, None, "float64").variants[0]
    result = verify_variant(path, problem, vp, "float64", False, origin=True)
    assert result.ok, [(r.item, r.detail) for r in result.rows if not r.ok]
    assert any(r.section == "origin" and r.item.startswith("grad ") for r in result.rows)


def test_verify_origin_of_a_forward_that_raises_as_the_users_does(models):
    """x[:, 0] = 0.0 on an input that requires grad: both forwards raise PyTorch's error on a view
    of a leaf written in place, so there is no graph to compare and no difference (it was a
    failing graph row of a faithful file)."""
    path, text, problem = _import(models, "make_writes_its_input")
    assert "x[:, 0] = 0.0" in text
    vp = predict(problem, None, "float64").variants[0]
    assert vp.error is not None and "a view of a leaf Variable that requires grad" in vp.error.message
    result = verify_variant(path, problem, vp, "float64", False, origin=True)
    assert result.ok, [(r.item, r.detail) for r in result.rows if not r.ok]
    graph = next(r for r in result.rows if r.section == "graph")
    assert graph.detail.startswith("both forwards raise RuntimeError")


def test_prepend_is_written_on_the_hook_registered_with_it(models):
    """plus_one was registered second with prepend=True: PyTorch runs it first, so b's pre-hooks
    give (g + 1) * 2, not g * 2 + 1; the forward hooks give (a(x) - 1) * 3."""
    path, text, problem = _import(models, "make_prepended")
    lines = [ln.split("#")[0].strip() for ln in text.splitlines() if "kind: full_backward_pre" in ln
             or "kind: forward" in ln]
    assert lines == ['- {module: b, kind: full_backward_pre, returns: "(grad_output[0] * 2,)"}',
                     '- {module: b, kind: full_backward_pre, prepend: true, returns: "(grad_output[0] + 1,)"}',
                     '- {module: a, kind: forward, returns: "output * 3"}',
                     '- {module: a, kind: forward, prepend: true, returns: "output - 1"}'][:len(lines)]
    assert len(lines) == 4
    _assert_same(problem, models, "make_prepended")


@pytest.mark.parametrize("cls, line, words", [
    ("NoGrad", "with torch.no_grad():", "the block 'with torch.no_grad():'"),
    ("SetsRequiresGrad", "h.requires_grad = True", "sets .requires_grad inside the forward"),
    ("Checkpointed", "return checkpoint(", "checkpoint(...) (torch.utils.checkpoint) is handed a lambda, which "
                                           "cannot be imported yet"),
    ("HookInForward", "h.register_hook(", "registers a tensor hook inside the forward"),
    ("Constant", "torch.ones(3)", "uses a tensor the trace saw as a constant"),
    ("Decorated", "@torch.no_grad()", "the decorator @torch.no_grad() on its forward cannot be imported"),
    ("ReadsData", "h.data * 0", "reads the tensor attribute .data, which adjoint does not model"),
])
def test_what_fx_would_drop_from_a_forward_is_refused_at_its_line(tmp_path, cls, line, words):
    path = tmp_path / "models.py"
    path.write_text(MODELS + f"\n\ndef make():\n    return {cls}()\n")
    msg = _refused(str(path), "make")
    assert msg.startswith(f"{path}:{line_of(str(path), line)}: the model ({cls}): "), msg
    assert words in msg
    assert "\n" not in msg


def test_tied_weights_and_a_module_listed_twice_import_tied_and_equal_the_users_module(models):
    with open(models, "a") as fh:
        fh.write(textwrap.dedent("""

            def make_tied():
                torch.manual_seed(4)
                m = Tied().double()
                m.emb.weight.register_hook(lambda g: g * 0.5)
                m.head.register_full_backward_hook(lambda mod, gi, go: (gi[0] * 3,))
                return m


            class Block(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.lin = nn.Linear(3, 3)
                    self.scale = nn.Parameter(torch.tensor([0.5, -1.0, 2.0]))

                def forward(self, x):
                    return torch.tanh(self.lin(x)) * self.scale + x


            def make_block_twice():
                torch.manual_seed(6)
                blk = Block()
                m = nn.Sequential(blk, nn.ReLU(), blk).double()
                m[0].lin.weight.register_hook(lambda g: g * 2)
                return m


            def make_repeated_global():
                m = make_repeated()
                torch.nn.modules.module.register_module_full_backward_hook(lambda mod, gi, go: None)
                return m


            def make_repeated_hooked():
                lin = nn.Linear(3, 3)
                lin.register_forward_hook(lambda mod, i, o: o * 2)
                return nn.Sequential(lin, nn.Tanh(), lin)
            """))
    # head.weight = emb.weight: one Parameter, written once and tied under its second name
    path, text, problem = _import(models, "make_tied")
    assert "weight: {tied: emb.weight}" in text and text.count("tied:") == 1
    model = call_factory(models, "make_tied")
    assert [n for n, _ in model.named_parameters()] == ["emb.weight"]     # PyTorch de-duplicates: one name
    vp = _assert_same(problem, models, "make_tied")                       # loss, x.grad, emb.weight's one .grad
    js = vp.to_json()
    assert js["grads"]["head.weight"]["value"] == js["grads"]["emb.weight"]["value"]   # the same .grad, two names
    result = verify_variant(path, problem, vp, "float64", False, origin=True)
    assert result.ok, [(r.item, r.detail) for r in result.rows if not r.ok]
    origin = [r.item for r in result.rows if r.section == "origin"]
    assert "grad emb.weight (your module)" in origin and "grad head.weight (your module)" not in origin
    assert sum("(your module)" in i and i.startswith("#") for i in origin) == 2    # both hooks' calls compared
    assert any(r.section == "graph" and r.ok for r in result.rows)
    # Sequential(lin, Tanh(), lin): named_modules lists lin once; written once per name, its parameters tied
    path, text, problem = _import(models, "make_repeated")
    assert "weight: {tied: 0.weight}" in text and "bias: {tied: 0.bias}" in text
    vp = _assert_same(problem, models, "make_repeated")
    result = verify_variant(path, problem, vp, "float64", False, origin=True)
    assert result.ok, [(r.item, r.detail) for r in result.rows if not r.ok]
    # a custom block listed twice, with a tensor hook on its (one) weight: the hook runs once, on the summed gradient
    path, text, problem = _import(models, "make_block_twice")
    assert "scale: {tied: 0.scale}" in text and "weight: {tied: 0.lin.weight}" in text
    vp = _assert_same(problem, models, "make_block_twice")
    result = verify_variant(path, problem, vp, "float64", False, origin=True)
    assert result.ok, [(r.item, r.detail) for r in result.rows if not r.ok]
    assert len(vp.to_json()["hook_calls"]) == 1
    # a global hook sees the one module on both calls, named by its first name: verify --origin agrees
    before = dict(torch.nn.modules.module._global_backward_hooks)
    path, text, problem = _import(models, "make_repeated_global")
    assert "{global: full_backward}" in text
    vp = predict(problem, None, "float64").variants[0]
    assert [c["target"] for c in vp.to_json()["hook_calls"]] == ["2", "1", "0", "model"]
    result = verify_variant(path, problem, vp, "float64", False, origin=True)
    assert result.ok, [(r.item, r.detail) for r in result.rows if not r.ok]
    assert dict(torch.nn.modules.module._global_backward_hooks) == before
    # with a module hook it would need registering twice: refused, at the factory
    msg = _refused(models, "make_repeated_hooked")
    assert msg.startswith(f"{models}:{line_of(models, 'def make_repeated_hooked():')}: module '2' is the same "
                          "Linear as '0' (one module under two names, with hooks)")


def test_a_stateless_module_listed_twice_is_written_for_both_calls(models):
    path, text, problem = _import(models, "make_repeated_activation")
    assert text.count("type: Tanh") == 2
    _assert_same(problem, models, "make_repeated_activation")


def test_a_torch_nn_root_and_a_factory_exiting_are_located_in_the_users_file(models):
    msg = _refused(models, "make_lstm")
    assert msg.startswith(f"{models}:{line_of(models, 'def make_lstm')}: module 'model' is torch.nn.RReLU")
    msg = _refused(models, "make_exiting")
    assert msg.startswith(f"{models}:{line_of(models, 'raise SystemExit(0)')}: make_exiting() raised SystemExit")


# ----------------------------------------------------------------------------- verify runs no code unasked

def test_verify_runs_the_origin_only_with_the_flag_and_only_beside_the_file(tmp_path, models):
    path, text, problem = _import(models, "make_halving")
    marker = tmp_path / "ran"
    with open(models, "a") as fh:                 # module-level code: runs whenever the file is imported
        fh.write(f"\nopen({str(marker)!r}, 'w').close()\n")
    marker.unlink(missing_ok=True)
    env = dict(os.environ, PYTHONPATH=ROOT)
    cmd = [sys.executable, "-m", "adjoint", "verify", path, "--float64"]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not marker.exists() and "verify --origin would run" in done.stdout
    done = subprocess.run(cmd + ["--origin"], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert marker.exists() and "(your module)" in done.stdout
    # a file whose origin lies outside its directory: one line, exit 2, nothing run
    marker.unlink()
    elsewhere = tmp_path / "sub"
    elsewhere.mkdir()
    moved = elsewhere / "problem.yaml"
    moved.write_text(text.replace('file: "models.py"', 'file: "../models.py"'))
    done = subprocess.run([sys.executable, "-m", "adjoint", "verify", str(moved), "--origin"],
                          capture_output=True, text=True, env=env)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "lies outside the problem file's directory" in done.stderr and not marker.exists()


# ----------------------------------------------------------------------------- token models, side files, the loss

EXAMPLES = os.path.join(ROOT, "examples")


def test_a_causal_lm_with_token_ids_and_a_target_imports_and_equals_the_users_module(tmp_path):
    lm = tmp_path / "causal_lm.py"
    lm.write_text(open(os.path.join(EXAMPLES, "causal_lm.py")).read())
    out = str(tmp_path / "lm.yaml")
    text = import_file(f"{lm}:make_untied", ["ids=1x3:int64:0-5"], "cross_entropy(y[0], t[0])", out,
                       target_specs=["t=1x3:int64:0-5"])
    with open(out, "w") as fh:
        fh.write(text)
    # the ids and the target as the header says they were drawn
    ids = torch.randint(0, 5, (1, 3), generator=torch.Generator().manual_seed(0))
    t = torch.randint(0, 5, (1, 3), generator=torch.Generator().manual_seed(1))
    assert f"ids: {{value: {ids.tolist()}, dtype: int64}}" in text and f"t: {{value: {t.tolist()}, dtype: int64}}" in text
    assert "# input ids: torch.randint(0, 5, (1, 3), generator=torch.Generator().manual_seed(0))" in text
    assert "mask: {value: [[1, 0, 0], [1, 1, 0], [1, 1, 1]], dtype: bool}" in text
    assert '{module: v, kind: full_backward_pre, returns: "(grad_output[0].clamp(-0.25, 0.25),)"}' in text
    problem = adjoint.load(out)
    vp = predict(problem, None, "float64").variants[0]
    js = vp.to_json()
    # the user's module, its clipping hook included, in float64
    model = call_factory(str(lm), "make_untied").double()
    loss = torch.nn.functional.cross_entropy(model(ids)[0], t[0])
    loss.backward()
    assert abs(js["loss"]["value"] - loss.item()) <= 1e-12
    for name, p in model.named_parameters():
        want = torch.tensor(js["grads"][name]["value"], dtype=torch.float64)
        assert torch.allclose(want, p.grad, rtol=1e-10, atol=1e-12), name
    result = verify_variant(out, problem, vp, "float64", False, origin=True)
    assert result.ok, [(r.item, r.detail) for r in result.rows if not r.ok]
    # the tied model: head.weight written {tied: emb.weight}; one .grad, as the user's module has
    text = import_file(f"{lm}:make_model", ["ids=1x3:int64:0-5"], "cross_entropy(y[0], t[0])", out,
                       target_specs=["t=1x3:int64:0-5"])
    with open(out, "w") as fh:
        fh.write(text)
    assert "weight: {tied: emb.weight}" in text
    problem = adjoint.load(out)
    vp = predict(problem, None, "float64").variants[0]
    js = vp.to_json()
    model = call_factory(str(lm), "make_model").double()
    assert model.head.weight is model.emb.weight
    loss = torch.nn.functional.cross_entropy(model(ids)[0], t[0])
    loss.backward()
    assert abs(js["loss"]["value"] - loss.item()) <= 1e-12
    for name in ("emb.weight", "head.weight"):
        want = torch.tensor(js["grads"][name]["value"], dtype=torch.float64)
        assert torch.allclose(want, model.emb.weight.grad, rtol=1e-10, atol=1e-12), name
    result = verify_variant(out, problem, vp, "float64", False, origin=True)
    assert result.ok, [(r.item, r.detail) for r in result.rows if not r.ok]
    # from Python: an Embedding-first model takes int64 example inputs
    problem = adjoint.from_module(call_factory(str(lm), "make_untied"), ids)
    assert problem.variants[0].inputs[0].dtype == "int64"


@pytest.mark.parametrize("spec, words", [
    ("ids=2x8:int64", "give an int64 input its range of values"),
    ("ids=2x8:int32:0-5", "unknown dtype 'int32'"),
    ("ids=2x8:int64:5-5", "needs LO < HI"),
    ("x=2x8:bool:0-5", "a range LO-HI is for int64 and float inputs"),
])
def test_bad_input_specs_are_one_line(models, spec, words):
    assert words in _refused(models, "make_halving", (spec,))


def test_the_loss_is_checked_at_import_before_anything_is_written(models):
    for loss, words in (("sum(z)", "--loss:1:5: unknown name 'z' in the loss"),
                        ("foo(y)", "--loss:1:1: unknown function 'foo' in the loss"),
                        ("cross_entropy(y, t)", "unknown name 't' in the loss")):
        with pytest.raises(ProblemError) as err:
            import_file(f"{models}:make_halving", ["x=2x3"], loss, None)
        assert str(err.value).startswith(words.split(" unknown")[0] if words.startswith("--") else ""), str(err.value)
        assert words in str(err.value)


def test_big_tensors_go_to_a_side_file_that_reads_back_exactly(tmp_path):
    model = tmp_path / "wide.py"
    model.write_text(textwrap.dedent("""\
        import torch
        from torch import nn

        def make():
            torch.manual_seed(0)
            return nn.Sequential(nn.Linear(20, 20), nn.Tanh(), nn.Linear(20, 1)).double()
        """))
    out = tmp_path / "wide.yaml"
    env = dict(os.environ, PYTHONPATH=ROOT)
    done = subprocess.run([sys.executable, "-m", "adjoint", "import", f"{model}:make", "--input", "x=2x20",
                           "-o", str(out)], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert f"wrote {tmp_path / 'wide.safetensors'} (1 tensors)" in done.stdout
    text = out.read_text()
    # 400 elements; version 1: nn.Linear initialises its weight in place (kaiming_uniform_)
    assert 'weight: {value: {file: "wide.safetensors", key: "0.weight"}, version: 1}' in text
    assert "bias: {value: [" in text                                                   # 20: inline
    problem = adjoint.load(str(out))
    js = predict(problem, None, "float64").variants[0].to_json()
    user = call_factory(str(model), "make")
    assert js["values"]["0.weight"]["value"] == user[0].weight.tolist()             # bit for bit
    # to standard output there is no directory for the side file: one line
    done = subprocess.run([sys.executable, "-m", "adjoint", "import", f"{model}:make", "--input", "x=2x20"],
                          capture_output=True, text=True, env=env)
    assert done.returncode == 2 and "give -o PROBLEM.yaml" in done.stderr and done.stderr.count("\n") == 1


def test_a_hook_on_a_submodule_of_a_built_in_is_written_and_never_fires_as_in_pytorch(tmp_path):
    """attn.out_proj of a MultiheadAttention is a hook target of the format; PyTorch hands its
    weight to F.multi_head_attention_forward and never calls it, so the hook never fires (it was
    refused at import: 'cannot be written yet')."""
    path = tmp_path / "mha.py"
    path.write_text(textwrap.dedent("""\
        import torch
        from torch import nn

        CALLS = []

        class Wrap(nn.Module):
            def __init__(self):
                super().__init__()
                self.attn = nn.MultiheadAttention(2, 1, batch_first=True)

            def forward(self, x):
                return self.attn(x, x, x, need_weights=False)[0]

        def make():
            torch.manual_seed(0)
            m = Wrap().double()
            m.attn.out_proj.register_forward_hook(lambda mod, i, o: CALLS.append(o))
            return m
        """))
    model = call_factory(str(path), "make")
    model(torch.ones(1, 2, 2, dtype=torch.float64)).sum().backward()
    assert sys.modules[model.__module__].CALLS == []      # PyTorch never calls out_proj
    out, text, problem = _import(str(path), "make", ("x=1x2x2",))
    assert "{module: attn.out_proj, kind: forward}" in text, text
    vp = predict(problem, None, "float64").variants[0]
    assert vp.to_json()["hook_calls"] == []
    assert verify_variant(out, problem, vp, "float64", False, origin=True).ok


def test_verify_origin_of_a_factory_that_exits_is_a_failing_row_not_a_silent_exit(tmp_path, models):
    path, text, problem = _import(models, "make_halving")
    with open(path, "w") as fh:
        fh.write(text.replace("factory: make_halving", "factory: make_exiting"))
    env = dict(os.environ, PYTHONPATH=ROOT)
    done = subprocess.run([sys.executable, "-m", "adjoint", "verify", path, "--float64", "--origin"],
                          capture_output=True, text=True, env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "make_exiting() raised SystemExit" in done.stdout


def test_a_local_named_like_a_handed_argument_is_renamed(tmp_path):
    path = tmp_path / "clash.py"
    path.write_text(textwrap.dedent("""\
        import torch
        from torch import nn

        def triple(g):
            grad = 3
            return g * grad

        def make():
            torch.manual_seed(0)
            m = nn.Linear(2, 1).double()
            m.weight.register_hook(triple)
            return m
        """))
    out, text, problem = _import(str(path), "make", ("x=1x2",))
    assert '{tensor: weight, does: "grad_ = 3", returns: "grad * grad_"}' in text
    js = predict(problem, None, "float64").variants[0].to_json()
    model = call_factory(str(path), "make")
    d = problem.variants[0].inputs[0]
    x = torch.tensor([float(v) for v in d.value.items], dtype=torch.float64).reshape(d.value.shape)
    model(x).sum().backward()
    assert torch.allclose(torch.tensor(js["grads"]["weight"]["value"], dtype=torch.float64), model.weight.grad)


def test_cli_hooks_observe_and_target_options(tmp_path, models):
    env = dict(os.environ, PYTHONPATH=ROOT)
    out = tmp_path / "u.yaml"
    base = [sys.executable, "-m", "adjoint", "import", f"{models}:make_untranslatable", "--input", "x=2x3",
            "-o", str(out)]
    done = subprocess.run(base, capture_output=True, text=True, env=env)
    assert done.returncode == 2 and not out.exists() and done.stderr.count("\n") == 1
    done = subprocess.run(base + ["--hooks", "observe", "--target", "t=2x1", "--loss", "sum((y - t) ** 2)"],
                          capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert "is imported observe-only: its effect on the gradients is left out" in done.stderr
    problem = adjoint.load(str(out))
    assert [t.name for t in problem.targets] == ["t"] and not problem.targets[0].requires_grad
    assert "--hooks observe" in out.read_text().splitlines()[0]


def test_partial_hooks_and_default_arguments_are_captured_by_value(tmp_path):
    path = tmp_path / "partials.py"
    path.write_text(textwrap.dedent("""\
        from functools import partial

        import torch
        from torch import nn

        SEEN = {}

        def save(name, module, grad_input, grad_output):
            SEEN[name] = grad_output[0].detach().clone()

        def scale(module, grad_input, grad_output, factor=1.0):
            return (grad_input[0] * factor,)

        def boost(grad, by=3):
            return grad * by

        def make():
            torch.manual_seed(0)
            m = nn.Sequential(nn.Linear(2, 2), nn.Tanh(), nn.Linear(2, 1)).double()
            m[0].register_full_backward_hook(partial(save, "first"))
            m[2].register_full_backward_hook(partial(scale, factor=0.25))
            m[0].bias.register_hook(boost)
            return m
        """))
    out, text, problem = _import(str(path), "make", ("x=2x2",))
    assert "- {module: 0, kind: full_backward}  # save (" in text.replace('"0"', "0")
    assert 'kind: full_backward, returns: "(grad_input[0] * 0.25,)"}' in text
    assert '{tensor: 0.bias, returns: "grad * 3"}' in text.replace('"0.bias"', "0.bias")
    js = predict(problem, None, "float64").variants[0].to_json()
    model = call_factory(str(path), "make")
    d = problem.variants[0].inputs[0]
    x = torch.tensor([float(v) for v in d.value.items], dtype=torch.float64).reshape(d.value.shape)
    x.requires_grad_(True)
    model(x).sum().backward()
    for name, p in model.named_parameters():
        assert torch.allclose(torch.tensor(js["grads"][name]["value"], dtype=torch.float64), p.grad), name
    assert torch.allclose(torch.tensor(js["grads"]["x"]["value"], dtype=torch.float64), x.grad)


def test_forward_pre_global_and_post_accumulate_hooks_translate_and_verify_against_the_module(tmp_path):
    path = tmp_path / "fw.py"
    path.write_text(textwrap.dedent("""\
        import torch
        from torch import nn

        class Two(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Linear(3, 3)
                self.b = nn.Linear(3, 1)

            def forward(self, x):
                return self.b(torch.relu(self.a(x)))

        def make():
            torch.manual_seed(0)
            m = Two().double()
            m.a.register_forward_hook(lambda mod, inp, out: out * 2)
            m.b.register_forward_pre_hook(lambda mod, args: (args[0] - 0.5,))
            m.a.register_full_backward_pre_hook(lambda mod, go: (go[0] + 1,))
            m.register_full_backward_hook(lambda mod, gi, go: None)
            torch.nn.modules.module.register_module_full_backward_hook(lambda mod, gi, go: None)
            m.b.bias.register_post_accumulate_grad_hook(lambda t: None)
            return m
        """))
    before = dict(torch.nn.modules.module._global_backward_hooks)
    mode_before = torch.nn.modules.module._global_is_full_backward_hook
    out, text, problem = _import(str(path), "make", ("x=2x3",))
    assert dict(torch.nn.modules.module._global_backward_hooks) == before     # the factory's global hook went
    assert '{module: a, kind: forward, returns: "output * 2"}' in text
    assert '{module: b, kind: forward_pre, returns: "(input[0] - 0.5,)"}' in text
    assert "{global: full_backward}" in text and "{tensor: b.bias, kind: post_accumulate_grad}" in text
    vp = predict(problem, None, "float64").variants[0]
    result = verify_variant(out, problem, vp, "float64", False, origin=True)
    assert result.ok, [(r.item, r.detail) for r in result.rows if not r.ok]
    assert dict(torch.nn.modules.module._global_backward_hooks) == before
    # the user's module, by hand: forward hook doubles a's output, pre hook shifts b's input
    model = call_factory(str(path), "make")
    d = problem.variants[0].inputs[0]
    x = torch.tensor([float(v) for v in d.value.items], dtype=torch.float64).reshape(d.value.shape)
    model(x).sum().backward()
    torch.nn.modules.module._global_backward_hooks.clear()
    torch.nn.modules.module._global_backward_hooks.update(before)
    torch.nn.modules.module._global_is_full_backward_hook = mode_before   # as registering left it: restored too
    js = vp.to_json()
    for name, p in model.named_parameters():
        assert torch.allclose(torch.tensor(js["grads"][name]["value"], dtype=torch.float64), p.grad), name


# ----------------------------------------------------------------------------- hook bodies that write in place

INPLACE_HOOKS = '''\
import torch
from torch import nn

LIMIT = 0.05


class Two(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 3)
        self.b = nn.Linear(3, 2)

    def forward(self, x):
        return self.b(torch.tanh(self.a(x))) * 3


def clip_(g):
    g.clamp_(-LIMIT, LIMIT)


def scale(module, grad_input, grad_output):
    grad_input[0].mul_(0.1)


def double(g):
    g *= 2


def zero_first(module, grad_output):
    g = grad_output[0]
    g[0] = 0


def sgd(p):
    with torch.no_grad():
        p.sub_(0.5 * p.grad)
    p.grad = None


def halve_grad(p):
    p.grad.mul_(0.5)


def make(hooks=True):
    torch.manual_seed(0)
    m = Two().double()
    if hooks:
        m.a.weight.register_hook(clip_)
        m.a.register_full_backward_hook(scale)
        m.b.bias.register_hook(double)
        m.b.register_full_backward_pre_hook(zero_first)
        m.b.weight.register_post_accumulate_grad_hook(halve_grad)
        m.a.bias.register_post_accumulate_grad_hook(sgd)
    return m


def make_bare():
    return make(False)


def boost(module, inp, out):
    out.mul_(2)


def shift(module, args):
    args[0].add_(1)


def make_forward_writes():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.Linear(3, 1)).double()
    m[0].register_forward_hook(boost)
    m[2].register_forward_pre_hook(shift)     # writes tanh's output, which TanhBackward0 saved
    return m
'''


def test_hook_bodies_that_write_in_place_are_translated_and_equal_the_users_module(tmp_path):
    path = tmp_path / "inplace.py"
    path.write_text(INPLACE_HOOKS)
    out, text, problem = _import(str(path), "make")
    for line in ('{tensor: a.weight, does: "grad.clamp_(-0.05, 0.05)"}',
                 '{module: a, kind: full_backward, does: "grad_input[0].mul_(0.1)"}',
                 '{tensor: b.bias, does: "grad *= 2"}',
                 '{module: b, kind: full_backward_pre, does: ["g = grad_output[0]", "g[0] = 0"]}',
                 '{tensor: b.weight, kind: post_accumulate_grad, does: "tensor.grad.mul_(0.5)"}',
                 '{tensor: a.bias, kind: post_accumulate_grad, does: ["with torch.no_grad():\\n    '
                 'tensor.sub_(0.5 * tensor.grad)", "tensor.grad = None"]}'):
        assert line in text, line
    vp = predict(problem, None, "float64").variants[0]
    js = vp.to_json()
    # the user's module with its own hooks, by hand
    model = call_factory(str(path), "make")
    d = problem.variants[0].inputs[0]
    x = torch.tensor([float(v) for v in d.value.items], dtype=torch.float64).reshape(d.value.shape)
    x.requires_grad_(True)
    bias_before = model.a.bias.detach().clone()
    loss = model(x).sum()
    loss.backward()
    assert abs(js["loss"]["value"] - loss.item()) <= 1e-12
    assert model.a.bias.grad is None and js["grads"]["a.bias"] is None                 # sgd cleared it
    for name, g in (("x", x.grad), ("a.weight", model.a.weight.grad), ("b.weight", model.b.weight.grad),
                    ("b.bias", model.b.bias.grad)):
        assert torch.allclose(torch.tensor(js["grads"][name]["value"], dtype=torch.float64), g,
                              rtol=1e-10, atol=1e-12), name
    assert torch.allclose(torch.tensor(js["leaf_values"]["a.bias"]["value"], dtype=torch.float64),
                          model.a.bias.detach(), rtol=1e-10, atol=1e-12)
    assert not torch.equal(model.a.bias.detach(), bias_before)                        # the step happened
    # the writes change what flows: the same module without its hooks gives other gradients
    bare = call_factory(str(path), "make_bare")
    bare(x.detach().requires_grad_(True)).sum().backward()
    assert not torch.allclose(bare.a.weight.grad, model.a.weight.grad)
    assert not torch.allclose(bare.b.weight.grad, model.b.weight.grad)
    # verify --origin: every hook call (what it was handed, what it returned) and .grad of the user's module
    result = verify_variant(out, problem, vp, "float64", False, origin=True)
    assert result.ok, [(r.item, r.detail) for r in result.rows if not r.ok]
    calls = [r for r in result.rows if r.section == "origin" and r.item.startswith("#")]
    assert len(calls) == 6
    # forward hooks that write in place: the pre hook overwrites what TanhBackward0 saved, PyTorch's error
    out, text, problem = _import(str(path), "make_forward_writes")
    assert '{module: "0", kind: forward, does: "output.mul_(2)"}' in text
    assert '{module: "2", kind: forward_pre, does: "input[0].add_(1)"}' in text
    vp = predict(problem, None, "float64").variants[0]
    error = vp.to_json()["error"]
    model = call_factory(str(path), "make_forward_writes")
    with pytest.raises(RuntimeError) as raised:
        model(x.detach().requires_grad_(True)).sum().backward()
    assert error["type"] == "RuntimeError" and error["during"] == "backward"
    assert error["message"] == str(raised.value)
    result = verify_variant(out, problem, vp, "float64", False, origin=True)
    assert result.ok, [(r.item, r.detail) for r in result.rows if not r.ok]


def test_checkpoint_and_requires_grad_writes_outside_the_forwards_source_are_refused_at_their_line(tmp_path):
    path = tmp_path / "helpers.py"
    path.write_text(textwrap.dedent("""\
        import torch
        import torch.utils.checkpoint as cp
        from torch import nn


        def run_block(block, x):
            return cp.checkpoint(block, x, use_reentrant=False)


        def fresh(h):
            h = h.detach()
            h.requires_grad = True
            return h


        class Ck(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Linear(3, 3)

            def forward(self, x):
                return run_block(self.a, x) * 2


        class Seq(nn.Module):
            def __init__(self):
                super().__init__()
                self.s = nn.Sequential(nn.Linear(3, 3), nn.Tanh())

            def forward(self, x):
                return self.s[0](x) + cp.checkpoint_sequential(self.s, 1, x, use_reentrant=False)


        class Fresh(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Linear(3, 3)

            def forward(self, x):
                return fresh(self.a(x)) * x


        def make_ck():
            return Ck()


        def make_seq():
            return Seq()


        def make_fresh():
            return Fresh()
        """))
    where = str(path)
    msg = _refused(where, "make_ck")
    assert msg.startswith(f"{where}:{line_of(where, 'return cp.checkpoint(')}: the model calls checkpoint(...) "
                          "(torch.utils.checkpoint) in its forward, which cannot be imported yet"), msg
    msg = _refused(where, "make_seq")      # the source check: checkpoint_sequential named in the forward itself
    assert msg.startswith(f"{where}:{line_of(where, 'cp.checkpoint_sequential(')}: the model (Seq): "
                          "checkpoint_sequential(...) (torch.utils.checkpoint) cannot be imported yet"), msg
    msg = _refused(where, "make_fresh")
    assert msg.startswith(f"{where}:{line_of(where, 'h.requires_grad = True')}: the model sets .requires_grad on "
                          "a tensor in its forward, which torch.fx does not record"), msg
    assert all("\n" not in m for m in (msg,))


def test_a_forward_hook_registering_a_tensor_hook_is_refused_at_the_hooks_line(tmp_path):
    """Grad-CAM's pattern: a forward hook keeps the activation and calls out.register_hook(...).
    The model has no forward of its own (nn.Sequential); the refusal names the hook's line and
    the hook, not "its forward" (before: no location, "in its forward")."""
    path = tmp_path / "gradcam.py"
    path.write_text(textwrap.dedent("""\
        import torch
        from torch import nn

        store = {}


        def keep(module, inp, out):
            store["act"] = out.detach()
            out.register_hook(lambda g: store.__setitem__("grad", g))


        def make_model():
            m = nn.Sequential(nn.Linear(3, 2), nn.ReLU(), nn.Linear(2, 1))
            m[0].register_forward_hook(keep)
            return m
        """))
    where = str(path)
    msg = _refused(where, "make_model")
    assert msg.startswith(f"{where}:{line_of(where, 'out.register_hook(')}: the model calls .register_hook() on a "
                          "tensor in its forward hook 'keep' on '0', which the importer cannot translate"), msg


# ----------------------------------------------------------------------------- eager in-place writes

EMA_MODEL = '''
import torch
from torch import nn


class EMA(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)
        self.register_buffer("avg", torch.tensor([0.5, -1.0, 2.0]))

    def forward(self, x):
        h = self.fc(x)
        self.avg.mul_(0.5).add_(h.detach().mean(0), alpha=0.5)   # mul_'s arguments: no traced value
        return h - self.avg


def make():
    torch.manual_seed(0)
    return EMA().double()
'''


def test_an_in_place_write_fx_runs_while_tracing_is_kept(tmp_path):
    """torch.fx runs ``self.avg.mul_(0.5)`` (no traced argument) while it traces, so the graph
    lacks it, and the trace itself halved the buffer: import records a real call instead, and
    leaves the buffer as the factory made it. Two forward/backward steps of the file agree with
    the module run twice in torch."""
    path = tmp_path / "ema.py"
    path.write_text(EMA_MODEL)
    out, text, problem = _import(str(path), "make")
    assert "avg.mul_(0.5)" in text and "avg: [0.5, -1, 2]" in text, text
    with open(out, "a") as fh:
        fh.write("steps: [forward, backward, forward, backward]\n")
    js = adjoint.load(out).solve().to_json()["variants"]["default"]
    model = call_factory(str(path), "make")
    d = problem.variants[0].inputs[0]
    x = torch.tensor([float(v) for v in d.value.items], dtype=torch.float64).reshape(d.value.shape)
    for _ in range(2):
        loss = model(x).sum()
        loss.backward()
    assert abs(js["loss"]["value"] - loss.item()) <= 1e-12
    assert torch.allclose(torch.tensor(js["values"]["avg"]["value"], dtype=torch.float64), model.avg, atol=1e-12)
    assert torch.allclose(torch.tensor(js["grads"]["fc.weight"]["value"], dtype=torch.float64), model.fc.weight.grad,
                          atol=1e-12)


def test_a_factory_that_does_not_seed_imports_and_verifies_with_the_files_weights(tmp_path):
    """A factory without torch.manual_seed draws new weights at each call: the import's check and
    verify --origin give the module the file's values, so both compare its forward and hooks (the
    check used to refuse such a factory as 'not yours')."""
    path = tmp_path / "plain.py"
    path.write_text("import torch\nfrom torch import nn\n\n\ndef make():\n"
                    "    return nn.Sequential(nn.Linear(3, 3), nn.Tanh()).double()\n")
    out, text, problem = _import(str(path), "make")
    vp = predict(problem, None, "float64").variants[0]
    assert verify_variant(out, problem, vp, "float64", False, origin=True).ok


def test_a_sequential_subclass_and_a_sibling_file(tmp_path):
    """torchvision's Conv2dNormActivation pattern (an nn.Sequential subclass whose __init__ only
    fills it) is a Sequential; the model's file imports a sibling file, as python FILE.py finds
    it. The import was refused ('0' is not a valid module name; a ModuleNotFoundError)."""
    (tmp_path / "blocks.py").write_text(
        "from torch import nn\n\n\nclass LinAct(nn.Sequential):\n    def __init__(self):\n"
        "        super().__init__(nn.Linear(3, 2), nn.ReLU6())\n")
    path = tmp_path / "model.py"
    path.write_text("import torch\nfrom torch import nn\nfrom blocks import LinAct\n\n\ndef make():\n"
                    "    torch.manual_seed(0)\n    return nn.Sequential(LinAct(), nn.Linear(2, 1)).double()\n")
    out, text, problem = _import(str(path), "make")
    assert text.count("type: Sequential") == 2, text
    vp = predict(problem, None, "float64").variants[0]
    assert verify_variant(out, problem, vp, "float64", False, origin=True).ok


def test_a_sequential_subclass_with_its_own_forward_is_refused_in_one_line(tmp_path):
    path = tmp_path / "model.py"
    path.write_text("from torch import nn\n\n\nclass Res(nn.Sequential):\n    def __init__(self):\n"
                    "        super().__init__(nn.Linear(3, 3))\n\n    def forward(self, x):\n"
                    "        return x + self[0](x)\n\n\ndef make():\n    return Res().double()\n")
    with pytest.raises(ProblemError, match="subclasses nn.Sequential with a forward of its own"):
        _import(str(path), "make")


def test_observing_lambdas_are_written_observe_only(tmp_path):
    """A lambda made of one call that returns None (list.append, print, dict.__setitem__) returns
    None: it observes, as the same body written as a def does. It was refused ('the Tensor method
    .append()'). A lambda returning what such a call returns otherwise stays refused."""
    path = tmp_path / "model.py"
    path.write_text("import torch\nfrom torch import nn\nfeats, acts = [], {}\n\n\ndef make():\n"
                    "    torch.manual_seed(0)\n    m = nn.Sequential(nn.Linear(3, 3), nn.Tanh()).double()\n"
                    "    m[0].register_forward_hook(lambda mod, i, o: feats.append(o.detach()))\n"
                    "    m[1].register_forward_hook(lambda mod, i, o: acts.__setitem__('t', o))\n"
                    "    m[1].register_full_backward_hook(lambda mod, gi, go: print(go[0].norm()))\n"
                    "    return m\n\n\ndef make_setdefault():\n    m = make()\n"
                    "    m[0].register_forward_hook(lambda mod, i, o: acts.setdefault('t', o))\n    return m\n")
    out, text, problem = _import(str(path), "make")
    assert text.count("kind: forward}") == 2 and "kind: full_backward}" in text and "returns" not in text, text
    vp = predict(problem, None, "float64").variants[0]
    assert verify_variant(out, problem, vp, "float64", False, origin=True).ok
    with pytest.raises(ProblemError, match="cannot be translated"):
        _import(str(path), "make_setdefault")


@pytest.mark.parametrize("body, written", [("g.add(1)", "grad.add(1)"), ("torch.add(g, 1)", "torch.add(grad, 1)")])
def test_a_lambda_returning_an_add_is_translated(body, written, tmp_path):
    """Tensor.add / torch.add return a tensor: the lambda returns it (the observer rule must not
    take them for set.add, as it once did)."""
    path = tmp_path / "model.py"
    path.write_text("import torch\nfrom torch import nn\n\n\ndef make():\n    torch.manual_seed(0)\n"
                    "    m = nn.Sequential(nn.Linear(3, 3), nn.Tanh()).double()\n"
                    f"    m[0].weight.register_hook(lambda g: {body})\n    return m\n")
    out, text, problem = _import(str(path), "make")
    assert f'returns: "{written}"' in text, text


@pytest.mark.parametrize("encoder", [
    "nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)",
    "nn.TransformerEncoder(layer, num_layers=2, norm=nn.LayerNorm(4, eps=1e-6))",
])
def test_a_transformer_encoder_imports_as_the_built_in(encoder, tmp_path):
    """nn.TransformerEncoder (format.md has the type) was refused as 'torch.nn.TransformerEncoder,
    which adjoint does not model'; it is written by its layer's and its norm's arguments."""
    path = tmp_path / "model.py"
    path.write_text("import torch\nfrom torch import nn\n\n\ndef make():\n    torch.manual_seed(0)\n"
                    "    layer = nn.TransformerEncoderLayer(4, 2, dim_feedforward=8, dropout=0.0, batch_first=True)\n"
                    f"    return {encoder}.double()\n")
    out, text, problem = _import(str(path), "make", specs=("x=1x3x4",))
    assert "type: TransformerEncoder" in text and "encoder_layer: {d_model: 4, nhead: 2" in text, text
    vp = predict(problem, None, "float64").variants[0]
    assert verify_variant(out, problem, vp, "float64", False, origin=True).ok


def test_a_float_input_in_a_range(tmp_path):
    """--input x=2x4:float:0-1: values in [0, 1) (a VAE's binary cross entropy against its input
    needs them), which were refused ('a range LO-HI is for int64 inputs')."""
    from adjoint.torchside.importer import inputs
    name, shape, dtype, span = inputs.parse_full("x=2x4:float:0-1")
    assert (name, shape, dtype, span) == ("x", (2, 4), "float", (0, 1))
    x = inputs.generated("x", shape, torch.float32, span)
    assert bool((x >= 0).all() and (x < 1).all()) and len(set(x.flatten().tolist())) > 1
    assert torch.equal(x * 256, (x * 256).round())   # k / 256: exact in float32
    with pytest.raises(ProblemError, match="a range LO-HI is for int64 and float inputs"):
        inputs.parse_full("m=2x4:bool:0-1")


def test_a_method_on_next_parameters_is_said_for_what_it_is(tmp_path):
    """next(self.parameters()).new_zeros(...) (an init_hidden helper): fx does not trace the tensor,
    and the refusal said 'calls TensorBase.new_zeros, which adjoint does not model' (it does)."""
    path = tmp_path / "model.py"
    path.write_text("import torch\nfrom torch import nn\n\n\nclass M(nn.Module):\n    def __init__(self):\n"
                    "        super().__init__()\n        self.gru = nn.GRU(2, 3, batch_first=True)\n\n"
                    "    def forward(self, x):\n        h0 = next(self.parameters()).new_zeros(1, x.size(0), 3)\n"
                    "        return self.gru(x, h0)[0]\n\n\ndef make():\n    return M()\n")
    with pytest.raises(ProblemError) as err:
        _import(str(path), "make", specs=("x=1x3x2",))
    assert str(err.value).startswith(f"{path}:11:") and "calls .new_zeros() on a tensor torch.fx did not trace" \
        in str(err.value), str(err.value)


def test_a_pruned_weight_is_refused_with_the_way_to_remove_it(tmp_path):
    """torch.nn.utils.prune leaves a Linear with weight_orig and weight_mask and a forward pre-hook
    computing weight; --hooks observe wrote the file anyway, which its loader refused ('a bug of
    adjoint import')."""
    path = tmp_path / "model.py"
    path.write_text("from torch import nn\nfrom torch.nn.utils import prune\n\n\ndef make():\n"
                    "    m = nn.Sequential(nn.Linear(3, 3), nn.Tanh())\n"
                    "    prune.l1_unstructured(m[0], 'weight', amount=0.5)\n    return m\n")
    for mode in ("translate", "observe"):
        with pytest.raises(ProblemError) as err:
            _import(str(path), "make", hooks_mode=mode)
        assert "holds weight_orig, weight_mask" in str(err.value) and "prune.remove" in str(err.value)


@pytest.mark.parametrize("wrap, says", [
    ("parametrizations.spectral_norm(parametrizations.orthogonal(nn.Linear(2, 2)))",
     "has a parametrization (torch.nn.utils.parametrize) on weight (_Orthogonal+_SpectralNorm)"),
    ("parametrizations.orthogonal(nn.Linear(2, 2))", "on weight (_Orthogonal)"),
    # the old hook-based weight_norm of 'weight' is modelled now (tests/test_weight_norm_legacy.py); of 'bias' not
    ("weight_norm(nn.Linear(2, 2), name='bias')", "has the older torch.nn.utils.weight_norm of 'bias'"),
])
def test_a_weight_norm_layer_is_refused_at_the_line_calling_it(tmp_path, wrap, says):
    """An orthogonal layer (alone, or under spectral_norm) and the old hook-based weight_norm: the parametrized ones were refused
    as 'torch.nn.ParametrizedLinear, which adjoint does not model' (no word of the parametrization or how to
    remove it), the old one with no line of the user's code. All now point at the forward's call and say how
    to make it plain (parametrizations.weight_norm and spectral_norm themselves are modelled:
    tests/test_weight_norm.py, tests/test_spectral_norm.py)."""
    import warnings
    from torch.nn.utils import parametrize
    path = tmp_path / "model.py"
    path.write_text("import torch\nfrom torch import nn\nfrom torch.nn.utils import parametrizations, weight_norm\n\n\n"
                    "class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                    f"        self.fc = {wrap}\n\n    def forward(self, x):\n"
                    "        return torch.relu(self.fc(x))\n\n\ndef make():\n    return M()\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ns: dict = {}
        exec(compile(path.read_text(), str(path), "exec"), ns)    # the test's own torch: what PyTorch makes of it
        m = ns["make"]()
        assert parametrize.is_parametrized(m.fc) or hasattr(m.fc, "bias_g")
        with pytest.raises(ProblemError) as err:
            _import(str(path), "make", specs=("x=1x2",))
    text = str(err.value)
    assert text.startswith(f"{path}:12: 'fc' (Linear) ") and says in text and "adjoint does not model" in text, text
    assert ("remove_weight_norm" if "older" in says else "remove_parametrizations(module, 'weight')") in text, text


def test_a_forward_writing_a_parameter_in_place_imports_its_start_value(tmp_path):
    """self.gain.detach().mul_(0.5) in the forward: import's own run of the module used to leave
    the parameter halved, so the file held the halved value (and verify --origin, loading the
    file's values, agreed with it); its runs now leave parameters as the factory made them."""
    path = tmp_path / "model.py"
    path.write_text("import torch\nfrom torch import nn\n\n\nclass M(nn.Module):\n    def __init__(self):\n"
                    "        super().__init__()\n        self.lin = nn.Linear(3, 2)\n"
                    "        self.gain = nn.Parameter(torch.tensor([1.0, 2.0]))\n\n    def forward(self, x):\n"
                    "        self.gain.detach().mul_(0.5)\n        return self.lin(x) * self.gain\n\n\n"
                    "def make():\n    torch.manual_seed(0)\n    return M().double()\n")
    out, text, problem = _import(str(path), "make")
    assert "gain: [1, 2]" in text, text
    vp = _assert_same(problem, str(path), "make")
    assert verify_variant(out, problem, vp, "float64", False, origin=True).ok
