"""What adjoint is measured against: real torch, the same arithmetic in python-flint, SymPy.

torch and SymPy are imported inside the functions that use them, so that a process that
only times adjoint (the peak-memory workload) carries neither.
"""

from __future__ import annotations

import random
from typing import Callable

from .problems import MLPCase, SymbolicCase

#: torch runs on one thread: the machine is shared and adjoint is single-threaded too
TORCH_THREADS = 1


def _floats(nested) -> list:
    if isinstance(nested, list):
        return [_floats(v) for v in nested]
    return float(nested)


def torch_mlp(case: MLPCase) -> tuple[Callable[[], object], Callable[[], list[float]]]:
    """torch float64 eager forward + backward of ``case`` with the same hooks: a full backward hook
    on every Linear and a tensor hook (registered as the activation returns) on every activation
    output, each observing what it is handed. Returns (step, x_grad): ``step`` runs one forward +
    backward from scratch (grads set to None first); ``x_grad`` runs one and returns ``x.grad``."""
    import torch

    torch.set_num_threads(TORCH_THREADS)
    act = {"ReLU": torch.nn.ReLU, "Tanh": torch.nn.Tanh}[case.activation]
    children = []
    for i, (w, b) in enumerate(zip(case.weights, case.biases)):
        linear = torch.nn.Linear(len(w[0]), len(w), dtype=torch.float64)
        with torch.no_grad():
            linear.weight.copy_(torch.tensor(_floats(w), dtype=torch.float64))
            linear.bias.copy_(torch.tensor(_floats(b), dtype=torch.float64))
        children.append(linear)
        if i < len(case.weights) - 1:
            children.append(act())
    model = torch.nn.Sequential(*children)
    handed: list = []

    def module_hook(module, grad_input, grad_output):
        handed.append((grad_input, grad_output))

    def tensor_hook(grad):
        handed.append(grad)

    for child in children:
        if isinstance(child, torch.nn.Linear):
            child.register_full_backward_hook(module_hook)
    x = torch.tensor(_floats(case.x), dtype=torch.float64, requires_grad=True)

    def step():
        handed.clear()
        x.grad = None
        model.zero_grad(set_to_none=True)
        h = x
        for child in children:
            h = child(h)
            if isinstance(child, act):
                h.register_hook(tensor_hook)
        (h * h).sum().backward()

    def x_grad() -> list[float]:
        step()
        return x.grad.flatten().tolist()

    return step, x_grad


def flint_mlp_floor(case: MLPCase) -> Callable[[], dict[str, object]]:
    """The floor for ``mlp``: the same exact arithmetic written directly in python-flint, no
    engine around it. Forward ``z = h W^T + 1 b`` (fmpq_mat products), the ReLU mask, the loss
    ``sum(y * y)``; backward from ``2 y``: each layer's weight gradient ``g^T h``, bias gradient
    ``1^T g``, input gradient ``g W`` and the mask. Values arrive as FLINT matrices (what a loader
    would hand over); transposes and every product are inside the step. Returns a function doing
    one forward + backward that returns the loss and every gradient (``x``, ``fc0.weight``,
    ``fc0.bias``, ...: FLINT matrices), for checking against adjoint's answer."""
    from flint import fmpq, fmpq_mat

    if case.activation != "ReLU":
        raise ValueError("the FLINT floor is the ReLU network's (tanh is not rational)")

    def mat(rows) -> fmpq_mat:
        return fmpq_mat(len(rows), len(rows[0]), [fmpq(v.numerator, v.denominator) for r in rows for v in r])

    x = mat(case.x)
    weights = [mat(w) for w in case.weights]
    biases = [mat([b]) for b in case.biases]
    batch = x.nrows()
    ones = fmpq_mat(batch, 1, [1] * batch)
    ones_t = ones.transpose()
    zero = fmpq(0)
    last = len(weights) - 1

    def step() -> dict[str, object]:
        h = x
        inputs, masks = [], []
        for i, (w, b) in enumerate(zip(weights, biases)):
            inputs.append(h)
            z = h * w.transpose() + ones * b
            if i < last:
                keep = [v > 0 for v in z.entries()]
                masks.append(keep)
                h = fmpq_mat(z.nrows(), z.ncols(), [v if k else zero for v, k in zip(z.entries(), keep)])
            else:
                h = z
        grads: dict[str, object] = {"loss": sum(v * v for v in h.entries())}
        g = h * 2
        for i in range(last, -1, -1):
            grads[f"fc{i}.weight"] = g.transpose() * inputs[i]
            grads[f"fc{i}.bias"] = ones_t * g
            g = g * weights[i]
            if i > 0:
                g = fmpq_mat(g.nrows(), g.ncols(), [v if k else zero for v, k in zip(g.entries(), masks[i - 1])])
        grads["x"] = g
        return grads

    return step


