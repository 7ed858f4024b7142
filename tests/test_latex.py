"""``adjoint latex``: every problem's derivation compiles with a real LaTeX engine, without
LaTeX errors and without an equation running into the margin, and the numbers it prints are
the prediction's.

The SLinear numbers are derived here by hand (as in test_slinear.py):

    x1 = 0.3 * 0.3 + 0.1 = 0.19          s = x2 = 0.4 * 0.19 + 0.2 = 0.276      y = x3 = s**2 = 0.076176
    dL/dy  = 2 (y - 1)  = -1.847648 = -57739/31250                  (lambda_3, SLinear's grad_output)
    dy/ds  = 2 s        = 0.552
    ds/dx1 = 0.4
    dL/ds  = -1.847648 * 0.552 = -1.019901696 = -3983991/3906250    (lambda_2, the legacy hook's grad_input)
    dL/dx1 = -1.019901696 * 0.4 = -0.4079606784 = -3983991/9765625  (lambda_1, the full hook's grad_input)
    doubled: -0.8159213568 = -7967982/9765625; x.grad = 0.3 * that = -11951973/48828125 = -0.24477640704

Every other problem is checked generically: each final ``.grad`` row of the document is parsed
back (decimals, fractions, matrices, the ``...`` of a cut-off value) and compared with the
solver's exact prediction.
"""

from __future__ import annotations

import functools
import glob
import os
import re
import subprocess
import sys
import time
from fractions import Fraction

import flint
import pytest
import sympy

import adjoint
from adjoint.values.arith import equal
from adjoint.format.errors import ProblemError
from adjoint.render.latex import DerivationPrinter, code, format_rational, render_document, tex_width
from adjoint.render.output import RenderBug
from adjoint.render.pdf import compile_pdf
from conftest import single_process

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROBLEMS = single_process(sorted(glob.glob(os.path.join(ROOT, "problems", "*.yaml"))))
EXTRA = sorted(glob.glob(os.path.join(ROOT, "tests", "data", "*.yaml")))
SLINEAR = os.path.join(ROOT, "problems", "slinear.yaml")


@functools.lru_cache(maxsize=None)
def _solved(path: str):
    pred = adjoint.load(path).solve()
    return pred, render_document(pred)


def _sections(tex: str, pred) -> dict[str, str]:
    """The text of each variant's section."""
    parts = re.split(r"\\section\{", tex)[1:]
    names = [v.name for v in pred.variants]
    assert len(parts) == len(names), "one section per variant"
    return dict(zip(names, parts))


# ----------------------------------------------------------------------------- parsing the document back

def _top_split(s: str, sep: str) -> list[str]:
    out, cur, depth, env, i = [], "", 0, 0, 0
    while i < len(s):
        if s.startswith("\\begin{", i):
            env += 1
        elif s.startswith("\\end{", i):
            env -= 1
        c = s[i]
        depth += c == "{"
        depth -= c == "}"
        if depth == 0 and env == 0 and s.startswith(sep, i):
            out.append(cur)
            cur = ""
            i += len(sep)
            continue
        cur += c
        i += 1
    out.append(cur)
    return out


def _row(section: str, lhs: str) -> list[str]:
    """The right-hand-side segments (split at top-level =) of the align row starting with lhs."""
    lines = section.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(lhs + " &"):
            rhs = line[len(lhs) + 2:].strip().rstrip("\\").strip()
            for more in lines[i + 1:]:                  # continuation lines of the same row
                if not more.startswith("& "):
                    break
                rhs += " " + more[2:].strip().rstrip("\\").strip()
            rhs = rhs[1:] if rhs.startswith("=") else rhs
            return [seg.strip() for seg in _top_split(" " + rhs, " = ") if seg.strip()]
    raise AssertionError(f"no row {lhs!r}")


_NUM = re.compile(r"^(-?)(?:\\frac\{(\d+)\}\{(\d+)\}|(\d+)/(\d+)|(\d+)(?:\.(\d+))?(\\ldots)?(?:\\times 10\^\{(-?\d+)\})?)$")


