"""``verify`` on an imported file: does the file's model build the autograd graph the user's module builds?

The user's module is rebuilt from ``origin:`` (its factory called: the user's code, which the
user chose to import), converted to the run's dtype and called on the file's input values;
the file's model is built and run forward as ``verify`` runs it (hooks registered). Both
graphs are read from the output back to the leaves: every node in creation order (its
``sequence_nr``), its name, and each edge as (which node or which leaf, ``input_nr``); leaves
are named as the file names them (``fc1.weight``, ``x``), which is also how
``named_parameters()`` names them. The first difference is reported in words.
"""

from __future__ import annotations

import warnings
import torch


from adjoint.format.errors import ProblemError
from adjoint.format.problem import Problem, Variant
from adjoint.torchside.graphs import NO_SEQUENCE, tensors_in
from adjoint.torchside.values import DTYPES, leaf_tensor
from adjoint.torchside.importer.userfile import call_factory
from adjoint.torchside.importer.where import show_path


def signature(outputs, leaf_names: dict[int, str]) -> list[tuple[str, tuple]]:
    """[(node name, ((target, input_nr) | None, ...))] in creation order."""
    seen: dict[int, object] = {}
    stack = [t.grad_fn for t in tensors_in(outputs) if t.grad_fn is not None]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen[id(node)] = node
        stack.extend(n for n, _ in node.next_functions)
    ordered = sorted((n for n in seen.values() if n._sequence_nr() != NO_SEQUENCE), key=lambda n: n._sequence_nr())
    rank = {id(n): i for i, n in enumerate(ordered)}
    out = []
    for n in ordered:
        edges = []
        for nxt, nr in n.next_functions:
            if nxt is None:
                edges.append(None)
            elif id(nxt) in rank:
                edges.append((f"#{rank[id(nxt)]} {nxt.name()}", nr))
            else:
                leaf = getattr(nxt, "variable", None)
                edges.append((f"leaf {leaf_names.get(id(leaf), '?') if leaf is not None else nxt.name()}", nr))
        out.append((n.name(), tuple(edges)))
    return out


def file_graph(problem: Problem, decl: Variant, dtype: str):
    from adjoint.torchside.run import Session
    s = Session(problem, decl, dtype)
    later = decl.registered_later()
    try:
        for hook in decl.hooks:      # registered before the forward, as run_steps does
            if hook.when == "before_forward" and hook.index not in later:
                s.hooks.register(hook.index)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fp = s.forward()
        names: dict[int, str] = {}
        for name, t in s.leaves.items():    # a tied Parameter: its first name, as named_parameters() gives it
            names.setdefault(id(t), name)
        return signature(fp.output, names)
    finally:
        s.close()


def user_graph(problem: Problem, decl: Variant, dtype: str):
    from adjoint.torchside.importer.originrun import restored_global_hooks
    with restored_global_hooks():       # the factory's global hooks must not outlive this call
        return _user_graph(problem, decl, dtype)


def custom_functions(problem: Problem, decl: Variant, dtype: str) -> list[str]:
    """The custom ``torch.autograd.Function`` classes the user's module runs: import cannot read
    their backward."""
    from adjoint.torchside.importer.originrun import restored_global_hooks
    with restored_global_hooks():
        outputs = _user_outputs(problem, decl, dtype)
    return user_functions(outputs)


def user_functions(outputs) -> list[str]:
    """The names of the ``torch.autograd.Function`` classes of the user's code whose nodes
    (``BackwardCFunction``s) make ``outputs``. PyTorch's own Functions are not the user's: a
    module with a full backward hook runs ``torch.nn.modules._functions.BackwardHookFunction``
    around its call, whose backward is the hook machinery the problem file's hooks are."""
    found, seen = [], set()
    stack = [t.grad_fn for t in tensors_in(outputs) if t.grad_fn is not None]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, torch.autograd.function.BackwardCFunction) and \
                not getattr(type(node)._forward_cls, "__module__", "").startswith("torch."):
            name = type(node).__name__.removesuffix("Backward")
            if name not in found:
                found.append(name)
        stack.extend(n for n, _ in node.next_functions)
    return found


def _user_outputs(problem: Problem, decl: Variant, dtype: str, names: dict | None = None):
    """The factory's module (holding the file's values) called on the file's inputs; ``names``
    learns each input's and parameter's name by id."""
    from adjoint.torchside.importer.originrun import with_file_values
    origin = problem.origin
    model = with_file_values(call_factory(origin.file, origin.factory).to(DTYPES[dtype]), problem)
    args = [leaf_tensor(d, DTYPES[dtype], dict(problem.symbols)) for d in decl.inputs]
    if names is not None:
        names.update((id(t), d.name) for t, d in zip(args, decl.inputs))
        names.update((id(p), name) for name, p in model.named_parameters())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model(*args)


def _user_graph(problem: Problem, decl: Variant, dtype: str):
    names: dict = {}
    out = _user_outputs(problem, decl, dtype, names)
    return signature(out, names)


def _show(entry) -> str:
    name, edges = entry
    shown = ", ".join("None" if e is None else f"{e[0]}[{e[1]}]" for e in edges)
    return f"{name} -> ({shown})"


def compare_graphs(problem: Problem, decl: Variant, dtype: str) -> tuple[bool, str]:
    """(same, what differs): the file's model against the module its ``origin`` builds."""
    origin = problem.origin
    where = f"{show_path(origin.file)}:{origin.factory}"
    try:
        theirs = user_graph(problem, decl, dtype)
    except ProblemError as err:
        return False, f"cannot rebuild the user's module from origin ({err})"
    except Exception as exc:
        try:   # the file's model raising the same in its forward: there is no graph to compare, and no difference
            file_graph(problem, decl, dtype)
        except Exception as own:
            if type(own) is type(exc) and str(own) == str(exc):
                return True, f"both forwards raise {type(exc).__name__}: {exc}"
        return False, f"calling the user's module from {where} raised {type(exc).__name__}: {exc}"
    try:
        ours = file_graph(problem, decl, dtype)
    except ProblemError:
        raise
    except Exception as exc:   # the file's forward raises (a Python TypeError of a written line) where the module runs
        return False, f"the file's model raised {type(exc).__name__}: {exc}, where the module from {where} runs"
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if a != b:
            return False, (f"node #{i} in creation order differs: the file's model makes {_show(a)}, the module "
                           f"from {where} makes {_show(b)}")
    if len(ours) != len(theirs):
        return False, (f"the file's model makes {len(ours)} autograd nodes, the module from {where} makes "
                       f"{len(theirs)}")
    return True, f"{len(ours)} nodes, the same names and edges in creation order as {where}"
