"""Every public name PyTorch 2.13 has, read from ``adjoint/format/data/torch_names.json`` (no torch import).

The file is generated once from real torch by ``scripts/gen_torch_names.py``. It lets a
message tell "PyTorch has this, adjoint does not model it yet" apart from "no such name"
(a typo), and keeps suggestions in the right namespace: a misspelt function is compared
with functions, never with tensor names. The file is read on each call: it is only needed
on the way to an error message, so nothing is cached (no module state).
"""

from __future__ import annotations

import json
import os

_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "torch_names.json")


#: the prefixes naming ``torch.nn.utils.rnn``, and its public functions (torch 2.13's ``__all__``
#: without the classes): adjoint models those engine/bindings/packed.py and rnn_utils.py define
RNN_UTILS_PREFIXES = ("nn.utils.rnn.", "torch.nn.utils.rnn.")
RNN_UTILS = frozenset({"pack_padded_sequence", "pad_packed_sequence", "pad_sequence", "unpad_sequence",
                       "pack_sequence", "unpack_sequence", "invert_permutation"})


def _load() -> dict:
    with open(_PATH, encoding="utf-8") as fh:
        return json.load(fh)


def torch_version() -> str:
    """The torch version the names were read from."""
    return _load()["torch_version"]


def functions() -> frozenset[str]:
    """Functions of ``torch`` and ``torch.nn.functional`` (``softmax``, ``unfold``, ``cross_entropy``)."""
    data = _load()
    return frozenset(data["torch"]) | frozenset(data["functional"])


def takes_numpy_names(name: str, prefix: str, method: bool) -> bool:
    """Whether the callable ``prefix + name`` (``method``: ``Tensor.name``) is bound by PyTorch's
    C++ argument parser, which takes NumPy's keyword names too (``axis=``, ``keepdims=``); a
    Python-level one (``F.softmax``, ``Tensor.norm``, ``torch.split``) does not. A bare name is the
    functional one where torch and torch.nn.functional differ, as verify's torch side calls it."""
    data = _load()
    if method:
        return name in data["parsed_tensor"]
    if prefix == "torch.":
        return name in data["parsed_torch"]
    if prefix or name in data["functional_and_torch_differ"]:
        return name in data["parsed_functional"]
    return name in data["parsed_torch"] if name in data["torch"] else name in data["parsed_functional"]


def in_namespace(prefix: str, name: str) -> bool:
    """Whether ``prefix + name`` exists: ``torch.`` functions, or ``torch.nn.functional`` ones for
    the ``F.`` / ``nn.functional.`` / ``torch.nn.functional.`` prefixes."""
    if prefix in ("nn.Transformer.", "torch.nn.Transformer."):   # a class: its static method
        return name == "generate_square_subsequent_mask"
    if prefix in RNN_UTILS_PREFIXES:   # torch.nn.utils.rnn's public functions
        return name in RNN_UTILS
    data = _load()
    return name in (data["torch"] if prefix == "torch." else data["functional"])


def tensor_members() -> frozenset[str]:
    """Public methods and attributes of ``torch.Tensor`` (``detach``, ``view``, ``T``, ``grad``)."""
    return frozenset(_load()["tensor"])


def nn_modules() -> frozenset[str]:
    """Public ``torch.nn`` module classes (``Linear``, ``LSTM``, ``Transformer``)."""
    return frozenset(_load()["nn_modules"])


def is_function(name: str) -> bool:
    return name in functions()


def is_tensor_member(name: str) -> bool:
    return name in tensor_members()


def is_nn_module(name: str) -> bool:
    return name in nn_modules()
