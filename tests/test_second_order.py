"""Second order (create_graph, as:, root:/roots:, allow_unused, materialize_grads): the graph a
create_graph backward records, node for node against real torch 2.13, values, PyTorch's errors
as answers, and refusals of what is not modelled yet."""

import subprocess
import sys
import warnings

import pytest
from conftest import require_torch

torch = require_torch()

import adjoint  # noqa: E402
from adjoint.values.backends.float64 import Float64Backend  # noqa: E402
from adjoint.engine.graph import INF_SEQ  # noqa: E402
from adjoint.engine.passes import run_variant  # noqa: E402

warnings.filterwarnings("ignore")
F64 = torch.float64


def _run(text: str):
    """The engine's run (float64) of the problem's first variant."""
    problem = adjoint.loads(text)
    return run_variant(problem, problem.variants[0], Float64Backend(problem.dtype, None))


def _two_leaves():
    """The torch leaves ``a`` and ``b`` of the two-input problems below (MATRIX, SELECTING, ...)."""
    return (torch.tensor([[-0.3, -0.15, 0.4], [0.2, 0.35, -0.5]], dtype=F64, requires_grad=True),
            torch.tensor([[0.2, 0.4, 0.6], [0.8, 1.0, 1.2]], dtype=F64, requires_grad=True))


def ours(text: str, name: str = "gx"):
    """The engine's run of the first variant, and the tensor ``as:`` bound to ``name``."""
    run = _run(text)
    assert run.error is None, run.error
    return run, run.made[name]


def _dag(root, name, seq, children, key=id):
    """The graph under ``root`` as a list of (name, sequence_nr, [index of each child]) in DFS
    discovery order, shared nodes listed once (a tree expansion would be exponential)."""
    index: dict = {}
    out: list = []

    def visit(node):
        if node is None:
            return None
        k = key(node)
        if k in index:
            return index[k]
        index[k] = len(out)
        entry = [name(node), seq(node), None]
        out.append(entry)
        entry[2] = [visit(c) for c in children(node)]
        return index[k]

    visit(root)
    return [tuple(e) for e in out]


def assert_same_graph(ours, theirs, what=""):
    """The two graphs equal; on a difference, the first differing node (pytest's own diff of two
    long lists takes minutes)."""
    if ours == theirs:
        return
    for i, (a, b) in enumerate(zip(ours, theirs)):
        if a != b:
            raise AssertionError(f"{what}: node {i} differs: ours {a}, torch {b}")
    raise AssertionError(f"{what}: {len(ours)} nodes, torch {len(theirs)}")


def chain_ours(t):
    return _dag(t.grad_fn, lambda n: n.name, lambda n: None if n.seq == INF_SEQ else n.seq,
                lambda n: [e.node if e is not None else None for e in n.edges] if not n.is_accumulate else [])


def chain_torch(t, offset):
    def acc(fn):
        return "AccumulateGrad" in fn.name()
    # a node's Python wrapper is not always the same object: key nodes by sequence_nr (AccumulateGrad: its leaf)
    return _dag(t.grad_fn, lambda fn: fn.name(), lambda fn: None if acc(fn) else fn._sequence_nr() - offset,
                lambda fn: [] if acc(fn) else [n for n, _ in fn.next_functions],
                key=lambda fn: ("acc", id(fn.variable)) if acc(fn) else fn._sequence_nr())


def start_seq():
    """The sequence_nr the next node made in this thread gets (torch numbers nodes per thread)."""
    a = torch.zeros(1, requires_grad=True)
    return (a * 1).grad_fn._sequence_nr() + 1


ELEMENTWISE = """
name: chain
dtype: float64
inputs:
  x: {value: [0.3, -0.5], requires_grad: true}
  w: {value: [0.7, 0.2], requires_grad: true}
  c: {value: [1.5], requires_grad: true}
model:
  inputs: [x, w, c]
  forward: "FORWARD"
loss: "LOSS"
steps:
  - forward
  - {backward: {method: grad, inputs: [x], create_graph: true, as: [gx]}}
"""

CASES = [  # (forward, loss, the same in torch)
    ("tanh(w * x)", "sum(y ** 2)", lambda x, w, c: (torch.tanh(w * x) ** 2).sum()),
    ("(x - w) * c", "sum(y)", lambda x, w, c: ((x - w) * c).sum()),
    ("x * x * 2.5", "mean(y)", lambda x, w, c: (x * x * 2.5).mean()),
    ("relu(x * w) + x ** 3", "sum(y * c)", lambda x, w, c: ((torch.relu(x * w) + x ** 3) * c).sum()),
    ("-x * w", "sum(y) * sum(y)", lambda x, w, c: (lambda y: y.sum() * y.sum())(-x * w)),
    # infinitely_differentiable_silu_backward: sigmoid, 1.0 - s (SubBackward0: C++'s fill_ then sub_), ...
    ("silu(x * w) + x", "sum(y ** 2)", lambda x, w, c: ((torch.nn.functional.silu(x * w) + x) ** 2).sum()),
    # elu_backward(grad, alpha, scale, input_scale, false, self): EluBackwardBackward0 (x * w < 0 at x[1])
    ("elu(x * w - 0.1, alpha=0.5) * c", "sum(y ** 2)",
     lambda x, w, c: ((torch.nn.functional.elu(x * w - 0.1, alpha=0.5) * c) ** 2).sum()),
]


@pytest.mark.parametrize("forward,loss,twin", CASES, ids=[c[0] for c in CASES])
def test_first_order_gradient_graph_is_torchs(forward, loss, twin):
    """grad(loss, x, create_graph=True): the gradient's grad_fn chain, names and sequence_nr, as torch records it."""
    _, gx = ours(ELEMENTWISE.replace("FORWARD", forward).replace("LOSS", loss))
    base = start_seq()
    x = torch.tensor([0.3, -0.5], dtype=F64, requires_grad=True)
    w = torch.tensor([0.7, 0.2], dtype=F64, requires_grad=True)
    c = torch.tensor([1.5], dtype=F64, requires_grad=True)
    g, = torch.autograd.grad(twin(x, w, c), [x], create_graph=True)
    assert_same_graph(chain_ours(gx), chain_torch(g, base), forward)
    assert gx.value.a.tolist() == pytest.approx(g.tolist(), abs=1e-12)


LINEAR = """
name: lin
dtype: float64
inputs:
  x: {value: [[0.3, -0.5, 0.2]], requires_grad: true}
model:
  type: Sequential
  children:
    lin: {type: Linear, params: {weight: [[0.1, 0.2, -0.3], [0.4, -0.1, 0.5]], bias: [0.1, -0.2]}}
    act: {type: Tanh}
loss: "sum(y ** 2)"
steps:
  - forward
  - {backward: {method: grad, inputs: [x, lin.weight, lin.bias], create_graph: true, as: [gx, gw, gb]}}
"""


def test_linear_double_backward_graph_is_torchs():
    """AddmmBackward0 under create_graph: mat1 (t, mm), mat2 (t, mm, t: weight.t() is column-major),
    the bias summed by validate_outputs (sum, view), TBackward0's t."""
    run, _ = ours(LINEAR)
    base = start_seq()
    lin = torch.nn.Linear(3, 2).double()
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[0.1, 0.2, -0.3], [0.4, -0.1, 0.5]]))
        lin.bias.copy_(torch.tensor([0.1, -0.2]))
    x = torch.tensor([[0.3, -0.5, 0.2]], dtype=F64, requires_grad=True)
    loss = (torch.tanh(lin(x)) ** 2).sum()
    gs = torch.autograd.grad(loss, [x, lin.weight, lin.bias], create_graph=True)
    for name, g in zip(("gx", "gw", "gb"), gs):
        assert_same_graph(chain_ours(run.made[name]), chain_torch(g, base), name)


