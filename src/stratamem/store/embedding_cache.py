"""The persistent embedding cache (``m002_embeddings``), one implementation for every backend.

One table maps ``(model, content hash)`` to a little-endian float32 vector
(a blob on SQLite, ``bytea`` on PostgreSQL: the cache is looked up by key,
never searched by similarity, so it needs no pgvector). It is content
addressed — a vector is a pure function of the model and the text — so it
has no namespace column: two namespaces embedding the same text share one
row, and no row reveals who asked or what the text was (only its hash is
kept). Deleting a namespace therefore never needs to touch it. Under Citus
make it a *reference table* (``SELECT create_reference_table('embeddings')``),
replicated to every node.

Implements :class:`stratamem.embed.EmbeddingCache`; reach it as
``store.embeddings`` and wrap an embedder with it::

    embedder = CachedEmbedder(LocalMiniLM(), store.embeddings)

The same object holds the persisted recall index (``.turns``) and the passage
vectors (``.passages``). The table's DDL is here too, one column list for
both backends (:mod:`stratamem.store.ddl`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..errors import BackendError
from .ddl import run_tables
from .passage_store import Passages
from .sql import Sql, chunks
from .turn_index import TurnIndex

if TYPE_CHECKING:  # numpy is imported where it is used: opening a store (`stratamem status`) needs none
    import numpy as np

__all__ = ["EmbeddingCache", "m002_embeddings"]


def m002_embeddings(conn: Any) -> None:
    """The content-addressed embedding cache: ``(model, hash) -> dims + float32 bytes``.

    No namespace column on purpose: rows are keyed by content, shared by all
    namespaces, and hold no text. Vectors are plain bytes (little-endian
    float32), not pgvector: the cache is looked up by key, never searched.
    """
    run_tables(
        conn,
        (
            "embeddings",
            [
                "model TEXT NOT NULL",
                "hash TEXT NOT NULL",
                "dims INTEGER NOT NULL",
                "vector {blob} NOT NULL",
                "created_at {stamp} NOT NULL",
                "PRIMARY KEY (model, hash)",
            ],
            True,
        ),
    )


class EmbeddingCache:
    """Embedding vectors kept in the store's database.

    Shares the store's transactions. Vectors are checked against their
    recorded length on read.

    Args:
        sql: The owning store's SQL layer.
    """

    def __init__(self, sql: Sql) -> None:
        self._sql = sql

    @functools.cached_property
    def turns(self) -> TurnIndex:
        """The persisted recall index: per-turn terms and int8 vectors (:mod:`stratamem.store.turn_index`)."""
        return TurnIndex(self._sql)

    @functools.cached_property
    def passages(self) -> Passages:
        """Passage vectors of long turns (:mod:`stratamem.store.passage_store`)."""
        return Passages(self._sql)

    def get_many(self, model: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """The cached vectors among ``hashes`` for ``model``.

        Raises:
            BackendError: The read failed, or a stored vector does not match its length.
        """
        import numpy as np

        out: dict[str, np.ndarray] = {}
        for part in chunks(list(dict.fromkeys(hashes))):
            rows = self._sql.rows(
                f"SELECT hash, dims, vector FROM embeddings WHERE model = ? AND "
                f"{self._sql.dialect.in_list('hash', len(part))}",
                [model, *part],
            )
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
        import numpy as np

        now = self._sql.dialect.stamp(datetime.now(UTC))
        rows = []
        for h, vec in vectors.items():
            arr = np.asarray(vec, dtype="<f4")
            if arr.ndim != 1:
                raise ValueError(f"vector for {h} must be one-dimensional, got shape {arr.shape}")
            rows.append((model, h, int(arr.shape[0]), arr.tobytes(), now))
        if not rows:
            return
        with self._sql.write() as w:
            w.executemany(
                "INSERT INTO embeddings (model, hash, dims, vector, created_at) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (model, hash) DO NOTHING",
                rows,
            )

    def count(self, model: str | None = None) -> int:
        """Cached vectors, for one model or all."""
        if model is None:
            return int(self._sql.rows("SELECT COUNT(*) FROM embeddings")[0][0])
        return int(self._sql.rows("SELECT COUNT(*) FROM embeddings WHERE model = ?", (model,))[0][0])

    def clear(self, model: str | None = None) -> int:
        """Delete the cached vectors of one model (or all); returns how many were deleted.

        Raises:
            BackendError: The delete failed (nothing was deleted).
        """
        with self._sql.write() as w:
            if model is None:
                return int(w.execute("DELETE FROM embeddings").rowcount)
            return int(w.execute("DELETE FROM embeddings WHERE model = ?", (model,)).rowcount)
