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
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ...errors import BackendError, MigrationError
from .. import data_version, migrations
from ..data_version import DataVersion
from ..record_store import RecordStore
from ..sql import SQLITE, Sql
from ..text_codec import octets
from .forget import SQLiteForget
from .items import SQLiteItemStore
from .schema import MIGRATIONS

__all__ = ["SQLiteStore"]


def _cannot_write(exc: sqlite3.Error) -> bool:
    """Whether ``exc`` says the file (or the directory its ``-shm`` needs) cannot be written."""
    return getattr(exc, "sqlite_errorcode", 0) & 0xFF in (sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN)


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

    ids_commit_in_order = True
    """Writers are serialized (``BEGIN IMMEDIATE``) and ids assigned inside the write: a committed
    turn's id is above every id committed before it (the recall index's in-step check relies on it)."""

    def __init__(
        self, path: str | os.PathLike[str], *, busy_timeout_ms: int = 30_000, tokenizer: str = "o200k_base"
    ) -> None:
        self.path = str(path)
        self._lock = threading.RLock()
        self._depth = 0
        self._owner: int | None = None  # the thread inside transaction(), if any
        self._busy_timeout_ms = int(busy_timeout_ms)
        self._reopen = False
        self.read_only = False
        """Whether the store was opened read-only (the file or its directory is not writable)."""
        self._commits = 0  # commits made on this store's connection (see data_version)
        self._generation = 0  # connections opened so far: each has its own PRAGMA data_version
        self._seen_mark: tuple[int, int, int] | None = None
        self._seen_versions: dict[str, DataVersion] = {}
        try:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BackendError(f"cannot open SQLite database {self.path}: {exc}") from exc
        self._conn = self._connect()
        try:
            with self._errors():
                self._migrate()
                self._check_tokenizer(tokenizer)
        except BaseException:
            self._conn.close()
            raise
        self.tokenizer = tokenizer

    # --- plumbing ---------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        """A configured connection: read-write, or read-only when the file or its directory cannot be written.

        A WAL database needs its ``-shm`` file; in a directory this process cannot
        write, that file cannot be made, and even reads fail ("attempt to write a
        readonly database"). Such a store is opened read-only instead, so it can
        still be read (``status``, ``export``, ``context`` without a manifest);
        every write raises :class:`~stratamem.errors.BackendError`, and the next
        write after that tries read-write again (see :meth:`transaction`).

        Raises:
            BackendError: The file cannot be opened at all, or is not a database.
        """
        try:
            conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, timeout=self._busy_timeout_ms / 1000
            )
        except sqlite3.Error as exc:
            raise BackendError(f"cannot open SQLite database {self.path}: {exc}") from exc
        conn.create_function("stratamem_octets", 1, octets, deterministic=True)
        self._conn = conn
        self._generation += 1
        try:
            with self._errors():
                try:
                    self._configure()
                    self.read_only = False
                    return conn
                except sqlite3.OperationalError as exc:
                    if self.path == ":memory:" or not _cannot_write(exc) or not os.path.exists(self.path):
                        raise
            conn.close()
            self._conn = self._read_only_connection()
            self.read_only = True
            return self._conn
        except BaseException:
            self._conn.close()
            raise

    def _migrate(self) -> None:
        """Apply pending migrations; a file that turns out not writable is opened read-only, as it is.

        A read-only file written by an older version is read without migrating:
        what it lacks (a newer table) is answered empty or refused in one line.
        """
        if self.read_only and migrations.pending(self._conn, MIGRATIONS):
            return
        try:
            migrations.apply(self._conn, MIGRATIONS)
        except (sqlite3.OperationalError, MigrationError) as exc:
            cause = exc if isinstance(exc, sqlite3.Error) else exc.__cause__
            if self.read_only or not isinstance(cause, sqlite3.Error) or not _cannot_write(cause):
                raise
            self._conn.close()
            self._conn = self._read_only_connection()
            self.read_only = True

    def _read_only_connection(self) -> sqlite3.Connection:
        """The file opened read-only: ``mode=ro``, else ``immutable=1`` when no ``-wal`` holds unmerged commits.

        ``immutable`` skips locking and the WAL altogether, which is safe only
        when nothing can write the file (its directory is not writable) and no
        write-ahead log is pending; otherwise committed turns would be missed.
        """
        base = "file:" + urllib.parse.quote(os.path.abspath(self.path))
        wal = self.path + "-wal"
        modes = ["mode=ro"] + ([] if os.path.exists(wal) and os.path.getsize(wal) > 0 else ["immutable=1"])
        last: sqlite3.Error | None = None
        for mode in modes:
            conn = sqlite3.connect(
                f"{base}?{mode}",
                uri=True,
                isolation_level=None,
                check_same_thread=False,
                timeout=self._busy_timeout_ms / 1000,
            )
            conn.create_function("stratamem_octets", 1, octets, deterministic=True)
            try:
                conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")
                conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
                return conn
            except sqlite3.Error as exc:
                conn.close()
                last = exc
        assert last is not None
        raise BackendError(f"SQLite error on {self.path}: {last} (opened read-only)") from last

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
        self._conn = self._connect()
        self._reopen = False

    _BACKEND_ERRORS = (sqlite3.Error, OSError)

    def _backend_error(self, exc: Exception) -> BackendError:
        if isinstance(exc, OSError):
            return BackendError(f"I/O error on {self.path}: {exc}")
        if getattr(exc, "sqlite_errorcode", 0) & 0xFF == sqlite3.SQLITE_READONLY:
            # Reopen before the next write, so the store serves again once the file is writable.
            self._reopen = True
        return BackendError(f"SQLite error on {self.path}: {exc}")

    def in_transaction(self) -> bool:
        """Whether the calling thread is inside :meth:`transaction`."""
        return self._owner == threading.get_ident()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """A write transaction; nested calls join the outer one (via savepoints)."""
        with self._lock, self._errors():
            if self._depth == 0:
                if self._reopen:
                    self._reconnect()
                self._conn.execute("BEGIN IMMEDIATE")
                self._owner = threading.get_ident()
            else:
                self._conn.execute(f"SAVEPOINT sp{self._depth}")
            self._depth += 1
            try:
                yield
            except BaseException:
                self._depth -= 1
                if self._depth == 0:
                    self._owner = None
                self._undo(self._depth)
                raise
            self._depth -= 1
            if self._depth == 0:
                self._owner = None
                try:
                    self._conn.execute("COMMIT")
                except sqlite3.Error:
                    # A failed COMMIT (disk full) can leave the transaction open; end it
                    # so the next write starts clean, then report the failure.
                    self._undo(0)
                    raise
                self._commits += 1
            else:
                self._conn.execute(f"RELEASE sp{self._depth}")

    def _undo(self, depth: int) -> None:
        """Roll back to the savepoint of ``depth`` (0: the whole transaction) while an error propagates.

        After disk-full or I/O errors SQLite may already have rolled the whole
        transaction back: its savepoints are gone, and a ``ROLLBACK TO`` would
        fail with "no such savepoint" and hide the error that matters. Cleanup
        is skipped then, and a cleanup failure never replaces the original error.
        """
        if not self._conn.in_transaction:
            return
        try:
            if depth == 0:
                self._conn.execute("ROLLBACK")
            else:
                self._conn.execute(f"ROLLBACK TO sp{depth}")
                self._conn.execute(f"RELEASE sp{depth}")
        except sqlite3.Error:
            pass  # the error being raised says what went wrong; this one would only mask it

    def data_version(self, namespace: str) -> DataVersion:
        """Where ``namespace``'s data stands (:mod:`stratamem.store.data_version`), usually without a query.

        ``PRAGMA data_version`` changes when another connection commits, and
        this store counts its own commits: while neither moved since the last
        call, nothing in the file changed and the answer seen then still holds.
        """
        with self._lock, self._errors():
            if self._depth:  # inside a transaction: its writes are not committed, never cache them
                return self._read_version(namespace)
            mark = (self._generation, self._conn.execute("PRAGMA data_version").fetchone()[0], self._commits)
            if mark != self._seen_mark:
                self._seen_mark, self._seen_versions = mark, {}
            found = self._seen_versions.get(namespace)
            if found is None:
                found = self._seen_versions[namespace] = self._read_version(namespace)
            return found

    def _read_version(self, namespace: str) -> DataVersion:
        try:
            return data_version.read(self.sql, namespace)
        except BackendError as exc:
            if self.read_only and "no such table" in str(exc):
                return DataVersion(0, 0)  # a read-only file of an older version: nothing can write it
            raise

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
