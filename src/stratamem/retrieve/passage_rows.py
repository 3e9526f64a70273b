"""Passage vectors kept in the store, so a new process does not re-embed long turns.

The persisted recall index (:mod:`stratamem.retrieve.persisted`) stores each
turn's terms and vector; this stores, beside it, the passage vectors of the
long turns (:mod:`stratamem.retrieve.passages`) in ``store.embeddings.passages``
(migration ``m011_passages``). Which turns are long is read off their stored
term counts, so opening an index knows which rows it should find without
reading any text; only turns whose rows are missing (written before this
existed, or made by another model) are read, split and embedded, and their
rows stored. Vectors handed to the in-memory index are the decoded ones, so
the writing process scores exactly like a process that opens the store later.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import StratamemError
from ..records import StoredTurn
from .passages import decode_blob, embed_blobs, is_long, passage_texts, term_count

__all__ = ["PassageRows"]


class PassageRows:
    """Makes, stores and reads one namespace's passage vectors.

    Args:
        store: The store (``store.embeddings.passages`` keeps the rows).
        namespace: The namespace.
        embedder: The embedder (must not be ``None``).
        model: Name the vectors are recorded under.
    """

    def __init__(self, store: Any, namespace: str, embedder: Any, model: str) -> None:
        self.store, self.namespace, self.embedder, self.model = store, namespace, embedder, model

    @property
    def _rows(self) -> Any:
        return self.store.embeddings.passages

    def _embed(self, turns: Sequence[StoredTurn]) -> dict[int, bytes]:
        """Blobs of the passages of ``turns`` (all long, full turns)."""
        return embed_blobs(self.embedder, turns, [passage_texts(st) for st in turns], "passage")

    @staticmethod
    def _decode(blobs: dict[int, bytes], dims: int) -> dict[int, np.ndarray]:
        return {t: decode_blob(b, dims, codes=True) for t, b in blobs.items()}

    def key(self, dims: int) -> str:
        """What rows are recorded under: the model and the vector length (another either way is stale)."""
        return f"{self.model}/{dims}"

    def write(self, turns: Sequence[StoredTurn], terms: Sequence[list[str]], dims: int) -> dict[int, np.ndarray]:
        """Embed and store the passages of the long turns among newly committed ``turns`` (``dims``: vector length).

        Raises:
            ModelError: The embedder failed (nothing stored).
            BackendError: Storing failed.
        """
        long = [st for st, t in zip(turns, terms, strict=True) if is_long(len(t))]
        blobs = self._embed(long)
        self._rows.put(self.namespace, self.key(dims), blobs)
        return self._decode(blobs, dims)

    def read(
        self,
        turns: list[Any],
        terms: Sequence[list[str] | str],
        dims: int,
        on_store_error: Callable[[Exception], None] | None = None,
    ) -> dict[int, np.ndarray]:
        """Passage vectors of the long turns among ``turns`` (keys or full turns), making missing ones.

        Raises:
            ModelError: Missing passages needed embedding and the embedder failed.
        """
        long = [st.id for st, t in zip(turns, terms, strict=True) if is_long(term_count(t))]
        if not long:
            return {}
        blobs = self._rows.load(self.namespace, self.key(dims))
        missing = [i for i in long if i not in blobs]
        if missing:
            full = [
                st
                for lo in range(0, len(missing), 500)
                for st in self.store.turns(self.namespace, ids=missing[lo : lo + 500])
            ]
            made = self._embed(full)
            blobs.update(made)
            try:
                self._rows.put(self.namespace, self.key(dims), made)
            except StratamemError as exc:
                if on_store_error is not None:
                    on_store_error(exc)
        try:
            return self._decode({i: blobs[i] for i in long if i in blobs}, dims)
        except StratamemError:
            # A row of the wrong size (another model under the same name): make them all again.
            full = [
                st
                for lo in range(0, len(long), 500)
                for st in self.store.turns(self.namespace, ids=long[lo : lo + 500])
            ]
            return self._decode(self._embed(full), dims)
