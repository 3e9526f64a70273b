"""Codex CLI session logs (``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl``).

Current files wrap every line as ``{"timestamp", "type", "payload"}`` with
``type`` one of ``session_meta`` (session id, cwd, instructions),
``response_item`` (a Responses API item: message, function_call,
function_call_output, reasoning, ...), ``event_msg`` (UI events that repeat
what the items say), ``turn_context`` (cwd, model, policies) and
``compacted``. Older files are flat: the first line is the session meta
object itself (``id``, ``timestamp``, ``instructions``), the other lines are
bare items or ``{"record_type": "state"}`` markers, and no line has a time.

Kept: messages (``developer`` as ``system``; the user's ``<user_instructions>``
block as a ``system`` turn, since it is standing instructions), tool calls
with their outputs, and the session meta ``instructions`` as a system turn.
The model of assistant turns comes from the latest ``turn_context``. Skipped
and counted: ``event_msg``, ``turn_context``, ``reasoning``, ``compacted``,
state markers, and the ``<environment_context>`` message Codex writes into
every session.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ..errors import StratamemError
from ..records import Turn, parse_timestamp
from ._common import IngestSession, content_key, fail, id_key, record_error, repair_orphans, safe_session
from .responses import ITEM_TYPES, ItemReader

__all__ = ["looks_like_codex", "read_codex"]

_WRAPPED = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})


def looks_like_codex(records: list[tuple[int, dict[str, Any]]]) -> bool:
    """Whether the records are a Codex rollout, wrapped or flat."""
    if not records:
        return False
    first = records[0][1]
    if first.get("type") in _WRAPPED and "payload" in first:
        return True
    # Flat: a meta line (id + timestamp, no role/type), then bare items or state markers.
    return (
        "id" in first
        and "timestamp" in first
        and "type" not in first
        and "role" not in first
        and any(r.get("record_type") == "state" or r.get("type") in ITEM_TYPES for _, r in records[1:50])
    )


def _is_environment(item: Mapping[str, Any]) -> bool:
    return _first_text(item).lstrip().startswith("<environment_context>")


def _first_text(item: Mapping[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list) and content and isinstance(content[0], Mapping):
        text = content[0].get("text")
        return text if isinstance(text, str) else ""
    return ""


def read_codex(
    records: list[tuple[int, dict[str, Any]]], default_session: str | None, where: str = ""
) -> list[IngestSession]:
    """Codex rollout records (``(line, object)`` pairs) as one session.

    Raises:
        DecodeError: A record is malformed; names its line and JSON path.
    """
    skipped: Counter[str] = Counter()
    reader = ItemReader(skipped)
    session = default_session
    model: str | None = None
    start: datetime | None = None
    extra_first: list[tuple[int, str]] = []  # (line, instructions) system turns from session meta
    flat = not (records and records[0][1].get("type") in _WRAPPED and "payload" in records[0][1])
    for pos, (n, rec) in enumerate(records):
        kind: str | None
        payload: Any
        if flat:
            kind, payload, ts_raw = (
                ("session_meta", rec, rec.get("timestamp"))
                if pos == 0
                else ("state" if "record_type" in rec else "response_item", rec, None)
            )
            base = ""
        else:
            kind, payload, ts_raw = rec.get("type"), rec.get("payload"), rec.get("timestamp")
            base = "payload"
            if not isinstance(payload, Mapping):
                raise fail("a Codex record needs a 'payload' object", line=n, path="payload", where=where)
        try:
            ts = parse_timestamp(ts_raw, "timestamp") if ts_raw is not None else start
        except StratamemError as exc:
            raise record_error(exc, line=n, path="", where=where) from None
        if kind == "session_meta":
            if ts is None:
                raise fail("the session meta record has no timestamp", line=n, path="timestamp", where=where)
            session = safe_session(payload.get("id"), default_session)
            start = ts
            instructions = payload.get("instructions")
            if isinstance(instructions, str) and instructions.strip():
                extra_first.append((n, instructions))
            continue
        if kind == "turn_context":
            model = payload.get("model") if isinstance(payload.get("model"), str) else model
            skipped["turn_context"] += 1
            continue
        if kind != "response_item":
            skipped[str(kind)] += 1
            continue
        if ts is None:
            raise fail("no timestamp before the first item (no session_meta line)", line=n, where=where)
        if payload.get("type", "message") == "message" and _is_environment(payload):
            skipped["environment_context"] += 1
            continue
        try:
            turn = reader.add(payload, pos, ts, model=model, path=base)
        except StratamemError as exc:
            raise record_error(exc, line=n, path=base, where=where) from None
        if turn is not None and turn.role == "user" and _first_text(payload).lstrip().startswith("<user_instructions>"):
            reader.turns[-1] = Turn(
                role="system", content=turn.content, timestamp=turn.timestamp, metadata=turn.metadata
            )
    turns: list[Turn] = []
    keys: list[str] = []
    for _, text in extra_first:
        assert start is not None  # set by the session meta line that held the instructions
        turns.append(Turn(role="system", content=text, timestamp=start))
        keys.append(content_key(-1, {"instructions": text}))
    for turn, src in zip(reader.turns, reader.sources, strict=True):
        turns.append(turn)
        item = records[src][1]
        item = item.get("payload", item) if not flat else item
        ident = item.get("id") if isinstance(item, Mapping) else None
        keys.append(
            id_key("codex", ident)
            if isinstance(ident, str) and ident.startswith(("msg_", "fc_", "rs_"))
            else content_key(src, item)
        )
    repair_orphans(turns)
    return [IngestSession(session, turns, platform="codex", keys=tuple(keys), skipped=dict(skipped))]
