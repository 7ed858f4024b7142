"""The answer's ``adjoints``: ``grad_output`` as it reaches a module, before any hook of the module
acts, and ``grad_input`` as the module's forward passes it to each input, the hooks inside the
module acting, its own not yet (None where PyTorch computes none). Checked against what full
backward (pre-)hooks registered in front of the file's own are handed in real torch
(adjoint.torchside.adjoints_run), on the example files where such observers change nothing else,
and by hand.

Before, ``grad_input`` was J^T grad_output with every hook ignored: a full hook doubling a child's
grad_input left its parent's (and the root's) grad_input undoubled, unlike x.grad and unlike what
the parent's own full hook is handed; an input the forward does not use got zeros.
"""

from __future__ import annotations

import os

import pytest

import adjoint

torch = pytest.importorskip("torch")

from adjoint.torchside.verify import adjoint_rows, predicted_json  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

OBSERVED = [("slinear", "full"), ("slinear", "rescaled"), ("rescaling", "tensor_hook"), ("rescaling", "backward_pre"),
            ("rescaling", "full_backward"), ("tensor_hooks", "doubling"), ("mlp_relu", "full"), ("cnn", "bn"),
            ("custom_function", "hooked"), ("zeros_vs_none", "zeros"), ("zeros_vs_none", "frozen_input"),
            ("early_full_hook", "data_input"), ("lstm_lm", "lstm_hooks"), ("tiny_encoder", "attention"),
            ("transformer_block", "mlp"), ("complex_layer", "hooks")]


def _compared_with_torch(problem, vp) -> list:
    """The rows of ``vp``'s adjoints compared with what observing full backward (pre-)hooks are
    handed in a torch run of the same variant (adjoint.torchside.adjoints_run); asserts at least
    one row was compared and every compared row agrees."""
    rows = adjoint_rows(problem, problem.variant(vp.name), vp, predicted_json(vp, problem.loc), problem.dtype)
    compared = [r for r in rows if not r.skipped]
    assert compared, [r.detail for r in rows]
    assert all(r.ok for r in compared), [(r.item, r.detail) for r in compared if not r.ok]
    return compared


@pytest.mark.parametrize("stem, variant", OBSERVED)
def test_adjoints_are_what_torchs_hooks_are_handed(stem, variant):
    problem = adjoint.load(os.path.join(ROOT, "problems", f"{stem}.yaml"))
    _compared_with_torch(problem, problem.solve(variant=variant, mode="exact").variants[0])


def test_a_childs_doubling_hook_reaches_the_parents_grad_input():
    """slinear: f1's full hook doubles its grad_input. The root's grad_input is then x.grad, doubled
    (-11951973/48828125), and f0's grad_output (f1 passes it on) is doubled too; f1's own
    grad_input is before its hook: -3983991/9765625, as in the observing variant."""
    problem = adjoint.load(os.path.join(ROOT, "problems", "slinear.yaml"))
    doc = problem.solve(variant="rescaled").variants[0].to_json()
    adj = doc["adjoints"]
    assert adj["model"]["grad_input"][0]["exact"] == ["-11951973/48828125"] == doc["grads"]["x"]["exact"]
    assert adj["f1"]["grad_input"][0]["exact"] == ["-3983991/9765625"]
    assert adj["f0"]["grad_output"][0]["exact"] == ["-7967982/9765625"]


def test_an_unused_input_gets_none(tmp_path):
    """u requires grad but the forward does not use it: PyTorch computes none for it (the answer
    said zeros). By hand: y = sum(x * 3), grad_input of x = [3, 3]."""
    path = tmp_path / "p.yaml"
    path.write_text("""
name: unused
inputs:
  x: {value: [1, 2], requires_grad: true}
  u: {value: [5, 6], requires_grad: true}
model:
  inputs: [x, u]
  forward: "sum(x * 3)"
""")
    doc = adjoint.load(str(path)).solve().variants[0].to_json()
    assert doc["adjoints"]["model"]["grad_input"][0]["exact"] == ["3", "3"]
    assert doc["adjoints"]["model"]["grad_input"][1] is None
    assert doc["grads"]["u"] is None
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    u = torch.tensor([5.0, 6.0], requires_grad=True)
    assert torch.autograd.grad((x * 3).sum(), [x, u], allow_unused=True)[1] is None


