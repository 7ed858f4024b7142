"""Hook bodies that write in place: what a backward hook's body changed, and ``.grad``.

A backward hook is handed the engine's own gradient tensors (:mod:`adjoint.engine.gradalias` says
which tensor each is). :func:`wrap_args` makes one runtime :class:`~adjoint.engine.graph.Tensor` per
engine tensor (two arguments that are one tensor in PyTorch -- ``AddBackward0``'s
``grad_inputs[0]`` and ``grad_inputs[1]`` -- are one object here too, so a write through one is
read through the other), remembering each one's version; :func:`writes_of` then says which of
them the body wrote (their version moved: ``grad.mul_(2)``, ``grad *= 2``,
``grad_input[0][0] = 0`` through a view) and their new values, for the engine to hand on.

:class:`HookInterp` adds what only hook bodies have: ``t.grad`` of a leaf (read, written in
place, assigned: ``tensor.grad = None``), as PyTorch's ``post_accumulate_grad`` hooks use it.
"""

from __future__ import annotations

from adjoint.format import syntax as S
from adjoint.format.errors import ProblemError
from adjoint.engine.graph import Tensor
from adjoint.engine.gradalias import laid_out
from adjoint.engine.interpreter import Interp


class Wrapped:
    """The tensors a hook was handed, each with the engine tensor it is and its version then."""

    def __init__(self):
        self.by_obj: dict = {}     # id(GradObj) -> Tensor
        self.entries: list = []    # (Tensor, GradObj | None, version when handed)

    def tensor(self, rt, value, obj):
        if obj is not None and id(obj) in self.by_obj:
            return self.by_obj[id(obj)]
        t = rt.tensor(value)
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
        if isinstance(t, Tensor) and t.strides and len(t.strides) == len(t.shape):
            return laid_out(tuple(t.shape), tuple(t.strides))
        return None

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
        if isinstance(e, S.Attr) and e.name == "grad":
            obj = super().eval(e.obj)
            return self.grads.read(self.rt, self.leaf(obj, e), e.loc)
        return super().eval(e)

    def execute(self, stmt):
        if isinstance(stmt, S.Assign) and isinstance(stmt.target, S.Attr) and stmt.target.name == "grad":
            t = self.leaf(super().eval(stmt.target.obj), stmt.target)
            value = self.eval(stmt.value)
            self.grads.assign(t, value, stmt.loc)
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

    @staticmethod
    def leaf(obj, e):
        if not isinstance(obj, Tensor):
            raise ProblemError(e.loc, f"'{S.to_source(e.obj)}' is not a tensor: it has no .grad")
        if not (obj.is_leaf and obj.requires_grad and obj.grad_fn is None):
            raise ProblemError(e.loc, f"'{S.to_source(e.obj)}.grad': .grad of a tensor that is not a leaf requiring "
                                      "grad is not modelled in hook bodies (use it on a post_accumulate_grad hook's "
                                      "tensor)")
        return obj


class LeafGrads:
    """``.grad`` of leaves as one hook call sees them: one Tensor per leaf's ``.grad``."""

    def __init__(self):
        self.read_tensors: dict = {}   # leaf Tensor -> (Tensor of its .grad, version when read)
        self.assigned: list = []       # leaves whose .grad the body assigned

    def read(self, rt, leaf: Tensor, loc):
        if leaf.grad is None:
            self.read_tensors.pop(leaf, None)
            return None
        held = self.read_tensors.get(leaf)
        if held is not None and held[2] is leaf.grad:
            return held[0]
        t = rt.tensor(leaf.grad, dtype=leaf.dtype)
        self.read_tensors[leaf] = (t, t.version.value, leaf.grad)
        return t

    def assign(self, leaf: Tensor, value, loc) -> None:
        if value is not None:
            if not isinstance(value, Tensor):
                raise ProblemError(loc, "assigned grad expected to be a Tensor or None but got grad of type "
                                        f"{type(value).__name__}: PyTorch raises TypeError")
            if tuple(value.shape) != tuple(leaf.shape):
                raise ProblemError(loc, "assigned grad has data of a different size: PyTorch raises RuntimeError")
            self.read_tensors[leaf] = (value, value.version.value, value.value)
        else:
            self.read_tensors.pop(leaf, None)
        leaf.grad = None if value is None else value.value
        self.assigned.append(leaf)

    def settle(self) -> list:
        """Write back every ``.grad`` the body wrote in place: (leaf, "assign" | "write") for each
        leaf whose ``.grad`` changed."""
        changed = [(leaf, "assign") for leaf in self.assigned]
        for leaf, (t, version, _v) in self.read_tensors.items():
            if t.version.value != version:
                leaf.grad = t.value
                changed.append((leaf, "write"))
        return changed
