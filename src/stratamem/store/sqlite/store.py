"""The SQLite store: one file, WAL, migrations, one transaction per write.

The embedded default. Concurrency: many readers and one writer at a time
across processes (WAL); writers wait up to ``busy_timeout_ms`` for the lock
(``BEGIN IMMEDIATE``, so a lock is never upgraded mid-transaction and
"database is locked" does not surface while the wait lasts). Within a process
one connection is shared under a lock, so a ``SQLiteStore`` is thread-safe.
"""

from __future__ import annotations

import functools
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import BackendError, ConfigError, NotFoundError, StratamemError
from ...records import Session, StoredTurn, check_name, format_timestamp, parse_timestamp
from .. import migrations
from ..base import NamespaceStats, TurnBatch
from ..rows import turn_columns, turn_from_columns
from ..features import SharedFeatures
from ..sql import SQLITE, Sql
from .schema import MIGRATIONS

if TYPE_CHECKING:
    from .forget import SQLiteForget
    from .items import SQLiteItemStore

__all__ = ["SQLiteStore"]


def _now() -> str:
    return format_timestamp(datetime.now(timezone.utc))


_TURN_SELECT = """
    SELECT t.id, n.name, s.name, t.seq, t.tokens, t.role, t.text, t.content, t.name, t.model, t.ts, t.metadata
    FROM turns t JOIN sessions s ON s.id = t.session_id JOIN namespaces n ON n.id = t.namespace_id
"""


def _row_to_stored(row: Sequence[Any]) -> StoredTurn:
    return StoredTurn(id=row[0], namespace=row[1], session=row[2], seq=row[3], tokens=row[4],
                      turn=turn_from_columns(*row[5:12]))


