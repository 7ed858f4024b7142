"""Read a problem file's YAML into a small located tree. The only module that touches YAML.

Nothing in a problem file is ever constructed by YAML itself. We take the parser's *event*
stream (libyaml's C parser, ``yaml.CParser`` behind ``yaml.CSafeLoader``, which PyYAML's
wheels ship; the pure-Python parser of ``yaml.SafeLoader`` only when libyaml is not
available, ``yaml.__with_libyaml__`` false) and compose the tree ourselves, in one loop with
an explicit stack, so that:

* every node keeps its line and column (libyaml's marks count characters, as PyYAML's do);
* nesting is bounded on the YAML structure itself -- brackets in a comment or a block scalar
  do not count -- before anything recursive could see it (libyaml's own composer recurses in
  C and crashes the interpreter on a 100,000-deep list, and its scanner slows quadratically
  with flow depth, so we stop at the first level past the limit);
* tags that would build objects are refused (on keys too), duplicate keys and duplicate or
  undefined anchors are reported, and alias expansion is counted (a "billion laughs" file
  is refused at the alias that overflows the budget, never expanded);
* a merge key (``<<: *base``, YAML 1.1's merge type) merges as PyYAML's ``safe_load`` does;
* plain scalars resolve with PyYAML's YAML 1.1 rules (``yes`` is a boolean, ``1_000`` an
  int). A ``%YAML`` directive other than 1.1 is refused in one line: YAML 1.2 resolves
  ``yes``, ``on``, ``1_000`` and ``017`` differently, and reading such a file with 1.1 rules
  would silently change what it says.

A syntax error found by libyaml is re-described by PyYAML's pure-Python parser, whose
messages name what was found ("expected ',' or ']', but got ':'"); libyaml's own message is
used when the pure-Python parser accepts the text (libyaml is stricter on a few inputs,
e.g. a ``\\ud800`` escape, which would be a lone surrogate).
"""

from __future__ import annotations

import os
import re
import stat
import yaml

from adjoint.format.errors import Loc, ProblemError

MAX_FILE_BYTES = 1_000_000
MAX_NODES = 200_000  # values after alias expansion (mapping keys are not counted)
MAX_DEPTH = 64       # nesting of lists and mappings; flow brackets ([, {) are bounded by the same number

#: libyaml's parser when PyYAML was built with it (its wheels are), else the pure-Python one
FAST = bool(getattr(yaml, "__with_libyaml__", False))
_PARSER = yaml.CSafeLoader if FAST else yaml.SafeLoader

_STD = "tag:yaml.org,2002:"
_SCALAR_KINDS = {_STD + k: k for k in ("str", "int", "float", "bool", "null")}
_ALLOWED_TAGS = frozenset(_SCALAR_KINDS) | {_STD + "map", _STD + "seq"}
_STR = _STD + "str"
#: PyYAML's YAML 1.1 implicit resolvers (first character -> ((tag, regexp), ...)), as its composer uses them
_WILDCARD = tuple(yaml.SafeLoader.yaml_implicit_resolvers.get(None, ()))
_RESOLVERS = {first: tuple(rules) + _WILDCARD
              for first, rules in yaml.SafeLoader.yaml_implicit_resolvers.items() if first is not None}
_SURROGATE = re.compile("[\ud800-\udfff]")


class YNode:
    """A composed YAML value and where it starts. Immutable (read-only properties over slots:
    a problem file has tens of thousands of scalars, and a frozen dataclass costs four times
    as much to build); the location is made into a :class:`Loc` only when asked for."""

    __slots__ = ("_file", "_line", "_col")

    def __init__(self, loc: Loc):
        self._file, self._line, self._col = loc.file, loc.line, loc.col

    @property
    def loc(self) -> Loc:
        return Loc(self._file, self._line, self._col)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.loc})"


