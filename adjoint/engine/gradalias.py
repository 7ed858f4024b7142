"""Which gradients are one tensor in PyTorch's engine: what a hook that writes in place changes.

A hook handed a gradient is handed the engine's own tensor, so ``grad.mul_(2)`` (returning
None) changes what flows on -- and every other place the engine holds that same tensor. The
engine here passes values, so this module keeps, beside every gradient the engine holds, a
:class:`GradObj`: the identity of the tensor PyTorch 2.13 would hold there. Two holders with
one ``GradObj`` are one tensor (a write through one is seen by the other); two with different
``GradObj`` but one :class:`Storage` may share memory (a view); different storages never do.

Where PyTorch hands on the same tensor (checked in torch with ``is`` and storage pointers on
each node's ``grad_outputs`` and ``grad_inputs``):

* an input buffer that received one gradient *is* that gradient (``InputBuffer::add`` moves
  it in); one that received two or more is a sum no other holder shares (``old + new``, or
  ``old.add_(new)`` only when nothing else holds ``old``);
* ``AddBackward0`` hands its incoming gradient itself to ``self`` and (alpha 1) to ``other``;
  ``SubBackward0`` to ``self``; ``CloneBackward0``, ``AliasBackward0``, ``ExpandBackward0``
  (to the same shape), a ``SqueezeBackward`` of a squeeze that squeezed nothing, a
  ``RepeatBackward0`` of ``repeat(1, ..., 1)`` (no dim added) and
  ``BackwardHookFunctionBackward`` (module hooks) hand it on as it is;
  ``validate_outputs`` makes a new tensor where it sums a broadcast gradient or casts a dtype;
* view backwards (``ViewBackward0``, ``TBackward0``, ``SumBackward0``'s expand, ``CatBackward0``'s
  narrows, ...) hand on a view of it: another tensor, one storage. An op not listed as making a
  new tensor is taken to be such a view, which only ever makes adjoint refuse a write it cannot
  place, never guess it;
* ``AccumulateGrad`` with no ``.grad`` yet takes the gradient itself as ``.grad`` when nothing
  else holds it (``new_grad.use_count() <= num_expected_refs``), else a copy; with a ``.grad``,
  it adds in place (``.grad`` stays the same tensor).

* ``CatBackward0``'s and ``StackBackward0``'s pieces are narrows / selects of a contiguous
  gradient (views placed by their slice);
  ``SumBackward``'s expanded gradient is a view of its gradient whose repeats are one element
  (a ``zero_`` of it writes that element); a custom Function returning ``grad_output`` hands
  it on itself; ``CopySlices`` hands on new tensors.

Where a view's elements lie depends on the strides of what it views, so each new gradient
carries its layout where it is not row-major (``GradObj.layout``): an elementwise backward's
after its operands (TensorIterator), a reduction's of a broadcast gradient (``var``, ``norm``,
``amax``, ``maximum``) after its inputs, a matrix product's for a column-major operand
column-major, a buffer's sum after both addends, a permuted or reshaped view's from its base;
a reshape that cannot be a view of those strides is a copy. Any other kernel's result is
taken to be row-major.

A write to a tensor whose storage another live holder shares through a view is refused
(exit 2, not modelled yet): the write's effect on the view is not modelled.
"""

from __future__ import annotations

from adjoint.format.errors import ProblemError
from adjoint.engine.graph import Tensor
from adjoint.engine import warns
from adjoint.engine.inplace import OVERLAP_MESSAGE, PARTIAL_OVERLAP_MESSAGE, scatter_into
from adjoint.engine.torch_errors import TorchError
from adjoint.engine.view_history import view_value
from adjoint.values.strides import contiguous_strides, view_strides


class Storage:
    """One block of memory (union-find: an op of unknown aliasing merges its inputs' storages)."""

    __slots__ = ("parent",)

    def __init__(self):
        self.parent = None

    def root(self) -> "Storage":
        s = self
        while s.parent is not None:
            s = s.parent
        return s


class GradObj:
    """One tensor object of PyTorch's engine (a gradient buffer, ``.grad``, a hook's argument).

    ``strides``: its layout when it is not contiguous in a way a write can tell (the expanded
    gradient ``SumBackward0`` / ``SumBackward1`` hand on: stride 0 where they broadcast, so an
    in-place write raises PyTorch's internal-overlap error)."""

    __slots__ = ("storage", "strides", "base", "to_base", "from_base", "contiguous", "unknown_layout", "value",
                 "layout", "unit_zero", "held", "tensor")

    def __init__(self, storage: Storage | None = None, strides: tuple | None = None):
        self.storage = storage if storage is not None else Storage()
        self.strides = strides
        self.base = None          # a view: the tensor it views, with the maps between their values
        self.to_base = None       # (B, new value of this view) -> new value of the base
        self.from_base = None     # (B, value of the base) -> value of this view
        self.contiguous = strides is None
        self.unknown_layout = False   # a view of an expanded gradient through an op not modelled here
        self.value = None             # its value now, where a view's write needs it (a narrow's base)
        self.layout = None            # its strides, where known and not row-major (a permuted view's)
        # one element, at least one dim, strides 0 (sum's gradient of a one-element tensor: a 0-d
        # gradient expanded, and views of it): AccumulateGrad's layout contract refuses a size-1
        # dim of stride 0, so it copies such a gradient into .grad instead of taking it
        self.unit_zero = False
        # a tensor the file's code holds too (a forward tensor or a leaf a hook returned, or a view of
        # one): AccumulateGrad copies it rather than taking it (its use_count is more than the
        # engine's); ``tensor``: that runtime Tensor, which a later hook is handed itself, so its
        # write writes the forward's tensor (its version moves: a node that saved it raises)
        self.held = False
        self.tensor = None

    @property
    def opaque(self) -> bool:
        """A write into it cannot be placed: its elements may alias each other in a way not modelled."""
        return self.unknown_layout

    @property
    def overlaps(self) -> bool:
        return self.strides is not None and 0 in self.strides

    @property
    def unknown_strides(self) -> bool:
        """Not row-major, and which strides it has is not known (a new tensor a kernel laid out
        after operands that are not row-major: :func:`_row_major_operands`)."""
        return not self.contiguous and self.layout is None and self.strides is None


def fresh() -> GradObj:
    return GradObj()


def root_gradient() -> GradObj:
    """A gradient a backward starts from: the tensor given (``gradient=``, ``grad_tensors``,
    ``grad_outputs``) or the ones ``_make_grads`` made for a scalar root. Python's
    ``torch.autograd.backward`` / ``grad`` keeps it in its ``grad_tensors_`` tuple until the engine
    returns (and the caller may hold it too), so its use_count is more than the engine's: an
    AccumulateGrad reached by it unchanged (a leaf root, through ``AddBackward0``) copies it into
    ``.grad`` instead of taking it (``accumulateGrad``'s ``use_count() <= num_expected_refs``), and a
    node post-hook's write into its ``grad_outputs[0]`` leaves that ``.grad`` as it is."""
    obj = GradObj()
    obj.held = True
    return obj


def laid_out(shape: tuple, strides: tuple) -> GradObj | None:
    """A new tensor of ``shape`` with ``strides``: None when they are row-major (size-1 dims
    aside) or repeat memory (a stride 0 along a dim of size > 1: not a new tensor's layout)."""
    if any(st == 0 and d > 1 for d, st in zip(shape, strides)):
        return None
    obj = GradObj()
    _set_layout(obj, shape, strides)
    return None if obj.contiguous else obj


def hook_view(src: GradObj, t: Tensor, src_value) -> GradObj:
    """A tensor a hook body made as a view of a gradient it was handed (``src``): ``grad.view(-1)``,
    ``grad[:]``, ``grad.t()``, or ``grad.detach()`` (the same memory, another tensor). Returned, it
    is what the engine holds from then on: a write into it is seen by every holder of ``src``, and
    a write into ``src`` by it (``src_value``: its value now). A view of a gradient that is not
    row-major (an expanded or permuted one) shares its memory in a layout not modelled here: a
    write into either is refused."""
    chain = t.view_ops
    if not chain and not src.unknown_layout:   # detach(): the same elements, laid out as src is
        obj = GradObj(src.storage.root(), src.strides)
        obj.base, obj.contiguous, obj.layout, obj.unit_zero = src, src.contiguous, src.layout, src.unit_zero
        obj.to_base = obj.from_base = _same
        return obj
    if src.unknown_layout or src.strides is not None or not src.contiguous:
        obj = view_of([src])
        obj.unknown_layout = True
        return obj
    src.value = src_value   # (kept current by every write placed from now on)
    obj = GradObj(src.storage.root())
    obj.base = src
    if t.strides and any(st == 0 and d > 1 for d, st in zip(t.shape, t.strides)):
        obj.strides, obj.contiguous = tuple(t.strides), False   # grad[0].expand(...): it repeats memory
    obj.to_base = lambda B, v: None if src.value is None else scatter_into(B, src.value, chain, v)
    obj.from_base = lambda B, g: view_value(B, g, chain)
    _set_layout(obj, tuple(t.shape), tuple(t.strides) if t.strides else contiguous_strides(tuple(t.shape)))
    return obj


