"""Basic indexing's errors are PyTorch's answers (type and exact message), not refusals: a slice,
an integer or too many indices on a 0-d tensor, an integer out of bounds (applySlicing names
the dim of the indexed tensor it stands for, Nones counted), and torch.select's own wording;
each against a plain torch run of the same expression."""

import pytest

import adjoint

SHAPES = {0: 2, 2: [[1, 2, 3], [4, 5, 6]], 3: [[[1, 2], [3, 4], [5, 6]]]}
#: (the tensor's rank, the indexing as the file writes it, the same in Python)
CASES = [
    (0, "[:1]", lambda h: h[:1]), (0, "[0]", lambda h: h[0]), (0, "[None, :1]", lambda h: h[None, :1]),
    (0, "[..., 0]", lambda h: h[..., 0]), (0, "[1:]", lambda h: h[1:]), (0, "[None]", lambda h: h[None]),
    (2, "[5]", lambda h: h[5]), (2, "[:, 7]", lambda h: h[:, 7]), (2, "[1, 5]", lambda h: h[1, 5]),
    (2, "[..., -4]", lambda h: h[..., -4]), (2, "[None, 1, 3]", lambda h: h[None, 1, 3]),
    (2, "[None, None, 0, 7]", lambda h: h[None, None, 0, 7]), (2, "[..., None, 9]", lambda h: h[..., None, 9]),
    (2, "[None, ..., -9]", lambda h: h[None, ..., -9]), (2, "[0, 0, 0]", lambda h: h[0, 0, 0]),
    (2, "[-3]", lambda h: h[-3]), (2, "[1, -1]", lambda h: h[1, -1]),
    (3, "[0, 3]", lambda h: h[0, 3]), (3, "[:, :, 2]", lambda h: h[:, :, 2]), (3, "[0, ..., 5]", lambda h: h[0, ..., 5]),
    (3, "[None, 0, 0, 2]", lambda h: h[None, 0, 0, 2]), (3, "[..., 1, 1]", lambda h: h[..., 1, 1]),
    (2, ".select(0, 5)", lambda h: h.select(0, 5)), (2, ".select(1, -4)", lambda h: h.select(1, -4)),
    (3, ".select(-1, 2)", lambda h: h.select(-1, 2)),
]


def _text(ndim: int, expr: str) -> str:
    return ("name: idx\ndtype: float64\ninputs:\n  x: {value: " + str(SHAPES[ndim]) + ", requires_grad: true}\n"
            "model:\n  forward: |\n    h = x * 2\n    return h" + expr + "\nloss: \"sum(y)\"\n")


@pytest.mark.torch
@pytest.mark.parametrize("ndim, expr, index", CASES, ids=[f"{n}d{e}" for n, e, _ in CASES])
def test_index_errors_are_pytorchs(ndim, expr, index):
    import torch
    h = torch.tensor(SHAPES[ndim], dtype=torch.float64, requires_grad=True) * 2
    try:
        index(h)
        expected = None
    except Exception as exc:
        expected = (type(exc).__name__, str(exc))
    out = adjoint.loads(_text(ndim, expr), name="idx.yaml").solve().variants[0].to_json()
    got = out.get("error")
    assert (None if got is None else (got["type"], got["message"])) == expected
