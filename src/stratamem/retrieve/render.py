"""Rendering recalled turns as text and packing them into a token budget.

A recalled turn is shown verbatim. What varies is the framing around it:
:class:`PlainRenderer` writes each turn as :func:`stratamem.text.turn_line`
does (timestamp and speaker on every line); :class:`CompactRenderer` writes
one date header per session and then ``Speaker: text`` lines, so more
evidence fits the same budget. :func:`pack_turns` walks a ranking and keeps
turns while the rendered text stays within the budget, counted exactly; a
turn larger than a share of the budget is shown as an excerpt (the passage
that matches the query, :mod:`stratamem.retrieve.excerpt`) rather than
spending the budget or being skipped, and a line may carry a label (e.g.
``(newer)`` from :mod:`stratamem.retrieve.updates`). Ranking itself lives in
:mod:`stratamem.retrieve.engine`.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from ..errors import BudgetError
from ..records import StoredTurn
from ..text import turn_line
from ..tokens import Tokenizer
from .excerpt import Excerpt, excerpt
from .lexical import analyze

__all__ = ["LONG_SHARE", "CompactRenderer", "Packed", "PlainRenderer", "TurnRenderer", "pack_turns", "render_turns"]

LONG_SHARE = 0.25
"""A turn whose line costs more than this share of the packing budget is shown as an excerpt."""
EXCERPT_SHARE = 0.125
"""Tokens an excerpt may take, as a share of the packing budget (at least :data:`MIN_EXCERPT`,
at most :data:`MAX_EXCERPT`)."""
MAX_EXCERPT = 192
"""Largest cap an excerpt is given: the passage that answers is a few sentences, and a large
budget is better spent on more turns than on longer excerpts."""
MIN_EXCERPT = 48
"""Smallest cap an excerpt is given (a sentence or two)."""
MIN_PASSAGE = 12
"""Fewest tokens of passage (after the speaker and the excerpt mark) worth showing."""


class TurnRenderer(Protocol):
    """How a set of kept turns becomes text: optional group headers plus one line per turn."""

    def group(self, turn: StoredTurn) -> Hashable | None:
        """Key of the header a turn sits under (``None``: no headers)."""

    def header(self, turn: StoredTurn) -> str:
        """Header line for the group of ``turn``."""

    def line(self, turn: StoredTurn, text: str | None = None) -> str:
        """The turn's own line: its full text, or ``text`` in its place (an excerpt, a labelled line)."""


class PlainRenderer:
    """One self-describing line per turn: ``[2023-05-08 13:56] Caroline: text``."""

    def group(self, turn: StoredTurn) -> Hashable | None:
        """No headers."""
        return None

    def header(self, turn: StoredTurn) -> str:
        """Unused (no groups)."""
        return ""

    def line(self, turn: StoredTurn, text: str | None = None) -> str:
        """:func:`stratamem.text.turn_line` of the turn (``text`` in place of its own)."""
        return turn_line(turn.turn, text)


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

    def line(self, turn: StoredTurn, text: str | None = None) -> str:
        """``Speaker: text`` (newlines inside the text are kept; ``text`` in place of the turn's)."""
        return f"{turn.turn.name or turn.role}: {turn.text if text is None else text}"


def render_turns(turns: Iterable[StoredTurn], renderer: TurnRenderer, texts: Mapping[int, str] | None = None) -> str:
    """Render turns in stored order, with a header whenever the group changes.

    ``texts`` replaces the text of the turns it names (excerpts, labelled lines).
    """
    texts = texts or {}
    lines: list[str] = []
    current: object = object()
    for st in sorted(turns, key=lambda t: t.id):
        key = renderer.group(st)
        if key is not None and key != current:
            lines.append(renderer.header(st))
        current = key
        lines.append(renderer.line(st, texts.get(st.id)))
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
    """Tokens each looked-at turn's line costs (with its newline), by turn id; for a
    turn shown as an excerpt, the excerpt's line."""
    excerpts: Mapping[int, Excerpt] = field(default_factory=dict)
    """Kept turns shown as an excerpt, by turn id (tokens shown and total inside)."""
    texts: Mapping[int, str] = field(default_factory=dict)
    """Text shown in place of a kept turn's own (excerpts and labels), by turn id."""


def excerpt_label(ex: Excerpt) -> str:
    """``(excerpt: 180 of 1,650 tokens)``: how an excerpt announces itself in the text."""
    return f"(excerpt: {ex.tokens:,} of {ex.total_tokens:,} tokens)"


