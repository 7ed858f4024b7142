"""The user's module tree as the problem file's ``model:`` mapping.

* a module whose class is a ``torch.nn`` type the format has (:mod:`.builtins`): ``type``,
  ``args``, ``params``, ``buffers``;
* ``nn.Sequential``, ``nn.ModuleList`` and ``nn.ModuleDict``: their children, in order;
* another ``torch.nn`` class: refused, naming the line that calls it;
* any other module (the user's own classes): its own parameters and buffers under their
  bare names, its children, and its ``forward`` traced (:mod:`.fxtrace`) and written as a
  program (:mod:`.program`);
* ``training: false`` where a module is in eval mode and its parent is not (children
  inherit it, as ``.eval()`` sets it); a ``Dropout`` in training mode gets a keep-mask of the
  shape it was called with (drawn once from a fixed seed: edit it at will).
"""

from __future__ import annotations

import inspect
import json
import operator

import torch
from torch import fx, nn

from adjoint.format.module_signatures import DROPOUTS
from adjoint.torchside.importer import builtins
from adjoint.torchside.importer.emit import Block, Flow, flow_map
from adjoint.torchside.importer.fxtrace import trace
from adjoint.torchside.importer.keepstate import state_kept
from adjoint.torchside.importer.numbers import nested
from adjoint.torchside.importer.program import write_forward
from adjoint.torchside.importer.record import record
from adjoint.torchside.importer.refuse import refuse
from adjoint.torchside.importer.where import of_exception, of_module
from adjoint.torchside.importer.forwardcheck import augmented
from adjoint.torchside.importer.forwardcheck import calls_checkpoint
from adjoint.torchside.importer.fxtrace import CheckpointNotWritten

CONTAINERS = (nn.Sequential, nn.ModuleList, nn.ModuleDict)


def _container(m: nn.Module):
    """The torch.nn container ``m`` is written as (Sequential, ModuleList, ModuleDict), or None: the
    class itself, or a subclass that keeps the container's forward (torchvision's
    ``Conv2dNormActivation(nn.Sequential)``, whose ``__init__`` only fills it)."""
    for kind in CONTAINERS:
        if isinstance(m, kind) and type(m).forward is kind.forward:
            return kind
    return None


