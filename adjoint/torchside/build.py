"""A problem's model as real ``torch.nn`` modules.

* A built-in type is the real class, ``getattr(torch.nn, type)(**args)`` with the file's
  constructor arguments (exact numbers as Python numbers: ints stay ints, ``eps`` and other
  float arguments are floats rounded once; a loss's tensor arguments ``weight`` /
  ``pos_weight`` are passed as tensors), moved to the run's dtype, and its parameters and
  buffers overwritten with the file's values under the names ``named_parameters()`` /
  ``named_buffers()`` give them (``out_proj.weight``), so a module with ``init`` or given
  values holds exactly those. ``requires_grad: false`` is each parameter's
  ``requires_grad_(False)``; ``training`` is set per module (``module.train(flag)``, parents
  first, so a child's own setting wins).
* ``Sequential`` is :class:`TorchSequential`: ``nn.Sequential``'s loop, each child called
  through the run (so its call is counted, named and scoped like any other). ``ModuleList``
  is ``nn.ModuleList`` (children ``0``, ``1``, ...; a forward calls ``layers[0](x)``).
* A custom module is :class:`CustomModule`: parameters and buffers under their bare names,
  children as submodules, a ``forward(*args, **kwargs)`` that binds the arguments as Python
  does (the file's ``inputs`` with their defaults) and runs the parsed program on tensors.
  With ``function:`` it runs as a ``torch.autograd.Function`` subclass named as declared.

The *run* object handed to the modules (:class:`adjoint.torchside.run.Session`) provides
``call_module(decl, args, kwargs)``, ``program(scope)``, ``lookup_global(name)`` and
``bind_local(callid, name, value)``.
"""

from __future__ import annotations

import inspect

import types

import torch
from torch import nn

from adjoint.format import module_signatures as nn_types
from adjoint.format.errors import Loc, ProblemError
from adjoint.format import syntax as S
from adjoint.format.problem import ROOT, Function, Module
from adjoint.torchside.program import EnvScope
from adjoint.torchside.setup_raised import SetupRaised
from adjoint.torchside.unfinished import watch_call
from adjoint.torchside.values import DTYPES, literal_tensor, number


# ----------------------------------------------------------------------------- built-in types

def constructor_args(decl: Module, dtype: torch.dtype, symbols: dict) -> dict:
    """The file's ``args`` as the Python values a user passes to the class: only those the file
    wrote (``decl.given``), so every default is the constructor's own, and a wrong default in
    the format's table of signatures (which the engine reads) is a mismatch, not a shared
    mistake."""
    spec = nn_types.lookup(decl.type)
    out = {}
    for name, value in decl.args:
        if decl.given is not None and name not in decl.given:
            continue
        arg = spec.arg(name) if spec is not None else None
        if arg is not None and arg.kind in ("float", "opt_float") and value is not None:
            out[name] = float(value)
        else:
            out[name] = number(value)
    for b in decl.buffers:   # a loss's weight / pos_weight: tensors the constructor registers as buffers
        bare = b.name.rsplit(".", 1)[-1]
        if bare in nn_types.TENSOR_ARGS:
            out[bare] = literal_tensor(b.value, DTYPES[b.dtype] if b.dtype is not None else dtype, symbols)
    return out


