"""``addcmul`` and ``addcdiv`` (function, Tensor method, in place ``addcmul_`` / ``addcdiv_``), and the
scaled matrix products ``baddbmm``, ``addbmm``, ``addmv``, ``addr`` (the same three forms):
one node each (AddcmulBackward0, ..., AddrBackward0). addcmul / addcdiv broadcast their three operands,
``value`` a keyword-only Python number (:mod:`adjoint.engine.ops.addc`); the products take ``beta`` and
``alpha`` (:mod:`adjoint.engine.ops.scaled_products`)."""

from __future__ import annotations

from fractions import Fraction

from adjoint.format.errors import Loc, ProblemError
from adjoint.engine.bindings.signature import Function, Param


def _value(a, what: str, loc: Loc) -> Fraction:
    v = a["value"]
    if isinstance(v, bool) or not isinstance(v, Fraction):
        raise ProblemError(loc, f"{what}(..., value=...) takes a real Python number here (a tensor or complex value "
                                "is not modelled); write a number")
    return v


def _addc(prim: str, inplace: bool):
    def lower(rt, a, loc: Loc):
        value = _value(a, prim + ("_" if inplace else ""), loc)
        if a.get("out") is not None:
            raise ProblemError(loc, f"{prim}(..., out=...) is not modelled (its result is not differentiable); "
                                    "leave out out=")
        x, t1, t2 = a["input"], a["tensor1"], a["tensor2"]
        if inplace:
            from adjoint.engine.inplace import apply_inplace
            return apply_inplace(rt, prim, x, [t1, t2], value, loc)
        return rt.apply(prim, [x, t1, t2], value, loc)
    lower.__name__ = f"lower_{prim}{'_' if inplace else ''}"
    return lower


def _params(out: bool) -> tuple:
    ps = (Param("input", "tensor"), Param("tensor1", "tensor"), Param("tensor2", "tensor"),
          Param("value", "number", Fraction(1), keyword_only=True))
    return ps + (Param("out", "any", None, keyword_only=True),) if out else ps


FUNCTIONS = (
    Function("addcmul", _params(True), _addc("addcmul", False), where="function",
             doc="AddcmulBackward0 (tensor1, tensor2): input + value * tensor1 * tensor2"),
    Function("addcmul", _params(False), _addc("addcmul", False), where="method", doc="as torch.addcmul"),
    Function("addcmul_", _params(False), _addc("addcmul", True), where="method",
             doc="in place: AddcmulBackward0, self's previous history its first edge"),
    Function("addcdiv", _params(True), _addc("addcdiv", False), where="function",
             doc="AddcdivBackward0 (tensor1, tensor2): input + value * tensor1 / tensor2"),
    Function("addcdiv", _params(False), _addc("addcdiv", False), where="method", doc="as torch.addcdiv"),
    Function("addcdiv_", _params(False), _addc("addcdiv", True), where="method",
             doc="in place: AddcdivBackward0, self's previous history its first edge"),
)


# ----------------------------------------------------------------------------- baddbmm, addbmm, addmv, addr

#: the primitive of a name where they differ (ops.attention's baddbmm has no beta and alpha)
_PRIM = {"baddbmm": "baddbmm_ab"}
_PRODUCTS = {"baddbmm": ("batch1", "batch2"), "addbmm": ("batch1", "batch2"), "addmv": ("mat", "vec"),
             "addr": ("vec1", "vec2")}


def _scaled_product(prim: str, inplace: bool):
    def lower(rt, a, loc: Loc):
        what = prim + ("_" if inplace else "")
        beta, alpha = (_number(a, k, what, loc) for k in ("beta", "alpha"))
        if a.get("out") is not None:
            raise ProblemError(loc, f"{prim}(..., out=...) is not modelled (its result is not differentiable); "
                                    "leave out out=")
        first, second = _PRODUCTS[prim]
        x, m1, m2 = a["input"], a[first], a[second]
        if alpha == 0 and any(rt.B.has_nonfinite(t.value) for t in (m1, m2)):
            raise ProblemError(loc, f"{what}(..., alpha=0) with an infinite or nan element in {first} or {second}: "
                                    "whether it reaches the result depends on the CPU kernel (BLAS skips the product "
                                    "for some ops, not others); give finite values")
        if inplace:
            return _scaled_product_inplace(rt, prim, x, m1, m2, (beta, alpha), loc)
        return rt.apply(_PRIM.get(prim, prim), [x, m1, m2], (beta, alpha), loc)
    lower.__name__ = f"lower_{prim}{'_' if inplace else ''}"
    return lower


