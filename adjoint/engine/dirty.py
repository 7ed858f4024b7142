"""``ctx.mark_dirty``: a custom Function that modifies some of its inputs in place
(``function: {dirty: [x]}``), as PyTorch 2.13's ``THPFunction_apply`` does it.

The forward runs on copies of the inputs (``autograd_function.apply_function``); what it wrote
into a dirty input's copy is then written into the input itself, with the version bumps of
its in-place writes and one more (``AutogradContext::get_and_bump_dirty``). Then, output by
output (``_process_backward_mode_ad``'s ``set_history``): a dirty input returned is that very
tensor, its history rebased onto the Function's node at that output (``rebase_history``: its
tensor hooks cleared, ``retain_grad`` moved along), unless it is a leaf that requires grad
(PyTorch's RuntimeError); at the end, a dirty input that was not returned is PyTorch's
RuntimeError. A dirty input that is a view raises PyTorch's errors (with several outputs; a
view PyTorch forbids to modify; a view of a leaf that requires grad); one that PyTorch accepts
gets a ``CopySlices`` node on its base and its ``grad_fn`` regenerated (modelled when it is the
Function's first argument). One that requires grad while no node is made (grad mode off:
PyTorch returns a detached alias) is refused as not modelled."""

from __future__ import annotations

from adjoint.format.errors import ProblemError
from adjoint.engine.graph import Tensor
from adjoint.engine.inplace import rebase, rebase_view, write
from adjoint.engine.torch_errors import TorchError
from adjoint.engine.view_history import rebase_message

LEAF = "a leaf Variable that requires grad has been used in an in-place operation."
NOT_RETURNED = ("Some elements marked as dirty during the forward method were not returned as output. The inputs "
                "that are modified inplace must all be outputs of the Function.")
VIEW_MULTI = ("If your Function modifies inplace an input that is a view of another Tensor, your Function cannot "
              "return more than one Tensor. This is not supported by the current autograd engine. You should either "
              "make sure the input is not a view (using .clone() for example) or make your Function only return one "
              "Tensor (potentially splitting it into two Functions: one doing the inplace that returns a single "
              "Tensor and a second one that does the other operations). You can ask on the forum "
              "https://discuss.pytorch.org/ if you need help to do this change.")
VIEW_OF_LEAF = "a view of a leaf Variable that requires grad is being used in an in-place operation."


def check_dirty_inputs(mod, by_slot: dict, save_declared: bool) -> None:
    """Before the forward: what the engine does not model (refused at the ``dirty:`` entry)."""
    for name, loc in mod.function.dirty:
        t = by_slot[name]
        if not isinstance(t, Tensor):
            raise ProblemError(loc, f"ctx.mark_dirty takes tensors; '{name}' is a Python value here")
        if t.detached_root is not None or (t.is_detached and t.is_view):
            raise ProblemError(loc, f"'{name}' shares memory with a detach()ed tensor here: a custom Function marking "
                                    "it dirty is not modelled; pass a tensor of its own (.clone() it)")
        if not save_declared:
            raise ProblemError(loc, "a Function with dirty: declares save: (ctx.save_for_backward), so that its "
                                    "backward does not run the in-place forward again")


def write_dirty(rt, mod, by_slot: dict, plain: dict) -> dict:
    """The forward's in-place writes reach the input itself; then get_and_bump_dirty. Returns
    each dirty view's base value before the write (for the record of the forward)."""
    before = {}
    for name, _ in mod.function.dirty:
        t, copy = by_slot[name], plain[name]
        writes = copy.version.value
        if t.is_view:
            before[name] = t.grad_base.value
            write(rt, t, copy.value)    # through to the base: one bump
        elif t.is_detached:             # x.detach(): the same memory as the tensor it was detached from
            write(rt, t, copy.value)
        else:
            t.value = copy.value
            t.version.value += 1
        t.version.value += writes
    return before


