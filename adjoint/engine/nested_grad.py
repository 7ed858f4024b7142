"""``torch.autograd.grad(outputs, inputs, ...)`` as an expression of a hook body (contract v3
section 4): a backward started from inside a hook, like ``backward(...)``
(adjoint.engine.nested_backward), that hands back the gradients of ``inputs`` instead of
accumulating them into ``.grad``.

Run from a hook that fires inside a backward it is PyTorch's reentrant backward: a new graph
task one level deeper, run to the end before the outer one goes on, its hook calls marked
``reentrant``. ``torch.autograd.grad``'s own checks come first, in its order: empty inputs,
``_make_grads`` (a given gradient's shape, then its complexity; an implicit gradient for an
output that requires grad: one element, a real dtype; adjoint.engine.nested_backward.make_grad_checks),
then the engine's: an output that does not require grad, an input that does not require grad;
an input the outputs do not reach is PyTorch's error unless ``allow_unused=True`` (then None).
Modelled: one output (a tensor or a one-tensor list), inputs a tensor or a list of tensors,
``grad_outputs``, ``retain_graph``, ``allow_unused``, ``materialize_grads`` (zeros of the input's shape and dtype for an unreached
input, a new tensor without grad; ``allow_unused=False`` beside it is grad()'s ValueError, its
first check); ``create_graph=True`` is not modelled here (a step's ``create_graph`` is).
"""

from __future__ import annotations

from adjoint.format.errors import ProblemError
from adjoint.engine.graph import Tensor
from adjoint.engine.runtime import TorchError
from adjoint.engine.complex_grad import zeros as zeros_of
from adjoint.engine.nested_backward import REENTRANT_LIMIT, make_grad_checks

PARAMS = ("outputs", "inputs", "grad_outputs", "retain_graph", "create_graph", "only_inputs", "allow_unused")
KEYWORDS = ("outputs", "inputs", "grad_outputs", "retain_graph", "create_graph", "allow_unused", "materialize_grads")


def nested_grad(rt, e, args: list, kwargs: dict, in_hook: bool):
    loc = e.loc
    from adjoint.engine.inference import refuse_inside
    refuse_inside(rt, loc, "torch.autograd.grad")
    if e.func != "grad":
        raise ProblemError(loc, f"torch.autograd.{e.func} is not modelled here; torch.autograd.grad(...) and "
                                "torch.autograd.backward(...) are, in a hook body (a step runs a backward)")
    if not in_hook:
        raise ProblemError(loc, "torch.autograd.grad(...) is modelled in a hook body; a step differentiates with "
                                "backward: {method: grad, inputs: [...]}")
    for k in kwargs:
        if k not in KEYWORDS:
            raise ProblemError(loc, f"torch.autograd.grad(..., {k}=...) in a hook body is not modelled yet; the "
                                    f"modelled keywords are {', '.join(KEYWORDS)}")
    if len(args) > 3:
        raise ProblemError(loc, "torch.autograd.grad(outputs, inputs, grad_outputs): give the other arguments by "
                                "keyword")
    given = dict(zip(PARAMS, args))
    for k, v in kwargs.items():
        if k in given:
            raise TorchError("TypeError", f"grad() got multiple values for argument '{k}'", "autograd")
        given[k] = v
    if "outputs" not in given or "inputs" not in given:
        missing = "outputs" if "outputs" not in given else "inputs"
        raise TorchError("TypeError", f"grad() missing 1 required positional argument: '{missing}'", "autograd")
    materialize = given.get("materialize_grads", False)
    if not isinstance(materialize, bool):
        raise ProblemError(loc, "torch.autograd.grad's materialize_grads must be True or False")
    allow_unused = given.get("allow_unused")
    if materialize and allow_unused is False:   # grad()'s first statement, before anything is looked at
        raise TorchError("ValueError", "Expected allow_unused to be True or not passed when materialize_grads=True, "
                                       "but got: allow_unused=False.", "autograd")
    if allow_unused is None:
        allow_unused = materialize
    if given.get("create_graph"):
        raise ProblemError(loc, "torch.autograd.grad(..., create_graph=True) in a hook body is not modelled yet; "
                                "a backward step takes create_graph")
    outputs = _tensors(given["outputs"], "outputs", loc)
    inputs = _tensors(given["inputs"], "inputs", loc)
    if len(outputs) != 1:
        raise ProblemError(loc, "torch.autograd.grad in a hook body takes one output here (a tensor or [tensor])")
    if not inputs:
        raise TorchError("RuntimeError", "`inputs` argument to `grad()` cannot be empty.", "autograd")
    root = outputs[0]
    gradient = given.get("grad_outputs")
    if isinstance(gradient, (list, tuple)):
        if len(gradient) != 1:
            raise ProblemError(loc, "torch.autograd.grad's grad_outputs: give one gradient for the one output")
        gradient = gradient[0]
    if gradient is not None and not isinstance(gradient, Tensor):
        raise ProblemError(loc, "torch.autograd.grad's grad_outputs must be a tensor here")
    make_grad_checks(root, gradient)   # _make_grads, then the engine: the output, then the inputs
    if not root.has_gradient_edge:
        raise TorchError("RuntimeError", "element 0 of tensors does not require grad and does not have a grad_fn",
                         "autograd")
    for t in inputs:
        if not t.requires_grad:
            raise TorchError("RuntimeError", "One of the differentiated Tensors does not require grad", "autograd")
    retain = given.get("retain_graph")
    if retain is not None and not isinstance(retain, bool):
        raise ProblemError(loc, "torch.autograd.grad's retain_graph must be True or False")
    named = tuple((f"input {i}", t, loc) for i, t in enumerate(inputs))
    inside = rt.phase == "backward"
    phase, grad_mode = rt.phase, rt.grad_enabled
    if inside and rt.reentrant >= REENTRANT_LIMIT:
        raise ProblemError(loc, f"this autograd.grad(...) runs inside {REENTRANT_LIMIT} backwards it started: each "
                                "reaches the hook that runs it again, so PyTorch never finishes; run it outside the "
                                "hook, or from a root whose backward does not reach the hook")
    if inside:
        rt.reentrant += 1
    outer_warn = rt.warn_phase
    if not inside and outer_warn is None:   # a forward-time hook body's backward: it warns during the forward
        rt.warn_phase = phase
    try:
        captured = rt.grad_runner(root, gradient, named, bool(retain),
                                  bool(allow_unused))
    finally:
        if inside:
            rt.reentrant -= 1
        rt.phase, rt.grad_enabled = phase, grad_mode
        rt.warn_phase = outer_warn
    out = []
    for t, value in zip(inputs, captured):
        if value is None and materialize:   # torch.zeros_like(input, requires_grad=create_graph), create_graph False
            out.append(rt.tensor(zeros_of(rt.B, t.shape, t.dtype), dtype=t.dtype))
        elif value is None:   # allow_unused (without it the engine raised PyTorch's error)
            out.append(None)
        elif value is gradient:   # the very tensor given, handed back unchanged (the engine's runner says so)
            out.append(gradient)
        else:
            out.append(rt.tensor(value.value if isinstance(value, Tensor) else value, dtype=t.dtype))
    return tuple(out)


def _tensors(value, what: str, loc) -> list:
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    for v in items:
        if not isinstance(v, Tensor):
            raise ProblemError(loc, f"torch.autograd.grad's {what} must be tensors (a tensor or a list of them)")
    return items


