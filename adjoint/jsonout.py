"""JSON text for ``--json``: always strict JSON.

Python's ``json`` writes ``NaN``, ``Infinity`` and ``-Infinity`` for non-finite floats, which
no JSON parser has to accept (``jq``, JavaScript's ``JSON.parse`` and Go refuse them). A
prediction's decimal ``value`` is infinite where PyTorch overflows, and torch's observed
values can be NaN; :func:`dumps` writes those floats as the strings ``"inf"``, ``"-inf"`` and
``"nan"`` (the ``exact`` field next to them says the same in its own words). The objects'
own ``to_json()`` keep Python floats; the conversion happens here, when text is made.
"""

from __future__ import annotations

import json
import math


def dumps(doc, indent: int | None = 2) -> str:
    """``doc`` as strict JSON text, non-finite floats written as "inf", "-inf", "nan"."""
    try:
        return json.dumps(doc, indent=indent, allow_nan=False)
    except ValueError:  # a non-finite float somewhere: the rare case pays for a second pass
        return json.dumps(finite(doc), indent=indent, allow_nan=False)


def finite(doc):
    """A copy of ``doc`` (dicts, lists, tuples, scalars) with non-finite floats as strings."""
    if isinstance(doc, float):
        if math.isfinite(doc):
            return doc
        return "nan" if math.isnan(doc) else ("inf" if doc > 0 else "-inf")
    if isinstance(doc, dict):
        return {k: finite(v) for k, v in doc.items()}
    if isinstance(doc, (list, tuple)):
        return [finite(v) for v in doc]
    return doc
