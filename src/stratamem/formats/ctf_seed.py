"""Reading seed 000's own CTF dialect: ``#CTF v1 turns=N fields=…`` with full role names.

stratamem writes CTF v1 as ``docs/ctf.md`` specifies (lossless: backslash
escapes, one-letter roles, times as offsets). Seed 000 wrote an earlier
dialect under the same ``#CTF v1`` tag, which a store or a tool built from the
seed may hold; :func:`stratamem.formats.ctf.decode_turns` and
:func:`~stratamem.formats.ctf.decode_summaries` read it too, through here:

* turns — header ``#CTF v1 turns=<n> fields=<names>``; ``role`` and ``content``
  are required fields, ``timestamp`` (ISO 8601; no offset means UTC), ``model``
  and ``name`` optional; roles are written out (``user``, ``assistant``,
  ``system``, ``tool``); ``-`` is "none" in ``model``/``name``/``timestamp``;
  in text ``␉`` (U+2409) is a TAB and ``␊`` (U+240A) a line feed.
* summaries — header ``#CTF v1 type=summaries count=<n> fields=chunk_id,turn_range,summary,themes``.

That dialect cannot hold a literal ``␉``, ``␊`` or ``-`` (seed 000's known
defect), and its writer cut content at 2,000 characters; what it holds is read
as written. Reading is as strict as for our own dialect: a row count that
does not match, a missing field, an unknown role or a bad time is a
:class:`~stratamem.errors.DecodeError` naming the line, never partial data.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from ..errors import DecodeError, StratamemError
from ..records import Role, Turn

__all__ = ["is_seed_dialect", "read_seed_summaries", "read_seed_turns"]

_TURNS_HEADER = re.compile(r"^#CTF v1 turns=(\d{1,9}) fields=([a-z_,]+)$")
_SUMMARIES_HEADER = re.compile(r"^#CTF v1 type=summaries count=(\d{1,9}) fields=([a-z_,]+)$")
_ROLES: dict[str, Role] = {"user": "user", "assistant": "assistant", "system": "system", "tool": "tool"}
_TURN_FIELDS = ("role", "content", "timestamp", "model", "name")
_SUMMARY_FIELDS = ("chunk_id", "turn_range", "summary", "themes")
_RANGE = re.compile(r"^(\d{1,18})-(\d{1,18})$")
_NONE = "-"


def is_seed_dialect(text: Any) -> bool:
    """Whether ``text`` starts with seed 000's header (``turns=`` or ``type=summaries``) rather than ours."""
    if not isinstance(text, str) or not text.startswith("#CTF v1 "):
        return False
    head = text.split("\n", 1)[0]
    return bool(_TURNS_HEADER.match(head) or _SUMMARIES_HEADER.match(head))


def _text(cell: str) -> str:
    return cell.replace("\u2409", "\t").replace("\u240a", "\n")


def _rows(text: str, header: re.Pattern[str], allowed: tuple[str, ...], required: tuple[str, ...]) -> Any:
    lines = text[:-1].split("\n") if text.endswith("\n") else text.split("\n")
    m = header.match(lines[0])
    if not m:
        raise DecodeError("malformed seed-dialect CTF header", line=1)
    count, fields = int(m.group(1)), tuple(m.group(2).split(","))
    unknown = [f for f in fields if f not in allowed]
    if unknown or len(set(fields)) != len(fields):
        raise DecodeError(f"unknown or repeated field in fields={m.group(2)}", line=1)
    missing = [f for f in required if f not in fields]
    if missing:
        raise DecodeError(f"fields= lacks {missing[0]!r}", line=1)
    rows = lines[1:]
    if len(rows) != count:
        raise DecodeError(f"header says {count} rows, found {len(rows)}", line=min(len(rows), count) + 2)
    out = []
    for i, row in enumerate(rows):
        if "\r" in row:
            raise DecodeError("raw carriage return in a row", line=i + 2)
        cells = row.split("\t")
        if len(cells) != len(fields):
            raise DecodeError(f"expected {len(fields)} cells ({','.join(fields)}), found {len(cells)}", line=i + 2)
        out.append((i + 2, dict(zip(fields, cells, strict=True))))
    return out


def _timestamp(cell: str, line: int) -> datetime | None:
    if cell in ("", _NONE):
        return None
    try:
        ts = datetime.fromisoformat(cell.replace("Z", "+00:00"))
    except ValueError:
        raise DecodeError(f"bad timestamp {cell!r}", line=line) from None
    return ts if ts.tzinfo is not None else ts.replace(tzinfo=UTC)


def read_seed_turns(text: str) -> list[Turn]:
    """Turns of a seed-dialect ``turns`` document (see the module docstring).

    A row without a timestamp takes the previous row's (the first such row:
    1970-01-01 UTC), so the order of the turns is kept and decoding is repeatable.

    Raises:
        DecodeError: The document is malformed; ``line`` names the first bad line.
    """
    turns: list[Turn] = []
    previous = datetime(1970, 1, 1, tzinfo=UTC)
    for line, cells in _rows(text, _TURNS_HEADER, _TURN_FIELDS, ("role", "content")):
        role = _ROLES.get(cells["role"])
        if role is None:
            raise DecodeError(f"unknown role {cells['role']!r} (expected user, assistant, system or tool)", line=line)
        at = _timestamp(cells.get("timestamp", ""), line) or previous
        previous = at
        model, name = (None if cells.get(k, _NONE) == _NONE else _text(cells[k]) for k in ("model", "name"))
        try:
            turns.append(Turn(role=role, content=_text(cells["content"]), timestamp=at, model=model, name=name))
        except StratamemError as exc:
            raise DecodeError(f"not a valid turn: {exc}", line=line) from None
    return turns


def read_seed_summaries(text: str) -> list[tuple[str, int, int, str, tuple[str, ...]]]:
    """``(id, first, last, summary, themes)`` of a seed-dialect summaries document.

    Raises:
        DecodeError: The document is malformed; ``line`` names the first bad line.
    """
    out = []
    for line, cells in _rows(text, _SUMMARIES_HEADER, _SUMMARY_FIELDS, _SUMMARY_FIELDS):
        m = _RANGE.match(cells["turn_range"])
        if not m:
            raise DecodeError(f"turn_range must be 'first-last', got {cells['turn_range']!r}", line=line)
        themes = tuple(t for t in cells["themes"].split("|") if t) if cells["themes"] else ()
        out.append((_text(cells["chunk_id"]), int(m.group(1)), int(m.group(2)), _text(cells["summary"]), themes))
    return out
