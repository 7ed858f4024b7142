"""``verify --origin`` on a module whose forward calls ``torch.utils.checkpoint.checkpoint``: its
hook calls marked as the file's are.

While the user's module runs, PyTorch's ``checkpoint`` is replaced (in ``torch.utils.checkpoint``
and in the globals of every forward of the module's classes that name it) by a function that
calls the real one with the user's function wrapped: its first call is the original forward;
every later call is PyTorch's recomputation in the backward, during which each hook call the log
receives is marked ``recomputed``. With the reentrant variant (``use_reentrant`` not ``False``),
the reentrant backward ``CheckpointFunction`` runs after its recomputation is marked by a depth
counter, which a post hook on the ``CheckpointFunctionBackward`` node takes down when the node
returns -- as the file's own torch run marks them (``adjoint.torchside.checkpoint``).
"""

from __future__ import annotations

import contextlib

import torch
import torch.utils.checkpoint as ckpt


class Marks:
    """How deep the run is in a recomputation and in a reentrant backward."""

    def __init__(self):
        self.replay = 0
        self.reentrant = 0

    def mark(self, record: dict) -> None:
        if self.replay:
            record["recomputed"] = True
        if self.reentrant:
            record["reentrant"] = self.reentrant


@contextlib.contextmanager
def marked_checkpoints(model, marks: Marks):
    real = ckpt.checkpoint

    def checkpoint(function, *args, **kwargs):
        state = {"original": True}
        reentrant = kwargs.get("use_reentrant", True) is not False

        def run(*a, **kw):
            if state["original"]:
                state["original"] = False
                return function(*a, **kw)
            marks.replay += 1
            try:
                return function(*a, **kw)
            finally:
                marks.replay -= 1
                if reentrant:
                    marks.reentrant += 1

        out = real(run, *args, **kwargs)
        if reentrant:
            for t in (out if isinstance(out, tuple) else (out,)):
                node = t.grad_fn if isinstance(t, torch.Tensor) else None
                if node is not None and node.name() == "CheckpointFunctionBackward":
                    node.register_hook(lambda grad_inputs, grad_outputs: _leave(marks))
                    break
        return out

    spaces = [vars(ckpt)]
    for m in model.modules():
        globs = getattr(getattr(type(m), "forward", None), "__globals__", None)
        if globs is not None and all(globs is not s for s in spaces):
            spaces.append(globs)
    saved = [(space, name) for space in spaces for name, value in list(space.items()) if value is real]
    for space, name in saved:
        space[name] = checkpoint
    try:
        yield
    finally:
        for space, name in saved:
            space[name] = real


def _leave(marks: Marks) -> None:
    marks.reentrant -= 1
