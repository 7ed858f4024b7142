"""Characters beyond ASCII for LaTeX, so that any text from a problem file typesets.

pdflatex with its default fonts (OT1, Computer Modern) knows a few hundred non-ASCII
characters at most, and stops with "Unicode character ... not set up for use with LaTeX" on
the rest. The document we write is therefore pure ASCII, whatever the problem file holds:

* letters and symbols with a LaTeX command (Greek, arrows, relations, operators, quotes and
  dashes) become that command (:data:`MATH_SYMBOLS`, :data:`TEXT_SYMBOLS`);
* runs of subscript or superscript digits and signs (``x₁₂``, ``m²``) become ``{}_{12}`` and
  ``{}^{2}`` (the empty group keeps ``x₁²`` from being a double subscript);
* accented Latin letters are decomposed (NFD) into a base letter and combining accents, each
  accent a LaTeX accent command (:data:`ACCENTS`): ``é`` is ``\\'{e}``, ``ǘ`` is ``\\'{\\"{u}}``;
  the few Latin letters that are not composed (``ß``, ``ø``, ``æ``, ...) have their own
  commands;
* everything else -- control and formatting characters, lone surrogates, CJK, emoji, other
  scripts -- is a visible placeholder, ``\\texttt{U+4E2D}``: the reader sees that a character
  was there and which one, and the compilation never fails on it.

:func:`render` writes one character run for running text or for mathematics; the ASCII
characters are the caller's (:mod:`.text` escapes TeX's special characters).
"""

from __future__ import annotations

import unicodedata

#: characters with a math-mode command: ``\\ensuremath`` in text, a group in mathematics
MATH_SYMBOLS = {
    # Greek (Unicode calls lambda LAMDA); capitals without a command of their own are Latin letters
    "α": r"\alpha", "β": r"\beta", "γ": r"\gamma", "δ": r"\delta", "ε": r"\varepsilon", "ϵ": r"\epsilon",
    "ζ": r"\zeta", "η": r"\eta", "θ": r"\theta", "ϑ": r"\vartheta", "ι": r"\iota", "κ": r"\kappa",
    "λ": r"\lambda", "μ": r"\mu", "µ": r"\mu", "ν": r"\nu", "ξ": r"\xi", "ο": "o", "π": r"\pi", "ϖ": r"\varpi",
    "ρ": r"\rho", "ϱ": r"\varrho", "σ": r"\sigma", "ς": r"\varsigma", "τ": r"\tau", "υ": r"\upsilon",
    "φ": r"\varphi", "ϕ": r"\phi", "χ": r"\chi", "ψ": r"\psi", "ω": r"\omega",
    "Α": "A", "Β": "B", "Γ": r"\Gamma", "Δ": r"\Delta", "∆": r"\Delta", "Ε": "E", "Ζ": "Z", "Η": "H",
    "Θ": r"\Theta", "Ι": "I", "Κ": "K", "Λ": r"\Lambda", "Μ": "M", "Ν": "N", "Ξ": r"\Xi", "Ο": "O",
    "Π": r"\Pi", "Ρ": "P", "Σ": r"\Sigma", "Τ": "T", "Υ": r"\Upsilon", "Φ": r"\Phi", "Χ": "X", "Ψ": r"\Psi",
    "Ω": r"\Omega", "\u2126": r"\Omega",
    # arrows
    "→": r"\rightarrow", "←": r"\leftarrow", "↔": r"\leftrightarrow", "↑": r"\uparrow", "↓": r"\downarrow",
    "⇒": r"\Rightarrow", "⇐": r"\Leftarrow", "⇔": r"\Leftrightarrow", "↦": r"\mapsto", "⟶": r"\longrightarrow",
    "⟵": r"\longleftarrow", "⟹": r"\Longrightarrow", "↪": r"\hookrightarrow", "⇝": r"\leadsto",
    # relations and operators
    "×": r"\times", "÷": r"\div", "·": r"\cdot", "⋅": r"\cdot", "∙": r"\cdot", "±": r"\pm", "∓": r"\mp",
    "−": "-", "∗": r"\ast", "∘": r"\circ", "⊙": r"\odot", "⊗": r"\otimes", "⊕": r"\oplus",
    "≤": r"\leq", "≥": r"\geq", "≠": r"\neq", "≈": r"\approx", "≡": r"\equiv", "∼": r"\sim", "≃": r"\simeq",
    "≅": r"\cong", "∝": r"\propto", "≪": r"\ll", "≫": r"\gg", "≔": ":=",
    "∈": r"\in", "∉": r"\notin", "∋": r"\ni", "⊂": r"\subset", "⊃": r"\supset", "⊆": r"\subseteq",
    "⊇": r"\supseteq", "∪": r"\cup", "∩": r"\cap", "∅": r"\emptyset", "∀": r"\forall", "∃": r"\exists",
    "¬": r"\neg", "∧": r"\wedge", "∨": r"\vee", "⊤": r"\top", "⊥": r"\bot", "∥": r"\parallel", "‖": r"\|",
    "∞": r"\infty", "∂": r"\partial", "∇": r"\nabla", "∑": r"\sum", "∏": r"\prod", "∫": r"\int",
    "√": r"\surd", "′": r"\prime", "″": r"\prime\prime", "°": r"{}^{\circ}", "⟨": r"\langle", "⟩": r"\rangle",
    "⌈": r"\lceil", "⌉": r"\rceil", "⌊": r"\lfloor", "⌋": r"\rfloor", "ℓ": r"\ell", "ℏ": r"\hbar",
    "ℝ": r"\mathbb{R}", "ℕ": r"\mathbb{N}", "ℤ": r"\mathbb{Z}", "ℚ": r"\mathbb{Q}", "ℂ": r"\mathbb{C}",
    "…": r"\ldots", "⋯": r"\cdots", "⋮": r"\vdots", "⋱": r"\ddots", "•": r"\bullet", "†": r"\dagger",
    "‡": r"\ddagger", "★": r"\star", "✓": r"\checkmark",
}