def _same(B, v):
    """The maps of a ``detach()``: the same elements."""
    return v


def _whole(obj: GradObj) -> GradObj:
    """The tensor whose memory ``obj`` is all of (through ``detach()``s)."""
    while obj.base is not None and obj.to_base is _same:
        obj = obj.base
    return obj


def held_tensor(t: Tensor | None = None, held: bool = True) -> GradObj:
    """A tensor of the file's own a hook returned (see ``GradObj.held``): ``t``, the runtime tensor
    it is; None where a write into it cannot be placed (another leaf's ``.grad`` read in the body).
    ``held=False``: a view or ``detach()`` of such a tensor the body made -- a new tensor only the
    engine holds once the hook returned, on the file tensor's memory: AccumulateGrad takes it as
    ``.grad`` itself (its ``use_count`` is the engine's), which then shares that memory."""
    obj = GradObj()
    obj.held = held
    if t is None:
        obj.unknown_layout = True
        return obj
    obj.tensor = t
    if t.strides and len(t.strides) == len(t.shape):
        _set_layout(obj, tuple(t.shape), tuple(t.strides))
    return obj


def view_of(objs) -> GradObj:
    """A new tensor that may share memory with any of ``objs`` (in a layout not modelled: a view
    of an expanded gradient may itself repeat elements, so a write into it is not placed)."""
    objs = [o for o in objs if o is not None]
    if not objs:
        return fresh()
    root = objs[0].storage.root()
    for o in objs[1:]:
        r = o.storage.root()
        if r is not root:
            r.parent = root
    obj = GradObj(root)
    obj.unknown_layout = any(o.overlaps or o.unknown_layout for o in objs)
    return obj


#: backward nodes whose every output is a new tensor (checked in torch 2.13: no output is the
#: incoming gradient or shares its storage)
FRESH = frozenset((
    # checked in torch 2.13 (a node post-hook's grad_inputs[0] never shares grad_outputs[0]'s storage);
    # CumsumBackward0 is not here: along a dim of size 1 (or one element) it hands on the gradient itself
    "LogsumexpBackward0", "FlipBackward0", "RollBackward0", "TrilBackward0", "TriuBackward0", "TraceBackward0",
    "ProdBackward0", "ProdBackward1", "ClampMinBackward0", "ClampMaxBackward0", "SignBackward0", "StdBackward0",
    "RsqrtBackward0", "Log1PBackward0", "Expm1Backward0", "AtanBackward0", "ErfBackward0", "SinhBackward0",
    "CoshBackward0", "TanBackward0", "Log2Backward0", "Log10Backward0",
    "MulBackward0", "MulBackward1", "DivBackward0", "DivBackward1", "DivBackward2", "NegBackward0",
    "PowBackward0", "PowBackward1", "PowBackward2", "RsubBackward0", "RsubBackward1", "MeanBackward0",
    "MeanBackward1", "SelectBackward0", "SliceBackward0", "ReluBackward0", "TanhBackward0", "ExpBackward0",
    "MmBackward0", "ToCopyBackward0", "WhereBackward0", "AbsBackward0", "SigmoidBackward0", "MaximumBackward0",
    "MinimumBackward0", "ClampBackward1", "SqrtBackward0", "UnbindBackward0", "SplitBackward0", "LogBackward0",
    "SinBackward0", "CosBackward0", "MvBackward0", "DotBackward0", "BmmBackward0", "LogSoftmaxBackward0",
    "SoftmaxBackward0", "GeluBackward0", "SiluBackward0", "LeakyReluBackward0", "EluBackward0", "SoftplusBackward0",
    "HardtanhBackward0", "MseLossBackward0", "HuberLossBackward0", "SmoothL1LossBackward0",
    "BinaryCrossEntropyBackward0", "BinaryCrossEntropyWithLogitsBackward0", "NllLossBackward0", "ReciprocalBackward0",
    "RepeatBackward0", "AmaxBackward0", "AminBackward0", "MaxBackward0", "MaxBackward1", "MinBackward0",
    "MinBackward1", "VarBackward0", "LinalgVectorNormBackward0", "NormBackward1", "XlogyBackward0",
    "MaskedFillBackward0",
    "ConstantPadNdBackward0", "ClampBackward0", "EmbeddingBackward0", "NativeLayerNormBackward0",
    "AsStridedBackward0", "SplitWithSizesBackward0", "ZeroBackward0", "MaxPool2DWithIndicesBackward0",
    "AvgPool2DBackward0", "ConvolutionBackward0", "NativeGroupNormBackward0", "NativeBatchNormBackward0",
    # nll_loss of a 3-d or 5-d input (reshaped to 4-d: nll_loss2d), pools, in-place activations,
    # gathers and scatters (each output checked with ``is`` and storage pointers in torch 2.13)
    "NllLoss2DBackward0", "AdaptiveAvgPool2DBackward0", "AdaptiveAvgPool3DBackward0", "AdaptiveMaxPool2DBackward0",
    "AvgPool3DBackward0", "MaxPool3DWithIndicesBackward0", "EluBackward1", "LeakyReluBackward1", "HardswishBackward0",
    "MishBackward0", "GatherBackward0", "IndexSelectBackward0", "IndexBackward0", "ScatterBackward0",
    "ScatterBackward1", "MaskedFillBackward1", "VarMeanBackward0", "UnsafeSplitBackward0", "FillBackward3",
    "SafeSoftmaxBackward0", "MaskedSelectBackward0", "DiagonalBackward0", "UnfoldBackward0", "Atan2Backward0",
    "Im2ColBackward0", "Col2ImBackward0",
    # _weight_norm_interface_backward: grad_v and grad_g empty_like(saved, contiguous), also for a
    # non-contiguous incoming gradient (grad.contiguous() first)
    "WeightNormInterfaceBackward0",
    # stop 55's ops and layers (each output checked with ``is`` and storage pointers in torch 2.13)
    "HypotBackward0", "StdMeanBackward0", "NansumBackward0", "LogcumsumexpBackward0", "IndexFillBackward0",
    "IndexFillBackward1", "IndexCopyBackward0", "MaskedScatterBackward0", "TrilinearBackward0",
    "EmbeddingBagBackward0", "SoftMarginLossBackward0",
    # oneDNN's LSTM layer: seven new contiguous tensors (b_hh's a clone of b_ih's), none sharing another's storage
    "MkldnnRnnLayerBackward0",
    # a create_graph backward's own nodes (probed the same way)
    "TanhBackwardBackward0", "SigmoidBackwardBackward0", "ThresholdBackwardBackward0", "LeakyReluBackwardBackward0",
    "MseLossBackwardBackward0",
))

#: backward nodes whose gradients are new tensors laid out (batch, length, heads, E) in memory while
#: shaped (batch, heads, length, E): the CPU flash attention backward (probed on 2.13: strides
#: (L*H*E, E, H*E, 1)). Not a leaf's layout (unless heads or length is 1), so AccumulateGrad copies
#: such a gradient into ``.grad`` (obeys_layout_contract) instead of stealing it.
HEADS_LAST = frozenset(("ScaledDotProductFlashAttentionForCpuBackward0",))


def _heads_last(shape: tuple) -> GradObj:
    b, h, l, e = shape
    if h == 1 or l == 1:
        return fresh()
    return GradObj(None, (l * h * e, e, h * e, 1))


#: backward nodes that hand the incoming gradient itself to these output slots (other slots: new tensors)
SAME = {
    "AddBackward0": None,        # both (``other`` only with alpha 1: see same_slots)
    "SubBackward0": (0,),
    "CloneBackward0": (0,),
    "AliasBackward0": (0,),
    "ExpandBackward0": (0,),     # to the same shape (sum_to hands the gradient itself back)
    "AddmmBackward0": (0,),      # the bias, when it is not broadcast (beta 1)
    "BaddbmmBackward0": (0,),
    "torch::autograd::CopyBackwards": (1,),   # copy_'s source (same shape and dtype)
    "AddBackward1": (0,),        # add.Scalar (x + 1 inside a composite loss)
    "IndexAddBackward0": (0,),   # self: grad (source: a new tensor)
    "ScatterAddBackward0": (0,),  # self: grad (src: a new tensor)
    "IndexPutBackward0": (0,),   # with accumulate: self: grad (values: a new tensor)
    # stop 55's ops (checked in torch 2.13 with ``is``): self's gradient is grad itself
    "AddcmulBackward0": (0,),
    "AddcdivBackward0": (0,),
    "AddbmmBackward0": (0,),     # with beta 1 (maybe_multiply(grad, beta): a new tensor otherwise)
    "AddmvBackward0": (0,),
    "AddrBackward0": (0,),
    "FmodBackward0": (0,),
    "FmodBackward1": (0,),
    "RemainderBackward0": (0,),
    "RemainderBackward1": (0,),
    "ScatterReduceBackward0": (0,),   # reduce 'sum' with include_self only
}

