"""The hook table: one :class:`HookKind` per kind of hook PyTorch has, everything about it.

Every layer reads this table: validation (which kinds exist on what), the runtime (when a
kind fires, which arguments it is handed, what a returned value replaces), the torch side
(which ``register_*`` method registers it) and the reports (how to say what it is).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HookKind:
    """One kind of hook: how it registers, when it fires, what it is handed and what a return replaces."""

    on: str                      # module | global | tensor | node | multi_grad | saved_tensors
    kind: str                    # the contract's kind name
    registers: str               # the PyTorch call that registers it
    phase: str                   # forward | backward
    args: tuple[str, ...]        # argument names, as PyTorch names them (the contract's ``args`` keys)
    returns: str | None          # what a returned value replaces (None: it must return None)
    says: str                    # what it is, in words, for reports


KINDS: tuple[HookKind, ...] = (
    HookKind("module", "forward_pre", "module.register_forward_pre_hook", "forward", ("input",),
             "the module's positional inputs", "runs before the module's forward"),
    HookKind("module", "forward", "module.register_forward_hook", "forward", ("input", "output"),
             "the module's output", "runs after the module's forward"),
    HookKind("module", "full_backward_pre", "module.register_full_backward_pre_hook", "backward", ("grad_output",),
             "grad_output, which then flows into the module", "runs when the gradient reaches the module's output"),
    HookKind("module", "full_backward", "module.register_full_backward_hook", "backward",
             ("grad_input", "grad_output"), "grad_input, which flows upstream of the module",
             "runs when the gradient w.r.t. the module's inputs is known"),
    HookKind("module", "backward", "module.register_backward_hook", "backward", ("grad_input", "grad_output"),
             "the grad_inputs of the module's last autograd node",
             "the legacy hook: a post-hook on the grad_fn of the module's output (its last node)"),
    HookKind("tensor", "hook", "tensor.register_hook", "backward", ("grad",),
             "the gradient, for later hooks, retain_grad and the node", "runs when the tensor's gradient is computed"),
    HookKind("tensor", "retain_grad", "tensor.retain_grad", "backward", (), None,
             "keeps .grad of a non-leaf (after every tensor hook)"),
    HookKind("tensor", "post_accumulate_grad", "tensor.register_post_accumulate_grad_hook", "backward", ("tensor",),
             None, "runs after the leaf's .grad was accumulated"),
    HookKind("node", "pre", "grad_fn.register_prehook", "backward", ("grad_outputs",),
             "the node's incoming gradients", "runs before the autograd node"),
    HookKind("node", "post", "grad_fn.register_hook", "backward", ("grad_inputs", "grad_outputs"),
             "the node's outgoing gradients, which flow upstream", "runs after the autograd node"),
    HookKind("multi_grad", "multi_grad", "torch.autograd.graph.register_multi_grad_hook", "backward",
             ("grads",), None, "runs once the gradients of all (mode all) or the first (mode any) of its tensors are known"),
    HookKind("saved_tensors", "pack", "torch.autograd.graph.saved_tensors_hooks", "forward", ("x",),
             "what the node keeps for backward", "runs when an op saves a tensor for backward"),
    HookKind("saved_tensors", "unpack", "torch.autograd.graph.saved_tensors_hooks", "backward", ("x",),
             "the tensor the node's backward uses", "runs when a node's backward reads a saved tensor"),
)

#: Global module hooks (``torch.nn.modules.module.register_module_KIND_hook``): the module kinds.
GLOBAL_KINDS = ("forward_pre", "forward", "full_backward_pre", "full_backward", "backward")

_BY_KEY = {(k.on, k.kind): k for k in KINDS}


def kind_of(on: str, kind: str) -> HookKind:
    """The table entry of a declared hook (global hooks share the module kinds' entries)."""
    return _BY_KEY[("module" if on == "global" else on, kind)]


def kinds_on(on: str) -> tuple[str, ...]:
    """The kinds a hook on ``on`` may have, in table order."""
    if on == "global":
        return GLOBAL_KINDS
    return tuple(k.kind for k in KINDS if k.on == on and k.kind != "unpack")


def arg_names(on: str, kind: str) -> tuple[str, ...]:
    if on == "multi_grad" and kind == "any":
        return ("grad",)
    return kind_of(on, kind).args
