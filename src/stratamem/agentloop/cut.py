"""Where a live conversation may be cut: real user turns, tool steps, the recent window.

Pure functions over provider message lists (OpenAI or Anthropic shape) that
:class:`~stratamem.agentloop.Compactor` uses to choose what leaves the prompt:
a cut is only ever placed at a message a person wrote, so every tool result
stays beside its call and both providers accept the list. What is done with
the cut lives in :mod:`stratamem.agentloop.compaction`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..summarize.facts import fact_type
from ..tokens import Tokenizer, count_message
from .checkpoint import ACK_TEXT, CHECKPOINT_HEADER, OMITTED_HEADER, serialize_messages
from .pruning import is_tool_result_message

__all__ = [
    "capped_start",
    "find_cut_point",
    "history_text",
    "holds_decision",
    "is_synthetic",
    "real_user_indices",
    "tool_steps",
]


def is_synthetic(message: Mapping[str, Any]) -> bool:
    """Whether ``message`` is one compaction inserted (checkpoint, note or acknowledgement)."""
    content = message.get("content")
    if not isinstance(content, str):
        return False
    if message.get("role") == "user":
        return content.startswith((CHECKPOINT_HEADER, OMITTED_HEADER))
    return message.get("role") == "assistant" and content == ACK_TEXT


def real_user_indices(messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """Indices of user messages a person wrote: the only places compaction may cut.

    Excluded: tool-result messages (Anthropic user messages with ``tool_result``
    blocks), OpenAI user messages that directly follow ``tool`` messages (they
    carry tool output such as images), and compaction's own messages.
    """
    out = []
    for i, m in enumerate(messages):
        if m.get("role") != "user" or is_tool_result_message(m) or is_synthetic(m):
            continue
        if i and messages[i - 1].get("role") == "tool":
            continue
        out.append(i)
    return out


def find_cut_point(messages: Sequence[Mapping[str, Any]], keep_recent_tokens: int, tokenizer: Tokenizer) -> int:
    """Index of the first message to keep: the earliest real user turn leaving ≤ ``keep_recent_tokens``.

    Walks back over real user turns (see :func:`real_user_indices`) while the
    messages from there to the end stay within ``keep_recent_tokens``. The
    latest user turn is always kept, even if it alone is larger. Returns 0
    when there is no real user turn.
    """
    starts = real_user_indices(messages)
    if not starts:
        return 0
    suffix = [0] * (len(messages) + 1)
    for i in range(len(messages) - 1, -1, -1):
        suffix[i] = suffix[i + 1] + count_message(messages[i], tokenizer)
    cut = starts[-1]
    for s in reversed(starts[:-1]):
        if suffix[s] > keep_recent_tokens:
            break
        cut = s
    return cut


def capped_start(messages: Sequence[Mapping[str, Any]], max_messages: int) -> int:
    """Where seed 001's legacy cap (compaction off) starts the kept messages; 0 keeps everything.

    The earliest real user turn after which at most ``max_messages`` messages
    remain (system and developer messages are not counted: they always stay),
    or the latest real user turn when even it leaves more, so no turn is cut
    in two and every tool result stays beside its call.
    """
    body = [i for i, m in enumerate(messages) if m.get("role") not in ("system", "developer")]
    starts = real_user_indices(messages)
    if max_messages <= 0 or len(body) <= max_messages or not starts:
        return 0
    keep = starts[-1]
    for s in reversed(starts[:-1]):
        if sum(1 for i in body if i >= s) > max_messages:
            break
        keep = s
    return keep if any(i < keep for i in body) else 0


def holds_decision(message: Mapping[str, Any]) -> bool:
    """Whether a user or assistant message states a decision (seed 001 phase 4's priority retention).

    Read from its own text (plain content or text blocks; never tool output), by
    the rule that types a decision item (:func:`stratamem.summarize.facts.fact_type`).
    """
    if message.get("role") not in ("user", "assistant") or is_tool_result_message(message) or is_synthetic(message):
        return False
    content = message.get("content")
    if isinstance(content, str):
        text = content
    elif isinstance(content, list):
        text = " ".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    else:
        return False
    return bool(text.strip()) and fact_type(text) == "decision"


def tool_steps(messages: Sequence[Mapping[str, Any]], start: int, end: int) -> list[tuple[int, int]]:
    """Complete steps in ``messages[start:end]``: an assistant message with all its tool results."""
    out: list[tuple[int, int]] = []
    i = start
    while i < end:
        j = i + 1
        if messages[i].get("role") == "assistant":
            while j < end and (
                messages[j].get("role") == "tool"
                or is_tool_result_message(messages[j])
                or (messages[j].get("role") == "user" and messages[j - 1].get("role") == "tool")
            ):
                j += 1
        out.append((i, j))
        i = j
    return out


def history_text(
    messages: Iterable[Mapping[str, Any]], summary: str | None, *, last: int = 20, tool_result_chars: int = 500
) -> str:
    """Text of a conversation for reflection: the checkpoint, then the last ``last`` messages.

    Compaction's own messages are skipped (the checkpoint is given once, first).
    """
    msgs = [m for m in messages if not is_synthetic(m)][-last:] if last > 0 else []
    parts = [f"[Summary of earlier conversation]\n{summary}"] if summary else []
    body = serialize_messages(msgs, tool_result_chars=tool_result_chars)
    return "\n\n".join(parts + ([body] if body else []))