class SQLiteStore(SharedFeatures):
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

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout_ms: int = 30_000,
                 tokenizer: str = "o200k_base") -> None:
        self.path = str(path)
        self._lock = threading.RLock()
        self._depth = 0
        self._busy_timeout_ms = int(busy_timeout_ms)
        self._reopen = False
        try:
            if self.path != ":memory:":
                Path(self.path).parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False,
                                         timeout=busy_timeout_ms / 1000)
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
        self._conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False,
                                     timeout=self._busy_timeout_ms / 1000)
        self._configure()
        self._reopen = False

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """Map sqlite3 errors to BackendError, keeping the cause."""
        try:
            yield
        except StratamemError:
            raise
        except sqlite3.Error as exc:
            if getattr(exc, "sqlite_errorcode", 0) & 0xFF == sqlite3.SQLITE_READONLY:
                # Reopen before the next write, so the store serves again once the file is writable.
                self._reopen = True
            raise BackendError(f"SQLite error on {self.path}: {exc}") from exc
        except OSError as exc:
            raise BackendError(f"I/O error on {self.path}: {exc}") from exc

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

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock, self._errors():
            return self._conn.execute(sql, params).fetchall()

    def _check_tokenizer(self, tokenizer: str) -> None:
        with self.transaction():
            row = self._conn.execute("SELECT value FROM store_meta WHERE key='tokenizer'").fetchone()
            if row is None:
                self._conn.execute("INSERT INTO store_meta (key, value) VALUES ('tokenizer', ?)", (tokenizer,))
            elif row[0] != tokenizer:
                raise ConfigError(
                    f"{self.path} stores token counts made with {row[0]!r}; open it with that tokenizer "
                    f"(asked for {tokenizer!r})"
                )

    def _namespace_id(self, namespace: str, *, create: bool) -> int | None:
        row = self._conn.execute("SELECT id FROM namespaces WHERE name=?", (namespace,)).fetchone()
        if row is not None:
            return int(row[0])
        if not create:
            return None
        return int(self._conn.execute("INSERT INTO namespaces (name, created_at) VALUES (?, ?) RETURNING id",
                                      (namespace, _now())).fetchone()[0])

    def _session_row(self, ns_id: int, session: str, platform: str | None, channel: str | None,
                     created_at: datetime | None = None) -> int:
        row = self._conn.execute("SELECT id FROM sessions WHERE namespace_id=? AND name=?",
                                 (ns_id, session)).fetchone()
        if row is not None:
            return int(row[0])
        created = format_timestamp(created_at) if created_at else _now()
        return int(self._conn.execute(
            "INSERT INTO sessions (namespace_id, name, platform, channel, created_at) VALUES (?, ?, ?, ?, ?) RETURNING id",
            (ns_id, session, platform, channel, created)).fetchone()[0])

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

    # --- feature stores -----------------------------------------------------------------
    # Embeddings, nodes, manifests, conversations and ingest keys come from SharedFeatures
    # (store/features.py), built on ``sql``. Memory items and forgetting are
    # still written per backend; they share this store's connection, lock and
    # transaction().

    @functools.cached_property
    def items(self) -> SQLiteItemStore:
        """Memory items of every namespace (:mod:`stratamem.store.sqlite.items`)."""
        from .items import SQLiteItemStore

        return SQLiteItemStore(self)

    @functools.cached_property
    def forgetting(self) -> SQLiteForget:
        """Deleting turns and everything derived from them (:mod:`stratamem.store.sqlite.forget`)."""
        from .forget import SQLiteForget

        return SQLiteForget(self)

    # --- namespaces and sessions ------------------------------------------------------

    def namespaces(self) -> list[str]:
        """All namespace names, sorted."""
        return [r[0] for r in self._query("SELECT name FROM namespaces ORDER BY name")]

    def has_namespace(self, namespace: str) -> bool:
        """Whether the namespace exists."""
        return bool(self._query("SELECT 1 FROM namespaces WHERE name=?", (namespace,)))

    def namespace_stats(self) -> list[NamespaceStats]:
        """Every namespace with its counts, sorted by name (one query)."""
        rows = self._query(
            "SELECT ns.name, (SELECT COUNT(*) FROM sessions s WHERE s.namespace_id = ns.id), COUNT(t.id), "
            "COALESCE(SUM(t.tokens), 0), COALESCE(SUM(LENGTH(CAST(t.text AS BLOB)) "
            "+ COALESCE(LENGTH(CAST(t.content AS BLOB)), 0)), 0) "
            "FROM namespaces ns LEFT JOIN turns t ON t.namespace_id = ns.id GROUP BY ns.id ORDER BY ns.name")
        return [NamespaceStats(r[0], int(r[1]), int(r[2]), int(r[3]), int(r[4])) for r in rows]

    def ensure_session(self, namespace: str, session: str, *, platform: str | None = None,
                       channel: str | None = None, created_at: datetime | None = None) -> Session:
        """Return the session, creating it (and the namespace) if missing.

        ``platform``, ``channel`` and ``created_at`` apply only when it is created.
        """
        check_name(namespace, "namespace")
        check_name(session, "session")
        with self.transaction():
            ns_id = self._namespace_id(namespace, create=True)
            assert ns_id is not None
            self._session_row(ns_id, session, platform, channel, created_at)
        return self.session(namespace, session)

    def session(self, namespace: str, session: str) -> Session:
        """Return an existing session.

        Raises:
            NotFoundError: No such namespace or session.
        """
        rows = self._query(
            "SELECT s.name, s.platform, s.channel, s.created_at FROM sessions s "
            "JOIN namespaces n ON n.id = s.namespace_id WHERE n.name=? AND s.name=?", (namespace, session))
        if not rows:
            if not self.has_namespace(namespace):
                raise NotFoundError(f"unknown namespace {namespace!r}")
            raise NotFoundError(f"unknown session {session!r} in namespace {namespace!r}")
        name, platform, channel, created = rows[0]
        return Session(namespace, name, platform, channel, parse_timestamp(created))

    def sessions(self, namespace: str) -> list[Session]:
        """All sessions of a namespace, oldest first."""
        rows = self._query(
            "SELECT s.name, s.platform, s.channel, s.created_at FROM sessions s "
            "JOIN namespaces n ON n.id = s.namespace_id WHERE n.name=? ORDER BY s.id", (namespace,))
        return [Session(namespace, r[0], r[1], r[2], parse_timestamp(r[3])) for r in rows]

    # --- turns ------------------------------------------------------------------------

    def append(self, namespace: str, batches: Sequence[TurnBatch]) -> list[StoredTurn]:
        """Store turns in one transaction: all of them or none.

        Returns:
            The stored turns, in input order.

        Raises:
            ValidationError: A namespace or session name is invalid.
            BackendError: The write failed; nothing was stored.
        """
        check_name(namespace, "namespace")
        for b in batches:
            check_name(b.session, "session")
            if len(b.turns) != len(b.tokens):
                raise ValueError("each batch needs one token count per turn")
        out: list[StoredTurn] = []
        with self.transaction():
            ns_id = self._namespace_id(namespace, create=True)
            assert ns_id is not None
            for b in batches:
                if not b.turns:
                    continue
                sid = self._session_row(ns_id, b.session, b.platform, b.channel)
                # Reserve the sequence range under the write lock: gap-free and unique
                # even with many writers, because BEGIN IMMEDIATE serializes them.
                last = int(self._conn.execute(
                    "UPDATE sessions SET last_seq = last_seq + ? WHERE id=? RETURNING last_seq",
                    (len(b.turns), sid)).fetchone()[0])
                first = last - len(b.turns) + 1
                for i, (turn, tokens) in enumerate(zip(b.turns, b.tokens, strict=True)):
                    text, content, meta = turn_columns(turn)
                    tid = self._conn.execute(
                        "INSERT INTO turns (namespace_id, session_id, seq, role, text, content, name, model, ts, "
                        "tokens, metadata) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                        (ns_id, sid, first + i, turn.role, text, content, turn.name, turn.model,
                         format_timestamp(turn.timestamp), int(tokens), meta)).fetchone()[0]
                    out.append(StoredTurn(int(tid), namespace, b.session, first + i, int(tokens), turn))
        return out

    def turns(self, namespace: str, session: str | None = None, *, ids: Sequence[int] | None = None,
              min_seq: int | None = None, max_seq: int | None = None, newest_first: bool = False,
              limit: int | None = None, role: str | None = None) -> list[StoredTurn]:
        """Turns of a namespace (optionally one session, optionally one role), ordered by session then sequence."""
        # Resolve names to ids first, so the scan uses UNIQUE(session_id, seq) for one
        # session instead of sorting the whole namespace on every page.
        with self._lock, self._errors():
            ns_id = self._namespace_id(namespace, create=False)
            if ns_id is None:
                return []
            where = ["t.namespace_id = ?"]
            params: list[Any] = [ns_id]
            if session is not None:
                row = self._conn.execute("SELECT id FROM sessions WHERE namespace_id=? AND name=?",
                                         (ns_id, session)).fetchone()
                if row is None:
                    return []
                where.append("t.session_id = ?")
                params.append(row[0])
        if ids is not None:
            ids = [int(i) for i in ids]
            if not ids:
                return []
            where.append(f"t.id IN ({','.join('?' * len(ids))})")
            params.extend(ids)
        if min_seq is not None:
            where.append("t.seq >= ?")
            params.append(min_seq)
        if max_seq is not None:
            where.append("t.seq <= ?")
            params.append(max_seq)
        if role is not None:
            where.append("t.role = ?")
            params.append(role)
        order = "DESC" if newest_first else "ASC"
        sql = f"{_TURN_SELECT} WHERE {' AND '.join(where)} ORDER BY t.session_id {order}, t.seq {order}"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        return [_row_to_stored(r) for r in self._query(sql, params)]

    def latest_session(self, namespace: str) -> str | None:
        """The session of the most recently stored turn (``None`` if there is none)."""
        rows = self._query(
            "SELECT s.name FROM turns t JOIN sessions s ON s.id = t.session_id JOIN namespaces n "
            "ON n.id = t.namespace_id WHERE n.name = ? ORDER BY t.id DESC LIMIT 1", (namespace,))
        return rows[0][0] if rows else None

    def iter_turns(self, namespace: str, *, batch_size: int = 1000) -> Iterator[StoredTurn]:
        """Every turn of a namespace in (session, sequence) order, streamed in batches."""
        last_session, last_seq = -1, 0
        while True:
            rows = self._query(
                f"{_TURN_SELECT.replace('SELECT t.id', 'SELECT t.session_id, t.id')} "
                "WHERE n.name = ? AND (t.session_id > ? OR (t.session_id = ? AND t.seq > ?)) "
                "ORDER BY t.session_id, t.seq LIMIT ?",
                (namespace, last_session, last_session, last_seq, batch_size))
            if not rows:
                return
            for r in rows:
                yield _row_to_stored(r[1:])
            last_session, last_seq = rows[-1][0], rows[-1][4]

    def turn_ids(self, namespace: str) -> list[int]:
        """Ids of every turn of the namespace, ascending (cheap: no content is read)."""
        return [r[0] for r in self._query(
            "SELECT t.id FROM turns t JOIN namespaces n ON n.id = t.namespace_id WHERE n.name = ? ORDER BY t.id",
            (namespace,))]

    def turn_count(self, namespace: str) -> int:
        """Number of turns in the namespace."""
        return int(self._query("SELECT COUNT(*) FROM turns t JOIN namespaces n ON n.id = t.namespace_id "
                               "WHERE n.name = ?", (namespace,))[0][0])

    def has_tool_call(self, namespace: str, session: str, tool_use_id: str) -> bool:
        """Whether an assistant turn of the session made the tool call ``tool_use_id``."""
        # Block content is compact JSON, so the call's id appears as "id":"<json string>".
        needle = json.dumps(tool_use_id, ensure_ascii=False)
        pattern = '%"id":' + needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        rows = self._query(
            "SELECT t.content FROM turns t JOIN sessions s ON s.id = t.session_id JOIN namespaces n "
            "ON n.id = t.namespace_id WHERE n.name = ? AND s.name = ? AND t.role = 'assistant' "
            "AND t.content LIKE ? ESCAPE '\\'", (namespace, session, pattern))
        return any(tool_use_id in turn_from_columns("assistant", "", c, None, None,
                                                    "2000-01-01T00:00:00Z", None).tool_use_ids for (c,) in rows)

    def stats(self, namespace: str) -> NamespaceStats:
        """Counts and sizes for the namespace."""
        row = self._query(
            "SELECT COUNT(*), COALESCE(SUM(t.tokens), 0), "
            "COALESCE(SUM(LENGTH(CAST(t.text AS BLOB)) + COALESCE(LENGTH(CAST(t.content AS BLOB)), 0)), 0) "
            "FROM turns t JOIN namespaces n ON n.id = t.namespace_id WHERE n.name = ?", (namespace,))[0]
        sessions = self._query("SELECT COUNT(*) FROM sessions s JOIN namespaces n ON n.id = s.namespace_id "
                               "WHERE n.name = ?", (namespace,))[0][0]
        return NamespaceStats(namespace, int(sessions), int(row[0]), int(row[1]), int(row[2]))

    def size_bytes(self) -> int:
        """Bytes of the database file plus its WAL (0 in memory)."""
        if self.path == ":memory:":
            return 0
        return sum(os.path.getsize(self.path + suffix) for suffix in ("", "-wal")
                   if os.path.exists(self.path + suffix))

    def integrity_check(self) -> str:
        """Result of ``PRAGMA integrity_check`` (``"ok"`` when healthy)."""
        return str(self._query("PRAGMA integrity_check")[0][0])

    def close(self) -> None:
        """Close the connection. Idempotent."""
        with self._lock:
            try:
                self._conn.close()
            except sqlite3.Error as exc:
                raise BackendError(f"closing {self.path} failed: {exc}") from exc

    def __enter__(self) -> SQLiteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SQLiteStore({self.path!r})"
