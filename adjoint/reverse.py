"""The backward pass, exactly as PyTorch 2.13's autograd engine runs it (the second interpreter).

This mirrors ``torch/csrc/autograd/engine.cpp`` on the CPU:

* dependencies are counted over the graph reachable from the root; a node is *ready* when
  every edge into it has delivered (gradients into one slot are summed first);
* ready nodes wait in a ``std::priority_queue`` keyed by ``sequence_nr`` (creation order;
  AccumulateGrad nodes have the maximal key and run as soon as they are ready). Ties are
  broken by libstdc++'s binary-heap algorithm, which :class:`ReadyQueue` reproduces;
* running a node: tensor pre-hooks (each tensor's ``register_hook`` hooks in order, each
  seeing the previous one's result), then ``retain_grad`` (so ``.grad`` sees the hooked
  value), then node pre-hooks, then the node's backward, then ``validate_outputs`` (which
  sums broadcast gradients back to each input's shape), then node post-hooks -- the module
  machinery (full backward hooks, backward-pre hooks, legacy hooks) lives among these;
* ``torch.autograd.grad`` (and ``backward(inputs=...)``) only run nodes on a path to the
  inputs; a captured node that need not run still calls its tensor pre-hooks; one that must
  run for another input is captured *before* its tensor hooks (PyTorch does the same);
* custom Functions (``BackwardHookFunction`` and user Functions) turn undefined incoming
  gradients into zeros before their backward runs (``materialize_grads``), which is where
  the zero ``grad_input`` of a full backward hook comes from; autograd-generated nodes pass
  undefined (None) through.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import exact as E
from .errors import ProblemError
from .exact import Exact
from .forward import Forward, literal_value
from .graph import Call, Eqn, Graph, Registered, evaluate_program
from .lower import EnvScope, Lowerer, ValueBackend, run_hook_body
from .ops import RULES
from .problem import Hook

INF_SEQ = 2 ** 64 - 1  # AccumulateGrad's sequence_nr (UINT64_MAX)


# ----------------------------------------------------------------------------- records

@dataclass
class HookCall:
    hook: Hook
    kind: str                      # the declared kind
    target: str
    call: Call | None              # module hooks: the module call that fired
    args: dict                     # argument name -> Exact | None | tuple of those
    returned: object               # Exact | tuple | None
    node: str | None = None        # the autograd node it ran at
    phase: str = "backward"
    why: list[str] = field(default_factory=list)


@dataclass
class Backward:
    calls: list[HookCall]
    grads: dict[int, Exact | None]          # leaf / retained var -> .grad
    captured: list[Exact | None]            # torch.autograd.grad results, in wrt order
    seen: dict[int, Exact | None]           # var -> gradient its grad_fn received (after tensor/node pre-hooks)
    order: list[str]                        # node names in execution order
    retained: dict[int, list[str]]          # retain_grad'ed vars (incl. backward(inputs=[non-leaf])) -> names


# ----------------------------------------------------------------------------- ready queue

class ReadyQueue:
    """std::priority_queue<NodeTask, vector, CompareNodeTaskTime> with libstdc++'s heap."""

    def __init__(self):
        self.heap: list = []

    @staticmethod
    def _less(a, b) -> bool:
        return a[0] < b[0]

    def __len__(self) -> int:
        return len(self.heap)

    def push(self, item) -> None:
        self.heap.append(item)
        self._push_heap(len(self.heap) - 1, 0, item)

    def _push_heap(self, hole: int, top: int, value) -> None:
        h = self.heap
        parent = (hole - 1) // 2
        while hole > top and self._less(h[parent], value):
            h[hole] = h[parent]
            hole = parent
            parent = (hole - 1) // 2
        h[hole] = value

    def pop(self):
        h = self.heap
        n = len(h)
        if n > 1:
            value = h[n - 1]
            h[n - 1] = h[0]
            self._adjust_heap(0, n - 1, value)
        return h.pop()

    def _adjust_heap(self, hole: int, length: int, value) -> None:
        h = self.heap
        top = hole
        child = hole
        while child < (length - 1) // 2:
            child = 2 * (child + 1)
            if self._less(h[child], h[child - 1]):
                child -= 1
            h[hole] = h[child]
            hole = child
        if (length & 1) == 0 and child == (length - 2) // 2:
            child = 2 * (child + 1)
            h[hole] = h[child - 1]
            hole = child - 1
        self._push_heap(hole, top, value)


