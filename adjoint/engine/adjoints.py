"""Module boundaries, the Lagrangian view of a module call: the multiplier of its output as the
backward carried it there, and J^T of it through the call's own autograd nodes with every hook
ignored (:func:`boundaries_of`, :func:`pure_vjp`); the gradient PyTorch carried to a tensor
(:func:`seen_at`). Used by ``solve`` (the JSON's ``adjoints``) and by the derivation."""

from __future__ import annotations

from dataclasses import dataclass

from adjoint.engine.autograd_function import declared_vjp, input_dtypes
from adjoint.engine.torch_errors import TorchError
from adjoint.engine.graph import Node, Tensor
from adjoint.engine.nn_module import LegacyHook
from adjoint.engine.inplace import copy_slices_backward
from adjoint.values.numbers.sizes import expandable
from adjoint.format.problem import OUTPUT, ROOT
from adjoint.engine.complex_grad import call_vjp, zeros as zeros_of
from adjoint.engine.dirty_adjoint import dirty_call_grads


@dataclass(repr=False)
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
    grad_input: tuple                 # Exact | None per positional input: J^T grad_output, hooks aside
    depth: int
    passed: tuple = ()                # Exact | None per positional input: what PyTorch passed it from the
                                      # call's nodes, the hooks inside acting, before the module's own hooks
    requires: tuple = ()              # per positional input: does it require grad (a tensor's requires_grad)

    def __repr__(self) -> str:
        return f"<Boundary {self.callid} [{self.type}]: {len(self.grad_output)} grad_output, {len(self.grad_input)} grad_input>"


def seen_at(bwd, t: Tensor):
    """The gradient PyTorch carried to ``t`` (what its grad_fn, or AccumulateGrad, received)."""
    if not isinstance(t, Tensor) or not t.requires_grad:
        return None
    if t.grad_fn is not None:
        return bwd.seen.get((id(t.grad_fn), t.output_nr))
    return bwd.seen.get(t.id)


def describe_tensor(t) -> str:
    if isinstance(t, tuple):   # a tuple argument (an LSTMCell's (h, c)): its tensors' names, not their reprs
        return "(" + ", ".join(describe_tensor(x) for x in t) + ")"
    if not isinstance(t, Tensor):
        return "None" if t is None else str(t)
    if t.name:
        return t.name
    if t.grad_fn is not None:
        return f"output of {t.grad_fn.name}"
    return "a tensor"


