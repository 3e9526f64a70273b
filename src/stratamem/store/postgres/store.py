"""The PostgreSQL store: the scale-out backend for many agent processes on many hosts.

Same :class:`~stratamem.store.base.Store` protocol and the same migration
names as :mod:`stratamem.store.sqlite`. What differs is how it is made safe:

* **Connections** come from a ``psycopg_pool`` pool, each checked before use,
  so the store keeps serving once a restarted server is back.
* **One transaction per write.** A call that raises stored nothing. A
  :meth:`PostgresStore.transaction` pins one connection to the calling
  thread; store calls inside it join it (nested blocks become savepoints).
* **Gap-free sequences** under concurrent writers: a batch reserves its range
  with ``UPDATE sessions SET last_seq = last_seq + n ... RETURNING``, whose
  row lock serializes writers of that session only. Sessions are locked in
  name order, so two batches touching the same sessions cannot deadlock.
* **The tenant column.** Every table has ``namespace`` and every statement
  filters on it (see :mod:`stratamem.store.postgres.schema`).
* **Errors.** Every ``psycopg.Error`` (pool timeouts included) becomes
  :class:`~stratamem.errors.BackendError` with the original as ``__cause__``.

Needs the ``stratamem[postgres]`` extra (``psycopg[binary]``, ``psycopg-pool``).
"""

from __future__ import annotations

import functools
import json
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool

from ...errors import BackendError, ConfigError, NotFoundError, StratamemError
from ...records import Session, StoredTurn, check_name
from . import schema as postgres_schema
from ..base import NamespaceStats, TurnBatch
from ..features import SharedFeatures
from ..sql import POSTGRES, Sql
from ..rows import turn_columns, turn_from_columns

if TYPE_CHECKING:
    from .forget import PostgresForget
    from .items import PostgresItemStore

__all__ = ["PostgresStore"]

_SCHEMA_RE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")

# Errors after which PostgreSQL has rolled the transaction back and a retry is safe.
_RETRYABLE = (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure)

_TURN_SELECT = """
    SELECT t.id, t.namespace, s.name, t.seq, t.tokens, t.role, t.text, t.content, t.name, t.model, t.ts,
           t.metadata
    FROM turns t JOIN sessions s ON s.namespace = t.namespace AND s.id = t.session_id
"""


def _row_to_stored(row: Sequence[Any]) -> StoredTurn:
    return StoredTurn(id=row[0], namespace=row[1], session=row[2], seq=row[3], tokens=row[4],
                      turn=turn_from_columns(*row[5:12]))


def redact_dsn(dsn: str) -> str:
    """The DSN without its password, for messages and reprs."""
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.Error:
        return "<unparsable DSN>"
    params.pop("password", None)
    return " ".join(f"{k}={v}" for k, v in sorted(params.items()) if v not in (None, ""))


