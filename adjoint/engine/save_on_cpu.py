"""``torch.autograd.graph.save_on_cpu(pin_memory)`` on a CPU-only run (torch/autograd/graph.py).

It is a ``saved_tensors_hooks`` pair of PyTorch's own, so it behaves as one for everything
around it -- it is the innermost pair while active (an inner ``saved_tensors`` entry wins,
and it wins over an outer one), entering it inside ``disable_saved_tensors_hooks`` raises the
disabling message, and a saved tensor packed by it is unpacked without the version check
(``SavedVariable::unpack`` checks versions only without hooks) -- but it calls no hook of the
file, so it adds no call to the answer:

* ``pack_to_cpu``: ``pin_memory=False`` returns ``(tensor.device, tensor.cpu())``, and
  ``.cpu()`` of a CPU tensor is the tensor itself: the node later reads the tensor as it is
  then (a write after the forward is seen, and raises no version error);
  ``pin_memory=True`` copies it into a new tensor (``torch.empty(...).copy_(tensor)``; pinned
  only where CUDA is available): the node reads the values of the moment it was saved.
* ``unpack_from_cpu``: ``tensor.to(device)``, the same tensor on a CPU run.

The values, nodes and every user hook call are those of a run without it.
"""

from __future__ import annotations


def pack_to_cpu(hook, t):
    if getattr(hook, "pin_memory", False):
        return ("copy", t.value)
    return ("alias", t)


def unpack_from_cpu(packed):
    how, what = packed
    return what if how == "copy" else what.value