#: characters with a text-mode command (in mathematics they go inside ``\\text{}``)
TEXT_SYMBOLS = {
    "“": "``", "”": "''", "‘": "`", "’": "'", "‚": ",", "„": ",,", "–": "--", "—": "---", "‐": "-", "‑": "-",
    "\u00a0": "~", "\u2009": r"\,", "\u202f": r"\,", "\u2002": " ", "\u2003": r"\quad{}", "\u200b": "",
    "\u00ad": r"\-", "\ufeff": "", "¡": r"!`", "¿": r"?`", "§": r"\S{}", "¶": r"\P{}", "©": r"\copyright{}",
    "£": r"\pounds{}", "ß": r"\ss{}", "æ": r"\ae{}", "Æ": r"\AE{}", "œ": r"\oe{}", "Œ": r"\OE{}", "ø": r"\o{}",
    "Ø": r"\O{}", "ł": r"\l{}", "Ł": r"\L{}", "ı": r"\i{}", "ȷ": r"\j{}", "å": r"\aa{}", "Å": r"\AA{}",
}

#: combining marks (what NFD splits off an accented letter) -> LaTeX's text accent commands
ACCENTS = {
    "\u0300": "`", "\u0301": "'", "\u0302": "^", "\u0303": "~", "\u0304": "=", "\u0306": "u", "\u0307": ".",
    "\u0308": '"', "\u030a": "r", "\u030b": "H", "\u030c": "v", "\u0323": "d", "\u0327": "c", "\u0328": "k",
    "\u0331": "b",
}


def render(text: str, math: bool) -> str:
    """``text`` for running text (``math=False``) or mathematics, in pure ASCII LaTeX; printable
    ASCII characters are left as they are (escaping TeX's specials among them is the caller's)."""
    out: list[str] = []
    script, held = "", []
    for ch in text:
        mark = _script(ch)
        if mark is not None and (not held or mark[0] == script):
            script = mark[0]
            held.append(mark[1])
            continue
        if held:
            out.append(_wrap(f"{{}}{script}{{{''.join(held)}}}", math, True))
            held = []
        if mark is not None:
            script, held = mark[0], [mark[1]]
            continue
        out.append(ch if " " <= ch <= "~" else char(ch, math))
    if held:
        out.append(_wrap(f"{{}}{script}{{{''.join(held)}}}", math, True))
    return "".join(out)


def char(ch: str, math: bool) -> str:
    """One character that is not printable ASCII, as LaTeX for text or mathematics."""
    if ch in MATH_SYMBOLS:
        return _wrap(MATH_SYMBOLS[ch], math, True)
    if ch in TEXT_SYMBOLS:
        return _wrap(TEXT_SYMBOLS[ch], math, False)
    accented = _accented(ch)
    if accented is not None:
        return _wrap(accented, math, False)
    return placeholder(ch, math)


def placeholder(ch: str, math: bool) -> str:
    """A character we cannot typeset, shown by its code point: ``\\texttt{U+4E2D}``."""
    return _wrap(f"\\texttt{{U+{ord(ch):04X}}}", math, False)


def _wrap(tex: str, math: bool, is_math: bool) -> str:
    if is_math:
        return f"{{{tex}}}" if math else f"\\ensuremath{{{tex}}}"
    return f"\\text{{{tex}}}" if math else tex


def _script(ch: str) -> tuple[str, str] | None:
    """('_', '2') for a subscript two, ('^', '+') for a superscript plus; None otherwise."""
    if not ("\u00b2" <= ch <= "\u00b9" or "\u2070" <= ch <= "\u209c"):
        return None
    name = unicodedata.name(ch, "")
    kind = "_" if name.startswith("SUBSCRIPT ") else "^" if name.startswith("SUPERSCRIPT ") else None
    if kind is None:
        return None
    base = unicodedata.normalize("NFKC", ch)
    if len(base) != 1 or not (base.isascii() and (base.isalnum() or base in "+-=()")):
        return None
    return kind, base


def _accented(ch: str) -> str | None:
    """A Latin letter with accents as nested accent commands, e.g. ``\\'{e}``; None otherwise."""
    parts = unicodedata.normalize("NFD", ch)
    base, marks = parts[0], parts[1:]
    if len(parts) < 2 or not ("a" <= base.lower() <= "z") or any(m not in ACCENTS for m in marks):
        return None
    if base in "ij" and marks[0] in ACCENTS and marks[0] not in ("\u0323", "\u0327", "\u0328", "\u0331"):
        base = "\\" + base  # dotless i/j under an accent above: \'{\i}
    tex = base
    for m in marks:
        tex = f"\\{ACCENTS[m]}{{{tex}}}"
    return tex
