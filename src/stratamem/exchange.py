"""Export and import of a whole namespace as JSON Lines.

The export holds the canonical record only (sessions and turns); everything
derived (summaries, embeddings, items) is rebuilt from it. Layout, one JSON
object per line::

    {"format": "stratamem-export", "version": 1, "namespace": "...", "tokenizer": "...", "exported_at": "..."}
    {"type": "session", "name": "...", "platform": null, "channel": null, "created_at": "..."}
    {"type": "turn", "session": "...", "seq": 1, "turn": {<canonical turn>}}
    ...
    {"type": "end", "sessions": N, "turns": M, "sha256": "<hex of the turn lines>"}

The trailer makes a truncated or altered file detectable: import checks the
counts and the checksum before it writes anything.

Import is idempotent (:func:`plan_import`): a session that already exists
keeps the turns it holds, and only the export's turns past them are added, as
long as the turns both hold agree seq by seq; importing the same file twice
adds nothing the second time.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import IO, Any

from ._jsonio import parse_object_line
from .errors import ConflictError, DecodeError, StratamemError
from .records import Session, StoredTurn, Turn, check_name, check_text, format_timestamp, parse_timestamp

__all__ = [
    "EXPORT_FORMAT",
    "EXPORT_VERSION",
    "ImportPlan",
    "ImportedNamespace",
    "plan_import",
    "read_export",
    "write_export",
]

EXPORT_FORMAT = "stratamem-export"
EXPORT_VERSION = 1


def _line(obj: dict[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False) + "\n"


def write_export(
    out: IO[str], namespace: str, tokenizer: str, sessions: Iterable[Session], turns: Iterable[StoredTurn]
) -> tuple[int, int]:
    """Write a namespace's sessions and turns; returns ``(sessions, turns)`` written."""
    out.write(
        _line(
            {
                "format": EXPORT_FORMAT,
                "version": EXPORT_VERSION,
                "namespace": namespace,
                "tokenizer": tokenizer,
                "exported_at": format_timestamp(datetime.now(UTC)),
            }
        )
    )
    n_sessions = 0
    for s in sessions:
        out.write(
            _line(
                {
                    "type": "session",
                    "name": s.name,
                    "platform": s.platform,
                    "channel": s.channel,
                    "created_at": format_timestamp(s.created_at),
                }
            )
        )
        n_sessions += 1
    digest = hashlib.sha256()
    n_turns = 0
    for st in turns:
        line = _line({"type": "turn", "session": st.session, "seq": st.seq, "turn": st.turn.to_dict()})
        digest.update(line.encode("utf-8"))
        out.write(line)
        n_turns += 1
    out.write(_line({"type": "end", "sessions": n_sessions, "turns": n_turns, "sha256": digest.hexdigest()}))
    return n_sessions, n_turns


@dataclass(frozen=True, slots=True)
class ImportedNamespace:
    """A parsed, verified export."""

    namespace: str
    """Namespace named in the header."""
    tokenizer: str
    """Tokenizer of the exporting store."""
    sessions: list[Session]
    """Sessions in export order."""
    turns: dict[str, list[Turn]]
    """Turns per session name, in sequence order."""


def _lines(source: IO[str]) -> Iterator[tuple[int, str]]:
    for n, line in enumerate(source, 1):
        if line.strip():
            yield n, line


