"""A problem as real PyTorch 2.13 objects: leaf tensors, ``torch.nn`` modules, autograd Functions.

Nothing here reuses the engine's op lowering (:mod:`adjoint.lower`): expressions are
interpreted by :class:`Interp`, which hands every operator to Python exactly as written
(``a - b``, ``a @ b``, ...) so that PyTorch does its own dispatch. That is what lets
``adjoint verify`` check the lowering independently.

* Leaves: inputs and targets are ``torch.tensor`` in the run's dtype (targets never require
  grad); parameters are ``nn.Parameter`` registered on their module under the bare name, so
  a built-in ``Linear`` gets ``weight``/``bias``. Free symbols are replaced by the numbers
  under the file's ``symbols:``.
* Built-ins are the real ``nn.Linear``/``nn.ReLU``/``nn.Tanh``/``nn.Sigmoid``/``nn.Identity``.
  ``Sequential`` is :class:`TorchSequential`, an ``nn.Sequential`` whose forward is the same
  loop but tells the run which child just returned (so tensor hooks on a child's output are
  registered right then, as a user would).
* Custom modules are :class:`CustomModule`: the forward walks the parsed program; children
  are called through ``__call__`` so module hooks fire. A module with ``function:`` runs its
  forward as a ``torch.autograd.Function`` subclass named exactly ``function.name``.

The *context* object handed to the modules (see :mod:`adjoint.torchside.run`) provides
``module_returned(path, out)``, ``bind(name, tensor)``, ``callid(path)`` and ``globals``.
"""

from __future__ import annotations

from collections import OrderedDict
from fractions import Fraction

import torch
from torch import nn

from .. import syntax as X
from ..expr import simple_assigns, simple_program
from ..errors import ProblemError
from ..problem import ROOT, Function, Literal, Module, Problem, Sym

DTYPES = {"float32": torch.float32, "float64": torch.float64}

#: Each whitelisted function is exactly this torch callable (one op, one autograd node).
FUNCTIONS = {
    "relu": torch.relu, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "exp": torch.exp, "log": torch.log,
    "sin": torch.sin, "cos": torch.cos, "sqrt": torch.sqrt, "abs": torch.abs, "sum": torch.sum,
    "mean": torch.mean, "norm": torch.linalg.vector_norm, "t": torch.t,
}


# ----------------------------------------------------------------------------- literals

def number(value: Fraction) -> int | float:
    """An exact literal as the Python number a user would type: int when integral."""
    return int(value) if value.denominator == 1 else float(value)


def literal_numbers(lit: Literal, symbols: dict[str, Fraction]) -> list[Fraction]:
    out = []
    for e in lit.items:
        if isinstance(e, Sym):
            if e.name not in symbols:
                raise ProblemError(lit.loc, f"this literal uses the free symbol '{e.name}', and verify needs numbers: "
                                            f"bind it under symbols: (e.g. symbols: {{{e.name}: 0.5}})")
            out.append(symbols[e.name] * e.coeff)
        else:
            out.append(e)
    return out


def literal_tensor(lit: Literal, dtype: torch.dtype, symbols: dict[str, Fraction]) -> torch.Tensor:
    """The literal as a tensor of ``dtype``: each exact number rounded once to float64, then to dtype."""
    flat = torch.tensor([float(v) for v in literal_numbers(lit, symbols)], dtype=torch.float64)
    return flat.reshape(lit.shape).to(dtype)


# ----------------------------------------------------------------------------- expressions

