"""v2 ``steps:``: several forwards and backwards, ``retain_graph``, a backward through a freed
graph (PyTorch's error, predicted), hooks registered and removed between passes,
``zero_grad``, an SGD step, a forward with new input values.

:class:`StepGen` is a mixin of :class:`modules.Gen`; :func:`steps_yaml` writes a list.
"""

from __future__ import annotations

from fractions import Fraction as Fr

from .specs import Leaf

#: Templates and their weights; each name is a coverage key ("steps retain", ...).
TEMPLATES = {"retain": 3, "freed": 2, "accumulate": 2, "zero_grad": 2, "sgd": 3, "register": 2, "remove": 2,
             "new_inputs": 2}


class StepGen:
    """Mixin of Gen (``self.s``, ``self.values``)."""

    def steps_for(self, p, inputs: list, hooks: list, back) -> list:
        """``back``: the variant's effective BackwardSpec; a backward step that gives keys
        (``retain_graph``) repeats them all (a step's keys replace the variant's)."""
        s = self.s
        if self.train:
            from .train import train_steps
            return train_steps(s, self.v2_used)
        kind = s.weighted([(w, k) for k, w in TEMPLATES.items()])
        self.v2_used[f"steps {kind}"] += 1
        F, B = "forward", "backward"
        retain = ("backward", back)
        movable = [i for i, h in enumerate(hooks)   # hooks with a handle (retain_grad has none)
                   if h.on in ("tensor", "module", "node", "multi_grad") and h.kind != "retain_grad" and not h.replaces]
        if kind == "retain":
            steps = [F, retain, B]
        elif kind == "freed":
            steps = [F, B, B]
        elif kind == "accumulate":
            steps = [F, B, F, B]
        elif kind == "zero_grad":
            steps = [F, B, "zero_grad", F, B]
        elif kind == "sgd":
            steps = [F, B, ("step", s.choice([Fr(1, 2), Fr(1, 4), Fr(1)])), F, B]
        elif kind == "new_inputs":
            new = {leaf.name: Leaf(leaf.name, leaf.shape, self.values(leaf.shape), leaf.rg) for leaf in inputs
                   if s.coin(0.7)}
            steps = [F, retain if s.coin(0.3) else B, ("forward", new), B]
        elif kind == "register" and movable:
            i = s.choice(movable)
            steps = s.choice([[F, ("register", [i]), B], [F, B, ("register", [i]), F, B],
                              [("register", [i]), F, B]])
        elif kind == "remove" and movable:
            i = s.choice(movable)
            steps = s.choice([[F, B, ("remove", [i]), F, B], [F, ("remove", [i]), B],
                              [F, retain, ("remove", [i]), B]])
        else:
            steps = [F, retain, B]
        if s.coin(0.15):
            steps = steps + ["zero_grad"] if s.coin(0.5) else steps + [("step", Fr(1, 2))]
        return steps


def steps_yaml(steps: list, indent: int, leaf_yaml, backward_items) -> list[str]:
    """``backward_items(spec)``: the YAML items of a BackwardSpec (``key: value`` texts)."""
    pad = " " * indent
    out = [f"{pad}steps:"]
    for st in steps:
        if isinstance(st, str):
            out.append(f"{pad}  - {st}")
        elif st[0] == "backward":
            items = (backward_items(st[1]) if st[1] is not None else []) + ["retain_graph: true"]
            out.append(f"{pad}  - {{backward: {{{', '.join(items)}}}}}")
        elif st[0] == "raw":   # a step written whole (tests/gen/train.py)
            out.append(f"{pad}  - {st[1]}")
        elif st[0] == "step":
            out.append(f"{pad}  - {{step: {{lr: {float(st[1])}}}}}")
        elif st[0] in ("register", "remove"):
            out.append(f"{pad}  - {{{st[0]}: [{', '.join(map(str, st[1]))}]}}")
        elif st[0] == "forward":
            if not st[1]:
                out.append(f"{pad}  - forward")
                continue
            out.append(f"{pad}  - forward:")
            out.append(f"{pad}      inputs:")
            for leaf in st[1].values():
                out.append(f"{pad}        {leaf.name}: {leaf_yaml(leaf, short_rg_false=True)}")
        else:
            raise TypeError(st)
    return out
