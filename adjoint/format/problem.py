"""A problem file as immutable records: what :mod:`adjoint.format.validate` builds from the YAML.

These records are the interface between reading a file and running it: the runtime
(:mod:`adjoint.engine.forward`, :mod:`adjoint.engine.reverse`), the torch side and the renderers read
them and nothing else of the file. Contract: v1 and v2 (user reference: ``docs/format.md``).
Values are exact (``Fraction``); expressions and forwards are :mod:`adjoint.format.syntax` records.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from fractions import Fraction

import numpy as np

from adjoint.format.errors import Loc, ProblemError

MAX_ELEMENTS = 100_000

BUILTIN_TYPES = ("Linear", "ReLU", "Tanh", "Sigmoid", "Identity", "Sequential")   # v1's; v2: adjoint.format.module_signatures
ELEMENTWISE_TYPES = ("ReLU", "Tanh", "Sigmoid", "Identity")
MODULE_HOOK_KINDS = ("full_backward", "full_backward_pre", "backward", "forward", "forward_pre")
TENSOR_HOOK_KINDS = ("hook", "retain_grad", "post_accumulate_grad")
NODE_HOOK_KINDS = ("pre", "post")
ROOT = "model"  # how hooks name the root module
OUTPUT = "y"    # how the loss names the model's output
#: containers without a forward: their parent calls their items (``layers[0](x)``, ``blocks.first(x)``)
HOLDERS = ("ModuleList", "ModuleDict")


# ----------------------------------------------------------------------------- values

@dataclass(frozen=True)
class Sym:
    """A free symbol, optionally scaled: ``coeff * name``."""

    name: str
    coeff: Fraction = Fraction(1)


@dataclass(frozen=True)
class Infinite:
    """``inf`` or ``-inf``: an element of a tensor literal (a float mask: 0 where a score is
    kept, ``-inf`` where it is masked out; only tensors that do not require grad hold one,
    contract v3), and Python's ``float("-inf")`` in an expression (adjoint.engine.infinity)."""

    negative: bool

    @property
    def text(self) -> str:
        """As an op's params carry it (``adjoint.values.mathtree.number_text`` reads it)."""
        return "-inf" if self.negative else "inf"

    def __float__(self) -> float:
        return float("-inf") if self.negative else float("inf")

    def __str__(self) -> str:
        return self.text


Element = Fraction | Sym | Infinite


@dataclass(frozen=True)
class Literal:
    """A tensor literal of the problem file: its shape and items."""

    shape: tuple[int, ...]
    items: tuple[Element, ...]  # row-major
    loc: Loc
    # a value backend's own form of this literal, made once (a pure function of the items: the
    # exact backend keeps its integer array here, so that solving a problem again, or each of
    # its variants, does not convert 100,000 numbers again)
    memo: dict = field(default_factory=dict, compare=False, hash=False, repr=False)
    # the row-major positions of the zeros written as a float with a minus sign (``-0.0``,
    # ``-0e0``; ``-0`` is Python's int 0) or read as -0.0 from a side file: PyTorch holds them with
    # the sign bit set, which sqrt's, 1 / x's and atan2's results and derivatives follow
    negzero: tuple[int, ...] = ()

    def negzero_mask(self):
        """The literal's -0.0 as a bool array of its shape (None: none), for a float dtype."""
        if not self.negzero:
            return None
        mask = np.zeros(len(self.items), dtype=bool)
        mask[list(self.negzero)] = True
        return mask.reshape(self.shape)

    @property
    def symbols(self) -> list[str]:
        if "symbols" not in self.memo:
            # a side file's items (adjoint.format.sidefiles.FileItems, not a tuple) are numbers only
            self.memo["symbols"] = sorted({e.name for e in self.items if isinstance(e, Sym)}) \
                if isinstance(self.items, tuple) else []
        return self.memo["symbols"]


