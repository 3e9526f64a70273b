"""Storage backends behind one protocol.

:class:`~stratamem.store.base.Store` is the protocol; :class:`SQLiteStore` the
embedded default. The PostgreSQL backend lives in :mod:`stratamem.store.postgres`
(extra ``stratamem[postgres]``).
"""

from __future__ import annotations

from .base import NamespaceStats, Store, TurnBatch
from .sqlite import SQLiteStore

__all__ = ["NamespaceStats", "SQLiteStore", "Store", "TurnBatch"]
