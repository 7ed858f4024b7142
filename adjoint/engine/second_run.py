"""Running a backward step with second-order options (adjoint.format.second_steps): its roots, the
engine, the names ``as:`` binds.

What PyTorch does, in order, when the user's line runs:

* ``torch.autograd.grad(..., allow_unused=False, materialize_grads=True)`` raises a ValueError
  before anything else;
* the roots are evaluated (each ``root:`` expression is ordinary code: its ops make nodes);
* ``_make_grads``: a root that requires grad and has more than one element needs its
  ``grad_outputs`` entry ("grad can be implicitly created only for scalar outputs");
* the engine refuses a root that does not require grad ("element i of tensors does not
  require grad and does not have a grad_fn");
* the backward runs (adjoint.engine.second_engine); ``as:`` binds the returned gradients, and the
  hooks of the file that target those names are registered on them right then.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from adjoint.format.errors import ProblemError
from adjoint.engine.graph import Tensor
from adjoint.engine.interpreter import EnvScope, Interp
from adjoint.engine.ops.arith import broadcast_shapes
from adjoint.engine.reverse import BackwardRequest
from adjoint.engine.runtime import TorchError
from adjoint.engine.torch_errors import torch_size
from adjoint.engine.hookwrites import has_grad
from adjoint.engine.complex_grad import is_complex
from adjoint.format import syntax as S

if TYPE_CHECKING:   # the create_graph engine (adjoint.engine.second_engine and its eleven formula
    # modules) is imported when a step first runs it: a file without second-order steps never loads it
    from adjoint.engine.second_engine import SecondEngine


class RootInterp(Interp):
    """A ``root:`` expression, code a script runs between two backwards: a parameter by its full
    name (``f.w``); ``x.grad`` reads the leaf's (or retained tensor's) ``.grad`` -- after a
    ``create_graph`` backward the tensor with its graph, so ``sum(x.grad ** 2)`` differentiates
    through it (a gradient penalty); else a tensor of its value with no grad_fn. A non-leaf's
    ``.grad`` is None, and reading it warns."""

    def eval(self, e):
        if not (isinstance(e, S.Attr) and e.name == "grad"):
            return super().eval(e)
        t = self.eval(e.obj)
        if t is None:   # x.grad.grad with x.grad None: Python's AttributeError
            from adjoint.engine.pyerrors import no_attribute
            raise no_attribute(e.name)
        if not isinstance(t, Tensor):
            raise ProblemError(e.loc, f"'{S.to_source(e.obj)}' is not a tensor: it has no .grad")
        if not has_grad(self.rt, t) or t.grad is None:
            return None
        from adjoint.engine.second_engine import grad_tensor
        t.grad_tensor = grad_tensor(self.rt, t)   # the second engine's, with its graph, while .grad is its value
        return t.grad_tensor


class SecondRequest:
    """The roots of one second-order backward, their gradients, and its options."""

    def __init__(self, second, roots, grads, loc):
        self.second = second
        self.roots = roots
        self.grads = grads
        self.loc = loc


def step_names(variant) -> list[str]:
    """The names the variant's steps bind with ``as:``."""
    names: list[str] = []
    for step in variant.steps or ():
        bw = step.backward
        if step.kind == "backward" and bw is not None and bw.second is not None:
            names += [n for n, _ in bw.second.names]
    return names


def with_step_names(names: dict, variant) -> dict:
    """The forward's names and the ones steps will bind (hook targets may name either)."""
    extra = step_names(variant)
    return {**names, **{n: None for n in extra if n not in names}} if extra else names