def builtin(decl: Module, dtype: torch.dtype, symbols: dict, run=None) -> nn.Module:
    """``torch.nn.TYPE(**args)`` as a script calls it; with ``run``, the constructor's warnings (an
    ``nn.LSTM(..., dropout=0.2)`` of one layer) are kept in ``run.setup_warnings`` (``during: setup``),
    in the order the modules are built."""
    cls = getattr(nn, decl.type, None)
    if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
        raise ProblemError(decl.loc, f"torch.nn has no module class '{decl.type}'")
    args = constructor_args(decl, dtype, symbols)
    if "dtype" in inspect.signature(cls).parameters:
        # made in the dtype (factory_kwargs), as nn.BatchNorm1d(2, dtype=torch.float64) is: its
        # in-place initialisation's version counters stay (.to(torch.float64) would make fresh
        # float buffers at version 0)
        args["dtype"] = dtype
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            module = cls(**args)
        except (TypeError, ValueError, RuntimeError, AssertionError) as exc:
            module = SetupRaised(exc)
    if run is not None:
        kept = run.__dict__.setdefault("setup_warnings", [])
        kept.extend({"category": w.category.__name__, "message": str(w.message), "during": "setup"} for w in caught)
    if isinstance(module, SetupRaised):
        raise module from None
    if decl.weight_norm is not None and decl.weight_norm_legacy:   # the older WeightNorm forward pre-hook
        from torch.nn.utils import weight_norm as legacy_weight_norm
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")   # its deprecation FutureWarning, a setup warning of the answer
            try:
                module = legacy_weight_norm(module, "weight", dim=None if decl.weight_norm == -1 else decl.weight_norm)
            except IndexError as exc:   # a dim outside the weight's: norm_except_dim's transpose (the answer)
                module = SetupRaised(exc)
        if run is not None:
            run.__dict__.setdefault("setup_warnings", []).extend(
                {"category": w.category.__name__, "message": str(w.message), "during": "setup"} for w in caught)
        if isinstance(module, SetupRaised):
            raise module from None
    elif decl.weight_norm is not None:   # ParametrizedLinear and kin: weight from original0 (g), original1 (v)
        from torch.nn.utils.parametrizations import weight_norm
        try:
            module = weight_norm(module, "weight", dim=None if decl.weight_norm == -1 else decl.weight_norm)
        except IndexError as exc:   # a dim outside the weight's: right_inverse's transpose (the answer)
            raise SetupRaised(exc) from None
    if decl.spectral_norm is not None:   # ParametrizedLinear and kin: weight from original, buffers _u, _v
        from torch.nn.utils.parametrizations import spectral_norm
        sn = decl.spectral_norm
        try:
            module = spectral_norm(module, "weight", n_power_iterations=sn.n_power_iterations, eps=float(sn.eps),
                                   dim=sn.dim)
        except (IndexError, ValueError) as exc:   # _SpectralNorm's checks (the answer)
            raise SetupRaised(exc) from None
    return module.to(dtype)


def fill(decl: Module, module: nn.Module, dtype: torch.dtype, symbols: dict) -> dict[str, torch.Tensor]:
    """Give a built-in the file's parameters and buffers; returns them by full name.

    Each is a fresh tensor put in place of the one the constructor made (``setattr`` on the
    owning module, as ``module.weight = nn.Parameter(...)``), so one the file wrote starts at
    version 0 like any leaf a user makes (PyTorch's error messages quote version counters), and
    one it did not write at the constructor's version (``_own``)."""
    prefix = f"{decl.path}." if decl.path else ""
    params = dict(module.named_parameters())
    buffers = dict(module.named_buffers())
    out: dict[str, torch.Tensor] = {}
    for d in decl.params:
        rel = d.name[len(prefix):]
        if rel not in params:
            raise ProblemError(d.loc, f"torch.nn.{decl.type} has no parameter '{rel}' (it has: "
                                      f"{', '.join(params) or 'none'})")
        value = _own(params[rel]) if d.default else \
            literal_tensor(d.value, DTYPES[d.dtype] if d.dtype is not None else params[rel].dtype, symbols)
        if tuple(value.shape) != tuple(params[rel].shape):
            raise ProblemError(d.loc, f"'{d.name}' has shape {list(value.shape)} but torch.nn.{decl.type}'s "
                                      f"{rel} has {list(params[rel].shape)}")
        out[d.name] = _put(module, rel, nn.Parameter(value, requires_grad=d.requires_grad))
    for d in decl.buffers:
        rel = d.name[len(prefix):]
        if buffers.get(rel) is None:
            raise ProblemError(d.loc, f"torch.nn.{decl.type} has no buffer '{rel}' with these args (it has: "
                                      f"{', '.join(buffers) or 'none'})")
        value = _own(buffers[rel]) if d.default else literal_tensor(d.value, buffers[rel].dtype, symbols)
        out[d.name] = _put(module, rel, value)
    return out