def boundaries_of(rt, fwd, bwd, progress=None, passed: bool = True) -> list[Boundary]:
    """Every module call of forward pass ``fwd``: the multiplier of its output(s) as backward ``bwd``
    carried it there, and J^T of it through the call's own nodes (hooks ignored); with ``passed``,
    also what the backward passed each input from those nodes (:func:`passed_grads`: the answer's
    ``grad_input``). ``progress``: told ``progress("assemble", done, total)`` per call."""
    out = []
    depth_of: dict[int, int] = {}
    position = {id(node): i for i, node in enumerate(rt.nodes)}
    sends = _sends_by_edge(bwd)
    for done, call in enumerate(fwd.calls):
        if progress is not None:
            progress("assemble", done, len(fwd.calls))
        depth = 0 if call.parent is None else depth_of[call.parent] + 1
        depth_of[call.id] = depth
        outs = call.out if isinstance(call.out, tuple) else (call.out,)
        start = position[id(call.in_node)] if call.in_node is not None else call.body_start
        inside = {id(n) for n in rt.nodes[start:call.end]}
        # each output's multiplier where the call returned it: a later in-place op (an in-place ReLU after
        # it) gave the tensor another grad_fn since, whose gradient is the next module's; and only what
        # reaches it from outside the call (LSTMCell's c, which its h is made from inside)
        gouts = tuple(_outside(rt.B, bwd, t, call, i, inside, sends) for i, t in enumerate(outs))
        if any(g is not None for g in gouts):
            # each output as the call returned it: its history then (an in-place op after the call moved it)
            seeds = output_seeds(call, gouts)
            gin = dirty_call_grads(rt, call, gouts)   # a Function that wrote its input in place
            dirty = gin is not None
            if gin is None:
                gin = tuple(pure_vjp(rt, rt.nodes[start:call.end], seeds, call.args, getattr(bwd, "vjps", None),
                                     input_slots(call), none_unreached=True))
            if call.module.type == "Identity":
                gin = (gouts[0] if call.args[0].requires_grad else None,)
            # the module's own full_backward_pre hook replaced grad_output, or its own legacy backward hook
            # (on the call's last node) replaced that node's grad_input: grad_input is what the forward
            # derives from the grad_output before it (the answer's definition), J^T of it -- when no other
            # hook inside the module acted, so that J^T is that derivation (else: what it passed, as documented)
            sent = gin if not passed or dirty or call.module.type == "Identity" or start >= call.end else \
                passed_grads(rt, rt.nodes[start:call.end], call, bwd, list(zip(outs, gouts)))
            if sent is not gin and _replaced_by_own_hook(rt, call) and not _hooks_inside(rt, rt.nodes[start:call.end],
                                                                                        call):
                # J^T of the grad_output before the replacement, where PyTorch passed the input a gradient
                sent = tuple(None if p is None else g for p, g in zip(sent, gin))
        else:
            gin = sent = tuple(None for _ in call.args)
        nodes = [n.name for n in call.body_nodes(rt)]
        names = tuple(describe_tensor(a) for a in call.args)
        out.append(Boundary(call.callid, call.path, call.k, call.module.type or "custom", call.module.inputs, names,
                            OUTPUT if call.path == ROOT else call.callid, nodes, gouts, gin, depth, sent,
                            tuple(isinstance(a, Tensor) and a.needs_grad for a in call.args)))
    return out


def _seen_as_returned(bwd, t, call, i: int):
    """The gradient PyTorch carried to output ``i`` of ``call`` as the call returned it."""
    if not isinstance(t, Tensor) or not t.requires_grad:
        return None
    key = _as_returned(t, call, i)
    if key is t or key not in bwd.seen:   # (a view's grad_fn then, which its base's write took out of the graph)
        return seen_at(bwd, t)
    return bwd.seen[key]


def _sends_by_edge(bwd) -> dict:
    """What the backward's nodes sent along each edge, by the edge's key (:func:`_edge_key`): a list
    of (id of the sending node, gradient), in the order the nodes ran. Made once per backward, so
    that looking up one output's senders does not walk every node of the pass again."""
    sends: dict = {}
    for entry in bwd.sent.values():
        node, grads = entry[0], entry[1]
        for edge, g in zip(node.edges, grads):
            if edge is not None and g is not None:
                sends.setdefault(_edge_key(edge), []).append((id(node), g))
    return sends


def _outside(B, bwd, t, call, i: int, inside: set, sends: dict):
    """Output ``i``'s multiplier as it reaches the module's boundary: the gradient PyTorch carried to
    it where the call returned it, less what the call's own nodes sent it (an output another output
    is made from, inside the call: what a full backward hook, whose BackwardHookFunction makes each
    output a tensor of its own, is handed is only what its outside uses send). ``sends``: from
    :func:`_sends_by_edge`."""
    seen = _seen_as_returned(bwd, t, call, i)
    if seen is None or not inside:
        return seen
    key = _as_returned(t, call, i)
    key = _key(key) if isinstance(key, Tensor) else key
    inner, outer = None, None
    for sender, g in sends.get(key, ()):
        g = gradient_value(g)
        if sender in inside:
            inner = g if inner is None else B.add(inner, g)
        else:
            outer = g if outer is None else B.add(outer, g)
    if inner is None:
        return seen
    if outer is not None:
        return outer
    rest = B.sub(gradient_value(seen), inner)   # a root of the backward (no node sent it): its own gradient
    return None if B.equals(rest, B.zeros(B.shape(rest))) else rest


