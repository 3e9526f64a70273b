"""Table DDL written once: one list of columns, spelled per dialect by a small type map.

A migration body lists its columns with ``{placeholders}`` where the two
backends spell something differently, and :func:`create_table` fills them in
from :data:`TYPES` for the connection it runs on. The placeholders are few
and each names what it stands for:

=================  ==================================================  ==========================
placeholder        SQLite                                              PostgreSQL
=================  ==================================================  ==========================
``{tenant}``       ``namespace_id`` (a key into ``namespaces``)          ``namespace`` (the name)
``{tenant_column}`` ``namespace_id INTEGER NOT NULL REFERENCES ...``    ``namespace TEXT NOT NULL``
``{tenant_pk}``    ``namespace_id INTEGER PRIMARY KEY REFERENCES ...``  ``namespace TEXT PRIMARY KEY``
``{bigint}``       ``INTEGER`` (always 64-bit)                          ``BIGINT``
``{blob}``         ``BLOB``                                             ``BYTEA``
``{stamp}``        ``TEXT`` (ISO 8601, :meth:`Dialect.stamp`)           ``TIMESTAMPTZ``
``{real}``         ``REAL``                                             ``DOUBLE PRECISION``
``{vector}``       ``BLOB`` (int8 codes + scale)                        ``vector`` (pgvector)
=================  ==================================================  ==========================

Only the spelling is generated: a table's columns, their order, keys and
checks are written out once in the migration that creates it. Migrations
are never edited; a body written this way must build exactly the schema the
hand-spelled one did (``tests/test_schema_snapshot.py`` checks both backends
against the recorded schema).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .sql import SQLITE, Dialect, dialect_of

__all__ = ["TYPES", "create_table", "run_tables"]

TYPES: Mapping[str, Mapping[str, str]] = {
    "sqlite": {
        "tenant": "namespace_id",
        "tenant_column": "namespace_id INTEGER NOT NULL REFERENCES namespaces(id)",
        "tenant_pk": "namespace_id INTEGER PRIMARY KEY REFERENCES namespaces(id)",
        "bigint": "INTEGER",
        "blob": "BLOB",
        "stamp": "TEXT",
        "real": "REAL",
        "vector": "BLOB",
    },
    "postgres": {
        "tenant": "namespace",
        "tenant_column": "namespace TEXT NOT NULL",
        "tenant_pk": "namespace TEXT PRIMARY KEY",
        "bigint": "BIGINT",
        "blob": "BYTEA",
        "stamp": "TIMESTAMPTZ",
        "real": "DOUBLE PRECISION",
        "vector": "vector",
    },
}
"""Per dialect, what each placeholder of a column definition stands for."""


def create_table(
    dialect: Dialect, name: str, columns: Sequence[str], *, without_rowid: bool = False, **extra: str
) -> str:
    """``CREATE TABLE name (...)`` with each column definition's placeholders filled in for ``dialect``.

    Args:
        dialect: The dialect to spell the statement in.
        name: The table.
        columns: Column definitions and table constraints, in order.
        without_rowid: On SQLite, a clustered ``WITHOUT ROWID`` table (PostgreSQL has no such option).
        extra: Further placeholders a table's own columns use.
    """
    spelling = {**TYPES[dialect.name], **extra}
    body = ", ".join(column.format_map(spelling) for column in columns)
    suffix = " WITHOUT ROWID" if without_rowid and dialect is SQLITE else ""
    return f"CREATE TABLE {name} ({body}){suffix}"


def run_tables(conn: Any, *tables: tuple[str, Sequence[str], bool]) -> None:
    """Create ``(name, columns, without_rowid)`` tables on ``conn`` in order, in the caller's transaction."""
    dialect = dialect_of(conn)
    for name, columns, without_rowid in tables:
        conn.execute(create_table(dialect, name, columns, without_rowid=without_rowid))
