"""In-place ops, as PyTorch 2.13's autograd handles them.

* the version counter (shared by a base, its views and ``detach()``-ed aliases) goes up;
* on a tensor that is not a view: one node (the out-of-place op's, e.g. ``MulBackward0`` for
  ``mul_``), whose first edge is the tensor's *previous* gradient edge; the tensor's
  ``grad_fn`` becomes that node (``rebase_history``): hooks registered before stay on the
  old node, the tensor's hook dict starts afresh, a ``retain_grad`` moves to the new node;
* on a view: the base's history is rewritten instead: its new ``grad_fn`` is a ``CopySlices``
  wrapping the op's node (whose hooks then never run: CopySlices calls it directly), and the
  view's ``grad_fn`` is regenerated as ``AsStridedBackward0`` on top of it (other views of the
  base regenerate theirs when next used);
* an op whose derivative needs the original ``self`` clones it first (one more
  ``sequence_nr``) and saves the clone;
* PyTorch's refusals: a leaf that requires grad (or a view of one) under grad mode, and an
  output of a custom Function (``BackwardHookFunction`` included: the inputs and output of a
  module with full backward hooks) that is a view of its input.

``x[idx] = v`` is ``x[idx].copy_(v)`` on the view indexing gives (a lone full slice writes
into ``x`` itself), as ``THPVariable_setitem`` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from adjoint.format.errors import Loc, ProblemError
from adjoint.engine.graph import INF_SEQ, CopySlicesWrite, Edge, Node, SavedVariable, Tensor
from adjoint.values.strides import contiguous_strides
from adjoint.engine.ops import REGISTRY
from adjoint.engine.runtime import float32_params
from adjoint.engine.inference import check_bump, check_save
from adjoint.engine.torch_errors import TYPE_NAMES, TorchError
from adjoint.engine.view_history import rebase_message, regenerate, view_value
from adjoint.engine.complex_grad import refuse_complex_inplace
from adjoint.engine import int_arith
from adjoint.engine.pyfloat import PyFloat
from adjoint.engine.loop_order import GRAIN_SIZE, broadcast_strides, iteration_rank, scalar_loop, sequential_operands

#: ``t op= v`` for a tensor ``t``: Tensor.__iadd__ and friends (``@=`` is not in-place in torch).
AUGMENTED = {"+": "add_", "-": "sub_", "*": "mul_", "/": "div_", "**": "pow_"}


@dataclass(frozen=True)
class InplaceMethod:
    """An in-place Tensor method (add_, mul_, ...): the primitive it runs and the arguments it takes."""

    name: str
    prim: str | None                 # the primitive whose node the in-place op makes (None: chosen per call)
    takes: tuple[str, ...]           # the argument names after self


INPLACE_METHODS = {m.name: m for m in (
    InplaceMethod("add_", None, ("other",)), InplaceMethod("sub_", None, ("other",)),
    InplaceMethod("mul_", "mul", ("other",)), InplaceMethod("div_", "div", ("other",)),
    InplaceMethod("pow_", None, ("exponent",)), InplaceMethod("neg_", "neg", ()),
    InplaceMethod("relu_", "relu", ()), InplaceMethod("tanh_", "tanh", ()), InplaceMethod("sigmoid_", "sigmoid", ()),
    InplaceMethod("exp_", "exp", ()), InplaceMethod("log_", "log", ()), InplaceMethod("sin_", "sin", ()),
    InplaceMethod("cos_", "cos", ()), InplaceMethod("sqrt_", "sqrt", ()), InplaceMethod("abs_", "abs", ()),
    InplaceMethod("copy_", "copy_", ("src",)), InplaceMethod("zero_", "zero_", ()),
    InplaceMethod("reciprocal_", "reciprocal", ()), InplaceMethod("sign_", "sign", ()),
    InplaceMethod("square_", None, ()), InplaceMethod("clamp_min_", None, ("min",)),
    InplaceMethod("clamp_max_", None, ("max",)), InplaceMethod("lerp_", None, ("end", "weight")),
    InplaceMethod("atan2_", "atan2", ("other",)), InplaceMethod("arctan2_", "atan2", ("other",)),
) + tuple(InplaceMethod(f"{fn}_", fn, ()) for fn in ("rsqrt", "log1p", "expm1", "atan", "erf", "sinh", "cosh", "tan", "log2",
                                                     "log10"))}


def scaled_by_alpha(rt, name: str, operands: list, alpha, loc: Loc, types: dict | None = None):
    """``other * alpha`` for ``add(x, other, alpha=...)`` / ``sub`` / ``add_``: PyTorch's one kernel
    ``x + alpha * other``, the same values (alpha cast to the dtype as a wrapped number is), when no
    node records it (grad mode off -- a hook body, ``no_grad`` -- or nothing requires grad: an SGD
    step ``p.add_(p.grad, alpha=-lr)``). Recorded, it is one AddBackward0 holding alpha, not
    modelled yet: refused."""
    x, other = operands
    if isinstance(alpha, bool) or not isinstance(alpha, Fraction):
        raise ProblemError(loc, f"{name}(..., alpha=...) takes a real number here")
    types = types or {}
    tensors = [t for t in operands if isinstance(t, Tensor)]
    integral = bool(tensors) and all(t.dtype in ("int64", "bool") for t in tensors)
    float_other = isinstance(other, Fraction) and (other.denominator != 1 or isinstance(other, PyFloat)
                                                   or types.get("other") == "float")
    if integral and not float_other:
        # an integral result (adjoint.engine.int_arith): alpha's own checks and cast
        return int_arith.scaled_by_alpha(rt, name, x, other, alpha, types.get("alpha"), loc)
    if alpha == 1:   # (alpha=1.0 written as a float, beside a float operand: the plain op)
        return other
    if rt.grad_enabled and any(isinstance(t, Tensor) and t.needs_grad for t in operands):
        raise ProblemError(loc, f"{name}(..., alpha={alpha}) recorded by autograd (AddBackward0 holding alpha) is not "
                                f"modelled yet; write the product: x {'-' if name.startswith('sub') else '+'} "
                                f"{alpha} * y (with grad mode off, as in a hook body, alpha is modelled)")
    if isinstance(other, Tensor):
        return rt.apply("mul", [other, alpha], None, loc)
    return PyFloat(other * alpha) if float_other and integral else other * alpha   # (i + 2.0 * 2: float32)


def refuse_atan2_operands(rt, operands: list, loc: Loc) -> None:
    """atan2 of an infinite or nan element (C's atan2 has its own values there: atan2(inf, inf) =
    pi / 4) or of values with free symbols (the quadrant depends on them): refused, not guessed."""
    for t in operands:
        if rt.B.is_symbolic(t.value):
            raise ProblemError(loc, "atan2 of values with free symbols is not modelled (which quadrant, hence which "
                                    "branch of atan, depends on them); bind the symbols or give numbers")
        if rt.B.has_nonfinite(t.value):
            raise ProblemError(loc, "atan2 of an infinite or nan element is not modelled (C's atan2 has its own "
                                    "values there); give finite values")


def call_inplace(rt, name: str, target: Tensor, args: list, kwargs: dict, loc: Loc):
    """``target.name(*args)``, in place; returns ``target``."""
    m = INPLACE_METHODS[name]
    if name in ("add_", "sub_") and set(kwargs) == {"alpha"} and len(args) == 1:   # p.add_(p.grad, alpha=-lr)
        args, kwargs = [scaled_by_alpha(rt, name, [target, args[0]], kwargs["alpha"], loc)], {}
    if name == "lerp_":
        return lerp_(rt, target, args, kwargs, loc)
    if kwargs:
        raise ProblemError(loc, f"Tensor.{name}() takes no keyword arguments here")
    if len(args) != len(m.takes):
        raise ProblemError(loc, f"Tensor.{name}() takes {len(m.takes)} argument(s) ({', '.join(m.takes) or 'none'}), "
                                f"got {len(args)}: PyTorch's TypeError is not modelled (CPython words it by how the "
                                f"method is called, 'TensorBase.{name}()' or 'Tensor.{name}()'; the argument parser "
                                "lists the overloads)")
    for a in args:
        if not isinstance(a, (Tensor, Fraction)) or isinstance(a, bool):
            raise ProblemError(loc, f"Tensor.{name}() needs a tensor or a number, got {type(a).__name__}")
    if name in ("add_", "sub_"):
        other = args[0]
        return apply_inplace(rt, "add" if name == "add_" else "sub", target, [other], None, loc)
    if name == "pow_":
        e = args[0]
        if isinstance(e, Tensor):
            return apply_inplace(rt, "pow_tensor", target, [e], None, loc)
        return apply_inplace(rt, "pow_scalar", target, [], e, loc)
    if name == "square_":   # Tensor.square_ is pow_(2): PowBackward0, a clone of self saved
        return apply_inplace(rt, "pow_scalar", target, [], Fraction(2), loc)
    if name in ("clamp_min_", "clamp_max_"):
        if isinstance(args[0], Tensor):
            raise ProblemError(loc, f"Tensor.{name}() with a tensor bound is not modelled yet; use a number bound")
        return apply_inplace(rt, name[:-1], target, [], args[0], loc)
    if name in ("atan2_", "arctan2_"):
        if not isinstance(args[0], Tensor):
            raise ProblemError(loc, f"{name}(): argument 'other' must be a Tensor, not a number: PyTorch's TypeError is "
                                    "not modelled (its argument parser words it by how the number was written)")
        refuse_atan2_operands(rt, [target, args[0]], loc)
    if name == "copy_" and isinstance(args[0], Fraction):
        args = [rt.wrapped_number(args[0])]
    return apply_inplace(rt, m.prim, target, list(args), None, loc)


def lerp_(rt, target: Tensor, args: list, kwargs: dict, loc: Loc) -> Tensor:
    """``target.lerp_(end, weight)`` with a number ``weight`` where no node records it (grad mode
    off -- a hook body, ``no_grad`` -- or nothing requires grad: an EMA ``ema.lerp_(grad, 0.1)``).
    ATen's lerp kernel (``aten/src/ATen/native/Lerp.h``) computes ``self + weight * (end - self)``
    when ``|weight| < 0.5`` and ``end - (end - self) * (1 - weight)`` otherwise, in one pass that
    bumps ``target``'s version once: here the same two roundings' operations with no node, then one
    ``add_`` into ``target``. Recorded (LerpBackward0), or with a tensor ``weight``, it is refused."""
    names = ("end", "weight")
    if len(args) > 2 or set(kwargs) - set(names[len(args):]):
        raise ProblemError(loc, "Tensor.lerp_() takes end and weight (positionally or by those names): other "
                                "arguments are PyTorch's TypeError, not modelled")
    given = dict(zip(names, args)) | dict(kwargs)
    if set(given) != set(names):
        raise ProblemError(loc, "Tensor.lerp_() needs end and weight: PyTorch's TypeError, not modelled")
    end, weight = given["end"], given["weight"]
    if not isinstance(end, Tensor):
        raise ProblemError(loc, "Tensor.lerp_(end, weight) needs a tensor end: PyTorch's TypeError, not modelled")
    if isinstance(weight, bool) or not isinstance(weight, Fraction):
        raise ProblemError(loc, "Tensor.lerp_() with a tensor weight is not modelled yet; give the weight as a number")
    if target.dtype not in ("float32", "float64"):
        raise ProblemError(loc, f"Tensor.lerp_() of a {target.dtype} tensor is PyTorch's NotImplementedError (its kernel "
                                "takes floating types only), not modelled; lerp float tensors")
    if end.dtype != target.dtype:
        raise ProblemError(loc, f"Tensor.lerp_() of a {target.dtype} tensor with a {end.dtype} end is PyTorch's "
                                "RuntimeError, not modelled; give tensors of one dtype")
    if rt.grad_enabled and (target.needs_grad or end.needs_grad):
        raise ProblemError(loc, "Tensor.lerp_() recorded by autograd (LerpBackward0) is not modelled yet; with grad "
                                "mode off (a hook body, no_grad) it is, or write target.add_(weight * (end - target))")
    diff = rt.apply("sub", [end, target], None, loc)
    if abs(weight) < Fraction(1, 2):
        return apply_inplace(rt, "add", target, [rt.apply("mul", [diff, weight], None, loc)], None, loc)
    # end - diff * (1 - weight) written into target: target + (end - target - diff * (1 - weight)) is not
    # one rounding, so the value is made out of place and copied in (copy_: one version bump, as lerp_'s)
    out = rt.apply("sub", [end, rt.apply("mul", [diff, 1 - weight], None, loc)], None, loc)
    return apply_inplace(rt, "copy_", target, [out], None, loc)


# ----------------------------------------------------------------------------- the in-place kernel

def apply_inplace(rt, prim: str, target: Tensor, others: list, params, loc: Loc) -> Tensor:
    op = REGISTRY[prim]
    ts = [target] + [x if isinstance(x, Tensor) else rt.wrapped_number(x) for x in others]
    refuse_complex_inplace(ts, prim, loc)
    # TensorIterator finds operands that do not broadcast, or a broadcast shape that is not self's,
    # in the kernel: after the node was made and packed what it saves
    try:
        out_shape = tuple(op.shape([t.shape for t in ts], params, loc))
        shape_error = None if out_shape == target.shape else TorchError(
            "RuntimeError", f"output with shape {list(target.shape)} doesn't match the broadcast shape "
                            f"{list(out_shape)}")
    except TorchError as e:
        shape_error = e
    rg_in = [t.needs_grad for t in ts]
    make_node = rt.grad_enabled and any(rg_in)
    # check_inplace(self, requires_grad): only when the op records, or writes into a view of a
    # tensor that requires grad (PyTorch's view then requires grad even when made under no_grad)
    if rt.grad_enabled and (any(rg_in) or (target.is_view and target.grad_base.requires_grad)):
        check_inplace_allowed(target)
    view = target.is_view
    # the node before its edges (see Runtime.apply); a generated NotImplemented node draws no number
    seq = (rt._new_seq() if op.takes_sequence_nr else INF_SEQ) if make_node else None
    # collect_next_edges runs only when the op records: under no_grad a stale view's grad_fn is
    # not read (not regenerated, and a view PyTorch forbids to regenerate does not raise)
    old_edge = gradient_edge_now(rt, target) if make_node and target.needs_grad else None
    node = None
    if make_node:
        # a non-differentiable operand (masked_fill_'s mask, last in the op's order) has no edge
        diff = op.differentiable or (True,) * len(ts)
        edges = [old_edge] + [rt.gradient_edge(t) if t.needs_grad else None for t, d in zip(ts[1:], diff[1:]) if d]
        node = rt.new_node(op.node, edges, op, params, ts, loc, seq)
        if op.sequence_nr_max:   # torch::autograd::Error: UINT64_MAX, runs first once ready
            node.seq = INF_SEQ
        save_inputs(rt, node, op, ts)
    rt.check_dtypes(op, ts, params)
    if shape_error is not None:
        raise shape_error
    if target.dtype == "float32" and params is not None:   # the kernel converts a number parameter to float
        error = float32_params(op, params, loc)
        if error is not None:
            raise error
    numbers = [x for x in others if not isinstance(x, Tensor)]
    others = [] if op.clones_aliased_value else ts[1:]
    check_overlap(target, others, op.checks_internal_overlap)
    plan = refuse_order_dependent(target, others, loc, prim)
    if target.dtype != rt.dtype:
        check_cast(rt, prim, target, ts[1:], numbers, params, loc)
    values = [t.value for t in ts]
    base_before = target.grad_base.value if view else None
    if plan is not None:   # a scalar loop reading what it already wrote (adjoint.engine.loop_order)
        index = next(i for i, t in enumerate(ts) if t is plan[0])
        values = sequential_operands(rt.B, op, values, params, index, plan[1], target.shape)
    new_value = rt.B.after_op(op, values, params, op.forward(rt.B, values, params), loc, rt.active)
    if target.dtype in ("int64", "bool") and prim in int_arith.ELEMENTWISE:
        new_value = int_arith.normalize(rt.B, new_value, target.dtype, loc, f"{prim}_", values)
    write(rt, target, new_value)
    rt.record(prim, ts, [target], params, node, loc, values)
    if node is not None:
        node.outputs = [(target.shape, target.dtype)]
        node.output_values = [new_value]
        if view:
            rebase_view(rt, target, node, loc, base_before)
        else:
            rebase(target, node)
        for s in op.saves:
            if s.what == "out":
                save_one(rt, node, s.name, target, True, target.grad_fn if view else None)
    return target


#: in-place arithmetic whose result type TensorIterator computes (then casts into the written tensor)
_ARITH = ("add", "sub", "mul", "div", "pow_tensor", "pow_scalar")


def check_cast(rt, prim: str, target: Tensor, operands: list, numbers: list, params, loc: Loc) -> None:
    """An in-place op into a bool or int64 tensor: TensorIterator's common dtype must cast to the
    written tensor's ("result type Float can't be cast to the desired output type Bool"). A float
    tensor operand makes it that float type; a Python float (or pow_'s fractional exponent) the
    default dtype, float32; true division always a float; an int64 operand or a Python integer
    written into a bool tensor int64. What is left (bool or int64 arithmetic whose result fits) is
    integer arithmetic: add_, sub_, mul_, neg_ are modelled (:mod:`adjoint.engine.int_arith`),
    any other in-place op is refused."""
    if prim in _ARITH:
        if prim == "pow_scalar":
            numbers = [params]
        result = None
        floats = [t.dtype for t in operands if not t.wrapped and t.dtype not in ("int64", "bool")]
        if floats:
            result = floats[0]
        elif any(Fraction(n).denominator != 1 for n in numbers) or prim == "div":
            result = "float32"
        elif target.dtype == "bool" and (numbers or any(t.dtype == "int64" for t in operands if not t.wrapped)):
            result = "int64"
        if result is not None:
            raise TorchError("RuntimeError", f"result type {TYPE_NAMES[result]} can't be cast to the desired output "
                                             f"type {TYPE_NAMES[target.dtype]}", "dtype")
    if prim in int_arith.ELEMENTWISE and target.dtype in ("int64", "bool"):
        return   # integer arithmetic of the written tensor's own dtype (adjoint.engine.int_arith)
    raise ProblemError(loc, f"{prim} written in place into a {target.dtype} tensor is not modelled (integer and bool "
                            "arithmetic); compute in a float tensor")


def check_inplace_allowed(t: Tensor) -> None:
    if t.creation and t.creation[0] in ("custom", "multi", "no_grad", "inference"):
        raise TorchError("RuntimeError", rebase_message(t, False), "view_inplace")
    if t.is_leaf and t.requires_grad and not t.is_view:
        raise TorchError("RuntimeError", "a leaf Variable that requires grad is being used in an in-place operation.",
                         "leaf_inplace")
    # (check_inplace asks the view's requires_grad and its base's is_leaf: a base detach_()ed since
    # the view was made is a leaf, while the view keeps its grad_fn)
    if t.is_view and t.grad_base.is_leaf and (t.grad_base.requires_grad or t.grad_fn is not None):
        raise TorchError("RuntimeError", "a view of a leaf Variable that requires grad is being used in an in-place "
                                         "operation.", "leaf_inplace")
    # check_inplace's last test reads is_leaf (grad_fn_ == nullptr) without making a view's grad_fn:
    # a view made while its base did not require grad has none until something asks for it (an op
    # using the view, .grad_fn), even once the base requires grad: PyTorch calls it a leaf here
    if t.is_view and t.grad_fn is None and t.needs_grad:
        raise TorchError("RuntimeError", "a leaf Variable that requires grad is being used in an in-place operation.",
                         "leaf_inplace")


def _dense(t: Tensor) -> bool:
    """is_non_overlapping_and_dense: the strides, sorted, are the running products of the sizes."""
    strides = t.strides or contiguous_strides(t.shape)
    if any(d == 0 for d in t.shape):
        return True
    expected = 1
    for st, d in sorted((st, d) for d, st in zip(t.shape, strides) if d != 1):
        if st != expected:
            return False
        expected *= d
    return True


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


_OVERLAP = "Please clone() the tensor before performing the operation."
#: TensorIterator's refusal to write a tensor whose elements share memory (an expanded one)
OVERLAP_MESSAGE = ("unsupported operation: more than one element of the written-to tensor refers to a single memory "
                   f"location. {_OVERLAP}")
#: ... and to write a tensor an operand overlaps partly (the same memory laid out otherwise)
PARTIAL_OVERLAP_MESSAGE = ("unsupported operation: some elements of the input tensor and the written-to tensor refer to "
                           f"a single memory location. {_OVERLAP}")


def has_internal_overlap(t: Tensor) -> bool:
    """at::has_internal_overlap's Yes: an expanded dimension (stride 0, size > 1) of a tensor that is
    not non-overlapping and dense."""
    strides = t.strides or contiguous_strides(t.shape)
    return not _dense(t) and any(st == 0 and d > 1 for d, st in zip(t.shape, strides))


def check_overlap(target: Tensor, inputs: list, internal: bool = True) -> None:
    """TensorIterator's memory-overlap checks for an in-place write (after autograd recorded
    the op): the written tensor may not have internal overlap (an expanded view; ``internal``
    False: an op that does not check, zero_), and no input may overlap it partially
    (get_overlap_status: both dense, same storage, intervals that meet but are not the same
    tensor layout); an input that is the same tensor is fine."""
    strides = target.strides or contiguous_strides(target.shape)
    if internal and has_internal_overlap(target):
        raise TorchError("RuntimeError", OVERLAP_MESSAGE, "overlap")
    root = target.base if target.base is not None else target
    n = _numel(target.shape)
    for o in inputs:
        if not isinstance(o, Tensor) or o is target or getattr(o, "wrapped", False):
            continue
        if (o.base if o.base is not None else o) is not root or n == 0 or _numel(o.shape) == 0:
            continue
        if not (_dense(target) and _dense(o)):
            continue      # TooHard: PyTorch does not check
        a0, a1 = target.offset, target.offset + n
        b0, b1 = o.offset, o.offset + _numel(o.shape)
        same = a0 == b0 and a1 == b1 and tuple(strides) == tuple(o.strides or contiguous_strides(o.shape))
        if not same and a0 < b1 and b0 < a1:
            raise TorchError("RuntimeError", PARTIAL_OVERLAP_MESSAGE, "overlap")


#: Largest written tensor whose addresses are compared with an aliasing operand's.
ORDER_CHECK_ELEMENTS = 1_000_000


def _addresses(t: Tensor, shape) -> "np.ndarray":
    """Storage offset of each element of ``t`` broadcast to ``shape`` (row-major)."""
    import numpy as np
    strides = t.strides or contiguous_strides(t.shape)
    lead = len(shape) - len(t.shape)
    full = [0] * lead + [st if d != 1 else 0 for d, st in zip(t.shape, strides)]
    out = np.full(tuple(shape), t.offset, dtype=np.int64)
    for axis, (d, st) in enumerate(zip(shape, full)):
        if st:
            view = [1] * len(shape)
            view[axis] = d
            out = out + (np.arange(d, dtype=np.int64) * st).reshape(view)
    return out


def refuse_order_dependent(target: Tensor, inputs: list, loc, prim: str | None = None):
    """An in-place op reading an operand that shares memory with what it writes, in a layout
    PyTorch does not check (not both dense: get_overlap_status says TooHard) and where an
    element is read from a place another element writes. When every such read comes before
    that place is written, in the order TensorIterator's loop visits the elements (one thread:
    fewer than GRAIN_SIZE elements), each element reads the old values -- what the engine
    computes; a vectorized loop reads a chunk before it writes it, which keeps that. Otherwise
    (x.mul_(x.transpose(0, 2)) on a narrowed x reads elements it already overwrote) PyTorch's
    result depends on the kernel's loop and vector width: adjoint refuses the file -- unless the
    loop is certainly TensorIterator's scalar ``basic_loop`` in that order (an elementwise
    kernel, one operand reading earlier writes: adjoint.engine.loop_order.scalar_loop), where
    the answer is ``(operand, reads)``: which element's new value each element reads."""
    import numpy as np
    root = target.base if target.base is not None else target
    n = _numel(target.shape)
    if n == 0 or n > ORDER_CHECK_ELEMENTS:
        return
    written = None
    plan = None
    for o in inputs:
        if not isinstance(o, Tensor) or o is target or getattr(o, "wrapped", False):
            continue
        if (o.base if o.base is not None else o) is not root or _numel(o.shape) == 0:
            continue
        if written is None:
            written = _addresses(target, target.shape)
            writes = set(written.reshape(-1).tolist())
        try:
            read = np.broadcast_to(_addresses(o, o.shape), target.shape)
        except ValueError:
            continue
        clash = (read != written) & np.isin(read, list(writes))
        if clash.any() and n < GRAIN_SIZE:
            # which element writes each clashing address, and whether the loop gets there first
            rank = iteration_rank(tuple(target.shape), [broadcast_strides(target, target.shape)] + [
                broadcast_strides(x, target.shape) for x in inputs
                if isinstance(x, Tensor) and x is not target and len(x.shape) <= len(target.shape)])
            flat_w, flat_r, flat_rank = written.reshape(-1), read.reshape(-1), rank.reshape(-1)
            writer_rank = dict(zip(flat_w.tolist(), flat_rank.tolist()))
            mask = clash.reshape(-1)
            if all(writer_rank[r] > k for r, k in zip(flat_r[mask].tolist(), flat_rank[mask].tolist())):
                continue
            reads = scalar_loop(prim, target, inputs, flat_w, flat_r, flat_rank, mask)
            if reads is not None and plan is None:
                plan = (o, reads)
                continue
        if clash.any():
            raise ProblemError(loc, "this in-place op reads an operand that shares memory with the tensor it writes, "
                                    "in a layout PyTorch does not check, so some elements are read after other "
                                    "elements overwrote them and the result depends on PyTorch's loop order; clone() "
                                    "the operand (adjoint does not predict this)")
    return plan