def _scalar(tok: str):
    """(value, exact, unit of the last shown digit) of one printed number; None if not a plain number."""
    m = _NUM.match(tok.strip().replace("\\left(", "").replace("\\right)", ""))
    if not m:
        return None
    sign = -1 if m.group(1) else 1
    if m.group(2):
        return sign * Fraction(int(m.group(2)), int(m.group(3))), True, 0
    if m.group(4):
        return sign * Fraction(int(m.group(4)), int(m.group(5))), True, 0
    frac = m.group(7) or ""
    scale = Fraction(10) ** int(m.group(9) or 0)
    shown = sign * Fraction(int(m.group(6) + frac), 10 ** len(frac)) * scale
    return shown, m.group(8) is None, Fraction(1, 10 ** len(frac)) * scale


def _cells(tok: str):
    """The printed cells of a value: one number, a bmatrix, or (rank >= 3) a list of slices."""
    tok = tok.strip()
    if tok.startswith("\\left[") and tok.endswith("\\right]"):
        parts = _top_split(tok[len("\\left["):-len("\\right]")], ",\\ ")
        return [c for part in parts for c in (_cells(part) if part.strip() != "\\ldots" else ["\\cdots"])]
    m = re.match(r"^\\begin\{bmatrix\}(.*)\\end\{bmatrix\}(\^\{\\top\})?$", tok)
    if not m:
        return [tok]
    return [c.strip() for r in m.group(1).split("\\\\") for c in r.split("&")]


def _agrees(cell: str, value) -> bool:
    """A printed number agrees with an exact value: equal, or (with ...) its cut-off leading digits.
    A closed form (SymPy) is compared with SymPy's own 40-digit evaluation."""
    parsed = _scalar(cell)
    assert parsed is not None, f"not a number: {cell!r}"
    shown, exact, unit = parsed
    if type(value) is flint.fmpq or isinstance(value, sympy.Rational):
        v = Fraction(int(value.p), int(value.q))
    else:
        v = Fraction(str(sympy.N(value, 40)))
    if exact:
        return shown == v
    if shown == 0 or (shown < 0) != (v < 0):
        return False
    digits = len(re.sub(r"\D", "", cell.split("\\times")[0]).lstrip("0"))
    return abs(v) >= abs(shown) and abs(v) - abs(shown) < unit and digits <= 10


def _check_value(segment: str, value) -> None:
    cells = _cells(segment)
    flat = value.flat()
    if any(c in ("\\cdots", "\\vdots", "\\ddots") for c in cells):
        return                                     # elided large tensor: the shown corners are checked elsewhere
    assert len(cells) == len(flat), (segment, value)
    for c, e in zip(cells, flat):
        if type(e) is not flint.fmpq and (_scalar(c) is None or getattr(e, "free_symbols", None)):
            continue                               # a closed form printed as such is not parsed back
        assert _agrees(c, e), f"{c} != {e}"


def _check_printed(segs: list[str], value) -> None:
    """The value (and exact annotation) at the end of a row agree with value, cell by cell."""
    flat = value.flat()
    checked = 0
    for seg in segs[-2:]:
        cells = _cells(seg)
        if len(cells) != len(flat) or any(c in ("\\cdots", "\\vdots", "\\ddots") for c in cells):
            continue
        for c, e in zip(cells, flat):
            if _scalar(c) is not None:
                assert _agrees(c, e), f"{c} != {e}"
                checked += 1
    elided = ("\\cdots", "\\vdots", "\\ldots\\right]")
    assert checked or not value.rational or any(m in seg for seg in segs for m in elided), segs


# ----------------------------------------------------------------------------- the number rule

