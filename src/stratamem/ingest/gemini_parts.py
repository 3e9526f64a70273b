"""Gemini CLI content parts (``PartListUnion``) as blocks: shared by the session and checkpoint readers."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from typing import Any

from ..records import Block, ImageBlock, TextBlock
from ._common import bad, clean_text

__all__ = ["as_text", "content_blocks", "is_content", "part_list", "plain_or_blocks"]


def is_content(item: Any) -> bool:
    """Whether ``item`` is a Content entry of a checkpoint: ``{"role": "user" | "model", "parts": [...]}``."""
    return isinstance(item, Mapping) and item.get("role") in ("user", "model") and isinstance(item.get("parts"), list)


def part_list(raw: Any) -> list[Any]:
    """A PartListUnion (a string, a part, a list of either) as a list of parts."""
    if raw is None:
        return []
    return list(raw) if isinstance(raw, list) else [raw]


def content_blocks(raw: Any, path: str, skipped: Counter[str]) -> list[Block]:
    """Content parts as text and image blocks (thoughts and calls are read from their own fields)."""
    out: list[Block] = []
    for i, p in enumerate(part_list(raw)):
        ppath = f"{path}[{i}]" if isinstance(raw, list) else path
        if isinstance(p, str):
            if p.strip():
                out.append(TextBlock(clean_text(p, ppath)))
        elif not isinstance(p, Mapping):
            raise bad("a content part must be a string or an object", ppath)
        elif isinstance(p.get("text"), str):
            if p.get("thought") is True:
                skipped["part:thought"] += 1
            elif p["text"].strip():
                out.append(TextBlock(clean_text(p["text"], f"{ppath}.text")))
        elif isinstance(p.get("inlineData"), Mapping):
            data = p["inlineData"]
            mime = data.get("mimeType")
            if isinstance(mime, str) and mime.startswith("image/") and isinstance(data.get("data"), str):
                out.append(ImageBlock(media_type=mime, data=clean_text(data["data"], f"{ppath}.inlineData.data")))
            else:
                out.append(TextBlock(f"[{mime or 'inline data'}]"))
        elif isinstance(p.get("fileData"), Mapping):
            uri = p["fileData"].get("fileUri")
            out.append(TextBlock(f"[file {uri}]" if isinstance(uri, str) else "[file]"))
        else:
            skipped[f"part:{next(iter(p), 'empty')}"] += 1
    return out


def as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def plain_or_blocks(blocks: list[Block]) -> str | tuple[Block, ...]:
    """One text block as plain text, else the blocks."""
    only = blocks[0] if len(blocks) == 1 else None
    return only.text if isinstance(only, TextBlock) else tuple(blocks)
