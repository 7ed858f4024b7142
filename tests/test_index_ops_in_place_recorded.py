"""scatter_, scatter_add_, index_add_ recorded by autograd in a forward (GNN message passing
into ``torch.zeros(...)``, a non-leaf, a view of one): the node chains, versions, values,
gradients and packs against the same forward written in torch; the leaf error and a kernel
error after the packs; the refusals that stay."""

import pytest

import adjoint
from adjoint.format.errors import ProblemError
from nn_harness import Case, assert_close, torch_chain
from nodechain import chain, leaf_names

FILE = "tests/data/regressions/index_ops_in_place_recorded.yaml"
NAMES = ("out", "acc", "w", "b", "x")


def _torch(x_requires_grad=False, dst=(2, 0)):
    """The file's forward and backward in torch: (tensors by name, packed shapes) or the error."""
    import torch
    d = torch.float64
    a = torch.tensor([[1.0, 2.0, 3.0], [3.0, -1.0, 0.5]], dtype=d, requires_grad=True)
    p = torch.tensor([[0.5, -2.0], [1.5, 4.0]], dtype=d, requires_grad=True)
    x = torch.tensor([[0.0, 1.0, 0.0], [2.0, 0.0, 0.0], [0.0, 0.0, 1.0], [1.0, 1.0, 1.0]], dtype=d,
                     requires_grad=x_requires_grad)
    dst = torch.tensor(list(dst))
    i, j, k = torch.tensor([[0, 0], [2, 1]]), torch.tensor([[2, 0], [1, 2]]), torch.tensor([[2, 0]])
    packs = []

    def pack(t):
        packs.append(tuple(t.shape))
        return t

    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            m = a * 0.5
            out = torch.zeros(4, 3, dtype=m.dtype).index_add_(0, dst, m, alpha=2)
            s = p * p
            acc = torch.zeros(2, 3, dtype=s.dtype).scatter_add_(1, i, s)
            w = a * 1
            w.scatter_(1, j, s)
            b = a * 3
            b[1:].scatter_(1, k, 0.5)
            x.index_add_(0, dst, m)
            y = (out * out).sum() + (acc * w).sum() + (b * b).sum() + (x * x).sum()
    except (RuntimeError, IndexError) as e:
        return (type(e).__name__, str(e)), packs
    y.backward()
    return dict(a=a, p=p, x=x, out=out, acc=acc, w=w, b=b), packs


@pytest.fixture(scope="module")
def case():
    return Case(open(FILE).read())


@pytest.mark.torch
@pytest.mark.parametrize("name", NAMES)
def test_chain_version_and_value_match_torch(case, name):
    theirs, _ = _torch()
    names = {"a": theirs["a"], "p": theirs["p"]}
    ours_names = {"a": case.tensor("a"), "p": case.tensor("p")}
    assert chain(case.tensor(name), leaf_names(ours_names)) == torch_chain(theirs[name], names)
    assert case.tensor(name).version.value == theirs[name]._version
    assert_close(case.value(name), theirs[name], name)


def test_nodes_by_hand(case):
    """What PyTorch 2.13 makes (probed): each in-place op's node is the out-of-place op's, with
    the written tensor's old edge first; a view's base gets CopySlices over its old MulBackward0."""
    assert case.chain("out")[0] == "IndexAddBackward0"
    assert case.chain("out")[2][0] is None                       # zeros(): no edge
    assert case.chain("acc")[0] == "ScatterAddBackward0"
    assert case.chain("w")[0] == "ScatterBackward0"
    assert case.chain("w")[2][0][0] == "MulBackward0"
    b = case.chain("b")
    assert b[0] == "CopySlices" and b[2][0][0] == "MulBackward0"
    assert case.chain("x")[0] == "IndexAddBackward0"               # x does not require grad; m does
    assert case.chain("x")[2][0] is None


@pytest.mark.torch
@pytest.mark.parametrize("leaf", ["a", "p"])
def test_gradients_match_torch(case, leaf):
    theirs, _ = _torch()
    assert_close(case.grad(leaf), theirs[leaf].grad, leaf)


@pytest.mark.torch
def test_packs_match_torch(case):
    _, packs = _torch()
    ours = [tuple(c["args"]["x"]["shape"]) for c in case.json["hook_calls"] if c["kind"] == "pack"]
    # index_add_: index, source; p * p: p twice; scatter_add_, scatter_, scatter_ (a number): the index;
    # x.index_add_: index, source
    assert ours == packs
    assert ours[:9] == [(2,), (2, 3), (2, 2), (2, 2), (2, 2), (2, 2), (1, 2), (2,), (2, 3)]


