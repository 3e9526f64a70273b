"""The persistent embedding cache in the PostgreSQL store (``m002_embeddings``).

The mirror of :mod:`stratamem.store.sqlite.embeddings`, with the same methods
and semantics: ``(model, content hash) -> float32 vector``, shared by every
namespace. It is the one table without the tenant column, on purpose: a row
is a pure function of model and text, holds only the text's hash, and says
nothing about who asked. Under Citus make it a *reference table*
(``SELECT create_reference_table('embeddings')``), replicated to every node.

Vectors are kept as ``bytea`` (little-endian float32), not pgvector: the
cache is looked up by key, never searched by similarity, and ``bytea`` keeps
it usable on a server without the extension's index support.

Reach it as ``PostgresStore(...).embeddings``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING

import numpy as np
import psycopg

from ...errors import BackendError

if TYPE_CHECKING:
    from .passages import PostgresPassages
    from .turn_embeddings import PostgresTurnIndex
    from .store import PostgresStore

__all__ = ["PostgresEmbeddingCache", "m002_embeddings"]


def m002_embeddings(conn: psycopg.Connection) -> None:
    """The content-addressed embedding cache: ``(model, hash) -> dims + float32 bytes``."""
    conn.execute("""CREATE TABLE embeddings (
        model TEXT NOT NULL,
        hash TEXT NOT NULL,
        dims INTEGER NOT NULL,
        vector BYTEA NOT NULL,
        created_at TIMESTAMPTZ NOT NULL,
        PRIMARY KEY (model, hash)
    )""")


class PostgresEmbeddingCache:
    """Embedding vectors kept in the store's database.

    Shares the store's pool and transactions; implements
    :class:`stratamem.embed.EmbeddingCache`.

    Args:
        store: The owning store.
    """

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    @functools.cached_property
    def turns(self) -> PostgresTurnIndex:
        """The persisted recall index: per-turn terms and int8 vectors (:mod:`stratamem.store.postgres.turn_embeddings`)."""
        from .turn_embeddings import PostgresTurnIndex

        return PostgresTurnIndex(self._store)

    @functools.cached_property
    def passages(self) -> PostgresPassages:
        """Passage vectors of long turns (:mod:`stratamem.store.postgres.passages`)."""
        from .passages import PostgresPassages

        return PostgresPassages(self._store)

    def get_many(self, model: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """The cached vectors among ``hashes`` for ``model``.

        Raises:
            BackendError: The read failed, or a stored vector does not match its length.
        """
        wanted = list(dict.fromkeys(hashes))
        if not wanted:
            return {}
        rows = self._store._query("SELECT hash, dims, vector FROM embeddings WHERE model = %s AND hash = ANY(%s)",
                                  (model, wanted))
        out: dict[str, np.ndarray] = {}
        for h, dims, blob in rows:
            if len(blob) != 4 * dims:
                raise BackendError(f"embedding {h} of {model!r} is corrupt: {len(blob)} bytes for {dims} dims")
            out[h] = np.frombuffer(bytes(blob), dtype="<f4").astype(np.float32)
        return out

    def put_many(self, model: str, vectors: Mapping[str, np.ndarray]) -> None:
        """Store vectors in one transaction; existing keys are left as they are.

        Raises:
            ValueError: A vector is not one-dimensional.
            BackendError: The write failed (nothing was stored).
        """
        now = datetime.now(timezone.utc)
        rows = []
        for h, vec in vectors.items():
            arr = np.asarray(vec, dtype="<f4")
            if arr.ndim != 1:
                raise ValueError(f"vector for {h} must be one-dimensional, got shape {arr.shape}")
            rows.append((model, h, int(arr.shape[0]), arr.tobytes(), now))
        if not rows:
            return
        with self._store.transaction(), self._store.connection() as conn, self._store._errors():
            conn.cursor().executemany(
                "INSERT INTO embeddings (model, hash, dims, vector, created_at) VALUES (%s, %s, %s, %s, %s) "
                "ON CONFLICT (model, hash) DO NOTHING", rows)

    def count(self, model: str | None = None) -> int:
        """Cached vectors, for one model or all."""
        if model is None:
            return int(self._store._query("SELECT COUNT(*) FROM embeddings")[0][0])
        return int(self._store._query("SELECT COUNT(*) FROM embeddings WHERE model = %s", (model,))[0][0])

    def clear(self, model: str | None = None) -> int:
        """Delete the cached vectors of one model (or all); returns how many were deleted.

        Raises:
            BackendError: The delete failed (nothing was deleted).
        """
        with self._store.transaction(), self._store.connection() as conn, self._store._errors():
            if model is None:
                cur = conn.execute("DELETE FROM embeddings")
            else:
                cur = conn.execute("DELETE FROM embeddings WHERE model = %s", (model,))
            return int(cur.rowcount)
