"""Side files from outside: every malformed header, odd dtype or oversized promise is one
located line and exit 2 (never exit 3, never values read from the wrong bytes, never a
gigabyte allocated before the limit is checked). Expected messages are written by hand."""

import json
import struct

import numpy as np
import pytest
from click.testing import CliRunner

from adjoint.cli import main

PROBLEM = "name: sf\ninputs:\n  x: {{value: {{file: {name}}}, requires_grad: true}}\nmodel: {{type: Tanh}}\nloss: sum(y)\n"
F32 = np.arange(2, dtype=np.float32).tobytes()


def _st(header, data=b"") -> bytes:
    raw = json.dumps(header).encode() if not isinstance(header, bytes) else header
    return struct.pack("<Q", len(raw)) + raw + data


def _entry(**fields):
    entry = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
    entry.update(fields)
    return {"w": {k: v for k, v in entry.items() if v is not None}}


SAFETENSORS = {
    "top-list": (_st([1, 2]), "its header is not a JSON object"),
    "top-string": (_st("abc"), "its header is not a JSON object"),
    "entry-not-object": (_st({"w": 5}), "the entry of 'w' is not an object"),
    "offsets-missing": (_st(_entry(data_offsets=None), F32), "the entry of 'w' has no data_offsets"),
    "offsets-three": (_st(_entry(data_offsets=[0, 8, 9]), F32), "the data_offsets of 'w' are not two integers"),
    "offsets-strings": (_st(_entry(data_offsets=["0", "8"]), F32), "the data_offsets of 'w' are not two integers"),
    "offsets-floats": (_st(_entry(data_offsets=[0.0, 8.0]), F32), "the data_offsets of 'w' are not two integers"),
    "offsets-huge": (_st(_entry(data_offsets=[0, 1e30]), F32), "the data_offsets of 'w' are not two integers"),
    "offsets-odd": (_st(_entry(data_offsets=[0, 7]), F32), "'w' has 7 data bytes for shape [2] of F32 (8 bytes)"),
    "offsets-negative": (_st(_entry(data_offsets=[-8, 0]), F32),
                         "the data_offsets of 'w', [-8, 0], are not within its 8 data bytes"),
    "offsets-past-end": (_st(_entry(data_offsets=[0, 16]), F32),
                         "the data_offsets of 'w', [0, 16], are not within its 8 data bytes"),
    "shape-negative": (_st(_entry(shape=[-2]), F32), "the shape of 'w' is not a list of non-negative integers"),
    "shape-string": (_st(_entry(shape=["2"]), F32), "the shape of 'w' is not a list of non-negative integers"),
    "shape-missing": (_st(_entry(shape=None), F32), "the entry of 'w' has no shape"),
    "shape-bool": (_st(_entry(shape=[True, 2]), F32), "the shape of 'w' is not a list of non-negative integers"),
    "dtype-missing": (_st(_entry(dtype=None), F32), "the entry of 'w' has no dtype"),
    "deeply-nested": (_st(b"[" * 100000 + b"]" * 100000), "its header nests more than 32 levels deep"),
    "header-length": (struct.pack("<Q", 2 ** 63) + b"{}", "its header length 9223372036854775808 is longer than the file"),
    "short": (b"\x01\x02", "shorter than its 8-byte header length"),
    "not-json": (_st(b"{nope"), "its header is not JSON"),
    "huge-shape": (_st(_entry(shape=[100000, 100000]), F32), "has 10000000000 elements, more than 50000000"),
}


def _npy_claiming(shape) -> bytes:
    hdr = "{'descr': '<f8', 'fortran_order': False, 'shape': %r, }" % (shape,)
    hdr = hdr + " " * (118 - len(hdr)) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode() + b"\0" * 8


def _npy(array) -> bytes:
    import io
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


def _npz() -> bytes:
    import io
    buf = io.BytesIO()
    np.savez(buf, a=np.ones(3))
    return buf.getvalue()


NPY = {
    "empty": (b"", "'w.npy' is not a .npy file (it is empty)"),
    "npz": (_npz(), "'w.npy' is a .npz archive (numpy.savez), not a .npy file"),
    "garbage": (b"\x93NUMPY\x01\x00garbage", "'w.npy' is not a readable .npy file (its header:"),
    "text": (b"1 2 3\n", "'w.npy' is not a .npy file (it does not start with numpy's magic string)"),
    "claims-huge": (_npy_claiming((100000, 100000)), "'w.npy' has 10000000000 elements, more than 50000000"),
    "truncated": (_npy_claiming((1000,)), "'w.npy' is truncated: its header promises shape [1000]"),
    "float128": (_npy(np.array([0.1, 0.2], dtype=np.longdouble)), "holds float128 values, wider than float64"),
    "timedelta": (_npy(np.array([1, 2], dtype="timedelta64[s]")), "holds timedelta64[s] values (not real numbers)"),
    "complex": (_npy(np.array([1, 2], dtype=np.complex128)), "holds complex128 values (not real numbers)"),
    "structured": (_npy(np.zeros(2, dtype=[("a", "<f4")])), "values (not real numbers)"),
    "negative-dim": (_npy_claiming((2, -1)), "'w.npy' claims a negative dimension (shape [2, -1])"),
    "seventy-dims": (_npy_claiming((1,) * 70), "holds a 70-dimensional array; PyTorch tensors have at most 64"),
}


