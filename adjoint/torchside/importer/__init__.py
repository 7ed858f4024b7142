"""``adjoint import`` and :func:`adjoint.from_module`: a real ``nn.Module`` written as a v2 problem file.

One job per module: :mod:`.userfile` loads ``FILE.py`` and calls its factory;
:mod:`.inputs` makes the inputs; :mod:`.tree` writes the module tree (:mod:`.builtins` for the
``torch.nn`` types the format has, :mod:`.fxtrace` + :mod:`.program` for every other module's
forward; ``checkpoint(self.CHILD, ...)`` kept as a call); :mod:`.forwardcheck` refuses what fx
would silently lose (``with`` blocks, ``.requires_grad`` writes, a ``checkpoint`` the format cannot
write, hooks registered inside a forward -- in its source,
and on the example run -- and a module under two names holding buffers or hooks; tied
parameters are written ``{tied: FIRST}``); :mod:`.hooks` lists the hooks already
registered and :mod:`.hookbody` translates their Python bodies; :mod:`.numbers` writes values
exactly, :mod:`.sidewrite` puts big tensors in a safetensors side file; :mod:`.emit` writes
the YAML text (``adjoint.format.loader`` stays the only reader); :mod:`.graphcheck` and
:mod:`.originrun` are ``verify --origin``: the user's module (with the user's own hooks)
against the file's graph and prediction; :mod:`.where` and :mod:`.refuse` say where in the
user's code something is that cannot be imported.
"""

from __future__ import annotations

import inspect
import os
import re
import warnings

import torch
from torch import nn

from adjoint.format.errors import ProblemError
from adjoint.torchside.importer import hooks, inputs
from adjoint.torchside.importer.emit import Flow, Text, document, flow_map
from adjoint.torchside.importer.builtins import rows_value
from adjoint.torchside.importer.tree import TreeWriter
from adjoint.torchside.importer.userfile import call_factory, split_spec
from adjoint.torchside.importer.where import show_path, source_files
from adjoint.torchside.importer.numbers import nested
from adjoint.torchside.importer.keepstate import state_kept
from adjoint.torchside.importer.forwardcheck import check_model
from adjoint.torchside.importer.forwardcheck import ForwardWatch, forward_hook_codes, shared_paths, tie_names
from adjoint.torchside.importer.userfile import factory_location

DEFAULT_LOSS = "sum(y)"


