"""Rendering recalled turns as text and packing them into a token budget.

A recalled turn is shown verbatim. What varies is the framing around it:
:class:`PlainRenderer` writes each turn as :func:`stratamem.context.turn_line`
does (timestamp and speaker on every line); :class:`CompactRenderer` writes
one date header per session and then ``Speaker: text`` lines, so more
evidence fits the same budget. :func:`pack_turns` walks a ranking and keeps
turns while the rendered text stays within the budget, counted exactly.
Ranking itself lives in :mod:`stratamem.retrieve.engine`.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from ..context import turn_line
from ..errors import BudgetError
from ..records import StoredTurn
from ..tokens import Tokenizer

__all__ = ["CompactRenderer", "Packed", "PlainRenderer", "TurnRenderer", "pack_turns"]


class TurnRenderer(Protocol):
    """How a set of kept turns becomes text: optional group headers plus one line per turn."""

    def group(self, turn: StoredTurn) -> Hashable | None:
        """Key of the header a turn sits under (``None``: no headers)."""

    def header(self, turn: StoredTurn) -> str:
        """Header line for the group of ``turn``."""

    def line(self, turn: StoredTurn) -> str:
        """The turn's own line (must hold its full text)."""


class PlainRenderer:
    """One self-describing line per turn: ``[2023-05-08 13:56] Caroline: text``."""

    def group(self, turn: StoredTurn) -> Hashable | None:
        """No headers."""
        return None

    def header(self, turn: StoredTurn) -> str:
        """Unused (no groups)."""
        return ""

    def line(self, turn: StoredTurn) -> str:
        """:func:`stratamem.context.turn_line` of the turn."""
        return turn_line(turn.turn)


class CompactRenderer:
    """A ``## 8 May 2023`` header per session, then ``Speaker: text`` lines.

    The date is the session's (its first kept turn's timestamp day), which is
    what questions about time need; the clock time is dropped as noise.
    """

    def group(self, turn: StoredTurn) -> Hashable | None:
        """Turns group by session."""
        return turn.session

    def header(self, turn: StoredTurn) -> str:
        """The session date."""
        ts = turn.timestamp
        return f"## {ts.day} {ts:%B %Y}"

    def line(self, turn: StoredTurn) -> str:
        """``Speaker: text`` (newlines inside the text are kept)."""
        return f"{turn.turn.name or turn.role}: {turn.text}"


def render_turns(turns: Iterable[StoredTurn], renderer: TurnRenderer) -> str:
    """Render turns in stored order, with a header whenever the group changes."""
    lines: list[str] = []
    current: object = object()
    for st in sorted(turns, key=lambda t: t.id):
        key = renderer.group(st)
        if key is not None and key != current:
            lines.append(renderer.header(st))
        current = key
        lines.append(renderer.line(st))
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class Packed:
    """Turns kept within a budget and their rendered text."""

    turns: tuple[StoredTurn, ...]
    """Kept turns in ranking order."""
    text: str
    """The rendered context (stored order)."""
    tokens: int
    """Exact tokens of :attr:`text`."""
    skipped: tuple[int, ...]
    """Ids of ranked turns that did not fit."""
    costs: Mapping[int, int] = field(default_factory=dict)
    """Tokens each looked-at turn's line costs (with its newline), by turn id."""


def pack_turns(ranked: Iterable[StoredTurn], budget: int, tokenizer: Tokenizer,
               renderer: TurnRenderer | None = None, *, max_candidates: int | None = None) -> Packed:
    """Walk a ranking and keep each turn whose rendering still fits ``budget``.

    A turn that does not fit is skipped and the walk goes on, so a long turn
    does not block shorter ones below it. Each addition is charged its line
    plus a newline, plus a header when it opens a new group; the result is
    then counted exactly and trimmed from the lowest rank should the sum ever
    undercount, so the budget is never exceeded.

    Args:
        ranked: Turns, best first (duplicates are ignored).
        budget: Token budget for the rendered text.
        tokenizer: The exact tokenizer the budget is counted in.
        renderer: Framing (default: :class:`CompactRenderer`).
        max_candidates: Stop after looking at this many ranked turns.

    Raises:
        BudgetError: ``budget`` is not a positive integer.
    """
    if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:
        raise BudgetError(f"budget must be a positive integer, got {budget!r}")
    renderer = renderer or CompactRenderer()
    kept: list[StoredTurn] = []
    skipped: list[int] = []
    seen: set[int] = set()
    groups: set[Hashable] = set()
    headers: dict[Hashable, int] = {}
    costs: dict[int, int] = {}
    used = -1  # the first line has no newline before it
    for n, st in enumerate(ranked):
        if max_candidates is not None and n >= max_candidates:
            break
        if st.id in seen:
            continue
        seen.add(st.id)
        if budget - used < 2:
            skipped.append(st.id)  # full: no line costs less than one token and its newline
            continue
        key = renderer.group(st)
        cost = costs[st.id] = tokenizer.count(renderer.line(st)) + 1
        if key is not None and key not in groups:
            if key not in headers:
                headers[key] = tokenizer.count(renderer.header(st)) + 1
            cost += headers[key]
        if used + cost > budget:
            skipped.append(st.id)
            continue
        used += cost
        kept.append(st)
        if key is not None:
            groups.add(key)
    text = render_turns(kept, renderer)
    tokens = tokenizer.count(text) if kept else 0
    while kept and tokens > budget:
        skipped.append(kept.pop().id)
        text = render_turns(kept, renderer)
        tokens = tokenizer.count(text) if kept else 0
    return Packed(tuple(kept), text, tokens, tuple(skipped), costs)


