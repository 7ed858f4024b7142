"""The derivation of a prediction, as typed records: everything ``adjoint latex`` says, computed
once on the engine side (:mod:`adjoint.derivation.derive`), typeset by the renderer.

Tensors are numbered (:class:`TensorInfo`, one per tensor *version*); equations are trees of
:mod:`adjoint.mathtree` over those numbers; values are exact (:class:`adjoint.values.exact.Exact`, or
:class:`Typed` for integer tensors). A :class:`Unit` is what one backward pass differentiates:
its forward pass (symbols, steps, values), the hook-free multipliers, the gradients PyTorch
carried, and every hook call of the pass; a variant (:class:`VariantDerivation`) is its
steps and units in order, or the error PyTorch raised.
"""

from __future__ import annotations

from dataclasses import dataclass, field


from adjoint.values.exact import Exact
from adjoint.values.mathtree import TNode


# ----------------------------------------------------------------------------- tensors

@dataclass(frozen=True)
class Symbol:
    """How a tensor is named in the mathematics (the renderer writes it out)."""

    kind: str                        # leaf | state | loss
    letter: str = ""                 # leaf: its name or letter (x, u_0, W for a Linear's weight)
    module: str = ""                 # leaf: the path of the module a parameter belongs to ("": none)
    index: int = 0                   # state: k of x_k
    base: str = "x"                  # state: x, or z when a leaf is itself called like x_k


@dataclass(frozen=True)
class Ident:
    """What a gradient value is: ``lam`` (the multiplier lambda_k of state ``var``), ``lam_tilde``
    (the gradient PyTorch carried into it), ``dl`` (dl/d var of a tensor that is not a state), or,
    when it is none of these, ``reaching`` (a state) / ``wrt`` (any other tensor); ``at_output``:
    a module's grad_output where its output is its input itself (or one tensor fills several of
    its inputs), what reaches the output alone (adjoint.engine.observer)."""

    kind: str
    var: int


@dataclass
class ChainFactor:
    """One factor d top / d bottom of a written-out chain rule (top None: the given grad_output v of a backward)."""

    top: int | None                  # d top / d bottom; None: the given grad_output v of a backward
    bottom: int | None
    value: Exact


@dataclass
class Chain:
    """dl/d var written as a sum over every path to the loss of products of local derivatives
    (one-element problems only)."""

    paths: list                      # [[ChainFactor, ...], ...] each in printed order (the loss side first)
    total: Exact


@dataclass
class ArrivalTerm:
    """What one equation reading a tensor sends back to it, with the gradient PyTorch carried into
    that equation's output (hooks included)."""

    step: int                        # the var the equation defines
    index: int | None                # its k (None: the loss)
    hooked: bool                     # the gradient carried differs from the multiplier
    seed: Exact                      # the gradient carried into the equation's output
    local: Exact | None              # one-element problems: d step / d tensor
    formula: TNode | None            # otherwise: J^T lambda(~) as a tree
    plain_loss: bool = False         # the loss, unhooked, seeded by ones: it reads as dl/d tensor


@dataclass
class Arrival:
    """The terms that arrive at a tensor in the reverse sweep, and their total."""

    terms: list
    total: Exact | None


@dataclass
class TensorInfo:
    """Everything the derivation shows about one tensor: its symbol, value, formula and role."""

    id: int
    shape: tuple
    dtype: str
    requires_grad: bool
    leaf: bool
    value: object
    names: list                      # the PyTorch names bound to this version
    symbol: Symbol | None            # leaves, states and the loss
    tree: TNode | None               # any other tensor: the expression that makes it
    role: str = ""                   # input | target | parameter | buffer | detached | made | output | intermediate |
                                     # base | loss
    call: int | None = None          # a module's output: that call
    pure: Exact | None = None        # its hook-free multiplier dl/d(this); None: no path to the loss
    carried: object = None           # the gradient PyTorch carried to it (hooks included)
    has_carried: bool = False        # a gradient (possibly None) was recorded for it
    version: "Version | None" = None   # a later version of a tensor (in place, written through a view, regenerated)
    base_of: str | None = None       # an unnamed base a view was written through: that view's name


@dataclass(frozen=True)
class Version:
    """A later version of a named tensor: how it came to be."""

    kind: str                        # inplace | copy_slices | regenerated
    tensor: str | None               # the tensor's name (None: a base the file never named)
    previous: int | None             # the version before (a var id)
    method: str | None = None        # inplace / copy_slices: the in-place method (mul_, copy_, ...)
    view: str | None = None          # copy_slices: the name of the view written through


