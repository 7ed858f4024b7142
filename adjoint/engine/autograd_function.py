"""A hand-written ``torch.autograd.Function`` (the ``function:`` extension of a custom module).

``apply(*module_inputs, *module_params)`` makes one node named ``<Name>Backward``; the forward
runs the module's program with grad mode off (as inside ``Function.forward``) and saves every
input (``ctx.save_for_backward``, packed after the forward runs); the backward evaluates each
declared formula with the slot names, the forward's local names, ``output`` and ``grad_output``
(exactly what the torch side's Function does), after PyTorch has materialized undefined
incoming gradients into zeros.
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.format.errors import ProblemError
from adjoint.engine.torch_errors import TorchError
from adjoint.engine.graph import Node, SavedVariable, Tensor
from adjoint.engine.interpreter import EnvScope, Interp
from adjoint.engine.ops import Save
from adjoint.engine.inference import check_save
from adjoint.engine.view_history import view_value
from adjoint.values.strides import view_as_strides


def slots_of(mod) -> tuple[str, ...]:
    return tuple(mod.inputs) + tuple(p.name.rsplit(".", 1)[-1] for p in mod.params)


def evaluate_program(rt, mod, env: dict):
    """The module's forward with grad mode off; returns the output Tensor and the local names."""
    scope = _PureScope(mod, {k: v for k, v in env.items()})
    before = rt.grad_enabled
    rt.grad_enabled = False
    rt.quiet += 1
    try:
        out = Interp(rt, scope).run(mod.forward)
    finally:
        rt.grad_enabled = before
        rt.quiet -= 1
    if not (isinstance(out, Tensor) or (isinstance(out, tuple) and any(isinstance(o, Tensor) for o in out)
                                        and all(isinstance(o, Tensor) or _plain(o) for o in out))):
        raise ProblemError(mod.forward[-1].value.loc, f"the forward of '{mod.label}' must return a tensor or a "
                                                      "tuple of tensors")
    return out, scope.local


def apply_function(rt, mod, args: list) -> Tensor:
    # a Python value among the arguments (a bool, a number) is no edge: unpack_input collects the
    # tensors only, and the backward's gradient for it must be None
    tensors = [t for t in args if isinstance(t, Tensor)]
    dirty = mod.function.dirty
    if dirty:   # ctx.mark_dirty (adjoint/engine/dirty.py)
        from adjoint.engine import dirty as dirty_rules
        by_slot = dict(zip(slots_of(mod), args))
        dirty_rules.check_dirty_inputs(mod, by_slot, mod.function.save is not None)
        in_values = [t.value for t in tensors]   # before the forward writes the dirty ones
        dirty_view = any(by_slot[name].is_view for name, _ in dirty)
    rg = [t.requires_grad for t in tensors]
    node = None
    if rt.grad_enabled and any(rg):
        # THPFunction_apply collects the next edges (unpack_input: reading each input's grad_fn,
        # which makes a stale view's new one) before it makes the PyNode and its sequence_nr
        edges = [rt.gradient_edge(t) if r else None for t, r in zip(tensors, rg)]
        node = Node(rt._new_seq(), f"{mod.function.name}Backward", edges, kind="function", params=mod,
                    inputs=tuple(tensors), input_values=tuple(t.value if isinstance(t, Tensor) else t for t in args),
                    module_call=rt.call_stack[-1] if rt.call_stack else None, loc=mod.function.loc)
        rt.nodes.append(node)
    plain = {n: (_same_layout(rt.tensor(t.value, dtype=t.dtype), t) if isinstance(t, Tensor) else t)
             for n, t in zip(slots_of(mod), args)}
    out, local = evaluate_program(rt, mod, plain)
    outs = out if isinstance(out, tuple) else (out,)
    given = {id(t): a for t, a in zip(plain.values(), args) if isinstance(t, Tensor)}
    from adjoint.engine.dirty import check_undeclared_writes
    check_undeclared_writes(mod, plain)
    if dirty:
        before = dirty_rules.write_dirty(rt, mod, by_slot, plain)
    results, rebased = [], set()
    # _wrap_outputs marks a view output IN_CUSTOM_FUNCTION, or MULTI_OUTPUT_NODE when the Function
    # has more than one differentiable output (PyTorch's message for an in-place write then differs)
    n_diff = sum(isinstance(o, Tensor) and o.dtype not in ("int64", "bool") for o in outs) if node is not None else 0
    kind = "multi" if n_diff > 1 else "custom"
    for k, o in enumerate(outs):
        if not isinstance(o, Tensor):   # a non-tensor output is returned as it is; its gradient slot stays None
            results.append(o)
            continue
        rt.B.check_output(o.value, mod.function.loc, f"{mod.function.name}.forward")
        mine = (dirty_rules.dirty_output(rt, mod, node, by_slot, plain, o, k, len(outs), args, before,
                                         (tensors, in_values)) if dirty else None)
        if mine is not None:    # a dirty input returned: that very tensor, rebased onto the node
            rebased.add(id(mine))
            results.append(mine)
            continue
        results.append(_wrap_output(rt, mod, node, k, o, given, kind))
    if dirty:
        dirty_rules.check_returned(mod, plain, outs)
    if not (dirty and node is not None and dirty_view):
        # (a dirty view's Function was recorded before its CopySlices, which wraps it)
        rt.record("function", tensors, [r for r in results if isinstance(r, Tensor)], mod, node, mod.function.loc,
                  in_values if dirty else None)
    if node is not None:
        node.outputs = [(r.shape, r.dtype) if isinstance(r, Tensor) else None for r in results]
        node.output_values = [r.value if isinstance(r, Tensor) else None for r in results]
        saved = [(t, False) for t in tensors]
        if mod.function.save is not None:   # ctx.save_for_backward(*save): an input or output saved is that tensor
            made = {id(o): r for o, r in zip(outs, results)}
            # is_output: var.grad_fn() is the node. A dirty view's is too: _save_variables reads it
            # before anything regenerates it (checked in torch: the version error names the
            # Function, and backward's saved tensor has the Function's node as grad_fn, no view)
            saved = [(given.get(id(v), made.get(id(v), v)),
                      id(v) in made and (made[id(v)].grad_fn is node or id(made[id(v)]) in rebased))
                     for v in save_values(rt, mod, plain, local, out)]
        for i, (t, is_output) in enumerate(saved):
            check_save(t)   # ctx.save_for_backward of an inference tensor
            sv = SavedVariable(f"saved{i}", t, t.version.value, is_output, t.value)
            if rt.saved_hooks:
                sv.hooks = rt.saved_hooks[-1]
                sv.packed = rt.hooks_runner.pack(sv.hooks, t, node, sv.name)
            node.saved.append(sv)
    return tuple(results) if isinstance(out, tuple) else results[0]