def _own(tensor: torch.Tensor) -> torch.Tensor:
    """A tensor the file did not write (``TensorDecl.default``): the constructor's own value and
    version counter (its in-place initialisation's writes), in a fresh tensor, never the format's
    table of defaults or versions (which the engine reads: verify holds it to this)."""
    own = tensor.detach().clone()
    torch._C._autograd._unsafe_set_version_counter((own,), (tensor._version,))
    return own


def _put(module: nn.Module, rel: str, tensor: torch.Tensor) -> torch.Tensor:
    owner, _, attr = rel.rpartition(".")
    setattr(module.get_submodule(owner) if owner else module, attr, tensor)
    return tensor


# ----------------------------------------------------------------------------- containers and custom modules

class TorchSequential(nn.Sequential):
    """``nn.Sequential`` whose loop calls each child through the run."""

    def __init__(self, run, decl: Module, children: dict[str, nn.Module]):
        super().__init__()
        for name, child in children.items():
            self.add_module(name, child)
        self._adjoint_run = run
        self._adjoint_children = [c for c in decl.children]

    def forward(self, input):
        for child in self._adjoint_children:
            input = self._adjoint_run.call_module(child, [input], {})
        return input

    forward.__qualname__ = "Sequential.forward"   # CPython's binding errors name it as nn.Sequential's own


class CustomModule(nn.Module):
    """A custom module: the parsed forward program, run on tensors."""

    def __init__(self, run, decl: Module, params: dict[str, torch.Tensor], buffers: dict[str, torch.Tensor],
                 children: dict[str, nn.Module], dtype: torch.dtype):
        super().__init__()
        self._adjoint_run = run
        self._adjoint_decl = decl
        self._adjoint_function = make_function(decl, run) if decl.function is not None else None
        for bare, p in params.items():
            self._register(decl.loc, "parameter", bare, lambda: self.register_parameter(bare, p))
        for bare, b in buffers.items():
            self._register(decl.loc, "buffer", bare, lambda: self.register_buffer(bare, b))
        for name, child in children.items():
            self._register(decl.loc, "child module", name, lambda: self.add_module(name, child))

    @staticmethod
    def _register(loc: Loc, what: str, name: str, register) -> None:
        try:
            register()
        except (KeyError, AttributeError, TypeError) as exc:
            raise ProblemError(loc, f"PyTorch cannot register a {what} named '{name}' on an nn.Module ({exc}); "
                                    "rename it") from None

    def forward(self, *args, **kwargs):
        decl = self._adjoint_decl
        if self._adjoint_function is None:   # CPython's own binding of forward(self, INPUTS), its own TypeError
            signature_of(decl)(self, *args, **kwargs)
        bound = bind_arguments(decl, args, kwargs)
        if self._adjoint_function is not None:
            tensors = [bound[n] for n in decl.inputs]
            params = [self._parameters[p.name.rsplit(".", 1)[-1]] for p in decl.params]
            return watch_call(self._adjoint_run.log, self._adjoint_function.apply, *tensors, *params,
                              node_name=self._adjoint_function.__name__ + "Backward")
        scope = ModuleScope(self._adjoint_run, decl, self, bound)
        return self._adjoint_run.program(scope).run(decl.forward)


def _signature_template(self):
    return None