# ----------------------------------------------------------------------------- equations

@dataclass
class LocalDerivative:
    """The derivative of an atom of the loss, as a formula and as a value."""

    atom: int
    expr: object                     # a SymPy expression in the symbols v#<var> (the renderer names them)
    value: Exact | None


@dataclass
class Step:
    """One named tensor and the equation that defines it: x_k = Phi_k(atoms)."""

    var: int
    index: int | None                # k of x_k (None: the loss)
    tree: TNode
    atoms: list
    call: int | None                 # module call its last op ran in
    nodes: list                      # autograd nodes it creates (names)
    order: int                       # its last op's position in the forward (the model section's order)
    vjp: dict = field(default_factory=dict)         # atom -> J^T lambda_k (tree)
    vjp_tilde: dict = field(default_factory=dict)   # atom -> J^T lambda~_k (tree)
    pure_contrib: dict = field(default_factory=dict)    # atom -> J^T lambda_k (value; None: nothing flows)
    local: list = field(default_factory=list)           # one-element problems: LocalDerivative per atom needing grad
    local_values: dict = field(default_factory=dict)    # one-element problems: atom -> d x_k / d atom


@dataclass
class CallInfo:
    """One module call of the forward."""

    index: int
    callid: str
    path: str
    k: int
    depth: int
    kind: str                        # builtin | function | custom
    type: str | None                 # a built-in's type; a custom Function's name
    args: tuple                      # var ids
    outs: tuple                      # var ids
    order: float                     # where it starts in the forward (the model section's order)
    hooked: bool                     # it has module backward hooks (full, pre or legacy)
    forward_source: str | None = None    # a custom module's forward, as source text
    backward_source: str | None = None   # a custom Function's declared backward, as source text
    checkpoint: str | None = None        # called through torch.utils.checkpoint: how it is recomputed


# ----------------------------------------------------------------------------- hooks

@dataclass
class DeclaredHook:
    """A hook as the problem declares it, as the derivation lists it."""

    index: int
    label: str
    kind: str
    on: str                          # module | global | tensor | node | multi_grad | saved_tensors
    target: str
    returns: TNode | None
    does: list                       # source text of each line it runs before returning
    remove: str | None
    when: str
    prepend: bool = False
    with_kwargs: bool = False
    always_call: bool = False
    tensors: tuple = ()              # multi_grad
    mode: str = "all"
    pack: str | None = None          # saved_tensors: source text
    unpack: str | None = None
    scope: tuple | None = None
    raises: str | None = None
    removes: tuple = ()
    raises_type: str = "RuntimeError"   # the class it raises (raises: {type: NAME})
    fires: bool = True               # it is called at least once in the variant
    slot: str | None = None          # saved: the saved tensor's slot (grad_fn._raw_saved_SLOT)
    message: str | None = None       # disable_saved_tensors_hooks: its message
    pin_memory: bool = False         # save_on_cpu: its pin_memory argument
    next: tuple = ()                 # node: the next_functions walk from the target's grad_fn


@dataclass
class HookArg:
    """One argument a hook is handed, with the formula and the chain that explain its value."""

    name: str
    position: int | None             # index in a tuple argument
    value: object
    var: int | None                  # the tensor it is the gradient of (None: not a gradient of one tensor)
    slot_formula: TNode | None = None    # legacy / node post-hooks: the node's own J^T grad_output[0]
    full_vjp: bool = False           # a full backward hook's grad_input: J^T grad_output through the module
    ident: Ident | None = None
    chain: Chain | None = None       # one-element problems: written out factor by factor
    arrival: Arrival | None = None   # not a multiplier: what arrives from the equations reading it
    backward: bool = False           # a backward-pass gradient of a known tensor (unidentified: say so)
    none_flows: bool = False         # None because no gradient flows to this input


@dataclass
class LegacyRow:
    """One entry of a legacy backward hook's grad_input: the last node's input it is."""

    index: int
    var: int
    value: Exact
    ident: Ident | None