class TreeWriter:
    def __init__(self, files: set[str], shapes: dict[str, list[tuple[int, ...]]], examples: dict[str, tuple]):
        self.files = files
        self.shapes = shapes            # module path -> the input shapes of its calls (for Dropout masks)
        self.examples = examples        # module path -> (args, kwargs) of its first call (for record)
        self.sites: dict[str, str | None] = {}  # module path -> the line of the user's code that calls it
        self.factory_at: str | None = None      # the factory's def: where a refusal of a torch.nn root points
        self.side = None                        # a sidewrite.SideFile for big tensors (None: all inline)
        self.tied: dict[int, str] = {}          # id(Parameter) -> its first full name (a later one is tied to it)
        self.aliases: dict[str, str] = {}       # a module's second name -> its first (one module listed twice)
        self.recorded: list[str] = []           # the modules whose forward fx could not trace (recorded from one call)

    def module(self, m: nn.Module, path: str, parent_training: bool) -> dict:
        out: dict = {}
        builtins.check_parametrized(m, path, self.sites.get(path) or self.factory_at)
        tname = builtins.type_name(m)
        container = _container(m)
        kind = container.__name__ if container is not None else type(m).__name__
        if container is None and isinstance(m, CONTAINERS) and any(not n.isidentifier() for n in m._modules):
            raise refuse(of_module(m) or self.factory_at,
                         f"'{path or 'model'}' ({type(m).__name__}) subclasses nn.{type(m).__mro__[1].__name__} "
                         "with a forward of its own, and its children are numbered, which a custom module's "
                         "names cannot be", "name them (self.add_module('conv', ...)), or keep the inherited forward")
        if isinstance(m, nn.ModuleDict):
            bad = next((k for k in m.keys() if not k.isidentifier()), None)
            if bad is not None:
                raise refuse(self.sites.get(path) or of_module(m) or self.factory_at,
                             f"the nn.ModuleDict '{path or 'model'}' has the key {bad!r}, which a forward cannot "
                             "write as an attribute", "name its items with identifiers")
        if tname is not None and not isinstance(m, CONTAINERS):
            out["type"] = Flow(tname)
            a = builtins.args(m, tname)
            if a:
                out["args"] = flow_map(a)
        elif container is not None:
            out["type"] = Flow(kind)
        if m.training != parent_training:
            out["training"] = m.training
        if tname is not None and not isinstance(m, CONTAINERS):
            self.builtin_values(m, tname, path, out)
            return out
        own_params = {n: self.param(p, self.full(path, n)) for n, p in m.named_parameters(recurse=False)}
        own_buffers = {n: _buffer(b, self.full(path, n), self.side) for n, b in m.named_buffers(recurse=False)}
        if container is not None and (own_params or own_buffers):
            raise refuse(of_module(m), f"the {kind} '{path or 'model'}' holds tensors of its own",
                         "move them into a module of their own")
        if own_params:
            out["params"] = own_params
        if own_buffers:
            out["buffers"] = own_buffers
        if type(m).__module__.startswith("torch.") and container is None:
            raise refuse(self.sites.get(path) or of_module(m) or self.factory_at,
                         f"module '{path or 'model'}' is torch.nn.{kind}, which adjoint does not model",
                         "see docs/format.md (built-in types) for the torch.nn modules a problem file has")
        forward = self.forward(m, path) if container is None else None   # first: it knows the call sites
        children = [(n, c) for n, c in m._modules.items() if c is not None]   # a stateless module listed twice too
        if children:
            kids = [(n, self.module(c, self.full(path, n), m.training)) for n, c in children]
            out["children"] = [k for _, k in kids] if isinstance(m, nn.ModuleList) else dict(kids)
        if forward is not None:
            inputs, text, at = forward
            if inputs != ["x"]:
                out["inputs"] = Flow("[" + ", ".join(_input(i) for i in inputs) + "]")
            out["forward"] = Block(text, at)
        return out

    def param(self, p: torch.Tensor, full: str):
        """A parameter's entry: its value, or ``{tied: FIRST}`` when the same Parameter was listed
        first under another name (``head.weight = emb.weight``; a module listed twice)."""
        first = self.tied.get(id(p), full)
        if first != full:
            return flow_map([("tied", Flow(first))])
        return builtins.param_entry(p, full, self.side)

    def first_path(self, path: str) -> str:
        """The name under which ``named_modules`` lists the module (its calls are recorded there)."""
        for second, first in self.aliases.items():
            if path == second or path.startswith(second + "."):
                return first + path[len(second):]
        return path

    @staticmethod
    def full(path: str, name: str) -> str:
        return f"{path}.{name}" if path else name

    def builtin_values(self, m: nn.Module, tname: str, path: str, out: dict) -> None:
        builtins.check_reparametrized(m, tname, path, self.sites.get(path) or self.factory_at)
        dropped = builtins.drops_at_random(m, tname)
        if dropped is not None:
            raise refuse(self.sites.get(path) or self.factory_at,
                         f"'{path or 'model'}' ({tname}) is in training mode with dropout, so PyTorch drops "
                         f"{dropped} at random, which no prediction can know",
                         "call model.eval() (or give it " + ("p=0" if tname.endswith("Dropout") else "dropout=0")
                         + ") to import it")
        dim = builtins.weight_norm_dim(m, tname, path, self.sites.get(path) or self.factory_at)
        if dim is not None:   # torch.nn.utils.parametrizations.weight_norm (adjoint.format.weight_norm)
            out["weight_norm"] = flow_map([("dim", dim)])
        legacy = builtins.legacy_weight_norm_dim(m, tname, path, self.sites.get(path) or self.factory_at)
        if legacy is not None:   # the older torch.nn.utils.weight_norm (adjoint.format.weight_norm)
            out["weight_norm"] = flow_map([("dim", legacy), ("legacy", True)])
        spectral = builtins.spectral_norm_keys(m, tname, path, self.sites.get(path) or self.factory_at)
        if spectral is not None:   # torch.nn.utils.parametrizations.spectral_norm (adjoint.format.spectral_norm)
            out["spectral_norm"] = flow_map(spectral)
        params = {n: self.param(p, self.full(path, n)) for n, p in m.named_parameters()}
        if params:
            out["params"] = params
        buffers = builtins.buffer_entries(m, tname, self.full(path, ""), self.side)
        if spectral is not None:
            buffers.update(builtins.spectral_norm_buffers(m, self.full(path, ""), self.side))
        if buffers:
            out["buffers"] = buffers
        if tname in DROPOUTS and m.training and 0 < m.p < 1:
            out["mask"] = self.mask(m, path, tname)

    def mask(self, m: nn.Module, path: str, tname: str) -> Flow:
        shapes = self.shapes.get(self.first_path(path)) or []
        if len(shapes) != 1:
            raise refuse(of_module(m), f"the {tname} '{path}' is in training mode and called {len(shapes)} times "
                                       "with the example inputs", "call model.eval() (or give it p=0), or call it "
                                       "once: its keep-mask is data in a problem file")
        shape = tuple(shapes[0])
        if tname != "Dropout":   # one draw per batch element and channel, of the (unsqueezed) input
            if tname == "Dropout1d" and len(shape) == 2 or tname == "Dropout3d" and len(shape) != 5:
                shape = (1,) + shape
            shape = shape[:2] + (1,) * (len(shape) - 2)
        g = torch.Generator().manual_seed(0)
        keep = torch.bernoulli(torch.full(shape, 1 - m.p, dtype=torch.float64), generator=g)
        return Flow(nested(keep.to(torch.int64).tolist(), f"the mask of {path}"))

    def forward(self, m: nn.Module, path: str) -> tuple[list, str, tuple]:
        if calls_checkpoint(m):     # only fx writes checkpoint(...); a recorded call would run through it
            return self.checkpointing_forward(m, path)
        if augmented(m):        # fx writes h += x out of place: record a real call, which keeps it in place
            example = self.examples.get(self.first_path(path))
            if example is None:
                raise refuse(of_module(m), f"'{path or 'model'}' ({type(m).__name__}) writes a tensor in place "
                                           "(op=) and is never called on the example inputs",
                             "give inputs with which the model calls it")
            return write_forward(m, path, record(m, *example), self.files, self.sites)
        absent = _absent_none_arguments(m, self.examples.get(self.first_path(path)))
        try:
            graph = _trace_writing_nothing(m, absent)
        except Exception as exc:   # fx refuses in many ways: TraceError, TypeError, NotImplementedError...
            graph = self.fallback(m, path, exc)
        else:
            for node in graph.nodes:   # fx names a concrete argument's placeholder NAME_1: the forward's own name
                if node.op == "placeholder" and str(node.target).endswith("_1") and str(node.target)[:-2] in absent:
                    node.target = str(node.target)[:-2]
            power = _size_power(graph)
            example = self.examples.get(self.first_path(path))
            if power is not None and example is not None:
                graph = record(m, *example)
                self.recorded.append(f"'{path or 'model'}' ({type(m).__name__}): {power}")
        return write_forward(m, path, graph, self.files, self.sites)


    def checkpointing_forward(self, m: nn.Module, path: str) -> tuple[list, str, tuple]:
        """A forward that calls ``checkpoint``: traced by fx (the call kept as one node), or refused
        at the user's line; never recorded from a real call, which would run through the region."""
        who = f"'{path or 'model'}' ({type(m).__name__})"
        if augmented(m):
            raise refuse(of_module(m), f"{who} calls checkpoint(...) and writes a tensor in place (op=), which "
                                       "cannot be imported together yet", "write h = h + x for the import")
        try:
            graph = trace(m)
        except CheckpointNotWritten as exc:
            raise refuse(of_exception(exc, self.files) or of_module(m), f"{who}: {exc}",
                         "checkpoint a child module (checkpoint(self.block, h, use_reentrant=False)), with "
                         "use_reentrant, early_stop and preserve_rng_state as keywords") from None
        except Exception as exc:
            where = of_exception(exc, self.files) or of_module(m)
            first = " ".join(str(exc).split()) or type(exc).__name__
            raise refuse(where, f"torch.fx cannot trace the forward of {who}, which calls checkpoint(...): "
                                f"{first[:200]}", "write its forward without data-dependent Python control "
                                                  "flow") from None
        return write_forward(m, path, graph, self.files, self.sites)

    def fallback(self, m: nn.Module, path: str, exc: Exception):
        """fx could not trace: record the ops of one real call instead (:mod:`.record`); when that
        fails too, the one line names fx's complaint and the user's line it came from."""
        example = self.examples.get(self.first_path(path))
        if example is not None:
            try:
                graph = record(m, *example)
            except Exception:
                pass
            else:
                first = " ".join(str(exc).split()) or type(exc).__name__
                self.recorded.append(f"'{path or 'model'}' ({type(m).__name__}): {first[:160]}")
                return graph
        where = of_exception(exc, self.files) or of_module(m)
        first = " ".join(str(exc).split()) or type(exc).__name__
        if isinstance(exc, EagerWrite):   # not control flow: a write fx runs, and no recorded call could stand in
            raise refuse(where, f"the forward of '{path or 'model'}' ({type(m).__name__}) cannot be imported: {first}, "
                                "and recording a real call of it failed too", "write that line in the problem file "
                                "by hand (buffers and parameters may be written in place in a forward)") from None
        raise refuse(where, f"torch.fx cannot trace the forward of '{path or 'model'}' ({type(m).__name__}): "
                            f"{first[:200]}", "write its forward without data-dependent Python control flow") from None