class YScalar(YNode):
    """A scalar: its text, its YAML 1.1 kind (str | int | float | bool | null), whether it was
    written quoted or as a block, and where its own text starts (``content``; for a block
    scalar ``block_indent`` is the 1-based column of its lines), used to point at a column
    inside an expression."""

    __slots__ = ("_text", "_kind", "_quoted", "_content", "_block_indent", "_folds")

    def __init__(self, loc: Loc, text: str, kind: str, quoted: bool, content: Loc, block_indent: int | None,
                 folds: tuple | None = None):
        super().__init__(loc)
        self._text, self._kind, self._quoted, self._block_indent = text, kind, quoted, block_indent
        self._content = None if content == loc else content
        self._folds = folds

    @classmethod
    def _plain(cls, file: str, line: int, col: int, text: str, kind: str) -> "YScalar":
        """The loader's fast path: an unquoted scalar whose text starts where it does."""
        node = cls.__new__(cls)
        node._file, node._line, node._col, node._text, node._kind = file, line, col, text, kind
        node._quoted, node._content, node._block_indent, node._folds = False, None, None, None
        return node

    @property
    def text(self) -> str:
        return self._text

    @property
    def kind(self) -> str:
        return self._kind

    @property
    def quoted(self) -> bool:
        return self._quoted

    @property
    def content(self) -> Loc:
        return self._content if self._content is not None else self.loc

    @property
    def block_indent(self) -> int | None:
        return self._block_indent

    @property
    def folded(self) -> bool:
        """YAML joined several source lines of this scalar into one (a ``>`` block, or a plain or
        quoted scalar written over several lines): a forward written so is one line of Python."""
        return self._folds is not None

    def loc_at(self, line: int, col: int) -> Loc:
        """File location of 1-based (line, col) inside this scalar's text."""
        content = self.content
        if self._folds is not None:   # lines YAML folded into one: find the source line of the offset
            lines = self._text.split("\n")
            offset = sum(len(t) + 1 for t in lines[:line - 1]) + col - 1
            at, src_line, src_col = self._folds[0]
            for fold in self._folds:
                if fold[0] > offset:
                    break
                at, src_line, src_col = fold
            return Loc(content.file, src_line, src_col + offset - at)
        if self._block_indent is not None:
            return Loc(content.file, content.line + line - 1, self._block_indent + col - 1)
        if line == 1:
            return Loc(content.file, content.line, content.col + col - 1)
        return content

    def __repr__(self) -> str:
        return f"YScalar({self.loc}, {self._text!r}, {self._kind})"


class YSeq(YNode):
    """A list of values."""

    __slots__ = ("_items",)

    def __init__(self, loc: Loc, items: tuple[YNode, ...]):
        super().__init__(loc)
        self._items = tuple(items)

    @property
    def items(self) -> tuple[YNode, ...]:
        return self._items


class YNumberRow(YSeq):
    """A one-line flow list of plain scalars read by the loader's fast path (see
    :func:`parse_yaml_text`): the same list as a :class:`YSeq` of :class:`YScalar`, whose
    items are made when first asked for; :attr:`texts` and :attr:`kinds` are there at once
    (a tensor's row is read from them without a node per number)."""

    __slots__ = ("texts", "_row", "_kinds")

    @property
    def items(self) -> tuple[YNode, ...]:
        if self._items is None:
            plain, name, line, kinds = YScalar._plain, self._file, self._line, self._kinds
            col = self._col
            self._items = tuple(plain(name, line, col + t.start(), t.group(), kinds[t.group()])
                                for t in _ROW_ITEM.finditer(self._row, 1, len(self._row) - 1))
        return self._items

    @property
    def kinds(self) -> list[str]:
        """Each item's kind, in order."""
        return list(map(self._kinds.__getitem__, self.texts))


class YMap(YNode):
    """A mapping, its entries in file order (keys are scalars, each given once)."""

    __slots__ = ("_entries",)

    def __init__(self, loc: Loc, entries: tuple[tuple[YScalar, YNode], ...]):
        super().__init__(loc)
        self._entries = tuple(entries)

    @property
    def entries(self) -> tuple[tuple[YScalar, YNode], ...]:
        return self._entries

    def keys(self) -> list[str]:
        return [k.text for k, _ in self._entries]

    def get(self, key: str) -> YNode | None:
        for k, v in self._entries:
            if k.text == key:
                return v
        return None

    def key_loc(self, key: str) -> Loc:
        for k, _ in self._entries:
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