@dataclass
class HookCall:
    """One hook firing, in engine order, with its arguments, what it returned and why it fired there."""

    number: int
    hook: int                        # the declared hook's index
    label: str
    kind: str
    on: str
    target: str
    k: int | None
    calls_of_module: int
    phase: str
    node: str | None
    args: list                       # HookArg
    returned: object
    returned_trees: object           # the hook's `returns` as a tree (a list of item trees for a tuple)
    why: list
    raised: bool = False
    is_global: bool = False
    call: int | None = None          # the module call (index into the unit's calls)
    target_var: int | None = None    # tensor and node hooks: the tensor (as the hook saw it)
    slot_vars: dict = field(default_factory=dict)    # slot formulas: atom -(k+1) -> var of the node's input k
    legacy_same: bool = False        # legacy hook: the node's input is the module's input
    legacy_rows: list = field(default_factory=list)  # legacy hook: what a full hook would be handed
    does: bool = False               # the declared hook runs lines before returning
    grads_then: dict = field(default_factory=dict)   # leaf name -> .grad when the hook ran
    saved: str | None = None         # pack / unpack: the saved variable (self, other, result, ...)
    saved_var: int | None = None     # pack / unpack: the tensor saved
    later: list = field(default_factory=list)   # tensor / node hooks: later versions of its tensor (in place)
    wrote: tuple = ()                # what its body wrote in place (runtime.CallRecord.wrote)
    recomputed: bool = False         # made by checkpoint's recomputation in the backward
    reentrant: int = 0               # depth of the reentrant backward it ran in


# ----------------------------------------------------------------------------- results

@dataclass
class BoundaryInput:
    """One input of a module call at its boundary: its multiplier (the gradient)."""

    var: int
    value: Exact | None
    ident: Ident | None
    requires: bool = True            # the input requires grad (a None value: then no gradient reaches it)


@dataclass
class Boundary:
    """A module call seen as a block: the multipliers at its output and inputs (grad_output, grad_input)."""

    callid: str
    type: str
    call: int
    grad_output: Exact | None
    output_ident: Ident | None
    inputs: list                     # BoundaryInput per positional input
    outputs: list = field(default_factory=list)   # BoundaryInput per output of a module returning a tuple


@dataclass
class Change:
    """A gradient the hooks changed: a state's multiplier or a leaf's .grad."""

    var: int
    name: str | None                 # a .grad: the tensor's name (None: a state's multiplier)
    pure: Exact
    actual: Exact
    ratio: object = None             # actual = ratio * pure with a whole or reciprocal ratio (fmpq)


@dataclass
class Gradient:
    """The gradient of one input: its value, the chain and terms that produce it, and what hooks changed."""

    name: str
    var: int | None
    value: object                    # what PyTorch stores (or returns)
    returned: bool                   # torch.autograd.grad's result, not .grad
    pure: Exact | None
    state: int | None = None         # a state: its k
    chain: Chain | None = None       # one-element problems: the chain rule, when it gives the value
    terms: list = field(default_factory=list)       # otherwise: (step var, k, formula) of each equation reading it
    matches: bool = False            # PyTorch stores exactly the hook-free value
    arrival: Arrival | None = None   # hooks changed it: the same local derivatives on what was carried
    hooked_steps: list = field(default_factory=list)   # the k of the equations whose carried gradient changed
    tensor_hooks: list = field(default_factory=list)   # numbers of tensor-hook calls that replaced it
    arriving: Arrival | None = None  # ... with the total that arrived before those hooks
    none_reason: str | None = None   # grad | inputs | none
    before: object = None            # .grad before this backward pass, when it already held one (it accumulates)
    added: object = None             # ... and what this pass added to it


@dataclass
class Unit:
    """One forward pass and the backward pass that differentiates it (v1: the only ones), or a forward
    pass no backward differentiates (then the multipliers, boundaries and gradients are empty)."""

    tensors: list                    # TensorInfo by id
    leaves: list                     # leaf var ids, in declaration order
    states: list                     # state var ids, in order (x_1, x_2, ...)
    steps: list                      # Step per state, then the loss's
    root: int
    root_is_state: bool
    loss_step: Step | None
    scalar: bool                     # every tensor has one element
    seed: Exact                      # what backward starts from (ones, or the given grad_output)
    grad_output: Exact | None        # the given grad_output (None: ones)
    calls: list                      # CallInfo
    consumers: dict                  # var -> [step var, ...] of the equations reading it
    hook_calls: list                 # HookCall, in firing order
    boundaries: list                 # Boundary of the calls shown
    boundaries_partial: bool         # only the calls with backward hooks are shown
    changes: list                    # Change
    unchanged: list                  # names whose .grad the hooks did not change
    any_backward_return: bool        # some backward hook returned a value
    gradients: list                  # Gradient, returned ones first
    loss: Exact | None
    method: str                      # backward | grad
    backward_inputs: list            # backward(inputs=...) names
    forward_number: int = 1          # which forward pass of the variant (1-based)
    backward_number: int | None = 1  # which backward pass (1-based); None: a forward nobody differentiates
    first_of_forward: bool = True    # the first unit of its forward pass (the one that shows it)
    forward_calls: list = field(default_factory=list)    # HookCall made during the forward pass
    backward_calls: list = field(default_factory=list)   # HookCall made during the backward pass
    grads_before: dict = field(default_factory=dict)     # .grad of each tensor before the backward pass
    failed: bool = False             # PyTorch raised during this backward pass
    retain_graph: bool = False
    silent: list = field(default_factory=list)   # (hook index, var it sits on, the tensor's last version, why:
                                                 # removed | stale | no_grad | inputs | unreached) of the tensor / node
                                                 # hooks that do not fire in this backward pass
    second: object = None            # a pass from a root reading create_graph gradients: its derivation.second.SecondOrder


