"""``{read: ..., as: NAME}`` steps on the engine's records (adjoint.format.validate_read).

``t.grad_fn._saved_SLOT`` is the generated getter of the node's saved variable SLOT
(torchgen's names: self, other, result, mat2, ...), which calls ``SavedVariable::unpack(node)``
(torch/csrc/autograd/saved_variable.cpp):

* freed by a backward without ``retain_graph``: the "Trying to backward through the graph a
  second time (or directly access saved tensors after they have already been freed)" error;
* no hooks and the original saved (an input of the op, or a leaf): that very tensor object
  (``y.grad_fn._saved_self is a``), after the version check;
* no hooks and an output saved (``_saved_result``): a new tensor equal to it whose grad_fn is
  the node itself;
* hooks (``saved_tensors_hooks`` active when it was saved, ``register_hooks`` on the raw saved
  variable, ``save_on_cpu``): the unpack hook runs (a call of the answer, with no node: no
  backward is running) and its result, a new tensor, is returned; its grad_fn is the saved
  tensor's own (a non-leaf input: ``a.grad_fn``), the node itself for an output, none for a leaf.
  An unpack returning a non-tensor is PySavedVariableHooks' TypeError.

A slot the node's class has but did not save (an input that needed no gradient) reads None; a
slot it does not have (adjoint.format.saved_attributes: torchgen's names) is the node's
AttributeError, and so is any slot of a node torchgen does not generate (a custom Function's,
BackwardHookFunctionBackward, CopySlices); no grad_fn is Python's AttributeError on None; a
non-tensor slot (``_saved_alpha``) or a tensor the op's model does not save is refused.

``torch._C._autograd._saved_tensors_hooks_is_enabled()`` is False inside a
``disable_saved_tensors_hooks`` block: between steps no block is entered, so it reads True.
"""

from __future__ import annotations

from dataclasses import dataclass

from adjoint.engine.graph import Tensor, Typed
from adjoint.engine.hook_registration import grad_fn
from adjoint.engine.runtime import FREED_GRAPH
from adjoint.engine.saved_hooks import _class_name, _slots_of, disabled
from adjoint.engine.torch_errors import TorchError
from adjoint.format.errors import ProblemError
from adjoint.format.saved_attributes import saved_attributes


@dataclass
class ReadRecord:
    """One read step's answer."""

    name: str                 # its ``as:``
    expr: str                 # what it reads, as the user writes it
    step: int
    value: object = None      # a backend value, a bool (hooks_enabled), or None (a slot not saved)
    is_names: tuple = ()      # names of the tensors the result is (the same object)
    grad_fn: str | None = None          # the result's grad_fn (its node name)
    grad_fn_of: tuple = ()    # names of the tensors whose grad_fn is that same node
    dtype: str | None = None
    shape: tuple | None = None


def read_step(run, step, index: int) -> ReadRecord:
    what, target, slot, as_name = step.read
    rt = run.rt
    if what == "hooks_enabled":
        return ReadRecord(as_name, "torch._C._autograd._saved_tensors_hooks_is_enabled()", index,
                          value=not disabled(rt))
    expr = f"{target}.grad_fn._saved_{slot}"
    names = run.reg.names
    t = names.get(target)
    if not isinstance(t, Tensor):
        known = ", ".join(n for n, v in names.items() if isinstance(v, Tensor))
        raise ProblemError(step.loc, f"read names '{target}', which is not a tensor of this run so far; tensors: {known}")
    node = grad_fn(rt, t)
    attr = f"_saved_{slot}"
    if node is None:
        raise TorchError("AttributeError", f"'NoneType' object has no attribute '{attr}'", "read")
    # a node torchgen does not generate (a custom Function's, BackwardHookFunctionBackward, CopySlices) has no
    # _saved_* getters: PyTorch's AttributeError (a Function keeps its saved tensors as saved_tensors)
    sv = next((s for s in node.saved if s.name == slot), None) if node.kind == "op" else None
    rec = ReadRecord(as_name, expr, index)
    if sv is None:
        known = saved_attributes(_class_name(node))   # what torchgen makes the node class save
        if known is not None and slot in _slots_of(node):
            return rec          # the slot's SavedVariable was default-constructed: None
        if known is not None and (slot in known["tensors"] or slot in known["other"]):
            what = "a value that is not a tensor" if slot in known["other"] else \
                "a tensor adjoint's model of the node does not save"
            raise ProblemError(step.loc, f"read: {_class_name(node)}.{attr} is {what}: not modelled")
        raise TorchError("AttributeError", f"'{_class_name(node)}' object has no attribute '{attr}'", "read")
    if getattr(sv.tensor, "wrapped", False):   # `3 * x` saves 3 as a 0-d tensor: int64 for an int, float64 for a float
        raise ProblemError(step.loc, f"read: {_class_name(node)}.{attr} is a Python number PyTorch wrapped into a "
                                     "0-d tensor (its dtype follows the number's Python type): not modelled")
    if getattr(sv.hooks, "is_checkpoint", False):
        raise ProblemError(step.loc, "read: a saved tensor a checkpoint packed (its read recomputes the forward) is "
                                     "not modelled")
    if sv.released:
        raise TorchError("RuntimeError", FREED_GRAPH, "freed_graph")
    result_node = None
    if sv.hooks is None:
        value = rt.unpack(node, sv)           # the version check
        if not sv.is_output or sv.tensor.is_leaf:   # saved_original_: the tensor itself
            rec.is_names = _names_of(names, sv.tensor)
            result_node = grad_fn(rt, sv.tensor)
        else:
            result_node = node
        rec.dtype, rec.shape = sv.tensor.dtype, tuple(sv.tensor.shape)
    else:
        before, rt.phase = rt.phase, "read"   # the unpack's call is the read's, in no pass
        try:
            out = rt.hooks_runner.unpack_read(sv.hooks, sv.packed, sv)
        finally:
            rt.phase = before
        value = out.value if isinstance(out, Tensor) else out
        rec.dtype = out.dtype if isinstance(out, Tensor) else sv.tensor.dtype
        rec.shape = tuple(out.shape) if isinstance(out, Tensor) else tuple(sv.tensor.shape)
        if sv.tensor.is_leaf:
            result_node = None
        elif sv.is_output:
            result_node = node
        else:
            result_node = sv.packed_grad_fn   # grad_fn_, kept when it was packed (an in-place op since moves none)
    # a tensor of another dtype than the problem's (what an unpack hook returned: x.double() in a float32
    # problem, or an integer tensor) is written with its dtype, as a hook's argument is (engine.graph.recorded)
    rec.value = Typed(value, rec.dtype) if rec.dtype != rt.dtype and rec.dtype is not None else value
    if result_node is not None:
        rec.grad_fn = result_node.name   # as grad_fn.name() gives it (torch::autograd::CopySlices)
        rec.grad_fn_of = tuple(n for n, v in names.items() if isinstance(v, Tensor) and v.grad_fn is result_node)
    return rec


def _names_of(names: dict, t) -> tuple:
    return tuple(n for n, v in names.items() if v is t)
