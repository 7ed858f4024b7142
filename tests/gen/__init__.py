"""Random valid problem files, for differential testing of ``solve`` against real PyTorch.

One generator, two sources of randomness:

* :func:`problems` is a Hypothesis strategy (``@given(problems())``) that yields YAML text;
* :func:`generate` takes a ``random.Random`` (the sweep in benchmarks/sweep.py: problem ``i``
  of seed ``s`` is ``generate(random.Random(f"{s}-{i}"))``, reproducible one by one).

What it builds (each with a weight, so every feature appears often): a root module that is a
Sequential, a built-in, or a custom module with one or several inputs; built-in Linear (with
and without bias, on 1-D, 2-D and 3-D inputs), ReLU, Tanh, Sigmoid, Identity, nested
Sequentials; custom modules with multi-line forwards and children (a child called twice,
multi-input children fed tensors that do not require grad), custom autograd Functions with
correct and wrong backward formulas (in v2 problems, some write their input in place and mark
it dirty: ``dirty:`` with ``save:``); every expression op (+ - * / ** @ unary -, relu tanh
sigmoid exp log sin cos sqrt abs rsqrt log1p expm1 atan erf sinh cosh tan log2 log10 sum mean norm t) with numbers
on either side, broadcasting
and matmul of ranks 1-2 and N-D @ 1-D/2-D; leaves with and without requires_grad, parameters
with requires_grad false; targets; a loss or none (then ``backward.grad_output`` when the
output is not a scalar); ``backward(inputs=...)`` and ``method: grad``; hooks of every kind
(module full_backward / full_backward_pre / backward / forward / forward_pre, tensor hook and
retain_grad, node pre / post) returning nothing, a rescaled or replaced gradient, tuples with
None entries, ``does:`` rebinding, removed before or after backward, registered after the
forward; and variants.

The v2 contract's features, in a share of the problems (:data:`V2_SHARE`; ``v2_share=0`` gives
v1 problems only): Tensor methods and keyword arguments; the view and copy functions (clone
detach contiguous view reshape flatten unflatten squeeze unsqueeze transpose permute t .T/.mT
expand cat stack chunk split unbind select narrow) and indexing (ints, slices, None, ...);
statements (augmented assignment, in-place methods on a tensor and on a view of it, index
assignment, tuple unpacking, ``with no_grad():`` blocks, a write into a detached tensor,
into a leaf or an argument); global module hooks, prepend / with_kwargs / always_call,
post_accumulate_grad, hooks on a leaf's AccumulateGrad, multi_grad (all / any),
saved_tensors (whole forward or scoped), raises and removes; and steps (a retained graph, a
freed one, accumulation, zero_grad, an SGD step, register / remove between passes, new
inputs); comparisons (``> >= < <= == !=`` as operators, Tensor methods and functions) in masks
(``e * (a > 0)``) and as ``where``'s condition, bool tensors (targets declared ``dtype: bool``),
ties, nan gradients (``where`` over ``sqrt`` at 0), PyTorch's bool errors (``e - cond``,
``-cond``, ``e ** cond``) and hooks that compare their gradient. Errors PyTorch raises while running a file (a saved tensor modified in place, an
in-place write into a leaf that requires grad or a module output that full backward hooks
wrap, a freed graph, a hook that raises) are predictions like any other answer.

Layer problems, a fifth of all (:data:`layers.LAYER_SHARE`, drawn from the same number as
the v2 coin, so the other problems are unchanged): the ``torch.nn`` layer types (Conv1d/2d,
the pools, BatchNorm1d/2d in training and eval with buffers, LayerNorm, GroupNorm, Dropout with
its mask, Embedding, MultiheadAttention, RNN/LSTM/GRU, Flatten/Unflatten, the activations and the losses
with ``reduction=``) and their functional forms, chained with consistent shapes, parameters
given or from ``init:``, ``training: false`` and ``requires_grad: false`` modules, a loss
module, a functional loss or a loss expression; hooks from the same machinery
(``tests/gen/layers.py``).

Stop 55's tensor math (``mathexprs.py``, a v2 expression kind of weight :data:`exprs.MATH_WEIGHT`):
addcmul addcdiv (``value=``), baddbmm addbmm addmv addr (``beta=`` / ``alpha=``), fmod remainder
(of operands that stay rational: solve refuses an irrational element), hypot, heaviside and
scatter(``reduce=``) (NotImplemented nodes: a backward reaching them raises, an answer too), std_mean,
nansum, nanmean, logcumsumexp, index_fill index_copy masked_scatter scatter_reduce (int64 index and
bool mask targets); and its layers (``morelayers.py``, in layer problems): InstanceNorm1d/2d,
BatchNorm3d, circular padding (F.pad, Conv ``padding_mode``), Bilinear, PairwiseDistance,
EmbeddingBag, and the losses SoftMarginLoss MarginRankingLoss HingeEmbeddingLoss
CosineEmbeddingLoss MultiLabelSoftMarginLoss PoissonNLLLoss TripletMarginLoss GaussianNLLLoss.

Second-order problems (create_graph, grad of grad) have their own small generator,
``second.py`` (``benchmarks/sweep.py --kind second``), over the ops whose create_graph
recording is modelled; :func:`generate` does not draw them (its seeds stay as they were).

The package, one job per module: ``rand`` (the source of choices), ``trees`` (expression
trees and their text), ``specs`` (the problem's static model), ``analysis`` (the abstract
interpretation), ``exprs``, ``viewexprs`` and ``cmpexprs`` (expressions of a requested shape,
v1 and v2 forms, comparisons; ``mathexprs``: stop 55's ops), ``program`` (v2 statements), ``modules`` (the generator: values, modules, forwards,
Functions, the loss), ``layers`` and ``morelayers`` (layer problems), ``hooks`` and ``hooks2`` (hooks, their returns, variants; v2 kinds and
options), ``steps``, ``emit`` (YAML), ``check`` (the differential check), ``coverage``.

Validity by construction: the generator tracks shapes statically, and for each variant runs
a small abstract interpretation of the model (which tensor requires grad, has a grad_fn, and
which edges that grad_fn has) mirroring ``nn.Module._call_impl``, so that hooks are only put
where PyTorch accepts them and their returned tuples have the right length and only touch
defined slots (v2 forms and in-place writes make nodes whose edges it does not model: node
hooks there only observe). What it cannot see statically is *values*: a forward that is not finite (the
solver refuses: log of a negative number, division by zero) and a hook argument that turns
out to be None at run time (PyTorch raises TypeError too). :func:`check` skips the first
kind, and for any other ProblemError requires PyTorch to raise as well.

Values are small rationals (mostly dyadic, so exact in floating point), zeros included, and
a "kink" form puts relu, abs, sqrt, norm and x ** 0 exactly at 0. Exact values of nested
transcendental functions swell, so each problem gets a budget of them
(:data:`TRANSCENDENTAL_BUDGET`, counted per call of the module they are in); past it, ops
stay rational. One problem in five is hook-dense (8-14 hooks a variant, piled on a couple
of tensors and modules).

Generating never imports ``adjoint``: it only writes YAML. :func:`check` (used by
tests/test_differential.py and benchmarks/sweep.py) then solves a file, runs it in PyTorch
through ``adjoint.torchside`` and compares with ``adjoint.torchside.compare``.
"""

