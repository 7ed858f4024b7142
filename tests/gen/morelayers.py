"""Layer stages and losses added in stop 55, drawn in layer problems beside the others
(tests/gen/layers.py): InstanceNorm1d/2d, BatchNorm3d (on ``x.unsqueeze(2)``, squeezed back),
circular padding (``F.pad(mode='circular')``, Conv ``padding_mode='circular'``), Bilinear,
PairwiseDistance, EmbeddingBag (a start of its own: int64 bags), and the losses
SoftMarginLoss MarginRankingLoss HingeEmbeddingLoss CosineEmbeddingLoss
MultiLabelSoftMarginLoss PoissonNLLLoss TripletMarginLoss GaussianNLLLoss (modules and
functional forms, ``reduction=``). Coverage keys ``layer NAME``.

:class:`MoreLayers` is a mixin of :class:`modules.Gen` beside :class:`layers.LayerGen`.
"""

from __future__ import annotations

import math
from fractions import Fraction as Fr

from .specs import Leaf

#: stage kinds by the input's rank, with weights (the two-input ones and BatchNorm3d's
#: unsqueeze need a custom root's forward)
STAGES = {4: [(1, "instnorm"), (1, "bn3d"), (1, "circpad")], 3: [(1, "instnorm"), (1, "circpad")],
          2: [(1, "bilinear"), (1, "pairwise")]}
FUNCTIONAL_ONLY = ("bn3d", "circpad", "bilinear", "pairwise")

#: loss type: (weight, transcendental, needs a 2-D input)
LOSSES = {"SoftMarginLoss": (2, True, False), "MarginRankingLoss": (1, False, False),
          "HingeEmbeddingLoss": (1, False, False), "CosineEmbeddingLoss": (1, True, True),
          "MultiLabelSoftMarginLoss": (1, True, True), "PoissonNLLLoss": (1, True, False),
          "TripletMarginLoss": (1, True, True), "GaussianNLLLoss": (1, True, False)}
FN_LOSSES = {"SoftMarginLoss": "soft_margin_loss", "MarginRankingLoss": "margin_ranking_loss",
             "HingeEmbeddingLoss": "hinge_embedding_loss", "CosineEmbeddingLoss": "cosine_embedding_loss",
             "MultiLabelSoftMarginLoss": "multilabel_soft_margin_loss", "PoissonNLLLoss": "poisson_nll_loss",
             "TripletMarginLoss": "triplet_margin_loss", "GaussianNLLLoss": "gaussian_nll_loss"}
#: the loss module's argument names
LOSS_INPUTS = {"MarginRankingLoss": ["input1", "input2", "target"], "CosineEmbeddingLoss": ["input1", "input2", "target"],
               "TripletMarginLoss": ["anchor", "positive", "negative"], "GaussianNLLLoss": ["input", "target", "var"],
               "PoissonNLLLoss": ["log_input", "target"]}


def loss_options(y_shape: tuple) -> list:
    return [(w, t) for t, (w, _, two) in LOSSES.items() if not two or len(y_shape) == 2]