def gradient_edge_now(rt, t: Tensor) -> Edge:
    return rt.gradient_edge(t)


def save_inputs(rt, node: Node, op, ts: list) -> None:
    """The op's saved inputs; ``self`` is the original value, cloned first, since the op is about to
    overwrite it (with grad on, the clone of a ``self`` that requires grad is a CloneBackward0: one more
    sequence_nr; of one that does not, no node and no number: ``ones(2).mul_(x)``, torch 2.13)."""
    need = [e is not None for e in node.edges]
    for s in op.saves:
        if s.what != "in" or not s.wanted(need):
            continue
        t = ts[s.index]
        if s.index == 0:
            seq = rt._new_seq() if t.needs_grad else None   # self.clone() runs with grad mode on: its
            # node takes a sequence_nr (the CloneBackward0 a create_graph backward's unpack puts in its graph)
            t = rt.tensor(t.value, t.requires_grad, dtype=t.dtype)
            t.clone_seq = seq
        save_one(rt, node, s.name, t, False)


def save_one(rt, node: Node, name: str, t: Tensor, is_output: bool, weak_grad_fn: Node | None = None) -> None:
    check_save(t)
    sv = SavedVariable(name, t, t.version.value, is_output, t.value, weak_grad_fn=weak_grad_fn)
    if rt.saved_hooks and not t.wrapped:
        sv.hooks = rt.saved_hooks[-1]
        sv.packed = rt.hooks_runner.pack(sv.hooks, t, node, name)
    node.saved.append(sv)


