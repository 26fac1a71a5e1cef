"""JSON values checked against type annotations, both ways. Standard library only.

What carries the typed requests (`ddptui.rank.asks`): `read` takes a value from JSON (or already
in its Python form) as a type says, or raises ProtocolError; `write` gives a value's JSON form.
The types understood are what requests and replies use: `str`, `int`, `float`, `bool`, `None`,
`Any`, `X | None`, `list[X]`, `tuple[X, ...]`, fixed tuples, `dict[str, X]`, `Frame` (as
`[file, line, func]`) and frozen dataclasses (as JSON objects naming their fields).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import types
import typing
from typing import Any

from ddptui.rank.protocol import Frame, ProtocolError

_FIELDS: dict[type, tuple[tuple[str, Any, Any], ...]] = {}


def annotated_fields(cls: type) -> tuple[tuple[str, Any, Any], ...]:
    """A dataclass's fields as (name, type, default), its annotations resolved once per class."""
    found = _FIELDS.get(cls)
    if found is None:
        hints = typing.get_type_hints(cls)
        found = _FIELDS[cls] = tuple((f.name, hints[f.name], f.default) for f in dataclasses.fields(cls))
    return found


_SCALARS: dict[Any, tuple[type, ...]] = {
    str: (str,),
    bool: (bool,),
    int: (int,),
    float: (int, float),
    type(None): (type(None),),
}


def read(shape: Any, value: Any, where: str) -> Any:
    """`value`, from JSON or already in its Python form, as `shape` says; ProtocolError if it is not one."""
    origin, params = typing.get_origin(shape), typing.get_args(shape)
    if shape is Any:
        return value
    if origin is None:
        return _read_class(shape, value, where)
    if origin is types.UnionType or origin is typing.Union:
        options = [param for param in params if param is not type(None)]
        if value is None and len(options) < len(params):
            return None
        if len(options) == 1:  # `X | None`: say what is wrong with it as an X
            return read(options[0], value, where)
        for option in options:
            with contextlib.suppress(ProtocolError):  # then the next alternative
                return read(option, value, where)
    elif origin is list and isinstance(value, list):
        return value if params[0] is Any else [read(params[0], item, where) for item in value]
    elif origin is tuple and isinstance(value, list | tuple):
        return _read_tuple(params, value, where)
    elif origin is dict and isinstance(value, dict):
        return value if params[1] is Any else {key: read(params[1], v, where) for key, v in value.items()}
    raise ProtocolError(f"{where}: expected {_name(shape)}, got {type(value).__name__}")


def _read_class(cls: Any, value: Any, where: str) -> Any:
    """`value` as an instance of `cls`: a scalar, a `Frame` or a dataclass (from a JSON object)."""
    kinds = _SCALARS.get(cls)
    if kinds is not None:
        if isinstance(value, kinds) and (cls is bool or not isinstance(value, bool)):
            return value
    elif cls is Frame:
        try:
            return value if isinstance(value, Frame) else Frame.from_json(value)
        except ProtocolError as exc:
            raise ProtocolError(f"{where}: {exc}") from None
    elif isinstance(cls, type) and dataclasses.is_dataclass(cls):
        if isinstance(value, cls):
            return value
        if isinstance(value, dict):
            return read_object(cls, value, where)
    raise ProtocolError(f"{where}: expected {_name(cls)}, got {type(value).__name__}")


def _read_tuple(params: tuple[Any, ...], value: list[Any] | tuple[Any, ...], where: str) -> tuple[Any, ...]:
    """`value` as a `tuple[X, ...]` or a tuple of fixed length."""
    if len(params) == 2 and params[1] is Ellipsis:
        return tuple(read(params[0], item, where) for item in value)
    if len(params) != len(value):
        raise ProtocolError(f"{where}: expected {len(params)} items, got {len(value)}")
    return tuple(read(param, item, where) for param, item in zip(params, value, strict=True))


def read_object(cls: Any, body: dict[str, Any], where: str) -> Any:
    """A dataclass from a JSON object that names its fields (those with a default may be left out)."""
    declared = annotated_fields(cls)
    unknown = set(body) - {name for name, _, _ in declared}
    if unknown:
        raise ProtocolError(f"{where}: {cls.__name__} has no {', '.join(sorted(map(str, unknown)))}")
    missing = [name for name, _, default in declared if default is dataclasses.MISSING and name not in body]
    if missing:
        raise ProtocolError(f"{where}: {cls.__name__} without {', '.join(missing)}")
    return cls(
        **{name: read(shape, body[name], f"{where}.{name}") for name, shape, _ in declared if name in body}
    )


def _name(shape: Any) -> str:
    """A type as a reader of an error message knows it."""
    return shape.__name__ if isinstance(shape, type) else str(shape).replace("ddptui.rank.asks.", "")


def write(value: Any) -> Any:
    """`value` in its JSON form: dataclasses as objects, tuples as lists, frames as `[file, line, func]`."""
    if isinstance(value, Frame):
        return value.to_json()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: write(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [write(item) for item in value]
    if isinstance(value, dict):
        return {key: write(item) for key, item in value.items()}
    return value


@functools.cache
def plain(shape: Any) -> bool:
    """True for a type whose values are JSON as they are: no dataclass, tuple or frame inside."""
    if typing.get_origin(shape) is tuple or dataclasses.is_dataclass(shape):
        return False
    return all(plain(param) for param in typing.get_args(shape))
