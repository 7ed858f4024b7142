"""``verify --origin``: the user's own module, with the user's own hooks, run on the file's inputs.

This is the proof an imported file needs: the file's prediction is compared with what the
user's ``nn.Module`` -- rebuilt by calling ``origin.factory`` from ``origin.file`` (the user's
Python, run only because the user passed ``--origin``) -- does when it runs, its registered
hooks being the user's own Python functions. The module is converted to the run's dtype and
called on the file's input values (int64 and bool inputs as they are); the loss is the file's
``loss:`` over its output ``y``; ``.backward()`` runs. Every hook the module carries is
wrapped in place (the entry of the dict PyTorch keeps it in is replaced by a function that
logs what the hook is handed and what it returns, then calls it), in registration order,
which is the order ``adjoint import`` writes the file's ``hooks:``; so hook ``i`` of the
user's module is compared with hook ``i`` of the file. The observed side is the contract's
JSON (``loss``, ``hook_calls``, ``grads`` of every input and parameter, or ``error``), and
:func:`adjoint.torchside.compare.compare` compares it as it compares any torch run (forward values of
the file's intermediate names are not compared: the user's module has no such names; a
module's ``call`` number is left out on both sides).

The origin file must lie in the problem file's directory or below it (as side files must):
an imported file from someone else cannot make ``verify --origin`` run ``../elsewhere.py``.
"""

from __future__ import annotations

import contextlib
import os
import re
import warnings

from torch.nn.modules import module as nn_module

from adjoint.torchside.compare import Row, compare
from adjoint.format.errors import ProblemError
from adjoint.format.problem import Problem
from adjoint.torchside.program import EnvScope, Program
from adjoint.torchside.run import TORCH_ERRORS, mark_silenced
from adjoint.torchside.values import DTYPES, leaf_tensor, literal_tensor, snap
from adjoint.torchside.dropout import forced_mask
from adjoint.torchside.importer.hooks import _GLOBAL, _TABLES, _legacy_weight_norm
from adjoint.torchside.importer.userfile import call_factory
from adjoint.torchside.importer.where import show_path
from adjoint.torchside.importer.origincheckpoint import Marks, marked_checkpoints


def confined(problem_path: str, problem: Problem) -> str:
    """The origin file, when it lies in the problem file's directory or below it (else one line)."""
    origin = problem.origin
    if not problem_path or problem_path == "-" or problem_path.startswith("<"):
        raise ProblemError(origin.loc, "verify --origin runs the Python file origin: names, relative to the problem "
                                       "file; a problem read from standard input has no directory: give its path")
    base = os.path.realpath(os.path.dirname(os.path.abspath(problem_path)))
    target = os.path.realpath(origin.file)
    if os.path.commonpath([base, target]) != base:
        raise ProblemError(origin.loc, f"origin's file {show_path(origin.file)} lies outside the problem file's "
                                       "directory; verify --origin runs only a Python file in that directory or below "
                                       "it: import with -o next to your model, or copy the model beside the file")
    return target


