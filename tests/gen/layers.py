"""Layer problems: the v2 ``torch.nn`` layer types and their functional forms, chained with
consistent shapes, then a loss module, a functional loss or a loss expression; hooks of every
kind come from the shared machinery (hooks, hooks2, steps) like any other problem's.

Layers: Conv1d Conv2d MaxPool2d AvgPool2d AdaptiveAvgPool2d MaxPool1d AvgPool1d BatchNorm1d/2d (training and eval,
buffers given or PyTorch's defaults, momentum None) LayerNorm GroupNorm Dropout (training: a
declared ``mask:``; eval) Embedding (int64 indices, a target; ``padding_idx``)
MultiheadAttention (self- or cross-attention, batch_first or not, need_weights) RNN (tanh, relu)
LSTM (proj_size) GRU (layers, directions, batch_first, unbatched, a given state: ``rnn_stage``) Flatten
Unflatten Linear, the activations ReLU LeakyReLU GELU SiLU ELU Softplus Tanh Sigmoid Softmax
LogSoftmax (some in place), the losses MSELoss L1Loss SmoothL1Loss HuberLoss CrossEntropyLoss
NLLLoss BCELoss BCEWithLogitsLoss KLDivLoss (``reduction=``, weights as buffers), and the
functional forms (F.conv1d/2d, F.max_pool2d, F.avg_pool2d, F.max_pool1d, F.avg_pool1d, F.adaptive_avg_pool2d, F.layer_norm,
F.group_norm, F.embedding, F.softmax ..., F.cross_entropy ...). Parameters are given or left to
``init: {seed: N}``; modules ``training: false`` (or the whole model), ``requires_grad: false``.

:class:`LayerGen` is a mixin of :class:`modules.Gen`. A layer module is a :class:`specs.Mod`
with a few extra attributes read by emit (``yaml_head``, ``init_params``), the analysis
(``layer``: its output's Info) and the hook generator (``int_inputs``: arguments a forward-pre
hook must pass through, ``tuple_out``: no replacing forward hook).
"""

from __future__ import annotations

import json
import math
from fractions import Fraction as Fr

from .analysis import Info, _node
from .morelayers import LOSSES, loss_options
from .specs import BackwardSpec, Leaf, Mod, ProblemSpec
from .trees import num_text

#: The share of all problems that are layer problems (drawn from the same number as the v2
#: coin, so the other problems' draws are unchanged: see modules.Gen.problem).
LAYER_SHARE = 0.2

#: activations: (type, transcendental)
ACTS = [("ReLU", False), ("LeakyReLU", False), ("GELU", True), ("SiLU", True), ("ELU", True),
        ("Softplus", True), ("Tanh", True), ("Sigmoid", True), ("Softmax", True), ("LogSoftmax", True)]
FN_ACTS = {"ReLU": "F.relu", "LeakyReLU": "F.leaky_relu", "GELU": "F.gelu", "SiLU": "F.silu", "ELU": "F.elu",
           "Softplus": "F.softplus", "Tanh": "torch.tanh", "Sigmoid": "torch.sigmoid", "Softmax": "F.softmax",
           "LogSoftmax": "F.log_softmax"}
SMALL = [Fr(1, 2), Fr(-1, 2), Fr(1), Fr(-1), Fr(3, 4), Fr(-3, 4), Fr(1, 4), Fr(-1, 4), Fr(0), Fr(3, 2), Fr(-3, 2),
         Fr(5, 4), Fr(1, 8), Fr(2), Fr(-2)]


def _yv(v) -> str:
    """A YAML flow value of an args entry."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_yv(x) for x in v) + "]"
    if isinstance(v, Fr):
        t = num_text(v)
        return f'"{t}"' if "/" in t else t
    if isinstance(v, str):
        return json.dumps(v)
    return str(v)


def _nested(shape, flat) -> str:
    it = iter(flat)

    def build(shp):
        if not shp:
            return _yv(next(it))
        return "[" + ", ".join(build(shp[1:]) for _ in range(shp[0])) + "]"

    return build(tuple(shape))


def _pool_out(n: int, k: int, s: int, p: int, d: int = 1, ceil: bool = False) -> int:
    span = n + 2 * p - d * (k - 1) - 1
    if ceil:
        out = -(-span // s) + 1
        if (out - 1) * s >= n + p:
            out -= 1
        return out
    return span // s + 1


def _make_layer_info(mod: Mod):
    """The analysis callable of a layer module: its output's Info from its arguments'."""

    def layer(an, args):
        if mod.alias:
            return args[0]
        ts = [a for a in args if isinstance(a, Info)]
        ps = [an.params[p.name] for p in mod.params]
        if mod.single_node and not mod.inplace_act:     # one node, one edge (activations, pools, views)
            return _node(mod.out_shape, (ts[0].rg,), ts[0].deps)
        rg = any(a.rg for a in ts) or any(p.rg for p in ps)
        deps = frozenset().union(*(a.deps for a in ts + ps)) if rg else frozenset()
        if mod.type in ("Conv1d", "Conv2d"):   # ConvolutionBackward0: input, weight, bias (undefined without)
            w = an.params[mod.param("weight").name]
            b = an.params[mod.param("bias").name] if mod.param("bias") is not None else None
            return _node(mod.out_shape, (ts[0].rg, w.rg, b is not None and b.rg), deps)
        out = Info(tuple(mod.out_shape), rg, rg, (), 1, 0, deps, known=False)
        if mod.tuple_out:
            w = Info(tuple(mod.weights_shape), rg, rg, (), 1, 0, deps, known=False) if mod.weights_shape is not None \
                else Info((), False)
            return (out, w)
        return out

    return layer



def _pool_args(k, stride, pad, ceil) -> dict:
    """A pool module's arguments, the defaults left out (stride None: the kernel size)."""
    args = {"kernel_size": k}
    if stride is not None:
        args["stride"] = stride
    if pad:
        args["padding"] = pad
    if ceil:
        args["ceil_mode"] = True
    return args

