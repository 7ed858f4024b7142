"""What ``torch.fx`` would silently lose from a forward, found before anything is written.

fx records the tensor ops a forward calls and nothing else, so some lines of a user's
forward leave no trace in its graph, and a program written from that graph computes
something else:

* ``with torch.no_grad():`` (and any other ``with`` block): fx runs the body and forgets the
  block, so values made inside it would require grad;
* ``h.requires_grad = True`` / ``h.data = ...`` / ``h.grad = ...``: attribute writes fx never sees;
* ``torch.utils.checkpoint.checkpoint(f, x)``: fx traces through it, so the recomputation
  (and the hook calls it makes) would vanish; a forward's own ``checkpoint(self.CHILD, ...)``
  is kept as one call (:mod:`.fxtrace`), anything else (a lambda, a bound method, a
  ``ModuleList`` item, ``context_fn=``, ``checkpoint_sequential``, a call in a helper) refused;
* ``h.register_hook(...)``, ``h.retain_grad()``, ``h.requires_grad_()``, ``backward()``
  inside a forward: their values are unused, so they would be dropped as dead code;
* ``h += x``: a proxy has no ``__iadd__``, so fx records ``h + x``, out of place. Such a
  forward is recorded from a real call instead (:mod:`.record` sees ``Tensor.__iadd__``),
  which keeps the op in place: :func:`augmented` tells the tree writer.

The other two silent changes are in the module tree: one ``Parameter`` under two names (tied
weights: ``head.weight = emb.weight``) and one module under two names (``Sequential(lin,
act, lin)``: ``named_modules`` lists it once). A tied parameter is written ``{tied: FIRST}``
(:func:`tie_names`); a shared module is written once per name, its parameters tied to the
first name's, and refused when it holds buffers or module hooks.

Each refusal is one line naming the user's ``file:line``.
"""

from __future__ import annotations

import ast
import inspect
import os
import textwrap

from torch import nn

from adjoint.torchside.importer.builtins import type_name
from adjoint.torchside.importer.refuse import refuse
from adjoint.torchside.importer.where import show_path

_GRAD_ATTRS = ("requires_grad", "data", "grad")
_CHECKPOINT = ("checkpoint", "checkpoint_sequential")
_AUTOGRAD_CALLS = {"register_hook": "registers a tensor hook inside the forward",
                   "register_post_accumulate_grad_hook": "registers a tensor hook inside the forward",
                   "retain_grad": "calls retain_grad() inside the forward",
                   "requires_grad_": "changes requires_grad inside the forward",
                   "backward": "runs backward inside the forward",
                   "set_grad_enabled": "switches grad mode inside the forward",
                   "no_grad": "switches grad mode inside the forward",
                   "enable_grad": "switches grad mode inside the forward",
                   "inference_mode": "switches grad mode inside the forward"}


def check_model(model: nn.Module, files: set[str], factory_at: str | None) -> None:
    """Refuse what the problem file could only write by changing the model (tied parameters,
    a shared module holding tensors or hooks, the forward lines fx loses)."""
    _check_shared(model, factory_at)
    _check_tied(model, factory_at)
    for path, m in model.named_modules():
        if _custom(m):
            _check_forward(m, path)


def _custom(m: nn.Module) -> bool:
    """A module whose forward is the user's (a container subclass with a forward of its own too)."""
    if any(isinstance(m, kind) and type(m).forward is kind.forward
           for kind in (nn.Sequential, nn.ModuleList, nn.ModuleDict)) or type_name(m) is not None:
        return False
    return not type(m).__module__.startswith("torch.")


def _check_tied(model: nn.Module, factory_at: str | None) -> None:
    """A tied Parameter is written ``{tied: FIRST}`` (:mod:`.tree`); the format refuses a tie in a
    frozen module, so a frozen tied Parameter is refused here, naming both names."""
    first: dict[int, str] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) in first and not p.requires_grad:
            raise refuse(factory_at, f"parameter '{name}' is the same Parameter as '{first[id(p)]}' (tied weights) "
                                     "and does not require grad, which the problem format cannot write yet",
                         "import it with requires_grad=True, or untie it")
        first.setdefault(id(p), name)


