"""The schema a fresh store ends up with, as comparable data, on either backend.

Used by ``tests/test_schema_snapshot.py`` to check that the DDL, however it is
spelled in the code, still builds the schema users' databases were migrated
to. Regenerate the snapshots only when a NEW migration changes the schema:

    .venv/bin/python tests/schema_snapshot.py

(it writes ``tests/fixtures/schema_sqlite.json`` and, with a pgserver,
``tests/fixtures/schema_postgres.json``).
"""

from __future__ import annotations

import json
import re
import sqlite3
import sys
from pathlib import Path
from typing import Any

import psycopg

FIXTURES = Path(__file__).parent / "fixtures"


def _normal(sql: str) -> str:
    """DDL text with white space folded: only the tokens matter, not the line breaks of the source."""
    text = re.sub(r"\s+", " ", sql).strip()
    return re.sub(r"\( ", "(", re.sub(r" ([),])", r"\1", text))


def sqlite_schema(path: str | Path) -> dict[str, Any]:
    """Every table, index, trigger and view of a SQLite file: its DDL (white space folded) and columns."""
    conn = sqlite3.connect(path)
    try:
        objects = {
            f"{kind} {name}": _normal(sql)
            for kind, name, sql in conn.execute(
                "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL ORDER BY type, name"
            )
        }
        columns = {}
        for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").fetchall():
            columns[table] = [list(r) for r in conn.execute(f'PRAGMA table_xinfo("{table}")')]
        return {"objects": objects, "columns": columns}
    finally:
        conn.close()


def postgres_schema(dsn: str, schema: str) -> dict[str, Any]:
    """Columns, constraints and indexes of every table in ``schema`` (the schema's name written as ``S``)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        columns: dict[str, list[list[Any]]] = {}
        for row in conn.execute(
            "SELECT table_name, column_name, data_type, udt_name, is_nullable, column_default, is_identity, "
            "identity_generation FROM information_schema.columns WHERE table_schema = %s "
            "ORDER BY table_name, ordinal_position",
            (schema,),
        ):
            columns.setdefault(row[0], []).append(list(row[1:]))
        constraints = {
            f"{t} {name}": definition.replace(f"{schema}.", "S.")
            for t, name, definition in conn.execute(
                "SELECT c.relname, k.conname, pg_get_constraintdef(k.oid) FROM pg_constraint k "
                "JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = %s ORDER BY 1, 2",
                (schema,),
            )
        }
        indexes = {
            name: definition.replace(f"{schema}.", "S.")
            for name, definition in conn.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s ORDER BY indexname", (schema,)
            )
        }
    return {"columns": columns, "constraints": constraints, "indexes": indexes}


def _write(name: str, data: dict[str, Any]) -> None:
    (FIXTURES / name).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":  # pragma: no cover - regenerates the fixtures by hand
    import tempfile

    sys.path.insert(0, str(Path(__file__).parent))
    from pg import LocalPostgres, fresh_schema

    from stratamem.store.postgres.store import PostgresStore
    from stratamem.store.sqlite.store import SQLiteStore

    with tempfile.TemporaryDirectory() as tmp:
        SQLiteStore(Path(tmp) / "s.db").close()
        _write("schema_sqlite.json", sqlite_schema(Path(tmp) / "s.db"))
    server = LocalPostgres()
    try:
        name = fresh_schema(server.dsn)
        PostgresStore(server.dsn, schema=name).close()
        _write("schema_postgres.json", postgres_schema(server.dsn, name))
    finally:
        server.stop()
