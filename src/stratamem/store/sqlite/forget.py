"""Executing a :class:`~stratamem.store.forgetting.ForgetPlan` on SQLite so that the bytes go.

A deleted row normally leaves its bytes in the file: in the freed cell of its
page, in free-list pages, in the write-ahead log, and (for the FTS5 index of
memory items) as terms in index segments until they are merged. So the plan is
applied with ``PRAGMA secure_delete = ON`` (SQLite overwrites deleted content
with zeros), the items' FTS5 index is merged with ``'optimize'`` inside the
same transaction (the merge drops deleted terms; secure delete zeroes the old
segments), and after the commit the WAL is checkpointed and truncated
(``wal_checkpoint(TRUNCATE)``), so no older page image stays in ``-wal``.

A checkpoint cannot complete while another connection is reading an older
snapshot; :meth:`SQLiteForget.apply` reports whether the WAL was truncated,
and the next forget (or any checkpoint) finishes the job.

Archive files are not touched here: the plan's ``archive_pending`` map is
recorded in ``store_meta`` in the same transaction (key
``forget.archive.<namespace>``) and :mod:`stratamem.forget` finishes the files
after the commit, or on the next open after a crash.

The plan's statements are shared with PostgreSQL (:mod:`stratamem.store.forget_rows`);
this module adds what makes the bytes go on SQLite.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..forget_rows import ForgetRows
from ..forgetting import ForgetPlan

if TYPE_CHECKING:
    from .store import SQLiteStore

__all__ = ["SQLiteForget"]


class SQLiteForget(ForgetRows):
    """Forgetting on one :class:`~stratamem.store.sqlite.SQLiteStore` (reach it as ``store.forgetting``)."""

    def __init__(self, store: SQLiteStore) -> None:
        super().__init__(store.sql)
        self._store = store

    def apply(self, namespace: str, build: Callable[[], ForgetPlan]) -> tuple[ForgetPlan, bool]:
        """Build a plan and apply it in one write transaction, with secure delete on.

        ``build`` runs inside the transaction (``BEGIN IMMEDIATE`` holds the
        database's write lock), so no writer changes what it reads before the
        plan is applied; it may also stage archive files.

        Returns:
            The plan applied, and whether the WAL was truncated afterwards.

        Raises:
            BackendError: The database failed; nothing was changed.
        """
        store = self._store
        with store.lock, store._errors():  # the pragma is per connection: set it for this write only
            conn = store.connection
            before = conn.execute("PRAGMA secure_delete").fetchone()[0]
            conn.execute("PRAGMA secure_delete = ON")
            try:
                with self._sql.write() as w:
                    plan = build()
                    self._apply(w, plan)
            finally:
                conn.execute(f"PRAGMA secure_delete = {int(before)}")
            return plan, self.checkpoint()

    def checkpoint(self) -> bool:
        """Copy the WAL into the database file and truncate it; ``False`` if a reader kept it from finishing."""
        store = self._store
        if store.path == ":memory:":
            return True
        with store.lock, store._errors():
            busy, _, _ = store.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        return busy == 0

    def vacuum(self) -> None:
        """Rebuild the whole file (``VACUUM``): also drops free pages, shrinking the file."""
        with self._store.lock, self._store._errors():
            self._store.connection.execute("VACUUM")
        self.checkpoint()
