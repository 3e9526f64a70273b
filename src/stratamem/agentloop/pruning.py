"""Tool-output pruning: shrink old tool results before each call of an agent loop.

Layer 1 of seed 001, run on the live provider message list before every
model call of a tool loop. It needs no model and changes only tool-result
content, in place:

* **soft-trim** — a result longer than ``soft_trim_chars`` keeps its first
  ``soft_trim_head`` and last ``soft_trim_tail`` characters around a marker
  saying how much was kept of how much;
* **hard-clear** — a result ``hard_clear_after`` or more tool-result messages
  old (counting from the end) becomes a short placeholder;
* the newest ``keep_last_tool_results`` tool-result messages are never touched,
  nor are results holding images, user text, or any assistant block (text,
  thinking, tool_use).

A *tool-result message* is an Anthropic user message carrying ``tool_result``
blocks, or a run of consecutive OpenAI ``tool`` messages (the answers to one
assistant message's parallel calls count as one, like Anthropic's single
message). Pruning never adds, removes or reorders messages, so a valid list
stays valid. What it did is returned (and logged) as counts, never content.
History compaction (layer 2) lives in :mod:`stratamem.agentloop.compaction`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..config import PruningConfig
from ..errors import ConfigError, ValidationError
from ..tokens import Tokenizer, count_messages, get_tokenizer

__all__ = [
    "CLEARED_PLACEHOLDER",
    "PruneStats",
    "is_tool_result_message",
    "prune_frontier",
    "prune_tool_results",
    "trim_marker",
]

log = logging.getLogger("stratamem.agentloop.pruning")

CLEARED_PLACEHOLDER = "[tool output cleared: it was used in earlier steps; run the tool again if you need it]"
"""What a hard-cleared tool result is replaced with."""

_MARKER_RE = re.compile(
    r"\n\n\[\.\.\. trimmed: kept \d+ head \+ \d+ tail of \d+ characters; "
    r"run the tool again for the rest \.\.\.\]\n\n"
)


def trim_marker(head: int, tail: int, total: int) -> str:
    """The line placed between the head and tail of a soft-trimmed result."""
    return (
        f"\n\n[... trimmed: kept {head} head + {tail} tail of {total} characters; "
        f"run the tool again for the rest ...]\n\n"
    )


@dataclass(frozen=True, slots=True)
class PruneStats:
    """What one pruning pass did, in counts."""

    tool_result_messages: int = 0
    """Tool-result messages found (OpenAI: runs of ``tool`` messages)."""
    protected: int = 0
    """Tool results left alone because they are among the newest."""
    soft_trimmed: int = 0
    """Tool results trimmed to head + tail in this pass."""
    hard_cleared: int = 0
    """Tool results replaced by the placeholder in this pass."""
    skipped_images: int = 0
    """Tool results left alone because they hold images."""
    chars_before: int = 0
    """Characters of tool-result text before the pass."""
    chars_after: int = 0
    """Characters of tool-result text after the pass."""

    @property
    def changed(self) -> int:
        """Tool results changed by this pass."""
        return self.soft_trimmed + self.hard_cleared

    @property
    def chars_removed(self) -> int:
        """Characters removed from tool results by this pass."""
        return self.chars_before - self.chars_after


def _has_tool_result_block(content: Any) -> bool:
    return isinstance(content, list) and any(isinstance(b, Mapping) and b.get("type") == "tool_result" for b in content)


def is_tool_result_message(message: Mapping[str, Any]) -> bool:
    """Whether ``message`` carries tool results rather than text a person wrote.

    True for an OpenAI ``tool`` message and for an Anthropic ``user`` message
    whose content list holds a ``tool_result`` block; false for user text
    (string or text/image blocks), assistant and system messages.
    """
    role = message.get("role")
    if role == "tool":
        return True
    return role == "user" and _has_tool_result_block(message.get("content"))


def _groups(messages: Sequence[Mapping[str, Any]]) -> list[list[int]]:
    """Indices of tool-result messages, grouped per answering step, oldest first."""
    groups: list[list[int]] = []
    prev_tool = False
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping):
            raise ValidationError("a message must be an object", path=f"messages[{i}]")
        if m.get("role") == "tool":
            if prev_tool:
                groups[-1].append(i)
            else:
                groups.append([i])
            prev_tool = True
            continue
        prev_tool = False
        if is_tool_result_message(m):
            groups.append([i])
    return groups


def _holders(message: MutableMapping[str, Any]) -> list[MutableMapping[str, Any]]:
    """The mappings whose ``content`` is one tool result: the message (OpenAI) or its blocks."""
    if message.get("role") == "tool":
        return [message]
    return [b for b in message["content"] if isinstance(b, MutableMapping) and b.get("type") == "tool_result"]


def _text(content: Any) -> str | None:
    """Text of a tool result's content, or None if it holds an image (left alone)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        if any(isinstance(p, Mapping) and p.get("type") in ("image", "image_url") for p in content):
            return None
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return str(content)


def _set_text(holder: MutableMapping[str, Any], text: str) -> None:
    # Keep the shape the caller used: a string stays a string, a list becomes one text part.
    if isinstance(holder.get("content"), list):
        holder["content"] = [{"type": "text", "text": text}]
    else:
        holder["content"] = text