def write(rt, t: Tensor, value) -> None:
    """Store ``value`` into ``t`` (through to its base for a view) and bump the shared version
    (a write through a ``.data`` alias, or a view of one, moves the alias's own counter in
    PyTorch, not ``t``'s: counted as ``hidden``)."""
    check_bump(rt, t)
    if t.data_alias or (t.detached_root is not None and t.detached_root.data_alias):
        t.version.hidden += 1
    if t.base is not None:
        base = t.base
        if _repeats(base):   # a hook's expanded gradient (sum's): elements that are one memory location
            new_base = write_memory(rt.B, base, t.view_ops, value)
        else:
            new_base = scatter_into(rt.B, base.value, t.view_ops, value)
        t.version.value += 1
        base.value = new_base
        t.value = value
    else:
        t.version.value += 1
        t.value = value


def write_in_kernel(rt, t: Tensor, value) -> None:
    """A kernel's own write into an argument (batch norm's running statistics,
    ``batch_norm_cpu_update_stats_template``): the storage takes ``value`` (through to the base
    for a view) and no version counter moves. Every tensor on that storage (the base, its views,
    its ``detach()``-ed aliases) reads the new values from then on, and a node that saved one of
    them without saved-tensor hooks holds the storage, not a copy: its backward reads them too
    (an eval-mode batch norm's running_var, a product's view of a running_mean)."""
    base = t.base if t.base is not None else t
    base.value = scatter_into(rt.B, base.value, t.view_ops, value) if t.base is not None else value
    shared = {id(u) for u in rt.all_tensors if u is base or u.base is base}
    for u in rt.all_tensors:
        if id(u) in shared and u.view_of is not None:
            u.value = u.view_of(base.value)
    for node in rt.nodes:
        for sv in node.saved:
            if sv.hooks is None and id(sv.tensor) in shared:
                sv.value = sv.tensor.value


