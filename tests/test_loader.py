"""The YAML loader: libyaml's parser composed by our own loop, with every guarantee of the
pure-Python path (tags, keys, anchors, depth, size, locations) and no hang or crash on
hostile structure. Expected messages and locations are written out by hand."""

from __future__ import annotations

import glob
import os
import subprocess
import sys

import pytest
import yaml

import adjoint
from adjoint.format import loader
from adjoint.format.errors import ProblemError
from adjoint.format.loader import YMap, YScalar, YSeq, parse_yaml_text, read_yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FILES = sorted(glob.glob(os.path.join(ROOT, "problems", "*.yaml")) +
               glob.glob(os.path.join(ROOT, "tests", "errors", "*.yaml")) +
               glob.glob(os.path.join(ROOT, "tests", "data", "**", "*.yaml"), recursive=True))


def error(text: str) -> str:
    with pytest.raises(ProblemError) as info:
        parse_yaml_text(text, "f.yaml")
    return info.value.line()


def dump(node):
    """Everything the loader promises about a node, as plain data."""
    if isinstance(node, YScalar):
        return ("S", str(node.loc), node.text, node.kind, node.quoted, str(node.content), node.block_indent)
    if isinstance(node, YSeq):
        return ("L", str(node.loc), tuple(dump(i) for i in node.items))
    assert isinstance(node, YMap)
    return ("M", str(node.loc), tuple((dump(k), dump(v)) for k, v in node.entries))


@pytest.fixture
def pure_python(monkeypatch):
    """The loader as it runs where PyYAML has no libyaml."""
    monkeypatch.setattr(loader, "_PARSER", yaml.SafeLoader)
    monkeypatch.setattr(loader, "FAST", False)


def outcome(text: str):
    try:
        return dump(parse_yaml_text(text, "f.yaml"))
    except ProblemError as err:
        return err.line()


def test_libyaml_is_used_here():
    assert yaml.__with_libyaml__ and loader.FAST and loader._PARSER is yaml.CSafeLoader


@pytest.mark.parametrize("path", FILES, ids=lambda p: os.path.relpath(p, ROOT))
def test_libyaml_and_pure_python_compose_the_same_tree(path, monkeypatch):
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    fast = outcome(text)
    monkeypatch.setattr(loader, "_PARSER", yaml.SafeLoader)
    monkeypatch.setattr(loader, "FAST", False)
    assert outcome(text) == fast


def test_locations_kinds_and_block_scalars():
    text = 'a: 1\nb: "x"\nc: |\n    l1\n    l2\nd: [yes, ~, 2.5, é, 0x1F]\n'
    root = parse_yaml_text(text, "f.yaml")
    a, b, c, d = (v for _, v in root.entries)
    assert (str(a.loc), a.kind, a.quoted) == ("f.yaml:1:4", "int", False)
    assert (str(b.loc), str(b.content), b.quoted) == ("f.yaml:2:4", "f.yaml:2:5", True)
    assert (c.text, c.block_indent, str(c.content), str(c.loc_at(2, 3))) == ("l1\nl2\n", 5, "f.yaml:4:5", "f.yaml:5:7")
    assert [(i.text, i.kind, str(i.loc)) for i in d.items] == [
        ("yes", "bool", "f.yaml:6:5"), ("~", "null", "f.yaml:6:10"), ("2.5", "float", "f.yaml:6:13"),
        ("é", "str", "f.yaml:6:18"), ("0x1F", "int", "f.yaml:6:21")]


@pytest.mark.parametrize("text, offset, where", [
    # a plain scalar over two lines: YAML folds the break into a space
    ('f: sum(x * 2) +\n    sum(unfold(x))\n', 17, "f.yaml:2:9"),
    # double-quoted
    ('f: "sum(x * 2) +\n    sum(unfold(x))"\n', 17, "f.yaml:2:9"),
    # a folded block: its lines joined by spaces
    ('f: >\n  sum(x * 2) +\n  sum(x * 3) +\n  sum(unfold(x))\n', 30, "f.yaml:4:7"),
    # ... followed by a comment, on the line where YAML's end mark stands
    ('f: >\n  sum(x * 2) +\n  sum(x * 3) +\n  sum(unfold(x))\n# a comment\ng: 1\n', 30, "f.yaml:4:7"),
])
def test_a_column_of_a_folded_scalar_points_at_its_source_line(text, offset, where):
    """A column inside a scalar YAML folded from several lines is found on the line it came from
    (the forward's error at `unfold` pointed past the end of the scalar's first line)."""
    f = parse_yaml_text(text, "f.yaml").entries[0][1]
    assert f.text[offset:offset + 6] == "unfold"
    assert str(f.loc_at(1, offset + 1)) == where


