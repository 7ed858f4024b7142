"""Which torch callable a problem expression's function or method name is.

The contract names everything as PyTorch does, so the torch side looks names up in PyTorch
itself, never in adjoint's own function table (that table is what ``verify`` checks):

* ``torch.X`` is ``torch.X``; ``F.X``, ``nn.functional.X`` and ``torch.nn.functional.X``
  are ``torch.nn.functional.X``;
* a bare ``X`` is ``torch.X``, else ``torch.nn.functional.X``, with two refinements:
  ``norm`` is ``torch.norm`` (said explicitly: its ``p``, ``dim``, ``keepdim`` are what
  adjoint's ``norm`` takes, and it runs ``torch.linalg.vector_norm``: the v1 contract's 2-norm of
  every element, LinalgVectorNormBackward0),
  and where both namespaces have ``X`` as *different* callables, the functional one
  (:data:`FUNCTIONAL_WHERE_BOTH`): there ``torch.X`` is the raw ATen binding, whose
  signature is not the documented one (``torch.embedding(weight, indices)`` reverses the
  arguments, ``torch.dropout`` takes ``train``, ``torch.kl_div`` an integer ``reduction``,
  ``torch.batch_norm`` another argument order), while ``F.X`` takes PyTorch's documented
  keyword arguments, which are what a problem file writes;
* a method ``x.X(...)`` is ``Tensor.X`` bound to ``x``; an attribute ``x.X`` is read from the
  tensor. Names starting with ``_`` are never looked up (nothing private is reachable).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from adjoint.format.errors import Loc, ProblemError

FUNCTIONAL_PREFIXES = ("F.", "nn.functional.", "torch.nn.functional.")


def _functional_where_both() -> frozenset[str]:
    return frozenset(n for n in dir(F) if not n.startswith("_") and callable(getattr(F, n, None))
                     and callable(getattr(torch, n, None)) and getattr(torch, n) is not getattr(F, n))


#: Names both ``torch`` and ``torch.nn.functional`` have as different callables (``embedding``,
#: ``dropout``, ``batch_norm``, ``softmax``, ``relu``, ...): a bare name means the functional one.
FUNCTIONAL_WHERE_BOTH = _functional_where_both()


def function(name: str, prefix: str, loc: Loc):
    """The torch callable of a function call ``prefix + name`` (see the module docstring)."""
    if name.startswith("_"):
        raise ProblemError(loc, f"'{prefix}{name}' is private to PyTorch; call a public function")
    if name == "float" and prefix == "":   # Python's float("-inf") (adjoint.engine.infinity)
        return float
    if name == "len" and prefix == "":   # Python's len(x) (adjoint.engine.bindings.glue)
        return len
    if name == "print" and prefix == "":   # Python's print: what it writes is not compared, and not written here
        return lambda *args, **kwargs: None
    if name == "delayed_error" and prefix == "":   # adjoint.engine.ops.delayed
        return lambda input, msg: torch._C._functions.DelayedError(msg, 1)(input)
    if prefix in ("nn.utils.rnn.", "torch.nn.utils.rnn."):   # pack_padded_sequence, pad_sequence, ...
        import torch.nn.utils.rnn as rnn_utils
        from adjoint.format.torch_names import RNN_UTILS
        fn = getattr(rnn_utils, name, None) if name in RNN_UTILS else None
    elif prefix in ("nn.Transformer.", "torch.nn.Transformer."):   # its static method
        fn = getattr(torch.nn.Transformer, name, None) if name == "generate_square_subsequent_mask" else None
    elif prefix == "torch.":
        fn = getattr(torch, name, None)
    elif prefix in FUNCTIONAL_PREFIXES:
        fn = getattr(F, name, None)
    elif name == "norm":
        fn = torch.norm
    elif name in FUNCTIONAL_WHERE_BOTH:
        fn = getattr(F, name)
    else:
        fn = getattr(torch, name, None)
        if not callable(fn):
            fn = getattr(F, name, None)
    if not callable(fn):
        raise ProblemError(loc, f"PyTorch has no function '{prefix}{name}' (torch {torch.__version__})")
    return fn


def method(obj: torch.Tensor, name: str, loc: Loc):
    """``obj.name`` as a bound Tensor method."""
    fn = getattr(obj, name, None) if not name.startswith("_") else None
    if not callable(fn):
        raise ProblemError(loc, f"torch.Tensor has no method '{name}'")
    return fn


def attribute(obj: torch.Tensor, name: str, loc: Loc):
    """``obj.name`` read from the tensor (``T``, ``mT``, ``shape``, ``ndim``, ``grad``, ...)."""
    if name.startswith("_") and name != "_version":
        raise ProblemError(loc, f"torch.Tensor has no attribute '{name}'")
    try:   # read once: reading .grad of a non-leaf warns each time, as a script's one read does
        value = getattr(obj, name)
    except AttributeError:
        raise ProblemError(loc, f"torch.Tensor has no attribute '{name}'") from None
    if callable(value) and not isinstance(value, torch.Tensor):
        raise ProblemError(loc, f"Tensor.{name} is a method; call it, as in x.{name}()")
    return value
