"""jsonout.dumps: json's own indented text, written fast, strict about non-finite numbers."""

import json
import math

from hypothesis import given, settings
from hypothesis import strategies as st

import adjoint
from adjoint.render.jsontext import dumps, finite

_scalars = (st.none() | st.booleans() | st.integers(-10 ** 30, 10 ** 30)
            | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=8))
_docs = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=5) | st.tuples(inner, inner)
                     | st.dictionaries(st.text(max_size=6), inner, max_size=5), max_leaves=40)


@settings(max_examples=300, deadline=None, database=None)
@given(_docs)
def test_same_text_as_json_dumps(doc):
    assert dumps(doc) == json.dumps(finite(doc), indent=2, allow_nan=False)
    assert dumps(doc, indent=None) == json.dumps(finite(doc), allow_nan=False)


def test_rows_of_numbers_and_strings():
    doc = {"value": [[0.5, -1e-300, 3.0], [1e300, 2.5, -0.0]], "exact": [["1/2", "p"], ["\u00e9", "\n"]],
           "mixed": [1, 2.5, "x", None, True], "special": [math.inf, -math.inf, math.nan]}
    assert dumps(doc) == json.dumps(finite(doc), indent=2)
    assert json.loads(dumps(doc))["special"] == ["inf", "-inf", "nan"]


def test_a_prediction():
    doc = adjoint.load("problems/mlp_relu.yaml").solve().to_json()
    assert dumps(doc) == json.dumps(doc, indent=2)
