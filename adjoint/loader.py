"""Read a problem file's YAML into a small located tree. The only module that touches YAML.

Nothing in a problem file is ever constructed by YAML itself: we *compose* the node graph
with the safe loader and walk it ourselves, so tags that would build objects are refused,
duplicate keys are reported, every node keeps its line and column, and alias expansion is
bounded (a "billion laughs" file is refused, not expanded).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import yaml

from .errors import Loc, ProblemError

MAX_FILE_BYTES = 1_000_000
MAX_NODES = 200_000  # after alias expansion
MAX_DEPTH = 64

_STD = "tag:yaml.org,2002:"
_SCALAR_KINDS = {_STD + k: k for k in ("str", "int", "float", "bool", "null")}
_ALLOWED_TAGS = set(_SCALAR_KINDS) | {_STD + "map", _STD + "seq"}
_SURROGATE = re.compile("[\ud800-\udfff]")  # "\ud800" in a double-quoted scalar: not encodable text


@dataclass(frozen=True)
class YNode:
    loc: Loc


@dataclass(frozen=True)
class YScalar(YNode):
    text: str
    kind: str  # str | int | float | bool | null (YAML 1.1 resolution of a plain scalar)
    quoted: bool
    # Where the scalar's own text starts in the file, and whether it spans lines as written:
    # used to point at a column inside an expression.
    content: Loc
    block_indent: int | None  # literal/folded block scalars: the column (1-based) of the text

    def loc_at(self, line: int, col: int) -> Loc:
        """File location of 1-based (line, col) inside this scalar's text."""
        if self.block_indent is not None:
            return Loc(self.content.file, self.content.line + line - 1, self.block_indent + col - 1)
        if line == 1:
            return Loc(self.content.file, self.content.line, self.content.col + col - 1)
        return self.content


@dataclass(frozen=True)
class YSeq(YNode):
    items: tuple[YNode, ...]


@dataclass(frozen=True)
class YMap(YNode):
    entries: tuple[tuple[YScalar, YNode], ...]

    def keys(self) -> list[str]:
        return [k.text for k, _ in self.entries]

    def get(self, key: str) -> YNode | None:
        for k, v in self.entries:
            if k.text == key:
                return v
        return None

    def key_loc(self, key: str) -> Loc:
        for k, _ in self.entries:
            if k.text == key:
                return k.loc
        return self.loc


def kind_name(node: YNode) -> str:
    if isinstance(node, YMap):
        return "a mapping"
    if isinstance(node, YSeq):
        return "a list"
    assert isinstance(node, YScalar)
    return {"str": "a string", "int": "a number", "float": "a number", "bool": "a boolean",
            "null": "an empty value"}[node.kind]


def read_yaml(path: str, display: str | None = None) -> YNode:
    """Read and compose ``path``; raise ProblemError (one located line) on anything wrong."""
    name = display or path
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ProblemError(Loc(name, 1, 1), f"cannot read the file: {exc.strerror or exc}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise ProblemError(Loc(name, 1, 1),
                           f"file is larger than {MAX_FILE_BYTES} bytes; problem files are small "
                           "data files, write big tensors as a scale times a small literal")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ProblemError(Loc(name, line, 1), "file is not valid UTF-8; save it as UTF-8 text") from None
    return parse_yaml_text(text, name)


def parse_yaml_text(text: str, name: str) -> YNode:
    _check_flow_depth(text, name)
    try:
        docs = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = Loc(name, mark.line + 1, mark.column + 1) if mark else Loc(name, 1, 1)
        what = exc.problem or exc.context or "malformed YAML"
        started = ""
        if exc.context and exc.context_mark is not None and exc.problem_mark is not None \
                and exc.context_mark.line != exc.problem_mark.line:
            started = f" ({exc.context} that starts at line {exc.context_mark.line + 1}, " \
                      f"column {exc.context_mark.column + 1})"
        raise ProblemError(where, f"YAML syntax error: {what}{started}; check indentation, colons and "
                                  "brackets") from None
    except yaml.YAMLError as exc:
        raise ProblemError(Loc(name, 1, 1), f"YAML error: {exc}") from None
    except RecursionError:
        raise ProblemError(Loc(name, 1, 1), f"YAML nesting is too deep (more than {MAX_DEPTH} levels)") from None
    if not docs or docs[0] is None:
        raise ProblemError(Loc(name, 1, 1), "the file is empty; a problem file is a YAML mapping with name, inputs and model")
    if len(docs) > 1:
        second = docs[1]
        line = second.start_mark.line + 1 if second is not None else 1
        raise ProblemError(Loc(name, line, 1), "the file holds more than one YAML document; put one problem per file")
    lines = text.splitlines()
    return _Converter(name, lines).convert(docs[0], 0)


