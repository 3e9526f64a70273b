"""Claude Code session logs (``~/.claude/projects/<project>/<session-uuid>.jsonl``).

Each line is one record. ``user`` and ``assistant`` records carry a
``message`` in Anthropic Messages shape (content blocks: text, thinking,
tool_use, tool_result, image) plus ``uuid``/``parentUuid``, ``timestamp``,
``sessionId`` and flags (``isSidechain``, ``isMeta``). Everything else —
``summary`` titles, ``system`` notices, ``file-history-snapshot``, queue and
progress records, ``isMeta`` caveats — is not conversation and is skipped and
counted by kind. What is kept and how it maps is in ``docs/formats.md``.

Claude Code writes one line per content block of an assistant reply, all with
the same ``message.id``; adjacent lines of one reply become one assistant turn.
Sub-agent (sidechain) records go to their own session, ``<sessionId>.sidechain``
(``<sessionId>.agent-<agentId>`` when the agent is named), so their tool calls
pair up within it and they do not interleave with the main thread.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any, Literal

from ..errors import StratamemError
from ..providers import anthropic_block
from ..records import (
    Block,
    ImageBlock,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Turn,
    check_text,
    parse_timestamp,
)
from ._common import IngestSession, bad, fail, id_key, record_error, repair_orphans, safe_session

__all__ = ["RECORD_TYPES", "looks_like_claude_code", "read_claude_code"]

RECORD_TYPES = frozenset(
    {"user", "assistant", "summary", "system", "file-history-snapshot", "queue-operation", "progress", "result"}
)
"""Top-level ``type`` values of Claude Code records (only user/assistant hold messages)."""

# Blocks that are not conversation content: dropped from the turn and counted.
_DROPPED_BLOCKS = frozenset({"redacted_thinking", "document", "server_tool_use", "web_search_tool_result"})


def looks_like_claude_code(records: list[tuple[int, dict[str, Any]]]) -> bool:
    """Whether the records are a Claude Code log: typed records with its threading fields."""
    for _, rec in records[:50]:
        kind = rec.get("type")
        if (
            kind in ("user", "assistant")
            and isinstance(rec.get("message"), Mapping)
            and ("sessionId" in rec or "parentUuid" in rec or "uuid" in rec)
        ):
            return True
        if kind == "summary" and "leafUuid" in rec:
            return True
    return False


def _result_parts(raw: Any, path: str) -> tuple[TextBlock | ImageBlock, ...]:
    if raw is None:
        return ()
    if isinstance(raw, str):
        return (TextBlock(check_text(raw, path)),)
    if not isinstance(raw, list):
        raise bad("tool_result content must be a string or a list", path)
    parts: list[TextBlock | ImageBlock] = []
    for i, p in enumerate(raw):
        ppath = f"{path}[{i}]"
        if not isinstance(p, Mapping):
            raise bad("a tool_result part must be an object", ppath)
        if p.get("type") == "text":
            parts.append(TextBlock(check_text(p.get("text"), f"{ppath}.text")))
        elif p.get("type") == "image":
            parts.append(anthropic_block(p, ppath))  # type: ignore[arg-type]
        else:
            # Rare part kinds (tool references, documents): keep that they were there.
            parts.append(TextBlock(f"[{p.get('type')}]"))
    return tuple(parts)


def _blocks(raw: list[Any], path: str, dropped: Counter[str]) -> list[Block]:
    """A message's content blocks: the Messages API's own reader, plus what logs add.

    Logs carry block kinds a client never sends (dropped and counted) and tool
    results with part kinds the API reader refuses (kept as a marker).
    """
    out: list[Block] = []
    for i, d in enumerate(raw):
        bpath = f"{path}[{i}]"
        if not isinstance(d, Mapping):
            raise bad("a content block must be an object", bpath)
        kind = d.get("type")
        if kind in _DROPPED_BLOCKS:
            dropped[f"block:{kind}"] += 1
        elif kind == "tool_result":
            out.append(
                ToolResultBlock(
                    check_text(d.get("tool_use_id"), f"{bpath}.tool_use_id"),
                    _result_parts(d.get("content"), f"{bpath}.content"),
                    d.get("is_error") is True,
                )
            )
        else:
            out.append(anthropic_block(d, bpath))
    return out


class _Session:
    """Turns of one session being built, with their keys."""

    def __init__(self, name: str | None, sidechain: bool) -> None:
        self.name = name
        self.sidechain = sidechain
        self.turns: list[Turn] = []
        self.keys: list[str] = []
        self.last_message_id: str | None = None  # of the last turn, when it is an assistant reply


def read_claude_code(
    records: list[tuple[int, dict[str, Any]]], default_session: str | None, where: str = ""
) -> list[IngestSession]:
    """Claude Code records (``(line, object)`` pairs) as sessions of turns.

    Raises:
        DecodeError: A user/assistant record is malformed; the error names its
            line and the JSON path inside it.
    """
    sessions: dict[str | None, _Session] = {}
    skipped: Counter[str] = Counter()
    last_ts: datetime | None = None
    for n, rec in records:
        kind = rec.get("type")
        if kind not in ("user", "assistant"):
            skipped[str(kind) if isinstance(kind, str) else "untyped"] += 1
            continue
        if rec.get("isMeta") is True:
            skipped["meta"] += 1
            continue
        msg = rec.get("message")
        if not isinstance(msg, Mapping):
            raise fail(f"a {kind} record needs a 'message' object", line=n, path="message", where=where)
        sid = safe_session(rec.get("sessionId"), default_session)
        sidechain = rec.get("isSidechain") is True
        if sidechain:
            agent = rec.get("agentId")
            sid = (
                f"{sid or 'default'}.agent-{agent}"
                if isinstance(agent, str) and agent.isalnum()
                else f"{sid or 'default'}.sidechain"
            )
        sess = sessions.setdefault(sid, _Session(sid, sidechain))
        try:
            ts = parse_timestamp(rec["timestamp"], "timestamp") if rec.get("timestamp") is not None else last_ts
        except StratamemError as exc:
            raise record_error(exc, line=n, path="", where=where) from None
        if ts is None:
            raise fail("the first message record has no timestamp", line=n, path="timestamp", where=where)
        last_ts = ts
        try:
            turn, message_id = _turn(kind, msg, rec, ts, skipped)
        except StratamemError as exc:
            raise record_error(exc, line=n, path="message", where=where) from None
        if turn is None:
            continue
        if (
            message_id is not None
            and message_id == sess.last_message_id
            and sess.turns
            and sess.turns[-1].role == "assistant"
        ):
            # Another block of the same reply: one turn, as the API returned it.
            prev = sess.turns[-1]
            sess.turns[-1] = replace(prev, content=prev.blocks + turn.blocks)
            continue
        sess.turns.append(turn)
        sess.keys.append(id_key("claude-code", message_id or str(rec.get("uuid") or f"line-{n}")))
        sess.last_message_id = message_id
    out: list[IngestSession] = []
    # Sidechains first: the main thread is stored last, so it is the namespace's
    # most recent session, the one a context continues by default.
    ordered = sorted(sessions.values(), key=lambda s: not s.sidechain)
    for i, sess in enumerate(ordered):
        repair_orphans(sess.turns)
        # The file's skip counts ride on its first session, so they are reported once.
        out.append(
            IngestSession(
                sess.name,
                sess.turns,
                platform="claude-code",
                keys=tuple(sess.keys),
                skipped=dict(skipped) if i == 0 else {},
            )
        )
    if not out and skipped:
        out.append(IngestSession(default_session, [], platform="claude-code", skipped=dict(skipped)))
    return out


def _turn(
    kind: Literal["user", "assistant"],
    msg: Mapping[str, Any],
    rec: Mapping[str, Any],
    ts: datetime,
    skipped: Counter[str],
) -> tuple[Turn | None, str | None]:
    raw = msg.get("content")
    meta: dict[str, Any] = {"uuid": rec.get("uuid")}
    if rec.get("parentUuid"):
        meta["parent_uuid"] = rec["parentUuid"]
    if rec.get("isSidechain") is True:
        meta["sidechain"] = True
    if rec.get("isCompactSummary") is True:
        meta["compact_summary"] = True
    message_id = msg.get("id") if kind == "assistant" and isinstance(msg.get("id"), str) else None
    if message_id:
        meta["message_id"] = message_id
    if isinstance(raw, str):
        content: str | tuple[Block, ...] = check_text(raw, "content")
        role: Role = kind
    elif isinstance(raw, list):
        blocks = _blocks(raw, "content", skipped)
        if not blocks:
            skipped["empty message"] += 1
            return None, None
        content = tuple(blocks)
        role = "tool" if kind == "user" and any(isinstance(b, ToolResultBlock) for b in blocks) else kind
        if kind == "user" and any(isinstance(b, ToolUseBlock | ThinkingBlock) for b in blocks):
            raise bad("tool_use and thinking blocks belong in an assistant message", "content")
    else:
        raise bad("content must be a string or a list of blocks", "content")
    model = msg.get("model") if kind == "assistant" and isinstance(msg.get("model"), str) else None
    return Turn(
        role=role,
        content=content,
        timestamp=ts,
        model=model,
        metadata={k: v for k, v in meta.items() if v is not None},
    ), message_id