# ----------------------------------------------------------------------------- engine

@dataclass
class _NodeInfo:
    key: tuple
    seq: int
    name: str
    edges: list                      # per output slot: (target key, input_nr) or None
    slots: list[int]                 # per input slot: the var whose gradient arrives there
    eqn: Eqn | None


class Engine:
    def __init__(self, graph: Graph, fwd: Forward, symbols: dict | None = None):
        self.g = graph
        self.f = fwd
        self.symbols = symbols
        self.calls: list[HookCall] = []
        self.grads: dict[int, Exact | None] = {}
        self.seen: dict[int, Exact | None] = {}
        self.order: list[str] = []
        self.module_state: dict[int, tuple | None] = {}
        self.nodes: dict[tuple, _NodeInfo] = {}
        self.exec_info: dict[tuple, dict] = {}
        self.retained = {vid: list(names) for vid, names in graph.retained.items()}

    # ------------------------------------------------------------ graph views
    def edge_of(self, vid: int):
        """The edge a gradient for tensor ``vid`` travels: its grad_fn, or its AccumulateGrad."""
        var = self.g.vars[vid]
        if not var.requires_grad:
            return None
        if var.producer is not None:
            return (("n", var.producer), var.output_nr)
        return (("a", vid), 0)

    def info(self, key: tuple) -> _NodeInfo:
        if key in self.nodes:
            return self.nodes[key]
        if key[0] == "a":
            vid = key[1]
            info = _NodeInfo(key, INF_SEQ, "torch::autograd::AccumulateGrad", [], [vid], None)
        else:
            eqn = self.g.eqns[key[1]]
            edges = [self.edge_of(v) if v is not None else None for v in eqn.node.edges]
            info = _NodeInfo(key, eqn.node.seq, eqn.node.name, edges, list(eqn.outs), eqn)
        self.nodes[key] = info
        return info

    # ------------------------------------------------------------ run
    def run(self) -> Backward:
        g = self.g
        root_edge = self.edge_of(g.root)
        root_grad = (literal_value(g.grad_output, self.symbols) if g.grad_output is not None
                     else Exact.full(g.vars[g.root].shape, 1))
        deps = self.dependencies(root_edge[0])
        captured: list[Exact | None] = [None] * len(g.wrt)
        if g.wrt:
            self.init_exec_info(root_edge[0])
        queue = ReadyQueue()
        not_ready: dict[tuple, list] = {}
        buf = [None] * len(self.info(root_edge[0]).slots)
        buf[root_edge[1]] = root_grad
        queue.push((self.info(root_edge[0]).seq, root_edge[0], buf))
        while len(queue):
            _, key, inputs = queue.pop()
            outputs = self.evaluate(key, inputs, captured)
            if outputs is None:
                continue
            for out, edge in zip(outputs, self.info(key).edges):
                if edge is None:
                    continue
                target, nr = edge
                deps[target] -= 1
                ready = deps[target] == 0
                if target not in not_ready:
                    if self.exec_info and not self.should_execute(target):
                        continue
                    b = [None] * len(self.info(target).slots)
                    b[nr] = _accumulate(None, out)
                    if ready:
                        queue.push((self.info(target).seq, target, b))
                    else:
                        not_ready[target] = b
                else:
                    b = not_ready[target]
                    b[nr] = _accumulate(b[nr], out)
                    if ready:
                        del not_ready[target]
                        queue.push((self.info(target).seq, target, b))
        if g.method == "grad":
            for (name, vid), value in zip(g.wrt, captured):
                if value is None:
                    loc = next((loc for n, loc in g.variant.backward.inputs if n == name), None)
                    raise ProblemError(loc, f"'{name}' receives no gradient: torch.autograd.grad raises 'One of the "
                                            "differentiated Tensors appears to not have been used in the graph'")
        return Backward(self.calls, self.grads, captured, self.seen, self.order, self.retained)

    def dependencies(self, root: tuple) -> dict[tuple, int]:
        deps: dict[tuple, int] = {}
        seen = {root}
        stack = [root]
        while stack:
            key = stack.pop()
            for edge in self.info(key).edges:
                if edge is None:
                    continue
                target = edge[0]
                deps[target] = deps.get(target, 0) + 1
                if target not in seen:
                    seen.add(target)
                    stack.append(target)
        return deps

    def init_exec_info(self, root: tuple) -> None:
        """GraphTask::init_to_execute: which nodes run, which capture (autograd.grad / inputs=)."""
        g = self.g
        accumulate = g.method == "backward"
        for idx, (name, vid) in enumerate(g.wrt):
            target, nr = self.edge_of(vid)
            info = self.exec_info.setdefault(target, {"needed": False, "captures": []})
            if accumulate:
                info["needed"] = True
                if self.g.vars[vid].producer is not None:  # run_backward retains grad of non-leaf inputs
                    self.retained.setdefault(vid, []).append(name)
            else:
                info["captures"].append((nr, idx))
        memo: dict[tuple, bool] = {}

        def needed(key: tuple) -> bool:
            if key in memo:
                return memo[key]
            memo[key] = False
            result = self.exec_info.get(key, {}).get("needed", False)
            for edge in self.info(key).edges:
                if edge is not None and (needed(edge[0]) or self.exec_info.get(edge[0], {}).get("captures")):
                    result = True
            if result:
                self.exec_info.setdefault(key, {"needed": False, "captures": []})["needed"] = True
            memo[key] = result
            return result

        needed(root)

    def should_execute(self, key: tuple) -> bool:
        info = self.exec_info.get(key)
        return bool(info and (info["needed"] or info["captures"]))

    # ------------------------------------------------------------ one node
    def evaluate(self, key: tuple, inputs: list, captured: list):
        if self.exec_info:
            info = self.exec_info.get(key, {"needed": False, "captures": []})
            if not info["needed"]:
                inputs = self.tensor_pre_hooks(key, inputs)
            for nr, idx in info["captures"]:
                captured[idx] = inputs[nr]
            if not info["needed"]:
                return None
        return self.call_function(key, inputs)

    def call_function(self, key: tuple, inputs: list) -> list:
        node = self.info(key)
        inputs = self.tensor_pre_hooks(key, inputs)
        inputs = self.node_pre_hooks(key, inputs)
        for vid, value in zip(node.slots, inputs):
            self.seen[vid] = value
        self.order.append(node.name)
        if key[0] == "a":
            vid = key[1]
            if inputs[0] is not None:
                self.grads[vid] = _accumulate(self.grads.get(vid), inputs[0])
            return []
        outputs = self.apply(node, inputs)
        outputs = self.validate_outputs(node, outputs)
        return self.post_hooks(node, outputs, inputs)

    def tensor_pre_hooks(self, key: tuple, inputs: list) -> list:
        inputs = list(inputs)
        node = self.info(key)
        groups = [(slot, vid) for slot, vid in enumerate(node.slots) if vid in self.g.tensor_hooks]
        groups.sort(key=lambda sv: self.g.tensor_hooks[sv[1]][0].clock)
        for slot, vid in groups:
            for reg in self.g.tensor_hooks[vid]:
                if reg.removed:
                    continue
                value = inputs[slot]
                returned = self.fire(reg, {"grad": value}, node.name)
                if returned is not None:
                    self.check_same(reg.hook, value, returned, self.g.vars[vid].shape)
                    inputs[slot] = returned
        for slot, vid in enumerate(node.slots):
            if vid in self.retained and inputs[slot] is not None:
                self.grads[vid] = _accumulate(self.grads.get(vid), inputs[slot])
        return inputs

    def node_pre_hooks(self, key: tuple, inputs: list) -> list:
        if key[0] != "n":
            return inputs
        for reg in self.g.node_pre.get(key[1], []):
            if reg.removed:
                continue
            returned = self.fire(reg, {"grad_outputs": tuple(inputs)}, self.info(key).name)
            if returned is not None:
                inputs = self.check_tuple(reg.hook, inputs, returned, [self.g.vars[v].shape for v in self.info(key).slots])
        return inputs

    def apply(self, node: _NodeInfo, inputs: list) -> list:
        eqn = node.eqn
        if eqn.prim in ("bhf", "function"):
            # PyNode::apply: materialize_grads turns undefined incoming gradients into zeros
            inputs = [x if x is not None else Exact.zeros(self.g.vars[v].shape) for x, v in zip(inputs, node.slots)]
            if eqn.prim == "bhf":
                return list(inputs)
            return function_vjp(eqn, [self.f.of(i) for i in eqn.ins], inputs[0])
        g = inputs[0]
        if g is None:
            return [None] * len(node.edges)
        need = [edge is not None and (not self.exec_info or self.should_execute(edge[0])) for edge in node.edges]
        if not any(need):
            return [None] * len(node.edges)
        ins = [self.f.of(i) for i in eqn.ins]
        out = self.f.values[eqn.outs[0]]
        grads = RULES[eqn.prim].vjp(g, ins, out, eqn.params, need)
        # autograd-generated nodes compute only the slots task_should_compute_output allows
        return [x if n else None for x, n in zip(grads, need)]

    def validate_outputs(self, node: _NodeInfo, outputs: list) -> list:
        outputs = list(outputs)
        for i, (edge, vid) in enumerate(zip(node.edges, node.eqn.node.edges)):
            if edge is None or outputs[i] is None:
                continue
            want = self.g.vars[vid].shape
            got = outputs[i].shape
            if got != want:
                if expandable(want, got):
                    outputs[i] = E.sum_to(outputs[i], want)
                else:
                    raise ProblemError(node.eqn.loc, f"{node.name} returned an invalid gradient at index {i} - got "
                                                     f"{list(got)} but expected shape compatible with {list(want)} "
                                                     "(PyTorch raises this)")
        return outputs

    def post_hooks(self, node: _NodeInfo, outputs: list, inputs: list) -> list:
        for ph in self.g.node_post.get(node.eqn.id, []):
            if ph.kind == "user":
                if ph.reg.removed:
                    continue
                returned = self.fire(ph.reg, {"grad_inputs": tuple(outputs), "grad_outputs": tuple(inputs)}, node.name)
                if returned is not None:
                    outputs = self.check_tuple(ph.reg.hook, outputs, returned, self.edge_shapes(node))
            elif ph.kind == "legacy":
                call = self.g.calls[ph.call]
                returned = self.fire(ph.reg, {"grad_input": tuple(outputs), "grad_output": tuple(inputs)}, node.name,
                                     call)
                if returned is not None:
                    outputs = self.check_tuple(ph.reg.hook, outputs, returned, self.edge_shapes(node))
            elif ph.kind == "module_out":
                outputs = self.module_output_hook(self.g.calls[ph.call], inputs, node)
            elif ph.kind == "module_in":
                outputs = self.module_input_hook(self.g.calls[ph.call], outputs, node)
        return outputs

    def edge_shapes(self, node: _NodeInfo) -> list:
        return [self.g.vars[v].shape if v is not None else None for v in node.eqn.node.edges]

    # ------------------------------------------------------------ nn.Module machinery (torch/utils/hooks.py)
    def module_output_hook(self, call: Call, grad_output: list, node: _NodeInfo) -> list:
        """BackwardHook.setup_output_hook's post-hook on the output BackwardHookFunctionBackward."""
        state = tuple(grad_output)
        self.module_state[call.id] = state
        for reg in call.pre_hooks:
            returned = self.fire(reg, {"grad_output": state}, node.name, call)
            if returned is None:
                continue
            state = tuple(self.check_tuple(reg.hook, list(state), returned, [self.g.vars[call.out].shape],
                                           f"the module has {len(state)} output(s): PyTorch raises 'Backward pre "
                                           "hook returned an invalid number of grad_output'"))
            self.module_state[call.id] = state
        local = state
        if call.bhf_in is None:
            grad_input = (None,) * len(call.args)
            for reg in call.full_hooks:
                returned = self.fire(reg, {"grad_input": grad_input, "grad_output": state}, node.name, call)
                if returned is not None and not (isinstance(returned, tuple) and all(r is None for r in returned)):
                    raise ProblemError(reg.hook.returns.loc, f"'{call.path}' has no input that requires grad, so its "
                                                             "full backward hook may only return None: PyTorch raises "
                                                             "'Backward hook for Modules where no input requires "
                                                             "gradient should always return None or None for all "
                                                             "gradients'")
            self.module_state[call.id] = None
        return list(local)

    def module_input_hook(self, call: Call, grad_input: list, node: _NodeInfo) -> list:
        """BackwardHook._set_user_hook's post-hook on the input BackwardHookFunctionBackward."""
        state = self.module_state.get(call.id)
        if state is None:
            return grad_input
        res = tuple(grad_input)
        for reg in call.full_hooks:
            returned = self.fire(reg, {"grad_input": res, "grad_output": state}, node.name, call)
            if returned is None:
                continue
            res = tuple(self.check_tuple(reg.hook, list(res), returned, [self.g.vars[a].shape for a in call.args],
                                         f"'{call.path}' has {len(res)} input(s): PyTorch raises 'Backward hook "
                                         "returned an invalid number of grad_input'"))
        self.module_state[call.id] = None
        return list(res)

    # ------------------------------------------------------------ firing
    def fire(self, reg: Registered, args: dict, node_name: str, call: Call | None = None):
        hook = reg.hook
        returned = run_hook_body(hook, args, ValueBackend())
        if isinstance(returned, tuple):
            returned = tuple(_as_exact(r, hook) for r in returned)
        elif returned is not None:
            returned = _as_exact(returned, hook)
        self.calls.append(HookCall(hook, hook.kind, hook.target, call, args, returned, node_name))
        return returned

    def check_same(self, hook: Hook, value, returned, shape) -> None:
        if isinstance(returned, tuple) or not isinstance(returned, Exact):
            raise ProblemError(hook.returns.loc, "a tensor hook must return a tensor (the new gradient) or nothing")
        if returned.shape != tuple(shape):
            raise ProblemError(hook.returns.loc, f"the hook returns shape {list(returned.shape)} for a gradient of shape "
                                                 f"{list(shape)}: PyTorch raises \"hook 'hook' has changed the size "
                                                 "of value\"")

    def check_tuple(self, hook: Hook, original: list, returned, shapes: list, arity: str | None = None) -> list:
        """A hook's returned tuple, checked as PyTorch checks it; ``arity`` words a count mismatch."""
        where = hook.returns.loc
        if not isinstance(returned, tuple):
            raise ProblemError(where, f"the {hook.kind} hook must return a tuple such as (2 * grad_input[0],): PyTorch "
                                      "expects one gradient per slot")
        if len(returned) != len(original):
            raise ProblemError(where, f"the {hook.kind} hook returns {len(returned)} value(s) but "
                                      + (arity or f"PyTorch expects {len(original)}: it raises \"hook 'hook' has "
                                                  f"returned an incorrect number of values (got {len(returned)}, but "
                                                  f"expected {len(original)})\""))
        for r, o, s in zip(returned, original, shapes):
            if r is None or s is None:
                continue
            if r.shape != tuple(s):
                raise ProblemError(where, f"the hook returns a gradient of shape {list(r.shape)} where PyTorch expects "
                                          f"{list(s)}: it raises \"hook 'hook' has changed the size of value\"")
        return list(returned)


