"""A real PostgreSQL 16 + pgvector for the tests, from the ``pgserver`` package.

``STRATAMEM_PG_DSN`` (when set) points the tests at an existing server instead.
Each test gets its own schema in that database, so tests never see each
other's rows and nothing needs dropping between them.
"""

from __future__ import annotations

import itertools
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

_counter = itertools.count()


class LocalPostgres:
    """A throwaway PostgreSQL server in a temporary data directory."""

    def __init__(self) -> None:
        with warnings.catch_warnings():
            # platformdirs warns that XDG_RUNTIME_DIR is unset; irrelevant here.
            warnings.simplefilter("ignore")
            import pgserver

            # A short path: the Unix socket lives in the data directory.
            self.pgdata = Path(tempfile.mkdtemp(prefix="smpg-", dir="/tmp"))
            self._server: Any = pgserver.get_server(self.pgdata, cleanup_mode="delete")
        self.dsn: str = self._server.get_uri()

    def pg_ctl(self, *args: str) -> None:
        """Run ``pg_ctl`` on this server (e.g. ``restart -m fast``)."""
        from pgserver._commands import pg_ctl

        pg_ctl(["-w", *args], pgdata=self.pgdata, user=self._server.system_user, timeout=60)

    def stop(self) -> None:
        """Stop the server and delete its data directory."""
        self._server.cleanup()


def fresh_schema(dsn: str, prefix: str = "t") -> str:
    """A new, empty schema name (the store creates it)."""
    name = f"{prefix}_{os.getpid()}_{next(_counter)}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))
    return name


def schema_url(dsn: str, schema: str) -> str:
    """``dsn`` as a URL that ``open_store`` opens on ``schema``."""
    sep = "&" if "?" in dsn else "?"
    return f"{dsn}{sep}schema={schema}"


def raw_rows(store: Any, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Run ``statement`` (``%s`` placeholders) on a SQLite or PostgreSQL store's own connection.

    For tests that look under the store's API (page layout, stored blobs); rows of a
    statement that returns none are ``[]``.
    """
    if store.backend == "sqlite":
        with store.lock:
            return store.connection.execute(statement.replace("%s", "?"), params).fetchall()
    with store.connection() as conn:
        cur = conn.execute(statement, params)
        return cur.fetchall() if cur.description else []
