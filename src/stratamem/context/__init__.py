"""Context assembly: what goes into a prompt within a token budget, rendered and explained.

* :mod:`~stratamem.context.sources` — what competes for a place: instruction files,
  working state, the checkpoint, ranked summaries (:class:`SummaryIndex`);
* :mod:`~stratamem.context.assemble` — the budgeted assembly under a policy
  (:data:`POLICIES`), with lazy expansion of summaries;
* :mod:`~stratamem.context.dedup` — one copy of each fact (:class:`Shown`);
* :mod:`~stratamem.context.render` — rendering for a provider, the recent window
  snapped to a valid request (:func:`recent_window`), section placement.

What an assembled context holds is a record (:class:`~stratamem.records.Context`
with its :class:`~stratamem.records.Manifest`); the budget and format checks are
:mod:`stratamem.text`'s.
"""

from __future__ import annotations

from .assemble import POLICIES, FixedBlock, ItemUnit, Recalled, SummaryUnit
from .dedup import Shown
from .render import recent_window
from .sources import SummaryIndex

__all__ = ["POLICIES", "FixedBlock", "ItemUnit", "Recalled", "Shown", "SummaryIndex", "SummaryUnit", "recent_window"]
