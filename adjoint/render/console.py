"""The terminal report of ``adjoint solve``: every number exact and as a decimal."""

from __future__ import annotations

from ..exact import Exact
from ..graph import Typed
from ..prediction import Boundary, HookRecord, Prediction, VariantPrediction
from ..safetext import terminal_safe

MAX_SHOWN = 12  # elements of a tensor printed in full


def fmt(v) -> str:
    """``-0.4079606784 (= -3983991/9765625)``; tensors as nested lists."""
    if v is None:
        return "None"
    if isinstance(v, tuple):
        inner = ", ".join(fmt(x) for x in v)
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {fmt(x)}" for k, x in v.items()) + "}"
    if isinstance(v, Typed):
        return f"{_nested(v.value.strings())} ({v.dtype})"
    if not isinstance(v, Exact):
        return str(v)
    exact = v.strings()
    floats = v.floats()
    if v.size > MAX_SHOWN:
        return f"<{'x'.join(map(str, v.shape))} tensor> {_short(floats if floats is not None else exact)}"
    if floats is None:
        return _nested(exact)
    dec = _nested(floats, decimal=True)
    ex = _nested(exact)
    return dec if dec == ex else f"{dec} (= {ex})"


def _short(x) -> str:
    s = _nested(x, decimal=not isinstance(_first(x), str))
    return s if len(s) < 120 else s[:117] + "..."


def _first(x):
    while isinstance(x, list):
        x = x[0]
    return x


def _nested(x, decimal: bool = False) -> str:
    if isinstance(x, list):
        return "[" + ", ".join(_nested(i, decimal) for i in x) + "]"
    if decimal and isinstance(x, float):
        return f"{x:.10g}"
    return str(x)


def render(pred: Prediction) -> str:
    out: list[str] = []
    problem = pred.problem
    for v in pred.variants:
        out.append(f"== {problem.name} :: variant {v.name}" + (" (numeric)" if pred.numeric else ""))
        if problem.description and v is pred.variants[0]:
            out.append(f"   {' '.join(problem.description.split())}")
        out.extend(_variant(v))
        out.append("")
    # every line carries names and labels from the file: control and bidi characters escaped
    return "\n".join(terminal_safe(line) for line in out).rstrip() + "\n"


def _variant(v: VariantPrediction) -> list[str]:
    out = ["", "forward values"]
    width = max((len(n) for n in v.values), default=1)
    for name, value in v.values.items():
        out.append(f"  {name.ljust(width)} = {fmt(value)}")
    if v.loss is not None:
        out.append(f"  loss = {fmt(v.loss)}")
    out += ["", "adjoint recursion (lambda_out = grad_output at the module's output; "
                "lambda_in = J^T lambda_out, hooks aside)"]
    for b in v.boundaries:
        out.extend(_boundary(b))
    out += ["", "hook calls, in firing order"]
    if not v.hook_calls:
        out.append("  (none)")
    for i, h in enumerate(v.hook_calls, 1):
        out.extend(_hook(i, h))
    title = "returned by torch.autograd.grad" if v.method == "grad" else "final .grad"
    if v.returned is not None:
        out += ["", title]
        for name, value in v.returned.items():
            out.append(f"  {name} -> {fmt(value)}")
    out += ["", "final .grad" + (" (autograd.grad leaves .grad alone)" if v.method == "grad" else "")]
    for name, value in v.grads.items():
        out.append(f"  {name}.grad = {fmt(value)}")
    for f in v.functions:
        verdict = "equals the true derivative" if f.matches else f"DIFFERS from the true derivative {f.true}"
        out.append(f"  custom Function {f.name} ({f.callid}): backward for {f.slot} = {f.declared} {verdict}")
    if v.notes:
        out += ["", "why (PyTorch conventions that apply here)"]
        out.extend(f"  - {n}" for n in v.notes)
    return out


def _boundary(b: Boundary) -> list[str]:
    pad = "  " * (b.depth + 1)
    head = f"{pad}{b.callid} [{b.type}]"
    if b.grad_output[0] is None:
        return [f"{head}: no gradient reaches its output"]
    lines = [f"{head}: lambda_out = grad_output = {fmt(b.grad_output[0])}"]
    for name, arg, g in zip(b.input_names, b.arg_names, b.grad_input):
        shown = fmt(g) if g is not None else "None (does not require grad)"
        lines.append(f"{pad}    lambda_in[{arg} <- {name}] = J^T lambda_out = {shown}")
    return lines


def _hook(i: int, h: HookRecord) -> list[str]:
    where = f" at {h.node}" if h.node else ""
    call = f" (call {h.k})" if h.k is not None and h.calls_of_module > 1 else ""
    lines = [f"  {i}. [{h.phase}] {h.kind} on {h.on} '{h.target}'{call}{where} -- {h.label}"]
    for name, value in h.args.items():
        lines.append(f"       {name} = {fmt(value)}")
    lines.append(f"       returns {fmt(h.returned)}" if h.returned is not None else "       returns None (observes)")
    for w in h.why:
        lines.append(f"       why: {w}")
    return lines