#: the user's scaled products, params (beta, alpha): self's gradient is grad itself only with beta 1
_SCALED = frozenset(("baddbmm_ab", "addbmm", "addmv", "addr"))


def same_slots(node) -> tuple:
    """The output slots of ``node`` that are its incoming gradient itself."""
    if node.name == "AddBackward0":
        alpha = _alpha(node)
        return (0, 1) if alpha == 1 else (0,)
    if node.name == "IndexPutBackward0" and not node.op.name.startswith("index_put_acc"):
        return ()   # grad.index_put(indices, zeros, false): a clone of grad (index_put_grad below)
    if getattr(node.op, "name", None) in _SCALED and node.params[0] != 1:
        return ()   # maybe_multiply(grad, beta): a new tensor (beta 0 too)
    if node.name == "ScatterReduceBackward0" and tuple(node.params[1:]) != ("sum", True):
        return ()   # mean / amax / amin / prod, or without include_self: a new tensor
    return SAME[node.name]


def _index_put_grad(src: GradObj | None, shape: tuple) -> GradObj:
    """IndexPutBackward0's gradient for self without accumulate, ``grad.index_put(indices, zeros,
    false)``: a new tensor, ``grad.clone()`` (preserve_format) written, so laid out as a dense
    ``grad`` is (a transposed one stays transposed; checked in torch 2.13) and row-major from an
    expanded one; strides not known otherwise."""
    from adjoint.values.strides import contiguous_strides
    obj = GradObj()
    if src is None or src.contiguous or src.overlaps:
        return obj
    strides = gradient_strides(src, shape)
    order = sorted(range(len(shape)), key=lambda d: -strides[d]) if strides is not None else None
    if strides is not None and tuple(strides[d] for d in order) == contiguous_strides(tuple(shape[d] for d in order)):
        _set_layout(obj, shape, strides)
    else:
        obj.contiguous = False   # unknown strides: a view of it is not placed
    return obj


def _alpha(node):
    p = node.params
    if isinstance(p, dict):
        return p.get("alpha", 1)
    return 1 if p is None else p


#: view backwards whose output is ``grad`` reshaped (row-major order kept: a view of a contiguous gradient)
RESHAPES = frozenset(("ViewBackward0", "UnsafeViewBackward0", "ReshapeAliasBackward0", "UnsqueezeBackward0",
                      "SqueezeBackward0", "SqueezeBackward1", "SqueezeBackward2", "SqueezeBackward4"))
#: squeeze backwards: ``unsqueeze_to(grad, ...)``, the incoming gradient itself when no dim had size 1
SQUEEZES = frozenset(("SqueezeBackward0", "SqueezeBackward1", "SqueezeBackward2", "SqueezeBackward3",
                      "SqueezeBackward4", "SqueezeBackward5"))
#: view backwards whose output is ``grad`` with its dims permuted
PERMUTES = frozenset(("TBackward0", "TBackward1", "TransposeBackward0", "TransposeBackward1", "PermuteBackward0"))


def _view_obj(node, src: GradObj, g_shape: tuple, v_shape: tuple) -> GradObj | None:
    """The view a reshape or permute backward hands on, with the maps between its value and the
    incoming gradient's (None when the relation is not one of those)."""
    from adjoint.engine.ops.views import _inverse, transpose_perm
    if src.unknown_layout:
        return None
    obj = GradObj(src.storage.root())
    obj.base = src
    obj.unit_zero = src.unit_zero and len(v_shape) > 0   # a view of a stride-0 element keeps stride 0
    nd = len(g_shape)
    if node.name in RESHAPES or (node.name in ("TBackward0", "TBackward1") and nd < 2):
        unit_only = tuple(d for d in g_shape if d != 1) == tuple(d for d in v_shape if d != 1)
        if src.strides is not None and not unit_only:
            # an expanded gradient reshaped (Flatten's backward of sum's gradient): a view when
            # ATen's computeStride finds strides for the new shape, else reshape copies it
            strides = view_strides(g_shape, src.strides, v_shape)
            if strides is None:
                return None
            obj.to_base = lambda B, v: B.reshape(v, g_shape)
            obj.from_base = lambda B, g: B.reshape(g, v_shape)
            obj.contiguous, obj.strides = src.contiguous, strides
            return obj
        if not src.contiguous and not unit_only:
            # reshape of a non-contiguous gradient: a view when ATen's computeStride finds strides
            # for the new shape, else a copy (a new row-major tensor); unknown strides: not modelled
            layout = _layout(src, g_shape)
            if layout is None:
                return None
            strides = view_strides(g_shape, layout, v_shape)
            if strides is None:
                return fresh()
            obj.to_base = lambda B, v: B.reshape(v, g_shape)
            obj.from_base = lambda B, g: B.reshape(g, v_shape)
            _set_layout(obj, v_shape, strides)
            return obj
        # a view that only adds or drops size-1 dims (squeeze, unsqueeze, a reshape to such a
        # shape) is a view of any layout, in the same row-major order of elements
        obj.to_base = lambda B, v: B.reshape(v, g_shape)
        obj.from_base = lambda B, g: B.reshape(g, v_shape)
        obj.contiguous = src.contiguous
        if src.strides is not None:   # an expanded gradient stays expanded along the same dims
            kept = iter([st for d, st in zip(g_shape, src.strides) if d != 1])
            obj.strides = tuple(next(kept) if d != 1 else 1 for d in v_shape)
        elif src.layout is not None:
            kept = iter([st for d, st in zip(g_shape, src.layout) if d != 1])
            _set_layout(obj, v_shape, tuple(next(kept) if d != 1 else 1 for d in v_shape))
        return obj
    if node.name in ("TBackward0", "TBackward1"):
        perm = (1, 0)
    elif node.name in ("TransposeBackward0", "TransposeBackward1"):
        perm = transpose_perm(nd, node.params)
    else:
        perm = _inverse(node.params)
    back = _inverse(perm)
    obj.to_base = lambda B, v: B.permute(v, back)
    obj.from_base = lambda B, g: B.permute(g, perm)
    obj.contiguous = src.contiguous and perm == tuple(range(nd))
    if src.strides is not None:
        obj.strides = tuple(src.strides[d] for d in perm)
    else:
        layout = _layout(src, g_shape)
        if layout is not None:
            _set_layout(obj, tuple(g_shape[d] for d in perm), tuple(layout[d] for d in perm))
    return obj


def _layout(obj: GradObj, shape: tuple) -> tuple | None:
    """The strides of a gradient tensor of ``shape`` that repeats no element, where known."""
    from adjoint.values.strides import contiguous_strides
    if obj.strides is not None or obj.unknown_layout:
        return None
    if obj.layout is not None:
        return obj.layout
    return contiguous_strides(shape) if obj.contiguous else None


def gradient_strides(obj: GradObj | None, shape: tuple) -> tuple | None:
    """The strides of the gradient tensor ``obj`` where known and repeating no element (a heads-last
    gradient's too, which ``_layout`` leaves out); None where not known (then read as row-major)."""
    if obj is None or obj.unknown_layout:
        return None
    if obj.strides is not None:
        return None if any(st == 0 and n > 1 for st, n in zip(obj.strides, shape)) else tuple(obj.strides)
    return _layout(obj, shape)


def _set_layout(obj: GradObj, shape: tuple, strides: tuple) -> None:
    """``obj`` has ``strides``: contiguous when they are row-major's (size-1 dims aside, as
    AccumulateGrad's layout contract reads them), else its ``layout``."""
    from adjoint.values.strides import contiguous_strides
    own = contiguous_strides(shape)
    obj.contiguous = all(n == 1 or a == b for n, a, b in zip(shape, strides, own))
    obj.layout = None if obj.contiguous else tuple(strides)


