"""Gemini CLI files saved apart from the session log: the prompt log and ``/chat save`` checkpoints.

``logs.json`` holds the user's prompts only: given alone (an old install
without session logs) they become user turns of ``<session>.prompts``, marked
``metadata.prompt_log``; :mod:`.tree` leaves it out when the session logs are
there. A checkpoint ``checkpoint-<tag>.json`` holds the model's history as
Content entries (``{role: user|model, parts}``) without times: the session
``gemini-checkpoint-<tag>``, dated by the file's time, keyed by position and content.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from ..errors import StratamemError
from ..records import Block, Role, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock, Turn, parse_timestamp
from ._common import IngestSession, clean_text, content_key, fail, id_key, record_error, repair_orphans, safe_session
from .gemini_parts import as_text, content_blocks, is_content, plain_or_blocks

__all__ = ["read_checkpoint", "read_prompt_log"]

_PLATFORM = "gemini-cli"


def read_prompt_log(data: list[Any], default_session: str | None, where: str) -> list[IngestSession]:
    """``logs.json``: the prompts alone, as user turns of ``<session>.prompts`` (the session log holds the rest)."""
    by_session: dict[str, list[tuple[Turn, str]]] = {}
    skipped: Counter[str] = Counter()
    for i, r in enumerate(data):
        if not isinstance(r, Mapping) or r.get("type") != "user" or not isinstance(r.get("message"), str):
            skipped["log record"] += 1
            continue
        sid = safe_session(r.get("sessionId"), default_session) or "default"
        try:
            ts = parse_timestamp(r.get("timestamp"), f"[{i}].timestamp")
            text = clean_text(r["message"], f"[{i}].message")
        except StratamemError as exc:
            raise record_error(exc, line=None, path="", where=where) from None
        if text.strip():
            key = id_key("gemini-log", f"{sid}/{r.get('messageId')}")
            by_session.setdefault(f"{sid}.prompts", []).append(
                (Turn(role="user", content=text, timestamp=ts, metadata={"prompt_log": True}), key)
            )
    out = [
        IngestSession(
            name, [t for t, _ in rows], platform=_PLATFORM, keys=tuple(k for _, k in rows), source=where or None
        )
        for name, rows in by_session.items()
    ] or [IngestSession(default_session, [], platform=_PLATFORM, source=where or None)]
    out[0] = replace(out[0], skipped=dict(skipped))
    return out


def read_checkpoint(history: Any, default_session: str | None, where: str, name: str, ts: datetime) -> IngestSession:
    """A ``/chat save`` checkpoint: Content entries (user/model parts) without times, dated ``ts`` (its save)."""
    tag = name.removeprefix("checkpoint-").removesuffix(".json") or "checkpoint"
    session = safe_session(f"gemini-checkpoint-{tag}", None) or default_session
    skipped: Counter[str] = Counter()
    turns: list[Turn] = []
    keys: list[str] = []
    pending: dict[str, str] = {}  # tool name -> call id not answered yet
    for i, c in enumerate(history if isinstance(history, list) else []):
        path = f"history[{i}]"
        if not is_content(c):
            raise fail("expected {role: user|model, parts: [...]}", path=path, where=where)
        try:
            turn = _content_turn(c, path, ts, skipped, pending, i)
        except StratamemError as exc:
            raise record_error(exc, line=None, path="", where=where) from None
        if turn is not None:
            turns.append(turn)
            keys.append(content_key(i, c))
    repair_orphans(turns)
    return IngestSession(
        session, turns, platform=_PLATFORM, keys=tuple(keys), skipped=dict(skipped), source=where or None
    )


def _content_turn(
    c: Mapping[str, Any], path: str, ts: datetime, skipped: Counter[str], pending: dict[str, str], index: int
) -> Turn | None:
    blocks: list[Block] = []
    for j, p in enumerate(c["parts"]):
        ppath = f"{path}.parts[{j}]"
        if isinstance(p, Mapping) and isinstance(p.get("functionCall"), Mapping):
            call = p["functionCall"]
            name = clean_text(call.get("name"), f"{ppath}.functionCall.name")
            call_id = str(call.get("id") or f"{name}-{index}-{j}")
            pending[name] = call_id
            args = call.get("args")
            blocks.append(ToolUseBlock(call_id, name, dict(args) if isinstance(args, Mapping) else {}))
        elif isinstance(p, Mapping) and isinstance(p.get("functionResponse"), Mapping):
            resp = p["functionResponse"]
            name = str(resp.get("name"))
            call_id = str(resp.get("id") or pending.pop(name, f"{name}-{index}-{j}"))
            body = resp.get("response")
            error = isinstance(body, Mapping) and "error" in body
            text = (
                as_text(body.get("error") if error else body.get("output", body))
                if isinstance(body, Mapping)
                else as_text(body)
            )
            blocks.append(ToolResultBlock(call_id, (TextBlock(clean_text(text, ppath)),), bool(error)))
        elif isinstance(p, Mapping) and p.get("thought") is True and isinstance(p.get("text"), str):
            if c["role"] == "model":
                blocks.append(ThinkingBlock(clean_text(p["text"], f"{ppath}.text")))
        else:
            blocks.extend(content_blocks(p, ppath, skipped))
    if not blocks:
        skipped["empty message"] += 1
        return None
    if any(isinstance(b, ToolResultBlock) for b in blocks):
        return Turn(
            role="tool", content=tuple(b for b in blocks if isinstance(b, ToolResultBlock | TextBlock)), timestamp=ts
        )
    role: Role = "assistant" if c["role"] == "model" else "user"
    return Turn(role=role, content=plain_or_blocks(blocks), timestamp=ts)