def problem_text(model: nn.Module, named_inputs: list[tuple[str, torch.Tensor]], loss: str = DEFAULT_LOSS,
                 name: str = "imported", origin: dict | None = None, header: list[str] | None = None,
                 hooks_mode: str = "translate", notes: list | None = None, factory_at: str | None = None,
                 targets: list | None = None, side=None, no_grad: frozenset = frozenset(),
                 told: list | None = None, at: dict | None = None) -> str:
    """The problem file (YAML text) for ``model`` called on ``named_inputs``. ``hooks_mode``:
    ``translate`` (a hook body that cannot be translated is refused) or ``observe`` (it is
    written observe-only, and ``notes`` learns which hooks' effects are left out). ``no_grad``:
    the float inputs written without ``requires_grad`` (every other float input requires grad).
    ``told``: learns what the user should be told beside the file (a forward recorded from one call).
    ``at``: learns where the user's code has each line of a forward (:func:`.emit.document`)."""
    dtype = _dtype(model)
    files = source_files(model)
    _check_reserved(model, [n for n, _ in named_inputs], factory_at)
    check_model(model, files, factory_at)
    shapes, examples = _example_calls(model, [t for _, t in named_inputs])

    writer = TreeWriter(files, shapes, examples)
    writer.factory_at = factory_at
    writer.side = side
    writer.tied = tie_names(model)
    writer.aliases = shared_paths(model)
    tree = writer.module(model, "", True)
    forward = tree.get("forward")
    assigned = re.findall(r"^\s*([A-Za-z_][A-Za-z0-9_]*)\s*=[^=]", forward.text, re.M) if forward is not None else []
    check_loss_names(loss, [n for n, _ in named_inputs] + [n for n, _ in targets or []] + assigned, model)
    top: dict = {"name": Flow(name)}
    top["description"] = Text(f"{type(model).__name__} imported from its PyTorch module by adjoint import")
    top["dtype"] = Flow("float64" if dtype == torch.float64 else "float32")
    if origin is not None:
        top["origin"] = flow_map([("file", Text(origin["file"])), ("factory", Flow(origin["factory"])),
                                  ("inputs", flow_map([(k, Flow("[" + ", ".join(map(str, v)) + "]"))
                                                       for k, v in origin["inputs"]]))])
    top["inputs"] = {n: _input_entry(t, n, side, n not in no_grad) for n, t in named_inputs}
    if targets:
        top["targets"] = {n: _input_entry(t, n) if not t.is_floating_point() else
                          Flow(nested(t.tolist(), f"target {n}")) for n, t in targets}
    top["model"] = tree
    top["loss"] = Text(loss)
    notes = [] if notes is None else notes
    found = hooks.registered(model, hooks_mode, notes)
    if found:
        top["hooks"] = found
    if notes:
        header = list(header or []) + ["", "LEFT OUT (--hooks observe): these hooks are observe-only here; their "
                                           "effect on the gradients is not in this file:"] + notes
    if writer.recorded:
        import textwrap
        header = list(header or []) + [""] + textwrap.wrap(RECORDED, 98) + writer.recorded
        if told is not None:
            told.append(f"{RECORDED} {'; '.join(writer.recorded)}")
    return document(header or [], top, at)


#: the header line (and the note on standard error) of a file with a forward recorded from one call
RECORDED = ("RECORDED FROM ONE CALL: torch.fx could not trace these forwards, so each is the path the example "
            "inputs took; a value your code read as a Python number (.item(), int(t)) or branched on (if "
            "h.sum() > 0) is that call's constant here, and with other inputs the file still takes that path "
            "(verify --origin compares it with your module):")


def from_module(model: nn.Module, *example_inputs: torch.Tensor, loss: str = DEFAULT_LOSS, name: str = "imported"):
    """The problem for ``model`` called on ``example_inputs`` (their values exactly; a float input
    requires grad when the example does), loaded: an :class:`adjoint.Problem`, ready to ``.solve()``.
    ``adjoint.from_module_text`` gives the YAML text instead."""
    from adjoint.format.validate import loads
    return loads(from_module_text(model, *example_inputs, loss=loss, name=name), f"<{type(model).__name__}>")


def from_module_text(model: nn.Module, *example_inputs: torch.Tensor, loss: str = DEFAULT_LOSS,
                     name: str = "imported") -> str:
    for t in example_inputs:
        if not isinstance(t, torch.Tensor) or not (t.is_floating_point() or t.dtype in (torch.int64, torch.bool)):
            raise ProblemError(None, f"from_module takes floating-point, int64 or bool tensors as example inputs, not "
                                     f"{type(t).__name__ if not isinstance(t, torch.Tensor) else t.dtype}")
    names = inputs.forward_names(model, len(example_inputs))
    inputs.check_count(model, names)
    dtype = _dtype(model)
    no_grad = frozenset(n for n, t in zip(names, example_inputs) if t.is_floating_point() and not t.requires_grad)
    return problem_text(model, [(n, t.detach().to(dtype) if t.is_floating_point() else t.detach())
                                for n, t in zip(names, example_inputs)], loss, name, no_grad=no_grad)


