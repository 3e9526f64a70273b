"""What the official SDKs hand the wrapper, as plain provider dicts: messages, replies, streamed replies.

:func:`plain_message` turns a message the caller sent (a dict or an SDK
object) into the plain provider dict the store accepts, dropping SDK-only
fields. The ``_…_reply`` readers take a provider response apart into the reply
message and the reported usage; ``_OpenAIChunks`` and ``_AnthropicEvents``
rebuild a streamed reply from its chunks or events. Used by
:mod:`stratamem.agentloop.wrap` and :mod:`stratamem.agentloop.loop_session`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from ..errors import ValidationError
from ..records.usage import PromptUsage

__all__ = ["plain_message"]

log = logging.getLogger("stratamem.agentloop")

Reply = tuple[dict[str, Any] | None, int | None, int | None, PromptUsage | None]
"""What a response reader returns: the reply message, input tokens (the whole request, cached
ones included), output tokens, and the input side's split as reported."""


def _usage(usage: Any) -> PromptUsage | None:
    """The reported usage as a :class:`~stratamem.records.usage.PromptUsage` (``None`` if absent or odd)."""
    if usage is None:
        return None
    try:
        return PromptUsage.from_provider(usage)
    except ValidationError as exc:
        # The reply is still good; only its cache split is unknown, and the caller's counts stand.
        log.warning("the provider's usage is not one stratamem reads (%s): no cache split recorded", exc)
        return None


# ``cache_control`` is the caller's: a breakpoint they set is kept (the live list holds blocks
# without it, and :mod:`stratamem.agentloop.breakpoints` puts the caller's back on what is sent).
_BLOCK_KEYS = {
    "text": ("type", "text", "cache_control"),
    "tool_use": ("type", "id", "name", "input", "cache_control"),
    "thinking": ("type", "thinking", "signature"),
    "redacted_thinking": ("type", "data"),
    "tool_result": ("type", "tool_use_id", "content", "is_error", "cache_control"),
    "image": ("type", "source", "cache_control"),
    "image_url": ("type", "image_url"),
}
_MESSAGE_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name")


def _dump(obj: Any) -> Any:
    """A provider SDK object (pydantic) as plain JSON data; plain data unchanged."""
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_none=True)
    return obj


def _plain_block(block: Any) -> Any:
    block = _dump(block)
    if not isinstance(block, Mapping):
        return block
    keys = _BLOCK_KEYS.get(str(block.get("type")))
    if keys is None:
        return dict(block)
    out = {k: block[k] for k in keys if k in block}
    if out.get("type") == "tool_result" and isinstance(out.get("content"), list):
        out["content"] = [_plain_block(b) for b in out["content"]]
    return out


def plain_message(message: Any) -> dict[str, Any]:
    """A message the caller sent (a dict or an SDK object) as a plain provider dict.

    SDK-only fields (``refusal``, ``annotations``, ``citations`` …) are dropped:
    they are not part of the conversation and the store refuses unknown keys.

    Raises:
        ValidationError: Not a message object.
    """
    m = _dump(message)
    if not isinstance(m, Mapping) or "role" not in m:
        raise ValidationError("each message must be an object with a role", path="messages")
    out = {k: m[k] for k in _MESSAGE_KEYS if k in m and m[k] is not None}
    if isinstance(out.get("content"), list):
        out["content"] = [_plain_block(b) for b in out["content"]]
    if out.get("tool_calls"):
        out["tool_calls"] = [
            {
                "id": c.get("id"),
                "type": c.get("type", "function"),
                "function": {
                    "name": (c.get("function") or {}).get("name"),
                    "arguments": (c.get("function") or {}).get("arguments") or "{}",
                },
            }
            for c in (_dump(c) for c in out["tool_calls"])
        ]
    if out.get("role") == "assistant" and "content" not in out and not out.get("tool_calls"):
        out["content"] = ""
    return out


def _system_marks(system: Any) -> int:
    """``cache_control`` marks on an Anthropic ``system`` given as blocks (they count toward the four)."""
    if system is None or isinstance(system, str):
        return 0
    return sum(1 for b in (_dump(b) for b in system) if isinstance(b, Mapping) and b.get("cache_control"))


def _system_text(system: Any) -> str | None:
    """Anthropic ``system`` (a string or text blocks) as one string, for counting."""
    if system is None or isinstance(system, str):
        return system or None
    parts = [_dump(b) for b in system]
    return "\n".join(str(p.get("text", "")) for p in parts if isinstance(p, Mapping)) or None


