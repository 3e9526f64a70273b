"""Storage backends behind one protocol.

:class:`~stratamem.store.base.Store` is the protocol (with
:class:`ConversationStore`); :class:`SQLiteStore` the embedded default.
Features hand the store :class:`NewNode` and :class:`NewItem` rows to insert;
what it reads back are records (:mod:`stratamem.records`). The PostgreSQL
backend lives in :mod:`stratamem.store.postgres` (extra
``stratamem[postgres]``); :func:`open_store` picks the backend from a path
or a ``postgresql://`` URL.
"""

from __future__ import annotations

from .base import ConversationStore, NamespaceStats, Store, TurnBatch
from .new_rows import NewItem, NewNode
from .open import open_store
from .sqlite.store import SQLiteStore

__all__ = [
    "ConversationStore",
    "NamespaceStats",
    "NewItem",
    "NewNode",
    "SQLiteStore",
    "Store",
    "TurnBatch",
    "open_store",
]
