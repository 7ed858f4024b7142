"""What the glue-op tests share (diagonal, tile, tensor_split, the stacks, masked_select,
take_along_dim, swapaxes/movedim/ravel). Each writes a problem from a template whose forward
starts ``h = x * 2`` and whose tensor hook on ``h`` either only reads its gradient (:data:`PLAIN`)
or takes ``grad.view(-1)`` (:data:`VIEW`: PyTorch's error where the gradient it is handed is
strided), and compares adjoint's answer with the same run in torch, where :func:`h_hook` is the
hook registered on ``h``. Expected values always come from the torch side of each test."""

from __future__ import annotations

import adjoint

PLAIN = "v = grad * 1"
VIEW = "v = grad.view(-1)"


def does(view_hook: bool) -> str:
    """The ``does:`` body of the hook on ``h``."""
    return VIEW if view_hook else PLAIN


def fill(template: str, **slots) -> str:
    """``template`` with each slot name replaced by its value's text, in the order given (a slot
    whose name holds another's -- ``IVALUE`` and ``VALUE`` -- goes first)."""
    for name, value in slots.items():
        template = template.replace(name, value if isinstance(value, str) else str(value))
    return template


def solve(text: str) -> dict:
    """The JSON answer of the problem's only variant."""
    return adjoint.loads(text).solve().to_json()["variants"]["default"]


def error(got: dict) -> tuple | None:
    """``(type, message)`` of the answer's error, None when it has none."""
    e = got.get("error")
    return (e["type"], e["message"]) if e else None


def hook_grads(got: dict, label: str) -> list:
    """The gradients the tensor hook ``label`` was handed, call by call."""
    return [c["args"]["grad"]["value"] for c in got["hook_calls"] if c["label"] == label]


def h_hook(view_hook: bool):
    """The torch side's hook on ``h``: :data:`VIEW` or :data:`PLAIN`, returning None."""
    return (lambda g: (g.view(-1), None)[1]) if view_hook else (lambda g: None)


def raised(exc: BaseException) -> tuple:
    """``(type, message)`` of an exception torch raised, as :func:`error` reads adjoint's."""
    return type(exc).__name__, str(exc)


def hooked_run(value, expr: str, does_: str, names: dict):
    """The torch side of the templates whose forward is ``h = x * 2; o = FORWARD; return (o * o *
    o).sum() + (o * o).reshape(-1)[0]`` with the ``does_`` hook on both ``h`` and ``o`` (diagonal,
    unfold, im2col): ``(x, o, calls, error)``, ``calls`` the gradients a hook on ``o`` was
    handed, ``error`` None or what torch raised as ``(type, message)``. ``expr`` is evaluated with
    ``names`` and ``h``."""
    import torch

    x = torch.tensor(value, dtype=torch.float64, requires_grad=True)
    h = x * 2
    hook = h_hook(does_ == VIEW)
    h.register_hook(hook)
    calls: list = []
    o = None
    try:
        o = eval(expr, {**names, "h": h})   # noqa: S307 -- the tests' own expressions
        o.register_hook(hook)
        o.register_hook(lambda g: calls.append(g.tolist()))
        ((o * o * o).sum() + (o * o).reshape(-1)[0]).backward()
    except (RuntimeError, IndexError) as exc:
        return x, o, calls, raised(exc)
    return x, o, calls, None
