"""Idioms of users' own modules that ``adjoint import`` refused, now translated faithfully.

* a forward argument with a string default (``act: str = "relu"``): import wrote it as an
  input without a default after one with a default, and its own loader refused the file;
* a hook's captured list read by a constant or captured index (``CFG["scales"][1]``,
  ``scales[i]`` with ``i=i`` bound per layer): refused as "a captured list";
* ``isinstance(module, nn.Linear)`` in a module hook registered by ``model.apply``: refused as
  "the module argument is read" (the module a hook is on is known at import, as for
  ``module.training``);
* ``"bias" in name`` of a captured name (one hook per parameter): refused as an expression;
* a recorded forward (fx cannot trace ``x + h if residual else h``) reading a float keyword
  (``* gain``) that a ``with_kwargs`` forward pre-hook changes: the example call's number was
  baked in (``mul(2.0)``), so the file's forward ignored the hook's change (the self-check
  refused it); the argument is now read by name, and the example call is what ``forward`` is
  handed after the user's pre-hooks.

Every expected number is real torch running the user's module with its hooks (float64), never
adjoint's output.
"""

from __future__ import annotations

import pytest
from conftest import import_to_file, require_torch, users_module_run

torch = require_torch()

from adjoint.torchside.verify import predict, verify_variant  # noqa: E402

MODEL = '''\
import torch
from torch import nn

CFG = {"scales": [0.5, 2.0]}


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, x, *, gain=1.0, residual=True):
        h = torch.tanh(self.fc(x)) * gain
        return x + h if residual else h


class Gated(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(3, 3)

    def forward(self, x, scale: float = 1.0, act: str = "relu"):
        h = self.fc(x)
        h = torch.relu(h) if act == "relu" else torch.tanh(h)
        return h * scale


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.b1 = Block()
        self.b2 = Block()
        self.g = Gated()
        self.head = nn.Linear(3, 1)

    def forward(self, x):
        h = self.b2(self.b1(x, gain=2.0), gain=0.5, residual=False)
        return self.head(self.g(h, scale=0.5, act="tanh"))


def tripled(mod, args, kwargs):
    kwargs["gain"] = kwargs["gain"] * 3
    return args, kwargs


def linear_only(m, gi, go):
    if isinstance(m, nn.Linear):
        return (gi[0] * 0.5,)
    return None


def make():
    torch.manual_seed(0)
    model = Net().double()
    model.b1.register_forward_pre_hook(tripled, with_kwargs=True)
    for i, b in enumerate([model.b1, model.b2]):
        b.register_full_backward_hook(lambda mod, gi, go, i=i: (gi[0] * CFG["scales"][i],))

    def register(mod):
        if isinstance(mod, (nn.Linear, Gated)):
            mod.register_full_backward_hook(linear_only)
    model.apply(register)
    for name, p in model.named_parameters():
        p.register_hook(lambda g, name=name: g * (0.25 if "bias" in name else 1.0))
    return model


def make_bare():
    torch.manual_seed(0)
    return Net().double()
'''


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    path = tmp_path_factory.mktemp("useridioms") / "useridioms.py"
    path.write_text(MODEL)
    return (str(path),) + import_to_file(str(path), "make", ["x=2x3"])


def test_the_file_writes_each_idiom(imported):
    _, _, text, _ = imported
    for line in ('inputs: [x, {scale: 1.0}, {act: "relu"}]',
                 'return torch.tanh(fc(x)).mul(scale)',
                 'return x.add(torch.tanh(fc(x)).mul(gain))',
                 '{module: b1, kind: full_backward, returns: "(grad_input[0] * 0.5,)"}',
                 '{module: b2, kind: full_backward, returns: "(grad_input[0] * 2.0,)"}',
                 '{module: b1.fc, kind: full_backward, returns: "(grad_input[0] * 0.5,)"}',
                 '{module: g, kind: full_backward}',
                 '{tensor: head.bias, returns: "grad * 0.25"}',
                 '{tensor: head.weight, returns: "grad * 1.0"}'):
        assert line in text, text


def test_the_answer_is_the_users_module(imported):
    models, out, _, problem = imported
    vp = predict(problem, None, "float64").variants[0]
    js = vp.to_json()
    loss, grads = users_module_run(problem, models, "make")
    assert abs(js["loss"]["value"] - loss.item()) <= 1e-12
    for name, g in grads.items():
        assert torch.allclose(torch.tensor(js["grads"][name]["value"], dtype=torch.float64), g,
                              rtol=1e-10, atol=1e-12), name
    result = verify_variant(out, problem, vp, "float64", False, origin=True)
    assert result.ok, [(r.item, r.detail) for r in result.rows if not r.ok]
    # the pre-hook's tripled gain and the hooks change what flows: the bare module differs
    from adjoint.torchside.importer.userfile import call_factory
    bare = call_factory(models, "make_bare")
    d = problem.variants[0].inputs[0]
    x = torch.tensor([float(v) for v in d.value.items], dtype=torch.float64).reshape(d.value.shape)
    bare_loss = bare(x).sum()
    assert abs(bare_loss.item() - loss.item()) > 1e-3