# ----------------------------------------------------------------------------- reading

def read_yaml(path: str, display: str | None = None) -> YNode:
    """Read and compose ``path``; raise ProblemError (one located line) on anything wrong.

    Only a regular file is read: a FIFO, a device, a socket or a directory is refused at once
    (opened without blocking, checked with fstat on the open descriptor, so nothing can be
    swapped in between the check and the read)."""
    name = display or path
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise ProblemError(Loc(name, 1, 1), f"cannot read the file: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ProblemError(Loc(name, 1, 1), f"is {_file_kind(mode)}, not a regular file; give a problem file "
                                                "(or - to read one from standard input)")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=True) as fh:
            fd = -1
            raw = fh.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ProblemError(Loc(name, 1, 1), f"cannot read the file: {exc.strerror or exc}") from None
    finally:
        if fd >= 0:
            os.close(fd)
    return read_yaml_bytes(raw, name)


def _file_kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def read_yaml_bytes(raw: bytes, name: str) -> YNode:
    """Compose a problem file given as bytes (a file's or standard input's content)."""
    return parse_yaml_text(decode(raw, name), name)


def decode(raw: bytes, name: str) -> str:
    """A problem file's bytes as text: at most MAX_FILE_BYTES of UTF-8 (a BOM is allowed)."""
    if len(raw) > MAX_FILE_BYTES:
        raise ProblemError(Loc(name, 1, 1),
                           f"file is larger than {MAX_FILE_BYTES} bytes; problem files are small "
                           "data files: put big tensors in side files ({value: {file: w.safetensors, key: NAME}}; "
                           "adjoint import writes them)")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ProblemError(Loc(name, line, 1), "file is not valid UTF-8; save it as UTF-8 text") from None


def parse_yaml_text(text: str, name: str) -> YNode:
    """Compose YAML text into the located tree (one document, a bounded number of values).

    Lists of plain numbers (a tensor's rows: most of a problem file's text) are read by
    :func:`_number_lists` and handed to libyaml as empty lists of the same length; the tree
    is the one libyaml's events would have made (:class:`_Composer` checks that every such
    list came back as a list at its place), and on anything else the file is composed again
    from its own text, so its errors are reported as before."""
    if FAST:
        packed = _number_lists(text, name)
        if packed is not None:
            try:
                return _compose(packed[0], name, packed[1])
            except (_NotPacked, ProblemError, yaml.YAMLError, UnicodeEncodeError):
                pass   # the file's own text decides (and words any error)
    return _compose(text, name, None)


def _compose(text: str, name: str, lists: dict | None) -> YNode:
    try:
        parser = _PARSER(text)
    except (yaml.YAMLError, UnicodeEncodeError) as exc:  # the pure-Python reader checks characters up front
        if lists is not None:
            raise
        raise _syntax_error(text, name, exc) from None
    try:
        return _Composer(name, text, lists).document(parser.get_event)
    except (yaml.YAMLError, UnicodeEncodeError) as exc:
        if lists is not None:
            raise
        raise _syntax_error(text, name, exc) from None
    finally:
        parser.dispose()


class _NotPacked(Exception):
    """The number lists read ahead do not stand where libyaml put lists: read the text itself."""


#: a plain scalar that a number list may hold (a sign, a dot, then a digit first: never ``-``, ``...``,
#: ``---``; none of YAML's flow indicators, no ``:``, ``#``, quotes or spaces)
_TOKEN = r"[-+]?\.?[0-9][0-9A-Za-z_.+/-]*"
_ROW = re.compile(r"\[ *(?:(?:" + _TOKEN + r") *, *)*(?:(?:" + _TOKEN + r") *)?\]")
_ROW_ITEM = re.compile(r"[^ ,\]]+")
_NESTED = re.compile(r"\[ *\[")
_LIST_START = re.compile(r"\[ *[-+.0-9\[]")
_AFTER_LIST = frozenset(" ,]}\n")
_BEFORE_LIST = frozenset(" ,[{\n")
_PACK_DEPTH = 8
#: a file smaller than this is composed from its own text (nothing to win)
_PACK_MIN_CHARS = 4096


