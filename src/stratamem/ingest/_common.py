"""What every importer shares: the session record, dedupe keys, errors, repairs.

An importer turns one file into :class:`IngestSession` records. Each turn
carries a *dedupe key*, so that ingesting the same file again stores nothing
new (see :meth:`stratamem.Memory.ingest`): the provider's message id when the
source has one (``id:<id>``), else a hash of the record's position in its
session and its JSON (``sha256:<hex>``), which is stable across runs because
it never includes a timestamp the reader made up. A turn built from several
source records (a reply written over several lines) also lists them as
:class:`Part` s, so a reply that gained records since it was stored is
continued rather than lost.

Errors name the file and the line: ``<file>:<line>: <JSON path>: <message>``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from ..errors import DecodeError, InvalidTurnError, StratamemError
from ..records import Block, Role, TextBlock, ToolResultBlock, Turn, check_name

__all__ = [
    "IngestReport",
    "IngestSession",
    "Part",
    "bad",
    "branch_session",
    "clean_text",
    "content_key",
    "epoch_timestamp",
    "fail",
    "id_key",
    "record_error",
    "repair_orphans",
    "safe_session",
]


@dataclass(frozen=True, slots=True)
class Part:
    """One source record of a turn built from several: its dedupe key and how many of the turn's blocks it holds."""

    key: str
    """The record's own key (e.g. the line's uuid)."""
    blocks: int
    """How many of the turn's blocks, in order after the previous parts', came from it."""


@dataclass(frozen=True, slots=True)
class IngestSession:
    """Turns read for one session."""

    session: str | None
    """Session name, or ``None`` for the caller's default."""
    turns: list[Turn]
    """Turns in order."""
    namespace: str | None = None
    """Namespace the source asks for (LoCoMo samples), or ``None`` for the caller's."""
    platform: str | None = None
    """Platform label for a new session."""
    channel: str | None = None
    """Channel label for a new session."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Source labels (e.g. LoCoMo session date text, a ChatGPT title)."""
    keys: tuple[str, ...] = ()
    """Dedupe key of each turn (same length as ``turns``), or empty: then
    :meth:`~stratamem.Memory.ingest` keys each turn by its position and content."""
    skipped: Mapping[str, int] = field(default_factory=dict)
    """Source records deliberately not turned into turns, counted by kind
    (e.g. ``file-history-snapshot``, ``reasoning``)."""
    parts: tuple[tuple[Part, ...], ...] = ()
    """The records each turn was built from (same length as ``turns``; an
    empty tuple for a turn of one record), or empty for none. A stored turn
    whose record has new parts since is continued by a turn of their blocks."""
    held_back: int = 0
    """Turns not given because the source may still be writing them (the last
    reply of a live log); reading the file again once it is complete gives them."""
    family: str | None = None
    """Set by readers of conversation trees (rewinds, edited prompts): the
    sessions named ``family`` or ``family.<...>`` share this source's keys. A
    turn stored in any of them is not stored again, and new turns never go
    after a stored turn that is not on their path (they start a branch session)."""
    source: str | None = None
    """The file the turns were read from (its name), to place errors."""
    lines: tuple[int | None, ...] = ()
    """The source line of each turn (same length as ``turns``), or empty."""


def fail(message: str, *, line: int | None = None, path: str | None = None, where: str = "") -> DecodeError:
    """A :class:`DecodeError` naming the file (``where``), the line and the JSON path of a bad record."""
    at = f"{path}: " if path else ""
    return DecodeError(f"{at}{message}", line=line, source=where or None)


def bad(message: str, path: str) -> InvalidTurnError:
    """An error inside a record at JSON ``path`` (relative to the record); :func:`record_error` anchors it."""
    return InvalidTurnError(message, path=path)


def record_error(exc: StratamemError, *, line: int | None, path: str, where: str = "") -> DecodeError:
    """Re-anchor an error raised while converting a record at ``path`` (a line of the file)."""
    inner = getattr(exc, "path", None)
    reason = getattr(exc, "reason", None) or str(exc)
    if not inner:
        full = path
    elif not path:
        full = inner
    else:
        full = f"{path}{inner}" if inner.startswith("[") else f"{path}.{inner}"
    return fail(reason, line=line, path=full, where=where)