def function_vjp(eqn: Eqn, values: list[Exact], grad_output: Exact) -> list:
    """A user autograd.Function's backward: its declared formulas, evaluated exactly."""
    spec = eqn.params
    env = dict(zip(spec.slots, values))
    output, local = evaluate_program(spec.module, env)
    env.update(local)
    env["output"] = output
    env["grad_output"] = grad_output
    out = []
    for slot, formula in spec.decl.grads:
        if formula is None:
            out.append(None)
            continue
        scope = EnvScope(env, f"the backward formula for '{slot}' of {spec.decl.name}")
        value = Lowerer(ValueBackend(), scope).eval(formula)
        if not isinstance(value, Exact):
            raise ProblemError(formula.loc, f"the backward formula for '{slot}' must give a tensor")
        out.append(value)
    return out


def _as_exact(value, hook: Hook):
    if value is None or isinstance(value, Exact):
        return value
    if isinstance(value, tuple):
        raise ProblemError(hook.returns.loc, "nested tuples are not valid hook results")
    # a plain Python number: PyTorch would reject it as a gradient
    raise ProblemError(hook.returns.loc, "the hook returns a plain number; PyTorch expects a tensor "
                                         "(write e.g. grad * 0 + 1)")


def _accumulate(current: Exact | None, new: Exact | None) -> Exact | None:
    if new is None:
        return current
    if current is None:
        return new
    return E.add(current, new)


