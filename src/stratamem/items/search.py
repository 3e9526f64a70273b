"""Search over memory items: lexical terms, the FTS5 query, exact vector scoring.

Used by :mod:`stratamem.items` for ``recall``. Two signals, both exact:

* **lexical** — SQLite FTS5 (BM25) finds candidates; an item's lexical score
  is the share of the query's content words it contains (0–1), so it can be
  compared with a threshold, which raw BM25 cannot.
* **semantic** — cosine similarity between L2-normalized vectors, computed
  with numpy over every vector of the namespace (kept in memory by
  :class:`VectorIndex`, loaded incrementally: new ids by id, changed and
  deleted vectors from the store's vector log).

Hybrid ranking lives in :mod:`stratamem.items.recall`, the promotion rules in
:mod:`stratamem.items.tiers`.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ..errors import ModelError

__all__ = ["Embedder", "VectorIndex", "content_terms", "embed_texts", "fts_query", "lexical_score"]

# Words that carry no topic; removing them keeps "what was the budget?" about "budget".
_STOPWORDS = frozenset(
    """
a about above after again against all am an and any are as at be because been before being below between both
but by can could did do does doing down during each few for from further had has have having he her here hers
him his how i if in into is it its itself just me more most my no nor not now of off on once only or other our
ours out over own same she should so some such than that the their theirs them then there these they this those
through to too under until up very was we were what when where which while who whom why will with would you your
yours earlier ago tell know remember said say discussed mentioned talked
""".split()
)

_WORD = re.compile(r"[^\W_]+", re.UNICODE)


@runtime_checkable
class Embedder(Protocol):
    """Anything that turns texts into L2-normalized vectors (``stratamem.embed`` provides them)."""

    def embed_batch(self, texts: Sequence[str]) -> Any:
        """One row per text: an ``(n, d)`` float array (or a list of lists)."""
        ...


def content_terms(text: str) -> list[str]:
    """Lower-cased content words of ``text`` in order, without stop words or duplicates."""
    seen: dict[str, None] = {}
    for w in _WORD.findall(text.lower()):
        if w not in _STOPWORDS:
            seen.setdefault(w, None)
    return list(seen)


def fts_query(text: str) -> str:
    """An FTS5 expression matching any content word of ``text`` (each quoted, so no syntax leaks)."""
    return " OR ".join(f'"{t}"' for t in content_terms(text))


def lexical_score(query_terms: Sequence[str], content: str) -> float:
    """Share of the query's content words that occur in ``content`` (0 when the query has none)."""
    if not query_terms:
        return 0.0
    have = set(_WORD.findall(content.lower()))
    return sum(1 for t in query_terms if t in have) / len(query_terms)