def _repeats(t: Tensor) -> bool:
    """Elements of ``t`` that are one memory location (a stride 0 along a dim of size > 1)."""
    return bool(t.strides) and any(st == 0 and d > 1 for d, st in zip(t.shape, t.strides))


def write_memory(B, base: Tensor, chain, value):
    """The new value of ``base`` (whose strides repeat memory: ``sum``'s expanded gradient, as a
    backward hook is handed it) after its view ``chain`` was written with ``value``, as PyTorch's
    write through the memory does: each element of the view writes its memory location, and
    every element of ``base`` at that location reads it (``grad[0] = 0`` zeroes every repeat of
    the elements of row 0). Elements of the view that are one location take one value: an op
    that checks overlap raised before, and ``fill_`` / ``zero_`` write one value; anything else
    is not placed (refused)."""
    shape = tuple(B.shape(base.value))
    at = _addresses(base, shape)                      # base element -> memory location
    n = int(np.prod(shape, dtype=np.int64)) if shape else 1
    flat_at = at.reshape(-1)
    locations, first = np.unique(flat_at, return_index=True)
    memory = B.index(B.reshape(base.value, (n,)), (first,))
    written = np.searchsorted(locations, at[_positions(shape, chain)].reshape(-1))
    new = B.reshape(value, (written.size,))
    once, first_write = np.unique(written, return_index=True)
    if once.size != written.size and not B.equals(B.index(new, (first_write[np.searchsorted(once, written)],)), new):
        raise ProblemError(None, "writing different values into elements of an expanded gradient that are one "
                                 "memory location is not modelled")
    memory = B.assign(memory, (written,), new)
    return B.reshape(B.index(memory, (np.searchsorted(locations, flat_at),)), shape)


