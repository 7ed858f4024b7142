"""Built-in modules of the losses family: each forward as PyTorch's own.

Every ``forward`` of ``torch/nn/modules/loss.py`` is one call of the functional with the
module's constructor arguments; ``weight`` and ``pos_weight`` are buffers (absent unless the
file gives them, as in torch, where they default to None).
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.format.errors import ProblemError
from adjoint.engine.bindings import call_function


def _inputs(c, names: tuple[str, ...] = ("input", "target")) -> list:
    """``forward(self, input, target)``'s two arguments (or ``names``), given by position or by name."""
    got = list(c.args)
    for k in c.kwargs:
        if k not in names:
            raise ProblemError(c.loc, f"{c.module.type}.forward() got an unexpected keyword argument '{k}' (it takes "
                                      f"{', '.join(names)}): Python raises TypeError")
    for n in names[len(got):]:
        if n not in c.kwargs:
            raise ProblemError(c.loc, f"{c.module.type}.forward() missing required argument '{n}': Python raises "
                                      "TypeError")
        got.append(c.kwargs[n])
    if len(got) != len(names) or any(n in c.kwargs for n in names[:len(c.args)]):
        raise ProblemError(c.loc, f"{c.module.type}.forward() takes {' and '.join(names)} once each: Python raises "
                                  "TypeError")
    return got


def _call(c, fn: str, keys: tuple[str, ...], buffers: tuple[str, ...] = ()):
    """``F.fn(input, target, key=self.key, ...)``, ints handed over as the expression language's numbers."""
    kwargs = {}
    for k in keys:
        v = c.arg(k)
        kwargs[k] = Fraction(v) if isinstance(v, int) and not isinstance(v, bool) else v
    for b in buffers:
        kwargs[b] = c.buffers.get(b)
    return call_function(c.rt, fn, _inputs(c), kwargs, c.loc)


def mse_forward(c):
    return _call(c, "mse_loss", ("reduction",))


def l1_forward(c):
    return _call(c, "l1_loss", ("reduction",))


def smooth_l1_forward(c):
    return _call(c, "smooth_l1_loss", ("reduction", "beta"))


def huber_forward(c):
    return _call(c, "huber_loss", ("reduction", "delta"))


def cross_entropy_forward(c):
    return _call(c, "cross_entropy", ("ignore_index", "reduction", "label_smoothing"), ("weight",))


def nll_forward(c):
    return _call(c, "nll_loss", ("ignore_index", "reduction"), ("weight",))


def bce_forward(c):
    return _call(c, "binary_cross_entropy", ("reduction",), ("weight",))


def bce_with_logits_forward(c):
    return _call(c, "binary_cross_entropy_with_logits", ("reduction",), ("weight", "pos_weight"))


def kl_div_forward(c):
    return _call(c, "kl_div", ("reduction", "log_target"))


def cosine_similarity_forward(c):
    """nn.CosineSimilarity (torch/nn/modules/distance.py): ``F.cosine_similarity(x1, x2, self.dim,
    self.eps)``."""
    return call_function(c.rt, "cosine_similarity", _inputs(c, ("x1", "x2")),
                         {"dim": Fraction(c.arg("dim")), "eps": c.arg("eps")}, c.loc)


FORWARDS = {
    "CosineSimilarity": cosine_similarity_forward,
    "MSELoss": mse_forward,
    "L1Loss": l1_forward,
    "SmoothL1Loss": smooth_l1_forward,
    "HuberLoss": huber_forward,
    "CrossEntropyLoss": cross_entropy_forward,
    "NLLLoss": nll_forward,
    "BCELoss": bce_forward,
    "BCEWithLogitsLoss": bce_with_logits_forward,
    "KLDivLoss": kl_div_forward,
}
