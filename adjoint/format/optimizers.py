"""``optimizer: {type: Adam | AdamW | SGD, lr: ..., ...}``: a ``torch.optim`` optimizer a hook
body steps (``optim.step()``, ``optim.zero_grad()``), as PyTorch's optimizer-in-backward recipe
writes it: ``optims[p] = torch.optim.Adam([p])`` then a post-accumulate-grad hook ``def hook(p):
optims[p].step(); optims[p].zero_grad()`` (it must return None: a lambda returning the tuple of
both calls is PyTorch's TypeError "expected Variable, but hook returned 'tuple'"), or the one a
``{step: {optimizer: ...}}`` steps over ``model.parameters()``.

The numbers are Python floats on the torch side, as typed; the defaults are torch.optim's:
Adam lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight_decay 0, amsgrad False; AdamW the same with weight_decay
1e-2; SGD lr 1e-3, momentum 0, dampening 0, weight_decay 0, nesterov False; maximize False.
adjoint computes with them exactly (docs/format.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from adjoint.format.checks import boolean, choice, mapping
from adjoint.format.errors import Loc, ProblemError
from adjoint.format.literals import parse_number
from adjoint.format.loader import YNode, YScalar, YSeq

OPTIMIZER_TYPES = ("Adam", "AdamW", "SGD")

#: the keys each type takes (torch.optim's keyword arguments modelled)
_KEYS = {"Adam": ("lr", "betas", "eps", "weight_decay", "amsgrad", "maximize"),
         "AdamW": ("lr", "betas", "eps", "weight_decay", "amsgrad", "maximize"),
         "SGD": ("lr", "momentum", "dampening", "weight_decay", "nesterov", "maximize")}


@dataclass(frozen=True)
class OptimizerDecl:
    """One optimizer: ``torch.optim.Adam(params, lr, betas, eps, weight_decay, amsgrad, maximize)``,
    ``torch.optim.AdamW(...)`` (the same, its weight decay decoupled) or ``torch.optim.SGD(params,
    lr, momentum, dampening, weight_decay, nesterov, maximize)`` (foreach None: on CPU the
    single-tensor path)."""

    type: str
    lr: Fraction = Fraction(1, 1000)
    betas: tuple = (Fraction(9, 10), Fraction(999, 1000))
    eps: Fraction = Fraction(1, 10 ** 8)
    weight_decay: Fraction = Fraction(0)
    maximize: bool = False
    momentum: Fraction = Fraction(0)
    dampening: Fraction = Fraction(0)
    nesterov: bool = False
    amsgrad: bool = False
    loc: Loc | None = None

    @property
    def settings(self) -> tuple:
        """Everything but the place it is written: equal settings are one optimizer."""
        return (self.type, self.lr, self.betas, self.eps, self.weight_decay, self.maximize, self.momentum,
                self.dampening, self.nesterov, self.amsgrad)


#: torch.optim's other classes: refused as not modelled (a "did you mean Adam" would mislead)
_OTHER_OPTIMIZERS = ("RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam", "ASGD", "LBFGS",
                     "Rprop", "SparseAdam", "Adafactor", "Muon")


def parse_optimizer(node: YNode, where: str) -> OptimizerDecl:
    every = ("lr", "betas", "eps", "weight_decay", "maximize", "momentum", "dampening", "nesterov", "amsgrad")
    m = mapping(node, f"the optimizer of {where}", ("type",), every)
    given = m.get("type")
    if isinstance(given, YScalar) and given.text in _OTHER_OPTIMIZERS:   # a real torch.optim class, not a typo
        raise ProblemError(given.loc, f"optimizer type '{given.text}' is not modelled yet; the ones modelled are "
                                      "Adam, AdamW and SGD; a step: {lr: ...} is plain p -= lr * p.grad")
    kind = choice(given, "optimizer type", OPTIMIZER_TYPES)
    for key in every:
        if m.get(key) is not None and key not in _KEYS[kind]:
            raise ProblemError(m.key_loc(key), f"torch.optim.{kind} takes no '{key}' here; its settings are "
                                               f"{', '.join(_KEYS[kind])}")

    def number(key, default):
        return parse_number(m.get(key), key) if m.get(key) is not None else default

    def flag(key):
        return boolean(m.get(key), key) if m.get(key) is not None else False

    betas = OptimizerDecl.betas
    if m.get("betas") is not None:
        b = m.get("betas")
        if not isinstance(b, YSeq) or len(b.items) != 2:
            raise ProblemError(b.loc, "betas must be a list of two numbers, as in [0.9, 0.999]")
        betas = tuple(parse_number(x, "beta") for x in b.items)
    # out-of-range numbers are PyTorch's ValueError when the optimizer is made: an answer
    # (adjoint.engine.adam.check_settings), not bad input
    return OptimizerDecl(kind, number("lr", OptimizerDecl.lr), betas, number("eps", OptimizerDecl.eps),
                         number("weight_decay", Fraction(1, 100) if kind == "AdamW" else Fraction(0)),
                         flag("maximize"), number("momentum", Fraction(0)), number("dampening", Fraction(0)),
                         flag("nesterov"), flag("amsgrad"), m.loc)
