"""Tracing one custom module's forward with ``torch.fx``, its children kept as calls.

Every submodule is a leaf for the tracer: a child's call is one ``call_module`` node (the
child is imported on its own, as a built-in type or with its own traced forward), so a
forward is recorded as its own code wrote it. Stack traces are recorded, so a node can say
which line of the user's code made it.

``torch.utils.checkpoint.checkpoint(self.CHILD, *args, use_reentrant=..., ...)`` is a leaf
too: one ``call_function`` node whose target is PyTorch's ``checkpoint`` and whose first
argument is the child's path (a string; ``node.meta["checkpoint_child"]`` says so), never
traced through, so the program writes the call as the format does (``checkpoint(CHILD, h,
use_reentrant=False)``) and the region is recomputed in the backward as PyTorch does.

When fx cannot trace the forward (data-dependent control flow, a Python call fx cannot see
through), the forward is run once on the example values it receives (:mod:`.record`) and
the tensor ops it ran are recorded with PyTorch's ``__torch_function__`` mode instead: the
program is then the path that example took.
"""

from __future__ import annotations

import torch.nn.utils.rnn as rnn_utils
import torch.utils.checkpoint as ckpt
from torch import fx, nn

#: PyTorch's own function (the target of a checkpoint node)
CHECKPOINT = ckpt.checkpoint
#: ``torch.nn.utils.rnn``'s functions the format has (``nn.utils.rnn.NAME``): leaves, one
#: ``call_function`` node each, as fx cannot trace into them (``pack_padded_sequence`` turns its
#: lengths into a list of ints); the program writes them with their prefix
PACKING = tuple(getattr(rnn_utils, name) for name in ("pack_padded_sequence", "pad_packed_sequence",
                                                      "pad_sequence", "pack_sequence", "unpad_sequence",
                                                      "unpack_sequence"))
#: the keywords the format writes (contract: use_reentrant, early_stop, preserve_rng_state)
CHECKPOINT_KEYWORDS = ("use_reentrant", "early_stop", "preserve_rng_state")


class CheckpointNotWritten(Exception):
    """A checkpoint call the format cannot write (not a child module, another keyword): the
    tree writer refuses it at the user's line rather than tracing through it."""


class ChildTracer(fx.Tracer):
    def __init__(self):
        # math.sqrt(k.size(-1)) is not made a node (fx wraps math's functions by default): the
        # format has no math functions, so the trace fails there and the forward is recorded
        # from one call, where the size is a number
        super().__init__(autowrap_modules=())
        self.record_stack_traces = True
        # a buffer read is traced (a get_attr node), so that an op on it alone (self.var + 1e-5,
        # ~self.mask) is an op of the forward, not a value fx computes while tracing: a constant
        self.proxy_buffer_attributes = True

    def is_leaf_module(self, m: nn.Module, qualname: str) -> bool:
        return True

    def call_module(self, m: nn.Module, forward, args, kwargs):
        """A child's call is one node; so is each item's call of a slice of a child ``Sequential``
        (``self.features[:2](x)``: PyTorch's ``Sequential.__getitem__`` makes a new ``Sequential``
        of the same modules, not installed anywhere, whose forward calls them in order, each
        through its own ``__call__``), written as the calls of the child's items."""
        items = _slice_items(self, m) if not kwargs and len(args) == 1 else None
        if items is None:
            return super().call_module(m, forward, args, kwargs)
        out = args[0]
        for item in items:
            out = self.call_module(item, item.forward, (out,), {})
        return out

    def checkpoint_call(self, function, args, kwargs):
        if not isinstance(function, nn.Module):
            raise CheckpointNotWritten(f"checkpoint(...) is handed {type(function).__name__}, not a child module")
        try:
            path = self.path_of_module(function)
        except NameError:
            raise CheckpointNotWritten("checkpoint(...) is handed a module that is not one of the model's") from None
        other = [k for k in kwargs if k not in CHECKPOINT_KEYWORDS]
        if other:
            raise CheckpointNotWritten(f"checkpoint(...) is given {other[0]}=, which the problem format does not have")
        for k, v in kwargs.items():
            if not isinstance(v, bool) and not (k == "use_reentrant" and v is None):
                raise CheckpointNotWritten(f"checkpoint(...) is given {k}={type(v).__name__}, not True or False")
        proxy = self.create_proxy("call_function", CHECKPOINT, (path, *args), dict(kwargs))
        proxy.node.meta["checkpoint_child"] = path
        return proxy

    def trace(self, root, concrete_args=None):
        """fx's trace, with ``checkpoint`` a leaf: PyTorch's function replaced, while tracing, in
        ``torch.utils.checkpoint`` and in the globals of the forward's module that name it."""
        def leaf(function, *args, **kwargs):
            return self.checkpoint_call(function, args, kwargs)

        def packing(function):
            def call(*args, **kwargs):
                return self.create_proxy("call_function", function, args, kwargs)
            return call

        forward = getattr(type(root), "forward", None)
        spaces = [vars(ckpt), vars(rnn_utils)]
        globs = getattr(forward, "__globals__", None)
        if globs is not None and all(globs is not space for space in spaces):
            spaces.append(globs)
        saved = []
        for space in spaces:
            for name, value in list(space.items()):
                if value is CHECKPOINT:
                    saved.append((space, name, value))
                    space[name] = leaf
                elif any(value is f for f in PACKING):
                    saved.append((space, name, value))
                    space[name] = packing(value)
        try:
            return super().trace(root, concrete_args)
        finally:
            for space, name, value in saved:
                space[name] = value


def _slice_items(tracer: fx.Tracer, m: nn.Module) -> list | None:
    """The items of ``m`` when it is a plain ``Sequential`` the model does not hold (a slice of a
    child's) and each item is one of the model's modules; else None."""
    if type(m) is not nn.Sequential or not len(m):
        return None
    try:
        tracer.path_of_module(m)
    except NameError:
        pass
    else:
        return None
    items = list(m)
    for item in items:
        try:
            tracer.path_of_module(item)
        except NameError:
            return None
    return items


def trace(module: nn.Module, concrete_args: dict | None = None) -> fx.Graph:
    """The fx graph of ``module.forward`` (fx's own exception when it cannot trace);
    ``concrete_args``: arguments traced as these values (None for one the call leaves out)."""
    return ChildTracer().trace(module, concrete_args or None)