def _number(node, seen=None) -> bool:
    """Whether an fx node is a Python number (or a tuple of them) computed from sizes alone:
    ``x.shape``, ``x.size()``, their items, and Python's arithmetic on those and on constants."""
    if not isinstance(node, fx.Node):
        return isinstance(node, (int, float)) and not isinstance(node, bool)
    if node.op == "call_method" and node.target in ("size", "dim", "numel"):
        return True
    if node.op != "call_function":
        return False
    if node.target is getattr:
        return len(node.args) == 2 and node.args[1] in ("shape", "ndim")
    if node.target is operator.getitem:
        return _number(node.args[0])
    if node.target in (operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
                       operator.pow, operator.neg, operator.mod):
        return all(_number(a) for a in node.args)
    return False


def _size_power(graph: fx.Graph) -> str | None:
    """What makes fx's graph unfit to write: a Python number computed from sizes raised to a power
    that is not an integer (``(D // h) ** -0.5``, an attention's scale). Python computes it as a
    float (``2 ** -0.5`` is 0.7071067811865476); the format's numbers are exact, and such a power
    is no rational, so the file could not be answered. A recorded call holds the float Python
    computed instead (as ``1 / math.sqrt(d)``, which fx cannot trace, is recorded)."""
    for node in graph.nodes:
        if node.op == "call_function" and node.target is operator.pow and _number(node):
            exponent = node.args[1]
            if not (isinstance(exponent, int) or (isinstance(exponent, float) and exponent.is_integer())):
                return (f"a size raised to the power {exponent!r} ({node.name}): Python computes it as a float, "
                        "written as that call's constant")
    return None


