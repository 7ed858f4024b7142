"""The simulated PyTorch process: tensors and autograd nodes made as ops run, eagerly.

A :class:`Runtime` is what one variant runs in. It applies ops as PyTorch's autograd kernels
do (:meth:`Runtime.apply`): the output's value through the value backend; when grad mode is
on and an input requires grad, one :class:`~adjoint.engine.graph.Node` with the next
``sequence_nr``, its edges to the inputs' ``grad_fn`` (or their ``AccumulateGrad``), and the
tensors it saves for backward (packed by the active ``saved_tensors_hooks``: inputs before
the op runs, outputs after, with grad mode off). It keeps the process-wide state PyTorch keeps:
the ``sequence_nr`` and ``RemovableHandle.next_id`` counters, grad mode, the saved-tensor
hooks stack, and the log of every user hook call in firing order.

PyTorch errors that a file can provoke on purpose (a hook that raises, backward through a
freed graph, a saved tensor modified in place) are :class:`TorchError`: a prediction, not
bad input.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from adjoint.format.errors import ProblemError
from adjoint.values.exact import ExactLimit
from adjoint.values.strides import iterator_strides, contiguous_strides
from adjoint.engine.graph import INF_SEQ, Application, Edge, HookDict, Node, SavedVariable, Tensor
from adjoint.engine.ops import REGISTRY, Op
from adjoint.engine.inference import check_save
from adjoint.engine.torch_errors import TorchError
from adjoint.engine.view_history import rebase_message, refresh, stale, view_value
from adjoint.values.numbers.sizes import check_work
from adjoint.engine import complex_grad, float32_tensors, int_arith
from adjoint.engine.pyfloat import PyFloat


def ints_held_exactly(B, value, dtype: str) -> bool:
    """Every integer of an int64 tensor's ``value`` is one a float of ``dtype`` holds exactly
    (|v| <= 2**24 in float32, 2**53 in float64), so casting it (``.float()``, ``i * 0.5``) does
    not round; unknown (``--structure``, a computed one) is False."""
    ints = getattr(B, "ints", None)
    limit = 2 ** 24 if dtype == "float32" else 2 ** 53
    return ints is not None and all(abs(i) <= limit for i in ints(value))


@dataclass
class CallRecord:
    """One call of a user hook (or a pack / unpack), in firing order."""

    hook: object                      # problem.Hook
    kind: str                         # the contract's kind of the call (pack/unpack for saved tensors)
    target: str | None
    args: dict                        # argument name -> Tensor | None | tuple of those | number
    returned: object = None
    node: Node | None = None          # the autograd node it ran at (backward hooks, pack/unpack)
    call: object = None               # the module call that fired (module and global hooks)
    phase: str = "backward"
    raised: bool = False
    silenced: bool = False            # it raised and PyTorch swallowed the error with a warning (always_call)
    is_global: bool = False
    why: list = field(default_factory=list)
    grads_seen: object = None         # (leaf names, their .grad values) when the hook ran: see grads_then
    saved: str | None = None          # pack / unpack: the saved variable's name (self, other, result, ...)
    tensor: object = None             # pack / unpack: the tensor saved (as it was when saved)
    wrote: tuple = ()                 # what the body wrote: "gradient" (an engine tensor it was handed),
                                      # "leaf NAME", "NAME.grad" / "NAME.grad (assigned)"
    recomputed: bool = False          # made by checkpoint's recomputation (adjoint.engine.checkpoint)
    reentrant: int = 0                # depth of the reentrant backward it ran in (0: the outer one)

    @property
    def grads_then(self) -> dict:
        """Leaf name -> .grad value when the hook ran. Taken as two tuples at the call (a hook per
        layer of a deep model would otherwise build a dict of every leaf per call), made a dict
        on first read, and that dict is kept (adjoint.engine.fsdp writes into it)."""
        seen = self.grads_seen
        if not isinstance(seen, dict):
            seen = self.grads_seen = dict(zip(*seen)) if seen is not None else {}
        return seen


#: binary ops whose float32 kernel converts a wrapped Python number to float (opmath_t) unchecked
_SCALAR_ARITHMETIC = ("add", "sub", "mul", "div")


#: ops whose kernel converts a number parameter to float with c10's checked_convert (torch 2.13):
#: beyond float32's largest value, "value cannot be converted to type float without overflow"
_CHECKED_SCALAR = ("clamp", "clamp_min", "clamp_max", "full_like", "fill_scalar")
_FLOAT32_MAX = 3.4028234663852886e38
_FLOAT32_INF = Fraction(2 ** 128 - 2 ** 103)   # the smallest magnitude float32 rounds to inf


def _double(v: Fraction) -> float:
    """The double a Python number is as PyTorch's Scalar (inf beyond float64's range)."""
    try:
        return float(v)
    except OverflowError:
        return float("inf") if v > 0 else float("-inf")


def float32_params(op: Op, params, loc) -> TorchError | None:
    """A number parameter beyond float32's range for a float32 kernel: the checked conversion's
    RuntimeError (raised after the packs), or refused where the kernel converts it unchecked (to
    inf: ``1e39 - x``) or the conversion is not known here."""
    todo, big = [params], None
    while todo and big is None:
        p = todo.pop()
        if isinstance(p, tuple):
            todo.extend(p)
        elif isinstance(p, Fraction) and abs(_double(p)) > _FLOAT32_MAX:   # the double PyTorch is handed
            big = p
    if big is None:
        return None
    if op.name in _CHECKED_SCALAR:
        return TorchError("RuntimeError", "value cannot be converted to type float without overflow", "arguments")
    raise ProblemError(loc, f"{op.name}: the Python number {_double(big):g} is beyond float32's range: how PyTorch's "
                            "float32 kernel converts it (inf, or an overflow error) is not modelled here; write a "
                            "number a float32 holds (or use a float64 file)")


def check_float32_scalar(op: Op, ins: list, loc) -> None:
    """A Python number beside a float32 tensor is converted to float by the kernel: beyond
    float32's range it becomes inf (x / 1e39 is 0, grad + 1e39 - 1e39 nan), which the exact
    arithmetic does not follow: refused."""
    for x in ins:
        # the Scalar's double rounded to float32 (nearest, ties to even) is inf from max + half an ulp on
        if isinstance(x, Fraction) and (abs(_double(x)) == float("inf") or
                                        abs(Fraction(_double(x))) >= _FLOAT32_INF):
            raise ProblemError(loc, f"{op.name}: the Python number {_double(x):g} is beyond float32's range: "
                                    "PyTorch's float32 kernel converts it to inf, which is not modelled; write a "
                                    "number a float32 holds (or use a float64 file)")


class Runtime:
    def __init__(self, backend, dtype: str):
        self.B = backend
        self.dtype = dtype
        self.seq = 0                          # sequence_nr of the next node
        self.next_handle = 0                  # RemovableHandle.next_id
        self.next_tensor = 0
        self.all_tensors: list[Tensor] = []   # every tensor made (the run keeps them all alive)
        self.captured_nodes: list[Node] = []  # nodes a Python object holds: register_multi_grad_hook's
                                              # grad_fns (mode all), captured by its hooks' closures
        self.grad_enabled = True
        self.inference = False                # inside ``with inference_mode():`` (adjoint.engine.inference)
        self.checkpointing = 0                # > 0 while checkpoint runs a region forward
        self.saved_hooks: list = []           # stack of active saved_tensors hooks (problem.Hook)
        self.call_stack: list = []            # module calls being run (innermost last)
        self.phase = "forward"
        # the phase of the step a backward run by a forward-time hook body belongs to: what that
        # backward warns is during the step (forward), as Python's warnings are issued in it
        self.warn_phase: str | None = None
        self.log: list[CallRecord] = []
        self.nodes: list[Node] = []           # every node made, in creation order
        self.leaves: list[Tensor] = []        # leaves that require grad (their AccumulateGrad is made on demand)
        self.hooks_runner = None              # set by the owner: runs pack / unpack hooks (adjoint.engine.hook_registration)
        self.notes: list = []                 # (node name or primitive, loc, note): conventions at kinks met forward
        self.quiet = 0                        # > 0 inside a Function's forward or a pack hook
        self.applications: list[Application] = []   # every op of the forward (see graph.Application)
        self.progress = None                  # callable(stage, done, total) told of the work done (a progress bar)
        self.warnings: list = []              # adjoint.engine.warns.Warned: every warning PyTorch issued, in order
        self.graph_task = None                # the backward running (its GraphTask): checkpoint recomputes once per task
        self.recomputing = 0                  # > 0 while checkpoint recomputes a region (adjoint.engine.checkpoint)
        self.fresh_rng = 0                    # > 0 inside checkpoint(..., preserve_rng_state=False)
        self.reentrant = 0                    # depth of the reentrant backward running (0: none or the outer one)
        self.tensor_pre_hooks_of: list = []   # the nodes whose tensor pre-hooks the engine is running (innermost last)
        self.creating_graph = False           # a create_graph backward is running (its hooks run with grad mode on)
        self.backward_runner = None           # (root, gradient, retain_graph) -> runs a backward (a hook body's)
        self.grad_runner = None               # (root, gradient, inputs, retain, allow_unused) -> a hook body's autograd.grad
        self.names: dict = {}                 # the running forward's named tensors (hook bodies may read them)
        self.second_record: list | None = None   # a create_graph backward's (or a root's) ops (adjoint.engine.second_engine)
        self.second_from = None                  # the node whose backward formula is running then

    @property
    def active(self) -> bool:
        """The model's own forward is running (not a hook in the backward, a Function's inside,
        a pack hook): its ops are equations, and values PyTorch cannot follow are refused."""
        return self.phase == "forward" and self.quiet == 0

    def record(self, prim: str, ins, outs, params, node, loc, in_values=None) -> None:
        """Log one op of the forward (an equation of the derivation); ``in_values``: the inputs'
        values before the op, when it overwrote one (in place)."""
        if self.active:
            before = tuple(in_values) if in_values is not None else tuple(t.value for t in ins)
            self.applications.append(Application(prim, tuple(ins), tuple(outs), params, node,
                                                 self.call_stack[-1] if self.call_stack else None, loc,
                                                 before, tuple(t.value for t in outs)))
        elif self.second_record is not None:
            before = tuple(in_values) if in_values is not None else tuple(t.value for t in ins)
            self.second_record.append(Application(prim, tuple(ins), tuple(outs), params, node, self.second_from, loc,
                                                  before, tuple(t.value for t in outs)))

    # ------------------------------------------------------------------ counters
    def new_handle(self) -> int:
        hid = self.next_handle
        self.next_handle += 1
        return hid

    def _new_seq(self) -> int:
        seq = self.seq
        self.seq += 1
        return seq

    # ------------------------------------------------------------------ tensors
    def tensor(self, value, requires_grad: bool = False, grad_fn: Node | None = None, output_nr: int = 0,
               dtype: str | None = None, name: str | None = None) -> Tensor:
        shape = tuple(self.B.shape(value))
        held = complex_grad.value_dtype(self.B, value)   # a complex value is held by a complex tensor
        dtype = held if held is not None and dtype not in complex_grad.COMPLEX_DTYPES else dtype or self.dtype
        t = Tensor(self.next_tensor, shape, dtype, value, requires_grad, grad_fn,
                   output_nr, grad_fn is None, name=name, strides=contiguous_strides(shape))
        t.inference = self.inference   # made inside inference_mode: an inference tensor (a view: make_view)
        self.next_tensor += 1
        self.all_tensors.append(t)
        return t

    def leaf(self, value, requires_grad: bool, dtype: str | None = None, name: str | None = None,
             is_param: bool = False) -> Tensor:
        t = self.tensor(value, requires_grad, dtype=dtype, name=name)
        t.is_param = is_param
        return t

    def wrapped_number(self, value: Fraction) -> Tensor:
        """A Python number PyTorch wraps into a 0-d tensor for an op (never saved, no edge)."""
        if getattr(value, "printed_number", False):   # x.item() of an irrational value (bindings.glue)
            value._refuse()
        t = self.tensor(self.B.scalar(value))
        t.wrapped = True
        t.float_number = isinstance(value, PyFloat)
        return t

    def gradient_edge(self, t: Tensor, hold: bool = True) -> Edge:
        """impl::gradient_edge. ``hold=False``: for a backward's root, whose leaf accumulator the
        running backward alone holds (see :meth:`grad_accumulator`)."""
        if t.is_view:
            refresh(self, t)
        if t.grad_fn is not None:
            return Edge(t.grad_fn, t.output_nr)
        if t.edgeless:
            return None   # impl::grad_accumulator: nullptr for a tensor whose own requires_grad_ is false
        return Edge(self.grad_accumulator(t, hold), 0)

    def grad_accumulator(self, t: Tensor, hold: bool = True) -> Node:
        """A leaf's AccumulateGrad node (impl::grad_accumulator), made when first needed. The
        tensor keeps only a weak_ptr to it: it lives while a graph's edge or a multi_grad hook's
        closure holds it (``hold``: the caller is such a holder), or while a backward whose root
        is the leaf itself runs; :meth:`release_accumulator` drops it after such a backward."""
        if t.grad_accumulator is None:
            t.grad_accumulator = Node(INF_SEQ, "torch::autograd::AccumulateGrad", [], kind="accumulate", variable=t)
        if hold:
            t.grad_accumulator.held = True
        return t.grad_accumulator

    def existing_grad_accumulator(self, t: Tensor) -> Node | None:
        """impl::try_get_grad_accumulator: the leaf's AccumulateGrad if one is alive, never a new one."""
        return t.grad_accumulator

    def release_accumulator(self, t: Tensor) -> None:
        """A backward whose root was the leaf ``t`` ended: its AccumulateGrad, if nothing but that
        backward held it, is freed with the graph task (a node hook registered on it is lost; the
        next backward from the leaf makes a new one)."""
        node = t.grad_accumulator
        if node is not None and not node.held:
            t.grad_accumulator = None

    # ------------------------------------------------------------------ ops
    def _check_size(self, op, shapes, loc) -> None:
        """Refuse an op whose result the value backend cannot hold (known from the shapes, before
        any value is computed): a broadcast or expand to hundreds of millions of elements."""
        limit = self.B.max_elements
        for shape in shapes:
            n = 1
            for d in shape:
                n *= d
            if limit is not None and n > limit:
                raise ProblemError(loc, f"this op ({op.node}) makes a tensor of shape {list(shape)}, {n:,} elements, "
                                        f"more than the {self.B.name} mode holds ({limit:,}); use smaller shapes"
                                        + (", or --float64 / --structure" if self.B.name == "exact" else
                                           ", or --structure" if self.B.name == "float64" else ""))

    def apply(self, opname: str, ins: list, params, loc, check: bool | None = None, in_kernel=None):
        """Run one primitive as PyTorch's autograd kernel would; returns the output Tensor
        (a tuple of them for a multi-output op). ``in_kernel()``, when given, is what the kernel
        writes besides its result (batch norm's running statistics): it runs after the inputs are
        packed and the values computed, before the outputs are packed, as in VariableType (a pack
        of an output may stop a checkpoint's recomputation: the write has happened by then)."""
        op = REGISTRY[opname]
        if self.progress is not None:
            self.progress("forward", self.seq, None)
        # None: an optional tensor argument not given (a convolution's bias): no edge value, never saved
        complex_grad.check_numbers(self.B, opname, ins, params, loc)
        if self.dtype == "float32" and opname in _SCALAR_ARITHMETIC:
            check_float32_scalar(op, ins, loc)
        ts = [x if isinstance(x, Tensor) or x is None else self.wrapped_number(x) for x in ins]
        for t in ts:   # a float64 copy a hook body made (x.double()) of a float32 problem's tensor
            if t is None or t.dtype == self.dtype or t.dtype not in ("float32", "float64"):
                continue
            if float32_tensors.lower(self, t):   # PyTorch's default dtype in a float64 problem
                float32_tensors.check_operand(self, op, t, loc)
            else:
                raise ProblemError(loc, f"{op.name} of a {t.dtype} tensor in a {self.dtype} problem: ops across "
                                        "float dtypes are not modelled yet (a hook may return such a copy: PyTorch "
                                        "refuses it, 'has changed the type of value')")
        complex_grad.check_operands(op, ts, params, loc)
        complex_grad.check_exact_values(self.B, op, ts, loc)
        if op.name in ("mm", "addmm", "dot"):   # a product of two dtypes: the kernel's error, after the packs
            mixed = complex_grad.mixed_product_error(op.name, ts)
            if mixed is not None:
                self.raise_after_packs(opname, ins, mixed, loc)
        if op.integers != "computed":   # checked in torch 2.13, kernel by kernel (Op.integers)
            flags = op.differentiable or (True,) * len(ts)   # a mask or an index operand is not the data
            dtypes = {t.dtype for t, d in zip(ts, flags) if d and t is not None}
            integral = next((d for d in sorted(dtypes) if d in ("int64", "bool")), None)
            if op.integers == "alone" and dtypes == {"int64"}:
                integral = None   # int64 alone: the CPU kernel computes it (an int64 result)
            known = op.forward_error is not None and op.forward_error(
                tuple(t.dtype if t is not None else None for t in ts), params)   # predicted by check_dtypes
            if integral is not None and not known:   # checked in torch: each kernel refuses it in its own words
                raise ProblemError(loc, f"{op.name} of an {integral} tensor is not modelled (PyTorch refuses it "
                                        "here, in words of the kernel's own, or computes an integer result); convert "
                                        "it first (x.to(torch.float64), x.double())")
        try:
            out_shape = op.shape([t.shape if t is not None else None for t in ts], params, loc)
        except TorchError as e:   # the kernel's shape check (operands that do not broadcast): after the packs
            self.raise_after_packs(opname, ins, e, loc)
        if self.dtype == "float32":
            error = float32_params(op, params, loc)
            if error is not None:
                self.raise_after_packs(opname, ins, error, loc)
        multi = op.outputs != 1
        self._check_size(op, out_shape if multi else [out_shape], loc)
        check_work(op, [t.shape if t is not None else None for t in ts], params, self.B, loc)
        diff = op.differentiable or (True,) * len(ts)
        rg = [d and t is not None and t.needs_grad for t, d in zip(ts, diff)]
        node = None
        if self.grad_enabled and any(rg):
            # a non-differentiable input (indices, running statistics) has no edge at all: PyTorch's
            # codegen collects next edges of the differentiable arguments only (they come first)
            # the node is made (its sequence_nr taken) before its next edges are collected, and
            # collecting reads each input's grad_fn: a stale view's new one comes after this node
            seq = self._new_seq() if op.takes_sequence_nr else INF_SEQ
            edges = [self.gradient_edge(t) if r else None for t, r, d in zip(ts, rg, diff) if d]
            node = self.new_node(op.node, edges, op, params, ts, loc, seq)
            if op.sequence_nr_max:   # torch::autograd::Error: UINT64_MAX, runs first once ready
                node.seq = INF_SEQ
            self._save(node, op, ts, [], "in")
        self.check_dtypes(op, ts, params)
        values = [t.value if t is not None else None for t in ts]
        if op.value_error is not None:   # the kernel refuses its operands' values (after the node and packs)
            refused = op.value_error(self.B, values, params)
            if refused:
                raise TorchError(refused[0], refused[1], "value")
        try:
            raw = op.forward(self.B, values, params)
        except ExactLimit as exc:
            raise ProblemError(loc, str(exc)) from None
        raws = list(raw) if multi else [raw]
        if in_kernel is not None:
            in_kernel()
        check = self.active if check is None else check
        outs_v = [self.B.after_op(op, values, params, v, loc, check) for v in raws]
        if check and op.kink is not None:
            note = op.kink(self.B, values, params)
            if note:
                self.notes.append((node.name if node is not None else op.name, loc, note))
        shapes = out_shape if multi else (out_shape,)
        n_diff = len(outs_v) if op.diff_outputs is None else op.diff_outputs
        complex_dtype = complex_grad.result_dtype(op, ts, self.dtype, params)
        if op.copies_values:   # its elements are the input's: its dtype too (bool for a mask)
            promoted = complex_dtype or ts[0].dtype
        elif op.elementwise and not op.out_dtypes:
            promoted = complex_dtype or self._promoted_dtype(op, ts, diff, params, loc)
        elif op.name in int_arith.REDUCTIONS and ts[0].dtype in ("int64", "bool"):
            promoted = "int64"   # sum and prod of a bool or int64 tensor: int64
            int_arith.check_float64_reduction(self.B, op.name, values[0], loc)
        else:
            promoted = None
            if not op.view and any(d and t is not None and t.dtype == "bool" for t, d in zip(ts, diff)):
                raise ProblemError(loc, f"{op.node} of a bool tensor is not modelled (PyTorch gives int64 sums and "
                                        "refuses most other ops on bool); use the bool tensor in where(cond, x, y) "
                                        "or multiply a float tensor by it")
        if promoted in ("int64", "bool") and (op.name in int_arith.ELEMENTWISE or op.name in int_arith.REDUCTIONS):
            outs_v = [int_arith.normalize(self.B, v, promoted, loc, f"this op ({op.name})", values) for v in outs_v]
        outs = []
        for k, (v, shape) in enumerate(zip(outs_v, shapes)):
            dtype = (op.out_dtypes[k] if k < len(op.out_dtypes) else None) or complex_dtype or promoted or \
                (ts[0].dtype if ts else None)
            grad = node is not None and k < n_diff
            if dtype == "float32" and self.dtype == "float64":
                float32_tensors.check_result(self, op, v, ins, grad, loc)
            t = self.tensor(v, grad, node if grad else None, k if grad else 0, dtype=dtype)
            t.version.value = op.result_version
            if op.view:
                self.make_view(t, ts[0], opname, params, k, loc)
            elif (op.elementwise or op.iterator_layout) and not op.contiguous_result:
                # TensorIterator lays the result out in the operands' memory order (a permuted
                # input gives a permuted result); where's operands are (condition, self, other)
                operands = [ts[2], ts[0], ts[1]] if opname == "where" else ts
                t.strides = iterator_strides([(x.shape, x.strides) for x in operands if x is not None], t.shape)
            outs.append(t)
        if node is not None:
            # the node's outputs are the differentiable ones (what its hooks see as grad_outputs);
            # every output's value stays at hand for the VJP (saved outputs such as indices)
            node.outputs = [(t.shape, t.dtype) for t in outs[:n_diff]]
            node.output_values = [t.value for t in outs]
            self._save(node, op, ts, outs, "out")
        self.record(opname, ts, outs, params, node, loc, values)
        return tuple(outs) if multi else outs[0]

    def raise_after_packs(self, opname: str, ins: list, error: TorchError, loc) -> None:
        """PyTorch's ``error`` from the kernel of ``opname``, whose arguments it refuses (a dim out
        of range, a dim repeated): VariableType makes the node and saves (packs) its inputs before
        the kernel runs, so the pack hooks of those inputs run first, then the error."""
        op = REGISTRY[opname]
        ts = [x if isinstance(x, Tensor) or x is None else self.wrapped_number(x) for x in ins]
        diff = op.differentiable or (True,) * len(ts)
        rg = [d and t is not None and t.needs_grad for t, d in zip(ts, diff)]
        if self.grad_enabled and any(rg):
            seq = self._new_seq()
            edges = [self.gradient_edge(t) if r else None for t, r, d in zip(ts, rg, diff) if d]
            node = self.new_node(op.node, edges, op, None, ts, loc, seq)
            self._save(node, op, ts, [], "in")
        raise error

    @staticmethod
    def check_dtypes(op, ts, params) -> None:
        """The kernel's own refusal of these operand dtypes (``-b``, ``b - x`` for a bool ``b``):
        PyTorch raises once autograd has made the node and packed its inputs."""
        if op.forward_error is not None:
            message = op.forward_error(tuple(t.dtype if t is not None else None for t in ts), params)
            if message:
                kind, message = message if isinstance(message, tuple) else ("RuntimeError", message)
                raise TorchError(kind, message, "dtype")

    def _promoted_dtype(self, op, ts, diff, params, loc) -> str:
        """TensorIterator's type promotion for an elementwise op, over the dtypes a problem has:
        an int64 or bool tensor combined with a tensor of the problem's float dtype gives that
        float dtype (``x * (x > 0)``). Without a float tensor, a Python float operand (``i * 0.5``,
        ``mask * 1.0``, ``1.0 - i``, ``i ** 0.5``) or true division (``i / 2``) gives PyTorch's
        default dtype, float32: the problem's in a float32 file, in a float64 one a float32 tensor
        (:mod:`adjoint.engine.float32_tensors`, which also promotes float32 tensors beside the
        problem's float64 ones). Integer and bool arithmetic alone (with Python ints only) gives
        int64 or bool (:mod:`adjoint.engine.int_arith`: add, sub, rsub, mul, neg); any other op
        of it is refused. A non-differentiable operand (``where``'s condition) takes no part."""
        operands = [t for t, d in zip(ts, diff) if d and t is not None]
        tensors = [t for t in operands if not t.wrapped]
        if self.dtype == "float64" and any(t.dtype == "float32" for t in tensors):
            return float32_tensors.promoted(tensors)
        if any(t.dtype == self.dtype for t in tensors) or all(t.dtype == self.dtype for t in operands):
            return self.dtype
        kinds = sorted({t.dtype for t in tensors})
        floating = any(t.float_number for t in operands) or isinstance(params, PyFloat) or op.name == "div"
        if floating:   # PyTorch's default dtype, float32 (in a float64 problem: adjoint.engine.float32_tensors)
            for t in tensors:   # each int64 operand is cast to float32 first
                if t.dtype == "int64" and not ints_held_exactly(self.B, t.value, "float32"):
                    raise ProblemError(loc, f"{op.name} of an int64 tensor with a Python float is modelled for "
                                            "integers a float32 holds exactly (|v| <= 2**24) only")
            return "float32"
        integral = int_arith.elementwise_dtype(op.name, operands)
        if integral is not None:   # integer and bool arithmetic (adjoint.engine.int_arith)
            return integral
        raise ProblemError(loc, f"{op.name} of {' and '.join(kinds)} tensors with no {self.dtype} tensor among its "
                                "operands is not modelled (integer and bool arithmetic is: + - * and unary -, sum, "
                                "prod); combine them with a float tensor (x * (x > 0)) or use where(cond, x, 0)")

    def new_node(self, name: str, edges: list, op, params, ts, loc, seq: int | None = None) -> Node:
        """A node of op ``op``; ``seq``: its sequence_nr when taken before its edges were collected."""
        node = Node(self._new_seq() if seq is None else seq, name, edges, op=op, params=params, inputs=tuple(ts),
                    input_values=tuple(t.value if t is not None else None for t in ts),
                    module_call=self.call_stack[-1] if self.call_stack else None, loc=loc)
        self.nodes.append(node)
        return node

    def make_view(self, t: Tensor, src: Tensor, opname: str, params, k: int, loc) -> None:
        """``t`` is the ``k``-th output of view op ``opname`` of ``src``: it shares src's storage
        and version counter; its strides are computed as PyTorch computes them."""
        op = REGISTRY[opname]
        root = src.base if src.base is not None else src
        t.base = root
        t.detached_root = src if src.is_detached else src.detached_root
        t.conj_bit = src.conj_bit and complex_grad.is_complex(t)   # a view of z.conj() is conjugated too
        t.version = src.version
        t.view_ops = src.view_ops + ((opname, params, k, src.shape),)
        t.view_version = src.version.shown
        t.data_version = src.version.value
        chain = t.view_ops
        B = self.B
        t.view_of = lambda base_value: view_value(B, base_value, chain)
        # CreationMeta, propagated as propagate_creation_meta does: a view of a view keeps its
        # base's kind unless the new view has one of its own (made under no_grad, or a piece of
        # a multi-output op). PyTorch's message names the newest view's own node ("Output 0 of
        # Select is a view ..."), not the first one's.
        name = short_name(op.node)
        t.creation = (src.creation[0], name) if src.creation else None
        if op.outputs != 1:   # MULTI_OUTPUT_NODE in grad mode (whether or not it records), else NO_GRAD_MODE
            t.creation = ("multi" if self.grad_enabled else "no_grad", name)
        elif not self.grad_enabled:
            t.creation = ("no_grad", name)
        # InferenceMode: a view of a normal tensor is a normal tensor whose CreationMeta is
        # INFERENCE_MODE; a view of an inference tensor is one too, with no view metadata
        t.inference = src.inference
        if self.inference:
            t.creation = None if src.inference else ("inference", name)
        elif src.inference:
            t.creation = None
        if not self.grad_enabled and t.grad_base.requires_grad and t.grad_fn is None:
            # DifferentiableViewMeta::requires_grad asks the base: a view made under no_grad of a
            # tensor that requires grad requires grad too, with no grad_fn and no gradient edge
            t.requires_grad = True
            t.edgeless = True
        if op.layout is not None:
            strides, offset = op.layout(src.shape, src.strides, src.offset, params)
            if strides is not None:
                t.strides, t.offset = strides, offset
        elif opname in ("split", "split_with_sizes", "unbind"):
            from adjoint.engine.ops.views import split_keys
            key = split_keys(src.shape, params)[k] if opname != "unbind" else (slice(None),) * params + (k,)
            t.strides, t.offset = _key_layout(src, key)

    def detach(self, t: Tensor) -> Tensor:
        """``x.detach()``: no node, the same data and version counter (writes show through)."""
        out = self.tensor(t.value, dtype=t.dtype)
        out.base = t.base if t.base is not None else t
        out.version = t.version
        out.view_ops = t.view_ops
        chain = t.view_ops
        B = self.B
        out.view_of = (lambda base_value: view_value(B, base_value, chain)) if chain else (lambda base_value: base_value)
        out.strides, out.offset = t.strides, t.offset
        out.conj_bit = t.conj_bit
        out.is_detached = True
        out.inference = t.inference   # detach() is a view op: of a normal tensor, a normal one
        # a detach() of a ``.data`` alias (or of a view of one) shares the alias's own counter
        out.data_alias = t.data_alias or (t.detached_root is not None and t.detached_root.data_alias)
        return out

    # ------------------------------------------------------------------ saved tensors
    def _save(self, node: Node, op: Op, ins: list, outs: list, what: str) -> None:
        need = [e is not None for e in node.edges]
        for s in op.saves:
            if s.what != what or not s.wanted(need):
                continue
            t = ins[s.index] if what == "in" else outs[s.index]
            if t is None:
                continue
            check_save(t)
            sv = SavedVariable(s.name, t, t.version.value, what == "out", t.value)
            if self.saved_hooks and not getattr(t, "wrapped", False):
                sv.hooks = self.saved_hooks[-1]
                sv.packed_grad_fn = t.grad_fn   # SavedVariable::save_metadata's grad_fn_
                sv.packed = self.hooks_runner.pack(sv.hooks, t, node, sv.name)
            node.saved.append(sv)

    def unpack(self, node: Node, sv: SavedVariable):
        """SavedVariable::unpack: freed -> the 'backward through the graph a second time' error;
        modified in place since saved -> the version error; with hooks, the unpack hook's result."""
        if sv.released:
            raise TorchError("RuntimeError", FREED_GRAPH, "freed_graph")
        if sv.hooks is not None:  # with saved-tensor hooks PyTorch does not check the version
            return self.hooks_runner.unpack(sv.hooks, sv.packed, node, sv)
        if not sv.is_output and not sv.was_leaf and sv.weak_grad_fn is None and sv.tensor.grad_fn is None \
                and node is not None and node.kind == "op":
            # an op's saved input detach_()ed since: data_.grad_fn() is gone (SavedVariable::unpack)
            raise TorchError("RuntimeError", DETACHED_SAVED, "saved_modified")
        if sv.tensor.version.value != sv.saved_version:
            raise TorchError("RuntimeError", version_message(sv, node, self.nodes, self.live_nodes,
                                                             self.captured_nodes), "saved_modified")
        return sv.value

    def live_nodes(self) -> set:
        """ids of the nodes something still holds: the current grad_fn of every tensor (the run
        keeps every tensor alive), and what their edges reach (a CopySlices holds the op it wraps;
        that op's edge 0, the written view's old grad_fn, does not count: see held_by_an_edge). A
        node only a replaced grad_fn pointed at -- the SelectBackward0 of ``h[1] = v``'s temporary
        view, rebased by the write -- is gone."""
        seen: set = set()
        # an op a CopySlices wraps is reached through it only (its result is the written view, whose
        # grad_fn was regenerated): its edge 0 never counts, whichever way the walk meets it
        wrapped = wrapped_ops(self.nodes)
        todo = [t.grad_fn for t in self.all_tensors if t.grad_fn is not None and not t.temporary] + \
            list(self.captured_nodes)
        while todo:
            n = todo.pop()
            if id(n) in seen:
                continue
            seen.add(id(n))
            todo.extend(e.node for i, e in enumerate(n.edges) if e is not None and not (i == 0 and id(n) in wrapped))
            if n.kind == "copyslices":
                fn = n.params[1]
                if id(fn) not in seen:
                    seen.add(id(fn))
                    todo.extend(e.node for i, e in enumerate(fn.edges) if e is not None and i != 0)
        return seen

    # ------------------------------------------------------------------ hook handles
    def add_hook(self, hooks: HookDict, entry, prepend: bool = False) -> int:
        hid = self.new_handle()
        hooks.add(hid, entry, prepend)
        return hid