def test_nodes_are_read_only():
    node = parse_yaml_text("a: 1\n", "f.yaml")
    with pytest.raises(AttributeError):
        node.entries = ()
    with pytest.raises(AttributeError):
        node.entries[0][1].text = "2"


# ----------------------------------------------------------------------------- depth on the structure

def test_brackets_in_a_comment_or_block_scalar_are_not_nesting():
    assert parse_yaml_text("# " + "[" * 65 + "\na: 1\n", "f.yaml").get("a").text == "1"
    assert parse_yaml_text("a: |\n  " + "[" * 65 + "\n", "f.yaml").get("a").text == "[" * 65 + "\n"
    assert parse_yaml_text("a: '" + "[" * 65 + "'\n", "f.yaml").get("a").text == "[" * 65


def test_64_brackets_pass_65_are_refused_at_the_65th():
    nested = "[" * 64 + "1" + "]" * 64
    assert isinstance(parse_yaml_text(nested + "\n", "f.yaml"), YSeq)
    assert error("[" * 65 + "1" + "]" * 65 + "\n") == \
        "f.yaml:1:65: brackets nested more than 64 deep; tensors have at most a few dimensions"


def test_block_nesting_is_bounded_too():
    text = "".join("  " * i + f"k{i}:\n" for i in range(66)) + "  " * 66 + "v\n"
    # the root mapping is level 0; k64's value, a mapping at level 65, starts at k65 (line 66, column 131)
    assert error(text) == "f.yaml:66:131: YAML nesting is deeper than 64 levels"


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=ROOT))


@pytest.mark.parametrize("shape", ["flow", "block"])
def test_a_hundred_thousand_levels_neither_crash_nor_hang(shape):
    """libyaml's own composer recurses in C and kills the interpreter (SIGSEGV) here."""
    make = ("'x: ' + '[' * 100_000 + '1' + ']' * 100_000" if shape == "flow" else
            "'x:\\n' + '- ' * 100_000 + '1\\n'")
    proc = _run("from adjoint.format.loader import parse_yaml_text\nfrom adjoint.format.errors import ProblemError\n"
                f"text = {make}\n"
                "try:\n    parse_yaml_text(text, 'f')\nexcept ProblemError as e:\n    print(e.line())\n")
    assert proc.returncode == 0, proc.stderr
    expected = ("f:1:68: brackets nested more than 64 deep" if shape == "flow" else
                "f:2:129: YAML nesting is deeper than 64 levels")
    assert proc.stdout.startswith(expected)


# ----------------------------------------------------------------------------- tags, keys, anchors

def test_a_tag_on_a_mapping_key_is_refused():
    assert error("!!python/name:os.system k: 1\n") == \
        "f.yaml:1:1: YAML tag !!python/name:os.system is not allowed; problem files are plain data (numbers, " \
        "strings, lists, mappings)"
    assert error("a: {!custom k: 1}\n") == \
        "f.yaml:1:5: YAML tag !custom is not allowed; problem files are plain data (numbers, strings, lists, mappings)"


def test_plain_data_tags_and_implicit_key_kinds_are_accepted():
    root = parse_yaml_text("!!str a: !!int 1\n'<<': x\n2001-01-01: y\n", "f.yaml")
    assert [(k.text, v.text, v.kind) for k, v in root.entries] == [("a", "1", "int"), ("<<", "x", "str"),
                                                                    ("2001-01-01", "y", "str")]


MERGES = """\
a: &a {p: 1, q: 2}
b: &b {q: 3, r: 4, s: 5}
c: {s: 9, <<: [*a, *b], t: 7}
d: {<<: *b, r: 0}
e: {z: 1, <<: {y: 2, z: 3}}
f: &f {<<: *a, u: 1}
g: {<<: [*f, *b]}
h:
  k0: v0
  <<: *a
  p: override
"""


