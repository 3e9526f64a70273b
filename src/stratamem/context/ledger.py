"""The summary ledger: older history as settled summaries, oldest first, the same from call to call.

The cache layout's third layer (:mod:`stratamem.context.layout`). Where the
policies rank summaries for each query (so the set shown changes every call),
the ledger shows every summarized node whose turns all lie before the recent
window's anchor, at the coarsest level summarized (a consolidation stands for
its children), in the order the conversation happened, each rendered by
:func:`~stratamem.context.sources.summary_line` (nothing query- or tier-dependent).
When it outgrows its room, its start moves in steps (:func:`~stratamem.context.anchor.run_start`),
so it changes only at its end until then.

:func:`ledger_entries` reads the candidates from a memory's parts (the
pyramid's nodes, through the memory's :class:`~stratamem.context.sources.SummaryIndex`);
:func:`select_ledger` is the pure choice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..tokens import Tokenizer
from .anchor import run_start
from .units import SummaryUnit

if TYPE_CHECKING:
    from .gather import Parts

__all__ = ["LEDGER_STEP", "LedgerEntry", "ledger_entries", "select_ledger"]

LEDGER_STEP = 0.3
"""The ledger's start moves in steps of this share of its room (it drops about a third of its
oldest lines at once, then grows at its end again)."""


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """A summarized pyramid node that the ledger may show."""

    unit: SummaryUnit
    """The node as a summary unit: its line and the turns it covers."""
    level: int
    """1 for a segment, 2 and up for consolidations."""
    first_turn_id: int
    """Lowest turn id it covers."""
    last_turn_id: int
    """Highest turn id it covers."""
    settled_turn: int | None = None
    """The namespace's newest turn id when its summary was stored (``None``: before that was recorded)."""

    @property
    def node_id(self) -> int:
        """The node's id."""
        return int(self.unit.id.split(":", 1)[1])


def ledger_entries(parts: Parts) -> list[LedgerEntry]:
    """Every node of the namespace's pyramid that has a summary, oldest first (none without the pyramid)."""
    if not parts.config.pyramid.enabled:
        return []
    pyramid = parts.pyramid()
    out = []
    for node in parts.summary_index.nodes(pyramid):
        if node.summary is None:
            continue
        unit = parts.summary_index.unit(pyramid, node, {})
        out.append(LedgerEntry(unit, node.level, node.first_turn_id, node.last_turn_id, node.settled_turn))
    return sorted(out, key=lambda e: (e.first_turn_id, -e.level))


def select_ledger(
    entries: Sequence[LedgerEntry], before_turn: int | None, as_of: int | None, room: int, tokenizer: Tokenizer
) -> list[LedgerEntry]:
    """The ledger's lines for a window anchored at turn ``before_turn`` (``None``: no window), oldest first.

    Eligible are the entries whose turns all come before the anchor and
    whose summary was stored by turn ``as_of`` (the turn at which the
    anchor last jumped, or with ``cache_ledger_batch`` the turn at which it
    reached the batch's grid point; ``None``: any), so that a summary written later waits
    for the next jump instead of changing the ledger between two; of
    those, an entry whose turns an eligible consolidation covers is left to it. The
    lines then start at the oldest step point from which they fit ``room``
    (each line costs its tokens plus the newline that joins it).
    """
    eligible = [
        e
        for e in entries
        if (before_turn is None or e.last_turn_id < before_turn)
        and (as_of is None or e.settled_turn is None or e.settled_turn <= as_of)
    ]
    # Coarsest first: a node whose turns an eligible consolidation covers is left to it. Turns,
    # not parent links, decide: a cached child may not know yet that it has a parent.
    covered: set[int] = set()
    keep: set[str] = set()
    for e in sorted(eligible, key=lambda e: -e.level):
        turns = set(e.unit.turn_ids)
        if turns & covered:
            continue
        covered |= turns
        keep.add(e.unit.id)
    shown = [e for e in eligible if e.unit.id in keep]
    if not shown or room <= 0:
        return []
    sizes = [tokenizer.count(e.unit.text) + 1 for e in shown]
    start = run_start(sizes, room, int(room * LEDGER_STEP))
    return [] if start is None else shown[start:]
