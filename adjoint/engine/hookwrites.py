"""Hook bodies that write in place: what a backward hook's body changed, and ``.grad``.

A backward hook is handed the engine's own gradient tensors (:mod:`adjoint.engine.gradalias` says
which tensor each is). :func:`wrap_args` makes one runtime :class:`~adjoint.engine.graph.Tensor` per
engine tensor (two arguments that are one tensor in PyTorch -- ``AddBackward0``'s
``grad_inputs[0]`` and ``grad_inputs[1]`` -- are one object here too, so a write through one is
read through the other), remembering each one's version; :func:`writes_of` then says which of
them the body wrote (their version moved: ``grad.mul_(2)``, ``grad *= 2``,
``grad_input[0][0] = 0`` through a view) and their new values, for the engine to hand on.

In a create_graph backward the engine hands its gradient tensors themselves, with their graphs,
and a body's write is recorded on them (:meth:`Wrapped.fresh_written` says when one was not);
``LEAF.grad`` read there is the tensor AccumulateGrad made, graph and all.

:class:`HookInterp` adds what only hook bodies have: ``t.grad`` of a leaf (read, written in
place, assigned: ``tensor.grad = None``), as PyTorch's ``post_accumulate_grad`` hooks use it.
"""

from __future__ import annotations

from adjoint.format import syntax as S
from adjoint.format.errors import ProblemError
from adjoint.engine.graph import Tensor
from adjoint.engine.gradalias import GradObj, hook_view, laid_out
from adjoint.engine.inplace import write
from adjoint.engine.interpreter import Interp
from adjoint.engine.pyerrors import type_name
from adjoint.engine.torch_errors import TorchError
from adjoint.engine import pyerrors, warns

#: how THPVariable_set_grad names a gradient's dtype (its C++ type) and the tensor's (its ScalarType)
ASSIGNED_DTYPE_NAMES = {"float32": ("float", "Float"), "float64": ("double", "Double"), "int64": ("long int", "Long"),
                        "bool": ("bool", "Bool")}


class Wrapped:
    """The tensors a hook was handed, each with the engine tensor it is and its version then."""

    def __init__(self):
        self.by_obj: dict = {}     # id(GradObj) -> Tensor
        self.entries: list = []    # (Tensor, GradObj | None, version when handed)
        self.fresh: set = set()    # id of each Tensor made here to hold a value (not the engine's own tensor)

    def tensor(self, rt, value, obj):
        if obj is not None and id(obj) in self.by_obj:
            return self.by_obj[id(obj)]
        if obj is not None and obj.tensor is not None:   # a tensor of the file's a hook returned: itself
            t = obj.tensor
            self.entries.append((t, obj, t.version.value))
            self.by_obj[id(obj)] = t
            return t
        t = rt.tensor(value)
        self.fresh.add(id(t))
        if obj is not None and obj.strides is not None:
            t.strides = obj.strides          # an expanded gradient: writing it in place raises, as in PyTorch
        elif obj is not None and obj.layout is not None and len(obj.layout) == len(t.shape):
            t.strides = obj.layout           # laid out otherwise than row-major: what the body makes of it is too
        self.entries.append((t, obj, t.version.value))
        if obj is not None:
            self.by_obj[id(obj)] = t
        return t

    def obj_of(self, t):
        """The engine tensor a returned Tensor is (one of the arguments itself), else None; a new
        tensor the body made laid out otherwise than row-major (an elementwise op of an argument
        with such a layout: TensorIterator keeps it) is a new engine tensor with that layout."""
        for e, obj, _v in self.entries:
            if e is t:
                return obj
        root = t.base if isinstance(t, Tensor) else None
        if root is not None:   # a view (or detach()) of an argument: the same memory
            for e, obj, _v in self.entries:
                if e is root and obj is not None:
                    return hook_view(obj, t, e.value)
        if isinstance(t, Tensor) and t.strides and len(t.strides) == len(t.shape):
            return laid_out(tuple(t.shape), tuple(t.strides))
        return None

    def handed(self, t) -> bool:
        """Whether ``t`` is one of the tensors the hook was handed, or a view or detach() of one."""
        return any(e is t or (t.base is not None and e is t.base) for e, _obj, _v in self.entries)

    def fresh_written(self) -> bool:
        """Whether the body wrote in place a tensor made here to hold a value the engine held as a
        value, not as a tensor (a create_graph backward hands its gradients as tensors themselves)."""
        return any(id(t) in self.fresh and t.version.value != version for t, _obj, version in self.entries)

    def writes(self, B) -> tuple[dict, bool]:
        """(GradObj -> new value for every argument written in place, whether an argument with
        no known engine tensor was written).

        An expanded gradient (``sum``'s) written by an op PyTorch lets through (``zero_``,
        ``fill_``) is placed when its new value repeats along the broadcast dims as memory does
        (adjoint.engine.gradalias: ``to_base``)."""
        out, unknown = {}, False
        for t, obj, version in self.entries:
            if t.version.value != version:
                placed = obj is not None and obj.overlaps and obj.to_base is not None and obj.to_base(B, t.value) is not None
                if obj is None or obj.opaque or (obj.overlaps and not placed):   # through a view of an expanded gradient
                    unknown = True
                else:
                    out[obj] = t.value
        return out, unknown