def pack_turns(
    ranked: Iterable[StoredTurn],
    budget: int,
    tokenizer: Tokenizer,
    renderer: TurnRenderer | None = None,
    *,
    max_candidates: int | None = None,
    query: str | None = None,
    labels: Mapping[int, str] | None = None,
    long_share: float = LONG_SHARE,
) -> Packed:
    """Walk a ranking and keep each turn whose rendering still fits ``budget``.

    A turn that does not fit is skipped and the walk goes on, so a long turn
    does not block shorter ones below it. A turn whose line costs more than
    ``long_share`` of the budget is shown as an excerpt instead: the passage
    best matching ``query`` (its opening when no sentence matches; no
    excerpts without query words), at most
    :data:`EXCERPT_SHARE` of the budget, announced by :func:`excerpt_label`.
    Each addition is charged its line plus a newline, plus a header when it
    opens a new group; the result is then counted exactly and trimmed from the
    lowest rank should the sum ever undercount, so the budget is never exceeded.

    Args:
        ranked: Turns, best first (duplicates are ignored).
        budget: Token budget for the rendered text.
        tokenizer: The exact tokenizer the budget is counted in.
        renderer: Framing (default: :class:`CompactRenderer`).
        max_candidates: Stop after looking at this many ranked turns.
        query: What the excerpts of long turns should match.
        labels: A short label put before a turn's text, by turn id (``(newer)``).
        long_share: Share of the budget above which a turn is excerpted
            (``1`` or more: never).

    Raises:
        BudgetError: ``budget`` is not a positive integer.
    """
    if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:
        raise BudgetError(f"budget must be a positive integer, got {budget!r}")
    renderer = renderer or CompactRenderer()
    labels = labels or {}
    terms = analyze(query) if query else []
    # A turn of a sentence or two is never cut, however small the budget.
    # Without query words there is no passage to prefer: long turns are skipped as before.
    long_line = max(MIN_EXCERPT, int(budget * long_share)) if long_share < 1 and terms else None
    excerpt_cap = min(MAX_EXCERPT, max(MIN_EXCERPT, int(budget * EXCERPT_SHARE)))
    texts: dict[int, str] = {}
    excerpts: dict[int, Excerpt] = {}
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
        label = labels.get(st.id)
        text = f"{label} {st.text}" if label else None
        line = costs[st.id] = tokenizer.count(renderer.line(st, text)) + 1
        header = 0
        if key is not None and key not in groups:
            if key not in headers:
                headers[key] = tokenizer.count(renderer.header(st)) + 1
            header = headers[key]
        ex = None
        if long_line is not None and line > long_line:
            ex, text, line = _excerpted(
                st, label, terms, min(excerpt_cap, budget - used - header), tokenizer, renderer, text, line
            )
            costs[st.id] = line
        if used + line + header > budget:
            skipped.append(st.id)
            continue
        used += line + header
        if text is not None:
            texts[st.id] = text
        if ex is not None:
            excerpts[st.id] = ex
        kept.append(st)
        if key is not None:
            groups.add(key)
    text = render_turns(kept, renderer, texts)
    tokens = tokenizer.count(text) if kept else 0
    while kept and tokens > budget:
        gone = kept.pop().id
        skipped.append(gone)
        texts.pop(gone, None)
        excerpts.pop(gone, None)
        text = render_turns(kept, renderer, texts)
        tokens = tokenizer.count(text) if kept else 0
    return Packed(tuple(kept), text, tokens, tuple(skipped), costs, excerpts, texts)


def _excerpted(
    st: StoredTurn,
    label: str | None,
    terms: list[str],
    room: int,
    tokenizer: Tokenizer,
    renderer: TurnRenderer,
    text: str | None,
    line: int,
) -> tuple[Excerpt | None, str | None, int]:
    """An excerpt of ``st`` whose line (label, speaker and newline included) fits ``room``.

    Returns the excerpt, the text shown and the line's cost; the full line as
    given when no excerpt fits (the caller then skips the turn).
    """
    prefix = f"{label} " if label else ""
    # What the line costs around the passage: speaker, label, excerpt mark (at its widest), newline.
    frame = tokenizer.count(renderer.line(st, f"{prefix}(excerpt: 999,999 of 999,999 tokens) ")) + 1
    if room - frame < MIN_PASSAGE:
        return None, text, line  # no room for a useful passage: do not split the text at all
    ex = excerpt(st.text, terms, room - frame, tokenizer)
    if ex is None or (ex.start, ex.end) == (0, len(st.text)) or ex.tokens >= ex.total_tokens:
        return None, text, line  # nothing fits, or the "excerpt" would be the whole turn
    shown = f"{prefix}{excerpt_label(ex)} {ex.text}"
    return ex, shown, tokenizer.count(renderer.line(st, shown)) + 1