def _wrap_output(rt, mod, node: Node | None, k: int, o: Tensor, given: dict, kind: str = "custom") -> Tensor:
    """Output ``k`` of the Function as ``_wrap_outputs`` hands it back. The forward ran on copies
    of the inputs (``given``: copy -> the caller's tensor); an output that is one of them, or a
    view of one, shares the caller's tensor's storage in PyTorch: a view of it (an input returned
    as is: ``view_as`` of it). Every output that is a view, of an input or of the forward's own
    tensor, is marked IN_CUSTOM_FUNCTION: an in-place write to it, or a use after its base was
    written, is PyTorch's error."""
    arg, extra = None, ()
    if id(o) in given:
        arg = given[id(o)]
    elif o.is_view and id(o.base) in given and o.detached_root is None:
        arg, extra = given[id(o.base)], o.view_ops
    if arg is not None and node is None and not rt.grad_enabled and arg.requires_grad and not extra:
        return rt.detach(arg)   # an input returned as is under no_grad: a detached alias
    r = _same_layout(rt.tensor(o.value, node is not None, node, k, dtype=o.dtype), o)
    if arg is None:
        if o.is_view:
            r.creation = (kind, mod.function.name)
        return r
    root = arg.base if arg.base is not None else arg
    chain = arg.view_ops + extra
    r.base, r.version = root, arg.version
    r.detached_root = arg if arg.is_detached else arg.detached_root
    r.view_ops, r.view_version, r.data_version = chain, arg.version.shown, arg.version.value
    B = rt.B
    r.view_of = (lambda base_value: view_value(B, base_value, chain)) if chain else (lambda base_value: base_value)
    r.offset = arg.offset + o.offset
    if not extra:
        r.strides = view_as_strides(o.shape, o.strides)
    r.creation = (kind, mod.function.name)
    if node is None and not rt.grad_enabled and r.grad_base.requires_grad:
        r.requires_grad, r.edgeless = True, True   # a view made under no_grad of a tensor that requires grad
    return r


def save_values(rt, mod, inputs: dict, local: dict, output) -> list:
    """``ctx.save_for_backward(*save)``'s arguments, evaluated after the forward (grad mode off)
    over the inputs, the forward's names and ``output``."""
    scope = _PureScope(mod, dict(inputs))
    scope.local = dict(local)
    scope.local["output"] = output
    before = rt.grad_enabled
    rt.grad_enabled = False
    rt.quiet += 1
    try:
        values = [Interp(rt, scope).eval(e) for e in mod.function.save]
    finally:
        rt.grad_enabled = before
        rt.quiet -= 1
    for e, v in zip(mod.function.save, values):
        if not isinstance(v, Tensor):
            raise ProblemError(e.loc, "save_for_backward saves tensors; this entry of save: is not one")
    return values


def _same_layout(t: Tensor, like: Tensor) -> Tensor:
    """``t`` laid out in memory as ``like`` (Function.forward sees its arguments as they are, and
    what it returns keeps the layout it was computed in: a permuted result stays permuted, so a
    later view decides as in PyTorch)."""
    t.strides = like.strides
    return t