def signature_of(decl: Module):
    """A function ``CustomModule.forward(self, INPUTS)`` with the declared inputs and defaults and
    an empty body, built from a code object (no source is compiled): calling it makes CPython
    bind the arguments as a user's own forward would, and raise its own TypeError when they do
    not bind."""
    names = tuple(decl.inputs)
    defaults = dict(decl.input_defaults)
    trailing = []
    for n in reversed(names):   # Python's defaults are the trailing parameters'
        if n not in defaults:
            break
        trailing.insert(0, number(defaults[n]))
    code = _signature_template.__code__.replace(
        co_argcount=len(names) + 1, co_varnames=("self",) + names, co_nlocals=len(names) + 1,
        co_name="forward", co_qualname="CustomModule.forward")
    return types.FunctionType(code, {}, "forward", tuple(trailing) or None)


def bind_arguments(decl: Module, args: tuple, kwargs: dict) -> dict:
    """Python's binding of a call to ``forward(self, <inputs with defaults>)``."""
    names = list(decl.inputs)
    if len(args) > len(names):
        raise TypeError(f"forward() takes {len(names) + 1} positional arguments but {len(args) + 1} were given")
    bound = dict(zip(names, args))
    for k, v in kwargs.items():
        if k not in names:
            raise TypeError(f"forward() got an unexpected keyword argument '{k}'")
        if k in bound:
            raise TypeError(f"forward() got multiple values for argument '{k}'")
        bound[k] = v
    defaults = dict(decl.input_defaults)
    for n in names:
        if n not in bound:
            if n not in defaults:
                raise TypeError(f"forward() missing 1 required positional argument: '{n}'")
            bound[n] = number(defaults[n])
    return bound


class ModuleScope:
    """Names inside a custom forward: locals, arguments, own parameters and buffers, children
    (called, never read), then the problem's inputs and targets. A tensor assigned to a name is
    named ``CALLID.NAME`` (the root's: ``NAME``)."""

    def __init__(self, run, decl: Module, module: nn.Module, args: dict):
        self.run = run
        self.decl = decl
        self.module = module
        self.args = args
        self.local: dict = {}
        self.callid = run.current_callid(decl.label)
        # name -> the statement making its tensor require grad in place (its hooks may wait for it)
        self.enabling = S.requires_grad_statements(decl.forward)

    def lookup(self, name: str, loc: Loc):
        if name in self.local:
            return self.local[name]
        if name in self.args:
            return self.args[name]
        if name in self.module._parameters:
            return self.module._parameters[name]
        if name in self.module._buffers:
            return self.module._buffers[name]
        if name in self.decl.uses:   # a closure's name: the caller's tensor
            return self.run.closures[self.decl.label][name]
        return self.run.lookup_global(name, loc, f"the forward of '{self.decl.label}'")

    def together(self):
        """Names one statement binds (``a, b = ...``): their hooks go on after it, in the file's order."""
        return self.run.hooks.together()

    def assign(self, name: str, value, loc: Loc) -> None:
        self.local[name] = value
        if isinstance(value, torch.Tensor):
            later = self.enabling.get(name)
            self.run.bind(f"{self.callid}.{name}" if self.decl.path else name, value,
                          until=None if later is None else (id(self), id(later)))

    def statement_ran(self, stmt) -> None:
        """A statement of the forward ran: if it made a name's tensor require grad, the hooks on
        that name a user could not register at its line go on now (Hooks.statement_ran)."""
        if self.enabling and any(s is stmt for s in self.enabling.values()):
            self.run.hooks.statement_ran((id(self), id(stmt)))

    def child(self, name: str):
        decl = self.decl
        for part in name.split("."):
            decl = decl.child(part) if decl is not None else None
        return decl

    def call_child(self, name: str, args: list, kwargs: dict, loc: Loc):
        self.capture(self.child(name), loc)
        return self.run.call_module(self.child(name), args, kwargs)

    def checkpoint(self, name: str, args: list, kwargs: dict, loc: Loc):
        from adjoint.torchside.checkpoint import checkpoint
        self.capture(self.child(name), loc)
        return checkpoint(self.run, self.child(name), args, kwargs)

    def checkpoint_sequential(self, name: str, segments, inp, kwargs: dict, loc: Loc):
        from adjoint.torchside.checkpoint import checkpoint_sequential
        return checkpoint_sequential(self.run, self.child(name), segments, inp, kwargs, loc)

    def capture(self, child, loc: Loc) -> None:
        """``uses:``: the names the child's forward reads from this caller, as a closure would."""
        if child.uses and self.run.replay is None:
            self.run.closures[child.label] = {n: self.lookup(n, loc) for n in child.uses}


