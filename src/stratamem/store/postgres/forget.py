"""Executing a :class:`~stratamem.store.forgetting.ForgetPlan` on PostgreSQL.

Every row the plan names is deleted or rewritten in one transaction, under
the namespace's pyramid lock and its items lock, so no writer of the
namespace changes what the plan was built from.

What PostgreSQL does with the bytes: a deleted or updated row stays in its
table file as a dead tuple until ``VACUUM`` prunes it, and its space is only
reused, not zeroed; ``VACUUM FULL`` rewrites the table and its indexes (and
TOAST table) into new files and drops the old ones, after which the table
files hold no copy. :meth:`PostgresForget.vacuum_full` does that for the
tables a forget touched (it takes an exclusive lock on each, so it is a
separate, explicit step). The write-ahead log is another matter: WAL
segments keep full-page images and row data until the server recycles them
after checkpoints (``max_wal_size``, ``wal_keep_size``), and archived WAL,
base backups and replicas keep theirs under their own retention. No SQL
erases those; see ``docs/forget.md``.

The plan's statements are shared with SQLite (:mod:`stratamem.store.forget_rows`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from psycopg import sql

from ..forget_rows import ForgetRows
from ..forgetting import ForgetPlan
from ..node_store import _LOCK_CLASS as _NODES_LOCK
from .items import _LOCK_CLASS as _ITEMS_LOCK

if TYPE_CHECKING:
    from .store import PostgresStore

__all__ = ["FORGET_TABLES", "PostgresForget"]

FORGET_TABLES: tuple[str, ...] = (
    "turns",
    "sessions",
    "nodes",
    "node_views",
    "node_turns",
    "memory_items",
    "memory_item_metrics",
    "manifests",
    "conversations",
    "embeddings",
    "namespaces",
    "store_meta",
    "recall_index",
    "recall_index_meta",
    "recall_terms",
    "ingest_keys",
    "recall_passages",
)
"""Tables a forget may delete from or rewrite (what :meth:`PostgresForget.vacuum_full` rewrites)."""


class PostgresForget(ForgetRows):
    """Forgetting on one :class:`~stratamem.store.postgres.PostgresStore` (reach it as ``store.forgetting``)."""

    def __init__(self, store: PostgresStore) -> None:
        super().__init__(store.sql)
        self._store = store

    def apply(self, namespace: str, build: Callable[[], ForgetPlan]) -> tuple[ForgetPlan, bool]:
        """Build a plan and apply it in one transaction (see the SQLite twin).

        The namespace's pyramid and items locks are taken first, so no writer of
        the namespace changes what ``build`` reads before the plan is applied.

        Returns:
            The plan applied, and ``True`` (there is no WAL file to truncate from here).

        Raises:
            BackendError: The database failed; nothing was changed.
        """
        with self._sql.write() as w:
            for lock_class in (_NODES_LOCK, _ITEMS_LOCK):
                w.execute("SELECT pg_advisory_xact_lock(?, hashtext(?))", (lock_class, namespace))
            plan = build()
            self._apply(w, plan)
        return plan, True

    def checkpoint(self) -> bool:
        """Nothing to truncate from a client: ``True`` (see the module docstring on WAL retention)."""
        return True

    def vacuum(self) -> None:
        """``VACUUM FULL`` of every table a forget touches: rewrites them (and their indexes) without dead rows.

        Takes an ``ACCESS EXCLUSIVE`` lock on each table while it runs.

        Raises:
            BackendError: The server refused (e.g. inside a transaction, or a lock timeout).
        """
        with self._store.connection() as conn, self._store._errors():
            for table in FORGET_TABLES:
                conn.execute(sql.SQL("VACUUM FULL {}").format(sql.Identifier(table)))