@pytest.mark.torch
@pytest.mark.parametrize("variant, kwargs", [("leaf_error", {"x_requires_grad": True}),
                                             ("kernel_error", {"dst": (5, 0)})])
def test_errors_and_their_packs_match_torch(variant, kwargs):
    v = adjoint.load(FILE).solve(variant=variant).variants[0]
    out = v.to_json()
    error, packs = _torch(**kwargs)
    assert (out["error"]["type"], out["error"]["message"]) == error
    assert len([c for c in out["hook_calls"] if c["kind"] == "pack"]) == len(packs)


def test_errors_by_hand():
    """The leaf error comes before x.index_add_'s packs (the seven of the ops before it); an
    index out of bounds after the first index_add_'s two packs (index, source), the IndexError of
    index_add_cpu_out's own loop (alpha is 2, so not its scatter_add_ path)."""
    leaf = adjoint.load(FILE).solve(variant="leaf_error").variants[0].to_json()
    assert leaf["error"]["message"] == "a leaf Variable that requires grad is being used in an in-place operation."
    assert len([c for c in leaf["hook_calls"] if c["kind"] == "pack"]) == 7
    bad = adjoint.load(FILE).solve(variant="kernel_error").variants[0].to_json()
    assert (bad["error"]["type"], bad["error"]["message"]) == ("IndexError", "index out of range in self")
    assert len([c for c in bad["hook_calls"] if c["kind"] == "pack"]) == 2


_REFUSED = """
name: refused
inputs:
  a: {value: [[1.0, 2.0, 3.0], [3.0, -1.0, 0.5]], requires_grad: true}
  i: {value: [[0, 0], [2, 1]], dtype: int64}
model:
  inputs: [a, i]
  forward: |
    h = a * 0.5
    LINE
    return h
loss: "sum(y)"
"""


@pytest.mark.parametrize("line, words", [
    ("h.scatter_(1, i, a)", "scatter writes one position twice"),
    ("h.scatter_add_(1, i, h)", "an operand on its memory"),
    ("h[:, :1].expand(2, 2).index_add_(0, i[0], a[:, :2])", "whose elements share memory"),
])
def test_refused_where_not_modelled(line, words):
    with pytest.raises(ProblemError, match=words):
        adjoint.loads(_REFUSED.replace("LINE", line)).solve()


def test_a_leaf_is_refused_before_the_overlap_refusal():
    """check_inplace runs first in PyTorch: a leaf requiring grad gets its error even where the
    write would also be refused."""
    text = _REFUSED.replace("LINE", "a.scatter_add_(1, i, a)")
    out = adjoint.loads(text).solve().variants[0].to_json()
    assert out["error"]["message"] == "a leaf Variable that requires grad is being used in an in-place operation."


_BOUNDS = """
name: bounds
inputs:
  a: {value: VALUE, requires_grad: true}
  i: {value: [0, 7], dtype: int64}
model:
  inputs: [a, i]
  forward: |
    h = a * 1
    return CALL
loss: "sum(y)"
"""


def _source_shape(shape, d):
    return [2 if k == d else n for k, n in enumerate(shape)]


@pytest.mark.torch
@pytest.mark.parametrize("shape, d, alpha", [((2, 3, 2), 0, 1), ((2, 3, 2), 2, 1), ((2, 3, 2), 1, 1),
                                             ((2, 3, 2), 0, 2), ((3,), 0, 1)])
@pytest.mark.parametrize("inplace", [True, False])
def test_index_add_bounds_error_matches_torch(shape, d, alpha, inplace):
    """index_add_cpu_out: an input of more than one dim along its first or last dim with alpha 1
    goes through scatter_add_ (its RuntimeError naming the value); anything else is its own loop's
    IndexError."""
    import torch
    value = torch.ones(shape, dtype=torch.float64)
    source = "torch.ones(%s, dtype=h.dtype)" % ", ".join(map(str, _source_shape(shape, d)))
    call = (f"h.index_add_({d}, i, {source}, alpha={alpha})" if inplace
            else f"torch.index_add(h, {d}, i, {source}, alpha={alpha})")
    out = adjoint.loads(_BOUNDS.replace("VALUE", str(value.tolist())).replace("CALL", call)).solve()
    err = out.variants[0].to_json()["error"]
    h = value.clone().requires_grad_() * 1
    with pytest.raises((RuntimeError, IndexError)) as e:
        h.index_add_(d, torch.tensor([0, 7]), torch.ones(_source_shape(shape, d), dtype=torch.float64), alpha=alpha)
    assert (err["type"], err["message"]) == (e.type.__name__, str(e.value))
