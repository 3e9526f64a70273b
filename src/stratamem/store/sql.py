"""The one SQL layer: statements written once, the backend differences kept here.

A feature store (manifests, ingest keys, conversations, ...) is one module
that speaks to a :class:`Sql` handle; each backend's store makes that handle
from its own connection handling (SQLite: one connection under a lock;
PostgreSQL: a pool with a per-thread transaction connection). Statements are
written with ``?`` placeholders; :meth:`Dialect.sql` turns them into ``%s``
for psycopg. What differs between the dialects beyond that — timestamps
(ISO text on SQLite, ``TIMESTAMPTZ`` on PostgreSQL), byte-order sorting,
migration DDL — is a method or a per-dialect value here or beside the DDL.

Plain strings, not an ORM: the context path runs a handful of statements per
request and a query builder would add work to each (see docs/architecture.md).
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ..errors import ValidationError
from ..records import format_timestamp, parse_timestamp
from .turn_stamps import unpack_stamp

__all__ = [
    "CHUNK",
    "Dialect",
    "POSTGRES",
    "SQLITE",
    "Sql",
    "SqlFeature",
    "Writer",
    "check_params",
    "chunks",
    "dialect_of",
    "run_ddl",
    "upsert",
]

#: Most values bound in one ``IN`` list: SQLite's limit on host parameters is
#: 32,766 in current builds but 999 in old ones; stay under the old one.
CHUNK = 900


@dataclass(frozen=True)
class Dialect:
    """One SQL dialect's spellings. Use the module constants :data:`SQLITE` and :data:`POSTGRES`."""

    name: str

    def sql(self, statement: str) -> str:
        """``statement`` with its ``?`` placeholders in this dialect's style.

        Shared statements must not hold a literal ``?`` (PostgreSQL's jsonb
        operator, a string constant); a literal ``%`` is escaped for psycopg.
        """
        return statement if self.name == "sqlite" else _pyformat(statement)

    def stamp(self, at: datetime) -> Any:
        """A timestamp as this dialect stores it (ISO text on SQLite, an aware datetime on PostgreSQL)."""
        return format_timestamp(at) if self.name == "sqlite" else at

    def read_stamp(self, value: Any) -> datetime:
        """A stored timestamp back as an aware UTC datetime (on SQLite: ISO text, or a turn's 8-byte form)."""
        if self.name == "sqlite":
            return parse_timestamp(value) if isinstance(value, str) else unpack_stamp(value)
        return value.astimezone(UTC)

    def bytewise(self, column: str) -> str:
        """``column`` for ``ORDER BY`` in code-point order (SQLite's default; PostgreSQL needs ``COLLATE "C"``)."""
        return column if self.name == "sqlite" else f'{column} COLLATE "C"'

    @property
    def tenant(self) -> str:
        """The column naming a derived row's namespace.

        SQLite: ``namespace_id``, a key into ``namespaces``; PostgreSQL:
        ``namespace``, the name itself (the tenant column every key starts
        with, see :mod:`stratamem.store.postgres.schema`). Its value for a
        namespace is :meth:`Sql.tenant_key`.
        """
        return "namespace_id" if self.name == "sqlite" else "namespace"

    @property
    def namespace_key(self) -> str:
        """The column of ``namespaces`` that :attr:`tenant` holds (``id`` on SQLite, ``namespace`` on PostgreSQL)."""
        return "id" if self.name == "sqlite" else "namespace"

    @property
    def namespace_name(self) -> str:
        """The column of ``namespaces`` holding the name (``name`` on SQLite, ``namespace`` on PostgreSQL)."""
        return "name" if self.name == "sqlite" else "namespace"

    def in_namespace(self, alias: str) -> str:
        """A condition that row ``alias`` belongs to the namespace whose name is bound to its one ``?``.

        SQLite looks the id up in a scalar subquery, which it runs once and
        then uses like a constant (so the tenant index still applies); this
        keeps one statement where resolving the id first would take two.
        """
        if self.name == "sqlite":
            return f"{alias}.namespace_id = (SELECT id FROM namespaces WHERE name = ?)"
        return f"{alias}.namespace = ?"

    def one_of(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """``column`` among ``values``, with its parameters: an ``IN`` list on SQLite, ``= ANY(array)`` on PostgreSQL.

        One array parameter keeps PostgreSQL's statement text the same for
        any number of values; SQLite has no arrays (keep ``values`` under
        :data:`CHUNK` there).
        """
        if self.name == "sqlite":
            return self.in_list(column, len(values)), list(values)
        return f"{column} = ANY(?)", [list(values)]

    def octets(self, expr: str) -> str:
        """The UTF-8 byte length of a text expression."""
        # SQLite: a turn text may be stored packed (store/text_codec.py); the function reads its raw length.
        return f"stratamem_octets({expr})" if self.name == "sqlite" else f"octet_length({expr})"

    def in_list(self, column: str, count: int) -> str:
        """``column IN (?, ...)`` with ``count`` placeholders (every value its own parameter)."""
        return f"{column} IN ({','.join('?' * count)})"


SQLITE = Dialect("sqlite")
POSTGRES = Dialect("postgres")


@functools.lru_cache(maxsize=512)
def _pyformat(statement: str) -> str:
    # Cached: the same few statements are converted on every call.
    return statement.replace("%", "%%").replace("?", "%s")


def chunks(values: Sequence[Any], size: int = CHUNK) -> Iterator[Sequence[Any]]:
    """``values`` in consecutive slices of at most ``size`` (none for an empty sequence)."""
    for i in range(0, len(values), size):
        yield values[i : i + size]


def check_params(params: Sequence[Any]) -> None:
    """Refuse an integer parameter outside 64 bits before it reaches the database.

    Every integer column of both stores is 64-bit. Beyond that range sqlite3
    cannot bind the value at all (an ``OverflowError``, a crash in the caller)
    while psycopg binds it as ``numeric`` (a comparison that silently finds
    nothing): an id, sequence number or level that large is a caller's
    mistake, and both backends now say so alike. Arrays (PostgreSQL's
    ``= ANY(?)``) are checked element by element.

    Raises:
        ValidationError: The integer and its range.
    """
    for p in params:
        if type(p) is int:
            if not _INT_MIN <= p <= _INT_MAX:
                _out_of_range(p)
        elif type(p) is list:
            for q in p:
                if type(q) is int and not _INT_MIN <= q <= _INT_MAX:
                    _out_of_range(q)


_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1


def _out_of_range(value: int) -> None:
    shown = str(value) if abs(value) < 10**30 else f"of {value.bit_length()} bits"
    raise ValidationError(f"integer {shown} is outside the 64-bit range (-2^63 to 2^63-1)")


def upsert(table: str, keys: Sequence[str], columns: Sequence[str]) -> str:
    """``INSERT`` of one row that replaces ``columns`` of the row already holding its ``keys``.

    Both backends spell it alike (``ON CONFLICT ... DO UPDATE SET c = excluded.c``);
    parameters are the keys then the columns, in order.
    """
    names = [*keys, *columns]
    return (
        f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))}) "
        f"ON CONFLICT ({', '.join(keys)}) DO UPDATE SET " + ", ".join(f"{c} = excluded.{c}" for c in columns)
    )