GP = """
name: gp
dtype: float64
inputs:
  x: {value: [0.3, -0.5], requires_grad: true}
  w: {value: [0.7, 0.2], requires_grad: true}
model:
  inputs: [x, w]
  forward: "tanh(w * x)"
loss: "sum(y ** 2)"
steps:
  - forward
  - {backward: {method: grad, inputs: [x], create_graph: true, as: [gx]}}
  - {backward: {root: "sum(gx ** 2)"}}
hooks:
  - {tensor: y}
  - {tensor: gx, returns: "grad * 2"}
"""


def test_gradient_penalty_hooks_and_grads():
    """Hooks on a forward tensor fire in both backwards (the second runs TanhBackward0 again: the
    saved result's grad_fn); a hook on gx (registered right after the step) fires in the second."""
    pred = adjoint.loads(GP).solve().variants[0]
    calls = [(c.label, [float(v) for v in c.args["grad"].floats()]) for c in pred.hook_calls]
    seen = []
    x = torch.tensor([0.3, -0.5], dtype=F64, requires_grad=True)
    w = torch.tensor([0.7, 0.2], dtype=F64, requires_grad=True)
    y = torch.tanh(w * x)
    y.register_hook(lambda g: seen.append(("hook@y", g.tolist())))
    gx, = torch.autograd.grad((y ** 2).sum(), [x], create_graph=True)
    gx.register_hook(lambda g: (seen.append(("hook@gx", g.tolist())), g * 2)[1])
    (gx ** 2).sum().backward()
    assert [c[0] for c in calls] == [s[0] for s in seen] == ["hook@y", "hook@gx", "hook@y"]
    for (_, a), (_, b) in zip(calls, seen):
        assert a == pytest.approx(b, abs=1e-12)
    assert [float(v) for v in pred.grads["x"].floats()] == pytest.approx(x.grad.tolist(), abs=1e-12)
    assert [float(v) for v in pred.grads["w"].floats()] == pytest.approx(w.grad.tolist(), abs=1e-12)


def test_a_gradient_summed_to_a_0d_input_records_sum_backward0():
    """validate_outputs' at::sum_to to a 0-d shape is ``tensor.sum()``: SumBackward0 (not SumBackward1 and
    a view, as for a shape with dims)."""
    text = ERRORS.replace("x: {value: [0.3, -0.5], requires_grad: true}", "x: {value: 1.5, requires_grad: true}")
    text = text.replace("x * 2", "(w * x) ** 2").replace("STEPS", "[forward, {backward: {method: grad, inputs: [x], "
                                                                  "create_graph: true, as: [gx]}}]")
    _, gx = ours(text)
    base = start_seq()
    x = torch.tensor(1.5, dtype=F64, requires_grad=True)
    w = torch.tensor([0.7, 0.2], dtype=F64, requires_grad=True)
    g, = torch.autograd.grad((((w * x) ** 2) ** 2).sum(), [x], create_graph=True)
    assert chain_torch(g, base)[0][0] == "SumBackward0"
    assert_same_graph(chain_ours(gx), chain_torch(g, base), "sum_to 0-d")


def test_grad_accumulated_out_of_place_under_create_graph():
    """backward(create_graph=True): .grad is a new tensor with CopyBackwards (clone_obey_contract)."""
    text = GP.replace("{backward: {method: grad, inputs: [x], create_graph: true, as: [gx]}}",
                      "{backward: {create_graph: true}}").replace("  - {backward: {root: \"sum(gx ** 2)\"}}\n", "")
    text = text.replace("  - {tensor: gx, returns: \"grad * 2\"}\n", "")
    run = _run(text)
    base = start_seq()
    x = torch.tensor([0.3, -0.5], dtype=F64, requires_grad=True)
    w = torch.tensor([0.7, 0.2], dtype=F64, requires_grad=True)
    (torch.tanh(w * x) ** 2).sum().backward(create_graph=True)
    for name, t in (("x", x), ("w", w)):
        ours_t = run.model.leaves[name].grad_tensor
        assert_same_graph(chain_ours(ours_t), chain_torch(t.grad, base), name)


ERRORS = """
name: errs
dtype: float64
inputs:
  x: {value: [0.3, -0.5], requires_grad: true}
  w: {value: [0.7, 0.2], requires_grad: true}
model:
  inputs: [x, w]
  forward: "x * 2"
loss: "sum(y ** 2)"
steps: STEPS
"""


def torch_error(fn):
    x = torch.tensor([0.3, -0.5], dtype=F64, requires_grad=True)
    w = torch.tensor([0.7, 0.2], dtype=F64, requires_grad=True)
    loss = ((x * 2) ** 2).sum()
    try:
        fn(loss, x, w)
    except (RuntimeError, ValueError) as exc:
        return type(exc).__name__, str(exc)
    raise AssertionError("torch raised nothing")


@pytest.mark.parametrize("steps,twin", [
    ("[forward, {backward: {method: grad, inputs: [x, w], allow_unused: false, materialize_grads: true}}]",
     lambda loss, x, w: torch.autograd.grad(loss, [x, w], allow_unused=False, materialize_grads=True)),
    ("[forward, {backward: {method: grad, inputs: [x, w], allow_unused: false}}]",
     lambda loss, x, w: torch.autograd.grad(loss, [x, w], allow_unused=False)),
    ("[forward, {backward: {method: grad, inputs: [x], as: [gx]}}, {backward: {root: \"sum(gx ** 2)\"}}]",
     lambda loss, x, w: torch.autograd.grad(loss, [x])[0].pow(2).sum().backward()),
], ids=["materialize_without_allow_unused", "unused_input", "root_without_graph"])
def test_pytorch_errors_are_answers(steps, twin):
    pred = adjoint.loads(ERRORS.replace("STEPS", steps)).solve().variants[0]
    kind, message = torch_error(twin)
    assert pred.error is not None
    assert (pred.error.type, pred.error.message) == (kind, message)


def test_allow_unused_and_materialize_grads():
    text = ERRORS.replace("STEPS", "[forward, {backward: {method: grad, inputs: [x, w], materialize_grads: true, "
                                   "create_graph: true, as: [gx, gw]}}]")
    run, gw = ours(text, "gw")
    x = torch.tensor([0.3, -0.5], dtype=F64, requires_grad=True)
    w = torch.tensor([0.7, 0.2], dtype=F64, requires_grad=True)
    _, tw = torch.autograd.grad(((x * 2) ** 2).sum(), [x, w], materialize_grads=True, create_graph=True)
    assert (gw.is_leaf, gw.requires_grad, gw.value.a.tolist()) == (tw.is_leaf, tw.requires_grad, tw.tolist())
    pred = adjoint.loads(ERRORS.replace("STEPS", "[forward, {backward: {method: grad, inputs: [x, w], "
                                                 "allow_unused: true}}]")).solve().variants[0]
    assert pred.returned["w"] is None


def test_several_roots_with_grad_outputs():
    text = GP.replace("{backward: {root: \"sum(gx ** 2)\"}}",
                      "{backward: {roots: [loss, \"sum(gx ** 3)\"], grad_outputs: [2, null]}}")
    text = text.replace("  - {tensor: gx, returns: \"grad * 2\"}\n", "")
    pred = adjoint.loads(text).solve().variants[0]
    x = torch.tensor([0.3, -0.5], dtype=F64, requires_grad=True)
    w = torch.tensor([0.7, 0.2], dtype=F64, requires_grad=True)
    loss = (torch.tanh(w * x) ** 2).sum()
    gx, = torch.autograd.grad(loss, [x], create_graph=True)
    torch.autograd.backward([loss, (gx ** 3).sum()], [torch.tensor(2.0, dtype=F64), None])
    assert [float(v) for v in pred.grads["x"].floats()] == pytest.approx(x.grad.tolist(), abs=1e-12)
    assert [float(v) for v in pred.grads["w"].floats()] == pytest.approx(w.grad.tolist(), abs=1e-12)


def cli(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "adjoint", *args], capture_output=True, text=True, input=stdin)