def tie_names(model: nn.Module) -> dict[int, str]:
    """id(Parameter) -> its first full name (``named_parameters``' order, which is the one name
    PyTorch's de-duplicating ``named_parameters()`` gives it); every later name is written as
    ``{tied: FIRST}``."""
    first: dict[int, str] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        first.setdefault(id(p), name)
    return first


def shared_paths(model: nn.Module) -> dict[str, str]:
    """A module listed under a second name (``Sequential(lin, act, lin)``: '2') -> its first name ('0')."""
    first: dict[int, str] = {}
    out: dict[str, str] = {}
    for name, m in model.named_modules(remove_duplicate=False):
        if id(m) in first:
            out[name] = first[id(m)]
        else:
            first[id(m)] = name
    return out


def _check_shared(model: nn.Module, factory_at: str | None) -> None:
    """One module under two names is written once per name, its parameters tied to the first
    name's (the same leaves, so the same graph and one ``.grad``); refused when it holds buffers
    (two copies would be updated apart) or module hooks (PyTorch runs the one module's hooks on
    both calls; the file would need them registered twice)."""
    first: dict[int, str] = {}
    for name, m in model.named_modules(remove_duplicate=False):
        if id(m) not in first:
            first[id(m)] = name
            continue
        holds = next(iter(m.buffers()), None) is not None
        hooked = any(getattr(sub, attr, None) for sub in m.modules()
                     for attr in ("_forward_pre_hooks", "_forward_hooks", "_backward_pre_hooks", "_backward_hooks"))
        if holds or hooked:
            raise refuse(factory_at, f"module '{name}' is the same {type(m).__name__} as '{first[id(m)] or 'model'}' "
                                     f"(one module under two names, {'holding buffers' if holds else 'with hooks'}), "
                                     "which the problem format cannot write yet",
                         "call the module twice from a forward of your own (self.lin(self.act(self.lin(x)))) "
                         "instead of listing it twice")


def _forward_source(m: nn.Module):
    forward = inspect.unwrap(type(m).forward)      # a decorated forward: the user's function inside
    try:
        lines, start = inspect.getsourcelines(forward)
        path = inspect.getsourcefile(forward)
    except (OSError, TypeError):
        return None
    try:
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except SyntaxError:
        return None
    return tree, start, path


def augmented(m: nn.Module) -> bool:
    """Does the forward write ``NAME op= ...`` (which fx turns into an out-of-place op)?"""
    found = _forward_source(m)
    if found is None:
        return False
    return any(isinstance(n, ast.AugAssign) for n in ast.walk(found[0]))


def _autograd_call_fix(name: str, func, path: str) -> str:
    """What works instead of an autograd call inside a forward: a grad-mode switch is the format's
    ``with no_grad():`` block; a hook registered on (or ``retain_grad`` of) a tensor the forward
    makes is the problem file's ``{tensor: NAME}`` hook, NAME the forward's name for that tensor
    (``PATH.NAME`` in a child's forward)."""
    if "grad mode" in _AUTOGRAD_CALLS[name]:
        return "write that forward by hand, with the format's 'with no_grad():' block"
    if name not in ("register_hook", "register_post_accumulate_grad_hook", "retain_grad"):
        return "leave that line out of the forward for the import, and write what it does in the problem file by hand"
    recv = func.value.id if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) else "NAME"
    tensor = f"{path}.{recv}" if path else recv
    hook = f"{{tensor: {tensor}, kind: retain_grad}}" if name == "retain_grad" else \
        f"{{tensor: {tensor}, returns: ...}} (the hook's body as returns: or does:)"
    return (f"leave the line out for the import, then add {hook} to the file's hooks:, with {recv} bound on a line "
            f"of its own in the file's forward ('{recv} = ...': a value used once is written inside the expression "
            "that uses it)")


