"""Strict JSON reading for text that comes from outside: export files and ingest files.

One place maps every way such text can fail to :class:`~stratamem.errors.DecodeError`
naming the line, so :mod:`stratamem.exchange` and :mod:`stratamem.ingest` fail
alike: a syntax error; nesting deeper than
:data:`~stratamem.records.checks.MAX_DOCUMENT_DEPTH` (the stored-value limit
plus the formats' envelope; ``json`` itself recurses and raises
``RecursionError`` at about a thousand levels); integers beyond 64 bits and
numbers that overflow to infinity; and the constants ``NaN``/``Infinity``,
which Python's ``json`` accepts but JSON does not (a turn holding one could
not be stored and read back). The limits are the ones every stored JSON value
meets (:func:`~stratamem.records.checks.json_problem`), so a file is refused
as a whole, naming its line, before anything is stored.

A UTF-8 byte order mark at the start of a file (which some Windows editors
write) is dropped: :func:`decode_text` for bytes, :func:`loads` for the text
of a whole file or of its first line.
"""

from __future__ import annotations

import json
from typing import Any

from .errors import DecodeError
from .records.checks import MAX_DOCUMENT_DEPTH, json_problem

__all__ = ["BOM", "decode_text", "loads", "parse_object_line"]

BOM = "\ufeff"
"""The byte order mark as a character: what UTF-8 ``EF BB BF`` decodes to."""


def decode_text(raw: bytes, where: str = "") -> str:
    """``raw`` as UTF-8 text, without a leading byte order mark.

    Raises:
        DecodeError: ``raw`` is not valid UTF-8 (the message names the byte).
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DecodeError(f"{where + ' ' if where else ''}is not valid UTF-8 (byte {exc.start})".strip()) from None
    return text[1:] if text.startswith(BOM) else text


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
        DecodeError: Invalid JSON, nesting too deep, an integer beyond 64 bits, or NaN/Infinity.
    """
    prefix = f"{where}: " if where else ""
    if line in (None, 1) and text.startswith(BOM):
        text = text[1:]  # a byte order mark opens the file: not part of its JSON
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        at = exc.lineno if line is None else line + exc.lineno - 1
        raise DecodeError(f"{prefix}invalid JSON: {exc.msg}", line=at) from None
    except RecursionError:
        raise DecodeError(
            f"{prefix}invalid JSON: nested more than {MAX_DOCUMENT_DEPTH} levels deep", line=line
        ) from None
    except ValueError as exc:  # from _no_constant, or an integer of over 4,300 digits
        raise DecodeError(f"{prefix}invalid JSON: {exc}", line=line) from None
    problem = json_problem(value, MAX_DOCUMENT_DEPTH)
    if problem is not None:
        raise DecodeError(f"{prefix}invalid JSON: {problem}", line=line)
    return value


def parse_object_line(text: str, line: int) -> dict[str, Any]:
    """Parse one line of a JSON Lines file, which must hold an object.

    Raises:
        DecodeError: The line is not valid JSON or not an object; the error names ``line``.
    """
    obj = loads(text, line=line)
    if not isinstance(obj, dict):
        raise DecodeError("each line must be a JSON object", line=line)
    return obj