def test_unmodelled_double_backward_is_refused(tmp_path):
    path = tmp_path / "sig.yaml"
    path.write_text(ELEMENTWISE.replace("FORWARD", "F.elu(w * x, inplace=True)").replace("LOSS", "sum(y)"))
    out = cli("solve", str(path))
    assert out.returncode == 2
    assert out.stderr.strip() == (f"{path}:14:16: create_graph through EluBackward1 is not modelled yet; run this "
                                  "backward without create_graph, or use ops whose double backward is modelled "
                                  "(docs/not-modelled.md)")


def test_a_third_backward_through_gelus_recorded_node_is_refused(tmp_path):
    path = tmp_path / "gelu.yaml"
    path.write_text(THIRD.replace("FORWARD", "gelu(x * w)"))
    out = cli("solve", str(path))
    assert out.returncode == 2
    assert out.stderr.strip() == (f"{path}:14:16: create_graph through GeluBackwardBackward0 is not modelled yet; "
                                  "run this backward without create_graph, or use ops whose double backward is "
                                  "modelled (docs/not-modelled.md)")


@pytest.mark.parametrize("template,forward,node", [
    ("THIRD", "F.layer_norm(x * w, (2,)) * x", "NativeLayerNormBackwardBackward0"),
    ("ELEMENTWISE", "F.layer_norm(x * w, (2,), None, w)", "NativeLayerNormBackward0 with a bias and no weight"),
])
def test_layer_norm_refusals(tmp_path, template, forward, node):
    """A third backward through NativeLayerNormBackwardBackward0, and a layer norm with a bias and no
    weight under create_graph (torch 2.13's layer_norm_double_backward raises "Expected a proper Tensor
    but got None" there once the bias gradient's gradient meets the input's), are refused."""
    path = tmp_path / "ln.yaml"
    path.write_text(globals()[template].replace("FORWARD", forward).replace("LOSS", "sum(y ** 3)"))
    out = cli("solve", str(path))
    assert out.returncode == 2
    assert out.stderr.strip() == (f"{path}:14:16: create_graph through {node} is not modelled yet; run this "
                                  "backward without create_graph, or use ops whose double backward is modelled "
                                  "(docs/not-modelled.md)")


@pytest.mark.parametrize("forward,node", [
    ("torch.prod(relu(x) * w)", "ProdBackward0 of an input with a zero"),   # prod_safe_zeros_backward
    ("torch.prod(relu(x) * w, 0)", "ProdBackward1 of an input with a zero"),
    ("torch.norm(x * w, 0.3)", "LinalgVectorNormBackward0 of order 0.3"),   # C++'s double p - 1 is not exact
])
def test_unbuilt_reduction_cases_are_refused(tmp_path, forward, node):
    path = tmp_path / "red.yaml"
    path.write_text(ELEMENTWISE.replace("FORWARD", forward).replace("LOSS", "sum(y ** 2)"))
    out = cli("solve", str(path))
    assert out.returncode == 2
    assert out.stderr.strip() == (f"{path}:14:16: create_graph through {node} is not modelled yet; run this "
                                  "backward without create_graph, or use ops whose double backward is modelled "
                                  "(docs/not-modelled.md)")


@pytest.mark.parametrize("body,message", [
    ("{method: backward, as: [g]}", "as: names what torch.autograd.grad returns; it needs method: grad"),
    ("{method: grad, inputs: [x], as: [a, b]}", "as: gives 2 name(s) for 1 input(s)"),
    ("{grad_outputs: [1]}", "grad_outputs: goes with roots:"),
    ("{allow_unused: true}", "allow_unused is an argument of torch.autograd.grad"),
])
def test_bad_second_order_keys(tmp_path, body, message):
    path = tmp_path / "bad.yaml"
    path.write_text(ERRORS.replace("STEPS", f"[forward, {{backward: {body}}}]"))
    out = cli("solve", str(path))
    assert out.returncode == 2 and message in out.stderr, out.stderr


def test_latex_says_what_a_second_order_pass_differentiates():
    from adjoint.render.latex.document import render_document
    tex = render_document(adjoint.load("problems/gradient_penalty.yaml").solve())
    assert "\\subsection{Backward pass 2: second order}" in tex
    assert "This backward pass starts from \\texttt{loss + (10 * sum(gx ** 2))}, not from the loss: $r_{4}$ below" in tex
    assert "\\texttt{create\\_graph=True}: each node's backward formula runs as recorded operations" in tex
    assert "Backward pass 2: Lagrangian" not in tex


# ----------------------------------------------------------------------------- random compositions

import random  # noqa: E402

UNARY = [("tanh({})", torch.tanh), ("relu({})", torch.relu), ("({}) ** 2", lambda a: a ** 2),
         ("({}) ** 3", lambda a: a ** 3), ("-({})", lambda a: -a), ("({}) * 1.5", lambda a: a * 1.5),
         ("sigmoid({})", torch.sigmoid), ("exp({})", torch.exp), ("sin({})", torch.sin), ("cos({})", torch.cos),
         ("log(({}) ** 2 + 0.5)", lambda a: torch.log(a ** 2 + 0.5)),
         ("sqrt(({}) ** 2 + 0.5)", lambda a: torch.sqrt(a ** 2 + 0.5)),
         ("sinh({})", torch.sinh), ("cosh({})", torch.cosh), ("atan({})", torch.atan), ("expm1({})", torch.expm1),
         ("tan(({}) * 0.5)", lambda a: torch.tan(a * 0.5)), ("log1p(({}) ** 2)", lambda a: torch.log1p(a ** 2)),
         ("rsqrt(({}) ** 2 + 0.5)", lambda a: torch.rsqrt(a ** 2 + 0.5))]
BINARY = [("({}) * ({})", lambda a, b: a * b), ("({}) + ({})", lambda a, b: a + b),
          ("({}) - ({})", lambda a, b: a - b), ("({}) / (({}) ** 2 + 1)", lambda a, b: a / (b ** 2 + 1))]
LEAVES = ["x", "w", "c"]


def random_expr(rng, depth):
    """(adjoint source, torch function of (x, w, c)) of a random composition of modelled ops."""
    if depth == 0 or rng.random() < 0.25:
        name = rng.choice(LEAVES)
        return name, (lambda env, n=name: env[n])
    if rng.random() < 0.5:
        text, fn = rng.choice(UNARY)
        a, fa = random_expr(rng, depth - 1)
        return text.format(a), (lambda env: fn(fa(env)))
    text, fn = rng.choice(BINARY)
    a, fa = random_expr(rng, depth - 1)
    b, fb = random_expr(rng, depth - 1)
    return text.format(a, b), (lambda env: fn(fa(env), fb(env)))


RANDOM = """
name: random
dtype: float64
inputs:
  x: {value: [0.3, -0.5], requires_grad: true}
  w: {value: [0.7, 0.2], requires_grad: true}
  c: {value: [1.5], requires_grad: true}
model:
  inputs: [x, w, c]
  forward: "FORWARD"
loss: "REDUCE(y)"
steps:
  - forward
  - {backward: {method: grad, inputs: [x, w, c], create_graph: true, materialize_grads: true, as: [gx, gw, gc]}}
  - {backward: {method: grad, inputs: [x, w, c], root: "ROOT", materialize_grads: true, as: [hx, hw, hc]}}
"""


@pytest.mark.parametrize("seed", range(60))
def test_random_second_order_against_torch(seed):
    """Random compositions of the modelled ops: the first-order gradients' recorded graphs (names,
    sequence_nr) and the second grad's results, against torch."""
    rng = random.Random(seed)
    text, fn = random_expr(rng, 4)
    reduce = rng.choice(["sum", "mean"])
    _compare_second_order(text, fn, reduce)


@pytest.mark.parametrize("text, fn", [(t, f) for t, f in UNARY if t.split("(")[0] in
                                      ("sinh", "cosh", "atan", "expm1", "tan", "log1p", "rsqrt")])
