"""Running one variant: its steps (forward passes, backward passes, hook registration and
removal, ``zero_grad``, SGD steps), in order, as a PyTorch user's script would.

A variant without ``steps`` runs v1's ``[forward, backward]``. Hooks are registered at the
start (except those a ``register`` step names), ``when: after_forward`` ones after the first
forward, ``remove: before_backward`` ones are removed just before the first backward and
``after_backward`` ones just after it. ``.grad`` accumulates across backward steps.

When PyTorch raises (a hook with ``raises``, backward through a freed graph, a saved tensor
modified in place, ...), the run stops there and :attr:`VariantRun.error` says so: that is a
prediction, not bad input.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from adjoint.engine.hook_runner import HookRunner
from adjoint.format.errors import ProblemError
from adjoint.engine.forward import ForwardResult, Model
from adjoint.engine.graph import Tensor
from adjoint.engine import zerotensor
from adjoint.engine.gradalias import held_tensor
from adjoint.format.problem import OUTPUT, Problem, Step, Variant
from adjoint.engine.hook_registration import Registrations
from adjoint.engine.reverse import BackwardRequest, BackwardResult, Engine
from adjoint.engine.runtime import Runtime, TorchError
from adjoint.engine.torch_errors import complex_mismatch, torch_size
from adjoint.engine.second_run import bind_names, second_engine, second_request, with_step_names
from adjoint.engine import warns
from adjoint.engine.saved_reads import read_step

DEFAULT_STEPS = ("forward", "backward")


@dataclass
class Pass:
    """One backward step: its request, the engine's record, and the state right after it."""

    request: BackwardRequest
    result: BackwardResult
    forward: ForwardResult           # the forward pass it differentiated
    calls: range                     # indices into the runtime's log of the calls it made
    grads: dict                      # tensor name -> .grad value (None) right after it
    grads_before: dict = field(default_factory=dict)   # the same, right before it
    step: int = 0                    # its index in the variant's steps
    leaf_values: dict = field(default_factory=dict)   # leaf name -> value right after it, for leaves hooks wrote
    recorded: list = field(default_factory=list)   # create_graph: the ops its backward formulas recorded


@dataclass
class RunError:
    """The PyTorch error a variant ends in: its type, message and where it was raised."""

    type: str
    message: str
    during: str                      # setup | register | forward | backward | read
    cause: str = "other"             # why PyTorch raised (runtime.TorchError.cause)
    step: int = 0                    # the index of the step it raised in
    waits: dict | None = None        # DDP: the rank waits in a collective other ranks never join (their error)
    hook: str | None = None          # the hook whose registration PyTorch refused (its label), for the report


