"""``adjoint import`` of the calls a user's forward makes the way people write them: a child called
by keyword whose forward is recorded, a slice of a child ``nn.Sequential``, hooks on the
submodules of built-in Transformer layers, and what PyTorch does that a file cannot hold.

Every expected value is real torch running the user's module (its hooks included), never
adjoint's output; a refusal is checked for the user's ``file:line`` and, with torch, for the
reason it gives.
"""

from __future__ import annotations


import pytest
from conftest import import_to_file, line_of, require_torch, users_module_run

torch = require_torch()

from adjoint.format.errors import ProblemError  # noqa: E402
from adjoint.torchside.importer import import_file  # noqa: E402
from adjoint.torchside.importer.graphcheck import user_functions  # noqa: E402
from adjoint.torchside.importer.userfile import call_factory  # noqa: E402
from adjoint.torchside.verify import predict, verify_variant  # noqa: E402

MODELS = '''\
import torch
import torch.nn.functional as F
from torch import nn

LOG = []


class Blk(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)

    def forward(self, x, act=True):
        h = self.lin(x)
        if act:                       # a Python flag: fx cannot trace it, the forward is recorded
            h = torch.tanh(h)
        return h


class ByKeyword(nn.Module):
    def __init__(self):
        super().__init__()
        self.blk = Blk()

    def forward(self, x):
        return self.blk(x, act=False)


def make_keyword():
    torch.manual_seed(0)
    m = ByKeyword().double()
    m.blk.register_full_backward_hook(lambda mod, gi, go: LOG.append(gi))
    return m


class Masked(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)

    def forward(self, x, mask=None):
        h = self.lin(x)
        if mask is not None and bool(mask.any()):
            h = h.masked_fill(mask, 0.0)
        return h


class Attn(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(2, 6)

    def forward(self, x, mask=None):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


class PreNorm(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.norm = nn.LayerNorm(2)
        self.fn = fn

    def forward(self, x, **kwargs):
        return self.fn(self.norm(x), **kwargs)


class MaskNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.blk = Masked()
        self.a = PreNorm(Attn())

    def forward(self, x, m):
        return self.a(self.blk(x, mask=m), mask=m) + x


def make_mask():
    torch.manual_seed(0)
    return MaskNet().double()


class Sliced(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(2, 2), nn.Tanh(), nn.Linear(2, 2), nn.Tanh())
        self.head = nn.Linear(2, 1)

    def forward(self, x):
        return self.head(self.features[:2](x)) + self.features[2:](x).sum() + self.features[0](x).sum()


def make_sliced():
    torch.manual_seed(0)
    m = Sliced().double()
    m.features[0].register_full_backward_hook(lambda mod, gi, go: (2 * gi[0],))
    return m


class SlicedRecorded(Sliced):
    def forward(self, x):
        h = self.features[:2](x)
        if h.sum() > 100:             # fx cannot trace it: recorded, the slice's items as calls
            h = h * 2
        return self.head(h)


def make_sliced_recorded():
    torch.manual_seed(0)
    return SlicedRecorded().double()


class Enc(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.TransformerEncoderLayer(2, 1, 2, dropout=0.0, activation='gelu', batch_first=True,
                                              norm_first=True)
        self.head = nn.Linear(2, 1)

    def forward(self, x):
        return self.head(self.enc(x))


def make_layer_hooks():
    torch.manual_seed(0)
    m = Enc().double()
    m.enc.self_attn.register_full_backward_hook(lambda mod, gi, go: LOG.append(gi))
    m.enc.linear1.register_full_backward_hook(lambda mod, gi, go: (gi[0] * 0.5,))
    m.enc.norm2.register_forward_hook(lambda mod, args, out: out * 2)
    m.enc.self_attn.out_proj.register_full_backward_hook(lambda mod, gi, go: LOG.append(gi))
    return m


def make_stack_hooks():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(2, 1, 2, dropout=0.0, batch_first=True)
    m = nn.Sequential(nn.TransformerEncoder(layer, 2, enable_nested_tensor=False), nn.Linear(2, 1)).double()
    m[0].layers[1].linear2.register_full_backward_hook(lambda mod, gi, go: (gi[0] * 3,))
    return m


class AttnDrop(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(2, 1, batch_first=True, dropout=0.5)

    def forward(self, x):
        return self.attn(x, x, x)[0]


def make_attn_dropout():
    torch.manual_seed(0)
    return AttnDrop().double()


def make_layer_dropout():
    torch.manual_seed(0)
    return nn.TransformerEncoderLayer(2, 1, 4, batch_first=True, dropout=0.5).double()


def make_gru_dropout():
    torch.manual_seed(0)
    return nn.GRU(2, 2, num_layers=2, dropout=0.5).double()


class Two(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(2, 2)
        self.b = nn.Linear(2, 1)

    def forward(self, x):
        return self.b(torch.tanh(self.a(x)))


def row_sum(grad):
    return grad.sum(0)


def make_bad_hook():
    torch.manual_seed(0)
    m = Two().double()
    m.a.weight.register_hook(row_sum)
    return m
'''