@dataclass(frozen=True)
class TensorDecl:
    """An input, target, parameter or buffer. ``name`` is the full dotted tensor name.

    ``dtype`` is None for the problem's float dtype, or ``"int64"`` (class indices,
    embedding indices, ``num_batches_tracked``): then every item is an integer."""

    name: str
    value: Literal
    requires_grad: bool
    loc: Loc
    dtype: str | None = None
    tied: str | None = None      # a parameter that *is* another one (params: {weight: {tied: emb.weight}}):
                                 # that one's full name; value, requires_grad and dtype are its (adjoint.format.tying)
    version: int = 0             # a parameter's or buffer's t._version when the file starts (version: N; a
                                 # built-in module's constructor writes its tensors in place: 1, as import writes)
    default: bool = False        # a built-in's parameter or buffer the file did not write: the layer's own
                                 # value (a norm's ones, a bias's zeros, running_var's ones), from the table

    def __post_init__(self):
        if self.value.negzero and self.dtype in ("int64", "bool"):   # torch.tensor([-0.0], dtype=torch.int64) is 0
            object.__setattr__(self, "value", replace(self.value, negzero=()))


# ----------------------------------------------------------------------------- modules

@dataclass(frozen=True)
class Function:
    """Extension: the module's forward runs as one hand-written ``torch.autograd.Function``.

    ``grads`` has one entry per Function input (the module's positional inputs, then its
    parameters), each the declared backward formula or None (the backward returns None)."""

    name: str
    grads: tuple[tuple[str, object | None], ...]   # (slot, syntax.Expr | None)
    loc: Loc
    save: tuple | None = None    # ctx.save_for_backward(*save): syntax.Expr over the inputs, the forward's
                                 # names and output; None: every input is saved (and the formulas see them)
    dirty: tuple = ()            # ctx.mark_dirty(*dirty): (slot name, Loc) of inputs the forward modifies in place
    does: tuple = ()             # statements the backward runs before its formulas (syntax.Stmt; with save: only)


ArgValue = Fraction | int | bool | str | None | tuple  # tuple: of ints (kernel_size: [3, 3])


@dataclass(frozen=True)
class SpectralNorm:
    """``torch.nn.utils.parametrizations.spectral_norm(module, "weight", n_power_iterations, eps, dim)``
    on a built-in's weight (adjoint.format.spectral_norm): ``dim`` as ``_SpectralNorm`` keeps it
    (non-negative)."""

    n_power_iterations: int
    eps: Fraction
    dim: int


@dataclass(frozen=True)
class Module:
    """A module of the problem's model: its type, parameters, children and forward."""

    path: str                    # "" for the root; "layers.0" for a ModuleList item
    name: str                    # key under its parent's children; "model" for the root
    type: str | None             # a built-in type (a torch.nn class name), or None for a custom module
    params: tuple[TensorDecl, ...]   # as named_parameters() names them, given or filled by init
    children: tuple["Module", ...]
    inputs: tuple[str, ...]      # forward's argument names
    forward: object | None       # custom modules: the program (syntax.Program)
    function: Function | None
    loc: Loc
    args: tuple[tuple[str, ArgValue], ...] = ()  # constructor keyword arguments as PyTorch names them,
                                                 # defaults filled in (built-in types)
    buffers: tuple[TensorDecl, ...] = ()         # as named_buffers() names them; defaults filled in
    training: bool = True                        # resolved: own setting, else the parent's
    input_defaults: tuple[tuple[str, ArgValue], ...] = ()   # inputs: [x, {scale: 1}]
    mask: Literal | None = None                  # Dropout in training mode: the keep-mask (0/1)
    is_list: bool = False                        # ModuleList: children named 0, 1, ...
    uses: tuple[str, ...] = ()                   # names its forward reads from its caller's (a closure)
    plain: bool = False                          # a plain Python function (a lambda handed to checkpoint),
                                                 # not an nn.Module: its calls run no hook of any kind
    setup_error: tuple[str, str] | None = None   # built-in types: what the constructor raises
                                                 # (exception class, PyTorch's message), the answer
    given: tuple[str, ...] | None = None         # built-in types: the args the file wrote (the rest of
                                                 # ``args`` are defaults); None: every one counts as written
    weight_norm: int | None = None               # built-in types: the dim of
                                                 # torch.nn.utils.parametrizations.weight_norm (adjoint.format.weight_norm)
    weight_norm_legacy: bool = False             # ... or of the older torch.nn.utils.weight_norm (a forward
                                                 # pre-hook; params weight_g, weight_v): weight_norm: {legacy: true}
    spectral_norm: SpectralNorm | None = None    # built-in types: torch.nn.utils.parametrizations.spectral_norm
                                                 # (adjoint.format.spectral_norm)

    @property
    def label(self) -> str:
        return self.path or ROOT

    def arg(self, name: str, default: ArgValue = None) -> ArgValue:
        for k, v in self.args:
            if k == name:
                return v
        return default

    def child(self, name: str) -> "Module | None":
        for c in self.children:
            if c.name == name:
                return c
        return None

    def param(self, name: str) -> TensorDecl | None:
        for p in self.params:
            if p.name.rsplit(".", 1)[-1] == name:
                return p
        return None

    def buffer(self, name: str) -> TensorDecl | None:
        for b in self.buffers:
            if b.name.rsplit(".", 1)[-1] == name:
                return b
        return None

    def walk(self):
        yield self
        for c in self.children:
            yield from c.walk()


