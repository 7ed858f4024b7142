"""The one expression IR of the derivation: trees over tensors (:mod:`.nodes`), their display
simplifications (:mod:`.simplify`), reverse mode on them (:mod:`.reverse`), their SymPy form for
one-element problems (:mod:`.scalar`) and the building blocks of the op registry's ``math``
entries (:mod:`.functions`).

The op registry says how every primitive reads in these trees; :mod:`adjoint.derivation`
builds them from a run; the LaTeX renderer prints them. Nothing here imports torch.
"""

from adjoint.values.mathtree.functions import (LOG, applied, binary, derivative, dims_text, elementwise, elementwise_named, generic_vjp,
                        layer, no_gradient, number, number_text, shape_text)
from adjoint.values.mathtree.nodes import (TT, Fn, TAtom, TBin, TCall, TConst, TDeriv, TFn, TIndex, TInner, TJac, TLam, TMatMul, TName,
                    TNeg, TNode, TNone, TOnes, TPlace, TProduct, TPut, TSub, TSumTo, TSym, TTuple, TVal, const_value,
                    is_scalar_shape, numel, t_shape, walk)
from adjoint.values.mathtree.reverse import sum_to, vjp_tree
from adjoint.values.mathtree.scalar import Indicator, Relu, Sigmoid, to_sympy
from adjoint.values.mathtree.simplify import reshaped, simplify

__all__ = ["Fn", "Indicator", "LOG", "applied", "binary", "derivative", "dims_text", "elementwise_named", "number",
           "number_text", "shape_text", "Relu", "Sigmoid", "TAtom", "TBin", "TCall", "TConst", "TDeriv", "TFn",
           "TIndex", "TInner", "TJac", "TLam", "TMatMul", "TName", "TNeg", "TNode", "TNone", "TOnes", "TPlace",
           "TProduct", "TPut", "TSub", "TSumTo", "TSym", "TT", "TTuple", "TVal", "const_value", "elementwise",
           "generic_vjp", "is_scalar_shape", "layer", "no_gradient", "numel", "reshaped", "simplify", "sum_to", "t_shape",
           "to_sympy", "vjp_tree", "walk"]
