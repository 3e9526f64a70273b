"""Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl``).

Three shapes, by period:

* **wrapped** (since autumn 2025): every line is ``{"timestamp", "type",
  "payload"}`` with ``type`` one of ``session_meta`` (session id, cwd,
  instructions, ``source``: cli, vscode, exec, or ``{"subagent": ...}``),
  ``response_item`` (a Responses API item), ``event_msg`` (UI events that
  repeat what the items say), ``turn_context`` (cwd, model, policies) and
  ``compacted`` (a compaction's summary);
* **flat** (mid 2025): the first line is the session meta object itself
  (``id``, ``timestamp``, ``instructions``), the other lines are bare items or
  ``{"record_type": "state"}`` markers, and no line has a time;
* **JSON** (the TypeScript codex-cli, spring 2025): one document
  ``{"session": {"timestamp", "id", "instructions"}, "items": [...]}``.

Kept: messages (``developer`` as ``system``), tool calls with their outputs
(text and images), reasoning summaries as thinking, the session meta
``instructions`` as a system turn. The user message Codex writes into every
session holds parts: ``<environment_context>`` (skipped and counted), the
project's instructions (``# AGENTS.md instructions for …`` or
``<user_instructions>``: a ``system`` turn each) and the user's own text (a
user turn). A ``compacted`` record's summary is an assistant turn marked
``metadata.compact_summary`` (its ``replacement_history`` repeats earlier
items and is counted, not stored again). The model of assistant turns comes
from the latest ``turn_context``. A sub-agent rollout (``source.subagent``)
marks its turns ``sidechain`` and ``agent``.

A live rollout's last assistant turn may still gain calls: unless something
followed it (an output, a message, a ``token_count``/``task_complete``/
``turn_aborted`` event) or the file is settled, it is held back.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from ..errors import DecodeError, StratamemError
from ..records import Turn, parse_timestamp
from ._common import (
    IngestSession,
    Part,
    clean_text,
    content_key,
    fail,
    id_key,
    record_error,
    repair_orphans,
    safe_session,
)
from .responses import CALL_TYPES, ITEM_TYPES, ItemReader

__all__ = ["looks_like_codex", "looks_like_codex_json", "read_codex", "read_codex_json"]

_WRAPPED = frozenset({"session_meta", "response_item", "event_msg", "turn_context", "compacted"})
_INSTRUCTIONS = ("# AGENTS.md instructions", "<user_instructions>")
_ENVIRONMENT = "<environment_context>"
# Events Codex writes once a model response has ended.
_CLOSING_EVENTS = frozenset({"token_count", "task_complete", "turn_aborted"})


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
        and "content" not in first
        and (
            len(records) == 1  # a rollout just started: its meta line alone
            or any(r.get("record_type") == "state" or r.get("type") in ITEM_TYPES for _, r in records[1:50])
        )
    )


def looks_like_codex_json(data: Any) -> bool:
    """Whether parsed JSON is a TypeScript codex-cli rollout: ``{"session": {...}, "items": [...]}``."""
    return (
        isinstance(data, Mapping) and isinstance(data.get("session"), Mapping) and isinstance(data.get("items"), list)
    )


def _part_texts(item: Mapping[str, Any]) -> list[str | None]:
    """Each content part's text (``None`` for a part without one)."""
    content = item.get("content")
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [p.get("text") if isinstance(p, Mapping) and isinstance(p.get("text"), str) else None for p in content]