def origin_rows(problem: Problem, decl, predicted: dict, dtype: str, bounds: dict | None = None) -> list[Row]:
    """The prediction against the user's module (rows of section ``origin``), each float held to
    the same bounds on PyTorch's rounding as the file's own torch run (``bounds``: the variant's
    bound run; the module computes the same ops, the graph row checks it), else to the dtype's
    fixed tolerance."""
    where = f"{show_path(problem.origin.file)}:{problem.origin.factory}"
    why = _not_one_pass(decl)
    if why is not None:
        return [Row("origin", f"the module from {where}", True, None, None,
                    f"not compared: {why}, and verify --origin runs your module once (one forward, loss.backward()); "
                    "the file's prediction was compared with torch above", skipped=True)]
    try:
        observed, count = run_origin(problem, decl, dtype)
    except ProblemError as err:
        return [Row("origin", f"the module from {where}", False, None, None, f"cannot run it ({err})")]
    rows = []
    if count != len(decl.hooks):
        rows.append(Row("origin", "hooks registered", False, None, None,
                        f"the module from {where} carries {count} hook(s), the file's variant {len(decl.hooks)}: "
                        "they are matched by registration order"))
    aliases = observed.pop("aliases", {})
    if "error" in observed:
        observed["error"] = dict(observed["error"], message=file_hook_names(observed["error"]["message"]))
    wanted = {k: v for k, v in predicted.items() if k in ("loss", "grads", "hook_calls", "error")}
    wanted["hook_calls"] = [_first_name(_without_call(c), aliases) for c in wanted.get("hook_calls") or []]
    if "error" not in wanted:
        observed_grads = observed.get("grads") or {}
        wanted["grads"] = {k: v for k, v in (wanted.get("grads") or {}).items() if k in observed_grads}
    for row in compare(wanted, observed, dtype, values=False, bounds=bounds):
        rows.append(Row("origin", f"{row.item} (your module)", row.ok, row.max_abs, row.max_rel, row.detail,
                        row.skipped))
    return rows


#: PyTorch's checks of a hook's result name the hook function: "hook 'row_sum' has changed the size of value"
_HOOK_NAMED = re.compile(r"\bhook '[^']*' has ")


def file_hook_names(message: str) -> str:
    """``message`` as the file's run says it: every hook function of a problem file is named
    ``hook`` (docs/semantics.md), so PyTorch's "hook 'row_sum' has changed the size of value" from
    the user's ``row_sum`` is the file's "hook 'hook' has changed the size of value"."""
    return _HOOK_NAMED.sub("hook 'hook' has ", message)


def _without_call(c: dict) -> dict:
    return {k: v for k, v in c.items() if k != "call"}


def _first_name(c: dict, aliases: dict[str, str]) -> dict:
    """A call on a module the file writes under its second name (``Sequential(lin, act, lin)``'s
    '2') is, in the user's module, a call on the one module, which PyTorch names by its first."""
    target = c.get("target")
    if isinstance(target, str):
        for second, first in aliases.items():
            if target == second or target.startswith(second + "."):
                return dict(c, target=first + target[len(second):])
    return c


def _aliases(model) -> dict[str, str]:
    first: dict[int, str] = {}
    out = {}
    for name, m in model.named_modules(remove_duplicate=False):
        if id(m) in first:
            out[name] = first[id(m)] or "model"
        else:
            first[id(m)] = name
    return out


def _hooks(model):
    """(handle id, table, key, kind, target, on) of every hook on the module, registration order."""
    out = []
    labels = {id(m): (p or "model") for p, m in model.named_modules()}
    for path, m in model.named_modules():
        for kind, attr in _TABLES:
            table = getattr(m, attr, None) or {}
            for hid in list(table):
                if kind == "forward_pre" and _legacy_weight_norm(table[hid]):
                    continue   # the older weight_norm's: the module's weight_norm: {legacy: true}
                k = kind
                if attr == "_backward_hooks":
                    k = "full_backward" if m._is_full_backward_hook else "backward"
                kw = False
                if kind == "forward":
                    kw = bool(m._forward_hooks_with_kwargs.get(hid))
                elif kind == "forward_pre":
                    kw = bool(m._forward_pre_hooks_with_kwargs.get(hid))
                out.append((hid, table, k, path or "model", "module", kw))
    for kind, attr in _GLOBAL:
        table = getattr(nn_module, attr, None) or {}
        for hid in list(table):
            k = kind
            if attr == "_global_backward_hooks":
                k = "full_backward" if nn_module._global_is_full_backward_hook else "backward"
            kw = k == "forward" and bool(nn_module._global_forward_hooks_with_kwargs.get(hid))
            out.append((hid, table, k, None, "global", kw))
    seen = set()
    for name, p in model.named_parameters():
        if id(p) in seen:
            continue
        seen.add(id(p))
        for hid in list(getattr(p, "_backward_hooks", None) or {}):
            out.append((hid, p._backward_hooks, "hook", name, "tensor", False))
        for hid in list(getattr(p, "_post_accumulate_grad_hooks", None) or {}):
            out.append((hid, p._post_accumulate_grad_hooks, "post_accumulate_grad", name, "tensor", False))
    out.sort(key=lambda e: e[0])
    return out, labels


