"""Gemini CLI sessions (``~/.gemini/tmp/<project hash>/``).

Shapes, newest first:

* **session log** ``chats/session-<time>-<id>.jsonl`` (2026): the first line is
  the session's metadata (``sessionId``, ``projectHash``, ``startTime``,
  ``kind``); then message records ``{id, timestamp, type, content, ...}`` with
  ``type`` ``user``, ``gemini`` (adding ``toolCalls``, ``thoughts``, ``model``),
  ``info``, ``warning`` or ``error``. A message is appended again, whole, each
  time it changes (tokens, results): the last record of an id wins, in the place
  of the first. ``{"$set": {...}}`` updates the metadata (``summary`` is the
  title; ``messages`` rewrites the history, e.g. a compression: messages with
  new ids are added); ``{"$rewindTo": id}`` takes that message and everything
  after it back. A sub-agent's log sits at ``chats/<parent session>/<id>.jsonl``
  (``kind: "subagent"``);
* **session document** ``chats/session-<time>-<id>.json`` (2025): the same
  record as one JSON object with ``messages``;
* **prompt log** ``logs.json``: the user's prompts only;
* **checkpoint** ``checkpoint-<tag>.json`` (``/chat save``): the model's
  history, ``{"history": [Content...]}`` or a bare list, without times.

Mapping: ``user`` → a user turn (text, ``inlineData`` images); ``gemini`` → an
assistant turn (thoughts as thinking, text, one tool call per ``toolCalls``
entry) then one tool turn per call with a result (``response.error`` is an
error result; a call cancelled or failed without one gets its status as the
result); ``info``/``warning``/``error`` are skipped and counted. Rewound
messages are kept as a branch session (see :mod:`.branches`). Keys: message
ids, tool turns by call id. A live log's last reply (or one whose calls are
still running) is held back until the file settles.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..errors import StratamemError
from ..records import Block, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock, Turn, parse_timestamp
from ._common import (
    IngestSession,
    Part,
    bad,
    branch_session,
    clean_text,
    content_key,
    fail,
    id_key,
    record_error,
    repair_orphans,
    safe_session,
)
from .branches import split_tree
from .gemini_parts import as_text, content_blocks, is_content, part_list, plain_or_blocks
from .gemini_saved import read_checkpoint, read_prompt_log

__all__ = ["looks_like_gemini", "looks_like_gemini_lines", "read_gemini", "read_gemini_lines"]

_SOURCE = "gemini"
_PLATFORM = "gemini-cli"
_MESSAGE_TYPES = frozenset({"user", "gemini", "info", "warning", "error"})
_NOTICES = frozenset({"info", "warning", "error"})


def _is_meta(rec: Mapping[str, Any]) -> bool:
    return "sessionId" in rec and ("startTime" in rec or "projectHash" in rec) and "type" not in rec


def looks_like_gemini_lines(records: list[tuple[int, dict[str, Any]]]) -> bool:
    """Whether JSON Lines records are a Gemini CLI session log."""
    if not records:
        return False
    first = records[0][1]
    if _is_meta(first):
        return True
    return all(
        "$set" in r or "$rewindTo" in r or (r.get("type") in _MESSAGE_TYPES and "id" in r) for _, r in records[:20]
    )


def looks_like_gemini(data: Any) -> bool:
    """Whether a JSON document is a Gemini CLI session document, prompt log or checkpoint."""
    if isinstance(data, Mapping):
        if "sessionId" in data and isinstance(data.get("messages"), list):
            return True
        history = data.get("history")
        return isinstance(history, list) and bool(history) and all(is_content(c) for c in history[:20])
    if isinstance(data, list) and data:
        if all(is_content(c) for c in data[:20]):
            return True
        return all(isinstance(r, Mapping) and "sessionId" in r and "messageId" in r for r in data[:20])
    return False


def _result(call: Mapping[str, Any]) -> tuple[str, bool] | None:
    """A tool call's result text and whether it is an error (``None``: no result yet)."""
    for p in part_list(call.get("result")):
        resp = p.get("functionResponse") if isinstance(p, Mapping) else None
        body = resp.get("response") if isinstance(resp, Mapping) else None
        if isinstance(body, Mapping):
            if "error" in body:
                return as_text(body["error"]), True
            return as_text(body.get("output", body)), False
        if isinstance(p, Mapping) and isinstance(p.get("text"), str):
            return p["text"], False
    status = call.get("status")
    if status in ("cancelled", "error"):
        return f"[{status}]", True
    return None