def _run(tmp_path, name, content):
    (tmp_path / name).write_bytes(content)
    problem = tmp_path / "p.yaml"
    problem.write_text(PROBLEM.format(name=name))
    result = CliRunner().invoke(main, ["solve", str(problem)])
    return result, str(problem)


def _refused(result, problem, message):
    assert result.exit_code == 2, (result.exit_code, result.stderr, result.exception)
    assert result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"{problem}:3:21: input 'x': ")
    assert message in line, line


@pytest.mark.parametrize("case", sorted(SAFETENSORS))
def test_malformed_safetensors_is_one_located_line(tmp_path, case):
    content, message = SAFETENSORS[case]
    _refused(*_run(tmp_path, "w.safetensors", content), message)


@pytest.mark.parametrize("case", sorted(NPY))
def test_malformed_npy_is_one_located_line(tmp_path, case):
    content, message = NPY[case]
    _refused(*_run(tmp_path, "w.npy", content), message)


def test_a_valid_safetensors_file_still_reads(tmp_path):
    result, _ = _run(tmp_path, "w.safetensors", _st(_entry(), F32))
    assert result.exit_code == 0, result.stderr
    assert "x.grad  [1, 0.4199743]" in result.stdout   # 1 - tanh(0)**2, 1 - tanh(1)**2 (float32)


def test_a_fortran_order_npy_reads_in_row_major_order(tmp_path):
    a = np.asfortranarray(np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32))
    result, _ = _run(tmp_path, "w.npy", _npy(a))
    assert result.exit_code == 0, result.stderr
    assert "x      [[1, 2], [3, 4]]" in CliRunner().invoke(main, ["solve", "--values", str(tmp_path / "p.yaml")]).stdout


def test_a_nul_in_the_file_name(tmp_path):
    problem = tmp_path / "p.yaml"
    problem.write_text(PROBLEM.format(name='"w\\0.npy"'))
    result = CliRunner().invoke(main, ["solve", str(problem)])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1, (result.stderr, result.exception)
    assert "holds a NUL character" in result.stderr


def test_tiny_float64_values_are_read_exactly(tmp_path):
    from fractions import Fraction

    from adjoint.format.sidefiles import exact_items
    items = exact_items(None, np.array([1e-300, -3e-310, 2.5]), "w.npy", "x")
    assert list(items) == [Fraction(1e-300), Fraction(-3e-310), Fraction(5, 2)]
    assert items.floats().tolist() == [1e-300, -3e-310, 2.5]
    (tmp_path / "w.npy").write_bytes(_npy(np.full(3, 1e-300)))
    (tmp_path / "p.yaml").write_text(PROBLEM.format(name="w.npy").replace("name: sf\n", "name: sf\ndtype: float64\n"))
    result = CliRunner().invoke(main, ["solve", str(tmp_path / "p.yaml")])
    assert result.exit_code == 0, (result.stderr, result.exception)


def test_a_side_file_larger_than_the_exact_mode_holds_is_refused_up_front(tmp_path):
    (tmp_path / "w.npy").write_bytes(_npy(np.zeros(5_000_001, dtype=np.int8)))
    result, problem = _run(tmp_path, "w.npy", (tmp_path / "w.npy").read_bytes())
    assert result.exit_code == 2, (result.stderr, result.exception)
    assert result.stderr == (f"{problem}:3:3: 'x' has 5,000,001 elements, more than the exact mode holds (5,000,000); "
                             "use a smaller tensor, or solve with --float64 or --structure\n")
    ok = CliRunner().invoke(main, ["solve", "--structure", problem])
    assert ok.exit_code == 0, ok.stderr


def test_the_key_message_asks_for_a_tensor_name(tmp_path):
    (tmp_path / "p.yaml").write_text(PROBLEM.format(name="w.safetensors, key: [a]"))
    result = CliRunner().invoke(main, ["solve", str(tmp_path / "p.yaml")])
    assert result.stderr.endswith("key of the side file of input 'x' must be a tensor name such as fc1.weight, "
                                  "not a list\n")


@pytest.mark.parametrize("mode", [[], ["--structure"], ["--float64"]])
def test_a_forty_dimensional_side_file_solves(tmp_path, mode):
    (tmp_path / "p.yaml").write_text(PROBLEM.format(name="w.npy"))
    (tmp_path / "w.npy").write_bytes(_npy_claiming((1,) * 40))
    result = CliRunner().invoke(main, ["solve", *mode, str(tmp_path / "p.yaml")])
    assert result.exit_code == 0, (result.stderr, result.exception)
