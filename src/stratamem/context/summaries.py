"""Summaries of older history: the last section to draw on the budget.

:func:`take_summaries` is the assembly step after recalled history. The
policy decides which units draw on which room, and in what order
(:meth:`~stratamem.context.policy.Policy.fill_summaries`); each unit goes
through :meth:`SummarySection.take`: a summary that only restates turns already
shown, or overlaps a summary already shown, is left out; one that wins a slot
is replaced by its verbatim turns when they fit what is left (lazy expansion,
:func:`expansion`); its sentences already shown are cut. A segment with no
summary yet (hot, summaries deferred) that is too big to show whole is
degraded rather than left out (:func:`degraded`: an excerpt, a summary made on
demand, a shorter excerpt), so a large topic never vanishes from the prompt.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..errors import StratamemError
from ..records import StoredTurn
from ..records.manifests import ContextItem, NearMiss
from ..retrieve.render import CompactRenderer
from ..tokens import Tokenizer
from .assembly import Allocation, Assembly, Budget
from .gather import truncated
from .units import Candidates, SummaryUnit

if TYPE_CHECKING:
    from .policy import Policy

__all__ = ["SUMMARY_TITLE", "SummarySection", "degraded", "expansion", "take_summaries"]

SUMMARY_TITLE = "## Summaries of older conversation"

_DEFERRED = ("", "", "", ())
"""What :meth:`SummarySection._shown_as` answers for a unit left for a later, roomier pass."""

_MIN_EXCERPT_CHARS = 120
"""The shortest per-message cut :func:`degraded` tries before it gives up on a unit."""


class SummarySection:
    """The summaries section as it fills; ``included`` are the turn ids already shown verbatim."""

    def __init__(self, asm: Assembly, included: set[int]) -> None:
        self.asm = asm
        self.included = included
        self.header = asm.tokenizer.count(SUMMARY_TITLE) + 2
        self.lines: list[str] = []
        self.entries: list[ContextItem] = []
        self.summarized: set[int] = set()
        self.as_summary: set[int] = set()  # turns under the units shown as summaries (not expanded)

    def take(
        self, units: Sequence[SummaryUnit], cap: Budget, overlap: bool = False, defer: bool = False
    ) -> list[tuple[SummaryUnit, int]]:
        """Take what fits ``cap``; return the units left out for lack of room, with their cost.

        ``overlap``: a unit may cover turns of a unit already shown expanded (seed 000's
        macro summaries give the broad view around the warm chunks shown in full), never
        those of another summary. ``defer``: a unit with no summary yet whose turns do not
        fit ``cap`` is left out (for a later pass with more room) instead of being degraded.
        """
        left_out: list[tuple[SummaryUnit, int]] = []
        for su in units:
            if self._repeats(su, overlap):
                continue
            first = not self.lines
            framing = (self.header + self.asm.opening()) if first else 0
            placed = self._shown_as(su, cap.left - framing, defer)
            if placed is None:
                continue
            if placed is _DEFERRED:
                left_out.append((su, su.expanded_tokens + framing))
                continue
            text, reason, fmt_name, duplicate_of = placed
            cost = self.asm.tokenizer.count(text) + 1 + framing
            if cap.take(cost):
                self._place(su, text, cost, reason, fmt_name, duplicate_of)
            else:
                left_out.append((su, cost))
        return left_out

    def _repeats(self, su: SummaryUnit, overlap: bool) -> bool:
        """Leave ``su`` out (with a near-miss) when its turns are shown already, verbatim or summarized."""
        covered = set(su.turn_ids)
        if covered and covered <= self.included:
            self.asm.misses.append(
                NearMiss(su.id, su.kind, 0, "restates_included_turns", su.score, duplicate_of=f"turn:{min(covered)}")
            )
            return True
        if covered & (self.as_summary if overlap else self.summarized):
            # A consolidation and its own child segment say the same thing twice.
            holder = next(i.id for i in self.entries if covered & set(i.turn_ids))
            self.asm.misses.append(
                NearMiss(su.id, su.kind, 0, "overlaps_included_summary", su.score, duplicate_of=holder)
            )
            return True
        return False

    def _shown_as(
        self, su: SummaryUnit, room: int, defer: bool = False
    ) -> tuple[str, str, str, tuple[str, ...]] | None:
        """``(text, reason, format, duplicate_of)`` the unit would be shown as, or ``None`` (near-miss noted).

        Expanded to its turns when they fit ``room`` and none of them is shown
        already (that would repeat them); its sentences already shown are cut.
        A unit with no summary yet that does not fit whole is degraded
        (:func:`degraded`), or :data:`_DEFERRED` with ``defer``.
        """
        asm = self.asm
        shown_turns = bool(set(su.turn_ids) & self.included)
        expanded = None if shown_turns else expansion(su, room, asm.tokenizer, asm.notes)
        if su.expand_only and not expanded:
            if defer:
                return _DEFERRED
            reduced = degraded(su, room, asm.tokenizer, asm.notes, turns=not shown_turns)
            if reduced is None:
                asm.misses.append(NearMiss(su.id, su.kind, su.expanded_tokens, "over_budget", su.score))
                return None
            text, reason, fmt_name = reduced
        else:
            text, reason, fmt_name = (expanded, "expanded", "text") if expanded else (su.text, "summary", "summary")
        # A summary never restates what is shown: its sentences already shown go.
        cut = asm.shown.strip(text)
        if cut.removed and not cut.facts_left:
            asm.misses.append(
                NearMiss(
                    su.id,
                    su.kind,
                    0,
                    "duplicate",
                    su.score,
                    duplicate_of=cut.duplicate_of[0] if cut.duplicate_of else su.id,
                )
            )
            return None
        return cut.text, reason, fmt_name, cut.duplicate_of

    def _place(
        self, su: SummaryUnit, text: str, cost: int, reason: str, fmt_name: str, duplicate_of: tuple[str, ...]
    ) -> None:
        asm = self.asm
        asm.left.left -= cost
        self.lines.append(text)
        self.entries.append(
            ContextItem(
                su.id,
                su.kind,
                cost,
                reason,
                tier=su.tier,
                format=fmt_name,
                score=su.score,
                turn_ids=su.turn_ids,
                duplicate_of=duplicate_of,
            )
        )
        covered = set(su.turn_ids)
        self.summarized.update(covered)
        asm.shown.add(su.id, text)
        if reason == "summary":
            self.as_summary.update(covered)

    def room(self) -> Budget:
        """A cap of everything still left in the budget."""
        return Budget(self.asm.left.left)


def take_summaries(asm: Assembly, cands: Candidates, alloc: Allocation, included: set[int], policy: Policy) -> None:
    """Place summaries in the policy's order; what did not fit is a near-miss (``over_budget``)."""
    section = SummarySection(asm, included)
    left_out = policy.fill_summaries(section, cands, alloc)
    asm.misses.extend(NearMiss(su.id, su.kind, cost, "over_budget", su.score) for su, cost in left_out)
    if section.lines:
        asm.place(SUMMARY_TITLE + "\n" + "\n".join(section.lines), {i.id for i in section.entries})
        asm.items.extend(section.entries)