def test_an_input_written_in_place_is_passed_what_reaches_its_history(tmp_path):
    """An in-place ReLU makes its own node the history of its input: its grad_input is what reaches
    the history the input had (the Linear's), not grad_output unchanged. By hand: h = lin(x) =
    [1, -1]; relu_ -> [1, 0]; loss = sum(1.5 * y): grad_output [1.5, 1.5], r's grad_input and x.grad
    [1.5, 0] (torch below; PyTorch refuses a full hook on such a module)."""
    path = tmp_path / "p.yaml"
    path.write_text("""
name: inplace_relu
inputs:
  x: {value: [[1, -1]], requires_grad: true}
model:
  type: Sequential
  children:
    lin: {type: Linear, params: {weight: [[1, 0], [0, 1]], bias: [0, 0]}}
    r: {type: ReLU, args: {inplace: true}}
loss: "sum(y * 1.5)"
""")
    doc = adjoint.load(str(path)).solve().variants[0].to_json()
    assert doc["adjoints"]["r"]["grad_output"][0]["exact"] == [["3/2", "3/2"]]
    assert doc["adjoints"]["r"]["grad_input"][0]["exact"] == [["3/2", "0"]]
    assert doc["adjoints"]["lin"]["grad_input"][0]["exact"] == [["3/2", "0"]]
    x = torch.tensor([[1.0, -1.0]], requires_grad=True)
    lin = torch.nn.Linear(2, 2)
    with torch.no_grad():
        lin.weight.copy_(torch.eye(2))
        lin.bias.zero_()
    (torch.nn.ReLU(inplace=True)(lin(x)) * 1.5).sum().backward()
    assert x.grad.tolist() == [[1.5, 0.0]]


def test_the_recursion_of_a_module_whose_output_a_later_in_place_op_wrote(tmp_path):
    """lin's output is written by the in-place ReLU after lin returned: the recursion's J^T through
    lin's own nodes was seeded at the output's new grad_fn, outside lin, and showed [0, 0] (found by
    a docs trial). Seeded at the history the output had when lin returned, it is W^T [1, 0] =
    [1, 0.5], torch's x.grad below (no hook: J^T and what lin passed agree)."""
    path = tmp_path / "p.yaml"
    path.write_text("""
name: inplace_relu_1d
inputs:
  x: {value: [1.5, -2], requires_grad: true}
model:
  type: Sequential
  children:
    lin: {type: Linear, params: {weight: [[1, 0.5], [0.25, 1]], bias: [0, 0.5]}}
    act: {type: ReLU, args: {inplace: true}}
loss: "sum(y * y)"
""")
    vp = adjoint.load(str(path)).solve().variants[0]
    lin = next(b for b in vp.boundaries if b.callid == "lin")
    x = torch.tensor([1.5, -2.0], requires_grad=True)
    layer = torch.nn.Linear(2, 2)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([[1, 0.5], [0.25, 1]]))
        layer.bias.copy_(torch.tensor([0, 0.5]))
    y = torch.nn.ReLU(inplace=True)(layer(x))
    (y * y).sum().backward()
    assert lin.grad_input[0].tolist() == x.grad.tolist() == [1.0, 0.5]


SHORTCUT = """
name: shortcut
dtype: float64
inputs:
  x: {value: [[1, 2]], requires_grad: true}
model:
  inputs: [x]
  training: false
  children:
    fc: {type: Linear, params: {weight: [[0.5, -1], [2, 0.25]], bias: [0, 1]}}
    shortcut: {type: Sequential}
    ident: {type: Identity}
    drop: {type: Dropout, args: {p: 0.5}}
    flat: {type: Flatten}
  forward: |
    h = fc(x)
    return h * 3 + shortcut(x) * 2 + ident(h) + drop(h) * 5 + flat(x) * 7
loss: "sum(y)"
"""


