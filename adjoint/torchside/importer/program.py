"""A custom module's traced forward (a ``torch.fx`` graph) written as a problem-file forward.

Each fx node becomes the expression PyTorch's own call would be written as: a child's call
by its name (``layers[0](x)`` in a ``ModuleList``, ``transformer.wte(idx)`` in a
``ModuleDict``), ``torch.X`` / ``F.X`` functions and Tensor methods the format models,
Python's operators (``+ - * / @ ** -x``, indexing), the module's own parameters and buffers
by their bare names. A node used once is written inside
the expression that uses it when that keeps the order in which the user's code ran the
ops (Python evaluates left to right, so ``fc2(F.relu(fc1(x)))`` runs as the three lines
would); otherwise it is a line of its own, named as the user's line names it (``h = ...``;
``h_2`` when the name is taken, as when ``x = x + ...`` rebinds an input), else as fx
named it (``add``; ``fc1_out`` where the fx name is a child's). A tuple a child or function returns and the code unpacks
(``out, weights = attn(q, k, v)``) is unpacked in the same way.

Anything else (an op the format does not model, a grandchild called directly, a constant
tensor, ``*args``) is refused, naming the op and the line of the user's code it came from.
"""

from __future__ import annotations

import builtins
import keyword
import linecache
import operator
import re

import torch
import torch.nn.functional as F
from torch import fx, nn

from adjoint.engine.bindings import FUNCTIONS, METHODS
from adjoint.torchside.importer.fxtrace import PACKING
from adjoint.torchside.importer.numbers import python_constant
from adjoint.torchside.importer.refuse import refuse
from adjoint.torchside.importer.where import frame_of, of_stack_trace
from adjoint.engine.inplace import INPLACE_METHODS

_ASSIGNED = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:=[^=]|[-+*/@]=)")

ATOM = 100
BINARY = {operator.add: ("+", 10), operator.sub: ("-", 10), operator.mul: ("*", 20),
          operator.truediv: ("/", 20), operator.matmul: ("@", 20), operator.pow: ("**", 40),
          operator.floordiv: ("//", 20)}
NEG = 30
#: comparisons: the format takes one per expression, so each is a line of its own
COMPARE = {operator.gt: ">", operator.ge: ">=", operator.lt: "<", operator.le: "<=", operator.eq: "==",
           operator.ne: "!="}
RESERVED = {"y", "loss", "model", "x_", "torch", "F", "nn", "self"}
ATTRIBUTES = ("shape", "T", "mT", "device", "values", "indices")   # (values, indices: of max(dim) / min(dim))
#: Calls that return a tuple the code may unpack (how many items, when the node says so).
TUPLE_METHODS = {"chunk", "split", "unbind", "max", "min"}


class Expr:
    def __init__(self, text: str, prec: int = ATOM):
        self.text = text
        self.prec = prec