@dataclass
class StepInfo:
    """One step of a variant's ``steps`` (v1: forward, then backward)."""

    index: int
    kind: str                        # forward | backward | register | remove | zero_grad | step | read
    unit: int | None = None          # forward / backward: the unit showing it
    forward: int | None = None       # forward: its number; backward: the forward pass it differentiates
    backward: int | None = None      # backward: its number
    hooks: list = field(default_factory=list)     # register / remove: hook indices
    lr: object = None                # step: the learning rate
    inputs: list = field(default_factory=list)    # forward: inputs it replaces; backward: inputs=
    retain_graph: bool = False
    method: str = "backward"
    updates: list = field(default_factory=list)   # step: (parameter, before, grad, after)
    failed: bool = False             # PyTorch raised in this step
    ran: bool = True                 # False: after the error, never run
    second: dict | None = None       # backward: its second-order options as plain data (create_graph, names,
                                     # roots as source text, allow_unused, materialize_grads)
    optimizer: tuple | None = None   # step: (type, lr, betas, eps) of a plain Adam step, else OptimizerDecl.settings
                                     # (None: p -= lr * p.grad)
    clip: tuple | None = None        # clip_grad_norm / clip_grad_value: the step's settings (Step.clip)
    counts: tuple = ()               # registered: (module path, hook kind, name, count or None)
    call: str | None = None          # forward: the child module called alone (call: PATH), not the root
    read: object = None              # read: what it read (adjoint.engine.saved_reads.ReadRecord; None: it raised)


@dataclass
class ErrorInfo:
    """PyTorch raised while running the variant: what, why, where."""

    type: str
    message: str
    during: str                      # forward | backward
    cause: str                       # runtime.TorchError.cause
    step: int                        # index of the step it raised in
    after_call: int | None           # number (1-based) of the last hook call made before it left PyTorch
    calls: list = field(default_factory=list)   # HookCall made during the failing forward (no unit shows them)
    raised_by: int | None = None     # number of the hook call that raised
    unit: int | None = None          # the unit of a failing backward pass


@dataclass
class FunctionNote:
    """A custom Function's declared backward compared with the true vector-Jacobian product."""

    name: str
    callid: str
    slot: str
    declared: str
    true: str
    matches: bool


@dataclass
class VariantDerivation:
    """The derivation of one variant: hooks, units of explanation, notes and steps."""

    name: str
    description: str | None
    hooks: list                      # DeclaredHook
    units: list                      # Unit, in the order the steps made them
    notes: list                      # solver's notes (texts)
    functions: list                  # FunctionNote
    custom_functions: list           # names of the custom Functions the forward ran
    steps: list = field(default_factory=list)   # StepInfo
    stepped: bool = False            # the file gives steps (else v1's forward, backward)
    error: ErrorInfo | None = None
    reduced_passes: tuple = ()       # DistributedDataParallel: the backward passes (1-based) whose .grad became
                                     # the average over the ranks (adjoint.derivation.ddp)


@dataclass
class ProblemDerivation:
    """The derivation of a whole problem: its symbols, notations and one record per variant."""

    name: str
    description: str | None
    symbols: dict                    # symbol name -> value (numeric mode), else {}
    variants: list
    notations: set = field(default_factory=set)   # notations beyond v1's the formulas use (see derive)
    path: str = ""                   # the problem file (what ``adjoint graph`` is run on)
