"""``stash(EXPR)`` / ``unstash(KEY)`` in saved-tensor hooks (contract v3, section 8): a pack
hook that returns a non-tensor. ``stash`` (in ``pack``) appends a tensor to a list owned by
the hook entry and returns its index, a Python int (what PyTorch then keeps as the packed
value); ``unstash`` (in ``unpack``) hands that tensor back. The torch side does the same with
a Python list (adjoint/torchside/stash.py)."""

from __future__ import annotations

from adjoint.format.errors import ProblemError
from adjoint.engine.graph import Tensor
from adjoint.engine.interpreter import EnvScope


class StashScope(EnvScope):
    """A pack or unpack hook's names, with ``stash`` (pack) or ``unstash`` (unpack)."""

    def __init__(self, env: dict, what: str, kind: str, store: list, names: dict | None = None):
        super().__init__(env, what, names)   # names: the forward's named tensors (a closure's)
        self.kind = kind
        self.store = store

    def call(self, name, args, kwargs, loc):
        if name not in ("stash", "unstash"):
            return super().call(name, args, kwargs, loc)
        wanted = "pack" if name == "stash" else "unpack"
        if self.kind != wanted:
            raise ProblemError(loc, f"{name}(...) is for {wanted} hooks only (stash in pack, unstash in unpack)")
        if kwargs or len(args) != 1:
            raise ProblemError(loc, f"{name} takes one argument: {name}(x)" if name == "stash" else
                               "unstash takes one argument: the key stash returned, as in unstash(x)")
        if name == "stash":
            if not isinstance(args[0], Tensor):
                raise ProblemError(loc, "stash(...) keeps a tensor; hand it one, as in stash(x)")
            self.store.append(args[0])
            return len(self.store) - 1
        key = args[0]
        if isinstance(key, bool) or not isinstance(key, int) or not 0 <= key < len(self.store):
            raise ProblemError(loc, "unstash(KEY) takes a key stash returned (the unpack hook's x when the pack "
                                    "returned stash(...))")
        return self.store[key]
