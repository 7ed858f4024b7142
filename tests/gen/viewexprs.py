"""v2 expressions: Tensor methods, keyword arguments, views and copies, indexing.

A mixin of :class:`exprs.ExprCtx`: :meth:`V2Exprs.v2_expr` builds a tree of a requested
shape whose top is one v2 form (its operands are ordinary expressions). Each form works
backward from the shape it must produce to the shape of its operand, so the file is valid by
construction; which autograd node PyTorch makes (a view, a copy, SplitBackward0...) is the
engine's business, so the analysis treats them all as one node with unmodelled edges.
"""

from __future__ import annotations

from fractions import Fraction as Fr

from .trees import NoExpr, draw_form

#: The forms, with weights; each is a coverage key "v2 form NAME".
VIEW_FORMS = {
    "clone": 3, "detach": 1, "contiguous": 4, "view": 2, "reshape": 2, "flatten": 2, "unflatten": 3,
    "squeeze": 2, "unsqueeze": 4, "transpose": 4, "permute": 4, "t": 3, "T": 3, "expand": 2, "cat": 3,
    "stack": 2, "chunk": 2, "split": 2, "unbind": 2, "select": 2, "narrow": 2, "index": 5,
    "method_unary": 3, "method_binary": 2, "reduce_dim": 3, "kwfn": 3,
    "rearrange": 3, "repeat": 2, "pad": 2, "logsumexp": 2, "trace": 1, "prod": 2, "diff": 1,
}


#: Forms that can only make some shapes (the others are tried on any shape).
APPLIES = {
    "contiguous": lambda shp: len(shp) == 2, "t": lambda shp: len(shp) == 2, "T": lambda shp: len(shp) in (2, 3),
    "unflatten": lambda shp: len(shp) >= 2, "transpose": lambda shp: len(shp) >= 2,
    "permute": lambda shp: len(shp) >= 2, "unsqueeze": lambda shp: 1 in shp, "expand": lambda shp: any(d > 1 for d in shp),
    "cat": lambda shp: any(d >= 2 for d in shp), "view": lambda shp: len(shp) >= 1, "flatten": lambda shp: len(shp) >= 1,
    "chunk": lambda shp: len(shp) >= 1, "split": lambda shp: len(shp) >= 1, "narrow": lambda shp: len(shp) >= 1,
    "rearrange": lambda shp: len(shp) >= 1, "repeat": lambda shp: len(shp) >= 1, "pad": lambda shp: len(shp) >= 1,
    "trace": lambda shp: not shp, "diff": lambda shp: len(shp) >= 1,
}


def _lit(v) -> tuple:
    return ("lit", str(v))


def _kw(k, v) -> tuple:
    return ("kw", k, v if isinstance(v, tuple) else _lit(v))


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _dims(shape) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def _neg(d: int, n: int, s) -> int:
    """A dim index, sometimes written from the end."""
    return d - n if s.coin(0.3) else d


