"""Strict JSON reading for text that comes from outside: export files and ingest files.

One place maps every way such text can fail to :class:`~stratamem.errors.DecodeError`
naming the line, so :mod:`stratamem.exchange` and :mod:`stratamem.ingest` fail
alike: a syntax error; nesting too deep for the parser (``json`` recurses and
raises ``RecursionError`` at about a thousand levels); and the constants
``NaN``/``Infinity``, which Python's ``json`` accepts but JSON does not (a turn
holding one could not be stored and read back).
"""

from __future__ import annotations

import json
from typing import Any

from .errors import DecodeError

__all__ = ["loads", "parse_object_line"]


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def loads(text: str, *, line: int | None = None, where: str = "") -> Any:
    """Parse one JSON text strictly.

    Args:
        text: The JSON text (a whole file or one line).
        line: The line ``text`` starts at, when it is one line of a file; for a
            whole file, ``None`` (the parser's own line number is reported).
        where: A prefix for the message, e.g. the file name.

    Raises:
        DecodeError: Invalid JSON, nesting too deep, or NaN/Infinity.
    """
    prefix = f"{where}: " if where else ""
    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        at = exc.lineno if line is None else line + exc.lineno - 1
        raise DecodeError(f"{prefix}invalid JSON: {exc.msg}", line=at) from None
    except RecursionError:
        raise DecodeError(f"{prefix}invalid JSON: nested too deeply", line=line) from None
    except ValueError as exc:  # from _no_constant
        raise DecodeError(f"{prefix}invalid JSON: {exc}", line=line) from None


def parse_object_line(text: str, line: int) -> dict[str, Any]:
    """Parse one line of a JSON Lines file, which must hold an object.

    Raises:
        DecodeError: The line is not valid JSON or not an object; the error names ``line``.
    """
    obj = loads(text, line=line)
    if not isinstance(obj, dict):
        raise DecodeError("each line must be a JSON object", line=line)
    return obj
