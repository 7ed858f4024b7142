"""Issue 28's list re-checked on the current code, one CLI command per item (bounded: about 40
commands, each under a 60 s guard; the dot-child item runs a subprocess). Each item says what it
expects -- ``refused`` (exit 2, one located line ``FILE:LINE:COL: ...``, nothing on standard
output, no file written), ``ok`` (exit 0) or a check of its own -- and the script prints one
row per item (item, command, result) and exits 1 when any item does not hold.

    python benchmarks/recheck28.py [--only WORD] [--markdown]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from fractions import Fraction

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests"))

from click.testing import CliRunner  # noqa: E402

from adjoint.cli import main  # noqa: E402
from test_sidefile_headers import NPY, SAFETENSORS, _st  # noqa: E402

GUARD = 60
TANH = "name: p\ninputs:\n  x: {{value: {{file: {name}}}, requires_grad: true}}\nmodel: {{type: Tanh}}\nloss: sum(y)\n"


class Hang(Exception):
    pass


def _alarm(signum, frame):
    raise Hang()


def cli(args: list[str]):
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(GUARD)
    t0 = time.perf_counter()
    try:
        result = CliRunner().invoke(main, args)
    except Hang:
        return None, GUARD
    finally:
        signal.alarm(0)
    if isinstance(result.exception, Hang):
        return None, GUARD
    return result, time.perf_counter() - t0


def refused(result, folder: str, before: set) -> str | None:
    """None when the command was refused as the issue promises, else what went wrong."""
    if result is None:
        return "hang"
    lines = result.stderr.splitlines()
    if result.exit_code != 2:
        return f"exit {result.exit_code}: {result.stderr[-200:]!r} {result.exception!r}"
    if len(lines) != 1 or result.stdout:
        return f"{len(lines)} lines on stderr, stdout {result.stdout[:80]!r}"
    # a file's mistake: FILE:LINE:COL; a command line's: the path or the option it is about
    if not re.match(r"^(.+:\d+:\d+|/.+|--[a-z]+ \S+): ", lines[0]):
        return f"not located: {lines[0][:120]}"
    written = set(os.listdir(folder)) - before
    if written:
        return f"wrote {sorted(written)}"
    return None


def _npy(array) -> bytes:
    buf = io.BytesIO()
    np.save(buf, array)
    return buf.getvalue()


def write(folder: str, name: str, content) -> str:
    path = os.path.join(folder, name)
    with open(path, "wb" if isinstance(content, bytes) else "w") as fh:
        fh.write(content)
    return path


# ----------------------------------------------------------------------------- the items

def y_clash(tmp):
    out = []
    for case in ("loss-y-root-local", "loss-y-root-parameter", "loss-y-root-buffer", "loss-y-root-child"):
        src = os.path.join(ROOT, "tests", "errors", case + ".yaml")
        out.append((f"y-clash ({case.split('-')[-1]})", ["solve", src], "refused"))
    return out


def side_files(tmp):
    out = []
    for case, (content, _) in sorted(SAFETENSORS.items()):
        folder = tempfile.mkdtemp(dir=tmp)
        write(folder, "w.safetensors", content)
        out.append((f"safetensors {case}", ["solve", write(folder, "p.yaml", TANH.format(name="w.safetensors"))],
                    "refused"))
    for case in ("npz", "float128", "timedelta", "claims-huge"):
        folder = tempfile.mkdtemp(dir=tmp)
        write(folder, "w.npy", NPY[case][0])
        out.append((f".npy {case}", ["solve", write(folder, "p.yaml", TANH.format(name="w.npy"))], "refused"))
    folder = tempfile.mkdtemp(dir=tmp)
    write(folder, "w.npy", _npy(np.array([1e-300, -1e-300, 1e-300])))
    out.append(("all-tiny float64 .npy (1e-300)", ["solve", "--json", write(folder, "p.yaml", "dtype: float64\n"
                                                                         + TANH.format(name="w.npy"))], "tiny"))
    folder = tempfile.mkdtemp(dir=tmp)
    header = {"w": {"dtype": "F32", "shape": [100000, 100000], "data_offsets": [0, 8]}}
    data = _st(header, b"\0" * 8)
    data = data + b"\0" * max(0, 136 - len(data))
    write(folder, "w.safetensors", data)
    out.append((f"safetensors claiming 100000x100000 in {len(data)} bytes",
                ["solve", write(folder, "p.yaml", TANH.format(name="w.safetensors"))], "refused"))
    folder = tempfile.mkdtemp(dir=tmp)
    out.append(("NUL in a side file's name", ["solve", write(folder, "p.yaml", TANH.format(name='"w\\0.npy"'))],
                "refused"))
    folder = tempfile.mkdtemp(dir=tmp)
    n = 50_000_000   # claimed in a header only: the refusal must come before any of it is read
    hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d,), }" % n
    hdr = hdr + " " * (-(len(hdr) + 11) % 64) + "\n"
    with open(os.path.join(folder, "w.npy"), "wb") as fh:
        fh.write(b"\x93NUMPY\x01\x00" + len(hdr).to_bytes(2, "little") + hdr.encode())
        fh.truncate(fh.tell() + 4 * n)   # a sparse file: 200 MB claimed, nothing written
    out.append(("side file of 50,000,000 elements, exact mode",
                ["solve", write(folder, "p.yaml", TANH.format(name="w.npy"))], "refused"))
    folder = tempfile.mkdtemp(dir=tmp)
    write(folder, "w.npy", _npy(np.array([[0.5]], dtype=np.float32)))
    p = write(folder, "p.yaml", "name: o\ninputs:\n  x: {value: [0.3], requires_grad: true}\nmodel:\n  type: Linear\n"
                                "  params: {weight: {value: {file: w.npy}}, bias: [0.1]}\nloss: \"sum(y)\"\n")
    out.append(("-o onto the side file", ["latex", p, "-o", os.path.join(folder, "w.npy")], "refused-unchanged"))
    return out


def folders(tmp):
    folder = tempfile.mkdtemp(dir=tmp)
    outside = write(tmp, "outside.yaml", "name: secret\nsecret: [\n")
    os.symlink(outside, os.path.join(folder, "z.yaml"))
    write(folder, "a.yaml", "name: a\ninputs:\n  x: {value: [0.3], requires_grad: true}\nmodel: {type: Tanh}\n"
                            "loss: sum(y)\n")
    return [("solve DIR/ with a link out of it", ["solve", folder + "/"], "refused")]


def sizes(tmp):
    def prob(name, text):
        return write(tempfile.mkdtemp(dir=tmp), name, text)
    conv = prob("c.yaml", "name: c\ninputs:\n  x: {value: [[[1, 2, 3]]], requires_grad: true}\nmodel:\n  type: Conv1d\n"
                          "  args: {in_channels: 1, out_channels: 1, kernel_size: 2, padding: 99999999, "
                          "dilation: 99999999}\n  params: {weight: [[[1, 1]]], bias: [0]}\nloss: \"sum(y)\"\n")
    init = prob("i.yaml", "name: i\ninit: {seed: 1}\ninputs:\n  x: {value: [[1, 2]], requires_grad: true}\nmodel:\n"
                          "  type: Sequential\n  children:\n    a: {type: Linear, args: {in_features: 2, "
                          "out_features: 100000}}\n    b: {type: Linear, args: {in_features: 100000, "
                          "out_features: 100000}}\nloss: \"sum(y)\"\n")
    lin = prob("l.yaml", "name: l\ninit: {seed: 2}\ninputs:\n  x: {value: [[1, 2]], requires_grad: true}\nmodel:\n"
                         "  type: Sequential\n  children:\n    a: {type: Linear, args: {in_features: 2, "
                         "out_features: 2000}}\n    b: {type: Linear, args: {in_features: 2000, out_features: 2000}}\n"
                         "loss: \"sum(y * y)\"\n")
    body = "\n".join(["    h0 = x"] + [f"    h{i} = h{i - 1} * h{i - 1}" for i in range(1, 17)] + ["    return h16"])
    square = prob("q.yaml", f"name: q\ninputs:\n  x: {{value: [0.3], requires_grad: true}}\nmodel:\n  forward: |\n"
                            f"{body}\nloss: \"sum(y)\"\n")
    pw = prob("p.yaml", "name: p\ninputs:\n  x: {value: [0.7], requires_grad: true}\nmodel: {forward: "
                        "\"(x ** 4096) ** 4096\"}\nloss: \"sum(y)\"\n")
    th = prob("t.yaml", "name: t\ninputs:\n  x: {value: [0.7], requires_grad: true}\nmodel: {forward: "
                        "\"tanh(x ** 4096)\"}\nloss: \"sum(y)\"\n")
    out = [("Conv1d padding/dilation 99,999,999", ["solve", conv], "refused"),
           ("init: Linear 100000x100000 (far past the exact limit)", ["solve", init], "refused"),
           ("Linear 2000x2000 from init, exact mode", ["solve", lin], "ok-or-refused"),
           ("16 lines of h = h * h", ["solve", square], "refused"),
           ("(x ** 4096) ** 4096", ["solve", pw], "refused"),
           ("tanh(x ** 4096)", ["solve", th], "ok-or-refused")]
    for nd in (33, 60):
        v = "[" * nd + "1, -2" + "]" * nd
        p = prob(f"d{nd}.yaml", f"name: d\ninputs:\n  x: {{value: {v}, requires_grad: true}}\nmodel: {{forward: "
                                "\"where(x > 0, x * x, tanh(x)) / (x * x + 1) - mean(x)\"}\nloss: \"sum(y * y)\"\n"
                                "hooks: [{tensor: x}]\n")
        out.append((f"{nd}-D tensor, exact", ["solve", p], "ok"))
        out.append((f"{nd}-D tensor, --structure", ["solve", "--structure", p], "ok"))
    return out


def labels(tmp):
    folder = tempfile.mkdtemp(dir=tmp)
    p = write(folder, "g.yaml", "name: g\ninputs:\n  x: {value: [0.3], requires_grad: true}\nmodel: {type: Tanh}\n"
                                f"loss: \"sum(y)\"\nhooks: [{{tensor: x, label: \"{'a' * 100000}\"}}]\n")
    return [("100,000-character hook label, graph", ["graph", p, "-o", os.path.join(folder, "g.svg")], "ok"),
            ("100,000-character hook label, latex --pdf", ["latex", p, "--pdf", "-o", os.path.join(folder, "d.pdf")],
             "ok")]


MODEL = """\
import torch
from torch import nn

