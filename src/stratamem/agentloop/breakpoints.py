"""Cache breakpoints on what a wrapped client sends: the caller's kept, ours on the stable prefix.

Anthropic caches a prompt prefix up to a block marked ``cache_control``
(at most four per request) and, for a later request, finds an entry by
looking back at most 20 blocks from each of its own marks. The live list of a
wrapped conversation (:class:`~stratamem.agentloop.loop_session.LoopSession`)
holds no marks; on the copy that is sent:

* the caller's own marks go back where the caller put them
  (:func:`caller_marks` records them, counted from the end of the caller's
  list, and :func:`place_breakpoints` re-applies those whose message is still
  there unchanged);
* with ``compaction.cache_aware``, ours fill the slots left, in this order: the
  last block (a rolling mark: the next call finds this call's entry a few
  blocks behind its own), the prune frontier (everything before it is final
  until the next compaction, :func:`~stratamem.agentloop.pruning.prune_frontier`),
  the checkpoint's acknowledgement (stable until the next compaction), and a
  mark at a fixed message grid when more than 18 blocks lie between two others.
  A mark whose prefix is shorter than the model's minimum cacheable length is left out.

:func:`expected_cache` estimates what the provider should read, write and
bill in full for a request, given the previous one.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..tokens import Tokenizer, count_message
from .cut import is_synthetic
from .pruning import prune_frontier

__all__ = ["Mark", "caller_marks", "expected_cache", "place_breakpoints", "strip_marks"]

GRID = 12
"""Messages between two positions of the intermediate mark (calls share its position)."""
LOOKBACK = 18
"""Blocks after a mark beyond which another is added (the provider looks back 20)."""
_UNMARKABLE = {"thinking", "redacted_thinking"}


@dataclass(frozen=True, slots=True)
class Mark:
    """A caller's ``cache_control`` on one block, located from the end of the caller's list."""

    from_end: int
    """0 for the caller's last message, 1 for the one before …"""
    block: int
    """Index of the block in that message's content."""
    control: Mapping[str, Any]
    """The ``cache_control`` value as the caller gave it."""
    message: Mapping[str, Any]
    """The message without marks (a re-applied mark needs the same message at that place)."""


def strip_marks(message: Mapping[str, Any]) -> dict[str, Any]:
    """``message`` without ``cache_control`` on any block (a deep copy)."""
    out = copy.deepcopy(dict(message))
    content = out.get("content")
    if isinstance(content, list):
        out["content"] = [
            {k: v for k, v in b.items() if k != "cache_control"} if isinstance(b, dict) else b for b in content
        ]
    return out


def caller_marks(messages: Sequence[Mapping[str, Any]]) -> tuple[list[dict[str, Any]], list[Mark]]:
    """``(the messages without marks, the marks)`` of a list the caller sent."""
    plain = [strip_marks(m) for m in messages]
    marks = []
    for i, m in enumerate(messages):
        content = m.get("content")
        if isinstance(content, list):
            for j, b in enumerate(content):
                if isinstance(b, Mapping) and b.get("cache_control"):
                    marks.append(Mark(len(messages) - 1 - i, j, dict(b["cache_control"]), plain[i]))
    return plain, marks


def _mark(message: dict[str, Any], block: int, control: Mapping[str, Any]) -> bool:
    """Put ``control`` on ``message``'s block (a string content becomes one text block); whether it could."""
    content = message.get("content")
    if isinstance(content, str):
        if not content or block not in (0, -1):
            return False
        message["content"] = content = [{"type": "text", "text": content}]
    if not isinstance(content, list) or not content or not -len(content) <= block < len(content):
        return False
    target = content[block]
    if not isinstance(target, dict) or target.get("type") in _UNMARKABLE or "cache_control" in target:
        return False
    content[block] = {**target, "cache_control": dict(control)}
    return True


def place_breakpoints(
    sent: list[dict[str, Any]],
    marks: Sequence[Mark],
    *,
    ours: bool,
    tokenizer: Tokenizer,
    min_tokens: int,
    system_tokens: int = 0,
    system_marks: int = 0,
    limit: int = 4,
) -> list[str]:
    """Mark ``sent`` in place: the caller's marks, then (``ours``) ours in the slots left; returns where ours went.

    ``system_tokens``: the system prompt's tokens (part of every prefix);
    ``system_marks``: marks the caller put on system blocks (they take slots).
    """
    used = system_marks
    for mk in marks:
        k = len(sent) - 1 - mk.from_end
        if (
            0 <= k < len(sent)
            and used < limit
            and strip_marks(sent[k]) == mk.message
            and _mark(sent[k], mk.block, mk.control)
        ):
            used += 1
    if not ours or not sent:
        return []
    ends, running = [], system_tokens
    for m in sent:
        running += count_message(m, tokenizer)
        ends.append(running)
    wanted: list[tuple[int, str]] = [(len(sent) - 1, "last block")]
    frontier = prune_frontier(sent)
    if frontier is not None:
        wanted.append((frontier, "prune frontier"))
    acks = [i for i, m in enumerate(sent) if m.get("role") == "assistant" and is_synthetic(m)]
    if acks:
        wanted.append((acks[-1], "checkpoint"))
    anchors = sorted({i for i, _ in wanted})
    blocks = [1 if isinstance(m.get("content"), str) else max(1, len(m.get("content") or ())) for m in sent]
    grid = ((len(sent) - 1) // GRID) * GRID - 1
    earlier = max((i for i in anchors if i < len(sent) - 1), default=-1)
    if grid > earlier and sum(blocks[earlier + 1 :]) > LOOKBACK:
        wanted.append((grid, "grid"))
    placed = []
    for index, name in wanted:
        if used >= limit:
            break
        if ends[index] < min_tokens:
            continue
        if _mark(sent[index], -1, {"type": "ephemeral"}):
            used += 1
            placed.append(f"{name} (message {index})")
    return placed


def expected_cache(
    previous: Sequence[Mapping[str, Any]] | None,
    sent: Sequence[Mapping[str, Any]],
    tokenizer: Tokenizer,
    *,
    min_tokens: int,
    marked: bool,
    system_tokens: int = 0,
) -> dict[str, int]:
    """What the provider should bill for ``sent`` after ``previous``: tokens read, written and uncached.

    Read: the messages both requests share from the start (when at least
    ``min_tokens``). Written (``marked``: Anthropic with breakpoints): the rest
    up to the last marked message. OpenAI caches by itself and has no write
    premium: nothing is counted as written there.
    """
    ends, running = [], system_tokens
    for m in sent:
        running += count_message(m, tokenizer)
        ends.append(running)
    total = ends[-1] if ends else system_tokens
    same = 0
    if previous:
        for a, b in zip(previous, sent, strict=False):
            if strip_marks(a) != strip_marks(b):
                break
            same += 1
    read = ends[same - 1] if same else 0
    read = read if read >= min_tokens else 0
    last = max(
        (
            i
            for i, m in enumerate(sent)
            if isinstance(m.get("content"), list)
            and any(isinstance(b, Mapping) and "cache_control" in b for b in m["content"])
        ),
        default=-1,
    )
    written = max(0, ends[last] - read) if marked and last >= 0 else 0
    return {"read": read, "written": written, "uncached": max(0, total - read - written), "total": total}