def output_objs(node, in_objs: list, outputs: list, shape_of, inputs: list | None = None) -> list:
    """The tensor each output of ``node`` is, given what its inputs are (``in_objs``; their values
    ``inputs``).

    ``shape_of(value)``: a value's shape, to tell ``ExpandBackward0``'s same-shape hand-on and
    ``validate_outputs``' summing from a hand-on."""
    out = []
    kind = node.kind
    for i, g in enumerate(outputs):
        if g is None:
            out.append(None)
            continue
        if kind == "hookfn":
            out.append(in_objs[i] if i < len(in_objs) and in_objs[i] is not None else fresh())
        elif kind == "graphroot":
            # GraphRoot hands each root its own given gradient (one tensor per root, not views of
            # one), which the Python caller still holds
            out.append(root_gradient())
        elif kind == "checkpoint":
            # CheckpointFunction.backward returns its detached arguments' .grad: what the reentrant
            # backward's AccumulateGrad made of them, a copy of any tensor another holder kept
            out.append(fresh())
        elif kind == "function" and _arithmetic_formula(node, i):
            out.append(fresh())
        elif kind == "function" and _passthrough_formula(node, i):
            # a backward returning ``grad_output`` itself hands on the incoming tensor (PyNode keeps
            # the object); validate_outputs sums it to a broadcast input's shape or casts it: new
            src = in_objs[0] if in_objs else None
            edge_in = node.inputs[i] if i < len(node.inputs) else None
            same = edge_in is None or (tuple(shape_of(g)) == tuple(edge_in.shape) and edge_in.dtype == _out_dtype(node))
            handed = inputs is not None and len(inputs) == 1 and inputs[0] is not None and \
                tuple(shape_of(inputs[0])) == tuple(shape_of(g))
            out.append(src if src is not None and same and handed else fresh())
        elif kind == "op" and (node.name == "MmBackward0" or (node.name == "AddmmBackward0" and i in (1, 2))):
            out.append(_mm_grad(node, i))
        elif (kind == "op" and node.name == "RepeatBackward0" and in_objs and in_objs[0] is not None
              and len(node.params) == len(shape_of(g)) and all(r == 1 for r in node.params)):
            # repeat_backward sums only the dims repeated more than once (and the leading ones
            # repeat added): with every repeat 1 and none added it returns the gradient itself
            out.append(in_objs[0])
        elif kind == "op" and node.name == "MaskedSelectBackward0":
            out.append(_masked_select_grad(node, tuple(shape_of(g))))
        elif kind == "op" and node.name == "IndexPutBackward0" and i == 0 and i not in same_slots(node):
            out.append(_index_put_grad(in_objs[0] if in_objs else None, tuple(shape_of(g))))
        elif kind not in ("function", "copyslices") and node.name in FRESH:
            strides = None
            if node.name == "Atan2Backward0":
                strides = _atan2_strides(node, i, in_objs, inputs, g, shape_of)
            elif node.name in POINTWISE and not _row_major_operands(node, in_objs, inputs, shape_of):
                strides = _pointwise_strides(node, i, in_objs, inputs, g, shape_of)
            elif node.name in LIKE_INPUT and not _row_major_operands(node, in_objs, inputs, shape_of):
                strides = _like_input_strides(node, in_objs, inputs, g, shape_of)
            obj = GradObj()
            if strides is not None:
                _set_layout(obj, tuple(shape_of(g)), strides)
            # else row-major: so every other kernel's result is taken (a matrix product's: _mm_grad;
            # a softmax's or a normalization's over a transposed input is, probed; not every
            # kernel's over non-contiguous operands is checked)
            out.append(obj)
        elif kind == "copyslices" and _copyslices_fresh(node):
            out.append(fresh())
        elif kind == "op" and node.name in HEADS_LAST and len(shape_of(g)) == 4:
            out.append(_heads_last(tuple(shape_of(g))))
        elif kind not in ("function", "copyslices") and node.name in SAME and i in same_slots(node):
            src = in_objs[0] if in_objs else None
            # validate_outputs sums a broadcast gradient (a new tensor); a dtype cast is one too
            edge_in = node.inputs[i] if i < len(node.inputs) else None
            same_shape = edge_in is None or tuple(shape_of(g)) == tuple(edge_in.shape)
            same_dtype = edge_in is None or edge_in.dtype == _out_dtype(node)
            in_shape = node.outputs[0][0] if node.outputs else None
            handed = in_shape is None or tuple(in_shape) == tuple(shape_of(g))
            out.append(src if src is not None and same_shape and same_dtype and handed else fresh())
        elif kind not in ("function", "copyslices") and node.name in SAME:
            out.append(fresh())
        elif (kind == "op" and node.name in SQUEEZES and in_objs and in_objs[0] is not None
              and inputs and inputs[0] is not None and tuple(shape_of(inputs[0])) == tuple(shape_of(g))):
            # a squeeze that squeezed nothing: unsqueeze_to starts from ``result = grad`` and
            # unsqueezes only the dims of size 1, so it hands back the gradient itself (not a view)
            out.append(in_objs[0])
        elif (kind == "op" and (node.name in RESHAPES or node.name in PERMUTES) and in_objs and in_objs[0] is not None
              and inputs and inputs[0] is not None
              and (view := _view_obj(node, in_objs[0], tuple(shape_of(inputs[0])), tuple(shape_of(g)))) is not None):
            out.append(view)
        elif (kind == "op" and node.name in ("CatBackward0", "StackBackward0") and in_objs and in_objs[0] is not None
              and inputs and inputs[0] is not None
              and (view := _cat_piece(node, i, in_objs[0], inputs[0], g, shape_of)) is not None):
            out.append(view)
        elif (kind == "op" and node.name == "CatBackward0" and in_objs and in_objs[0] is not None
              and in_objs[0].overlaps and not in_objs[0].unknown_layout):
            # cat's pieces are narrows of the gradient: an expanded one's strides, so a write that
            # checks overlap raises PyTorch's error; one that does not (zero_) is not placed
            obj = GradObj(in_objs[0].storage.root(), in_objs[0].strides)
            obj.contiguous = False
            out.append(obj)
        elif kind == "op" and node.name in ("SumBackward0", "SumBackward1"):
            strides = _expanded_strides(node)
            src = in_objs[0] if in_objs else None
            if 0 not in strides and src is not None and not src.unknown_layout and inputs and inputs[0] is not None:
                # nothing repeats (the summed dims have size 1): a view of the gradient, only reshaped
                g_shape, v_shape = tuple(shape_of(inputs[0])), tuple(shape_of(g))
                obj = GradObj(src.storage.root())
                obj.base, obj.contiguous = src, src.contiguous
                obj.to_base = lambda B, v, s=g_shape: B.reshape(v, s)
                obj.from_base = lambda B, x, s=v_shape: B.reshape(x, s)
                # SumBackward0 expands a 0-d gradient: every stride 0; SumBackward1 unsqueezes
                # and expands the gradient it is handed, keeping that one's strides
                obj.unit_zero = len(v_shape) > 0 and (node.name == "SumBackward0" or src.unit_zero)
            else:
                obj = view_of(in_objs)
                obj.strides = strides
                if src is not None and not src.unknown_layout and inputs and inputs[0] is not None:
                    _expanded_maps(obj, src, tuple(shape_of(inputs[0])), tuple(shape_of(g)), strides)
            out.append(obj)
        else:
            out.append(view_of(in_objs))
    return out


def _masked_select_grad(node, shape: tuple) -> GradObj:
    """masked_select_backward's result: ``zeros_like(self.expand(broadcast), preserve_format)``
    written in place, so ``self``'s own strides where it is non-overlapping and dense and was not
    broadcast (a transposed ``self``: a transposed gradient; probed in torch 2.13); a broadcast
    ``self``'s is summed by validate_outputs, a new row-major tensor."""
    from adjoint.values.strides import preserve_format_strides
    obj = GradObj()
    x, mask = (list(node.inputs) + [None, None])[:2]
    if isinstance(x, Tensor) and isinstance(mask, Tensor) and x.strides and tuple(x.shape) == shape \
            and len(mask.shape) <= len(shape) \
            and all(m in (1, n) for m, n in zip(mask.shape[::-1], shape[::-1])):
        _set_layout(obj, shape, preserve_format_strides(shape, x.strides))
    return obj


def _holds(o: GradObj | None, obj: GradObj) -> bool:
    """``o`` is ``obj``, or a view whose root base is ``obj`` (PyTorch keeps only the root)."""
    if o is obj:
        return True
    if o is None:
        return False
    while o.base is not None:
        o = o.base
    return o is obj


def _decreasing(shape, strides) -> bool:
    """Strides in row-major order (each dim's larger than the next's), size-1 and stride-0 dims aside."""
    kept = [st for n, st in zip(shape, strides) if n != 1 and st != 0]
    return all(a > b for a, b in zip(kept, kept[1:]))


