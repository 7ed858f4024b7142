"""PROVISIONAL functions the attention composite needs, owned by other families and kept here
only until they land (the lead reconciles; the names are theirs, so a second definition fails
loudly at import): ``softmax`` (activations: ``SoftmaxBackward0``) and ``bmm`` (matmul:
``BmmBackward0``). Both are called through :func:`adjoint.functions.call_function`, so the
owners' versions replace these without touching the callers."""

from __future__ import annotations

from ..errors import Loc, ProblemError
from . import Function, Param
from .views import dim_index


def lower_softmax(rt, a: dict, loc: Loc):
    x = a["input"]
    nd = len(x.shape)
    dim = a["dim"]
    if dim is None:  # F._get_softmax_dim (with its deprecation warning)
        dim = 0 if nd in (0, 1, 3) else 1
    return rt.apply("softmax", [x], dim_index(dim, max(nd, 1), loc) if nd else 0, loc)


def lower_bmm(rt, a: dict, loc: Loc):
    x, y = a["input"], a["mat2"]
    if len(x.shape) != 3 or len(y.shape) != 3:
        raise ProblemError(loc, f"bmm needs two 3-D tensors, got {len(x.shape)}-D and {len(y.shape)}-D: PyTorch "
                                "raises 'batch1 must be a 3D tensor'")
    return rt.apply("bmm", [x, y], None, loc)


FUNCTIONS = (
    Function("softmax", (Param("input", "tensor"), Param("dim", "int", None)), lower_softmax,
             doc="PROVISIONAL: SoftmaxBackward0"),
    Function("bmm", (Param("input", "tensor"), Param("mat2", "tensor")), lower_bmm, doc="PROVISIONAL: BmmBackward0"),
)
