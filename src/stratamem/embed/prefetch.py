"""Embed a known set of texts in one call, then serve them to the callers that ask one by one.

The pyramid summarizes segments one at a time, and each summary and each of
its key facts used to be embedded by its own call: one or two texts per
forward pass, which leaves one of the encoder's threads idle and pays the
per-call cost hundreds of times per ingest. :class:`PrefetchedEmbedder`
lets the caller embed every text it is about to need in one batch
(:meth:`PrefetchedEmbedder.fill`); the per-node code then asks as before and
gets the stored rows. A text is served only for an exact match of the
string, so a vector always belongs to the text it is served for.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ..errors import ModelError
from ._checks import model_name

__all__ = ["PrefetchedEmbedder"]


class PrefetchedEmbedder:
    """Wraps an embedder; texts given to :meth:`fill` are embedded together and kept until :meth:`clear`.

    Any other text is passed to the wrapped embedder unchanged, so callers
    see the same results (and the same errors) as without the wrapper; a text
    whose batch failed raises that batch's error when it is asked for.

    Args:
        embedder: Anything with ``embed_batch(texts) -> (n, d) array``.
    """

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder
        self._rows: dict[str, np.ndarray] = {}
        self._failed: dict[str, Exception] = {}

    @property
    def name(self) -> str:
        """The wrapped embedder's name (what item vectors are recorded under)."""
        return model_name(self.embedder)

    @property
    def dimensions(self) -> int:
        """The wrapped embedder's vector length (0 if it does not say)."""
        return int(getattr(self.embedder, "dimensions", 0) or 0)

    def fill(self, texts: Iterable[str]) -> int:
        """Embed the texts not yet held, in one call; returns how many were embedded.

        Does not raise: if the wrapped embedder fails (or returns rows of the
        wrong shape), the error is held for these texts and raised by
        :meth:`embed_batch` to each caller that asks for one of them, which
        records it as it records its own embedding failures. The embedder is
        not asked again for them (a failing endpoint is not waited on twice).
        """
        todo = list(dict.fromkeys(t for t in texts if isinstance(t, str) and t not in self._rows))
        if not todo:
            return 0
        try:
            rows = np.asarray(self.embedder.embed_batch(todo), dtype=np.float32)
            if rows.ndim != 2 or len(rows) != len(todo) or not np.isfinite(rows).all():
                raise ModelError(
                    f"embedder {self.name} returned {rows.shape} rows, some not finite or not "
                    f"{len(todo)}, for {len(todo)} texts"
                )
        except Exception as exc:  # noqa: BLE001 - held and raised to the texts' own callers (above)
            self._failed.update(dict.fromkeys(todo, exc))
            return 0
        self._rows.update(zip(todo, rows, strict=True))
        return len(todo)

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        """Rows for ``texts``: held ones from :meth:`fill`, the rest from the wrapped embedder in one call."""
        texts = list(texts)
        failed = next((self._failed[t] for t in texts if t in self._failed), None)
        if failed is not None:
            raise failed
        missing = [t for t in dict.fromkeys(texts) if t not in self._rows]
        if not missing:
            if not texts:
                return np.asarray(self.embedder.embed_batch([]), dtype=np.float32)
            return np.stack([self._rows[t] for t in texts])
        fresh = np.asarray(self.embedder.embed_batch(missing), dtype=np.float32)
        if fresh.ndim != 2 or len(fresh) != len(missing):
            return fresh  # the caller's shape check reports it
        got = dict(zip(missing, fresh, strict=True))
        return np.stack([self._rows[t] if t in self._rows else got[t] for t in texts])

    def clear(self) -> None:
        """Drop the held rows and failures."""
        self._rows.clear()
        self._failed.clear()

    def __len__(self) -> int:
        return len(self._rows)