def import_file(spec: str, input_specs: list[str], loss: str = DEFAULT_LOSS, out_path: str | None = None,
                hooks_mode: str = "translate", notes: list | None = None, target_specs: list[str] = (),
                side=None, told: list | None = None) -> str:
    """``adjoint import FILE.py:FACTORY --input NAME=SHAPE ...``: the problem file's text
    (``hooks_mode``, ``notes``, ``told``: as :func:`problem_text`). ``side``: a :class:`.sidewrite.SideFile`
    that receives the big tensors (absent: one named after ``out_path``, its bytes for the
    caller to write at :func:`side_path`)."""
    from adjoint.torchside.importer.originrun import restored_global_hooks
    from adjoint.torchside.importer.selfcheck import check_faithful
    at: dict = {}
    with restored_global_hooks():       # the factory's global module hooks do not outlive the import
        text = _import_file(spec, input_specs, loss, out_path, hooks_mode, notes, target_specs, side, told, at)
    check_faithful(text, side, split_spec(spec)[0], hooks_mode, at)   # the file is the user's model, or nothing is written
    return text


def _import_file(spec, input_specs, loss, out_path, hooks_mode, notes, target_specs, side, told=None, at=None) -> str:
    path, factory = split_spec(spec)
    full = [inputs.parse_full(s) for s in input_specs]
    tfull = [inputs.parse_full(s, "--target") for s in target_specs]
    shapes = [(n, s) for n, s, _, _ in full]
    if not shapes:
        raise ProblemError(None, "give the model's inputs: --input NAME=SHAPE for each (e.g. --input x=2x4)")
    if len({n for n, _, _, _ in full + tfull}) != len(full) + len(tfull):
        raise ProblemError(None, "--input/--target: each name once; give the inputs in the forward's order")
    check_loss(loss)
    model = call_factory(path, factory)
    inputs.check_count(model, [n for n, _ in shapes])
    dtype = _dtype(model)
    drawn_notes = []

    def made(position, n, s, kind, span, what):
        if kind == "float":
            return n, inputs.generated(n, s, dtype, span)
        call = (f"torch.randint({span[0]}, {span[1]}, {s}" if kind == "int64" else
                f"torch.bernoulli(torch.full({s}, 0.5)") + f", generator=torch.Generator().manual_seed({inputs.SEED + position}))"
        drawn_notes.append(f"{what} {n}: {call}")
        return n, inputs.drawn(position, s, kind, span)

    named = [made(i, *f, "input") for i, f in enumerate(full)]
    targets = [made(len(full) + i, *f, "target") for i, f in enumerate(tfull)]

    base = os.path.dirname(os.path.abspath(out_path)) if out_path and out_path != "-" else os.getcwd()
    origin = {"file": os.path.relpath(os.path.abspath(path), base), "factory": factory, "inputs": shapes}
    stem = re.sub(r"[^a-z0-9_-]+", "_", os.path.splitext(os.path.basename(path))[0].lower()).strip("_") or "imported"
    command = f"adjoint import {show_path(path)}:{factory} " + " ".join(f"--input {s}" for s in input_specs)
    command += "".join(f" --target {s}" for s in target_specs)
    if loss != DEFAULT_LOSS:
        command += f" --loss '{loss}'"
    if hooks_mode != "translate":
        command += f" --hooks {hooks_mode}"
    header = [f"Written by: {command}",
              "Parameters are exact: each value is the tensor's float, digit for digit. The hooks the model had",
              "are translated from their Python bodies (the comment names each function)."]
    if drawn_notes:
        header += ["Integer and bool values drawn as:"] + drawn_notes
    return problem_text(model, named, loss, stem, origin, header, hooks_mode, [] if notes is None else notes,
                        factory_at=factory_location(path, factory), targets=targets, side=side, told=told, at=at)


def check_loss(loss: str) -> None:
    """The loss parses (a mistake is ``--loss:1:COL: ...``, before any user code runs)."""
    from adjoint.format.expr import parse_expression
    from adjoint.format.loader import YScalar
    parse_expression(YScalar._plain("--loss", 1, 1, loss, "str"), "the loss")