def _scaled_product_inplace(rt, prim, x, m1, m2, p, loc: Loc):
    from adjoint.engine.inplace import apply_inplace
    from adjoint.engine.ops import REGISTRY
    from adjoint.engine.torch_errors import TorchError
    try:
        shape = tuple(REGISTRY[_PRIM.get(prim, prim)].shape([x.shape, m1.shape, m2.shape], p, loc))
    except TorchError:
        shape = None
    if shape != tuple(x.shape):
        raise ProblemError(loc, f"{prim}_ where self's shape {list(x.shape)} is not the result's: PyTorch's in-place "
                                "checks (and addbmm_'s resize) are not modelled; give self the result's shape")
    return apply_inplace(rt, _PRIM.get(prim, prim), x, [m1, m2], p, loc)


def _number(a, key: str, what: str, loc: Loc) -> Fraction:
    v = a[key]
    if isinstance(v, bool) or not isinstance(v, Fraction):
        raise ProblemError(loc, f"{what}(..., {key}=...) takes a real Python number here (a tensor or complex value "
                                "is not modelled); write a number")
    return v


def _product_params(prim: str, out: bool) -> tuple:
    first, second = _PRODUCTS[prim]
    ps = (Param("input", "tensor"), Param(first, "tensor"), Param(second, "tensor"),
          Param("beta", "number", Fraction(1), keyword_only=True), Param("alpha", "number", Fraction(1), keyword_only=True))
    return ps + (Param("out", "any", None, keyword_only=True),) if out else ps


_NODES = {"baddbmm": "BaddbmmBackward0", "addbmm": "AddbmmBackward0", "addmv": "AddmvBackward0", "addr": "AddrBackward0"}

FUNCTIONS = FUNCTIONS + tuple(
    f for prim, node in _NODES.items() for f in (
        Function(prim, _product_params(prim, True), _scaled_product(prim, False), where="function",
                 doc=f"{node}: beta * input + alpha * product (input not read when beta is 0)"),
        Function(prim, _product_params(prim, False), _scaled_product(prim, False), where="method", doc=f"as torch.{prim}"),
        Function(f"{prim}_", _product_params(prim, False), _scaled_product(prim, True), where="method",
                 doc=f"in place: {node}, self's previous history its first edge")))


# ----------------------------------------------------------------------------- hypot, heaviside

def _two_tensors(prim: str, second: str, inplace: bool = False):
    def lower(rt, a, loc: Loc):
        if a.get("out") is not None:
            raise ProblemError(loc, f"{prim}(..., out=...) is not modelled (its result is not differentiable); "
                                    "leave out out=")
        if inplace:
            from adjoint.engine.inplace import apply_inplace
            return apply_inplace(rt, prim, a["input"], [a[second]], None, loc)
        return rt.apply(prim, [a["input"], a[second]], None, loc)
    lower.__name__ = f"lower_{prim}{'_' if inplace else ''}"
    return lower


def _two_params(second: str, out: bool) -> tuple:
    ps = (Param("input", "tensor"), Param(second, "tensor"))
    return ps + (Param("out", "any", None, keyword_only=True),) if out else ps


FUNCTIONS = FUNCTIONS + (
    Function("hypot", _two_params("other", True), _two_tensors("hypot", "other"), where="function",
             doc="HypotBackward0 (saves other, self, result): g * a / out, g * b / out"),
    Function("hypot", _two_params("other", False), _two_tensors("hypot", "other"), where="method",
             doc="as torch.hypot"),
    Function("hypot_", _two_params("other", False), _two_tensors("hypot", "other", True), where="method",
             doc="in place: HypotBackward0 (a clone of the original self saved)"),
    Function("heaviside", _two_params("values", True), _two_tensors("heaviside", "values"), where="function",
             doc="torch::autograd::NotImplemented: a backward reaching it raises"),
    Function("heaviside", _two_params("values", False), _two_tensors("heaviside", "values"), where="method",
             doc="as torch.heaviside"),
)


# ----------------------------------------------------------------------------- fmod, remainder

def _modulo(prim: str, inplace: bool):
    def lower(rt, a, loc: Loc):
        from adjoint.engine.graph import Tensor
        if a.get("out") is not None:
            raise ProblemError(loc, f"{prim}(..., out=...) is not modelled (its result is not differentiable); "
                                    "leave out out=")
        x, other = a["input"], a["other"]
        if not isinstance(x, Tensor):
            raise ProblemError(loc, f"{prim}(number, tensor) is not modelled (PyTorch records a NotImplemented node "
                                    "for it); write a tensor first")
        if isinstance(other, Tensor):
            name, ins, p = f"{prim}_tensor", [other], None
        elif isinstance(other, bool) or not isinstance(other, Fraction):
            raise ProblemError(loc, f"{prim}(): other must be a tensor or a real number here")
        else:
            name, ins, p = f"{prim}_scalar", [], other
        if inplace:
            from adjoint.engine.inplace import apply_inplace
            return apply_inplace(rt, name, x, ins, p, loc)
        return rt.apply(name, [x] + ins, p, loc)
    lower.__name__ = f"lower_{prim}{'_' if inplace else ''}"
    return lower