def _digest(obj: Any) -> str:
    text = json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def content_key(position: int, record: Any) -> str:
    """Dedupe key of a record without an id: its position in the session and its JSON, hashed."""
    return f"sha256:{_digest([position, record])}"


def id_key(source: str, ident: str, part: int = 0) -> str:
    """Dedupe key of a record with a provider id (``part`` tells apart turns split from one record)."""
    return f"id:{source}:{ident}" + (f"#{part}" if part else "")


def clean_text(value: Any, path: str) -> str:
    """``value`` as storable text: NUL and unpaired surrogates (a tool printed binary) become U+FFFD.

    Raises:
        InvalidTurnError: ``value`` is not a string.
    """
    if not isinstance(value, str):
        raise bad(f"expected a string, got {type(value).__name__}", path)
    if "\x00" in value:
        value = value.replace("\x00", "\ufffd")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        value = "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in value)
    return value


_NAME_CHARS = re.compile(r"[^A-Za-z0-9_.:@+=-]")


def branch_session(base: str, ident: str) -> str:
    """The session of a branch of ``base`` that starts at the record ``ident`` (a valid session name)."""
    tail = _NAME_CHARS.sub("-", ident.rsplit(":", 1)[-1]).strip("-.") or "x"
    name = f"{base}.branch-{tail}"
    if len(name) > 128:
        name = f"{base[:80]}.branch-{hashlib.sha256(ident.encode('utf-8')).hexdigest()[:24]}"
    return name


def safe_session(value: Any, fallback: str | None) -> str | None:
    """``value`` as a session name when it is a valid one, else ``fallback``."""
    if isinstance(value, str):
        try:
            return check_name(value, "session")
        except StratamemError:
            return fallback
    return fallback


def epoch_timestamp(value: Any) -> datetime | None:
    """A Unix time in seconds (int or float) as an aware UTC datetime; ``None`` if absent or unusable."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        return datetime.fromtimestamp(value, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None


def repair_orphans(turns: list[Turn]) -> int:
    """Turn tool results that answer no earlier call of the session into plain user text, in place.

    Real logs hold such results when a session was resumed or compacted (the
    call sits in another file, or was summarized away). Storing them as tool
    turns would make the whole session refused; as text they keep their content
    and say what they were (``metadata.orphan_tool_results``).

    Returns:
        How many tool results were converted.
    """
    converted = 0
    known: set[str] = set()
    for i, t in enumerate(turns):
        known.update(t.tool_use_ids)
        orphans = [tid for tid in t.tool_result_ids if tid not in known]
        if not orphans:
            continue
        blocks: list[Block] = []
        for b in t.blocks:
            if isinstance(b, ToolResultBlock) and b.tool_use_id in orphans:
                blocks.append(TextBlock(f"[result of tool call {b.tool_use_id}]\n{b.text}"))
            else:
                blocks.append(b)
        role: Role = "tool" if any(isinstance(b, ToolResultBlock) for b in blocks) else "user"
        meta = {**t.metadata, "orphan_tool_results": orphans}
        turns[i] = replace(t, role=role, content=tuple(blocks), metadata=meta)
        converted += len(orphans)
    return converted


@dataclass(frozen=True, slots=True)
class IngestReport:
    """What :meth:`stratamem.Memory.ingest` did, per session."""

    stored: Mapping[str, int]
    """Turns stored, by session name (sessions with nothing new are listed with 0)."""
    skipped: Mapping[str, int]
    """Turns not stored because the session already held them, by session name."""
    turn_ids: tuple[int, ...] = ()
    """Ids of the stored turns, in order."""
    held_back: Mapping[str, int] = field(default_factory=dict)
    """Turns the reader held back because the source may still be writing them, by session."""
    continued: int = 0
    """Stored turns that had grown since and were continued by a turn of their new blocks."""
    branched: Mapping[str, str] = field(default_factory=dict)
    """Sessions whose new turns went to a branch session (their stored tail is off the new path), and where."""

    @property
    def total_stored(self) -> int:
        """Turns stored in all sessions."""
        return sum(self.stored.values())

    @property
    def total_skipped(self) -> int:
        """Turns skipped as already stored, in all sessions."""
        return sum(self.skipped.values())
