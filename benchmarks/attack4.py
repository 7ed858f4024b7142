"""The fourth attack round (issue 28): malformed and oversized inputs on the surfaces the third
round hit -- side files, graph and LaTeX output, steps, sizes. Each try runs one CLI command
in-process (a SIGALRM guard counts a hang) and is classified:

* ``ok``: exit 0 (``verify``: also every comparison matched -- else a *silent wrong answer*);
* ``refused``: exit 2 with exactly one line on standard error, nothing on standard output;
* anything else is a finding: exit 3 (a bug), a traceback, a second line, a hang, a file the
  command was not asked to write, or a changed input (problem or side file).

    python benchmarks/attack4.py --seed 1 --n 300 [--verify-every 5]
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import random
import signal
import struct
import sys
import tempfile
from collections import Counter

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from click.testing import CliRunner  # noqa: E402

from adjoint.cli import main  # noqa: E402

GUARD = 60


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang()


def _npy(array) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


def _st(header, data=b"") -> bytes:
    raw = json.dumps(header).encode() if not isinstance(header, bytes) else header
    return struct.pack("<Q", len(raw)) + raw + data


WEIRD = [-1, 0, 1, 7, 8, 9, 1e30, 2 ** 64, -2 ** 63, "8", None, True, [], [0], [0, 8, 16], {}, 0.5, "F32"]
DTYPES = ["f2", "f4", "f8", "f16", "c8", "c16", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "b1", "m8[s]",
          "M8[D]", "U3", "S3", "V4", "<f4", ">f4", ">f8", ">i8"]


def side_npy(rng: random.Random) -> tuple[str, bytes]:
    kind = rng.choice(["dtype", "flip", "truncate", "shape", "claim", "fortran", "extra", "empty", "npz", "tiny"])
    if kind == "dtype":
        dt = rng.choice(DTYPES)
        try:
            a = np.zeros(2, dtype=dt) if dt[0] not in "US" else np.array(["a", "b"], dtype=dt)
            if dt[0] in "fcbiu<>":
                a = (np.arange(2) + 1).astype(dt)
        except TypeError:
            a = np.zeros(2)
        return "w.npy", _npy(a)
    base = _npy(np.array([0.5, -1.25], dtype=np.float32))
    if kind == "flip":
        b = bytearray(base)
        for _ in range(rng.randint(1, 4)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        return "w.npy", bytes(b)
    if kind == "truncate":
        return "w.npy", base[:rng.randrange(len(base))]
    if kind == "extra":
        return "w.npy", base + os.urandom(rng.randint(1, 64))
    if kind == "empty":
        return "w.npy", b""
    if kind == "npz":
        buf = io.BytesIO()
        np.savez(buf, a=np.ones(2))
        return "w.npy", buf.getvalue()
    if kind == "tiny":
        return "w.npy", _npy(np.array([rng.choice([1e-300, 5e-324, -1e-310, 1e-45, 2.0 ** -149]), 1.0]))
    shape = rng.choice([(2,), (1, 2), (2, 1), (1,) * 40 + (2,), (1,) * 70, (100000, 100000), (0, 2), (2 ** 40,),
                        (2, -1), ()])
    order = "True" if kind == "fortran" else "False"
    hdr = "{'descr': '<f4', 'fortran_order': %s, 'shape': %r, }" % (order, shape)
    hdr = hdr + " " * (-(len(hdr) + 11) % 64) + "\n"
    data = np.array([0.5, -1.25], dtype=np.float32).tobytes() if kind != "claim" else b"\0" * 8
    return "w.npy", b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode("latin1") + data


def side_safetensors(rng: random.Random) -> tuple[str, bytes]:
    data = np.array([0.5, -1.25], dtype=np.float32).tobytes()
    entry = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
    header = {"w": entry}
    for _ in range(rng.randint(1, 3)):
        what = rng.choice(["field", "drop", "top", "meta", "dtype", "depth", "length"])
        if what == "field":
            entry[rng.choice(["dtype", "shape", "data_offsets"])] = rng.choice(WEIRD)
        elif what == "drop":
            entry.pop(rng.choice(["dtype", "shape", "data_offsets"]), None)
        elif what == "top":
            header = rng.choice([[1], "x", 3, None, {"w": rng.choice(WEIRD)}])
        elif what == "meta":
            if isinstance(header, dict):
                header["__metadata__"] = rng.choice(WEIRD)
        elif what == "dtype":
            entry["dtype"] = rng.choice(["F64", "F16", "BF16", "I64", "BOOL", "U8", "F8_E4M3", "C64", "f32", ""])
        elif what == "depth":
            return "w.safetensors", _st(b"[" * rng.choice([40, 1000, 100000]) + b"]" * 3, data)
        elif what == "length":
            raw = _st(header if isinstance(header, (dict, list)) else {}, data)
            n = rng.choice([0, 1, 2 ** 63, len(raw), 7])
            return "w.safetensors", struct.pack("<Q", n) + raw[8:]
    return "w.safetensors", _st(header, data)


def problem_with_side(name: str, rng: random.Random) -> str:
    key = rng.choice(["", "", ", key: w", ", key: other", ", key: [a]"])
    if name.endswith(".npy") and "key" in key:
        key = ""
    return (f"name: a\ninputs:\n  x: {{value: {{file: {name}{key}}}, requires_grad: true}}\nmodel: {{type: Tanh}}\n"
            "loss: \"sum(y * y)\"\n")


def steps_problem(rng: random.Random) -> str:
    pool = ["forward", "backward", "zero_grad", "{backward: {retain_graph: true}}", "{register: [0]}", "{remove: [0]}",
            "{step: {lr: %s}}" % rng.choice(["0.1", "1e-30", "1e30", "1e39", "-1", '"1/3"', "0", "1e300", "1:30"])]
    n = rng.choice([1, 2, 3, 5, 8, 12, 1001])
    steps = ", ".join(rng.choice(pool) for _ in range(n))
    hooks = rng.choice(["", "hooks: [{tensor: x}]\n", "hooks: [{module: model, kind: full_backward}]\n"])
    return ("name: s\ninputs:\n  x: {value: [0.3, -0.2], requires_grad: true}\nmodel:\n  type: Linear\n"
            "  params: {weight: [[0.5, 0.25]], bias: [0.1]}\nloss: \"sum(y * y)\"\n" + hooks + f"steps: [{steps}]\n")


def sizes_problem(rng: random.Random) -> str:
    kind = rng.choice(["pow", "square", "conv", "init", "dims", "matmul"])
    if kind == "pow":
        e = rng.choice([2, 64, 4096, 4097, 100000])
        f = rng.choice([f"(x ** {e}) ** {e}", f"tanh(x ** {e})", f"x ** {e}", f"sqrt(x) ** {e}"])
        return f"name: p\ninputs:\n  x: {{value: [{rng.choice(['0.3', '0.7', '1.5', '1'])}], requires_grad: true}}\nmodel: {{forward: \"{f}\"}}\nloss: \"sum(y)\"\n"
    if kind == "square":
        n = rng.choice([4, 10, 14, 16, 20])
        body = "\n".join(["    h0 = x"] + [f"    h{i} = h{i - 1} * h{i - 1}" for i in range(1, n + 1)] + [f"    return h{n}"])
        return f"name: q\ninputs:\n  x: {{value: [0.3], requires_grad: true}}\nmodel:\n  forward: |\n{body}\nloss: \"sum(y)\"\n"
    if kind == "conv":
        pad, dil, stride = (rng.choice([0, 1, 10 ** 4, 10 ** 6, 10 ** 8]) for _ in range(3))
        return ("name: c\ninputs:\n  x: {value: [[[1, 2, 3]]], requires_grad: true}\nmodel:\n  type: Conv1d\n"
                f"  args: {{in_channels: 1, out_channels: 1, kernel_size: 1, padding: {pad}, dilation: {max(dil, 1)}, "
                f"stride: {max(stride, 1)}}}\n  params: {{weight: [[[1]]], bias: [0]}}\nloss: \"sum(y)\"\n")
    if kind == "init":
        n = rng.choice([10, 1000, 3000, 100000, 10 ** 6])
        return ("name: i\ninit: {seed: 1}\ninputs:\n  x: {value: [[1, 2]], requires_grad: true}\nmodel:\n"
                f"  type: Sequential\n  children:\n    a: {{type: Linear, args: {{in_features: 2, out_features: {n}}}}}\n"
                f"    b: {{type: Linear, args: {{in_features: {n}, out_features: {rng.choice([1, n])}}}}}\n"
                "loss: \"sum(y)\"\n")
    if kind == "dims":
        nd = rng.choice([31, 32, 33, 40, 50, 58])
        v = "[" * nd + "1, -2" + "]" * nd
        return (f"name: d\ninputs:\n  x: {{value: {v}, requires_grad: true}}\nmodel: {{forward: \"where(x > 0, x * x, "
                "tanh(x)) / (x * x + 1) - mean(x)\"}\nloss: \"sum(y * y)\"\nhooks: [{tensor: x}]\n")
    n = rng.choice([10, 300, 3000])
    return (f"name: m\ninit: {{seed: 2}}\ninputs:\n  x: {{value: [[1, 2]], requires_grad: true}}\nmodel:\n  type: Sequential\n"
            f"  children:\n    a: {{type: Linear, args: {{in_features: 2, out_features: {n}}}}}\n    t: {{type: Tanh}}\n"
            f"    b: {{type: Linear, args: {{in_features: {n}, out_features: {n}}}}}\nloss: \"sum(y * y)\"\n")


def graph_problem(rng: random.Random) -> str:
    label = rng.choice(["a" * 100000, "<&>\"'" * 5000, "\u202e\u2066bidi\x1b[31m", "\\input{/etc/passwd}$%#",
                        "x" * 16384, "ok"])
    n = rng.choice([1, 50, 400])
    hooks = ", ".join('{tensor: x, label: "%s"}' % (label.replace("\\", "\\\\").replace('"', '\\"').replace("\x1b", "\\e")
                                                   if i == 0 else f"h{i}") for i in range(n))
    return ("name: g\ninputs:\n  x: {value: [0.3], requires_grad: true}\nmodel: {type: Tanh}\nloss: \"sum(y)\"\n"
            f"hooks: [{hooks}]\n")


def snapshot(folder: str) -> dict:
    out = {}
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if os.path.isfile(path) and not os.path.islink(path):
            with open(path, "rb") as fh:
                out[name] = hashlib.sha256(fh.read()).hexdigest()
        else:
            out[name] = "link" if os.path.islink(path) else "other"
    return out


def run_one(args: list[str]) -> tuple[str, object]:
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(GUARD)
    try:
        result = CliRunner().invoke(main, args)
    except Hang:
        return "hang", None
    finally:
        signal.alarm(0)
    if isinstance(result.exception, Hang):
        return "hang", result
    return "done", result


def attack(seed: int, n: int, verify_every: int) -> dict:
    rng = random.Random(seed)
    counts: Counter = Counter()
    tries: Counter = Counter()
    findings: list = []
    surfaces = ["npy", "safetensors", "steps", "sizes", "graph", "output"]
    for i in range(n):
        surface = surfaces[i % len(surfaces)]
        tries[surface] += 1
        with tempfile.TemporaryDirectory() as tmp:
            problem = os.path.join(tmp, "p.yaml")
            command = ["solve", problem]
            if surface == "npy":
                name, content = side_npy(rng)
                open(os.path.join(tmp, name), "wb").write(content)
                open(problem, "w").write(problem_with_side(name, rng))
            elif surface == "safetensors":
                name, content = side_safetensors(rng)
                open(os.path.join(tmp, name), "wb").write(content)
                open(problem, "w").write(problem_with_side(name, rng))
            elif surface == "steps":
                open(problem, "w").write(steps_problem(rng))
            elif surface == "sizes":
                open(problem, "w").write(sizes_problem(rng))
                command = rng.choice([["solve", problem], ["solve", "--float64", problem],
                                      ["solve", "--structure", problem]])
            elif surface == "graph":
                open(problem, "w").write(graph_problem(rng))
                command = rng.choice([["graph", problem, "-o", os.path.join(tmp, "g.svg")],
                                      ["graph", problem, "-o", os.path.join(tmp, "g.dot")],
                                      ["latex", problem, "-o", os.path.join(tmp, "d.tex")]])
            else:   # -o onto what the problem reads, links, directories
                open(os.path.join(tmp, "w.npy"), "wb").write(_npy(np.array([[0.3]], dtype=np.float32)))
                open(problem, "w").write("name: o\ninputs:\n  x: {value: [0.3], requires_grad: true}\nmodel:\n"
                                         "  type: Linear\n  params: {weight: {value: {file: w.npy}}, bias: [0.1]}\n"
                                         "loss: \"sum(y)\"\n")
                outside = tempfile.NamedTemporaryFile(suffix=".yaml", delete=False)
                outside.write(b"name: secret\nsecret: [\n")
                outside.close()
                os.symlink(outside.name, os.path.join(tmp, "z.yaml"))
                target = rng.choice(["w.npy", "p.yaml", "z.yaml", "new.tex", "."])
                command = rng.choice([["latex", problem, "-o", os.path.join(tmp, target)],
                                      ["graph", problem, "--format", "dot", "-o", os.path.join(tmp, target)],
                                      ["solve", tmp]])
            before = snapshot(tmp)
            status, result = run_one(command)
            after = snapshot(tmp)
            if surface == "output":
                os.unlink(outside.name)
            key = surface
            if status == "hang":
                counts[(key, "hang")] += 1
                findings.append((key, "hang", command))
                continue
            code, err = result.exit_code, result.stderr
            changed = [f for f in before if after.get(f) != before[f]]
            written = [f for f in after if f not in before]
            allowed = {os.path.basename(command[-1])} if "-o" in command and code == 0 else set()
            if changed or set(written) - allowed:
                counts[(key, "clobbered")] += 1
                findings.append((key, "clobbered", command, changed, written))
            if code == 0:
                counts[(key, "ok")] += 1
                if verify_every and counts[(key, "ok")] % verify_every == 0 and command[0] == "solve" \
                        and surface in ("npy", "safetensors", "steps", "sizes"):
                    vstatus, vres = run_one(["verify"] + [c for c in command[1:] if c != "--structure"])
                    if vstatus == "hang":
                        findings.append((key, "verify hang", command))
                    elif vres.exit_code not in (0, 2):
                        counts[(key, "verify-mismatch")] += 1
                        findings.append((key, f"verify exit {vres.exit_code}", command, vres.stdout[-400:],
                                         vres.stderr[-400:]))
                    else:
                        counts[(key, "verified")] += 1
            elif code == 2 and len(err.splitlines()) == 1 and result.stdout == "" and "Traceback" not in err:
                counts[(key, "refused")] += 1
            elif code == 2 and result.stdout == "" and "Traceback" not in err and all(
                    line.startswith(problem + ":") for line in err.splitlines()):
                counts[(key, "refused, several mistakes")] += 1   # independent mistakes: one located line each
            else:
                counts[(key, f"exit {code}")] += 1
                findings.append((key, f"exit {code}", command, err[-300:], repr(result.exception)[:200]))
    return {"counts": counts, "findings": findings, "tries": tries}


def main_() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--verify-every", type=int, default=5)
    a = parser.parse_args()
    out = attack(a.seed, a.n, a.verify_every)
    surfaces = sorted({k for k, _ in out["counts"]})
    for s in surfaces:
        row = {what: c for (k, what), c in out["counts"].items() if k == s}
        print(f"{s:12s} {out['tries'][s]} tries: {row}")
    print(f"findings: {len(out['findings'])}")
    for f in out["findings"]:
        print("  ", f)


if __name__ == "__main__":
    main_()
