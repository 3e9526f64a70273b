"""What :class:`~stratamem.testing.llm_server.FakeLLMServer` receives and charges for.

A received request (:class:`RecordedRequest`), the scripted tool-call reply
(:class:`ToolCall`), an injected failure (:class:`Failure`), and the usage the
fake provider reports: :func:`request_input_tokens` counts every text, tool
call, tool result, thinking block, image and tool definition with the real
tokenizer plus the fixed framing costs below, which differ on purpose from
:mod:`stratamem.tokens`' estimates (as a real provider's do), so calibration
has something to learn.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "FRAME_MESSAGE",
    "FRAME_REQUEST",
    "FRAME_TOOL",
    "FRAME_TOOL_DEFINITION",
    "IMAGE_INPUT_TOKENS",
    "Failure",
    "RecordedRequest",
    "ToolCall",
    "request_input_tokens",
]

FRAME_REQUEST = 5
"""Tokens the fake provider charges once per request (reply priming and request framing)."""
FRAME_MESSAGE = 4
"""Tokens per message (role and separators); the system prompt counts as one message."""
FRAME_TOOL = 10
"""Tokens per tool call and per tool result (ids, type, wrapper), on top of their text."""
FRAME_TOOL_DEFINITION = 12
"""Tokens per tool definition in ``tools``, on top of its JSON."""
IMAGE_INPUT_TOKENS = 1_200
"""Tokens charged per image."""


def _count_block(block: Any, count: Callable[[str], int]) -> int:
    if isinstance(block, str):
        return count(block)
    if not isinstance(block, Mapping):
        return 0
    kind = block.get("type")
    if kind == "text":
        return count(str(block.get("text") or ""))
    if kind in ("image", "image_url"):
        return IMAGE_INPUT_TOKENS
    if kind in ("thinking", "redacted_thinking"):
        return count(str(block.get("thinking") or block.get("data") or ""))
    if kind == "tool_use":
        return (
            FRAME_TOOL
            + count(str(block.get("name") or ""))
            + count(json.dumps(block.get("input") or {}, ensure_ascii=False, separators=(",", ":")))
        )
    if kind == "tool_result":
        inner = block.get("content")
        parts = inner if isinstance(inner, list) else [inner or ""]
        return FRAME_TOOL + sum(_count_block(p, count) for p in parts)
    return count(json.dumps(block, ensure_ascii=False))


def request_input_tokens(api: str, body: Mapping[str, Any], count: Callable[[str], int]) -> int:
    """Input tokens the fake provider charges for a request body (see the module docstring).

    ``FRAME_REQUEST``, plus per message ``FRAME_MESSAGE`` and its content:
    text by the tokenizer, ``FRAME_TOOL`` + name + compact JSON arguments per
    tool call (Anthropic ``tool_use`` blocks, OpenAI ``tool_calls``),
    ``FRAME_TOOL`` + text per tool result (Anthropic ``tool_result`` blocks,
    OpenAI ``tool`` messages), ``IMAGE_INPUT_TOKENS`` per image; the
    Anthropic ``system`` prompt as one more message; each tool definition as
    ``FRAME_TOOL_DEFINITION`` + its compact JSON.
    """
    total = FRAME_REQUEST
    system = body.get("system")
    if system:
        total += FRAME_MESSAGE + sum(_count_block(b, count) for b in (system if isinstance(system, list) else [system]))
    for m in body.get("messages") or ():
        if not isinstance(m, Mapping):
            continue
        total += FRAME_MESSAGE
        content = m.get("content")
        if isinstance(content, list):
            total += sum(_count_block(b, count) for b in content)
        elif isinstance(content, str):
            total += count(content)
        if m.get("role") == "tool":
            total += FRAME_TOOL
        for call in m.get("tool_calls") or ():
            fn = call.get("function") or {}
            total += FRAME_TOOL + count(str(fn.get("name") or "")) + count(str(fn.get("arguments") or ""))
    for tool in body.get("tools") or ():
        total += FRAME_TOOL_DEFINITION + count(json.dumps(tool, ensure_ascii=False, separators=(",", ":")))
    return total


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request the server received."""

    api: str
    """``openai`` or ``anthropic``."""
    path: str
    """Request path."""
    body: Mapping[str, Any]
    """Parsed JSON body."""
    headers: Mapping[str, str]
    """Request headers (lower-cased names)."""

    @property
    def model(self) -> str | None:
        """Model named in the request."""
        return self.body.get("model")

    @property
    def max_tokens(self) -> int | None:
        """``max_tokens`` of the request."""
        return self.body.get("max_tokens")

    @property
    def system(self) -> str:
        """System prompt (Anthropic ``system`` or OpenAI system messages, joined)."""
        if self.api == "anthropic":
            return _text_of(self.body.get("system") or "")
        return "\n".join(
            _text_of(m.get("content"))
            for m in self.body.get("messages", [])
            if m.get("role") in ("system", "developer")
        )

    @property
    def messages(self) -> list[dict[str, Any]]:
        """Conversation messages (OpenAI system messages excluded)."""
        return [dict(m) for m in self.body.get("messages", []) if m.get("role") not in ("system", "developer")]

    @property
    def prompt_text(self) -> str:
        """The text of all non-system messages joined by blank lines."""
        return "\n\n".join(_text_of(m.get("content")) for m in self.messages)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A scripted reply that calls one tool (see :meth:`FakeLLMServer.script_tool_call`)."""

    name: str
    """Tool name."""
    arguments: Mapping[str, Any] = field(default_factory=dict)
    """JSON arguments."""

    @property
    def json(self) -> str:
        """The arguments as compact JSON (what is streamed and counted as output)."""
        return json.dumps(dict(self.arguments), separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class Failure:
    """An injected failure for one call."""

    status: int = 500
    """HTTP status to answer with; 0 closes the connection without an answer."""
    delay_s: float = 0.0
    """Seconds to wait before failing (use it to provoke client timeouts)."""


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, Mapping))
    return ""
