"""An import file's text: bytes to text, and text to JSON records, each with its line.

Every reader starts here, so every format accepts the same things:

* a UTF-8 byte order mark (Windows editors write one) is skipped; bytes that
  are not UTF-8 are an error naming the file and the line;
* lines end at ``\\n`` only, with one ``\\r`` before it dropped (CRLF files).
  ``str.splitlines`` would also split at U+2028, U+2029 and U+0085, which JSON
  allows raw inside strings (JavaScript's ``JSON.stringify`` writes them so):
  a log holding pasted text with one would be cut in the middle of a record;
* a last line without its ``\\n`` that does not parse is a record still being
  written by a live tool: it is not an error, :attr:`JsonLines.torn` says so,
  and the next read of the grown file gets it whole.

JSON goes through :mod:`stratamem._jsonio`, the one strict reader of outside
JSON (its limits apply to ingest too); its errors are re-anchored here to
``<file>:<line>``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .._jsonio import loads
from ..errors import DecodeError

__all__ = ["BOM", "JsonLines", "decode", "json_lines", "looks_like_lines", "numbered_lines", "whole_json"]

BOM = "\ufeff"
"""The byte order mark as text: skipped at the start of a file."""


def decode(raw: bytes, name: str) -> str:
    """``raw`` as text, without a leading byte order mark.

    Raises:
        DecodeError: The bytes are not UTF-8; names the file, the line and the byte.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.end == len(raw) and b"\n" not in raw[exc.start :] and exc.reason == "unexpected end of data":
            # A character cut by a writer still at work: the rest of the last line comes later.
            text = raw[: exc.start].decode("utf-8")
        else:
            line = raw.count(b"\n", 0, exc.start) + 1
            raise DecodeError(f"not valid UTF-8 (byte {exc.start})", line=line, source=name) from None
    return text[1:] if text.startswith(BOM) else text


def numbered_lines(text: str) -> Iterator[tuple[int, str, bool]]:
    """``(line number, line, ended)`` for each line: split at ``\\n`` only, one ``\\r`` before it dropped.

    ``ended`` is false for a last line without its ``\\n`` (a file still being written).
    """
    pieces = text.split("\n")
    last = len(pieces) - 1
    for i, piece in enumerate(pieces):
        if i == last and not piece:
            return
        yield i + 1, piece[:-1] if piece.endswith("\r") else piece, i < last


@dataclass(frozen=True, slots=True)
class JsonLines:
    """The records of a JSON Lines file."""

    records: list[tuple[int, dict[str, Any]]]
    """``(line, object)`` for each non-blank line, in order."""
    torn: bool = False
    """The last line is incomplete (no newline yet, does not parse): a record still being written."""


def json_lines(text: str, name: str) -> JsonLines:
    """Parse JSON Lines text: one object per non-blank line.

    Raises:
        DecodeError: A line (other than a torn last one) is not valid JSON or
            not an object; names the file and the line.
    """
    records: list[tuple[int, dict[str, Any]]] = []
    for n, line, ended in numbered_lines(text):
        if not line.strip():
            continue
        try:
            obj = loads(line, line=n)
        except DecodeError as exc:
            if not ended:
                return JsonLines(records, torn=True)
            raise DecodeError(exc.reason, line=n, source=name) from None
        if not isinstance(obj, dict):
            raise DecodeError("each line must be a JSON object", line=n, source=name)
        records.append((n, obj))
    return JsonLines(records)


def whole_json(text: str, name: str) -> Any:
    """Parse a whole JSON document.

    Raises:
        DecodeError: Not valid JSON; names the file and the parser's line.
    """
    try:
        return loads(text)
    except DecodeError as exc:
        raise DecodeError(exc.reason, line=exc.line, source=name) from None


def looks_like_lines(text: str) -> bool:
    """JSON Lines by content: the first line is a whole JSON object and more lines follow."""
    stripped = text.lstrip()
    if not stripped.startswith("{"):
        return False
    first, _, rest = stripped.partition("\n")
    if not rest.strip():
        return False
    try:
        loads(first)
    except DecodeError:
        return False
    return True