def scatter_into(B, base_value, chain, value):
    """The base's value with the view ``chain`` of it replaced by ``value`` (``B``: the value backend)."""
    if not chain:
        return value
    (opname, params, k, _), rest = chain[0], chain[1:]
    op = REGISTRY[opname]
    out = op.forward(B, [base_value], params)
    piece = out[k] if isinstance(out, tuple) else out
    new_piece = scatter_into(B, piece, rest, value)
    if opname == "expand":
        # several elements of an expanded view are one element of its input: write by position
        # (the written view has no internal overlap, checked before the write, so each input
        # element is written at most once), as PyTorch's write through the memory does; a 0-d
        # input (b[0].expand(2)) is placed as its one element (numpy indexes no 0-d array by position)
        shape = tuple(B.shape(base_value))
        if not shape:
            return B.reshape(B.assign(B.reshape(base_value, (1,)), _positions((1,), chain), value), ())
        return B.assign(base_value, _positions(shape, chain), value)
    if op.scatter is None:
        if opname in ("split", "split_with_sizes", "unbind"):
            from adjoint.engine.ops.views import split_keys
            key = split_keys(B.shape(base_value), params)[k] if opname != "unbind" else \
                (slice(None),) * params + (k,)
            return B.assign(base_value, key, new_piece)
        raise ProblemError(None, f"writing through a {opname} view is not modelled")
    return op.scatter(B, base_value, new_piece, params)


