"""``masked_fill`` and ``masked_fill_``: what PyTorch 2.13 runs for each (checked in real torch).

* ``torch.masked_fill(input, mask, value)`` / ``Tensor.masked_fill(mask, value)``: a number
  value (``float("-inf")`` and ``float("inf")`` too: :mod:`adjoint.engine.infinity`) is ``MaskedFillBackward0`` (one edge, ``input``), a 0-d tensor value
  ``MaskedFillBackward1`` (edges ``input``, ``value``; the value's edge is None when it needs
  no gradient); both save the mask; the result has the broadcast shape of input and mask;
* ``Tensor.masked_fill_(mask, value)``: the same nodes in place (version bump,
  ``rebase_history``, PyTorch's refusal on a leaf that requires grad); the mask must broadcast
  to the tensor written;
* the mask must be bool: an int64 or float mask is PyTorch's RuntimeError, raised after the
  node is made (a prediction); the input must be a float tensor here (filling an int64 or bool
  tensor, whose value PyTorch truncates, is not modelled).
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.format.errors import Loc, ProblemError
from adjoint.engine.graph import Tensor
from adjoint.engine.bindings.signature import Function, after_packs
from adjoint.engine.torch_errors import TorchError
from adjoint.engine.bindings.signature import Param
from adjoint.engine.infinity import Infinite
from adjoint.engine import warns


def _check_input(rt, x: Tensor, loc: Loc, what: str) -> None:
    if x.dtype in ("int64", "bool"):
        raise ProblemError(loc, f"{what} of {'an' if x.dtype == 'int64' else 'a'} {x.dtype} tensor is not modelled yet "
                                "(PyTorch truncates the value to the tensor's dtype); fill a float tensor")


def masked_fill(rt, x: Tensor, mask: Tensor, value, loc: Loc, inplace: bool = False):
    """One MaskedFillBackward0 (a number, ``float("-inf")`` too) or MaskedFillBackward1 (a 0-d
    tensor) node."""
    what = "masked_fill_" if inplace else "masked_fill"
    _check_input(rt, x, loc, what)
    if isinstance(value, Tensor):
        prim, others, params = "masked_fill_tensor", [value, mask], None
    elif isinstance(value, Infinite):
        prim, others, params = "masked_fill", [mask], value.text
    elif isinstance(value, Fraction) and not isinstance(value, bool):
        prim, others, params = "masked_fill", [mask], value
    else:
        from adjoint.engine.bindings.signature import describe
        raise ProblemError(loc, f"{what}(): argument 'value' must be a number or a Tensor, not {describe(value)}: "
                                "PyTorch raises TypeError")
    from adjoint.engine.ops.arith import broadcast_shapes
    value_dims = len(value.shape) if isinstance(value, Tensor) else 0

    def checks():
        """The kernel's checks, after the node packed the mask: expand_outplace(mask, self), then
        the value's dims (masked_fill_ of the clone)."""
        broadcast_shapes(mask.shape, x.shape, loc)
        if value_dims:
            raise TorchError("RuntimeError", "masked_fill_ only supports a 0-dimensional value tensor, but got "
                                             f"tensor with {value_dims} dimension(s).")

    if inplace:   # PyTorch checks the in-place write first (a leaf, a view): these stay refusals here
        try:
            if value_dims:
                checks()
            broadcast_shapes(x.shape, mask.shape, loc)   # in place, self is tensor a
        except TorchError as e:
            raise ProblemError(loc, f"{what}: PyTorch raises RuntimeError '{e.message}' (in place: not modelled "
                                    "as an answer yet)") from None
    else:
        after_packs(rt, prim, [x] + others, loc, checks)
    if inplace:
        from adjoint.engine.inplace import apply_inplace, has_internal_overlap
        if has_internal_overlap(x):   # masked_fill__cpu warns, then writes (no overlap error)
            warns.warn(rt, "UserWarning", warns.MASKED_FILL_EXPANDED)
        return apply_inplace(rt, prim, x, others, params, loc)
    return rt.apply(prim, [x] + others, params, loc)


def lower_masked_fill(rt, a, loc):
    return masked_fill(rt, a["input"], a["mask"], a["value"], loc)


def lower_masked_fill_method(rt, a, loc):
    return masked_fill(rt, a["self"], a["mask"], a["value"], loc)


def lower_masked_fill_(rt, a, loc):
    return masked_fill(rt, a["self"], a["mask"], a["value"], loc, inplace=True)


_MASK = Param("mask", "tensor")
_VALUE = Param("value", "any")   # a number, float("-inf") / float("inf"), or a 0-d tensor

FUNCTIONS = (
    Function("masked_fill", (Param("input", "tensor"), _MASK, _VALUE), lower_masked_fill, where="function",
             doc="MaskedFillBackward0 (a number value; saves the mask) or MaskedFillBackward1 (a 0-d tensor value; "
                 "edges input, value)"),
    Function("masked_fill", (Param("self", "tensor"), _MASK, _VALUE), lower_masked_fill_method, where="method",
             doc="torch.masked_fill(self, mask, value)"),
    Function("masked_fill_", (Param("self", "tensor"), _MASK, _VALUE), lower_masked_fill_, where="method",
             doc="MaskedFillBackward0 / MaskedFillBackward1, in place"),
)
