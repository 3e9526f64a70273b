"""The persistent embedding cache in the SQLite store (``m002_embeddings``).

One table maps ``(model, content hash)`` to a float32 vector. It is content
addressed — a vector is a pure function of the model and the text — so it
has no namespace column: two namespaces embedding the same text share one
row, and no row reveals who asked or what the text was (only its hash is
kept). Deleting a namespace therefore never needs to touch it.

Implements :class:`stratamem.embed.EmbeddingCache`; reach it as
``SQLiteStore(...).embeddings`` and wrap an embedder with it::

    embedder = CachedEmbedder(LocalMiniLM(), store.embeddings)
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING

import numpy as np

from ...errors import BackendError

if TYPE_CHECKING:
    from .passages import SQLitePassages
    from .turn_embeddings import SQLiteTurnIndex
    from .store import SQLiteStore

__all__ = ["SQLiteEmbeddingCache", "m002_embeddings"]

# SQLite's default limit on host parameters is 32,766 in current builds but 999 in
# old ones; stay under the old one.
_CHUNK = 900


def m002_embeddings(conn: sqlite3.Connection) -> None:
    """The content-addressed embedding cache: ``(model, hash) -> dims + float32 blob``."""
    # No namespace column on purpose: rows are keyed by content, shared by all
    # namespaces, and hold no text.
    conn.execute("""CREATE TABLE embeddings (
        model TEXT NOT NULL,
        hash TEXT NOT NULL,
        dims INTEGER NOT NULL,
        vector BLOB NOT NULL,
        created_at TEXT NOT NULL,
        PRIMARY KEY (model, hash)
    ) WITHOUT ROWID""")


class SQLiteEmbeddingCache:
    """Embedding vectors kept in the store's database file.

    Shares the store's connection, lock and transactions. Vectors are stored
    little-endian float32 and checked against their recorded length on read.

    Args:
        store: The owning store.
    """

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store

    @functools.cached_property
    def turns(self) -> SQLiteTurnIndex:
        """The persisted recall index: per-turn terms and int8 vectors (:mod:`stratamem.store.sqlite.turn_embeddings`)."""
        from .turn_embeddings import SQLiteTurnIndex

        return SQLiteTurnIndex(self._store)

    @functools.cached_property
    def passages(self) -> SQLitePassages:
        """Passage vectors of long turns (:mod:`stratamem.store.sqlite.passages`)."""
        from .passages import SQLitePassages

        return SQLitePassages(self._store)

    def get_many(self, model: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """The cached vectors among ``hashes`` for ``model``.

        Raises:
            BackendError: The read failed, or a stored blob does not match its length.
        """
        out: dict[str, np.ndarray] = {}
        hashes = list(dict.fromkeys(hashes))
        for i in range(0, len(hashes), _CHUNK):
            part = hashes[i:i + _CHUNK]
            rows = self._store._query(
                f"SELECT hash, dims, vector FROM embeddings WHERE model = ? AND hash IN ({','.join('?' * len(part))})",
                [model, *part])
            for h, dims, blob in rows:
                if len(blob) != 4 * dims:
                    raise BackendError(f"embedding {h} of {model!r} is corrupt: {len(blob)} bytes for {dims} dims")
                out[h] = np.frombuffer(blob, dtype="<f4").astype(np.float32)
        return out

    def put_many(self, model: str, vectors: Mapping[str, np.ndarray]) -> None:
        """Store vectors in one transaction; existing keys are left as they are.

        Raises:
            ValueError: A vector is not one-dimensional.
            BackendError: The write failed (nothing was stored).
        """
        now = datetime.now(timezone.utc).isoformat()
        rows = []
        for h, vec in vectors.items():
            arr = np.asarray(vec, dtype="<f4")
            if arr.ndim != 1:
                raise ValueError(f"vector for {h} must be one-dimensional, got shape {arr.shape}")
            rows.append((model, h, int(arr.shape[0]), arr.tobytes(), now))
        if not rows:
            return
        with self._store.transaction():
            self._store.connection.executemany(
                "INSERT OR IGNORE INTO embeddings (model, hash, dims, vector, created_at) VALUES (?, ?, ?, ?, ?)",
                rows)

    def count(self, model: str | None = None) -> int:
        """Cached vectors, for one model or all."""
        if model is None:
            return int(self._store._query("SELECT COUNT(*) FROM embeddings")[0][0])
        return int(self._store._query("SELECT COUNT(*) FROM embeddings WHERE model = ?", (model,))[0][0])

    def clear(self, model: str | None = None) -> int:
        """Delete the cached vectors of one model (or all); returns how many were deleted.

        Raises:
            BackendError: The delete failed (nothing was deleted).
        """
        with self._store.transaction():
            if model is None:
                cur = self._store.connection.execute("DELETE FROM embeddings")
            else:
                cur = self._store.connection.execute("DELETE FROM embeddings WHERE model = ?", (model,))
            return int(cur.rowcount)