class _Messages:
    """Message records into turns, one message at a time."""

    def __init__(self, where: str, skipped: Counter[str], extra: Mapping[str, Any]) -> None:
        self.where = where
        self.skipped = skipped
        self.extra = extra

    def turns(
        self, msg: Mapping[str, Any], path: str, default_ts: datetime | None
    ) -> list[tuple[Turn, str, tuple[Part, ...]]]:
        kind = msg.get("type")
        ident = msg.get("id")
        if kind in _NOTICES or kind not in ("user", "gemini"):
            self.skipped[str(kind) if isinstance(kind, str) else "untyped"] += 1
            return []
        raw_ts = msg.get("timestamp")
        ts = parse_timestamp(raw_ts, f"{path}.timestamp") if raw_ts is not None else default_ts
        if ts is None:
            raise bad("a message needs a timestamp", f"{path}.timestamp")
        key = id_key(_SOURCE, str(ident)) if ident is not None else content_key(0, msg)
        meta = {**({"message_id": str(ident)} if ident is not None else {}), **self.extra}
        blocks = content_blocks(msg.get("content"), f"{path}.content", self.skipped)
        if kind == "user":
            if not blocks:
                self.skipped["empty message"] += 1
                return []
            text = _is_snapshot(blocks)
            if text is not None:
                turn = Turn(role="assistant", content=text, timestamp=ts, metadata={**meta, "compact_summary": True})
            else:
                turn = Turn(role="user", content=plain_or_blocks(blocks), timestamp=ts, metadata=meta)
            return [(turn, key, ())]
        thoughts = [
            ThinkingBlock(
                clean_text(": ".join(x for x in (t.get("subject"), t.get("description")) if isinstance(x, str)), path)
            )
            for t in msg.get("thoughts") or []
            if isinstance(t, Mapping) and (t.get("subject") or t.get("description"))
        ]
        calls = [c for c in msg.get("toolCalls") or [] if isinstance(c, Mapping)]
        uses: list[Block] = []
        results: list[tuple[Turn, str, tuple[Part, ...]]] = []
        for i, call in enumerate(calls):
            cpath = f"{path}.toolCalls[{i}]"
            call_id = clean_text(call.get("id") or f"{ident}-call-{i}", f"{cpath}.id")
            args = call.get("args")
            uses.append(
                ToolUseBlock(
                    call_id,
                    clean_text(call.get("name"), f"{cpath}.name"),
                    dict(args) if isinstance(args, Mapping) else {},
                )
            )
            found = _result(call)
            if found is not None:
                text, error = found
                call_ts = parse_timestamp(call["timestamp"], f"{cpath}.timestamp") if call.get("timestamp") else ts
                res = ToolResultBlock(call_id, (TextBlock(clean_text(text, f"{cpath}.result")),), error)
                results.append(
                    (
                        Turn(role="tool", content=(res,), timestamp=max(call_ts, ts), metadata=dict(self.extra)),
                        id_key(_SOURCE, call_id),
                        (),
                    )
                )
        body = [*thoughts, *blocks, *uses]
        if not body:
            self.skipped["empty message"] += 1
            return []
        model = msg.get("model") if isinstance(msg.get("model"), str) else None
        parts = (
            Part(key, len(thoughts) + len(blocks)),
            *(Part(f"{key}/{b.id}", 1) for b in uses if isinstance(b, ToolUseBlock)),
        )
        content = plain_or_blocks(blocks) if not thoughts and not uses else tuple(body)
        turn = Turn(role="assistant", content=content, timestamp=ts, model=model, metadata=meta)
        return [(turn, key, parts), *results]


def _is_snapshot(blocks: list[Block]) -> str | None:
    """The text of a compression's ``<state_snapshot>`` message (a summary, not the user speaking), else ``None``."""
    text = plain_or_blocks(blocks)
    return text if isinstance(text, str) and text.lstrip().startswith("<state_snapshot>") else None


