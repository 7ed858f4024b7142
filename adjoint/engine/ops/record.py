"""The records of the op registry (:mod:`adjoint.engine.ops`): :class:`Op`, one primitive with
everything about it, and the parts it is made of (:class:`Save`, :class:`Check`, :class:`Math`).
The op families import these; the registry imports the families."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Save:
    """A tensor the node saves: ``what`` is ``"in"`` (input ``index``) or ``"out"`` (output
    ``index``). ``if_need``: saved only when that edge's gradient can be needed (an edge per leading
    differentiable input slot)
    (``should_compute_output``, decided when the node is created); a tuple of slots: when any of
    them can be (derivatives.yaml's ``wrap_opt_if(i1, grad_input_mask[1] || grad_input_mask[2])``).
    Listed in pack order."""

    name: str
    what: str
    index: int
    if_need: int | tuple[int, ...] | None = None

    def wanted(self, need) -> bool:
        """Whether the node saves it, given which input slots' gradients can be needed."""
        if self.if_need is None:
            return True
        slots = self.if_need if isinstance(self.if_need, tuple) else (self.if_need,)
        return any(need[i] for i in slots)


@dataclass(frozen=True)
class Check:
    """A gradient-check case (:mod:`adjoint.engine.gradcheck`): input shapes (None: an optional tensor
    not given), the op's params, and whether the point must be positive (log, sqrt, a
    fractional power; ``"unit"``: every value in (0, 1)). ``given``: (slot, flat values) pairs
    for inputs held at fixed values (integer indices); ``fixed``: values of non-differentiable
    inputs after the ``shapes`` ones (nested tuples). ``differences``: the op is piecewise
    linear in each input (max pooling selects): its Jacobian is taken by exact differences at
    the point, not by SymPy. ``slope``: the CPU kernel's backward multiplies by a rounded
    constant where the derivative has an exact one (hardsigmoid's ``1.0f / 6.0f`` for 1/6): the
    VJP must equal ``slope`` times J^T g."""

    shapes: tuple[tuple[int, ...] | None, ...]
    params: object = None
    positive: bool | str = False
    given: tuple = ()
    fixed: tuple = ()
    differences: bool = False
    slope: object = None


@dataclass(frozen=True)
class Math:
    """How the primitive reads in the derivation (:mod:`adjoint.mathtree`).

    ``formula(args, p, shape, k)`` is the tree of output ``k`` (0 for a single-output op) over the
    trees of the op's inputs ``args`` (in ATen's order), with the op's params ``p`` and the
    output's ``shape``. Its vector-Jacobian product follows from the tree: the algebra's nodes
    have their rules in :mod:`adjoint.mathtree.reverse`, a named function (``mathtree.Fn``)
    declares its own (``J^T lambda`` itself when declared with ``generic_vjp``). Every op has
    one (``tests/test_registry_math.py``); the derivation never guesses."""

    formula: Callable


@dataclass(frozen=True)
class Op:
    """One primitive: everything adjoint knows about it, in one registry entry (see the module docstring)."""

    name: str                        # primitive name, as the lowering names it
    node: str                        # PyTorch's grad_fn name
    forward: Callable                # (B, ins, p) -> value (or tuple of values when outputs > 1)
    vjp: Callable                    # (B, gs, ins, outs, p, need) -> list[value | None], one per input slot
    shape: Callable                  # (shapes, p, loc) -> shape (or tuple of shapes); raises ProblemError
    saves: tuple[Save, ...]          # in pack order (unpack runs in the same order)
    formula: str                     # the derivative, as docs/ops.md and the derivation show it
    negzero: str = "never"           # how the exact backend tracks -0.0: keep | negate | product | prod | cumprod | input_sign | sum |
                                     # difference | outer | addc | never (see adjoint/values/signed_zero.py)
    integers: str = "computed"       # int64 / bool data operands (the runtime's check): computed | refused (the
                                     # CPU kernel has none: its error is worded by the kernel, not modelled) |
                                     # alone (int64 operands alone compute; beside a float one, or bool: refused)
    grows: bool = True               # results may be larger than the operands (the overflow check runs)
    underflows: bool | str = False   # the result is within a few ulps of the exact value, relative to its size (a
                                     # product, a quotient, exp): PyTorch's float of a value below the dtype's
                                     # smallest denormal is 0 (the exact backend makes it so); not a sum, whose
                                     # tiny exact value is a cancellation PyTorch's rounding decides; "positive": such a
                                     # 0 is +0.0 whatever the exact value's sign (logsigmoid's 0 - log1p(0))
    exp_overflow_zero: bool = False  # the CPU kernel computes exp(-a) (sigmoid's 1 / (1 + exp(-a)), silu's a / (...)):
                                     # where it overflows (a below -88.72 in float32) the result is exactly 0
    nonfinite: str | None = None     # what makes a non-finite forward value ("division by zero")
    kink: Callable | None = None     # (B, ins, p) -> str | None: a note when a convention at a kink applies
    kink_doc: str = "--"             # the convention, for docs/ops.md
    outputs: int = 1                 # -1: as many as the shape rule gives (split, unbind)
    diff_outputs: int | None = None  # multi-output ops: how many leading outputs are differentiable (None: all);
                                     # the rest (indices, saved statistics) get no grad_fn and are not node outputs
    out_dtypes: tuple = ()           # per output: its dtype when not the first input's ("int64" indices)
    differentiable: tuple[bool, ...] | None = None  # per input: can it carry a gradient (None: all); a
                                     # non-differentiable input is no edge of the node
    checks: tuple[Check, ...] = ()   # gradient-check cases, away from kinks
    view: bool = False               # the outputs are views of input 0 (share its storage and version)
    elementwise: bool = False        # computed by a TensorIterator: the result's strides follow the
                                     # operands' memory order (adjoint.values.strides.iterator_strides)
    iterator_layout: bool = False    # not elementwise for dtypes, but run by a TensorIterator whose result keeps the
                                     # operand's memory order (mul/add/div by a number: a transposed tensor
                                     # times 2 stays transposed); decides the strides only
    contiguous_result: bool = False  # elementwise, but the kernel allocates its result contiguous whatever
                                     # the operands' layout (pow(Scalar, Tensor): its meta function passes no
                                     # strides to set_output_raw_strided)
    layout: Callable | None = None   # views: (shape, strides, offset, p) -> (strides | None, offset)
    reads_grad: Callable | None = None   # (B, g, g strides | None, input shape, input strides) -> the incoming
                                     # gradient as the backward kernel reads it, where its memory order matters
                                     # (batch norm's fast path: adjoint.engine.bn_layout)
    scatter: Callable | None = None  # views: (B, base, new view value, p) -> the base with the view written
    math: Math | None = None         # how it reads in the derivation (required: tests/test_registry_math.py)
    list_argument: bool = False      # the tensor inputs are one TensorList argument (cat, stack): the node asks
                                     # should_compute_output for the whole range and fills every slot once one
                                     # is needed (its post hooks see a tensor even where no gradient is needed)
    clones_aliased_value: bool = False  # in place: a value that aliases self is cloned before the write (ATen's
                                        # fill_), so only the written tensor's own overlap is checked
    checks_internal_overlap: bool = True  # in place: the written tensor may not have internal overlap (an
                                          # expanded view); zero_ does not check (fill_(Scalar), no TensorIterator check)
    result_version: int = 0          # the result's _version as it leaves the op: 1 for an op PyTorch runs in
                                     # place on a fresh intermediate nobody else sees (matmul's squeeze_)
    forward_error: Callable | None = None   # (dtypes, p) -> PyTorch's RuntimeError message (or (type, message))
                                     # | None: the kernel
                                     # refuses these operand dtypes (-bool, bool - x). Raised where the kernel runs:
                                     # after the node is made and its inputs packed, before any value
    copies_values: bool = False      # every result element is one of the input's or 0 (tril, flip, clone): the op
                                     # runs on a bool tensor too and keeps its dtype (a causal mask's ones(...).triu(1))
    fills: bool = False              # every result element is an operand's or a value the file gives (masked_fill):
                                     # a non-finite one (float("-inf")) is the file's own, not refused as a mistake
    value_error: Callable | None = None     # (B, input values, p) -> (type, message) | None: the kernel refuses
                                     # its operands' values (BCE's input outside [0, 1]); raised where
                                     # forward_error is, after the node is made and its inputs packed
    backward_error: Callable | None = None  # (dtypes, p, need) -> message | None: the node's backward raises
                                     # for these input dtypes (x ** bool: exponent - 1), after its unpacks
    work: Callable | None = None     # (input shapes, p) -> elements of the largest array the op's lowering makes
                                     # (a convolution's padded input and patches): checked like the output's size
    sequence_nr_max: bool = False    # the node's sequence_nr is UINT64_MAX (DelayedError's Error node), though
                                     # making it takes one number as any node does
    takes_sequence_nr: bool = True   # False: making the node takes no number (a generated NotImplemented node,
                                     # whose Error constructor gives it UINT64_MAX without drawing one)
    vjp_unread: Callable | None = None  # (p) -> input slots the VJP does not read with these parameters (a
                                     # training batch norm's running stats, saved before the forward updates
                                     # them): the engine's VJP stands for the call's values there too


def if_needed(need, i: int, thunk):
    """A VJP's gradient for input ``i``: ``thunk()`` when the node needs it (an edge there), else None."""
    return thunk() if need[i] else None