def _row_major_operands(node, in_objs: list, inputs, shape_of) -> bool:
    """Does the new tensor a node makes come out row-major? A kernel lays its result out after its
    operands (TensorIterator's reorder_dimensions; empty_like keeps a dense input's strides), so
    it does when every operand is in row-major order: the incoming gradients and the op's
    forward inputs (which its formula reads, saved). Otherwise its strides are not known here
    (``y * y`` of a transposed ``y`` hands on a transposed gradient, which a reshape then copies)."""
    for k, o in enumerate(in_objs):
        if o is None:
            continue
        if o.unknown_layout or o.unknown_strides:
            return False
        strides = o.strides if o.strides is not None else o.layout
        if strides is not None:
            value = inputs[k] if inputs is not None and k < len(inputs) else None
            if value is None or not _decreasing(tuple(shape_of(value)), strides):
                return False
    for t in node.inputs:
        if isinstance(t, Tensor) and t.strides and not _decreasing(tuple(t.shape), tuple(t.strides)):
            return False
    return True


#: FRESH nodes whose formulas are elementwise (TensorIterator kernels over the incoming gradient and
#: the op's forward operands, all of the result's shape)
POINTWISE = frozenset((
    "RsqrtBackward0", "Log1PBackward0", "Expm1Backward0", "AtanBackward0", "ErfBackward0", "SinhBackward0",
    "CoshBackward0", "TanBackward0", "Log2Backward0", "Log10Backward0",
    "MulBackward0", "MulBackward1", "DivBackward0", "DivBackward1", "NegBackward0", "PowBackward0",
    "RsubBackward0", "RsubBackward1", "ReluBackward0", "TanhBackward0", "ExpBackward0", "AbsBackward0",
    "SigmoidBackward0", "SqrtBackward0", "LogBackward0", "SinBackward0", "CosBackward0", "GeluBackward0",
    "SiluBackward0", "LeakyReluBackward0", "EluBackward0", "SoftplusBackward0", "HardtanhBackward0",
    "ReciprocalBackward0", "ClampBackward1", "HardswishBackward0", "MishBackward0",
))


#: FRESH nodes whose formulas compute elementwise over the forward inputs with the incoming
#: gradient broadcast back over the reduced dims (var_backward: grad * (self - mean), norm:
#: self * grad / norm, amax: a mask self == result; maximum: where(self == other, ...);
#: where: where(cond, grad, 0), laid out after cond)
LIKE_INPUT = frozenset(("VarBackward0", "LinalgVectorNormBackward0", "NormBackward1", "AmaxBackward0", "AminBackward0",
                        "MaximumBackward0", "MinimumBackward0", "WhereBackward0"))


def _like_input_strides(node, in_objs: list, inputs, g, shape_of) -> tuple | None:
    """The strides of such a node's gradient ``g`` when the incoming gradient decides nothing (one
    element, or ``sum``'s expanded gradient: every dim broadcast): TensorIterator's layout of the
    forward inputs of ``g``'s shape, when every order of them gives one; else None (row-major taken)."""
    from adjoint.values.strides import iterator_strides
    if not in_objs or in_objs[0] is None or not inputs or inputs[0] is None:
        return None
    o, shape = in_objs[0], tuple(shape_of(g))
    numel = 1
    for d in shape_of(inputs[0]):
        numel *= d
    if not (numel == 1 or (o.strides is not None and not any(o.strides))):
        return None
    if node.name == "WhereBackward0":   # where(cond, grad, 0): cond is the first operand, and decides
        cond = node.inputs[-1] if node.inputs else None
        if not isinstance(cond, Tensor) or cond.dtype != "bool":
            return None
        from adjoint.values.strides import contiguous_strides
        return tuple(iterator_strides([(tuple(cond.shape), tuple(cond.strides) if cond.strides else
                                        contiguous_strides(tuple(cond.shape)))], shape))
    forward = [(tuple(t.shape), tuple(t.strides)) for t in node.inputs
               if isinstance(t, Tensor) and not t.wrapped and tuple(t.shape) == shape and t.strides]
    if not forward:
        return None
    found = {tuple(iterator_strides(ops, shape)) for ops in (forward, forward[::-1])}
    return found.pop() if len(found) == 1 else None


def _pointwise_strides(node, i: int, in_objs: list, inputs, g, shape_of) -> tuple | None:
    """The strides of an elementwise backward's result ``g`` (output ``i``): TensorIterator's layout
    of the incoming gradient and the forward operands -- when every order of those operands gives
    the same one (a formula of several kernels then lays each out alike), else None."""
    from adjoint.values.strides import contiguous_strides, iterator_strides
    if not in_objs or in_objs[0] is None or not inputs or inputs[0] is None:
        return None
    shape = tuple(shape_of(g))
    edge_in = node.inputs[i] if i < len(node.inputs) else None
    if tuple(shape_of(inputs[0])) != shape or (edge_in is not None and tuple(edge_in.shape) != shape):
        return None       # summed back to a broadcast input: a reduction's layout
    o = in_objs[0]
    if o.unknown_layout or o.unknown_strides:
        return None
    grad = (shape, o.strides if o.strides is not None else o.layout if o.layout is not None else
            contiguous_strides(shape))
    forward = [(tuple(t.shape), tuple(t.strides) if t.strides else contiguous_strides(tuple(t.shape)))
               for t in node.inputs if isinstance(t, Tensor) and not t.wrapped and len(t.shape)]
    orders = ([grad] + forward, [grad] + forward[::-1], forward + [grad], forward[::-1] + [grad])
    found = {tuple(iterator_strides(ops, shape)) for ops in orders}
    return found.pop() if len(found) == 1 else None


def _atan2_strides(node, i: int, in_objs: list, inputs, g, shape_of) -> tuple | None:
    """atan2_backward's layouts, kernel by kernel: ``recip`` from ``self * self + other * other``
    (laid out as self and other), then ``(grad * other) * recip`` for self and ``(grad * -self) *
    recip`` for other: TensorIterator's layout of each product's operands in that order. None (a
    row-major result) where the gradient is summed back to a broadcast operand."""
    from adjoint.values.strides import contiguous_strides, iterator_strides
    if not in_objs or in_objs[0] is None or not inputs or inputs[0] is None or len(node.inputs) != 2:
        return None
    shape = tuple(shape_of(g))
    if tuple(shape_of(inputs[0])) != shape or any(not isinstance(t, Tensor) for t in node.inputs) or \
            tuple(node.inputs[i].shape) != shape:
        return None
    o = in_objs[0]
    if o.unknown_layout or o.unknown_strides:
        return None
    grad = (shape, o.strides if o.strides is not None else o.layout if o.layout is not None else
            contiguous_strides(shape))
    a, b = ((tuple(t.shape), tuple(t.strides) if t.strides else contiguous_strides(tuple(t.shape)))
            for t in node.inputs)
    recip = (shape, iterator_strides([a, b], shape))
    first = (shape, iterator_strides([grad, b if i == 0 else a], shape))
    return tuple(iterator_strides([first, recip], shape))


#: FRESH nodes whose new gradients are row-major whatever their operands' strides (bmm and
#: mv's results, ger's outer product: derivatives.yaml's formulas for BmmBackward0, MvBackward0)
ROW_MAJOR = frozenset(("BmmBackward0", "MvBackward0"))


def _mm_grad(node, i: int) -> GradObj:
    """A matrix product's gradient for its matrix operand ``i`` (mm_mat1_backward /
    mm_mat2_backward): computed transposed, so column-major, when that operand is column-major
    (strides (1, rows): ``w.t()``, nn.Linear's weight as addmm reads it), else ``mm``'s row-major
    result; TBackward0 then hands ``w`` a row-major gradient, which AccumulateGrad takes as ``.grad``."""
    t = node.inputs[i] if i < len(node.inputs) else None
    obj = GradObj()
    if isinstance(t, Tensor) and len(t.shape) == 2 and t.strides and \
            t.strides[0] == 1 and t.strides[1] == t.shape[0]:
        rows, cols = t.shape
        _set_layout(obj, (rows, cols), (1, rows))
    return obj


def _same_layout(old: GradObj) -> GradObj:
    """The buffer after ``old.add_(new)``: a tensor of its own (no holder but the engine's), laid
    out as ``old`` is."""
    obj = GradObj(None, old.strides)
    obj.contiguous, obj.layout = old.contiguous, old.layout
    return obj