def test_each_new_elementwise_function_second_order_against_torch(text, fn):
    """Each of sinh, cosh, atan, expm1, tan, log1p, rsqrt under create_graph (its backward formula's
    nodes and their sequence numbers, and the second gradient), on a product of two leaves."""
    _compare_second_order(text.format("x * w") + " * c", lambda env: fn(env["x"] * env["w"]) * env["c"], "sum")


@pytest.mark.parametrize("text, fn", [
    ("silu(x * w) * c", lambda env: torch.nn.functional.silu(env["x"] * env["w"]) * env["c"]),
    ("elu(x * w - 0.1, alpha=0.5) * c", lambda env: torch.nn.functional.elu(env["x"] * env["w"] - 0.1, alpha=0.5) * env["c"]),
    ("softplus(x * w, beta=2, threshold=0.2) * c",
     lambda env: torch.nn.functional.softplus(env["x"] * env["w"], beta=2, threshold=0.2) * env["c"]),
    ("gelu(x * w - 0.1) * c", lambda env: torch.nn.functional.gelu(env["x"] * env["w"] - 0.1) * env["c"]),
    ("gelu(x * w - 0.1, approximate='tanh') * c",
     lambda env: torch.nn.functional.gelu(env["x"] * env["w"] - 0.1, approximate="tanh") * env["c"]),
])
def test_silu_and_elu_second_order_against_torch(text, fn):
    """silu (infinitely_differentiable_silu_backward's six nodes), elu (EluBackwardBackward0), softplus
    (SoftplusBackwardBackward0) and gelu (GeluBackwardBackward0, both approximations: the second
    derivative of the tanh form has f' g h twice) under create_graph: the first gradients' graphs with
    their sequence numbers, and the second gradients."""
    _compare_second_order(text, fn, "sum")


THIRD = """
name: third
dtype: float64
inputs:
  x: {value: [0.3, -0.5], requires_grad: true}
  w: {value: [0.7, 0.2], requires_grad: true}
model:
  inputs: [x, w]
  forward: "FORWARD"
loss: "sum(y ** 2)"
steps:
  - forward
  - {backward: {method: grad, inputs: [x], create_graph: true, as: [gx]}}
  - {backward: {method: grad, inputs: [x, w], root: "sum(gx * gx)", create_graph: true, as: [hx, hw]}}
"""


@pytest.mark.parametrize("text, fn", [
    ("silu(x * w)", lambda x, w: torch.nn.functional.silu(x * w)),
    ("elu(x * w - 0.1, alpha=0.5)", lambda x, w: torch.nn.functional.elu(x * w - 0.1, alpha=0.5)),
    ("softplus(x * w, beta=2, threshold=0.2)", lambda x, w: torch.nn.functional.softplus(x * w, beta=2, threshold=0.2)),
    ("softplus(x * w - 0.1)", lambda x, w: torch.nn.functional.softplus(x * w - 0.1)),
    # IndexPutImplBackward0 (what IndexBackward0's formula records): grad itself, grad.index(indices)
    ("(x * w)[x > 0] * x[w > 0.5]", lambda x, w: (x * w)[x > 0] * x[w > 0.5]),
])
def test_silu_and_elu_third_order_graph_is_torchs(text, fn):
    """A create_graph backward through what the first one recorded: SiLU's plain nodes (AddBackward1
    included), and EluBackwardBackward0's own formula (elu_backward for grad_output, then
    elu_backward(grad * grad_output * input_scale) * (self < 0): MulBackward0, MulBackward1,
    EluBackwardBackward0, MulBackward0), node by node with torch's sequence numbers."""
    run, hx = ours(THIRD.replace("FORWARD", text), "hx")
    base = start_seq()
    x = torch.tensor([0.3, -0.5], dtype=F64, requires_grad=True)
    w = torch.tensor([0.7, 0.2], dtype=F64, requires_grad=True)
    gx, = torch.autograd.grad((fn(x, w) ** 2).sum(), [x], create_graph=True)
    hs = torch.autograd.grad((gx * gx).sum(), [x, w], create_graph=True)
    for name, h in zip(("hx", "hw"), hs):
        assert_same_graph(chain_ours(run.made[name]), chain_torch(h, base), f"{text} {name}")
        assert run.made[name].value.a.tolist() == pytest.approx(h.tolist(), abs=1e-12)


def _compare_second_order(text, fn, reduce):
    problem = adjoint.loads(RANDOM.replace("FORWARD", text).replace("REDUCE", reduce)
                            .replace("ROOT", "sum(gx * gx) + sum(gw) * 2 + sum(gc)"))
    base = start_seq()
    env = {"x": torch.tensor([0.3, -0.5], dtype=F64, requires_grad=True),
           "w": torch.tensor([0.7, 0.2], dtype=F64, requires_grad=True),
           "c": torch.tensor([1.5], dtype=F64, requires_grad=True)}
    out = fn(env)
    loss = out.sum() if reduce == "sum" else out.mean()
    leaves = [env["x"], env["w"], env["c"]]
    if not loss.requires_grad:
        pytest.skip("the composition does not require grad")
    gs = torch.autograd.grad(loss, leaves, create_graph=True, materialize_grads=True)
    root = (gs[0] * gs[0]).sum() + gs[1].sum() * 2 + gs[2].sum()
    run = run_variant(problem, problem.variants[0], Float64Backend(problem.dtype, None))
    if not root.requires_grad:
        assert run.error is not None and run.error.message.startswith("element 0 of tensors does not require grad")
        return
    hs = torch.autograd.grad(root, leaves, materialize_grads=True)
    assert run.error is None, run.error
    for name, g in zip(("gx", "gw", "gc"), gs):
        t = run.made[name]
        if t is not None and t.grad_fn is not None:
            assert_same_graph(chain_ours(t), chain_torch(g, base), f"{text} {name}")
    for name, h in zip(("hx", "hw", "hc"), hs):
        assert run.made[name].value.a.tolist() == pytest.approx(h.tolist(), abs=1e-9), (text, name)


MATRIX = """
name: matrix
dtype: float64
inputs:
  a: {value: [[-0.3, -0.15, 0.4], [0.2, 0.35, -0.5]], requires_grad: true}
  b: {value: [[0.2, 0.4, 0.6], [0.8, 1.0, 1.2]], requires_grad: true}
model:
  inputs: [a, b]
  forward: |
    h = a * b
    return FORWARD
loss: "sum(y ** 2)"
steps:
  - forward
  - {backward: {method: grad, inputs: [a, b], create_graph: true, as: [ga, gb]}}
  - {backward: {method: grad, inputs: [a, b], root: "sum(ga * ga) + sum(gb ** 3)", as: [ha, hb]}}
"""

SHAPED = [
    ("leaky_relu(h, 0.1)", lambda h: torch.nn.functional.leaky_relu(h, 0.1)),
    ("sum(h, dim=1)", lambda h: h.sum(1)),
    ("h.sum(0, keepdim=True)", lambda h: h.sum(0, keepdim=True)),
    ("sum(h, dim=(0, 1))", lambda h: h.sum((0, 1))),
    ("mean(h, dim=1)", lambda h: h.mean(1)),
    ("h.mean(-1, keepdim=True) * h", lambda h: h.mean(-1, keepdim=True) * h),
    ("h.unsqueeze(0)", lambda h: h.unsqueeze(0)),
    ("h.unsqueeze(0).squeeze(0) * h", lambda h: h.unsqueeze(0).squeeze(0) * h),
    ("h.unsqueeze(1).squeeze() * 2", lambda h: h.unsqueeze(1).squeeze() * 2),
    ("h.transpose(0, 1)", lambda h: h.transpose(0, 1)),
    ("h.permute(1, 0) * 3", lambda h: h.permute(1, 0) * 3),
    ("tanh(h.t()) @ h", lambda h: torch.tanh(h.t()) @ h),
]


