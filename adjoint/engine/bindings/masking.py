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

``Tensor.fill_(value)`` is the same without a mask: a number is ``FillBackward2`` (one edge,
``self``; its kernel converts the number checked, "value cannot be converted to type float
without overflow" beyond float32's range, and runs no overlap check: a stride-0 expanded
gradient in a hook body is filled), a 0-d tensor ``FillBackward3`` (edges ``self``, ``value``:
the node index assignment of a number makes; TensorIterator's overlap check applies), a tensor
with dimensions PyTorch's RuntimeError; in place as every in-place op (version bump,
``rebase_history``, a leaf that requires grad refused).
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
    elif isinstance(value, (Fraction, bool)):   # a Python bool is a Scalar too: True fills 1
        prim, others, params = "masked_fill", [mask], Fraction(int(value)) if isinstance(value, bool) else value
    else:
        from adjoint.engine.bindings.signature import describe
        raise ProblemError(loc, f"{what}(): argument 'value' must be a number or a Tensor, not {describe(value)}: "
                                "not modelled (PyTorch's TypeError lists masked_fill's signatures and how the "
                                "arguments were passed)")
    from adjoint.engine.ops.arith import broadcast_shapes
    value_dims = len(value.shape) if isinstance(value, Tensor) else 0

    def checks():
        """The kernel's checks, after the node packed the mask: expand_outplace(mask, self), then
        the value's dims (masked_fill_ of the clone)."""
        broadcast_shapes(mask.shape, x.shape, loc)
        if value_dims:
            raise TorchError("RuntimeError", "masked_fill_ only supports a 0-dimensional value tensor, but got "
                                             f"tensor with {value_dims} dimension(s).")

    if inplace:
        _inplace_errors(rt, prim, x, mask, others, value_dims, loc)
    else:
        after_packs(rt, prim, [x] + others, loc, checks)
    if inplace:
        from adjoint.engine.inplace import apply_inplace, has_internal_overlap
        if has_internal_overlap(x):   # masked_fill__cpu warns, then writes (no overlap error)
            warns.warn(rt, "UserWarning", warns.MASKED_FILL_EXPANDED)
        return apply_inplace(rt, prim, x, others, params, loc)
    return rt.apply(prim, [x] + others, params, loc)


def _inplace_errors(rt, prim: str, x: Tensor, mask: Tensor, others: list, value_dims: int, loc: Loc) -> None:
    """masked_fill_'s errors in PyTorch's order: check_inplace (a leaf, a view it forbids to
    write), then the node packs the mask, then the kernel: the value's dims, the mask's dtype,
    the expanded-tensor warning, then the mask against self (self is tensor a; a broadcast past
    self is the output's mismatch). Checked in torch 2.13 under saved_tensors_hooks."""
    from adjoint.engine.inplace import check_inplace_allowed, has_internal_overlap
    from adjoint.engine.ops.arith import broadcast_shapes
    from adjoint.engine.ops.masking import mask_error

    error, shape_error = None, False
    if value_dims:
        error = TorchError("RuntimeError", "masked_fill_ only supports a 0-dimensional value tensor, but got tensor "
                                           f"with {value_dims} dimension(s).")
    elif mask.dtype != "bool":
        error = TorchError("RuntimeError", mask_error((mask.dtype,), None), "dtype")
    else:
        shape_error = True
        try:
            shape = broadcast_shapes(x.shape, mask.shape, loc)
            if shape != x.shape:
                error = TorchError("RuntimeError", f"output with shape {list(x.shape)} doesn't match the broadcast "
                                                   f"shape {list(shape)}")
        except TorchError as e:
            error = e
    if error is None:
        return
    ts = [x] + [t for t in others if isinstance(t, Tensor)]
    if rt.grad_enabled and (any(t.needs_grad for t in ts) or (x.is_view and x.grad_base.requires_grad)):
        check_inplace_allowed(x)   # as apply_inplace does before the node
    try:
        rt.raise_after_packs(prim, [x] + others, error, loc)
    except TorchError as e:
        if shape_error and has_internal_overlap(x):   # masked_fill__cpu warns before its TensorIterator
            warns.warn(rt, "UserWarning", warns.MASKED_FILL_EXPANDED)
        raise e from None


