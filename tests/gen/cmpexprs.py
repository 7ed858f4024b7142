"""v2 expressions around comparisons: masks, where() with a comparison condition, bool tensors.

A mixin of :class:`exprs.ExprCtx`: :meth:`CmpExprs.cmp_expr` builds a *float* tree of a
requested shape whose top uses one comparison (``> >= < <= == !=`` as operators, as the Tensor
methods ``gt ... ne`` and as ``torch.gt ...``) or a bool tensor (a target declared
``dtype: bool``): a mask (``e * (a > 0)``, a hand-written relu ``e * (e > 0)``), ``where(cond,
a, b)``, ties (a tensor compared with itself or with a value it holds), nan gradients (``where``
over ``sqrt`` at 0: the unselected branch gets 0 * inf = nan, the classic trap; the 2-norm at
the zero vector under ``sqrt``), and now and then one of the bool errors PyTorch raises (``e -
cond``, ``-cond``, ``e ** cond`` in backward). A comparison's result is a bool tensor with no
grad_fn, so it never meets anything but a float tensor here (bool-only arithmetic is not
modelled). The analysis sees a comparison as a ``detach`` form: it requires no grad.

Each form is a coverage key ``cmp FORM``; :func:`cmp_rescale` gives hooks' returns that
compare their gradient (``cmp hook``).
"""

from __future__ import annotations

from fractions import Fraction as Fr

from .specs import Leaf
from .trees import NoExpr, draw_form

#: The forms, with weights; each is a coverage key "cmp NAME".
CMP_FORMS = {"mask": 5, "where": 5, "relu": 2, "tie": 2, "nan": 2, "bool": 3, "error": 1}

#: Python's operator, the Tensor method it calls, the mirrored operator (a number on the left)
OPERATORS = {">": "gt", ">=": "ge", "<": "lt", "<=": "le", "==": "eq", "!=": "ne"}

#: Numbers a comparison is made against: 0 and values the generator's leaves hold (ties)
THRESHOLDS = [Fr(0), Fr(0), Fr(1, 2), Fr(-1, 2), Fr(1), Fr(-1)]


def cmp_tree(op: str, a, b, style: str, shape):
    """``a op b`` as an operator, a Tensor method or a torch function (one bool tensor, no node)."""
    if style == "operator":
        return ("op", "cmp", op, a, (b,), "", shape, "detach")
    if style == "method" and a[0] != "c":
        return ("op", "method", OPERATORS[op], a, (b,), "", shape, "detach")
    if a[0] == "c":   # torch.gt(number, tensor) is no signature PyTorch has: the operator, mirrored
        return ("op", "cmp", op, a, (b,), "", shape, "detach")
    return ("op", "fn", "torch." + OPERATORS[op], None, (a, b), "", shape, "detach")