class Writer:
    def __init__(self, module: nn.Module, path: str, graph: fx.Graph, files: set[str], sites: dict):
        self.module = module
        self.prefix = f"{path}." if path else ""
        self.sites = sites
        self.path = f"'{path}'" if path else "the model"
        self.graph = graph
        self.files = files
        self.children = dict(module.named_children())
        self.own = {n for n, _ in module.named_parameters(recurse=False)} | \
                   {n for n, _ in module.named_buffers(recurse=False)}
        self.taken = set(self.children) | self.own | RESERVED | set(keyword.kwlist)
        self.names: dict[fx.Node, str] = {}
        self.exprs: dict[fx.Node, Expr] = {}
        self.pending: list[fx.Node] = []
        self.lines: list[str] = []
        self.at: list[tuple] = []     # per line: (written text, the user's file:line) of each op written on it
        self.parts: dict[fx.Node, list[fx.Node]] = {}   # a node -> the nodes written inside its expression
        self.inputs: list = []
        self.unpacked: set[fx.Node] = set()
        self.last_on_line: dict[tuple[str, int], fx.Node] = {}
        for node in graph.nodes:
            frame = frame_of(node.stack_trace, files)
            if frame is not None and node.op not in ("placeholder", "output", "get_attr"):
                self.last_on_line[frame] = node

    # ------------------------------------------------------------------ names
    def user_name(self, node: fx.Node) -> str | None:
        """The name the user's line assigns this value to (``h = self.ln1(x)``: ``h``), when the
        node is the last op of that line."""
        frame = frame_of(node.stack_trace, self.files)
        if frame is None or self.last_on_line.get(frame) is not node:
            return None
        m = _ASSIGNED.match(linecache.getline(*frame))
        return m.group(1) if m else None

    def name(self, node: fx.Node) -> str:
        if node not in self.names:
            base = node.name if node.op != "placeholder" else str(node.target)
            wanted = self.user_name(node) if node.op != "placeholder" else None
            if wanted is not None and wanted not in FUNCTIONS:
                base = wanted
                k = 2
                while base in self.taken:
                    base, k = f"{wanted}_{k}", k + 1
            if base in self.taken or base in FUNCTIONS:
                base = f"{base}_out"
            while base in self.taken:
                base += "_"
            self.taken.add(base)
            self.names[node] = base
        return self.names[node]

    def where(self, node: fx.Node) -> str | None:
        return of_stack_trace(node.stack_trace, self.files)

    def fail(self, node: fx.Node, what: str, instead: str):
        return refuse(self.where(node), f"{self.path} ({type(self.module).__name__}): {what}", instead)

    # ------------------------------------------------------------------ the program
    def write(self) -> tuple[list, str]:
        nodes = list(self.graph.nodes)
        for node in nodes:
            if node.op == "placeholder":
                self.placeholder(node)
            elif node.op == "get_attr":
                self.get_attr(node)
            elif node.op == "output":
                self.output(node)
            elif node in self.unpacked or _asserts_none(node):
                continue
            elif not _live(node) and node.op in ("call_function", "call_method") and not _in_place(node) \
                    and _modelled(node):
                continue    # an op whose value nothing uses (a child's call is kept: its hooks fire)
            else:
                self.op(node)
        return self.inputs, "\n".join(self.lines) + "\n", tuple(self.at)

    def placeholder(self, node: fx.Node) -> None:
        text = str(node.target)
        if text.startswith("*"):
            raise self.fail(node, f"forward takes {text}", "write its arguments out by name")
        self.taken.add(text)
        self.names[node] = text
        self.exprs[node] = Expr(text)
        if node.args:
            default = node.args[0]
            if not (default is None or isinstance(default, (bool, int, float, str))):
                raise self.fail(node, f"input '{text}' defaults to {type(default).__name__}",
                                "give it a number, a bool, a string or None as its default")
            self.inputs.append({text: default})
        else:
            self.inputs.append(text)

    def get_attr(self, node: fx.Node) -> None:
        target = str(node.target)
        if target.startswith("_tensor_constant"):
            raise self.fail(node, "uses a tensor the trace saw as a constant -- made by code torch.fx runs "
                                  "eagerly (torch.tensor(...), a global tensor, an op on a tensor attribute that is "
                                  "not a parameter or buffer) -- which the problem format cannot write as part of the "
                                  "forward",
                            "register the tensor it needs as a buffer in __init__ (self.register_buffer('m', mask)), "
                            "or compute it from the forward's inputs")
        if target not in self.own:
            written = _tensor_path(self.children, target)   # a child's parameter or buffer: emb.weight
            if written is None:
                raise self.fail(node, f"uses the tensor attribute '{target}', which is not a parameter or buffer "
                                      "of this module or of its children",
                                "register it on this module (nn.Parameter or register_buffer)")
            target = written
        self.exprs[node] = Expr(target)

    def output(self, node: fx.Node) -> None:
        value = node.args[0]
        refs = _refs(value)
        inlined = self.consume(refs)
        if isinstance(value, (tuple, list)):
            text = ", ".join(self.arg(v) for v in value)
        else:
            text = self.arg(value)
        self.flush()
        self.emit(f"return {text}", [p for n in inlined for p in self.parts.get(n, [n])])

    def op(self, node: fx.Node) -> None:
        if node.op == "call_method" and str(node.target) in INPLACE_METHODS:
            self.in_place(node)
            return
        if node.op == "call_function" and node.target is operator.setitem:
            self.store(node)
            return
        self.parts[node] = [p for n in self.consume(_refs((node.args, node.kwargs))) for p in self.parts.get(n, [n])]
        self.parts[node].append(node)
        expr = self.render(node)
        if node.op == "call_function" and node.target in COMPARE:
            self.exprs[node] = expr
            self.flush()
            self.assign(node)
            return
        count = self.tuple_count(node) if len(_live(node)) > 1 else None
        if count is not None:
            self.flush()
            items = {u.args[1]: u for u in node.users}
            names = []
            for i in range(count):
                u = items.get(i)
                if u is None:
                    names.append(self.fresh(f"{node.name}_{i}"))
                else:
                    names.append(self.name(u))
                    self.exprs[u] = Expr(names[-1])
                    self.unpacked.add(u)
            self.emit(f"{', '.join(names)} = {expr.text}", self.parts[node])
            return
        self.exprs[node] = expr
        if len(_live(node)) == 1 and not _in_place(node):
            self.pending.append(node)
            return
        self.flush()
        self.assign(node)

    def in_place(self, node: fx.Node) -> None:
        """``h.add_(x)`` (``h += x`` recorded from a real call): a line of its own on a named
        tensor; later uses of its value name the tensor it wrote."""
        recv = node.args[0]
        if not isinstance(recv, fx.Node):
            raise self.fail(node, f"calls .{node.target}() on a constant", "write it on a tensor")
        self.flush()
        if self.exprs[recv].prec != ATOM or not self.exprs[recv].text.isidentifier():
            self.assign(recv)
        text = f"{self.exprs[recv].text}.{node.target}({self.call_args(node, node.args[1:], node.kwargs)})"
        self.emit(text, [node])
        self.exprs[node] = Expr(self.exprs[recv].text)

    def store(self, node: fx.Node) -> None:
        """``h[i] = v`` (recorded from a real call; ``h[i] += v`` is the view's ``add_`` and then
        this store of it, as Python runs it): a line of its own on a named tensor, its value
        inlined when that keeps the order the ops ran in."""
        base, index, value = node.args
        if not isinstance(base, fx.Node):
            raise self.fail(node, "assigns into a constant", "write it on a tensor")
        inlined = self.consume(_refs((index, value)))
        self.flush()
        if self.exprs[base].prec != ATOM or not self.exprs[base].text.isidentifier():
            self.assign(base)
        try:
            inner = (", ".join(self.arg(i) for i in index) if index else "()") if isinstance(index, tuple) \
                else self.arg(index)
            rhs = self.arg(value)
        except TypeError as exc:
            raise self.fail(node, f"assigns with a {exc}", "use numbers, None, slices and tensors") from None
        self.emit(f"{self.exprs[base].text}[{inner}] = {rhs}",
                  [p for n in inlined for p in self.parts.get(n, [n])] + [node])
        self.exprs[node] = Expr("None")

    def fresh(self, base: str) -> str:
        while base in self.taken:
            base += "_"
        self.taken.add(base)
        return base

    def assign(self, node: fx.Node) -> None:
        name = self.name(node)
        self.emit(f"{name} = {self.exprs[node].text}", self.parts.get(node, [node]))
        self.exprs[node] = Expr(name)

    def emit(self, line: str, nodes: list[fx.Node]) -> None:
        """A line of the program, and where the user's code ran the ops ``nodes`` written on it
        (so that what the file cannot answer is told at the user's line)."""
        self.lines.append(line)
        at = [(self.exprs[n].text if n in self.exprs else line, of_stack_trace(n.stack_trace, self.files))
              for n in nodes]
        self.at.append(tuple((text, w) for text, w in at if w is not None))

    def consume(self, refs: list[fx.Node]) -> list[fx.Node]:
        """Inline the pending nodes ``refs`` names when they are the newest pending ones, in the
        order the new expression evaluates them (they are returned); otherwise every pending node
        gets its own line."""
        used = [r for r in refs if r in self.pending]
        if used and (len(set(used)) != len(used) or self.pending[-len(used):] != used):
            self.flush()
            return []
        for _ in used:
            self.pending.pop()
        return used

    def flush(self) -> None:
        for node in self.pending:
            self.assign(node)
        self.pending = []

    def tuple_count(self, node: fx.Node) -> int | None:
        """How many items to unpack, when the code unpacks a tuple this node returns."""
        users = list(node.users)
        if len(users) < 2 or not all(u.op == "call_function" and u.target is operator.getitem
                                     and isinstance(u.args[1], int) and u.args[0] is node for u in users):
            return None
        if node.op == "call_module":
            child = self.module.get_submodule(str(node.target))
            if isinstance(child, nn.MultiheadAttention):
                return 2
            if isinstance(child, (nn.Linear, nn.Conv1d, nn.Conv2d)):
                return None
        elif node.op == "call_method" and node.target not in TUPLE_METHODS:
            return None
        elif node.op == "call_function" and getattr(node.target, "__name__", "") not in TUPLE_METHODS:
            return None
        if node.op in ("call_method", "call_function") and getattr(node.target, "__name__", node.target) == "chunk":
            chunks = node.args[1] if len(node.args) > 1 else node.kwargs.get("chunks")
            if isinstance(chunks, int):
                return chunks
        return max(u.args[1] for u in users) + 1

    # ------------------------------------------------------------------ one expression
    def arg(self, value, prec: int = 0) -> str:
        if isinstance(value, fx.Node):
            e = self.exprs[value]
            return e.text if e.prec >= prec else f"({e.text})"
        if isinstance(value, (tuple, list)) and any(isinstance(v, fx.Node) for v in _flat(value)):
            inner = ", ".join(self.arg(v) for v in value)
            if isinstance(value, tuple):
                return "(" + inner + ("," if len(value) == 1 else "") + ")"
            return "[" + inner + "]"
        if isinstance(value, dict) and all(isinstance(k, str) for k in value) \
                and any(isinstance(v, fx.Node) for v in _flat(list(value.values()))):   # return {"logits": h, ...}
            return "{" + ", ".join(f"{python_constant(k)}: {self.arg(v)}" for k, v in value.items()) + "}"
        if isinstance(value, slice) and any(isinstance(v, fx.Node) for v in (value.start, value.stop, value.step)):
            # self.pos[:, :T] with T = x.size(1): the bounds are the sizes' expressions (ints)
            parts = ["" if v is None else self.arg(v) for v in (value.start, value.stop)]
            return ":".join(parts) + ("" if value.step is None else ":" + self.arg(value.step))
        return python_constant(value)

    def call_args(self, node: fx.Node, args, kwargs) -> str:
        kwargs = {k: v for k, v in kwargs.items() if not (k == "inplace" and v is False)}
        if node.op == "call_function":     # fx records F.softmax(x, dim=-1) with _stacklevel=3, dtype=None
            defaults = _defaults(node.target)
            kwargs = {k: v for k, v in kwargs.items() if not k.startswith("_") and
                      not (k in defaults and not isinstance(v, fx.Node) and type(v) is type(defaults[k])
                           and v == defaults[k])}
            if _default_float(node, args, kwargs):
                kwargs = {**kwargs, "dtype": torch.get_default_dtype()}
        parts = [self.arg(a) for a in args] + [f"{k}={self.arg(v)}" for k, v in kwargs.items()]
        return ", ".join(parts)

    def render(self, node: fx.Node) -> Expr:
        try:
            return self._render(node)
        except TypeError as exc:
            raise self.fail(node, f"passes a {exc} to {_show_target(node)}",
                            "use numbers, strings, None and tuples of ints as constant arguments") from None

    def _render(self, node: fx.Node) -> Expr:
        if node.op == "call_module":
            self.sites.setdefault(self.prefix + str(node.target), self.where(node))
            return Expr(f"{self.child(node)}({self.call_args(node, node.args, node.kwargs)})")
        if node.op == "call_method":
            name = str(node.target)
            if name == "__invert__" and len(node.args) == 1 and not node.kwargs:   # ~m, as the recorder sees it
                return Expr(f"~{self.arg(node.args[0], NEG)}", NEG)
            if name not in METHODS:
                raise self.fail(node, f"calls the Tensor method .{name}(), which adjoint does not model",
                                "see docs/format.md (expressions) for the methods a forward may call")
            recv, rest = node.args[0], node.args[1:]
            return Expr(f"{self.arg(recv, ATOM)}.{name}({self.call_args(node, rest, node.kwargs)})")
        target = node.target
        if target in BINARY and not node.kwargs:
            sym, prec = BINARY[target]
            a, b = node.args
            right = prec + 1 if sym != "**" else prec
            left = prec if sym != "**" else prec + 1
            return Expr(f"{self.arg(a, left)} {sym} {self.arg(b, right)}", prec)
        if target in COMPARE and not node.kwargs:
            a, b = node.args
            return Expr(f"{self.arg(a, 5)} {COMPARE[target]} {self.arg(b, 5)}", 4)
        if target is operator.neg:
            return Expr(f"-{self.arg(node.args[0], NEG)}", NEG)
        if target is operator.invert:   # ~mask (of a bool tensor: the format's ~; of another, its error)
            return Expr(f"~{self.arg(node.args[0], NEG)}", NEG)
        if target is operator.getitem:
            base, index = node.args
            if isinstance(index, tuple):
                inner = ", ".join(self.arg(i) for i in index) if index else "()"
            else:
                inner = self.arg(index)
            return Expr(f"{self.arg(base, ATOM)}[{inner}]")
        if target is builtins.getattr and node.args[1] in ATTRIBUTES:
            return Expr(f"{self.arg(node.args[0], ATOM)}.{node.args[1]}")
        if target is builtins.getattr:
            raise self.fail(node, f"reads the tensor attribute .{node.args[1]}, which adjoint does not model",
                            "a forward may read .shape, .T and .mT (for .data: .detach())")
        if "checkpoint_child" in node.meta:
            return self.checkpoint(node)
        prefix = _namespace(target)
        name = getattr(target, "__name__", None)
        if prefix is None and name in METHODS and _show_target(node).startswith("TensorBase."):
            # fx writes a method call on a tensor it did not trace (next(self.parameters()): a constant) this way
            raise self.fail(node, f"calls .{name}() on a tensor torch.fx did not trace (one reached otherwise than "
                                  "by an attribute, as next(self.parameters()) is)",
                            f"call it on a traced tensor (x.{name}(...), self.PARAM.{name}(...))")
        if prefix == "F." and name == "dropout" and _drops(node):
            raise self.fail(node, "calls F.dropout in training mode, which draws its keep-mask at random at each call "
                                  "(a problem file holds a keep-mask only for an nn.Dropout module)",
                            "call an nn.Dropout child instead (self.drop = nn.Dropout(p) in __init__, h = "
                            "self.drop(h): import writes its keep-mask as data), or import the model in eval mode "
                            "(F.dropout(h, p, self.training) then keeps every element)")
        if prefix is None or name not in FUNCTIONS:
            raise self.fail(node, f"calls {_show_target(node)}, which adjoint does not model",
                            "see docs/format.md (expressions) for the functions a forward may call")
        return Expr(f"{prefix}{name}({self.call_args(node, node.args, node.kwargs)})")

    def checkpoint(self, node: fx.Node) -> Expr:
        """``checkpoint(CHILD, *args, use_reentrant=..., ...)`` as the format writes it (the child by
        its name; the keywords as the user gave them, an absent ``use_reentrant`` absent)."""
        path = node.meta["checkpoint_child"]
        self.sites.setdefault(self.prefix + path, self.where(node))
        if path not in self.children:
            raise self.fail(node, f"checkpoints '{path}', which is not one of its own named children (a "
                                  "ModuleList's item or a grandchild cannot be written in checkpoint(...) yet)",
                            "give the module a named child for the checkpointed block (self.block = ...)")
        parts = [path] + [self.arg(a) for a in node.args[1:]]
        parts += [f"{k}={self.arg(v)}" for k, v in node.kwargs.items() if not (k == "use_reentrant" and v is None)]
        return Expr(f"checkpoint({', '.join(parts)})")

    def child(self, node: fx.Node) -> str:
        target = str(node.target)
        if target in self.children:
            return target
        written = _item_path(self.children, target)
        if written is not None:
            return written
        raise self.fail(node, f"calls '{target}' directly, which is not one of its own children",
                        "a forward calls its own children (or the items of a ModuleList or ModuleDict child); "
                        "give the child a forward that calls its own child")


