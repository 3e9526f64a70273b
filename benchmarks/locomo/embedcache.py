"""A disk cache of LoCoMo embeddings under /tmp, so benchmark reruns skip the model.

Keys are SHA-256 of the text; the cache lives outside the repository.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["CACHE", "SYNTH_CACHE", "CachedEmbedder", "cached_embedder"]

CACHE = Path("/tmp/stratamem-locomo-embeddings.npz")


class CachedEmbedder:
    """Wraps an embedder with a content-hash cache persisted to :data:`CACHE`."""

    def __init__(self, inner: Any, path: Path = CACHE) -> None:
        self.inner, self.path = inner, path
        self.cache: dict[str, np.ndarray] = {}
        if path.exists():
            data = np.load(path)
            self.cache = dict(zip(data["keys"].tolist(), data["vectors"], strict=True))
        self.dirty = False

    @property
    def dimensions(self) -> int:
        """The inner model's vector size: the recall index records it, and reads stored vectors only when known."""
        return int(getattr(self.inner, "dimensions", 0) or 0)

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        """Cached vectors, computing the missing ones in one batch."""
        keys = [hashlib.sha256(t.encode()).hexdigest() for t in texts]
        missing = [i for i, k in enumerate(keys) if k not in self.cache]
        if missing:
            vecs = np.asarray(self.inner.embed_batch([texts[i] for i in missing]), dtype=np.float32)
            for i, v in zip(missing, vecs, strict=True):
                self.cache[keys[i]] = v
            self.dirty = True
        return np.stack([self.cache[k] for k in keys]) if keys else np.zeros((0, 384), np.float32)

    def save(self) -> None:
        """Write the cache if it grew."""
        if self.dirty:
            keys = list(self.cache)
            np.savez(self.path, keys=np.array(keys), vectors=np.stack([self.cache[k] for k in keys]))
            self.dirty = False


SYNTH_CACHE = Path("/tmp/stratamem-synth-embeddings.npz")


def cached_embedder(path: Path = CACHE) -> CachedEmbedder | None:
    """The library's local MiniLM behind the cache at ``path``, or ``None`` while it is not available."""
    try:
        from stratamem.embed import LocalMiniLM
    except ImportError:
        return None
    return CachedEmbedder(LocalMiniLM(), path)
