"""Backend methods written once in the backend interface itself (``choose``, ``div``, ``mul``,
``sub``): every backend gets them by mixing in :class:`Composed`; a backend that rounds
differently (the rounding bound) overrides them and calls these through ``super()``."""

from __future__ import annotations


class Composed:
    def float_pow(self, x, e):
        """``x ** e`` of two Python floats (a number the Python code around a kernel computes:
        Adam's ``1 - beta1 ** step``): ``pow`` here; the float64 backend calls C's ``pow`` as
        CPython does (numpy's ``power`` and ATen's kernel take other roads: ``0.99 ** 3.0``
        is ``x * x * x`` there, one ulp below C's)."""
        return self.pow(x, e)

    def pow_number(self, x, e):
        """``x ** e`` with ``e`` a Python number (ATen's ``pow(Tensor, Scalar)``, as ``x ** 3`` and
        the ``self.pow(exponent - 1)`` of ``pow_backward`` and ``norm_backward`` run it): ``pow``
        here; the float64 backend takes the CPU kernel's roads for 0, 1, +-0.5, -1, +-2 and 3."""
        return self.pow(x, e)

    def fma(self, a, b, c):
        """``a * b + c`` rounded once, as ATen's CPU ``add(c, b, alpha=a)`` computes it (its
        kernel is ``vec::fmadd``): exact backends compute it exactly, the rounding bound bounds
        both roundings of the product and the sum (a superset of the one); the float64 backend
        rounds it once."""
        return self.add(self.mul(a, b), c)

    def direction(self, x, n):
        """norm_backward's ``(x / n).masked_fill_(n == 0, 0)`` for the 2-norm ``n`` of ``x`` (the
        rounding backend bounds it by 1 where ``n`` may be 0 in PyTorch's floats)."""
        return self.choose(n, "==", self.zeros(self.shape(x)), self.div(x, n))

    def normalize(self, x, mean, rstd):
        """A norm's ``(x - mean) * rstd`` (the rounding backend widens it as PyTorch's fused kernels round)."""
        return self.mul(self.sub(x, mean), rstd)

    def max_routing(self, grad, g, x, windows, idx):
        """Max pooling's gradient ``grad`` (rows, positions), each window's ``g`` placed at its first
        largest element ``idx``: as it is (the rounding backend widens it where another element of a
        window may be the largest in PyTorch's floats). ``windows`` is called only when needed."""
        return grad

    def max_routing_dim(self, grad, g, x, dim, indices, keepdim):
        """max.dim / min.dim's gradient, ``g`` placed at ``indices`` along ``dim``: as it is (the
        rounding backend widens it as :meth:`max_routing` does, the dim being one window)."""
        return grad