@pytest.mark.parametrize("p, q, text", [
    (3, 10, "0.3"), (-57739, 31250, "-1.847648"), (69, 125, "0.552"), (2, 5, "0.4"),
    (-3983991, 9765625, "-0.4079606784"), (1, 3, "\\frac{1}{3}"), (-22, 7, "-\\frac{22}{7}"),
    (-11951973, 97656250, "-0.1223882035\\ldots"), (-11951973, 48828125, "-0.244776407\\ldots"),
    (3333792121, 3906250000, "0.8534507829\\ldots"), (7, 1, "7"), (0, 1, "0"),
    (10 ** 15 + 1, 1, "1.0\\ldots\\times 10^{15}"), (1, 10 ** 7, "1.0\\ldots\\times 10^{-7}"),
    (2, 3000, "0.0006666666666\\ldots"),
])
def test_number_rule(p, q, text):
    assert format_rational(flint.fmpq(p, q)).signed() == text


@pytest.mark.parametrize("expr", ["tanh(3/10)", "-sqrt(2)/3", "exp(-5/8) - 1/(1 + exp(1/2))", "-(3/2)**sin(1/4)",
                                  "log(2)*cos(2)**2 - 7"])
def test_closed_form_constants_print_their_digits(expr):
    e = sympy.sympify(expr)
    shown = DerivationPrinter({}).elem(e)
    if "\\ldots" in shown:
        assert _agrees(shown, e), (shown, sympy.N(e, 20))
    else:                                          # short: the closed form itself
        assert shown.replace(" ", "") == sympy.latex(e).replace(" ", "")


def test_width_estimate_is_in_proportion():
    assert tex_width("x") < tex_width("x + y") < tex_width("\\frac{\\partial \\ell}{\\partial x_{1}} = 0.4079606784")
    assert tex_width("\\begin{bmatrix}1 & 2 & 3\\end{bmatrix}") > tex_width("1 2 3")


def test_a_width_walked_up_to_a_limit_compares_with_it_as_the_whole_width():
    # the walk may stop past the limit; \\! (the one negative width) later in the string must not let
    # a width that ends under the limit be reported over it
    pieces = ["x_{1}", "\\!", "\\frac{a}{b}", "+", "\\tanh\\left(y\\right)", "\\!\\!\\!", "2.5", "\\,"]
    strings = ["".join(pieces[(i * k) % len(pieces)] for k in range(n)) for i in range(1, 8) for n in range(1, 40)]
    strings.append("x + y" + "\\!" * 40)
    for s in strings:
        whole = tex_width(s)
        for limit in (0.5, 2.0, 4.0, whole - 0.1, whole, whole + 0.1, 10.0, 30.0):
            assert (tex_width(s, limit) > limit) == (whole > limit), (s, limit)


# ----------------------------------------------------------------------------- every problem compiles

@pytest.mark.latex
@pytest.mark.parametrize("path", PROBLEMS + EXTRA, ids=lambda p: os.path.basename(p))
def test_document_compiles(path, tmp_path):
    t0 = time.perf_counter()
    pred, tex = _solved(path)
    pdf = tmp_path / "doc.pdf"
    report = compile_pdf(tex, str(pdf), strict=True)     # raises on any LaTeX error or overfull math
    assert report.math_overfull == []
    assert pdf.read_bytes().startswith(b"%PDF")
    assert "\\begin{document}" in tex and tex.rstrip().endswith("\\end{document}")
    assert time.perf_counter() - t0 < 300   # a hang guard only (speed goals live in benchmarks/)


