"""How a protocol message's fields travel as JSON (engine/core/protocol.py encodes and
decodes; this is the field-level part): nested dataclasses out as objects, arrays back as
tuples of the field's type, so a decoded message equals the one encoded.

Framework-free: the standard library only. It names no message kind: those live in
protocol.py alone.
"""

from __future__ import annotations

import dataclasses
import types
import typing

__all__ = ["plain", "hints", "typed", "clip"]


def plain(value):
    """JSON's view of a field: nested dataclasses (an Assign's runs) as objects."""
    if isinstance(value, tuple) and value and dataclasses.is_dataclass(value[0]):
        return [dataclasses.asdict(v) for v in value]
    return value


_HINTS: dict[type, dict] = {}


def hints(cls) -> dict:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def typed(tp, value):
    """A decoded JSON value as the field's type has it: arrays as tuples (of RunOrder where
    the field says so), so a decoded message equals the one encoded."""
    if value is None or tp is None:
        return value
    if isinstance(tp, types.UnionType):  # X | None
        inner = [a for a in typing.get_args(tp) if a is not type(None)]
        return typed(inner[0], value) if len(inner) == 1 else value
    if typing.get_origin(tp) is tuple and isinstance(value, list):
        item = typing.get_args(tp)[0]
        if dataclasses.is_dataclass(item):
            return tuple(item(**v) for v in value)
        return tuple(value)
    return value


def clip(line) -> str:
    text = line.decode("utf-8", "replace") if isinstance(line, bytes) else str(line)
    text = text.strip()
    return repr(text if len(text) <= 200 else text[:200] + "...")