def _sum_obj(old: GradObj | None, new: GradObj | None, value, B) -> GradObj:
    """The buffer after a second gradient arrived: ``old + new`` (or ``old.add_(new)``), a new tensor
    laid out as TensorIterator lays out the sum of the two (``old``'s strides first)."""
    from adjoint.values.strides import contiguous_strides, iterator_strides
    obj = GradObj()
    if value is None or old is None or new is None:
        return obj
    shape = tuple(B.shape(value))
    layouts = []
    for o in (old, new):
        if o.unknown_layout or o.unknown_strides:
            obj.contiguous = False          # strides not known: views of it are not placed
            return obj
        layouts.append((shape, o.strides if o.strides is not None else o.layout if o.layout is not None
                        else contiguous_strides(shape)))
    if all(st == contiguous_strides(shape) for _, st in layouts):
        return obj
    _set_layout(obj, shape, tuple(iterator_strides(layouts, shape)))
    return obj


def _arithmetic_formula(node, i: int) -> bool:
    """A custom Function's backward formula for output ``i`` is an operator expression
    (``grad_output * output``): PyTorch computes a new tensor, which the node hands on."""
    from adjoint.format import syntax as S
    try:
        formula = node.params.function.grads[i][1]
    except (AttributeError, IndexError, TypeError):
        return False
    return isinstance(formula, (S.Bin, S.Neg))


def _cat_piece(node, i: int, src: GradObj, grad, g, shape_of) -> GradObj | None:
    """``cat``'s gradient for input ``i``: ``grad.narrow(dim, offset, size)`` (cat_tensors_backward);
    ``stack``'s: ``grad.select(dim, i)`` (stack_tensors_backward). A view of the incoming
    gradient (None: not one this models -- a non-contiguous or expanded gradient, a cast
    piece). A write into it writes that part of the gradient; a write into the gradient changes
    the piece. A piece laid out as its input (a narrow or select along the first dim of size
    > 1) is what AccumulateGrad takes as ``.grad`` itself."""
    from adjoint.values.strides import contiguous_strides
    expanded = src.overlaps and src.to_base is not None and not src.unknown_layout
    if (src.strides is not None or src.unknown_layout) and not expanded:
        return None
    g_shape, v_shape = tuple(shape_of(grad)), tuple(shape_of(g))
    nd = len(g_shape)
    stack = node.name == "StackBackward0"
    if nd == 0 or len(v_shape) != nd - stack:
        return None
    dim = node.params % nd
    edge_in = node.inputs[i] if i < len(node.inputs) else None
    if edge_in is None or tuple(edge_in.shape) != v_shape or edge_in.dtype != _out_dtype(node):
        return None
    layout = None if expanded else _layout(src, g_shape)
    if layout is None and not expanded:
        return None       # a non-contiguous gradient of unknown strides
    if stack:
        key = (slice(None),) * dim + (i,)
        strides = layout if layout is not None else contiguous_strides(g_shape)
        strides = strides[:dim] + strides[dim + 1:]
    else:
        start = 0
        for j in range(i):
            prev = node.inputs[j] if j < len(node.inputs) else None
            if prev is None or len(tuple(prev.shape)) != nd:
                return None
            start += tuple(prev.shape)[dim]
        key = (slice(None),) * dim + (slice(start, start + v_shape[dim]),)
        strides = layout if layout is not None else contiguous_strides(g_shape)
    src.value = grad
    if expanded:
        return _expanded_piece(src, key, dim, stack, g_shape, v_shape)
    obj = GradObj(src.storage.root())
    obj.base = src
    obj.to_base = lambda B, v: None if src.value is None else B.assign(src.value, key, v)
    obj.from_base = lambda B, x: B.index(x, key)
    _set_layout(obj, v_shape, tuple(strides))
    return obj


def _expanded_piece(src: GradObj, key: tuple, dim: int, stack: bool, g_shape: tuple, v_shape: tuple) -> GradObj:
    """A piece of ``sum``'s expanded gradient (``src``): its strides (stride 0 repeats one
    element, so an op that checks overlap raises PyTorch's error). A write PyTorch lets through
    (``zero_``) writes memory: along a broadcast ``dim`` the piece is every repeat, so the whole
    expanded gradient takes its value; along another dim the piece's part of it. ``src``'s own
    ``to_base`` then checks the value repeats as memory does (None: not placed)."""
    strides = src.strides[:dim] + src.strides[dim + 1:] if stack else src.strides
    obj = GradObj(src.storage.root(), strides)
    obj.contiguous = False
    obj.base = src
    along_repeats = src.strides[dim] == 0
    unit = tuple(1 if k == dim else n for k, n in enumerate(g_shape))

    def to_base(B, v):
        if src.value is None:
            return None
        if not along_repeats:
            return B.assign(src.value, key, v)
        first = B.reshape(v, unit) if stack else B.index(v, (slice(None),) * dim + (slice(0, 1),))
        if not stack and not B.equals(B.broadcast_to(first, v_shape), v):
            return None       # different values along the repeats: memory cannot hold them
        return B.broadcast_to(first, g_shape)

    obj.to_base = to_base
    obj.from_base = lambda B, x: B.index(x, key)
    return obj


def _copyslices_fresh(node) -> bool:
    """CopySlices hands on new tensors: the base's gradient is ``result`` (a new tensor the
    incoming gradient is copied into), the others what its in-place op's node returns for a
    clone of the written slice -- new tensors too when that node makes new ones or hands on
    its gradient (the clone, which nothing else holds)."""
    fn = node.params[1] if isinstance(node.params, tuple) and len(node.params) == 2 else None
    return fn is not None and getattr(fn, "kind", None) == "op" and (fn.name in FRESH or fn.name in SAME)


def _passthrough_formula(node, i: int) -> bool:
    """A custom Function's backward formula for output ``i`` is ``grad_output`` itself."""
    from adjoint.format import syntax as S
    try:
        formula = node.params.function.grads[i][1]
    except (AttributeError, IndexError, TypeError):
        return False
    return isinstance(formula, S.Name) and formula.id == "grad_output"


def _expanded_maps(obj: GradObj, src: GradObj, g_shape: tuple, v_shape: tuple, strides: tuple) -> None:
    """``sum``'s gradient ``grad.expand(sizes)`` as a view of ``grad``: each element of the base is
    every element of the view along the broadcast dims (stride 0). A write PyTorch lets through
    (``zero_``, ``fill_``: no overlap check) writes the base; its new value is the view's at index 0
    along those dims -- when the view's new value repeats it everywhere, as memory does. A value
    that does not (an element written through a narrower view, where every repeat is one memory
    location) has no base value here: ``to_base`` answers None, and the write is not placed."""
    key = tuple(0 if st == 0 else slice(None) for st in strides)
    kept = tuple(1 if st == 0 else n for n, st in zip(v_shape, strides))

    def to_base(B, v):
        b = B.reshape(B.index(v, key), kept)
        if not B.equals(B.broadcast_to(b, v_shape), v):
            return None
        return B.reshape(b, g_shape)

    obj.base = src
    obj.to_base = to_base
    obj.from_base = lambda B, g: B.broadcast_to(B.reshape(g, kept), v_shape)


def _expanded_strides(node) -> tuple:
    """The strides of ``sum``'s gradient: ``grad.expand(sizes)`` (all 0), or for ``sum(dims)``
    ``grad`` unsqueezed at the summed dims and expanded there (0 at those dims)."""
    from adjoint.values.strides import contiguous_strides
    shape = tuple(node.inputs[0].shape)
    if node.name == "SumBackward0":   # stride 0 along every dim that repeats the element (size > 1)
        return tuple(0 if n != 1 else 1 for n in shape)
    dims = node.params[0]
    nd = len(shape)
    summed = set(range(nd)) if dims is None or (isinstance(dims, (tuple, list)) and not dims) else {
        d % nd for d in (dims if isinstance(dims, (tuple, list)) else (dims,))}
    kept = tuple(1 if d in summed else n for d, n in enumerate(shape))
    strides = list(contiguous_strides(kept))
    for d in summed:
        if shape[d] != 1:
            strides[d] = 0
    return tuple(strides)


def _out_dtype(node):
    outs = node.outputs
    if outs and len(outs[0]) > 1:
        return outs[0][1]
    return None


class GradHolders(dict):
    """leaf Tensor -> the GradObj of its ``.grad`` (the runtime's, kept across backward calls), which
    also counts how many leaves hold each GradObj, so that "is this tensor some leaf's ``.grad``?"
    (:meth:`holds`, asked at every first accumulation) does not walk every leaf: on a model with a
    hook on each of its layers that walk made a backward quadratic in the number of parameters.
    Written only by item assignment and ``pop``."""

    def __init__(self):
        super().__init__()
        self._count: dict = {}   # id(GradObj) -> leaves holding it (the dict keeps each alive)

    def __setitem__(self, leaf, obj) -> None:
        old = self.get(leaf)
        if old is not None:
            self._drop(old)
        super().__setitem__(leaf, obj)
        self._count[id(obj)] = self._count.get(id(obj), 0) + 1

    def pop(self, leaf, *default):
        if leaf in self:
            self._drop(self[leaf])
        return super().pop(leaf, *default)

    def _drop(self, obj) -> None:
        n = self._count[id(obj)] - 1
        if n:
            self._count[id(obj)] = n
        else:
            del self._count[id(obj)]

    def holds(self, obj) -> bool:
        return id(obj) in self._count