def _tensor_path(children: dict, target: str) -> str | None:
    """A descendant's parameter or buffer as the format writes it (``emb.weight``,
    ``layers[0].weight``, ``transformer.wte.weight``); None when ``target`` is not one."""
    *path, name = target.split(".")
    found = _written(children, path, holders_only=False) if path else None
    if found is None or (name not in found[0]._parameters and name not in found[0]._buffers):
        return None
    return f"{found[1]}.{name}"


def _item_path(children: dict, target: str) -> str | None:
    """A call of a container's item as the format writes it: ``layers.0`` -> ``layers[0]``,
    ``transformer.wte`` -> ``transformer.wte``, ``transformer.h.0`` -> ``transformer.h[0]``,
    ``layers.0.lin`` -> ``layers[0].lin`` (a ModuleList of ModuleDicts): the keys of ModuleDicts
    and the indices of ModuleLists; None for any other path."""
    parts = target.split(".")
    found = _written(children, parts, holders_only=True) if len(parts) > 1 else None
    return found[1] if found is not None else None


def _written(children: dict, parts: list, holders_only: bool):
    """(the module the path ``parts`` names, the path as the format writes it: a ModuleList's
    index in brackets, and a Sequential's numbered item, ``features[0]``), or None;
    ``holders_only``: each step goes through a ModuleDict, a ModuleList or (by its number) a
    Sequential (a call of a container's item; a parameter may sit in any descendant)."""
    mod, out = children.get(parts[0]), parts[0]
    for part in parts[1:]:
        child = mod._modules.get(part) if mod is not None else None
        numbered = isinstance(mod, nn.ModuleList) or (isinstance(mod, nn.Sequential) and part.isdigit())
        if child is None or (holders_only and not (numbered or isinstance(mod, nn.ModuleDict))):
            return None
        out = f"{out}[{part}]" if numbered else f"{out}.{part}"
        mod = child
    return (mod, out) if mod is not None else None


