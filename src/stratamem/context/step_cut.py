"""Tool results cut to fit the window: head and tail kept, a marker saying what is left out and where it is.

A tool loop's newest step (the model's call and the tool's answer) is what the
model needs most on its next call, and it is often larger than the recent
window's room: a source listing, a test log. Leaving it out would make the
model call blind; cutting it as a whole turn would orphan a call or a result.
Here only the *text of tool results* is cut — the call, its id, the result's
id and any image stay — so a window of cut turns pairs every call with its
results exactly as the stored turns do, in every provider format.

A cut result keeps its first and last characters around a marker line that
says how much was kept of how much and names the stored turn
(``turn:ID``: ``Memory.expand``, the ``expand`` tool or ``stratamem expand``
give the whole result back). Cutting is a pure function of the turn and the
number of characters kept, so the same turn cut for the same room has the same
bytes on every call — a cut step can stay in a cached prompt prefix.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from ..records import StoredTurn
from ..records.blocks import ImageBlock, TextBlock, ToolResultBlock

__all__ = ["MIN_KEEP", "cut_marker", "cut_turn", "fit_turn", "is_cut"]

MIN_KEEP = 120
"""Fewest characters of a result kept (head and tail together): below that a cut shows nothing useful."""

_MARK = "[... cut to fit the context: kept "


def cut_marker(head: int, tail: int, total: int, turn_id: int) -> str:
    """The line placed between the head and tail of a cut result."""
    return (
        f"\n\n{_MARK}{head} head + {tail} tail of {total} characters; the whole result is "
        f"turn:{turn_id} (Memory.expand or the expand tool) ...]\n\n"
    )


def _cut_block(block: ToolResultBlock, keep: int, turn_id: int) -> ToolResultBlock:
    text = block.text
    if len(text) <= keep:
        return block
    head = keep // 2
    tail = keep - head
    cut = text[:head] + cut_marker(head, tail, len(text), turn_id) + text[len(text) - tail :]
    images = tuple(b for b in block.content if isinstance(b, ImageBlock))
    return dataclasses.replace(block, content=(TextBlock(cut), *images))


def cut_turn(st: StoredTurn, keep: int) -> StoredTurn:
    """``st`` with each tool result longer than ``keep`` characters cut to ``keep`` (head + tail) and a marker.

    Everything else — text, calls, ids, images, the turn's identity — is left as it is;
    a turn with nothing to cut is returned itself.
    """
    content = st.turn.content
    if isinstance(content, str):
        return st
    blocks = tuple(_cut_block(b, keep, st.id) if isinstance(b, ToolResultBlock) else b for b in content)
    if all(a is b for a, b in zip(blocks, content, strict=True)):
        return st
    return dataclasses.replace(st, turn=dataclasses.replace(st.turn, content=blocks))


def is_cut(st: StoredTurn) -> bool:
    """Whether ``st`` holds a result cut by :func:`cut_turn`."""
    content = st.turn.content
    return not isinstance(content, str) and any(isinstance(b, ToolResultBlock) and _MARK in b.text for b in content)


def fit_turn(st: StoredTurn, limit: int, cost: Callable[[StoredTurn], int]) -> StoredTurn | None:
    """The least-cut form of ``st`` whose ``cost`` is at most ``limit``.

    ``st`` itself when it fits; else its tool results cut to the most characters
    each (the same for every result of the turn) that fit. ``None`` when nothing
    fits: no tool result to cut, or the call and the other blocks alone are
    larger than ``limit``. Deterministic in ``(st, limit, cost)``.
    """
    if cost(st) <= limit:
        return st
    content = st.turn.content
    longest = max(
        (len(b.text) for b in (() if isinstance(content, str) else content) if isinstance(b, ToolResultBlock)),
        default=0,
    )
    if longest <= MIN_KEEP:
        return None
    lo, hi = MIN_KEEP, longest - 1
    if cost(cut_turn(st, lo)) > limit:
        return None
    # The largest number of characters kept whose form fits (cost grows with it).
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if cost(cut_turn(st, mid)) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return cut_turn(st, lo)
