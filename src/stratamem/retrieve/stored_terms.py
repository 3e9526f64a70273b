"""A BM25 index whose postings are found when a query first asks for a term.

An index opened from the store (:mod:`stratamem.retrieve.persisted`) gets
every turn's analysed terms as ids into the namespace's vocabulary
(:class:`~stratamem.store.term_ids.StoredTerms`: one array of term ids of
all turns, with each turn's offsets). Building all postings from them would
touch every token of the namespace (at 100k turns ~1.5M of them), although a
query reads the postings of a handful of terms. :class:`StoredTermsIndex`
therefore keeps the ids as they are read and resolves a term the first time
it is asked for: one vectorised comparison of the id array with the term's
id, match positions mapped to documents with a binary search over the
offsets. Documents added later are posted eagerly as in
:class:`~stratamem.retrieve.lexical.BM25Index`; a resolved term's stored
documents (all before them) are put in front of its list, so postings, and
therefore scores, are exactly those of an index built eagerly.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence

import numpy as np

from ..store.term_ids import StoredTerms
from .lexical import BM25Index

__all__ = ["StoredTermsIndex", "TermLists"]


class TermLists:
    """Per-document term lists: the stored ones read from their ids when asked for, later ones as lists.

    ``lists[i]`` is document ``i``'s terms (a ``list[str]``), as with an
    eagerly built corpus; the stored documents are decoded on access and not kept.
    """

    def __init__(self) -> None:
        self._stored: StoredTerms | None = None
        self._term_id: Mapping[str, int] = {}
        self._count = 0
        self._later: list[list[str]] = []

    def open(self, stored: StoredTerms, term_id: Mapping[str, int]) -> None:
        """Start with stored documents (the list must be empty); ``term_id`` maps their vocabulary's terms to ids."""
        self._stored, self._term_id, self._count = stored, term_id, len(stored)

    def extend(self, lists: Iterable[list[str]]) -> None:
        """Append documents' term lists."""
        self._later.extend(lists)

    def __len__(self) -> int:
        return self._count + len(self._later)

    def __getitem__(self, i: int) -> list[str]:
        if i < 0:
            i += len(self)
        if i < self._count:
            assert self._stored is not None
            return self._stored.terms(i)
        return self._later[i - self._count]

    def __iter__(self) -> Iterator[list[str]]:
        return (self[i] for i in range(len(self)))

    def first_codes(self, positions: Sequence[int], codes: Mapping[str, int]) -> list[int]:
        """``codes[first term]`` of each document at ``positions`` (0 when it has none or it is not in ``codes``).

        For stored documents one array lookup each, without decoding their terms.
        """
        out = [0] * len(positions)
        stored = self._stored
        if stored is not None and stored.ids.size and any(p < self._count for p in positions):
            table = np.zeros(len(stored.vocab) + 1, dtype=np.int64)
            for term, code in codes.items():
                if term in self._term_id:
                    table[self._term_id[term]] = code
            pos = np.asarray(positions, dtype=np.int64)
            inside = pos < self._count
            lo, hi = stored.offsets[pos[inside]], stored.offsets[pos[inside] + 1]
            firsts = np.where(hi > lo, stored.ids[np.minimum(lo, len(stored.ids) - 1)].astype(np.int64), -1)
            got = table[firsts]  # -1 reads the table's last entry, always 0
            for j, code in zip(np.flatnonzero(inside).tolist(), got.tolist(), strict=True):
                out[j] = code
        for j, p in enumerate(positions):
            if p >= self._count:
                terms = self._later[p - self._count]
                out[j] = codes.get(terms[0], 0) if terms else 0
        return out


class StoredTermsIndex(BM25Index):
    """:class:`~stratamem.retrieve.lexical.BM25Index` that can start from stored term ids.

    Args:
        k1: Term-frequency saturation.
        b: Length normalisation.
    """

    def __init__(self, k1: float = 1.2, b: float = 0.75) -> None:
        super().__init__(k1, b)
        self._ids = np.zeros(0, dtype=np.uint32)
        self._offsets = np.zeros(1, dtype=np.int64)
        self._term_id: dict[str, int] = {}
        self._resolved: set[str] = set()
        self._by_term: tuple[np.ndarray, np.ndarray] | None = None  # see _places()

    def open_ids(self, stored: StoredTerms) -> np.ndarray:
        """Take the first documents as stored term ids; returns their term counts.

        Raises:
            ValueError: The index already holds documents.
        """
        if self._n:
            raise ValueError("stored terms can only start an empty index")
        count = len(stored)
        terms = np.diff(stored.offsets).astype(np.int64)
        self._ids, self._offsets = stored.ids, stored.offsets
        self._by_term = None
        # An id no turn uses any more has the term "" (never a query term).
        self._term_id = {t: i for i, t in enumerate(stored.vocab) if t}
        if count > len(self._lengths):
            self._lengths = np.zeros(count)
        self._lengths[:count] = terms
        self._n = count
        self._norm = None
        return terms

    @property
    def term_ids(self) -> Mapping[str, int]:
        """The stored vocabulary's terms and their ids (empty before :meth:`open_ids`)."""
        return self._term_id

    def open_stored(self, strings: Sequence[str]) -> np.ndarray:
        """:meth:`open_ids` for space-joined term strings (one per document)."""
        return self.open_ids(StoredTerms.from_lists([s.split() for s in strings]))

    def _resolve(self, term: str) -> None:
        """Post the stored documents holding ``term`` in front of its (later, eager) postings."""
        if term in self._resolved or not self._ids.size:
            return
        self._resolved.add(term)
        tid = self._term_id.get(term)
        if tid is None:
            return
        order, bounds = self._places()
        at = np.sort(order[bounds[tid] : bounds[tid + 1]]).astype(np.int64)
        if not at.size:
            return
        docs, tf = np.unique(np.searchsorted(self._offsets, at, side="right") - 1, return_counts=True)
        later = self._postings.get(term, ([], []))
        self._postings[term] = (docs.tolist() + later[0], tf.tolist() + later[1])
        self._arrays.pop(term, None)

    def _places(self) -> tuple[np.ndarray, np.ndarray]:
        """Where each stored id occurs: positions grouped by id and each id's bounds. Made at the first
        lookup, in one sort: finding a term by comparing every stored id cost a pass over them all per
        new query term (issue 28: ~10 ms a term at 1M turns). (Not a stable sort, ~2x faster on 15M
        ids: a term's positions are sorted when it is looked up.)"""
        if self._by_term is None:
            order = np.argsort(self._ids)
            bounds = np.searchsorted(self._ids[order], np.arange(max(self._term_id.values(), default=0) + 2))
            self._by_term = (order.astype(np.uint32) if len(order) < 2**32 else order, bounds)
        return self._by_term

    def __contains__(self, term: str) -> bool:
        self._resolve(term)
        return super().__contains__(term)

    def posting(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        """Document positions and term frequencies of ``term`` (empty if unknown)."""
        self._resolve(term)
        return super().posting(term)

    def idf(self, term: str) -> float:
        """Robertson–Spärck Jones idf, floored at a small positive value."""
        self._resolve(term)
        return super().idf(term)

    def scores(self, terms: Iterable[str], weights: dict[str, float] | None = None) -> np.ndarray:
        """BM25 score of every document for the query ``terms`` (see the base class)."""
        terms = list(terms)
        for term in terms:
            self._resolve(term)
        return super().scores(terms, weights)
