"""Channel-wise dropout (nn.Dropout1d / 2d / 3d, F.dropout1d / 2d / 3d) and alpha dropout
(nn.AlphaDropout, nn.FeatureAlphaDropout, F.alpha_dropout, F.feature_alpha_dropout) against real
torch 2.13 in float64: node chains (the unsqueeze/squeeze an unbatched dropout1d/3d makes even in
eval mode), values, gradients, the legacy hook's arguments, saved tensors (the scaled keep-mask of
one element per batch element and channel), warnings and errors. A training-mode module's keep-mask
is forced on torch's own draw (adjoint.torchside.dropout), as verify does; expected values come
from torch."""

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from torch.utils._python_dispatch import TorchDispatchMode

import adjoint
from adjoint.torchside.dropout import BERNOULLI

from nn_harness import (Case, assert_close, assert_error_matches_torch, assert_root_module, dyadic, lit, torch_chain,
                        torch_module_run)


class _Forced(TorchDispatchMode):
    """torch's bernoulli_ draw answered with a given keep-mask (what verify does, written out here)."""

    def __init__(self, mask):
        super().__init__()
        self.mask = mask

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is BERNOULLI:
            assert tuple(args[0].shape) == tuple(self.mask.shape)
            return args[0].copy_(self.mask.to(args[0].dtype))
        return func(*args, **(kwargs or {}))


def _problem(type_: str, args: dict, x, mask=None, training: bool = True) -> str:
    keys = (f"  mask: {lit(mask)}\n" if mask is not None else "") + ("" if training else "  training: false\n")
    return (f"name: t\ndtype: float64\ninputs:\n  x: {{value: {lit(x)}, requires_grad: true}}\n"
            f"model:\n  type: {type_}\n  args: {args}\n{keys}loss: \"sum(y * y * y)\"\n"
            "hooks:\n  - {module: model, kind: backward}\n  - {saved_tensors: {pack: x, unpack: x}}\n")


MODULES = [
    # type, args, input shape, keep-mask (None: eval mode or nothing drawn), training
    ("Dropout2d", {"p": 0.5}, (2, 3, 2, 2), [[[[1]], [[0]], [[1]]], [[[0]], [[1]], [[1]]]], True),
    ("Dropout2d", {"p": 0.25}, (2, 3, 2), [[[1], [0], [1]], [[0], [1], [1]]], True),   # 3-D: (N, C, L), warns
    ("Dropout2d", {"p": 0.5}, (2, 3, 2, 2), None, False),
    ("Dropout2d", {"p": 1.0}, (2, 3, 2, 2), None, True),
    ("Dropout1d", {"p": 0.5}, (2, 3, 4), [[[1], [1], [0]], [[0], [1], [0]]], True),
    ("Dropout1d", {"p": 0.75}, (3, 4), [[[0], [1], [1]]], True),    # unbatched: unsqueeze, mul, squeeze
    ("Dropout1d", {"p": 0.5}, (3, 4), None, False),                   # eval: unsqueeze, squeeze, no mul
    ("Dropout3d", {"p": 0.5}, (1, 2, 2, 1, 2), [[[[[1]]], [[[0]]]]], True),
    ("Dropout3d", {"p": 0.5}, (2, 2, 1, 2), None, False),             # unbatched 4-D in eval
    ("Dropout3d", {"p": 0.5}, (2, 3), [[[1], [0]]], True),              # 2-D: warns, unsqueezed to (1, 2, 3)
    ("AlphaDropout", {"p": 0.5}, (2, 3), None, False),
    ("AlphaDropout", {"p": 1.0}, (2, 3), None, True),
    ("FeatureAlphaDropout", {"p": 0.0}, (2, 3, 2), None, True),
    ("FeatureAlphaDropout", {"p": 1.0}, (2, 3, 2), None, True),
]


@pytest.mark.parametrize("type_,args,shape,mask,training", MODULES,
                         ids=[f"{m[0]}-{i}" for i, m in enumerate(MODULES)])
def test_module_matches_torch(type_, args, shape, mask, training):
    x = dyadic(shape, seed=len(shape) + int(4 * args["p"]))
    case = Case(_problem(type_, args, x, mask, training))
    m = getattr(nn, type_)(**args)
    if not training:
        m.eval()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if mask is not None:
            with _Forced(torch.tensor(mask, dtype=torch.float64)):
                y, names, rec = torch_module_run(m, {}, x, loss=lambda y: (y * y * y).sum())
        else:
            y, names, rec = torch_module_run(m, {}, x, loss=lambda y: (y * y * y).sum())
    assert_root_module(case, y, names, rec)
    theirs = [str(w.message) for w in caught if issubclass(w.category, UserWarning)
              and "backward hook" not in str(w.message)]
    assert [w["message"] for w in case.json["warnings"] if w["category"] == "UserWarning"] == theirs


def test_the_mask_has_one_element_per_batch_element_and_channel():
    x = dyadic((2, 3, 2, 2), seed=1)
    text = _problem("Dropout2d", {"p": 0.5}, x, [[1, 0, 1], [0, 1, 1]])
    with pytest.raises(adjoint.ProblemError, match=r"the Dropout2d mask has shape \[2, 3\] but PyTorch draws one of "
                                                   r"shape \[2, 3, 1, 1\] \(one per batch element and channel\)"):
        adjoint.loads(text).solve()