def fill_(rt, x: Tensor, value, loc: Loc):
    """``x.fill_(value)``: FillBackward2 (a number, ``float("inf")`` too) or FillBackward3 (a tensor)."""
    from adjoint.engine.inplace import apply_inplace
    _check_input(rt, x, loc, "fill_")
    if isinstance(value, Tensor):
        return apply_inplace(rt, "fill_", x, [value], None, loc)
    if isinstance(value, Infinite):
        return apply_inplace(rt, "fill_scalar", x, [], value.text, loc)
    if isinstance(value, (Fraction, bool)):   # a Python bool is a Scalar too: True fills 1
        return apply_inplace(rt, "fill_scalar", x, [], Fraction(int(value)) if isinstance(value, bool) else value, loc)
    from adjoint.engine.bindings.signature import describe
    raise ProblemError(loc, f"fill_(): argument 'value' must be a number or a Tensor, not {describe(value)}: not "
                            "modelled (PyTorch's TypeError lists fill_'s signatures)")


def lower_fill_(rt, a, loc):
    return fill_(rt, a["self"], a["value"], loc)


def lower_masked_fill(rt, a, loc):
    return masked_fill(rt, a["input"], a["mask"], a["value"], loc)


def lower_masked_fill_method(rt, a, loc):
    return masked_fill(rt, a["self"], a["mask"], a["value"], loc)


def lower_masked_fill_(rt, a, loc):
    return masked_fill(rt, a["self"], a["mask"], a["value"], loc, inplace=True)


_MASK = Param("mask", "tensor")
_VALUE = Param("value", "any")   # a number, float("-inf") / float("inf"), or a 0-d tensor

def lower_masked_select(rt, a, loc):
    """masked_select_out_impl_cpu, after MaskedSelectBackward0 packed the mask and self: a bool
    mask ("masked_select: expected BoolTensor for mask"), then ``expand_outplace(mask, self)``
    (the mask is tensor a of the size error); the count of elements the broadcast mask sets is
    the result's length."""
    import numpy as np
    from adjoint.engine.ops.arith import broadcast_shapes
    x, mask = a["input"], a["mask"]

    def checks():
        if mask.dtype != "bool":
            raise TorchError("RuntimeError", "masked_select: expected BoolTensor for mask")
        shape = tuple(broadcast_shapes(mask.shape, x.shape, loc))
        return int(np.count_nonzero(np.broadcast_to(rt.B.as_indices(mask.value).astype(bool), shape)))

    count = after_packs(rt, "masked_select", [x, mask], loc, checks)
    if count == 0 or 0 in x.shape:
        raise ProblemError(loc, "masked_select selecting no element is not modelled (an empty result: zero-size "
                                "tensors are not; with --structure, a mask computed in the forward has no known "
                                "values)")
    return rt.apply("masked_select", [x, mask], count, loc)


FUNCTIONS = (
    Function("masked_select", (Param("input", "tensor"), Param("mask", "tensor")), lower_masked_select,
             doc="MaskedSelectBackward0 (saves mask, self): a 1-d result"),
    Function("masked_fill", (Param("input", "tensor"), _MASK, _VALUE), lower_masked_fill, where="function",
             doc="MaskedFillBackward0 (a number value; saves the mask) or MaskedFillBackward1 (a 0-d tensor value; "
                 "edges input, value)"),
    Function("masked_fill", (Param("self", "tensor"), _MASK, _VALUE), lower_masked_fill_method, where="method",
             doc="torch.masked_fill(self, mask, value)"),
    Function("masked_fill_", (Param("self", "tensor"), _MASK, _VALUE), lower_masked_fill_, where="method",
             doc="MaskedFillBackward0 / MaskedFillBackward1, in place"),
    Function("fill_", (Param("self", "tensor"), _VALUE), lower_fill_, where="method",
             doc="FillBackward2 (a number value) or FillBackward3 (a 0-d tensor value; edges self, value), in place"),
)