def _positions(shape, chain) -> tuple:
    """Which element of a tensor of ``shape`` each element of its view ``chain`` is, as a numpy
    index key shaped like the view: the chain replayed on the elements' numbers (exact as
    doubles: a tensor has far fewer than 2**53 elements)."""
    from adjoint.values.backends.float64 import F64, Float64Backend
    numbers = F64(np.arange(_numel(shape), dtype=np.float64).reshape(tuple(shape)))
    at = view_value(Float64Backend(), numbers, chain).a.astype(np.int64)
    return np.unravel_index(at, tuple(shape))


def rebase(t: Tensor, node: Node, output_nr: int = 0) -> None:
    """rebase_history on a tensor that is not a view: its grad_fn becomes ``node`` (at
    ``output_nr``: a custom Function's dirty output); update_tensor_hooks_on_new_gradfn: the
    hook dict starts afresh, retain_grad moves along."""
    old = t.grad_fn
    t.grad_fn = node
    t.output_nr = output_nr
    t.requires_grad = True
    t.is_leaf = False
    t.backward_hooks = None
    if t.retains_grad and old is not None:
        old.retains_grad_hooks.pop(0, None)
        for nr, r in list(old.retains_grad_hooks.items()):
            if r is t:
                del old.retains_grad_hooks[nr]
        node.retains_grad_hooks[output_nr] = t