class CmpExprs:
    """Mixin of ExprCtx (``self.s``, ``self.g``, ``self.expr``, ``self.split_broadcast``)."""

    def cmp_expr(self, shape: tuple, depth: int):
        return draw_form(self, [(w, f) for f, w in CMP_FORMS.items()], "_cmp_", "cmp", shape, depth)

    # ------------------------------------------------------------------ conditions
    def condition(self, shape: tuple, d: int):
        """A bool tensor that broadcasts to ``shape`` (a comparison, or sometimes a bool tensor)."""
        s = self.s
        if s.coin(0.15):
            return self.bool_tensor(shape)
        op = s.choice(list(OPERATORS))
        style = s.weighted([(5, "operator"), (2, "method"), (1, "function")])
        kind = s.weighted([(4, "number"), (3, "tensors"), (1, "number_left")])
        if kind == "tensors":
            a_shape, b_shape = self.split_broadcast(shape)
            return cmp_tree(op, self.expr(a_shape, d), self.expr(b_shape, d), style, shape)
        a = self.expr(shape, d)
        c = ("c", s.choice(THRESHOLDS))
        if kind == "number_left":
            return cmp_tree(op, c, a, "operator", shape)
        return cmp_tree(op, a, c, style, shape)

    def bool_tensor(self, shape: tuple):
        """A target declared ``dtype: bool`` of this shape (made on first use)."""
        g = self.g
        for t in g.targets:
            if t.dtype == "bool" and t.shape == shape and self.s.coin(0.6):
                return ("n", t.name)
        n = 1
        for dim in shape:
            n *= dim
        leaf = Leaf(g.fresh("m"), tuple(shape), [Fr(self.s.int(0, 1)) for _ in range(n)], False, dtype="bool")
        g.targets.append(leaf)
        g.v2_used["cmp bool tensor"] += 1
        return ("n", leaf.name)

    def _branch(self, shape: tuple, d: int):
        """where's input or other: an expression of a shape that broadcasts, or a number."""
        s = self.s
        if s.coin(0.25):
            return ("c", s.choice([Fr(0), Fr(1, 2), Fr(-1)]))
        a_shape, _ = self.split_broadcast(shape)
        return self.expr(a_shape, d)

    def where(self, cond, a, b, shape):
        """where(cond, a, b); one of a, b has the whole shape (the other may be a number)."""
        return ("op", "fn", self.s.choice(["where", "torch.where"]), None, (cond, a, b), "", shape, "node")

    # ------------------------------------------------------------------ the forms
    def _cmp_mask(self, shape, d):
        """e * cond (or cond * e): the gradient flows where the condition holds."""
        e_shape, c_shape = self.split_broadcast(shape)
        e, cond = self.expr(e_shape, d), self.condition(c_shape, d)
        return ("b", "*", e, cond) if self.s.coin(0.7) else ("b", "*", cond, e)

    def _cmp_where(self, shape, d):
        s = self.s
        _, c_shape = self.split_broadcast(shape)
        if s.coin(0.3):   # a leaky relu by hand: where(e > 0, e, 0.25 * e)
            e = self.expr(shape, d)
            cond = cmp_tree(s.choice([">", ">="]), e, ("c", Fr(0)), "operator", shape)
            return self.where(cond, e, ("b", "*", ("c", Fr(1, 4)), e), shape)
        a, b = self.expr(shape, d), self._branch(shape, d)
        if s.coin(0.5):
            a, b = b, a
        return self.where(self.condition(c_shape, d), a, b, shape)

    def _cmp_relu(self, shape, d):
        """e * (e > 0): relu written with a mask (at e == 0 the mask is 0, as relu'(0) is)."""
        e = self.expr(shape, d)
        op = self.s.choice([">", ">=", "!="])
        return ("b", "*", e, cmp_tree(op, e, ("c", Fr(0)), self.s.choice(["operator", "method"]), shape))

    def _cmp_tie(self, shape, d):
        """Equal operands: a name compared with itself, or a kink value (e - e) with 0."""
        s = self.s
        e = self.name_of(shape)
        if e is None:
            raise NoExpr()
        op = s.choice(list(OPERATORS))
        if s.coin(0.5):
            cond = cmp_tree(op, e, e, s.choice(["operator", "method", "function"]), shape)
        else:
            zero = ("b", "-", e, e) if s.coin(0.5) else ("b", "*", e, ("c", Fr(0)))
            cond = cmp_tree(op, zero, ("c", Fr(0)), "operator", shape)
        other = self.expr(shape, d)
        return self.where(cond, e, other, shape) if s.coin(0.5) else ("b", "*", other, cond)

    def _cmp_nan(self, shape, d):
        """where(cond, sqrt(z), e) with z == 0: the backward of sqrt at 0 is inf, and the branch
        where() does not select gets 0 * inf = nan (the classic masked-sqrt trap); or the 2-norm of
        a zero vector under sqrt (an infinite gradient into the norm at 0: nan)."""
        s = self.s
        if not self.g.spend():
            raise NoExpr()
        e = self.expr(shape, d)
        zero = ("b", "-", e, e) if s.coin(0.5) else ("b", "*", e, ("c", Fr(0)))
        if shape == () and s.coin(0.3):
            vec = self.expr(self.g.shape(), d)
            z = ("b", "*", vec, ("c", Fr(0)))
            return ("b", "+", ("f", "sqrt", ("f", "norm", z)), e)
        _, c_shape = self.split_broadcast(shape)
        cond = self.condition(c_shape, d)
        root = ("f", "sqrt", zero)
        return self.where(cond, root, e, shape) if s.coin(0.6) else self.where(cond, e, root, shape)

    def _cmp_bool(self, shape, d):
        """A bool tensor (dtype: bool) as where's condition or a mask."""
        s = self.s
        _, c_shape = self.split_broadcast(shape)
        m = self.bool_tensor(c_shape)
        e = self.expr(shape, d)
        if s.coin(0.5):
            return self.where(m, e, self._branch(shape, d), shape)
        return ("b", "*", e, m)

    def _cmp_error(self, shape, d):
        """What PyTorch refuses on bool tensors (the answer is then its error): e - cond, -cond,
        e ** cond (its backward)."""
        s = self.s
        e = self.expr(shape, d)
        cond = self.condition(shape, d)
        kind = s.choice(["sub", "rsub", "neg", "pow"])
        if kind == "sub":
            return ("b", "-", e, cond)
        if kind == "rsub":
            return ("b", "-", ("c", Fr(1)), cond) if s.coin(0.3) else ("b", "-", cond, e)
        if kind == "neg":
            return ("b", "*", e, ("neg", cond))
        return ("b", "**", e, cond)



def cmp_rescale(s, used, t):
    """A hook's return that compares its gradient ``t``: a mask, or where() (``used``: the
    generator's coverage counter)."""
    used["cmp hook"] += 1
    op = s.choice(list(OPERATORS))
    c = ("c", s.choice([Fr(0), Fr(0), Fr(1, 2)]))
    # the operator, not the method: the argument may be None at run time (a slot with no gradient),
    # where Python raises TypeError for both solve and PyTorch (None.gt is an AttributeError the
    # torch side does not run)
    cond = cmp_tree(op, t, c, "operator", None)
    if s.coin(0.5):
        return ("b", "*", t, cond)
    return ("op", "fn", "torch.where", None, (cond, t, ("b", "*", ("c", Fr(1, 2)), t)), "", None, "node")