def _number_lists(text: str, name: str):
    """``(text', lists)``: ``text`` with each flow list of plain numbers (on one line, up to
    :data:`_PACK_DEPTH` deep) written as ``[]`` and spaces, and ``lists``: its start offset ->
    (the composed :class:`YSeq`, values in it, depth). None when there is nothing to pack or
    the text is outside what this reads (not ASCII, carriage returns)."""
    if len(text) < _PACK_MIN_CHARS or not text.isascii() or "\r" in text:
        return None
    lists: dict[int, tuple[YSeq, int, int]] = {}
    pieces: list[str] = []
    done = 0
    kinds: dict[str, str | None] = {}
    line, line_start = 0, 0   # 0-based line of ``line_start``, the offset where that line starts
    pos = 0
    find_start = _LIST_START.search
    while True:
        m = find_start(text, pos)
        if m is None:
            break
        start = m.start()
        if start and text[start - 1] not in _BEFORE_LIST:   # ``grad[0]`` in an expression: not a YAML list
            pos = start + 1
            continue
        eol = text.find("\n", start)
        if eol < 0:
            eol = len(text)
        line += text.count("\n", line_start, start)
        line_start = text.rfind("\n", 0, start) + 1
        got = _read_list(text, start, eol, name, line + 1, line_start, kinds, 1)
        if got is None:
            pos = start + 1
            continue
        node, end, count, depth = got
        if end < len(text) and text[end] not in _AFTER_LIST:
            pos = start + 1
            continue
        lists[start] = (node, count, depth)
        pieces.append(text[done:start])
        pieces.append("[]" + " " * (end - start - 2))
        done = pos = end
    if not lists:
        return None
    pieces.append(text[done:])
    return "".join(pieces), lists


def _read_list(text: str, start: int, eol: int, name: str, line: int, line_start: int,
               kinds: dict, depth: int):
    """The flow list of plain numbers at ``start`` (``[``), ending before ``eol``: (node, end,
    values, depth) or None."""
    if depth > _PACK_DEPTH:
        return None
    loc_col = start - line_start + 1
    if _NESTED.match(text, start):
        items = []
        pos = start + 1
        count, deepest = 1, depth
        while True:
            while pos < eol and text[pos] == " ":
                pos += 1
            if pos >= eol or text[pos] != "[":
                return None
            got = _read_list(text, pos, eol, name, line, line_start, kinds, depth + 1)
            if got is None:
                return None
            node, pos, n, d = got
            items.append(node)
            count += n
            deepest = max(deepest, d)
            while pos < eol and text[pos] == " ":
                pos += 1
            if pos >= eol:
                return None
            c = text[pos]
            if c == "]":
                break
            if c != ",":
                return None
            pos += 1
            while pos < eol and text[pos] == " ":
                pos += 1
            if pos < eol and text[pos] == "]":   # a trailing comma
                break
        end = pos + 1
        if end > eol:
            return None
        return YSeq(Loc(name, line, loc_col), tuple(items)), end, count, deepest
    m = _ROW.match(text, start, eol)
    if m is None:
        return None
    end = m.end()
    row = m.group()
    texts = row[1:-1].split(",")
    if texts[-1].strip(" ") == "":   # [] or a trailing comma
        texts.pop()
    texts = [t.strip(" ") for t in texts]
    for value in set(texts).difference(kinds):
        kind = "str"
        for tag, regexp in _RESOLVERS.get(value[:1], _WILDCARD):
            if regexp.match(value):
                kind = _SCALAR_KINDS.get(tag)
                break
        if kind is None:   # !!timestamp and the like: the composer refuses them, in its words
            return None
        kinds[value] = kind
    node = YNumberRow.__new__(YNumberRow)
    node._file, node._line, node._col, node._items = name, line, loc_col, None
    node.texts, node._row, node._kinds = texts, row, kinds
    return node, end, len(texts) + 1, depth


# ----------------------------------------------------------------------------- composing

_FLOW_MSG = f"brackets nested more than {MAX_DEPTH} deep; tensors have at most a few dimensions"


