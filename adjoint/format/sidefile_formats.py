"""Reading a side file's header before its values (``.npy``, ``.safetensors``).

A side file is data from outside the problem: its header is checked field by field, and the
number of elements and bytes it promises is checked against the limits and against the file's
real size, before anything is allocated. Every refusal is a :class:`ProblemError` located at
the literal that names the file (exit 2), never an exception from numpy or ``json``.
"""

from __future__ import annotations

import json
import math
import os

import numpy as np

from adjoint.format.errors import Loc, ProblemError

#: the most dimensions a side-file tensor may have (PyTorch's own limit is 64; numpy's 64 too)
MAX_FILE_DIMS = 64
#: the longest safetensors header read (the safetensors library's own limit: 100 MB)
MAX_HEADER_BYTES = 100_000_000
#: the nesting a safetensors header may have: the format is two levels deep (a third for the shape and offsets)
_MAX_JSON_DEPTH = 32

SAFETENSORS_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": "bf16", "I64": np.int64,
                      "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}
_SAFETENSORS_SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1,
                      "BOOL": 1}


def _is_int(v) -> bool:
    return type(v) is int


def check_shape(loc: Loc, shape, name: str, what: str, max_elements: int) -> int:
    """The number of elements of ``shape`` (a tuple of ints), refused when it has too many
    dimensions, an empty dimension or more elements than ``max_elements`` -- computed on
    Python ints, before any array of that shape exists."""
    if len(shape) > MAX_FILE_DIMS:
        raise ProblemError(loc, f"{what}: '{name}' holds a {len(shape)}-dimensional array; PyTorch tensors have at "
                                f"most {MAX_FILE_DIMS} dimensions")
    if any(d < 0 for d in shape):
        raise ProblemError(loc, f"{what}: '{name}' claims a negative dimension (shape {list(shape)}); save it again with "
                                "numpy.save")
    if any(d == 0 for d in shape):
        raise ProblemError(loc, f"{what}: '{name}' holds an empty array (shape {list(shape)}); tensors here have at "
                                "least one element per dimension")
    n = math.prod(shape)
    if n > max_elements:
        raise ProblemError(loc, f"{what}: '{name}' has {n} elements, more than {max_elements}; store a smaller "
                                "tensor")
    return n


# ----------------------------------------------------------------------------- .npy

def _npy_dtype_problem(dtype: np.dtype) -> str | None:
    """Why a .npy dtype cannot be read exactly (None when it can)."""
    if dtype.hasobject:
        return "Python objects, which are never loaded from a problem"
    if dtype.kind == "f" and dtype.itemsize > 8:
        return (f"{dtype.name} values, wider than float64: PyTorch has no such dtype and rounding them would change "
                "the values")
    if dtype.kind in "biuf" and dtype.fields is None and dtype.subdtype is None:
        return None
    return f"{dtype} values (not real numbers)"


def read_npy(loc: Loc, path: str, name: str, what: str, max_elements: int) -> np.ndarray:
    """A ``.npy`` file's array, its header checked before the values are read."""
    size = os.path.getsize(path)
    with open(path, "rb") as fh:
        start = fh.read(6)
        if start[:4] == b"PK\x03\x04":
            raise ProblemError(loc, f"{what}: '{name}' is a .npz archive (numpy.savez), not a .npy file; save the one "
                                    "array with numpy.save")
        if start != b"\x93NUMPY":
            raise ProblemError(loc, f"{what}: '{name}' is not a .npy file (" + ("it is empty" if not start else
                                    "it does not start with numpy's magic string") + "); save it with numpy.save")
        fh.seek(0)
        try:
            version = np.lib.format.read_magic(fh)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
            elif version in ((2, 0), (3, 0)):
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh)
            else:
                raise ValueError(f"format version {version[0]}.{version[1]} is unknown")
        except (ValueError, EOFError, OSError, SyntaxError, TypeError) as exc:
            raise ProblemError(loc, f"{what}: '{name}' is not a readable .npy file (its header: "
                                    f"{str(exc)[:200]}); save it with numpy.save") from None
        offset = fh.tell()
    why = _npy_dtype_problem(dtype)
    if why is not None:
        raise ProblemError(loc, f"{what}: '{name}' holds {why}; save float16, float32, float64, integer or bool "
                                "values")
    shape = tuple(int(d) for d in shape)
    n = check_shape(loc, shape, name, what, max_elements)
    need = offset + n * dtype.itemsize
    if size < need:
        raise ProblemError(loc, f"{what}: '{name}' is truncated: its header promises shape {list(shape)} "
                                f"({need} bytes), the file has {size}; save it again with numpy.save")
    with open(path, "rb") as fh:
        fh.seek(offset)
        flat = np.frombuffer(fh.read(n * dtype.itemsize), dtype=dtype, count=n)
    if fortran:
        return flat.reshape(shape[::-1]).transpose()
    return flat.reshape(shape)


