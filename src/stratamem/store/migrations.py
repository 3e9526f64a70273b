"""Schema migrations: an ordered list of named steps, each applied once, in one transaction.

Rules (the same for every backend):

* Migrations are appended, never edited once released; a mistake is fixed by a
  new migration.
* Each migration runs in one transaction together with the row that records it
  in ``_stratamem_migrations``; a failure leaves the schema as it was.
* :func:`applied` and :func:`pending` only read; :func:`apply` is idempotent.
* A database that records a migration this version does not know was written
  by a newer stratamem: we refuse to touch it (:class:`MigrationError`).

Backends give each migration the same name and their own SQL body; the SQLite
bodies are in :mod:`stratamem.store.sqlite.schema`.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from ..errors import MigrationError

__all__ = ["Migration", "applied", "apply", "pending"]

log = logging.getLogger("stratamem.store")


@dataclass(frozen=True, slots=True)
class Migration:
    """One named schema step."""

    name: str
    """Stable name, e.g. ``m001_core``; recorded when applied."""
    run: Callable[[sqlite3.Connection], None]
    """Executes the step's statements on an open transaction."""
    vacuum: bool = False
    """The step rebuilds or rewrites a table, leaving most of its old pages free (or part-empty:
    rows shrunk in place): the file is vacuumed once the pending steps are applied (see :func:`apply`)."""


_TABLE = "_stratamem_migrations"


def _ensure_table(conn: sqlite3.Connection) -> None:
    conn.execute(f"CREATE TABLE IF NOT EXISTS {_TABLE} (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")


def applied(conn: sqlite3.Connection) -> list[str]:
    """Names of the migrations recorded in the database, in the order applied."""
    exists = conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (_TABLE,)).fetchone()
    if not exists:
        return []
    return [r[0] for r in conn.execute(f"SELECT name FROM {_TABLE} ORDER BY rowid")]


def pending(conn: sqlite3.Connection, migrations: Sequence[Migration]) -> list[Migration]:
    """Migrations not yet applied, in order.

    Raises:
        MigrationError: The database records migrations this version does not know.
    """
    done = applied(conn)
    known = {m.name for m in migrations}
    unknown = [name for name in done if name not in known]
    if unknown:
        raise MigrationError(
            f"database schema is newer than this stratamem (unknown migrations: {', '.join(unknown)}); "
            "upgrade stratamem to open it"
        )
    return [m for m in migrations if m.name not in set(done)]


def apply(conn: sqlite3.Connection, migrations: Sequence[Migration]) -> list[str]:
    """Apply every pending migration, each in its own transaction.

    The connection must be in autocommit mode (``isolation_level=None``).

    Returns:
        Names of the migrations applied by this call (empty if none were pending).

    Raises:
        MigrationError: A migration failed (its transaction was rolled back) or
            the schema is newer than this version.
    """
    # Read first: a store whose schema is current is opened without a write lock, so a
    # read-only file (or a file in a read-only directory) can still be read.
    if not pending(conn, migrations):
        return []
    conn.execute("BEGIN IMMEDIATE")
    try:
        _ensure_table(conn)
        todo = pending(conn, migrations)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    done: list[str] = []
    for m in todo:
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Another process may have applied it while we waited for the lock.
            if conn.execute(f"SELECT 1 FROM {_TABLE} WHERE name=?", (m.name,)).fetchone():
                conn.execute("COMMIT")
                continue
            m.run(conn)
            conn.execute(
                f"INSERT INTO {_TABLE} (name, applied_at) VALUES (?, ?)",
                (m.name, datetime.now(UTC).isoformat()),
            )
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            conn.execute("ROLLBACK")
            raise MigrationError(f"migration {m.name} failed: {exc}") from exc
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        done.append(m.name)
    if any(m.vacuum for m in todo if m.name in done):
        _vacuum(conn)
    return done


def _vacuum(conn: sqlite3.Connection) -> None:
    """Give back the pages a rebuilt table left free, and empty the WAL the copy went through.

    Without it a store upgraded across a table rebuild keeps the old table's pages as
    free pages (SQLite reuses them for later writes but never shrinks the file):
    ``m021_term_ids`` left ~9 MB of a 15.8 MB LoCoMo store free. ``VACUUM`` rewrites the
    file, which needs up to its size again on disk and no other connection reading, so it
    runs only when at least a quarter of the file is free pages, or an eighth is free pages
    and the unused bytes of tables and indexes of 8 pages or more (``dbstat``): rows
    rewritten smaller in place (``m025_lean_store``'s 6-bit vectors, its dropped columns)
    free no page but leave each one part-empty (a LoCoMo store: ~18 % of the file);
    when it cannot run (busy, disk full) the store stays as the migrations left it —
    correct, only larger — and the next upgrade that rebuilds a table tries again.
    """
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    free = conn.execute("PRAGMA freelist_count").fetchone()[0]
    if free * 4 < pages and (free + _slack_pages(conn)) * 8 < pages:
        return  # little to give back (a new store's empty tables rebuilt): not worth a rewrite
    try:
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    except sqlite3.OperationalError as exc:
        log.warning("the upgraded store keeps its free pages (VACUUM did not run: %s)", exc)


def _slack_pages(conn: sqlite3.Connection) -> int:
    """Unused bytes of the b-trees of 8 pages or more, in pages (0 without ``dbstat``).

    Small b-trees are left out: a new store's ~60 tables and indexes are one
    nearly empty page each, which no ``VACUUM`` would shrink.
    """
    try:
        row = conn.execute(
            "SELECT COALESCE(SUM(unused), 0) FROM dbstat WHERE aggregate = TRUE AND pageno >= 8"
        ).fetchone()
    except sqlite3.Error as exc:  # a SQLite built without the dbstat table: free pages alone decide
        log.info("b-tree slack not measured (%s): the vacuum rule counts free pages only", exc)
        return 0
    size = conn.execute("PRAGMA page_size").fetchone()[0]
    return int(row[0]) // int(size)
