"""A deterministic offline embedder for tests: :class:`HashEmbedder`.

Vectors come from hashes, not a model, yet they are not arbitrary: each
lower-cased word maps to a fixed pseudo-random direction (seeded by its
SHA-256) and a text's vector is the normalized sum of its words' directions.
So texts that share words are similar and unrelated texts are nearly
orthogonal, which is enough to test ranking code without MiniLM. A text with
no word characters gets the direction of its whole content.

:func:`hash_vector` is the same function the fake embeddings server
(:mod:`stratamem.testing.embed_server`) answers with, so a client tested
against the server can be compared to :class:`HashEmbedder` directly.

Example::

    fake = HashEmbedder(dimensions=64)
    v = fake.embed_batch(["red apple", "green apple"])
    assert fake.calls == [["red apple", "green apple"]]
"""

from __future__ import annotations

import functools
import hashlib
import re
import threading
from collections.abc import Sequence

import numpy as np

from ..embed._checks import check_texts

__all__ = ["HashEmbedder", "hash_vector"]

_WORD = re.compile(r"\w+", re.UNICODE)


@functools.lru_cache(maxsize=65_536)
def _direction(token: str, dimensions: int) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()[:8], "little")
    vec = np.random.default_rng(seed).standard_normal(dimensions).astype(np.float32)
    vec.flags.writeable = False
    return vec


def hash_vector(text: str, dimensions: int) -> np.ndarray:
    """The unit-length float32 vector :class:`HashEmbedder` gives ``text``.

    Args:
        text: Any string (empty included).
        dimensions: Vector length, at least 1.

    Raises:
        ValueError: ``dimensions`` is less than 1.
    """
    if dimensions < 1:
        raise ValueError("dimensions must be at least 1")
    words = _WORD.findall(text.lower())
    vec = np.zeros(dimensions, dtype=np.float32)
    for w in words or [" " + text]:  # the leading space keeps whole-text seeds apart from word seeds
        vec += _direction(w, dimensions)
    norm = float(np.linalg.norm(vec))
    if norm == 0.0:  # words cancelling exactly: astronomically unlikely, but never divide by zero
        vec, norm = _direction(" " + text, dimensions).copy(), float(np.linalg.norm(_direction(" " + text, dimensions)))
    return vec / np.float32(norm)


class HashEmbedder:
    """A real :class:`~stratamem.embed.Embedder` with hash-derived vectors that records its calls.

    Args:
        dimensions: Vector length.
        name: Model name reported (cache keys use it).
        fail_with: If set, every call raises this exception (after recording the call),
            to test how callers handle a failing embedder.

    Attributes:
        calls: The texts of every ``embed_batch`` call, in order.
    """

    def __init__(
        self, dimensions: int = 384, *, name: str = "hash-embedder", fail_with: BaseException | None = None
    ) -> None:
        if dimensions < 1:
            raise ValueError("dimensions must be at least 1")
        self.dimensions = int(dimensions)
        self.name = name
        self.fail_with = fail_with
        self.calls: list[list[str]] = []
        self._lock = threading.Lock()

    @property
    def texts_embedded(self) -> int:
        """How many texts were embedded over all calls."""
        return sum(len(c) for c in self.calls)

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts with :func:`hash_vector`.

        Raises:
            TypeError: Bad ``texts``.
            BaseException: ``fail_with``, when set.
        """
        texts = check_texts(texts)
        with self._lock:
            self.calls.append(list(texts))
        if self.fail_with is not None:
            raise self.fail_with
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        return np.stack([hash_vector(t, self.dimensions) for t in texts]).astype(np.float32)

    def __repr__(self) -> str:
        return f"HashEmbedder({self.dimensions}, name={self.name!r})"