def _check_flow_depth(text: str, name: str) -> None:
    """Refuse absurd flow nesting before the (recursive) composer sees it."""
    depth = 0
    line = 1
    col = 0
    quote = ""
    for ch in text:
        col += 1
        if ch == "\n":
            line += 1
            col = 0
            if quote == "'":  # single-quoted scalars may span lines; double-quoted too
                pass
            continue
        if quote:
            if ch == quote:
                quote = ""
            continue
        if ch in "\"'" and depth > 0:
            quote = ch
        elif ch in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise ProblemError(Loc(name, line, col),
                                   f"brackets nested more than {MAX_DEPTH} deep; tensors have at most a few dimensions")
        elif ch in "]}":
            depth = max(0, depth - 1)


class _Converter:
    def __init__(self, name: str, lines: list[str]):
        self.name = name
        self.lines = lines
        self.count = 0
        self.path: set[int] = set()  # collections being converted: a repeat is a recursive alias

    def loc(self, node: yaml.Node) -> Loc:
        return Loc(self.name, node.start_mark.line + 1, node.start_mark.column + 1)

    def convert(self, node: yaml.Node, depth: int) -> YNode:
        if id(node) in self.path:
            raise ProblemError(self.loc(node), "a YAML alias refers to a node that contains it (a recursive "
                                               "alias); write the value out")
        self.count += 1
        if self.count > MAX_NODES:
            raise ProblemError(self.loc(node),
                               f"more than {MAX_NODES} YAML values (aliases included); "
                               "problem files describe small models")
        if depth > MAX_DEPTH:
            raise ProblemError(self.loc(node), f"YAML nesting is deeper than {MAX_DEPTH} levels")
        if node.tag not in _ALLOWED_TAGS:
            tag = node.tag.replace(_STD, "!!")
            raise ProblemError(self.loc(node),
                               f"YAML tag {tag} is not allowed; problem files are plain data "
                               "(numbers, strings, lists, mappings)")
        if isinstance(node, yaml.ScalarNode):
            return self.scalar(node)
        self.path.add(id(node))
        try:
            return self.collection(node, depth)
        finally:
            self.path.discard(id(node))

    def collection(self, node: yaml.Node, depth: int) -> YNode:
        if isinstance(node, yaml.SequenceNode):
            return YSeq(self.loc(node), tuple(self.convert(item, depth + 1) for item in node.value))
        assert isinstance(node, yaml.MappingNode)
        entries: list[tuple[YScalar, YNode]] = []
        seen: dict[str, Loc] = {}
        for knode, vnode in node.value:
            if not isinstance(knode, yaml.ScalarNode):
                raise ProblemError(self.loc(knode), "mapping keys must be plain names, not lists or mappings")
            if knode.tag not in _ALLOWED_TAGS:
                tag = knode.tag.replace(_STD, "!!")
                raise ProblemError(self.loc(knode), f"YAML tag {tag} is not allowed; problem files are plain data "
                                                    "(numbers, strings, lists, mappings)")
            key = self.scalar(knode)
            if key.text in seen:
                first = seen[key.text]
                raise ProblemError(key.loc, f"duplicate key '{key.text}' (first given at line {first.line}); "
                                            "give each key once")
            seen[key.text] = key.loc
            entries.append((key, self.convert(vnode, depth + 1)))
        return YMap(self.loc(node), tuple(entries))

    def scalar(self, node: yaml.ScalarNode) -> YScalar:
        loc = self.loc(node)
        bad = _SURROGATE.search(node.value)
        if bad:
            raise ProblemError(loc, f"the text holds a lone surrogate ({bad.group().encode('unicode_escape').decode()}), "
                                    "which is not a character; remove the escape")
        kind = _SCALAR_KINDS.get(node.tag, "str")
        style = node.style
        block_indent = None
        content = loc
        if style in ("|", ">"):
            content, block_indent = self._block_start(node)
        elif style in ("'", '"'):
            content = Loc(self.name, loc.line, loc.col + 1)
        return YScalar(loc, node.value, kind, style is not None, content, block_indent)

    def _block_start(self, node: yaml.ScalarNode) -> tuple[Loc, int | None]:
        first = node.start_mark.line + 1  # 0-based index of the first content line
        for i in range(first, min(len(self.lines), node.end_mark.line + 1)):
            stripped = self.lines[i].lstrip(" ")
            if stripped:
                indent = len(self.lines[i]) - len(stripped) + 1
                return Loc(self.name, first + 1, indent), indent
        return self.loc(node), None