def _replaced_by_own_hook(rt, call) -> bool:
    """Did the call's own hooks hand its nodes other gradients than reached them: its full_backward_pre
    hooks another grad_output (a returned replacement, or one written in place; a node hook on its
    output node is not the module's own), or its legacy ``register_backward_hook`` (a post-hook on
    the call's last node, module or global) another grad_input, returned or written in place, which
    that node's predecessors inside the module then carry on?"""
    if call.bw is not None and call.bw.pre_replaced:
        return True
    return any(r.call is call and r.phase == "backward" and (
        (r.kind == "backward" and (r.returned is not None or "gradient" in r.wrote))
        or (r.kind == "full_backward_pre" and "gradient" in r.wrote)) for r in rt.log)


def _own_legacy(record, call) -> bool:
    """Is ``record`` a call of ``call``'s own legacy backward hook (``_WrappedHook`` on its last node)?"""
    return record.call is call and record.kind == "backward" and record.phase == "backward"


def output_seeds(call, gouts: tuple) -> list:
    """(key, multiplier) of each output of ``call`` a multiplier reached: the seeds of J^T through
    its nodes (each output as the call returned it, :func:`_as_returned`). A tensor the call returns
    at several positions (``return h, h``; an input returned twice) is one seed: the gradient the
    graph carried to it, each position's multiplier, is already the sum of every position's uses."""
    outs = call.out if isinstance(call.out, tuple) else (call.out,)
    seeds, keys = [], set()
    for i, (t, g) in enumerate(zip(outs, gouts)):
        key = _as_returned(t, call, i)
        if g is None or _once(key) in keys:
            continue
        keys.add(_once(key))
        seeds.append((key, g))
    return seeds


def _once(key):
    """A seed key that is the same for the same tensor (an engine tensor by identity)."""
    return ("tensor", id(key)) if isinstance(key, Tensor) else key


def _as_returned(t, call, i: int):
    """The seed key of output ``i``: the (grad_fn, output_nr) it had when the call returned,
    when a later in-place op gave it another; else the tensor."""
    hist = call.out_history[i] if i < len(call.out_history) else None
    if hist is None or not isinstance(t, Tensor) or hist[0] is None or hist[0] is t.grad_fn:
        return t
    return (id(hist[0]), hist[1])


def _hooks_inside(rt, nodes: list, call) -> bool:
    """Did a hook fire at one of the call's nodes other than its own input and output nodes (a
    child's module hook, a tensor or node hook inside it), the call's own legacy hook aside?"""
    own = {id(call.in_node), id(call.out_node)}
    inside = {id(n) for n in nodes} - own
    return any(r.node is not None and id(r.node) in inside and r.phase == "backward" and not _own_legacy(r, call)
               for r in rt.log)


def passed_grads(rt, nodes: list, call, bwd, returned: list) -> tuple:
    """What the backward ``bwd`` passed each positional input of ``call`` from the call's own
    nodes: the hooks inside the module acting (a child's, a tensor's, a node's), none of the
    module's own (what its first full backward hook would be handed as ``grad_input``). With a
    full backward hook, the module's input node received exactly that, before its hooks ran;
    otherwise it is the sum of what the call's nodes handed the edges to that input (None where
    none did: PyTorch computes none), the node a legacy backward hook of the module is on read
    before its post hooks (that hook is the module's own). An input the call wrote in place (an
    in-place ReLU) has the call's own node as its history now: what it is passed is what reaches
    the history it had before (:func:`_history_before`). An input the call returns as it is
    (``returned``: (output, its grad_output) pairs) gets that output's gradient too, through no
    node (once, when it is returned at several positions)."""
    slots = input_slots(call)
    if slots is not None:
        node, positions = slots
        return tuple(gradient_value(bwd.seen.get((id(node), p))) if p is not None else None for p in positions)
    inside = {id(n) for n in nodes}
    keys = [_history_before(a, inside) if isinstance(a, Tensor) and a.needs_grad else None for a in call.args]
    wanted = {k: None for k in keys if k is not None}
    for n in nodes:
        entry = bwd.sent.get(id(n))
        if entry is None or entry[0] is not n:
            continue
        own = any(isinstance(e, LegacyHook) and e.call is call for e in n.post_hooks.live())
        for edge, g in zip(n.edges, entry[2] if own else entry[1]):
            if edge is None or g is None:
                continue
            k = _edge_key(edge)
            if k in wanted:
                g = gradient_value(g)
                wanted[k] = g if wanted[k] is None else rt.B.add(wanted[k], g)
    for t, g in {id(t): (t, g) for t, g in returned}.values():   # a tensor returned twice: its gradient once
        if isinstance(t, Tensor) and g is not None and t.needs_grad and _key(t) in wanted:
            wanted[_key(t)] = g if wanted[_key(t)] is None else rt.B.add(wanted[_key(t)], g)
    return tuple(wanted.get(k) if k is not None else None for k in keys)


