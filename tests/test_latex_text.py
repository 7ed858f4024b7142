"""Text from a problem file in the LaTeX document: TeX's special characters inert (22 injection
payloads), every non-ASCII character typeset or shown as a placeholder, never a failed
compilation, and the document pure ASCII."""

from __future__ import annotations

import os
import re

import pytest
from click.testing import CliRunner

from adjoint.cli import main
from adjoint.render.latex.chars import ACCENTS, MATH_SYMBOLS, TEXT_SYMBOLS
from adjoint.render.latex.document import PREAMBLE
from adjoint.render.latex.text import _tex_escape_name, code, esc, mcode, symbol_tex

PAYLOADS = [
    r"\input{/etc/hostname}", r"\include{/etc/hostname}", r"\immediate\write18{touch PWNED}", r"\write18{id}",
    r"$\alpha$", r"}\end{document}", r"\end{document}", r"\def\x{1}\x", r"\catcode`\@=11", r"^^5cinput{/etc/hostname}",
    r"% the rest is a comment", r"{", r"}", r"\\", r"~#&_^", r"\openout1=PWNED.txt", r"\csname input\endcsname{x}",
    r"\verb|x|", r"\url{file:///etc/hostname}", r"\newcommand{\x}{y}", r"\makeatletter\@@input /etc/hostname",
    r"\usepackage{shellesc}\ShellEscape{id}",
]
#: the only control sequences escaping may write for ASCII input
ESCAPES = {r"\textbackslash", r"\textasciitilde", r"\textasciicircum", r"\textless", r"\textgreater", r"\textbar",
           r"\&", r"\%", r"\$", r"\#", r"\_", r"\{", r"\}", r"\backslash", r"\text", r"\ ", r"\texttt",
           r"\allowbreak", r"\mathtt"}

UNICODE_TEXT = "λ → x₁₂ m² ∂ℓ/∂x ≤ ∞ café naïve Ærøskøbing Straße “quoted” – dash — ǘ 中文 🙂 \x1b \u202e \x85"


def balanced(tex: str) -> bool:
    depth = 0
    for m in re.finditer(r"\\.|[{}]", tex):
        if m.group() == "{":
            depth += 1
        elif m.group() == "}":
            depth -= 1
            if depth < 0:
                return False
    return depth == 0


@pytest.mark.parametrize("payload", PAYLOADS)
@pytest.mark.parametrize("escape", [esc, code, mcode, _tex_escape_name], ids=lambda f: f.__name__)
def test_injection_payloads_are_inert(payload, escape):
    tex = escape(payload)
    assert set(re.findall(r"\\(?:[A-Za-z]+|.)", tex)) <= ESCAPES, tex
    assert balanced(tex) and "%" not in tex.replace(r"\%", "") and "^^" not in tex


@pytest.mark.parametrize("escape", [esc, code, mcode, symbol_tex], ids=lambda f: f.__name__)
def test_any_text_becomes_pure_ascii(escape):
    tex = escape(UNICODE_TEXT + "\ud800")
    assert tex.isascii() and balanced(tex)
    assert not re.search(r"[\x00-\x1f\x7f]", tex)


def test_symbols_accents_and_placeholders():
    assert esc("λ") == r"\ensuremath{\lambda}"
    assert esc("a → b") == r"a \ensuremath{\rightarrow} b"
    assert esc("x₁₂²") == r"x\ensuremath{{}_{12}}\ensuremath{{}^{2}}"
    assert esc("é ǘ ñ ı ç") == r"\'{e} \'{\"{u}} \~{n} \i{} \c{c}"
    assert esc("中") == r"\texttt{U+4E2D}" and esc("\x1b") == r"\texttt{U+001B}"
    assert esc("\ud800") == r"\texttt{U+D800}"
    assert esc("a\n\nb\tc") == "a  b c"        # never a paragraph break inside a title
    assert mcode("é") == r"\mathtt{\text{\'{e}}}"
    assert symbol_tex("λ") == r"{\lambda}"
    assert code("a.é") == r"\texttt{a.\allowbreak{}\'{e}}"


def _document(body: str) -> str:
    return PREAMBLE + "\\begin{document}\n" + body + "\n\\end{document}\n"


@pytest.mark.latex
def test_every_mapped_character_compiles_in_every_context():
    from adjoint.render.pdf import compile_pdf

    letters = "".join(c + m for c in "aeiouAEIOUcsnzgr" for m in ACCENTS)
    chars = "".join(MATH_SYMBOLS) + "".join(TEXT_SYMBOLS) + letters + "中🙂\x00\x1b\u202e\ud800"
    body = [f"\\section{{{esc(chars)}}}", esc(chars), code(chars), f"${mcode(chars)}$",
            f"$\\mathit{{{_tex_escape_name(chars)}}} = {symbol_tex('x_' + chars)}$", "\\begin{itemize}",
            f"\\item {esc(UNICODE_TEXT)}", "\\end{itemize}"]
    report = compile_pdf(_document("\n\n".join(body)), None)
    assert report.pdf.startswith(b"%PDF")


@pytest.mark.latex
def test_payloads_compile_as_text(tmp_path, monkeypatch):
    from adjoint.render.pdf import compile_pdf

    monkeypatch.chdir(tmp_path)
    body = "\n\n".join(f"{esc(p)} \\texttt{{{esc(p)}}} ${mcode(p)}$" for p in PAYLOADS)
    report = compile_pdf(_document(body), None)
    assert report.pdf.startswith(b"%PDF")
    assert "/etc/hostname)" not in report.log and not list(tmp_path.iterdir())


HOSTILE_PROBLEM = """\
name: text
description: "{desc}"
inputs:
  x: {{value: [0.5], requires_grad: true}}
model: {{forward: "x * 2"}}
loss: "sum(y)"
hooks:
  - {{tensor: x, label: "{label}", returns: "2 * grad"}}
"""


def _quoted(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\x1b", "\\e").replace("\u202e", "\\u202e") \
        .replace("\x85", "\\N")


@pytest.mark.latex
def test_non_ascii_and_payloads_in_a_problem_typeset(tmp_path):
    path = tmp_path / "text.yaml"
    path.write_text(HOSTILE_PROBLEM.format(desc=_quoted(UNICODE_TEXT + " " + " ".join(PAYLOADS)),
                                           label=_quoted("λ-hook → ×2 " + PAYLOADS[2])), encoding="utf-8")
    out = tmp_path / "text.tex"
    result = CliRunner().invoke(main, ["latex", str(path), "-o", str(out), "--pdf"])
    assert result.exit_code == 0, result.stderr
    assert out.read_text(encoding="utf-8").isascii()
    assert (tmp_path / "text.pdf").read_bytes().startswith(b"%PDF")
    assert not os.path.exists("PWNED") and not (tmp_path / "PWNED").exists()