@pytest.fixture
def models(tmp_path):
    path = tmp_path / "models.py"
    path.write_text(MODELS)
    return str(path)




def _import(models: str, factory: str, specs=("x=2x2",)):
    return import_to_file(models, factory, specs)


def _assert_users_module(out, problem, models, factory):
    """The prediction is the user's module's loss and gradients, and verify --origin (the user's
    hooks' calls, run by torch) passes."""
    vp = predict(problem, None, "float64").variants[0]
    js = vp.to_json()
    loss, grads = users_module_run(problem, models, factory)
    assert abs(js["loss"]["value"] - loss.item()) <= 1e-12
    for name, g in grads.items():
        if g is None:       # a parameter the forward never reaches: no .grad in PyTorch
            assert js["grads"].get(name) is None, name
            continue
        assert torch.allclose(torch.tensor(js["grads"][name]["value"], dtype=torch.float64), g, rtol=1e-10,
                              atol=1e-12), name
    assert verify_variant(out, problem, vp, "float64", False, origin=True).ok
    return js


# ----------------------------------------------------------------------------- keyword calls

def test_a_recorded_child_called_by_keyword_takes_the_keyword(models):
    """self.blk(x, act=False) with Blk's forward recorded (fx cannot trace `if act:`): the written
    forward had only x, so the file's call raised TypeError (unexpected keyword 'act') and the import
    was refused; with a hook on blk the refusal blamed PyTorch's own BackwardHookFunction."""
    out, text, problem = _import(models, "make_keyword")
    assert "inputs: [x, {act: true}]" in text and "return blk(x, act=False)" in text, text
    js = _assert_users_module(out, problem, models, "make_keyword")
    assert [c["target"] for c in js["hook_calls"]] == ["blk"]


def test_keywords_through_kwargs_and_a_mask_keyword_are_inputs_of_the_recorded_forward(models):
    """PreNorm's forward(self, x, **kwargs) hands mask= on, and Masked branches on its mask: both
    recorded, each keyword the call passes an input of the written forward (they were refused with
    fx's complaint, 'Proxy object cannot be iterated' and 'control flow')."""
    out, text, problem = _import(models, "make_mask", ("x=1x2x2", "m=2x2:bool"))
    assert "return fn(norm(x), mask=mask)" in text and "return a(blk(x, mask=m), mask=m) + x" in text, text
    _assert_users_module(out, problem, models, "make_mask")