def sympy_chain_gradients(case: SymbolicCase) -> dict[str, object]:
    """The baseline for ``symbolic``: build the composed loss ``tanh(w_15 tanh(...) + b_15)^2`` in
    SymPy and call ``sympy.diff`` once per parameter. Returns symbol name -> derivative."""
    import sympy

    h = sympy.Rational(case.x.numerator, case.x.denominator)
    params = []
    for i in range(case.depth):
        w, b = sympy.Symbol(f"w_{i}", real=True), sympy.Symbol(f"b_{i}", real=True)
        params += [w, b]
        h = sympy.tanh(w * h + b)
    loss = h * h
    return {str(p): sympy.diff(loss, p) for p in params}


def max_relative_difference(ours: dict[str, object], theirs: dict[str, object], points: int, seed: int,
                            digits: int = 50) -> float:
    """The largest relative difference between two sets of closed forms (symbol name ->
    SymPy expression) over ``points`` random rational points (each symbol a nonzero k/8 in
    [-1, 1]), both evaluated with mpmath at ``digits`` digits by :func:`_evaluate`."""
    import mpmath

    rng = random.Random(seed)
    names = sorted(theirs)
    worst = 0.0
    with mpmath.workdps(digits):
        for _ in range(points):
            point = {name: mpmath.mpf(rng.choice([-1, 1]) * rng.randint(1, 8)) / 8 for name in names}
            for name in names:
                a, b = _evaluate(ours[name], point, {}), _evaluate(theirs[name], point, {})
                scale = max(abs(a), abs(b))
                if scale != 0:
                    worst = max(worst, float(abs(a - b) / scale))
    return worst


def _evaluate(expr, point: dict, memo: dict):
    """``expr`` (sums, products, powers, tanh of rationals and symbols) as an mpmath number at
    ``point`` (symbol name -> mpf), each shared subexpression once. SymPy's own ``evalf`` with
    ``subs`` takes seconds on these trees; ``lambdify`` would exec generated code."""
    import mpmath
    import sympy

    if expr in memo:
        return memo[expr]
    if expr.is_Symbol:
        value = point[expr.name]
    elif expr.is_Rational:
        value = mpmath.mpf(int(expr.p)) / int(expr.q)
    elif expr.is_Add:
        value = mpmath.fsum(_evaluate(a, point, memo) for a in expr.args)
    elif expr.is_Mul:
        value = mpmath.fprod(_evaluate(a, point, memo) for a in expr.args)
    elif expr.is_Pow:
        value = _evaluate(expr.base, point, memo) ** _evaluate(expr.exp, point, memo)
    elif isinstance(expr, sympy.tanh):
        value = mpmath.tanh(_evaluate(expr.args[0], point, memo))
    else:
        raise ValueError(f"no evaluation rule for {type(expr).__name__} in a gradient")
    memo[expr] = value
    return value


class _PlainRun:
    """The run object ``adjoint.torchside.build``'s modules call back into, doing the calls and
    nothing else: no call counting, naming, observing or value snapshots (verify's Session does
    those, and they would be timed as torch's). A custom module's forward and the loss still go
    through the project's interpreter of the file's expressions, a few microseconds a call."""

    def __init__(self, globals_: dict):
        self.globals = globals_
        self.modules: dict = {}
        self.log: list = []

    def call_module(self, decl, args, kwargs):
        return self.modules[decl.label](*args, **kwargs)

    def program(self, scope):
        from adjoint.torchside.program import Program
        return Program(scope)

    def current_callid(self, label: str) -> str:
        return label

    def lookup_global(self, name: str, loc, where: str):
        return self.globals[name]

    def bind(self, name: str, value, aliases: tuple = (), until=None) -> None:
        pass

    class hooks:   # no hooks to put on: a forward's NAME.requires_grad_() statement has none waiting
        @staticmethod
        def statement_ran(key) -> None:
            pass


