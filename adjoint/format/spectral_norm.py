"""A built-in module's ``spectral_norm: {n_power_iterations: N, eps: E, dim: D}``
(``torch.nn.utils.parametrizations.spectral_norm(module, "weight", N, E, D)``): what the file may
write, the parameter and buffers it makes, and the constructor's errors.

PyTorch's ``register_parametrization`` replaces the module's ``weight`` by one parameter of the
child ``ParametrizationList``, ``parametrizations.weight.original`` (the weight itself: ``right_inverse``
is the identity), listed by ``named_parameters()`` after the module's own (``bias``). Its
``_SpectralNorm`` keeps two buffers, ``parametrizations.weight.0._u`` (the weight matrix's rows:
``weight.shape[dim]``) and ``parametrizations.weight.0._v`` (its columns: the other dims' product),
drawn at random when the parametrization is registered and then moved by 15 power iterations
(and by one access's ``n_power_iterations`` more, the registration's shape check): no prediction
can know them, so the file gives their values as they are when the model starts (``buffers:``,
as ``adjoint import`` reads them off the module). The weight matrix is the weight with ``dim``
permuted to the front, flattened from dim 1. Modelled: Linear, Conv1d/2d/3d and ConvTranspose1d/2d,
``name: weight`` (the default); ``dim: null`` is PyTorch's default, 0 for these types but 1 for a
ConvTranspose (whose weight is (in, out, ...)). A ``dim`` outside the weight's
range is PyTorch's IndexError, ``n_power_iterations`` below 1 its ValueError (the constructor's
errors, the answer: :func:`setup_error`).
"""

from __future__ import annotations

from fractions import Fraction

from adjoint.format.checks import mapping, string
from adjoint.format.errors import ProblemError
from adjoint.format.literals import parse_int, parse_number
from adjoint.format.loader import YScalar
from adjoint.format.module_signatures import BufferSpec, ParamSpec
from adjoint.format.problem import SpectralNorm

#: the built-in types whose weight may be spectrally normalised (their forwards read ``self.weight``
#: once, first: computing it when the forward starts is where PyTorch computes it)
TYPES = ("Linear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d")
#: spectral_norm's ``dim=None``: 1 for a transposed convolution (its weight is (in, out, ...)), else 0
TRANSPOSED = ("ConvTranspose1d", "ConvTranspose2d")
ORIGINAL = "parametrizations.weight.original"
U, V = "parametrizations.weight.0._u", "parametrizations.weight.0._v"


def read_spectral_norm(node, mtype: str, weight_shape: tuple[int, ...], what: str) -> tuple[SpectralNorm, int]:
    """The record of a module's ``spectral_norm:`` mapping (``{}``: PyTorch's defaults) and the dim as
    written (for the constructor's IndexError)."""
    if mtype not in TYPES:
        raise ProblemError(node.loc, f"spectral_norm on a {mtype} is not modelled yet; it is modelled on "
                                     f"{', '.join(TYPES)}")
    m = mapping(node, f"the spectral_norm of {what} (spectral_norm: {{n_power_iterations: 1, eps: 1e-12, dim: 0}})",
                (), ("name", "n_power_iterations", "eps", "dim"))
    if m.get("name") is not None:
        name = string(m.get("name"), f"the spectral_norm name of {what}")
        if name != "weight":
            raise ProblemError(m.get("name").loc, f"spectral_norm of '{name}' is not modelled yet; only name: weight "
                                                  "(the default)")
    n = 1 if m.get("n_power_iterations") is None else \
        parse_int(m.get("n_power_iterations"), f"the spectral_norm n_power_iterations of {what}")
    eps = Fraction(1, 10 ** 12) if m.get("eps") is None else parse_number(m.get("eps"), f"the spectral_norm eps of {what}")
    if eps < 0:
        raise ProblemError(m.get("eps").loc, f"spectral_norm with a negative eps ({eps}) is not modelled yet")
    dim_node = m.get("dim")
    dim = (1 if mtype in TRANSPOSED else 0) if dim_node is None or (isinstance(dim_node, YScalar) and
                                                                    dim_node.kind == "null") else \
        parse_int(dim_node, f"the spectral_norm dim of {what}")
    nd = len(weight_shape)
    return SpectralNorm(n, eps, dim + nd if -nd <= dim < 0 else dim), dim