def second_request(problem, bw, run, backend) -> BackwardRequest:
    s = bw.second
    if not run.forwards:
        raise ProblemError(bw.loc, "a backward step needs a forward step before it")
    if getattr(backend, "is_complex", None) is not None and (s.create_graph or s.roots or s.grad_outputs
                                                             or bw.grad_output is not None):
        # adjoint.values.backends.complex: allow_unused, materialize_grads and as: run
        raise ProblemError(bw.loc, "root:, roots:, grad_outputs: and create_graph in a file with complex tensors "
                                   "are not modelled; write the root as the problem's loss: and differentiate once")
    if s.materialize_grads and s.allow_unused is False:
        raise TorchError("ValueError", "Expected allow_unused to be True or not passed when materialize_grads=True, "
                                       "but got: allow_unused=False.", "arguments")
    fwd = run.forward
    env = {**fwd.names, **run.made}
    if s.roots:
        rt = run.rt
        rt.quiet += 1   # the roots are the user's code between passes, not equations of the forward
        recording, rt.second_record = rt.second_record, []   # but their ops are kept for the derivation
        phase, rt.phase = rt.phase, "backward"   # the backward step's line: what it warns is during backward
        try:
            # names=: a parameter by its full name (f.w), as a hook body names the forward's tensors
            # the script's own variables: what steps bound (as:), the inputs and targets, y and the loss
            # (a module's output or a forward's local, named in a root too, hides no function there)
            own = frozenset([*run.made, *run.model.globals, "y", "loss"])
            roots = [RootInterp(rt, EnvScope(dict(env), "a root", names=env, own=own)).eval(e) for e in s.roots]
        finally:
            rt.quiet -= 1
            rt.phase = phase
            root_ops, rt.second_record = rt.second_record, recording
        for e, r in zip(s.roots, roots):
            if not hasattr(r, "requires_grad") or not hasattr(r, "shape"):
                raise ProblemError(e.loc, "a root must be a tensor expression such as \"sum(gx ** 2)\"")
    else:
        root = fwd.loss if fwd.loss is not None else fwd.output
        roots = [root]
    # no grad_outputs: None per root (_make_grads: ones for a scalar root); a backward's own
    # grad_output goes with its one root (the file may not give both it and roots:)
    given = list(s.grad_outputs) if s.grad_outputs else [bw.grad_output] + [None] * (len(roots) - 1)
    grads = []
    values = [backend.literal(lit) if lit is not None else None for lit in given]
    for i, (r, lit) in enumerate(zip(roots, given)):
        if lit is not None:
            value = values[i]
            if tuple(lit.shape) != tuple(r.shape):
                # _make_grads names the two by Python's tuple.index, which compares tensors with ==
                at = _tuple_index([(g, tuple(g.shape), v) if g is not None else None
                                   for g, v in zip(given, values)], i, backend)
                of = _tuple_index([(t, tuple(t.shape), t.value) for t in roots], i, backend)
                raise TorchError("RuntimeError", f"Mismatch in shape: grad_output[{at}] has a shape of "
                                                 f"{torch_size(lit.shape)} and output[{of}] has a shape of "
                                                 f"{torch_size(r.shape)}.", "arguments")
            grads.append(run.rt.tensor(value) if s.create_graph else value)
        else:
            n = 1
            for d in r.shape:
                n *= d
            if r.requires_grad and n != 1:
                raise TorchError("RuntimeError", "grad can be implicitly created only for scalar outputs", "arguments")
            if r.requires_grad and is_complex(r):   # _make_grads: a real scalar only
                raise TorchError("RuntimeError", "grad can be implicitly created only for real scalar outputs but "
                                                 f"got torch.{r.dtype}", "arguments")
            grads.append(None)
    for i, r in enumerate(roots):
        if not r.has_gradient_edge:
            raise TorchError("RuntimeError", f"element {i} of tensors does not require grad and does not have a "
                                             "grad_fn", "arguments")
    inputs = []
    for name, loc in bw.inputs:
        if name not in env:
            raise ProblemError(loc, f"backward input '{name}' is not a tensor of this problem; tensors: "
                                    f"{', '.join(env)}")
        t = env[name]
        if t is None or not t.requires_grad:
            raise TorchError("RuntimeError", "One of the differentiated Tensors does not require grad"
                             if bw.method == "grad" else "can't retain_grad on Tensor that has requires_grad=False",
                             "arguments")
        inputs.append((name, t, loc))
    req = BackwardRequest(roots[0], None, bw.method, tuple(inputs), bw.retains(s.create_graph))
    req.second = SecondRequest(s, tuple(roots), grads, bw.loc)
    req.second.root_ops = root_ops if s.roots else []
    return req


def _tuple_index(items: list, i: int, B) -> int:
    """Python's ``items.index(items[i])`` over tensors (``(object, shape, value)``, None for a
    None): the same object, else ``items[j] == items[i]`` taken as a bool, an elementwise comparison
    that raises unless the two broadcast to exactly one element (then its value decides)."""
    obj, shape, value = items[i]
    for j, item in enumerate(items[:i]):
        if item is None:   # None == tensor is False
            continue
        if item[0] is obj:
            return j
        n = 1
        for d in broadcast_shapes(item[1], shape, None):
            n *= d
        if n != 1:
            raise TorchError("RuntimeError", "Boolean value of Tensor with "
                                             f"{'no values' if n == 0 else 'more than one value'} is ambiguous", "arguments")
        if B.equals(B.reshape(item[2], ()), B.reshape(value, ())):
            return j
    return i


def second_engine(run, request: BackwardRequest) -> SecondEngine:
    from adjoint.engine.second_engine import SecondEngine
    sr = request.second
    return SecondEngine(run.rt, run.rt.hooks_runner.fire_values, sr.second, sr.loc, sr.grads, sr.roots)


def bind_names(run, request: BackwardRequest, engine: SecondEngine) -> None:
    """``as:``: the returned gradients get their names (a tensor with its grad_fn under
    create_graph; a plain tensor otherwise; None for an unused input); hooks targeting them are
    registered now."""
    s = request.second.second
    if not s.names:
        return
    made = run.made
    for (name, _), value, t in zip(s.names, engine.result.captured, engine.tensors or [None] * len(s.names)):
        if value is None:
            made[name] = None
            continue
        tensor = t if isinstance(t, Tensor) else run.rt.tensor(value)
        tensor.name = tensor.name or name
        made[name] = tensor
        try:   # the script registers them after the call returned: PyTorch refusing one is during: register
            run.reg.bound(name, tensor)
        except TorchError as exc:
            exc.during = "register"
            raise

