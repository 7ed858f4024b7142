"""``adjoint import`` checks the file it made against the user's module before writing it: the
same autograd graph, and in a torch run of each the same loss, hook calls and ``.grad``
(adjoint.torchside.importer.selfcheck). Each module of tests/data/import_unfaithful/models.py
does something the translation used to leave out -- a custom Function's backward, a buffer
updated in place, a no_grad block in a helper function, a branch on requires_grad, Python state,
an optional argument, a forward replaced on an instance -- and import wrote a file that solve
answered and verify passed, while verify --origin reported the difference (found by a user
trial). Each is now refused, nothing written; the plain module still imports."""

from __future__ import annotations

import os

import pytest
from conftest import import_and_verify, line_of, require_torch

torch = require_torch()

from adjoint.format.errors import ProblemError  # noqa: E402
from adjoint.torchside.importer import import_file  # noqa: E402

MODELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "import_unfaithful", "models.py")

CASES = ["helper_no_grad", "grad_mode_branch", "py_counter",
         "monkey_patched"]


@pytest.mark.parametrize("case", CASES)
def test_a_file_that_is_not_the_users_model_is_refused(case, tmp_path):
    out = tmp_path / "p.yaml"
    with pytest.raises(ProblemError, match="adjoint import wrote a model that is not yours, so nothing was written"):
        import_file(f"{MODELS}:make_{case}", ["x=2x3"], "sum(y)", str(out))
    assert not out.exists()


def test_an_in_place_buffer_update_fx_would_run_while_tracing_is_recorded(tmp_path):
    """self.step.add_(1) has no traced argument: fx ran it while tracing and left it out, so this
    file used to be refused by the check; fx now traces a buffer read (the forward is written in
    place, as the user's code runs it)."""
    text = import_file(f"{MODELS}:make_buffer_counter", ["x=2x3"], "sum(y)", str(tmp_path / "p.yaml"))
    assert "step.add_(1)\n    return fc(x) * step" in text, text


def test_a_custom_function_is_named_with_the_way_to_write_it(tmp_path):
    """A custom autograd.Function's backward is the user's Python: the check names the Function and
    the format's function: block (it said only that the autograd graphs differ)."""
    out = tmp_path / "p.yaml"
    with pytest.raises(ProblemError) as err:
        import_file(f"{MODELS}:make_custom_function", ["x=2x3"], "sum(y)", str(out))
    assert "runs the custom torch.autograd.Function" in str(err.value) and "function: block" in str(err.value)
    assert not out.exists()


def test_the_plain_module_imports(tmp_path):
    text = import_file(f"{MODELS}:make_plain", ["x=2x3"], "sum(y)", str(tmp_path / "p.yaml"))
    assert "tanh" in text


def test_a_childs_optional_argument_left_out_is_traced_as_none(tmp_path):
    """The child's forward(x, bias=None) called as inner(x): the import's check refused it once
    (the file's forward added None); fx now traces the argument as None (concrete_args)."""
    text = import_file(f"{MODELS}:make_optional_argument", ["x=2x3"], "sum(y)", str(tmp_path / "p.yaml"))
    assert "{bias: null}" in text and "+ bias" not in text


def test_functional_dropout_in_training_is_refused_at_the_users_line(tmp_path):
    """F.dropout in training mode was written, and only solve refused it (naming a line of the
    file never written); it is refused at the user's line, with what imports (an nn.Dropout child,
    whose keep-mask the file holds, or eval mode)."""
    out = tmp_path / "p.yaml"
    with pytest.raises(ProblemError) as err:
        import_file(f"{MODELS}:make_functional_dropout", ["x=2x3"], "sum(y)", str(out))
    assert str(err.value).startswith(f"{os.path.relpath(MODELS)}:{line_of(MODELS, 'F.dropout(x, 0.5')}: the model "
                                     "(FunctionalDropout): calls F.dropout in training mode"), str(err.value)
    assert "nn.Dropout" in str(err.value) and "eval mode" in str(err.value)
    assert not out.exists()


MORE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "import_more", "models.py")


@pytest.mark.parametrize("case, loss, specs", [
    ("shape", "sum(y)", ["x=2x2"]), ("root_default", "sum(y)", ["x=2x2"]),
    ("dict_output", 'sum(y["logits"]) + sum(y["aux"] ** 2)', ["x=2x2"]),
    ("invert", "sum(y)", ["x=2x3", "m=2x3:bool"]), ("position_slice", "sum(y)", ["x=2x3x2"]),
    ("gru_without_bias", "sum(y[0])", ["x=1x2x2"]), ("positions", "sum(y)", ["x=2x3x4"]),
    ("recorded_invert", "sum(y)", ["x=3x3"]), ("optional_mask", "sum(y[0])", ["x=2x3"]),
    ("bn_training", "sum(y)", ["x=4x3"]), ("max_values", "sum(y)", ["x=2x3"])])