def _check_forward(m: nn.Module, path: str) -> None:
    found = _forward_source(m)
    if found is None:
        return
    tree, start, file = found
    who = f"'{path}' ({type(m).__name__})" if path else f"the model ({type(m).__name__})"

    def at(node) -> str:
        return f"{show_path(os.path.abspath(file))}:{start + node.lineno - 1}"

    _check_grad_mode_methods(m, tree, who)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.decorator_list:
            deco = ast.unparse(node.decorator_list[0])
            raise refuse(at(node.decorator_list[0]), f"{who}: the decorator @{deco} on its forward cannot be imported "
                                                     "(torch.fx traces the function inside it)",
                         "remove the decorator for the import, or write the forward in the problem file by hand")
        if isinstance(node, (ast.With, ast.AsyncWith)):
            ctx = ast.unparse(node.items[0].context_expr)
            raise refuse(at(node), f"{who}: the block 'with {ctx}:' in its forward cannot be imported (torch.fx "
                                   "runs the body and forgets the block)",
                         "move the block out of the model, or write the forward in the problem file by hand "
                         "(the format has 'with no_grad():', 'with enable_grad():' and 'with set_grad_enabled(BOOL):')")
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
            if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        for t in targets:
            if isinstance(t, ast.Attribute) and t.attr in _GRAD_ATTRS:
                raise refuse(at(node), f"{who}: '{ast.unparse(node).strip()}' sets .{t.attr} inside the forward, "
                                       "which torch.fx does not record", "write the forward in the problem file by "
                                                                         "hand, or move the line out of the model")
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
            if name == "checkpoint":
                _check_checkpoint(node, who, at)
            elif name in _CHECKPOINT:
                raise refuse(at(node), f"{who}: {name}(...) (torch.utils.checkpoint) cannot be imported yet: the "
                                       "problem format has checkpoint(CHILD, ...) only, and tracing through it would "
                                       "drop the recomputation",
                             "checkpoint each block with checkpoint(self.block, h, use_reentrant=...), or call the "
                             "function directly for the import and write the file's checkpoint(...) by hand")
            if name in _AUTOGRAD_CALLS:
                raise refuse(at(node), f"{who}: {_AUTOGRAD_CALLS[name]} ('{ast.unparse(node)}'), which torch.fx does "
                                       "not record", _autograd_call_fix(name, f, path))


_GRAD_MODE_DECORATORS = ("no_grad", "enable_grad", "inference_mode", "set_grad_enabled")


def _check_grad_mode_methods(m: nn.Module, forward_tree, who: str) -> None:
    """A method the forward calls (``self.nearest(z)``) decorated with ``@torch.no_grad()``: fx
    traces through it and forgets the decorator, as it forgets a ``with`` block."""
    called = {n.func.attr for n in ast.walk(forward_tree) if isinstance(n, ast.Call)
              and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name) and n.func.value.id == "self"}
    for name in sorted(called):
        fn = getattr(type(m), name, None)
        if not inspect.isfunction(fn) or getattr(nn.Module, name, None) is not None:
            continue
        fn = inspect.unwrap(fn)   # the decorator's wrapper: the user's function is what it wraps
        try:
            lines, start = inspect.getsourcelines(fn)
            file = inspect.getsourcefile(fn)
        except (OSError, TypeError):
            continue
        try:
            tree = ast.parse(textwrap.dedent("".join(lines)))
        except SyntaxError:
            continue
        node = tree.body[0] if tree.body else None
        for deco in getattr(node, "decorator_list", []):
            target = deco.func if isinstance(deco, ast.Call) else deco
            label = target.attr if isinstance(target, ast.Attribute) else target.id if isinstance(target, ast.Name) \
                else None
            if label in _GRAD_MODE_DECORATORS:
                raise refuse(f"{show_path(os.path.abspath(file))}:{start + deco.lineno - 1}",
                             f"{who}: its forward calls self.{name}, decorated with @{ast.unparse(deco)}, which "
                             "torch.fx forgets (it traces through the method), so values made inside would require "
                             "grad", "write the forward in the problem file by hand (the format has 'with "
                                     "no_grad():'), or move the call out of the model")