def _check(cfg: PruningConfig) -> None:
    if cfg.soft_trim_head + cfg.soft_trim_tail >= cfg.soft_trim_chars:
        raise ConfigError("pruning: soft_trim_head + soft_trim_tail must be below soft_trim_chars")
    if (cfg.soft_trim_ratio is not None or cfg.hard_clear_ratio is not None) and not cfg.context_window:
        raise ConfigError("pruning: soft_trim_ratio/hard_clear_ratio need context_window")


def _edited(message: Mapping[str, Any]) -> bool:
    """Whether a tool-result message holds a result pruning already changed (cleared or trimmed)."""
    if message.get("role") == "tool":
        holders: list[Mapping[str, Any]] = [message]
    else:
        holders = [b for b in message.get("content") or () if isinstance(b, Mapping) and b.get("type") == "tool_result"]
    for holder in holders:
        text = _text(holder.get("content"))
        if text is not None and (text == CLEARED_PLACEHOLDER or _MARKER_RE.search(text)):
            return True
    return False


def prune_frontier(messages: Sequence[Mapping[str, Any]]) -> int | None:
    """Index of the last message of the newest tool-result group pruning has changed (``None``: none).

    Under epochs (``PruningConfig.epoch``) everything up to it is final: a
    later pass never edits it again unless the budget forces it, so it is a
    stable place for a cache breakpoint.
    """
    for group in reversed(_groups(messages)):
        if any(_edited(messages[i]) for i in group):
            return group[-1]
    return None


def prune_tool_results(
    messages: list[dict[str, Any]],
    config: PruningConfig | None = None,
    *,
    tokenizer: Tokenizer | None = None,
    system: str | None = None,
    force: bool = False,
) -> PruneStats:
    """Soft-trim and hard-clear old tool results of ``messages``, in place.

    With ``config.epoch`` (prompt caching) and not ``force``, only results
    after the :func:`prune_frontier` are considered, and only once ``epoch``
    of them wait past the protected ones: then each gets its final form in one
    pass (cleared if old enough, else trimmed if long, else left as it is).

    Args:
        messages: OpenAI Chat Completions or Anthropic Messages list; changed in place.
        config: Limits (default: the seed's 4,000 / 1,500 + 1,500 / clear after 6 / keep 2).
        tokenizer: Counts the request for the ratio triggers (default ``o200k_base``).
        system: Anthropic system prompt, counted by the ratio triggers.
        force: Apply the limits to every result whatever the epoch (the request would
            otherwise cross the compaction threshold).

    Returns:
        Counts of what was found and changed.

    Raises:
        ValidationError: ``messages`` is not a list of message objects.
        ConfigError: Head + tail do not fit below the trim threshold, or a ratio
            trigger is set without ``context_window``.
    """
    cfg = config or PruningConfig()
    if not isinstance(messages, list):
        raise ValidationError(f"expected a list of messages, got {type(messages).__name__}", path="messages")
    _check(cfg)
    groups = _groups(messages)
    if not cfg.enabled or not groups:
        return PruneStats(tool_result_messages=len(groups))
    soft_on = hard_on = True
    if cfg.soft_trim_ratio is not None or cfg.hard_clear_ratio is not None:
        used = count_messages(messages, tokenizer or get_tokenizer(), system=system)
        window = cfg.context_window or 0
        soft_on = cfg.soft_trim_ratio is None or used > cfg.soft_trim_ratio * window
        hard_on = cfg.hard_clear_ratio is None or used > cfg.hard_clear_ratio * window
    final = -1  # under epochs: groups up to here are not edited again
    if cfg.epoch and not force:
        frontier = prune_frontier(messages)
        final = -1 if frontier is None else next(k for k, g in enumerate(groups) if g[-1] == frontier)
        waiting = len(groups) - 1 - final - cfg.keep_last_tool_results
        if waiting < cfg.epoch:
            final = len(groups)  # not yet: nothing is touched this call
    protected = soft = hard = images = before = after = 0
    for age, group in enumerate(reversed(groups)):
        editable = len(groups) - 1 - age > final
        for index in group:
            for holder in _holders(messages[index]):
                text = _text(holder.get("content"))
                if text is None:
                    images += 1
                    continue
                before += len(text)
                new = text
                if age < cfg.keep_last_tool_results:
                    protected += 1
                elif not editable:
                    pass
                elif hard_on and age >= cfg.hard_clear_after:
                    if text != CLEARED_PLACEHOLDER:
                        new = CLEARED_PLACEHOLDER
                        hard += 1
                elif soft_on and len(text) > cfg.soft_trim_chars and not _MARKER_RE.search(text):
                    head, tail = cfg.soft_trim_head, cfg.soft_trim_tail
                    new = text[:head] + trim_marker(head, tail, len(text)) + (text[-tail:] if tail else "")
                    soft += 1
                if new is not text:
                    _set_text(holder, new)
                after += len(new)
    stats = PruneStats(len(groups), protected, soft, hard, images, before, after)
    if stats.changed:
        log.info(
            "pruned tool results: %d soft-trimmed, %d hard-cleared, %d protected, chars %d -> %d",
            soft,
            hard,
            protected,
            before,
            after,
        )
    return stats