from __future__ import annotations

import random

from .check import BAD, GOOD, Outcome, check
from .coverage import coverage
from .emit import to_yaml
from .trees import NoExpr
from .modules import V2_SHARE, Gen
from .rand import Src
from .specs import ProblemSpec
from .trees import TRANSCENDENTAL_BUDGET

__all__ = ["BAD", "GOOD", "Outcome", "TRANSCENDENTAL_BUDGET", "build", "check", "coverage", "generate",
           "generate_spec", "problems", "to_yaml", "V2_SHARE"]


def build(s: Src, budget: int = TRANSCENDENTAL_BUDGET, attempts: int = 20, v2_share: float = V2_SHARE,
          train: bool = False) -> ProblemSpec:
    last = None
    for _ in range(attempts):
        try:
            return Gen(s, budget, v2_share, train).problem()
        except NoExpr as exc:  # pragma: no cover - a dead end; draw again
            last = exc
    raise RuntimeError("generator kept hitting dead ends") from last


def generate(rng: random.Random, budget: int = TRANSCENDENTAL_BUDGET, v2_share: float = V2_SHARE) -> str:
    """One problem file (YAML text) from a ``random.Random`` (``v2_share``: the chance that it
    uses the v2 contract's features; 0 gives v1 problems only)."""
    return to_yaml(build(Src(rng=rng), budget, v2_share=v2_share))


def generate_spec(rng: random.Random, budget: int = TRANSCENDENTAL_BUDGET, v2_share: float = V2_SHARE,
                  train: bool = False) -> ProblemSpec:
    """``train``: every problem v2 and a training loop (tests/gen/train.py; sweep --kind train)."""
    return build(Src(rng=rng), budget, v2_share=1 if train else v2_share, train=train)


def problems(budget: int = TRANSCENDENTAL_BUDGET, shrinkable: bool = False, v2_share: float = V2_SHARE):
    """Hypothesis strategy: YAML text of one random valid problem (``budget``: at most this
    many transcendental ops, which keeps exact solving fast).

    By default Hypothesis draws a seed and the problem is ``generate(random.Random(seed))``:
    the same (uniform) distribution as the sweep, whatever Hypothesis's preference for small
    draws. ``shrinkable=True`` routes every choice through Hypothesis instead, so a failure
    shrinks to a smaller problem, at the price of a distribution skewed toward the first
    option of each choice."""
    from hypothesis import strategies as st

    if not shrinkable:
        return st.integers(0, 2 ** 63 - 1).map(lambda seed: generate(random.Random(seed), budget, v2_share))

    @st.composite
    def _problems(draw):
        return to_yaml(build(Src(draw=draw), budget, v2_share=v2_share))

    return _problems()
