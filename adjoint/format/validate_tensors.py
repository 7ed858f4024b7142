"""Tensor declarations of problem files: inputs, targets, parameters, buffers, masks.

A declaration is a literal (:func:`adjoint.format.literals.parse_literal`) or a mapping
``{value: LITERAL, scale: S, requires_grad: BOOL, dtype: int64}`` with the keys the place
allows. ``dtype: int64`` makes an integer tensor (class indices, embedding indices): every
element an integer in int64's range; ``dtype: bool`` a bool tensor (``where``'s condition):
every element true or false. An input or target is made by the script itself,
``torch.tensor(VALUE, dtype=..., requires_grad=...)`` before the modules: an input of either
dtype with ``requires_grad: true``, or an int64 element beyond int64's range, is PyTorch's error
at that line (:func:`creation_error`, the answer ``during: setup``), not a malformed file. A
buffer's value beyond int64 is refused.
"""

from __future__ import annotations

from adjoint.format.checks import FAILED, Issues, boolean, choice, identifier, mapping
from adjoint.format.errors import Loc, ProblemError
from adjoint.format.literals import check_integer, infinite_items, parse_literal, within_int64
from adjoint.format.loader import YMap, YNode, YScalar, kind_name
from adjoint.format.problem import TensorDecl
from adjoint.format.complex_literals import COMPLEX_DTYPES, complex_decl, is_complex_node

INT_DTYPES = ("int64", "bool")
FLOAT_DTYPES = ("float32", "float64")


def tensor_decl(name: str, node: YNode, loc: Loc, what: str, default_rg: bool, keys: tuple[str, ...],
                dtype: str | None = None, created: bool = False, float_dtype: str | None = None) -> TensorDecl:
    """``LITERAL`` or a mapping with ``value`` and some of ``keys`` (requires_grad, scale, dtype).
    ``dtype`` forces the dtype (a buffer torch keeps as int64). ``created``: the script makes the
    tensor itself (an input, a target), so what ``torch.tensor`` raises making it is an answer
    (:func:`creation_error`), not refused here. ``float_dtype``: the file's float dtype, which a
    ``dtype:`` may name (what the tensor is anyway: no change); the other float dtype is refused."""
    if is_complex_node(node) and "dtype" in keys and dtype is None:
        return complex_decl(name, node, loc, what, default_rg)
    if not isinstance(node, YMap):
        decl = TensorDecl(name, parse_literal(node, what, infinities=True), default_rg if dtype is None else False, loc, dtype)
        if decl.dtype is not None:
            check_integer(decl, created)
        return _finite_unless_constant(decl, what)
    mapping(node, what, ("value",), keys)
    version = _version(node.get("version"), what) if node.get("version") is not None else 0
    rg_node = node.get("requires_grad")
    rg = boolean(rg_node, f"requires_grad of {what}") if rg_node is not None else default_rg
    dtype_node = node.get("dtype")
    if dtype_node is not None and float_dtype is not None and isinstance(dtype_node, YScalar) \
            and dtype_node.text in FLOAT_DTYPES:
        if dtype_node.text != float_dtype:
            raise ProblemError(dtype_node.loc, f"{what} is {dtype_node.text} in a {float_dtype} file, which is not "
                                               f"modelled (one float dtype per file); drop dtype: or make the file's "
                                               f"dtype: {dtype_node.text}")
        dtype_node = None   # the file's own float dtype: what the tensor is without it
    if dtype_node is not None:
        given = choice(dtype_node, f"the dtype of {what}", INT_DTYPES + COMPLEX_DTYPES)
        if dtype is not None and given != dtype:
            raise ProblemError(dtype_node.loc, f"{what} is {dtype} in PyTorch; drop dtype:")
        dtype = given
    if dtype is not None and not (created and rg_node is not None and rg):
        rg = False   # created with requires_grad=True: PyTorch's error making it (creation_error)
    lit_map = YMap(node.loc, tuple((k, v) for k, v in node.entries if k.text not in ("requires_grad", "dtype", "version")))
    decl = TensorDecl(name, parse_literal(lit_map, what, booleans=dtype == "bool", infinities=True), rg, loc, dtype,
                      version=version)
    if dtype is not None:
        check_integer(decl, created)
    return _finite_unless_constant(decl, what)


def _version(node: YNode, what: str) -> int:
    """``version: N``: the tensor's version counter when the file starts (``t._version``)."""
    n = node.text if isinstance(node, YScalar) and node.kind == "int" else None
    if n is None or int(n) < 0:
        raise ProblemError(node.loc, f"the version of {what} must be a whole number >= 0 (its t._version: 1 for a "
                                     "tensor a built-in module's constructor initialised in place)")
    return int(n)


def _finite_unless_constant(decl: TensorDecl, what: str) -> TensorDecl:
    """``-inf`` / ``inf`` only in a float tensor that does not require grad (a mask added to
    scores, a constant): an infinite leaf that requires grad is not modelled yet."""
    if infinite_items(decl.value) and decl.requires_grad:
        raise ProblemError(decl.value.loc, f"{what} holds an infinity and requires grad, which is not modelled yet; "
                                           "-inf and inf are modelled in tensors that do not require grad (a float "
                                           "mask, a constant)")
    return decl


#: what ``torch.tensor`` raises for an integer beyond int64 in an int64 tensor, and for
#: ``requires_grad=True`` with an integer or bool dtype (both measured in PyTorch 2.13)
INT64_OVERFLOW = ("ValueError", "Overflow when unpacking long long")
INT_REQUIRES_GRAD = ("RuntimeError", "Only Tensors of floating point and complex dtype can require gradients")


def creation_error(decl: TensorDecl) -> tuple[str, str] | None:
    """What ``torch.tensor(VALUE, dtype=DTYPE, requires_grad=RG)`` raises making ``decl`` (an input
    or a target), (exception class, message), or None: the values are converted first (an int64
    element beyond int64's range), then ``requires_grad`` is checked against the dtype."""
    if decl.dtype == "int64" and not within_int64(decl.value.items):
        return INT64_OVERFLOW
    if decl.dtype in INT_DTYPES and decl.requires_grad:
        return INT_REQUIRES_GRAD
    return None


def tensor_table(node: YNode, what: str, make, issues: Issues) -> list:
    """A mapping ``NAME: tensor``: ``make(name, value_node, key_loc)`` per entry (names checked).
    Each entry is checked on its own: the ones that fail are recorded in ``issues`` and left out."""
    if not isinstance(node, YMap):
        raise ProblemError(node.loc, f"{what} must be a mapping NAME: tensor, not {kind_name(node)}")
    out = []
    for key, value in node.entries:
        decl = issues.attempt(lambda: make(identifier(key, "tensor name"), value, key.loc))
        if decl is not FAILED:
            out.append(decl)
    return out
