"""The torch side of ``adjoint verify``: the only package in adjoint that imports torch.

:func:`run_variant` builds a problem's variant in real PyTorch 2.13 (``build``: the modules;
``program``: the forwards, the loss and hook bodies interpreted on tensors; ``callables``:
which torch function a name is; ``dropout``: a declared Dropout mask forced), registers its
hooks for real (``hooks``), runs its steps and returns what was observed, in the contract's
per-variant JSON shape (``run``; ``values``: tensors as JSON; ``graphs``: which node a hook
ran at). :func:`finite_differences` (``fd``) is the independent float64 check of the final gradients.

Importing this package does not import torch (``verify`` reads and checks its files first, and
says so when torch is missing); :func:`run_variant` and :func:`finite_differences` load it.
"""

__all__ = ["run_variant", "finite_differences", "torch_version"]


def __getattr__(name: str):
    if name == "run_variant":
        from adjoint.torchside.run import run_variant

        return run_variant
    if name == "finite_differences":
        from adjoint.torchside.fd import finite_differences

        return finite_differences
    raise AttributeError(f"module 'adjoint.torchside' has no attribute {name!r}")


def torch_version() -> str:
    """The version string of the torch that ``verify`` runs against, e.g. ``2.13.0+cpu``."""
    import torch

    return torch.__version__
