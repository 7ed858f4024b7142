"""A ``with_kwargs`` forward-pre hook that changes the keyword arguments is imported.

PyTorch's own idiom (test/nn/test_module_hooks.py, ``kwarg_forward_pre_hook``) is
``kwargs["bias"] = 2 * kwargs["bias"]; return args, kwargs``; the other common spelling returns
a new dict, ``return args, {"scale": kwargs["scale"] * 2}``. Both were refused at import (the
dict literal "cannot be translated"; the item store "only tensors support index assignment
here", at a line of the file it would have written). ``_call_impl`` hands the hook the very dict
it then calls ``forward(*args, **kwargs)`` with, so a store into it changes the forward even when
the hook returns None. Every expected value is real torch running the user's module with its
hooks as registered, never adjoint's output.
"""

from __future__ import annotations

import pytest
from conftest import import_to_file, require_torch, users_module_run

torch = require_torch()

from adjoint.torchside.importer.hookbody import MODULE_ARGS, Untranslatable, translate  # noqa: E402
from adjoint.torchside.verify import predict, verify_variant  # noqa: E402

MODEL = '''\
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)

    def forward(self, x, bias=None, scale=1.0):
        return self.lin(x) * scale + bias


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.b = Block()
        self.register_buffer("bias", torch.tensor([0.5, -0.25]))

    def forward(self, x):
        return torch.tanh(self.b(x, bias=self.bias, scale=0.5))


def new_dict(module, args, kwargs):
    return args, {"bias": kwargs["bias"] * 2, "scale": kwargs["scale"] + 1}


def store_and_return(module, args, kwargs):
    kwargs["scale"] = 2 * kwargs["scale"]
    return args, kwargs


def store_only(module, args, kwargs):
    kwargs["scale"] *= 3


def make(hook=None):
    torch.manual_seed(0)
    m = Net().double()
    if hook is not None:
        m.b.register_forward_pre_hook(hook, with_kwargs=True)
    return m


def make_new_dict():
    return make(new_dict)


def make_store_and_return():
    return make(store_and_return)


def make_store_only():
    return make(store_only)
'''


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    path = tmp_path_factory.mktemp("kwargs_hooks") / "kwargs_hooks.py"
    path.write_text(MODEL)
    return str(path)


@pytest.mark.parametrize("factory, line", [
    ("make_new_dict", 'returns: "(input, {\\"bias\\": kwargs[\\"bias\\"] * 2, \\"scale\\": kwargs[\\"scale\\"] + 1})"'),
    ("make_store_and_return", 'does: "kwargs[\\"scale\\"] = 2 * kwargs[\\"scale\\"]", returns: "(input, kwargs)"'),
    ("make_store_only", 'does: "kwargs[\\"scale\\"] *= 3"}'),
])
def test_a_kwargs_changing_pre_hook_is_translated_and_equals_the_users_module(models, factory, line):
    out, text, problem = import_to_file(models, factory, ["x=2x2"])
    assert "{module: b, kind: forward_pre, with_kwargs: true, " + line in text, text
    vp = predict(problem, None, "float64").variants[0]
    js = vp.to_json()
    loss, grads = users_module_run(problem, models, factory)
    bare, _ = users_module_run(problem, models, "make")
    assert abs(loss.item() - bare.item()) > 1e-3      # the hook changes the forward
    assert abs(js["loss"]["value"] - loss.item()) <= 1e-12
    for name, g in grads.items():
        assert torch.allclose(torch.tensor(js["grads"][name]["value"], dtype=torch.float64), g,
                              rtol=1e-10, atol=1e-12), name
    result = verify_variant(out, problem, vp, "float64", False, origin=True)
    assert result.ok, [(r.item, r.detail) for r in result.rows if not r.ok]


def test_a_dict_spreading_kwargs_is_refused_naming_it():
    def spread(module, args, kwargs):
        return args, {**kwargs, "scale": 2.0}

    with pytest.raises(Untranslatable) as err:
        translate(spread, MODULE_ARGS["forward_pre+kwargs"], True)
    assert "'**kwargs' in the dict" in err.value.what


def test_a_store_into_kwargs_is_said_not_called_observing():
    import os
    import adjoint
    path = os.path.join(os.path.dirname(__file__), "data", "regressions", "kwargs_pre_hook_stores_into_kwargs.yaml")
    solved = {v.name: v for v in adjoint.load(path).solve().variants}
    pre = solved["store_only"].hook_calls[0]
    assert pre.kind == "forward_pre" and pre.returned is None
    assert pre.wrote == ("stored kwargs['bias']",)
    assert any("the forward takes the stored value" in w for w in pre.why)