DETACHED_SAVED = ("Trying to use a saved tensor that has been detached in-place, i.e. with .detach_().This is not "
                  "supported, please use out-of-place `.detach()` instead")

FREED_GRAPH = ("Trying to backward through the graph a second time (or directly access saved tensors after they "
               "have already been freed). Saved intermediate values of the graph are freed when you call "
               ".backward() or autograd.grad(). Specify retain_graph=True if you need to backward through the graph "
               "a second time or if you need to access saved tensors after calling backward.")

_TYPE_NAMES = {"float32": "torch.FloatTensor", "float64": "torch.DoubleTensor", "int64": "torch.LongTensor",
               "bool": "torch.BoolTensor"}


def wrapped_ops(nodes) -> set:
    """ids of the ops CopySlices nodes wrap (the in-place op on a view: its edge 0 is the view's
    old grad_fn, which CopySlices replaces by the base's)."""
    return {id(n.params[1]) for n in nodes if n.kind == "copyslices"}


def held_by_an_edge(target: Node, nodes) -> bool:
    """Does some node of the run hold ``target`` through a next edge? Edge 0 of a node a
    CopySlices wraps does not count: that is the written view's old grad_fn, and CopySlices
    goes to the base instead (checked in torch: after h.tanh_(); h *= w on a view h, the
    version error names Tanh, not the AsStrided node only that edge points at)."""
    wrapped = wrapped_ops(nodes)
    return any(e is not None and e.node is target and not (i == 0 and id(n) in wrapped)
               for n in nodes for i, e in enumerate(n.edges))