class V2Exprs:
    """Mixin of ExprCtx (``self.s``, ``self.g``, ``self.expr``)."""

    def v2_expr(self, shape: tuple, depth: int):
        forms = [(w, f) for f, w in VIEW_FORMS.items() if APPLIES.get(f, lambda shp: True)(shape)]
        return draw_form(self, forms, "_v2_", "v2 form", shape, depth)

    def _m(self, name, recv, items, shape, post="", sem="node"):
        return ("op", "method", name, recv, tuple(items), post, tuple(shape), sem)

    def _f(self, name, items, shape, post="", sem="node"):
        return ("op", "fn", name, None, tuple(items), post, tuple(shape), sem)

    # ------------------------------------------------------------------ copies
    def _v2_clone(self, shape, d):
        e = self.expr(shape, d)
        return self._m("clone", e, [], shape) if self.s.coin(0.8) else self._f("torch.clone", [e], shape)

    def _v2_detach(self, shape, d):
        return self._m("detach", self.expr(shape, d), [], shape, sem="detach")

    def _v2_contiguous(self, shape, d):
        if len(shape) != 2:
            raise NoExpr()
        e = self.expr((shape[1], shape[0]), d)
        return self._m("contiguous", self._m("t", e, [], shape), [], shape)

    # ------------------------------------------------------------------ reshaping
    def _factor(self, n: int) -> tuple:
        s = self.s
        opts = [(1, n), (n, 1)] + [(a, n // a) for a in (2, 3) if n % a == 0 and n // a > 1]
        return s.choice(opts)

    def _v2_view(self, shape, d, name="view"):
        s = self.s
        if not shape:
            raise NoExpr()
        n = _numel(shape)
        src_shape = (n,) if len(shape) >= 2 else self._factor(n)
        dims = list(shape)
        if s.coin(0.4):
            dims[s.int(0, len(dims) - 1)] = -1
        e = self.expr(src_shape, d)
        if s.coin(0.3):
            return self._m(name, e, [_lit(_dims(dims))], shape)
        return self._m(name, e, [_lit(x) for x in dims], shape)

    def _v2_reshape(self, shape, d):
        if self.s.coin(0.2) and shape:
            e = self.expr((_numel(shape),) if len(shape) >= 2 else self._factor(shape[0]), d)
            return self._f("torch.reshape", [e, _lit(_dims(shape))], shape)
        return self._v2_view(shape, d, "reshape")

    def _v2_flatten(self, shape, d):
        s = self.s
        if len(shape) == 1:
            return self._m("flatten", self.expr(self._factor(shape[0]), d), [], shape)
        if len(shape) >= 2:
            i = s.int(0, len(shape) - 1)
            a, b = self._factor(shape[i])
            src_shape = shape[:i] + (a, b) + shape[i + 1:]
            e = self.expr(src_shape, d)
            if s.coin(0.5):
                return self._m("flatten", e, [_lit(i), _lit(i + 1)], shape)
            return self._f("torch.flatten", [e, _kw("start_dim", i), _kw("end_dim", i + 1)], shape)
        raise NoExpr()

    def _v2_unflatten(self, shape, d):
        if len(shape) < 2:
            raise NoExpr()
        i = self.s.int(0, len(shape) - 2)
        src_shape = shape[:i] + (shape[i] * shape[i + 1],) + shape[i + 2:]
        e = self.expr(src_shape, d)
        return self._m("unflatten", e, [_lit(_neg(i, len(src_shape), self.s)), _lit(_dims(shape[i:i + 2]))], shape)

    def _v2_squeeze(self, shape, d):
        s = self.s
        i = s.int(0, len(shape))
        src_shape = shape[:i] + (1,) + shape[i:]
        e = self.expr(src_shape, d)
        if 1 not in shape and s.coin(0.3):
            return self._m("squeeze", e, [], shape)
        if s.coin(0.2):
            return self._f("torch.squeeze", [e, _lit(i)], shape)
        return self._m("squeeze", e, [_lit(_neg(i, len(src_shape), s))], shape)

    def _v2_unsqueeze(self, shape, d):
        ones = [i for i, x in enumerate(shape) if x == 1]
        if not ones:
            raise NoExpr()
        i = self.s.choice(ones)
        src_shape = shape[:i] + shape[i + 1:]
        e = self.expr(src_shape, d)
        if i == 0 and self.s.coin(0.3):
            return ("sub", e, "None", shape, "None")
        return self._m("unsqueeze", e, [_lit(i) if self.s.coin(0.7) else _kw("dim", i)], shape)

    def _v2_transpose(self, shape, d):
        s = self.s
        if len(shape) < 2:
            raise NoExpr()
        i, j = sorted(s.choice([(a, b) for a in range(len(shape)) for b in range(len(shape)) if a < b]))
        src_shape = list(shape)
        src_shape[i], src_shape[j] = shape[j], shape[i]
        e = self.expr(tuple(src_shape), d)
        if s.coin(0.2):
            return self._f("torch.transpose", [e, _lit(i), _lit(j)], shape)
        if s.coin(0.2):
            return self._m("transpose", e, [_kw("dim0", i), _kw("dim1", j)], shape)
        return self._m("transpose", e, [_lit(i), _lit(_neg(j, len(shape), s))], shape)

    def _v2_permute(self, shape, d):
        s = self.s
        if len(shape) < 2:
            raise NoExpr()
        perm = list(range(len(shape)))
        while perm == sorted(perm) and s.coin(0.9):
            s_perm = perm[:]
            for k in range(len(s_perm) - 1, 0, -1):
                j = s.int(0, k)
                s_perm[k], s_perm[j] = s_perm[j], s_perm[k]
            perm = s_perm
        # result dim k is source dim perm[k]: source dim perm[k] has size shape[k]
        src_shape = [0] * len(shape)
        for k, p in enumerate(perm):
            src_shape[p] = shape[k]
        e = self.expr(tuple(src_shape), d)
        if s.coin(0.3):
            return self._m("permute", e, [_lit(_dims(perm))], shape)
        return self._m("permute", e, [_lit(p) for p in perm], shape)

    def _v2_t(self, shape, d):
        if len(shape) != 2:
            raise NoExpr()
        return self._m("t", self.expr((shape[1], shape[0]), d), [], shape)

    def _v2_T(self, shape, d):
        if len(shape) == 2:
            return ("attr", self.expr((shape[1], shape[0]), d), "T", shape)
        if len(shape) == 3:
            return ("attr", self.expr((shape[0], shape[2], shape[1]), d), "mT", shape)
        raise NoExpr()

    def _v2_expand(self, shape, d):
        s = self.s
        big = [i for i, x in enumerate(shape) if x > 1]
        if not big:
            raise NoExpr()
        src_shape = [1 if (i in big and s.coin(0.6)) else x for i, x in enumerate(shape)]
        if src_shape == list(shape):
            src_shape[s.choice(big)] = 1
        drop = 0
        while drop < len(src_shape) - 1 and src_shape[drop] == 1 and s.coin(0.4):
            drop += 1
        e = self.expr(tuple(src_shape[drop:]), d)
        dims = [(-1 if (i >= drop and src_shape[i] == x and s.coin(0.4)) else x) for i, x in enumerate(shape)]
        if s.coin(0.3):
            return self._m("expand", e, [_lit(_dims(dims))], shape)
        return self._m("expand", e, [_lit(x) for x in dims], shape)

    # ------------------------------------------------------------------ joining
    def _v2_cat(self, shape, d):
        s = self.s
        cands = [i for i, x in enumerate(shape) if x >= 2]
        if not cands:
            raise NoExpr()
        i = s.choice(cands)
        a = s.int(1, shape[i] - 1)
        parts = [shape[:i] + (a,) + shape[i + 1:], shape[:i] + (shape[i] - a,) + shape[i + 1:]]
        es = [self.expr(p, d) for p in parts]
        seq = ("tup", tuple(es)) if s.coin(0.5) else ("lst", tuple(es))
        if i == 0 and s.coin(0.3):
            return self._f("torch.cat", [seq], shape)
        return self._f(s.choice(["torch.cat", "cat"]), [seq, _kw("dim", _neg(i, len(shape), s)) if s.coin(0.7)
                                                        else _lit(i)], shape)

    def _v2_stack(self, shape, d):
        s = self.s
        cands = [i for i, x in enumerate(shape) if x in (1, 2, 3)]
        if not cands:
            raise NoExpr()
        i = s.choice(cands)
        part = shape[:i] + shape[i + 1:]
        es = [self.expr(part, d) for _ in range(shape[i])]
        seq = ("tup", tuple(es)) if s.coin(0.5) else ("lst", tuple(es))
        return self._f("torch.stack", [seq] + ([_kw("dim", i)] if i or s.coin(0.5) else []), shape)

    # ------------------------------------------------------------------ taking apart
    def _pick_dim(self, shape):
        if not shape:
            raise NoExpr()
        return self.s.int(0, len(shape) - 1)

    def _v2_chunk(self, shape, d):
        s = self.s
        i = self._pick_dim(shape)
        k = s.choice([2, 3]) if shape[i] <= 2 else 2
        src_shape = shape[:i] + (shape[i] * k,) + shape[i + 1:]
        e = self.expr(src_shape, d)
        args = [_lit(k)] + ([_kw("dim", i)] if i or s.coin(0.3) else [])
        return self._m("chunk", e, args, shape, post=f"[{s.int(0, k - 1)}]")

    def _v2_split(self, shape, d):
        s = self.s
        i = self._pick_dim(shape)
        extra = s.int(1, 2)
        src_shape = shape[:i] + (shape[i] + extra,) + shape[i + 1:]
        e = self.expr(src_shape, d)
        if s.coin(0.5):   # sizes: the piece wanted first or last
            first = s.coin(0.5)
            sizes = [shape[i], extra] if first else [extra, shape[i]]
            return self._m("split", e, [_lit("[" + ", ".join(map(str, sizes)) + "]"), _kw("dim", i)], shape,
                           post="[0]" if first else "[1]")
        src_shape = shape[:i] + (shape[i] * 2,) + shape[i + 1:]
        e = self.expr(src_shape, d)
        return self._m("split", e, [_lit(shape[i])] + ([_kw("dim", i)] if i else []), shape,
                       post=f"[{s.int(0, 1)}]")

    def _v2_unbind(self, shape, d):
        s = self.s
        i = s.int(0, len(shape))
        k = s.int(1, 3)
        src_shape = shape[:i] + (k,) + shape[i:]
        e = self.expr(src_shape, d)
        post = f"[{s.int(-k, k - 1)}]"
        if s.coin(0.3):
            return self._f("torch.unbind", [e] + ([_kw("dim", i)] if i else []), shape, post=post)
        return self._m("unbind", e, [_lit(i)] if i or s.coin(0.3) else [], shape, post=post)

    def _v2_select(self, shape, d):
        s = self.s
        i = s.int(0, len(shape))
        k = s.int(1, 3)
        src_shape = shape[:i] + (k,) + shape[i:]
        e = self.expr(src_shape, d)
        return self._m("select", e, [_lit(i), _lit(s.int(-k, k - 1))], shape)

    def _v2_narrow(self, shape, d):
        s = self.s
        i = self._pick_dim(shape)
        extra = s.int(0, 2)
        src_shape = shape[:i] + (shape[i] + extra,) + shape[i + 1:]
        e = self.expr(src_shape, d)
        return self._m("narrow", e, [_lit(i), _lit(s.int(0, extra)), _lit(shape[i])], shape)

    def _v2_index(self, shape, d):
        s = self.s
        kind = s.weighted([(3, "int"), (3, "slice0"), (2, "slice1"), (2, "ellipsis"), (1, "none")])
        if kind == "int":
            k = s.int(1, 3)
            e = self.expr((k,) + shape, d)
            return ("sub", e, str(s.int(-k, k - 1)), shape, "select")
        if kind == "slice0" and shape:
            extra = s.int(0, 2)
            a = s.int(0, extra)
            e = self.expr((shape[0] + extra,) + shape[1:], d)
            stop = a + shape[0]
            text = f"{a}:{stop}" if a or s.coin(0.5) else f":{stop}"
            if a + shape[0] == shape[0] + extra and s.coin(0.5):
                text = f"{a}:" if a else ":"
            return ("sub", e, text, shape, "slice")
        if kind == "slice1" and len(shape) >= 2:
            extra = s.int(1, 2)
            a = s.int(0, extra)
            e = self.expr((shape[0], shape[1] + extra) + shape[2:], d)
            return ("sub", e, f":, {a}:{a + shape[1]}", shape, "slice")
        if kind == "ellipsis":
            k = s.int(1, 3)
            e = self.expr(shape + (k,), d)
            return ("sub", e, f"..., {s.int(-k, k - 1)}", shape, "...")
        if kind == "none" and shape and shape[0] == 1:
            return ("sub", self.expr(shape[1:], d), "None", shape, "None")
        raise NoExpr()

    # ------------------------------------------------------------------ methods and keyword arguments
    def _v2_method_unary(self, shape, d):
        s = self.s
        fn = s.choice(["relu", "abs", "neg", "tanh", "sigmoid", "exp", "sin", "cos", "square", "sign", "reciprocal",
                       "clamp_min", "clamp_max"])
        if fn not in ("relu", "abs", "neg", "square", "sign", "reciprocal", "clamp_min", "clamp_max") and not self.g.spend():
            fn = s.choice(["relu", "abs", "neg", "square", "sign", "clamp_min"])
        if fn == "reciprocal":   # of a positive argument (1 / 0 is refused)
            return self._m(fn, self.positive(shape, d), [], shape)
        if fn in ("clamp_min", "clamp_max"):
            bound = _lit(s.choice(["0", "0.5", "-0.5", "1"]))
            if s.coin(0.3):
                return self._f(f"torch.{fn}", [self.expr(shape, d), bound], shape)
            return self._m(fn, self.expr(shape, d), [bound], shape)
        return self._m(fn, self.expr(shape, d), [], shape)

    def _v2_method_binary(self, shape, d):
        s = self.s
        fn = s.choice(["mul", "add", "sub", "pow", "div"])
        e = self.expr(shape, d)
        if fn == "pow":
            return self._m("pow", e, [_lit(s.choice([2, 3]))], shape)
        if fn == "div":
            return self._m("div", e, [_lit(s.choice([2, 4, -2]))], shape)
        other = self.expr(shape, d) if s.coin(0.6) else ("c", s.choice([Fr(2), Fr(1, 2), Fr(-1)]))
        return self._m(fn, e, [other], shape)

    def _v2_reduce_dim(self, shape, d):
        s = self.s
        fn = s.choice(["sum", "mean", "amax", "var", "std"] if shape else ["sum", "mean"])
        if fn == "std" and not self.g.spend():   # a square root: transcendental budget
            fn = "var"
        if not shape and s.coin(0.5):
            return self._m(fn, self.expr(self.g.shape(), d), [], shape)
        i = s.int(0, len(shape))
        keep = bool(shape) and i < len(shape) and shape[i] == 1 and s.coin(0.5)
        k = s.int(1, 3) if fn not in ("var", "std") else s.int(2, 3)
        src_shape = shape[:i] + (k,) + (shape[i + 1:] if keep else shape[i:])
        e = self.expr(src_shape, d)
        args = [_kw("dim", _neg(i, len(src_shape), s)) if s.coin(0.6) else _lit(i)]
        if keep:
            args.append(_kw("keepdim", "True"))
        if s.coin(0.3) and fn in ("sum", "mean"):
            return self._f(f"torch.{fn}", [e] + args, shape)
        return self._m(fn, e, args, shape)

    def _v2_kwfn(self, shape, d):
        s = self.s
        fn = s.choice(["clamp", "leaky_relu", "hardtanh", "relu", "softmax", "maximum"])
        if fn == "softmax" and (not shape or not self.g.spend()):
            fn = "clamp"
        e = self.expr(shape, d)
        if fn == "clamp":
            lo = s.choice(["0", "-0.5", "None"])
            hi = s.choice(["1", "0.5"]) if lo == "None" or s.coin(0.4) else None
            args = [e] + ([_kw("min", lo)] if lo != "None" else []) + ([_kw("max", hi)] if hi else [])
            return self._f(s.choice(["torch.clamp", "clamp"]), args, shape)
        if fn == "leaky_relu":
            return self._f("F.leaky_relu", [e, _kw("negative_slope", s.choice(["0.25", "0.5", "2"]))], shape)
        if fn == "hardtanh":
            return self._f("F.hardtanh", [e, _kw("min_val", "-0.5"), _kw("max_val", "1")], shape)
        if fn == "relu":
            return self._f("F.relu", [e], shape)
        if fn == "maximum":
            return self._f("torch.maximum", [e, self.expr(shape, d)], shape)
        return self._f("F.softmax", [e, _kw("dim", _neg(s.int(0, len(shape) - 1), len(shape), s))], shape)

    # ------------------------------------------------------------------ scans and rearrangements
    def _v2_rearrange(self, shape, d):
        """flip, roll, cumsum, tril / triu: the operand has the result's shape."""
        s = self.s
        n = len(shape)
        fn = s.choice(["flip", "roll", "cumsum"] + (["tril", "triu"] if n >= 2 else []))
        e = self.expr(shape, d)
        if fn == "flip":
            dims = sorted(set(_neg(s.int(0, n - 1), n, s) % n for _ in range(s.int(1, 2))))
            if s.coin(0.5):
                return self._f("torch.flip", [e, _lit(_dims(dims))], shape)
            return self._m("flip", e, [_lit(x) for x in dims], shape)
        if fn == "roll":
            if s.coin(0.3):
                return self._m("roll", e, [_lit(s.int(-3, 3))], shape)
            dim = _neg(s.int(0, n - 1), n, s)
            return self._f("torch.roll", [e, _lit(s.int(-3, 3)), _kw("dims", dim)], shape)
        if fn == "cumsum":
            dim = _neg(s.int(0, n - 1), n, s)
            if s.coin(0.5):
                return self._f("torch.cumsum", [e, _kw("dim", dim)], shape)
            return self._m("cumsum", e, [_lit(dim)], shape)
        k = s.int(-1, 1)
        if s.coin(0.5):
            return self._f(f"torch.{fn}", [e] + ([_kw("diagonal", k)] if k else []), shape)
        return self._m(fn, e, [_lit(k)] if k else [], shape)

    def _v2_repeat(self, shape, d):
        """x.repeat(*sizes): each result dim a multiple of the operand's (a leading new dim sometimes)."""
        s = self.s
        lead = 1 if len(shape) >= 2 and s.coin(0.3) else 0
        reps, src = [], []
        for i, n in enumerate(shape):
            if i < lead:
                reps.append(n)
                continue
            r = s.choice([r for r in (1, 2, 3) if n % r == 0])
            reps.append(r)
            src.append(n // r)
        e = self.expr(tuple(src), d)
        return self._m("repeat", e, [_lit(r) for r in reps], shape)

    def _v2_pad(self, shape, d):
        """F.pad in constant mode over the last one or two dims (a negative pad crops)."""
        s = self.s
        pads, src = [], list(shape)
        for i in range(min(len(shape), s.int(1, 2))):
            dim = len(shape) - 1 - i
            lo, hi = s.int(-1, 2), s.int(0, 2)
            if shape[dim] - lo - hi < 1:
                lo, hi = 0, 0
            pads += [lo, hi]
            src[dim] = shape[dim] - lo - hi
        if all(p <= 0 for p in pads):    # a crop only (a clone of a view, laid out as the operand): not modelled
            raise NoExpr()
        e = self.expr(tuple(src), d)
        args = [e, _lit(_dims(pads))]
        if s.coin(0.3):
            args.append(_kw("value", s.choice(["0.5", "-1", "2"])))
        return self._f("F.pad", args, shape)

    def _reduced_along_one_dim(self, shape, d):
        """An operand one dim larger than ``shape`` (or of the same rank with keepdim) and the
        ``dim`` / ``keepdim`` arguments that reduce it to ``shape`` (logsumexp, prod)."""
        s = self.s
        i = s.int(0, len(shape))
        keep = i < len(shape) and shape[i] == 1 and s.coin(0.5)
        src_shape = shape[:i] + (s.int(1, 3),) + (shape[i + 1:] if keep else shape[i:])
        e = self.expr(src_shape, d)
        args = [_kw("dim", _neg(i, len(src_shape), s)) if s.coin(0.5) else _lit(i)]
        if keep:
            args.append(_kw("keepdim", "True"))
        return e, args

    def _v2_logsumexp(self, shape, d):
        s = self.s
        if not self.g.spend():
            raise NoExpr()
        e, args = self._reduced_along_one_dim(shape, d)
        if s.coin(0.5):
            return self._f("torch.logsumexp", [e] + args, shape)
        return self._m("logsumexp", e, args, shape)

    def _v2_trace(self, shape, d):
        s = self.s
        e = self.expr((s.int(1, 3), s.int(1, 3)), d)
        return self._m("trace", e, [], shape) if s.coin(0.5) else self._f("torch.trace", [e], shape)

    def _v2_prod(self, shape, d):
        """prod of every element (a 0-d result) or along one dim (zeros among the values take
        PyTorch's other backward formulas)."""
        s = self.s
        if not shape and s.coin(0.5):
            e = self.expr(self.g.shape(), d)
            return self._m("prod", e, [], shape) if s.coin(0.6) else self._f("torch.prod", [e], shape)
        e, args = self._reduced_along_one_dim(shape, d)
        return self._m("prod", e, args, shape) if s.coin(0.6) else self._f("torch.prod", [e] + args, shape)

    def _v2_diff(self, shape, d):
        """torch.diff: n slices-and-subtracts along a dim (the operand n longer there)."""
        s = self.s
        n = s.choice([1, 1, 2])
        i = s.int(0, len(shape) - 1)
        src = shape[:i] + (shape[i] + n,) + shape[i + 1:]
        e = self.expr(src, d)
        args = ([_kw("n", n)] if n != 1 else []) + ([_kw("dim", _neg(i, len(shape), s))] if i != len(shape) - 1 or
                                                    s.coin(0.3) else [])
        return self._m("diff", e, args, shape) if s.coin(0.5) else self._f("torch.diff", [e] + args, shape)