def read_gemini_lines(
    records: list[tuple[int, dict[str, Any]]],
    default_session: str | None,
    where: str = "",
    *,
    settled: bool = True,
    path: Path | None = None,
) -> list[IngestSession]:
    """A Gemini CLI session log (JSON Lines) as the conversation and its rewound branches.

    Raises:
        DecodeError: A record is malformed; names the file, the line and the JSON path.
    """
    skipped: Counter[str] = Counter()
    meta: dict[str, Any] = {}
    latest: dict[str, tuple[int, Mapping[str, Any]]] = {}  # id -> (line of its last record, record)
    first_line: dict[str, int] = {}
    parent: dict[str, str | None] = {}
    active: list[str] = []
    notices: set[str] = set()
    for n, rec in records:
        if _is_meta(rec):
            meta.update(rec)
            continue
        if isinstance(rec.get("$set"), Mapping):
            update = dict(rec["$set"])
            for m in update.pop("messages", None) or []:
                if isinstance(m, Mapping) and m.get("id") is not None and str(m["id"]) not in latest:
                    _append(str(m["id"]), n, m, latest, first_line, parent, active)
            meta.update(update)
            skipped["$set"] += 1
            continue
        if "$rewindTo" in rec:
            target = str(rec["$rewindTo"])
            if target in active:
                del active[active.index(target) :]
            skipped["$rewindTo"] += 1
            continue
        if rec.get("id") is None or rec.get("type") not in _MESSAGE_TYPES or rec["type"] in _NOTICES:
            # Notices (info, warning, error) are the CLI talking, not the conversation: not on its path.
            if str(rec.get("id")) not in notices:
                skipped[str(rec.get("type", "untyped"))] += 1
                notices.add(str(rec.get("id")))
            continue
        ident = str(rec["id"])
        if ident in latest:
            latest[ident] = (n, rec)  # a message written again as it changed: the last version wins
        else:
            _append(ident, n, rec, latest, first_line, parent, active)
    sid = safe_session(meta.get("sessionId"), default_session)
    extra: dict[str, Any] = {}
    if meta.get("kind") == "subagent":
        owner = path.parent.name if path is not None else None
        parent_sid = safe_session(owner, None)
        if parent_sid and sid:
            extra = {"sidechain": True, "agent": sid, "parent_session": parent_sid}
            sid = f"{parent_sid}.agent-{sid}"
    start = _time(meta.get("startTime"))
    order = sorted(latest, key=first_line.__getitem__)
    conv, branches = split_tree(order, parent, active[-1] if active else None)
    # Without a rewind every message is on the conversation, so the leaf is simply the newest.
    held = _open(latest, active, settled)
    out: list[IngestSession] = []
    reader_skipped = skipped
    title = meta.get("summary")
    base = sid or "default"
    for nodes, name, more in [
        *(
            (
                b.nodes,
                branch_session(base, b.nodes[0]),
                {"branch_of": base, **({"forked_at": id_key(_SOURCE, b.fork)} if b.fork else {})},
            )
            for b in branches
        ),
        (conv, sid, {}),
    ]:
        msgs = _Messages(where, reader_skipped, {**extra, **more})
        turns: list[Turn] = []
        keys: list[str] = []
        parts: list[tuple[Part, ...]] = []
        lines: list[int | None] = []
        held_back = 0
        for ident in nodes:
            n, message = latest[ident]
            try:
                made = msgs.turns(message, "", start)
            except StratamemError as exc:
                raise record_error(exc, line=n, path="", where=where) from None
            if ident == held:
                held_back += len(made)
                continue
            for turn, key, part in made:
                turns.append(turn)
                keys.append(key)
                parts.append(part)
                lines.append(n)
        repair_orphans(turns)
        if not turns and not held_back and name != sid:
            continue
        out.append(
            IngestSession(
                name,
                turns,
                platform=_PLATFORM,
                labels={"title": title} if isinstance(title, str) else {},
                keys=tuple(keys),
                parts=tuple(parts) if any(parts) else (),
                held_back=held_back,
                family=sid,
                source=where or None,
                lines=tuple(lines),
            )
        )
    out[-1] = replace(out[-1], skipped=dict(skipped))
    return out


def _append(
    ident: str,
    n: int,
    rec: Mapping[str, Any],
    latest: dict[str, tuple[int, Mapping[str, Any]]],
    first_line: dict[str, int],
    parent: dict[str, str | None],
    active: list[str],
) -> None:
    latest[ident] = (n, rec)
    first_line[ident] = n
    parent[ident] = active[-1] if active else None
    active.append(ident)


def _open(latest: Mapping[str, tuple[int, Mapping[str, Any]]], active: list[str], settled: bool) -> str | None:
    """The reply that may still change: the last message, when it is the model's and the file is live."""
    if settled or not active:
        return None
    rec = latest[active[-1]][1]
    return active[-1] if rec.get("type") == "gemini" else None


def _time(raw: Any) -> datetime | None:
    try:
        return parse_timestamp(raw, "startTime") if raw is not None else None
    except StratamemError:
        return None


def read_gemini(
    data: Any, default_session: str | None, where: str = "", *, name: str = "", saved: datetime | None = None
) -> list[IngestSession]:
    """A Gemini CLI JSON document: a session, the prompt log, or a checkpoint (dated ``saved``: it holds no times).

    Raises:
        DecodeError: A message is malformed; names the file and the JSON path.
    """
    if isinstance(data, Mapping) and isinstance(data.get("messages"), list):
        records: list[tuple[int, dict[str, Any]]] = [(0, {k: v for k, v in data.items() if k != "messages"})]
        for i, m in enumerate(data["messages"]):
            if not isinstance(m, Mapping):
                raise fail("a message must be an object", path=f"messages[{i}]", where=where)
            records.append((i + 1, dict(m)))
        try:
            out = read_gemini_lines(records, default_session)
        except StratamemError as exc:
            line = getattr(exc, "line", None)
            at = f"messages[{line - 1}]" if line else ""
            raise fail(getattr(exc, "reason", str(exc)), path=at or None, where=where) from None
        return [_no_lines(s, where) for s in out]
    if isinstance(data, list) and data and all(isinstance(r, Mapping) and "messageId" in r for r in data[:20]):
        return read_prompt_log(data, default_session, where)
    history = data.get("history") if isinstance(data, Mapping) else data
    return [read_checkpoint(history, default_session, where, name, saved or datetime.now(UTC))]


def _no_lines(s: IngestSession, where: str) -> IngestSession:
    return replace(s, lines=(), source=where or None)