def embed_texts(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """Embed ``texts`` as a float32 ``(n, d)`` matrix of unit rows.

    Every embedder call of the item API goes through here, so that whatever a
    pluggable model does wrong reaches callers as one error type.

    Raises:
        ModelError: The embedder failed, or returned the wrong shape or
            non-finite values.
    """
    try:
        raw = embedder.embed_batch(list(texts))
        vecs = np.asarray(raw, dtype=np.float32)
    except Exception as exc:  # any failure of a pluggable model is a ModelError to our callers
        raise ModelError(f"embedding {len(texts)} text(s) failed: {type(exc).__name__}: {exc}") from exc
    if vecs.ndim != 2 or vecs.shape[0] != len(texts):
        raise ModelError(f"embedder returned shape {vecs.shape} for {len(texts)} text(s)")
    if not np.isfinite(vecs).all():
        raise ModelError(f"embedder returned non-finite values for {len(texts)} text(s)")
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    # Normalize defensively: a protocol promise is not a proof, and cosine needs unit rows.
    return np.divide(vecs, norms, out=np.zeros_like(vecs), where=norms > 0)


class VectorIndex:
    """Every item vector of one namespace in memory, for exact cosine search.

    Two feeds keep it equal to the store. New items come through
    :meth:`extend`, which loads rows with ids above :attr:`last_id` (item ids
    only grow and are never reused, migration ``m007_item_ids``). Vectors that
    change or vanish (``embed_missing``, ``prune``, from any process) come
    through :meth:`apply`, fed from the store's vector log, whose position is
    kept in :attr:`log_seq`. Ineligible items (tier, supersession) are filtered
    by the caller against the table. The methods are thread-safe; a caller
    that reads the store and then feeds the index must serialize that pair
    itself (``Items`` does, with its own lock).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids = np.zeros(0, dtype=np.int64)
        self._mat = np.zeros((0, 0), dtype=np.float32)
        self._last_id = 0
        self._pos: dict[int, int] = {}
        # id -> new vector, or None to evict; applied in one pass before the next search.
        self._pending: dict[int, np.ndarray | None] = {}
        self.loaded = False
        """Whether a first full load has happened (then only changes are read)."""
        self.log_seq = 0
        """Position in the store's vector log up to which changes are applied."""

    @property
    def last_id(self) -> int:
        """Highest item id loaded."""
        return self._last_id

    def __len__(self) -> int:
        with self._lock:
            self._flush()
            return len(self._ids)

    def extend(self, rows: Sequence[tuple[int, bytes, str | None]]) -> None:
        """Add ``(id, float32 blob, model)`` rows with ids above :attr:`last_id` (others are skipped)."""
        with self._lock:
            for item_id, blob, _model in rows:
                if item_id <= self._last_id:
                    continue
                self._pending[int(item_id)] = np.frombuffer(blob, dtype=np.float32)
                self._last_id = int(item_id)

    def apply(self, rows: Sequence[tuple[int, bytes | None]]) -> None:
        """Replace the vectors of ``(id, float32 blob)`` rows; a ``None`` blob evicts the id."""
        with self._lock:
            for item_id, blob in rows:
                self._pending[int(item_id)] = None if blob is None else np.frombuffer(blob, dtype=np.float32)

    def ids(self) -> set[int]:
        """The ids that have a vector loaded."""
        with self._lock:
            self._flush()
            return {int(i) for i in self._ids}

    def _flush(self) -> None:
        if not self._pending:
            return
        evict = [self._pos[i] for i, v in self._pending.items() if v is None and i in self._pos]
        put = {i: v for i, v in self._pending.items() if v is not None}
        kept_dims = {self._mat.shape[1]} if len(self._ids) > len(evict) else set()
        dims = {v.shape[0] for v in put.values()} | kept_dims
        if len(dims) > 1:
            # Left pending: every search keeps failing the same way until the vectors are fixed.
            raise ModelError(
                f"item vectors of this namespace have mixed dimensions {sorted(dims)}; re-embed them with one embedder"
            )
        self._pending = {}
        if evict:
            keep = np.ones(len(self._ids), dtype=bool)
            keep[evict] = False
            self._ids, self._mat = self._ids[keep], self._mat[keep]
            self._pos = {int(i): n for n, i in enumerate(self._ids)}
        new = [i for i in put if i not in self._pos]
        for item_id in put:
            if item_id in self._pos:
                self._mat[self._pos[item_id]] = put[item_id]
        if new:
            block = np.vstack([put[i] for i in new])
            self._mat = block if not len(self._ids) else np.vstack([self._mat, block])
            start = len(self._ids)
            self._pos.update((item_id, start + n) for n, item_id in enumerate(new))
            self._ids = np.concatenate([self._ids, np.asarray(new, dtype=np.int64)])

    def scores_for(self, ids: Sequence[int], query: np.ndarray) -> list[tuple[int, float]]:
        """Exact cosine of ``query`` with each loaded item in ``ids`` (items without a vector are absent)."""
        with self._lock:
            self._flush()
            rows = [(i, self._pos[i]) for i in ids if i in self._pos]
            if not rows:
                return []
            self._check_dims(query)
            scores = self._mat[[r for _, r in rows]] @ query
            return [(i, float(s)) for (i, _), s in zip(rows, scores, strict=True)]

    def _check_dims(self, query: np.ndarray) -> None:
        if query.shape[0] != self._mat.shape[1]:
            raise ModelError(
                f"query vector has {query.shape[0]} dimensions, stored item vectors "
                f"{self._mat.shape[1]}: recall with the embedder the items were added with"
            )

    def search(self, query: np.ndarray, k: int) -> list[tuple[int, float]]:
        """The ``k`` most similar ``(id, cosine)``, best first.

        Raises:
            ModelError: The query's dimension differs from the stored vectors'.
        """
        with self._lock:
            self._flush()
            if not len(self._ids) or k <= 0:
                return []
            self._check_dims(query)
            scores = self._mat @ query
            k = min(k, len(scores))
            top = np.argpartition(-scores, k - 1)[:k]
            top = top[np.argsort(-scores[top], kind="stable")]
            return [(int(self._ids[i]), float(scores[i])) for i in top]