def calls_checkpoint(m: nn.Module) -> bool:
    """Does the forward's source call ``checkpoint(...)`` (written as a checkpoint node, :mod:`.fxtrace`)?"""
    found = _forward_source(m)
    if found is None:
        return False
    return any(isinstance(n, ast.Call) and _call_name(n) == "checkpoint" for n in ast.walk(found[0]))


def _call_name(node: ast.Call) -> str | None:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None


def _check_checkpoint(node: ast.Call, who: str, at) -> None:
    """``checkpoint(self.CHILD, *args, use_reentrant=..., early_stop=..., preserve_rng_state=...)``
    is written as the format writes it (:mod:`.fxtrace`); anything else is refused at its line."""
    from adjoint.torchside.importer.fxtrace import CHECKPOINT_KEYWORDS
    instead = ("checkpoint a child module (checkpoint(self.block, h, use_reentrant=False)), or call the function "
               "directly for the import and write the file's checkpoint(...) by hand")
    first = node.args[0] if node.args else None
    if not (isinstance(first, ast.Attribute) and isinstance(first.value, ast.Name) and first.value.id == "self"):
        what = "a lambda" if isinstance(first, ast.Lambda) else f"'{ast.unparse(first)}'" if first is not None \
            else "no function"
        raise refuse(at(node), f"{who}: checkpoint(...) (torch.utils.checkpoint) is handed {what}, which cannot be "
                               "imported yet: the importer writes checkpoint(CHILD, ...) of a child module "
                               "(self.NAME) only", instead)
    starred = [a for a in node.args if isinstance(a, ast.Starred)] + [k for k in node.keywords if k.arg is None]
    if starred:
        raise refuse(at(node), f"{who}: checkpoint(...) (torch.utils.checkpoint) is given *args or **kwargs, which "
                               "cannot be imported", "write its arguments out one by one")
    for k in node.keywords:
        if k.arg not in CHECKPOINT_KEYWORDS:
            raise refuse(at(node), f"{who}: checkpoint(...) (torch.utils.checkpoint) is given {k.arg}=, which the "
                                   "problem format does not have (it has use_reentrant, early_stop and "
                                   "preserve_rng_state)", f"drop {k.arg}= for the import, or leave the model out")


_SETTERS = ("requires_grad", "data", "grad")
_WATCHED_CALLS = ("register_hook", "register_post_accumulate_grad_hook", "retain_grad", "requires_grad_")


def forward_hook_codes(model: nn.Module) -> dict:
    """The code objects of the forward and forward-pre hooks on ``model``'s modules (outside
    torch itself), each with its name as a message gives it ('fwd_hook' on '0')."""
    out = {}
    for path, m in model.named_modules():
        for hook in list(m._forward_pre_hooks.values()) + list(m._forward_hooks.values()):
            code = getattr(inspect.unwrap(hook), "__code__", None)
            if code is not None and "/torch/" not in code.co_filename.replace(os.sep, "/"):
                out.setdefault(code, f"'{hook.__name__}' on '{path or 'model'}'" if hasattr(hook, "__name__")
                               else f"on '{path or 'model'}'")
    return out


