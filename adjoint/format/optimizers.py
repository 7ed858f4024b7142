"""``optimizer: {type: Adam, lr: ..., betas: [..., ...], eps: ...}``: a ``torch.optim`` optimizer a
hook body steps (``optim.step()``, ``optim.zero_grad()``), as PyTorch's optimizer-in-backward
recipe writes it: ``optims[p] = torch.optim.Adam([p])`` then a post-accumulate-grad hook
``def hook(p): optims[p].step(); optims[p].zero_grad()`` (it must return None: a lambda
returning the tuple of both calls is PyTorch's TypeError "expected Variable, but hook returned
'tuple'")

The numbers are Python floats on the torch side, as typed (the defaults are Adam's: lr 1e-3,
betas (0.9, 0.999), eps 1e-8); adjoint computes with them exactly (docs/format.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from adjoint.format.checks import choice, mapping
from adjoint.format.errors import Loc, ProblemError
from adjoint.format.literals import parse_number
from adjoint.format.loader import YNode, YScalar, YSeq

OPTIMIZER_TYPES = ("Adam",)


@dataclass(frozen=True)
class OptimizerDecl:
    """One optimizer over the hooked tensor: ``torch.optim.Adam([tensor], lr, betas, eps)``
    (weight_decay 0, amsgrad False, maximize False, foreach None: on CPU the single-tensor
    path)."""

    type: str
    lr: Fraction = Fraction(1, 1000)
    betas: tuple = (Fraction(9, 10), Fraction(999, 1000))
    eps: Fraction = Fraction(1, 10 ** 8)
    loc: Loc | None = None


#: torch.optim's other classes: refused as not modelled (a "did you mean Adam" would mislead)
_OTHER_OPTIMIZERS = ("AdamW", "SGD", "RMSprop", "Adagrad", "Adadelta", "Adamax", "NAdam", "RAdam", "ASGD", "LBFGS",
                     "Rprop", "SparseAdam", "Adafactor")


def parse_optimizer(node: YNode, where: str) -> OptimizerDecl:
    m = mapping(node, f"the optimizer of {where}", ("type",), ("lr", "betas", "eps"))
    given = m.get("type")
    if isinstance(given, YScalar) and given.text in _OTHER_OPTIMIZERS:   # a real torch.optim class, not a typo
        raise ProblemError(given.loc, f"optimizer type '{given.text}' is not modelled yet; the one modelled is Adam "
                                      "(weight_decay 0, amsgrad and maximize off); a step: {lr: ...} is plain SGD, "
                                      "and momentum or weight decay can be written in a post_accumulate_grad hook")
    kind = choice(given, "optimizer type", OPTIMIZER_TYPES)
    lr = parse_number(m.get("lr"), "lr") if m.get("lr") is not None else OptimizerDecl.lr
    eps = parse_number(m.get("eps"), "eps") if m.get("eps") is not None else OptimizerDecl.eps
    betas = OptimizerDecl.betas
    if m.get("betas") is not None:
        b = m.get("betas")
        if not isinstance(b, YSeq) or len(b.items) != 2:
            raise ProblemError(b.loc, "betas must be a list of two numbers, as in [0.9, 0.999]")
        betas = tuple(parse_number(x, "beta") for x in b.items)
    # out-of-range numbers are PyTorch's ValueError when the optimizer is made: an answer
    # (adjoint.engine.adam.check_settings), not bad input
    return OptimizerDecl(kind, lr, betas, eps, m.loc)
