"""OpenAI Responses input items <-> stratamem turns (no framework import).

Each item becomes one turn whose content is what recall and assembly need
(text, a tool call, a tool result), and whose metadata keeps the item itself
under :data:`ITEM_KEY`, so the raw item list reads back exactly as written.
Chat Completions messages (what :meth:`~stratamem.Memory.context` renders)
convert back to Responses items for the budgeted view.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import InvalidTurnError
from ..records import StoredTurn, TextBlock, ToolResultBlock, ToolUseBlock, Turn

__all__ = ["ITEM_KEY", "item_to_turn", "messages_to_items", "turn_to_item"]

ITEM_KEY = "openai_agents_item"
"""Turn metadata key holding the original Responses input item."""

_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}


def _parts_text(content: Any) -> str:
    """The text of a message's content: a string, or the ``text`` of its parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "\n".join(
            str(p.get("text") or p.get("refusal") or "") for p in content if isinstance(p, Mapping)
        ).strip()
    return ""


def item_to_turn(item: Mapping[str, Any], index: int = 0) -> Turn:
    """One Responses input item as a turn that keeps the item in its metadata.

    Raises:
        InvalidTurnError: The item is not a JSON object with a ``role`` or ``type``.
    """
    if not isinstance(item, Mapping):
        raise InvalidTurnError(f"an item must be a dict, got {type(item).__name__}", path=f"items[{index}]")
    try:
        raw = json.loads(json.dumps(dict(item), allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise InvalidTurnError(f"item is not JSON: {exc}", path=f"items[{index}]") from exc
    kind = item.get("type")
    meta = {ITEM_KEY: raw}
    if kind == "function_call":
        args = item.get("arguments") or "{}"
        try:
            parsed = json.loads(args) if isinstance(args, str) else args
        except ValueError:
            parsed = None
        block = ToolUseBlock(
            str(item.get("call_id") or item.get("id")),
            str(item.get("name") or "tool"),
            parsed if isinstance(parsed, Mapping) else {"arguments": args},
        )
        return Turn("assistant", (block,), metadata=meta)
    if kind == "function_call_output":
        out = item.get("output")
        text = out if isinstance(out, str) else _parts_text(out) or json.dumps(out, ensure_ascii=False)
        return Turn("tool", (ToolResultBlock(str(item.get("call_id")), (TextBlock(text),)),), metadata=meta)
    role = item.get("role")
    if role in _ROLES and kind in (None, "message"):
        return Turn(_ROLES[role], _parts_text(item.get("content")), metadata=meta)  # type: ignore[arg-type]
    if kind is None and role is None:
        raise InvalidTurnError("an item needs a 'role' or a 'type'", path=f"items[{index}]")
    # Reasoning, hosted tool calls and anything newer: kept verbatim, shown as a label plus any text.
    label = f"[{kind or role}]"
    summary = _parts_text(item.get("summary") or item.get("content") or "")
    return Turn("assistant", f"{label} {summary}".strip(), metadata=meta)


def turn_to_item(st: StoredTurn) -> dict[str, Any]:
    """The item a turn was stored from, or (for turns stored by other means) an equivalent item."""
    item = st.turn.metadata.get(ITEM_KEY)
    if isinstance(item, Mapping):
        return dict(item)
    out: list[dict[str, Any]] = []
    for block in st.turn.blocks:
        if isinstance(block, ToolUseBlock):
            out.append(
                {
                    "type": "function_call",
                    "call_id": block.id,
                    "name": block.name,
                    "arguments": json.dumps(dict(block.input), ensure_ascii=False),
                }
            )
        elif isinstance(block, ToolResultBlock):
            out.append({"type": "function_call_output", "call_id": block.tool_use_id, "output": block.text})
    if len(out) == 1:
        return out[0]
    return {"role": st.role, "content": st.text}


def messages_to_items(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Chat Completions messages (a rendered context) as Responses input items."""
    items: list[dict[str, Any]] = []
    for m in messages:
        role = m.get("role")
        if role == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": m.get("tool_call_id"),
                    "output": _parts_text(m.get("content")),
                }
            )
            continue
        text = _parts_text(m.get("content"))
        if text or not m.get("tool_calls"):
            items.append({"role": role, "content": text})
        for call in m.get("tool_calls") or ():
            fn = call.get("function") or {}
            items.append(
                {
                    "type": "function_call",
                    "call_id": call.get("id"),
                    "name": fn.get("name"),
                    "arguments": fn.get("arguments") or "{}",
                }
            )
    return items
