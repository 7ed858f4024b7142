"""Read steps ({read: T.grad_fn._saved_SLOT, as: NAME}): the file syntax's refusals, and verify's
rows for the answer's ``reads`` (each field is held against what torch read; a difference fails).
Agreement with real torch: tests/data/regressions/saved_tensor_reads.yaml (test_differential)
and the saved-variable ports (tests/test_pytorch_ports.py)."""

import pytest

import adjoint
from adjoint.torchside.compare import compare_reads

FILE = """
name: reads
dtype: float64
inputs:
  a: {value: [0.5, -1.5], requires_grad: true}
model:
  inputs: [a]
  forward: "a * a"
loss: "sum(y)"
steps: [forward, READ]
"""


@pytest.mark.parametrize("read, words", [
    ("{read: y.grad_fn.saved_self, as: s}", "a read is TENSOR.grad_fn._saved_NAME"),
    ("{read: eval('1'), as: s}", "a read is TENSOR.grad_fn._saved_NAME"),
    ("{read: y.grad_fn._saved_self, as: 1s}", "'as' takes a Python name"),
    ("{read: y.grad_fn._saved_self}", "as"),
    ("{read: z.grad_fn._saved_self, as: s}", "not a tensor of this run"),
])
def test_bad_reads_are_located_errors(read, words):
    with pytest.raises(adjoint.ProblemError, match=words):
        adjoint.loads(FILE.replace("READ", read)).solve()


def test_a_read_of_the_input_itself():
    got = adjoint.loads(FILE.replace("READ", "{read: y.grad_fn._saved_self, as: s}")).solve().to_json()
    s = got["variants"]["default"]["reads"]["s"]
    # y = a * a saves a (a leaf) as self: the read is a itself, no grad_fn, a's values
    assert (s["is"], s["grad_fn"], s["grad_fn_of"], s["value"]["value"]) == (["a"], None, [], [0.5, -1.5])


def test_verify_rows_fail_on_any_difference():
    pred = {"s": {"read": "y.grad_fn._saved_self", "step": 1, "value": {"shape": [2], "value": [0.5, -1.5]},
                  "is": ["a"], "grad_fn": None, "grad_fn_of": [], "dtype": "float64"}}
    assert all(r.ok for r in compare_reads(pred, pred, 1e-10, 1e-12, "float64"))
    for key, other in (("is", []), ("grad_fn", "AddBackward0"), ("value", {"shape": [2], "value": [0.5, 1.5]}),
                       ("dtype", "float32")):
        obs = {"s": dict(pred["s"], **{key: other})}
        assert not any(r.ok for r in compare_reads(pred, obs, 1e-10, 1e-12, "float64")), key
    assert not any(r.ok for r in compare_reads(pred, {}, 1e-10, 1e-12, "float64"))


def test_a_read_name_used_twice_is_refused():
    two = "{read: y.grad_fn._saved_self, as: s}, {read: y.grad_fn._saved_other, as: s}"
    with pytest.raises(adjoint.ProblemError, match="reads into 's' again"):
        adjoint.loads(FILE.replace("READ", two)).solve()


def test_a_distributed_file_refuses_reads():
    text = """
name: ddp-read
dtype: float64
inputs:
  x: {per_rank: [[[1, 2]], [[2, -1]]]}
model:
  children:
    a: {type: Linear, params: {weight: [[0.5, 1]], bias: [1]}}
  forward: "a(x)"
loss: "y.sum()"
distributed: {world_size: 2, wrap: ddp}
steps: [forward, {read: torch._C._autograd._saved_tensors_hooks_is_enabled(), as: e}, backward]
"""
    with pytest.raises(adjoint.ProblemError, match="not modelled in a distributed"):
        adjoint.loads(text).solve()


FUNCTION = """
name: reads-function
dtype: float64
inputs:
  x: {value: [0.5, -1.5], requires_grad: true}
model:
  inputs: [x]
  forward: "x * x"
  function:
    name: SquareFunction
    backward:
      x: "2 * grad_output * x"
loss: "sum(y)"
steps: [forward, {read: y.grad_fn._saved_self, as: s}]
"""


def test_a_custom_function_node_has_no_saved_getter():
    got = adjoint.loads(FUNCTION).solve().to_json()["variants"]["default"]["error"]
    # PyTorch: a Function's node keeps what it saved as saved_tensors; no _saved_* getter
    assert (got["type"], got["message"], got["during"]) == \
        ("AttributeError", "'SquareFunctionBackward' object has no attribute '_saved_self'", "read")


def test_a_saved_python_number_is_refused():
    text = FILE.replace('forward: "a * a"', 'forward: "3 * a"').replace("READ", "{read: y.grad_fn._saved_other, as: s}")
    with pytest.raises(adjoint.ProblemError, match="Python number"):
        adjoint.loads(text).solve()