class ForwardWatch:
    """Watches the example run for what the source check cannot see (an alias, a helper function
    the forward calls): a ``torch.utils.checkpoint`` call (``checkpoint``,
    ``checkpoint_sequential``: fx and the recording would trace through it and drop its
    recomputation), a ``.requires_grad`` / ``.data`` / ``.grad`` write, ``register_hook``,
    ``retain_grad()`` or ``requires_grad_()`` on a tensor (fx never sees them). The first one is
    refused at the user's line that made it (the innermost frame in ``files``)."""

    def __init__(self, files: set[str], hooks: dict | None = None):
        import torch
        import torch.utils.checkpoint as ckpt
        from torch.overrides import TorchFunctionMode
        # forward(-pre) hooks the model carries (Grad-CAM's forward hook calling out.register_hook):
        # code object -> the hook's name; their files are the user's too
        self.hooks = dict(hooks or {})
        self.files = set(files) | {os.path.abspath(c.co_filename) for c in self.hooks}
        self.in_hook: str | None = None
        self.codes = {inspect.unwrap(ckpt.checkpoint).__code__: "checkpoint",
                      inspect.unwrap(ckpt.checkpoint_sequential).__code__: "checkpoint_sequential"}
        self.setters = {id(getattr(torch._C.TensorBase, n)): n for n in _SETTERS}
        self.found: tuple[str, str | None] | None = None
        self._previous = None
        watch = self

        class Mode(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                watch.seen(func)
                return func(*args, **(kwargs or {}))
        self.mode = Mode()

    def _where(self, frame) -> str | None:
        while frame is not None:
            path = os.path.abspath(frame.f_code.co_filename)
            if path in self.files:
                self.in_hook = self.hooks.get(frame.f_code)
                return f"{show_path(path)}:{frame.f_lineno}"
            frame = frame.f_back
        return None

    def seen(self, func) -> None:
        if self.found is not None:
            return
        import sys
        owner = getattr(func, "__self__", None)
        if getattr(func, "__name__", None) == "__set__" and id(owner) in self.setters:
            self.found = (f"sets .{self.setters[id(owner)]} on a tensor", self._where(sys._getframe(2)))
        elif getattr(func, "__name__", None) in _WATCHED_CALLS:
            self.found = (f"calls .{func.__name__}() on a tensor", self._where(sys._getframe(2)))

    def _profile(self, frame, event, arg):
        if event == "call" and self.found is None and frame.f_code in self.codes:
            if self.codes[frame.f_code] == "checkpoint" and _written_checkpoint(frame):
                return      # checkpoint(self.CHILD, ...) in a forward: written as a checkpoint node
            self.found = (f"calls {self.codes[frame.f_code]}(...) (torch.utils.checkpoint)", self._where(frame.f_back))

    def __enter__(self):
        import sys
        self._previous = sys.getprofile()
        sys.setprofile(self._profile)
        self.mode.__enter__()
        return self

    def __exit__(self, *exc):
        import sys
        self.mode.__exit__(*exc)
        sys.setprofile(self._previous)
        return False

    def check(self) -> None:
        if self.found is None:
            return
        what, where = self.found
        if "checkpoint" in what:
            raise refuse(where, f"the model {what} in its forward, which cannot be imported yet: the importer writes "
                                "checkpoint(CHILD, ...) called by a forward on one of its child modules only, and "
                                "tracing through it would drop the recomputation",
                         "call checkpoint(self.block, ...) in the module's own forward, or call the function "
                         "directly for the import and write the file's checkpoint(...) by hand")
        if self.in_hook:
            raise refuse(where, f"the model {what} in its forward hook {self.in_hook}, which the importer cannot "
                                "translate", "remove that hook for the import and write it in the problem file by "
                                             "hand: {tensor: PATH} is a hook on the module's output as its caller "
                                             "gets it, the same as your hook's tensor unless the module has full "
                                             "backward (pre-)hooks or a later forward hook replaces the output; "
                                             "then {node: PATH, next: [0], kind: pre} is the node your tensor's "
                                             "grad_fn was (docs/import.md)")
        raise refuse(where, f"the model {what} in its forward, which torch.fx does not record",
                     "write the forward in the problem file by hand, or move the line out of the model "
                     "(register hooks on the model before importing it)")


def _written_checkpoint(frame) -> bool:
    """A ``checkpoint`` call the importer writes: handed a module, directly by a module's
    ``forward`` (a helper function in between is traced through by fx, so it is refused)."""
    caller = frame.f_back
    while caller is not None and "/torch/" in caller.f_code.co_filename.replace(os.sep, "/"):
        caller = caller.f_back      # torch's wrappers around checkpoint (dynamo's disable)
    return isinstance(frame.f_locals.get("function"), nn.Module) and caller is not None and \
        caller.f_code.co_name == "forward" and isinstance(caller.f_locals.get("self"), nn.Module)