def test_pytorchs_own_backward_hook_function_is_not_a_users_custom_function():
    lin = torch.nn.Linear(2, 2)
    lin.register_full_backward_hook(lambda mod, gi, go: None)
    out = lin(torch.ones(1, 2, requires_grad=True))
    assert type(out.grad_fn).__name__ == "BackwardHookFunctionBackward"   # PyTorch's Function around the call

    class Mine(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g

    assert user_functions(out) == []
    assert user_functions(Mine.apply(out)) == ["Mine"]


# ----------------------------------------------------------------------------- Sequential slices

def test_a_slice_of_a_child_sequential_is_written_as_its_items_calls(models):
    """self.features[:2](x) was refused ('module is not installed as a submodule'): PyTorch's slice
    is a new Sequential of the same modules, calling each in order, so their hooks fire. An item
    called by its index, self.features[0](x), was refused as a grandchild's call."""
    out, text, problem = _import(models, "make_sliced")
    assert "return head(features[1](features[0](x))) + features[3](features[2](x)).sum() + features[0](x).sum()" \
        in text, text
    js = _assert_users_module(out, problem, models, "make_sliced")
    assert [c["target"] for c in js["hook_calls"]] == ["features.0", "features.0"]


def test_a_slice_in_a_recorded_forward_is_written_as_its_items_calls(models):
    out, text, problem = _import(models, "make_sliced_recorded")
    assert "features[1](features[0](x))" in text and "RECORDED FROM ONE CALL" in text, text
    _assert_users_module(out, problem, models, "make_sliced_recorded")


# ----------------------------------------------------------------------------- hooks inside built-ins

@pytest.mark.parametrize("factory, targets", [
    ("make_layer_hooks", ["enc.self_attn", "enc.linear1", "enc.norm2", "enc.self_attn.out_proj"]),
    ("make_stack_hooks", ["0.layers.1.linear2"]),
])
def test_hooks_on_the_submodules_of_transformer_layers_are_written_and_equal_the_users_module(models, factory,
                                                                                              targets):
    """They were refused ('cannot be written yet'), though the format has these hook targets."""
    out, text, problem = _import(models, factory, ("x=1x2x2",))
    assert [h.target for h in problem.variants[0].hooks] == targets, text
    _assert_users_module(out, problem, models, factory)


# ----------------------------------------------------------------------------- what a file cannot hold

@pytest.mark.parametrize("factory, line, words, call", [
    ("make_attn_dropout", "return self.attn(x, x, x)[0]", "'attn' (MultiheadAttention)", "x, x, x"),
    ("make_layer_dropout", "def make_layer_dropout", "'model' (TransformerEncoderLayer)", "x"),
    ("make_gru_dropout", "def make_gru_dropout", "'model' (GRU)", "x"),
])
def test_dropout_inside_a_built_in_in_training_mode_is_one_line_at_the_users_code(models, factory, line, words,
                                                                                 call):
    """The message was 'a bug of adjoint import: please report it', at a temporary file (or a line of
    the file import would have written)."""
    model = call_factory(models, factory)
    module = model.attn if factory == "make_attn_dropout" else model
    x = torch.randn(1, 3, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    args = (x, x, x) if call == "x, x, x" else (x,)
    first, second = (module(*args) for _ in range(2))
    first, second = (o[0] if isinstance(o, tuple) else o for o in (first, second))
    assert not torch.equal(first, second)      # PyTorch draws anew at each call: no file can hold it
    with pytest.raises(ProblemError) as err:
        import_file(f"{models}:{factory}", ["x=1x3x2"], "sum(y)", None)
    msg = str(err.value)
    assert msg.startswith(f"{models}:{line_of(models, line)}: {words} is in training mode with dropout"), msg
    assert "report" not in msg and "call model.eval()" in msg


def test_a_tensor_hooks_wrong_shape_is_pytorchs_error_named_as_the_file_names_hooks(models):
    """PyTorch names the user's function ('row_sum'); the file names every hook 'hook'. The import
    compared with its own wrapper's name ('wrapper') and refused its file."""
    out, text, problem = _import(models, "make_bad_hook")
    model = call_factory(models, "make_bad_hook")
    with pytest.raises(RuntimeError) as err:
        model(torch.ones(2, 2, dtype=torch.float64)).sum().backward()
    assert str(err.value) == "hook 'row_sum' has changed the size of value"
    js = predict(problem, None, "float64").variants[0].to_json()
    assert js["error"]["type"] == "RuntimeError"
    assert js["error"]["message"] == str(err.value).replace("'row_sum'", "'hook'")
    assert verify_variant(out, problem, predict(problem, None, "float64").variants[0], "float64", False,
                          origin=True).ok