def test_a_module_returning_its_input_gets_only_what_reaches_its_output(tmp_path):
    """A residual shortcut (an empty Sequential), an Identity, an eval-mode Dropout and a Flatten of
    a 2-D input return their input itself, which PyTorch's graph does not tell apart from the
    input's other uses: the answer gave x's (or h's) whole gradient as their grad_output. A full
    backward hook is handed what reaches the output alone; by hand, loss = sum(3h + 2 s(x) + i(h)
    + 5 d(h) + 7 f(x)): 2, 1, 5 and 7 per element, and grad_input the same (torch's hooks below,
    through adjoint.torchside's observers)."""
    path = tmp_path / "p.yaml"
    path.write_text(SHORTCUT)
    problem = adjoint.load(str(path))
    vp = problem.solve().variants[0]
    adj = vp.to_json()["adjoints"]
    for callid, k in (("shortcut", "2"), ("ident", "1"), ("drop", "5"), ("flat", "7")):
        assert adj[callid]["grad_output"][0]["exact"] == [[k, k]], callid
        assert adj[callid]["grad_input"][0]["exact"] == [[k, k]], callid
    assert len(_compared_with_torch(problem, vp)) >= 5


def test_self_attention_gets_one_grad_input_per_position():
    """attn(a, a, a) without a hook on attn: the answer gave each of query, key and value the total
    gradient of a. A full backward hook on attn is handed three different entries, as the file's
    own variant 'attention' shows; variant 'mlp' (no hook on attn) now answers the same three, and
    torch's observing hooks agree (the rows for attn are compared, no longer left out)."""
    problem = adjoint.load(os.path.join(ROOT, "problems", "transformer_block.yaml"))
    pred = problem.solve(mode="exact")
    by = {v.name: v.to_json() for v in pred.variants}
    hooked = next(c for c in by["attention"]["hook_calls"] if c["target"] == "attn")["args"]["grad_input"]
    watched = by["mlp"]["adjoints"]["attn"]["grad_input"]
    assert [g["exact"] for g in watched] == [g["exact"] for g in hooked]
    assert watched[0]["exact"] != watched[1]["exact"] != watched[2]["exact"]
    vp = next(v for v in pred.variants if v.name == "mlp")
    assert "adjoint attn" in [r.item for r in _compared_with_torch(problem, vp)]


def test_watched_adjoints_under_a_root_backward_and_an_unused_position(tmp_path):
    """A `root:` backward of the loss runs the program the default backward runs: its adjoints are
    watched too (they kept the tensor's whole gradient: 8 where a full hook on ident is handed 5).
    g(x, x) using its first input only: PyTorch computes nothing for the second position, and the
    watching hook's zeros there are its BackwardHookFunction's: None, as for g(x * 1, x). By hand:
    loss = sum(lin(x) + 5 * ident(h)...) below; torch's hooks checked through the observers."""
    path = tmp_path / "p.yaml"
    path.write_text("""
name: root-watch
dtype: float64
inputs:
  x: {value: [[1, 2]], requires_grad: true}
model:
  inputs: [x]
  children:
    lin: {type: Linear, params: {weight: [[1, 2], [3, 4]], bias: [0, 0]}}
    ident: {type: Identity}
    g: {inputs: [a, b], forward: "a * 2"}
  forward: |
    h = lin(x)
    return h * 3 + ident(h) * 5 + g(x, x)
loss: "sum(y)"
variants:
  plain: {}
  root:
    backward: {root: "loss"}
""")
    problem = adjoint.load(str(path))
    pred = problem.solve()
    for vp in pred.variants:
        adj = vp.to_json()["adjoints"]
        assert adj["ident"]["grad_output"][0]["exact"] == [["5", "5"]], vp.name
        assert adj["g"]["grad_input"][0]["exact"] == [["2", "2"]] and adj["g"]["grad_input"][1] is None, vp.name
    vp = next(v for v in pred.variants if v.name == "plain")
    _compared_with_torch(problem, vp)


ATTENTION = """
name: mha-positions
dtype: float64
init: {seed: 3}
inputs:
  x: {value: [[[1.5, -1.25, -1.5, 1.5], [-0.75, 0.125, 0.125, 0.75], [0.5, 1, -2, 0.25]], [[0.75, 2, -1, 0.75], [1.5, -1, 0, 1], [1, 0.5, -0.5, 2]]], requires_grad: true}
  m: {value: [[0.5, -1, 1.25, 0.75], [2, 0.25, -0.5, 1]], requires_grad: true}
model:
  inputs: [x, m]
  children:
    bf: {type: MultiheadAttention, args: {embed_dim: 4, num_heads: 2, batch_first: true}}
    sf: {type: MultiheadAttention, args: {embed_dim: 4, num_heads: 2}}
    kv: {type: MultiheadAttention, args: {embed_dim: 4, num_heads: 1, batch_first: true}}
    un: {type: MultiheadAttention, args: {embed_dim: 4, num_heads: 2}}
    bv: {type: MultiheadAttention, args: {embed_dim: 4, num_heads: 2, batch_first: true}}
    lin: {type: Linear, args: {in_features: 4, out_features: 4}}
  forward: |
    h = lin(x)
    a = bf(h, h, h)[0]
    b = sf(h, h, h, need_weights=False)[0]
    c = kv(a, h, h)[0]
    d = un(m, m, m)[0]
    e = bv(h, h, value=h)[0]
    return a * 2 + b * 3 + c + e * 5 + sum(d)
loss: "sum(y ** 2)"
"""