def function_backward(rt, node: Node, grads: list) -> list:
    """The declared backward formulas, evaluated on the (unpacked) saved inputs."""
    mod = node.params
    unpacked = [rt.unpack(node, sv) for sv in node.saved]
    if mod.function.save is not None:
        out = declared_vjp(rt, mod, list(node.input_values), grads if len(grads) > 1 else grads[0], saved=unpacked,
                           node=node)
    else:   # every tensor input was saved; a Python argument is what the forward was given
        kept = iter(unpacked)
        values = [next(kept) if rt.B.is_value(v) else v for v in node.input_values]
        out = declared_vjp(rt, mod, values, grads if len(grads) > 1 else grads[0], dtypes=input_dtypes(node, rt.B))
    return tensor_slots(rt, node, out)


def tensor_slots(rt, node: Node, grads: list) -> list:
    """The backward's gradients for the tensor inputs (the node's edges); one for a Python argument
    must be None (PyTorch's RuntimeError otherwise)."""
    out = []
    for i, (v, g) in enumerate(zip(node.input_values, grads)):
        if rt.B.is_value(v):
            out.append(g)
        elif g is not None:
            raise TorchError("RuntimeError", f"function {node.name} returned a gradient different than None at "
                                             f"position {i + 1}, but the corresponding forward input was not a "
                                             "Variable", "hook_result")
    return out


def _plain(v) -> bool:
    return v is None or isinstance(v, (bool, int, float, Fraction))


def input_dtypes(node: Node | None, B) -> tuple | None:
    """The dtype of each argument of a Function's node (None for a Python value): what its
    forward and backward see (an int64 index stays int64)."""
    if node is None or getattr(node, "inputs", None) is None:
        return None
    tensors = iter(node.inputs)
    return tuple(next(tensors).dtype if B.is_value(v) else None for v in node.input_values)


def declared_vjp(rt, mod, values: list, grad_output, saved: list | None = None, node: Node | None = None,
                 dtypes: tuple | None = None) -> list:
    """``grad_output``: one value, or a list of them for a Function with several outputs (then
    ``grad_output`` and ``output`` are tuples in the formulas). With ``save:`` the formulas see
    ``saved`` (what the node unpacked, or else what the forward on ``values`` saves) and
    ``grad_output`` only, as a Function's backward sees ``ctx.saved_tensors``. ``dtypes``: each
    argument's (:func:`input_dtypes`; default: ``node``'s), so an int64 argument stays int64."""
    dtypes = dtypes if dtypes is not None else input_dtypes(node, rt.B)
    dtypes = dtypes if dtypes is not None else (None,) * len(values)
    env = {n: (rt.tensor(v, dtype=d) if rt.B.is_value(v) else v) for n, v, d in zip(slots_of(mod), values, dtypes)}
    output, local = evaluate_program(rt, mod, dict(env))
    if mod.function.save is not None:
        if saved is not None:
            kinds = [sv.tensor.dtype for sv in node.saved] if node is not None else [None] * len(saved)
            kept = list(zip(saved, kinds))
        else:
            kept = [(t.value, t.dtype) for t in save_values(rt, mod, env, local, output)]
        env = {"saved": tuple(rt.tensor(v, dtype=d) for v, d in kept)}
    else:
        env.update(local)
        env["output"] = output
    env["grad_output"] = (tuple(rt.tensor(g) if g is not None else None for g in grad_output)
                          if isinstance(grad_output, list) else rt.tensor(grad_output))
    if node is not None and mod.function.does:   # the backward's statements (adjoint.engine.function_does)
        from adjoint.engine.function_does import run_does
        run_does(rt, mod, node, env)
    elif mod.function.does:   # J^T outside a backward (the adjoint recursion): the names they bind, on copies
        from adjoint.engine.function_does import replay_does
        replay_does(rt, mod, env)
    out = []
    for slot, formula in mod.function.grads:
        if formula is None:
            out.append(None)
            continue
        scope = EnvScope(env, f"the backward formula for '{slot}' of {mod.function.name}")
        value = Interp(rt, scope).eval(formula)
        if not isinstance(value, Tensor):
            raise ProblemError(formula.loc, f"the backward formula for '{slot}' must give a tensor")
        out.append(value.value)
    return out


class _PureScope:
    assigning = None

    def __init__(self, mod, env: dict):
        self.mod = mod
        self.env = env
        self.local: dict = {}

    def lookup(self, name, loc):
        if name in self.local:
            return self.local[name]
        if name in self.env:
            return self.env[name]
        import difflib
        close = difflib.get_close_matches(name, list(self.env) + list(self.local), n=1, cutoff=0.6)
        raise ProblemError(loc, f"unknown name '{name}' in the forward of '{self.mod.label}'"
                                + (f"; did you mean '{close[0]}'?" if close else ""))

    def bound(self, name):
        for names in (self.local, self.env):
            if name in names:
                return (names[name],)
        return None

    def call(self, name, args, kwargs, loc):
        from adjoint.engine.bindings import FUNCTION_NAMES
        raise ProblemError(loc, f"unknown function '{name}'; a custom Function's forward may only call "
                                f"{', '.join(FUNCTION_NAMES)}")

    def assign(self, name, value, loc):
        self.local[name] = value


__all__ = ["apply_function", "function_backward", "declared_vjp", "evaluate_program", "slots_of", "Save"]
