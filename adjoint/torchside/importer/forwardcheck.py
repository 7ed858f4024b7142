"""What ``torch.fx`` would silently lose from a forward, found before anything is written.

fx records the tensor ops a forward calls and nothing else, so some lines of a user's
forward leave no trace in its graph, and a program written from that graph computes
something else:

* ``with torch.no_grad():`` (and any other ``with`` block): fx runs the body and forgets the
  block, so values made inside it would require grad;
* ``h.requires_grad = True`` / ``h.data = ...`` / ``h.grad = ...``: attribute writes fx never sees;
* ``torch.utils.checkpoint.checkpoint(f, x)``: fx traces through it, so the recomputation
  (and the hook calls it makes) would vanish;
* ``h.register_hook(...)``, ``h.retain_grad()``, ``h.requires_grad_()``, ``backward()``
  inside a forward: their values are unused, so they would be dropped as dead code;
* ``h += x``: a proxy has no ``__iadd__``, so fx records ``h + x``, out of place. Such a
  forward is recorded from a real call instead (:mod:`.record` sees ``Tensor.__iadd__``),
  which keeps the op in place: :func:`augmented` tells the tree writer.

The other two silent changes are in the module tree: one ``Parameter`` under two names (tied
weights: ``head.weight = emb.weight``) and one module under two names (``Sequential(lin,
act, lin)``: ``named_children`` lists it once). Tied parameters are refused (the format
cannot tie them yet); a shared module is refused when it holds tensors or hooks, and written
once per name otherwise (a stateless module called twice computes what two copies compute).

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
    if isinstance(m, (nn.Sequential, nn.ModuleList, nn.ModuleDict)) or type_name(m) is not None:
        return False
    return not type(m).__module__.startswith("torch.")


def _check_tied(model: nn.Module, factory_at: str | None) -> None:
    first: dict[int, str] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) in first:
            raise refuse(factory_at, f"parameter '{name}' is the same Parameter as '{first[id(p)]}' (tied weights), "
                                     "which the problem format cannot write yet: written as two parameters, they "
                                     "would get two .grads where PyTorch accumulates one",
                         "import the model untied (give each module its own Parameter) or leave the tie out")
        first[id(p)] = name


def _check_shared(model: nn.Module, factory_at: str | None) -> None:
    first: dict[int, str] = {}
    for name, m in model.named_modules(remove_duplicate=False):
        if id(m) not in first:
            first[id(m)] = name
            continue
        holds = next(iter(m.parameters()), None) is not None or next(iter(m.buffers()), None) is not None
        hooked = any(getattr(sub, attr, None) for sub in m.modules()
                     for attr in ("_forward_pre_hooks", "_forward_hooks", "_backward_pre_hooks", "_backward_hooks"))
        if holds or hooked:
            raise refuse(factory_at, f"module '{name}' is the same {type(m).__name__} as '{first[id(m)] or 'model'}' "
                                     f"(one module under two names, {'holding tensors' if holds else 'with hooks'}), "
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


def _check_forward(m: nn.Module, path: str) -> None:
    found = _forward_source(m)
    if found is None:
        return
    tree, start, file = found
    who = f"'{path}' ({type(m).__name__})" if path else f"the model ({type(m).__name__})"

    def at(node) -> str:
        return f"{show_path(os.path.abspath(file))}:{start + node.lineno - 1}"

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
                         "(the format has 'with no_grad():' and 'with enable_grad():')")
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
            if name in _CHECKPOINT:
                raise refuse(at(node), f"{who}: {name}(...) (torch.utils.checkpoint) cannot be imported yet: the "
                                       "importer does not write checkpoint regions, and tracing through it would drop "
                                       "the recomputation",
                             "call the function directly for the import and write checkpoint(CHILD, ...) into the "
                             "file by hand, or leave the model out")
            if name in _AUTOGRAD_CALLS:
                raise refuse(at(node), f"{who}: {_AUTOGRAD_CALLS[name]} ('{ast.unparse(node)}'), which torch.fx does "
                                       "not record", "register the hook on the model before importing it, or write "
                                                     "the file's hooks: by hand")