def wrap_args(rt, args: dict, objs: dict | None, wrapped: Wrapped) -> dict:
    """A hook's arguments as tensors: backend values wrapped once per engine tensor."""

    def one(v, obj):
        if isinstance(v, tuple):
            inner = obj if isinstance(obj, tuple) else (None,) * len(v)
            return tuple(one(x, o) for x, o in zip(v, inner))
        if isinstance(v, Tensor) and watch:
            wrapped.entries.append((v, obj, v.version.value))   # a tensor the engine made (an int64 zeros grad_input)
            return v
        if v is None or isinstance(v, Tensor) or not rt.B.is_value(v):
            return v
        return wrapped.tensor(rt, v, obj)

    watch = objs is not None   # a backward hook handed the engine's gradients (not forward tensors, not a leaf)
    objs = objs or {}
    return {k: one(v, objs.get(k)) for k, v in args.items()}


class HookInterp(Interp):
    """The interpreter of a hook body: ``LEAF.grad`` reads, in-place writes and assignments.

    ``grads`` (a :class:`LeafGrads`) tracks the ``.grad`` tensors the body touched."""

    def __init__(self, rt, scope, grads: "LeafGrads"):
        super().__init__(rt, scope)
        self.grads = grads

    def eval(self, e):
        if isinstance(e, S.Attr) and e.name == "data":
            return self.data_alias(self.eval(e.obj), e)
        if isinstance(e, S.Attr) and e.name == "grad":
            obj = super().eval(e.obj)
            if isinstance(obj, Tensor) and not has_grad(self.rt, obj):
                return None
            return self.grads.read(self.rt, self.leaf(obj, e), e.loc)
        return super().eval(e)

    def execute(self, stmt):
        if isinstance(stmt, S.Assign) and isinstance(stmt.target, S.Attr) and stmt.target.name == "grad":
            t = self.leaf(super().eval(stmt.target.obj), stmt.target)
            value = self.eval(stmt.value)
            if value is not None and not isinstance(value, Tensor):   # THPVariable_set_grad's first check
                kind = type_name(value, stmt.value)
                if kind is None:
                    raise ProblemError(stmt.loc, "assigning a number to .grad is PyTorch's TypeError, whose text "
                                                 "names the number's Python type (int or float), not known here")
                raise TorchError("TypeError", f"assigned grad expected to be a Tensor or None but got grad of type {kind}")
            if value is t:   # THPVariable_set_grad's next check: the very same Python object
                raise TorchError("RuntimeError", "can't assign Variable as its own grad")
            self.grads.assign(t, value, stmt.loc, self.rt)
            return
        if isinstance(stmt, S.AugAssign) and isinstance(stmt.target, S.Attr) and stmt.target.name == "grad":
            # t.grad op= v: Tensor.__iadd__ on .grad (in place), then .grad set to that same tensor
            t = self.leaf(super().eval(stmt.target.obj), stmt.target)
            current = self.grads.read(self.rt, t, stmt.loc)
            value = self.eval(stmt.value)
            self.check_augmented_none(current, stmt, value)   # .grad None: CPython's TypeError
            result = self.apply_augmented(current, stmt.op, value, stmt.loc)
            if result is not current:
                self.grads.assign(t, result, stmt.loc)
            return
        super().execute(stmt)

    def data_alias(self, obj, e):
        """``t.data`` in a hook body (``grad.data.clamp_(-1, 1)``, ``p.grad.data.zero_()``,
        ``W.data.mul_(0.5)``): ``Variable::variable_data()``, a shallow copy of ``t`` with no
        autograd history (requires_grad False) on the same storage, so a write through it is a
        write of ``t``'s memory -- the gradient that flows on, ``.grad``, the parameter -- exactly
        as ``t.detach()``'s. It differs from ``detach()`` in one thing: its version counter is a
        new one, so the write moves no version PyTorch checks. That is modelled (the alias is
        ``detach()``'s) only where no check could see the difference: refused when a node that
        has not released its saved tensors saved this storage (PyTorch raises no version error
        there and the backward reads the written values), when a named autograd view of it with a
        grad_fn exists (PyTorch keeps that view's grad_fn, the version being unmoved; an unnamed
        one, ``Linear``'s ``weight.t()``, is never read again), and the alias's own ``_version``
        (adjoint.engine.bindings.views.attribute). Its writes are counted apart
        (``VersionCounter.hidden``): ``t._version`` and version errors quote PyTorch's numbers."""
        if obj is None:
            raise pyerrors.no_attribute("data")
        if not isinstance(obj, Tensor):
            raise ProblemError(e.loc, f"'{S.to_source(e.obj)}' is not a tensor: it has no .data")
        root = obj.base if obj.base is not None else obj
        for node in self.rt.nodes:
            for sv in node.saved:
                held = sv.tensor.base if sv.tensor.base is not None else sv.tensor
                if held is root and not sv.released:
                    raise ProblemError(e.loc, f"'{S.to_source(e)}': a node ({node.name}) holds this tensor saved (it has "
                                              "not run, or retain_graph kept it); a write through .data moves no version counter in "
                                              "PyTorch (no error, the backward reads the written values), which "
                                              "is not modelled; write through .detach() (PyTorch's version "
                                              "check applies) or return the new gradient with returns:")
        if any(u.base is root and u.is_view and u.grad_fn is not None and u.name is not None for u in self.rt.all_tensors):
            raise ProblemError(e.loc, f"'{S.to_source(e)}': a named autograd view of this tensor exists; a write "
                                      "through .data moves no version counter in PyTorch, so that view keeps its "
                                      "grad_fn, which is not modelled; use .detach()")
        if obj.inference:
            raise ProblemError(e.loc, f"'{S.to_source(e)}': .data of an inference tensor is not modelled")
        alias = self.rt.detach(obj)
        alias.data_alias = True
        return alias

    @staticmethod
    def leaf(obj, e):
        if not isinstance(obj, Tensor):
            raise ProblemError(e.loc, f"'{S.to_source(e.obj)}' is not a tensor: it has no .grad")
        if not holds_grad(obj):
            raise ProblemError(e.loc, f"'{S.to_source(e.obj)}.grad': writing .grad of a tensor that is neither a "
                                      "leaf requiring grad nor one with retain_grad() is not modelled in hook bodies "
                                      "(use it on a post_accumulate_grad hook's tensor)")
        return obj


