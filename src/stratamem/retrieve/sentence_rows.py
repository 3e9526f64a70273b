"""Sentence vectors kept in the store, so a new process does not re-embed short turns' sentences.

The sentence vectors of a short turn (:mod:`stratamem.retrieve.sentences`)
are made when the turn is written (:meth:`~stratamem.retrieve.persisted.TurnIndexer.index`)
and stored like passage vectors — all of a turn's vectors in one blob
(:func:`~stratamem.retrieve.passages.encode_blob`), but in 2 bits a component
(:func:`~stratamem.embed.quantize.encode_int2`, 96 bytes each for MiniLM;
int8 until ``m024_sentence_nibbles`` and 4 bits until ``m026_compact_store``,
which converted the stored ones) — in ``store.embeddings.passages`` under their
own key (``<model>/<dims>/sentences2``; 4-bit ones were under ``.../sentences4``,
int8 ones under ``.../sentences``). A turn is either long (passages) or short
(sentences), never both, so the two kinds never share a row. How many
sentence vectors a turn has is recorded in its index row
(``recall_index.sentences``): 0 needs no row, and ``NULL`` says they were
never made (a turn written before this, or while ``embedding.sentences`` was
off), which the index makes when it opens.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..embed.quantize import int2_blob_size, int2_rows
from ..records import StoredTurn
from .passages import embed_blobs
from .sentences import sentence_texts

__all__ = ["SentenceRows", "sentence_key"]

log = logging.getLogger("stratamem.retrieve")


def sentence_key(model: str, dims: int) -> str:
    """What sentence rows are recorded under: the model, the vector length and the kind (2-bit sentences)."""
    return f"{model}/{dims}/sentences2"


class SentenceRows:
    """Makes, stores and reads one namespace's sentence vectors.

    Args:
        store: The store (``store.embeddings.passages`` keeps the rows).
        namespace: The namespace.
        embedder: The embedder (must not be ``None``).
        model: Name the vectors are recorded under.
    """

    def __init__(self, store: Any, namespace: str, embedder: Any, model: str) -> None:
        self.store, self.namespace, self.embedder, self.model = store, namespace, embedder, model

    def key(self, dims: int) -> str:
        """What rows are recorded under: the model, the vector length and the kind."""
        return sentence_key(self.model, dims)

    def make(self, turns: Sequence[StoredTurn], term_counts: Sequence[int]) -> tuple[list[int], dict[int, bytes]]:
        """Sentence vectors of full ``turns`` (with their content-word counts): per turn how many, and
        the blobs of those that have some. One embedding call.

        Raises:
            ModelError: The embedder failed.
        """
        texts = [sentence_texts(st, n) for st, n in zip(turns, term_counts, strict=True)]
        return [len(group) for group in texts], embed_blobs(self.embedder, turns, texts, "sentence", bits=2)

    def put(self, blobs: dict[int, bytes], dims: int) -> None:
        """Store blobs (turn id -> blob) of ``dims``-vectors.

        Raises:
            BackendError: The write failed (nothing was stored).
        """
        self.store.embeddings.passages.put(self.namespace, self.key(dims), blobs)

    def load(self, dims: int) -> dict[int, bytes]:
        """Every stored sentence blob of the namespace made by this model, by turn id."""
        return dict(self.store.embeddings.passages.load(self.namespace, self.key(dims)))

    @staticmethod
    def decode(blobs: dict[int, bytes], dims: int) -> dict[int, np.ndarray]:
        """The unit vectors of each blob, by turn id (a blob of the wrong size is left out: made again later).

        A blob is derived data: a corrupt one costs that turn its sentence vectors, not the index.
        """
        size = int2_blob_size(dims)
        good = {tid: blob for tid, blob in blobs.items() if blob and not len(blob) % size}
        bad = [tid for tid in blobs if tid not in good]  # a bad length: the turn ranks by its own vector
        # All blobs unpacked in one pass (one per turn was most of opening the index: ~55k turns at
        # 100k), each turn's rows then a view of its slice.
        codes = int2_rows(b"".join(good.values()), dims)
        out, at = {}, 0
        for tid, blob in good.items():
            n = len(blob) // size
            out[tid] = codes[at : at + n]
            at += n
        if bad:
            log.warning(
                "%d stored sentence blob(s) are damaged (turns %s): left out, made again later",
                len(bad),
                ", ".join(map(str, bad[:5])) + (", ..." if len(bad) > 5 else ""),
            )
        return out
