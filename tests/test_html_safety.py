"""Notebook HTML and Markdown show a problem file's control and bidi characters as escapes,
as the terminal, the graph and the LaTeX document do (issue 28)."""

import adjoint

PROBLEM = """name: bidi
description: "evil \\u202e desserts \\x1b[31m red"
inputs:
  x: {value: [0.3], requires_grad: true}
model: {type: Tanh}
loss: "sum(y)"
hooks: [{tensor: x, label: "a\\u202eb\\u2066c\\x07"}]
"""


def test_html_and_markdown_escape_bidi_and_controls():
    pred = adjoint.loads(PROBLEM).solve()
    for text in (pred._repr_html_(), pred.variants[0]._repr_html_(), pred._repr_markdown_(),
                 pred.variants[0]._repr_markdown_()):
        assert "\u202e" not in text and "\u2066" not in text and "\x1b" not in text and "\x07" not in text
    page = pred._repr_html_()
    assert "a\\u202eb\\u2066c\\x07" in page and "evil \\u202e desserts \\x1b[31m red" in page
