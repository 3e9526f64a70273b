"""Open a store from a path or a URL, choosing the backend.

A file path (or ``:memory:``) opens :class:`~stratamem.store.sqlite.SQLiteStore`;
a ``postgresql://`` or ``postgres://`` URL opens
:class:`~stratamem.store.postgres.PostgresStore`, importing it only then so the
core install never needs ``psycopg``. A URL may name the schema with a
``schema`` query parameter (``postgresql://host/db?schema=agents``); it is
stripped before the URL reaches libpq, which would reject it.
"""

from __future__ import annotations

import os
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..config import StoreConfig
from ..errors import ConfigError
from .base import Store
from .sqlite.store import SQLiteStore

__all__ = ["is_postgres_url", "open_store", "split_schema"]

_PG_SCHEMES = ("postgresql", "postgres")


def is_postgres_url(target: str | os.PathLike[str]) -> bool:
    """Whether ``target`` is a PostgreSQL URL rather than a file path."""
    return isinstance(target, str) and urlsplit(target).scheme in _PG_SCHEMES


def split_schema(url: str) -> tuple[str, str | None]:
    """Remove the ``schema`` query parameter from a PostgreSQL URL.

    Returns:
        ``(url_without_schema, schema or None)``.
    """
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schema = next((v for k, v in query if k == "schema"), None)
    rest = urlencode([(k, v) for k, v in query if k != "schema"])
    return urlunsplit(parts._replace(query=rest)), schema


def open_store(
    target: str | os.PathLike[str], *, config: StoreConfig | None = None, tokenizer: str = "o200k_base"
) -> Store:
    """Open the store ``target`` names.

    Args:
        target: A SQLite file path, ``:memory:``, or a ``postgresql://`` URL.
        config: Store settings (busy timeout, pool sizes, schema).
        tokenizer: Name of the tokenizer the caller counts with.

    Returns:
        A :class:`~stratamem.store.sqlite.SQLiteStore` or a
        :class:`~stratamem.store.postgres.PostgresStore`.

    Raises:
        ConfigError: A PostgreSQL URL was given but the ``postgres`` extra is not
            installed, or the URL's schema and ``config.pg_schema`` disagree.
        BackendError: The store cannot be opened.
        MigrationError: The store was written by a newer stratamem.
    """
    config = config or StoreConfig()
    if not is_postgres_url(target):
        return SQLiteStore(target, busy_timeout_ms=config.busy_timeout_ms, tokenizer=tokenizer)
    try:
        from .postgres.store import PostgresStore
    except ImportError as exc:
        raise ConfigError(
            f"a PostgreSQL URL needs the postgres extra ({exc.name} is missing): pip install 'stratamem[postgres]'"
        ) from None
    url, schema = split_schema(str(target))
    if schema is not None and config.pg_schema is not None and schema != config.pg_schema:
        raise ConfigError(f"schema {schema!r} in the URL disagrees with store.pg_schema {config.pg_schema!r}")
    try:
        return PostgresStore(
            url,
            schema=schema or config.pg_schema,
            min_connections=config.pg_min_connections,
            max_connections=config.pg_max_connections,
            busy_timeout_ms=config.busy_timeout_ms,
            tokenizer=tokenizer,
        )
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