@pytest.mark.parametrize("mode", ["exact", "float64"])
def test_self_attention_positions_are_read_off_the_in_projection(tmp_path, monkeypatch, mode):
    """One tensor at several positions of MultiheadAttention without a hook: each position's
    grad_input is its rows of the in-projection (adjoint.engine.observer._per_position), with no
    watched second run: batch_first (one packed linear after one transpose), sequence-first with
    need_weights=False, key and value shared (their two-block linear; the query its own), an
    unbatched call (three unsqueezes: three linears of one tensor), and value passed by keyword (no
    position). Every row is compared with what full backward hooks are handed in torch."""
    import adjoint.engine.observer as observer

    def no_second_run(*args):
        raise AssertionError("a watched run was made")

    monkeypatch.setattr(observer, "_watched", no_second_run)
    path = tmp_path / "p.yaml"
    path.write_text(ATTENTION)
    problem = adjoint.load(str(path))
    vp = problem.solve(mode=mode).variants[0]
    compared = {r.item for r in _compared_with_torch(problem, vp)}
    assert {"adjoint bf", "adjoint bv", "adjoint kv", "adjoint un", "adjoint sf"} <= compared
    adj = vp.to_json()["adjoints"]
    assert len(adj["bv"]["grad_input"]) == 2 and adj["bf"]["grad_input"][0] != adj["bf"]["grad_input"][1]


def test_saved_tensor_hooks_keep_the_watched_run(monkeypatch):
    """Under saved-tensor hooks the separate projections a full hook causes save (and unpack) other
    tensors than the packed one: the positions come from the watched run there, as before."""
    import adjoint.engine.observer as observer

    made = []
    real = observer._watched
    monkeypatch.setattr(observer, "_watched", lambda *a: made.append(1) or real(*a))
    problem = adjoint.load(os.path.join(ROOT, "tests", "data", "regressions", "sdpa_backward_uses_saved_logsumexp.yaml"))
    vp = problem.solve(variant="doubled").variants[0]
    assert made and len(vp.to_json()["adjoints"]["mha"]["grad_input"]) == 3


READ_OFF = [
    # a node post-hook on the attention output's node (inside the module) triples what reaches the
    # in-projection: a full hook on attn is handed the tripled parts (they read the whole-run value)
    "mha_node_post_hook_positions",
    # the in-projection's weight changes after the forward (an optimizer step in a
    # post_accumulate_grad hook; an SGD step after the backward): the parts are taken with the
    # weight the forward used, the one the backward's linear saved
    "mha_optimizer_in_backward", "mha_steps_end_with_step",
    # one tensor positionally and by keyword: a full hook wraps the positional argument only, so
    # its grad_input is that position's part, not the tensor's whole gradient
    "mha_key_value_by_keyword", "custom_kwarg_shares_positional",
]


@pytest.mark.parametrize("stem", READ_OFF)
def test_shared_positions_are_what_a_full_hook_is_handed(stem):
    """Each of these answered a module's grad_input wrongly, and verify (which does not compare
    adjoints) passed it; the rows for the module are now compared with torch's full hooks."""
    problem = adjoint.load(os.path.join(ROOT, "tests", "data", "adjoints", f"{stem}.yaml"))
    vp = problem.solve().variants[0]
    compared = {r.item for r in _compared_with_torch(problem, vp)}
    assert compared & {"adjoint attn", "adjoint f"}