# ----------------------------------------------------------------------------- custom autograd.Function

def make_function(decl: Module, run) -> type:
    """A ``torch.autograd.Function`` subclass named ``function.name`` (its node: ``<name>Backward``).

    ``apply(*inputs, *params)``; ``forward`` runs the module's program (grad mode is off inside
    it) and saves every input with ``ctx.save_for_backward`` (packed after the forward);
    ``backward`` unpacks them, runs the program again for its local names and evaluates each
    declared formula with the slot names, those locals, ``output`` and ``grad_output`` (with a
    forward returning a tuple, both are tuples: ``grad_output[1]``)."""
    fdecl: Function = decl.function
    slots = tuple(decl.inputs) + tuple(p.name.rsplit(".", 1)[-1] for p in decl.params)

    def evaluate(tensors, make=run.program):
        env = dict(zip(slots, tensors))
        program = make(EnvScope(env, f"the forward of '{decl.label}'"))
        out = program.run(decl.forward)
        return out, {k: v for k, v in env.items() if k not in slots}

    def forward(ctx, *tensors):
        if fdecl.save is None:   # every tensor input; a Python argument is kept on ctx (ctx.a = a)
            ctx.save_for_backward(*[t for t in tensors if isinstance(t, torch.Tensor)])
            ctx.plain = {i: t for i, t in enumerate(tensors) if not isinstance(t, torch.Tensor)}
            out, _ = evaluate(tensors)
            return out
        out, local = evaluate(tensors)   # save: ctx.save_for_backward(*save) after the forward's body
        env = dict(zip(slots, tensors))
        env.update(local)
        env["output"] = out
        if fdecl.save:
            ctx.save_for_backward(*[run.program(EnvScope(dict(env), f"the save of {fdecl.name}")).eval(e)
                                    for e in fdecl.save])
        if fdecl.dirty:   # ctx.mark_dirty(*dirty): the inputs the forward wrote in place
            ctx.mark_dirty(*[tensors[slots.index(name)] for name, _ in fdecl.dirty])
        return out

    def backward(ctx, *grad_outputs):
        grad_output = grad_outputs[0] if len(grad_outputs) == 1 else grad_outputs   # a tuple forward: a tuple
        # save: [] -- the Function saves nothing and its backward never reads ctx.saved_tensors (which,
        # read after the graph was freed, raises even when empty)
        tensors = ctx.saved_tensors if fdecl.save != () else ()
        if fdecl.save is None:
            kept = iter(tensors)
            tensors = [ctx.plain[i] if i in ctx.plain else next(kept) for i in range(len(slots))]
            output, local = evaluate(tensors, run.backward_program)
            env = dict(zip(slots, tensors))
            env.update(local)
            env["output"] = output
        else:   # the backward sees what it saved, nothing else
            env = {"saved": tensors}
        env["grad_output"] = grad_output
        if fdecl.does:   # the backward's statements; the forward's named tensors as a closure
            # the engine runs this: a value kept alive by the run would be an extra reference to
            # the gradient returned, and AccumulateGrad would copy it instead of taking it
            program = run.backward_program(EnvScope(env, f"the backward of {fdecl.name}", run))
            for stmt in fdecl.does:
                program.execute(stmt)
        grads = []
        for slot, formula in fdecl.grads:
            if formula is None:
                grads.append(None)
            else:
                scope = EnvScope(dict(env), f"the backward formula for '{slot}' of {fdecl.name}")
                grads.append(run.backward_program(scope).eval(formula))
        return tuple(grads)

    return type(fdecl.name, (torch.autograd.Function,),
                {"forward": staticmethod(forward), "backward": staticmethod(backward), "__module__": __name__})


