"""Record what real PyTorch hands hooks, in the problem-file contract's JSON shape.

``references.py`` re-runs PyTorch's own hook tests by hand with these helpers. This module
is deliberately independent of adjoint (it imports nothing from it, and in particular not
``adjoint.torchside``): a reference must be a second opinion, written from PyTorch's test.

The shapes produced here are the contract's (problem-format v1/v2, "What solve answers"):
VALUE is ``{"shape": [...], "value": nested floats}``; a hook call is ``{"hook", "kind",
"target", "args", "returned"}`` plus ``"call"``, ``"global"``, ``"raised"`` and ``"node"``
where the contract defines them.
"""

from __future__ import annotations

import contextlib
import warnings

import torch

F64 = torch.float64


def tensor(value, requires_grad: bool = False) -> torch.Tensor:
    """A float64 tensor from a literal (the problem files say ``dtype: float64``)."""
    return torch.tensor(value, dtype=F64, requires_grad=requires_grad)


def leaf(value) -> torch.Tensor:
    """A float64 leaf that requires grad."""
    return tensor(value, requires_grad=True)


def snap(x):
    """``x`` as the contract's JSON: a tensor becomes VALUE, a tuple or list a list of
    those (None stays None), a number stays a number, a dict maps its entries."""
    if x is None:
        return None
    if isinstance(x, torch.Tensor):
        return {"shape": list(x.shape), "value": x.detach().to(F64).tolist()}
    if isinstance(x, (tuple, list)):
        return [snap(e) for e in x]
    if isinstance(x, dict):
        return {k: snap(v) for k, v in x.items()}
    if isinstance(x, (bool, int, float)):
        return x
    raise TypeError(f"cannot snapshot a {type(x).__name__}")


def grads(**tensors) -> dict:
    """``{name: VALUE | None}`` of each tensor's ``.grad`` (names may contain dots: pass a
    dict with ``**{"lin.weight": w}``). Reading a non-leaf's .grad is intended here (a
    retained or ``inputs=`` tensor), so PyTorch's warning about it is silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return {name: snap(t.grad) for name, t in tensors.items()}


def error(exc: BaseException, during: str, log: "Log") -> dict:
    """The contract's ``error`` entry for an exception PyTorch raised."""
    return {"type": type(exc).__name__, "message": str(exc), "during": during,
            "after_call": len(log.calls) - 1 if log.calls else None}


