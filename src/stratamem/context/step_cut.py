"""Texts cut to fit the window: head and tail kept, a marker saying what is left out and where it is.

A tool loop's newest step (the model's call and the tool's answer) is what the
model needs most on its next call, and it is often larger than the recent
window's room: a source listing, a test log, a file the model wrote. Leaving
it out makes the model call blind; dropping a turn of it would orphan a call
or a result. Here only *texts* are cut — tool results' text, text blocks, a
string content, the string values of a call's input — while roles, call and
result ids, keys and images stay, so a window of cut turns pairs every call
with its results exactly as the stored turns do, in every provider format.

A cut text keeps its first and last characters around a marker line that
says how much was kept of how much and names the stored turn (``turn:ID``:
``Memory.expand``, the MCP ``expand`` tool or ``stratamem expand`` give all of
it back). Cutting is a pure function of the turn and the number of characters
kept, so the same turn cut for the same room has the same bytes on every call:
a cut step can stay in a cached prompt prefix.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from ..records import StoredTurn
from ..records.blocks import Block, ImageBlock, TextBlock, ToolResultBlock, ToolUseBlock

__all__ = ["MIN_KEEP", "cut_marker", "cut_turn", "fit_turn", "is_cut"]

MIN_KEEP = 120
"""Fewest characters of a text kept (head and tail together): below that a cut shows nothing useful."""

_MARK = "[... cut to fit the context: kept "


def cut_marker(head: int, tail: int, total: int, turn_id: int) -> str:
    """The line placed between the head and tail of a cut text."""
    return (
        f"\n\n{_MARK}{head} head + {tail} tail of {total} characters; all of it is stored as "
        f"turn:{turn_id} (Memory.expand or the expand tool) ...]\n\n"
    )


def _cut_text(text: str, keep: int, turn_id: int) -> str:
    if len(text) <= keep:
        return text
    head = keep // 2
    tail = keep - head
    return text[:head] + cut_marker(head, tail, len(text), turn_id) + text[len(text) - tail :]


def _cut_value(value: Any, keep: int, turn_id: int) -> Any:
    """A tool call's input with its long strings cut (keys, numbers and structure kept)."""
    if isinstance(value, str):
        return _cut_text(value, keep, turn_id)
    if isinstance(value, Mapping):
        return {k: _cut_value(v, keep, turn_id) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_cut_value(v, keep, turn_id) for v in value]
    return value


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _strings(v)]
    return []


def _cut_block(block: Block, keep: int, turn_id: int) -> Block:
    if isinstance(block, TextBlock):
        return block if len(block.text) <= keep else TextBlock(_cut_text(block.text, keep, turn_id))
    if isinstance(block, ToolResultBlock):
        text = block.text
        if len(text) <= keep:
            return block
        images = tuple(b for b in block.content if isinstance(b, ImageBlock))
        return dataclasses.replace(block, content=(TextBlock(_cut_text(text, keep, turn_id)), *images))
    if isinstance(block, ToolUseBlock):
        if all(len(t) <= keep for t in _strings(block.input)):
            return block
        return dataclasses.replace(block, input=_cut_value(block.input, keep, turn_id))
    return block  # images and thinking are left as they are


def _longest(st: StoredTurn) -> int:
    """Length of the longest text :func:`cut_turn` may cut in ``st``."""
    content = st.turn.content
    if isinstance(content, str):
        return len(content)
    out = 0
    for b in content:
        if isinstance(b, TextBlock | ToolResultBlock):
            out = max(out, len(b.text))
        elif isinstance(b, ToolUseBlock):
            out = max([out, *map(len, _strings(b.input))])
    return out


def cut_turn(st: StoredTurn, keep: int) -> StoredTurn:
    """``st`` with each text longer than ``keep`` characters cut to ``keep`` (head + tail) around a marker.

    The texts are a string content, text blocks, tool results' text and the string values of a
    tool call's input; roles, call and result ids, keys, images and thinking are left as they
    are, so every call still pairs with its results. A turn with nothing to cut is returned itself.
    """
    content = st.turn.content
    if isinstance(content, str):
        if len(content) <= keep:
            return st
        return dataclasses.replace(st, turn=dataclasses.replace(st.turn, content=_cut_text(content, keep, st.id)))
    blocks = tuple(_cut_block(b, keep, st.id) for b in content)
    if all(a is b for a, b in zip(blocks, content, strict=True)):
        return st
    return dataclasses.replace(st, turn=dataclasses.replace(st.turn, content=blocks))


def is_cut(st: StoredTurn) -> bool:
    """Whether ``st`` holds a text cut by :func:`cut_turn`."""
    return _MARK in st.turn.text


def fit_turn(st: StoredTurn, limit: int, cost: Callable[[StoredTurn], int]) -> StoredTurn | None:
    """The least-cut form of ``st`` whose ``cost`` is at most ``limit``.

    ``st`` itself when it fits; else its texts cut to the most characters each
    (the same for every text of the turn) that fit. ``None`` when nothing
    fits: nothing long enough to cut, or what cannot be cut (ids, keys, short
    texts) is alone larger than ``limit``. Deterministic in ``(st, limit, cost)``.
    """
    if cost(st) <= limit:
        return st
    longest = _longest(st)
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
