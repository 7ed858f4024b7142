"""``torch.return_types``: the named tuples some PyTorch functions return (``x.max(dim=1)`` is a
``torch.return_types.max`` with the fields ``values`` and ``indices``). A :class:`ReturnTuple` is
a plain tuple (indexing, unpacking and ``len`` as before) whose items also read by field name;
any other attribute is Python's AttributeError, in PyTorch's words."""

from __future__ import annotations


class TorchSize(tuple):
    """A ``torch.Size`` (``x.size()``, ``x.shape``): a tuple of Python ints, named so in Python's
    messages ("expected Variable, but hook returned 'torch.Size'")."""

    __slots__ = ()


class ReturnTuple(tuple):
    """A ``torch.return_types.KIND`` value: a tuple whose items read by ``fields`` too."""

    kind: str
    fields: tuple[str, ...]

    def __new__(cls, kind: str, fields: tuple[str, ...], items):
        t = super().__new__(cls, items)
        t.kind = kind
        t.fields = tuple(fields)
        return t

    def field(self, name: str):
        """The item named ``name``; KeyError when the return type has no such field."""
        if name not in self.fields:
            raise KeyError(name)
        return self[self.fields.index(name)]


def max_min(kind: str, values, indices) -> ReturnTuple:
    """``torch.return_types.max`` / ``torch.return_types.min``: (values, indices)."""
    return ReturnTuple(kind, ("values", "indices"), (values, indices))


#: ``torch.nn.utils.rnn.PackedSequence``'s fields, in its named tuple's order
PACKED_FIELDS = ("data", "batch_sizes", "sorted_indices", "unsorted_indices")


class PackedSequence(ReturnTuple):
    """A ``torch.nn.utils.rnn.PackedSequence``: the named tuple (data, batch_sizes,
    sorted_indices, unsorted_indices) that ``pack_padded_sequence`` makes and an ``nn.RNN`` /
    ``GRU`` / ``LSTM`` takes and returns (the last two None for an ``enforce_sorted`` pack)."""

    def __new__(cls, data, batch_sizes, sorted_indices, unsorted_indices):
        return super().__new__(cls, "PackedSequence", PACKED_FIELDS,
                               (data, batch_sizes, sorted_indices, unsorted_indices))