class _Open:
    """A list or mapping whose events are still arriving."""

    __slots__ = ("loc", "is_map", "flow", "items", "seen", "key", "anchor", "count0", "merge_key", "merged")

    def __init__(self, loc: Loc, is_map: bool, flow: bool, anchor: str | None, count0: int):
        self.loc, self.is_map, self.flow, self.anchor, self.count0 = \
            loc, is_map, flow, anchor, count0
        self.items: list = []
        self.seen: dict[str, Loc] = {}
        self.key: YScalar | None = None
        self.merge_key = False            # the key being composed is YAML 1.1's merge key ``<<``
        self.merged: YNode | None = None  # the value of this mapping's ``<<``


def _merge(done: _Open) -> tuple:
    """A mapping's entries with its ``<<: *base`` merged in, as YAML 1.1's merge type (and PyYAML's
    ``flatten_mapping``) has it: the value is a mapping or a list of mappings; a key the mapping
    gives itself wins over a merged one, and of the merged ones the first mapping listed wins;
    keys stand in the order a Python dict built from them has (the merged ones first)."""
    value = done.merged
    sources = value.items if isinstance(value, YSeq) else (value,)
    for source in sources:
        if not isinstance(source, YMap):
            raise ProblemError(source.loc, f"the YAML merge key << takes a mapping or a list of mappings (an alias "
                                           f"such as *base), not {kind_name(source)}; write the keys out instead")
    entries: dict[str, tuple] = {}
    for key, item in [e for source in reversed(sources) for e in source.entries] + done.items:
        entries[key.text] = (key, item)
    return tuple(entries.values())


def _names_problem(stack: list, parent) -> bool:
    """The value being composed is the top-level ``name:``'s, which is the text as written
    (``name: 2026-11-30`` is a YAML 1.1 timestamp, yet matches the name pattern)."""
    return len(stack) == 1 and parent.is_map and parent.key is not None and parent.key.text == "name"


