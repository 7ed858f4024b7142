"""``ctx.mark_dirty``: a custom Function that modifies some of its inputs in place
(``function: {dirty: [x]}``), as PyTorch 2.13's ``THPFunction_apply`` does it.

The forward runs on copies of the inputs (``autograd_function.apply_function``); what it wrote
into a dirty input's copy is then written into the input itself, with the version bumps of
its in-place writes and one more (``AutogradContext::get_and_bump_dirty``). Then, output by
output (``_process_backward_mode_ad``'s ``set_history``): a dirty input returned is that very
tensor, its history rebased onto the Function's node at that output (``rebase_history``: its
tensor hooks cleared, ``retain_grad`` moved along), unless it is a leaf that requires grad
(PyTorch's RuntimeError); at the end, a dirty input that was not returned is PyTorch's
RuntimeError. A dirty input that is a view (PyTorch: a ``CopySlices`` node on its base, the
view's ``grad_fn`` regenerated) and one that requires grad while no node is made (grad mode
off: PyTorch returns a detached alias) are refused as not modelled."""

from __future__ import annotations

from adjoint.format.errors import ProblemError
from adjoint.engine.graph import Tensor
from adjoint.engine.inplace import rebase
from adjoint.engine.torch_errors import TorchError

LEAF = "a leaf Variable that requires grad has been used in an in-place operation."
NOT_RETURNED = ("Some elements marked as dirty during the forward method were not returned as output. The inputs "
                "that are modified inplace must all be outputs of the Function.")


def check_dirty_inputs(mod, by_slot: dict, save_declared: bool) -> None:
    """Before the forward: what the engine does not model (refused at the ``dirty:`` entry)."""
    for name, loc in mod.function.dirty:
        t = by_slot[name]
        if not isinstance(t, Tensor):
            raise ProblemError(loc, f"ctx.mark_dirty takes tensors; '{name}' is a Python value here")
        if t.is_view or t.is_detached:
            raise ProblemError(loc, f"'{name}' is a view of another tensor here: a custom Function marking a view "
                                    "dirty (CopySlices on its base) is not modelled; pass a tensor that is not a view "
                                    "(.clone() it)")
        if not save_declared:
            raise ProblemError(loc, "a Function with dirty: declares save: (ctx.save_for_backward), so that its "
                                    "backward does not run the in-place forward again")


def write_dirty(mod, by_slot: dict, plain: dict) -> None:
    """The forward's in-place writes reach the input itself; then get_and_bump_dirty."""
    for name, _ in mod.function.dirty:
        t, copy = by_slot[name], plain[name]
        t.value = copy.value
        t.version.value += copy.version.value + 1


def dirty_output(rt, mod, node, by_slot: dict, plain: dict, o, k: int):
    """The real input for output ``k`` when it is a dirty input's copy (set_history), else None."""
    for name, loc in mod.function.dirty:
        if plain[name] is not o:
            continue
        t = by_slot[name]
        if node is None:
            if t.requires_grad:
                raise ProblemError(loc, f"'{name}' requires grad but the Function makes no node here (grad mode "
                                        "off): PyTorch returns a detached alias of it, not modelled")
            return t
        if t.is_leaf and t.requires_grad:
            raise TorchError("RuntimeError", LEAF, "leaf_inplace")
        t.grad = None          # var.mutable_grad().reset()
        rebase(t, node, k)     # clear_hooks, rebase_history(var, {cdata, output_nr})
        return t
    return None


def check_returned(mod, plain: dict, outs) -> None:
    """All the modified tensors must be returned as is."""
    returned = {id(o) for o in outs}
    for name, _ in mod.function.dirty:
        if id(plain[name]) not in returned:
            raise TorchError("RuntimeError", NOT_RETURNED, "dirty_not_returned")
