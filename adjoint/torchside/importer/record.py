"""The fallback when ``torch.fx`` cannot trace a forward: record the ops one real call runs.

PyTorch's ``__torch_function__`` modes see every ``torch`` function, ``F`` function and
Tensor method (operators included) a forward calls on tensors. The custom module's forward
is called once on the example values it received when the model ran on the example inputs;
its children are called for real but recorded as one ``call_module`` each (nothing inside
them is recorded: they are imported on their own). The ops are written into a ``torch.fx``
graph, the same form :mod:`.program` writes from fx's own tracing, and unused ops are
dropped. Python control flow has been decided by the example (``if h.sum() > 0:`` took one
branch): the program is the path these inputs take, which is the graph ``verify`` compares.
"""

from __future__ import annotations

import inspect
import operator
import traceback

import torch
from torch import fx, nn
from torch.overrides import TorchFunctionMode

from adjoint.torchside.importer.keepstate import state_kept

_OPERATORS = {"__add__": operator.add, "__sub__": operator.sub, "__mul__": operator.mul,
              "__truediv__": operator.truediv, "__matmul__": operator.matmul, "__pow__": operator.pow,
              "__neg__": operator.neg, "__getitem__": operator.getitem,
              "__gt__": operator.gt, "__ge__": operator.ge, "__lt__": operator.lt, "__le__": operator.le,
              "__eq__": operator.eq, "__ne__": operator.ne}
#: ``h += x``: Tensor.__iadd__ runs add_ (the node PyTorch makes is add_'s, in place)
_AUGMENTED = {"__iadd__": "add_", "__isub__": "sub_", "__imul__": "mul_", "__itruediv__": "div_"}
_REFLECTED = {"__radd__": operator.add, "__rsub__": operator.sub, "__rmul__": operator.mul,
              "__rtruediv__": operator.truediv, "__rmatmul__": operator.matmul, "__rpow__": operator.pow}
#: calls that return no tensor but act on one: recorded, so that the program writes them (``h[i] = v``)
#: or refuses them at the user's line (``h.retain_grad()``, ``h.register_hook(f)``), never drops them
SIDE_EFFECTS = {"__setitem__", "__delitem__", "__set__", "retain_grad", "register_hook",
                "register_post_accumulate_grad_hook", "backward"}


class Recorder(TorchFunctionMode):
    def __init__(self, graph: fx.Graph, nodes: dict[int, fx.Node], keep: list):
        super().__init__()
        self.graph = graph
        self.nodes = nodes      # id(tensor) -> the node that made it
        self.keep = keep        # the tensors, kept alive so that ids stay unique
        self.depth = 0          # > 0 inside a child's call: nothing recorded
        #: id(float) -> the placeholder of the forward's float argument that is this very object: an op
        #: handed the argument (``h * gain``) reads the input, so a pre-hook's change of it counts
        self.numbers: dict[int, fx.Node] = {}
        self._stack = ""

    def map(self, value):
        if type(value) is float and id(value) in self.numbers:
            return self.numbers[id(value)]
        if isinstance(value, torch.Tensor):
            node = self.nodes.get(id(value))
            if node is None:
                raise _Untracked(value)
            return node
        if isinstance(value, (tuple, list)):
            return type(value)(self.map(v) for v in value)
        if isinstance(value, dict):
            return {k: self.map(v) for k, v in value.items()}
        return value

    def bind(self, out, node: fx.Node) -> None:
        if isinstance(out, torch.Tensor):
            self.nodes[id(out)] = node
            self.keep.append(out)
        elif isinstance(out, (tuple, list)):
            for i, item in enumerate(out):
                if isinstance(item, torch.Tensor):
                    self.bind(item, self.graph.call_function(operator.getitem, (node, i)))
                    self.nodes[id(item)].stack_trace = self._stack

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = getattr(func, "__name__", "")
        if self.depth or not (_tensors(out) or name in SIDE_EFFECTS):
            return out
        self._stack = "".join(traceback.format_stack()[:-1])
        if name == "__setitem__":   # h[i] = v (and the store of h[i] += v): written as the user wrote it
            node = self.graph.call_function(operator.setitem, self.map(args), self.map(kwargs))
        elif name in _OPERATORS:
            node = self.graph.call_function(_OPERATORS[name], self.map(args), self.map(kwargs))
        elif name in _AUGMENTED:
            node = self.graph.call_method(_AUGMENTED[name], self.map(args), self.map(kwargs))
        elif name in _REFLECTED:
            a, b = args
            node = self.graph.call_function(_REFLECTED[name], (self.map(b), self.map(a)), self.map(kwargs))
        elif getattr(torch.Tensor, name, None) is func:
            node = self.graph.call_method(name, self.map(args), self.map(kwargs))
        else:
            node = self.graph.call_function(func, self.map(args), self.map(kwargs))
        node.stack_trace = self._stack
        self.bind(out, node)
        return out


class _Untracked(Exception):
    def __init__(self, tensor):
        super().__init__("a tensor that is neither an input, a parameter or buffer of the module, nor computed "
                         "from them")