@pytest.mark.parametrize("forward,twin", SHAPED, ids=[s[0] for s in SHAPED])
def test_shaped_ops_second_order_against_torch(forward, twin):
    """Reductions over dims, views and leaky_relu: the recorded graphs of the first-order
    gradients node for node, and the grad of grad, against torch."""
    run = _run(MATRIX.replace("FORWARD", forward))
    assert run.error is None, run.error
    base = start_seq()
    a, b = _two_leaves()
    loss = (twin(a * b) ** 2).sum()
    ga, gb = torch.autograd.grad(loss, [a, b], create_graph=True)
    assert_same_graph(chain_ours(run.made["ga"]), chain_torch(ga, base), forward + " ga")
    assert_same_graph(chain_ours(run.made["gb"]), chain_torch(gb, base), forward + " gb")
    ha, hb = torch.autograd.grad((ga * ga).sum() + (gb ** 3).sum(), [a, b])
    assert run.made["ha"].value.a.ravel().tolist() == pytest.approx(ha.flatten().tolist(), abs=1e-9)
    assert run.made["hb"].value.a.ravel().tolist() == pytest.approx(hb.flatten().tolist(), abs=1e-9)


MATERIALIZED = """
name: materialized_without_graph
inputs:
  x: {value: [1, -2], requires_grad: true}
  u: {value: [3], requires_grad: true}
model:
  inputs: [x, u]
  forward: "(x * x).sum()"
steps:
  - forward
  - {backward: {method: grad, inputs: [x, u], materialize_grads: true, as: [gx, gu]}}
  - {backward: {root: "sum(gu * 2)"}}
"""


def test_materialized_zeros_require_grad_only_with_create_graph():
    """torch.autograd.grad makes them with torch.zeros_like(input, requires_grad=create_graph): without
    create_graph a backward from them is PyTorch's error (adjoint gave them requires_grad, found by
    a docs trial)."""
    x = torch.tensor([1., -2], requires_grad=True)
    u = torch.tensor([3.], requires_grad=True)
    _, gu = torch.autograd.grad((x * x).sum(), [x, u], materialize_grads=True)
    assert not gu.requires_grad
    with pytest.raises(RuntimeError) as caught:
        (gu * 2).sum().backward()
    got = adjoint.loads(MATERIALIZED).solve().to_json()["variants"]["default"]["error"]
    assert (got["type"], got["message"]) == ("RuntimeError", str(caught.value))


ACCUMULATED = """
name: accumulate_into_a_graph_grad
dtype: float64
inputs:
  x: {value: [0.5, -1], requires_grad: true}
model:
  forward: "x ** 3"
loss: "sum(y)"
steps:
  - forward
  - {backward: {create_graph: true}}
  - {backward: {retain_graph: true}}
  - {backward: {root: "sum(x.grad)"}}
"""


def test_a_plain_backward_accumulates_into_a_graph_grad_in_place():
    """AccumulateGrad with grad mode off does variable_grad += new_grad in place: the .grad a
    create_graph backward made keeps its graph, and a backward from it runs (it was answered
    'element 0 of tensors does not require grad'; found by an advanced-features trial)."""
    x = torch.tensor([0.5, -1], dtype=torch.float64, requires_grad=True)
    loss = (x ** 3).sum()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loss.backward(create_graph=True)
        loss.backward(retain_graph=True)
        assert x.grad.requires_grad
        x.grad.sum().backward()
    got = adjoint.loads(ACCUMULATED).solve().to_json()["variants"]["default"]
    assert got.get("error") is None
    assert got["grads"]["x"]["value"] == x.grad.tolist() == [4.5, 0.0]


def _accumulated_with_post_hook(register_at: int):
    """ACCUMULATED in torch with a post-accumulate hook doubling tensor.grad in place, registered
    before backward ``register_at`` (0: from the start): the final x.grad."""
    x = torch.tensor([0.5, -1], dtype=torch.float64, requires_grad=True)
    loss = (x ** 3).sum()

    def double(t):
        t.grad.mul_(2)
    steps = [lambda: loss.backward(create_graph=True), lambda: loss.backward(retain_graph=True),
             lambda: x.grad.sum().backward()]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i, step in enumerate(steps):
            if i == register_at:
                x.register_post_accumulate_grad_hook(double)
            step()
    return x.grad


def test_a_post_accumulate_hook_with_a_body_in_a_create_graph_backward():
    """There PyTorch runs it with grad mode on and .grad has a graph: its ops on tensor.grad are
    recorded (MulBackward0 on the CopyBackwards .grad), and the later backwards go through them
    (adjoint once ran it with grad mode off and answered wrongly; then refused it; now modelled)."""
    text = ACCUMULATED.replace("steps:", 'hooks:\n  - {tensor: x, kind: post_accumulate_grad, does: "tensor.grad.mul_(2)"}\nsteps:')
    got = adjoint.loads(text).solve().to_json()["variants"]["default"]
    assert got.get("error") is None
    assert got["grads"]["x"]["value"] == _accumulated_with_post_hook(0).tolist()


FORWARD_LEAF = """
name: forward_leaf
dtype: float64
inputs:
  a: [0.5, -1]
  w: {value: [2, 3], requires_grad: true}
model:
  inputs: [a, w]
  forward: |
    xh = a * 2
    xh.requires_grad_()
    return (xh ** 2 * w).sum()
"""


def test_a_leaf_the_forward_makes_is_in_grads():
    """WGAN-GP's interpolate: a leaf the forward makes with requires_grad_() gets a .grad, and the
    answer's grads lists every leaf that requires grad (it was left out; found by an
    advanced-features trial)."""
    a = torch.tensor([0.5, -1], dtype=torch.float64)
    w = torch.tensor([2., 3], dtype=torch.float64, requires_grad=True)
    xh = a * 2
    xh.requires_grad_()
    (xh ** 2 * w).sum().backward()
    got = adjoint.loads(FORWARD_LEAF).solve().to_json()["variants"]["default"]["grads"]
    assert got["xh"]["value"] == xh.grad.tolist()
    assert got["w"]["value"] == w.grad.tolist()


def test_a_post_accumulate_hook_writing_a_graph_grad_in_a_plain_backward():
    """Its in-place write keeps the .grad's graph (grad mode is off there), so a later backward
    through x.grad goes through that graph (adjoint once dropped it and lost a term, found by an
    adversarial review; then refused it; now the body reads .grad as that tensor itself)."""
    text = ACCUMULATED.replace("steps:", 'hooks:\n  - {tensor: x, kind: post_accumulate_grad, does: "tensor.grad.mul_(2)"}\nsteps:')
    text = text.replace("  - {backward: {create_graph: true}}\n", "  - {backward: {create_graph: true}}\n  - {register: [0]}\n")
    got = adjoint.loads(text).solve().to_json()["variants"]["default"]
    assert got.get("error") is None
    assert got["grads"]["x"]["value"] == _accumulated_with_post_hook(1).tolist()


MATERIALIZED_LEAF = MATERIALIZED.replace("materialize_grads: true,", "create_graph: true, materialize_grads: true,") \
    .replace('{backward: {root: "sum(gu * 2)"}}', '{backward: {root: "sum(gu * 2) + sum(gx * gx)"}}')


def test_a_leaf_a_grad_step_materializes_is_in_grads():
    """Under create_graph, materialize_grads' zeros for an unused input require grad: a new leaf,
    whose .grad a later backward fills. The answer's grads lists it, from the step that made it
    (it was left out, and verify's torch side left it out too; found by a contract-v3 trial)."""
    x = torch.tensor([1., -2], requires_grad=True)
    u = torch.tensor([3.], requires_grad=True)
    gx, gu = torch.autograd.grad((x * x).sum(), [x, u], create_graph=True, materialize_grads=True)
    assert gu.is_leaf and gu.requires_grad
    ((gu * 2).sum() + (gx * gx).sum()).backward()
    got = adjoint.loads(MATERIALIZED_LEAF).solve().to_json()["variants"]["default"]
    assert got["grads"]["gu"]["value"] == gu.grad.tolist() == [2.0]
    assert got["grads"]["x"]["value"] == x.grad.tolist()
    assert "gx" not in got["grads"]          # a non-leaf, not retained
    assert got["passes"][0]["grads"]["gu"] is None