def check_loss_names(loss: str, names: list[str], model: nn.Module) -> None:
    """Every name the loss reads is the output ``y``, an input or a target, a parameter or a
    module of the model (``--loss:1:COL: ...`` otherwise, before anything is written)."""
    from dataclasses import fields, is_dataclass

    from adjoint.format.expr import parse_expression
    from adjoint.engine.bindings import FUNCTIONS
    from adjoint.format.loader import YScalar
    from adjoint.format.syntax import Call, Name
    expr = parse_expression(YScalar._plain("--loss", 1, 1, loss, "str"), "the loss")
    known = {"y", "model"} | set(names) | {n for n, _ in model.named_parameters()} | \
        {n for n, _ in model.named_modules() if n}
    stack = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, Name) and e.id not in known:
            raise ProblemError(e.loc, f"unknown name '{e.id}' in the loss; it reads y (the model's output), the "
                                      f"inputs and --target names ({', '.join(sorted(set(names))) or 'none'})")
        if isinstance(e, Call) and e.func not in FUNCTIONS:
            raise ProblemError(e.loc, f"unknown function '{e.func}' in the loss; see docs/format.md (expressions)")
        if is_dataclass(e):
            for f in fields(e):
                v = getattr(e, f.name)
                for item in (v if isinstance(v, tuple) else (v,)):
                    if is_dataclass(item):
                        stack.append(item)
                    elif isinstance(item, tuple):
                        stack.extend(i for i in item if is_dataclass(i))


#: names a problem file gives the root module, its output and the loss: not names of the root's
#: children or of its forward's arguments
_RESERVED = {"model": "names the root module (its path in hooks)", "y": "names the model's output (the loss reads it)",
             "loss": "names the loss"}


def _check_reserved(model: nn.Module, input_names: list[str], factory_at: str | None) -> None:
    """A root child or forward argument a problem file cannot name as the module does: one line,
    pointing at the user's class, before anything is traced."""
    from adjoint.torchside.importer.refuse import refuse
    from adjoint.torchside.importer.where import of_module
    where = of_module(model) or factory_at
    kind = type(model).__name__
    for name in model._modules:
        if name in ("model", "loss"):
            raise refuse(where, f"the model ({kind}) has a child named '{name}', and a problem file's '{name}' "
                                f"{_RESERVED[name]}", f"rename the attribute (self.net = ... instead of "
                                                      f"self.{name} = ...) to import it")
    for name in input_names:
        if name in _RESERVED:
            raise refuse(where, f"the model's forward ({kind}) takes an argument named '{name}', and a problem "
                                f"file's '{name}' {_RESERVED[name]}", f"rename the argument ({name}_in, say) to import "
                                                                      "it")


def _dtype(model: nn.Module) -> torch.dtype:
    dtypes = {p.dtype for p in model.parameters()} | {b.dtype for b in model.buffers() if b.is_floating_point()}
    floats = dtypes & {torch.float32, torch.float64}
    if dtypes - {torch.float32, torch.float64, torch.int64}:
        raise ProblemError(None, f"the model holds {', '.join(sorted(str(d) for d in dtypes))} tensors; a problem "
                                 "runs in float32 or float64: convert the model (model.float() / model.double())")
    if len(floats) > 1:
        raise _mixed(model)
    return floats.pop() if floats else torch.float32