def _wrap(index: int, decl_hook, kind: str, target, on: str, kw: bool, fn, log: list, labels: dict, dtype,
          marks=None):
    def record(args: dict, module=None) -> dict:
        rec = {"hook": index, "label": decl_hook.label if decl_hook is not None else f"{kind}@{target}",
               "kind": kind, "target": target if on != "global" else labels.get(id(module), "?"),
               "args": {n: snap(v, dtype) for n, v in args.items()}, "returned": None}
        if on == "global":
            rec["global"] = True
        if marks is not None:
            marks.mark(rec)     # a call of checkpoint's recomputation, or of its reentrant backward
        log.append(rec)
        return rec

    def run(rec, *args):
        """The user's function on ``args``; a call that raises is marked ``raised`` (as the file's
        run marks its hook's), its error propagating as PyTorch lets it."""
        try:
            returned = fn(*args)
        except Exception:
            rec["raised"] = True
            raise
        rec["returned"] = snap(returned, dtype)
        return returned

    if on == "tensor" and kind == "post_accumulate_grad":
        def wrapper(tensor):
            return run(record({"tensor": tensor.grad}), tensor)
    elif on == "tensor":
        def wrapper(grad):
            return run(record({"grad": grad}), grad)
    elif kind == "forward_pre" and kw:
        def wrapper(module, args, kwargs):
            return run(record({"input": args, "kwargs": kwargs}, module), module, args, kwargs)
    elif kind == "forward_pre":
        def wrapper(module, args):
            return run(record({"input": args}, module), module, args)
    elif kind == "forward" and kw:
        def wrapper(module, args, kwargs, output):
            return run(record({"input": args, "kwargs": kwargs, "output": output}, module),
                       module, args, kwargs, output)
    elif kind == "forward":
        def wrapper(module, args, output):
            return run(record({"input": args, "output": output}, module), module, args, output)
    elif kind == "full_backward_pre":
        def wrapper(module, grad_output):
            return run(record({"grad_output": grad_output}, module), module, grad_output)
    else:
        def wrapper(module, grad_input, grad_output):
            return run(record({"grad_input": grad_input, "grad_output": grad_output}, module),
                       module, grad_input, grad_output)
    if isinstance(getattr(fn, "__name__", None), str):   # PyTorch's messages name the user's function
        wrapper.__name__ = fn.__name__
    return wrapper


@contextlib.contextmanager
def restored_global_hooks():
    """The global module hooks a factory registers (``register_module_*_hook``) go when the
    block ends, so that calling it again does not register them twice."""
    before = {attr: dict(getattr(nn_module, attr)) for _, attr in _GLOBAL}
    mode = nn_module._global_is_full_backward_hook
    try:
        yield
    finally:
        for _, attr in _GLOBAL:
            table = getattr(nn_module, attr)
            for hid in [h for h in table if h not in before[attr]]:
                del table[hid]
        nn_module._global_is_full_backward_hook = mode


def _force_masks(model, root, dtype, symbols: dict) -> None:
    """Each Dropout of the user's module that the file gives a keep-mask (import draws one, as
    data) draws that mask, as verify's own run does (:mod:`adjoint.torchside.dropout`): a random
    draw of its own would make every gradient differ, however faithful the file is. Its forward
    is wrapped on the instance; no hook is added."""
    stack = [root]
    while stack:
        decl = stack.pop()
        stack.extend(decl.children)
        if decl.mask is None:
            continue
        try:
            module = model.get_submodule(decl.path)
        except AttributeError:
            continue
        forward = module.forward

        def forced(*args, _decl=decl, _forward=forward, **kwargs):
            with forced_mask(_decl, dtype, symbols):
                return _forward(*args, **kwargs)

        module.forward = forced