def test_an_in_place_ops_saved_clone_is_the_value_before_the_write():
    """h = w * x; h.pow_(2): PowBackward0 saved self.clone(), the value before the write, whose
    CloneBackward0 leads to MulBackward0 (w * x). Under create_graph gx = 2 (w x) w = 2 w^2 x, and the
    backward of sum(gx^2) gives 8 w^4 x to x and 16 w^3 x^2 to w (by hand; torch 2.13 prints the same).
    adjoint used the written h (w x)^2 there: gx[0] was 0.06174, not 0.294."""
    text = """
name: ip
dtype: float64
inputs:
  x: {value: [0.3, -0.5], requires_grad: true}
  w: {value: [0.7, 0.2], requires_grad: true}
model:
  inputs: [x, w]
  forward: |
    h = w * x
    h.pow_(2)
    return h
loss: "sum(y)"
steps:
  - forward
  - {backward: {method: grad, inputs: [x], create_graph: true, as: [gx]}}
  - {backward: {method: grad, inputs: [x, w], root: "sum(gx ** 2)", as: [hx, hw]}}
"""
    run, gx = ours(text)
    assert gx.value.a.tolist() == pytest.approx([0.294, -0.04], abs=1e-15)
    assert run.made["hx"].value.a.tolist() == pytest.approx([0.57624, -0.0064], abs=1e-15)
    assert run.made["hw"].value.a.tolist() == pytest.approx([0.49392, 0.032], abs=1e-15)


SELECTING = """
name: selecting
dtype: float64
inputs:
  a: {value: [[-0.3, -0.15, 0.4], [0.2, 0.35, -0.5]], requires_grad: true}
  b: {value: [[0.2, 0.4, 0.6], [0.8, 1.0, 1.2]], requires_grad: true}
  idx: {value: [[2, 0, 2], [1, 1, 0]], dtype: int64}
model:
  inputs: [a, b, idx]
  forward: |
    h = a * b
    return FORWARD
loss: "sum(y ** 3)"
steps:
  - forward
  - {backward: {method: grad, inputs: [a, b], create_graph: true, as: [ga, gb]}}
  - {backward: {method: grad, inputs: [a, b], root: "sum(ga * ga) + sum(gb ** 3)", as: [ha, hb]}}
"""

_IDX = [[2, 0, 2], [1, 1, 0]]

GLUE = [  # (forward, the same in torch of h and the index)
    # value_selecting_reduction_backward: zeros(sizes).scatter_(dim, indices, grad): ScatterBackward0
    ("torch.sort(h, dim=1)[0]", lambda h, i: torch.sort(h, dim=1)[0]),
    ("h.sort(0, descending=True)[0]", lambda h, i: h.sort(0, descending=True)[0]),
    ("torch.sort(h, stable=True)[0]", lambda h, i: torch.sort(h, stable=True)[0]),
    ("torch.topk(h.flip(1) + h * 2, 2, dim=1)[0]", lambda h, i: torch.topk(h.flip(1) + h * 2, 2, dim=1)[0]),
    ("h.topk(1, dim=0, largest=False)[0]", lambda h, i: h.topk(1, dim=0, largest=False)[0]),
    # without keepdim: grad.unsqueeze(dim) (UnsqueezeBackward0) first
    ("h.max(dim=1)[0]", lambda h, i: h.max(dim=1)[0]),
    ("h.min(0, keepdim=True)[0]", lambda h, i: h.min(0, keepdim=True)[0]),
    ("torch.kthvalue(h, 2, dim=0)[0]", lambda h, i: torch.kthvalue(h, 2, dim=0)[0]),
    ("h.median(dim=0, keepdim=True)[0]", lambda h, i: h.median(dim=0, keepdim=True)[0]),
    # gather_backward: new_zeros(self.sizes()).scatter_add_(dim, index, grad): ScatterAddBackward0
    ("torch.gather(h, 1, idx)", lambda h, i: torch.gather(h, 1, i)),
    ("torch.take_along_dim(h, idx[1:], dim=0)", lambda h, i: torch.take_along_dim(h, i[1:], dim=0)),
    # grad.flip(dims); grad.roll(-reversed shifts, reversed dims); cumsum: flip, cumsum, flip
    ("h.flip(1) * h", lambda h, i: h.flip(1) * h),
    ("h.roll((1, -1), (0, 1)) * h", lambda h, i: h.roll((1, -1), (0, 1)) * h),
    ("torch.roll(h, 2) * h", lambda h, i: torch.roll(h, 2) * h),
    ("torch.cumsum(h, dim=1) * h", lambda h, i: torch.cumsum(h, dim=1) * h),
    ("h[:, :1].cumsum(1) * 2", lambda h, i: h[:, :1].cumsum(1) * 2),
    # repeat_backward: sum(0) per leading dim; reshape (ViewBackward0) and sum where a repeat is not 1
    ("h.repeat(2, 1)", lambda h, i: h.repeat(2, 1)),
    ("torch.tile(h, (2, 2, 3))", lambda h, i: torch.tile(h, (2, 2, 3))),
    ("h.repeat(3, 1, 1)", lambda h, i: h.repeat(3, 1, 1)),
    ("h.repeat(1, 1) * h", lambda h, i: h.repeat(1, 1) * h),
    # hardtanh_backward(grad, self, min_val, max_val): HardtanhBackwardBackward0 (relu6 too)
    ("F.hardtanh(h * 4, -0.5, 0.75) * h", lambda h, i: torch.nn.functional.hardtanh(h * 4, -0.5, 0.75) * h),
    ("F.relu6(h * 20) * h", lambda h, i: torch.nn.functional.relu6(h * 20) * h),
    # cumprod_backward without a zero: reversed_cumsum(output * grad, dim).div(input)
    ("torch.cumprod(h, dim=1)", lambda h, i: torch.cumprod(h, dim=1)),
    ("h.cumprod(0) * h", lambda h, i: h.cumprod(0) * h),
    ("h[:1].cumprod(0)", lambda h, i: h[:1].cumprod(0)),
    # diagonal_backward(grad, sizes, offset, dim1, dim2): DiagonalBackwardBackward0
    ("torch.diagonal(h) * h[:, 1]", lambda h, i: torch.diagonal(h) * h[:, 1]),
    ("torch.stack([h, h * 2]).diagonal(-1, 2, 1)", lambda h, i: torch.stack([h, h * 2]).diagonal(-1, 2, 1)),
]


@pytest.mark.parametrize("forward,twin", GLUE, ids=[s[0] for s in GLUE])
def test_selecting_and_rearranging_ops_second_order_against_torch(forward, twin):
    """sort, topk, max/min/kthvalue/median along a dim, gather (take_along_dim), flip, roll, cumsum
    and repeat (tile) under create_graph: the recorded graphs node for node (names and
    sequence_nr) and the grad of grad, against torch 2.13 (they were refused before)."""
    _compare_selecting(forward, lambda h, i, b: twin(h, i))


LAYER_NORMS = [  # NativeLayerNormBackward0's formula: native_layer_norm_backward, NativeLayerNormBackwardBackward0
    ("F.layer_norm(h, (3,))", lambda h, b: torch.nn.functional.layer_norm(h, (3,))),
    ("F.layer_norm(h, (3,), b[0] * 2, b[1])", lambda h, b: torch.nn.functional.layer_norm(h, (3,), b[0] * 2, b[1])),
    ("F.layer_norm(h, (2, 3), eps=0.5) * h", lambda h, b: torch.nn.functional.layer_norm(h, (2, 3), eps=0.5) * h),
    ("F.layer_norm(h.t(), (2,), b[0, :2]) + h.t()",
     lambda h, b: torch.nn.functional.layer_norm(h.t(), (2,), b[0, :2]) + h.t()),
    ("F.layer_norm(h, (3,), b[1] * h[0])", lambda h, b: torch.nn.functional.layer_norm(h, (3,), b[1] * h[0])),
]


