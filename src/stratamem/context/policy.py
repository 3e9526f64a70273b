"""What a context policy is: its sources, its allocation of the budget, its special rules.

A :class:`Policy` answers two questions for the assembly. *What competes for
a place?* — :meth:`Policy.gather` reads the candidates from a memory's parts
(:mod:`stratamem.context.gather`): the fixed blocks, the recent window,
recalled turns, summaries, memory items. *How is the budget shared?* — the
shares of the window, recalled history and summaries (:meth:`Policy.allocate`,
sections with nothing to show giving theirs away), how much room recalled
history gets (:meth:`Policy.recall_room`) and in what order summaries draw
(:meth:`Policy.fill_summaries`). The steps that use the answers are the same
for every policy (:func:`stratamem.context.assemble.assemble`).

The defaults here are the general rule (``state_first`` uses them unchanged);
each policy of :mod:`stratamem.context.policies` overrides what it does
differently, and is registered there under its name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, ClassVar

from .assembly import Allocation, Assembly
from .gather import Parts, Request, fixed_blocks, item_units, recall_turns, recent_turns
from .summaries import SummarySection
from .units import Candidates, Recalled, SummaryUnit
from .window import Window, is_follow_up

if TYPE_CHECKING:
    from ..records.manifests import Context

__all__ = ["Policy"]


class Policy:
    """A context policy: its name, the sources it draws on and how it shares the budget.

    Subclasses set the class attributes and override the hooks they change.
    """

    name: ClassVar[str] = ""
    """The name callers give (``policy="hybrid"``) and the manifest records."""
    description: ClassVar[str] = ""
    """One line for help texts and docs."""
    window: ClassVar[bool] = True
    """Draws a recent window (``recall``: no window; then nothing counts as a follow-up either)."""
    recall_first: ClassVar[bool] = False
    """Recalled history takes what it needs before summaries (a verbatim turn is evidence, a
    summary only points at it); otherwise it keeps to its share of history and summaries."""
    defer_extracted_items: ClassVar[bool] = False
    """A memory item extracted from turns waits until the recalled turns are packed (it would
    only restate them if they are shown); items added as knowledge still go first."""
    layout_window: ClassVar[str] = "session"
    """What the cache layout anchors its window in (:mod:`stratamem.context.layout`): the
    ``session``'s turns, or the policy's own window ``candidates`` when those are complete from
    their start (``topics``: the current topic)."""

    def __repr__(self) -> str:
        return f"<policy {self.name}>"

    # --- sources ----------------------------------------------------------------------

    def gather(self, parts: Parts, request: Request) -> Candidates:
        """The candidates for one context: window, recalled turns, fixed blocks, summaries, items.

        A follow-up ("go on", "make it shorter") says nothing about which
        history it needs, and with vectors every turn scores a little: the
        thread is in the recent window, so such a query recalls nothing.
        """
        notes: list[str] = []
        recent = recent_turns(parts, request.session) if self.window else iter(())
        query = request.query
        follow_up = bool(query) and self.window and bool(request.session) and is_follow_up(query or "")
        if follow_up:
            notes.append("follow-up query: nothing recalled, the recent window holds the thread")
        recalled: list[Recalled] = []
        vector_text = None  # what turn recall embedded: summaries and items rank with the same vector
        if query and query.strip() and not follow_up:
            recalled = recall_turns(parts, query, request.budget, request.now, notes)
            vector_text = parts.recall_index().vector_text(query)
        fixed = fixed_blocks(parts, request.session, request.project, request.system_prompts)
        pyramid_on = parts.config.pyramid.enabled
        summaries, bulks = self.summary_sources(parts, query, vector_text) if pyramid_on else ([], [])
        items = item_units(parts, query, request.session, vector_text)
        return Candidates(
            fixed=fixed, recent=recent, recalled=recalled, summaries=summaries, bulks=bulks, items=items, notes=notes
        )

    def summary_sources(
        self, parts: Parts, query: str | None, vector_text: str | None = None
    ) -> tuple[list[SummaryUnit], list[SummaryUnit]]:
        """``(summaries, bulks)`` from the pyramid: by default its summaries ranked for ``query``, no bulks
        (``vector_text``: what to embed instead of ``query``, see :meth:`.SummaryIndex.rank`)."""
        return parts.summary_index.rank(parts.pyramid(), query, vector_text=vector_text), []

    def annotate(self, ctx: Context, cands: Candidates, parts: Parts) -> Context:
        """The assembled context with anything the policy adds to its manifest (default: nothing)."""
        return ctx

    # --- allocation ---------------------------------------------------------------------

    def present(self, cands: Candidates) -> tuple[bool, bool]:
        """Whether the history and the bulk sections have anything to show (else they give their shares away)."""
        return bool(cands.recalled) or bool(cands.items), bool(cands.summaries)

    def allocate(self, asm: Assembly, shares: tuple[float, float, float], cands: Candidates) -> Allocation:
        """Shares of what the fixed blocks left (``asm.left``) for the window, recalled history and
        summaries; empty sections give theirs away."""
        current, history, bulk = shares
        has_history, has_bulk = self.present(cands)
        if not self.window:
            current = 0.0
        if not has_history:
            history = 0.0
        if not has_bulk:
            bulk = 0.0
        total = current + history + bulk
        if total == 0:
            # Nothing but the window to show: it takes everything (no window: nothing does).
            current, history, bulk = (1.0, 0.0, 0.0) if self.window else (0.0, 0.0, 0.0)
        else:
            current, history, bulk = current / total, history / total, bulk / total
        return Allocation(current, history, bulk, asm.left.left)

    def size_window(self, asm: Assembly, window: Window, alloc: Allocation, recalled: Sequence[Recalled]) -> None:
        """Adjust the filled window (newest first) before it is placed (default: keep it)."""

    def recall_room(self, asm: Assembly, alloc: Allocation, cands: Candidates, strict: bool) -> int:
        """Tokens memory items and recalled turns may take.

        ``strict`` (:attr:`recall_first`, or a query about the past): all that
        is left; otherwise recalled history's part of what is left, beside the
        summaries' (summaries get the rest either way).
        """
        left = asm.left.left
        if strict:
            return left
        return int(left * alloc.history / (alloc.history + alloc.bulk)) if alloc.history else 0

    def reserved_turns(self, alloc: Allocation, cands: Candidates) -> set[int]:
        """Turns a later section shows in full, so recalling them would show them twice (default: none)."""
        return set()

    def fill_summaries(
        self, section: SummarySection, cands: Candidates, alloc: Allocation
    ) -> list[tuple[SummaryUnit, int]]:
        """Let the summaries draw on what is left, in order; the units left out for lack of room, with their cost."""
        return section.take(cands.summaries, section.room())