def make_seq():
    torch.manual_seed(0)
    lin = nn.Linear(3, 3)
    return nn.Sequential(lin, nn.Tanh(), lin)

class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(3, 3, bias=False)
        self.b = nn.Linear(3, 3, bias=False)
        self.b.weight = self.a.weight

    def forward(self, x):
        return self.b(torch.tanh(self.a(x)))

def make_tied():
    torch.manual_seed(0)
    return Tied()

open(__file__ + ".imported", "w").write("imported")
"""


def imports(tmp):
    folder = tempfile.mkdtemp(dir=tmp)
    model = write(folder, "m.py", MODEL)
    return [("import Sequential(lin, Tanh(), lin)", ["import", f"{model}:make_seq", "--input", "x=2x3", "-o",
                                                     os.path.join(folder, "seq.yaml")], "seq"),
            ("import: tied weights stay tied", ["import", f"{model}:make_tied", "--input", "x=2x3", "-o",
                                                os.path.join(folder, "tied.yaml")], "tied"),
            ("import --input x=100000x100000", ["import", f"{model}:make_seq", "--input", "x=100000x100000", "-o",
                                                os.path.join(folder, "big.yaml")], "refused-model"),
            ("verify without --origin never imports the origin file", None, "no-origin"),
            ("verify --origin with an origin outside the problem's folder", None, "origin-outside")]


def origin_items(tmp, item):
    folder = tempfile.mkdtemp(dir=tmp)
    model = write(folder, "m.py", MODEL)
    problem = os.path.join(folder, "seq.yaml")
    result, _ = cli(["import", f"{model}:make_seq", "--input", "x=2x3", "-o", problem])
    os.unlink(model + ".imported")
    if item == "no-origin":
        result, secs = cli(["verify", "--float64", problem])
        ok = result is not None and result.exit_code == 0 and not os.path.exists(model + ".imported")
        return ("verify without --origin never imports the origin file", "verify --float64 seq.yaml",
                "ok, m.py not run" if ok else f"FAILED ({result and result.exit_code})", ok, secs)
    inner = os.path.join(folder, "inner")
    os.mkdir(inner)
    text = open(problem).read().replace('file: "m.py"', 'file: "../m.py"').replace("file: m.py", "file: ../m.py")
    moved = write(inner, "seq.yaml", text)
    result, secs = cli(["verify", "--float64", "--origin", moved])
    why = refused(result, inner, set(os.listdir(inner)))
    ok = why is None and not os.path.exists(model + ".imported")
    return ("verify --origin with an origin outside the problem's folder",
            "verify --float64 --origin inner/seq.yaml (origin ../m.py)",
            ("refused: " + result.stderr.strip()[:90]) if ok else f"FAILED: {why}", ok, secs)


def dot_child(tmp):
    """graph --structure on a chain whose layout keeps dot busy; SIGTERM and SIGINT the command:
    its dot child must be gone too."""
    rows = []
    n = 600
    body = "\n".join(["    h0 = x * 1"] + [f"    h{i} = tanh(h{i - 1}) + h{max(0, i - 7)} * 0.5" for i in range(1, n)]
                     + [f"    return h{n - 1}"])
    path = write(tempfile.mkdtemp(dir=tmp), "slow.yaml", f"name: slow\ninputs:\n  x: {{value: [0.3], requires_grad: "
                                                         f"true}}\nmodel:\n  forward: |\n{body}\nloss: \"sum(y)\"\n")
    for sig in (signal.SIGTERM, signal.SIGINT):
        t0 = time.perf_counter()
        env = dict(os.environ, PYTHONPATH=ROOT)
        proc = subprocess.Popen([sys.executable, "-m", "adjoint", "graph", "--structure", path, "-o",
                                 path + ".svg"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        dots: list[int] = []
        guard = time.monotonic() + 120
        while not dots and time.monotonic() < guard and proc.poll() is None:
            dots = [p for p in _descendants(proc.pid) if _comm(p) == "dot"]
            time.sleep(0.1)
        if not dots:
            proc.kill()
            proc.communicate()
            rows.append((f"dot child after {sig.name}", "graph --structure slow.yaml", "dot never started", False,
                         time.perf_counter() - t0))
            continue
        proc.send_signal(sig)
        proc.communicate(timeout=60)
        guard = time.monotonic() + 10
        while any(_alive(d) for d in dots) and time.monotonic() < guard:
            time.sleep(0.1)
        ok = not any(_alive(d) for d in dots) and not os.path.exists(path + ".svg")
        rows.append((f"dot child after {sig.name}", "graph --structure slow.yaml -o slow.svg, then the signal",
                     f"exit {proc.returncode}, dot gone" if ok else "dot still running", ok, time.perf_counter() - t0))
    return rows


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/task/{p}/children") as fh:
                kids = [int(k) for k in fh.read().split()]
        except OSError:
            kids = []
        out += kids
        todo += kids
    return out


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ")[1][0] not in "ZX"
    except OSError:
        return False


# ----------------------------------------------------------------------------- running them

def judge(item: str, args: list[str], expect: str, tmp: str):
    if expect in ("no-origin", "origin-outside"):
        return origin_items(tmp, expect)
    folder = os.path.dirname(args[-1]) if args[-1].endswith((".yaml", ".svg", ".pdf", ".npy")) else args[-1]
    folder = folder.rstrip("/") or "."
    before = set(os.listdir(folder)) if os.path.isdir(folder) else set()
    stamp = {f: os.path.getmtime(os.path.join(folder, f)) for f in before} if os.path.isdir(folder) else {}
    result, secs = cli(args)
    command = " ".join(os.path.basename(a.rstrip("/")) + ("/" if a.endswith("/") else "") if os.sep in a else a
                       for a in args)
    if len(command) > 90:
        command = command[:87] + "..."
    if result is None:
        return item, command, f"HANG (> {GUARD} s)", False, secs
    first = (result.stderr.strip().splitlines() or [""])[0]
    short = re.sub(r"^.*?:\d+:\d+: ", "", first)[:90]
    if expect in ("refused", "refused-model", "refused-unchanged"):
        if expect == "refused-model":
            before = set(os.listdir(folder))
        why = refused(result, folder, before)
        if expect == "refused-unchanged" and why is None:
            changed = [f for f in before if os.path.getmtime(os.path.join(folder, f)) != stamp[f]]
            why = f"changed {changed}" if changed else None
        return item, command, ("refused: " + short) if why is None else f"FAILED: {why}", why is None, secs
    if expect == "ok-or-refused":
        if result.exit_code == 0:
            return item, command, "answered", True, secs
        why = refused(result, folder, before)
        return item, command, ("refused: " + short) if why is None else f"FAILED: {why}", why is None, secs
    ok = result.exit_code == 0
    note = "answered"
    if ok and expect == "tiny":
        doc = json.loads(result.stdout)
        x = doc["variants"]["default"]["values"]["x"]
        ok = [Fraction(e) for e in x["exact"]] == [Fraction(v) for v in (1e-300, -1e-300, 1e-300)] \
            and x["value"] == [1e-300, -1e-300, 1e-300]
        note = f"read exactly: {x['value']}"
    elif ok and expect == "seq":
        text = open(args[-1]).read()
        ok = "    2:\n      type: Linear" in text and "weight: {tied: 0.weight}" in text
        note = "children 0, 1, 2: the second Linear's weight {tied: 0.weight}" if ok else "second call lost"
    elif ok and expect == "tied":
        text = open(args[-1]).read()
        ok = "tied:" in text
        note = "weight: {tied: ...} written" if ok else "not tied"
    elif not ok:
        note = f"exit {result.exit_code}: {first[:90]}"
    return item, command, note, ok, secs


def items(tmp: str):
    out = []
    for group in (y_clash, side_files, folders, sizes, labels, imports):
        out.extend(group(tmp))
    return out


def main_() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", help="run the items whose name contains this word")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    parser.add_argument("--no-dot", action="store_true", help="leave out the dot-child item (needs graphviz)")
    a = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for item, args, expect in items(tmp):
            if a.only and a.only not in item:
                continue
            rows.append(judge(item, args, expect, tmp))
            print(("ok  " if rows[-1][3] else "BAD ") + f"{rows[-1][0]} ({rows[-1][4]:.1f} s): {rows[-1][2]}",
                  file=sys.stderr, flush=True)
        if not a.no_dot and (not a.only or a.only in "dot child"):
            for row in dot_child(tmp):
                rows.append(row)
                print(("ok  " if row[3] else "BAD ") + f"{row[0]} ({row[4]:.1f} s): {row[2]}", file=sys.stderr)
    if a.markdown:
        print("| item | command | result |")
        print("|---|---|---|")
        for item, command, note, ok, secs in rows:
            print(f"| {item} | `{command}` | {'' if ok else '**NOT HELD** '}{note} ({secs:.1f} s) |")
    bad = [r for r in rows if not r[3]]
    print(f"{len(rows)} items, {len(rows) - len(bad)} hold, {len(bad)} do not", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main_())