def rebase_view(rt, view: Tensor, fn: Node, loc, base_before) -> None:
    """The base's new grad_fn is CopySlices(base's old edge, fn); the view's grad_fn is
    regenerated (AsStridedBackward0) at once, other views of the base when next used.
    ``base_before``: the base's value before the write (for the record of the forward)."""
    base = view.grad_base
    base_edge = rt.gradient_edge(base) if base.requires_grad else None
    edges = [base_edge] + list(fn.edges[1:])
    copy = Node(rt._new_seq(), "torch::autograd::CopySlices", edges, kind="copyslices", params=(view, fn),
                inputs=(base,) + tuple(fn.inputs[1:]), input_values=(base.value,) + tuple(fn.input_values[1:]),
                module_call=rt.call_stack[-1] if rt.call_stack else None, loc=loc)
    copy.outputs = [(base.shape, base.dtype)]
    copy.output_values = [base.value]
    rt.nodes.append(copy)
    prim = fn.op.name if fn.op is not None else "function"   # a custom Function that marked the view dirty
    rt.record("copy_slices", (base,) + tuple(fn.inputs[1:]), [base], CopySlicesWrite(view.grad_view_ops, prim,
                                                                                     fn.params),
              copy, loc, (base_before,) + tuple(fn.input_values[1:]))
    rebase(base, copy)
    regenerate(rt, view)


