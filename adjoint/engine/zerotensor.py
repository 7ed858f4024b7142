"""PyTorch's efficient zero tensors in a backward (``at::_efficientzerotensor``).

``sgn_backward`` of a real ``self`` (FunctionsManual.cpp) returns ``_efficientzerotensor(sizes)``:
zeros without storage. ``SgnBackward0`` is recorded by AbsBackward0's formula ``grad *
self.sgn()`` under create_graph, so a later backward through that graph hands such a tensor on.
What torch 2.13 does with it (probed, tests/test_second_abs.py):

* InputBuffer::accumulate sums it with another gradient out of place (``can_accumulate_inplace``
  refuses a ZeroTensor; under grad mode ``old + var`` records ``AddBackward0``): ``add_zerotensor``
  gives a copy of the other operand, a ZeroTensor only when both are;
* AccumulateGrad keeps it as ``.grad`` without grad mode (``new_grad.detach()``), and clones it into
  ordinary zeros under create_graph; a later backward's ``variable_grad += new_grad`` into a
  ZeroTensor ``.grad`` raises "ZeroTensors are immutable" (:data:`IMMUTABLE`).

Which node kernels keep a ZeroTensor a ZeroTensor varies op by op (``mul``, ``t``, ``view`` do,
``mm``, ``sum``, ``neg`` materialize it, ``neg`` as -0.0): a ZeroTensor reaching any node but
AccumulateGrad alone, a hook, ``autograd.grad``'s result, and any step but a backward or
``zero_grad()`` after a ZeroTensor became ``.grad``, are refused (:func:`refuse`), never guessed.
The engine keeps the ZeroTensor gradients of one backward by identity (``Engine.zero_grads``) and
a leaf's ZeroTensor ``.grad`` as ``Tensor.zero_grad_value`` (the value ``.grad`` then held).
"""

from __future__ import annotations

from adjoint.format.errors import ProblemError

IMMUTABLE = ("ZeroTensors are immutable. Please use the materialized zero tensor obtained using .clone() if you want "
             "a mutable tensor.")


def refuse(loc, what: str):
    raise ProblemError(loc, f"{what} PyTorch's efficient zero tensor (SgnBackward0's gradient, as in abs's double "
                            "backward) is not modelled yet")


def makes_zero(node) -> bool:
    """SgnBackward0 of a real tensor: its backward is ``_efficientzerotensor``."""
    return node.kind == "op" and node.op.name == "sgn" and not str(node.inputs[0].dtype).startswith("complex")


def mark(engine, g, loc=None):
    """Keep ``g`` as a ZeroTensor of this backward, with where it was made (the SgnBackward0 node's line)."""
    if g is not None:
        engine.zero_grads[id(g)] = (g, loc)
    return g


def is_zero(engine, g) -> bool:
    held = engine.zero_grads.get(id(g)) if g is not None else None
    return held is not None and held[0] is g


def _origin(engine, inputs):
    return next(engine.zero_grads[id(g)][1] for g in inputs if is_zero(engine, g))


def grad_is_zero(t) -> bool:
    """Whether leaf ``t``'s ``.grad`` is a ZeroTensor AccumulateGrad kept."""
    held = getattr(t, "zero_grad_value", None)
    return held is not None and t.grad is held


def check_inputs(engine, node, inputs) -> None:
    """Refuse a ZeroTensor gradient into a node other than a hook-free AccumulateGrad, or captured by
    ``autograd.grad``."""
    zeros = [nr for nr, g in enumerate(inputs) if is_zero(engine, g)]
    if not zeros:
        return
    info = engine.exec_info.get(node) if engine.exec_info else None
    origin = _origin(engine, inputs)
    if info and any(nr in zeros for nr, _ in info["captures"]):
        refuse(origin, "autograd.grad's result being")
    if node.is_accumulate:
        t = node.variable
        if t.backward_hooks or t.post_accumulate_hooks:
            refuse(origin, f"a hook on {t.name or 'a leaf'} handed")
        return
    if info is not None and not info["needed"] and not node.tensor_pre_hooks and not node.retains_grad_hooks:
        return   # autograd.grad does not run it (nor hand the tensor to anything)
    refuse(node.loc or origin, f"a gradient into {node.name} that is")


def check_step(leaves, step, hooks: tuple) -> None:
    """Before a step: after a backward left a ZeroTensor as some leaf's ``.grad``, a later backward
    (its AccumulateGrad raises :data:`IMMUTABLE`, or replaces it), a forward, a read or
    ``zero_grad()`` (set to None) are modelled; anything else that reads or writes ``.grad`` (an
    optimizer step, ``zero_grad(set_to_none=False)``, clipping), and hooks at all, are refused."""
    if not any(grad_is_zero(t) for t in leaves):
        return
    if hooks:
        refuse(step.loc, "a file with hooks where a .grad is")
    if step.kind in ("forward", "backward", "read", "registered") or \
            (step.kind == "zero_grad" and step.set_to_none):
        return
    refuse(step.loc, f"a {step.kind} step on a .grad that is")