class _Rollout:
    """Items of one rollout into turns, with the user messages' instruction parts apart."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.skipped: Counter[str] = Counter()
        self.reader = ItemReader(self.skipped)
        # turn index -> the system turns (with key and line) that go before it
        self.extra: dict[int, list[tuple[Turn, str, int]]] = {}
        self.pending_system: list[tuple[Turn, str, int]] = []

    def item(self, payload: Any, pos: int, ts: datetime, model: str | None, key: str, path: str, line: int) -> None:
        if (
            isinstance(payload, Mapping)
            and payload.get("type", "message") == "message"
            and payload.get("role") == "user"
        ):
            payload = self._user(payload, ts, key, line)
            if payload is None:
                return
        before = len(self.reader.turns)
        self.reader.add(payload, pos, ts, model=model, path=path)
        if len(self.reader.turns) > before and self.pending_system:
            self.extra[before] = self.pending_system
            self.pending_system = []

    def _user(self, item: Mapping[str, Any], ts: datetime, key: str, line: int) -> Mapping[str, Any] | None:
        """Split a user message: environment parts skipped, instruction parts system turns, the rest a user turn."""
        texts = _part_texts(item)
        env = [i for i, t in enumerate(texts) if t is not None and t.lstrip().startswith(_ENVIRONMENT)]
        ins = [i for i, t in enumerate(texts) if t is not None and t.lstrip().startswith(_INSTRUCTIONS)]
        if not env and not ins:
            return item
        if env:
            self.skipped["environment_context"] += len(env)
        for k, i in enumerate(ins):
            text = clean_text(texts[i], f"content[{i}].text")
            turn_key = key if k == 0 else f"{key}#{k}"
            self.pending_system.append((Turn(role="system", content=text, timestamp=ts), turn_key, line))
        rest = [i for i in range(len(texts)) if i not in env and i not in ins]
        if not rest:
            return None
        content = item.get("content")
        kept = [content[i] for i in rest] if isinstance(content, list) else content
        return {**item, "content": kept}

    def flush(self) -> None:
        if self.pending_system:
            self.extra[len(self.reader.turns)] = self.pending_system
            self.pending_system = []


def _closed(records: list[tuple[int, dict[str, Any]]], after: int, flat: bool) -> bool:
    """Whether anything after record index ``after`` says the model response it belongs to has ended."""
    for _, rec in records[after + 1 :]:
        kind = "response_item" if flat else rec.get("type")
        payload = rec if flat else rec.get("payload")
        if kind in ("compacted", "turn_context"):
            return True
        if not isinstance(payload, Mapping):
            continue
        if kind == "event_msg" and payload.get("type") in _CLOSING_EVENTS:
            return True
        if kind == "response_item" and payload.get("type", "message") not in (*CALL_TYPES, "reasoning"):
            return True
    return False


def read_codex(
    records: list[tuple[int, dict[str, Any]]], default_session: str | None, where: str = "", *, settled: bool = True
) -> list[IngestSession]:
    """Codex rollout records (``(line, object)`` pairs) as one session.

    Raises:
        DecodeError: A record is malformed; names the file, its line and JSON path.
    """
    roll = _Rollout(where)
    session = default_session
    model: str | None = None
    start: datetime | None = None
    first_system: list[tuple[Turn, str, int]] = []  # session meta instructions
    labels: dict[str, str] = {}
    meta_extra: dict[str, Any] = {}
    flat = not (records and records[0][1].get("type") in _WRAPPED and "payload" in records[0][1])
    keys_at: dict[int, str] = {}
    for pos, (n, rec) in enumerate(records):
        kind: Any
        payload: Any
        if flat:
            kind = "session_meta" if pos == 0 else ("state" if "record_type" in rec else "response_item")
            payload, ts_raw, base = rec, (rec.get("timestamp") if pos == 0 else None), ""
        else:
            kind, payload, ts_raw, base = rec.get("type"), rec.get("payload"), rec.get("timestamp"), "payload"
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
                text = clean_text(instructions, "instructions")
                first_system.append(
                    (Turn(role="system", content=text, timestamp=ts), content_key(-1, {"instructions": text}), n)
                )
            source = payload.get("source")
            if isinstance(source, Mapping) and isinstance(source.get("subagent"), str | Mapping):
                agent = source["subagent"]
                name = agent if isinstance(agent, str) else next(iter(agent), "subagent")
                labels["subagent"] = str(name)
                meta_extra = {"sidechain": True, "agent": str(name)}
            if isinstance(payload.get("forked_from_id"), str):
                labels["forked_from"] = payload["forked_from_id"]
            continue
        if kind == "turn_context":
            model = payload.get("model") if isinstance(payload.get("model"), str) else model
            roll.skipped["turn_context"] += 1
            continue
        if ts is None:
            raise fail("no timestamp before the first item (no session_meta line)", line=n, where=where)
        if kind == "compacted":
            _compacted(roll, payload, pos, ts, n, where)
            keys_at[pos] = content_key(pos, payload)
            continue
        if kind != "response_item":
            roll.skipped[str(kind)] += 1
            continue
        key = _item_key(payload, pos)
        keys_at[pos] = key
        try:
            roll.item(payload, pos, ts, model, key, base, n)
        except StratamemError as exc:
            raise record_error(exc, line=n, path=base, where=where) from None
    roll.reader.finish()
    roll.flush()
    return [_session(roll, records, session, where, first_system, keys_at, labels, meta_extra, flat, settled)]


def _compacted(roll: _Rollout, payload: Mapping[str, Any], pos: int, ts: datetime, n: int, where: str) -> None:
    message = payload.get("message")
    history = payload.get("replacement_history")
    if isinstance(history, list) and history:
        roll.skipped["replacement_history"] += len(history)
    if not isinstance(message, str) or not message.strip():
        roll.skipped["compacted"] += 1
        return
    try:
        text = clean_text(message, "payload.message")
    except StratamemError as exc:
        raise record_error(exc, line=n, path="", where=where) from None
    roll.reader.add_turn(Turn(role="assistant", content=text, timestamp=ts, metadata={"compact_summary": True}), pos)


def _item_key(item: Any, pos: int) -> str:
    ident = item.get("id") if isinstance(item, Mapping) else None
    if isinstance(ident, str) and ident.startswith(("msg_", "fc_", "rs_")):
        return id_key("codex", ident)
    return content_key(pos, item)


def _session(
    roll: _Rollout,
    records: list[tuple[int, dict[str, Any]]],
    session: str | None,
    where: str,
    first_system: list[tuple[Turn, str, int]],
    keys_at: Mapping[int, str],
    labels: Mapping[str, str],
    meta_extra: Mapping[str, Any],
    flat: bool,
    settled: bool,
) -> IngestSession:
    reader = roll.reader
    parts = reader.parts(lambda i: keys_at[i])
    turns: list[Turn] = [t for t, _, _ in first_system]
    keys: list[str] = [k for _, k, _ in first_system]
    lines: list[int | None] = [n for _, _, n in first_system]
    all_parts: list[tuple[Part, ...]] = [()] * len(first_system)
    held = 0
    last = len(reader.turns) - 1
    open_last = (
        not settled
        and last >= 0
        and reader.turns[last].role == "assistant"
        and not reader.turns[last].metadata.get("compact_summary")
        and not _closed(records, max(i for i, _ in reader.members[last]), flat)
    )
    for i, (turn, src) in enumerate(zip(reader.turns, reader.sources, strict=True)):
        for sys_turn, sys_key, sys_line in roll.extra.get(i, []):
            turns.append(sys_turn)
            keys.append(sys_key)
            lines.append(sys_line)
            all_parts.append(())
        if i == last and open_last:
            held = 1
            continue
        turns.append(replace(turn, metadata={**turn.metadata, **meta_extra}) if meta_extra else turn)
        keys.append(keys_at[src])
        lines.append(records[src][0])
        all_parts.append(parts[i])
    for sys_turn, sys_key, sys_line in roll.extra.get(len(reader.turns), []):
        turns.append(sys_turn)
        keys.append(sys_key)
        lines.append(sys_line)
        all_parts.append(())
    repair_orphans(turns)
    return IngestSession(
        session,
        turns,
        platform="codex",
        labels=dict(labels),
        keys=tuple(keys),
        skipped=dict(roll.skipped),
        parts=tuple(all_parts) if any(all_parts) else (),
        held_back=held,
        family=session,
        source=where or None,
        lines=tuple(lines),
    )


def read_codex_json(data: Mapping[str, Any], default_session: str | None, where: str = "") -> list[IngestSession]:
    """A TypeScript codex-cli rollout (``{"session": {...}, "items": [...]}``) as one session.

    Items carry no times: every turn is dated with the session's ``timestamp``.

    Raises:
        DecodeError: The session has no usable timestamp, or an item is malformed; names the JSON path.
    """
    meta = data["session"]
    try:
        ts = parse_timestamp(meta.get("timestamp"), "session.timestamp")
    except StratamemError as exc:
        raise record_error(exc, line=None, path="", where=where) from None
    # Records numbered by item (the meta as 0), so an error can be put back at its item's path.
    records: list[tuple[int, dict[str, Any]]] = [
        (0, {"timestamp": meta.get("timestamp"), "type": "session_meta", "payload": dict(meta)})
    ]
    for i, item in enumerate(data["items"]):
        if not isinstance(item, Mapping):
            raise fail("an item must be an object", path=f"items[{i}]", where=where)
        records.append((i + 1, {"timestamp": ts.isoformat(), "type": "response_item", "payload": dict(item)}))
    try:
        [out] = read_codex(records, default_session)
    except DecodeError as exc:
        at = f"items[{exc.line - 1}]" if exc.line else "session"
        inner = exc.reason.removeprefix("payload")
        # "payload.content[0]: why" -> "items[3].content[0]: why"; "payload: why" -> "items[3]: why".
        text = f"{at}{inner}" if inner.startswith((".", "[")) else f"{at}: {inner.lstrip(': ')}"
        raise DecodeError(text, source=where or None) from None
    return [replace(out, lines=(), source=where or None)]