def setup_error(written_dim: int, n_power_iterations: int, weight_shape: tuple[int, ...]) -> tuple[str, str] | None:
    """``_SpectralNorm.__init__``'s errors, in its order, or None."""
    nd = len(weight_shape)
    if written_dim >= nd or written_dim < -nd:
        return ("IndexError", f"Dimension out of range (expected to be in range of [-{nd}, {nd - 1}] but got "
                              f"{written_dim})")
    if n_power_iterations <= 0:
        return ("ValueError", "Expected n_power_iterations to be positive, but got "
                              f"n_power_iterations={n_power_iterations}")
    return None


def matrix_shape(weight_shape: tuple[int, ...], dim: int) -> tuple[int, int]:
    """The weight matrix's (rows, columns): ``weight.shape[dim]`` and the other dims' product."""
    h = weight_shape[dim]
    numel = 1
    for s in weight_shape:
        numel *= s
    return (h, numel // h if h else 0)


def normed_specs(specs: tuple[ParamSpec, ...]) -> tuple[ParamSpec, ...]:
    """The module's parameters once its weight is parametrized, in ``named_parameters()``'s order
    (``original`` at version 2: the constructor's init, then register_parametrization's set)."""
    weight = next(s for s in specs if s.name == "weight")
    return tuple(s for s in specs if s.name != "weight") + (ParamSpec(ORIGINAL, weight.shape, None, version=2),)


def buffer_specs(weight_shape: tuple[int, ...], dim: int | None) -> tuple[BufferSpec, ...]:
    """``_u`` and ``_v``, which the file must give (random in PyTorch); ``dim`` None: the constructor
    raises (the answer), so given ones are taken at any shape and none is required."""
    if dim is None:
        return (BufferSpec(U, None, None), BufferSpec(V, None, None))
    h, w = matrix_shape(weight_shape, dim)
    return (BufferSpec(U, (h,), None), BufferSpec(V, (w,), None))


def check_keys(m, t, what: str, v1: bool) -> None:
    """The module keys that cannot go together: both parametrizations; spectral_norm on a v1 Linear
    (no args:); buffers: on a type without buffers and without spectral_norm."""
    if m.get("weight_norm") is not None and m.get("spectral_norm") is not None:
        raise ProblemError(m.key_loc("spectral_norm"), f"{what} has both weight_norm and spectral_norm: two "
                                                       "parametrizations of one weight are not modelled yet")
    if v1 and m.get("spectral_norm") is not None:
        raise ProblemError(m.key_loc("spectral_norm"), f"{what} has spectral_norm: give its args: (in_features, "
                                                       "out_features) and its params under their parametrized "
                                                       f"names ({ORIGINAL})")
    if m.get("buffers") is not None and not t.has_buffers and (v1 or m.get("spectral_norm") is None):
        raise ProblemError(m.key_loc("buffers"), f"{what} takes buffers: only with spectral_norm (its _u, _v)")


def read_module(node, t, args: dict, what: str):
    """``(record, setup_error, parameter specs, buffer specs)`` of a built-in's ``spectral_norm:``."""
    specs = t.params(args)
    weight = next(s.shape for s in specs if s.name == "weight")
    spectral, written = read_spectral_norm(node, t.name, weight, what)
    error = setup_error(written, spectral.n_power_iterations, weight)   # the constructor's (the answer)
    return spectral, error, normed_specs(specs), buffer_specs(weight, spectral.dim if error is None else None)


def check_buffers_given(m, tname: str, extra, given: dict, what: str) -> None:
    """``_u`` and ``_v`` are required (unless the constructor raises: no shapes then)."""
    missing = [s.name for s in extra if s.name not in given and s.shape is not None]
    if missing:
        raise ProblemError(m.loc, f"{what} ({tname}) has spectral_norm: give {' and '.join(missing)} under "
                                  "buffers: (PyTorch draws them at random when it registers the parametrization; "
                                  "adjoint import reads them off the module)")