@dataclass
class VariantRun:
    """One variant run by the engine: its forward passes, backward passes, steps and error."""

    problem: Problem
    variant: Variant
    rt: Runtime
    model: Model
    forwards: list = field(default_factory=list)     # ForwardResult per forward step
    passes: list = field(default_factory=list)       # Pass per backward step
    error: RunError | None = None
    stepped: bool = False            # the variant has explicit steps (the JSON gets ``passes``)
    reg: Registrations | None = None
    steps: tuple = ()                # the steps run (v1's [forward, backward] when the file gives none)
    failed_pass: Pass | None = None  # a backward step PyTorch raised in: what it did until then
    updates: dict = field(default_factory=dict)   # SGD step index -> [(parameter, before, grad, after)]
    forward_steps: list = field(default_factory=list)   # the step index of each ForwardResult
    made: dict = field(default_factory=dict)   # names bound by backward steps' as: (adjoint.engine.second_run)
    registered: dict = field(default_factory=dict)   # registered steps: name -> hooks in that module's dict then
    reads: list = field(default_factory=list)   # ReadRecord per read step (adjoint.engine.saved_reads)
    # callid -> (grad_output, grad_input) a watching full backward hook was handed (adjoint.engine.observer)
    observed: dict = field(default_factory=dict)

    @property
    def forward(self) -> ForwardResult:
        return self.forwards[-1]

    @property
    def last_pass(self) -> Pass | None:
        return self.passes[-1] if self.passes else None

    @property
    def retained(self) -> list:
        """(Tensor, [names]) with retain_grad, the latest tensor of each name, in registration order."""
        return list(self.reg.retained.values())

    def grads(self) -> dict:
        """``.grad`` of every leaf that requires grad, then of every tensor with retain_grad
        (in the order they got it), then None for the tensors a later step retains (a
        ``retain_grad`` hook registered later, a non-leaf ``backward(inputs=...)``)."""
        out: dict = {}
        for name, t in self.model.leaves.items():
            if self.model.decls[name].requires_grad or (t.requires_grad and t.grad_fn is None):   # (or made to)
                out[name] = t.grad
        bound = self.forwards[-1].names if self.forwards else {}
        declared = {id(t) for t in self.model.leaves.values()}
        for name, t in bound.items():   # a leaf the forward made (xh = ...; xh.requires_grad_())
            if isinstance(t, Tensor) and t.grad_fn is None and t.requires_grad and id(t) not in declared \
                    and name not in out:
                out[name] = t.grad
        for name, t in self.made.items():   # a leaf a backward step made: materialize_grads' zeros under create_graph
            if isinstance(t, Tensor) and t.grad_fn is None and t.requires_grad and id(t) not in declared \
                    and name not in out:
                out[name] = t.grad
        inputs = set(self._backward_inputs())
        for t, names in self.retained:
            for name in names:
                if name in inputs and name in bound and bound[name] is not t:
                    continue  # a later forward bound the name to its own tensor (its .grad: None until it gets one)
                out[name] = t.grad
        for name in self.retained_later():
            out.setdefault(name, None)
        return out

    def _backward_inputs(self) -> list[str]:
        """Names in the ``inputs`` of the variant's ``backward()`` steps (``.grad`` accumulates there)."""
        names: list[str] = []
        for step in self.variant.steps or ():
            bw = step.backward
            if step.kind == "backward" and bw is not None and bw.method == "backward":
                names += [n for n, _ in bw.inputs]
        return names

    def retained_later(self) -> list[str]:
        """Names the variant retains at some point, leaves excluded."""
        names = [h.target for h in self.variant.hooks if h.on == "tensor" and h.kind == "retain_grad"]
        names += self._backward_inputs()
        bound = self.forwards[-1].names if self.forwards else {}
        return [n for n in dict.fromkeys(names) if n not in self.model.leaves
                and not (n in bound and getattr(bound[n], "is_leaf", False) and bound[n].grad_fn is None)]


