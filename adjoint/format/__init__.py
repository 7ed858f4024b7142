"""The format layer: a problem file read and validated into a :class:`~adjoint.format.problem.Problem`.

It holds the YAML reader (``loader``, the only module that imports ``yaml``), the expression
and statement records (``syntax``, parsed by ``expr`` from a whitelist, never ``eval``ed),
literals and side files, the validators (``validate`` and its ``validate_*`` parts, ``checks``),
the signatures of the ``torch.nn`` types a file may name (``module_signatures``), PyTorch's
public names (``torch_names``), the ``init:`` draw (``init_draw``) and the one error a user
sees (``errors``). It is the bottom layer: it imports nothing else of adjoint.
"""