# ----------------------------------------------------------------------------- hooks

@dataclass(frozen=True)
class Hook:
    """One declared hook. ``on`` says what it is registered on:

    * ``module``: ``target`` a module path; ``kind`` forward_pre, forward, full_backward,
      full_backward_pre, backward (the legacy register_backward_hook);
    * ``global``: ``register_module_KIND_hook`` (``kind`` as for modules; ``target`` "");
    * ``tensor``: ``target`` a tensor name; ``kind`` hook, retain_grad, post_accumulate_grad;
    * ``node``: ``target`` a tensor name whose grad_fn (a leaf: its AccumulateGrad) gets it;
      ``kind`` pre or post;
    * ``multi_grad``: ``tensors`` the listed names, ``mode`` all or any; ``target`` them joined by ",";
    * ``saved_tensors``: ``pack``/``unpack`` expressions, ``scope`` module paths (None: the
      whole forward, loss included); ``kind`` "saved_tensors", its calls are ``pack``/``unpack``;
    * ``saved``: ``target`` a tensor name, ``slot`` one saved tensor of its grad_fn, ``pack``/``unpack``
      (``kind`` "saved_tensors"); ``disable_saved_tensors_hooks``: ``message``, ``scope`` as above;
    * ``save_on_cpu``: ``torch.autograd.graph.save_on_cpu(pin_memory)`` (``kind`` "save_on_cpu",
      ``scope`` as above): PyTorch's own pack/unpack pair, no call of the answer.
    """

    index: int                   # position in the list it was declared in
    on: str
    target: str
    kind: str
    returns: object | None       # syntax.Expr
    does: tuple                  # extension: statements (syntax.Stmt) run before returns
    remove: str | None           # before_backward | after_backward | None
    when: str                    # before_forward | after_forward (extension)
    label: str
    loc: Loc
    prepend: bool = False
    with_kwargs: bool = False
    always_call: bool = False
    tensors: tuple[str, ...] = ()        # multi_grad
    mode: str = "all"                    # multi_grad: all | any
    pack: object | None = None           # saved_tensors: syntax.Expr of x
    unpack: object | None = None         # saved_tensors: syntax.Expr of x
    scope: tuple[str, ...] | None = None  # saved_tensors: module paths; None = the whole forward
    raises: str | None = None            # raises RuntimeError(raises) when called (the message)
    raises_type: str = "RuntimeError"    # raises: {type: NAME}: the class raised (a custom exception class)
    raises_in: str | None = None         # raises: {in: pack | unpack}: which call of a saved_tensors hook raises
    removes: tuple[int, ...] = ()        # removes these hooks' handles (same list) when it runs
    registers: tuple[int, ...] = ()      # registers these hooks (same list) when it runs (after removes)
    slot: str | None = None              # saved: the saved tensor's name on the node (grad_fn._raw_saved_SLOT)
    message: str | None = None           # disable_saved_tensors_hooks: the error message
    pin_memory: bool = False             # save_on_cpu: its pin_memory argument
    during: tuple[int, ...] | None = None  # saved_tensors: the steps the with block is around (None: every forward)
    next: tuple[int, ...] = ()           # node: grad_fn.next_functions[i][0]... walked from the target's grad_fn
    optimizer: object | None = None      # post_accumulate_grad: an optimizer over [tensor] (format.optimizers), ``optim``
    pack_params: tuple[str, ...] = ("x",)  # saved: the pack hook's parameters (PyTorch hands it one tensor)

    @property
    def is_module_backward(self) -> bool:
        return self.on in ("module", "global") and self.kind in ("full_backward", "full_backward_pre", "backward")


# ----------------------------------------------------------------------------- running