def run_variant(problem: Problem, variant: Variant, backend, progress=None) -> VariantRun:
    """Run one variant's steps on ``backend`` (exact, float64 or structure values); ``progress``:
    called as ``progress(stage, done, total)`` while it runs (see adjoint.answer.solve)."""
    rt = Runtime(backend, problem.dtype)
    rt.progress = progress
    from adjoint.engine.layers.setup_warnings import construct
    from adjoint.format.validate_tensors import creation_error
    # the script makes its inputs and targets first (torch.tensor(..., requires_grad=...)), then the modules
    for decl in list(variant.inputs) + list(problem.targets):
        refused = creation_error(decl)
        if refused is not None:   # torch.tensor([1, 2], requires_grad=True): the script stops there
            return _setup_error(problem, variant, rt, refused, "tensor")
    refused = construct(rt, problem.model)   # what the modules' constructors warn (TransformerEncoder) or raise
    if refused is not None:   # torch.nn.Conv2d(3, 2, 1, groups=2): the script stops there, nothing registered
        return _setup_error(problem, variant, rt, refused, "constructor")
    reg = Registrations(variant.hooks, rt)
    model = Model(problem, variant.inputs, rt, reg)
    reg.model = model
    rt.hooks_runner = HookRunner(rt, reg)
    nested_runners(rt)
    run = VariantRun(problem, variant, rt, model, stepped=variant.steps is not None, reg=reg)
    steps = variant.steps if variant.steps is not None else tuple(Step(k, variant.loc) for k in DEFAULT_STEPS)
    run.steps = tuple(steps)
    later = variant.registered_later()
    try:
        for hook in variant.hooks:
            if hook.when == "before_forward" and hook.index not in later:
                reg.register(hook.index)
    except TorchError as exc:   # PyTorch refuses a registration (a hook on a tensor without grad, ...)
        run.error = RunError(exc.type, exc.message, "register", exc.cause, -1,   # before the first step
                             hook=getattr(exc, "hook_label", None))
        return run
    first_forward = first_backward = True
    for index, step in enumerate(steps):
        during = "backward" if step.kind == "backward" else "read" if step.kind == "read" else "forward"
        reg.step = index   # saved_tensors blocks with during: are around the steps they list
        zerotensor.check_step(model.leaves.values(), step, variant.hooks)   # a ZeroTensor .grad (abs's double backward) left by a backward
        try:
            if step.kind == "forward":
                run_forward(run, step)
                run.forward_steps.append(index)
                if first_forward:
                    first_forward = False
                    for hook in variant.hooks:
                        if hook.when == "after_forward" and hook.index not in later:
                            _register(reg, hook.index)
                    reg.check_targets(with_step_names(run.forward.names, variant))
            elif step.kind == "backward" and reg.saved_hooks_during_backward(index):
                from adjoint.engine.saved_during import backward_step_within
                first_backward = backward_step_within(run, problem, variant, step, index, first_backward, backend,
                                                      backward_request, run_backward)
            elif step.kind == "backward":
                if first_backward:
                    request = backward_request(problem, step.backward or variant.backward, run, backend)
                    for hook in variant.hooks:
                        if hook.remove == "before_backward":
                            reg.remove(hook.index)
                    run_backward(run, request, index)
                    first_backward = False
                    for hook in variant.hooks:
                        if hook.remove == "after_backward":
                            reg.remove(hook.index)
                else:
                    run_backward(run, backward_request(problem, step.backward or variant.backward, run, backend), index)
            elif step.kind == "register":
                for i in step.hooks:
                    _register(reg, i)
            elif step.kind == "remove":
                for i in step.hooks:
                    reg.remove(i)
            elif step.kind == "zero_grad":
                from adjoint.engine.gradalias import zero_grads
                zero_grads(run.rt, _zeroed(model.leaves, step), step.set_to_none, step.loc)
            elif step.kind == "step" and step.optimizer is not None:
                from adjoint.engine.adam import optimizer_step
                optimizer_step(run, step.optimizer, index)
            elif step.kind == "step":
                sgd(run, step.lr, index)
            elif step.kind in ("clip_grad_norm", "clip_grad_value"):
                from adjoint.engine.clip import clip_step
                clip_step(run, step)
            elif step.kind == "registered":
                from adjoint.engine.registered import count_registered
                count_registered(run, step)
            elif step.kind == "read":
                run.reads.append(read_step(run, step, index))
        except TorchError as exc:
            run.error = RunError(exc.type, exc.message, getattr(exc, "during", None) or during, exc.cause, index,
                                 hook=getattr(exc, "hook_label", None))
            break
    return run


def _setup_error(problem: Problem, variant: Variant, rt: Runtime, refused: tuple[str, str], cause: str) -> VariantRun:
    """The run of a variant whose script stops while it sets up (a tensor it makes, a module's
    constructor): that error, ``during: setup``, before anything is registered or run."""
    run = VariantRun(problem, variant, rt, None, stepped=variant.steps is not None)
    run.steps = variant.steps if variant.steps is not None else tuple(Step(k, variant.loc) for k in DEFAULT_STEPS)
    run.error = RunError(refused[0], refused[1], "setup", cause, -1)
    return run