@pytest.mark.parametrize("path", PROBLEMS + EXTRA, ids=lambda p: os.path.basename(p))
def test_document_numbers_match_prediction(path):
    pred, tex = _solved(path)
    sections = _sections(tex, pred)
    for v in pred.variants:
        if v.passes is not None:   # a variant with steps titles each pass's sections by the pass
            continue               # (tests/test_latex_v2.py reads those)
        sec = sections[v.name]
        hooks = sec.split("\\subsection{Hook calls, in firing order}")[1].split("\\subsection{", 1)[0]
        assert hooks.count("\\subsubsection*{") == len(v.hook_calls)
        for h, part in zip(v.hook_calls, hooks.split("\\subsubsection*{")[1:]):
            part = part.split("Written out with the chain rule")[0].split("would instead be handed")[0]
            for arg, value in h.args.items():
                items = value if isinstance(value, tuple) else (value,)
                flat = []      # a tuple nested in the tuple (an LSTM's (out, (h_n, c_n))) item by item
                for j, item in enumerate(items):
                    flat += [(f"[{j}][{k}]", x) for k, x in enumerate(item)] if isinstance(item, tuple) else \
                        [(f"[{j}]", item)]
                for pos, item in flat:
                    lhs = "\\mathtt{" + arg.replace("_", "\\_") + "}" + (pos if isinstance(value, tuple) else "")
                    if item is None:
                        assert _row(part, lhs)[0].startswith("\\mathrm{None}")
                    elif _is_complex(item):   # a + b i: tests/test_complex.py reads those
                        continue
                    elif f"{lhs} &" in part and not item.is_symbolic():
                        _check_printed(_row(part, lhs), item)
        grads = sec.split("\\subsection{Final gradients}")[1]
        ref = re.match(r"\nExactly as in variant \\texttt\{([^}]*)\}", grads)
        if ref:                                    # shared with an earlier variant: same values, same text
            other = pred.variant(ref.group(1).replace("\\_", "_"))
            assert other.grads.keys() == v.grads.keys()
            assert all((a is None and b is None) or (a is not None and b is not None and equal(a, b))
                       for a, b in zip(other.grads.values(), v.grads.values()))
            continue
        for name, value in v.grads.items():
            block = grads.split("\\subsubsection*{" + code(name + ".grad") + "}")[1].split("\\subsubsection*")[0]
            if value is None:
                assert "stores \\texttt{None}" in block
                continue
            label = f"\\mathtt{{{name.replace('_', chr(92) + '_').replace('#', chr(92) + '#')}.grad}}"
            if _is_complex(value):
                assert label in block
                continue
            if value.is_symbolic() or f"{label} &" not in block:
                assert label in block                  # symbolic, or listed element by element
                continue
            segs = _row(block, label)
            _check_value(segs[0], value)
            if len(segs) > 1 and value.size == 1:
                _check_value(segs[1], value)       # the exact fraction
        if v.loss is not None and v.loss.rational:
            _check_value(_row(grads.split("For reference, the loss:")[1], "\\ell")[0], v.loss)


def _is_complex(v) -> bool:
    return type(v).__name__ == "Cx" or getattr(v, "dtype", None) in ("complex64", "complex128")


# ----------------------------------------------------------------------------- SLinear, by hand

