"""OpenAI Responses API input/output items, as turns.

Items are ``message`` (roles user, assistant, system, developer; content a
string or parts ``input_text``/``output_text``/``text``/``refusal``/
``input_image``), ``function_call`` (``call_id``, ``name``, JSON
``arguments``), ``function_call_output`` (``call_id``, ``output``: a string or
a list of text and image parts), and their ``custom_tool_call``/
``local_shell_call`` cousins. A message without ``type`` (the short form
``{"role", "content"}``) is a message. A ``reasoning`` item's summary is kept
as thinking at the head of the assistant turn that follows it (its encrypted
content is not). Hosted-tool records (web search, file search, ...) and item
or part kinds this reader does not know are skipped and counted.

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
from ..records import Block, ImageBlock, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock, Turn
from ._common import IngestSession, Part, bad, clean_text, content_key, id_key, record_error, repair_orphans

__all__ = ["CALL_TYPES", "ITEM_TYPES", "ItemReader", "image_of", "looks_like_responses", "read_responses"]

CALL_TYPES = frozenset({"function_call", "custom_tool_call", "local_shell_call"})
"""Items that are a tool call (they join the assistant turn before them)."""

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
_OUTPUT_TYPES = ("function_call_output", "custom_tool_call_output", "local_shell_call_output")


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


def image_of(url: str, path: str) -> ImageBlock:
    """An image part's URL as an image block: a ``data:`` URL inline, any other by reference."""
    url = clean_text(url, path)
    head, sep, data = url.partition(",")
    if url.startswith("data:") and sep and head.endswith(";base64"):
        return ImageBlock(media_type=head[5:-7] or None, data=data)
    return ImageBlock(url=url)


def _parts(raw: Any, path: str, skipped: Counter[str], *, images: bool) -> list[Block]:
    """Content parts as text and (when ``images``) image blocks; unknown part kinds are counted and left out."""
    if isinstance(raw, str):
        return [TextBlock(clean_text(raw, path))]
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise bad("content must be a string or a list of parts", path)
    out: list[Block] = []
    for i, p in enumerate(raw):
        ppath = f"{path}[{i}]"
        if not isinstance(p, Mapping):
            raise bad("a content part must be an object", ppath)
        kind = p.get("type")
        if kind in _TEXT_PARTS:
            out.append(TextBlock(clean_text(p.get("text"), f"{ppath}.text")))
        elif kind == "refusal":
            out.append(TextBlock(clean_text(p.get("refusal"), f"{ppath}.refusal")))
        elif kind == "input_image" and images and isinstance(p.get("image_url"), str):
            out.append(image_of(p["image_url"], f"{ppath}.image_url"))
        elif kind in ("input_image", "input_file", "input_audio"):
            out.append(TextBlock(f"[{kind.removeprefix('input_')}]"))
        else:
            skipped[f"part:{kind}"] += 1
    return out


def _content(blocks: list[Block]) -> str | tuple[Block, ...]:
    if all(isinstance(b, TextBlock) for b in blocks):
        return "\n".join(b.text for b in blocks if isinstance(b, TextBlock))
    return tuple(blocks)


def _output(raw: Any, path: str, skipped: Counter[str]) -> tuple[TextBlock | ImageBlock, ...]:
    """A tool output: a string, a list of text/image parts, or (Codex, older) ``{"content": ...}``."""
    if isinstance(raw, Mapping) and "content" in raw:
        raw = raw["content"]
    if raw is None:
        return ()
    if isinstance(raw, str) and raw.startswith("{"):
        # Codex wraps shell results as JSON text: {"output": "...", "metadata": {...}}.
        try:
            inner = json.loads(raw)
        except ValueError:
            inner = None
        if isinstance(inner, Mapping) and isinstance(inner.get("output"), str):
            raw = inner["output"]
    parts = _parts(raw, path, skipped, images=True)
    return tuple(b for b in parts if isinstance(b, TextBlock | ImageBlock))


def _arguments(raw: Any, path: str) -> dict[str, Any]:
    if isinstance(raw, Mapping):
        return dict(raw)
    if not isinstance(raw, str):
        raise bad("arguments must be a JSON string", path)
    try:
        parsed = json.loads(raw) if raw.strip() else {}
    except ValueError:
        # Models do emit broken argument JSON; it is still what was called.
        return {"arguments": raw}
    return dict(parsed) if isinstance(parsed, Mapping) else {"arguments": parsed}


def _thinking(item: Mapping[str, Any]) -> list[ThinkingBlock]:
    summary = item.get("summary")
    texts = [
        p["text"]
        for p in (summary if isinstance(summary, list) else [])
        if isinstance(p, Mapping) and isinstance(p.get("text"), str) and p["text"].strip()
    ]
    return [ThinkingBlock(clean_text("\n\n".join(texts), "summary"))] if texts else []


