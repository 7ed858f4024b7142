"""The engine layer: PyTorch 2.13's eager autograd, simulated, one faithful step at a time.

``graph`` holds the records (tensors, nodes, edges, saved tensors, hook dicts); ``ops`` the
registry of primitives (one entry per ATen op: forward, backward node, derivative);
``bindings`` PyTorch's callable names (``torch.X``, ``F.X``, ``Tensor.X``) lowered to
primitives as ATen dispatches them; ``layers`` the ``torch.nn`` types' forwards;
``runtime`` applies a primitive as an autograd kernel does; ``inplace`` version counters and
``CopySlices``; ``interpreter`` runs a file's programs; ``nn_module`` is ``nn.Module``'s
call machinery; ``hook_kinds`` the hook table, ``hook_registration`` and ``hook_runner``
register and run the file's hooks; ``autograd_function`` custom ``autograd.Function``s;
``forward``, ``reverse`` (the engine's backward) and ``passes`` (a variant's steps) run it;
``adjoints`` the hook-free multipliers at module boundaries. It may import
:mod:`adjoint.values` and :mod:`adjoint.format`, nothing above.
"""