def _register(reg: Registrations, index: int) -> None:
    """Register a hook between steps; PyTorch refusing it is an error ``during: register``."""
    try:
        reg.register(index)
    except TorchError as exc:
        exc.during = "register"
        raise


def run_forward(run: VariantRun, step: Step) -> None:
    if step.inputs:
        run.model.replace_inputs(step.inputs)
    run.forwards.append(run.model.forward(step.call))


def run_backward(run: VariantRun, request: BackwardRequest, step: int = 0, start: int | None = None) -> None:
    start = len(run.rt.log) if start is None else start   # start: the pass began earlier (its root's packs)
    before = run.grads()
    second = getattr(request, "second", None)
    engine = Engine(run.rt, run.rt.hooks_runner.fire_values) if second is None else second_engine(run, request)
    try:
        result = engine.run(request)
    except TorchError:
        run.failed_pass = Pass(request, engine.result, run.forward, range(start, len(run.rt.log)), run.grads(),
                               before, step)
        raise
    finally:
        if request.method == "backward":  # run_backward retains the grad of non-leaf inputs
            for name, t, _ in request.inputs:
                if not t.is_leaf:
                    run.reg.retained.setdefault(t.id, (t, []))
                    if name not in run.reg.retained[t.id][1]:
                        run.reg.retained[t.id][1].append(name)
    run.passes.append(Pass(request, result, run.forward, range(start, len(run.rt.log)), run.grads(), before, step,
                           run.rt.hooks_runner.leaf_values()))
    if second is not None:
        run.passes[-1].recorded = list(getattr(engine, "recorded", []))
        bind_names(run, request, engine)
        if any(isinstance(t, Tensor) and t.is_leaf and t.requires_grad for t in run.made.values()):
            run.passes[-1].grads = run.grads()   # a leaf the step made (materialize_grads' zeros): listed from it on


def sgd(run: VariantRun, lr, step: int = 0) -> None:
    """``p -= lr * p.grad`` under no_grad for every parameter with a gradient (an in-place op:
    the parameter's version goes up, so a retained graph that saved it can no longer run).
    ``run.updates[step]`` keeps (name, before, grad, after) of each for the reports."""
    B = run.rt.B
    updates = run.updates.setdefault(step, [])
    for name, t in run.model.params.items():
        if t.grad_fn is not None:   # written in place by an op that recorded: reading its .grad warns
            warns.warn(run.rt, "UserWarning", warns.NON_LEAF_GRAD)
        if t.grad is not None and run.model.decls[name].tied is None:   # a tied Parameter is updated once
            before = t.value
            t.value = B.sub(t.value, B.mul(B.scalar(lr), t.grad))
            t.version.value += 1
            updates.append((name, before, t.grad, t.value))


