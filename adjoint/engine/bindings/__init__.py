"""The expression language's functions and Tensor methods, named as PyTorch names them.

Each :class:`Function` is one name a problem expression may call (``softmax(x, dim=-1)``,
``F.cross_entropy(...)``, ``x.view(2, -1)``): its parameters as PyTorch declares them (so
arguments bind positionally or by keyword, with PyTorch's defaults), whether it is a
``torch``/``F`` function, a Tensor method or both, and its *lowering*: which primitives
(:mod:`adjoint.engine.ops`) PyTorch's dispatch applies, in which order, decided from the
operands' shapes, dtypes and ``requires_grad`` exactly as ATen and the decompositions do.

:data:`FUNCTIONS` (``torch.X`` / ``F.X``) and :data:`METHODS` (``Tensor.X``) are assembled
from the families listed in :data:`FAMILIES` (each imported when a name is first looked up in
it: :mod:`adjoint.engine.families`); a name PyTorch has that no family defines is
refused with a message that says so (``adjoint.format.torch_names``).
"""

from __future__ import annotations

from adjoint.format.errors import Loc, ProblemError
from adjoint.engine.bindings.signature import REQUIRED, Function, Param, bind, check_kind, describe
from adjoint.engine.families import Families, Table, file_once

__all__ = ["FAMILIES", "FUNCTIONS", "METHODS", "FUNCTION_NAMES", "REQUIRED", "Function", "Param", "bind",
           "call_function", "check_kind", "describe"]

#: the family modules, in the order a lookup imports them
FAMILIES = ("core", "views", "activations", "reductions", "nn", "losses", "masking", "swish", "indexing", "complexfns",
            "attention", "conv3d", "delayed", "basics", "rearrange", "glue", "factories", "einsum", "upsample", "packed",
            "rnn_utils",
            "margin_losses", "nll_losses", "bilinear",
            "embedding_bag", "pointwise3", "index_write", "feature_dropout",
            "transpose_inplace")

_functions: dict[str, Function] = {}
_methods: dict[str, Function] = {}


def _file(family) -> None:
    for fn in family.FUNCTIONS:
        if fn.where in ("function", "both"):
            file_once(_functions, fn.name, fn, "function")
        if fn.where in ("method", "both"):
            file_once(_methods, fn.name, fn, "method")


_families = Families(__name__, FAMILIES, _file)
FUNCTIONS: Table = Table(_families, _functions)
METHODS: Table = Table(_families, _methods)


def __getattr__(name: str):
    if name == "FUNCTION_NAMES":   # every function's name, in the families' order (imports them all)
        return tuple(FUNCTIONS)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: ``torch.X`` names that are ATen's own bindings with another signature or other defaults than
#: ``F.X`` (checked in torch 2.13: ``torch.kl_div(x, t)``, ``torch.binary_cross_entropy_with_logits(x,
#: t)`` and the margin losses do not reduce, the others take their arguments in another order):
#: refused, never bound with F's signature (``torch.adaptive_max_pool1d``, which returns (output,
#: indices), has its own lowering; ``torch.relu`` and the others whose binding takes fewer of F's
#: arguments are checked against it: adjoint.engine.bindings.aten_parser)
ATEN_SIGNATURES = {
    "batch_norm": "(input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn_enabled)",
    "embedding": "(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False)",
    "binary_cross_entropy_with_logits": "(input, target, weight=None, pos_weight=None, reduction=0: no reduction by "
                                        "default)",
    "kl_div": "(input, target, reduction=0: no reduction by default, log_target=False)",
    "instance_norm": "(input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps, "
                     "cudnn_enabled)",
    # reduction an int, and no reduction by default (torch 2.13: torch.margin_ranking_loss(a, b, y) is
    # elementwise, F's the mean)
    "cosine_embedding_loss": "(input1, input2, target, margin=0., reduction: an int, no reduction by default)",
    "hinge_embedding_loss": "(input, target, margin=1., reduction: an int, no reduction by default)",
    "margin_ranking_loss": "(input1, input2, target, margin=0., reduction: an int, no reduction by default)",
}


def call_function(rt, name: str, args: list, kwargs: dict, loc: Loc, method_of=None, types=None, prefix: str = ""):
    """Call ``name`` (a function, or with ``method_of`` a Tensor method); KeyError when there is none.
    ``types``: the arguments' Python types as the interpreter read them (see :func:`bind`)."""
    if method_of is None and prefix == "torch." and name in ATEN_SIGNATURES:
        raise ProblemError(loc, f"torch.{name} is ATen's binding {ATEN_SIGNATURES[name]}, not F.{name}'s "
                                f"signature, and is not modelled; call F.{name}(...) (torch.nn.functional)")
    if method_of is None and prefix == "torch.":
        from adjoint.engine.bindings.aten_parser import ATEN_PARAMS, aten_call
        if name in ATEN_PARAMS:   # ATen's own signature, checked first: PyTorch's TypeError is the answer
            args, kwargs, types = aten_call(name, list(args), dict(kwargs), types)
    if method_of is not None:
        fn = METHODS[name]
        args = [method_of] + list(args)
        what = f"Tensor.{name}"
        if types is not None:
            types = ([None] + list(types[0]), types[1])
    else:
        fn = FUNCTIONS[name]
        what = name
    return fn.lower(rt, bind(fn, args, kwargs, loc, what, types, prefix), loc)
