"""Run one variant in real PyTorch with its hooks registered for real, and capture everything.

:func:`run_variant` returns the *observed* side of ``adjoint verify``, in exactly the
per-variant shape of the contract's ``solve --json`` (``loss``, ``values``, ``grads``,
``returned`` for ``method: grad``, ``hook_calls``); a VALUE is ``{"shape", "value"}``
(``value`` in float64, converted exactly from the run's dtype). When PyTorch raises, the dict
also has ``"error": "Type: message"`` and holds whatever was captured before.

Registration follows the tracer (:mod:`adjoint.graph`) and a PyTorch user:

* module hooks (``forward_pre``, ``forward``, ``full_backward``, ``full_backward_pre``,
  ``backward``) go on the ``nn.Module`` before the forward, in declared order;
* tensor hooks (``register_hook``, ``retain_grad``) and node hooks (``grad_fn.register_prehook``
  / ``grad_fn.register_hook``) as soon as the target tensor exists: leaves before the forward,
  an intermediate right after its assignment, a module output right after the call returns;
  ``when: after_forward`` hooks after the loss is built, in declared order;
* ``remove: before_backward`` removes the handle after the loss and before backward,
  ``after_backward`` after it.

Every hook call is recorded in firing order with what it was handed (snapshotted at once:
autograd may later accumulate into the very buffer it passed) and what it returned. Which
call of a module fired (``"call": K``, for modules called more than once) is found for
forward hooks by counting calls, and for backward hooks from the autograd node that is
running (``torch._C._current_autograd_node()``), matched against the nodes each call created.
PyTorch's warnings about legacy hooks and full hooks without grad inputs are silenced.
"""

from __future__ import annotations

import warnings
import torch
from torch import nn

from ..errors import ProblemError
from ..problem import OUTPUT, ROOT, Hook, Problem, Variant
from .build import DTYPES, Interp, build_module, literal_tensor, module_table, run_body


def snap(x):
    """What a hook was handed / returned, as contract JSON (None stays None, tuples become lists)."""
    if x is None:
        return None
    if isinstance(x, (tuple, list)):
        return [snap(i) for i in x]
    if isinstance(x, torch.Tensor):
        t = x.detach().to(torch.float64)
        return {"shape": list(t.shape), "value": t.tolist()}
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return {"shape": [], "value": float(x)}
    return {"shape": None, "value": None, "note": f"not a tensor: {type(x).__name__}"}