def has_grad(rt, t: Tensor) -> bool:
    """TensorBase::grad(): whether ``t.grad`` can be other than None -- a non-leaf without
    retain_grad has no .grad, and reading it warns; a leaf that does not require grad has none
    either (no warning)."""
    if holds_grad(t):
        return True
    if t.grad_fn is not None:
        warns.warn(rt, "UserWarning", warns.NON_LEAF_GRAD)
    return False


def holds_grad(t: Tensor) -> bool:
    """Whether ``t.grad`` is a gradient the backward fills: a leaf requiring grad, or a non-leaf
    with retain_grad() (its .grad is what the retain hook stored, as the answer's grads list it)."""
    return (t.is_leaf and t.requires_grad and t.grad_fn is None) or bool(getattr(t, "retains_grad", False))


class LeafGrads:
    """``.grad`` of leaves as one hook call sees them: one Tensor per leaf's ``.grad``."""

    def __init__(self, wrapped: Wrapped | None = None):
        self.read_tensors: dict = {}   # leaf Tensor -> (Tensor of its .grad, version when read)
        self.assigned: list = []       # leaves whose .grad the body assigned
        # leaf -> what its .grad was assigned when that is a tensor held elsewhere: another leaf (whose
        # .grad tensor itself it is: a.grad = b.grad), or the engine tensor (GradObj) of a gradient the
        # hook was handed (w.grad = grad: AccumulateGrad then adds into that very tensor)
        self.sources: dict = {}
        self.wrapped = wrapped         # the hook's arguments (Wrapped), for the engine tensors they are

    def read(self, rt, leaf: Tensor, loc):
        guard = getattr(rt, "grad_read_guard", None)   # DDP's Reducer: a .grad its collective may be writing
        if guard is not None:
            guard(leaf, loc)
        if leaf.grad is None:
            self.read_tensors.pop(leaf, None)
            return None
        if leaf.grad_alias is not None:   # .grad is a tensor a hook assigned (p.grad = buf): that tensor itself
            t = leaf.grad_alias[0]
            self.read_tensors[leaf] = (t, t.version.value, t.value)
            return t
        held = self.read_tensors.get(leaf)
        if held is not None and held[2] is leaf.grad:
            return held[0]
        graph = getattr(leaf, "grad_tensor", None)
        if graph is not None and graph.value is leaf.grad:
            # a .grad a create_graph backward made is that tensor, with its graph (CopyBackwards,
            # AddBackward0): in a create_graph backward what the body computes from it is recorded
            # through that graph, and a write into it rebases that very tensor; with grad mode off a
            # write moves its version and keeps its grad_fn (a later root reading .grad
            # differentiates through it)
            self.read_tensors[leaf] = (graph, graph.version.value, leaf.grad)
            return graph
        t = rt.tensor(leaf.grad, dtype=leaf.dtype)
        self.read_tensors[leaf] = (t, t.version.value, leaf.grad)
        return t

    def assign(self, leaf: Tensor, value, loc, rt=None) -> None:
        if value is not None:   # THPVariable_set_grad's checks after the type's (HookInterp.execute), in its order
            if value.dtype != leaf.dtype:
                names = ASSIGNED_DTYPE_NAMES
                if value.dtype not in names or leaf.dtype not in names:
                    raise ProblemError(loc, f"assigning a {value.dtype} gradient to a {leaf.dtype} tensor's .grad is "
                                            "PyTorch's error, whose text for these dtypes is not modelled")
                raise TorchError("RuntimeError", f"attempting to assign a gradient with dtype '{names[value.dtype][0]}' "
                                 f"to a tensor with grad_dtype '{names[leaf.dtype][1]}'. The gradient must match the "
                                 "tensor's grad_dtype (defaults to the tensor's dtype). You can set the tensor's "
                                 "grad_dtype attribute with a specific dtype, or None to allow any dtype. Set "
                                 "grad_dtype with caution. Diverging the dtypes of a tensor and its gradient may "
                                 "break downstream systems that assume they match.")
            if tuple(value.shape) != tuple(leaf.shape):
                raise TorchError("RuntimeError", f"attempting to assign a gradient of size '{list(value.shape)}' to a "
                                 f"tensor of size '{list(leaf.shape)}'. Please ensure that the gradient and the tensor "
                                 "are the same size")
            root = value.base if value.base is not None else value   # the tensor whose storage it is
            source = next((other for other, (t, _v, _val) in self.read_tensors.items()
                           if t is root and other is not leaf), None)
            own = self.read_tensors.get(leaf)
            if source is None and own is not None and own[0] is root and not value.view_ops:
                source = leaf   # its own .grad (tensor.grad = tensor.grad, or its detach()): .grad keeps that memory
            if source is not None and source is not leaf and root is not value and (value.view_ops or not value.is_detached):
                raise ProblemError(loc, "assigning a view of another leaf's .grad to .grad (the two then share part "
                                        "of their memory) is not modelled yet; assign its .clone(), or that .grad "
                                        "itself")
            if source is not None and source is not leaf and rt is not None and \
                    (rt.creating_graph or getattr(source, "grad_tensor", None) is root):
                raise ProblemError(loc, "assigning another leaf's .grad to .grad in a create_graph backward, or a "
                                        ".grad a create_graph backward made (the two leaves then share one tensor "
                                        "with a graph) is not modelled yet; assign its .clone()")
            engine = self.wrapped.obj_of(value) if self.wrapped is not None and source is None else None
            if engine is None and source is None and value.strides and \
                    any(st == 0 and d > 1 for d, st in zip(value.shape, value.strides)):
                engine = GradObj(None, tuple(value.strides))   # an expanded tensor: a later += refuses it
            if source is not None:   # one tensor, two .grad: an accumulation into either is seen by both
                self.sources[leaf] = source
            elif engine is not None:
                self.sources[leaf] = engine
            else:
                self.sources.pop(leaf, None)
            self.read_tensors[leaf] = (value, value.version.value, value.value)
        else:
            self.sources.pop(leaf, None)
            self.read_tensors.pop(leaf, None)
        leaf.grad = None if value is None else value.value
        if value is not None and rt is not None and (rt.creating_graph or value.requires_grad):
            # .grad is the tensor assigned, its graph with it (one the body recorded in a create_graph
            # backward, or another .grad a create_graph backward made): what a later root reading .grad
            # differentiates through (adjoint.engine.second_engine.grad_tensor)
            leaf.grad_tensor = value
        source = self.sources.get(leaf)
        if isinstance(source, Tensor):   # another leaf's .grad: the tensor that one is
            leaf.grad_alias = source.grad_alias
        elif value is not None and rt is not None and not (self.wrapped is not None and self.wrapped.handed(value)):
            # a tensor that lives on beside .grad (a buffer or a view of one, an input, a forward
            # tensor, one the body made), not a gradient of the engine's: .grad is that tensor itself
            # from now on (``sources`` keeps its layout, when it is not row-major)
            leaf.grad_alias = (value, lambda v: write(rt, value, v))
        self.assigned.append(leaf)

    def settle(self) -> list:
        """Write back every ``.grad`` the body wrote in place: (leaf, "assign" | "write") for each
        leaf whose ``.grad`` changed."""
        changed = [(leaf, "assign") for leaf in self.assigned]
        for leaf, (t, version, _v) in self.read_tensors.items():
            if t.version.value != version:
                leaf.write_grad(t.value)
                changed.append((leaf, "write"))
        return changed
