"""The SQLite backend: :class:`SQLiteStore` and what is SQLite's own.

One WAL file (:mod:`~stratamem.store.sqlite.store`), the core migration and the
migration list (:mod:`~stratamem.store.sqlite.schema`), FTS5 item search
(:mod:`~stratamem.store.sqlite.items`) and secure delete
(:mod:`~stratamem.store.sqlite.forget`). Everything else is the shared SQL layer
of :mod:`stratamem.store`.
"""

from __future__ import annotations

from .store import SQLiteStore

__all__ = ["SQLiteStore"]