def _namespace(target) -> str | None:
    name = getattr(target, "__name__", None)
    if name is None:
        return None
    if getattr(F, name, None) is target:
        return "F."
    if getattr(torch, name, None) is target:
        return "torch."
    if any(target is f for f in PACKING):
        return "nn.utils.rnn."
    return None


def _show_target(node: fx.Node) -> str:
    if node.op == "call_method":
        return f"Tensor.{node.target}"
    target = node.target
    ns = _namespace(target)
    if ns is not None:
        return f"{ns}{target.__name__}"
    module = getattr(target, "__module__", None) or ""
    name = getattr(target, "__qualname__", None) or getattr(target, "__name__", None) or repr(target)
    if module in ("torch._C._nn", "torch._C._VariableFunctions", "torch.nn.functional"):
        module = "F" if module != "torch._C._VariableFunctions" else "torch"
    if module == "_operator":
        module = "operator"
    return f"{module}.{name}" if module else name


#: the factories a file may call whose float result takes PyTorch's default dtype when no dtype= is given
_FLOAT_FACTORIES = {torch.zeros: "zeros", torch.ones: "ones", torch.eye: "eye", torch.full: "full",
                    torch.arange: "arange"}


def _default_float(node: fx.Node, args, kwargs) -> bool:
    """A factory call without ``dtype=`` whose float result took a default dtype other than
    float32 (the user's file ran ``torch.set_default_dtype(torch.float64)``): the file, read with
    PyTorch's own default, would make float32 there, so the dtype is written. ``zeros``, ``ones``
    and ``eye`` always make a float; ``full`` a float for a float fill value, ``arange`` for a
    float argument (ints give int64, a bool fill bool)."""
    if node.target not in _FLOAT_FACTORIES or "dtype" in kwargs or torch.get_default_dtype() is torch.float32:
        return False
    name = _FLOAT_FACTORIES[node.target]
    if name == "full":
        fill = args[1] if len(args) > 1 else kwargs.get("fill_value")
        return isinstance(fill, float)
    if name == "arange":
        return any(isinstance(a, float) for a in list(args) + [kwargs.get(k) for k in ("start", "end", "step")])
    return True