def dialect_of(conn: Any) -> Dialect:
    """The dialect of a raw connection (as migration bodies receive it)."""
    return SQLITE if isinstance(conn, sqlite3.Connection) else POSTGRES


def run_ddl(conn: Any, ddl: Mapping[str, Sequence[str]]) -> None:
    """Run the statements ``ddl`` holds for ``conn``'s dialect, in order, in the caller's transaction."""
    for statement in ddl[dialect_of(conn).name]:
        conn.execute(statement)


class Writer:
    """Statements inside one write transaction (see :meth:`Sql.write`)."""

    def __init__(self, conn: Any, dialect: Dialect) -> None:
        self._conn = conn
        self._dialect = dialect
        # SQLite statements run as written (skips a call per statement on the append path).
        self._spell = None if dialect.name == "sqlite" else dialect.sql

    def tenant(self, namespace: str) -> Any:
        """The :attr:`Dialect.tenant` value of ``namespace``, creating the namespace in this transaction if missing.

        SQLite: the row id (looked up first: namespaces almost always exist);
        PostgreSQL: the name, after an insert that does nothing when the row is there.
        """
        if self._dialect.name != "sqlite":
            self.execute("INSERT INTO namespaces (namespace) VALUES (?) ON CONFLICT DO NOTHING", (namespace,))
            return namespace
        row = self.execute("SELECT id FROM namespaces WHERE name = ?", (namespace,)).fetchone()
        if row is not None:
            return int(row[0])
        return int(
            self.execute(
                "INSERT INTO namespaces (name, created_at) VALUES (?, ?) RETURNING id",
                (namespace, SQLITE.stamp(datetime.now(UTC))),
            ).fetchone()[0]
        )

    def execute(self, statement: str, params: Sequence[Any] = ()) -> Any:
        """Run one statement; returns the cursor (``fetchone``/``fetchall`` for ``RETURNING`` rows).

        Raises:
            ValidationError: An integer parameter is outside 64 bits (see :func:`check_params`).
        """
        check_params(params)
        return self._conn.execute(statement if self._spell is None else self._spell(statement), params)

    def executemany(self, statement: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run one statement for each parameter row."""
        if not rows:
            return
        cur = self._conn.cursor()
        try:
            cur.executemany(self._dialect.sql(statement), rows)
        finally:
            cur.close()


class Sql:
    """What a backend gives its feature stores: reads, write transactions and the dialect.

    Args:
        dialect: The backend's dialect.
        read: A context manager factory yielding a connection for reads, with
            the backend's errors mapped to :class:`~stratamem.errors.BackendError`.
        write: The same for one write transaction (nested calls join the outer one).
    """

    def __init__(
        self,
        dialect: Dialect,
        read: Callable[[], AbstractContextManager[Any]],
        write: Callable[[], AbstractContextManager[Any]],
    ) -> None:
        self.dialect = dialect
        self._read = read
        self._write = write

    def rows(self, statement: str, params: Sequence[Any] = (), *, binary: bool = False) -> list[tuple[Any, ...]]:
        """All rows of one query.

        ``binary``: on PostgreSQL, the rows come in the binary format (for bulk reads of blobs:
        a ``BYTEA`` then crosses the wire as its bytes, not as twice as many hex digits to decode;
        the values read back the same). SQLite has one format.

        Raises:
            ValidationError: An integer parameter is outside 64 bits (see :func:`check_params`).
        """
        check_params(params)
        with self._read() as conn:
            if binary and self.dialect.name != "sqlite":
                return conn.execute(self.dialect.sql(statement), params, binary=True).fetchall()
            return conn.execute(self.dialect.sql(statement), params).fetchall()

    def tenant_key(self, namespace: str) -> Any | None:
        """The :attr:`Dialect.tenant` value of ``namespace``.

        SQLite: the namespace's id, ``None`` when it does not exist (callers
        then read nothing and write nothing); PostgreSQL: the name, without a query.
        """
        if self.dialect.name != "sqlite":
            return namespace
        rows = self.rows("SELECT id FROM namespaces WHERE name = ?", (namespace,))
        return int(rows[0][0]) if rows else None

    def write(self) -> AbstractContextManager[Writer]:
        """A write transaction: everything run through the writer commits together or not at all."""
        return _WriteScope(self._write(), self.dialect)

    def put_turn_rows(self, table: str, namespace: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        """Store per-turn rows ``(turn_id, *columns)`` of ``table`` (keyed by tenant and ``turn_id``), replacing theirs.

        One transaction. On SQLite nothing is written for a namespace that
        does not exist (it has no id); PostgreSQL keys the rows by the name.

        Raises:
            BackendError: The write failed (nothing was stored).
        """
        if not rows:
            return
        with self.write() as w:
            key = self.tenant_key(namespace)
            if key is None:
                return
            w.executemany(upsert(table, (self.dialect.tenant, "turn_id"), columns), [(key, *r) for r in rows])


class _WriteScope:
    """:meth:`Sql.write`'s context manager (a class, not a generator: it runs on every append)."""

    __slots__ = ("_scope", "_dialect")

    def __init__(self, scope: AbstractContextManager[Any], dialect: Dialect) -> None:
        self._scope = scope
        self._dialect = dialect

    def __enter__(self) -> Writer:
        return Writer(self._scope.__enter__(), self._dialect)

    def __exit__(self, *exc: Any) -> Any:
        return self._scope.__exit__(*exc)


class SqlFeature:
    """The base of a feature store: the owning store's :class:`Sql`, its dialect and tenant column.

    Args:
        sql: The owning store's SQL layer.
    """

    def __init__(self, sql: Sql) -> None:
        self._sql = sql
        self._d = sql.dialect
        self._tenant = sql.dialect.tenant