class ItemReader:
    """Converts items one by one into turns, joining a reply's thinking, text and calls into one assistant turn.

    Args:
        skipped: Where skipped items are counted by kind.
    """

    def __init__(self, skipped: Counter[str]) -> None:
        self.turns: list[Turn] = []
        self.sources: list[int] = []  # index of the item each turn is keyed by
        self.members: list[list[tuple[int, int]]] = []  # (item index, blocks it gave) of each turn
        self.skipped = skipped
        self._open_reply = False  # the last turn is an assistant turn that may take more calls
        self._thinking: list[tuple[int, ThinkingBlock]] = []  # reasoning waiting for its assistant turn

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
        if kind == "reasoning":
            found = _thinking(item)
            if not found:
                self.skipped["reasoning"] += 1
            self._thinking.extend((index, b) for b in found)
            return None
        if kind == "message":
            return self._message(item, index, timestamp, model)
        if kind in CALL_TYPES:
            return self._call(kind, item, index, timestamp, model)
        if kind in _OUTPUT_TYPES:
            self._drop_thinking()
            parts = _output(item.get("output"), "output", self.skipped)
            result = ToolResultBlock(clean_text(item.get("call_id"), "call_id"), parts)
            return self._push(Turn(role="tool", content=(result,), timestamp=timestamp), index, [(index, 1)])
        self.skipped[str(kind) if isinstance(kind, str) else "untyped item"] += 1
        return None

    def _call(self, kind: str, item: Mapping[str, Any], index: int, ts: datetime, model: str | None) -> Turn | None:
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
        block = ToolUseBlock(clean_text(call_id, "call_id"), clean_text(name, "name"), args)
        if self._open_reply and not self._thinking:
            prev = self.turns[-1]
            self.turns[-1] = replace(prev, content=prev.blocks + (block,))
            self.members[-1].append((index, 1))
            return None
        think, members = self._take_thinking()
        turn = Turn(role="assistant", content=(*think, block), timestamp=ts, model=model)
        return self._push(turn, index, [*members, (index, 1)], open_reply=True)

    def _message(self, item: Mapping[str, Any], index: int, timestamp: datetime, model: str | None) -> Turn | None:
        role = item.get("role")
        if role == "developer":
            role = "system"
        if role not in ("user", "assistant", "system"):
            raise bad(f"unknown role {role!r} (expected user, assistant, system or developer)", "role")
        blocks = _parts(item.get("content"), "content", self.skipped, images=role == "user")
        meta = {"message_id": item["id"]} if isinstance(item.get("id"), str) else {}
        if role != "assistant":
            self._drop_thinking()
            if not blocks:
                self.skipped["empty message"] += 1
                return None
            turn = Turn(role=role, content=_content(blocks), timestamp=timestamp, metadata=meta)
            return self._push(turn, index, [(index, len(blocks))])
        think, members = self._take_thinking()
        if not blocks and not think:
            self.skipped["empty message"] += 1
            return None
        content = (*think, *blocks) if think else _content(blocks)
        turn = Turn(role="assistant", content=content, timestamp=timestamp, model=model, metadata=meta)
        return self._push(turn, index, [*members, (index, len(blocks))], open_reply=True)

    def _take_thinking(self) -> tuple[list[ThinkingBlock], list[tuple[int, int]]]:
        think = [b for _, b in self._thinking]
        members = [(i, 1) for i, _ in self._thinking]
        self._thinking = []
        return think, members

    def _drop_thinking(self) -> None:
        # Reasoning with no assistant output after it (an aborted turn): nothing to attach it to.
        if self._thinking:
            self.skipped["reasoning"] += len(self._thinking)
            self._thinking = []

    def _push(self, turn: Turn, index: int, members: list[tuple[int, int]], *, open_reply: bool = False) -> Turn:
        self.turns.append(turn)
        self.sources.append(index)
        self.members.append(members)
        self._open_reply = open_reply
        return turn

    def add_turn(self, turn: Turn, index: int) -> None:
        """Add a turn made by the caller from item ``index`` (e.g. a compaction summary); it ends any reply."""
        self._drop_thinking()
        self._push(turn, index, [(index, len(turn.blocks))])

    def finish(self) -> None:
        """End of input: reasoning still waiting for a turn is counted as skipped."""
        self._drop_thinking()

    def parts(self, key_of: Any) -> tuple[tuple[Part, ...], ...]:
        """Each assistant turn's items as parts (``key_of(index)`` gives an item's key); others have none."""
        out: list[tuple[Part, ...]] = []
        for turn, members in zip(self.turns, self.members, strict=True):
            out.append(tuple(Part(key_of(i), n) for i, n in members) if turn.role == "assistant" else ())
        return tuple(out)


def read_responses(
    items: list[tuple[int | None, Any]], default_session: str | None, timestamp: datetime, where: str = ""
) -> IngestSession:
    """A list of items (each with its file line, or ``None`` in a JSON file) as one session.

    Items carry no times: every turn gets ``timestamp``. An item's ``id`` is its
    dedupe key when present, else its position and content.

    Raises:
        DecodeError: An item is malformed; names the file, its line (JSON Lines) or index, and path.
    """
    skipped: Counter[str] = Counter()
    reader = ItemReader(skipped)
    for i, (line, item) in enumerate(items):
        path = "" if line is not None else f"[{i}]"
        try:
            reader.add(item, i, timestamp, path=path)
        except StratamemError as exc:
            raise record_error(exc, line=line, path=path, where=where) from None
    reader.finish()
    turns = reader.turns
    repair_orphans(turns)

    def key_of(src: int) -> str:
        item = items[src][1]
        ident = item.get("id") if isinstance(item, Mapping) else None
        return id_key("responses", ident) if isinstance(ident, str) else content_key(src, item)

    return IngestSession(
        default_session,
        turns,
        platform="openai-responses",
        keys=tuple(key_of(src) for src in reader.sources),
        skipped=dict(skipped),
        parts=reader.parts(key_of),
        source=where or None,
        lines=tuple(items[src][0] for src in reader.sources),
    )