def _history_before(t: Tensor, inside: set):
    """The edge key of ``t``'s history as the call received it: its key now, unless the call wrote
    it in place, which made one of the call's own nodes its grad_fn; then the history that node
    chain (each in-place op's first edge: its ``self``) leads back to, outside the call."""
    node = t.grad_fn
    if node is None or id(node) not in inside:
        return _key(t)
    while node is not None and id(node) in inside:
        edge = node.edges[0] if node.edges else None
        if edge is None:
            return None
        if edge.node.is_accumulate or id(edge.node) not in inside:
            return _edge_key(edge)
        node = edge.node
    return None


def gradient_value(g):
    return g.value if isinstance(g, Tensor) else g


def _key(t: Tensor):
    return (id(t.grad_fn), t.output_nr) if t.grad_fn is not None else ("leaf", t.id)


def _edge_key(edge):
    node = edge.node
    return ("leaf", node.variable.id) if node.is_accumulate else (id(node), edge.input_nr)


def _known_vjp(B, known: dict | None, node: Node, gs: list, need: list) -> list | None:
    """The engine's VJP of ``node`` when it was computed from the same gradients (the same objects,
    or values the backend's ``same_value`` calls identical: a sum the engine and this walk each
    made, below a residual connection) and covered every slot wanted here (None otherwise)."""
    entry = known.get(id(node)) if known else None
    if entry is None:
        return None
    same_node, inputs, engine_need, grads = entry
    if same_node is not node or len(inputs) != len(gs):
        return None
    if any(a is not b and (a is None or b is None or not B.same_value(a, b)) for a, b in zip(inputs, gs)):
        return None
    if any(want and not had for want, had in zip(need, engine_need)):
        return None
    return [g if want else None for g, want in zip(grads, need)]


def input_slots(call):
    """(the module's input BackwardHookFunctionBackward, the position of each argument among its
    outputs or None), when the call has one: there an argument passed twice (self-attention's
    query, key and value) is two tensors, each with its own gradient, as a full hook is handed them."""
    node, index = call.in_node, call.bw.input_tensors_index if call.bw is not None else None
    if node is None or index is None:
        return None
    slots = [None] * len(call.args)
    for k, i in enumerate(index):
        slots[i] = k
    return node, slots