def _not_one_pass(decl) -> str | None:
    """Why the variant is not one forward and ``loss.backward()`` (None when it is)."""
    if decl.steps is not None:
        return "the variant has steps"
    bw = decl.backward
    if bw.method != "backward" or bw.inputs or bw.grad_output is not None or bw.second is not None:
        return "the variant's backward is not a plain loss.backward()"
    return None


def with_file_values(model, problem: Problem):
    """``model`` (the factory's) holding the file's parameter and buffer values and version
    counters: a factory that does not seed its random init draws other weights each call, and the
    comparison is of the forward and the hooks, with the weights the file has (an imported file's
    are the ones its factory call drew). A tensor the file does not declare stays as it is."""
    import torch
    symbols = dict(problem.symbols)
    with torch.no_grad():
        for m in problem.model.walk():
            for d, get in [(p, model.get_parameter) for p in m.params] + [(b, model.get_buffer) for b in m.buffers]:
                if d.tied is not None:
                    continue
                try:
                    t = get(d.name)
                except AttributeError:
                    continue
                value = literal_tensor(d.value, t.dtype, symbols, False)
                if tuple(value.shape) != tuple(t.shape):
                    continue
                t.copy_(value)
                torch._C._autograd._unsafe_set_version_counter((t,), (d.version,))
    return model


def run_origin(problem: Problem, decl, dtype: str) -> tuple[dict, int]:
    """(observed JSON, how many hooks the module carries): the user's module run on the file's inputs."""
    with restored_global_hooks():
        return _run_origin(problem, decl, dtype)


def _run_origin(problem: Problem, decl, dtype: str) -> tuple[dict, int]:
    origin = problem.origin
    float_dtype = DTYPES[dtype]
    model = with_file_values(call_factory(origin.file, origin.factory).to(float_dtype), problem)
    symbols = dict(problem.symbols)
    env: dict = {}
    args = []
    for d in decl.inputs:
        env[d.name] = t = leaf_tensor(d, float_dtype, symbols)
        args.append(t)
    for d in problem.targets:
        env[d.name] = leaf_tensor(d, float_dtype, symbols)
    found, labels = _hooks(model)
    _force_masks(model, problem.model, float_dtype, symbols)
    log: list = []
    marks = Marks()
    for index, (hid, table, kind, target, on, kw) in enumerate(found):
        decl_hook = decl.hooks[index] if index < len(decl.hooks) else None
        table[hid] = _wrap(index, decl_hook, kind, target, on, kw, table[hid], log, labels, float_dtype, marks)
    leaves = dict((d.name, env[d.name]) for d in decl.inputs if d.requires_grad)
    seen = set()
    for name, p in model.named_parameters():
        if id(p) not in seen and p.requires_grad:
            seen.add(id(p))
            leaves[name] = p
    observed: dict = {}
    during = "forward"
    try:
        with warnings.catch_warnings(), marked_checkpoints(model, marks):
            warnings.simplefilter("always")
            warnings.showwarning = lambda message, *_, **__: mark_silenced(str(message), log)
            out = model(*args)
            env["y"] = out
            loss = Program(EnvScope(env, "the loss")).eval(problem.loss) if problem.loss is not None else out
            observed["loss"] = snap(loss, float_dtype)
            during = "backward"
            loss.backward()
    except TORCH_ERRORS + (AssertionError,) as exc:     # as the file's own run stops (adjoint.torchside.run)
        return ({"error": {"type": type(exc).__name__, "message": str(exc), "during": during,
                           "after_call": len(log) - 1 if log else None}, "hook_calls": log,
                 "aliases": _aliases(model)}, len(found))
    observed["hook_calls"] = log
    observed["grads"] = {n: snap(t.grad, float_dtype) for n, t in leaves.items()}
    observed["aliases"] = _aliases(model)
    return observed, len(found)
