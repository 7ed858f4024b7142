"""``nn.Module`` machinery as PyTorch 2.13 runs it: per-module hook dicts, global module hooks,
``_call_impl`` and ``torch.utils.hooks.BackwardHook``.

:class:`ModuleHooks` holds one module's hook dicts (or the global ones), keyed by handle id
in registration order (``prepend`` puts a hook first), with the sets of ids registered
``with_kwargs`` / ``always_call`` and the full-vs-legacy flag PyTorch keeps
(``_is_full_backward_hook``). :class:`BackwardHookState` is one ``BackwardHook`` object: made
for one module call that has full backward (or backward-pre) hooks, it captures the hook
lists at that moment, which is why removing a handle after the forward does not stop them.

The post-hook entries put on autograd nodes (:class:`ModuleInputHook`,
:class:`ModuleOutputHook`, :class:`LegacyHook`) are what the engine
(:mod:`adjoint.engine.reverse`) runs at those nodes.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from adjoint.engine.graph import HookDict


@dataclass
class ModuleHooks:
    """The hooks registered on one module, per kind, in registration order."""

    forward_pre: HookDict = field(default_factory=HookDict)
    forward: HookDict = field(default_factory=HookDict)
    backward_pre: HookDict = field(default_factory=HookDict)
    backward: HookDict = field(default_factory=HookDict)     # full or legacy, as ``is_full`` says
    with_kwargs: set = field(default_factory=set)
    always_called: set = field(default_factory=set)
    is_full: bool | None = None                               # _is_full_backward_hook

    def any(self) -> bool:
        return bool(self.forward_pre or self.forward or self.backward_pre or self.backward)

    def dict_for(self, kind: str) -> HookDict:
        return {"forward_pre": self.forward_pre, "forward": self.forward, "full_backward_pre": self.backward_pre,
                "full_backward": self.backward, "backward": self.backward}[kind]


@dataclass(eq=False)
class BackwardHookState:
    """One ``torch.utils.hooks.BackwardHook``: the hooks captured for one module call."""

    call: object                      # the forward.Call
    user_hooks: list                  # full backward hooks (problem.Hook), captured at the call
    user_pre_hooks: list              # backward-pre hooks, captured at the call
    n_inputs: int = 0
    input_tensors_index: list | None = None   # None: no input required grad (no input node)
    n_outputs: int = 0
    output_tensors_index: list | None = None
    grad_outputs: tuple | None = None         # set by the output node's hook, cleared by the input's
    pre_replaced: bool = False                # a backward-pre hook returned a replacement (the last pass)


@dataclass(eq=False)
class ModuleInputHook:
    """BackwardHook._set_user_hook's hook on the inputs' BackwardHookFunctionBackward."""

    state: BackwardHookState


@dataclass(eq=False)
class ModuleOutputHook:
    """BackwardHook.setup_output_hook's hook on the outputs' BackwardHookFunctionBackward."""

    state: BackwardHookState


@dataclass(eq=False)
class LegacyHook:
    """``grad_fn.register_hook(_WrappedHook(hook, module))``: a legacy module backward hook."""

    hook: object                      # problem.Hook
    call: object                      # the forward.Call


@dataclass(eq=False)
class UserNodeHook:
    """A hook the file registers on a node (``node:``), pre or post."""

    hook: object


@dataclass(eq=False)
class UserTensorHook:
    """A hook the file registers on a tensor (``Tensor.register_hook``)."""

    hook: object


@dataclass(eq=False)
class MultiGradState:
    """One ``register_multi_grad_hook``: its buffer for the running backward (one per graph
    task); the registration's own keeps ``nb_calls``, which PyTorch shares between tasks."""

    hook: object
    tensors: list                     # the listed Tensors
    count: int = 0
    nb_calls: int | None = None
    buffer: list | None = None
    ran: bool = False                 # mode any: fired in this backward
    nodes: list | None = None         # each tensor's grad_fn (or AccumulateGrad) when the hook was registered


@dataclass(eq=False)
class MultiGradInner:
    """The tensor hook ``register_multi_grad_hook`` puts on its ``index``-th tensor."""

    state: MultiGradState
    index: int
