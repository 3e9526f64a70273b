"""Long-term memory items (seed 003): add, spill, recall, promote, supersede, review, metrics.

:class:`Items` is one namespace's items (``Memory.items``); its parts are
:mod:`~stratamem.items.core` (shared state, vector-index refresh),
:mod:`~stratamem.items.tiers` (spill and promotion),
:mod:`~stratamem.items.recall` (ranking, search, recall),
:mod:`~stratamem.items.review` (supersession, review, prune),
:mod:`~stratamem.items.status` (suggestions) and :mod:`~stratamem.items.search`
(content terms, the full-text query, the vector index). :mod:`~stratamem.items.metrics`
renders item metrics as Prometheus text (the pyramid's are :mod:`stratamem.pyramid.metrics`). The values they return
(:class:`~stratamem.records.MemoryItem`, :class:`~stratamem.records.RecallResult`, ...)
are records (:mod:`stratamem.records.items`).
"""

from __future__ import annotations

from .api import Items
from .metrics import to_prometheus

__all__ = ["Items", "to_prometheus"]