def degraded(
    su: SummaryUnit, room: int, tokenizer: Tokenizer, notes: list[str], *, turns: bool = True
) -> tuple[str, str, str] | None:
    """A segment with no summary yet, too big to show whole, made to fit ``room``: ``(text, reason, format)``.

    Seed 002's escalation, in order: its turns with each message cut at
    ``excerpt_chars`` characters and marked (step 1, reason ``excerpt``); a
    summary made now from its turns by the local summarizer (step 2, reason
    ``summary_on_demand``; not stored: the segment is summarized for good when
    it is demoted); its turns cut shorter, halving the cut down to
    :data:`_MIN_EXCERPT_CHARS`. ``None`` when not even that fits. ``turns``:
    False when some of its turns are shown already, so only the summary may
    stand for it. A failure to read the turns or to summarize them is a note.
    """
    read: list[StoredTurn] = []
    if turns and su.expand is not None and su.excerpt_chars > 0:
        try:
            read = sorted(su.expand(), key=lambda t: t.id)
        except StratamemError as exc:
            notes.append(f"{su.id} not excerpted: {type(exc).__name__}: {exc}")

    def excerpt(limit: int) -> str | None:
        renderer = CompactRenderer()
        lines = [su.text.split("]", 1)[0] + "] (excerpt)"]
        lines += [renderer.line(t) for t in (truncated(st, limit) for st in read)]
        text = "\n".join(lines)
        return text if tokenizer.count(text) + 1 <= room else None

    if read and (text := excerpt(su.excerpt_chars)) is not None:
        return text, "excerpt", "text"
    if su.summarize is not None:
        try:
            line = su.summarize()
        except StratamemError as exc:
            notes.append(f"{su.id} not summarized on demand: {type(exc).__name__}: {exc}")
        else:
            if line and tokenizer.count(line) + 1 <= room:
                return line, "summary_on_demand", "summary"
    limit = su.excerpt_chars // 2
    while read and limit >= _MIN_EXCERPT_CHARS:
        if (text := excerpt(limit)) is not None:
            return text, "excerpt", "text"
        limit //= 2
    return None


def expansion(su: SummaryUnit, room: int, tokenizer: Tokenizer, notes: list[str]) -> str | None:
    """The unit's verbatim turns as compact lines, when they exist and fit ``room``.

    ``expanded_tokens`` (the turns' message tokens, which their compact lines
    rarely exceed) screens out units too big to expand before anything is
    fetched. A unit whose turns cannot be read is shown as its summary, and a
    note says why.
    """
    if su.expand is None or su.expanded_tokens <= 0 or su.expanded_tokens > room:
        return None
    try:
        # System turns are instructions, shown (their own session's only) in the fixed section.
        turns = [st for st in su.expand() if st.role != "system"]
    except StratamemError as exc:
        notes.append(f"{su.id} not expanded: {type(exc).__name__}: {exc}")
        return None
    if not turns:
        return None
    renderer = CompactRenderer()
    lines = [su.text.split("]", 1)[0] + "] (expanded)"]
    lines += [renderer.line(st) for st in sorted(turns, key=lambda t: t.id)]
    text = "\n".join(lines)
    return text if tokenizer.count(text) + 1 <= room else None
