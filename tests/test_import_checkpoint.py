"""``adjoint import`` of a forward that calls ``torch.utils.checkpoint.checkpoint`` on its child
modules: the call is written as the format writes it (``checkpoint(CHILD, h, use_reentrant=...)``,
the keywords as the user gave them), never traced through, and ``verify --origin`` proves the
file against the user's module run by real torch with its real hooks (the hook calls of the
recomputation, marked recomputed, and of the reentrant backward, marked reentrant, included).
What the format cannot write is refused at the user's line.

Every expected value is real torch running the user's module; every refusal names the
user's ``file:line``.
"""

from __future__ import annotations

import os
import sys
import textwrap

import pytest
from conftest import line_of, require_torch

torch = require_torch()

import adjoint  # noqa: E402
from adjoint.format.errors import ProblemError  # noqa: E402
from adjoint.torchside.importer import import_file  # noqa: E402
from adjoint.torchside.importer.userfile import call_factory  # noqa: E402
from adjoint.torchside.verify import predict, verify_variant  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MODELS = '''\
import torch
import torch.utils.checkpoint as cp
from torch import nn
from torch.utils.checkpoint import checkpoint


class Lambda(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        return checkpoint(lambda t: self.lin(t) * x, x, use_reentrant=False)


class Context(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        return checkpoint(self.lin, x, use_reentrant=False, debug=True)


class Items(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(3, 3)])

    def forward(self, x):
        return checkpoint(self.layers[0], x, use_reentrant=False)


class Method(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def twice(self, t):
        return self.lin(t) * 2

    def forward(self, x):
        return checkpoint(self.twice, x, use_reentrant=False)


class Sequential(nn.Module):
    def __init__(self):
        super().__init__()
        self.s = nn.Sequential(nn.Linear(3, 3), nn.Tanh())

    def forward(self, x):
        return cp.checkpoint_sequential(self.s, 1, x, use_reentrant=False)


def make_lambda():
    return Lambda()


def make_context():
    return Context()


def make_items():
    return Items()


def make_method():
    return Method()


def make_sequential():
    return Sequential()
'''


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    path = tmp_path_factory.mktemp("ckpt") / "ckmodels.py"
    path.write_text(MODELS)
    return str(path)




def test_checkpoint_calls_are_written_as_the_format_writes_them_and_verify_origin_agrees(tmp_path):
    example = tmp_path / "checkpointed.py"      # verify --origin runs only a file beside the problem
    example.write_text(open(os.path.join(ROOT, "examples", "checkpointed.py")).read())
    out = str(tmp_path / "checkpointed.yaml")
    text = import_file(f"{example}:make_model", ["x=2x3"], "sum(y)", out)
    with open(out, "w") as fh:
        fh.write(text)
    # each call as the user wrote it: the child by name, the keywords kept, an absent use_reentrant absent
    assert ("  forward: |\n    a = checkpoint(f, x * w, use_reentrant=False)\n"
            "    return head(checkpoint(act, checkpoint(f, checkpoint(g, a, use_reentrant=True), use_reentrant=False, "
            "early_stop=False), preserve_rng_state=False) + a)\n") in text, text
    problem = adjoint.load(out)
    vp = predict(problem, None, "float64").variants[0]
    js = vp.to_json()

    # the user's module, run by real torch: its hooks' calls (the recomputed ones included) and grads
    mod = call_factory(str(example), "make_model")
    calls = sys.modules[type(mod).__module__].CALLS
    calls.clear()
    x = torch.tensor([float(v) for v in problem.variants[0].inputs[0].value.items],
                     dtype=torch.float64).reshape(2, 3).requires_grad_(True)
    with pytest.warns(UserWarning, match="use_reentrant parameter should be passed explicitly"):
        mod(x).sum().backward()           # the checkpoint without use_reentrant: PyTorch warns, runs reentrant
    assert [c["kind"] for c in js["hook_calls"]] == calls
    recomputed = [c for c in js["hook_calls"] if c.get("recomputed")]
    assert len(recomputed) == 3 and len(calls) == 10       # f twice, g once: their forward-time hooks again
    assert [c["target"] for c in js["hook_calls"] if c.get("reentrant")] == ["act", "g.lin"]
    assert torch.allclose(torch.tensor(js["grads"]["x"]["value"], dtype=torch.float64), x.grad, rtol=1e-12)
    assert torch.allclose(torch.tensor(js["grads"]["f.lin.weight"]["value"], dtype=torch.float64),
                          mod.f.lin.weight.grad, rtol=1e-12)
    assert [w["message"].startswith("torch.utils.checkpoint: the use_reentrant parameter should be passed")
            for w in js.get("warnings", [])] == [True]

    result = verify_variant(out, problem, vp, "float64", False, origin=True)
    assert result.ok, [(r.item, r.detail) for r in result.rows if not r.ok]
    origin = [r.item for r in result.rows if r.section == "origin"]
    assert sum(i.startswith("#") for i in origin) == 10
    assert "autograd graph = origin's module" in [r.item for r in result.rows]


@pytest.mark.parametrize("factory, line, words", [
    ("make_lambda", "return checkpoint(lambda", "the model (Lambda): checkpoint(...) (torch.utils.checkpoint) is "
                                                "handed a lambda, which cannot be imported yet"),
    ("make_context", "debug=True", "the model (Context): checkpoint(...) (torch.utils.checkpoint) is given debug=, "
                                   "which the problem format does not have"),
    ("make_items", "self.layers[0], x", "the model (Items): checkpoint(...) (torch.utils.checkpoint) is handed "
                                        "'self.layers[0]', which cannot be imported yet"),
    ("make_method", "self.twice, x", "the model calls checkpoint(...) (torch.utils.checkpoint) in its forward, "
                                     "which cannot be imported yet"),
    ("make_sequential", "cp.checkpoint_sequential(", "the model (Sequential): checkpoint_sequential(...) "
                                                     "(torch.utils.checkpoint) cannot be imported yet"),
])
def test_what_the_format_cannot_write_of_checkpoint_is_refused_at_the_users_line(models, factory, line, words):
    with pytest.raises(ProblemError) as err:
        import_file(f"{models}:{factory}", ["x=2x3"], "sum(y)", None)
    msg = str(err.value)
    assert msg.startswith(f"{models}:{line_of(models, line)}: {words}"), msg
    assert "\n" not in msg


def test_a_checkpointed_child_defined_in_a_helper_module_is_refused_not_traced_through(tmp_path):
    path = tmp_path / "helper.py"
    path.write_text(textwrap.dedent("""\
        import torch.utils.checkpoint as cp
        from torch import nn


        class Outer(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(3, 3)

            def forward(self, x):
                return run(self.lin, x)


        def run(block, x):
            return cp.checkpoint(block, x, use_reentrant=False)


        def make():
            return Outer()
        """))
    with pytest.raises(ProblemError) as err:
        import_file(f"{path}:make", ["x=2x3"], "sum(y)", None)
    assert str(err.value).startswith(f"{path}:{line_of(str(path), 'return cp.checkpoint(')}: the model calls "
                                     "checkpoint(...) (torch.utils.checkpoint) in its forward"), str(err.value)