@pytest.mark.parametrize("forward,twin", LAYER_NORMS, ids=[s[0] for s in LAYER_NORMS])
def test_layer_norm_second_order_against_torch(forward, twin):
    """layer_norm under create_graph: NativeLayerNormBackwardBackward0 (edges grad_out, input, mean and
    rstd (no graph), weight, bias; saves grad_out, input, mean, rstd, weight) and the grad of grad
    (layer_norm_double_backward), against torch 2.13 (refused before)."""
    _compare_selecting(forward, lambda h, i, b: twin(h, b))


def _put(h, key, value, accumulate=False):
    """``z = h * 1`` then ``z[key] = value()`` (or index_put_ with accumulate), in the forward's order."""
    z = h * 1
    if accumulate:
        return z.index_put_(key, value(), accumulate=True)
    z[key] = value()
    return z


INDEXING = [  # IndexBackward0's formula: _index_put_impl_(zeros, indices, grad, true, true): IndexPutImplBackward0
    ("h[idx[1]]", lambda h, i, b: h[i[1]]),
    ("h[h > 0]", lambda h, i, b: h[h > 0]),
    ("h[:, idx[1]] * h[:, :3]", lambda h, i, b: h[:, i[1]] * h[:, :3]),
    ("h[idx[1, :2], idx[0, :2]]", lambda h, i, b: h[i[1, :2], i[0, :2]]),
    ("h[b > 0.5]", lambda h, i, b: h[b > 0.5]),
    # IndexPutBackward0: self (grad.index_put(indices, zeros_like(values))) before values (grad.index(indices))
    ("PUT1", lambda h, i, b: _put(h, i[1, 1:], lambda: b[0] * 2)),
    ("PUT2", lambda h, i, b: _put(h, (slice(None), i[0, :2]), lambda: b[:, :1] * 2)),
    ("PUT3", lambda h, i, b: _put(h, h > 0, lambda: b[b > 0.5][:3] * 2)),
    ("PUTACC", lambda h, i, b: _put(h, (i[1, :2],), lambda: b[0] * 2, accumulate=True)),
]
_PUTS = {
    "PUT1": "z = h * 1\n    z[idx[1, 1:]] = b[0] * 2\n    return z",
    "PUT2": "z = h * 1\n    z[:, idx[0, :2]] = b[:, :1] * 2\n    return z",
    "PUT3": "z = h * 1\n    z[h > 0] = b[b > 0.5][:3] * 2\n    return z",
    "PUTACC": "z = h * 1\n    z.index_put_((idx[1, :2],), b[0] * 2, accumulate=True)\n    return z",
}


@pytest.mark.parametrize("forward,twin", INDEXING, ids=[s[0] for s in INDEXING])
def test_advanced_indexing_second_order_against_torch(forward, twin):
    """x[idx], x[mask] (IndexBackward0, whose formula records IndexPutImplBackward0) and x[idx] = v,
    index_put_ (IndexPutBackward0: IndexPutBackward0 and IndexBackward0, the value's gradient summed to
    its shape) under create_graph, against torch 2.13 (refused before)."""
    _compare_selecting(_PUTS.get(forward, "return " + forward), twin, statements=True)


REDUCTIONS = [  # (forward, the same in torch of h)
    # var_backward: (2.0 / dof) * grad * (self - self.mean(dim, true)): the unsqueezed grad, MeanBackward, SubBackward0,
    # MulBackward1 (the double 2 / dof), MulBackward0; std_backward first: MulBackward1, DivBackward0, MaskedFillBackward0
    ("h.var()", lambda h: h.var()),
    ("h.var(1)", lambda h: h.var(1)),
    ("torch.var(h, 0, correction=0, keepdim=True)", lambda h: torch.var(h, 0, correction=0, keepdim=True)),
    ("h.std()", lambda h: h.std()),
    ("h.std(1) * h[:, 0]", lambda h: h.std(1) * h[:, 0]),
    ("torch.std(h, dim=0, keepdim=True)", lambda h: torch.std(h, dim=0, keepdim=True)),
    # scale_grad_by_count: the result's view, the gradient's view, DivBackward0 by the count, MulBackward0 by the mask
    # (h's first row has a tie for its min)
    ("h.amax(1)", lambda h: h.amax(1)),
    ("h.amax()", lambda h: h.amax()),
    ("h.amin(0, keepdim=True)", lambda h: h.amin(0, keepdim=True)),
    ("torch.amin(h, dim=1)", lambda h: torch.amin(h, dim=1)),
    ("torch.amax(h, dim=(0, 1))", lambda h: torch.amax(h, dim=(0, 1))),
    # prod_backward without a zero: grad * (result / self), unsqueezed first without keepdim
    ("h.prod()", lambda h: h.prod()),
    ("h.prod(1)", lambda h: h.prod(1)),
    ("torch.prod(h, 0, keepdim=True)", lambda h: torch.prod(h, 0, keepdim=True)),
    # norm_backward, order 2: grad * (self / norm).masked_fill_(norm == 0, 0)
    ("torch.norm(h)", lambda h: torch.linalg.vector_norm(h)),
    ("h.norm(dim=1)", lambda h: h.norm(dim=1)),
    ("torch.norm(h, dim=0, keepdim=True)", lambda h: torch.linalg.vector_norm(h, dim=0, keepdim=True)),
    # formulas with a double constant: erf (2 / sqrt(pi)), log2 (M_LN2), log10 (M_LN10)
    ("torch.erf(h * 3)", lambda h: torch.erf(h * 3)),
    ("torch.log2(h * h + 0.5)", lambda h: torch.log2(h * h + 0.5)),
    ("torch.log10(h * h + 0.5)", lambda h: torch.log10(h * h + 0.5)),
    # hardswish_backward: HardswishBackwardBackward0; mish: infinitely_differentiable_mish_backward's ten nodes
    ("F.hardswish(h * 10)", lambda h: torch.nn.functional.hardswish(h * 10)),
    ("F.mish(h * 3)", lambda h: torch.nn.functional.mish(h * 3)),
]


@pytest.mark.parametrize("forward,twin", REDUCTIONS, ids=[s[0] for s in REDUCTIONS])
def test_reductions_and_constant_formulas_second_order_against_torch(forward, twin):
    """var, std, amax, amin, prod, the 2-norm, erf, log2, log10, hardswish and mish under create_graph: the
    recorded graphs node for node and the grad of grad, against torch 2.13 (refused before)."""
    _compare_selecting(forward, lambda h, i, b: twin(h))


def _compare_selecting(forward, twin, statements=False):
    text = SELECTING.replace("return FORWARD", forward) if statements else SELECTING.replace("FORWARD", forward)
    run = _run(text)
    assert run.error is None, run.error
    base = start_seq()
    a, b = _two_leaves()
    loss = (twin(a * b, torch.tensor(_IDX), b) ** 3).sum()
    ga, gb = torch.autograd.grad(loss, [a, b], create_graph=True)
    assert_same_graph(chain_ours(run.made["ga"]), chain_torch(ga, base), forward + " ga")
    assert_same_graph(chain_ours(run.made["gb"]), chain_torch(gb, base), forward + " gb")
    assert run.made["ga"].value.a.ravel().tolist() == pytest.approx(ga.flatten().tolist(), abs=1e-12)
    ha, hb = torch.autograd.grad((ga * ga).sum() + (gb ** 3).sum(), [a, b])
    assert run.made["ha"].value.a.ravel().tolist() == pytest.approx(ha.flatten().tolist(), abs=1e-9, rel=1e-12)
    assert run.made["hb"].value.a.ravel().tolist() == pytest.approx(hb.flatten().tolist(), abs=1e-9, rel=1e-12)


