"""Text and names for LaTeX: escaping running text (:func:`esc`), code in text and in mathematics
(:func:`code`, :func:`mcode`), and tensor or symbol names as math symbols (:func:`symbol_tex`:
``x``, ``u_{0}``, ``\\alpha``, ``\\mathit{scale}_{2}``).

Whatever a problem file holds reaches the document as inert, pure-ASCII LaTeX: TeX's special
characters are escaped (so ``\\input``, ``$``, ``%``, ``^^5c`` and unbalanced braces are just
characters), whitespace is a space, and every other character goes through
:func:`.chars.render` (``lambda`` -> ``\\lambda``, ``e``-acute -> ``\\'{e}``, anything unknown, control
characters and lone surrogates included, a visible ``\\texttt{U+XXXX}``)."""

from __future__ import annotations

import re

from adjoint.render.latex.chars import render

#: TeX's special characters in running text (and in \\texttt)
_TEXT_SPECIALS = {"\\": "\\textbackslash{}", "&": "\\&", "%": "\\%", "$": "\\$", "#": "\\#", "_": "\\_",
                  "{": "\\{", "}": "\\}", "~": "\\textasciitilde{}", "^": "\\textasciicircum{}",
                  "<": "\\textless{}", ">": "\\textgreater{}", "|": "\\textbar{}"}
#: the same inside a math alphabet (\\mathit, \\mathrm, \\mathtt): names are mostly letters and _
_MATH_SPECIALS = {"\\": "\\backslash{}", "&": "\\&", "%": "\\%", "$": "\\$", "#": "\\#", "_": "\\_",
                  "{": "\\{", "}": "\\}", "~": "\\text{\\textasciitilde}", "^": "\\text{\\textasciicircum}",
                  " ": "\\ "}
_WHITESPACE = "\t\n\r\f\v"


def _escape(text: str, specials: dict[str, str], math: bool) -> str:
    out: list[str] = []
    other: list[str] = []  # a run of non-ASCII characters (subscript digits are grouped)
    for ch in text:
        if " " <= ch <= "~" or ch in _WHITESPACE:
            if other:
                out.append(render("".join(other), math))
                other = []
            out.append(" " if ch in _WHITESPACE else specials.get(ch, ch))
        else:
            other.append(ch)
    if other:
        out.append(render("".join(other), math))
    return "".join(out)


def _tex_escape_name(s: str) -> str:
    """A name inside a math alphabet such as ``\\mathit{...}``."""
    return _escape(s, _MATH_SPECIALS, math=True)


_GREEK = {"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda", "mu",
          "nu", "xi", "pi", "rho", "sigma", "tau", "upsilon", "phi", "chi", "psi", "omega", "Gamma", "Delta",
          "Theta", "Lambda", "Xi", "Pi", "Sigma", "Upsilon", "Phi", "Psi", "Omega"}


def symbol_tex(name: str) -> str:
    """A tensor or symbol name as a math symbol: x, u_{0}, \\alpha, \\mathit{scale}_{2}."""
    m = re.fullmatch(r"([A-Za-z]+?)_?(\d+)", name)
    base, sub = (m.group(1), m.group(2)) if m else (name, None)
    if "_" in base and not m:
        head, _, tail = base.partition("_")
        return f"{symbol_tex(head)}_{{\\mathrm{{{_tex_escape_name(tail)}}}}}"
    if base in _GREEK:
        b = "\\" + base
    elif len(base) == 1:
        b = _tex_escape_name(base)
    else:
        b = f"\\mathit{{{_tex_escape_name(base)}}}"
    return f"{b}_{{{sub}}}" if sub is not None else b


def esc(text: str) -> str:
    """Plain text for LaTeX."""
    return _escape(str(text), _TEXT_SPECIALS, math=False)


def code(text: str) -> str:
    """Inline code in running text; long dotted names may break after a dot."""
    return "\\texttt{" + ".\\allowbreak{}".join(esc(part) for part in str(text).split(".")) + "}"


def mcode(text: str) -> str:
    """A code name inside mathematics."""
    return "\\mathtt{" + _tex_escape_name(text) + "}"
