"""Hook bodies that write in place (contract v3 §1): ``grad.mul_(2)``, ``grad *= 2``,
``grad.clamp_(-c, c)``, ``grad_input[0].add_(1)``, and in a ``post_accumulate_grad`` hook the
optimizer-in-backward forms ``tensor.sub_(lr * tensor.grad)``, ``tensor.grad.mul_(c)``,
``tensor.grad = None``, and writes by name of another leaf (``W.mul_(2)``).

A ``does:`` entry is ``(name, tree)`` (``name = tree``), ``(None, tree)`` (an expression
statement: a method call) or ``(name, op, tree)`` (``name op= tree``); see emit.py."""

from __future__ import annotations

from fractions import Fraction as Fr

#: the chance that a v2 hook with nothing else to do writes what it is handed in place
INPLACE_P = 0.2
#: the chance that a post_accumulate_grad hook also writes another leaf it names in place
NAMED_WRITE_P = 0.15


def method(recv, name: str, *args):
    """``recv.name(args)`` as a tree (emit's method form)."""
    return ("op", "method", name, recv, tuple(args), "", None, "node")


def write(s, recv, name: str | None = None) -> list:
    """``does:`` entries writing the tensor ``recv`` in place (``name``: the bare name it is
    bound to, for an augmented assignment)."""
    c = s.choice([Fr(2), Fr(-1), Fr(1, 2), Fr(3)])
    forms = [(3, "mul_"), (2, "clamp_"), (1, "add_"), (1, "neg_"), (1, "zero_")]
    if name is not None:
        forms.append((3, "augmented"))
    form = s.weighted(forms)
    if form == "augmented":
        return [(name, s.choice(["*", "+", "-"]), ("c", c))]
    if form == "clamp_":
        b = s.choice([Fr(1, 2), Fr(1), Fr(1, 4)])
        return [(None, method(recv, "clamp_", ("c", -b), ("c", b)))]
    if form in ("neg_", "zero_"):
        return [(None, method(recv, form))]
    return [(None, method(recv, form, ("c", c)))]


def optimizer_step(s) -> list:
    """A ``post_accumulate_grad`` body: step the leaf, clip or scale its ``.grad``, clear it."""
    t = ("n", "tensor")
    grad = ("attr", t, "grad", None)
    lr = s.choice([Fr(1, 2), Fr(1, 4), Fr(1, 8)])
    form = s.weighted([(3, "step"), (2, "clip"), (1, "scale"), (1, "step_clear")])
    if form == "clip":
        return [(None, method(grad, "clamp_", ("c", Fr(-1)), ("c", Fr(1))))]
    if form == "scale":
        return [("tensor.grad", "*", ("c", lr))]
    body = [(None, method(t, "sub_", ("b", "*", ("c", lr), grad)))]
    if form == "step_clear":
        body.append(("tensor.grad", ("none",)))
    return body


def named_write(s, name: str) -> list:
    """A ``does:`` entry writing the leaf ``name`` (a parameter or an input the body names, not its
    argument) in place: ``W.mul_(c)``, ``x.add_(c)``."""
    form = s.choice(["mul_", "add_"])
    c = s.choice([Fr(2), Fr(1, 2)]) if form == "mul_" else s.choice([Fr(1, 4), Fr(-1)])
    return [(None, method(("n", name), form, ("c", c)))]


def writes_in_place(h) -> bool:
    """Does the hook's body write in place (coverage)?"""
    for entry in h.does:
        if len(entry) == 3 or entry[0] is None or entry[0] == "tensor.grad":
            return True
    return False
