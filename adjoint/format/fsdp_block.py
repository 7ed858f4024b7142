"""``distributed: {wrap: fully_shard, ...}``: FSDP2's ``fully_shard``, read and checked.

``shard: [CHILD, ...]`` names the submodules that get their own ``fully_shard`` call, in that
order, before the root's (``fully_shard(model)``, always last); ``args:`` takes
``reshard_after_forward`` (a boolean; PyTorch's default ``None`` is ``True`` for every module
but the root). What a rank's hooks see is modelled by :mod:`adjoint.engine.fsdp`; what is not
modelled yet is refused here with one located line (docs/not-modelled.md).
"""

from __future__ import annotations

from adjoint.format.checks import boolean
from adjoint.format.errors import ProblemError
from adjoint.format.loader import YMap, YScalar, YSeq, kind_name

FSDP_ARGS = ("reshard_after_forward",)


def read_fsdp_args(m: YMap) -> dict:
    """``shard`` and ``args`` of a fully_shard block: {"shard": ((label, loc), ...), "reshard_after_forward": b}."""
    out = {"shard": (), "reshard_after_forward": None}
    if m.get("comm_hook") is not None:
        raise ProblemError(m.key_loc("comm_hook"), "distributed.comm_hook is DistributedDataParallel's; "
                                                   "fully_shard has none (remove it, or use wrap: ddp)")
    node = m.get("shard")
    if node is not None:
        if not isinstance(node, YSeq):
            raise ProblemError(node.loc, f"distributed.shard must be a list of submodule names (each gets its own "
                                         f"fully_shard, in this order, before the root's), not {kind_name(node)}")
        seen = set()
        names = []
        for item in node.items:
            if not isinstance(item, YScalar) or item.kind != "str":
                raise ProblemError(item.loc, f"distributed.shard lists submodule names, not {kind_name(item)}")
            if item.text in seen:
                raise ProblemError(item.loc, f"distributed.shard names '{item.text}' twice; fully_shard is applied "
                                             "once per module")
            seen.add(item.text)
            names.append((item.text, item.loc))
        out["shard"] = tuple(names)
    a = m.get("args")
    if a is not None:
        if not isinstance(a, YMap):
            raise ProblemError(a.loc, f"distributed.args must be a mapping of fully_shard's keyword arguments, "
                                      f"not {kind_name(a)}")
        for key, value in a.entries:
            if key.text not in FSDP_ARGS:
                raise ProblemError(key.loc, f"distributed.args: '{key.text}' is not modelled for fully_shard; the "
                                            f"modelled argument is {', '.join(FSDP_ARGS)}")
            out[key.text] = boolean(value, f"distributed.args.{key.text}")
    return out


def check_fsdp_problem(problem, spec) -> None:
    """What a fully_shard run does not model yet, and shard names that are no submodule."""
    modules = {m.label: m for m in problem.model.walk()}
    root = problem.model
    order = []
    for label, loc in spec.shard:
        if label not in modules or modules[label] is root:
            known = ", ".join(lb for lb in modules if modules[lb] is not root) or "none"
            raise ProblemError(loc, f"distributed.shard: '{label}' is not a submodule of the model (the root gets "
                                    f"its fully_shard anyway); the submodules are: {known}")
        for earlier in order:
            if label.startswith(earlier + "."):
                raise ProblemError(loc, f"distributed.shard: '{label}' lies inside '{earlier}', which is sharded "
                                        "before it: not modelled (shard the inner module first)")
        order.append(label)
    for v in problem.variants:
        steps = list(v.steps or ())
        for step in steps:
            if step.kind == "registered" or (step.kind == "forward" and step.call is not None):
                raise ProblemError(step.loc, "a registered step or a forward step's call: under fully_shard is "
                                             "not modelled yet")
            if step.kind == "backward" and step.backward is not None:
                _check_backward(step.backward, step.loc)
        _check_backward(v.backward, v.loc)
        params = {d.name for m in problem.model.walk() for d in m.params}
        for h in v.hooks:
            if h.on == "global":
                raise ProblemError(h.loc, "global module hooks under fully_shard are not modelled yet")
            if (h.on == "module" and h.prepend and h.kind in ("forward_pre", "forward")
                    and h.target in {lb for lb, _ in spec.shard} | {root.label}):
                raise ProblemError(h.loc, f"a {h.kind} hook with prepend: true on a module fully_shard wraps is not "
                                          "modelled yet (it would run before FSDP's own hook)")
            if h.target in params:
                if h.kind == "post_accumulate_grad":
                    if h.returns is not None or h.does:
                        raise ProblemError(h.loc, "a post_accumulate_grad hook with a body under fully_shard is not "
                                                  "modelled yet (FSDP calls it after the reduce-scatter, with the "
                                                  "sharded DTensor parameter); give it no returns/does (raises: is "
                                                  "modelled)")
                elif h.on == "node":
                    raise ProblemError(h.loc, f"a node {h.kind}-hook on parameter '{h.target}' under fully_shard is "
                                              "not modelled yet")
    if any(m.buffers for m in problem.model.walk()):
        m = next(m for m in problem.model.walk() if m.buffers)
        raise ProblemError(m.loc, "a model with buffers under fully_shard is not modelled yet")
    tied = [d for m in problem.model.walk() for d in m.params if d.tied is not None]
    if tied:
        raise ProblemError(tied[0].loc, "tied parameters under fully_shard are not modelled yet (one module's "
                                        "fully_shard replaces the parameter, the other still holds the original)")
    if any(d.dtype not in (None, problem.dtype) for m in problem.model.walk() for d in m.params):
        raise ProblemError(problem.model.loc, "parameters of several dtypes under fully_shard are not modelled yet")


def _check_backward(bw, loc) -> None:
    if bw is None:
        return
    if bw.method != "backward":
        raise ProblemError(bw.loc or loc, "torch.autograd.grad under fully_shard is not modelled yet (FSDP "
                                          "reduce-scatters only what reaches the parameters' .grad); use "
                                          "method: backward")
    if bw.inputs:
        raise ProblemError(bw.inputs[0][1], "backward(inputs=...) under fully_shard is not modelled yet")
    if bw.second is not None:
        raise ProblemError(bw.loc or loc, "create_graph and the second-order keys under fully_shard are not "
                                          "modelled yet")