@dataclass(frozen=True)
class Backward:
    """How a variant runs backward: backward() or autograd.grad, and with what."""

    method: str                  # backward | grad
    inputs: tuple[tuple[str, Loc], ...]
    grad_output: Literal | None
    loc: Loc | None
    retain_graph: bool = False   # as given; absent: False (with create_graph: PyTorch's default, create_graph)
    second: object | None = None  # create_graph, as:, root:/roots:, allow_unused, ... (adjoint.format.second_steps.SecondOrder)
    empty_inputs: bool = False   # inputs: [] -- PyTorch refuses it when the backward is called (an answer)
    retain_given: bool = False   # retain_graph written in the file (False given frees the graph even with create_graph)

    def retains(self, create_graph: bool) -> bool:
        """``retain_graph`` as PyTorch takes it: when not given, it defaults to ``create_graph``."""
        return self.retain_graph if self.retain_given else create_graph


@dataclass(frozen=True)
class Step:
    """One entry of ``steps:``.

    ``kind``: forward (``inputs`` replaces inputs entry by entry), backward (``backward``),
    register / remove (``hooks``: indices into the variant's hook list), zero_grad, step
    (plain SGD with ``lr``)."""

    kind: str
    loc: Loc
    inputs: tuple[TensorDecl, ...] = ()
    backward: Backward | None = None
    hooks: tuple[int, ...] = ()
    lr: Fraction | None = None
    set_to_none: bool = True     # zero_grad: False zeroes each existing .grad in place instead
    leaves: tuple = ()           # zero_grad: only these leaves' .grad (names; empty: every leaf)
    optimizer: object | None = None   # step: torch.optim.Adam over model.parameters() (format.optimizers); None: SGD
    call: str | None = None      # forward: only this child module is called, with the inputs (not the root)
    counts: tuple = ()           # registered: (module path, hook kind, name): len() of that module's hook dict
    read: tuple | None = None    # read: (what, tensor, slot, as) (adjoint.format.validate_read)
    clip: tuple | None = None    # clip_grad_norm: (max_norm, norm_type, error_if_nonfinite, foreach);
                                 # clip_grad_value: (clip_value, foreach)


@dataclass(frozen=True)
class Variant:
    """One variant of a problem: its inputs, hooks, backward and steps."""

    name: str                    # "default" when the file has no variants
    inputs: tuple[TensorDecl, ...]
    hooks: tuple[Hook, ...]
    backward: Backward
    loc: Loc | None
    steps: tuple[Step, ...] | None = None   # None: v1's one forward and one backward
    description: str = ""

    def registered_later(self) -> set[int]:
        """The hooks not registered before the first forward: those a ``register`` step names and
        those another hook's ``registers:`` names (both sides, adjoint's and verify's, read this)."""
        return {i for s in self.steps or () if s.kind == "register" for i in s.hooks} | \
            {i for h in self.hooks for i in h.registers}


@dataclass(frozen=True)
class Origin:
    """``origin:`` (written by ``adjoint import``): the Python model the file was imported from,
    which ``verify`` rebuilds to check that the file's model builds the same autograd graph."""
    file: str                                   # absolute, resolved against the problem file's directory
    factory: str
    inputs: tuple[tuple[str, tuple[int, ...]], ...]
    loc: Loc


@dataclass(frozen=True)
class Problem:
    """A validated problem file: the model, the loss and the variants."""

    name: str
    description: str
    path: str
    model: Module
    targets: tuple[TensorDecl, ...]
    loss: object | None          # syntax.Expr
    variants: tuple[Variant, ...]
    symbols: dict[str, Fraction] = field(hash=False)
    dtype: str
    loc: Loc
    init_seed: int | None = None
    origin: Origin | None = None
    distributed: object | None = field(default=None, compare=False)   # distributed_format.Distributed

    def variant(self, name: str) -> Variant:
        for v in self.variants:
            if v.name == name:
                return v
        names = ", ".join(v.name for v in self.variants)
        raise ProblemError(None, f"{self.path}: no variant named '{name}'; the file has: {names}")

    def free_symbols(self) -> list[str]:
        found: set[str] = set()
        for decl in self.all_tensors():
            found.update(decl.value.symbols)
        return sorted(found)

    def all_tensors(self):
        for v in self.variants:
            yield from v.inputs
        yield from self.targets
        for m in self.model.walk():
            yield from m.params
            yield from m.buffers
