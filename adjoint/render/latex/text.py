"""Text and names for LaTeX: escaping running text (:func:`esc`), code in text and in mathematics
(:func:`code`, :func:`mcode`), and tensor or symbol names as math symbols (:func:`symbol_tex`:
``x``, ``u_{0}``, ``\\alpha``, ``\\mathit{scale}_{2}``)."""

from __future__ import annotations

import re


def _tex_escape_name(s: str) -> str:
    return s.replace("\\", "").replace("_", "\\_").replace("#", "\\#").replace("&", "\\&").replace("%", "\\%")


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
        b = base
    else:
        b = f"\\mathit{{{_tex_escape_name(base)}}}"
    return f"{b}_{{{sub}}}" if sub is not None else b


def esc(text: str) -> str:
    """Plain text for LaTeX."""
    out = []
    for ch in str(text):
        out.append({"\\": "\\textbackslash{}", "&": "\\&", "%": "\\%", "$": "\\$", "#": "\\#", "_": "\\_",
                    "{": "\\{", "}": "\\}", "~": "\\textasciitilde{}", "^": "\\textasciicircum{}",
                    "<": "\\textless{}", ">": "\\textgreater{}", "|": "\\textbar{}"}.get(ch, ch))
    return "".join(out)


def code(text: str) -> str:
    """Inline code in running text; long dotted names may break after a dot."""
    return "\\texttt{" + esc(text).replace(".", ".\\allowbreak{}") + "}"


def mcode(text: str) -> str:
    """A code name inside mathematics."""
    return "\\mathtt{" + _tex_escape_name(text) + "}"
