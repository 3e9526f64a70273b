"""Embeddings: the :class:`Embedder` protocol, its implementations, and the cache.

An embedder turns texts into unit-length float32 vectors, batch first: the
one required method is :meth:`Embedder.embed_batch`. Conveniences are free
functions over the protocol (:func:`embed_one`, :func:`embed_in_batches`,
:func:`cosine`), not base-class methods, so any object with ``name``,
``dimensions`` and ``embed_batch`` plugs in.

Implementations:

* :class:`LocalMiniLM` — all-MiniLM-L6-v2 offline, numpy forward pass (``local``).
* :class:`OpenAIEmbedder` — any OpenAI-compatible ``/v1/embeddings`` endpoint (``remote``).
* :class:`CachedEmbedder` — wraps either; vectors keyed by model and content hash
  (``cache``), in memory or persistent in the SQLite store
  (:class:`stratamem.store.embedding_cache.EmbeddingCache`).

Offline fakes for tests are in :mod:`stratamem.testing.hash_embedder` and
:mod:`stratamem.testing.embed_server`. Importing this package loads no model,
no HTTP client and no numpy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ._checks import check_texts, model_name
from .cache import CachedEmbedder, EmbeddingCache, MemoryEmbeddingCache, content_hash
from .local import LocalMiniLM
from .remote import OpenAIEmbedder

if TYPE_CHECKING:  # numpy is imported where it is used: opening a store (`stratamem status`) needs none
    import numpy as np

__all__ = [
    "CachedEmbedder",
    "Embedder",
    "EmbeddingCache",
    "LocalMiniLM",
    "MemoryEmbeddingCache",
    "OpenAIEmbedder",
    "content_hash",
    "cosine",
    "embed_in_batches",
    "embed_one",
    "model_name",
]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors. Implement :meth:`embed_batch`; the rest is free functions."""

    name: str
    """Model name; cache keys include it, so two models never share vectors."""
    dimensions: int
    """Length of every vector."""

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts.

        Args:
            texts: Texts to embed (a list, not a bare string).

        Returns:
            float32 array of shape ``(len(texts), dimensions)``, rows L2-normalized,
            in input order.

        Raises:
            TypeError: ``texts`` is a bare string or holds a non-string.
            ModelError: The model call failed (remote embedders, after retries).
        """
        ...


def embed_one(embedder: Embedder, text: str) -> np.ndarray:
    """Embed one text.

    Returns:
        float32 vector of shape ``(dimensions,)``.

    Raises:
        TypeError: ``text`` is not a string.
    """
    if not isinstance(text, str):
        raise TypeError(f"text is {type(text).__name__}, not str")
    return embedder.embed_batch([text])[0]


def embed_in_batches(embedder: Embedder, texts: Sequence[str], *, batch_size: int = 256) -> np.ndarray:
    """Embed many texts, calling the embedder with at most ``batch_size`` at a time.

    Useful with a remote embedder (bounded request size) or a cache (bounded
    transactions); results are stacked in input order.

    Returns:
        float32 array of shape ``(len(texts), dimensions)``.

    Raises:
        TypeError: Bad ``texts`` (see :meth:`Embedder.embed_batch`).
        ValueError: ``batch_size`` is less than 1.
    """
    import numpy as np

    texts = check_texts(texts)
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    parts = [embedder.embed_batch(texts[i : i + batch_size]) for i in range(0, len(texts), batch_size)]
    if not parts:
        return np.zeros((0, embedder.dimensions), dtype=np.float32)
    return np.concatenate(parts).astype(np.float32, copy=False)


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray | float:
    """Cosine similarity of two vectors (a float) or of matching rows (an array).

    Works for vectors of any length; unit-length input makes it a dot product.
    """
    import numpy as np

    a = np.asarray(a, dtype=np.float32)
    b = np.asarray(b, dtype=np.float32)
    num = (a * b).sum(axis=-1)
    den = np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1)
    out = num / np.maximum(den, np.float32(1e-12))
    return float(out) if out.ndim == 0 else out