def dirty_output(rt, mod, node, by_slot: dict, plain: dict, o, k: int, n_outputs: int, args: list, before: dict,
                 record: tuple):
    """The real input for output ``k`` when it is a dirty input's copy (set_history), else None.
    ``n_outputs``: how many outputs the forward returned (Python values included)."""
    for name, loc in mod.function.dirty:
        if plain[name] is not o:
            continue
        t = by_slot[name]
        if node is None:
            if t.requires_grad:
                raise ProblemError(loc, f"'{name}' requires grad but the Function makes no node here (grad mode "
                                        "off): PyTorch returns a detached alias of it, not modelled")
            return t
        if (t.is_leaf or (t.is_view and t.grad_fn is None)) and t.needs_grad:   # a view made under no_grad too
            raise TorchError("RuntimeError", LEAF, "leaf_inplace")
        if t.is_view:
            view_rules(t, loc, name, n_outputs)
        t.grad = None          # var.mutable_grad().reset()
        if t.is_view:
            rebase_dirty_view(rt, mod, node, t, loc, name, args, before[name], record)
        else:
            rebase(t, node, k)     # clear_hooks, rebase_history(var, {cdata, output_nr})
        return t
    return None


def check_returned(mod, plain: dict, outs) -> None:
    """All the modified tensors must be returned as is."""
    returned = {id(o) for o in outs}
    for name, _ in mod.function.dirty:
        if id(plain[name]) not in returned:
            raise TorchError("RuntimeError", NOT_RETURNED, "dirty_not_returned")


def view_rules(t: Tensor, loc, name: str, n_outputs: int) -> None:
    """A dirty input that is a view, in set_history's order: more than one output is an error;
    then rebase_history's: a view PyTorch forbids to modify (handle_view_on_rebase), a view of
    a leaf that requires grad (else :func:`rebase_dirty_view`)."""
    if n_outputs > 1:
        raise TorchError("RuntimeError", VIEW_MULTI, "view_inplace")
    if t.creation and t.creation[0] in ("custom", "multi", "no_grad", "inference"):
        raise TorchError("RuntimeError", rebase_message(t, False), "view_inplace")
    if t.grad_base.is_leaf and t.grad_base.requires_grad:
        raise TorchError("RuntimeError", VIEW_OF_LEAF, "leaf_inplace")


def rebase_dirty_view(rt, mod, node, t: Tensor, loc, name: str, args: list, base_before, record: tuple) -> None:
    """rebase_history on a dirty view: CopySlices(base's edge, the Function's node) becomes the
    base's grad_fn, the view's is regenerated (AsStridedBackward0). CopySlices hands its first
    slot's gradient to the view's part and the node's other slots to the node's other edges:
    modelled when the view is the Function's first argument and every argument is a tensor."""
    if args[0] is not t or not all(isinstance(a, Tensor) for a in args):
        raise ProblemError(loc, f"'{name}' is a view marked dirty that is not the Function's first argument, or the "
                                "Function takes Python values: CopySlices pairs its base with the Function's first "
                                "edge; not modelled; pass the view first, or a tensor that is not a view (.clone() it)")
    tensors, in_values = record   # the Function's equation first: the CopySlices one wraps it
    rt.record("function", tensors, [t], mod, node, mod.function.loc, in_values)
    rebase_view(rt, t, node, loc, base_before)



def check_undeclared_writes(mod, plain: dict) -> None:
    """A forward that writes an input in place (or a view of it) without marking it dirty
    changes the caller's tensor in PyTorch; the engine's forward ran on a copy: refused."""
    dirty = {name for name, _ in mod.function.dirty}
    for name, copy in plain.items():
        if isinstance(copy, Tensor) and name not in dirty and copy.version.value:
            raise ProblemError(mod.function.loc, f"the forward of {mod.function.name} writes its input '{name}' in "
                                                 f"place without marking it dirty: not modelled; list it in dirty: "
                                                 f"[{name}] (ctx.mark_dirty) and return it")