def check_copy_slices_overlap(view: Tensor) -> None:
    """CopySlices's ``grad_slice.copy_(res[0])``: grad_slice is the new gradient buffer as_strided to
    the written view, so an expanded view (masked_fill_, zero_ and fill_ write one without
    complaint) makes copy_ refuse its written-to tensor, after the op's node ran."""
    if has_internal_overlap(view):
        raise TorchError("RuntimeError", OVERLAP_MESSAGE, "overlap")


def copy_slices_backward(rt, node: Node, g, need: list, fn_vjp) -> list:
    """CopySlices's backward: the base's gradient ``g``, with the written view's part replaced by
    what the in-place op's node gives for it (``fn_vjp(fn, grads, need)``: called directly, so
    the node's own hooks do not run); its other inputs' gradients as that node gives them."""
    B = rt.B
    view, fn = node.params
    grad_slice = view_value(B, g, view.grad_view_ops)
    res = fn_vjp(fn, [grad_slice], [True] + list(need[1:]))
    if res[0] is None:
        # CopySlices::apply_impl skips an undefined result (a custom Function returning None for
        # the view): the base's whole gradient stays undefined, the part outside the view too
        return [None] + list(res[1:])
    result = scatter_into(rt.B, g, view.grad_view_ops, res[0])
    return [result] + list(res[1:])