def test_what_the_format_holds_imports_and_verifies_against_the_module(case, loss, specs, tmp_path):
    """A torch.Size assigned to a name, a root argument left at its default, a dict output, ~ of a
    bool input, a slice bounded by a size: the file was refused by its own loader, import refused
    it, or import crashed (exit 3). A BatchNorm in training mode: verify --origin held the module's
    rows to a fixed tolerance, where the file's own torch run has PyTorch's rounding bounds, and
    failed on float32's rounding of an exact 0 (found by an import trial)."""
    import shutil
    shutil.copy(MORE, tmp_path / "models.py")   # verify --origin runs a module beside the file only
    import_and_verify(f"{tmp_path / 'models.py'}:make_{case}", specs, loss, str(tmp_path / "p.yaml"), origin=True)


@pytest.mark.parametrize("case, specs, message", [
    ("child_named_model", ["x=2x3"], r"models.py:\d+: the model \(ChildNamedModel\) has a child named 'model', and a "
                                     r"problem file's 'model' names the root module \(its path in hooks\); rename the "
                                     r"attribute \(self.net = ... instead of self.model = ...\) to import it"),
    ("argument_named_y", ["x=2x3", "y=2x3"], r"models.py:\d+: the model's forward \(ArgumentNamedY\) takes an argument "
                                             r"named 'y', and a problem file's 'y' names the model's output"),
])
def test_names_the_format_reserves_are_said_so(case, specs, message, tmp_path):
    """A root child named model (a wrapper's self.model) or a forward argument named y: import said
    it made a file its own loader refuses, 'a bug of adjoint import', pointing into a deleted file.
    Found by an import trial."""
    out = tmp_path / "p.yaml"
    with pytest.raises(ProblemError, match=message):
        import_file(f"{MORE}:make_{case}", specs, "sum(y)", str(out))
    assert not out.exists()


def test_a_method_decorated_with_no_grad_is_refused_at_the_decorator(tmp_path):
    """A VQ-VAE's @torch.no_grad() nearest(): fx traces through the method and forgets the
    decorator, so the file's forward would build nodes the module never makes (the check does
    not see it: argmin cuts the gradient); refused at the decorator's line."""
    path = tmp_path / "vq.py"
    path.write_text("import torch\nfrom torch import nn\n\n\nclass VQ(nn.Module):\n    def __init__(self):\n"
                    "        super().__init__()\n        self.emb = nn.Embedding(4, 2)\n        self.enc = nn.Linear(3, 2)\n\n"
                    "    @torch.no_grad()\n    def nearest(self, z):\n"
                    "        return (z.unsqueeze(1) - self.emb.weight.unsqueeze(0)).pow(2).sum(-1).argmin(-1)\n\n"
                    "    def forward(self, x):\n        z = self.enc(x)\n        return z + (self.emb(self.nearest(z)) - z).detach()\n\n\n"
                    "def make():\n    torch.manual_seed(0)\n    return VQ()\n")
    with pytest.raises(ProblemError) as err:
        import_file(f"{path}:make", ["x=2x3"], "sum(y)", str(tmp_path / "p.yaml"))
    assert str(err.value).startswith(f"{path}:11:") and "@torch.no_grad()" in str(err.value)


def test_a_child_called_with_and_without_its_optional_argument_is_refused_at_its_forward(tmp_path):
    """self.a(x, m) + self.a(x) with forward(self, x, mask=None): one forward is written per
    module, traced for its first call, so the second call would take the first one's branch. It
    was refused by the file's own solve, naming masked_fill and None; now it is refused saying
    why, at its forward. A keyword left at a default that is not None is no different from one
    given."""
    path = tmp_path / "attn.py"
    path.write_text("import torch\nfrom torch import nn\n\n\nclass Attn(nn.Module):\n    def __init__(self):\n"
                    "        super().__init__()\n        self.q = nn.Linear(3, 3)\n\n"
                    "    def forward(self, x, mask=None):\n        s = self.q(x)\n        if mask is not None:\n"
                    "            s = s.masked_fill(mask, -1e9)\n        return s.softmax(-1)\n\n\n"
                    "class Root(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                    "        self.a = Attn()\n\n    def forward(self, x, m):\n        return self.a(x, m) + self.a(x)\n\n\n"
                    "def make():\n    torch.manual_seed(0)\n    return Root()\n")
    with pytest.raises(ProblemError) as err:
        import_file(f"{path}:make", ["x=2x3", "m=2x3:bool"], "sum(y)", str(tmp_path / "p.yaml"))
    assert str(err.value).startswith(f"{path}:10:") and "called with an argument in one call and without it" \
        in str(err.value), str(err.value)