def grad_holders(rt) -> GradHolders:
    """The runtime's :class:`GradHolders`, made on first use."""
    return rt.__dict__.setdefault("grad_objs", GradHolders())


class Aliases:
    """The holders of gradient tensors during one backward call, and the writes between them."""

    def __init__(self, engine, parent: "Aliases | None" = None):
        self.engine = engine
        # the holders of the backward this one runs inside (a reentrant checkpoint's backward is
        # handed the outer one's gradient tensor itself): they hold their tensors meanwhile, and
        # see a write into one
        self.parent = parent
        self.pending: dict = {}        # (node, slot) -> GradObj of a buffer not yet consumed
        self.lists: dict = {}          # node -> its buffer (the values list)
        # leaf Tensor -> GradObj of its .grad, kept across backward calls (the runtime's): a .grad
        # that is a view of another leaf's .grad stays one, so a later accumulation reaches both
        self.grads: GradHolders = grad_holders(engine.rt)
        self.frames: list = []         # [values list, objs list] of the node running (inputs, then outputs)
        self.states: list = []         # [state, objs of state.grad_outputs] of module hooks holding grad_outputs
        self.captured: list = []       # GradObj per torch.autograd.grad result

        self.objs: list = []           # GradObj of each input of the node running
        self.out_objs: list = []       # GradObj of each of its outputs (once computed)

    # ------------------------------------------------------------ the running node
    def set_outputs(self, outputs: list) -> None:
        for frame in self.frames:
            if frame[1] is self.out_objs:
                frame[0] = outputs

    def capture(self, idx: int, obj) -> None:
        """torch.autograd.grad hands back the captured buffer itself."""
        while len(self.captured) <= idx:
            self.captured.append(None)
        self.captured[idx] = obj

    def after_hook(self, hook) -> dict:
        """The hook just run wrote these engine tensors in place: every holder sees the write.
        Returns the writes (GradObj -> new value)."""
        runner = self.engine.rt.hooks_runner
        if runner.leaf_changes:   # .grad written or assigned by a hook of any kind (a post-accumulate
            self.leaf_writes(runner.leaf_changes, hook, runner.grad_sources)   # one: Engine.accumulate)
        writes = runner.writes
        if writes and getattr(self.engine, "create_graph", False):
            # grad mode is on in a create_graph backward, and the hook was handed the engine's own
            # gradient tensors: the body's in-place op was recorded on them (a node, a version bump,
            # the tensor rebased onto the new node), and every holder of that tensor holds it
            # itself, so the written tensor flows on as it is -- nothing to place here
            if runner.fresh_writes:
                raise ProblemError(hook.loc, f"the {_kind(hook)} '{hook.label}' writes in place a gradient the "
                                             "create_graph backward holds as a value, not as a tensor: not modelled "
                                             "yet (return the new value instead)")
            for t, o in self.grads.items():
                if o in writes:   # a leaf's .grad is that tensor (a hook assigned it): it sees the write
                    t.write_grad(writes[o])
                elif any(o.storage.root() is w.storage.root() for w in writes):
                    raise ProblemError(hook.loc, f"the {_kind(hook)} '{hook.label}' writes in place a gradient of "
                                                 "a create_graph backward that shares memory with a leaf's .grad "
                                                 "(a view of it was assigned): not modelled yet")
            return writes
        if writes:
            self.write(writes, hook)
        return writes

    @staticmethod
    def refresh(values: tuple, objs: tuple, writes: dict) -> tuple:
        """A tuple of gradients the engine holds locally, after ``writes`` (tensors stay: they were
        written themselves)."""
        if not writes:
            return values
        return tuple(writes[o] if o is not None and o in writes and not isinstance(v, Tensor) else v
                     for v, o in zip(values, objs))

    def hold(self, state, objs: tuple) -> None:
        """BackwardHook keeps ``grad_outputs`` (these tensors) until its input hook runs."""
        self.release(state)
        self.states.append([state, tuple(objs)])

    def held(self, state) -> tuple | None:
        for st, objs in self.states:
            if st is state:
                return objs
        return None

    def release(self, state) -> None:
        self.states = [e for e in self.states if e[0] is not state]

    def returned(self, old):
        """The tensor a hook returned: one of its arguments itself, else a new tensor."""
        r = self.engine.rt.hooks_runner.returned_obj
        return r if isinstance(r, GradObj) else fresh()

    def returned_tuple(self, old: list) -> list:
        r = self.engine.rt.hooks_runner.returned_obj
        r = r if isinstance(r, tuple) else (None,) * len(old)
        return [o if isinstance(o, GradObj) else fresh() for o in r]

    def accumulated(self, t, first: bool, obj) -> None:
        """AccumulateGrad on ``t``: the first gradient becomes ``.grad`` itself when nothing else
        holds it, else a copy; later ones are added into ``.grad`` in place."""
        if first:
            # (a gradient whose layout differs from the leaf's is copied too: obeys_layout_contract)
            steal = obj is not None and obj.contiguous and obj.strides is None and not obj.unit_zero \
                and not obj.held and not self.held_elsewhere(obj)
            self.grads[t] = obj if steal else fresh()
            return
        # variable_grad += new_grad, TensorIterator's checks: .grad may not repeat memory (it is
        # sum's expanded gradient a hook assigned), and the gradient may not overlap it partly (a
        # transposed view of the very tensor .grad is); the same tensor, or one laid out alike, may
        cur = self.grad_obj(t)
        if cur.overlaps:
            raise TorchError("RuntimeError", OVERLAP_MESSAGE, "overlap")
        if obj is not None and obj is not cur and obj.storage.root() is cur.storage.root() and \
                (obj.strides, obj.contiguous, obj.layout) != (cur.strides, cur.contiguous, cur.layout):
            raise TorchError("RuntimeError", PARTIAL_OVERLAP_MESSAGE, "overlap")
        if cur.layout is not None:   # CHECK_RESULT: a .grad laid out otherwise than its parameter
            shape = tuple(t.shape)
            param = tuple(t.strides) if t.strides else contiguous_strides(shape)
            if any(n != 1 and a != b for n, a, b in zip(shape, cur.layout, param)):
                warns.warn_once(self.engine.rt, "UserWarning", warns.layout_contract(shape, cur.layout, param),
                                site=warns.LAYOUT_CONTRACT)

    def added_into(self, t) -> None:
        """A later backward added into ``t.grad`` in place: where that ``.grad`` shares its storage
        with another leaf's (one a view of the other: x0's AccumulateGrad took a buffer as .grad
        and p4.grad is a narrow of it), the other sees the sum too."""
        obj = self.grads.get(t)
        if obj is None:
            return
        root = obj.storage.root()
        if not any(o.storage.root() is root for o in self._all_objs(but=t)):
            obj.value = t.grad
            return
        # .grad is a tensor the engine still holds (a hook assigned it the gradient it was handed),
        # or shares memory with one: the sum is written into that tensor, and every holder sees it
        self.write({obj: t.grad}, None)

    def leaf_writes(self, changes: list, hook, sources: dict | None = None) -> None:
        """A hook wrote leaves' ``.grad``: in place (every holder of that tensor sees it) or by
        assignment (``.grad`` is another tensor from now on: ``sources``, another leaf's ``.grad``
        tensor itself, which the two then share)."""
        for leaf, how in changes:
            if how == "assign":   # sources: another leaf (its .grad tensor), or the engine tensor assigned
                source = (sources or {}).get(leaf)
                self.grads[leaf] = source if isinstance(source, GradObj) else \
                    self.grad_obj(source) if source is not None else fresh()
            else:
                self.write({self.grad_obj(leaf): leaf.grad}, hook)

    # ------------------------------------------------------------ buffers
    def deliver(self, node, slot: int, obj: GradObj, first: bool, values: list) -> None:
        self.lists[node] = values
        if first:
            self.pending[(node, slot)] = obj
            return
        # InputBuffer::accumulate adds into the buffer in place when it can (old.add_(new)): the
        # buffer keeps its layout through the sum -- a heads-last gradient (HEADS_LAST)'s, or the
        # layout of a new tensor a hook returned (probed on 2.13)
        prev = self.pending.get((node, slot))
        if prev is not None and self._adds_in_place(prev, node, slot):
            self.pending[(node, slot)] = _same_layout(prev)
        else:   # old + new: a new tensor, laid out as TensorIterator lays out the two
            self.pending[(node, slot)] = _sum_obj(prev, obj, values[slot] if slot < len(values) else None,
                                                  self.engine.B)

    def _adds_in_place(self, prev: GradObj, node, slot: int) -> bool:
        """InputBuffer::accumulate's choice: ``old_var.add_(var)`` when grad mode is off (not a
        create_graph backward) and ``can_accumulate_inplace(old_var)``: the buffer is
        non-overlapping and dense and the engine holds its only reference (``use_count() == 1``)
        and its storage's (not a view, nothing views it); else ``old_var + var``. In place the
        buffer keeps its own strides: a hook's ``g * 2`` of a heads-last gradient stays laid out
        (4, 1, 2, 1), so a batch norm behind it reads it as the flash attention left it; a sum
        out of place is laid out anew, channels-last (4, 1, 2, 2) there (probed on 2.13; a hook
        that keeps the tensor it returns, or create_graph, gives the latter)."""
        if getattr(self.engine, "create_graph", False):
            return False
        if prev.unknown_layout or prev.overlaps or prev.unknown_strides or prev.held or prev.tensor is not None \
                or prev.base is not None:
            return False
        if prev.strides is None and not prev.contiguous and prev.layout is None:
            return False
        return not self.held_elsewhere(prev, at=(node, slot))

    def take(self, node, n: int) -> list:
        self.lists.pop(node, None)
        return [self.pending.pop((node, i), None) for i in range(n)]

    def grad_obj(self, t) -> GradObj:
        obj = self.grads.get(t)
        if obj is None:
            obj = self.grads[t] = fresh()
        return obj

    def held_elsewhere(self, obj: GradObj, at=None) -> bool:
        """Does any live holder other than the running node's inputs hold ``obj`` itself, or a view
        of it? A view keeps its base alive (its ViewInfo holds the root base, so the base's
        ``use_count`` counts it): ``SumBackward0``'s expanded gradient waiting in a module's
        BackwardHookFunctionBackward buffer makes AccumulateGrad copy the gradient it views.
        ``at``: the input-buffer slot ``obj`` itself sits in (not another holder)."""
        if any(_holds(o, obj) for key, o in self.pending.items() if key != at):
            return True
        for _state, objs in self.states:
            if any(_holds(o, obj) for o in objs):
                return True
        # an outer backward's holders, the inputs of the node running there included (PyNode::apply's
        # arguments live until the reentrant backward it runs returns)
        if self.parent is not None and any(_holds(o, obj) for o in self.parent._engine_objs()):
            return True
        return self.grads.holds(obj)

    # ------------------------------------------------------------ writes
    def write(self, writes: dict, hook) -> None:
        """A hook wrote these tensors in place (GradObj -> new value): every holder of each sees it,
        the tensor a written view views, and every live view of a written tensor."""
        B = self.engine.B
        done: dict = {}                 # id(GradObj) -> (GradObj, new value)
        todo = list(writes.items())
        while todo:
            obj, value = todo.pop()
            if id(obj) in done:
                continue
            done[id(obj)] = (obj, value)
            if obj.base is not None and obj.to_base is not None:
                base_value = obj.to_base(B, value)
                if base_value is None:   # a write into repeated elements that memory cannot hold
                    raise ProblemError(hook.loc, unplaced(hook))
                todo.append((obj.base, base_value))
        # live views of a written tensor (through views no one holds any more, too)
        for obj in list(self._all_objs()):
            if id(obj) in done:
                continue
            chain, a = [], obj
            while a is not None and id(a) not in done and a.from_base is not None:
                chain.append(a)
                a = a.base
            if a is None or id(a) not in done or not chain:
                continue
            value = done[id(a)][1]
            for v in reversed(chain):
                value = v.from_base(B, value)
                done[id(v)] = (v, value)
        roots = {id(o.storage.root()) for o, _v in done.values()}
        for o in self._all_objs():
            if id(o) not in done and id(o.storage.root()) in roots:
                self._refuse(hook)
        for obj, value in done.values():
            self._place(obj, value)

    def _place(self, obj: GradObj, value) -> None:
        obj.value = value
        for values, objs in self.frames:
            for i, o in enumerate(objs):
                if o is obj:
                    values[i] = value
        for (node, slot), o in self.pending.items():
            if o is obj:
                self.lists[node][slot] = value
        for t, o in self.grads.items():
            if o is obj:
                t.write_grad(value)
        for state, objs in self.states:
            if getattr(state, "buffer", None) is not None:   # a multi-grad hook's buffer (a list)
                for i, o in enumerate(objs):
                    if o is obj:
                        state.buffer[i] = value
            elif getattr(state, "grad_outputs", None) is not None and any(o is obj for o in objs):
                state.grad_outputs = tuple(value if o is obj and not isinstance(v, Tensor) else v
                                           for v, o in zip(state.grad_outputs, objs))
        for i, o in enumerate(self.captured):
            if o is obj:
                self.engine.result.captured[i] = value
        if self.parent is not None:
            self.parent._place(obj, value)

    @staticmethod
    def _refuse(hook):
        if hook is None:   # an accumulation into a .grad sharing storage in a way not modelled
            raise ProblemError(None, "a backward adds into a .grad that shares its storage with another "
                                     "gradient in a way adjoint does not model yet")
        raise ProblemError(hook.loc, f"the {_kind(hook)} '{hook.label}' writes a gradient in place that "
                                     "PyTorch's engine shares, through a view, with another gradient it still "
                                     "holds: not modelled yet (return the new value instead of writing in place)")

    def _all_objs(self, but=None):
        """Every engine tensor held now (``but``: leave out that leaf's ``.grad``)."""
        yield from self._engine_objs()
        yield from (o for leaf, o in self.grads.items() if leaf is not but)

    def _engine_objs(self):
        """The tensors this backward and the backwards it runs inside hold (``.grad`` aside)."""
        for _values, objs in self.frames:
            yield from (o for o in objs if o is not None)
        yield from (o for o in self.pending.values() if o is not None)
        for _state, objs in self.states:
            yield from (o for o in objs if o is not None)
        yield from (o for o in self.captured if o is not None)
        if self.parent is not None:
            yield from self.parent._engine_objs()


