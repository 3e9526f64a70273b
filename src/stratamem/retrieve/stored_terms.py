"""A BM25 index whose postings are found when a query first asks for a term.

An index opened from the store (:mod:`stratamem.retrieve.persisted`) gets
every turn's analysed terms as one stored string. Building all postings from
them is a pass over every token of the namespace in Python (at 100k turns,
~3M tokens: seconds), although a query reads the postings of a handful of
terms. :class:`StoredTermsIndex` therefore keeps the strings as one text —
each document as ``" t1 t2 … \\n"`` — and resolves a term the first time it
is asked for, by one C-level scan (``str.find``) for ``" term "`` (a whole
stored term, never a prefix), mapping match offsets to documents
with a binary search. Documents added later are posted eagerly as in
:class:`~stratamem.retrieve.lexical.BM25Index`; a resolved term's stored
documents (all before them) are put in front of its list, so postings, and
therefore scores, are exactly those of an index built eagerly.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from .lexical import BM25Index

__all__ = ["StoredTermsIndex", "TermLists"]


class TermLists(list[Any]):
    """Per-document term lists where opened documents hold their stored string until read.

    Reading item ``i`` splits the string once and keeps the list, so callers
    see ``list[str]`` items as with an eagerly built corpus.
    """

    def __getitem__(self, i: Any) -> Any:  # an index or a slice, like list's
        item = super().__getitem__(i)
        if isinstance(i, int) and isinstance(item, str):
            item = item.split()
            super().__setitem__(i, item)
        return item

    def as_stored(self, i: int) -> list[str] | str:
        """Item ``i`` as held: its list, or its stored string when it was never read (not split)."""
        return super().__getitem__(i)


class StoredTermsIndex(BM25Index):
    """:class:`~stratamem.retrieve.lexical.BM25Index` that can start from stored term strings.

    Args:
        k1: Term-frequency saturation.
        b: Length normalisation.
    """

    def __init__(self, k1: float = 1.2, b: float = 0.75) -> None:
        super().__init__(k1, b)
        self._text = ""
        self._starts = np.zeros(0, dtype=np.int64)
        self._resolved: set[str] = set()

    def open_stored(self, strings: Sequence[str]) -> np.ndarray:
        """Take the first documents as space-joined term strings; returns their term counts.

        Raises:
            ValueError: The index already holds documents.
        """
        if self._n:
            raise ValueError("stored terms can only start an empty index")
        count = len(strings)
        lengths = np.fromiter(map(len, strings), np.int64, count)
        terms = np.fromiter((s.count(" ") + 1 if s else 0 for s in strings), np.int64, count)
        self._text = "".join([f" {s} \n" for s in strings])
        self._starts = np.concatenate(([0], np.cumsum(lengths + 3)[:-1])).astype(np.int64)
        if count > len(self._lengths):
            self._lengths = np.zeros(count)
        self._lengths[:count] = terms
        self._n = count
        self._norm = None
        return terms

    def _resolve(self, term: str) -> None:
        """Post the stored documents holding ``term`` in front of its (later, eager) postings."""
        if not self._text or term in self._resolved:
            return
        self._resolved.add(term)
        # str.find (a C fast search) over the text: about twice as fast as a regex scan. The next
        # search starts at the match's trailing space, which may lead the next occurrence.
        pattern, find, found = f" {term} ", self._text.find, []
        step = len(pattern) - 1
        p = find(pattern)
        while p >= 0:
            found.append(p)
            p = find(pattern, p + step)
        at = np.asarray(found, dtype=np.int64)
        if not at.size:
            return
        docs, tf = np.unique(np.searchsorted(self._starts, at, side="right") - 1, return_counts=True)
        later = self._postings.get(term, ([], []))
        self._postings[term] = (docs.tolist() + later[0], tf.tolist() + later[1])
        self._arrays.pop(term, None)

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
