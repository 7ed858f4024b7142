"""Whether numpy's float64 matrix products round as torch's do on this machine.

``--float64`` computes a matrix product with numpy (its OpenBLAS) and every element-wise kernel
in ATen's own order and roundings. On a CPU with AVX-512, OpenBLAS picks its AVX-512 kernels
(``SkylakeX`` and later, as threadpoolctl reports the core), which sum a small product in another
order than torch's CPU kernels: measured on an AMD EPYC with AVX-512, the hook gradients of
tests/data/regressions/clip_grad_norm_and_value_steps.yaml and
optimizers_sgd_momentum_adamw.yaml differ from torch's in the last bit from the second pass on,
and agree bit for bit with ``OPENBLAS_CORETYPE=Haswell``. The tests that claim bit-for-bit
agreement ask :func:`products_round_like_torch` and, where it is False, hold each element to a
few ulps of its tensor's largest element instead (:func:`assert_float64_agrees`)."""

from __future__ import annotations

import math

AVX512_CORES = ("SKYLAKEX", "COOPERLAKE", "SAPPHIRERAPIDS")


def openblas_core() -> str | None:
    """The OpenBLAS core numpy's BLAS runs (threadpoolctl's ``architecture``), None without OpenBLAS."""
    import numpy  # noqa: F401  (loads the BLAS threadpoolctl inspects)
    import threadpoolctl

    for info in threadpoolctl.threadpool_info():
        if info.get("internal_api") == "openblas":
            return info.get("architecture")
    return None


def products_round_like_torch() -> bool:
    core = openblas_core()
    return core is None or core.upper() not in AVX512_CORES


def _flat(x) -> list:
    return [y for z in x for y in _flat(z)] if isinstance(x, (list, tuple)) else [x]


def assert_float64_agrees(ours, theirs, ulps: int = 64) -> None:
    """``ours == theirs`` where numpy's products round as torch's; otherwise the same structure
    (dicts, lists of dicts, None) and each float of a tensor (a nested list, or a list of them)
    within ``ulps`` ulps of that tensor's largest magnitude."""
    if products_round_like_torch():
        assert ours == theirs
        return
    if isinstance(ours, dict) or (isinstance(ours, list) and ours and isinstance(ours[0], dict)):
        assert type(ours) is type(theirs) and len(ours) == len(theirs), (ours, theirs)
        if isinstance(ours, dict):
            assert ours.keys() == theirs.keys()
            pairs = [(ours[k], theirs[k]) for k in ours]
        else:
            pairs = list(zip(ours, theirs))
        for a, b in pairs:
            assert_float64_agrees(a, b, ulps)
        return
    a, b = _flat(ours), _flat(theirs)
    assert len(a) == len(b) and [x is None for x in a] == [y is None for y in b], (ours, theirs)
    scale = max([abs(x) for x in a + b if x is not None] + [0.0])
    tol = ulps * math.ulp(scale) if scale else 0.0
    bad = [(x, y) for x, y in zip(a, b) if x is not None and abs(x - y) > tol]
    assert not bad, f"beyond {ulps} ulps of {scale}: {bad[:4]}"