class Interp:
    """Evaluate an :mod:`adjoint.expr` tree on torch tensors (never ``eval``).

    ``lookup(name, loc)`` resolves names; ``call(name, args, loc)`` handles calls that are
    not whitelisted functions (child modules); None refuses them."""

    def __init__(self, lookup, call=None):
        self.lookup = lookup
        self.call = call

    def eval(self, e: X.Expr):
        if isinstance(e, X.Num):
            return number(e.value)
        if isinstance(e, X.Name):
            return self.lookup(e.id, e.loc)
        if isinstance(e, X.NoneLit):
            return None
        if isinstance(e, X.Tup):
            return tuple(self.eval(i) for i in e.items)
        if isinstance(e, X.Subscript) and len(e.items) == 1 and isinstance(e.items[0], X.Num) and e.items[0].is_int:
            v = self.eval(e.value)
            if not isinstance(v, tuple):
                raise ProblemError(e.loc, f"'{X.to_source(e.value)}' is not a tuple; only tuples can be indexed")
            return v[int(e.items[0].value)]
        if isinstance(e, X.Neg):
            return -self.eval(e.operand)
        if isinstance(e, X.Bin):
            a = self.eval(e.left)
            b = self.eval(e.right)
            op = e.op
            if op == "+":
                return a + b
            if op == "-":
                return a - b
            if op == "*":
                return a * b
            if op == "/":
                return a / b
            if op == "**":
                return a ** b
            if op == "@":
                return a @ b
            raise ProblemError(e.loc, f"verify does not know the operator '{op}'")
        if isinstance(e, X.Call) and not e.kwargs:
            args = [self.eval(a) for a in e.args]
            fn = FUNCTIONS.get(e.func)
            if fn is not None:
                return fn(*args)
            if self.call is None:
                raise ProblemError(e.loc, f"unknown function '{e.func}'; allowed: {', '.join(FUNCTIONS)}")
            return self.call(e.func, args, e.loc)
        raise ProblemError(e.loc, f"verify does not run '{X.to_source(e)}' yet")


def env_interp(env: dict, what: str) -> Interp:
    def lookup(name, loc):
        if name in env:
            return env[name]
        raise ProblemError(loc, f"unknown name '{name}' in {what}; available: {', '.join(env)}")
    return Interp(lookup)


def run_body(hook, env: dict):
    """A hook's ``does`` lines (rebinding local names only), then its ``returns`` (None if absent)."""
    env = dict(env)
    interp = env_interp(env, f"the {hook.kind} hook '{hook.label}'")
    for a in simple_assigns(hook.does):
        env[a.name] = interp.eval(a.value)
    if hook.returns is None:
        return None
    return interp.eval(hook.returns)


# ----------------------------------------------------------------------------- modules

class TorchSequential(nn.Sequential):
    """``nn.Sequential`` with the same forward loop, reporting each child's output as it returns."""

    def __init__(self, ctx, path: str, children: "OrderedDict[str, nn.Module]", child_labels: dict[str, str]):
        super().__init__(children)
        self._adjoint_ctx = ctx
        self._adjoint_path = path
        self._adjoint_child_labels = child_labels

    def forward(self, input):
        for name, module in self._modules.items():
            input = module(input)
            self._adjoint_ctx.module_returned(self._adjoint_child_labels[name], input)
        return input


class CustomModule(nn.Module):
    """A custom module: parameters under their bare names, children as submodules, the parsed
    forward program interpreted on tensors."""

    def __init__(self, ctx, decl: Module, params: dict[str, nn.Parameter], children: dict[str, nn.Module]):
        super().__init__()
        self._adjoint_ctx = ctx
        self._adjoint_decl = decl
        self._adjoint_function = make_function(decl.function, decl) if decl.function is not None else None
        for bare, p in params.items():
            try:
                self.register_parameter(bare, p)
            except (KeyError, AttributeError) as exc:
                raise ProblemError(decl.loc, f"PyTorch cannot register a parameter named '{bare}' on an nn.Module "
                                             f"({exc}); rename it") from None
        for name, child in children.items():
            try:
                self.add_module(name, child)
            except (KeyError, AttributeError) as exc:
                raise ProblemError(decl.loc, f"PyTorch cannot register a child module named '{name}' ({exc}); "
                                             "rename it") from None

    def _bare_params(self):
        return [self._parameters[p.name.rsplit(".", 1)[-1]] for p in self._adjoint_decl.params]

    def forward(self, *args):
        decl = self._adjoint_decl
        ctx = self._adjoint_ctx
        if len(args) != len(decl.inputs):
            raise TypeError(f"forward() of '{decl.label}' takes {len(decl.inputs)} input(s), got {len(args)}")
        if self._adjoint_function is not None:
            return self._adjoint_function.apply(*args, *self._bare_params())
        callid = ctx.callid(decl.label)
        local: dict = {}
        argmap = dict(zip(decl.inputs, args))

        def lookup(name, loc):
            if name in local:
                return local[name]
            if name in argmap:
                return argmap[name]
            if decl.param(name) is not None:
                return getattr(self, name)
            if name in ctx.globals:
                return ctx.globals[name]
            raise ProblemError(loc, f"unknown name '{name}' in the forward of '{decl.label}'")

        def call(name, call_args, loc):
            child = decl.child(name)
            if child is None:
                raise ProblemError(loc, f"unknown function '{name}' in the forward of '{decl.label}'")
            out = self._modules[name](*call_args)
            ctx.module_returned(child.label, out)
            return out

        interp = Interp(lookup, call)
        assigns, returned = simple_program(decl.forward)
        for a in assigns:
            value = interp.eval(a.value)
            local[a.name] = value
            if isinstance(value, torch.Tensor):
                ctx.bind(f"{callid}.{a.name}" if decl.path else a.name, value)
        return interp.eval(returned)