class PostgresStore(SharedFeatures):
    """A :class:`~stratamem.store.base.Store` in a PostgreSQL database.

    Args:
        dsn: libpq connection string or ``postgresql://`` URL.
        schema: Schema holding stratamem's tables (created if missing); several
            independent stores can share one database this way. Default: the
            connection's own ``search_path`` (usually ``public``).
        min_connections: Connections the pool keeps open.
        max_connections: Upper bound of the pool; size it against the server's
            ``max_connections`` divided by the number of processes.
        busy_timeout_ms: How long a statement waits for a row lock (``lock_timeout``)
            and a caller waits for a free pooled connection.
        connect_timeout_s: How long opening the store waits for the server.
        tokenizer: Name of the tokenizer the caller counts with; recorded on
            first use, and opening with another one is refused.

    Raises:
        ValueError: ``schema`` is not a lowercase SQL identifier, or pool sizes are invalid.
        BackendError: The server cannot be reached or refused the connection.
        MigrationError: The schema was written by a newer stratamem.
        ConfigError: The store was created with another tokenizer.
    """

    backend = "postgres"

    def __init__(self, dsn: str, *, schema: str | None = None, min_connections: int = 1,
                 max_connections: int = 8, busy_timeout_ms: int = 30_000, connect_timeout_s: float = 10.0,
                 tokenizer: str = "o200k_base") -> None:
        if schema is not None and not _SCHEMA_RE.match(schema):
            raise ValueError(f"schema must be a lowercase SQL identifier, got {schema!r}")
        if not 0 < min_connections <= max_connections:
            raise ValueError("need 0 < min_connections <= max_connections")
        self.dsn = dsn
        self.schema = schema
        self._busy_ms = int(busy_timeout_ms)
        self._local = threading.local()
        self._closed = False
        try:
            with psycopg.connect(dsn, autocommit=True, connect_timeout=max(1, int(connect_timeout_s))) as conn:
                if schema is not None:
                    postgres_schema.ensure_schema(conn, schema)
                self._configure(conn)
                postgres_schema.apply(conn)
        except psycopg.Error as exc:
            raise BackendError(f"cannot open PostgreSQL store at {redact_dsn(dsn)}: {exc}") from exc
        self._pool = ConnectionPool(
            dsn, min_size=min_connections, max_size=max_connections, open=False, configure=self._configure,
            check=ConnectionPool.check_connection, kwargs={"autocommit": True},
            timeout=self._busy_ms / 1000, num_workers=2, name="stratamem")
        try:
            self._pool.open(wait=True, timeout=connect_timeout_s)
            self._check_tokenizer(tokenizer)
        except psycopg.Error as exc:
            self._pool.close()
            raise BackendError(f"cannot open PostgreSQL store at {redact_dsn(dsn)}: {exc}") from exc
        except BaseException:
            self._pool.close()
            raise
        self.tokenizer = tokenizer

    # --- plumbing ---------------------------------------------------------------------

    def _configure(self, conn: psycopg.Connection) -> None:
        """Per-connection settings: schema, lock wait, a name visible in pg_stat_activity."""
        if self.schema is not None:
            conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(self.schema)))
        conn.execute(sql.SQL("SET lock_timeout = {}").format(sql.Literal(f"{self._busy_ms}ms")))
        conn.execute("SET application_name = 'stratamem'")

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """Map psycopg errors (pool errors included) to BackendError, keeping the cause."""
        try:
            yield
        except StratamemError:
            raise
        except psycopg.Error as exc:
            raise BackendError(f"PostgreSQL error ({redact_dsn(self.dsn)}): {exc}") from exc

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        """A connection for one unit of work: the thread's transaction one, else a pooled one.

        For the derived-data modules of this package. Outside :meth:`transaction`
        the connection is in autocommit mode.
        """
        pinned = getattr(self._local, "conn", None)
        if pinned is not None:
            yield pinned
            return
        if self._closed:
            raise BackendError("the PostgreSQL store is closed")
        with self._errors(), self._pool.connection() as conn:
            yield conn

    def in_transaction(self) -> bool:
        """Whether the calling thread is inside :meth:`transaction`."""
        return getattr(self._local, "conn", None) is not None

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """A write transaction on one connection; nested calls join it (as savepoints)."""
        pinned = getattr(self._local, "conn", None)
        if pinned is not None:
            with self._errors(), pinned.transaction():
                yield
            return
        with self.connection() as conn, self._errors():
            self._local.conn = conn
            try:
                with conn.transaction():
                    yield
            finally:
                self._local.conn = None

    def _query(self, query: Any, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self.connection() as conn, self._errors():
            return conn.execute(query, params).fetchall()

    def _check_tokenizer(self, tokenizer: str) -> None:
        with self.transaction(), self.connection() as conn:
            conn.execute("INSERT INTO store_meta (key, value) VALUES ('tokenizer', %s) ON CONFLICT DO NOTHING",
                         (tokenizer,))
            stored = conn.execute("SELECT value FROM store_meta WHERE key = 'tokenizer'").fetchone()[0]
        if stored != tokenizer:
            raise ConfigError(f"this store keeps token counts made with {stored!r}; open it with that tokenizer "
                              f"(asked for {tokenizer!r})")

    @functools.cached_property
    def sql(self) -> Sql:
        """The shared SQL layer over this store's pool, for the feature stores (:mod:`stratamem.store.sql`)."""
        return Sql(POSTGRES, self._reading, self._writing)

    @contextmanager
    def _reading(self) -> Iterator[psycopg.Connection]:
        with self.connection() as conn, self._errors():
            yield conn

    @contextmanager
    def _writing(self) -> Iterator[psycopg.Connection]:
        with self.transaction(), self.connection() as conn, self._errors():
            yield conn

    # --- feature stores -----------------------------------------------------------------
    # Embeddings, nodes, manifests, conversations and ingest keys come from SharedFeatures
    # (store/features.py), built on ``sql``; memory items and forgetting are still written
    # per backend and share this store's pool and transaction().

    @functools.cached_property
    def items(self) -> PostgresItemStore:
        """Memory items of every namespace (:mod:`stratamem.store.postgres.items`)."""
        from .items import PostgresItemStore

        return PostgresItemStore(self)

    @functools.cached_property
    def forgetting(self) -> PostgresForget:
        """Deleting turns and everything derived from them (:mod:`stratamem.store.postgres.forget`)."""
        from .forget import PostgresForget

        return PostgresForget(self)

    # --- namespaces and sessions ------------------------------------------------------

    def namespaces(self) -> list[str]:
        """All namespace names, sorted."""
        return [r[0] for r in self._query("SELECT namespace FROM namespaces ORDER BY namespace COLLATE \"C\"")]

    def has_namespace(self, namespace: str) -> bool:
        """Whether the namespace exists."""
        return bool(self._query("SELECT 1 FROM namespaces WHERE namespace = %s", (namespace,)))

    def namespace_stats(self) -> list[NamespaceStats]:
        """Every namespace with its counts, sorted by name (one query)."""
        rows = self._query(
            "SELECT n.namespace, (SELECT COUNT(*) FROM sessions s WHERE s.namespace = n.namespace), COUNT(t.id), "
            "COALESCE(SUM(t.tokens), 0), "
            "COALESCE(SUM(octet_length(t.text) + COALESCE(octet_length(t.content), 0)), 0) "
            "FROM namespaces n LEFT JOIN turns t ON t.namespace = n.namespace GROUP BY n.namespace "
            "ORDER BY n.namespace COLLATE \"C\"")
        return [NamespaceStats(r[0], int(r[1]), int(r[2]), int(r[3]), int(r[4])) for r in rows]

    def ensure_session(self, namespace: str, session: str, *, platform: str | None = None,
                       channel: str | None = None, created_at: datetime | None = None) -> Session:
        """Return the session, creating it (and the namespace) if missing.

        ``platform``, ``channel`` and ``created_at`` apply only when it is created.
        """
        check_name(namespace, "namespace")
        check_name(session, "session")
        with self.transaction(), self.connection() as conn:
            conn.execute("INSERT INTO namespaces (namespace) VALUES (%s) ON CONFLICT DO NOTHING", (namespace,))
            conn.execute("INSERT INTO sessions (namespace, name, platform, channel, created_at) "
                         "VALUES (%s, %s, %s, %s, COALESCE(%s, now())) ON CONFLICT (namespace, name) DO NOTHING",
                         (namespace, session, platform, channel, created_at))
        return self.session(namespace, session)

    def session(self, namespace: str, session: str) -> Session:
        """Return an existing session.

        Raises:
            NotFoundError: No such namespace or session.
        """
        rows = self._query("SELECT name, platform, channel, created_at FROM sessions "
                           "WHERE namespace = %s AND name = %s", (namespace, session))
        if not rows:
            if not self.has_namespace(namespace):
                raise NotFoundError(f"unknown namespace {namespace!r}")
            raise NotFoundError(f"unknown session {session!r} in namespace {namespace!r}")
        name, platform, channel, created = rows[0]
        return Session(namespace, name, platform, channel, created.astimezone(timezone.utc))

    def sessions(self, namespace: str) -> list[Session]:
        """All sessions of a namespace, oldest first."""
        rows = self._query("SELECT name, platform, channel, created_at FROM sessions WHERE namespace = %s "
                           "ORDER BY id", (namespace,))
        return [Session(namespace, r[0], r[1], r[2], r[3].astimezone(timezone.utc)) for r in rows]

    # --- turns ------------------------------------------------------------------------

    def append(self, namespace: str, batches: Sequence[TurnBatch]) -> list[StoredTurn]:
        """Store turns in one transaction: all of them or none.

        A deadlock or serialization failure (PostgreSQL rolled everything back)
        is retried up to twice when this call owns the transaction.

        Returns:
            The stored turns, in input order.

        Raises:
            ValidationError: A namespace or session name is invalid.
            ValueError: A batch has a different number of turns and token counts.
            BackendError: The write failed; nothing was stored (if the connection
                dropped during COMMIT, PostgreSQL alone knows whether it landed).
        """
        check_name(namespace, "namespace")
        for b in batches:
            check_name(b.session, "session")
            if len(b.turns) != len(b.tokens):
                raise ValueError("each batch needs one token count per turn")
        attempts = 1 if self.in_transaction() else 3
        for attempt in range(attempts):
            try:
                with self.transaction(), self.connection() as conn:
                    return self._append(conn, namespace, batches)
            except BackendError as exc:
                if attempt + 1 < attempts and isinstance(exc.__cause__, _RETRYABLE):
                    continue
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _append(self, conn: psycopg.Connection, namespace: str, batches: Sequence[TurnBatch]) -> list[StoredTurn]:
        conn.execute("INSERT INTO namespaces (namespace) VALUES (%s) ON CONFLICT DO NOTHING", (namespace,))
        counts: dict[str, int] = {}
        labels: dict[str, tuple[str | None, str | None]] = {}
        for b in batches:
            if b.turns:
                counts[b.session] = counts.get(b.session, 0) + len(b.turns)
                labels.setdefault(b.session, (b.platform, b.channel))
        if not counts:
            return []
        # Create missing sessions in input order (their ids order ``turns()`` as on SQLite) ...
        order = list(counts)
        conn.execute(
            "INSERT INTO sessions (namespace, name, platform, channel) "
            "SELECT %s, u.name, u.platform, u.channel FROM unnest(%s::text[], %s::text[], %s::text[]) "
            "WITH ORDINALITY AS u(name, platform, channel, i) ORDER BY u.i ON CONFLICT (namespace, name) DO NOTHING",
            (namespace, order, [labels[n][0] for n in order], [labels[n][1] for n in order]))
        # ... then reserve each range under the session's row lock, in name order so
        # that two writers touching the same sessions cannot deadlock.
        next_seq: dict[str, int] = {}
        sid: dict[str, int] = {}
        for name in sorted(counts):
            row = conn.execute(
                "UPDATE sessions SET last_seq = last_seq + %s WHERE namespace = %s AND name = %s "
                "RETURNING id, last_seq", (counts[name], namespace, name)).fetchone()
            sid[name] = int(row[0])
            next_seq[name] = int(row[1]) - counts[name] + 1
        cols: list[list[Any]] = [[] for _ in range(10)]
        placed: list[tuple[str, int, int]] = []
        for b in batches:
            for turn, tokens in zip(b.turns, b.tokens, strict=True):
                seq = next_seq[b.session]
                next_seq[b.session] = seq + 1
                text, content, meta = turn_columns(turn)
                for col, value in zip(cols, (sid[b.session], seq, turn.role, text, content, turn.name, turn.model,
                                             turn.timestamp, int(tokens), meta), strict=True):
                    col.append(value)
                placed.append((b.session, seq, int(tokens)))
        rows = conn.execute(
            "INSERT INTO turns (namespace, session_id, seq, role, text, content, name, model, ts, tokens, metadata) "
            "SELECT %s, * FROM unnest(%s::bigint[], %s::bigint[], %s::text[], %s::text[], %s::text[], %s::text[], "
            "%s::text[], %s::timestamptz[], %s::int[], %s::text[]) RETURNING session_id, seq, id",
            (namespace, *cols)).fetchall()
        ids = {(r[0], r[1]): int(r[2]) for r in rows}
        turns = [t for b in batches for t in b.turns]
        return [StoredTurn(ids[(sid[name], seq)], namespace, name, seq, tokens, turn)
                for (name, seq, tokens), turn in zip(placed, turns, strict=True)]

    def turns(self, namespace: str, session: str | None = None, *, ids: Sequence[int] | None = None,
              min_seq: int | None = None, max_seq: int | None = None, newest_first: bool = False,
              limit: int | None = None, role: str | None = None) -> list[StoredTurn]:
        """Turns of a namespace (optionally one session, optionally one role), ordered by session then sequence."""
        where = ["t.namespace = %s"]
        params: list[Any] = [namespace]
        if session is not None:
            where.append("s.name = %s")
            params.append(session)
        if ids is not None:
            id_list = [int(i) for i in ids]
            if not id_list:
                return []
            where.append("t.id = ANY(%s)")
            params.append(id_list)
        if min_seq is not None:
            where.append("t.seq >= %s")
            params.append(int(min_seq))
        if max_seq is not None:
            where.append("t.seq <= %s")
            params.append(int(max_seq))
        if role is not None:
            where.append("t.role = %s")
            params.append(role)
        direction = "DESC" if newest_first else "ASC"
        query = f"{_TURN_SELECT} WHERE {' AND '.join(where)} ORDER BY t.session_id {direction}, t.seq {direction}"
        if limit is not None:
            query += " LIMIT %s"
            params.append(int(limit))
        return [_row_to_stored(r) for r in self._query(query, params)]

    def latest_session(self, namespace: str) -> str | None:
        """The session of the most recently stored turn (``None`` if there is none)."""
        rows = self._query(
            "SELECT s.name FROM turns t JOIN sessions s ON s.namespace = t.namespace AND s.id = t.session_id "
            "WHERE t.namespace = %s ORDER BY t.id DESC LIMIT 1", (namespace,))
        return rows[0][0] if rows else None

    def iter_turns(self, namespace: str, *, batch_size: int = 1000) -> Iterator[StoredTurn]:
        """Every turn of a namespace in (session, sequence) order, streamed in batches."""
        last_session, last_seq = -1, 0
        while True:
            rows = self._query(
                f"{_TURN_SELECT.replace('SELECT t.id', 'SELECT t.session_id, t.id')} "
                "WHERE t.namespace = %s AND (t.session_id, t.seq) > (%s, %s) ORDER BY t.session_id, t.seq LIMIT %s",
                (namespace, last_session, last_seq, batch_size))
            if not rows:
                return
            for r in rows:
                yield _row_to_stored(r[1:])
            last_session, last_seq = rows[-1][0], rows[-1][4]

    def turn_ids(self, namespace: str) -> list[int]:
        """Ids of every turn of the namespace, ascending (cheap: no content is read)."""
        return [r[0] for r in self._query("SELECT id FROM turns WHERE namespace = %s ORDER BY id", (namespace,))]

    def turn_count(self, namespace: str) -> int:
        """Number of turns in the namespace."""
        return int(self._query("SELECT COUNT(*) FROM turns WHERE namespace = %s", (namespace,))[0][0])

    def has_tool_call(self, namespace: str, session: str, tool_use_id: str) -> bool:
        """Whether an assistant turn of the session made the tool call ``tool_use_id``."""
        needle = json.dumps(tool_use_id, ensure_ascii=False)
        pattern = '%"id":' + needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        rows = self._query(
            "SELECT t.content FROM turns t JOIN sessions s ON s.namespace = t.namespace AND s.id = t.session_id "
            "WHERE t.namespace = %s AND s.name = %s AND t.role = 'assistant' AND t.content LIKE %s ESCAPE '\\'",
            (namespace, session, pattern))
        return any(tool_use_id in turn_from_columns("assistant", "", c, None, None,
                                                    "2000-01-01T00:00:00Z", None).tool_use_ids for (c,) in rows)

    def stats(self, namespace: str) -> NamespaceStats:
        """Counts and sizes for the namespace."""
        row = self._query(
            "SELECT COUNT(*), COALESCE(SUM(tokens), 0), "
            "COALESCE(SUM(octet_length(text) + COALESCE(octet_length(content), 0)), 0) "
            "FROM turns WHERE namespace = %s", (namespace,))[0]
        sessions = self._query("SELECT COUNT(*) FROM sessions WHERE namespace = %s", (namespace,))[0][0]
        return NamespaceStats(namespace, int(sessions), int(row[0]), int(row[1]), int(row[2]))

    def size_bytes(self) -> int:
        """Bytes of stratamem's tables and indexes in the store's schema."""
        row = self._query(
            "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema() AND c.relkind = 'r'")
        return int(row[0][0])

    def server_time(self) -> datetime:
        """The server's clock (``now()``); a cheap liveness probe."""
        return self._query("SELECT now()")[0][0]

    def close(self) -> None:
        """Close the pool. Idempotent."""
        if not self._closed:
            self._closed = True
            self._pool.close()

    def __enter__(self) -> PostgresStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PostgresStore({redact_dsn(self.dsn)!r}, schema={self.schema!r})"