class Session:
    """One variant built in torch: leaves, modules, and the naming/registration context."""

    def __init__(self, problem: Problem, variant: Variant, dtype: str, hooks: str = "all"):
        self.p = problem
        self.v = variant
        self.dtype = DTYPES[dtype]
        self.hooks_mode = hooks          # all | forward (finite differences: only forward-phase module hooks)
        self.symbols = dict(problem.symbols)
        self.leaves: dict[str, torch.Tensor] = {}
        self.globals: dict[str, torch.Tensor] = {}
        for d in list(variant.inputs) + list(problem.targets):
            t = literal_tensor(d.value, self.dtype, self.symbols)
            t.requires_grad_(d.requires_grad)
            self.leaves[d.name] = t
            self.globals[d.name] = t
        params: dict[str, nn.Parameter] = {}
        for m in problem.model.walk():
            for d in m.params:
                params[d.name] = nn.Parameter(literal_tensor(d.value, self.dtype, self.symbols),
                                              requires_grad=d.requires_grad)
                self.leaves[d.name] = params[d.name]
        self.root = build_module(problem.model, self, params, self.dtype)
        self.modules = module_table(problem, self.root)
        self.reset()

    # ------------------------------------------------------------ context protocol (used by the modules)
    def reset(self, keep_handles: bool = False) -> None:
        self.names: dict[str, torch.Tensor] = {}
        self.values: dict[str, dict] = {}
        self.done: dict[str, int] = {}
        self.pending: dict[str, list[Hook]] = {}
        self.node_calls: dict[tuple[int, str], list[int]] = {}
        self.node_refs: list = []                    # keep grad_fn wrappers alive so ids stay unique
        self.fired: dict[tuple, int] = {}
        self.calls: list[dict] = []
        if not keep_handles:
            self.handles: list[tuple[Hook, object]] = []
        self.retained: list[str] = []

    def callid(self, label: str) -> str:
        k = self.done.get(label, 0) + 1
        return label if k == 1 else f"{label}#{k}"

    def module_returned(self, label: str, out) -> None:
        callid = self.callid(label)
        self.done[label] = self.done.get(label, 0) + 1
        if isinstance(out, torch.Tensor) and out.grad_fn is not None:
            self.note_node(out.grad_fn, label, self.done[label])
        self.bind(callid, out)

    def note_node(self, node, label: str, k: int) -> None:
        self.node_refs.append(node)
        ks = self.node_calls.setdefault((id(node), label), [])
        if k not in ks:
            ks.append(k)

    def bind(self, name: str, tensor) -> None:
        if name in self.names:
            raise ProblemError(None, f"verify: two tensors are named '{name}'")
        self.names[name] = tensor
        self.values[name] = snap(tensor)
        for hook in self.pending.pop(name, []):
            self.register_tensor_hook(hook, tensor)

    # ------------------------------------------------------------ hook registration
    def register_hooks(self) -> list[Hook]:
        """Everything registered before the forward; returns the hooks deferred to after it."""
        self.name_leaves()
        deferred = []
        tracked: set[str] = set()
        for hook in self.v.hooks:
            if hook.on == "module":
                if self.hooks_mode == "forward" and hook.kind not in ("forward", "forward_pre"):
                    continue
                if hook.when == "after_forward":
                    deferred.append(hook)
                    continue
                self.register_module_hook(hook)
                if hook.kind in ("full_backward", "full_backward_pre"):
                    tracked.add(hook.target)
                continue
            if self.hooks_mode == "forward":
                continue
            if hook.when == "after_forward":
                deferred.append(hook)
            elif hook.target in self.names:
                self.register_tensor_hook(hook, self.names[hook.target])
            else:
                self.pending.setdefault(hook.target, []).append(hook)
        for label in tracked:  # our own observer, registered last: learns each call's input-side node
            self.modules[label].register_forward_hook(self._input_node_observer(label))
        return deferred

    def name_leaves(self) -> None:
        for name, t in self.leaves.items():
            self.names[name] = t
            self.values[name] = snap(t)

    def _input_node_observer(self, label: str):
        def observe(module, args, output):
            k = self.done.get(label, 0) + 1
            for a in args:
                if isinstance(a, torch.Tensor) and a.grad_fn is not None:
                    self.note_node(a.grad_fn, label, k)
        return observe

    def register_late(self, hook: Hook) -> None:
        if hook.on == "module":
            self.register_module_hook(hook)
        else:
            if hook.target not in self.names:
                raise ProblemError(hook.loc, f"hook target '{hook.target}' is not a tensor of this problem")
            self.register_tensor_hook(hook, self.names[hook.target])

    def register_module_hook(self, hook: Hook) -> None:
        if hook.target not in self.modules:
            raise ProblemError(hook.loc, f"hook target module '{hook.target}' does not exist")
        m = self.modules[hook.target]
        label = hook.target
        kind = hook.kind
        if kind == "forward_pre":
            def fn(module, args):
                return self.fire(hook, {"input": args}, label, phase="forward")
            handle = m.register_forward_pre_hook(fn)
        elif kind == "forward":
            def fn(module, args, output):
                return self.fire(hook, {"input": args, "output": output}, label, phase="forward")
            handle = m.register_forward_hook(fn)
        elif kind == "full_backward":
            def fn(module, grad_input, grad_output):
                return self.fire(hook, {"grad_input": grad_input, "grad_output": grad_output}, label)
            handle = m.register_full_backward_hook(fn)
        elif kind == "full_backward_pre":
            def fn(module, grad_output):
                return self.fire(hook, {"grad_output": grad_output}, label)
            handle = m.register_full_backward_pre_hook(fn)
        elif kind == "backward":
            def fn(module, grad_input, grad_output):
                return self.fire(hook, {"grad_input": grad_input, "grad_output": grad_output}, label)
            handle = m.register_backward_hook(fn)
        else:
            raise ProblemError(hook.loc, f"verify does not know the module hook kind '{kind}'")
        self.handles.append((hook, handle))

    def register_tensor_hook(self, hook: Hook, t: torch.Tensor) -> None:
        if hook.on == "tensor":
            if hook.kind == "retain_grad":
                t.retain_grad()
                if not t.is_leaf and hook.target not in self.retained:
                    self.retained.append(hook.target)
                return
            handle = t.register_hook(lambda grad: self.fire(hook, {"grad": grad}))
        else:
            node = t.grad_fn
            if node is None:
                raise ProblemError(hook.loc, f"'{hook.target}' has no grad_fn, so there is no node to hook")
            if hook.kind == "pre":
                handle = node.register_prehook(lambda grad_outputs: self.fire(hook, {"grad_outputs": grad_outputs}))
            else:
                handle = node.register_hook(lambda grad_inputs, grad_outputs: self.fire(
                    hook, {"grad_inputs": grad_inputs, "grad_outputs": grad_outputs}))
        self.handles.append((hook, handle))

    def remove(self, when: str) -> None:
        for hook, handle in self.handles:
            if hook.remove == when:
                handle.remove()

    # ------------------------------------------------------------ firing
    def fire(self, hook: Hook, args: dict, label: str | None = None, phase: str = "backward"):
        record = {"hook": hook.index, "label": hook.label, "kind": hook.kind, "target": hook.target,
                  "args": {name: snap(value) for name, value in args.items()}, "returned": None}
        if label is not None:
            record["_module"] = label
            record["_k"] = self.done.get(label, 0) + 1 if phase == "forward" else self.backward_call(hook, label)
        self.calls.append(record)
        returned = run_body(hook, args)
        record["returned"] = snap(returned)
        return returned

    def backward_call(self, hook: Hook, label: str) -> int | None:
        node = torch._C._current_autograd_node()
        ks = self.node_calls.get((id(node), label)) if node is not None else None
        if not ks:
            return None
        key = (id(node), label, hook.index)
        n = self.fired.get(key, 0)
        self.fired[key] = n + 1
        return ks[min(n, len(ks) - 1)]

    # ------------------------------------------------------------ forward
    def forward(self):
        """Call the root and build the loss; returns the tensor backward starts from."""
        args = [self.leaves[d.name] for d in self.v.inputs]
        out = self.root(*args)
        self.module_returned(ROOT, out)
        if OUTPUT not in self.names:  # as the tracer: an input may be called y when no loss refers to the output
            self.bind(OUTPUT, out)
        if self.p.loss is None:
            return out

        def lookup(name, loc):
            if name in self.names:
                return self.names[name]
            raise ProblemError(loc, f"unknown name '{name}' in the loss")

        loss = Interp(lookup).eval(self.p.loss)
        self.bind("loss", loss)
        return loss

    def grad_output(self):
        lit = self.v.backward.grad_output
        return literal_tensor(lit, self.dtype, self.symbols) if lit is not None else None


