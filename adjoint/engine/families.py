"""One table assembled from family modules, each family imported the first time it is needed.

The op registry (:mod:`adjoint.engine.ops`), the expression language's functions and methods
(:mod:`adjoint.engine.bindings`) and the built-in modules' forwards (:mod:`adjoint.engine.layers`)
are each one table whose entries live in family modules. A tiny problem looks up a handful of
names, so importing every family at start-up (several hundred records, each family's own
imports) was most of ``adjoint solve``'s start-up time. A :class:`Table` is a mapping over the
families, imported in their listed order until the name asked for is found: a name is found in
the same family as before, a name no family defines is still a ``KeyError`` (after every family
is imported), a name defined twice is still an error (when the second family is imported;
iterating, ``len`` and ``values`` import them all, as the tests that walk every entry do).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping


def file_once(entries: dict, name, value, what: str) -> None:
    """File ``value`` under ``name``; a name two families define is an error (``what`` names the
    kind of entry in its message)."""
    if name in entries:
        raise ValueError(f"{what} {name!r} is defined twice")
    entries[name] = value


class Families:
    """The family modules of a package, imported one at a time in the listed order; ``collect``
    files each imported module's entries into the tables."""

    def __init__(self, package: str, names: tuple[str, ...], collect: Callable[[object], None]):
        self.package = package
        self.pending = list(names)
        self.collect = collect

    def load_next(self) -> bool:
        """Import the next family and file its entries; False when all are in."""
        if not self.pending:
            return False
        module = importlib.import_module(f"{self.package}.{self.pending[0]}")
        del self.pending[0]
        self.collect(module)
        return True

    def load_all(self) -> None:
        while self.load_next():
            pass


class Table(Mapping):
    """A name -> record mapping filled by :class:`Families` as names are looked up."""

    def __init__(self, families: Families, entries: dict):
        self._families = families
        self._entries = entries

    def __getitem__(self, name):
        entries = self._entries
        while True:
            try:
                return entries[name]
            except KeyError:
                if not self._families.load_next():
                    raise

    def __contains__(self, name) -> bool:
        try:
            self[name]
        except KeyError:
            return False
        return True

    def get(self, name, default=None):
        try:
            return self[name]
        except KeyError:
            return default

    def complete(self) -> dict:
        """The whole table (every family imported)."""
        self._families.load_all()
        return self._entries

    def __iter__(self) -> Iterator:
        return iter(self.complete())

    def __len__(self) -> int:
        return len(self.complete())

    def keys(self):
        return self.complete().keys()

    def values(self):
        return self.complete().values()

    def items(self):
        return self.complete().items()

    def __setitem__(self, name, value) -> None:   # a test's monkeypatch.setitem: the family holding name comes first
        self.__contains__(name)
        self._entries[name] = value

    def __delitem__(self, name) -> None:
        self.complete()
        del self._entries[name]

    def __repr__(self) -> str:
        return f"Table({self.complete()!r})"
