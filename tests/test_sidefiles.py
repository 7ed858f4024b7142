"""Tensors in side files (``value: {file: ...}``): read exactly, refused outside the problem's
directory. Expected values: Python's own exact float -> Fraction conversion, and real torch."""

import json
import os
import struct
from fractions import Fraction

import numpy as np
import pytest
from conftest import require_torch

import adjoint
from adjoint.format.errors import ProblemError

PROBLEM = """name: side
dtype: float32
inputs:
  x: {{value: [1, 2], requires_grad: true}}
model:
  type: Linear
  params:
    weight: {{value: {weight}}}
    bias: {{value: {bias}}}
loss: "sum(y * y)"
"""


def _safetensors(path, tensors: dict) -> None:
    header, blobs, offset = {}, [], 0
    for name, (code, array) in tensors.items():
        data = array.tobytes()
        header[name] = {"dtype": code, "shape": list(array.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + b"".join(blobs))


@pytest.fixture
def files(tmp_path):
    weight = np.array([[0.1, -2.5], [3.0, 1e-3]], dtype=np.float32)
    np.save(tmp_path / "w.npy", weight)
    bias = np.array([0.5, -0.2], dtype=np.float64)
    bf16 = (np.array([1.5, -0.1], dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16)
    _safetensors(tmp_path / "m.safetensors", {"fc.bias": ("F64", bias), "half": ("BF16", bf16)})
    return tmp_path, weight, bias


def _load(tmp_path, weight: str, bias: str):
    path = tmp_path / "p.yaml"
    path.write_text(PROBLEM.format(weight=weight, bias=bias))
    return adjoint.load(str(path))


def test_floats_are_read_exactly(files):
    tmp_path, weight, bias = files
    problem = _load(tmp_path, "{file: w.npy}", "{file: m.safetensors, key: fc.bias}")
    v = problem.solve().variants[0]
    expected_w = [[str(Fraction(float(x))) for x in row] for row in weight]
    assert v.values["weight"].strings() == expected_w
    assert v.values["bias"].strings() == [str(Fraction(float(b))) for b in bias]


def test_bfloat16_and_scale(files):
    tmp_path, weight, _ = files
    problem = _load(tmp_path, "{file: w.npy}", "{file: m.safetensors, key: half}")
    bias = problem.solve().variants[0].values["bias"].strings()
    top = int(np.array([-0.1], dtype=np.float32).view(np.uint32)[0]) >> 16 << 16  # -0.1 cut to bfloat16
    assert bias[1] == str(Fraction(float(np.array([top], dtype=np.uint32).view(np.float32)[0])))
    assert bias[0] == "3/2"
    scaled = _load(tmp_path, "{file: w.npy}", "{value: {file: m.safetensors, key: fc.bias}, scale: 2}")
    assert scaled.solve().variants[0].values["bias"].strings() == ["1", str(2 * Fraction(-0.2))]


@pytest.mark.parametrize("spec,message", [
    ("{file: ../w.npy}", "outside the problem's directory"),
    ("{file: /etc/passwd}", "outside the problem's directory"),
    ("{file: nothing.npy}", "there is no file 'nothing.npy'"),
    ("{file: m.safetensors}", "holds 2 tensors; say which with key:"),
    ("{file: m.safetensors, key: other}", "has no tensor 'other'"),
    ("{file: w.npy, key: k}", "a .npy file holds one array"),
    ("{file: w.txt}", "neither a .npy nor a .safetensors file"),
    ("{file: obj.npy}", "holds Python objects"),
    ("{file: nan.npy}", "holds nan at flat index 1"),
    ("{file: link.npy}", "leads outside the problem's directory"),
])
def test_refused(files, spec, message):
    tmp_path, _, _ = files
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    np.save(tmp_path / "nan.npy", np.array([1.0, np.nan]))
    (tmp_path / "w.txt").write_text("1 2")
    outside = tmp_path.parent / f"{tmp_path.name}-outside.npy"
    np.save(outside, np.zeros(2))
    if not (tmp_path / "link.npy").exists():
        os.symlink(outside, tmp_path / "link.npy")
    with pytest.raises(ProblemError, match=message.replace("(", r"\(").replace(".", r"\.")):
        _load(tmp_path, "{file: w.npy}", spec)


def test_a_problem_from_a_string_has_no_directory():
    with pytest.raises(ProblemError, match="has no directory"):
        adjoint.loads(PROBLEM.format(weight="{file: w.npy}", bias="[0, 0]"))


def test_int_tensor_from_a_side_file(tmp_path):
    np.save(tmp_path / "idx.npy", np.array([2, 0, 1], dtype=np.int32))
    path = tmp_path / "p.yaml"
    path.write_text("name: i\ninputs:\n  x: {value: [1.5, 2], requires_grad: true}\ntargets:\n"
                    "  t: {value: {file: idx.npy}, dtype: int64}\nmodel:\n  inputs: [x]\n  forward: \"x * 2\"\n"
                    "loss: \"sum(y)\"\n")
    problem = adjoint.load(str(path))
    (t,) = problem.targets
    assert t.dtype == "int64" and list(t.value.items) == [2, 0, 1] and t.value.shape == (3,)
    problem.solve()


@pytest.mark.torch
def test_verify_with_side_files(files):
    require_torch()
    from adjoint.torchside.compare import compare
    from adjoint.torchside import run_variant

    tmp_path, _, _ = files
    problem = _load(tmp_path, "{file: w.npy}", "{file: m.safetensors, key: fc.bias}")
    pred = problem.solve()
    for vp in pred.variants:
        rows = compare(vp.to_json(), run_variant(problem, problem.variant(vp.name), "float32"), "float32")
        assert all(r.ok for r in rows), [r for r in rows if not r.ok]