class _Composer:
    """Builds the located tree from parser events: one document, counted, bounded, checked."""

    def __init__(self, name: str, text: str, lists: dict | None = None):
        self.name = name
        self.text = text
        self.lists = lists   # start offset -> a number list read ahead (see parse_yaml_text), or None
        self.lines: list[str] | None = None
        self.count = 0
        self.anchors: dict[str, tuple[YNode, int]] = {}  # anchor -> (node, values it expands to)
        self.open_anchors: dict[str, Loc] = {}
        self.too_deep: Loc | None = None                   # first node past MAX_DEPTH (reported at the end)

    def loc(self, mark) -> Loc:
        return Loc(self.name, mark.line + 1, mark.column + 1)

    def document(self, get) -> YNode:
        get()  # StreamStartEvent
        event = get()
        if isinstance(event, yaml.StreamEndEvent):
            raise ProblemError(Loc(self.name, 1, 1), "the file is empty; a problem file is a YAML mapping with name, "
                                                     "inputs and model")
        self.check_version(event)
        root = self.node(get)
        get()  # DocumentEndEvent
        event = get()
        if isinstance(event, yaml.DocumentStartEvent):
            first = get()
            raise ProblemError(Loc(self.name, first.start_mark.line + 1, 1),
                               "the file holds more than one YAML document; put one problem per file")
        if self.too_deep is not None:
            raise ProblemError(self.too_deep, f"YAML nesting is deeper than {MAX_DEPTH} levels")
        return root

    def check_version(self, event) -> None:
        version = getattr(event, "version", None)
        if version is not None and tuple(version) != (1, 1):
            where = self.text.find("%YAML")
            line = self.text.count("\n", 0, where) + 1 if where >= 0 else 1
            raise ProblemError(Loc(self.name, line, 1),
                               f"the file declares YAML {version[0]}.{version[1]} (%YAML directive); problem files "
                               "are read as YAML 1.1, whose rules for yes/no/on/off, 1_000 and 017 differ from "
                               "1.2's; remove the directive (or write %YAML 1.1)")

    def node(self, get) -> YNode:
        """Compose one node (the document's root) from the event stream, without recursion."""
        stack: list[_Open] = []
        flow_depth = 0
        name = self.name
        scalar_event, alias_event = yaml.ScalarEvent, yaml.AliasEvent
        seq_start, map_start = yaml.SequenceStartEvent, yaml.MappingStartEvent
        plain = YScalar._plain
        lists, packed, seq_end = self.lists, 0, yaml.SequenceEndEvent
        while True:
            event = get()
            cls = event.__class__
            parent = stack[-1] if stack else None
            is_key = parent is not None and parent.is_map and parent.key is None
            if cls is scalar_event:
                value = event.value
                if event.tag is None and event.anchor is None and not event.style and not is_key \
                        and value.isascii() and event.end_mark.line == event.start_mark.line:
                    # the common case (a number, a name): no tag, no anchor, no quotes, a value
                    kind = "str"
                    for tag, regexp in _RESOLVERS.get(value[:1], _WILDCARD):
                        if regexp.match(value):
                            kind = _SCALAR_KINDS.get(tag)
                            break
                    mark = event.start_mark
                    node = plain(name, mark.line + 1, mark.column + 1, value, kind)
                    if kind is None and not _names_problem(stack, parent):  # !!timestamp, !!merge, !!value
                        self.check_tag(tag, node.loc, explicit_only=False, default=tag)
                else:
                    node = self.scalar(event, is_key or _names_problem(stack, parent))
                if not is_key:  # keys are not counted (as before: the budget is for values)
                    self.count += 1
                    if self.count > MAX_NODES:
                        self.count_values(0, node.loc)  # raises: past the budget
                if len(stack) > MAX_DEPTH and self.too_deep is None and not is_key:
                    self.too_deep = node.loc
                if event.anchor is not None:
                    self.define(event.anchor, node, 1, node.loc)
            elif cls is alias_event:
                node, size = self.alias(event)
                if not is_key:
                    self.count_values(size, self.loc(event.start_mark))
            elif cls is seq_start and lists is not None and event.start_mark.index in lists:
                node, size, depth = lists[event.start_mark.index]
                if is_key or event.anchor is not None or event.tag is not None or not event.flow_style \
                        or get().__class__ is not seq_end or flow_depth + depth > MAX_DEPTH \
                        or len(stack) + depth > MAX_DEPTH or self.count + size > MAX_NODES:
                    raise _NotPacked()   # the text itself decides (and words any error)
                self.count += size
                packed += 1
            elif cls is seq_start or cls is map_start:
                loc = self.loc(event.start_mark)
                if is_key:
                    raise ProblemError(loc, "mapping keys must be plain names, not lists or mappings")
                self.check_tag(event.tag, loc, explicit_only=False, default=_STD + ("seq" if cls is seq_start
                                                                                      else "map"))
                self.count_values(1, loc)
                flow = bool(event.flow_style)
                if flow:
                    flow_depth += 1
                    if flow_depth > MAX_DEPTH:
                        raise ProblemError(loc, _FLOW_MSG)
                if len(stack) > MAX_DEPTH and self.too_deep is None:
                    self.too_deep = loc
                if event.anchor is not None:
                    if event.anchor in self.anchors or event.anchor in self.open_anchors:
                        self.duplicate_anchor(event.anchor, loc)
                    self.open_anchors[event.anchor] = loc
                stack.append(_Open(loc, cls is map_start, flow, event.anchor, self.count))
                continue
            else:  # SequenceEndEvent / MappingEndEvent
                done = stack.pop()
                if done.flow:
                    flow_depth -= 1
                if not done.is_map:
                    node = YSeq(done.loc, tuple(done.items))
                else:
                    node = YMap(done.loc, tuple(done.items) if done.merged is None else _merge(done))
                if done.anchor is not None:
                    del self.open_anchors[done.anchor]
                    self.anchors[done.anchor] = (node, self.count - done.count0 + 1)
                parent = stack[-1] if stack else None
                is_key = False
            if parent is None:
                if lists is not None and packed != len(lists):
                    raise _NotPacked()   # a list read ahead was inside a string or a comment
                return node
            if not parent.is_map:
                parent.items.append(node)
            elif is_key:
                if not isinstance(node, YScalar):
                    raise ProblemError(self.loc(event.start_mark), "mapping keys must be plain names, not lists or "
                                                                   "mappings")
                first = parent.seen.get(node.text)
                if first is not None:
                    raise ProblemError(self.loc(event.start_mark),
                                       f"duplicate key '{node.text}' (first given at line {first.line}); give each "
                                       "key once")
                parent.seen[node.text] = node.loc
                parent.key = node
                # YAML 1.1's merge key: a plain ``<<`` (quoted, it is the text '<<')
                parent.merge_key = cls is scalar_event and node.text == "<<" and not node.quoted \
                    and event.tag is None
            elif parent.merge_key:
                parent.merged = node
                parent.key, parent.merge_key = None, False
            else:
                parent.items.append((parent.key, node))
                parent.key = None

    def count_values(self, n: int, loc: Loc) -> None:
        self.count += n
        if self.count > MAX_NODES:
            raise ProblemError(loc, f"more than {MAX_NODES} YAML values (aliases included); problem files describe "
                                    "small models: put big tensors in side files ({value: {file: w.safetensors, "
                                    "key: NAME}}; adjoint import writes them)")

    def define(self, anchor: str, node: YNode, size: int, loc: Loc) -> None:
        if anchor in self.anchors or anchor in self.open_anchors:
            self.duplicate_anchor(anchor, loc)
        self.anchors[anchor] = (node, size)

    def duplicate_anchor(self, anchor: str, loc: Loc) -> None:
        first = self.anchors[anchor][0].loc if anchor in self.anchors else self.open_anchors[anchor]
        raise ProblemError(loc, f"YAML anchor &{anchor} is defined twice (first at line {first.line}); give each "
                                "anchor its own name")

    def alias(self, event) -> tuple[YNode, int]:
        anchor = event.anchor
        if anchor in self.open_anchors:
            raise ProblemError(self.open_anchors[anchor], "a YAML alias refers to a node that contains it (a recursive "
                                                          "alias); write the value out")
        if anchor not in self.anchors:
            raise ProblemError(self.loc(event.start_mark), f"YAML alias *{anchor} refers to no anchor defined before "
                                                           f"it; define &{anchor} on a value above this line")
        return self.anchors[anchor]

    def check_tag(self, tag: str | None, loc: Loc, explicit_only: bool, default: str) -> str:
        """The node's tag: an explicit one must be plain data; an implicit one is ``default``."""
        if tag is None or tag == "!":
            tag = default
            if explicit_only:
                return tag
        if tag not in _ALLOWED_TAGS:
            shown = tag.replace(_STD, "!!")
            raise ProblemError(loc, f"YAML tag {shown} is not allowed; problem files are plain data "
                                    "(numbers, strings, lists, mappings)")
        return tag

    def scalar(self, event, is_key: bool) -> YScalar:
        """A scalar node; ``is_key``: a mapping key or the top-level name, where an implicit
        !!timestamp or !!merge is just the text written."""
        mark = event.start_mark
        loc = Loc(self.name, mark.line + 1, mark.column + 1)
        value = event.value
        default = _STR
        if event.implicit[0] and (event.tag is None or event.tag == "!"):
            for tag, regexp in _RESOLVERS.get(value[:1], _WILDCARD):
                if regexp.match(value):
                    default = tag
                    break
        # a key's (and the top-level name's) implicit !!timestamp is just a name, and so is a key's
        # !!merge (`<<`: the composer merges its value); on another value they are refused
        tag = self.check_tag(event.tag, loc, explicit_only=is_key, default=default)
        if not value.isascii() and _SURROGATE.search(value):
            at = _SURROGATE.search(value).group()
            raise ProblemError(loc, f"a string holds the lone surrogate \\u{ord(at):04x}, which is not a character; "
                                    "write the character itself")
        style = event.style
        content = loc
        block_indent = None
        if style == "|" or style == ">":
            content, block_indent = self.block_start(event, loc)
        elif style == "'" or style == '"':
            content = Loc(self.name, loc.line, loc.col + 1)
        folds = self.folds(event, value) if style != "|" and event.end_mark.line > mark.line else None
        return YScalar(loc, value, _SCALAR_KINDS.get(tag, "str"), bool(style), content, block_indent, folds)

    def folds(self, event, value: str) -> tuple | None:
        """Where each source line of a scalar YAML folds (a plain or quoted one over several lines,
        a ``>`` block) starts in its value: ((offset, line, col), ...), 1-based lines and columns,
        to point at a column of the value; None where a line is not found as written (an escape).
        The lines looked at run to the end mark's, which can be a comment's below the scalar."""
        if self.lines is None:
            self.lines = self.text.splitlines()
        first, last = event.start_mark.line, min(event.end_mark.line, len(self.lines) - 1)
        out, at = [], 0
        for i in range(first, last + 1):
            src = self.lines[i]
            start = event.start_mark.column if i == first else 0
            if i == first and event.style in ("'", '"'):
                start += 1
            if i == first and event.style == ">":
                continue   # the indicator line
            piece = src[start:].strip()
            if i == last and event.style in ("'", '"') and piece.endswith(event.style):
                piece = piece[:-1].rstrip()
            if not piece:
                continue
            found = value.find(piece[:20], at)
            if found < 0 and piece.startswith("#"):
                break   # a comment after the scalar (its end mark is on the line that ends it)
            if found < 0:
                return None
            out.append((found, i + 1, len(src) - len(src.lstrip()) + 1 if i != first else start + 1))
            at = found + len(piece)
        return tuple(out) or None

    def block_start(self, event, loc: Loc) -> tuple[Loc, int | None]:
        if self.lines is None:
            self.lines = self.text.splitlines()
        first = event.start_mark.line + 1  # 0-based index of the first content line
        for i in range(first, min(len(self.lines), event.end_mark.line + 1)):
            stripped = self.lines[i].lstrip(" ")
            if stripped:
                indent = len(self.lines[i]) - len(stripped) + 1
                return Loc(self.name, first + 1, indent), indent
        return loc, None


