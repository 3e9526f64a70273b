"""Storage backends behind one protocol.

:class:`~stratamem.store.base.Store` is the protocol; :class:`SQLiteStore` the
embedded default. The PostgreSQL backend lives in :mod:`stratamem.store.postgres`
(extra ``stratamem[postgres]``); :func:`open_store` picks the backend from a
path or a ``postgresql://`` URL.
"""

from __future__ import annotations

from .base import NamespaceStats, Store, TurnBatch
from .open import open_store
from .sqlite.store import SQLiteStore

__all__ = ["NamespaceStats", "SQLiteStore", "Store", "TurnBatch", "open_store"]