def _mixed(model: nn.Module) -> ProblemError:
    """A model holding float32 and float64 tensors (PyTorch promotes where they meet; a problem
    computes in one dtype): refused at the first tensor of the dtype the parameters do not have
    (a float64 buffer of a float32 model), named with its kind, at the line that makes it."""
    from adjoint.torchside.importer.where import of_attribute
    params = [(n, "parameter", t) for n, t in model.named_parameters()]
    tensors = params + [(n, "buffer", t) for n, t in model.named_buffers() if t.is_floating_point()]
    kinds = {t.dtype for _, _, t in params} or {t.dtype for _, _, t in tensors}
    main = torch.float32 if torch.float32 in kinds and len(kinds) == 1 else torch.float64
    odd = [(n, kind, t) for n, kind, t in tensors if t.dtype != main]
    name, kind, t = odd[0]
    owner, _, attr = name.rpartition(".")
    where = of_attribute(model.get_submodule(owner), attr)
    more = f" (and {len(odd) - 1} more {t.dtype} tensor{'s' if len(odd) > 2 else ''})" if len(odd) > 1 else ""
    what = (f"the model's parameters are {str(main)[6:]}, and its {kind} '{name}' is {str(t.dtype)[6:]}{more}: "
            "PyTorch promotes to float64 where they meet, and a problem computes in one float dtype")
    instead = (f"make '{name}' {str(main)[6:]} (dtype=torch.{str(main)[6:]} where it is made), or convert the model "
               "to one dtype (model.float() or model.double())")
    return ProblemError(None, f"{where}: {what}; {instead}" if where else f"{what}; {instead}")


def _input_entry(t: torch.Tensor, name: str, side=None, grad: bool = True):
    if side is not None and side.wants(t):
        fields = [("value", side.put(name, t))]
        if t.is_floating_point() and grad:
            fields.append(("requires_grad", True))
        else:
            fields.append(("dtype", Flow("int64" if t.dtype == torch.int64 else "bool")))
        return flow_map(fields)
    if not t.is_floating_point():
        return flow_map([("value", Flow(nested(t.tolist(), f"input {name}"))),
                         ("dtype", Flow("int64" if t.dtype == torch.int64 else "bool"))])
    value = rows_value(t, f"input {name}")   # a script makes its inputs: fresh tensors, version 0
    if not grad:
        return value if isinstance(value, list) else flow_map([("value", value)])
    return {"requires_grad": True, "value": value} if isinstance(value, list) else \
        flow_map([("value", value), ("requires_grad", True)])


def _example_calls(model: nn.Module, args: list[torch.Tensor]) -> tuple[dict, dict]:
    """The input shapes of every call of every module, and the arguments its forward is handed
    on its first call, after the user's forward pre-hooks (for the fallback when fx cannot trace:
    the path the forward takes is the one those arguments decide), from one run on the example inputs (which
    also tells, before anything is written, that the inputs fit the model). The run leaves the
    model as it was: buffers (BatchNorm's running statistics) and the random generator are
    restored."""
    shapes: dict[str, list] = {}
    examples: dict[str, tuple] = {}
    forms: dict[str, set] = {}   # path -> each call's arguments, as given or None (one forward per module)
    handles = []
    for path, m in model.named_modules():
        def pre(module, a, kw, path=path):
            if a and isinstance(a[0], torch.Tensor):
                shapes.setdefault(path, []).append(tuple(a[0].shape))
            forms.setdefault(path, set()).add(_none_pattern(module, a, kw))

        def received(module, a, kw, path=path):   # after the user's pre-hooks: what forward is handed
            if path not in examples:
                examples[path] = (_cloned(a), _cloned(kw))
        handles.append(m.register_forward_pre_hook(pre, prepend=True, with_kwargs=True))
        handles.append(m.register_forward_pre_hook(received, with_kwargs=True))
    codes = forward_hook_codes(model)
    watch = ForwardWatch(source_files(model), codes)
    try:
        with state_kept(model) as rebound, torch.no_grad(), watch, warnings.catch_warnings():
            # checkpoint's own warnings (no input requires grad here; use_reentrant absent) are the
            # example run's, not the user's: the problem's run says them again where PyTorch does
            warnings.filterwarnings("ignore", message="torch.utils.checkpoint|None of the inputs have requires_grad")
            model(*args)
    except Exception as exc:
        watch.check()
        if not _raised_in(exc, codes):   # a forward(-pre) hook of the user's that raises is PyTorch's answer
            raise ProblemError(None, f"running {type(model).__name__} on the example inputs raised "
                                     f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}; give inputs of "
                                     "the shapes the model takes") from None
    finally:
        for h in handles:
            h.remove()
    watch.check()
    _rebinds_no_buffer(model, rebound)
    _one_form_per_module(model, forms)
    return shapes, examples


