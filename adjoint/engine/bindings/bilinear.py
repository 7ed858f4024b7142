"""``bilinear`` (``torch.bilinear``, ``F.bilinear``; ``nn.Bilinear``'s forward), as at::bilinear
runs it in PyTorch 2.13 (a composite; checked in real torch):

* its checks, before any node, in this order: the dtypes all alike ("All tensors must have the
  same dtype, got input1: float, input2: double, weight: float[, bias: float]"), the inputs'
  ranks, their batch sizes, ``input1.size(-1) == weight.size(1)``,
  ``input2.size(-1) == weight.size(2)``, ``bias.size(0) == weight.size(0)`` (each ``size`` read as
  ``sym_size``: a 0-d tensor or a weight of too few dims is the IndexError of ``size``; in each
  comparison the weight's size is read first);
* both inputs reshaped to rows ``(-1, size(-1))`` (``ViewBackward0`` for a contiguous input, also of
  its own shape; ``ReshapeAliasBackward0`` or ``CloneBackward0`` + ``UnsafeViewBackward0`` else),
  ``_trilinear`` (``TrilinearBackward0``, adjoint.engine.ops.trilinear), the result reshaped to the
  batch sizes and ``out`` (``ViewBackward0``; a 1-D pair of inputs gives a 1-D result), then
  ``+ bias`` (``AddBackward0``).
"""

from __future__ import annotations

from adjoint.engine.bindings.attention import _C10 as DTYPE_WORDS
from adjoint.engine.bindings.core import aten_reshape
from adjoint.engine.bindings.glue import size_dim
from adjoint.engine.bindings.signature import Function, Param
from adjoint.engine.graph import Tensor
from adjoint.engine.torch_errors import TorchError
from adjoint.format.errors import Loc, ProblemError


def _dtype_check(x1: Tensor, x2: Tensor, weight: Tensor, bias: Tensor | None, loc: Loc) -> None:
    named = [("input1", x1), ("input2", x2), ("weight", weight)] + ([("bias", bias)] if bias is not None else [])
    if len({t.dtype for _, t in named}) == 1:
        return
    if any(t.dtype not in DTYPE_WORDS for _, t in named):
        raise ProblemError(loc, "bilinear of tensors of different dtypes is modelled for float32, float64, int64 and "
                                "bool only; give the inputs, weight and bias one dtype")
    raise TorchError("RuntimeError", "All tensors must have the same dtype, got " +
                     ", ".join(f"{name}: {DTYPE_WORDS[t.dtype]}" for name, t in named))


def bilinear(rt, x1: Tensor, x2: Tensor, weight: Tensor, bias: Tensor | None, loc: Loc) -> Tensor:
    _dtype_check(x1, x2, weight, bias, loc)
    n1, n2 = len(x1.shape), len(x2.shape)
    if n1 != n2:
        raise TorchError("RuntimeError", f"bilinear(): input dimensions do not match: got {n1} and {n2}")
    for i in range(n1 - 1):
        if x1.shape[i] != x2.shape[i]:
            raise TorchError("RuntimeError", f"bilinear(): input batch dimensions do not match at dim {i}: got "
                                             f"{x1.shape[i]} and {x2.shape[i]}")
    for k, x, name in ((1, x1, "input1"), (2, x2, "input2")):
        want = size_dim(weight, k)          # the right operand of == is read first
        got = size_dim(x, len(x.shape) - 1)
        if got != want:
            raise TorchError("RuntimeError", f"bilinear(): {name} size does not match weight size: got {got} but "
                                             f"expected {want}")
    if bias is not None:
        want, got = size_dim(weight, 0), size_dim(bias, 0)
        if got != want:
            raise TorchError("RuntimeError", f"bilinear(): bias size does not match weight size: got {got} but "
                                             f"expected {want}")
    rows1 = aten_reshape(rt, x1, _rows(x1), loc)
    rows2 = aten_reshape(rt, x2, _rows(x2), loc)
    out = rt.apply("_trilinear", [rows1, weight, rows2], None, loc)
    out = aten_reshape(rt, out, tuple(x1.shape[:-1]) + (weight.shape[0],), loc)
    if bias is not None:
        out = rt.apply("add", [out, bias], None, loc)
    return out


def _rows(x: Tensor) -> tuple:
    """``reshape({-1, size(-1)})``'s shape (-1 inferred: a last size of 0 is refused, as ambiguous)."""
    last = x.shape[-1]
    if last == 0:
        raise TorchError("RuntimeError", "cannot reshape tensor of 0 elements into shape [-1, 0] because the "
                                         "unspecified dimension size -1 can be any value and is ambiguous")
    count = 1
    for d in x.shape:
        count *= d
    return (count // last, last)


def lower_bilinear(rt, a: dict, loc: Loc):
    return bilinear(rt, a["input1"], a["input2"], a["weight"], a["bias"], loc)


FUNCTIONS = (
    Function("bilinear", (Param("input1", "tensor"), Param("input2", "tensor"), Param("weight", "tensor"),
                          Param("bias", "tensor", None)),
             lower_bilinear, where="function",
             doc="ViewBackward0 (each input to rows), TrilinearBackward0 (edges input1, weight, input2), "
                 "ViewBackward0 (to the batch sizes), AddBackward0 (+ bias)"),
)