# ----------------------------------------------------------------------------- syntax errors

def _syntax_error(text: str, name: str, exc: Exception) -> ProblemError:
    """One located line for a YAML syntax error.

    When libyaml found it, the text is composed again with the pure-Python parser (the error
    path only): its messages name what was found, and because libyaml's scanner reads ahead,
    the pure-Python run also reports an earlier problem first (a list used as a key, a
    duplicate key) as it would be reported without libyaml. libyaml's message is kept when
    the pure-Python parser accepts the text."""
    if FAST or isinstance(exc, UnicodeEncodeError):
        try:
            parser = yaml.SafeLoader(text)
            try:
                _Composer(name, text).document(parser.get_event)
            finally:
                parser.dispose()
        except ProblemError as err:
            return err
        except yaml.YAMLError as python_exc:
            exc = python_exc
    if isinstance(exc, yaml.reader.ReaderError):
        pos = exc.position if isinstance(exc.position, int) else 0
        line = text.count("\n", 0, pos) + 1
        col = pos - (text.rfind("\n", 0, pos) + 1) + 1
        char = exc.character if isinstance(exc.character, int) else 0
        return ProblemError(Loc(name, line, col),
                            f"the character U+{char:04X} is not allowed in a YAML file; remove it (inside a "
                            "double-quoted string an escape such as \\x1b can stand for a control character)")
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        where = Loc(name, mark.line + 1, mark.column + 1) if mark else Loc(name, 1, 1)
        what = exc.problem or exc.context or "malformed YAML"
        started = ""
        if exc.context and exc.context_mark is not None and exc.problem_mark is not None \
                and exc.context_mark.line != exc.problem_mark.line:
            started = f" ({exc.context} that starts at line {exc.context_mark.line + 1}, " \
                      f"column {exc.context_mark.column + 1})"
        return ProblemError(where, f"YAML syntax error: {what}{started}; check indentation, colons and brackets")
    if isinstance(exc, UnicodeEncodeError):
        return ProblemError(Loc(name, 1, 1), "the text holds a lone surrogate, which is not a character; write the "
                                             "character itself")
    return ProblemError(Loc(name, 1, 1), f"YAML error: {exc}")