class _LossScope:
    def __init__(self, run: _PlainRun, problem, output):
        self.run, self.problem, self.output = run, problem, output

    def lookup(self, name: str, loc):
        return self.output if name == "y" else self.run.globals[name]

    def child(self, name: str):
        return self.problem.model.child(name)

    def call_child(self, name: str, args: list, kwargs: dict, loc):
        return self.run.call_module(self.child(name), args, kwargs)


def torch_problem(problem, threads: int | None = TORCH_THREADS) -> Callable[[], object]:
    """One torch forward + backward of a problem's model as ``adjoint verify``'s torch side builds
    it (``adjoint.torchside.build``: the real ``torch.nn`` classes with the file's parameters, in the
    file's dtype), with its module backward hooks registered (each observing); the first variant's
    inputs. Returns ``step``: grads set to None, forward, loss, ``backward()``; it returns the loss.
    ``threads``: torch's intra-op threads (None leaves torch's default)."""
    import torch

    from adjoint.torchside.build import build, module_paths
    from adjoint.torchside.values import literal_tensor

    if threads is not None:     # None: torch's own default pool, as a user runs it
        torch.set_num_threads(threads)
    dtype = {"float32": torch.float32, "float64": torch.float64}[problem.dtype]
    variant = problem.variants[0]
    leaves = {}
    for d in list(variant.inputs) + list(problem.targets):
        leaves[d.name] = literal_tensor(d.value, torch.int64 if d.dtype == "int64" else dtype, {})
        leaves[d.name].requires_grad_(d.requires_grad)
    run = _PlainRun(leaves)
    root, tensors = build(run, problem.model, dtype, {})
    run.modules = module_paths(root)
    for hook in variant.hooks:
        if hook.on != "module" or hook.kind not in ("full_backward", "backward"):
            raise ValueError(f"the torch reference registers module backward hooks only, not {hook.on} {hook.kind}")
        module = run.modules[hook.target]
        register = module.register_full_backward_hook if hook.kind == "full_backward" else module.register_backward_hook
        register(lambda m, grad_input, grad_output: None)
    params = [t for t in tensors.values() if t.requires_grad]
    inputs = [leaves[d.name] for d in variant.inputs]

    def step():
        for t in params + inputs:
            t.grad = None
        out = run.call_module(problem.model, inputs, {})
        from adjoint.torchside.program import Program
        loss = Program(_LossScope(run, problem, out)).eval(problem.loss) if problem.loss is not None else out
        loss.backward()
        return loss.detach()

    return step


def torch_mlp_script(case: MLPCase) -> str:
    """The ``mlp`` model as the torch script a user would run instead of adjoint: the same layers
    and values, a full backward hook on every Linear and a tensor hook on every activation output,
    each printing what it is handed, then forward, ``sum(y * y)``, backward."""
    def lit(rows) -> str:
        return repr([[float(v) for v in row] for row in rows])

    lines = ["import torch", "torch.set_printoptions(precision=17)",
             f"x = torch.tensor({lit(case.x)}, dtype=torch.float64, requires_grad=True)", "layers = []"]
    for w, b in zip(case.weights, case.biases):
        lines += [f"lin = torch.nn.Linear({len(w[0])}, {len(w)}, dtype=torch.float64)",
                  "with torch.no_grad():",
                  f"    lin.weight.copy_(torch.tensor({lit(w)}, dtype=torch.float64))",
                  f"    lin.bias.copy_(torch.tensor({[float(v) for v in b]!r}, dtype=torch.float64))",
                  "lin.register_full_backward_hook(lambda m, gi, go: print('full_backward', gi, go))",
                  "layers.append(lin)"]
    act = {"ReLU": "torch.relu", "Tanh": "torch.tanh"}[case.activation]
    lines += ["h = x", "for i, lin in enumerate(layers):", "    h = lin(h)", "    if i < len(layers) - 1:",
              f"        h = {act}(h)", "        h.register_hook(lambda g: print('hook', g))",
              "loss = (h * h).sum()", "loss.backward()", "print('x.grad', x.grad)"]
    return "\n".join(lines) + "\n"
