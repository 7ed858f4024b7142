"""``embedding(..., max_norm=M, norm_type=p)``: F.embedding first runs
``torch.embedding_renorm_(weight.detach(), input, M, p)`` under ``no_grad`` (PyTorch 2.13,
``embedding_renorm_cpu_`` in aten/src/ATen/native/Embedding.cpp):

    checkDim(self, 2); checkScalarTypes(indices, {Long, Int})
    sorted_indices = sort(indices.flatten())                 # repeated indices: the first only
    for each distinct i, in ascending order:
        row = self[i]                                        # select(): a negative i counts from the end
        norm = row.norm(p).item<double>()
        if norm > M: row *= M / (norm + 1e-7)

The rows are written inside the kernel; ADInplaceOrView bumps the weight's version counter once
when the kernel returns (also when no row changed; not at all when ``select`` raised on an index
out of range, after the rows before it were already scaled). A node that saved the weight before
then fails its version check in backward, and every later read sees the new rows.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from adjoint.engine.graph import Tensor
from adjoint.engine.inplace import write, write_in_kernel
from adjoint.engine.ops import REGISTRY
from adjoint.engine.ops.embedding import RenormSpec
from adjoint.engine.torch_errors import TorchError
from adjoint.format.errors import Loc, ProblemError


def embedding_renorm(rt, indices: Tensor, weight: Tensor, max_norm, norm_type, loc: Loc) -> None:
    from adjoint.engine.bindings.views import _EXPAND_TYPE_NAMES as type_names
    if isinstance(max_norm, bool) or not isinstance(max_norm, (int, Fraction)) or \
            isinstance(norm_type, bool) or not isinstance(norm_type, (int, Fraction)) or norm_type <= 0:
        raise ProblemError(loc, "embedding's max_norm and norm_type are modelled as finite numbers (norm_type > 0) "
                                "only; give them as such")
    if len(weight.shape) != 2:
        raise TorchError("RuntimeError", f"Expected 2-dimensional tensor, but got {len(weight.shape)}-dimensional "
                                         "tensor for argument #1 'self' (while checking arguments for embedding_renorm_)")
    if indices.dtype != "int64":
        if indices.dtype not in type_names:
            raise ProblemError(loc, f"embedding of {indices.dtype} indices is not modelled here; declare the indices "
                                    "with dtype: int64")
        raise TorchError("RuntimeError", "Expected tensor for argument #2 'indices' to have one of the following "
                                         f"scalar types: Long, Int; but got {type_names[indices.dtype]} instead "
                                         "(while checking arguments for embedding_renorm_)")
    if rt.B.is_symbolic(weight.value):   # whether a row's norm exceeds max_norm depends on the symbols
        raise ProblemError(loc, "embedding with max_norm over a weight with free symbols is not modelled (which rows "
                                "exceed max_norm depends on their values); give numbers, or solve with --numeric")
    n = weight.shape[0]
    distinct = np.unique(rt.B.as_indices(indices.value).reshape(-1))   # sorted ascending
    bad = distinct[(distinct < -n) | (distinct >= n)]
    if bad.size and bad[0] < -n:   # the first index select() meets: nothing scaled yet
        raise _out_of_range(int(bad[0]), weight.shape)
    spec = RenormSpec(Fraction(max_norm), Fraction(norm_type))
    before = [weight.value, indices.value]
    value = REGISTRY["embedding_renorm"].forward(rt.B, before, spec)   # the rows in range
    if bad.size:   # the rows before it were scaled, in the kernel: no version bump
        write_in_kernel(rt, weight, value)
        raise _out_of_range(int(bad[0]), weight.shape)
    write(rt, weight, value)
    rt.record("embedding_renorm", [weight, indices], [weight], spec, None, loc, before)


def _out_of_range(i: int, shape) -> TorchError:
    return TorchError("IndexError", f"select(): index {i} out of range for tensor of size {list(shape)} at dimension 0")
