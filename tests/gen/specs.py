"""The static model of a generated problem: leaves, modules, hooks, backward, variants."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction as Fr


@dataclass
class Leaf:
    name: str                 # full tensor name
    shape: tuple
    values: list              # row-major Fractions
    rg: bool
    scale: Fr | None = None   # written as {value, scale}: values are pre-scale
    dtype: str | None = None  # "bool": a mask (values 0 / 1), never requires grad


@dataclass
class FnSpec:
    name: str
    grads: dict               # slot -> tree | None (absent key: returns None)
    correct: bool
    dirty: tuple = ()         # ctx.mark_dirty(...): the inputs the forward writes in place and returns
    save: tuple = ()          # ctx.save_for_backward(...): the formulas then see saved[i] and grad_output only


@dataclass
class Mod:
    name: str                 # key under the parent ("model" for the root)
    path: str                 # "" for the root
    type: str | None
    inputs: list              # argument names
    in_shapes: list
    out_shape: tuple
    params: list = field(default_factory=list)      # Leaf (full names)
    children: list = field(default_factory=list)    # Mod
    lines: list = field(default_factory=list)       # (local name, tree)
    ret: object = None
    function: FnSpec | None = None
    bias: bool = True                               # Linear
    write_inputs: bool = False                      # emit inputs: even when it is [x]
    as_list: bool = False                           # forward written as a YAML list of lines

    @property
    def label(self) -> str:
        return self.path or "model"

    def walk(self):
        yield self
        for c in self.children:
            yield from c.walk()

    def param(self, short: str) -> Leaf | None:
        for p in self.params:
            if p.name.rsplit(".", 1)[-1] == short:
                return p
        return None


@dataclass
class Stmt:
    """A v2 statement of a custom forward (a line is else ``(name, tree)``)."""

    kind: str                 # aug | inplace | setitem | unpack | with
    target: str = ""          # the name written to (in place), or the base name of an indexed write
    tree: object = None       # aug / setitem: the value; unpack: the tuple-valued op
    op: str = ""              # aug: + - * /; inplace: the method (mul_, relu_, ...)
    args: tuple = ()          # inplace: its argument items (trees or ('lit', text) / ('kw', ...))
    index: str = ""           # setitem / aug on a subscript: the index text
    names: tuple = ()         # unpack: the names bound; with: unused
    shapes: tuple = ()        # unpack: their shapes
    body: list = field(default_factory=list)   # with: its lines ((name, tree) or Stmt)
    base: str = ""            # in place on a named view: the base it writes through
    label: str = ""           # the coverage key


@dataclass
class HookSpec:
    on: str                   # module | tensor | node
    target: str
    kind: str
    returns: object = None    # tree or None
    does: list = field(default_factory=list)   # [(name, tree)]
    remove: str | None = None
    when: str | None = None
    label: str | None = None
    implicit_kind: bool = False   # tensor hooks: leave out kind: hook (the default)
    opts: dict = field(default_factory=dict)   # v2 options: prepend with_kwargs always_call raises removes
                                               # pack unpack scope (on: global | multi_grad | saved_tensors)

    @property
    def replaces(self) -> bool:
        """A module forward(-pre) hook returning a value: it changes the graph every forward
        makes, and the analysis (one forward) sizes other hooks' returns by it, so it stays
        registered for the whole variant (no when / remove / removes / register and remove steps)."""
        return self.on == "module" and self.kind in ("forward", "forward_pre") and self.returns is not None


@dataclass
class BackwardSpec:
    method: str = "backward"
    inputs: list = field(default_factory=list)
    grad_output: tuple | None = None   # (shape, values)

    def empty(self) -> bool:
        return self.method == "backward" and not self.inputs and self.grad_output is None


@dataclass
class VariantSpec:
    name: str
    inputs: dict              # name -> Leaf overriding the top level (empty: none)
    hooks: list | None        # None: inherit the top-level hooks
    backward: BackwardSpec | None
    steps: list | None = None  # v2 steps (see steps.py), None: the default forward, backward


@dataclass
class ProblemSpec:
    name: str
    inputs: list              # Leaf
    targets: list             # Leaf
    model: Mod
    loss: object              # tree or None
    hooks: list
    backward: BackwardSpec
    variants: list | None     # VariantSpec, or None: no variants key
    dtype: str | None         # None: no dtype key (float32)
    features: Counter = field(default_factory=Counter)   # v2 features drawn (coverage)
    steps: list | None = None  # top-level steps (StepSpec), None: the default forward, backward