class EagerWrite(Exception):
    """fx ran an in-place op on a tensor of the module while tracing: the op's arguments were all
    real tensors (``self.avg.mul_(0.9)``), so it ran there and then, and never reached the graph."""


def _trace_writing_nothing(m: nn.Module, absent: dict):
    """``trace(m, absent)``, the module's buffers as they were before (values and version
    counters); :class:`EagerWrite` when the trace wrote one of them in place. fx traces the
    parameters as proxies, so it writes none of them, and they are not copied (a tenth of a
    ResNet-18's import time)."""
    tensors = [(n, t, t._version) for n, t in list(m.named_parameters()) + list(m.named_buffers())]
    with state_kept(m, parameters=False):
        graph = trace(m, absent)
        wrote = [n for n, t, version in tensors if t._version != version]
    if any(isinstance(t, nn.Parameter) and t._version != version for _n, t, version in tensors):
        raise refuse(of_module(m), f"torch.fx wrote a parameter of '{type(m).__name__}' in place while tracing "
                                   "its forward, which import cannot undo", "write that line in the problem file "
                                   "by hand")
    if wrote:
        raise EagerWrite(f"an in-place op on {', '.join(wrote)} with no traced argument ran while torch.fx traced "
                         "the forward, which left it out of the graph")
    return graph


def _input(item) -> str:
    if isinstance(item, dict):
        (name, default), = item.items()
        text = "null" if default is None else ("true" if default is True else "false" if default is False
                                               else json.dumps(default) if isinstance(default, str)
                                               else repr(default))
        return f"{{{name}: {text}}}"
    return item


def _buffer(b: torch.Tensor, name: str, side=None):
    """A custom module's buffer: its values, with its dtype when it is int64 or bool (a causal
    mask is a bool tensor: written as numbers alone it would read back as float)."""
    if b.is_floating_point():
        return builtins.versioned(builtins.tensor_value(b, name, side, name), b)
    if b.dtype not in (torch.int64, torch.bool):
        raise refuse(None, f"buffer '{name}' is {b.dtype}", "a problem file holds float, int64 and bool tensors: "
                                                            "convert it (.long() or .bool())")
    return flow_map([("value", Flow(nested(b.tolist(), f"buffer {name}"))),
                     ("dtype", Flow("int64" if b.dtype == torch.int64 else "bool"))]
                    + ([("version", b._version)] if b._version else []))


def _absent_none_arguments(m: nn.Module, example) -> dict:
    """The forward's arguments that default to None and that the example call (the inputs given,
    or a child's first call) leaves out: traced as None (fx's concrete_args), so that ``if mask is
    not None:`` takes the branch the module takes, not the one a Proxy would."""
    if example is None:
        return {}
    args, kwargs = example
    try:
        params = list(inspect.signature(type(m).forward).parameters.values())[1:]   # self is not an argument
    except (TypeError, ValueError):
        return {}
    return {p.name: None for i, p in enumerate(params)
            if i >= len(args) and p.name not in kwargs and p.default is None
            and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
