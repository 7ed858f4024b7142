"""Channel-wise dropout (``F.dropout1d``, ``F.dropout2d``, ``F.dropout3d``: ``nn.Dropout1d/2d/3d``)
and alpha dropout (``F.alpha_dropout``, ``F.feature_alpha_dropout``: ``nn.AlphaDropout``,
``nn.FeatureAlphaDropout``), as torch 2.13 runs them on the CPU (torch/nn/functional.py, ATen's
``_dropout_impl``).

* ``dropout1d``: an input of 2 or 3 dims, else RuntimeError (in eval mode too); an unbatched
  (2-D) one is ``unsqueeze(0)``-ed first and ``squeeze(0)``-ed after, so even in eval mode the
  output is a new tensor (``UnsqueezeBackward0``, ``SqueezeBackward1``); ``dropout3d`` the same
  with 4-D (unbatched) and 5-D inputs, except that another number of dims only warns (and is
  unsqueezed); ``dropout2d`` warns on an input that is not 3-D or 4-D, and on a 3-D one (taken
  as ``(N, C, L)``), and never unsqueezes.
* Then ``feature_dropout``: eval mode, ``p = 0`` or an empty input return the input itself;
  ``p = 1`` multiplies by a 0-d zero; otherwise the keep-mask has one element per batch element
  and channel (``make_feature_noise``: shape ``(N, C, 1, ...)``, RuntimeError under 2 dims),
  scaled by ``1 / (1 - p)``: ``MulBackward0`` (adjoint.engine.bindings.norm.dropout). Only a
  module, whose file gives ``mask:``, drops at random; the function in training mode with
  ``0 < p < 1`` is refused.
* ``alpha_dropout`` / ``feature_alpha_dropout`` (whose ``training`` defaults to False): eval mode,
  ``p = 0`` or an empty input return the input; ``p = 1`` multiplies by a 0-d zero; in training
  with ``0 < p < 1`` the affine noise is not modelled yet (refused). Their modules' forwards pass
  no ``inplace``.
* The in-place forms (``inplace=True``) of an unbatched ``dropout1d`` / ``dropout3d`` change the
  caller's tensor's shape (``unsqueeze_``, ``squeeze_``): not modelled yet, refused.
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.engine import warns
from adjoint.engine.bindings.norm import check_dropout_p, dropout, feature_noise_shape
from adjoint.engine.bindings.signature import Function, Param
from adjoint.engine.graph import Tensor
from adjoint.engine.runtime import TorchError
from adjoint.format.errors import Loc, ProblemError

#: F.dropoutNd's warning on an input of another number of dims (N: 2 or 3)
_OTHER_DIMS = ("dropout{n}d: Received a {d}-D input to dropout{n}d, which is deprecated and will result in an error "
               "in a future release. To retain the behavior and silence this warning, please use dropout instead. "
               "Note that dropout{n}d exists to provide channel-wise dropout on inputs with {n} spatial dimensions, a "
               "channel dimension, and an optional batch dimension (i.e. {lo}D or {hi}D inputs).")
_DROPOUT2D_3D = ("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout behavior is "
                 "desired - input is interpreted as shape (N, C, L), where C is the channel dim. This behavior will "
                 "change in a future release to interpret the input as one without a batch dimension, i.e. shape "
                 "(C, H, W). To maintain the 1D channel-wise dropout behavior, please switch to using dropout1d "
                 "instead.")
_DROPOUT1D_DIMS = ("dropout1d: Expected 2D or 3D input, but received a {d}D input. Note that dropout1d exists to "
                   "provide channel-wise dropout on inputs with 1 spatial dimension, a channel dimension, and an "
                   "optional batch dimension (i.e. 2D or 3D inputs).")


def _unbatched_inplace(n: int, loc: Loc):
    return ProblemError(loc, f"dropout{n}d with inplace=True on an unbatched input changes the caller's tensor's "
                             "shape in place (unsqueeze_, squeeze_): not modelled yet; give a batched input or "
                             "inplace=False")


def dropout_nd(rt, n: int, x: Tensor, p: Fraction, training: bool, inplace: bool, mask, loc: Loc,
               kind: str | None = None) -> Tensor:
    """``F.dropout{n}d(x, p, training, inplace)``; ``mask`` the keep-mask of a module's file (None for the
    function); ``kind`` the module type named in messages."""
    kind = kind or f"Dropout{n}d"
    check_dropout_p(p, loc)
    d = len(x.shape)
    if n == 1 and d not in (2, 3):
        raise TorchError("RuntimeError", _DROPOUT1D_DIMS.format(d=d))
    if n == 2:
        if d not in (3, 4):
            warns.warn(rt, "UserWarning", _OTHER_DIMS.format(n=2, d=d, lo=3, hi=4))
        if d == 3:
            warns.warn(rt, "UserWarning", _DROPOUT2D_3D)
        return dropout(rt, x, p, training, inplace, mask, loc, feature=kind)
    if n == 3 and d not in (4, 5):
        warns.warn(rt, "UserWarning", _OTHER_DIMS.format(n=3, d=d, lo=4, hi=5))
    batched = d == (3 if n == 1 else 5)
    if batched:
        return dropout(rt, x, p, training, inplace, mask, loc, feature=kind)
    if inplace:
        raise _unbatched_inplace(n, loc)
    h = rt.apply("unsqueeze", [x], 0, loc)
    h = dropout(rt, h, p, training, False, mask, loc, feature=kind)
    return rt.apply("squeeze_dim", [h], (0,), loc)


def alpha_dropout(rt, x: Tensor, p: Fraction, training: bool, inplace: bool, feature: bool, loc: Loc) -> Tensor:
    """``_dropout_impl<feature, alpha=true>``: modelled where it draws nothing."""
    from adjoint.engine.inplace import apply_inplace
    check_dropout_p(p, loc)
    if not training or p == 0 or 0 in tuple(x.shape):
        return x
    if p == 1:
        zero = rt.tensor(rt.B.zeros(()), dtype=x.dtype)
        if inplace:
            return apply_inplace(rt, "mul", x, [zero], None, loc)
        return rt.apply("mul", [x, zero], None, loc)
    if feature:
        feature_noise_shape(tuple(x.shape))
    name = "feature_alpha_dropout" if feature else "alpha_dropout"
    raise ProblemError(loc, f"{name} in training mode with 0 < p < 1 (SELU's affine noise, drawn at random) is not "
                            "modelled yet; give training=False (eval mode), p=0 or p=1")


def _lower_nd(n: int):
    def lower(rt, a: dict, loc: Loc):
        return dropout_nd(rt, n, a["input"], a["p"], a["training"], a["inplace"], None, loc, kind=f"Dropout{n}d")
    return lower


def _lower_alpha(feature: bool):
    def lower(rt, a: dict, loc: Loc):
        return alpha_dropout(rt, a["input"], a["p"], a["training"], a["inplace"], feature, loc)
    return lower


_IN = Param("input", "tensor")
_P = Param("p", "number", Fraction(1, 2))
_INPLACE = Param("inplace", "bool", False)

FUNCTIONS = (
    *(Function(f"dropout{n}d", (_IN, _P, Param("training", "bool", True), _INPLACE), _lower_nd(n), where="function",
               doc="channel-wise: eval or p = 0 the input (unbatched 1d/3d: UnsqueezeBackward0, SqueezeBackward1); "
                   "p = 1: MulBackward0 by a 0-d zero; else refused (random mask): use a Dropout{n}d module with mask:")
      for n in (1, 2, 3)),
    Function("alpha_dropout", (_IN, _P, Param("training", "bool", False), _INPLACE), _lower_alpha(False),
             where="function", doc="eval or p = 0: the input; p = 1: MulBackward0 by a 0-d zero; else refused"),
    Function("feature_alpha_dropout", (_IN, _P, Param("training", "bool", False), _INPLACE), _lower_alpha(True),
             where="function", doc="eval or p = 0: the input; p = 1: MulBackward0 by a 0-d zero; else refused"),
)
