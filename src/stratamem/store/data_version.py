"""A namespace's data version: how every open ``Memory`` learns that another writer changed its data (``m016``).

A ``Memory`` keeps derived structures in memory between calls (the recall
index, the ranked summaries, the items cache, the pyramid object). Another
process (``stratamem forget`` beside a running ``serve``), or another
``Memory`` on the same store, may change what they were built from. Every
write that can make them stale bumps the namespace's row of
``data_versions`` **in its own transaction**, so the bump is visible exactly
when the change is:

* ``version`` — every such write: turns appended, pyramid nodes written,
  memory items written, and everything below;
* ``epoch`` — writes that take something away or rewrite it in place: a
  forget (turns deleted, summaries rewritten), retention (archived content
  expired, turns purged), items deleted.

A reader compares the pair with the one it saw at its last call (one small
read, :func:`read`; SQLite skips even that while no connection committed,
see :meth:`stratamem.store.sqlite.SQLiteStore.data_version`): a new
``epoch`` drops every derived structure, a new ``version`` alone lets each
catch up as it does (new turns and nodes are read incrementally).

The row is keyed by the namespace's *name* on both backends and has no
foreign key, so forgetting a whole namespace keeps it (with a new epoch): a
namespace created again under the same name never repeats a pair a reader
saw before.

On PostgreSQL the bump takes the row's lock until commit, which serializes
the namespace's writers from that statement on; writers bump as their last
statement, after the rows they lock in name order, so the lock order stays
the same everywhere and two writers cannot deadlock on it. An append of
turns bumps right after locking its sessions' rows and before its turns
take their ids (nothing it does after that waits on a lock), so a
namespace's turn ids commit in increasing order on PostgreSQL too
(``PostgresStore.ids_commit_in_order``).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .ddl import run_tables
from .sql import Sql, Writer

__all__ = ["DataVersion", "bump", "m016_data_versions", "read"]

_COLUMNS = (
    "namespace TEXT PRIMARY KEY",
    "version {bigint} NOT NULL DEFAULT 0",
    "epoch {bigint} NOT NULL DEFAULT 0",
)


def m016_data_versions(conn: Any) -> None:
    """One row per namespace: its data version and epoch (see the module docstring)."""
    run_tables(conn, ("data_versions", _COLUMNS, False))


class DataVersion(NamedTuple):
    """Where a namespace's data stands; compare two with ``==``."""

    version: int
    """Bumped by every write that derived data depends on."""
    epoch: int
    """Bumped by writes that delete or rewrite (derived data built before it must be dropped)."""


_BUMP = (
    "INSERT INTO data_versions (namespace, version, epoch) VALUES (?, 1, ?) "
    "ON CONFLICT (namespace) DO UPDATE SET version = data_versions.version + 1, "
    "epoch = data_versions.epoch + excluded.epoch"
)


def bump(w: Writer, namespace: str, *, destructive: bool = False) -> None:
    """Bump ``namespace``'s version (and its epoch when ``destructive``) in ``w``'s transaction.

    Call it as the transaction's last statement where possible (see the
    module docstring on PostgreSQL's lock).
    """
    w.execute(_BUMP, (namespace, 1 if destructive else 0))


def read(sql: Sql, namespace: str) -> DataVersion:
    """``namespace``'s data version; ``(0, 0)`` before its first write."""
    rows = sql.rows("SELECT version, epoch FROM data_versions WHERE namespace = ?", (namespace,))
    return DataVersion(int(rows[0][0]), int(rows[0][1])) if rows else DataVersion(0, 0)