class Log:
    """Every user hook call in firing order, and the per-backward ``passes``.

    Each ``*_hook`` method returns a callable with the signature PyTorch calls that kind of
    hook with. It records the call (arguments snapshotted before the hook body runs), then
    runs ``fn`` (the hook's body, given the same arguments without the module) and records
    what it returned. A body that raises is recorded with ``"raised": True`` and the
    exception propagates, as in PyTorch.
    """

    def __init__(self, modules: torch.nn.Module | None = None):
        self.calls: list[dict] = []
        self.passes: list[dict] = []
        self._paths = {}
        if modules is not None:
            for path, m in modules.named_modules():
                self._paths[id(m)] = path or "model"
        self._op: tuple[str, str | None] | None = None
        self._node_names: dict = {}

    # -------------------------------------------------------------- the record itself

    def _run(self, entry: dict, fn, *args):
        self.calls.append(entry)
        if fn is None:
            entry["returned"] = None
            return None
        try:
            out = fn(*args)
        except Exception:
            entry["returned"] = None
            entry["raised"] = True
            raise
        entry["returned"] = snap(out)
        return out

    @staticmethod
    def _entry(hook: int, kind: str, target, args: dict, extra: dict) -> dict:
        entry = {"hook": hook, "kind": kind, "target": target, "args": args}
        entry.update(extra)
        return entry

    def path(self, module: torch.nn.Module) -> str:
        return self._paths[id(module)]

    # -------------------------------------------------------------- tensor and node hooks

    def tensor_hook(self, hook: int, target: str, fn=None):
        def h(grad):
            return self._run(self._entry(hook, "hook", target, {"grad": snap(grad)}, {}), fn, grad)
        return h

    def post_acc_hook(self, hook: int, target: str, fn=None):
        def h(t):
            args = {"tensor": snap(t.grad)}
            return self._run(self._entry(hook, "post_accumulate_grad", target, args, {}), fn, t)
        return h

    def node_pre_hook(self, hook: int, target: str, fn=None):
        def h(grad_outputs):
            args = {"grad_outputs": snap(grad_outputs)}
            return self._run(self._entry(hook, "pre", target, args, {}), fn, grad_outputs)
        return h

    def node_post_hook(self, hook: int, target: str, fn=None):
        def h(grad_inputs, grad_outputs):
            args = {"grad_inputs": snap(grad_inputs), "grad_outputs": snap(grad_outputs)}
            return self._run(self._entry(hook, "post", target, args, {}), fn, grad_inputs, grad_outputs)
        return h

    def multi_grad_hook(self, hook: int, target: str, mode: str = "all", fn=None):
        def h(g):
            args = {"grads": snap(g)} if mode == "all" else {"grad": snap(g)}
            return self._run(self._entry(hook, "multi_grad", target, args, {}), fn, g)
        return h

    # -------------------------------------------------------------- module hooks

    def module_hook(self, hook: int, kind: str, target: str | None = None, fn=None,
                    with_kwargs: bool = False, glob: bool = False, call: int | None = None):
        """A module hook of ``kind`` (forward_pre, forward, full_backward_pre,
        full_backward, backward). ``target`` None: the path of the module that fired
        (global hooks). ``fn`` gets the hook's arguments without the module."""
        extra = {}
        if glob:
            extra["global"] = True
        if call is not None:
            extra["call"] = call

        def where(m):
            return target if target is not None else self.path(m)

        if kind == "forward_pre" and with_kwargs:
            def h(m, args, kwargs):
                a = {"input": snap(args), "kwargs": snap(kwargs)}
                return self._run(self._entry(hook, kind, where(m), a, extra), fn, args, kwargs)
        elif kind == "forward_pre":
            def h(m, args):
                return self._run(self._entry(hook, kind, where(m), {"input": snap(args)}, extra), fn, args)
        elif kind == "forward" and with_kwargs:
            def h(m, args, kwargs, output):
                a = {"input": snap(args), "kwargs": snap(kwargs), "output": snap(output)}
                return self._run(self._entry(hook, kind, where(m), a, extra), fn, args, kwargs, output)
        elif kind == "forward":
            def h(m, args, output):
                a = {"input": snap(args), "output": snap(output)}
                return self._run(self._entry(hook, kind, where(m), a, extra), fn, args, output)
        elif kind == "full_backward_pre":
            def h(m, grad_output):
                a = {"grad_output": snap(grad_output)}
                return self._run(self._entry(hook, kind, where(m), a, extra), fn, grad_output)
        elif kind in ("full_backward", "backward"):
            def h(m, grad_input, grad_output):
                a = {"grad_input": snap(grad_input), "grad_output": snap(grad_output)}
                return self._run(self._entry(hook, kind, where(m), a, extra), fn, grad_input, grad_output)
        else:
            raise ValueError(f"unknown module hook kind {kind}")
        return h

    # -------------------------------------------------------------- saved-tensor hooks

    @contextlib.contextmanager
    def op(self, node: str, target: str | None):
        """Label the pack calls made while one op runs in the forward: PyTorch's name of
        the node it creates, and the tensor it produces (a pack hook cannot ask)."""
        self._op = (node, target)
        try:
            yield
        finally:
            self._op = None

    def name_nodes(self, **tensors) -> None:
        """Name the grad_fn of each tensor, so an unpack call can say which tensor its
        node produced (``torch._C._current_autograd_node()`` gives the node)."""
        for name, t in tensors.items():
            self._node_names[t.grad_fn] = name

    def saved_tensors(self, hook: int, pack=None, unpack=None):
        """``(pack_hook, unpack_hook)`` for ``torch.autograd.graph.saved_tensors_hooks``;
        ``pack`` and ``unpack`` are the bodies (identity when None)."""
        def p(x):
            node, target = self._op if self._op is not None else (None, None)
            entry = self._entry(hook, "pack", target, {"x": snap(x)}, {"node": node})
            return self._run(entry, pack or (lambda v: v), x)

        def u(x):
            current = torch._C._current_autograd_node()
            node = current.name() if current is not None else None
            target = self._node_names.get(current)
            entry = self._entry(hook, "unpack", target, {"x": snap(x)}, {"node": node})
            return self._run(entry, unpack or (lambda v: v), x)
        return p, u

    # -------------------------------------------------------------- passes

    @contextlib.contextmanager
    def backward_pass(self, grads_fn, returned_fn=None):
        """One backward step: afterwards ``passes`` gets its calls, ``grads_fn()`` and
        ``returned_fn()`` (autograd.grad results, or {} for backward)."""
        start = len(self.calls)
        yield
        self.passes.append({"hook_calls": self.calls[start:], "grads": grads_fn(),
                            "returned": returned_fn() if returned_fn else {}})


def saved_read(expr: str, out, names: dict) -> dict:
    """The answer's ``reads`` entry for ``out = T.grad_fn._saved_SLOT`` (the read step of a
    port): its value, which of ``names`` (the file's names of the tensors, by hand) it is the
    very object of, its grad_fn's name and which of ``names`` have that same node as grad_fn."""
    fn = out.grad_fn if out is not None else None
    return {"read": expr, "value": snap(out), "is": sorted(n for n, t in names.items() if t is out and out is not None),
            "grad_fn": fn.name() if fn is not None else None,
            "grad_fn_of": sorted(n for n, t in names.items() if fn is not None and t.grad_fn is fn),
            "dtype": str(out.dtype).removeprefix("torch.") if out is not None else None}


def fired(calls: list) -> list[int]:
    """The hook indices of ``calls``, in firing order (what PyTorch's tests assert on)."""
    return [c["hook"] for c in calls]


def raising(text: str):
    """A hook body that raises ``RuntimeError(text)`` (the contract's ``raises:``)."""
    def body(*_args):
        raise RuntimeError(text)
    return body


def observation(log: Log, grads: dict | None = None, **more) -> dict:
    """The contract's per-variant answer: ``hook_calls`` and ``grads`` (and ``passes``
    when the log saw backward steps), plus any of ``returned``, ``values``, ``error``."""
    out = {"hook_calls": log.calls}
    if grads is not None:
        out["grads"] = grads
    if log.passes:
        out["passes"] = log.passes
    out.update(more)
    return out
