"""The autograd graph as PyTorch 2.13 builds it: tensors, nodes, edges, saved tensors, hook dicts.

These are the records the runtime (:mod:`adjoint.engine.forward`) creates while it runs a model and
the engine (:mod:`adjoint.engine.reverse`) walks backwards. They mirror PyTorch's own objects closely,
because what hooks are handed depends on those details:

* a :class:`Tensor` has a value (whatever the value backend holds), ``requires_grad``, a
  ``grad_fn`` and ``output_nr`` (its gradient edge), a version counter shared with its views,
  ``_base`` for a view, ``.grad``, and the Python-side ``_backward_hooks`` dict;
* a :class:`Node` is one autograd node (``MulBackward0``, ``AccumulateGrad``,
  ``BackwardHookFunctionBackward``, a user Function): ``seq`` is its ``sequence_nr`` (creation
  order; ``AccumulateGrad`` has UINT64_MAX), ``edges`` its ``next_functions`` (one per input
  slot of the op, None for an input that needs no gradient), ``saved`` its SavedVariables,
  and its hook lists (tensor pre-hooks per output, retains_grad hooks, pre-hooks, post-hooks)
  in the order PyTorch keeps them;
* a :class:`HookDict` is PyTorch's ``OrderedDict`` of hooks keyed by ``RemovableHandle.id``
  (one counter for every handle of the process, so removal and ``prepend`` behave as in torch).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from adjoint.values.arith import same

INF_SEQ = 2 ** 64 - 1  # AccumulateGrad's sequence_nr (UINT64_MAX)


class VersionCounter:
    """A tensor's ``_version``, shared by a base and all its views.

    ``value`` counts every write of the storage (a view's value is recomputed from it);
    ``hidden`` those made through a ``t.data`` alias, which in PyTorch move the alias's own
    counter (``Variable::variable_data()`` makes a new one), not this one: PyTorch's
    ``_version``, as its messages quote it, is :attr:`shown`."""

    __slots__ = ("value", "hidden")

    def __init__(self) -> None:
        self.value = 0
        self.hidden = 0

    @property
    def shown(self) -> int:
        """The version PyTorch has: the writes not made through a ``.data`` alias."""
        return self.value - self.hidden


class HookDict:
    """An ordered dict of hooks keyed by handle id (``torch.utils.hooks.RemovableHandle``).

    The hooks run from a copy taken when the hook wrappers start (PyTorch 2.13's C++ wrappers
    copy the dict to extend the hooks' lifetime; ``_call_impl`` unpacks ``(*d.items(),)``): a
    hook removed while an earlier one of the same dict runs still runs in that pass
    (``test_grad_fn_prehooks_remove_hooks``)."""

    __slots__ = ("items", "state")

    def __init__(self) -> None:
        self.items: dict[int, object] = {}
        self.state = 0     # OrderedDict's od_state: bumped by every insertion and deletion

    def add(self, hid: int, hook: object, prepend: bool = False) -> None:
        self.state += 1
        if prepend:
            self.items = {hid: hook, **self.items}
        else:
            self.items[hid] = hook

    def remove(self, hid: int) -> bool:
        if hid in self.items:   # RemovableHandle.remove: ``if id in hooks_dict: del hooks_dict[id]``
            self.state += 1
        return self.items.pop(hid, None) is not None

    def __contains__(self, hid: int) -> bool:
        return hid in self.items

    def __len__(self) -> int:
        return len(self.items)

    def __bool__(self) -> bool:
        return bool(self.items)

    def snapshot(self) -> list:
        return list(self.items.values())

    def pairs(self) -> list:
        """(handle id, hook) pairs, copied (``(*d.items(),)``)."""
        return list(self.items.items())

    def live(self):
        """The hooks to run now: a copy (removals during the run take effect next time)."""
        return list(self.items.values())


@dataclass(eq=False)
class Tensor:
    """One tensor object of the simulated run (identity matters: ``eq=False``).

    ``value`` is the value backend's representation; a view's value is recomputed from its
    base's when the base was written through another view since (``view_of``)."""

    id: int
    shape: tuple[int, ...]
    dtype: str                       # float32 | float64 | int64 | bool
    data: object                     # the value backend's representation (see ``value``)
    requires_grad: bool
    grad_fn: "Node | None" = None
    output_nr: int = 0
    is_leaf: bool = True
    version: VersionCounter = field(default_factory=VersionCounter)
    strides: tuple[int, ...] = ()    # as PyTorch lays it out (see adjoint.values.strides)
    offset: int = 0                  # storage offset, relative to the base's storage
    base: "Tensor | None" = None     # ``_base`` of a view (always a non-view)
    view_of: object = None           # base value -> this view's value (recomputation after writes)
    view_ops: tuple = ()             # (op name, params) from the base to this view, in order
    view_version: int = 0            # the version (VersionCounter.shown: not a .data write) its grad_fn was made at (regenerated after)
    creation: tuple | None = None    # a view PyTorch forbids to modify in place (CreationMeta): ("custom", Function
                                     # name) | ("multi", node name) of a multi-output view op | ("no_grad",)
    data_version: int = 0            # the version ``data`` was computed at (views)
    grad_data: object = None         # ``.grad`` when it is a tensor of its own: a backend value or None (see ``grad``)
    # ``.grad`` when a hook body assigned it a tensor that lives on beside it (``p.grad = buf``, a
    # buffer, an input, a tensor the body made): (that Tensor, a function writing a value into it
    # in place, as ``inplace.write`` does). The two are one tensor in PyTorch: a later write of
    # either (AccumulateGrad's ``+=``, ``zero_grad(set_to_none=False)``, ``buf.mul_(0.9)``) is seen
    # through the other, and moves the tensor's version
    grad_alias: tuple | None = None
    retains_grad: bool = False
    backward_hooks: HookDict | None = None       # the Python ``_backward_hooks`` dict (None until the first hook)
    post_accumulate_hooks: HookDict | None = None
    grad_accumulator: "Node | None" = None        # a leaf's AccumulateGrad, while something holds it (the
                                                  # tensor's own reference is weak, as AutogradMeta's)
    is_param: bool = False
    wrapped: bool = False            # a Python number PyTorch wrapped for an op: never saved, no edge
    float_number: bool = False       # that number is a Python float (``0.5``, not ``2``): beside int64 and bool
                                     # tensors alone it makes the result the default dtype, float32
    is_detached: bool = False        # made by detach(): shares storage, not an autograd view
    data_alias: bool = False         # ``t.data`` in a hook body: detach()'s, but its writes move no version
                                     # PyTorch's ``t`` has (VersionCounter.hidden)
    detached_at: object = None       # where detach_() took it out of its graph (a Loc), for its views
    detached_root: "Tensor | None" = None   # a view of a detach()ed tensor: that tensor (see grad_base)
    edgeless: bool = False           # requires grad through its base but has no gradient edge (a view made
                                     # under no_grad: no grad_fn, and no AccumulateGrad either)
    name: str | None = None          # the first name it was bound to (reports)
    step_state: bool = False         # a recurrent layer's state after one time step: a named tensor of the
                                     # derivation (its steps stay one cell deep), never a name of the file
    conj_bit: bool = False           # a complex tensor with the conjugate bit: z.conj() and every view of it
                                     # (a view, or detach(), keeps its source's bit; any other op resolves it)
    inference: bool = False          # an inference tensor: made inside ``with inference_mode():`` (not a view
                                     # of a normal tensor), or a view of one (adjoint.engine.inference)
    temporary: bool = False          # made and dropped inside one Python expression (x[0, 1]'s x[0]): it holds
                                     # no node once the expression is done (runtime.live_nodes)

    @property
    def value(self):
        if self.view_of is not None and self.data_version != self.version.value:
            self.data = self.view_of(self.base.value)
            self.data_version = self.version.value
        return self.data

    @value.setter
    def value(self, v) -> None:
        self.data = v
        self.data_version = self.version.value

    @property
    def grad(self):
        """``.grad``: a backend value or None (the assigned tensor's value now, see ``grad_alias``)."""
        if self.grad_alias is not None:
            return self.grad_alias[0].value
        return self.grad_data

    @grad.setter
    def grad(self, v) -> None:
        """Assigns ``.grad`` (``variable.mutable_grad() = v``): another tensor from now on."""
        self.grad_alias = None
        self.grad_data = v

    def write_grad(self, v) -> None:
        """Writes ``.grad`` in place (``variable_grad += new_grad``, ``grad.zero_()``, a hook's
        ``p.grad.mul_(2)``): the tensor ``.grad`` is stays that tensor, and when it is one a hook
        assigned (``grad_alias``) the write is that tensor's (its value, its version)."""
        if self.grad_alias is None or v is None:
            self.grad = v
        elif v is not self.grad_alias[0].value:   # (not the very value the tensor was written with)
            self.grad_alias[1](v)

    @property
    def is_view(self) -> bool:
        """An autograd view (``_base`` is set): made by a view op, not by detach()."""
        return self.base is not None and not self.is_detached

    @property
    def needs_grad(self) -> bool:
        """``requires_grad`` as PyTorch reads it for an op's input: a view also requires grad when
        its base does now (DifferentiableViewMeta::requires_grad), e.g. after an in-place write
        with a value that requires grad gave the base a history; its grad_fn is then regenerated."""
        return self.requires_grad or (self.is_view and self.grad_base.requires_grad)

    @property
    def has_gradient_edge(self) -> bool:
        """What a backward's root must have (run_backward checks ``impl::gradient_edge``): a grad_fn,
        or, requiring grad, an AccumulateGrad. A view made under no_grad of a tensor that requires
        grad requires grad yet has neither: PyTorch's "element i of tensors does not require grad
        and does not have a grad_fn"."""
        return self.requires_grad and not (self.grad_fn is None and self.edgeless)

    @property
    def grad_view_ops(self) -> tuple:
        """The view ops from :attr:`grad_base` to this view (``view_ops`` start at the storage's
        owner; a chain through a detached tensor starts again there)."""
        if self.detached_root is None:
            return self.view_ops
        return self.view_ops[len(self.detached_root.view_ops):]

    @property
    def grad_base(self) -> "Tensor | None":
        """The view's autograd ``_base``: ``base`` (the storage it reads), unless the chain of views
        starts at a detached tensor, which is then its base for autograd (it does not require grad
        even when the storage's owner does)."""
        return self.detached_root if self.detached_root is not None else self.base


@dataclass(frozen=True)
class Typed:
    """A value of a tensor whose dtype is not the problem's float dtype (int64 indices and
    class targets, bool conditions): the JSON writes it with ``"dtype"`` and integer values
    (true / false for bool, as ``Tensor.tolist()`` gives them)."""

    value: object
    dtype: str

    @property
    def shape(self) -> tuple:
        return tuple(self.value.shape)

    @property
    def size(self) -> int:
        return self.value.size

    def equals(self, other) -> bool:
        return isinstance(other, Typed) and other.dtype == self.dtype and same(self.value, other.value)

    def elements(self):
        """The values as nested lists of Python ints (bools for a bool tensor); None without values."""
        ints = self.value.ints() if self.value.floats() is not None else None
        return _as_bools(ints) if self.dtype == "bool" and ints is not None else ints


def _as_bools(x):
    return [_as_bools(i) for i in x] if isinstance(x, list) else bool(x)


def recorded(t: Tensor, problem_dtype: str | None = None):
    """What a record keeps of a tensor: its value, with its dtype when that is not a float (with
    ``problem_dtype``: not that float: a float64 copy a float32 problem's hook made)."""
    if t.dtype == problem_dtype or (t.dtype in ("float32", "float64") and problem_dtype is None):
        return t.value
    return Typed(t.value, t.dtype)


@dataclass(eq=False)
class Edge:
    """An edge of the autograd graph: the node a gradient flows to and which of its inputs it feeds."""

    node: "Node"
    input_nr: int


@dataclass(eq=False)
class SavedVariable:
    """A tensor a node saved for backward (``torch::autograd::SavedVariable``).

    ``packed`` is what the pack hook returned (or the saved value itself); ``tensor`` the saved
    tensor object and ``saved_version`` its version when saved, checked at unpack."""

    name: str                        # the formula's name: self, other, result, mat2, ...
    tensor: Tensor
    saved_version: int
    is_output: bool
    value: object                    # the value when saved
    packed: object = None
    hooks: object = None             # the saved_tensors_hooks pair active when packed (None: none)
    released: bool = False
    weak_grad_fn: "Node | None" = None  # the result of an in-place op on a view: the view's grad_fn when saved
                                        # (its regenerated AsStridedBackward0), named by the version message
                                        # while something still holds it (SavedVariable::weak_grad_fn_)
    packed_grad_fn: "Node | None" = None  # with hooks: the tensor's grad_fn when they packed it (grad_fn_)
    unpack_error: object = None          # a mask or index the unpack hook gave back as another dtype: what the
                                         # backward kernel raises (adjoint.engine.hook_runner.index_dtype_error)
    was_leaf: bool = field(init=False)    # is_leaf_: the tensor had no grad_fn when saved
    requires_grad: bool = field(init=False)  # requires_grad_: whether it required grad when saved

    def __post_init__(self):
        self.was_leaf = self.tensor.grad_fn is None
        self.requires_grad = bool(self.tensor.requires_grad)


@dataclass(eq=False)
class Node:
    """An autograd node (a grad_fn): its edges, saved tensors and hooks, as PyTorch creates it."""

    seq: int
    name: str                        # e.g. "MulBackward0", "torch::autograd::AccumulateGrad"
    edges: list                      # per input slot of the op: Edge | None (next_functions)
    op: object = None                # the registry entry (ops.Op) or a special kind (see ``kind``)
    kind: str = "op"                 # op | accumulate | hookfn (BackwardHookFunction) | function (user Function)
                                     # | identity (an unreachable `inputs=` tensor's placeholder: never run)
    params: object = None
    inputs: tuple = ()               # the op's input tensors (Tensor | None), as it was called
    input_values: tuple = ()         # their values at the call
    outputs: list = field(default_factory=list)  # output tensor metadata: (shape, dtype) per output
    output_values: list = field(default_factory=list)
    saved: list = field(default_factory=list)     # SavedVariable, in pack order
    variable: Tensor | None = None   # AccumulateGrad: the leaf
    tensor_pre_hooks: list = field(default_factory=list)   # (output_nr, HookDict): a tensor's _backward_hooks,
                                                           # in the order they were attached
    retains_grad_hooks: dict = field(default_factory=dict)  # output_nr -> Tensor whose .grad is retained
    pre_hooks: HookDict = field(default_factory=HookDict)   # the Python register_prehook dict
    post_hooks: HookDict = field(default_factory=HookDict)  # the Python register_hook dict: user post-hooks,
                                                            # legacy module hooks and BackwardHook's, in order
    module_call: object = None       # the module call (forward.Call) that created it, for reports
    loc: object = None               # the expression that created it
    released: bool = False           # saved variables freed by a backward without retain_graph
    held: bool = False               # AccumulateGrad: held by more than a running backward (a graph's edge,
                                     # a multi_grad hook's closure); see Runtime.grad_accumulator

    @property
    def is_accumulate(self) -> bool:
        return self.kind == "accumulate"

    def next_functions(self) -> list:
        return [(e.node, e.input_nr) if e is not None else None for e in self.edges]


@dataclass(eq=False)
class Application:
    """One op applied during the forward: an equation of the derivation ``outs = prim(ins)``.

    Recorded for every op the model, the loss and forward hooks run (with or without a node),
    not for the ops inside a Function's forward, a hook run during the backward, or a pack hook.
    An in-place op's output is its input tensor (``outs[0] is ins[0]``): ``in_values`` and
    ``out_values`` keep the values before and after. Besides registry primitives, ``prim`` is
    ``"bhf"`` (BackwardHookFunction), ``"function"`` (a custom Function: params is the module)
    or ``"copy_slices"`` (an in-place op on a view rewrote its base: ins are the base and the
    op's other inputs, params a :class:`CopySlicesWrite`)."""

    prim: str                        # a registry name, or "bhf" / "function" / "copy_slices"
    ins: tuple                       # Tensors (a Python number as the wrapped 0-d tensor PyTorch makes)
    outs: tuple                      # Tensors
    params: object
    node: Node | None
    call: object                     # the module call it ran in (forward.Call) or None
    loc: object = None
    in_values: tuple = ()            # the inputs' values when the op ran
    out_values: tuple = ()           # the outputs' values right after it


@dataclass(frozen=True)
class CopySlicesWrite:
    """What a ``copy_slices`` application wrote: the view ops from the base to the written view
    (``Tensor.view_ops``), and the in-place op (its primitive and params) that CopySlices wraps."""

    view_ops: tuple
    prim: str
    params: object
