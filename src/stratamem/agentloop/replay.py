"""Replays after a restart: recognise messages that are already stored, and rebuild stored ones.

An agent that restarts either feeds its history back (its own copy of the
message list, or :meth:`~stratamem.agentloop.Compactor.resume_messages`) or
starts over. :class:`ReplayMatcher` lets :meth:`~stratamem.agentloop.Compactor.sync`
tell the first case apart: messages that repeat a run of stored turns — same
role, same content, same order — take the stored turns' ids instead of being
stored again. A tool result that pruning has trimmed or cleared in the live list
still matches the full stored result it came from.

:func:`stored_messages` renders stored turns back into one provider's message
shape (the inverse used by ``resume_messages``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import InvalidTurnError
from ..ingest import parse_messages
from ..providers import to_anthropic, to_openai
from ..records import StoredTurn, TextBlock, ToolResultBlock, Turn
from .pruning import CLEARED_PLACEHOLDER, trim_marker

__all__ = ["ReplayMatcher", "same_turn", "stored_messages"]

_MARKER = re.compile(r"\[\.\.\. trimmed: kept (\d+) head \+ (\d+) tail of (\d+) characters;")


def stored_messages(turns: Sequence[StoredTurn], provider: str) -> list[dict[str, Any]]:
    """Stored turns as ``provider`` messages (``openai`` or ``anthropic``), one message per turn.

    Anthropic system turns are left out (Anthropic takes the system prompt
    outside the list); thinking blocks are dropped for OpenAI, which has none.
    """
    plain = [t.turn for t in turns]
    if provider == "openai":
        return to_openai(plain)
    return to_anthropic([t for t in plain if t.role != "system"])[1]


def _blocks(turn: Turn) -> list[Any]:
    # A string and one text block are the same message; empty text parts carry nothing.
    return [b for b in turn.blocks if not (isinstance(b, TextBlock) and not b.text)]


def _pruned_from(live: str, full: str) -> bool:
    """Whether ``live`` is what pruning makes of ``full`` (cleared, or trimmed to head + tail)."""
    if live == CLEARED_PLACEHOLDER:
        return True
    m = _MARKER.search(live)
    if m is None:
        return False
    head, tail, total = (int(g) for g in m.groups())
    if total != len(full):
        return False
    return live == full[:head] + trim_marker(head, tail, total) + (full[-tail:] if tail else "")


def same_turn(live: Turn, stored: Turn) -> bool:
    """Whether ``live`` repeats ``stored``: role, name and blocks equal (timestamps ignored).

    Tool results may differ in one way: the live one may be the pruned form of
    the stored one (:func:`~stratamem.agentloop.prune_tool_results` runs on the
    live list after it was stored).
    """
    if live.role != stored.role or live.name != stored.name:
        return False
    a, b = _blocks(live), _blocks(stored)
    if a == b:
        return True
    if live.role != "tool" or len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if x == y:
            continue
        if not (isinstance(x, ToolResultBlock) and isinstance(y, ToolResultBlock)):
            return False
        if x.tool_use_id != y.tool_use_id or x.is_error != y.is_error or x.has_image or y.has_image:
            return False
        if not _pruned_from(x.text, y.text):
            return False
    return True


class ReplayMatcher:
    """Matches newly seen messages against a session's stored turns, in order.

    Args:
        stored: The session's stored turns, oldest first.
        provider: Shape of the live messages (``openai`` or ``anthropic``).
    """

    def __init__(self, stored: Sequence[StoredTurn], provider: str) -> None:
        self.stored = list(stored)
        self.provider = provider
        self.pos: int | None = None
        self.done = not self.stored

    def _run(self, turns: Sequence[Turn], start: int) -> int:
        n = 0
        while n < len(turns) and start + n < len(self.stored) and same_turn(turns[n], self.stored[start + n].turn):
            n += 1
        return n

    def match(
        self, new: list[tuple[int, Mapping[str, Any]]]
    ) -> tuple[list[tuple[tuple[int, Mapping[str, Any]], StoredTurn]], list[tuple[int, Mapping[str, Any]]]]:
        """Split ``new`` (index, message) pairs into replayed ones (with their stored turns) and the rest.

        The first call looks for the stored run the messages start in (the
        longest match; the latest on a tie, so a resumed tail wins over an older
        repetition); later calls continue where it ended. Once a message
        differs, or the stored turns run out, matching stops for good.
        """
        if self.done or not new:
            return [], new
        try:
            turns = parse_messages([dict(m) for _, m in new], self.provider)
        except InvalidTurnError:
            self.done = True  # storing them will raise the same error, with nothing stored
            return [], new
        if len(turns) != len(new):
            self.done = True  # not one turn per message: cannot align, store as usual
            return [], new
        if self.pos is None:
            best, best_len = None, 0
            for p in range(len(self.stored)):
                if same_turn(turns[0], self.stored[p].turn):
                    n = self._run(turns, p)
                    if n >= best_len:
                        best, best_len = p, n
            if best is None:
                self.done = True
                return [], new
            self.pos, n = best, best_len
        else:
            n = self._run(turns, self.pos)
        matched = [(new[k], self.stored[self.pos + k]) for k in range(n)]
        self.pos += n
        if n < len(new) or self.pos >= len(self.stored):
            self.done = True
        return matched, new[n:]