def plain(node):
    if isinstance(node, YMap):
        return [(k.text, plain(v)) for k, v in node.entries]
    if isinstance(node, YSeq):
        return [plain(i) for i in node.items]
    return node.text


def python_data(value):
    if isinstance(value, dict):
        return [(str(k), python_data(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [python_data(v) for v in value]
    return str(value)


@pytest.mark.parametrize("parser", ["libyaml", "pure_python"])
def test_merge_keys_merge_as_pyyaml_does(parser, monkeypatch):
    """YAML 1.1's merge key (``<<: *base``, a list of aliases too): a mapping's own keys win, then
    the first mapping merged; keys in the order of the dict PyYAML's safe_load builds."""
    if parser == "pure_python":
        monkeypatch.setattr(loader, "_PARSER", yaml.SafeLoader)
        monkeypatch.setattr(loader, "FAST", False)
    root = parse_yaml_text(MERGES, "f.yaml")
    assert plain(root) == python_data(yaml.safe_load(MERGES))
    assert plain(root.get("c")) == [("q", "2"), ("r", "4"), ("s", "9"), ("p", "1"), ("t", "7")]
    # a merged key keeps where it is written (messages point at the anchored mapping)
    assert str(root.get("d").key_loc("s")) == "f.yaml:2:20"


def test_a_merge_key_needs_mappings():
    assert error("a: {<<: 3, b: 1}\n") == \
        "f.yaml:1:9: the YAML merge key << takes a mapping or a list of mappings (an alias such as *base), " \
        "not a number; write the keys out instead"
    assert error("a: &a [1]\nb: {<<: [*a]}\n") == \
        "f.yaml:1:4: the YAML merge key << takes a mapping or a list of mappings (an alias such as *base), " \
        "not a list; write the keys out instead"


def test_a_timestamp_value_is_refused_as_before():
    assert error("a: 2001-01-01\n").startswith("f.yaml:1:4: YAML tag !!timestamp is not allowed")


def test_collection_keys_and_duplicates():
    assert error("? [a]\n: b\n") == "f.yaml:1:3: mapping keys must be plain names, not lists or mappings"
    assert error("a: 1\nb: 2\na: 3\n") == \
        "f.yaml:3:1: duplicate key 'a' (first given at line 1); give each key once"


def test_anchors_aliases_and_their_mistakes():
    root = parse_yaml_text("a: &v [1, 2]\nb: *v\n", "f.yaml")
    assert root.get("a") is root.get("b")
    assert error("a: &v 1\nb: &v 2\n") == \
        "f.yaml:2:4: YAML anchor &v is defined twice (first at line 1); give each anchor its own name"
    assert error("a: *nope\n") == \
        "f.yaml:1:4: YAML alias *nope refers to no anchor defined before it; define &nope on a value above this line"
    assert error("a: &r\n  b: *r\n") == \
        "f.yaml:1:4: a YAML alias refers to a node that contains it (a recursive alias); write the value out"


def test_an_alias_key_is_a_duplicate_like_any_other():
    assert error("&k a: 1\n*k : 2\n") == "f.yaml:2:1: duplicate key 'a' (first given at line 1); give each key once"


def test_alias_expansion_is_counted_at_the_alias_that_overflows():
    lines = ["a: &a [" + ", ".join(["x"] * 10) + "]"]
    for prev, cur in zip("abcdef", "bcdefg"):
        lines.append(f"{cur}: &{cur} [" + ", ".join([f"*{prev}"] * 10) + "]")
    # the root, then a..e: 1 + 11 + 111 + 1,111 + 11,111 + 111,111 = 123,466 values; f's list
    # makes 123,467 and its first *e (111,111 more) passes 200,000: line 6, column 8
    assert error("\n".join(lines) + "\n") == \
        "f.yaml:6:8: more than 200000 YAML values (aliases included); problem files describe small models: put big " \
        "tensors in side files ({value: {file: w.safetensors, key: NAME}}; adjoint import writes them)"


# ----------------------------------------------------------------------------- directives, characters

def test_yaml_1_2_directive_is_refused_1_1_accepted():
    assert error("# c\n%YAML 1.2\n---\na: 1\n") == \
        "f.yaml:2:1: the file declares YAML 1.2 (%YAML directive); problem files are read as YAML 1.1, whose rules " \
        "for yes/no/on/off, 1_000 and 017 differ from 1.2's; remove the directive (or write %YAML 1.1)"
    assert parse_yaml_text("%YAML 1.1\n---\na: yes\n", "f.yaml").get("a").kind == "bool"


def test_a_lone_surrogate_escape_is_refused_on_both_paths(pure_python):
    assert error('a: "\\ud800"\n') == \
        "f.yaml:1:4: a string holds the lone surrogate \\ud800, which is not a character; write the character itself"


def test_a_lone_surrogate_escape_is_refused_by_libyaml():
    line = error('a: "\\ud800"\n')
    assert line.startswith("f.yaml:1:4: a string holds the lone surrogate \\ud800")


def test_a_raw_control_character_is_located():
    assert error("a: b\nc: d\x01\n") == \
        "f.yaml:2:5: the character U+0001 is not allowed in a YAML file; remove it (inside a double-quoted string " \
        "an escape such as \\x1b can stand for a control character)"


def test_syntax_errors_keep_pythons_wording_and_file_order():
    assert error("a: [1, 2\nb: 3\n") == \
        "f.yaml:2:2: YAML syntax error: expected ',' or ']', but got ':' (while parsing a flow sequence that " \
        "starts at line 1, column 4); check indentation, colons and brackets"
    # libyaml's scanner reads ahead and fails on line 2; the list key on line 1 comes first
    assert error("? [a]\n: b\nc: [1\nd: 2\n").startswith("f.yaml:1:3: mapping keys must be plain names")


def test_two_documents_and_an_empty_file():
    assert error("a: 1\n---\nb: 2\n") == \
        "f.yaml:3:1: the file holds more than one YAML document; put one problem per file"
    assert error("# only a comment\n") == \
        "f.yaml:1:1: the file is empty; a problem file is a YAML mapping with name, inputs and model"


# ----------------------------------------------------------------------------- what FILE may be

def test_a_fifo_is_refused_at_once(tmp_path):
    fifo = tmp_path / "p.yaml"
    os.mkfifo(fifo)
    proc = _run("from adjoint.format.loader import read_yaml\nfrom adjoint.format.errors import ProblemError\n"
                f"try:\n    read_yaml({str(fifo)!r})\nexcept ProblemError as e:\n    print(e.line())\n")
    assert proc.stdout.strip() == f"{fifo}:1:1: is a FIFO (named pipe), not a regular file; give a problem file " \
                                  "(or - to read one from standard input)"


@pytest.mark.parametrize("path,kind", [("/dev/null", "a device"), ("/", "a directory")])
def test_devices_and_directories_are_refused(path, kind):
    with pytest.raises(ProblemError) as info:
        read_yaml(path)
    assert info.value.line() == f"{path}:1:1: is {kind}, not a regular file; give a problem file (or - to read one " \
                                "from standard input)"


def test_missing_file_and_size_limit(tmp_path):
    with pytest.raises(ProblemError, match="cannot read the file: No such file or directory"):
        read_yaml(str(tmp_path / "none.yaml"))
    big = tmp_path / "big.yaml"
    big.write_bytes(b"a: 1\n" + b"#" * loader.MAX_FILE_BYTES)
    with pytest.raises(ProblemError, match="larger than 1000000 bytes"):
        read_yaml(str(big))


def test_another_torch_optimizer_is_said_not_modelled(tmp_path):
    """RMSprop is a torch.optim class of its own: not 'did you mean Adam'."""
    path = tmp_path / "p.yaml"
    path.write_text("name: o\ninputs:\n  x: [[1, 2]]\nmodel:\n  params: {w: [1, 2]}\n  forward: \"x * w\"\n"
                    "loss: \"sum(y)\"\nsteps: [forward, backward, {step: {optimizer: {type: RMSprop}}}]\n")
    with pytest.raises(ProblemError) as err:
        adjoint.load(str(path))
    assert "'RMSprop' is not modelled yet" in str(err.value) and "did you mean" not in str(err.value)