LEGACY_REPLACES = """
name: legacy_replaces
inputs:
  x: {value: [[1, -2]], requires_grad: true}
model:
  children:
    f: {forward: "(x * 2) * 3"}
    g: {type: Linear, params: {weight: [[1, 2], [3, -1]], bias: [0.5, 0]}}
  forward: "g(f(f(x)))"
loss: "sum(y * y)"
hooks:
  - {module: f, kind: backward, returns: "(grad_input[0] * 10, None)"}
  - {module: g, kind: backward, returns: "(grad_input[0], grad_input[1] * 10, grad_input[2])"}
"""


def test_a_modules_own_legacy_hook_does_not_act_in_its_grad_input(tmp_path):
    """f = (x * 2) * 3, called twice, has a legacy backward hook returning 10 * grad_input: it is a
    post-hook on f's last node (the second MulBackward0), so its replacement flows through f's first
    node before it reaches f's input. That hook is f's own: f's grad_input is J^T grad_output, the
    hook not acting (as for an own full_backward_pre replacement); the answer gave 10 times it. The
    root's grad_input, where f's hooks are a child's, is x.grad with them acting. Expected values
    from torch: grad_output is what reaches each call's output (a tensor hook), grad_input J^T of it
    through the same forward without hooks."""
    path = tmp_path / "p.yaml"
    path.write_text(LEGACY_REPLACES)
    adj = adjoint.load(str(path)).solve(mode="float64").variants[0].to_json()["adjoints"]

    import warnings

    class F(torch.nn.Module):
        def forward(self, x):
            return (x * 2) * 3

    f, g = F(), torch.nn.Linear(2, 2).double()
    with torch.no_grad():
        g.weight.copy_(torch.tensor([[1.0, 2], [3, -1]]))
        g.bias.copy_(torch.tensor([0.5, 0]))
    f.register_backward_hook(lambda m, gi, go: (gi[0] * 10, None))
    g.register_backward_hook(lambda m, gi, go: (gi[0], gi[1] * 10, gi[2]))
    x = torch.tensor([[1.0, -2]], dtype=torch.float64, requires_grad=True)
    seen = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = f(x)
        a.register_hook(lambda gr: seen.__setitem__("f", gr))
        b = f(a)
        b.register_hook(lambda gr: seen.__setitem__("f#2", gr))
        y = g(b)
    (y * y).sum().backward()
    for callid, inp in (("f", x), ("f#2", a)):
        t = inp.detach().requires_grad_()
        want, = torch.autograd.grad((t * 2) * 3, t, seen[callid])
        assert adj[callid]["grad_output"][0]["value"] == seen[callid].tolist(), callid
        assert adj[callid]["grad_input"][0]["value"] == want.tolist(), callid
    assert adj["model"]["grad_input"][0]["value"] == x.grad.tolist()


def test_a_modules_own_pre_hook_writing_grad_output_in_place_does_not_act_in_its_grad_input(tmp_path):
    """f's full_backward_pre hook multiplies grad_output by 10 in place instead of returning it: f's
    nodes carry the written gradient on, as they carry a returned replacement. Either way it is f's
    own hook: grad_input is J^T of the grad_output that reached f (the answer gave 10 times it, as
    the pre-hook had not been seen to replace anything). Expected values from torch: the gradient
    reaching f's output (a tensor hook), J^T of it through f's forward without hooks; the root's
    grad_input is x.grad, f's write acting."""
    path = tmp_path / "p.yaml"
    path.write_text("""
name: pre_hook_writes
inputs:
  x: {value: [[1, -2]], requires_grad: true}
model:
  children:
    f: {forward: "(x * 2).tanh() * 3"}
  forward: "f(x) * f(x * 1)"
loss: "sum(y * y)"
hooks:
  - {module: f, kind: full_backward_pre, does: "grad_output[0].mul_(10)"}
""")
    problem = adjoint.load(str(path))
    vp = problem.solve(mode="float64").variants[0]
    adj = vp.to_json()["adjoints"]

    class F(torch.nn.Module):
        def forward(self, x):
            return (x * 2).tanh() * 3

    def pre(module, grad_output):
        grad_output[0].mul_(10)

    f = F()
    f.register_full_backward_pre_hook(pre)
    x = torch.tensor([[1.0, -2]], dtype=torch.float64, requires_grad=True)
    seen = {}
    a, x1 = f(x), x * 1
    a.register_hook(lambda gr: seen.__setitem__("f", gr.clone()))
    b = f(x1)
    b.register_hook(lambda gr: seen.__setitem__("f#2", gr.clone()))
    ((a * b) ** 2).sum().backward()
    for callid, inp in (("f", x), ("f#2", x1)):
        t = inp.detach().requires_grad_()
        want, = torch.autograd.grad(F()(t), t, seen[callid])
        assert adj[callid]["grad_output"][0]["value"][0] == pytest.approx(seen[callid][0].tolist()), callid
        assert adj[callid]["grad_input"][0]["value"][0] == pytest.approx(want[0].tolist()), callid
    assert adj["model"]["grad_input"][0]["value"][0] == pytest.approx(x.grad[0].tolist())


