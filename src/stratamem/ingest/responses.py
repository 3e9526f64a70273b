"""OpenAI Responses API input/output items, as turns.

Items are ``message`` (roles user, assistant, system, developer; content a
string or parts ``input_text``/``output_text``/``text``/``refusal``/
``input_image``), ``function_call`` (``call_id``, ``name``, JSON
``arguments``), ``function_call_output`` (``call_id``, ``output``), and their
``custom_tool_call``/``local_shell_call`` cousins. A message without ``type``
(the short form ``{"role", "content"}``) is a message. ``reasoning`` and
hosted-tool records (web search, file search, ...) are skipped and counted.

:class:`ItemReader` converts one item at a time, so the Codex reader
(:mod:`stratamem.ingest.codex`), whose ``response_item`` records are these
items, shares it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from ..errors import StratamemError
from ..records import Block, ImageBlock, TextBlock, ToolResultBlock, ToolUseBlock, Turn, check_text
from ._common import IngestSession, bad, content_key, id_key, record_error, repair_orphans

__all__ = ["ITEM_TYPES", "ItemReader", "looks_like_responses", "read_responses"]

ITEM_TYPES = frozenset(
    {
        "message",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "local_shell_call",
        "local_shell_call_output",
        "reasoning",
    }
)
"""Item types this reader knows (others are skipped and counted)."""

_TEXT_PARTS = ("input_text", "output_text", "text", "summary_text")


def looks_like_responses(items: list[Any]) -> bool:
    """Whether a list holds Responses items (typed items; at least one is not a plain chat message)."""
    typed = [i for i in items[:50] if isinstance(i, Mapping) and i.get("type") in ITEM_TYPES]
    if not typed:
        return False
    return any(
        i.get("type") != "message"
        or isinstance(i.get("content"), list)
        and any(isinstance(p, Mapping) and p.get("type") in ("input_text", "output_text") for p in i["content"])
        for i in typed
    )


def _text_of(raw: Any, path: str, *, allow_images: bool) -> str | tuple[Block, ...]:
    if isinstance(raw, str):
        return check_text(raw, path)
    if not isinstance(raw, list):
        raise bad("content must be a string or a list of parts", path)
    out: list[Block] = []
    for i, p in enumerate(raw):
        ppath = f"{path}[{i}]"
        if not isinstance(p, Mapping):
            raise bad("a content part must be an object", ppath)
        kind = p.get("type")
        if kind in _TEXT_PARTS:
            out.append(TextBlock(check_text(p.get("text"), f"{ppath}.text")))
        elif kind == "refusal":
            out.append(TextBlock(check_text(p.get("refusal"), f"{ppath}.refusal")))
        elif kind == "input_image" and allow_images and isinstance(p.get("image_url"), str):
            out.append(ImageBlock(url=check_text(p["image_url"], f"{ppath}.image_url")))
        elif kind in ("input_image", "input_file", "input_audio"):
            out.append(TextBlock(f"[{kind.removeprefix('input_')}]"))
        else:
            raise bad(f"unsupported content part type {kind!r}", ppath)
    return tuple(out)


def _output_text(raw: Any, path: str) -> str:
    """A tool output: a string, a list of parts, or (Codex, older) ``{"content": ...}``."""
    if isinstance(raw, Mapping) and "content" in raw:
        raw = raw["content"]
    if raw is None:
        return ""
    if isinstance(raw, str) and raw.startswith("{"):
        # Codex wraps shell results as JSON text: {"output": "...", "metadata": {...}}.
        try:
            inner = json.loads(raw)
        except json.JSONDecodeError:
            inner = None
        if isinstance(inner, Mapping) and isinstance(inner.get("output"), str):
            return check_text(inner["output"], path)
    parts = _text_of(raw, path, allow_images=False)
    return parts if isinstance(parts, str) else "\n".join(b.text for b in parts if isinstance(b, TextBlock))


def _arguments(raw: Any, path: str) -> dict[str, Any]:
    if isinstance(raw, Mapping):
        return dict(raw)
    if not isinstance(raw, str):
        raise bad("arguments must be a JSON string", path)
    try:
        parsed = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError:
        # Models do emit broken argument JSON; it is still what was called.
        return {"arguments": raw}
    return dict(parsed) if isinstance(parsed, Mapping) else {"arguments": parsed}


class ItemReader:
    """Converts items one by one into turns, joining a reply's text and calls into one assistant turn.

    Args:
        skipped: Where skipped items are counted by kind.
    """

    def __init__(self, skipped: Counter[str]) -> None:
        self.turns: list[Turn] = []
        self.sources: list[int] = []  # index of the item each turn started from
        self.skipped = skipped
        self._open_reply = False  # the last turn is an assistant turn that may take more calls

    def add(
        self, item: Any, index: int, timestamp: datetime, *, model: str | None = None, path: str = ""
    ) -> Turn | None:
        """Convert ``item`` (the ``index``-th of its session); returns the new turn, or ``None``.

        ``None`` means the item was skipped or joined the previous assistant turn.

        Raises:
            InvalidTurnError: The item is malformed (the path is relative to it).
        """
        if not isinstance(item, Mapping):
            raise bad("an item must be an object", path or "item")
        kind = item.get("type", "message" if "role" in item else None)
        if kind == "message":
            return self._message(item, index, timestamp, model)
        if kind in ("function_call", "custom_tool_call", "local_shell_call"):
            call_id = item.get("call_id") or item.get("id")
            if kind == "function_call":
                args = _arguments(item.get("arguments", "{}"), "arguments")
                name = item.get("name")
            elif kind == "custom_tool_call":
                args = {"input": item.get("input")}
                name = item.get("name")
            else:
                action = item.get("action")
                args = dict(action) if isinstance(action, Mapping) else {}
                name = "local_shell"
            block = ToolUseBlock(check_text(call_id, "call_id"), check_text(name, "name"), args)
            if self._open_reply:
                prev = self.turns[-1]
                self.turns[-1] = replace(prev, content=prev.blocks + (block,))
                return None
            return self._push(
                Turn(role="assistant", content=(block,), timestamp=timestamp, model=model), index, open_reply=True
            )
        if kind in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
            text = _output_text(item.get("output"), "output")
            result = ToolResultBlock(check_text(item.get("call_id"), "call_id"), (TextBlock(text),))
            return self._push(Turn(role="tool", content=(result,), timestamp=timestamp), index)
        self.skipped[str(kind) if isinstance(kind, str) else "untyped item"] += 1
        return None

    def _message(self, item: Mapping[str, Any], index: int, timestamp: datetime, model: str | None) -> Turn | None:
        role = item.get("role")
        if role == "developer":
            role = "system"
        if role not in ("user", "assistant", "system"):
            raise bad(f"unknown role {role!r} (expected user, assistant, system or developer)", "role")
        content = _text_of(item.get("content"), "content", allow_images=role == "user")
        meta = {"message_id": item["id"]} if isinstance(item.get("id"), str) else {}
        turn = Turn(
            role=role, content=content, timestamp=timestamp, model=model if role == "assistant" else None, metadata=meta
        )
        return self._push(turn, index, open_reply=role == "assistant")

    def _push(self, turn: Turn, index: int, *, open_reply: bool = False) -> Turn:
        self.turns.append(turn)
        self.sources.append(index)
        self._open_reply = open_reply
        return turn


def read_responses(
    items: list[tuple[int | None, Any]], default_session: str | None, timestamp: datetime, where: str = ""
) -> IngestSession:
    """A list of items (each with its file line, or ``None`` in a JSON file) as one session.

    Items carry no times: every turn gets ``timestamp``. An item's ``id`` is its
    dedupe key when present, else its position and content.

    Raises:
        DecodeError: An item is malformed; names its line (JSON Lines) or index and path.
    """
    skipped: Counter[str] = Counter()
    reader = ItemReader(skipped)
    for i, (line, item) in enumerate(items):
        path = "" if line is not None else f"[{i}]"
        try:
            reader.add(item, i, timestamp, path=path)
        except StratamemError as exc:
            raise record_error(exc, line=line, path=path, where=where) from None
    turns = reader.turns
    repair_orphans(turns)
    keys = []
    for src in reader.sources:
        item = items[src][1]
        ident = item.get("id") if isinstance(item, Mapping) else None
        keys.append(id_key("responses", ident) if isinstance(ident, str) else content_key(src, item))
    return IngestSession(default_session, turns, platform="openai-responses", keys=tuple(keys), skipped=dict(skipped))