# ----------------------------------------------------------------------------- .safetensors

def _json_depth_ok(text: str) -> bool:
    """Whether a JSON text nests brackets at most _MAX_JSON_DEPTH deep (strings skipped)."""
    depth, in_string, escaped = 0, False, False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > _MAX_JSON_DEPTH:
                return False
        elif ch in "]}":
            depth -= 1
    return True


def read_safetensors(loc: Loc, path: str, name: str, key, what: str, max_elements: int) -> np.ndarray:
    """The tensor ``key`` of a ``.safetensors`` file (the only one when ``key`` is None), every
    header field checked as the safetensors library checks it, before the values are read."""
    size = os.path.getsize(path)

    def bad(why: str) -> ProblemError:
        return ProblemError(loc, f"{what}: '{name}' is not a valid safetensors file ({why}); save it with "
                                 "safetensors.torch.save_file")

    with open(path, "rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            raise bad("shorter than its 8-byte header length")
        n = int.from_bytes(head, "little")
        if n > min(size - 8, MAX_HEADER_BYTES):
            raise bad(f"its header length {n} is longer than the file")
        raw = fh.read(n)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise bad("its header is not UTF-8") from None
    if not _json_depth_ok(text):
        raise bad(f"its header nests more than {_MAX_JSON_DEPTH} levels deep")
    try:
        header = json.loads(text)
    except ValueError:
        raise bad("its header is not JSON") from None
    if not isinstance(header, dict):
        raise bad("its header is not a JSON object")
    tensors = {k: v for k, v in header.items() if k != "__metadata__"}
    if key is None:
        if len(tensors) != 1:
            raise ProblemError(loc, f"{what}: '{name}' holds {len(tensors)} tensors; say which with key: (one of "
                                    f"{', '.join(sorted(tensors)[:8])})")
        key = next(iter(tensors))
    if key not in tensors:
        raise ProblemError(loc, f"{what}: '{name}' has no tensor '{key}'; key: names one of its tensors: "
                                f"{', '.join(sorted(tensors)[:8]) or '(none)'}")
    entry = tensors[key]
    if not isinstance(entry, dict):
        raise bad(f"the entry of '{key}' is not an object")
    for field in ("dtype", "shape", "data_offsets"):
        if field not in entry:
            raise bad(f"the entry of '{key}' has no {field}")
    code = entry["dtype"]
    dtype = SAFETENSORS_DTYPES.get(code) if isinstance(code, str) else None
    if dtype is None:
        raise ProblemError(loc, f"{what}: tensor '{key}' of '{name}' is {code}, which adjoint does not read; store "
                                f"it as one of {', '.join(SAFETENSORS_DTYPES)}")
    shape = entry["shape"]
    if not isinstance(shape, list) or not all(_is_int(d) and d >= 0 for d in shape):
        raise bad(f"the shape of '{key}' is not a list of non-negative integers")
    offsets = entry["data_offsets"]
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(_is_int(o) for o in offsets)):
        raise bad(f"the data_offsets of '{key}' are not two integers")
    begin, end = offsets
    data_size = size - 8 - n
    if not 0 <= begin <= end <= data_size:
        raise bad(f"the data_offsets of '{key}', [{begin}, {end}], are not within its {data_size} data bytes")
    shape = tuple(shape)
    count = check_shape(loc, shape, name, what, max_elements)
    if end - begin != count * _SAFETENSORS_SIZES[code]:
        raise bad(f"'{key}' has {end - begin} data bytes for shape {list(shape)} of {code} "
                  f"({count * _SAFETENSORS_SIZES[code]} bytes)")
    with open(path, "rb") as fh:
        fh.seek(8 + n + begin)
        data = fh.read(end - begin)
    if dtype == "bf16":  # bfloat16: the top half of a float32
        array = (np.frombuffer(data, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
    else:
        array = np.frombuffer(data, dtype=np.dtype(dtype).newbyteorder("<"))
    return array.reshape(shape)
