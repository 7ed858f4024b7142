"""What ``adjoint solve`` answers: plain records, and their JSON form (the contract)."""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import TYPE_CHECKING, Callable

from .derivation.record import VariantDerivation
from .exact import Exact
from .graph import Typed

if TYPE_CHECKING:
    from .passes import VariantRun


@dataclass
class HookRecord:
    index: int                 # position in the hook list it was declared in
    label: str
    kind: str
    on: str                    # module | tensor | node
    target: str
    k: int | None              # module hooks: which call of the module fired (1-based)
    calls_of_module: int       # how many times that module was called
    phase: str                 # forward | backward
    node: str | None           # autograd node it ran at (backward hooks)
    args: dict                 # argument name -> Exact | None | tuple of those
    returned: object
    why: list[str] = field(default_factory=list)
    raised: bool = False       # the hook raised (the contract's ``"raised": true``)
    is_global: bool = False    # a global module hook (``"global": true``; ``target`` is the module that fired)


@dataclass
class Boundary:
    """One module call: the Lagrangian view. lambda_out = grad_output, lambda_in = J^T lambda_out."""

    callid: str
    path: str
    k: int
    type: str
    arg_names: tuple[str, ...]
    input_names: tuple[str, ...]      # tensor names of the positional inputs (or a description)
    output_name: str
    nodes: list[str]                  # autograd nodes the call created, in creation order
    grad_output: tuple                # Exact | None per output
    grad_input: tuple                 # Exact | None per positional input
    depth: int


@dataclass
class FunctionCheck:
    callid: str
    name: str
    slot: str
    declared: str
    true: str
    matches: bool


@dataclass
class ErrorRecord:
    """PyTorch raised while running the variant (a prediction, not bad input)."""

    type: str
    message: str
    during: str                       # forward | backward
    after_call: int | None            # index in hook_calls of the last call made before it left PyTorch

    def to_json(self) -> dict:
        return {"type": self.type, "message": self.message, "during": self.during, "after_call": self.after_call}


@dataclass
class PassRecord:
    """One backward step of ``steps``: the calls it made, the grads right after it."""

    hook_calls: list
    grads: dict
    returned: dict | None

    def to_json(self) -> dict:
        out = {"hook_calls": [hook_json(h) for h in self.hook_calls],
               "grads": {k: value_json(v) for k, v in self.grads.items()}}
        if self.returned is not None:
            out["returned"] = {k: value_json(v) for k, v in self.returned.items()}
        return out


@dataclass
class VariantPrediction:
    name: str
    method: str
    root: str
    loss: Exact | None
    values: dict[str, Exact]
    boundaries: list[Boundary]
    grads: dict[str, Exact | None]
    returned: dict[str, Exact | None] | None
    hook_calls: list[HookRecord]
    notes: list[str]
    functions: list[FunctionCheck]
    node_order: list[str]
    symbolic: bool
    kinks: list = field(default_factory=list)    # PyTorch's conventions at kinks the forward met (texts)
    run: VariantRun | None = None     # the engine's record of the run
    carried: dict = field(default_factory=dict)  # tensor name -> gradient PyTorch carries there (hooks
                                                 # included; None where none arrives), as its grad_fn sees it
    passes: list | None = None        # PassRecord per backward step (variants with steps)
    error: ErrorRecord | None = None
    deriver: Callable | None = field(default=None, repr=False)   # VariantPrediction -> VariantDerivation
    _derivation: VariantDerivation | None = field(default=None, repr=False)

    @property
    def derivation(self) -> VariantDerivation:
        """The derivation of this variant (adjoint.derivation), computed on first use: ``solve --json``
        never pays for it."""
        if self._derivation is None:
            self._derivation = self.deriver(self)
        return self._derivation

    def to_json(self) -> dict:
        if self.error is not None:
            return {"error": self.error.to_json(), "hook_calls": [hook_json(h) for h in self.hook_calls]}
        out = {
            "loss": value_json(self.loss) if self.loss is not None else None,
            "values": {k: value_json(v) for k, v in self.values.items()},
            "adjoints": {b.callid: {"grad_output": [value_json(g) for g in b.grad_output],
                                    "grad_input": [value_json(g) for g in b.grad_input]} for b in self.boundaries},
            "grads": {k: value_json(v) for k, v in self.grads.items()},
            "hook_calls": [hook_json(h) for h in self.hook_calls],
        }
        if self.returned is not None:
            out["returned"] = {k: value_json(v) for k, v in self.returned.items()}
        if self.passes is not None:
            out["passes"] = [p.to_json() for p in self.passes]
        return out


@dataclass
class Prediction:
    problem: object
    variants: list[VariantPrediction]
    numeric: bool = False

    def variant(self, name: str) -> VariantPrediction:
        for v in self.variants:
            if v.name == name:
                return v
        raise KeyError(name)

    def to_json(self) -> dict:
        return {"problem": self.problem.name, "variants": {v.name: v.to_json() for v in self.variants}}


def value_json(v) -> dict | list | float | int | str | None:
    """A value as the contract writes it: VALUE for a tensor, a list for a tuple, an object
    for a dict (a hook's kwargs), a plain number for a Python number, a string as is."""
    if v is None:
        return None
    if isinstance(v, tuple):
        return [value_json(x) for x in v]
    if isinstance(v, dict):
        return {k: value_json(x) for k, x in v.items()}
    if isinstance(v, Fraction):
        return int(v) if v.denominator == 1 else float(v)
    if isinstance(v, (str, bool)):
        return v
    if isinstance(v, Typed):
        return {"shape": list(v.value.shape), "value": v.value.ints(), "exact": v.value.strings(), "dtype": v.dtype}
    assert isinstance(v, Exact), v
    return {"shape": list(v.shape), "value": v.floats(), "exact": v.strings()}


def hook_json(h: HookRecord) -> dict:
    out = {"hook": h.index, "label": h.label, "kind": h.kind, "target": h.target,
           "args": {k: value_json(v) for k, v in h.args.items()},
           "returned": value_json(h.returned)}
    if h.on in ("module", "global") and h.calls_of_module > 1:
        out["call"] = h.k
    if h.is_global:
        out["global"] = True
    if h.raised:
        out["raised"] = True
    if h.kind in ("pack", "unpack"):
        out["node"] = h.node
    return out