def test_observers_keep_what_they_are_handed(tmp_path):
    """The torch observers (adjoint.torchside.adjoints_run) run before the file's own hooks, which may
    write the very tensors they were handed: an own full hook multiplying grad_input by 10 in place
    made the observed grad_input 10 * J^T grad_output, and an own pre-hook writing grad_output made
    the observed grad_output the written one, though each is the module's own hook. They keep copies
    now, and an in-place pre-hook counts as a replacement (only grad_output compared)."""
    path = tmp_path / "p.yaml"
    path.write_text("""
name: own_hooks_write
inputs:
  x: {value: [[1, -2]], requires_grad: true}
model:
  children:
    f: {forward: "(x * 2) * 3"}
  forward: "f(x) * 1"
loss: "sum(y * y)"
variants:
  full:
    hooks: [{module: f, kind: full_backward, does: "grad_input[0].mul_(10)"}]
  pre:
    hooks: [{module: f, kind: full_backward_pre, does: "grad_output[0].mul_(10)"}]
""")
    problem = adjoint.load(str(path))
    for vp in problem.solve(mode="exact").variants:
        adj = vp.to_json()["adjoints"]["f"]
        assert adj["grad_output"][0]["exact"] == [["12", "-24"]] and adj["grad_input"][0]["exact"] == [["72", "-144"]]
        assert "adjoint f" in [r.item for r in _compared_with_torch(problem, vp)]


def test_a_legacy_hook_that_never_goes_on_a_node_spoils_no_other_modules_reading(tmp_path):
    """g has a legacy backward hook, but returns its input x (a leaf) as it is: var.grad_fn is None,
    so PyTorch registers the hook on no node, and g's call looked unhooked. The second run that
    watches the calls whose boundary the graph does not mark (f returns h twice, g its input) then
    put a full hook on g too, which PyTorch refuses beside the legacy one: that run raised, and f
    lost its reading -- each position got h's whole gradient. g itself keeps the values the graph
    gives, x's whole gradient, once: summing it over the two positions that return x gave twice
    x.grad. Expected values from torch: f's full backward hook (beside g's legacy hook), and x.grad."""
    path = tmp_path / "p.yaml"
    path.write_text("""
name: legacy_on_a_leaf_passthrough
inputs:
  x: {value: [[1, -2]], requires_grad: true}
model:
  children:
    f:
      forward: |
        h = x * 2
        return h, h
    g:
      inputs: [a, b]
      forward: "a, a, b"
  forward: |
    p, q = f(x)
    r, s, t = g(x, p)
    return p * 3 + q * q + r * 5 + s + t * t
loss: "sum(y)"
hooks:
  - {module: g, kind: backward}
""")
    adj = adjoint.load(str(path)).solve(mode="exact").variants[0].to_json()["adjoints"]

    class F(torch.nn.Module):
        def forward(self, x):
            h = x * 2
            return h, h

    class G(torch.nn.Module):
        def forward(self, a, b):
            return a, a, b

    f, g, seen = F(), G(), {}
    g.register_backward_hook(lambda m, gi, go: None)
    f.register_full_backward_hook(lambda m, gi, go: seen.update(gi=gi, go=go))
    x = torch.tensor([[1.0, -2]], requires_grad=True)
    p, q = f(x)
    r, s, t = g(x, p)
    (p * 3 + q * q + r * 5 + s + t * t).sum().backward()
    assert [o["value"] for o in adj["f"]["grad_output"]] == [o.tolist() for o in seen["go"]]
    assert adj["f"]["grad_input"][0]["value"] == seen["gi"][0].tolist()
    assert adj["g"]["grad_input"][0]["value"] == x.grad.tolist()
