"""A fresh store's schema equals the recorded one on both backends.

The snapshots (``tests/fixtures/schema_*.json``) were taken before the DDL was
written once for both backends (branch store16); the DDL may be spelled
differently in the code, but the schema it builds must not change: users'
databases were migrated to exactly this one.
"""

from __future__ import annotations

import json
from pathlib import Path

from pg import fresh_schema
from schema_snapshot import FIXTURES, postgres_schema, sqlite_schema

from stratamem.store.postgres.store import PostgresStore
from stratamem.store.sqlite.store import SQLiteStore


def test_a_fresh_sqlite_store_has_the_recorded_schema(tmp_path: Path) -> None:
    SQLiteStore(tmp_path / "s.db").close()
    expected = json.loads((FIXTURES / "schema_sqlite.json").read_text())
    assert sqlite_schema(tmp_path / "s.db") == expected


def test_a_fresh_postgres_store_has_the_recorded_schema(pg_dsn: str) -> None:
    name = fresh_schema(pg_dsn)
    PostgresStore(pg_dsn, schema=name).close()
    expected = json.loads((FIXTURES / "schema_postgres.json").read_text())
    assert postgres_schema(pg_dsn, name) == expected
