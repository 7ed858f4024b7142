"""The in-place transposes ``Tensor.t_()`` (``TBackward1``) and ``Tensor.transpose_(dim0, dim1)``
(``TransposeBackward1``), as PyTorch 2.13 runs them (probed in torch): the caller's tensor itself
takes the swapped sizes and strides (its storage unchanged, so not contiguous afterwards), its
version moves by one, and when it requires grad (grad mode on) its grad_fn becomes the node (no
tensor saved; dims wrapped) whose edge is its old gradient edge -- without moving its hooks: a hook
dict it had stays on the old grad_fn, hooks registered after the transpose join that dict, and a
retain_grad stays there too (a tensor without hooks gets new ones on the node). The method returns the tensor itself. A leaf that requires
grad: check_inplace's RuntimeError first; then ``t_``'s "expects a tensor with <= 2 dimensions" or
``transpose_``'s IndexError. A view, or a tensor with views or ``detach()``-ed aliases, is refused:
PyTorch changes the sizes of that one tensor alone (a view's transpose_ keeps its base's history
as its own node, a base's views regenerate theirs as ``AsStridedBackward0``), which is not built.
``nn.utils.rnn.unpad_sequence`` runs ``transpose_(0, 1)`` (:mod:`adjoint.engine.bindings.rnn_utils`).
"""

from __future__ import annotations

import copy

from adjoint.engine.bindings.signature import Function, Param, dim_index
from adjoint.engine.graph import Tensor
from adjoint.engine.torch_errors import TorchError
from adjoint.format.errors import Loc, ProblemError

VIEW_REFUSAL = ("{what} of a view, or of a tensor with views, is not modelled (PyTorch's in-place transpose changes "
                "that tensor's sizes alone); transpose a tensor of its own (x.clone()), or use the out-of-place {alt}")


def transpose_in_place(rt, t: Tensor, prim: str, dims, loc: Loc, refusal: str) -> Tensor:
    """``t.transpose_(dim0, dim1)`` (``prim`` "transpose_", ``dims`` the two dims as given) or ``t.t_()``
    (``prim`` "t_", ``dims`` None): the tensor itself, transposed in place; ``refusal`` the one-line
    message for a view or a tensor with views."""
    from adjoint.engine.inplace import check_inplace_allowed, write
    from adjoint.engine.ops import REGISTRY
    from adjoint.values.strides import contiguous_strides
    needs = t.requires_grad or (t.is_view and t.grad_base.requires_grad)
    if rt.grad_enabled and needs:
        check_inplace_allowed(t)   # check_inplace: a leaf's RuntimeError is the answer
    nd = len(t.shape)
    if prim == "t_":
        if nd > 2:
            raise TorchError("RuntimeError", f"t_() expects a tensor with <= 2 dimensions, but self is {nd}D")
        params = (0, 1) if nd == 2 else (0, 0)
    else:   # the kernel's dim check (its node, saving no tensor, changes nothing seen)
        params = (dim_index(dims[0], nd, loc), dim_index(dims[1], nd, loc))
    if t.is_view or t.is_detached or t.data_alias or any(
            u is not t and (u.base is t or u.detached_root is t) for u in rt.all_tensors):
        raise ProblemError(loc, refusal)
    op = REGISTRY[prim]
    node = None
    if rt.grad_enabled and t.needs_grad:
        seq = rt._new_seq()
        # the node's input as called (validate_outputs checks the gradient against its sizes): a snapshot, since
        # the tensor itself takes the transposed sizes
        called = copy.copy(t)
        node = rt.new_node(op.node, [rt.gradient_edge(t)], op, params if prim == "transpose_" else None, [called], loc,
                           seq)
    before = t.value
    d0, d1 = params
    perm = list(range(nd))
    perm[d0], perm[d1] = perm[d1], perm[d0]
    after = rt.B.permute(before, tuple(perm)) if nd >= 2 and d0 != d1 else before
    strides = t.strides or contiguous_strides(t.shape)
    t.shape = tuple(t.shape[p] for p in perm)
    t.strides = tuple(strides[p] for p in perm)
    write(rt, t, after)
    rt.record(prim, [t], [t], params if prim == "transpose_" else None, node, loc, [before])
    if node is not None:
        node.outputs = [(t.shape, t.dtype)]
        node.output_values = [after]
        # set_history, not rebase_history's update_tensor_hooks_on_new_gradfn (torch 2.13): a hook dict the tensor
        # had stays on the old grad_fn (hooks registered after the transpose join it there), and so does a
        # retain_grad (retain_grad() again is then a no-op)
        t.grad_fn, t.output_nr, t.requires_grad, t.is_leaf = node, 0, True, False
    return t


def lower_t_(rt, a: dict, loc: Loc):
    return transpose_in_place(rt, a["self"], "t_", None, loc, VIEW_REFUSAL.format(what="Tensor.t_()", alt="t()"))


def lower_transpose_(rt, a: dict, loc: Loc):
    return transpose_in_place(rt, a["self"], "transpose_", (a["dim0"], a["dim1"]), loc,
                              VIEW_REFUSAL.format(what="Tensor.transpose_", alt="transpose"))


_SELF = Param("self", "tensor")

FUNCTIONS = (
    Function("t_", (_SELF,), lower_t_, where="method", doc="TBackward1: the tensor itself transposed in place"),
    Function("transpose_", (_SELF, Param("dim0", "int"), Param("dim1", "int")), lower_transpose_, where="method",
             doc="TransposeBackward1: the tensor itself transposed in place"),
)