def _openai_reply(resp: Any) -> Reply:
    usage = getattr(resp, "usage", None)
    n_in = getattr(usage, "prompt_tokens", None)  # cached tokens included
    n_out = getattr(usage, "completion_tokens", None)
    choices = getattr(resp, "choices", None) or []
    if not choices:
        return None, n_in, n_out, _usage(usage)
    return plain_message(choices[0].message), n_in, n_out, _usage(usage)


def _anthropic_input(usage: Any) -> int | None:
    """The request's input tokens: ``input_tokens`` counts only what follows the last cache breakpoint."""
    n_in = getattr(usage, "input_tokens", None)
    if n_in is None:
        return None
    return (
        n_in
        + (getattr(usage, "cache_read_input_tokens", None) or 0)
        + (getattr(usage, "cache_creation_input_tokens", None) or 0)
    )


def _anthropic_reply(resp: Any) -> Reply:
    usage = getattr(resp, "usage", None)
    n_in, n_out = _anthropic_input(usage), getattr(usage, "output_tokens", None)
    blocks = [_plain_block(b) for b in (getattr(resp, "content", None) or [])]
    return ({"role": "assistant", "content": blocks} if blocks else None), n_in, n_out, _usage(usage)


class _OpenAIChunks:
    """Rebuilds an OpenAI streamed reply from its chunks."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.n_in: int | None = None
        self.n_out: int | None = None
        self.usage: PromptUsage | None = None

    def feed(self, chunk: Any) -> None:
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            self.n_in, self.n_out = usage.prompt_tokens, usage.completion_tokens
            self.usage = _usage(usage)
        for choice in getattr(chunk, "choices", None) or []:
            if getattr(choice, "index", 0) != 0:
                continue
            delta = choice.delta
            if getattr(delta, "content", None):
                self.text.append(delta.content)
            for tc in getattr(delta, "tool_calls", None) or []:
                entry = self.calls.setdefault(
                    tc.index, {"id": None, "type": "function", "function": {"name": "", "arguments": ""}}
                )
                if tc.id:
                    entry["id"] = tc.id
                fn = tc.function
                if fn is not None:
                    entry["function"]["name"] += fn.name or ""
                    entry["function"]["arguments"] += fn.arguments or ""

    def reply(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": "assistant", "content": "".join(self.text)}
        if self.calls:
            out["tool_calls"] = [self.calls[k] for k in sorted(self.calls)]
            if not out["content"]:
                del out["content"]  # a pure tool call has no text
        return out


class _AnthropicEvents:
    """Rebuilds an Anthropic streamed reply from its raw events."""

    def __init__(self) -> None:
        self.blocks: dict[int, dict[str, Any]] = {}
        self.partial: dict[int, str] = {}
        self.n_in: int | None = None
        self.n_out: int | None = None
        self.usage: PromptUsage | None = None

    def feed(self, event: Any) -> None:
        kind = getattr(event, "type", None)
        if kind == "message_start":
            self.n_in = _anthropic_input(event.message.usage)
            self.n_out = event.message.usage.output_tokens
            self.usage = _usage(event.message.usage)
        elif kind == "content_block_start":
            self.blocks[event.index] = _plain_block(event.content_block)
            if self.blocks[event.index].get("type") == "tool_use":
                self.partial[event.index] = ""
        elif kind == "content_block_delta":
            block, delta = self.blocks.get(event.index), event.delta
            if block is None:
                return
            dtype = getattr(delta, "type", None)
            if dtype == "text_delta":
                block["text"] = block.get("text", "") + delta.text
            elif dtype == "input_json_delta":
                self.partial[event.index] += delta.partial_json
            elif dtype == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta.thinking
            elif dtype == "signature_delta":
                block["signature"] = delta.signature
        elif kind == "message_delta":
            usage = getattr(event, "usage", None)
            if usage is not None and getattr(usage, "output_tokens", None) is not None:
                self.n_out = usage.output_tokens
            if usage is not None and getattr(usage, "input_tokens", None):
                self.n_in = _anthropic_input(usage)

    def reply(self) -> dict[str, Any]:
        import json

        blocks = []
        for i in sorted(self.blocks):
            b = self.blocks[i]
            if b.get("type") == "tool_use" and self.partial.get(i):
                b["input"] = json.loads(self.partial[i])
            blocks.append(b)
        return {"role": "assistant", "content": blocks}