def _raised_in(exc: BaseException, codes: dict) -> bool:
    """``exc`` was raised inside one of the user's forward(-pre) hooks (``codes``): the model's
    forward stops there in PyTorch too, and the file's run predicts that error; what the example
    run learned before it (the shapes of the calls that ran) is what the import needs."""
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code in codes:
            return True
        tb = tb.tb_next
    return False


def _rebinds_no_buffer(model: nn.Module, rebound: list[str]) -> None:
    """A forward that binds a buffer to a new tensor (``self.running = 0.9 * self.running +
    0.1 * m``): neither fx nor a recorded call sees an attribute assignment, so the file would keep
    the buffer as it was. Refused at the assignment's line."""
    from adjoint.torchside.importer.refuse import refuse
    from adjoint.torchside.importer.where import of_assignment, of_module
    if not rebound:
        return
    owner, _, name = rebound[0].rpartition(".")
    m = model.get_submodule(owner)
    raise refuse(of_assignment(type(m).forward, name) or of_module(m),
                 f"'{owner or 'model'}' ({type(m).__name__}) binds its buffer '{name}' to a new tensor in its forward "
                 f"(self.{name} = ...), which neither torch.fx nor a recorded call sees, so the file would keep the "
                 "buffer as it was",
                 f"update it in place instead (self.{name}.mul_(...).add_(...) on detached values: a forward may write "
                 "its buffers in place), or import the model in eval mode if it updates the buffer only in training")


def _none_pattern(module: nn.Module, args: tuple, kwargs: dict) -> tuple:
    """Which of the forward's parameters are None in this call, defaults applied (a keyword left at
    a default that is not None is no different from one given)."""
    try:
        bound = inspect.signature(module.forward).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return ()
    bound.apply_defaults()
    return tuple(sorted((name, value is None) for name, value in bound.arguments.items()))


def _one_form_per_module(model: nn.Module, forms: dict) -> None:
    """A custom module called with an argument in one call and without it (or None) in another:
    one forward is written per module, traced for its first call, so the other call would run
    the first one's branch (``if mask is not None``). Refused at the module's class."""
    from adjoint.torchside.importer.builtins import type_name
    from adjoint.torchside.importer.where import of_module
    for path, m in model.named_modules():
        if len(forms.get(path, ())) > 1 and type_name(m) is None and \
                not type(m).__module__.startswith("torch.") and type(m).forward is not nn.Module.forward:
            raise ProblemError(None, f"{of_module(m) or show_path(type(m).__module__)}: '{path or 'model'}' "
                                     f"({type(m).__name__}) is called with an argument in one call and without it "
                                     "(or with None) in another, and one forward is written per module; call it "
                                     "the same way each time (pass the argument, or None, explicitly), or split it "
                                     "in two modules")


def _cloned(value):
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (tuple, list)):
        return type(value)(_cloned(v) for v in value)
    if isinstance(value, dict):
        return {k: _cloned(v) for k, v in value.items()}
    return value


def side_file_for(out_path: str | None):
    """The :class:`.sidewrite.SideFile` an import to ``out_path`` writes big tensors into
    (``STEM.safetensors`` beside it; no name for standard output)."""
    from adjoint.torchside.importer.sidewrite import SideFile
    if not out_path or out_path == "-":
        return SideFile(None)
    return SideFile(os.path.splitext(os.path.basename(out_path))[0] + ".safetensors")


def side_path(out_path: str, side) -> str:
    return os.path.join(os.path.dirname(os.path.abspath(out_path)), side.name)
