"""Hooks, backward and steps of a problem file -> :class:`Hook`, :class:`Backward`, :class:`Step` records.

A hook is registered on exactly one of: a module (``module:``), every module
(``global: KIND``), a tensor (``tensor:``), a tensor's autograd node (``node:``), several
tensors at once (``multi_grad:``) or, as a context, the saved tensors of the forward
(``saved_tensors: {pack, unpack}``). Options are accepted only where PyTorch's
``register_*`` function takes them: ``prepend`` on module hooks (not the legacy
``backward``), ``with_kwargs`` on ``forward``/``forward_pre`` (global: ``forward`` only),
``always_call`` on ``forward``. Labels default to ``KIND@TARGET`` (v1); a global hook's is
``KIND@global``, a multi_grad hook's ``multi_grad@a,b``, a saved-tensors hook's
``saved_tensors`` (``saved_tensors@enc,dec`` with a scope).
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.format.validate_read import check_read_names, is_read_step, parse_read
from adjoint.format.checks import FAILED, Issues, boolean, choice, mapping, string
from adjoint.format.errors import Loc, ProblemError, raise_all
from adjoint.format.expr import parse_expression, parse_statements
from adjoint.format.literals import parse_int, parse_literal, parse_number
from adjoint.format.loader import YMap, YNode, YScalar, YSeq, kind_name
from adjoint.format.problem import MODULE_HOOK_KINDS, NODE_HOOK_KINDS, TENSOR_HOOK_KINDS, Backward, Hook, Step, TensorDecl
from adjoint.format.raising import parse_raises
from adjoint.format.validate_steps import check_step_order
from adjoint.format.optimizers import parse_optimizer
from adjoint.format.validate_saved import SAVED_KEYS, SAVED_TARGETS, check_not_saved_keys, parse_saved_target

HOOK_KEYS = ("module", "tensor", "node", "global", "multi_grad", "saved_tensors", "kind", "mode", "scope", "returns",
             "does", "remove", "removes", "registers", "label", "when", "prepend", "with_kwargs", "always_call", "raises", "during", "next", "optimizer") + SAVED_KEYS
TARGET_KEYS = ("module", "tensor", "node", "global", "multi_grad", "saved_tensors") + SAVED_TARGETS
BACKWARD_KEYS = ("method", "inputs", "grad_output")
STEP_KINDS = ("forward", "backward", "register", "remove", "zero_grad", "step", "registered", "read", "clip_grad_norm",
              "clip_grad_value")


# ----------------------------------------------------------------------------- hooks

def parse_hooks(node: YNode, what: str, issues: Issues):
    """A hook list; each hook checked on its own. FAILED if any hook (or a cross-check) failed."""
    if not isinstance(node, YSeq):
        raise ProblemError(node.loc, f"{what} must be a list of hooks, not {kind_name(node)}")
    count = len(node.items)
    hooks = [issues.attempt(parse_hook, item, i, what, count) for i, item in enumerate(node.items)]
    if any(h is FAILED for h in hooks):
        return FAILED
    if issues.attempt(check_hook_list, hooks, node) is FAILED:
        return FAILED
    return tuple(hooks)


#: hook kinds PyTorch has (``register_KIND_hook``) that no answer has: refused as such, never as unknown
PYTORCH_ONLY_KINDS = {"module": ("state_dict_pre", "state_dict_post", "load_state_dict_pre", "load_state_dict_post")}


def parse_hook(node: YNode, index: int, what: str, count: int) -> Hook:
    h = mapping(node, f"hook {index} of {what}", (), HOOK_KEYS)
    targets = [k for k in TARGET_KEYS if h.get(k) is not None]
    if len(targets) != 1:
        raise ProblemError(h.loc, f"hook {index} needs exactly one of module:, tensor:, node:, global:, multi_grad:, "
                                  f"saved_tensors:, saved:, disable_saved_tensors_hooks:, save_on_cpu: (it has {', '.join(targets) or 'none'})")
    on = targets[0]
    check_not_saved_keys(h, on)
    if on in SAVED_TARGETS:
        return _saved_hook(h, on, index, count)
    tensors: tuple[str, ...] = ()
    pack = unpack = None
    scope = None
    if on in ("module", "tensor", "node"):
        target = string(h.get(on), f"the {on} of hook {index}").strip()
        kinds = {"module": MODULE_HOOK_KINDS, "tensor": TENSOR_HOOK_KINDS, "node": NODE_HOOK_KINDS}[on]
        if h.get("kind") is None:
            if on != "tensor":
                raise ProblemError(h.loc, f"hook {index} on a {on} needs kind: one of {', '.join(kinds)}")
            kind = "hook"
        else:
            given = h.get("kind")
            if isinstance(given, YScalar) and given.text in PYTORCH_ONLY_KINDS.get(on, ()):
                raise ProblemError(given.loc, f"'{given.text}' is a PyTorch {on} hook kind adjoint does not model yet "
                                              f"(register_{given.text}_hook); kinds: {', '.join(kinds)}")
            kind = choice(given, f"kind of a {on} hook", kinds)
    else:
        if h.get("kind") is not None:
            raise ProblemError(h.key_loc("kind"), f"a {on} hook takes no kind:"
                                                  + (" (global: names it)" if on == "global" else ""))
        target = ""
        if on == "global":
            kind = choice(h.get("global"), f"the global hook kind of hook {index}", MODULE_HOOK_KINDS)
        elif on == "multi_grad":
            kind = "multi_grad"
            tensors = _names(h.get("multi_grad"), f"multi_grad of hook {index}", "tensor names", repeats=True)
            target = ",".join(tensors)
        else:
            kind = "saved_tensors"
            s = mapping(h.get("saved_tensors"), f"saved_tensors of hook {index}", ("pack", "unpack"), ())
            pack = parse_expression(s.get("pack"), f"the pack of hook {index}", allow_none=True)
            unpack = parse_expression(s.get("unpack"), f"the unpack of hook {index}", allow_none=True)
    _only_with(h, "mode", on == "multi_grad", "multi_grad: hooks")
    _only_with(h, "scope", on == "saved_tensors", "saved_tensors: hooks")
    _only_with(h, "during", on == "saved_tensors", "saved_tensors: hooks")
    _only_with(h, "next", on == "node", "node: hooks (a node reached through next_functions)")
    from adjoint.format.validate_during import parse_next
    walk = parse_next(h.get("next"), index) if h.get("next") is not None else ()
    from adjoint.format.validate_during import parse_during
    during = parse_during(h.get("during"), index) if h.get("during") is not None else None
    # any string: an unknown mode is PyTorch's ValueError when the hook is registered (an answer)
    mode = string(h.get("mode"), "mode") if h.get("mode") is not None else "all"
    if h.get("scope") is not None:
        scope = _names(h.get("scope"), f"the scope of hook {index}", "module paths")
        target = ",".join(scope)
    no_code = kind in ("retain_grad", "saved_tensors")
    returns = None
    if h.get("returns") is not None:
        if kind == "retain_grad":
            raise ProblemError(h.key_loc("returns"), "retain_grad returns nothing; drop returns: or use kind: hook")
        if kind == "saved_tensors":
            raise ProblemError(h.key_loc("returns"), "a saved_tensors hook returns what its pack: and unpack: give; "
                                                     "drop returns:")
        if h.get("raises") is not None:
            raise ProblemError(h.key_loc("returns"), "a hook that raises never returns; drop returns: or raises:")
        returns = parse_expression(h.get("returns"), f"the returns of hook {index}", allow_none=True,
                                   hook_body=True)
    does: tuple = ()
    if h.get("does") is not None:
        if no_code:
            raise ProblemError(h.key_loc("does"), "retain_grad runs no code; drop does:" if kind == "retain_grad"
                               else "a saved_tensors hook runs its pack: and unpack: only; drop does:")
        does = parse_statements(h.get("does"), f"the does of hook {index}", hook_body=True)
    remove = None
    if h.get("remove"):
        remove = choice(h.get("remove"), "remove", ("before_backward", "after_backward"))
    if remove is not None or h.get("removes") is not None:
        if kind == "saved_tensors":
            key = "remove" if remove is not None else "removes"
            raise ProblemError(h.key_loc(key), "a saved_tensors hook is a with block around the forward, with no "
                                               f"handle; drop {key}:")
    when = "before_forward"
    if h.get("when") is not None:
        when = choice(h.get("when"), "when", ("before_forward", "after_forward", "before_backward"))
        when = "after_forward" if when == "before_backward" else when  # the same moment, said two ways
    if kind == "retain_grad" and h.get("raises") is not None:
        raise ProblemError(h.key_loc("raises"), "retain_grad runs no code, so it cannot raise; drop raises: or use "
                                                "kind: hook")
    if kind == "retain_grad" and remove is not None:
        raise ProblemError(h.key_loc("remove"), "retain_grad returns no handle in PyTorch, so it cannot be removed")
    removes: tuple[int, ...] = ()
    if h.get("removes") is not None:
        removes = _indices(h.get("removes"), f"removes of hook {index}", count, "the hooks of the same list")
    registers: tuple[int, ...] = ()
    if h.get("registers") is not None:
        if not (on == "tensor" and kind in ("hook", "post_accumulate_grad") or on == "node"):
            raise ProblemError(h.key_loc("registers"), "registers: is taken by tensor hooks (hook, "
                               "post_accumulate_grad) and node hooks, which run in the backward; registering "
                               "from another kind of hook is not modelled yet")
        registers = _indices(h.get("registers"), f"registers of hook {index}", count, "the hooks of the same list")
    prepend = _flag(h, "prepend", on == "module" and kind != "backward",
                    "prepend: is taken by module hooks only (register_*_hook(..., prepend=True)), not by the legacy "
                    "backward hook, global, tensor or node hooks")
    with_kwargs = _flag(h, "with_kwargs", (on == "module" and kind in ("forward", "forward_pre"))
                        or (on == "global" and kind == "forward"),
                        "with_kwargs: is taken by forward and forward_pre module hooks (global hooks: forward only)")
    always_call = _flag(h, "always_call", on in ("module", "global") and kind == "forward",
                        "always_call: is taken by forward hooks only (register_forward_hook(..., always_call=True))")
    raises, raises_type, raises_in = parse_raises(h.get("raises"), index, kind) if h.get("raises") is not None \
        else (None, "RuntimeError", None)
    label = string(h.get("label"), "label") if h.get("label") is not None else default_label(on, kind, target)
    optimizer = None
    if h.get("optimizer") is not None:   # optim = torch.optim.Adam([tensor]) for the body (format/optimizers.py)
        _only_with(h, "optimizer", kind == "post_accumulate_grad", "post_accumulate_grad hooks")
        optimizer = parse_optimizer(h.get("optimizer"), f"hook {index}")
    return Hook(index, on, target, kind, returns, does, remove, when, label, h.loc, prepend=prepend, optimizer=optimizer,
                with_kwargs=with_kwargs, always_call=always_call, tensors=tensors, mode=mode, pack=pack,
                unpack=unpack, scope=scope, raises=raises, removes=removes, raises_type=raises_type,
                raises_in=raises_in, during=during, next=walk, registers=registers)


def _saved_hook(h: YMap, on: str, index: int, count: int) -> Hook:
    """A ``saved:`` or ``disable_saved_tensors_hooks:`` hook (format/validate_saved.py)."""
    f = parse_saved_target(h, on, index)
    _only_with(h, "during", False, "saved_tensors: hooks")
    scope = _names(h.get("scope"), f"the scope of hook {index}", "module paths") if h.get("scope") is not None else None
    when = "before_forward"
    if h.get("when") is not None:
        when = choice(h.get("when"), "when", ("before_forward", "after_forward", "before_backward"))
        when = "after_forward" if when == "before_backward" else when
    raises, raises_type, raises_in = parse_raises(h.get("raises"), index, "saved_tensors") \
        if h.get("raises") is not None else (None, "RuntimeError", None)
    target = f["target"] if scope is None else ",".join(scope)
    label = string(h.get("label"), "label") if h.get("label") is not None else (
        f"{on}@{target}" + (f".{f['slot']}" if on == "saved" else "") if target else on)
    return Hook(index, on, target, f["kind"], None, (), None, when, label, h.loc, pack=f.get("pack"),
                unpack=f.get("unpack"), scope=scope, raises=raises, raises_type=raises_type, raises_in=raises_in,
                slot=f.get("slot"), message=f.get("message"), pin_memory=f.get("pin_memory", False),
                pack_params=f.get("pack_params", ("x",)))


def default_label(on: str, kind: str, target: str) -> str:
    if on == "global":
        return f"{kind}@global"
    if on == "saved_tensors":
        return f"saved_tensors@{target}" if target else "saved_tensors"
    return f"{kind}@{target}"


def _only_with(h: YMap, key: str, ok: bool, where: str) -> None:
    if h.get(key) is not None and not ok:
        raise ProblemError(h.key_loc(key), f"{key}: is only for {where}")


def _flag(h: YMap, key: str, ok: bool, why: str) -> bool:
    node = h.get(key)
    if node is None:
        return False
    value = boolean(node, key)
    if value and not ok:
        raise ProblemError(h.key_loc(key), why)
    return value


def _names(node: YNode, what: str, kind: str, repeats: bool = False) -> tuple[str, ...]:
    """A non-empty list of names, each once (``repeats``: a name may come again, as
    register_multi_grad_hook takes a tensor twice: one inner hook per entry)."""
    if not isinstance(node, YSeq) or not node.items:
        raise ProblemError(node.loc, f"{what} must be a non-empty list of {kind}")
    names: list[str] = []
    for item in node.items:
        n = string(item, f"an entry of {what}").strip()
        if n in names and not repeats:
            raise ProblemError(item.loc, f"'{n}' is listed twice in {what}")
        names.append(n)
    return tuple(names)


def _indices(node: YNode, what: str, count: int, of: str) -> tuple[int, ...]:
    if not isinstance(node, YSeq) or not node.items:
        raise ProblemError(node.loc, f"{what} must be a non-empty list of hook indices")
    out: list[int] = []
    for item in node.items:
        i = parse_int(item, f"an index in {what}", 0)
        if i >= count:
            raise ProblemError(item.loc, f"{what}: there is no hook {i}; {of} are numbered 0 to {count - 1}")
        if i in out:
            raise ProblemError(item.loc, f"hook {i} is listed twice in {what}")
        out.append(i)
    return tuple(out)


def check_hook_list(hooks: list[Hook], node: YSeq) -> None:
    """What only the whole list shows: handles removed that do not exist."""
    errors = []
    for h in hooks:
        for i in h.removes:
            if hooks[i].kind in ("retain_grad", "saved_tensors", "disable_saved_tensors_hooks", "save_on_cpu"):
                errors.append(ProblemError(node.items[h.index].loc, f"hook {h.index} removes hook {i}, a "
                                                                    f"{hooks[i].kind} hook, which has no handle"))
        for i in h.registers:
            if not (hooks[i].on == "tensor" and hooks[i].optimizer is None or hooks[i].on == "node" and not hooks[i].next):
                errors.append(ProblemError(node.items[h.index].loc, f"hook {h.index} registers hook {i}, a "
                                                                    f"{hooks[i].on} hook: registering one from inside "
                                                                    "a hook is not modelled yet (tensor and node "
                                                                    "hooks are)"))
    # a module (or the global registry) given both a legacy and a full backward hook is well formed:
    # PyTorch's RuntimeError when the second is registered is the answer (adjoint.engine.hook_registration)
    raise_all(errors)


# ----------------------------------------------------------------------------- backward and steps

def parse_backward(node: YNode | None, base: Backward | None, in_step: bool = False) -> Backward:
    if node is None:
        return base or Backward("backward", (), None, None)
    # a steps: backward may be second order (loaded when a file has steps); a top-level or a variant's
    # backward may choose its root (contract v3, 8: root: on a top-level backward and on method: grad)
    # and say allow_unused / materialize_grads (contract v3, 3: torch.autograd.grad's own arguments)
    from adjoint.format.second_steps import SECOND_KEYS, parse_second
    b = mapping(node, "backward", (), BACKWARD_KEYS + ("retain_graph",) + SECOND_KEYS)
    method = choice(b.get("method"), "backward method", ("backward", "grad")) if b.get("method") else "backward"
    inputs: tuple[tuple[str, Loc], ...] = ()
    empty = isinstance(b.get("inputs"), YSeq) and not b.get("inputs").items   # inputs=[]: PyTorch's error, an answer
    if b.get("inputs") is not None and not empty:
        inode = b.get("inputs")
        if not isinstance(inode, YSeq) or not inode.items:
            raise ProblemError(inode.loc, "backward.inputs must be a list of tensor names")
        names = []
        for item in inode.items:
            n = string(item, "a backward input")
            names.append((n, item.loc))
        inputs = tuple(names)
    second = parse_second(b, method, inputs)
    if method == "grad" and not inputs and not empty:
        raise ProblemError(b.loc, "method: grad needs inputs: [TENSOR, ...] (torch.autograd.grad(outputs, inputs))")
    grad_output = parse_literal(b.get("grad_output"), "backward.grad_output") if b.get("grad_output") is not None else None
    retain = boolean(b.get("retain_graph"), "retain_graph") if b.get("retain_graph") is not None else False
    if second is not None and second.grad_outputs and grad_output is not None:
        raise ProblemError(b.get("grad_output").loc, "give either grad_output (with the one root) or grad_outputs "
                                                     "(one per entry of roots), not both")
    return Backward(method, inputs, grad_output, b.loc, retain, second, empty_inputs=empty,
                    retain_given=b.get("retain_graph") is not None)


def parse_steps(node: YNode, what: str, base: Backward, input_decl, input_names: tuple[str, ...],
                issues: Issues):
    """``steps:`` -> Steps, each on its own. ``input_decl(name, node, loc)`` reads a replaced
    input; ``input_names`` are the declared ones. FAILED if any step failed."""
    if not isinstance(node, YSeq) or not node.items:
        raise ProblemError(node.loc, f"{what} must be a non-empty list such as [forward, backward]")
    steps = [issues.attempt(parse_step, item, i, what, base, input_decl, input_names)
             for i, item in enumerate(node.items)]
    if any(s is FAILED for s in steps):
        return FAILED
    check_step_order(steps, node.loc, what)
    check_read_names(steps, what)
    return tuple(steps)


def parse_step(node: YNode, i: int, what: str, base: Backward, input_decl, input_names) -> Step:
    where = f"step {i} of {what}"
    if is_read_step(node):   # {read: y.grad_fn._saved_self, as: s}
        return Step("read", node.loc, read=parse_read(node, where))
    if isinstance(node, YScalar) and node.kind == "str":
        kind, body = node.text, None
    elif isinstance(node, YMap) and len(node.entries) == 1:
        kind, body = node.entries[0][0].text, node.entries[0][1]
        if isinstance(body, YScalar) and body.kind == "null":
            body = None
    else:
        raise ProblemError(node.loc, f"{where} must be one of {', '.join(STEP_KINDS)}, or a mapping with one of "
                                     "them as its only key")
    if kind not in STEP_KINDS:
        key_loc = node.loc if isinstance(node, YScalar) else node.entries[0][0].loc
        raise ProblemError(key_loc, f"{where}: '{kind}' is not a step; steps are {', '.join(STEP_KINDS)}")
    loc = node.loc
    if kind == "forward":
        inputs: tuple[TensorDecl, ...] = ()
        if body is not None:
            f = mapping(body, f"the forward of {where}", (), ("inputs", "call"))
            if f.get("inputs") is not None:
                inputs = _step_inputs(f.get("inputs"), where, input_decl, input_names)
            if f.get("call") is not None:   # {forward: {call: PATH}}: PATH(*inputs), not the root
                return Step("forward", loc, inputs=inputs, call=string(f.get("call"), f"the call of {where}"))
        return Step("forward", loc, inputs=inputs)
    if kind == "backward":
        return Step("backward", loc, backward=parse_backward(body, base, in_step=True) if body is not None else base)
    if kind in ("register", "remove"):
        if body is None:
            raise ProblemError(loc, f"{where}: write {{{kind}: [INDEX, ...]}} with the hooks' indices")
        if not isinstance(body, YSeq) or not body.items:
            raise ProblemError(body.loc, f"{where}: {kind} takes a non-empty list of hook indices")
        indices: list[int] = []
        for item in body.items:
            n = parse_int(item, f"a hook index of {where}", 0)
            if n in indices:
                raise ProblemError(item.loc, f"hook {n} is listed twice in {where}")
            indices.append(n)
        return Step(kind, loc, hooks=tuple(indices))
    if kind == "zero_grad":
        if body is None:
            return Step("zero_grad", loc)
        if not isinstance(body, YMap):
            raise ProblemError(body.loc, f"{where}: zero_grad takes nothing (every .grad is set to None), or "
                                         "{set_to_none: false, leaves: [NAME, ...]}")
        z = mapping(body, f"the zero_grad of {where}", (), ("set_to_none", "leaves"))   # {zero_grad: {set_to_none: false}}
        leaves = tuple(_names(z.get("leaves"), f"the leaves of {where}", "leaf names")) \
            if z.get("leaves") is not None else ()
        none = boolean(z.get("set_to_none"), "set_to_none") if z.get("set_to_none") is not None else True
        return Step("zero_grad", loc, set_to_none=none, leaves=leaves)
    if kind == "registered":
        from adjoint.format.validate_step_extras import parse_registered
        return Step("registered", loc, counts=parse_registered(body, loc, where))
    if kind in ("clip_grad_norm", "clip_grad_value"):
        return Step(kind, loc, clip=_parse_clip(kind, body, loc, where))
    if kind == "read":   # a bare `read` (a mapping with read: first is parsed above)
        raise ProblemError(loc, f"{where}: write {{read: y.grad_fn._saved_self, as: NAME}}")
    if body is None:
        raise ProblemError(loc, f"{where}: write {{step: {{lr: 0.1}}}} with the learning rate")
    s = mapping(body, f"the step of {where}", (), ("lr", "optimizer"))
    if s.get("optimizer") is not None:   # {step: {optimizer: {type: Adam}}}: one Adam over model.parameters()
        if s.get("lr") is not None:
            raise ProblemError(s.key_loc("lr"), f"{where}: the optimizer's lr goes inside it: "
                                                "{step: {optimizer: {type: Adam, lr: 0.001}}}")
        return Step("step", loc, optimizer=parse_optimizer(s.get("optimizer"), where))
    if s.get("lr") is None:
        raise ProblemError(s.loc, f"the step of {where} is missing the required key 'lr'")
    lr: Fraction = parse_number(s.get("lr"), f"lr of {where}")
    return Step("step", loc, lr=lr)


def _parse_clip(kind: str, body, loc, where: str) -> tuple:
    """``{clip_grad_norm: {max_norm: 1.0, norm_type: 2, error_if_nonfinite: false, foreach: null}}``
    -> (max_norm, norm_type, error_if_nonfinite, foreach); ``{clip_grad_value: {clip_value: 0.5,
    foreach: null}}`` -> (clip_value, foreach): torch.nn.utils' functions over model.parameters()."""
    need = "max_norm" if kind == "clip_grad_norm" else "clip_value"
    if body is None:
        raise ProblemError(loc, f"{where}: write {{{kind}: {{{need}: 1.0}}}}")
    optional = ("norm_type", "error_if_nonfinite", "foreach") if kind == "clip_grad_norm" else ("foreach",)
    c = mapping(body, f"the {kind} of {where}", (need,), optional)
    first = parse_number(c.get(need), f"{need} of {where}")
    foreach = None
    if c.get("foreach") is not None and not (isinstance(c.get("foreach"), YScalar) and c.get("foreach").kind == "null"):
        foreach = boolean(c.get("foreach"), "foreach")
    if kind == "clip_grad_value":
        return (first, foreach)
    norm_type: object = Fraction(2)
    n = c.get("norm_type")
    if n is not None:
        if isinstance(n, YScalar) and n.text in ("inf", ".inf", "'inf'"):
            norm_type = "inf"
        else:
            norm_type = parse_number(n, f"norm_type of {where}")
            if norm_type not in (1, 2):
                raise ProblemError(n.loc, f"{where}: norm_type {n.text} is not modelled yet (1, 2 and inf are)")
    error = boolean(c.get("error_if_nonfinite"), "error_if_nonfinite") if c.get("error_if_nonfinite") is not None \
        else False
    return (first, norm_type, error, foreach)