def _defaults(target) -> dict:
    """The Python defaults of a function's keyword parameters (empty when Python cannot tell)."""
    import inspect
    try:
        params = inspect.signature(target).parameters.values()
    except (TypeError, ValueError):
        return {}
    return {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}


def _drops(node: fx.Node) -> bool:
    """``F.dropout(input, p=0.5, training=True, inplace=False)`` that drops at random: training
    (fx saw ``self.training`` as the bool it was) and 0 < p < 1 (p 0 keeps all, p 1 drops all)."""
    given = dict(zip(("input", "p", "training", "inplace"), node.args))
    given.update(node.kwargs)
    p, training = given.get("p", 0.5), given.get("training", True)
    return training is True and isinstance(p, (int, float)) and 0 < p < 1


def _asserts_none(node: fx.Node) -> bool:
    """fx's check that an argument traced as None (concrete_args: one the call leaves out) is None."""
    return node.op == "call_function" and getattr(node.target, "__name__", "") == "_assert_is_none"


def _modelled(node: fx.Node) -> bool:
    """A call the format has (dropping it when unused changes nothing); anything else is
    rendered, and so refused, rather than dropped (``h.register_hook(f)``, ``h.retain_grad()``)."""
    if node.op == "call_method":
        return str(node.target) in METHODS or str(node.target) == "__invert__"
    return node.target in BINARY or node.target in COMPARE or \
        node.target in (operator.neg, operator.invert, operator.getitem) or \
        (_namespace(node.target) is not None and getattr(node.target, "__name__", None) in FUNCTIONS)


def _dead(node: fx.Node) -> bool:
    """A pure node nothing uses (``_`` of ``out, _ = attn(...)``): written nowhere."""
    return not node.users and node.op in ("call_function", "call_method") and not _in_place(node) and \
        node.target is operator.getitem


def _live(node: fx.Node) -> list[fx.Node]:
    return [u for u in node.users if not _dead(u)]


def _in_place(node: fx.Node) -> bool:
    name = str(node.target) if node.op == "call_method" else getattr(node.target, "__name__", "")
    return (name.endswith("_") and not name.startswith("_")) or node.kwargs.get("inplace") is True


def _flat(value):
    if isinstance(value, (tuple, list)):
        for v in value:
            yield from _flat(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _flat(v)
    else:
        yield value


def _refs(value) -> list[fx.Node]:
    return [v for v in _flat(value) if isinstance(v, fx.Node)]


def write_forward(module: nn.Module, path: str, graph: fx.Graph, files: set[str],
                  sites: dict) -> tuple[list, str, tuple]:
    """(inputs, program text, per line (written text, the user's file:line) of each op on it) of
    ``module``'s forward; ``sites`` learns where each child is called."""
    return Writer(module, path, graph, files, sites).write()