def _modulo_params(first: str, out: bool) -> tuple:
    ps = (Param(first, "scalar"), Param("other", "scalar"))
    return ps + (Param("out", "any", None, keyword_only=True),) if out else ps


FUNCTIONS = FUNCTIONS + tuple(
    f for prim, node in (("fmod", "FmodBackward"), ("remainder", "RemainderBackward")) for f in (
        Function(prim, _modulo_params("input", True), _modulo(prim, False), where="function",
                 doc=f"{node}1 (a tensor other: saves other, self when other needs a gradient) or {node}0 (a number)"),
        Function(prim, _modulo_params("input", False), _modulo(prim, False), where="method", doc=f"as torch.{prim}"),
        Function(f"{prim}_", _modulo_params("input", False), _modulo(prim, True), where="method",
                 doc=f"in place: {node}1 / {node}0")))


# ----------------------------------------------------------------------------- nansum, nanmean

def _nan_reduction(mean: bool):
    def lower(rt, a, loc: Loc):
        from adjoint.engine.bindings.reductions import reduce_dims
        from adjoint.engine.bindings.signature import after_packs
        what = "nanmean" if mean else "nansum"
        if a.get("dtype") is not None or a.get("out") is not None:
            raise ProblemError(loc, f"{what}(..., dtype= / out=) is not modelled; leave them out")
        x = a["input"]
        if x.dtype not in ("float32", "float64"):
            raise ProblemError(loc, f"{what} of a {x.dtype} tensor is not modelled; use a float tensor")
        keepdim = a["keepdim"]
        if not isinstance(keepdim, bool):
            raise ProblemError(loc, f"{what}(): keepdim must be a bool here")
        dims = after_packs(rt, "nansum", [x], loc, lambda: reduce_dims(x, a["dim"], loc))
        total = rt.apply("nansum", [x], (dims, keepdim), loc)
        if not mean:
            return total
        # ATen's nanmean: nansum(x, dim, keepdim) / (~isnan(x)).sum(dim, keepdim), the count an int64
        # tensor with no grad_fn
        B = rt.B
        kept = B.where(B.mask(x.value, lambda s: s == "nan"), B.zeros(x.shape), B.full(x.shape, Fraction(1)))
        count = rt.tensor(B.sum_dims(kept, dims, keepdim), dtype="int64")
        return rt.apply("div", [total, count], None, loc)
    lower.__name__ = "lower_nanmean" if mean else "lower_nansum"
    return lower


def _nan_params(out: bool) -> tuple:
    ps = (Param("input", "tensor"), Param("dim", "any", None), Param("keepdim", "bool", False),
          Param("dtype", "any", None, keyword_only=True))
    return ps + (Param("out", "any", None, keyword_only=True),) if out else ps


FUNCTIONS = FUNCTIONS + tuple(
    f for mean in (False, True) for f in (
        Function("nanmean" if mean else "nansum", _nan_params(True), _nan_reduction(mean), where="function",
                 doc="NansumBackward0 (saves self), then DivBackward0 by the int64 count of non-nan elements"
                     if mean else "NansumBackward0 (saves self): g where self is not nan, else 0"),
        Function("nanmean" if mean else "nansum", _nan_params(False), _nan_reduction(mean), where="method",
                 doc="as the function")))


# ----------------------------------------------------------------------------- logcumsumexp

def lower_logcumsumexp(rt, a, loc: Loc):
    """LogcumsumexpBackward0 (saves self, result); ``dim`` an int, wrapped by the kernel: out of
    range, PyTorch's IndexError after the node packed self."""
    from adjoint.engine.bindings.signature import after_packs, dim_index
    x, dim = a["input"], a["dim"]
    if a.get("out") is not None:
        raise ProblemError(loc, "logcumsumexp(..., out=...) is not modelled; leave out out=")
    if isinstance(dim, bool) or not (isinstance(dim, Fraction) and dim.denominator == 1):
        raise ProblemError(loc, "logcumsumexp(): dim must be an int here (a dimension name is not modelled)")
    if x.dtype not in ("float32", "float64"):
        raise ProblemError(loc, f"logcumsumexp of a {x.dtype} tensor is not modelled; use a float tensor")
    d = after_packs(rt, "logcumsumexp", [x], loc, lambda: dim_index(int(dim), len(x.shape), loc))
    return rt.apply("logcumsumexp", [x], d, loc)


FUNCTIONS = FUNCTIONS + (
    Function("logcumsumexp", (Param("input", "tensor"), Param("dim", "any"), Param("out", "any", None, keyword_only=True)),
             lower_logcumsumexp, where="function", doc="LogcumsumexpBackward0 (saves self, result)"),
    Function("logcumsumexp", (Param("input", "tensor"), Param("dim", "any")), lower_logcumsumexp, where="method",
             doc="as torch.logcumsumexp"),
)
