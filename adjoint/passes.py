"""Running one variant: register its hooks, run the forward, run the backward.

This is the driver of the runtime: it builds the :class:`~adjoint.runtime.Runtime`, the
model's leaves and hook dicts (:class:`~adjoint.forward.Model`), registers the declared hooks
at the moments the contract gives (before the forward, ``when: after_forward`` after it,
``remove: before_backward`` just before the backward), then asks the engine
(:mod:`adjoint.reverse`) for the backward, and returns everything that happened as a
:class:`VariantRun`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .calls import HookRunner
from .errors import ProblemError
from .forward import ForwardResult, Model
from .problem import OUTPUT, Problem, Variant
from .registration import Registrations
from .reverse import BackwardRequest, BackwardResult, Engine
from .runtime import Runtime


@dataclass
class VariantRun:
    problem: Problem
    variant: Variant
    rt: Runtime
    model: Model
    forward: ForwardResult
    backward: BackwardResult
    request: BackwardRequest
    retained: list = field(default_factory=list)    # (Tensor, [names]) with retain_grad, in registration order


def run_variant(problem: Problem, variant: Variant, backend) -> VariantRun:
    rt = Runtime(backend, problem.dtype)
    reg = Registrations(variant.hooks, rt)
    model = Model(problem, variant.inputs, rt, reg)
    reg.model = model
    runner = HookRunner(rt, reg)
    rt.hooks_runner = runner
    for hook in variant.hooks:
        if hook.when == "before_forward":
            reg.register(hook.index)
    fwd = model.forward()
    for hook in variant.hooks:
        if hook.when == "after_forward":
            reg.register(hook.index)
    reg.check_targets(fwd.names)
    request = backward_request(problem, variant, fwd, backend)
    for hook in variant.hooks:
        if hook.remove == "before_backward":
            reg.remove(hook.index)
    engine = Engine(rt, runner.fire_values)
    result = engine.run(request)
    for hook in variant.hooks:
        if hook.remove == "after_backward":
            reg.remove(hook.index)
    retained = dict(reg.retained)
    if request.method == "backward":  # run_backward retains the grad of non-leaf inputs
        for name, t, _ in request.inputs:
            if not t.is_leaf:
                retained.setdefault(t.id, (t, []))[1].append(name)
    return VariantRun(problem, variant, rt, model, fwd, result, request, list(retained.values()))


def backward_request(problem: Problem, variant: Variant, fwd: ForwardResult, backend) -> BackwardRequest:
    bw = variant.backward
    root = fwd.loss if fwd.loss is not None else fwd.output
    where = problem.loss.loc if problem.loss is not None else problem.model.loc
    if not root.requires_grad:
        raise ProblemError(where, "nothing the backward starts from requires grad: PyTorch raises 'element 0 of "
                                  "tensors does not require grad and does not have a grad_fn'")
    grad_output = None
    if bw.grad_output is not None:
        if bw.grad_output.shape != root.shape:
            raise ProblemError(bw.grad_output.loc, f"backward.grad_output has shape {list(bw.grad_output.shape)} "
                                                   f"but the tensor backward starts from has shape {list(root.shape)}; "
                                                   f"give a literal of shape {list(root.shape)}")
        grad_output = backend.literal(bw.grad_output)
    elif _numel(root.shape) != 1:
        raise ProblemError(where, f"backward starts from a tensor of shape {list(root.shape)}: PyTorch raises 'grad "
                                  "can be implicitly created only for scalar outputs'; add a loss or give "
                                  "backward.grad_output")
    inputs = []
    for name, loc in bw.inputs:
        if name not in fwd.names:
            raise ProblemError(loc, f"backward input '{name}' is not a tensor of this problem"
                                    f"{_suggest(name, fwd.names)}; tensors: {', '.join(fwd.names)}")
        t = fwd.names[name]
        if not t.requires_grad:
            raise ProblemError(loc, f"backward input '{name}' does not require grad: PyTorch raises 'One of the "
                                    "differentiated Tensors does not require grad'")
        inputs.append((name, t, loc))
    return BackwardRequest(root, grad_output, bw.method, tuple(inputs), getattr(bw, "retain_graph", False))


def root_name(problem: Problem) -> str:
    return "loss" if problem.loss is not None else OUTPUT


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _suggest(word: str, options) -> str:
    import difflib
    close = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else ""
