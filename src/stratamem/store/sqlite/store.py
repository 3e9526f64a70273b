"""The SQLite store: one file, WAL, migrations, one transaction per write.

The embedded default. Concurrency: many readers and one writer at a time
across processes (WAL); writers wait up to ``busy_timeout_ms`` for the lock
(``BEGIN IMMEDIATE``, so a lock is never upgraded mid-transaction and
"database is locked" does not surface while the wait lasts). Within a process
one connection is shared under a lock, so a ``SQLiteStore`` is thread-safe.
"""

from __future__ import annotations

import functools
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ...errors import BackendError
from .. import migrations
from ..record_store import RecordStore
from ..sql import SQLITE, Sql
from .forget import SQLiteForget
from .items import SQLiteItemStore
from .schema import MIGRATIONS

__all__ = ["SQLiteStore"]


class SQLiteStore(RecordStore):
    """A :class:`~stratamem.store.base.Store` in one SQLite file.

    Args:
        path: Database file (created if missing), or ``":memory:"``.
        busy_timeout_ms: How long a write waits for another writer's lock.
        tokenizer: Name of the tokenizer the caller counts with. Recorded on
            first use; opening the file later with another tokenizer is refused,
            so stored counts are never mixed.

    Raises:
        MigrationError: The file was written by a newer stratamem.
        ConfigError: The file was created with another tokenizer.
        BackendError: The file cannot be opened or is not a database.
    """

    backend = "sqlite"
    item_store_class = SQLiteItemStore
    forget_class = SQLiteForget

    def __init__(
        self, path: str | os.PathLike[str], *, busy_timeout_ms: int = 30_000, tokenizer: str = "o200k_base"
    ) -> None:
        self.path = str(path)
        self._lock = threading.RLock()
        self._depth = 0
        self._busy_timeout_ms = int(busy_timeout_ms)
        self._reopen = False
        try:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=busy_timeout_ms / 1000
            )
        except (sqlite3.Error, OSError) as exc:
            raise BackendError(f"cannot open SQLite database {self.path}: {exc}") from exc
        try:
            with self._errors():
                self._configure()
                migrations.apply(self._conn, MIGRATIONS)
                self._check_tokenizer(tokenizer)
        except BaseException:
            self._conn.close()
            raise
        self.tokenizer = tokenizer

    # --- plumbing ---------------------------------------------------------------------

    def _configure(self) -> None:
        self._conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
        self._conn.execute("PRAGMA foreign_keys = ON")
        if self.path != ":memory:":
            self._set_wal()
            # WAL + NORMAL: a committed transaction survives a process crash;
            # only an OS crash or power loss can undo the last commits.
            self._conn.execute("PRAGMA synchronous = NORMAL")

    def _set_wal(self) -> None:
        """Switch the file to WAL, waiting out other processes that open it at the same moment.

        Changing the journal mode needs an exclusive lock, and SQLite answers
        "database is locked" at once instead of calling the busy handler when
        several processes create the same new file together; so retry until
        ``busy_timeout_ms`` has passed.
        """
        deadline = time.monotonic() + self._busy_timeout_ms / 1000
        delay = 0.005
        while True:
            try:
                mode = self._conn.execute("PRAGMA journal_mode").fetchone()[0]
                if str(mode).lower() != "wal":
                    self._conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                waiting = getattr(exc, "sqlite_errorcode", 0) & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
                if not waiting or time.monotonic() >= deadline:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 0.2)

    def _reconnect(self) -> None:
        """Open a fresh connection: one opened while the file was read-only stays read-only."""
        self._conn.close()
        self._conn = sqlite3.connect(
            self.path, isolation_level=None, check_same_thread=False, timeout=self._busy_timeout_ms / 1000
        )
        self._configure()
        self._reopen = False

    _BACKEND_ERRORS = (sqlite3.Error, OSError)

    def _backend_error(self, exc: Exception) -> BackendError:
        if isinstance(exc, OSError):
            return BackendError(f"I/O error on {self.path}: {exc}")
        if getattr(exc, "sqlite_errorcode", 0) & 0xFF == sqlite3.SQLITE_READONLY:
            # Reopen before the next write, so the store serves again once the file is writable.
            self._reopen = True
        return BackendError(f"SQLite error on {self.path}: {exc}")

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """A write transaction; nested calls join the outer one (via savepoints)."""
        with self._lock, self._errors():
            if self._depth == 0:
                if self._reopen:
                    self._reconnect()
                self._conn.execute("BEGIN IMMEDIATE")
            else:
                self._conn.execute(f"SAVEPOINT sp{self._depth}")
            self._depth += 1
            try:
                yield
            except BaseException:
                self._depth -= 1
                if self._depth == 0:
                    # After disk-full or I/O errors SQLite may have rolled back already;
                    # a second ROLLBACK would fail and hide the original error.
                    if self._conn.in_transaction:
                        self._conn.execute("ROLLBACK")
                else:
                    self._conn.execute(f"ROLLBACK TO sp{self._depth}")
                    self._conn.execute(f"RELEASE sp{self._depth}")
                raise
            self._depth -= 1
            if self._depth == 0:
                try:
                    self._conn.execute("COMMIT")
                except sqlite3.Error:
                    # A failed COMMIT (disk full) can leave the transaction open; end it
                    # so the next write starts clean, then report the failure.
                    if self._conn.in_transaction:
                        self._conn.execute("ROLLBACK")
                    raise
            else:
                self._conn.execute(f"RELEASE sp{self._depth}")

    @property
    def connection(self) -> sqlite3.Connection:
        """The underlying connection, for derived-data modules of this package. Hold :attr:`lock`."""
        return self._conn

    @property
    def lock(self) -> threading.RLock:
        """The lock serializing use of :attr:`connection` within this process."""
        return self._lock

    @functools.cached_property
    def sql(self) -> Sql:
        """The shared SQL layer over this store's connection, for the feature stores (:mod:`stratamem.store.sql`)."""
        return Sql(SQLITE, self._reading, self._writing)

    @contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        with self._lock, self._errors():
            yield self._conn

    @contextmanager
    def _writing(self) -> Iterator[sqlite3.Connection]:
        with self.transaction():
            yield self._conn  # read after BEGIN: the transaction may have reconnected

    # Namespaces, sessions and turns: RecordStore (store/record_store.py). Feature stores:
    # SharedFeatures (store/features.py) on ``sql``; items and forgetting are the shared classes
    # with SQLite's FTS5 search and secure delete (item_store_class, forget_class).

    def size_bytes(self) -> int:
        """Bytes of the database file plus its WAL (0 in memory)."""
        if self.path == ":memory:":
            return 0
        return sum(os.path.getsize(self.path + suffix) for suffix in ("", "-wal") if os.path.exists(self.path + suffix))

    def part_bytes(self) -> dict[str, int]:
        """Bytes per part of the file (every namespace; see :mod:`stratamem.store.part_bytes`), the archive included.

        ``{}`` when this SQLite has no ``dbstat`` table (or the store is in memory).
        """
        if self.path == ":memory:":
            return {}
        from ..part_bytes import sqlite_part_bytes

        with self._lock:
            out = sqlite_part_bytes(self._conn, self.size_bytes())
        archive = Path(f"{self.path}.archive")
        if out and archive.is_dir():
            out["archive"] = sum(p.stat().st_size for p in archive.rglob("*") if p.is_file())
        return out

    def integrity_check(self) -> str:
        """Result of ``PRAGMA integrity_check`` (``"ok"`` when healthy)."""
        return str(self.sql.rows("PRAGMA integrity_check")[0][0])

    def close(self) -> None:
        """Close the connection. Idempotent."""
        with self._lock:
            try:
                self._conn.close()
            except sqlite3.Error as exc:
                raise BackendError(f"closing {self.path} failed: {exc}") from exc

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r})"
