"""Packs as plain JSON data and back: what the pack cache (``pack_cache.py``) stores.

Why not pickle: a cache file is read back by a later process, and unpickling runs
whatever code the file names.  Here a pack becomes lists, numbers and strings, and reading
it back can only build the rule language's own immutable objects:

* an object is ``[class name, field, field, ...]`` (fields in declaration order), a tuple
  a list, a ``Position`` ``[line, column]`` (``[line, column, file]`` when its file is not
  the pack's);
* the reader is derived from the classes' type annotations: a class the language does not
  have (or not at that place), a field of the wrong type or a list of the wrong length is
  refused with ``NotAPack``, so a damaged or crafted entry is rejected, never half-used;
* what the grammar and the checker guarantee of every parsed pack and the engine relies on
  (a root among the pattern's outputs, operators of the grammar: ``wellformed.py``) is
  checked too, so a document damaged or written into another well-typed pack is refused;
* ``encode`` refuses what would not come back equal (a list where a tuple belongs, an
  object of another class), and ``pack_cache`` checks ``decode(encode(pack)) == pack``
  before it stores anything.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable
from functools import cache
from typing import Any, Union

from ..errors import Position
from . import ast as A
from . import wellformed

Decoder = Callable[[Any], Any]


class NotAPack(ValueError):
    """Data that is not a pack this module wrote (or a pack it cannot write)."""


def _fail(what: str) -> typing.NoReturn:
    raise NotAPack(what)


# ------------------------------------------------------------------------------ the classes


def _is_record(kind: object) -> bool:
    return isinstance(kind, type) and dataclasses.is_dataclass(kind) and kind is not Position


_HINTS: dict[type, tuple[tuple[str, Any], ...]] = {}


def _hints(cls: type) -> tuple[tuple[str, Any], ...]:
    """(field name, resolved annotation) of a rule class, in declaration order."""
    found = _HINTS.get(cls)
    if found is None:
        hints = typing.get_type_hints(cls)
        found = _HINTS[cls] = tuple((f.name, hints[f.name]) for f in dataclasses.fields(cls))
    return found


def _members(kind: Any) -> tuple[Any, ...]:
    """The alternatives of a union annotation (``X | Y``, ``Optional[X]``), or ``(kind,)``."""
    if typing.get_origin(kind) in (Union, types.UnionType):
        return typing.get_args(kind)
    return (kind,)


@cache
def _classes() -> dict[str, type]:
    """Every class a checked pack can hold, by name: those its annotations reach from ``Pack``."""
    found: dict[str, type] = {}
    stack: list[Any] = [A.Pack]
    while stack:
        kind = stack.pop()
        for member in _members(kind):
            if typing.get_origin(member) is tuple:
                stack.extend(typing.get_args(member))
            elif _is_record(member) and member.__name__ not in found:
                found[member.__name__] = member
                stack.extend(hint for _, hint in _hints(member))
    return found


# ---------------------------------------------------------------------------------- writing


def encode(pack: A.Pack) -> list:
    """A pack as JSON-ready data; ``NotAPack`` when it holds something the reader could not
    rebuild as it is (the pack is then simply not cached)."""
    if type(pack) is not A.Pack:
        _fail(f"not a pack: {type(pack).__name__}")
    classes = _classes()

    def value(item: object) -> object:
        kind = type(item)
        if kind is Position:
            assert isinstance(item, Position)
            return [item.line, item.column] if item.file == pack.file else [item.line, item.column, item.file]
        if kind is tuple:
            assert isinstance(item, tuple)
            return [value(x) for x in item]
        if item is None or kind in (str, int, float, bool):
            return item
        if classes.get(kind.__name__) is not kind:
            _fail(f"a {kind.__name__} cannot be cached")
        return [kind.__name__, *(value(getattr(item, name)) for name, _ in _hints(kind))]

    data = value(pack)
    assert isinstance(data, list)
    return data


# ---------------------------------------------------------------------------------- reading


def pack_level(data: object) -> int | None:
    """The level of the pack ``encode`` made ``data`` of, read without building the pack
    (None when ``data`` does not even look like one; ``decode`` checks the rest)."""
    names = [name for name, _ in _hints(A.Pack)]
    if type(data) is not list or len(data) != len(names) + 1 or data[0] != "Pack":
        return None
    level = data[names.index("level") + 1]
    return level if type(level) is int else None


def decode(data: object, file: str) -> A.Pack:
    """The pack ``encode`` made of it (``file``: the pack's file, which its positions name);
    ``NotAPack`` for anything else."""
    positions: dict[tuple, Position] = {}  # equal positions shared, as a parse mostly does

    def position(item: Any) -> Position:
        if type(item) is not list or not 2 <= len(item) <= 3:
            _fail("a position is [line, column] or [line, column, file]")
        key = tuple(item)
        found = positions.get(key)
        if found is None:
            line, column, *rest = item
            where = rest[0] if rest else file
            if type(line) is not int or type(column) is not int or type(where) is not str:
                _fail("a position is [line, column] or [line, column, file]")
            found = positions[key] = Position(line, column, where)
        return found

    decoders: dict[Any, Decoder] = {}

    def decoder(kind: Any) -> Decoder:
        """The reader of values annotated ``kind`` (built once per annotation)."""
        if kind not in decoders:
            decoders[kind] = lambda item: decoders[kind](item)  # (recursive annotations)
            decoders[kind] = _build(kind)
        return decoders[kind]

    def record(cls: type) -> Decoder:
        fields = [(name, decoder(hint)) for name, hint in _hints(cls)]
        size = len(fields) + 1

        def read(item: Any) -> object:
            if type(item) is not list or len(item) != size or item[0] != cls.__name__:
                _fail(f"not a {cls.__name__}")
            return cls(*[read_field(x) for (_, read_field), x in zip(fields, item[1:])])

        return read

    def _build(kind: Any) -> Decoder:
        if kind is Position:
            return position
        members = (bool, type(None)) if kind is object else _members(kind)  # Const: none, true, false
        allowed = frozenset(m for m in members if m in (str, int, float, bool, type(None)))
        records = {m.__name__: record(m) for m in members if _is_record(m)}
        sequences = [m for m in members if typing.get_origin(m) is tuple]
        args = typing.get_args(sequences[0]) if sequences else ()
        if (
            len(sequences) > 1
            or (sequences and (records or len(args) != 2 or args[1] is not Ellipsis))
            or len(allowed) + len(records) + len(sequences) < len(members)
        ):
            raise TypeError(f"serial cannot read values annotated {kind}")  # (a new kind of field)
        item_decoder = decoder(args[0]) if sequences else None

        def read(item: Any) -> object:
            kind_of = type(item)
            if kind_of in allowed:
                return item
            if kind_of is list:
                if records and item and type(item[0]) is str and item[0] in records:
                    return records[item[0]](item)
                if item_decoder is not None:
                    return tuple(item_decoder(x) for x in item)
            return _fail(f"unexpected {kind_of.__name__} where {kind} belongs")

        return read

    try:
        pack = decoder(A.Pack)(data)
    except RecursionError:
        _fail("nested too deeply")
    if pack.file != file:
        _fail(f"an entry for {pack.file!r}, not {file!r}")
    for problem in wellformed.problems(pack):  # (what the parser guarantees, the engine relies on)
        _fail(problem)
    return pack