# ----------------------------------------------------------------------------- the tree

def build(run, root: Module, dtype: torch.dtype, symbols: dict) -> tuple[nn.Module, dict[str, torch.Tensor]]:
    """The torch module tree for ``root``; also every parameter and buffer by full name."""
    tensors: dict[str, torch.Tensor] = {}
    module = _build(run, root, dtype, symbols, tensors)
    for decl in root.walk():   # head.weight = emb.weight: one Parameter in both modules (adjoint.format.tying)
        for p in decl.params:
            if p.tied is not None:
                tensors[p.name] = _put(module, p.name, tensors[p.tied])
    for decl in root.walk():   # parents first: a child's own training flag wins
        target = module if not decl.path else module.get_submodule(decl.path)
        target.train(decl.training)
    for decl in root.walk():   # version: N -- the counter a constructor's in-place initialisation left
        for d in tuple(decl.params) + tuple(decl.buffers):
            if d.version and d.tied is None and not d.default:   # (a default keeps the constructor's: _own)
                torch._C._autograd._unsafe_set_version_counter((tensors[d.name],), (d.version,))
    return module, tensors


def _build(run, decl: Module, dtype: torch.dtype, symbols: dict, tensors: dict) -> nn.Module:
    from adjoint.format.composite import STACKS
    if decl.type is not None and (decl.children or decl.type in STACKS) and \
            decl.type not in ("Sequential", "ModuleList", "ModuleDict"):   # (a stack whose layer raises has no children)
        from adjoint.torchside.composite import count_children   # TransformerEncoderLayer: the real class
        if decl.type in STACKS:   # copies of a layer passed as an argument (nn.Transformer: two stacks)
            from adjoint.torchside.composite import build_stack, count_tree
            module = build_stack(run, decl, dtype)
            for d in list(decl.walk())[1:]:
                tensors.update(fill(d, module.get_submodule(d.path[len(decl.path) + 1 if decl.path else 0:]), dtype,
                                    symbols))
            count_tree(run, decl, module)
            return module
        module = builtin(decl, dtype, symbols, run)
        for child in decl.children:
            tensors.update(fill(child, module.get_submodule(child.name), dtype, symbols))
        count_children(run, decl, module)
        return module
    children = {c.name: _build(run, c, dtype, symbols, tensors) for c in decl.children}
    if decl.type == "Sequential":
        return TorchSequential(run, decl, children)
    if decl.type == "ModuleList":
        return nn.ModuleList(list(children.values()))
    if decl.type == "ModuleDict":
        return nn.ModuleDict(children)
    if decl.type is not None:
        module = builtin(decl, dtype, symbols, run)
        tensors.update(fill(decl, module, dtype, symbols))
        return module
    params, buffers = {}, {}
    for d in decl.params:
        p = nn.Parameter(literal_tensor(d.value, DTYPES[d.dtype] if d.dtype is not None else dtype, symbols),
                         requires_grad=d.requires_grad)
        params[d.name.rsplit(".", 1)[-1]] = p
        tensors[d.name] = p
    for d in decl.buffers:
        b = literal_tensor(d.value, DTYPES[d.dtype] if d.dtype is not None else dtype, symbols)
        buffers[d.name.rsplit(".", 1)[-1]] = b
        tensors[d.name] = b
    return CustomModule(run, decl, params, buffers, children, dtype)


def module_paths(root: nn.Module) -> dict[str, nn.Module]:
    """Module label ("model" for the root, else the dotted path) -> torch module."""
    table = {ROOT: root}
    for name, m in root.named_modules():
        if name:
            table[name] = m
    return table
