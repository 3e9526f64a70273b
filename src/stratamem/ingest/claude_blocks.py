"""Content blocks of Claude Code log records, read liberally.

A log holds what the Messages API returned and what Claude Code added, in every
version since 1.0: text, ``thinking`` (with its signature), ``tool_use``
(whose ``input`` a sanitised log may hold as a string), ``tool_result`` (text
and image parts, and rarer kinds), ``image`` (base64 or url). Kinds that hold no
readable conversation (``redacted_thinking``: an encrypted blob; ``document``;
server tool records) are dropped and counted as ``block:<type>``; a kind this
reader has never seen is kept as text when it has a ``text`` string, else
dropped and counted — one unknown block never refuses a file.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from typing import Any

from ..errors import StratamemError
from ..providers import anthropic_block
from ..records import Block, ImageBlock, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from ._common import bad, clean_text

__all__ = ["message_blocks", "tool_input"]

# Blocks that are not readable conversation: dropped from the turn and counted.
_DROPPED = frozenset({"redacted_thinking", "document", "server_tool_use", "web_search_tool_result"})


def tool_input(raw: Any) -> dict[str, Any]:
    """A ``tool_use`` input as an object: as is, parsed from a JSON string, or wrapped (``{"input": ...}``)."""
    if isinstance(raw, Mapping):
        return _plain(dict(raw))
    if isinstance(raw, str):
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            return _plain(parsed)
    return {} if raw is None else {"input": _plain(raw)}


def _plain(value: Any) -> Any:
    """JSON values with storable strings (NUL and lone surrogates replaced), recursively."""
    if isinstance(value, str):
        return clean_text(value, "")
    if isinstance(value, Mapping):
        return {clean_text(str(k), ""): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, float) and value != value:  # NaN cannot be stored as JSON
        return None
    return value


def _image(d: Mapping[str, Any], path: str, dropped: Counter[str]) -> ImageBlock | None:
    try:
        block = anthropic_block(d, path)
    except StratamemError:
        # A source kind this version does not hold (e.g. a file reference): say it was there.
        dropped["block:image (unreadable source)"] += 1
        return None
    return block if isinstance(block, ImageBlock) else None


def _result_parts(raw: Any, path: str, dropped: Counter[str]) -> tuple[TextBlock | ImageBlock, ...]:
    if raw is None:
        return ()
    if isinstance(raw, str):
        return (TextBlock(clean_text(raw, path)),) if raw else ()
    if not isinstance(raw, list):
        raise bad("tool_result content must be a string or a list", path)
    parts: list[TextBlock | ImageBlock] = []
    for i, p in enumerate(raw):
        ppath = f"{path}[{i}]"
        if isinstance(p, str):
            parts.append(TextBlock(clean_text(p, ppath)))
            continue
        if not isinstance(p, Mapping):
            raise bad("a tool_result part must be an object", ppath)
        kind = p.get("type")
        if kind == "image":
            img = _image(p, ppath, dropped)
            if img is not None:
                parts.append(img)
        elif isinstance(p.get("text"), str):
            parts.append(TextBlock(clean_text(p["text"], f"{ppath}.text")))
        else:
            # Rare part kinds (tool references, documents): keep that they were there.
            parts.append(TextBlock(f"[{kind}]"))
    return tuple(parts)


def message_blocks(raw: Any, path: str, dropped: Counter[str], *, assistant: bool) -> list[Block]:
    """A record's ``message.content`` as blocks (a string is one text block; empty text is left out).

    Raises:
        InvalidTurnError: The content is neither a string nor a list, or a
            block is not an object (the path is relative to the message).
    """
    if isinstance(raw, str):
        return [TextBlock(clean_text(raw, path))] if raw.strip() else []
    if not isinstance(raw, list):
        raise bad("content must be a string or a list of blocks", path)
    out: list[Block] = []
    for i, d in enumerate(raw):
        bpath = f"{path}[{i}]"
        if not isinstance(d, Mapping):
            raise bad("a content block must be an object", bpath)
        kind = d.get("type")
        if kind == "text":
            text = clean_text(d.get("text", ""), f"{bpath}.text")
            if text.strip():
                out.append(TextBlock(text))
        elif kind == "thinking" and assistant:
            thinking = clean_text(d.get("thinking", ""), f"{bpath}.thinking")
            sig = d.get("signature")
            out.append(ThinkingBlock(thinking, sig if isinstance(sig, str) and sig else None))
        elif kind == "tool_use" and assistant:
            out.append(
                ToolUseBlock(
                    clean_text(d.get("id"), f"{bpath}.id"),
                    clean_text(d.get("name"), f"{bpath}.name"),
                    tool_input(d.get("input")),
                )
            )
        elif kind == "tool_result" and not assistant:
            is_error = d.get("is_error") is True
            parts = _result_parts(d.get("content"), f"{bpath}.content", dropped)
            out.append(ToolResultBlock(clean_text(d.get("tool_use_id"), f"{bpath}.tool_use_id"), parts, is_error))
        elif kind == "image":
            img = _image(d, bpath, dropped)
            if img is not None:
                out.append(img)
        elif kind in _DROPPED:
            dropped[f"block:{kind}"] += 1
        elif isinstance(d.get("text"), str) and kind not in ("thinking", "tool_use", "tool_result"):
            out.append(TextBlock(clean_text(d["text"], f"{bpath}.text")))
        else:
            dropped[f"block:{kind}"] += 1
    return out
