"""Every relative link and anchor in README.md, DEVELOPERS.md and docs/*.md resolves: the file
exists, and ``#anchor`` names a heading of that file as GitHub slugs it (lower case; letters,
digits, spaces, ``-`` and ``_`` kept, everything else dropped; spaces become ``-``; a repeated
heading gets ``-1``, ``-2``, ...)."""

from __future__ import annotations

import os
import re
import unicodedata

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = [os.path.join(ROOT, "README.md"), os.path.join(ROOT, "DEVELOPERS.md")] + sorted(
    os.path.join(ROOT, "docs", f) for f in os.listdir(os.path.join(ROOT, "docs")) if f.endswith(".md"))

FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.S | re.M)
LINK = re.compile(r"(?<!\\)\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HTML_TARGET = re.compile(r"<(?:img|a)\b[^>]*?\b(?:src|href)=\"([^\"]+)\"")


def _prose(text: str) -> str:
    """The text outside fenced code blocks and inline code spans."""
    text = FENCE.sub("", text)
    return re.sub(r"(`+)(?:(?!\1).)+?\1", "", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)       # a link: its text
    text = re.sub(r"<[^>]+>", "", text)                              # inline HTML
    text = text.replace("`", "").strip().lower()
    kept = "".join(ch for ch in text
                   if ch in " -_" or unicodedata.category(ch)[0] in "LN" or unicodedata.category(ch) == "Mn")
    return kept.replace(" ", "-")


def anchors(path: str) -> set[str]:
    text = FENCE.sub("", open(path, encoding="utf-8").read())
    seen: dict[str, int] = {}
    out: set[str] = set()
    for m in re.finditer(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", text, re.M):
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    out.update(re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", text))
    return out


def targets(path: str) -> list[str]:
    prose = _prose(open(path, encoding="utf-8").read())
    return LINK.findall(prose) + HTML_TARGET.findall(prose)


def test_slugs_follow_github():
    assert slug("Custom autograd.Function") == "custom-autogradfunction"
    assert slug("Module hooks: `module: PATH`") == "module-hooks-module-path"
    assert slug("What solve answers: the JSON") == "what-solve-answers-the-json"
    assert slug("Why is LayerNorm's weight.grad not zero in PyTorch?") == "why-is-layernorms-weightgrad-not-zero-in-pytorch"
    assert slug("Zeros or None") == "zeros-or-none"
    assert slug("The picture: `adjoint graph`") == "the-picture-adjoint-graph"


def test_the_checker_finds_a_broken_link(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("# Top\n\n## Same\n\n## Same\n\n[a](#same-1) [b](#missing) [c](nothere.md) "
                    "`[d](#inline-code)`\n\n```\n[e](#in-a-fence)\n```\n")
    assert _broken(str(page)) == ["#missing: no such heading in p.md", "nothere.md: no such file"]


def _broken(path: str) -> list[str]:
    problems = []
    for target in targets(path):
        if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):    # http:, https:, mailto: -- not relative
            continue
        file, _, anchor = target.partition("#")
        where = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
        if not os.path.exists(where):
            problems.append(f"{target}: no such file")
            continue
        if anchor and where.endswith(".md") and anchor not in anchors(where):
            problems.append(f"{target}: no such heading in {os.path.basename(where)}")
    return problems


@pytest.mark.parametrize("path", DOCS, ids=lambda p: os.path.relpath(p, ROOT))
def test_every_relative_link_and_anchor_resolves(path):
    assert _broken(path) == []