class MoreLayers:
    """Mixin of Gen (``self.s``, ``self.lmod``, ``self.lparams``, ``self.spend`` ...)."""

    def more_stage_options(self, shape: tuple, functional: bool) -> list:
        return [(w, k) for w, k in STAGES.get(len(shape), []) if functional or k not in FUNCTIONAL_ONLY]

    def more_stage(self, kind: str, name: str, path: str, shape: tuple, frozen: bool, init: bool):
        s = self.s
        self.v2_used[f"layer {kind}"] += 1
        if kind == "instnorm":
            c = shape[1]
            if math.prod(shape[2:]) < 2:      # PyTorch: more than 1 spatial element when training
                return None
            typ = "InstanceNorm2d" if len(shape) == 4 else "InstanceNorm1d"
            args = {"num_features": c}
            affine = s.coin(0.5)
            if affine:
                args["affine"] = True
            track = s.coin(0.3)
            if track:
                args["track_running_stats"] = True
                if s.coin(0.3):
                    args["momentum"] = s.choice([Fr(1, 2), None])
            if s.coin(0.1):
                args["eps"] = Fr(1, 4)
            shapes = {"weight": (c,), "bias": (c,)} if affine else {}
            m = self.lmod(name, path, typ, [shape], shape, args, self.lparams(path, shapes, frozen), init)
            m.frozen = frozen
            if track and s.coin(0.4):
                m.buffers["running_mean"] = ((c,), [s.choice([Fr(1, 2), Fr(-1), Fr(0), Fr(1, 4)]) for _ in range(c)])
                m.buffers["running_var"] = ((c,), [s.choice([Fr(1, 4), Fr(1), Fr(4)]) for _ in range(c)])
            if track and s.coin(0.3):
                m.training = False
                self.v2_used["layer InstanceNorm eval"] += 1
            self.spend()
            return "mod", m, shape
        if kind == "bn3d":
            c = shape[1]
            shape5 = shape[:2] + (1,) + shape[2:]
            args = {"num_features": c}
            affine = s.coin(0.85)
            if not affine:
                args["affine"] = False
            shapes = {"weight": (c,), "bias": (c,)} if affine else {}
            m = self.lmod(name, path, "BatchNorm3d", [shape5], shape5, args, self.lparams(path, shapes, frozen), init)
            m.frozen = frozen
            training = self.root_training is not False
            if training and s.coin(0.25):
                m.training = False
                training = False
            if training and shape[0] * math.prod(shape[2:]) < 2:
                m.training = False
            self.spend()
            m.call_tree = lambda cur, m=m, shape=shape, shape5=shape5: (
                "op", "method", "squeeze", ("call", m.name, (("op", "method", "unsqueeze", cur, (("lit", "2"),), "",
                                                              shape5, "node"),)), (("lit", "2"),), "", shape, "node")
            return "mod", m, shape
        if kind == "circpad":
            pads, out = [], list(shape)
            for i in range(min(len(shape) - 2, s.int(1, 2))):
                dim = len(shape) - 1 - i
                lo, hi = s.int(0, min(2, shape[dim])), s.int(0, min(2, shape[dim]))
                if lo == hi == 0:
                    hi = 1
                pads += [lo, hi]
                out[dim] = shape[dim] + lo + hi
            out = tuple(out)
            return "fn", (lambda cur, pads=tuple(pads), out=out: (
                "op", "fn", "F.pad", None, (cur, ("lit", "(" + ", ".join(map(str, pads)) + ")"),
                                            ("kw", "mode", ("lit", "'circular'"))), "", out, "node")), out
        if kind == "bilinear":
            n, f = shape
            f2, o = s.int(1, 3), s.int(1, 3)
            two = s.coin(0.5)       # called (x, x): one input twice
            if two:
                f2 = f
            args = {"in1_features": f, "in2_features": f2, "out_features": o}
            bias = s.coin(0.75)
            if not bias:
                args["bias"] = False
            shapes = {"weight": (o, f, f2)}
            if bias:
                shapes["bias"] = (o,)
            m = self.lmod(name, path, "Bilinear", [shape, (n, f2)], (n, o), args, self.lparams(path, shapes, frozen),
                          init)
            m.inputs = ["input1", "input2"]
            m.frozen = frozen
            if two:
                m.call_tree = lambda cur, m=m: ("call", m.name, (cur, cur))
            else:
                t = Leaf(self.fresh("t"), (n, f2), self.values((n, f2)), False)
                self.targets.append(t)
                m.call_tree = lambda cur, m=m, t=t: ("call", m.name, (cur, ("n", t.name)))
            return "mod", m, (n, o)
        if kind == "pairwise":
            n, f = shape
            p = s.choice([2, 2, 1])
            if p == 2 and not self.spend():
                p = 1
            args = {} if p == 2 else {"p": p}
            keep = s.coin(0.3)
            if keep:
                args["keepdim"] = True
            out = (n, 1) if keep else (n,)
            t = Leaf(self.fresh("t"), shape, self.values(shape), False)
            self.targets.append(t)
            m = self.lmod(name, path, "PairwiseDistance", [shape, shape], out, args)
            m.inputs = ["x1", "x2"]
            m.call_tree = lambda cur, m=m, t=t: ("call", m.name, (cur, ("n", t.name)) if s.coin(0.7)
                                                 else (("n", t.name), cur))
            return "mod", m, out
        return None

    def bag_start(self, n: int, x_rg: bool, children: list, lines: list):
        """An EmbeddingBag over int64 bags (n, seq): (n, dim), plus x0 of that shape."""
        s = self.s
        num, dim, seq = s.int(3, 5), s.choice([2, 3]), s.int(1, 3)
        idx = Leaf(self.fresh("idx"), (n, seq), [Fr(s.int(0, num - 1)) for _ in range(n * seq)], False, dtype="int64")
        self.targets.append(idx)
        self.int_saved = True
        x_shape = (n, dim)
        self.inputs.append(self.leaf("x0", x_shape, x_rg))
        mode = s.weighted([(2, "mean"), (2, "sum"), (1, "max")])
        args = {"num_embeddings": num, "embedding_dim": dim}
        if mode != "mean":
            args["mode"] = mode
        if s.coin(0.2):
            args["padding_idx"] = s.int(0, num - 1)
        emb = self.lmod("bag", "bag", "EmbeddingBag", [(n, seq)], x_shape, args,
                        self.lparams("bag", {"weight": (num, dim)}, s.coin(0.1)), s.coin(0.4))
        emb.inputs = ["input"]
        emb.int_inputs = (0,)
        self.int_paths.add("bag")
        emb.frozen = not emb.params[0].rg
        children.append(emb)
        self.v2_used[f"layer EmbeddingBag {mode}"] += 1
        call = ("call", "bag", (("n", idx.name),))
        h = self.fresh("h")
        lines.append((h, ("b", "+", call, ("n", "x0")) if s.coin(0.6) else call))
        return ("n", h), x_shape

    # ------------------------------------------------------------------ the losses
    def more_loss(self, typ: str, kind: str, model, y_shape: tuple, reduction: str):
        """The loss tree of one of LOSSES (``kind``: "module" or "functional")."""
        s = self.s
        y = ("n", "y")
        n = y_shape[0] if y_shape else 1
        args: dict = {}
        buffers: dict = {}

        def target(shape, vals=None):
            t = Leaf(self.fresh("t"), tuple(shape), vals if vals is not None else self.values(shape), False)
            self.targets.append(t)
            return ("n", t.name)

        def signs(shape):
            return [s.choice([Fr(1), Fr(-1)]) for _ in range(math.prod(shape))]

        per_row = (n,)
        if typ == "SoftMarginLoss":
            items = [y, target(y_shape, signs(y_shape))]
            out_none = y_shape
        elif typ == "HingeEmbeddingLoss":
            items = [y, target(y_shape, signs(y_shape))]
            if s.coin(0.4):
                args["margin"] = s.choice([Fr(1, 2), 2])
            out_none = y_shape
        elif typ == "MarginRankingLoss":
            items = [y, target(y_shape), target(y_shape, signs(y_shape))]
            if s.coin(0.3):
                items[0], items[1] = items[1], items[0]
            if s.coin(0.4):
                args["margin"] = s.choice([Fr(1, 2), 1])
            out_none = y_shape
        elif typ == "CosineEmbeddingLoss":
            items = [y, target(y_shape), target(per_row, signs(per_row))]
            if s.coin(0.4):
                args["margin"] = s.choice([Fr(1, 2), Fr(-1, 4)])
            out_none = per_row
        elif typ == "MultiLabelSoftMarginLoss":
            items = [y, target(y_shape, [Fr(s.int(0, 1)) for _ in range(math.prod(y_shape))])]
            if s.coin(0.3):
                buffers["weight"] = ((y_shape[1],), [s.choice([Fr(1), Fr(1, 2), Fr(2)]) for _ in range(y_shape[1])])
            out_none = per_row
        elif typ == "PoissonNLLLoss":
            counts = [s.choice([Fr(0), Fr(1), Fr(2), Fr(1, 2), Fr(3)]) for _ in range(math.prod(y_shape))]
            items = [y, target(y_shape, counts)]
            if s.coin(0.3):
                args["log_input"] = False
                items[0] = ("b", "+", ("b", "*", y, y), ("c", Fr(1, 4)))
            if s.coin(0.2):
                args["full"] = True
            out_none = y_shape
        elif typ == "TripletMarginLoss":
            items = [y, target(y_shape), target(y_shape)]
            if s.coin(0.3):
                items[0], items[1] = items[1], items[0]
            if s.coin(0.3):
                args["margin"] = s.choice([Fr(1, 2), 2])
            if s.coin(0.3):
                args["swap"] = True
            if s.coin(0.2):
                args["p"] = 1
            out_none = per_row
        else:   # GaussianNLLLoss
            vshape = y_shape if s.coin(0.6) or not y_shape else y_shape[:-1] + (1,)
            var = target(vshape, [s.choice([Fr(1, 4), Fr(1), Fr(2), Fr(1, 2)]) for _ in range(math.prod(vshape))])
            if kind != "module" and s.coin(0.2):    # a float var (functional form only)
                var = ("lit", "0.5")
            items = [y, target(y_shape), var]
            if s.coin(0.2):
                args["full"] = True
            out_none = y_shape
        if reduction != "mean":
            args["reduction"] = reduction
        # hinge / margin / cosine composites save bool masks (where, comparisons): pack-hook arithmetic
        # on them is integer arithmetic, which solve does not model (as the int64 indices of layers.py)
        self.int_saved = True
        out_shape = out_none if reduction == "none" else ()
        if kind == "module":
            lname = self.fresh("crit")
            tensor_items = [a for a in items if a[0] != "lit"]
            shapes = [self._shape_of_item(a, y_shape) for a in tensor_items]
            m = self.lmod(lname, lname, typ, shapes, out_shape, args)
            m.inputs = LOSS_INPUTS.get(typ, ["input", "target"])[:len(items)]
            m.buffers = buffers
            model.children.append(m)
            self.int_paths.add(lname)
            tree = ("call", lname, tuple(items))
            self.v2_used[f"layer loss module {typ}"] += 1
        else:
            for key, (shp, vals_) in buffers.items():
                w = Leaf(self.fresh("lw"), shp, vals_, False)
                self.targets.append(w)
                args[key] = ("name", w.name)
            from .layers import _py
            fn = FN_LOSSES[typ]
            tree = ("op", "fn", f"F.{fn}", None, tuple(items) + tuple(
                ("kw", k, ("n", v[1]) if isinstance(v, tuple) else ("lit", _py(v))) for k, v in args.items()), "",
                out_shape, "node")
            self.v2_used[f"layer loss F.{fn}"] += 1
        if out_shape != ():
            tree = ("f", s.choice(["sum", "mean"]), tree)
        return tree

    def _shape_of_item(self, a, y_shape):
        if a == ("n", "y") or a[0] == "b":
            return y_shape
        return next(t.shape for t in self.targets if t.name == a[1])