def test_slinear_derivation_numbers():
    pred, tex = _solved(SLINEAR)
    s = _sections(tex, pred)
    full, rescaled, legacy = s["full"], s["rescaled"], s["legacy"]
    # the forward pass with numbers substituted
    assert "0.3 \\cdot 0.3 + 0.1 = 0.19" in full
    assert "0.4 \\cdot 0.19 + 0.2 = 0.276" in full
    assert _row(full, "x_{3}")[-1] == "0.076176"
    # local derivatives and the recursion
    assert _row(full, "\\frac{\\partial x_{3}}{\\partial x_{2}}")[-1] == "0.552"
    assert _row(full, "\\frac{\\partial x_{2}}{\\partial x_{1}}")[-1] == "0.4"
    assert _row(full, "\\lambda_{3}")[-1] == "-1.847648"
    assert _row(full, "\\lambda_{2}")[-2:] == ["\\left(-1.847648\\right) \\cdot 0.552", "-1.019901696"]
    assert _row(full, "\\lambda_{1}")[-2:] == ["\\left(-1.019901696\\right) \\cdot 0.4", "-0.4079606784"]
    # the full hook's grad_input, identified and written factor by factor
    hook = full.split("\\subsection{Hook calls, in firing order}")[1]
    gi = _row(hook, "\\mathtt{grad\\_input}[0]")
    assert "\\lambda_{1}" in gi and gi[-2:] == ["-0.4079606784", "-\\frac{3983991}{9765625}"]
    chain = [line for line in hook.splitlines() if line.startswith("\\mathtt{grad\\_input}[0]")][1]
    assert ("\\frac{\\partial \\ell}{\\partial x_{3}} \\cdot \\frac{\\partial x_{3}}{\\partial x_{2}} \\cdot "
            "\\frac{\\partial x_{2}}{\\partial x_{1}} = \\left(-1.847648\\right) \\cdot 0.552 \\cdot 0.4 = "
            "-0.4079606784") in chain
    assert _row(hook, "\\mathtt{grad\\_output}[0]")[-2:] == ["-1.847648", "-\\frac{57739}{31250}"]
    # doubling grad_input doubles everything upstream of SLinear, and nothing inside it
    assert _row(rescaled, "\\text{returned}[0]") == ["2\\,\\mathtt{grad\\_input}[0]", "-0.8159213568",
                                                    "-\\frac{7967982}{9765625}"]
    assert _row(rescaled, "\\tilde\\lambda_{1}")[:2] == ["2\\,\\lambda_{1}", "-0.8159213568\\quad\\text{with the hooks}"]
    grads = rescaled.split("\\subsection{Final gradients}")[1]
    assert _row(grads, "\\mathtt{x.grad}")[:2] == ["-0.244776407\\ldots", "-\\frac{11951973}{48828125}"]
    assert _row(grads, "\\mathtt{f0.bias.grad}")[:2] == ["-0.8159213568", "-\\frac{7967982}{9765625}"]
    assert _row(grads, "\\mathtt{f1.f.bias.grad}")[:2] == ["-1.019901696", "-\\frac{3983991}{3906250}"]
    # the legacy hook sees the square's input s = x2, not SLinear's input x1
    hook = legacy.split("\\subsection{Hook calls, in firing order}")[1]
    gi = _row(hook, "\\mathtt{grad\\_input}[0]")
    assert "\\lambda_{2}" in gi and gi[-2:] == ["-1.019901696", "-\\frac{3983991}{3906250}"]
    assert "PowBackward0" in hook and "would instead be handed" in hook
    assert "-0.4079606784" in hook.split("would instead be handed")[1]


def test_mlp_relu_forward_numbers():
    pred, tex = _solved(os.path.join(ROOT, "problems", "mlp_relu.yaml"))
    forward = _sections(tex, pred)["forward"]
    assert _row(forward, "x_{1}")[-1] == "\\begin{bmatrix}7 & -13 & 27 & -29\\end{bmatrix}"
    assert _row(forward, "x_{2}")[-1] == "\\begin{bmatrix}7 & 0 & 27 & 0\\end{bmatrix}"
    assert _row(forward, "x_{3}")[-1] == "89"


# ----------------------------------------------------------------------------- generic shapes

LARGE = """
name: large
description: A 14 -> 12 -> 1 network on a batch of 3, to exercise elision of large matrices.
inputs:
  x: {value: %(x)s, requires_grad: true}
model:
  type: Sequential
  children:
    fc1: {type: Linear, params: {weight: %(w1)s, bias: %(b1)s}}
    act: {type: ReLU}
    fc2: {type: Linear, params: {weight: %(w2)s, bias: [0.5]}}
loss: "mean(y ** 2)"
hooks:
  - {module: fc1, kind: full_backward, returns: "(grad_input[0] * 3,)"}
  - {module: act, kind: backward}
"""


@pytest.mark.latex
def test_large_tensors_are_elided_and_fit(tmp_path):
    x = [[((i * 7 + j * 3) % 11 - 5) / 4 for j in range(14)] for i in range(3)]
    w1 = [[((i * 5 + j * 2) % 9 - 4) / 8 for j in range(14)] for i in range(12)]
    b1 = [((i * 3) % 7 - 3) / 10 for i in range(12)]
    w2 = [[((j * 7) % 5 - 2) / 3 for j in range(12)]]
    path = tmp_path / "large.yaml"
    path.write_text(LARGE % {"x": x, "w1": w1, "b1": b1, "w2": w2})
    pred = adjoint.load(str(path)).solve()
    tex = render_document(pred)
    assert "\\cdots" in tex
    compile_pdf(tex, str(tmp_path / "large.pdf"), strict=True)