class LayerGen:
    """Mixin of Gen (``self.s``, ``self.values``, ``self.spend``, ``self.fresh``, ...)."""

    # ------------------------------------------------------------------ a layer module
    def lmod(self, name: str, path: str, typ: str, in_shapes: list, out_shape: tuple, args: dict | None = None,
             params: list | None = None, init: bool = False) -> Mod:
        m = Mod(name, path, typ, ["x"] if len(in_shapes) == 1 else [f"a{i}" for i in range(len(in_shapes))],
                list(in_shapes), tuple(out_shape), list(params or []))
        m.args = dict(args or {})
        m.buffers = {}
        m.training = None          # False: ``training: false``
        m.frozen = False           # ``requires_grad: false`` (when every parameter is frozen at emission)
        m.mask = None              # Dropout's keep-mask (shape, values)
        m.init_params = init and bool(params)
        m.alias = False            # the output is the input itself (Identity, Dropout in eval)
        m.single_node = False
        m.inplace_act = False
        m.tuple_out = False
        m.weights_shape = None
        m.int_inputs = ()
        m.layer = _make_layer_info(m)
        m.yaml_head = lambda pad, m=m: self._layer_head(m, pad)
        if init and params:
            self.uses_init = True
            self.v2_used["layer params from init"] += 1
        return m

    def _layer_head(self, m: Mod, pad: str) -> list:
        out = []
        if m.args:
            out.append(f"{pad}args: {{{', '.join(f'{k}: {_yv(v)}' for k, v in m.args.items())}}}")
        if m.buffers:
            out.append(f"{pad}buffers: {{{', '.join(f'{k}: {_nested(shp, vals)}' for k, (shp, vals) in m.buffers.items())}}}")
        if m.training is False:
            out.append(f"{pad}training: false")
        if m.frozen and m.params and not any(p.rg for p in m.params):
            out.append(f"{pad}requires_grad: false")
        if m.mask is not None:
            out.append(f"{pad}mask: {_nested(*m.mask)}")
        return out

    def lparams(self, path: str, shapes: dict, frozen: bool) -> list:
        pre = f"{path}." if path else ""
        return [Leaf(pre + k, tuple(shp), [self.s.choice(SMALL) for _ in range(math.prod(shp))], not frozen)
                for k, shp in shapes.items()]

    # ------------------------------------------------------------------ the problem
    def layer_problem(self) -> ProblemSpec:
        s = self.s
        self.v2 = True
        self.uses_init = False
        self.int_saved = False
        self.int_paths = set()     # modules that save int64 / bool tensors (indices, masks, class targets)
        self.v2_used["layer problem"] += 1
        start = s.weighted([(4, "img"), (2, "seq1d"), (3, "vec"), (2, "tokens"), (1, "embed"), (1, "bag")])
        n = s.weighted([(3, 1), (4, 2), (1, 3)])
        x_rg = s.coin(0.6)
        if start == "img":
            shape = (n, s.int(1, 3), s.int(3, 5), s.int(3, 4))
        elif start == "seq1d":
            shape = (n, s.int(1, 3), s.int(3, 5))
        elif start == "vec":
            shape = (n, s.int(2, 4))
        elif start == "tokens":
            shape = (n, s.int(2, 3), s.choice([2, 4]))
        else:
            shape = None
        self.root_training = None if s.coin(0.85) else False
        root_kind = s.weighted([(1, "Sequential"), (3, "custom")]) if start not in ("embed", "bag") else "custom"
        if getattr(self, "force_rnn", False):   # tests/gen/recurrent.py: a recurrent layer in every problem
            root_kind = "custom"
            if start == "img":
                shape = shape[:3]
        children: list[Mod] = []
        lines: list = []
        root_params: list[Leaf] = []
        if start == "embed":
            num, dim, seq = s.int(3, 5), s.choice([2, 3, 4]), s.int(2, 3)
            idx = Leaf(self.fresh("idx"), (n, seq), [Fr(s.int(0, num - 1)) for _ in range(n * seq)], False,
                       dtype="int64")
            self.targets.append(idx)
            self.int_saved = True
            x_shape = (n, seq, dim)
            self.inputs.append(self.leaf("x0", x_shape, x_rg))
            if s.coin(0.75):
                args = {"num_embeddings": num, "embedding_dim": dim}
                if s.coin(0.3):
                    args["padding_idx"] = s.int(0, num - 1)
                init = s.coin(0.4)
                emb = self.lmod("emb", "emb", "Embedding", [(n, seq)], x_shape, args,
                                self.lparams("emb", {"weight": (num, dim)}, s.coin(0.1)), init)
                emb.int_inputs = (0,)
                self.int_paths.add("emb")
                emb.frozen = not emb.params[0].rg
                children.append(emb)
                call = ("call", "emb", (("n", idx.name),))
            else:
                w = self.leaf(self.fresh("E"), (num, dim), s.coin(0.85))
                root_params.append(w)
                items = [("n", idx.name), ("n", w.name)]
                if s.coin(0.3):
                    items.append(("kw", "padding_idx", ("lit", str(s.int(0, num - 1)))))
                call = ("op", "fn", "F.embedding", None, tuple(items), "", x_shape, "node")
                self.v2_used["layer F.embedding"] += 1
            h = self.fresh("h")
            lines.append((h, ("b", "+", call, ("n", "x0")) if s.coin(0.6) else call))
            cur, shape = ("n", h), x_shape
        elif start == "bag":    # tests/gen/morelayers.py
            cur, shape = self.bag_start(n, x_rg, children, lines)
        else:
            self.inputs.append(self.leaf("x0", shape, x_rg))
            cur = ("n", "x0")
        if not any(l.rg for l in self.inputs) and s.coin(0.5):
            self.inputs[0].rg = True
        n_stages = s.weighted([(2, 2), (3, 3), (2, 4), (1, 5)])
        functional = root_kind == "custom"
        for _ in range(n_stages):
            made = self.stage(shape, functional, root_params)
            if made is None:
                continue
            kind, obj, new_shape = made
            if kind == "mod":
                children.append(obj)
                if getattr(obj, "kv_factor", None) is not None:
                    obj.kv = self.fresh("kv")
                    lines.append((obj.kv, ("b", "*", obj.kv_factor, cur)))
                call = obj.call_tree(cur) if getattr(obj, "call_tree", None) is not None else (
                    "call", obj.name, (cur,) * len(obj.in_shapes))
            else:
                call = obj(cur)
            if root_kind == "custom":
                h = self.fresh("h")
                if s.coin(0.15) and new_shape == shape and cur[0] == "n":
                    call = ("b", "+", call, cur)        # a residual
                    self.v2_used["layer residual"] += 1
                lines.append((h, call))
                cur = ("n", h)
            shape = new_shape
        # the model
        if root_kind == "Sequential" and children:
            model = Mod("model", "", "Sequential", ["x"], [self.inputs[0].shape], shape, children=children)
            for c in children:   # re-path: Sequential children keep their own names
                pass
        else:
            root_kind = "custom"
            ret = cur if lines else ("n", "x0")
            if lines and lines[-1][0] == cur[1] and s.coin(0.5):
                ret = lines.pop()[1]
            model = Mod("model", "", None, ["x0"] if s.coin(0.6) else ["x"], [self.inputs[0].shape], shape,
                        params=root_params, children=children, lines=lines, ret=_rename(ret, "x0", None))
            if model.inputs == ["x"]:
                model.lines = [(nm, _rename(t, "x0", "x")) for nm, t in model.lines]
                model.ret = _rename(model.ret, "x0", "x")
        model.training = self.root_training
        if self.root_training is False:
            model.yaml_head = lambda pad: [f"{pad}training: false"]
            self.v2_used["layer model.eval()"] += 1
        # the loss
        loss = None
        if s.coin(0.85):
            loss = self.layer_loss(model, shape, root_kind == "custom")
        name = f"gen-{self.fresh('p')}"
        dtype = s.weighted([(8, "float64"), (1, "float32"), (1, None)])
        if getattr(self, "needs_f64", False):
            dtype = "float64"
        p = ProblemSpec(name, self.inputs, self.targets, model, loss, [], BackwardSpec(), None, dtype)
        if self.uses_init:
            p.init = s.int(0, 9)
        if not self.ensure_grad(p):
            return p
        self.hooks_and_variants(p)
        p.features.update(self.v2_used)
        p.features["v2 problem"] += 1
        return p

    # ------------------------------------------------------------------ one stage
    def act_type(self):
        s = self.s
        t, trans = s.choice(ACTS)
        if trans and not self.spend():
            t = s.choice(["ReLU", "LeakyReLU"])
        return t

    def act_args(self, t: str, shape: tuple) -> dict:
        s = self.s
        a = {}
        if t == "LeakyReLU" and s.coin(0.5):
            a["negative_slope"] = s.choice([Fr(1, 4), Fr(1, 2), Fr(2)])
        elif t == "GELU" and s.coin(0.4):
            a["approximate"] = "tanh"
        elif t == "ELU" and s.coin(0.5):
            a["alpha"] = s.choice([Fr(1, 2), Fr(2)])
        elif t == "Softplus" and s.coin(0.5):
            a["beta"] = s.choice([2, Fr(1, 2)])
            if s.coin(0.5):
                a["threshold"] = s.choice([1, 2])
        elif t in ("Softmax", "LogSoftmax"):
            a["dim"] = s.int(-1, len(shape) - 1) if shape else 0
            if not shape:
                a["dim"] = 0 if False else -1
        if t in ("ReLU", "LeakyReLU", "ELU") and s.coin(0.08):
            a["inplace"] = True
        return a

    def stage(self, shape: tuple, functional: bool, root_params: list):
        """One layer after a tensor of ``shape``: ("mod", Mod, out) or ("fn", tree maker, out)."""
        s = self.s
        r = len(shape)
        opts = [(3, "act")]
        if r == 4:
            opts += [(4, "conv2d"), (2, "bn"), (1, "gn"), (2, "maxpool"), (1, "avgpool"), (1, "adaptive"),
                     (2, "flatten"), (1, "dropout"), (1, "ln")]
        elif r == 3:
            opts += [(3, "conv1d"), (2, "bn"), (1, "gn"), (2, "ln"), (1, "dropout"), (2, "flatten")]
            opts += [(1, "maxpool1d"), (1, "avgpool1d")]
            if shape[2] in (2, 4) and functional:
                opts.append((2, "mha"))
                opts.append((1, "encoder"))
            if functional:
                opts.append((2, "rnn"))
        elif r == 2:
            opts += [(3, "linear"), (2, "bn"), (2, "ln"), (1, "gn"), (1, "dropout"), (1, "unflatten")]
            if functional:
                opts.append((1, "rnn"))
        else:
            opts = [(1, "act")]
        opts += self.more_stage_options(shape, functional)     # tests/gen/morelayers.py
        kind = s.weighted(opts)
        if getattr(self, "force_rnn", False) and not getattr(self, "rnn_made", False) and functional and r in (2, 3):
            kind = "rnn"
        if kind == "act" and r == 4 and functional and s.coin(0.3):   # (batch, heads, length, E): attention
            return self.fn_stage("sdpa", shape, root_params)
        if functional and kind in ("act", "conv2d", "conv1d", "maxpool", "avgpool", "adaptive", "ln", "gn",
                                   "maxpool1d", "avgpool1d") \
                and s.coin(0.3):
            return self.fn_stage(kind, shape, root_params)
        name = self.fresh(kind.replace("2d", "").replace("1d", "") if kind != "act" else "act")
        path = name
        frozen = s.coin(0.1)
        init = s.coin(0.4)
        if kind in ("instnorm", "bn3d", "circpad", "bilinear", "pairwise"):
            return self.more_stage(kind, name, path, shape, frozen, init)
        if kind == "act":
            t = self.act_type()
            args = self.act_args(t, shape)
            m = self.lmod(name, path, t, [shape], shape, args)
            m.single_node = True
            m.inplace_act = bool(args.get("inplace"))
            if m.inplace_act:
                self.v2_used["layer in-place activation"] += 1
            return "mod", m, shape
        if kind in ("conv2d", "conv1d"):
            nd = 2 if kind == "conv2d" else 1
            cin = shape[1]
            groups = 1
            cout = s.int(1, 3)
            if cin > 1 and s.coin(0.2):
                groups = cin
                cout = cin * s.int(1, 2)
            k = s.int(1, 3)
            pad = s.weighted([(3, 0), (2, 1)])
            stride = s.weighted([(4, 1), (1, 2)])
            dil = 2 if s.coin(0.1) else 1
            spatial = shape[2:]
            outs = tuple(_pool_out(n_, k, stride, pad, dil) for n_ in spatial)
            if any(o < 1 for o in outs):
                k, stride, dil = 1, 1, 1
                outs = tuple(_pool_out(n_, k, stride, pad, dil) for n_ in spatial)
            bias = s.coin(0.75)
            args = {"in_channels": cin, "out_channels": cout, "kernel_size": k}
            if stride != 1:
                args["stride"] = stride
            if pad:
                args["padding"] = pad
            if dil != 1:
                args["dilation"] = dil
            if pad and s.coin(0.25):
                args["padding_mode"] = "circular"
                self.v2_used["layer Conv circular"] += 1
            if groups != 1:
                args["groups"] = groups
            if not bias:
                args["bias"] = False
            shapes = {"weight": (cout, cin // groups) + (k,) * nd}
            if bias:
                shapes["bias"] = (cout,)
            typ = "Conv2d" if nd == 2 else "Conv1d"
            m = self.lmod(name, path, typ, [shape], (shape[0], cout) + outs, args, self.lparams(path, shapes, frozen),
                          init)
            m.frozen = frozen
            return "mod", m, m.out_shape
        if kind == "bn":
            c = shape[1]
            per_channel = shape[0] * math.prod(shape[2:])
            typ = "BatchNorm2d" if r == 4 else "BatchNorm1d"
            args = {"num_features": c}
            if s.coin(0.3):
                args["momentum"] = s.choice([Fr(1, 2), Fr(1, 4), None])
            affine = s.coin(0.85)
            if not affine:
                args["affine"] = False
            track = s.coin(0.9)
            if not track:
                args["track_running_stats"] = False
            if s.coin(0.1):
                args["eps"] = Fr(1, 4)
            shapes = {"weight": (c,), "bias": (c,)} if affine else {}
            m = self.lmod(name, path, typ, [shape], shape, args, self.lparams(path, shapes, frozen), init)
            m.frozen = frozen
            training = self.root_training is not False
            if training and s.coin(0.25) and track:
                m.training = False
                training = False
                self.v2_used["layer BatchNorm eval"] += 1
            if per_channel < 2 and (training or not track):
                # PyTorch: "Expected more than 1 value per channel when training" (batch statistics)
                if not track:
                    return None
                m.training = False
            if track and s.coin(0.4):
                m.buffers["running_mean"] = ((c,), [s.choice(SMALL) for _ in range(c)])
                m.buffers["running_var"] = ((c,), [s.choice([Fr(1, 4), Fr(1), Fr(4), Fr(9, 4), Fr(1, 2)]) for _ in range(c)])
                self.v2_used["layer buffers given"] += 1
            self.spend()
            return "mod", m, shape
        if kind == "gn":
            c = shape[1]
            groups = s.choice([g for g in range(1, c + 1) if c % g == 0])
            args = {"num_groups": groups, "num_channels": c}
            affine = s.coin(0.8)
            if not affine:
                args["affine"] = False
            shapes = {"weight": (c,), "bias": (c,)} if affine else {}
            if math.prod(shape[1:]) // groups < 2 and s.coin(0.7):
                return None      # one value per group: variance 0, every output is the bias
            m = self.lmod(name, path, "GroupNorm", [shape], shape, args, self.lparams(path, shapes, frozen), init)
            m.frozen = frozen
            self.spend()
            return "mod", m, shape
        if kind == "ln":
            nd = 2 if (r >= 3 and s.coin(0.3)) else 1
            ns = list(shape[-nd:])
            args = {"normalized_shape": ns}
            affine = s.coin(0.8)
            if not affine:
                args["elementwise_affine"] = False
            shapes = {"weight": tuple(ns)}
            if affine and s.coin(0.2):
                args["bias"] = False
            elif affine:
                shapes["bias"] = tuple(ns)
            if not affine:
                shapes = {}
            m = self.lmod(name, path, "LayerNorm", [shape], shape, args, self.lparams(path, shapes, frozen), init)
            m.frozen = frozen
            self.spend()
            return "mod", m, shape
        if kind in ("maxpool", "avgpool"):
            k = s.choice([2, 2, 3]) if min(shape[2:]) >= 3 else 2
            k = min(k, min(shape[2:]) + 0)
            stride = s.choice([None, None, 1, 2])
            pad = 1 if (s.coin(0.2) and k >= 2) else 0
            ceil = s.coin(0.15)
            st = stride or k
            outs = tuple(_pool_out(n_, k, st, pad, 1, ceil) for n_ in shape[2:])
            if any(o < 1 for o in outs):
                return None
            args = _pool_args(k, stride, pad, ceil)
            typ = "MaxPool2d"
            if kind == "avgpool":
                typ = "AvgPool2d"
                if pad and s.coin(0.4):
                    args["count_include_pad"] = False
                if s.coin(0.1):
                    args["divisor_override"] = 2
            m = self.lmod(name, path, typ, [shape], shape[:2] + outs, args)
            m.single_node = True
            if typ == "MaxPool2d":
                self.int_saved = True      # its indices (int64) are saved
                self.int_paths.add(path)
            return "mod", m, m.out_shape
        if kind in ("maxpool1d", "avgpool1d"):   # unsqueeze(-2), the 2-D kernel, squeeze(-2)
            length = shape[2]
            k = min(s.choice([2, 2, 3]), length)
            stride = s.choice([None, None, 1, 2])
            pad = 1 if (s.coin(0.2) and k >= 2) else 0
            ceil = s.coin(0.15)
            out = _pool_out(length, k, stride or k, pad, 1, ceil)
            if out < 1:
                return None
            args = _pool_args(k, stride, pad, ceil)
            if kind == "avgpool1d" and pad and s.coin(0.4):
                args["count_include_pad"] = False
            typ = "MaxPool1d" if kind == "maxpool1d" else "AvgPool1d"
            m = self.lmod(name, path, typ, [shape], shape[:2] + (out,), args)
            m.single_node = True
            if typ == "MaxPool1d":
                self.int_saved = True      # its indices (int64) are saved
                self.int_paths.add(path)
            return "mod", m, m.out_shape
        if kind == "adaptive":
            o = s.choice([1, 1, 2, [1, 2], [2, 1]])
            oh, ow = (o, o) if isinstance(o, int) else tuple(o)
            oh, ow = min(oh, shape[2]), min(ow, shape[3])
            m = self.lmod(name, path, "AdaptiveAvgPool2d", [shape], shape[:2] + (oh, ow),
                          {"output_size": o if isinstance(o, int) and oh == ow == o else [oh, ow]})
            m.single_node = True   # MeanBackward1 (output 1x1) or AdaptiveAvgPool2DBackward0
            return "mod", m, m.out_shape
        if kind == "flatten":
            start = 1 if s.coin(0.8) else 0
            out = shape[:start] + (math.prod(shape[start:]),)
            args = {} if start == 1 else {"start_dim": 0}
            m = self.lmod(name, path, "Flatten", [shape], out, args)
            m.single_node = True
            return "mod", m, out
        if kind == "unflatten":
            f = shape[1]
            opts = [(a, f // a) for a in range(1, f + 1) if f % a == 0]
            a, b = s.choice(opts)
            m = self.lmod(name, path, "Unflatten", [shape], (shape[0], a, b), {"dim": 1, "unflattened_size": [a, b]})
            m.single_node = True
            return "mod", m, m.out_shape
        if kind == "dropout":
            p = s.choice([Fr(1, 2), Fr(1, 4)])
            # p = 1/4 on 2-5 dims: the channel-wise one of that rank (no draw of its own: the same random
            # stream, the mask the first of the drawn elements); 2-D is an unbatched Dropout1d (unsqueezed)
            typ = {2: "Dropout1d", 3: "Dropout1d", 4: "Dropout2d", 5: "Dropout3d"}.get(len(shape), "Dropout") \
                if p == Fr(1, 4) else "Dropout"
            m = self.lmod(name, path, typ, [shape], shape, {"p": p})
            if self.root_training is False or s.coin(0.25):
                if self.root_training is not False:
                    m.training = False
                m.alias = not (typ == "Dropout1d" and len(shape) == 2)   # unsqueezed and squeezed: a new tensor
                self.v2_used["layer Dropout eval"] += 1
            else:
                keep = [s.weighted([(2, 1), (1, 0)]) for _ in range(math.prod(shape))]
                noise = shape
                if typ != "Dropout":
                    full = (1,) + shape if len(shape) == 2 else shape
                    noise = full[:2] + (1,) * (len(full) - 2)
                    self.v2_used[f"layer {typ} mask"] += 1
                m.mask = (noise, keep[:math.prod(noise)])
                self.int_saved = True      # its mask (bool) is saved
                self.int_paths.add(path)
                self.v2_used["layer Dropout mask"] += 1
            return "mod", m, shape
        if kind == "linear":
            m = self.linear(name, path, shape)
            return "mod", m, m.out_shape
        if kind == "rnn":
            return self.rnn_stage(name, path, shape, frozen, init)
        if kind == "encoder":
            return self.encoder_stage(name, path, shape)
        if kind == "mha":
            if not self.spend():
                return None
            self.spend()
            e = shape[2]
            heads = s.choice([1, 2]) if e == 4 else 1
            bf = s.coin(0.7)
            args = {"embed_dim": e, "num_heads": heads}
            if bf:
                args["batch_first"] = True
            if s.coin(0.2):
                args["bias"] = False
            shapes = {"in_proj_weight": (3 * e, e), "out_proj.weight": (e, e)}
            if args.get("bias", True):
                shapes["in_proj_bias"] = (3 * e,)
                shapes["out_proj.bias"] = (e,)
            m = self.lmod(name, path, "MultiheadAttention", [shape] * 3, shape, args,
                          self.lparams(path, shapes, frozen), True)
            m.inputs = ["query", "key", "value"]
            m.frozen = frozen
            m.tuple_out = True
            b, l = (shape[0], shape[1]) if bf else (shape[1], shape[0])
            need = s.coin(0.6)
            avg = s.coin(0.7)
            if need:
                m.weights_shape = (b, l, l) if avg else (b, heads, l, l)
            kws = []
            if not need:
                kws.append(("kw", "need_weights", ("lit", "False")))
            elif not avg:
                kws.append(("kw", "average_attn_weights", ("lit", "False")))
            form = s.weighted([(6, "self"), (2, "kv"), (1, "target")])
            if form == "self":
                m.call_tree = lambda cur, m=m, kws=tuple(kws): ("idx", ("call", m.name, (cur, cur, cur) + kws), 0)
            elif form == "kv":     # key and value one other tensor (k is v: the split in-projection)
                m.kv_factor = ("c", s.choice([Fr(1, 2), Fr(-1), Fr(2)]))   # kv = c * h on a line of its own
                self.v2_used["layer attention key is value"] += 1
                m.call_tree = lambda cur, m=m, kws=tuple(kws): ("idx", ("call", m.name, (cur, ("n", m.kv), ("n", m.kv))
                                                                            + kws), 0)
            else:                  # value a constant: three different tensors
                t = Leaf(self.fresh("t"), shape, self.values(shape), False)
                self.targets.append(t)
                self.v2_used["layer attention three tensors"] += 1
                m.call_tree = lambda cur, m=m, kws=tuple(kws), t=t: ("idx", ("call", m.name, (cur, cur, ("n", t.name)) + kws), 0)
            return "mod", m, shape
        return None

    def rnn_stage(self, name: str, path: str, shape: tuple, frozen: bool, init: bool):
        """nn.RNN / LSTM / GRU on a 3-D (seq, batch, feature; or batch_first) or unbatched 2-D
        input: the output (``rnn(x)[0]``) or, for RNN and GRU, the final state (``[1]``)."""
        s = self.s
        typ = s.weighted([(2, "LSTM"), (2, "GRU"), (1, "RNN"), (1, "RNN relu")])
        if typ != "RNN relu" and not self.spend():
            typ = "RNN relu"
        relu = typ == "RNN relu"
        typ = typ.split()[0]
        gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[typ]
        batched = len(shape) == 3
        bf = batched and s.coin(0.4)
        hidden = s.int(2, 2 if typ == "LSTM" else 3)   # a width of 1 makes a later LayerNorm over it rounding noise
        layers = s.weighted([(3, 1), (1, 2)])
        dirs = 2 if s.coin(0.3) else 1
        bias = s.coin(0.8)
        args = {"input_size": shape[-1], "hidden_size": hidden}
        if layers != 1:
            args["num_layers"] = layers
        if relu:
            args["nonlinearity"] = "relu"
        if not bias:
            args["bias"] = False
        if bf:
            args["batch_first"] = True
        if dirs == 2:
            args["bidirectional"] = True
        if layers == 2 and self.root_training is False and s.coin(0.5):
            args["dropout"] = Fr(1, 2)          # eval mode: no dropout between layers
        proj = 0
        if typ == "LSTM" and s.coin(0.25):
            hidden, proj = 3, 2
            args["hidden_size"], args["proj_size"] = hidden, proj
        real = proj or hidden
        shapes = {}
        for layer in range(layers):
            for d in range(dirs):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                shapes[f"weight_ih{sfx}"] = (gates * hidden, shape[-1] if layer == 0 else real * dirs)
                shapes[f"weight_hh{sfx}"] = (gates * hidden, real)
                if bias:
                    shapes[f"bias_ih{sfx}"] = (gates * hidden,)
                    shapes[f"bias_hh{sfx}"] = (gates * hidden,)
                if proj:
                    shapes[f"weight_hr{sfx}"] = (proj, hidden)
        if batched:
            batch = shape[0] if bf else shape[1]
            out = shape[:2] + (real * dirs,)
            state = (layers * dirs, batch, real)
        else:
            out = (shape[0], real * dirs)
            state = (layers * dirs, real)
        in_shapes = [shape]
        h0 = None
        if typ != "LSTM" and s.coin(0.3):
            h0 = Leaf(self.fresh("h0"), state, self.values(state), False)
            self.targets.append(h0)
            in_shapes.append(state)
            self.v2_used["layer recurrent state given"] += 1
        m = self.lmod(name, path, typ, in_shapes, out, args, self.lparams(path, shapes, frozen), init)
        m.inputs = ["input", "hx"][:len(in_shapes)]
        m.frozen = frozen
        m.tuple_out = True
        m.weights_shape = state if typ != "LSTM" else None   # an LSTM's [1] is the tuple (h_n, c_n)
        self.rnn_made = True
        if typ == "LSTM":
            self.needs_f64 = True      # float32: oneDNN's fused kernel on the CPU (tests/test_lstm_onednn.py); kept float64 here
        which = 1 if typ != "LSTM" and s.coin(0.25) else 0
        extra = (("n", h0.name),) if h0 is not None else ()
        m.call_tree = lambda cur, m=m, extra=extra, which=which: ("idx", ("call", m.name, (cur,) + extra), which)
        self.v2_used[f"layer {typ}{' relu' if relu else ''}{' proj_size' if proj else ''}{' batch_first' if bf else ''}"
                     f"{' bidirectional' if dirs == 2 else ''}{' unbatched' if not batched else ''}"] += 1
        if which == 1:
            return "mod", m, state
        return "mod", m, out
    def encoder_stage(self, name: str, path: str, shape: tuple):
        """A TransformerEncoderLayer (dropout 0, never frozen: a frozen one in eval mode with
        batch_first takes PyTorch's fast path, which is refused); its parameters from init; called ``enc(x)`` or with a bool
        ``src_key_padding_mask`` (a constant input)."""
        s = self.s
        if not (self.spend() and self.spend()):
            return None
        e = shape[2]
        ff = s.choice([2, 3])
        args = {"d_model": e, "nhead": s.choice([1, 2]) if e == 4 else 1, "dim_feedforward": ff, "dropout": 0}
        bf = s.coin(0.5)
        if bf:
            args["batch_first"] = True
        if s.coin(0.4):
            args["norm_first"] = True
        if s.coin(0.3):
            args["activation"] = "gelu"
            self.spend()
        bias = not s.coin(0.15)
        if not bias:
            args["bias"] = False
        shapes = {"self_attn.in_proj_weight": (3 * e, e)}
        if bias:
            shapes["self_attn.in_proj_bias"] = (3 * e,)
        shapes["self_attn.out_proj.weight"] = (e, e)
        if bias:
            shapes["self_attn.out_proj.bias"] = (e,)
        for lin, (o, i) in (("linear1", (ff, e)), ("linear2", (e, ff))):
            shapes[f"{lin}.weight"] = (o, i)
            if bias:
                shapes[f"{lin}.bias"] = (o,)
        for norm in ("norm1", "norm2"):
            shapes[f"{norm}.weight"] = (e,)
            if bias:
                shapes[f"{norm}.bias"] = (e,)
        m = self.lmod(name, path, "TransformerEncoderLayer", [shape], shape, args,
                      self.lparams(path, shapes, False), True)
        m.inputs = ["src"]
        self.v2_used["layer TransformerEncoderLayer"] += 1
        if s.coin(0.3):   # key padding: batch x length, never a whole row
            b, l = (shape[0], shape[1]) if bf else (shape[1], shape[0])
            vals = [Fr(int(j == l - 1 and l > 1 and s.coin(0.7))) for _ in range(b) for j in range(l)]
            t = Leaf(self.fresh("pad"), (b, l), vals, False, dtype="bool")
            self.targets.append(t)
            self.v2_used["layer TransformerEncoderLayer padding mask"] += 1
            m.call_tree = lambda cur, m=m, t=t: ("call", m.name, (cur, ("kw", "src_key_padding_mask", ("n", t.name))))
        return "mod", m, shape

    def fn_stage(self, kind: str, shape: tuple, root_params: list):
        """A functional form inside the root's forward (parameters are the root's)."""
        s = self.s
        self.v2_used[f"layer functional {kind}"] += 1

        def op(name, items, out):
            return lambda cur: ("op", "fn", name, None, (cur,) + tuple(items), "", out, "node")

        if kind == "sdpa":    # (batch, heads, length, E) self-attention: the fused CPU kernel
            if not self.spend():
                return None
            l = shape[2]
            items = []
            form = s.weighted([(3, "plain"), (2, "causal"), (2, "mask"), (1, "scale")])
            if form == "causal":
                items.append(("kw", "is_causal", ("lit", "True")))
            elif form == "mask":     # bool, True attends; a row all False gives 0
                keep = Leaf(self.fresh("keep"), (l, l), [Fr(int(s.coin(0.7))) for _ in range(l * l)], False,
                            dtype="bool")
                self.targets.append(keep)
                items.append(("kw", "attn_mask", ("n", keep.name)))
            elif form == "scale":
                items.append(("kw", "scale", ("lit", "0.5")))
            self.v2_used[f"layer sdpa {form}"] += 1
            return "fn", (lambda cur: ("op", "fn", "F.scaled_dot_product_attention", None, (cur, cur, cur)
                                       + tuple(items), "", shape, "node")), shape
        if kind == "act":
            t = self.act_type()
            a = self.act_args(t, shape)
            a.pop("inplace", None)
            items = [("kw", k, ("lit", _py(v))) for k, v in a.items()]
            return "fn", op(FN_ACTS[t], items, shape), shape
        if kind in ("conv2d", "conv1d"):
            nd = 2 if kind == "conv2d" else 1
            cin, cout, k = shape[1], s.int(1, 3), s.int(1, 2)
            pad = s.int(0, 1)
            w = self.leaf(self.fresh("W"), (cout, cin) + (k,) * nd, s.coin(0.85))
            root_params.append(w)
            items = [("n", w.name)]
            if s.coin(0.6):
                b = self.leaf(self.fresh("B"), (cout,), s.coin(0.85))
                root_params.append(b)
                items.append(("n", b.name))
            if pad:
                items.append(("kw", "padding", ("lit", str(pad))))
            outs = tuple(_pool_out(n_, k, 1, pad) for n_ in shape[2:])
            if any(o < 1 for o in outs):
                return None
            return "fn", op(f"F.{kind}", items, (shape[0], cout) + outs), (shape[0], cout) + outs
        if kind in ("maxpool", "avgpool"):
            k = 2
            outs = tuple(_pool_out(n_, k, k, 0) for n_ in shape[2:])
            if any(o < 1 for o in outs):
                return None
            if kind == "maxpool":
                self.int_saved = True
            nm = "F.max_pool2d" if kind == "maxpool" else "F.avg_pool2d"
            return "fn", op(nm, [("lit", "2")], shape[:2] + outs), shape[:2] + outs
        if kind in ("maxpool1d", "avgpool1d"):
            out = _pool_out(shape[2], 2, 2, 0)
            if out < 1:
                return None
            if kind == "maxpool1d":
                self.int_saved = True
            nm = "F.max_pool1d" if kind == "maxpool1d" else "F.avg_pool1d"
            return "fn", op(nm, [("lit", "2")], shape[:2] + (out,)), shape[:2] + (out,)
        if kind == "adaptive":
            return "fn", op("F.adaptive_avg_pool2d", [("lit", "1")], shape[:2] + (1, 1)), shape[:2] + (1, 1)
        if kind == "ln":
            self.spend()
            e = shape[-1]
            items = [("lit", f"({e},)")]
            if s.coin(0.6):
                w = self.leaf(self.fresh("G"), (e,), s.coin(0.85))
                root_params.append(w)
                items.append(("n", w.name))
            return "fn", op("F.layer_norm", items, shape), shape
        if kind == "gn":
            self.spend()
            c = shape[1]
            g = s.choice([x for x in range(1, c + 1) if c % x == 0])
            if math.prod(shape[1:]) // g < 2:
                return None
            return "fn", op("F.group_norm", [("lit", str(g))], shape), shape
        return None

    # ------------------------------------------------------------------ the loss
    def layer_loss(self, model: Mod, y_shape: tuple, custom: bool):
        s = self.s
        y = ("n", "y")
        kinds = [(3, "expr")]
        if custom:
            kinds += [(5, "module")]
        kinds += [(3, "functional")]
        kind = s.weighted(kinds)
        if kind == "expr" or y_shape == ():
            return self.loss(y_shape)
        typ = s.weighted([(3, "MSELoss"), (2, "L1Loss"), (2, "SmoothL1Loss"), (2, "HuberLoss"),
                          (3 if len(y_shape) >= 2 else 0, "CrossEntropyLoss"),
                          (3 if len(y_shape) >= 2 else 0, "NLLLoss"), (1, "BCELoss"), (2, "BCEWithLogitsLoss"),
                          (1, "KLDivLoss")] + loss_options(y_shape))
        if (typ in ("CrossEntropyLoss", "BCELoss", "BCEWithLogitsLoss", "KLDivLoss") or LOSSES.get(typ, (0, False))[1]) \
                and not self.spend():
            typ = s.choice(["MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss"] + (["NLLLoss"] if len(y_shape) >= 2 else []))
        reduction = s.weighted([(4, "mean"), (2, "sum"), (1, "none")])
        if typ in LOSSES:     # tests/gen/morelayers.py
            return self.more_loss(typ, kind, model, y_shape, reduction)
        args: dict = {}
        buffers: dict = {}
        inp = y
        if typ in ("CrossEntropyLoss", "NLLLoss"):
            c = y_shape[1]
            tshape = (y_shape[0],) + tuple(y_shape[2:])
            vals = [Fr(s.int(0, c - 1)) for _ in range(math.prod(tshape))]
            if s.coin(0.2) and len(set(vals)) > 1:   # never every target ignored: the mean is 0/0 (nan)
                args["ignore_index"] = int(vals[0])
            t = Leaf(self.fresh("cls"), tshape, vals, False, dtype="int64")
            self.targets.append(t)
            self.int_saved = True
            if s.coin(0.25):
                buffers["weight"] = ((c,), [s.choice([Fr(1), Fr(1, 2), Fr(2), Fr(3, 4)]) for _ in range(c)])
            if typ == "CrossEntropyLoss" and s.coin(0.2):
                args["label_smoothing"] = s.choice([Fr(1, 4), Fr(1, 10)])
            if typ == "NLLLoss" and s.coin(0.3) and self.spend():
                inp = ("op", "fn", "F.log_softmax", None, (y, ("kw", "dim", ("lit", "1"))), "", y_shape, "node")
            fn = "cross_entropy" if typ == "CrossEntropyLoss" else "nll_loss"
        else:
            if typ == "BCELoss":
                vals = [s.choice([Fr(0), Fr(1, 4), Fr(1, 2), Fr(3, 4), Fr(1)]) for _ in range(math.prod(y_shape))]
                inp = ("f", "sigmoid", y)
            elif typ == "BCEWithLogitsLoss":
                vals = [s.choice([Fr(0), Fr(1, 4), Fr(1, 2), Fr(3, 4), Fr(1)]) for _ in range(math.prod(y_shape))]
                if s.coin(0.25):
                    buffers["pos_weight"] = ((y_shape[-1],), [s.choice([Fr(1), Fr(2), Fr(1, 2)])
                                                             for _ in range(y_shape[-1])])
            elif typ == "KLDivLoss":
                vals = [s.choice([Fr(1, 4), Fr(1, 2), Fr(3, 4), Fr(1, 8), Fr(0)]) for _ in range(math.prod(y_shape))]
                inp = ("op", "fn", "F.log_softmax", None, (y, ("kw", "dim", ("lit", "-1"))), "", y_shape, "node")
                if reduction == "mean" and s.coin(0.5):
                    reduction = "batchmean"
            else:
                vals = self.values(y_shape)
            if typ == "SmoothL1Loss" and s.coin(0.4):
                args["beta"] = s.choice([Fr(1, 2), 2])
            if typ == "HuberLoss" and s.coin(0.4):
                args["delta"] = s.choice([Fr(1, 2), 2])
            t = Leaf(self.fresh("t"), y_shape, vals, False)
            self.targets.append(t)
            fn = {"MSELoss": "mse_loss", "L1Loss": "l1_loss", "SmoothL1Loss": "smooth_l1_loss", "HuberLoss": "huber_loss",
                  "BCELoss": "binary_cross_entropy", "BCEWithLogitsLoss": "binary_cross_entropy_with_logits",
                  "KLDivLoss": "kl_div"}[typ]
        if reduction != "mean":
            args["reduction"] = reduction
        out_shape = y_shape if reduction == "none" else ()
        if typ in ("CrossEntropyLoss", "NLLLoss") and reduction == "none":
            out_shape = (y_shape[0],) + tuple(y_shape[2:])
        if kind == "module":
            lname = self.fresh("crit")
            m = self.lmod(lname, lname, typ, [y_shape, t.shape], out_shape, args)
            m.inputs = ["input", "target"]
            m.buffers = buffers
            if typ in ("CrossEntropyLoss", "NLLLoss"):
                m.int_inputs = (1,)
                self.int_paths.add(lname)
            model.children.append(m)
            tree = ("call", lname, (inp, ("n", t.name)))
            self.v2_used[f"layer loss module {typ}"] += 1
        else:
            if buffers:   # weights as tensors: the functional form takes them as targets
                for key, (shp, vals_) in buffers.items():
                    w = Leaf(self.fresh("lw"), shp, vals_, False)
                    self.targets.append(w)
                    args[key] = ("name", w.name)
            items = [inp, ("n", t.name)] + [("kw", k, ("n", v[1]) if isinstance(v, tuple) else ("lit", _py(v)))
                                             for k, v in args.items()]
            tree = ("op", "fn", f"F.{fn}", None, tuple(items), "", out_shape, "node")
            self.v2_used[f"layer loss F.{fn}"] += 1
        if out_shape != ():
            tree = ("f", s.choice(["sum", "mean"]), tree)
        return tree


def _py(v) -> str:
    """Python text of a keyword argument's value."""
    if isinstance(v, bool):
        return "True" if v else "False"
    if v is None:
        return "None"
    if isinstance(v, Fr):
        return num_text(v)
    if isinstance(v, str):
        return json.dumps(v)
    return str(v)


def _rename(t, old: str, new: str | None):
    if new is None:
        return t
    if t == ("n", old):
        return ("n", new)
    if isinstance(t, tuple):
        return tuple(_rename(x, old, new) if isinstance(x, tuple) else x for x in t)
    return t