def make_function(fdecl: Function, mod: Module) -> type:
    """A ``torch.autograd.Function`` subclass named ``fdecl.name`` (grad_fn: ``<name>Backward``).

    ``apply(*module_args, *module_params)``; forward evaluates the module's program (autograd
    is off inside it) and saves its inputs; backward evaluates each declared formula with the
    slot names, the forward's local names, ``output`` and ``grad_output``."""
    slots = tuple(mod.inputs) + tuple(p.name.rsplit(".", 1)[-1] for p in mod.params)

    def evaluate(tensors):
        env = dict(zip(slots, tensors))
        local: dict = {}

        def lookup(name, loc):
            if name in local:
                return local[name]
            if name in env:
                return env[name]
            raise ProblemError(loc, f"unknown name '{name}' in the forward of '{mod.label}'")

        interp = Interp(lookup)
        assigns, returned = simple_program(mod.forward)
        for a in assigns:
            local[a.name] = interp.eval(a.value)
        return interp.eval(returned), local

    def forward(ctx, *tensors):
        ctx.save_for_backward(*tensors)
        out, _ = evaluate(tensors)
        return out

    def backward(ctx, grad_output):
        tensors = ctx.saved_tensors
        output, local = evaluate(tensors)
        env = dict(zip(slots, tensors))
        env.update(local)
        env["output"] = output
        env["grad_output"] = grad_output
        grads = []
        for slot, formula in fdecl.grads:
            if formula is None:
                grads.append(None)
            else:
                grads.append(env_interp(env, f"the backward formula for '{slot}' of {fdecl.name}").eval(formula))
        return tuple(grads)

    return type(fdecl.name, (torch.autograd.Function,),
                {"forward": staticmethod(forward), "backward": staticmethod(backward),
                 "__module__": __name__})


def build_module(mod: Module, ctx, params: dict[str, nn.Parameter], dtype: torch.dtype) -> nn.Module:
    """The torch module for ``mod`` (recursively); ``params`` maps full dotted names to Parameters."""
    own = {p.name.rsplit(".", 1)[-1]: params[p.name] for p in mod.params}
    if mod.type == "Linear":
        weight = own["weight"]
        out_f, in_f = weight.shape
        lin = nn.Linear(in_f, out_f, bias="bias" in own, dtype=dtype)
        lin.weight = weight
        if "bias" in own:
            lin.bias = own["bias"]
        return lin
    if mod.type in ("ReLU", "Tanh", "Sigmoid", "Identity"):
        return getattr(nn, mod.type)()
    children = OrderedDict((c.name, build_module(c, ctx, params, dtype)) for c in mod.children)
    if mod.type == "Sequential":
        return TorchSequential(ctx, mod.path, children, {c.name: c.label for c in mod.children})
    return CustomModule(ctx, mod, own, children)


def module_table(problem: Problem, root: nn.Module) -> dict[str, nn.Module]:
    """Module label ("model" for the root, else the dotted path) -> torch module."""
    table = {ROOT: root}
    for name, m in root.named_modules():
        if name:
            table[name] = m
    return table
