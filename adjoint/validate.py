"""Problem file -> validated records (contract: v1 and v2; the user-facing reference is docs/format.md).

``build_problem`` turns the located YAML tree into the records of :mod:`adjoint.problem`;
every structural mistake is a ProblemError at the offending node. Names and shapes are
checked when the model runs (:mod:`adjoint.forward`), which needs the module tree built here.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import replace
from fractions import Fraction

from .errors import Loc, ProblemError
from .expr import Assign, Expr, Program, parse_expression, parse_program, parse_statements
from .loader import YMap, YNode, YScalar, YSeq, kind_name
from .problem import (BUILTIN_TYPES, ELEMENTWISE_TYPES, MAX_ELEMENTS, MODULE_HOOK_KINDS, NODE_HOOK_KINDS, OUTPUT,
                      ROOT, TENSOR_HOOK_KINDS, Backward, Element, Function, Hook, Literal, Module, Problem, Sym,
                      TensorDecl, Variant)

_NAME_RE = re.compile(r"^[a-z0-9_-]+$")
_IDENT_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SEQ_CHILD_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*|[0-9]+)$")


# ----------------------------------------------------------------------------- helpers

def _suggest(word: str, options) -> str:
    close = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""


def _mapping(node: YNode, what: str, required: tuple[str, ...], optional: tuple[str, ...]) -> YMap:
    if not isinstance(node, YMap):
        raise ProblemError(node.loc, f"{what} must be a mapping, not {kind_name(node)}")
    allowed = required + optional
    for key, _ in node.entries:
        if key.text not in allowed:
            raise ProblemError(key.loc, f"unknown key '{key.text}' in {what}{_suggest(key.text, allowed)}"
                                        f" (allowed: {', '.join(allowed)})")
    for key in required:
        if node.get(key) is None:
            hint = _REQUIRED_HINTS.get(key, "")
            raise ProblemError(node.loc, f"{what} is missing the required key '{key}'{hint}")
    return node


_REQUIRED_HINTS = {
    "name": "; add name: my-problem (lower case, digits, _ and -)",
    "inputs": "; add inputs: {x: {value: [0.3], requires_grad: true}}",
    "model": "; add model: {type: Linear, params: {weight: [[...]], bias: [...]}} or a custom forward",
    "value": "; write {value: [...]} with the tensor literal",
    "backward": "; write backward: {SLOT: \"gradient expression\"}",
}


def _string(node: YNode, what: str) -> str:
    if not isinstance(node, YScalar) or node.kind != "str":
        raise ProblemError(node.loc, f"{what} must be a string, not {kind_name(node)}")
    return node.text


def _bool(node: YNode, what: str) -> bool:
    if not isinstance(node, YScalar) or node.kind != "bool":
        raise ProblemError(node.loc, f"{what} must be true or false, not {kind_name(node)}")
    return node.text.lower() in ("true", "yes", "on", "y")


def _choice(node: YNode, what: str, options: tuple[str, ...]) -> str:
    if not isinstance(node, YScalar) or node.kind not in ("str",):
        raise ProblemError(node.loc, f"{what} must be one of {', '.join(options)}, not {kind_name(node)}")
    if node.text not in options:
        raise ProblemError(node.loc, f"{what} '{node.text}' is not one of {', '.join(options)}"
                                     f"{_suggest(node.text, options)}")
    return node.text


def parse_number(node: YNode, what: str) -> Fraction:
    if isinstance(node, YScalar) and node.kind in ("int", "float", "str"):
        value = _exact(node.text)
        if value is not None:
            return value
        if node.kind == "float":
            raise ProblemError(node.loc, f"{what} '{node.text}' is not a finite number; infinities and NaN "
                                         "cannot be written exactly")
    raise ProblemError(node.loc, f"{what} must be a number such as 0.3 or \"1/4\", not {_show(node)}")


def _show(node: YNode) -> str:
    if isinstance(node, YScalar):
        return f"'{node.text}'" if node.kind == "str" else kind_name(node)
    return kind_name(node)


def _exact(text: str) -> Fraction | None:
    t = text.strip().replace("_", "")
    if not t or t.lower().lstrip("+-") in ("inf", "nan", ".inf", ".nan", "infinity"):
        return None
    try:
        return Fraction(t)
    except (ValueError, ZeroDivisionError):
        pass
    try:
        return Fraction(int(t, 0))
    except ValueError:
        return None


# ----------------------------------------------------------------------------- literals

def parse_literal(node: YNode, what: str) -> Literal:
    """A tensor literal: number, nested list, free symbol, or ``{value: L, scale: S}``."""
    if isinstance(node, YMap):
        _mapping(node, what, ("value",), ("scale",))
        inner = parse_literal(node.get("value"), what)
        scale_node = node.get("scale")
        if scale_node is None:
            return replace(inner, loc=node.loc)
        scale = parse_number(scale_node, f"the scale of {what}")
        items = tuple(e * scale if isinstance(e, Fraction) else Sym(e.name, e.coeff * scale) for e in inner.items)
        return Literal(inner.shape, items, node.loc)
    items: list[Element] = []
    shape = _literal_shape(node, what, items, 0)
    return Literal(shape, tuple(items), node.loc)


def _literal_shape(node: YNode, what: str, out: list[Element], depth: int) -> tuple[int, ...]:
    if isinstance(node, YSeq):
        if not node.items:
            raise ProblemError(node.loc, f"{what} has an empty list; tensors here have at least one element per dimension")
        shapes = []
        for item in node.items:
            s = _literal_shape(item, what, out, depth + 1)
            if shapes and s != shapes[0]:
                raise ProblemError(item.loc, f"{what} is ragged: this entry has shape {list(s)} but the first "
                                             f"has shape {list(shapes[0])}; every row needs the same length")
            shapes.append(s)
            if len(out) > MAX_ELEMENTS:
                raise ProblemError(node.loc, f"{what} has more than {MAX_ELEMENTS} elements; problem files "
                                             "describe small models")
        return (len(node.items),) + shapes[0]
    if isinstance(node, YMap):
        raise ProblemError(node.loc, f"{what}: a mapping cannot be a tensor element; use numbers or nested lists")
    assert isinstance(node, YScalar)
    if node.kind in ("int", "float") or (node.kind == "str" and _exact(node.text) is not None):
        value = _exact(node.text)
        if value is None:
            raise ProblemError(node.loc, f"{what}: '{node.text}' is not a finite number; tensors here hold finite "
                                         "numbers, fractions like \"1/4\" or symbol names")
        out.append(value)
        return ()
    if node.kind == "str" and _IDENT_RE.match(node.text.strip()):
        out.append(Sym(node.text.strip()))
        return ()
    raise ProblemError(node.loc, f"{what}: {_show(node)} is not a number, a fraction like \"1/4\" or a symbol name")


# ----------------------------------------------------------------------------- tensors

def _input_decl(name: str, node: YNode, loc: Loc) -> TensorDecl:
    return _decl(name, node, loc, f"input '{name}'", default_rg=False)


def _decl(name: str, node: YNode, loc: Loc, what: str, default_rg: bool) -> TensorDecl:
    """``LITERAL`` or ``{value: LITERAL, scale: S, requires_grad: BOOL}``."""
    if isinstance(node, YMap):
        _mapping(node, what, ("value",), ("requires_grad", "scale"))
        rg_node = node.get("requires_grad")
        rg = _bool(rg_node, f"requires_grad of {what}") if rg_node is not None else default_rg
        lit_map = YMap(node.loc, tuple((k, v) for k, v in node.entries if k.text != "requires_grad"))
        return TensorDecl(name, parse_literal(lit_map, what), rg, loc)
    return TensorDecl(name, parse_literal(node, what), default_rg, loc)


def _param_decl(full: str, node: YNode, loc: Loc) -> TensorDecl:
    return _decl(full, node, loc, f"parameter '{full}'", default_rg=True)


def _tensor_table(node: YNode, what: str, make) -> tuple[TensorDecl, ...]:
    if not isinstance(node, YMap):
        raise ProblemError(node.loc, f"{what} must be a mapping NAME: tensor, not {kind_name(node)}")
    out = []
    for key, value in node.entries:
        if not _IDENT_RE.match(key.text):
            raise ProblemError(key.loc, f"'{key.text}' is not a valid tensor name; use letters, digits and _")
        out.append(make(key.text, value, key.loc))
    return tuple(out)


# ----------------------------------------------------------------------------- modules

_MODULE_KEYS = ("type", "params", "children", "inputs", "forward", "function", "bias")


def _module(node: YNode, path: str, name: str) -> Module:
    what = f"module '{path or ROOT}'"
    m = _mapping(node, what, (), _MODULE_KEYS)
    mtype = None
    if m.get("type") is not None:
        mtype = _string(m.get("type"), f"the type of {what}")
        if mtype not in BUILTIN_TYPES:
            raise ProblemError(m.get("type").loc, f"unknown module type '{mtype}'{_suggest(mtype, BUILTIN_TYPES)} "
                                                  f"(built-in types: {', '.join(BUILTIN_TYPES)}; "
                                                  "leave type out for a custom module with a forward)")
    prefix = f"{path}." if path else ""

    def allowed_only(*keys: str) -> None:
        for key, _ in m.entries:
            if key.text not in ("type",) + keys:
                raise ProblemError(key.loc, f"a {mtype} module takes no '{key.text}'"
                                            + (f"; it takes: {', '.join(keys)}" if keys else ""))

    params: tuple[TensorDecl, ...] = ()
    children: tuple[Module, ...] = ()
    inputs: tuple[str, ...] = ("x",)
    forward = None
    function = None
    if m.get("inputs") is not None:
        inputs = _input_names(m.get("inputs"), what)
    if mtype == "Linear":
        allowed_only("params", "bias", "inputs")
        params = _linear_params(m, path, what)
    elif mtype in ELEMENTWISE_TYPES:
        allowed_only("inputs")
    elif mtype == "Sequential":
        allowed_only("children", "inputs")
        if m.get("children") is None:
            raise ProblemError(m.loc, f"{what} is a Sequential without children; give children: {{NAME: MODULE, ...}}")
        children = _children(m.get("children"), path, what, sequential=True)
    else:
        if m.get("bias") is not None:
            raise ProblemError(m.key_loc("bias"), f"'bias' is a Linear option; {what} is a custom module")
        if m.get("forward") is None:
            raise ProblemError(m.loc, f"{what} has neither a type nor a forward; give type: Linear (or another "
                                      "built-in) or forward: \"expression\"")
        if m.get("params") is not None:
            params = _tensor_table(m.get("params"), f"the params of {what}",
                                   lambda n, v, loc: _param_decl(prefix + n, v, loc))
        if m.get("children") is not None:
            children = _children(m.get("children"), path, what, sequential=False)
        forward = parse_program(m.get("forward"), f"the forward of {what}")
        if m.get("function") is not None:
            if children:
                raise ProblemError(m.key_loc("function"), f"{what} declares a custom Function and has children; "
                                                          "a Function's forward cannot call modules")
            function = _function(m.get("function"), path, inputs, params, what)
    if mtype is not None and mtype != "Sequential" and len(inputs) != 1:
        raise ProblemError(m.get("inputs").loc, f"a {mtype} module takes exactly one input")
    _check_unique_names(m, what, inputs, params, children)
    return Module(path, name or ROOT, mtype, params, children, inputs, forward, function, m.loc)


def _input_names(node: YNode, what: str) -> tuple[str, ...]:
    if isinstance(node, YScalar) and node.kind == "str":
        items = [node]
    elif isinstance(node, YSeq):
        items = list(node.items)
    else:
        raise ProblemError(node.loc, f"the inputs of {what} must be a list of argument names, e.g. [x, u]")
    names = []
    for item in items:
        n = _string(item, f"an input name of {what}")
        if not _IDENT_RE.match(n):
            raise ProblemError(item.loc, f"'{n}' is not a valid argument name")
        if n in names:
            raise ProblemError(item.loc, f"argument '{n}' is listed twice in the inputs of {what}")
        names.append(n)
    if not names:
        raise ProblemError(node.loc, f"{what} needs at least one input")
    return tuple(names)


def _linear_params(m: YMap, path: str, what: str) -> tuple[TensorDecl, ...]:
    prefix = f"{path}." if path else ""
    pnode = m.get("params")
    if pnode is None:
        raise ProblemError(m.loc, f"{what} is a Linear without params; give params: {{weight: [[...]], bias: [...]}}")
    _mapping(pnode, f"the params of {what}", ("weight",), ("bias",))
    weight = _param_decl(prefix + "weight", pnode.get("weight"), pnode.key_loc("weight"))
    if len(weight.value.shape) != 2:
        raise ProblemError(weight.value.loc, f"Linear weight must be 2-D (out_features, in_features), "
                                             f"got shape {list(weight.value.shape)}")
    bias_node = pnode.get("bias")
    if bias_node is None:
        bias_node = m.get("bias")
    if bias_node is None:
        raise ProblemError(pnode.loc, f"{what}: give bias: [...] (shape [{weight.value.shape[0]}]) or bias: false")
    if isinstance(bias_node, YScalar) and bias_node.kind == "bool":
        if _bool(bias_node, "bias"):
            raise ProblemError(bias_node.loc, "bias: true needs values; give bias: [...] or bias: false")
        return (weight,)
    bias = _param_decl(prefix + "bias", bias_node, pnode.key_loc("bias") if pnode.get("bias") else m.key_loc("bias"))
    if bias.value.shape != (weight.value.shape[0],):
        raise ProblemError(bias.value.loc, f"Linear bias must have shape [{weight.value.shape[0]}] "
                                           f"(out_features of weight {list(weight.value.shape)}), "
                                           f"got {list(bias.value.shape)}")
    return (weight, bias)


def _children(node: YNode, path: str, what: str, sequential: bool) -> tuple[Module, ...]:
    if not isinstance(node, YMap):
        raise ProblemError(node.loc, f"the children of {what} must be a mapping NAME: MODULE, not {kind_name(node)}")
    if not node.entries:
        raise ProblemError(node.loc, f"the children of {what} are empty")
    out = []
    for key, value in node.entries:
        pattern = _SEQ_CHILD_RE if sequential else _IDENT_RE
        if not pattern.match(key.text):
            raise ProblemError(key.loc, f"'{key.text}' is not a valid module name; use letters, digits and _")
        if key.text == ROOT and not path:
            raise ProblemError(key.loc, f"'{ROOT}' names the root module; pick another child name")
        out.append(_module(value, f"{path}.{key.text}" if path else key.text, key.text))
    return tuple(out)


def _function(node: YNode, path: str, inputs: tuple[str, ...], params: tuple[TensorDecl, ...], what: str) -> Function:
    f = _mapping(node, f"the function of {what}", ("backward",), ("name",))
    default = "".join(part[:1].upper() + part[1:] for part in re.split(r"[._]", path or ROOT) if part) + "Function"
    name = _string(f.get("name"), "function name") if f.get("name") is not None else default
    if not _IDENT_RE.match(name):
        raise ProblemError(f.get("name").loc, f"'{name}' is not a valid class name")
    bw = f.get("backward")
    if not isinstance(bw, YMap):
        raise ProblemError(bw.loc, "function.backward must be a mapping ARG: \"gradient expression\"")
    slots = list(inputs) + [p.name.rsplit(".", 1)[-1] for p in params]
    for key, _ in bw.entries:
        if key.text not in slots:
            raise ProblemError(key.loc, f"'{key.text}' is not an input or parameter of {what}"
                                        f"{_suggest(key.text, slots)} (slots: {', '.join(slots)})")
    grads = tuple((s, parse_expression(bw.get(s), f"the backward formula for {s}") if bw.get(s) is not None else None)
                  for s in slots)
    return Function(name, grads, f.loc)


def _check_unique_names(m: YMap, what: str, inputs, params, children) -> None:
    seen: dict[str, str] = {}
    for kind, names in (("input", inputs), ("parameter", [p.name.rsplit(".", 1)[-1] for p in params]),
                        ("child module", [c.name for c in children])):
        for n in names:
            if n in seen:
                raise ProblemError(m.loc, f"'{n}' in {what} is both a {seen[n]} and a {kind}; names must be unique")
            seen[n] = kind


# ----------------------------------------------------------------------------- hooks

_HOOK_KEYS = ("module", "tensor", "node", "kind", "returns", "does", "remove", "label", "when")


def _hooks(node: YNode, what: str) -> tuple[Hook, ...]:
    if not isinstance(node, YSeq):
        raise ProblemError(node.loc, f"{what} must be a list of hooks, not {kind_name(node)}")
    return tuple(_hook(item, i, what) for i, item in enumerate(node.items))


def _hook(node: YNode, index: int, what: str) -> Hook:
    h = _mapping(node, f"hook {index} of {what}", (), _HOOK_KEYS)
    targets = [k for k in ("module", "tensor", "node") if h.get(k) is not None]
    if len(targets) != 1:
        raise ProblemError(h.loc, f"hook {index} needs exactly one of module:, tensor:, node: "
                                  f"(it has {', '.join(targets) or 'none'})")
    on = targets[0]
    target = _string(h.get(on), f"the {on} of hook {index}").strip()
    kinds = {"module": MODULE_HOOK_KINDS, "tensor": TENSOR_HOOK_KINDS, "node": NODE_HOOK_KINDS}[on]
    if h.get("kind") is None:
        if on != "tensor":
            raise ProblemError(h.loc, f"hook {index} on a {on} needs kind: one of {', '.join(kinds)}")
        kind = "hook"
    else:
        kind = _choice(h.get("kind"), f"kind of a {on} hook", kinds)
    returns = None
    if h.get("returns") is not None:
        if kind == "retain_grad":
            raise ProblemError(h.key_loc("returns"), "retain_grad returns nothing; drop returns: or use kind: hook")
        returns = parse_expression(h.get("returns"), f"the returns of hook {index}", allow_none=True)
    does: tuple[Assign, ...] = ()
    if h.get("does") is not None:
        if kind == "retain_grad":
            raise ProblemError(h.key_loc("does"), "retain_grad runs no code; drop does:")
        does = parse_statements(h.get("does"), f"the does of hook {index}")
    remove = _choice(h.get("remove"), "remove", ("before_backward", "after_backward")) if h.get("remove") else None
    when = "before_forward"
    if h.get("when") is not None:
        when = _choice(h.get("when"), "when", ("before_forward", "after_forward", "before_backward"))
        when = "after_forward" if when == "before_backward" else when  # the same moment, said two ways
    if kind == "retain_grad" and remove is not None:
        raise ProblemError(h.key_loc("remove"), "retain_grad returns no handle in PyTorch, so it cannot be removed")
    label = _string(h.get("label"), "label") if h.get("label") is not None else f"{kind}@{target}"
    return Hook(index, on, target, kind, returns, does, remove, when, label, h.loc)


# ----------------------------------------------------------------------------- backward

def _backward(node: YNode | None, base: Backward | None) -> Backward:
    if node is None:
        return base or Backward("backward", (), None, None)
    b = _mapping(node, "backward", (), ("method", "inputs", "grad_output"))
    method = _choice(b.get("method"), "backward method", ("backward", "grad")) if b.get("method") else "backward"
    inputs: tuple[tuple[str, Loc], ...] = ()
    if b.get("inputs") is not None:
        inode = b.get("inputs")
        if not isinstance(inode, YSeq) or not inode.items:
            raise ProblemError(inode.loc, "backward.inputs must be a non-empty list of tensor names")
        names = []
        for item in inode.items:
            n = _string(item, "a backward input")
            if n in [x for x, _ in names]:
                raise ProblemError(item.loc, f"'{n}' is listed twice in backward.inputs")
            names.append((n, item.loc))
        inputs = tuple(names)
    if method == "grad" and not inputs:
        raise ProblemError(b.loc, "method: grad needs inputs: [TENSOR, ...] (torch.autograd.grad(outputs, inputs))")
    grad_output = parse_literal(b.get("grad_output"), "backward.grad_output") if b.get("grad_output") is not None else None
    return Backward(method, inputs, grad_output, b.loc)


# ----------------------------------------------------------------------------- top level

_TOP_KEYS = ("name", "inputs", "model", "description", "targets", "loss", "hooks", "variants", "backward",
             "symbols", "dtype")


def build_problem(tree: YNode, path: str) -> Problem:
    top = _mapping(tree, "the problem file", ("name", "inputs", "model"), _TOP_KEYS[3:])
    name = _string(top.get("name"), "name")
    if not _NAME_RE.match(name):
        raise ProblemError(top.get("name").loc, f"name '{name}' must match [a-z0-9_-]+ (lower case, digits, _ and -)")
    description = _string(top.get("description"), "description") if top.get("description") is not None else ""
    inputs = _tensor_table(top.get("inputs"), "inputs", _input_decl)
    if not inputs:
        raise ProblemError(top.get("inputs").loc, "inputs is empty; the model needs at least one input tensor")
    model = _module(top.get("model"), "", ROOT)
    targets: tuple[TensorDecl, ...] = ()
    if top.get("targets") is not None:
        targets = _tensor_table(top.get("targets"), "targets",
                                lambda n, v, loc: TensorDecl(n, parse_literal(v, f"target '{n}'"), False, loc))
    loss = parse_expression(top.get("loss"), "the loss") if top.get("loss") is not None else None
    hooks = _hooks(top.get("hooks"), "hooks") if top.get("hooks") is not None else ()
    backward = _backward(top.get("backward"), None)
    symbols: dict[str, Fraction] = {}
    if top.get("symbols") is not None:
        snode = top.get("symbols")
        if not isinstance(snode, YMap):
            raise ProblemError(snode.loc, "symbols must be a mapping NAME: number")
        for key, value in snode.entries:
            if not _IDENT_RE.match(key.text):
                raise ProblemError(key.loc, f"'{key.text}' is not a valid symbol name")
            symbols[key.text] = parse_number(value, f"symbol '{key.text}'")
    dtype = _choice(top.get("dtype"), "dtype", ("float32", "float64")) if top.get("dtype") is not None else "float32"
    _check_name_clashes(inputs, targets, model, top.get("loss") is not None)

    variants: list[Variant] = []
    vnode = top.get("variants")
    if vnode is None:
        variants.append(Variant("default", inputs, hooks, backward, None))
    else:
        if not isinstance(vnode, YMap) or not vnode.entries:
            raise ProblemError(vnode.loc, "variants must be a non-empty mapping NAME: {hooks, inputs, backward}")
        for key, value in vnode.entries:
            if not _NAME_RE.match(key.text):
                raise ProblemError(key.loc, f"variant name '{key.text}' must match [a-z0-9_-]+")
            variants.append(_variant(key, value, inputs, hooks, backward))
    return Problem(name, description, path, model, targets, loss, tuple(variants), symbols, dtype, top.loc)


def _variant(key: YScalar, node: YNode, inputs, hooks, backward) -> Variant:
    what = f"variant '{key.text}'"
    if isinstance(node, YScalar) and node.kind == "null":
        return Variant(key.text, inputs, hooks, backward, key.loc)
    v = _mapping(node, what, (), ("hooks", "inputs", "backward", "description"))
    vin = list(inputs)
    if v.get("inputs") is not None:
        for decl in _tensor_table(v.get("inputs"), f"the inputs of {what}", _input_decl):
            for i, base in enumerate(vin):
                if base.name == decl.name:
                    vin[i] = decl
                    break
            else:
                raise ProblemError(decl.loc, f"{what} sets input '{decl.name}', which the problem does not declare"
                                             f"{_suggest(decl.name, [d.name for d in inputs])}; a variant can only "
                                             f"change declared inputs ({', '.join(d.name for d in inputs)})")
    vhooks = _hooks(v.get("hooks"), f"the hooks of {what}") if v.get("hooks") is not None else hooks
    vback = _backward(v.get("backward"), backward) if v.get("backward") is not None else backward
    return Variant(key.text, tuple(vin), vhooks, vback, key.loc)


def _check_name_clashes(inputs, targets, model: Module, has_loss: bool) -> None:
    seen: dict[str, str] = {}

    def claim(name: str, what: str, loc: Loc) -> None:
        if name in seen:
            raise ProblemError(loc, f"'{name}' names both {seen[name]} and {what}; two things with one name are an error")
        seen[name] = what

    reserved = (ROOT, "loss") + ((OUTPUT,) if has_loss else ())
    for kind, decls in (("input", inputs), ("target", targets)):
        for d in decls:
            if d.name in reserved:
                raise ProblemError(d.loc, f"'{d.name}' is reserved ({ROOT}: the root module's output, loss: the loss"
                                          + (f", {OUTPUT}: the model output the loss refers to" if has_loss else "")
                                          + f"); rename the {kind}")
            claim(d.name, f"{kind} '{d.name}'", d.loc)
    for m in model.walk():
        for p in m.params:
            claim(p.name, f"parameter '{p.name}'", p.loc)
        if m.path:
            claim(m.path, f"module '{m.path}'", m.loc)
