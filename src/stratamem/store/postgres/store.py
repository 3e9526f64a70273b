"""The PostgreSQL store: the scale-out backend for many agent processes on many hosts.

Same :class:`~stratamem.store.base.Store` protocol and the same migration
names as :mod:`stratamem.store.sqlite`. What differs is how it is made safe:

* **Connections** come from a ``psycopg_pool`` pool, each checked before use,
  so the store keeps serving once a restarted server is back. The check is a
  round trip only when the connection's socket has something to read (the
  server closed it or said why): a quiet one is handed out as it is, since
  a round trip per checkout was a third of a warm ``context()``'s statements.
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
import re
import select
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool

from ...errors import BackendError
from ..record_store import RecordStore
from ..sql import POSTGRES, Sql
from . import schema as postgres_schema
from .forget import PostgresForget
from .items import PostgresItemStore

__all__ = ["PostgresStore"]

_SCHEMA_RE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")

# Errors after which PostgreSQL has rolled the transaction back and a retry is safe.
_RETRYABLE = (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure)


def _check(conn: psycopg.Connection) -> None:
    """The pool's check on checkout: raises for a connection that no longer works, so the pool opens another.

    An idle connection in autocommit mode has nothing to read. A server that
    restarted, crashed or ended the backend closed the socket or sent its
    reason first, so the socket reads as ready: only then the round trip of
    ``ConnectionPool.check_connection``. (A link that died silently, e.g. a
    network partition, is found by the first statement instead, which raises
    ``BackendError`` and the pool drops that connection.)
    """
    if conn.closed or conn.broken:
        raise psycopg.OperationalError("the pooled connection is closed")
    ready, _, _ = select.select([conn.fileno()], [], [], 0)
    if ready:
        ConnectionPool.check_connection(conn)


def redact_dsn(dsn: str) -> str:
    """The DSN without its password, for messages and reprs."""
    try:
        params = conninfo_to_dict(dsn)
    except psycopg.Error:
        return "<unparsable DSN>"
    params.pop("password", None)
    return " ".join(f"{k}={v}" for k, v in sorted(params.items()) if v not in (None, ""))


class PostgresStore(RecordStore):
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
    item_store_class = PostgresItemStore
    forget_class = PostgresForget

    ids_commit_in_order = True
    """A namespace's appends take its data-version row lock (held to commit) before their turns take ids
    (:meth:`~stratamem.store.record_store.RecordStore.append`): a committed turn's id is above every id of
    the namespace committed before it, so the recall index's in-step check reads only the turns above its
    newest id instead of counting every turn of the namespace (issue 28)."""

    def __init__(
        self,
        dsn: str,
        *,
        schema: str | None = None,
        min_connections: int = 1,
        max_connections: int = 8,
        busy_timeout_ms: int = 30_000,
        connect_timeout_s: float = 10.0,
        tokenizer: str = "o200k_base",
    ) -> None:
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
            dsn,
            min_size=min_connections,
            max_size=max_connections,
            open=False,
            configure=self._configure,
            check=_check,
            kwargs={"autocommit": True},
            timeout=self._busy_ms / 1000,
            num_workers=2,
            name="stratamem",
        )
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

    _BACKEND_ERRORS = (psycopg.Error,)  # pool errors included

    def _backend_error(self, exc: Exception) -> BackendError:
        return BackendError(f"PostgreSQL error ({redact_dsn(self.dsn)}): {exc}", transient=isinstance(exc, _RETRYABLE))

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

    # Namespaces, sessions and turns: RecordStore (store/record_store.py). Feature stores:
    # SharedFeatures (store/features.py) on ``sql``; items and forgetting are the shared classes
    # with PostgreSQL's locks, tsvector search and VACUUM FULL (item_store_class, forget_class).

    def size_bytes(self) -> int:
        """Bytes of stratamem's tables and indexes in the store's schema."""
        row = self.sql.rows(
            "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema() AND c.relkind = 'r'"
        )
        return int(row[0][0])

    def part_bytes(self) -> dict[str, int]:
        """Bytes per part of the store's schema (tables, their indexes and TOAST; :mod:`stratamem.store.part_bytes`)."""
        from ..part_bytes import postgres_part_bytes

        return postgres_part_bytes(
            self.sql.rows(
                "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c JOIN pg_namespace n "
                "ON n.oid = c.relnamespace WHERE n.nspname = current_schema() AND c.relkind = 'r'"
            )
        )

    def server_time(self) -> datetime:
        """The server's clock (``now()``); a cheap liveness probe."""
        return self.sql.rows("SELECT now()")[0][0]

    def close(self) -> None:
        """Close the pool. Idempotent."""
        if not self._closed:
            self._closed = True
            self._pool.close()

    def __repr__(self) -> str:
        return f"PostgresStore({redact_dsn(self.dsn)!r}, schema={self.schema!r})"