def expandable(shape: tuple, to: tuple) -> bool:
    """Can ``shape`` be broadcast to ``to`` (is_expandable_to)?"""
    if len(shape) > len(to):
        return False
    for a, b in zip(reversed(shape), reversed(to)):
        if a != b and a != 1:
            return False
    return True


def run_backward(graph: Graph, fwd: Forward, symbols: dict | None = None) -> Backward:
    return Engine(graph, fwd, symbols).run()


# ----------------------------------------------------------------------------- pure adjoints

def pure_vjp(graph: Graph, fwd: Forward, eqns: range, seed_var: int, seed: Exact, wrt: tuple[int, ...]) -> list:
    """J^T seed through the eqns in ``eqns`` (hooks ignored): the Lagrangian adjoint of a module.

    Returns, per var in ``wrt``, its cotangent, or None where the var does not require grad."""
    cot: dict[int, Exact] = {seed_var: seed}
    for eid in reversed(eqns):
        eqn = graph.eqns[eid]
        if eqn.node is None:
            continue
        gs = [cot.get(o) for o in eqn.outs]
        if all(x is None for x in gs):
            continue
        if eqn.prim == "bhf":
            outs = [x if x is not None else Exact.zeros(graph.vars[o].shape) for x, o in zip(gs, eqn.outs)]
        elif eqn.prim == "function":
            outs = function_vjp(eqn, [fwd.of(i) for i in eqn.ins], gs[0])
        else:
            need = [v is not None for v in eqn.node.edges]
            outs = RULES[eqn.prim].vjp(gs[0], [fwd.of(i) for i in eqn.ins], fwd.values[eqn.outs[0]], eqn.params, need)
        for v, g in zip(eqn.node.edges, outs):
            if v is None or g is None:
                continue
            if g.shape != graph.vars[v].shape:
                g = E.sum_to(g, graph.vars[v].shape)
            cot[v] = _accumulate(cot.get(v), g)
    return [(cot.get(v, Exact.zeros(graph.vars[v].shape)) if graph.vars[v].requires_grad else None) for v in wrt]