def _tensors(x) -> bool:
    if isinstance(x, torch.Tensor):
        return True
    if isinstance(x, (tuple, list)):
        return any(_tensors(i) for i in x)
    return False


def record(module: nn.Module, args: tuple, kwargs: dict) -> fx.Graph:
    """The ops ``module.forward(*args, **kwargs)`` runs, children as calls (``_Untracked`` and the
    forward's own exceptions propagate)."""
    graph = fx.Graph()
    nodes: dict[int, fx.Node] = {}
    keep: list = []
    rec = Recorder(graph, nodes, keep)
    for name, default, value in _arguments(inspect.signature(module.forward), args, kwargs):
        node = graph.placeholder(name, default_value=default)
        if isinstance(value, torch.Tensor):
            nodes[id(value)] = node
        elif type(value) is float:    # h * gain: the argument itself, not the number it held in this call
            rec.numbers[id(value)] = node
            keep.append(value)
    for name, t in list(module.named_parameters(recurse=False)) + list(module.named_buffers(recurse=False)):
        nodes[id(t)] = graph.get_attr(name)
    handles = []
    for cname, child in module.named_children():
        handles += _watch(rec, graph, child, cname)
        handles += _watch_items(rec, graph, child, cname)
    try:
        with state_kept(module), torch.no_grad(), rec:   # its children run for real
            out = module.forward(*args, **kwargs)
        graph.output(rec.map(out))
    finally:
        for h in handles:
            h.remove()
    for node in reversed(list(graph.nodes)):   # ops whose value nothing used (a branch's condition)
        if node.op in ("call_function", "call_method") and not node.users and not _in_place(node) \
                and not acts(node):
            graph.erase_node(node)
    return graph


def _arguments(sig, args: tuple, kwargs: dict) -> list[tuple]:
    """(name, default, value) of each argument the call passes, in the forward's order, positional
    or by keyword: a keyword the call gives (``self.blk(x, act=False)``; a key of ``**kwargs``,
    ``self.fn(h, mask=mask)``) is an input of the written forward, so that the parent's call of
    it is the call the user's code makes. A default is the signature's, when the format can write
    it (a number, a bool, None, a string: ``act: str = "relu"``); ``*args`` is ``*NAME`` (refused by
    the program writer)."""
    try:
        bound = sig.bind(*args, **kwargs).arguments
    except TypeError:       # the call ran, so the signature takes it; a forward whose signature lies
        return [(name, inspect.Parameter.empty, value) for name, value in zip(sig.parameters, args)]
    out = []
    for name, value in bound.items():
        p = sig.parameters[name]
        if p.kind == p.VAR_KEYWORD:
            out += [(key, inspect.Parameter.empty, v) for key, v in value.items()]
        elif p.kind == p.VAR_POSITIONAL:
            out.append((f"*{name}", inspect.Parameter.empty, None))
        else:
            plain = p.default is None or type(p.default) in (bool, int, float, str)
            out.append((name, p.default if plain else inspect.Parameter.empty, value))
    return out


def acts(node: fx.Node) -> bool:
    """A recorded call that returns nothing but acts (a store ``h[i] = v``, ``h.retain_grad()``)."""
    name = str(node.target) if node.op == "call_method" else getattr(node.target, "__name__", "")
    return node.target is operator.setitem or name in SIDE_EFFECTS


def _in_place(node: fx.Node) -> bool:
    name = str(node.target) if node.op == "call_method" else getattr(node.target, "__name__", "")
    return name.endswith("_") and not name.startswith("_")


def _watch_items(rec, graph, holder: nn.Module, path: str) -> list:
    """The items of a ModuleList, ModuleDict or Sequential child (and of the ones inside it), which
    its parent calls by their paths (``layers.0``, ``transformer.wte``, ``transformer.h.0``; a
    slice of a Sequential, ``features[:2](x)``, calls ``features.0`` and ``features.1``)."""
    if not isinstance(holder, (nn.ModuleList, nn.ModuleDict, nn.Sequential)):
        return []
    handles = []
    for key, item in holder.named_children():
        handles += _watch(rec, graph, item, f"{path}.{key}")
        handles += _watch_items(rec, graph, item, f"{path}.{key}")
    return handles


def _watch(rec: Recorder, graph: fx.Graph, child: nn.Module, target: str) -> list:
    """Hooks that make a child's call one ``call_module`` node (its inside unrecorded)."""
    seen = {}

    def pre(module, args, kwargs):
        if rec.depth == 0:
            seen["node"] = (rec.map(args), rec.map(kwargs), "".join(traceback.format_stack()[:-1]))
        rec.depth += 1

    def post(module, args, kwargs, out):
        rec.depth -= 1
        if rec.depth == 0:
            a, k, stack = seen.pop("node")
            node = graph.call_module(target, a, k)
            node.stack_trace = rec._stack = stack
            rec.bind(out, node)

    return [child.register_forward_pre_hook(pre, prepend=True, with_kwargs=True),
            child.register_forward_hook(post, with_kwargs=True, always_call=True)]