def version_message(sv: SavedVariable, node: Node, nodes=(), live=None, captured=()) -> str:
    """PyTorch's message for a saved tensor modified in place (SavedVariable::unpack): a saved
    output names the node that saved it, a saved input its current grad_fn (a view whose base
    changed since: the AsStridedBackward0 reading it makes), a leaf nothing; the node's name
    without its ``Backward0`` suffix."""
    t = sv.tensor
    dims = ", ".join(str(d) for d in t.shape)
    owner = node if sv.is_output else t.grad_fn
    # a weak pointer's lock: alive while the tensor's grad_fn or some node's edge holds it
    if sv.weak_grad_fn is not None and live is not None:
        alive = live()
        nodes = [n for n in nodes if id(n) in alive]   # only a node something holds holds its edges' nodes
    if sv.weak_grad_fn is not None and (t.grad_fn is sv.weak_grad_fn or held_by_an_edge(sv.weak_grad_fn, nodes)
                                        or any(n is sv.weak_grad_fn for n in captured)):
        owner = sv.weak_grad_fn   # an in-place op on a view saved its result: the view's grad_fn then
    if not sv.is_output and stale(t) and t.creation and t.creation[0] in ("custom", "multi", "no_grad", "inference"):
        # reading the view's grad_fn for the message cannot regenerate it: PyTorch raises that instead
        # (a view of a base that does not require grad has no grad_fn to regenerate: the version error)
        return rebase_message(t, True)
    owner_name, nr = (owner.name if owner else None), (t.output_nr if not sv.is_output else 0)
    if not sv.is_output and t.is_view and t.grad_base.requires_grad and t.view_version != t.version.shown:
        # reading the view's grad_fn regenerates it (VariableHooks::grad_fn): the base changed since
        owner_name, nr = "AsStridedBackward0", 0
    what = f", which is output {nr} of {short_name(owner_name)}," if owner_name else ""
    # the counts PyTorch has: writes through a ``.data`` alias are not among them (no such write
    # happened since the save: one is refused while a node holds the tensor saved)
    return (f"one of the variables needed for gradient computation has been modified by an inplace operation: "
            f"[{_TYPE_NAMES.get(t.dtype, t.dtype)} [{dims}]]{what} is at version {t.version.shown}; "
            f"expected version {sv.saved_version - t.version.hidden} instead. Hint: enable anomaly detection to find the operation that "
            "failed to compute its gradient, with torch.autograd.set_detect_anomaly(True, check_nan=False).")


def short_name(name: str) -> str:
    """How PyTorch's messages name a node: ``MulBackward0`` -> ``Mul``, ``PowBackward2`` ->
    ``Pow2`` (the overload number stays unless it is 0); a node that is not generated code keeps
    its whole name (``torch::autograd::CopySlices``)."""
    import re
    return re.sub(r"Backward(\d*)$", lambda m: "" if m.group(1) in ("", "0") else m.group(1), name)


def _key_layout(src: Tensor, key: tuple):
    """Strides and offset of ``src[key]`` for int / slice keys (the pieces of split and unbind)."""
    strides, offset, dim = [], src.offset, 0
    for item in key:
        if isinstance(item, int):
            offset += item * src.strides[dim]
        else:
            start, _, step = item.indices(src.shape[dim])
            offset += start * src.strides[dim]
            strides.append(src.strides[dim] * step)
        dim += 1
    strides.extend(src.strides[dim:])
    return tuple(strides), offset
