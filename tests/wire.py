"""Helpers for tests that read provider requests: what a provider compares, and which results a request carries."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["marked", "plain", "result_ids"]


def plain(value: Any) -> Any:
    """A request part without ``cache_control``, a string content as one text block (as providers read it)."""
    if isinstance(value, Mapping):
        out = {k: plain(v) for k, v in value.items() if k != "cache_control"}
        if isinstance(out.get("content"), str) and out.get("role") in ("user", "assistant"):
            out["content"] = [{"type": "text", "text": out["content"]}]
        return out
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def result_ids(messages: Sequence[Mapping[str, Any]]) -> set[str]:
    """Ids of the tool calls whose results the messages carry (OpenAI ``tool`` messages, Anthropic blocks)."""
    ids: set[str] = set()
    for m in messages:
        if m.get("role") == "tool":
            ids.add(m["tool_call_id"])
        if isinstance(m.get("content"), list):
            ids |= {b["tool_use_id"] for b in m["content"] if b.get("type") == "tool_result"}
    return ids


def marked(body: Mapping[str, Any]) -> list[tuple[int, int]]:
    """``(message, block)`` positions of a request's ``cache_control`` marks on its messages."""
    return [
        (i, j)
        for i, m in enumerate(body["messages"])
        if isinstance(m["content"], list)
        for j, b in enumerate(m["content"])
        if "cache_control" in b
    ]