HARDSIGMOID = """
name: hardsigmoid
dtype: float64
inputs:
  a: {value: [[-0.3, -0.15, 0.4], [0.2, 0.35, -0.5]], requires_grad: true}
  b: {value: [[0.2, 0.4, 0.6], [0.8, 1.0, 1.2]], requires_grad: true}
model:
  inputs: [a, b]
  forward: |
    h = a * b * 10
    return F.hardsigmoid(h) * h
loss: "sum(y ** 2)"
steps:
  - forward
  - {backward: {method: grad, inputs: [a, b], create_graph: true, as: [ga, gb]}}
  - {backward: {method: grad, inputs: [a], root: "sum(ga * ga)", as: [ha]}}
"""


def test_create_graph_through_hardsigmoid_records_a_not_implemented_node():
    """derivatives.yaml has no formula for hardsigmoid_backward: under create_graph PyTorch records a
    torch::autograd::NotImplemented node (sequence_nr UINT64_MAX, drawing no number: the nodes after
    it are numbered as if it were not there), edges to the gradient and to self; the create_graph
    backward succeeds, and a backward that reaches the node raises "derivative for
    aten::hardsigmoid_backward is not implemented" (torch 2.13; adjoint refused the first backward)."""
    run = _run(HARDSIGMOID)
    base = start_seq()
    a, b = _two_leaves()
    h = a * b * 10
    ga, gb = torch.autograd.grad(((torch.nn.functional.hardsigmoid(h) * h) ** 2).sum(), [a, b], create_graph=True)

    def unnumbered(chain):
        return [(name, None if seq is not None and seq >= 2 ** 63 - base else seq, kids) for name, seq, kids in chain]
    theirs = unnumbered(chain_torch(ga, base))
    assert "torch::autograd::NotImplemented" in [name for name, _, _ in theirs]
    assert_same_graph(chain_ours(run.made["ga"]), theirs, "ga")
    assert_same_graph(chain_ours(run.made["gb"]), unnumbered(chain_torch(gb, base)), "gb")
    assert run.made["ga"].value.a.ravel().tolist() == pytest.approx(ga.flatten().tolist(), abs=1e-12)
    with pytest.raises(RuntimeError) as caught:
        torch.autograd.grad((ga * ga).sum(), [a])
    assert str(caught.value) == "derivative for aten::hardsigmoid_backward is not implemented"
    assert (run.error.type, run.error.message) == ("RuntimeError", str(caught.value))


def test_create_graph_through_a_delayed_error_raises_its_message():
    """DelayedError's Error node throws whatever it is handed, under create_graph as without
    (torch 2.13: RuntimeError "Boom!"); adjoint refused ("create_graph through
    torch::autograd::Error is not modelled yet")."""
    text = """
name: delayed
dtype: float64
inputs:
  x: {value: [0.5, -1], requires_grad: true}
model:
  inputs: [x]
  forward: "delayed_error(x * x, 'Boom!') * x"
loss: "sum(y)"
steps:
  - forward
  - {backward: {method: grad, inputs: [x], create_graph: true, as: [g]}}
"""
    x = torch.tensor([0.5, -1], dtype=F64, requires_grad=True)
    y = torch._C._functions.DelayedError("Boom!", 1)(x * x) * x
    with pytest.raises(RuntimeError) as caught:
        torch.autograd.grad(y.sum(), [x], create_graph=True)
    got = adjoint.loads(text).solve().to_json()["variants"]["default"]["error"]
    assert (got["type"], got["message"]) == ("RuntimeError", str(caught.value)) == ("RuntimeError", "Boom!")


LOGSIGMOID = """
name: logsigmoid
dtype: float64
inputs:
  a: {value: [[-0.3, -0.15, 0.4], [0.2, 0.35, -0.5]], requires_grad: true}
  b: {value: [[0.2, 0.4, 0.6], [0.8, 1.0, 1.2]], requires_grad: true}
model:
  inputs: [a, b]
  forward: |
    h = a * b * 10
    return F.logsigmoid(h) * h
loss: "sum(y ** 2)"
steps:
  - forward
  - {backward: {method: grad, inputs: [a, b], create_graph: true, as: [ga, gb]}}
  - {backward: {method: grad, inputs: [a, b], root: "sum(ga * ga) + sum(gb ** 3)", as: [ha, hb]}}
"""


@pytest.mark.parametrize("hooks", [False, True], ids=["plain", "saved_tensor_hooks"])
def test_create_graph_through_logsigmoid(hooks):
    """LogSigmoidBackward0 under create_graph records log_sigmoid_backward(grad, self, buffer): one
    LogSigmoidBackwardBackward0 (edges to the gradient and self; the buffer, the forward's second
    output, has none), whose backward is log_sigmoid_backward(grad, self, buffer) for grad_output and
    log_sigmoid_double_backward(grad * grad_output, self) = g go (z - 1) z for self (torch 2.13; adjoint
    refused it). With saved-tensor hooks packing every tensor (the buffer too), the same."""
    text = LOGSIGMOID
    if hooks:
        text += "hooks:\n  - {saved_tensors: {pack: \"x\", unpack: \"x\"}}\n"
    run = _run(text)
    assert run.error is None, run.error
    base = start_seq()
    a, b = _two_leaves()
    h = a * b * 10
    ga, gb = torch.autograd.grad(((torch.nn.functional.logsigmoid(h) * h) ** 2).sum(), [a, b], create_graph=True)
    if not hooks:
        assert "LogSigmoidBackwardBackward0" in [n for n, _, _ in chain_torch(ga, base)]
        assert_same_graph(chain_ours(run.made["ga"]), chain_torch(ga, base), "ga")
        assert_same_graph(chain_ours(run.made["gb"]), chain_torch(gb, base), "gb")
    assert run.made["ga"].value.a.ravel().tolist() == pytest.approx(ga.flatten().tolist(), abs=1e-12)
    ha, hb = torch.autograd.grad((ga * ga).sum() + (gb ** 3).sum(), [a, b])
    assert run.made["ha"].value.a.ravel().tolist() == pytest.approx(ha.flatten().tolist(), abs=1e-9)
    assert run.made["hb"].value.a.ravel().tolist() == pytest.approx(hb.flatten().tolist(), abs=1e-9)


def test_a_third_backward_through_diagonal_backward():
    """DiagonalBackwardBackward0's own formula is grad.diagonal(offset, dim1, dim2) (DiagonalBackward0):
    a third backward through it, against torch 2.13."""
    text = SELECTING.replace("FORWARD", "torch.diagonal(h, 1) * h[:, 0]").replace(
        "  - {backward: {method: grad, inputs: [a, b], root: \"sum(ga * ga) + sum(gb ** 3)\", as: [ha, hb]}}",
        "  - {backward: {method: grad, inputs: [a, b], root: \"sum(ga * ga) + sum(gb ** 3)\", create_graph: true, "
        "as: [ha, hb]}}\n  - {backward: {method: grad, inputs: [a, b], root: \"sum(ha ** 2) + sum(hb)\", as: [ka, kb]}}")
    run = _run(text)
    assert run.error is None, run.error
    a, b = _two_leaves()
    h = a * b
    ga, gb = torch.autograd.grad(((torch.diagonal(h, 1) * h[:, 0]) ** 3).sum(), [a, b], create_graph=True)
    ha, hb = torch.autograd.grad((ga * ga).sum() + (gb ** 3).sum(), [a, b], create_graph=True)
    assert "DiagonalBackwardBackward0" in [n for n, _, _ in chain_torch(ha, 0)] + [n for n, _, _ in chain_torch(hb, 0)]
    ka, kb = torch.autograd.grad((ha ** 2).sum() + hb.sum(), [a, b])
    assert run.made["ka"].value.a.ravel().tolist() == pytest.approx(ka.flatten().tolist(), abs=1e-9)
    assert run.made["kb"].value.a.ravel().tolist() == pytest.approx(kb.flatten().tolist(), abs=1e-9)
