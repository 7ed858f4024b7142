"""A small YAML writer for the files ``adjoint import`` makes (``adjoint.format.loader`` stays the only reader).

The tree is plain Python: a ``dict`` is a block mapping (keys in order), a ``list`` a block
sequence, :class:`Flow` text already written in YAML's flow style (``[0.5, -1]``,
``{type: ReLU}``), :class:`Text` a string (double-quoted), :class:`Block` a literal block
scalar (``|``: a forward program, line by line), :class:`Note` a value with a trailing comment.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Flow:
    """A flow-style YAML item (written on one line)."""

    text: str


@dataclass(frozen=True)
class Block:
    """A block-style YAML text (written as it is); ``at``: per line, where the user's code has what
    it holds (pairs of a written text and a ``file:line``), for a message about that line."""

    text: str
    at: tuple = ()


class _Placed(str):
    """A line of the file that knows where the user's code has it (``at``)."""

    at: tuple = ()


@dataclass(frozen=True)
class Note:
    """A value with a YAML comment after it."""

    value: object
    comment: str


def quote(text: str) -> str:
    out = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\t", "\\t")
    return f'"{out}"'


def Text(text: str) -> Flow:
    return Flow(quote(text))


def flow_map(pairs) -> Flow:
    """``{k: v, ...}`` from (key, text-or-Flow) pairs."""
    return Flow("{" + ", ".join(f"{k}: {_inline(v)}" for k, v in pairs) + "}")


def _inline(v) -> str:
    if isinstance(v, Flow):
        return v.text
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return quote(v)
    if isinstance(v, dict):
        return flow_map(v.items()).text
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_inline(x) for x in v) + "]"
    raise TypeError(type(v).__name__)


def _comment(text: str) -> str:
    return "  # " + " ".join(text.split()) if text else ""


def _is_block(v) -> bool:
    return isinstance(v, (dict, Block)) or (isinstance(v, list) and len(v) > 0)


def lines(node, indent: int = 0) -> list[str]:
    """The block-style lines of a mapping or sequence at ``indent`` spaces."""
    pad = " " * indent
    out: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            comment = ""
            if isinstance(value, Note):
                value, comment = value.value, value.comment
            if isinstance(value, Block):
                out.append(f"{pad}{key}: |{_comment(comment)}")
                for i, line in enumerate(value.text.rstrip("\n").split("\n")):
                    placed = _Placed(f"{pad}  {line}" if line else "")
                    placed.at = value.at[i] if i < len(value.at) else ()
                    out.append(placed)
            elif _is_block(value):
                out.append(f"{pad}{key}:{_comment(comment)}")
                out.extend(lines(value, indent + 2))
            else:
                out.append(f"{pad}{key}: {_inline(value if not (isinstance(value, list)) else Flow('[]'))}"
                           f"{_comment(comment)}")
        return out
    if isinstance(node, list):
        for value in node:
            comment = ""
            if isinstance(value, Note):
                value, comment = value.value, value.comment
            if isinstance(value, dict):
                sub = lines(value, indent + 2)
                first = sub[0][indent + 2:] if sub else "{}"
                out.append(f"{pad}- {first}{_comment(comment)}")
                out.extend(sub[1:])
            else:
                out.append(f"{pad}- {_inline(value)}{_comment(comment)}")
        return out
    raise TypeError(type(node).__name__)


def document(header: list[str], top: dict, at: dict | None = None) -> str:
    """The whole file: ``# `` comment lines, then the top-level mapping. ``at`` learns, for each
    line of a forward (by its 1-based number in the file), where the user's code has it."""
    body = lines(top)
    if at is not None:
        at.update((len(header) + i, line.at) for i, line in enumerate(body, 1) if getattr(line, "at", ()))
    return "".join(f"# {h}\n" if h else "#\n" for h in header) + "\n".join(body) + "\n"
