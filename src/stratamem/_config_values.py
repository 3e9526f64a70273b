"""Type checks of configuration values: what :class:`stratamem.Config` accepts for each annotated setting."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

from .errors import ConfigError

__all__ = ["check_value"]


def check_value(value: Any, hint: Any, where: str, build: Callable[[type, Mapping[str, Any], str], Any]) -> Any:
    """``value`` checked against the type ``hint`` of the setting at ``where``; nested sections go to ``build``.

    Integers are not booleans, floats accept integers, lists of strings become tuples;
    nothing else is coerced.

    Raises:
        ConfigError: The value does not have the type (the error names ``where``).
    """
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(hint)
        if value is None and type(None) in args:
            return None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return check_value(value, arg, where, build)
            except ConfigError:
                continue
        raise ConfigError(f"{where}: {value!r} is not a valid {hint}")
    if origin is tuple:
        if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{where}: expected a list of strings, got {value!r}")
        return tuple(value)
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where}: expected true/false, got {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where}: expected an integer, got {value!r}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{where}: expected a number, got {value!r}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where}: expected a string, got {value!r}")
        return value
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        if isinstance(value, hint):
            return value
        if not isinstance(value, Mapping):
            raise ConfigError(f"{where}: expected a mapping, got {value!r}")
        return build(hint, value, where + ".")
    raise ConfigError(f"{where}: unsupported type {hint}")  # pragma: no cover - programming error