def backward_request(problem: Problem, bw, run: VariantRun, backend) -> BackwardRequest:
    if getattr(bw, "empty_inputs", False) and run.forwards:   # checked first, before anything is made
        raise TorchError("RuntimeError", f"`inputs` argument to `{bw.method}()` cannot be empty.", "arguments")
    if bw.second is not None:
        return second_request(problem, bw, run, backend)
    if not run.forwards:
        raise ProblemError(bw.loc, "a backward step needs a forward step before it")
    fwd = run.forward
    root = fwd.loss if fwd.loss is not None else fwd.output
    # PyTorch's order: _make_grads (the gradient's shape; an implicit one only for a root that
    # requires grad), then the engine's checks of the root, then of the inputs
    grad_output = None
    if bw.grad_output is not None:
        if tuple(bw.grad_output.shape) != tuple(root.shape):
            raise TorchError("RuntimeError", f"Mismatch in shape: grad_output[0] has a shape of "
                                             f"{torch_size(bw.grad_output.shape)} and output[0] has a shape of "
                                             f"{torch_size(root.shape)}.", "autograd")
        if root.dtype in ("complex64", "complex128"):   # a file's grad_output is real: _make_grads' dtype check
            raise TorchError("RuntimeError", complex_mismatch(0, problem.dtype, 0, root.dtype), "autograd")
        grad_output = backend.literal(bw.grad_output)
    elif root.requires_grad and _numel(root.shape) != 1:
        raise TorchError("RuntimeError", "grad can be implicitly created only for scalar outputs", "autograd")
    elif root.requires_grad and root.dtype in ("complex64", "complex128"):   # _make_grads: a real scalar only
        raise TorchError("RuntimeError", "grad can be implicitly created only for real scalar outputs but got "
                                         f"torch.{root.dtype}", "autograd")
    if not root.has_gradient_edge:
        raise TorchError("RuntimeError", "element 0 of tensors does not require grad and does not have a grad_fn",
                         "autograd")
    inputs = []
    for name, loc in bw.inputs:
        if name not in fwd.names:
            raise ProblemError(loc, f"backward input '{name}' is not a tensor of this problem"
                                    f"{_suggest(name, fwd.names)}; tensors: {', '.join(fwd.names)}")
        t = fwd.names[name]
        if not t.requires_grad:
            if bw.method == "grad":
                raise TorchError("RuntimeError", "One of the differentiated Tensors does not require grad", "autograd")
            raise TorchError("RuntimeError", "can't retain_grad on Tensor that has requires_grad=False", "autograd")
        inputs.append((name, t, loc))
    return BackwardRequest(root, grad_output, bw.method, tuple(inputs), bw.retain_graph)


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


def nested_runners(rt) -> None:
    """What a hook body's ``backward(...)`` (adjoint.engine.nested_backward) and
    ``torch.autograd.grad`` (adjoint.engine.nested_grad) run: one more engine on ``rt``."""
    rt.backward_runner = lambda root, grad, retain: Engine(rt, rt.hooks_runner.fire_values).run(
        BackwardRequest(root, _value(grad), retain_graph=retain, grad_obj=_given(grad)))
    rt.grad_runner = lambda *args: _hook_body_grad(rt, *args)


def _value(grad):
    return grad.value if grad is not None else None


def _given(grad):
    """The engine tensor a gradient given to a hook body's backward is: that tensor itself, which
    the body holds (torch.autograd.backward and grad hand the engine the very tensor given)."""
    return held_tensor(grad) if grad is not None else None


def _hook_body_grad(rt, root, grad, inputs: tuple, retain: bool, allow_unused: bool) -> list:
    """A hook body's ``torch.autograd.grad`` (adjoint.engine.nested_grad): one engine run of
    method grad; with ``allow_unused`` an unreached input's gradient is None, not the error."""
    engine = Engine(rt, rt.hooks_runner.fire_values)
    if allow_unused:
        engine.check_unused = lambda req, result: None
    given = _given(grad)
    captured = engine.run(BackwardRequest(root, _value(grad), "grad", inputs, retain, grad_obj=given)).captured
    # the engine captures the buffer itself: where a node handed the given gradient on unchanged
    # (z + 0, z * 1 is another), the result is the very tensor given (g[0] is grad in PyTorch)
    return [grad if given is not None and obj is given else value
            for value, obj in zip(captured, engine.alias.captured + [None] * len(captured))]


def _zeroed(leaves: dict, step: Step) -> list:
    """The leaves a zero_grad step clears: every one, or those its ``leaves:`` names
    (each as ``Module.zero_grad(set_to_none=False)`` zeroes it: ``detach_()`` of a ``.grad`` with a
    graph, then ``zero_()``)."""
    if not step.leaves:
        return list(leaves.values())
    for name in step.leaves:
        if name not in leaves:
            raise ProblemError(step.loc, f"zero_grad names '{name}', which is not a leaf of this problem; leaves: "
                                         f"{', '.join(leaves)}")
    return [leaves[name] for name in step.leaves]