def read_export(source: IO[str]) -> ImportedNamespace:
    """Parse and verify an export completely before anything is written.

    Every field of every record is type-checked here, so a hand-edited or
    hostile file fails with a :class:`DecodeError` naming its line, never with
    an error from deeper down (a store that cannot bind a value, a dict used as
    a key).

    Raises:
        DecodeError: Not an export, a newer version, malformed or out-of-order
            lines, a field of the wrong type, a missing trailer (truncated
            file), or counts/checksum that do not match. The error names the line.
    """
    it = _lines(source)
    try:
        n, first = next(it)
    except StopIteration:
        raise DecodeError("empty file: not a stratamem export") from None
    except UnicodeDecodeError as exc:
        raise DecodeError(f"not valid UTF-8: {exc}") from None
    header = parse_object_line(first, n)
    if header.get("format") != EXPORT_FORMAT:
        raise DecodeError("not a stratamem export (missing format header)", line=n)
    if not _is_int(header.get("version")) or header.get("version") != EXPORT_VERSION:
        raise DecodeError(f"unsupported export version {header.get('version')!r} (this reads {EXPORT_VERSION})", line=n)
    namespace = header.get("namespace")
    tokenizer = header.get("tokenizer")
    if not isinstance(namespace, str) or not isinstance(tokenizer, str):
        raise DecodeError("header needs namespace and tokenizer strings", line=n)
    sessions: list[Session] = []
    turns: dict[str, list[Turn]] = {}
    digest = hashlib.sha256()
    end: dict[str, Any] | None = None
    try:
        for n, line in it:
            if end is not None:
                raise DecodeError("content after the end record", line=n)
            obj = parse_object_line(line, n)
            kind = obj.get("type")
            if kind == "session":
                session = _session(obj, namespace, n)
                if session.name in turns:
                    raise DecodeError(f"session {session.name!r} listed twice", line=n)
                sessions.append(session)
                turns[session.name] = []
            elif kind == "turn":
                sess = obj.get("session")
                if not isinstance(sess, str) or sess not in turns:
                    raise DecodeError(f"turn for unknown session {sess!r}", line=n)
                seq = obj.get("seq")
                if not _is_int(seq) or seq != len(turns[sess]) + 1:
                    raise DecodeError(f"session {sess!r}: expected seq {len(turns[sess]) + 1}, got {seq!r}", line=n)
                try:
                    turns[sess].append(Turn.from_dict(obj.get("turn"), path="turn"))
                except StratamemError as exc:
                    raise DecodeError(str(exc), line=n) from None
                digest.update(line.encode("utf-8") if line.endswith("\n") else (line + "\n").encode("utf-8"))
            elif kind == "end":
                end = obj
                end_line = n
            else:
                raise DecodeError(f"unknown record type {kind!r}", line=n)
    except UnicodeDecodeError as exc:
        raise DecodeError(f"not valid UTF-8: {exc}") from None
    if end is None:
        raise DecodeError("no end record: the file is truncated")
    total = sum(len(v) for v in turns.values())
    if not (_is_int(end.get("sessions")) and _is_int(end.get("turns")) and isinstance(end.get("sha256"), str)):
        raise DecodeError("end record needs integer sessions and turns and a sha256 string", line=end_line)
    if end.get("sessions") != len(sessions) or end.get("turns") != total:
        raise DecodeError(
            f"end record counts ({end.get('sessions')} sessions, {end.get('turns')} turns) do not match "
            f"the file ({len(sessions)} sessions, {total} turns)",
            line=end_line,
        )
    if end.get("sha256") != digest.hexdigest():
        raise DecodeError("checksum mismatch: the turn lines were altered", line=end_line)
    return ImportedNamespace(namespace, tokenizer, sessions, turns)


def _is_int(value: Any) -> bool:
    # bool is an int in Python, but true is not a count.
    return isinstance(value, int) and not isinstance(value, bool)


def _session(obj: Mapping[str, Any], namespace: str, n: int) -> Session:
    """A session record, every field type-checked."""
    try:
        name = check_name(obj.get("name"), "session")
        created = parse_timestamp(obj.get("created_at"), "created_at")
        labels = {
            key: None if obj.get(key) is None else check_text(obj.get(key), key) for key in ("platform", "channel")
        }
    except StratamemError as exc:
        raise DecodeError(str(exc), line=n) from None
    return Session(namespace, name, labels["platform"], labels["channel"], created)


@dataclass(frozen=True, slots=True)
class ImportPlan:
    """What an import adds to a namespace."""

    turns: dict[str, list[Turn]]
    """New turns per session (every session of the export listed, possibly empty)."""
    skipped: int
    """Turns of the export the namespace already holds."""


def plan_import(store: Any, namespace: str, data: ImportedNamespace, *, dedupe: bool = True) -> ImportPlan:
    """The turns of ``data`` that ``namespace`` does not hold yet.

    A session the namespace already has is compared turn by turn (same seq,
    same canonical form); the turns they share are skipped, the export's
    later ones are new. Without ``dedupe`` an existing session is refused,
    as before.

    Raises:
        ConflictError: An existing session holds different turns than the export
            at some seq (or exists at all, without ``dedupe``).
    """
    existing = {s.name for s in store.sessions(namespace)}
    clash = [s.name for s in data.sessions if s.name in existing]
    if clash and not dedupe:
        raise ConflictError(f"sessions already exist in namespace {namespace!r}: {', '.join(clash[:5])}")
    out: dict[str, list[Turn]] = {}
    skipped = 0
    for s in data.sessions:
        turns = data.turns[s.name]
        held = [st.turn for st in store.turns(namespace, s.name)] if s.name in existing else []
        # Either side may be longer (a store ahead of or behind the export): their common prefix must agree.
        for seq, (mine, theirs) in enumerate(zip(held, turns, strict=False), 1):
            if mine.to_dict() != theirs.to_dict():
                raise ConflictError(
                    f"session {s.name!r} of namespace {namespace!r} differs from the export "
                    f"at seq {seq}; import into another namespace"
                )
        skipped += min(len(held), len(turns))
        out[s.name] = turns[len(held) :]
    return ImportPlan(out, skipped)