def pure_vjp(rt, nodes: list[Node], seeds: list, wrt, known: dict | None = None, slots=None,
             none_unreached: bool = False) -> list:
    """J^T seed through ``nodes`` (hooks ignored): the Lagrangian adjoint of a module.
    ``seeds``: (tensor, cotangent) pairs.

    ``known``: the VJPs the engine computed (``BackwardResult.vjps``); a node handed the very
    gradient objects the engine handed it (no hook rewrote them) reuses the engine's result
    instead of computing it again -- on an MLP with a hook on every layer that is most of the
    work, since every module's adjoint re-runs the backward below it.

    ``slots``: (node, positions) from :func:`input_slots`: the cotangent of ``wrt[j]`` is then
    read at that node's output ``positions[j]``, before the node adds up aliased arguments.

    Returns, per tensor in ``wrt``, its cotangent, or None where it does not require grad; one that
    requires grad but no path from the seeds reaches gets zeros (``none_unreached``: None, as
    PyTorch computes none there: a module's adjoint)."""
    B = rt.B
    cot: dict = {}
    for t, g in seeds:
        k = t if isinstance(t, tuple) else _key(t)   # a tensor, or a (node id, output_nr) key
        cot[k] = g if k not in cot else B.add(cot[k], g)
    for node in reversed(nodes):
        gs = [cot.get((id(node), i)) for i in range(len(node.outputs))]
        if all(g is None for g in gs):
            continue
        if node.kind == "hookfn":
            outs = [g if g is not None else zeros_of(B, *node.outputs[i]) for i, g in enumerate(gs)]
        elif node.kind == "function":
            filled = [g if g is not None or node.outputs[i] is None else zeros_of(B, *node.outputs[i])
                      for i, g in enumerate(gs)]
            outs = declared_vjp(rt, node.params, list(node.input_values), filled if len(filled) > 1 else filled[0],
                                dtypes=input_dtypes(node, B))
            outs = [g for v, g in zip(node.input_values, outs) if B.is_value(v)]   # the tensor inputs: the edges
        elif node.kind == "checkpoint":   # CheckpointFunctionBackward: J^T of the recomputed region
            outs = node.params.pure_vjp(rt, [g if g is not None or node.outputs[i] is None else
                                             zeros_of(B, *node.outputs[i]) for i, g in enumerate(gs)])
        elif node.kind == "copyslices":
            if gs[0] is None:
                continue
            outs = copy_slices_backward(rt, node, gs[0], [e is not None for e in node.edges],
                                        lambda fn, grads, need: fn.op.vjp(B, grads, list(fn.input_values),
                                                                          list(fn.output_values), fn.params, need)
                                        if fn.kind != "function" else   # a Function that marked a view dirty
                                        declared_vjp(rt, fn.params, list(fn.input_values), grads[0],
                                                     dtypes=input_dtypes(fn, B)))
        else:
            need = [e is not None for e in node.edges]
            outs = _known_vjp(B, known, node, gs, need)
            if outs is None:
                try:
                    outs = call_vjp(node, B, gs, list(node.input_values), list(node.output_values), need)
                except TorchError:   # PyTorch's backward formula raises here (the answer's error): no flow on
                    continue
        for i, (edge, g) in enumerate(zip(node.edges, outs)):
            if edge is None or g is None:
                continue
            want = node.inputs[i].shape
            if tuple(B.shape(g)) != want:
                if not expandable(want, tuple(B.shape(g))):
                    # a custom Function's gradient of another shape: PyTorch's validate_outputs raises
                    # there (the answer's error), so nothing flows on along this edge
                    continue
                g = B.sum_to(g, want)
            k = _edge_key(edge)
            cot[k] = g if k not in cot else B.add(cot[k], g)
    def missing(t):
        return None if none_unreached else B.zeros(t.shape)

    # an input the nodes wrote in place (an in-place ReLU on it) has one of them as its grad_fn now:
    # its cotangent is what reaches the history it had before
    inside = {id(n) for n in nodes}

    def key(t):
        return _history_before(t, inside) if t.grad_fn is not None and id(t.grad_fn) in inside else _key(t)

    if slots is not None:
        node, positions = slots
        return [(cot.get((id(node), positions[j]) if positions[j] is not None else key(t), missing(t))
                 if isinstance(t, Tensor) and t.requires_grad else None) for j, t in enumerate(wrt)]
    return [(cot.get(key(t), missing(t)) if isinstance(t, Tensor) and t.requires_grad else None)
            for t in wrt]