def zero_grads(rt, leaves: list, set_to_none: bool, loc) -> None:
    """A ``zero_grad`` step over ``leaves``: ``.grad = None`` drops that leaf's reference only (a
    leaf whose ``.grad`` is the same tensor keeps it, and the next backward adds into it there);
    ``grad.zero_()`` zeroes the one tensor, which every leaf holding it sees."""
    objs = grad_holders(rt)
    B = rt.B
    for t in leaves:
        if set_to_none or t.grad is None:
            t.grad = None
            objs.pop(t, None)
            continue
        zeros = B.zeros(tuple(B.shape(t.grad)))
        obj = objs.get(t)
        if obj is not None:
            root = obj.storage.root()
            for other, o in objs.items():
                if other is t:
                    continue
                if _whole(o) is _whole(obj):   # the same tensor, or a detach() of it: the same memory
                    other.write_grad(zeros)
                    o.value = zeros
                elif o.storage.root() is root:   # a view of it, or it of a view: part of the memory
                    raise ProblemError(loc, "zero_grad of a .grad that shares part of its memory with another "
                                            "leaf's .grad is not modelled yet")
            obj.value = zeros
        t.write_grad(zeros)


def write_grad_in_place(rt, t, fn, loc) -> None:
    """``t.grad`` written in place with ``fn(value)`` (``clip_grad_norm_``'s ``mul_``,
    ``clip_grad_value_``'s ``clamp_``): every leaf whose ``.grad`` is that same tensor sees the
    new value, as :func:`zero_grads` writes its zeros."""
    new = fn(t.grad)
    obj = grad_holders(rt).get(t)
    if obj is not None:
        root = obj.storage.root()
        for other, o in grad_holders(rt).items():
            if other is t:
                continue
            if _whole(o) is _whole(obj):
                other.write_grad(new)
                o.value = new
            elif o.storage.root() is root:
                raise ProblemError(loc, "writing a .grad that shares part of its memory with another leaf's .grad "
                                        "in place is not modelled yet")
        obj.value = new
    t.write_grad(new)


def unplaced(hook) -> str:
    """The refusal of a write whose effect on PyTorch's engine tensors is not modelled."""
    return (f"the {_kind(hook)} '{hook.label}' writes an argument in place where adjoint does not know which "
            "tensor of PyTorch's engine it is: not modelled yet (return the new value instead)")


def _kind(hook) -> str:
    return "tensor hook" if hook.kind == "hook" else f"{hook.kind} hook"
