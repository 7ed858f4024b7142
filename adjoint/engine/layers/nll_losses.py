"""Built-in modules of the likelihood and distance losses (torch/nn/modules/loss.py and
distance.py): each ``forward`` is one call of the functional with the module's constructor
arguments (:mod:`adjoint.engine.bindings.nll_losses`)."""

from __future__ import annotations

from fractions import Fraction

from adjoint.engine.bindings import call_function
from adjoint.engine.layers.losses import _inputs


def _kwargs(c, keys: tuple[str, ...]) -> dict:
    """The module's attributes as the functional's keyword arguments (an int as the expression
    language's number)."""
    out = {}
    for k in keys:
        v = c.arg(k)
        out[k] = Fraction(v) if isinstance(v, int) and not isinstance(v, bool) else v
    return out


def poisson_nll_forward(c):
    """``F.poisson_nll_loss(log_input, target, log_input=self.log_input, full=self.full,
    eps=self.eps, reduction=self.reduction)``."""
    return call_function(c.rt, "poisson_nll_loss", _inputs(c, ("log_input", "target")),
                         _kwargs(c, ("log_input", "full", "eps", "reduction")), c.loc)


def triplet_margin_forward(c):
    """``F.triplet_margin_loss(anchor, positive, negative, margin=self.margin, p=self.p,
    eps=self.eps, swap=self.swap, reduction=self.reduction)``."""
    return call_function(c.rt, "triplet_margin_loss", _inputs(c, ("anchor", "positive", "negative")),
                         _kwargs(c, ("margin", "p", "eps", "swap", "reduction")), c.loc)


def pairwise_distance_forward(c):
    """nn.PairwiseDistance (torch/nn/modules/distance.py): ``F.pairwise_distance(x1, x2, self.norm,
    self.eps, self.keepdim)`` (the constructor's ``p`` kept as ``norm``)."""
    return call_function(c.rt, "pairwise_distance", _inputs(c, ("x1", "x2")),
                         _kwargs(c, ("p", "eps", "keepdim")), c.loc)


def gaussian_nll_forward(c):
    """``F.gaussian_nll_loss(input, target, var, full=self.full, eps=self.eps,
    reduction=self.reduction)`` (var a tensor or a Python number)."""
    return call_function(c.rt, "gaussian_nll_loss", _inputs(c, ("input", "target", "var")),
                         _kwargs(c, ("full", "eps", "reduction")), c.loc)


FORWARDS = {
    "PoissonNLLLoss": poisson_nll_forward,
    "TripletMarginLoss": triplet_margin_forward,
    "GaussianNLLLoss": gaussian_nll_forward,
    "PairwiseDistance": pairwise_distance_forward,
}
