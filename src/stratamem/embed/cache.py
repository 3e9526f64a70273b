"""Embeddings cached by content hash: unchanged text is never embedded twice.

A vector is a pure function of (model, text), so the cache is content
addressed: the key is the model's name and ``sha256:<hex>`` of the text's
UTF-8 bytes. The algorithm prefix means a future change of hash is detected
instead of silently splitting the cache (the same reason ``llm`` tags its
hashes). Because keys carry no owner, the cache is shared by every
namespace: it stores vectors, never who asked, and the text itself is not
kept.

:class:`MemoryEmbeddingCache` lives in the process; the persistent one is
:class:`stratamem.store.embedding_cache.EmbeddingCache`. Both follow
:class:`EmbeddingCache`.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from ..errors import BackendError, ModelError
from ._checks import check_texts

if TYPE_CHECKING:
    import numpy as np

    from . import Embedder

__all__ = ["CacheStats", "CachedEmbedder", "EmbeddingCache", "HASH_PREFIX", "MemoryEmbeddingCache", "content_hash"]

HASH_PREFIX = "sha256:"
"""Algorithm tag of every content hash."""


def content_hash(text: str) -> str:
    """``sha256:<hex>`` of the text's UTF-8 bytes (lone surrogates kept, never an error)."""
    return HASH_PREFIX + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class EmbeddingCache(Protocol):
    """Where cached vectors live, keyed by ``(model, content hash)``."""

    def get_many(self, model: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """The cached vectors among ``hashes`` (missing ones are simply absent)."""
        ...

    def put_many(self, model: str, vectors: Mapping[str, np.ndarray]) -> None:
        """Store vectors; an existing entry for the same key is kept (it is identical by construction)."""
        ...


class MemoryEmbeddingCache:
    """An in-process cache with an optional size bound (least recently used goes first).

    Args:
        max_entries: Most vectors kept; ``None`` keeps all.

    Raises:
        ValueError: ``max_entries`` is less than 1.
    """

    def __init__(self, max_entries: int | None = None) -> None:
        if max_entries is not None and max_entries < 1:
            raise ValueError("max_entries must be at least 1 (or None)")
        self.max_entries = max_entries
        self._data: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def get_many(self, model: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """The cached vectors among ``hashes``."""
        out: dict[str, np.ndarray] = {}
        with self._lock:
            for h in hashes:
                vec = self._data.get((model, h))
                if vec is not None:
                    self._data.move_to_end((model, h))
                    out[h] = vec
        return out

    def put_many(self, model: str, vectors: Mapping[str, np.ndarray]) -> None:
        """Store vectors (read-only float32 copies), evicting the least recently used past the bound."""
        import numpy as np

        with self._lock:
            for h, vec in vectors.items():
                arr = np.array(vec, dtype=np.float32)
                arr.flags.writeable = False  # shared between callers: nobody may edit it in place
                self._data[(model, h)] = arr
                self._data.move_to_end((model, h))
            while self.max_entries is not None and len(self._data) > self.max_entries:
                self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)


@dataclass(frozen=True, slots=True)
class CacheStats:
    """What a :class:`CachedEmbedder` has done so far."""

    hits: int
    """Texts answered from the cache (duplicates within a call count once each)."""
    misses: int
    """Distinct texts sent to the wrapped embedder."""
    model_calls: int
    """Calls made to the wrapped embedder."""


class CachedEmbedder:
    """An :class:`~stratamem.embed.Embedder` that asks the wrapped one only for texts it has not seen.

    Duplicates inside one call are embedded once; texts whose vector is in the
    cache are not sent at all, so a second embed of unchanged text makes zero
    model calls.

    Args:
        embedder: The embedder doing the work.
        cache: Where vectors are kept; default a new unbounded :class:`MemoryEmbeddingCache`.

    Example::

        cached = CachedEmbedder(LocalMiniLM(), store.embeddings)
    """

    def __init__(self, embedder: Embedder, cache: EmbeddingCache | None = None) -> None:
        self.embedder = embedder
        self.cache: EmbeddingCache = cache if cache is not None else MemoryEmbeddingCache()
        self.name = embedder.name
        self.dimensions = embedder.dimensions
        self._lock = threading.Lock()
        self._hits = self._misses = self._calls = 0

    @property
    def stats(self) -> CacheStats:
        """Hits, misses and model calls so far."""
        return CacheStats(self._hits, self._misses, self._calls)

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts, using cached vectors where the content hash matches.

        Returns:
            float32 array ``(len(texts), dimensions)``, unit-length rows, input order.

        Raises:
            TypeError: Bad ``texts``.
            ModelError: The wrapped embedder failed or returned the wrong shape
                (nothing is cached from a failed call).
            BackendError: The persistent cache failed, or holds a vector of
                another length under this model's name.
        """
        import numpy as np

        texts = check_texts(texts)
        hashes = [content_hash(t) for t in texts]
        unique = list(dict.fromkeys(hashes))
        found = self.cache.get_many(self.name, unique)
        for h, vec in found.items():
            if vec.shape != (self.dimensions,):
                raise BackendError(
                    f"cached embedding {h} for {self.name!r} has shape {vec.shape}, "
                    f"expected ({self.dimensions},); clear the cache for this model"
                )
        todo = [h for h in unique if h not in found]
        if todo:
            first_text: dict[str, str] = {}
            for h, t in zip(hashes, texts, strict=True):
                first_text.setdefault(h, t)
            fresh = np.asarray(self.embedder.embed_batch([first_text[h] for h in todo]), dtype=np.float32)
            if fresh.shape != (len(todo), self.dimensions):
                raise ModelError(
                    f"embedder {self.name!r} returned shape {fresh.shape} for {len(todo)} texts, "
                    f"expected ({len(todo)}, {self.dimensions})"
                )
            new = dict(zip(todo, fresh, strict=True))
            self.cache.put_many(self.name, new)
            found = {**found, **new}
        with self._lock:
            self._hits += len(texts) - len(todo)
            self._misses += len(todo)
            self._calls += 1 if todo else 0
        out = np.empty((len(texts), self.dimensions), dtype=np.float32)
        for i, h in enumerate(hashes):
            out[i] = found[h]
        return out

    def __repr__(self) -> str:
        return f"CachedEmbedder({self.embedder!r}, {type(self.cache).__name__})"
