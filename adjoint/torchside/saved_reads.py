"""``{read: ..., as: NAME}`` steps in real torch: the user's own line, ``s = y.grad_fn._saved_self``
or ``torch._C._autograd._saved_tensors_hooks_is_enabled()``, and what it gave (the answer's
``reads``; adjoint.engine.saved_reads is the engine's side)."""

from __future__ import annotations

import torch

from adjoint.format.errors import ProblemError
from adjoint.torchside.values import DTYPE_NAMES, snap


def read_torch(s, step, index: int) -> tuple[str, dict]:
    """``s``: the run's Session (its hooks' ``names`` are the tensors bound so far)."""
    what, target, slot, as_name = step.read
    if what == "hooks_enabled":
        return as_name, {"read": "torch._C._autograd._saved_tensors_hooks_is_enabled()", "step": index,
                         "value": bool(torch._C._autograd._saved_tensors_hooks_is_enabled())}
    names = s.hooks.names
    t = names.get(target)
    if not isinstance(t, torch.Tensor):
        raise ProblemError(step.loc, f"read names '{target}', which is not a tensor of this run so far")
    out = getattr(t.grad_fn, f"_saved_{slot}")   # PyTorch's own errors propagate
    entry = {"read": f"{target}.grad_fn._saved_{slot}", "step": index,
             "value": snap(out, s.dtype) if isinstance(out, torch.Tensor) else out}
    if isinstance(out, torch.Tensor) or out is None:
        fn = out.grad_fn if out is not None else None
        entry.update({"is": sorted(n for n, v in names.items() if v is out) if out is not None else [],
                      "grad_fn": fn.name() if fn is not None else None,
                      "grad_fn_of": sorted(n for n, v in names.items() if isinstance(v, torch.Tensor) and fn is not None
                                           and v.grad_fn is fn),
                      "dtype": DTYPE_NAMES.get(out.dtype, str(out.dtype).removeprefix("torch.")) if out is not None
                      else None})
    return as_name, entry