def _step_inputs(node: YNode, where: str, input_decl, input_names) -> tuple[TensorDecl, ...]:
    if not isinstance(node, YMap):
        raise ProblemError(node.loc, f"the inputs of {where} must be a mapping NAME: tensor, not {kind_name(node)}")
    out = []
    for key, value in node.entries:
        if key.text not in input_names:
            raise ProblemError(key.loc, f"{where} sets input '{key.text}', which the problem does not declare; a step "
                                        f"can only change declared inputs ({', '.join(input_names)})")
        out.append(input_decl(key.text, value, key.loc))
    return tuple(out)


def check_step_hooks(steps: tuple[Step, ...], hooks: tuple[Hook, ...], what: str, owner: str) -> None:
    """Hook indices of register/remove steps exist in the hook list of ``owner`` (the problem, a variant)."""
    errors = []
    later: dict[int, int] = {}   # hook -> the first step that registers it
    for i, s in enumerate(steps):
        for n in s.hooks if s.kind == "register" else ():
            later.setdefault(n, i)
    for i, s in enumerate(steps):
        for n in s.hooks:
            if s.kind == "remove" and n in later and later[n] > i and n < len(hooks):
                # a register step makes the handle: a script removing it first has no handle yet (a NameError)
                errors.append(ProblemError(s.loc, f"step {i} of {what} removes hook {n} before step {later[n]} "
                                                  "registers it: a hook a register step names is not registered "
                                                  "before that step, so there is no handle to remove yet; move the "
                                                  "remove after the register step"))
            if n >= len(hooks):
                have = f"hooks 0 to {len(hooks) - 1}" if hooks else "no hooks"
                errors.append(ProblemError(s.loc, f"step {i} of {what} names hook {n}, but {owner} has {have}"))
            elif s.kind == "remove" and hooks[n].kind in ("retain_grad", "saved_tensors", "disable_saved_tensors_hooks",
                                                          "save_on_cpu"):
                errors.append(ProblemError(s.loc, f"step {i} of {what} removes hook {n}, a {hooks[n].kind} hook, "
                                                  "which has no handle"))
    from adjoint.format.validate_during import check_during
    errors += check_during(steps, hooks, what)
    raise_all(errors)