ERRORS = [
    ("Dropout1d", {"p": 0.5}, (2, 3, 2, 2), False, lambda x: F.dropout1d(x, 0.5, False)),
    ("Dropout2d", {"p": 0.5}, (6,), True, lambda x: F.dropout2d(x, 0.5, True)),
]


@pytest.mark.parametrize("type_,args,shape,training,call", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_are_torchs(type_, args, shape, training, call):
    x = dyadic(shape, seed=2)
    mask = [1] if training else None   # never reached: torch raises before it draws
    text = _problem(type_, args, x, mask, training)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_error_matches_torch(text, lambda: call(torch.tensor(x, dtype=torch.float64, requires_grad=True)))


@pytest.mark.parametrize("expr,fn", [
    ("F.dropout1d(x, 0.5, False)", lambda x: F.dropout1d(x, 0.5, False)),
    ("F.dropout2d(x, 1.0)", lambda x: F.dropout2d(x, 1.0)),
    ("F.dropout3d(x, 0.0)", lambda x: F.dropout3d(x, 0.0)),
    ("F.alpha_dropout(x, 0.5)", lambda x: F.alpha_dropout(x, 0.5)),
    ("F.feature_alpha_dropout(x, 1.0, True)", lambda x: F.feature_alpha_dropout(x, 1.0, True)),
    ("torch.alpha_dropout(x, 1.0, True)", lambda x: torch.alpha_dropout(x, 1.0, True)),
])
def test_functions_where_nothing_is_drawn_match_torch(expr, fn):
    x = dyadic((3, 4), seed=5)
    text = (f"name: t\ndtype: float64\ninputs:\n  x: {{value: {lit(x)}, requires_grad: true}}\n"
            f"model:\n  forward: |\n    h = {expr} * 1\n    return h\nloss: \"sum(y * y * y)\"\n")
    case = Case(text)
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        h = fn(xt) * 1
    (h * h * h).sum().backward()
    assert case.chain("h") == torch_chain(h, {"x": xt})
    assert_close(case.grad("x"), xt.grad, "grad of x")


def test_what_draws_at_random_without_a_mask_is_refused_in_one_line():
    x = dyadic((2, 3, 2), seed=3)
    with pytest.raises(adjoint.ProblemError, match="Dropout2d in training mode, which keeps channels at random"):
        adjoint.loads(_problem("Dropout2d", {"p": 0.5}, x))
    with pytest.raises(adjoint.ProblemError, match="AlphaDropout in training mode, whose noise .* not modelled yet"):
        adjoint.loads(_problem("AlphaDropout", {"p": 0.5}, x))
    text = (f"name: t\ndtype: float64\ninputs:\n  x: {{value: {lit(x)}, requires_grad: true}}\n"
            "model:\n  forward: \"F.dropout2d(x, 0.5)\"\nloss: \"sum(y)\"\n")
    with pytest.raises(adjoint.ProblemError, match="use a Dropout2d module with mask"):
        adjoint.loads(text).solve()


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 1)
        self.drop = nn.Dropout2d(0.5)
        self.d1 = nn.Dropout1d(0.25)

    def forward(self, x):
        h = self.drop(self.conv(x))
        return self.d1(h.flatten(2)[0])     # an unbatched (C, L) input: unsqueezed, its mask (1, C, 1)


def test_import_writes_a_channel_mask_of_the_shape_torch_draws():
    torch.manual_seed(0)
    model = _Net().double()
    x = torch.tensor(dyadic((2, 2, 2, 2), seed=4), dtype=torch.float64, requires_grad=True)
    text = adjoint.from_module_text(model, x)
    problem = adjoint.loads(text)
    drop, d1 = problem.model.child("drop"), problem.model.child("d1")
    assert (drop.type, d1.type) == ("Dropout2d", "Dropout1d")
    assert drop.mask is not None and d1.mask is not None
    js = problem.solve().variants[0].to_json()
    masks = {"drop": _mask(drop.mask), "d1": _mask(d1.mask)}
    assert tuple(masks["drop"].shape) == (2, 3, 1, 1) and tuple(masks["d1"].shape) == (1, 3, 1)
    # torch with the same keep-masks forced on its two draws, in call order
    xt = x.detach().clone().requires_grad_()
    order = iter([masks["drop"], masks["d1"]])

    class Both(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func is BERNOULLI:
                return args[0].copy_(next(order).to(args[0].dtype))
            return func(*args, **(kwargs or {}))
    with Both():
        y = model(xt)
    y.sum().backward()
    assert_close(js["grads"]["x"]["value"], xt.grad, "grad of x")


def test_import_refuses_alpha_dropout_in_training_naming_p():
    model = nn.Sequential(nn.Linear(2, 2), nn.AlphaDropout(0.2)).double()
    with pytest.raises(adjoint.ProblemError, match=r"AlphaDropout\) is in training mode .* give it p=0\)"):
        adjoint.from_module_text(model, torch.ones(1, 2, dtype=torch.float64, requires_grad=True))



def _mask(literal) -> torch.Tensor:
    """A mask literal (shape and row-major 0/1 items) as a float64 tensor."""
    return torch.tensor([float(e) for e in literal.items], dtype=torch.float64).reshape(literal.shape)