def run_variant(problem: Problem, variant: Variant, dtype: str) -> dict:
    """Build, register, run forward and backward in real torch; return the observed JSON."""
    s = Session(problem, variant, dtype)
    observed: dict = {"loss": None, "values": s.values, "grads": {}, "hook_calls": s.calls}
    bw = variant.backward
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            deferred = s.register_hooks()
            root = s.forward()
            observed["loss"] = s.values.get("loss")
            for hook in deferred:
                s.register_late(hook)
            for name, hooks in s.pending.items():
                raise ProblemError(hooks[0].loc, f"hook target '{name}' is not a tensor of this problem")
            s.remove("before_backward")
            gradient = s.grad_output()
            wrt = [s.names[name] for name, _ in bw.inputs]
            if bw.method == "grad":
                grads = torch.autograd.grad(root, wrt, grad_outputs=gradient)
                observed["returned"] = {name: snap(g) for (name, _), g in zip(bw.inputs, grads)}
            else:
                root.backward(gradient=gradient, inputs=wrt or None)
            s.remove("after_backward")
        except ProblemError:
            raise
        except Exception as exc:  # PyTorch refused something the prediction says works
            observed["error"] = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
    observed["grads"] = collect_grads(s, variant)
    per_module = dict(s.done)
    for record in s.calls:
        label = record.pop("_module", None)
        k = record.pop("_k", None)
        if label is not None and per_module.get(label, 1) > 1:
            record["call"] = k
    return observed


def collect_grads(s: Session, variant: Variant) -> dict:
    grads = {}
    for d in list(variant.inputs) + list(s.p.targets) + [d for m in s.p.model.walk() for d in m.params]:
        if d.requires_grad:
            grads[d.name] = snap(s.leaves[d.name].grad)
    names = list(s.retained)
    if variant.backward.method == "backward":
        names += [n for n, _ in variant.backward.inputs if n in s.names and not s.names[n].is_leaf]
    for name in names:
        if name in s.names and name not in grads:
            t = s.names[name]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                grads[name] = snap(t.grad)
    return grads


# ----------------------------------------------------------------------------- finite differences

def finite_differences(problem: Problem, variant: Variant, names: list[str], eps: float = 1e-6) -> dict:
    """Central differences in float64 of ``sum(root * grad_output)`` (``sum(root)`` when no
    grad_output is given) with respect to each leaf in ``names``, as ``torch.autograd.gradcheck``
    does: ``(f(x + eps e_i) - f(x - eps e_i)) / (2 eps)`` element by element. Forward-phase
    module hooks stay registered (they are part of the function); backward hooks are left out."""
    s = Session(problem, variant, "float64", hooks="forward")
    for t in s.leaves.values():
        t.requires_grad_(False)
    gout = s.grad_output()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s.register_hooks()

        def f() -> float:
            s.reset(keep_handles=True)
            s.name_leaves()
            root = s.forward()
            return float((root * gout).sum() if gout is not None else root.sum())

        out = {}
        with torch.no_grad():
            for name in names:
                t = s.leaves[name]
                flat = t.view(-1)
                g = torch.zeros_like(flat)
                for i in range(flat.numel()):
                    orig = flat[i].item()
                    flat[i] = orig + eps
                    plus = f()
                    flat[i] = orig - eps
                    minus = f()
                    flat[i] = orig
                    g[i] = (plus - minus) / (2 * eps)
                out[name] = snap(g.view(t.shape))
    return out