SYMBOLIC = """
name: symbolic
inputs:
  x: {value: [w0, 2], requires_grad: true}
model:
  params: {a: [[1, w1], [0.5, -1]]}
  forward: "tanh(a @ x) * x"
loss: "sum(y ** 2)"
hooks:
  - {tensor: x, returns: "grad * 2"}
"""


@pytest.mark.latex
def test_symbolic_problem_in_closed_form(tmp_path):
    path = tmp_path / "symbolic.yaml"
    path.write_text(SYMBOLIC)
    pred = adjoint.load(str(path)).solve()
    tex = render_document(pred)
    assert "w_{0}" in tex and "\\tanh" in tex
    compile_pdf(tex, str(tmp_path / "symbolic.pdf"), strict=True)


# ----------------------------------------------------------------------------- the compile step itself

@pytest.mark.latex
def test_overfull_math_is_refused_in_strict_mode(tmp_path):
    tex = ("\\documentclass{article}\\usepackage{amsmath}\\begin{document}\n"
           "\\[ x = " + " + ".join(["123456789"] * 30) + " \\]\n\\end{document}\n")
    report = compile_pdf(tex, None)
    assert report.math_overfull and report.math_overfull[0].points > 100
    with pytest.raises(ProblemError, match="overflow"):
        compile_pdf(tex, str(tmp_path / "x.pdf"), strict=True)
    assert not (tmp_path / "x.pdf").exists()


@pytest.mark.latex
def test_latex_error_is_one_line_and_a_bug(tmp_path):
    """A document the engine refuses is adjoint's own bug (exit 3 at the CLI), one line, and
    nothing is written."""
    tex = "\\documentclass{article}\\begin{document}\\undefinedmacro\\end{document}\n"
    with pytest.raises(RenderBug, match="Undefined control sequence") as err:
        compile_pdf(tex, str(tmp_path / "x.pdf"))
    assert "\n" not in str(err.value)
    assert not (tmp_path / "x.pdf").exists()


@pytest.mark.latex
def test_cli_pdf(tmp_path):
    out = tmp_path / "slinear.tex"
    run = subprocess.run([sys.executable, "-m", "adjoint.cli", "latex", SLINEAR, "-o", str(out), "--pdf",
                          "--variant", "rescaled"], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "slinear.pdf").read_bytes().startswith(b"%PDF")
    text = out.read_text()
    assert text.count("\\section{Variant") == 1 and "\\section{Variant \\texttt{rescaled}}" in text
    assert "-\\frac{7967982}{9765625}" in text


def test_cli_without_engine_says_what_to_install(tmp_path):
    out = tmp_path / "slinear.tex"
    env = dict(os.environ, PATH=str(tmp_path))       # no pdflatex, lualatex or xelatex there
    run = subprocess.run([sys.executable, "-m", "adjoint.cli", "latex", SLINEAR, "-o", str(out), "--pdf"],
                         capture_output=True, text=True, cwd=ROOT, env=env)
    assert run.returncode == 2
    assert len(run.stderr.strip().splitlines()) == 1
    assert "apt-get install texlive-latex-base" in run.stderr
    assert not out.exists() and not (tmp_path / "slinear.pdf").exists()


def test_latex_does_not_import_torch():
    code = ("import sys, adjoint; from adjoint.render.latex import render_document; "
            f"render_document(adjoint.load({SLINEAR!r}).solve()); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_numbers_of_thousands_of_digits_are_typeset_not_refused_by_python():
    """An exact value such as exp(-2000) as a rational has more digits than Python turns into a
    string (4300): the document shows its leading digits and exponent (3/7 * 10^-6000 by hand)."""
    from flint import fmpq

    from adjoint.render.latex.numbers import exact_fraction, format_rational

    small = format_rational(fmpq(3, 7 * 10 ** 6000))
    assert small.tex == "4.285714285\\ldots\\times 10^{-6001}" and not small.negative
    assert exact_fraction(fmpq(3, 7 * 10 ** 6000)) is None
    assert format_rational(fmpq(-(10 ** 6000 + 1), 7)).signed() == "-1.428571428\\ldots\\times 10^{5999}"
