"""Lexical scoring: word analysis and an incremental BM25 index.

The analyzer lowercases, splits on anything that is not a letter or digit,
drops English function words and strips common suffixes with a small rule
stemmer (``painting``/``painted``/``paints`` -> ``paint``), so a question and
the turn that answers it meet on the word stem. The index keeps posting
lists per term and scores with Okapi BM25; it can grow one document at a time.
Fusion with vectors lives in :mod:`stratamem.retrieve.engine`.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence

import numpy as np

__all__ = ["BM25Index", "analyze", "stem"]

_WORD = re.compile(r"[^\W_]+", re.UNICODE)

STOPWORDS = frozenset(
    """
a about above after again against all am an and any are aren't as at be because been before being below between
both but by can could did do does doing don down during each few for from further had has have having he her here
hers herself him himself his how i if in into is it its itself just let me more most my myself no nor not now of off
on once only or other our ours ourselves out over own same she should so some such than that the their theirs them
themselves then there these they this those through to too under until up very was we were what when where which
while who whom why will with would you your yours yourself yourselves s t d ll m re ve y o
""".split()
)

_VOWEL = re.compile(r"[aeiouy]")


def _undouble(w: str) -> str:
    # running -> runn -> run; but keep "ll"/"ss"/"zz" (spell, miss, buzz)
    if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "lsz" and w[-1] not in "aeiou":
        return w[:-1]
    return w


def stem(word: str) -> str:
    """A light English stemmer: plural, -ing, -ed, -ly and a final -e.

    Deliberately conservative: it only conflates forms of one word, so
    precision stays close to exact matching.
    """
    w = word
    if len(w) <= 3 or not w.isalpha():
        return w
    if w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith("sses"):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    if w.endswith("ing") and len(w) > 5 and _VOWEL.search(w[:-3]):
        w = _undouble(w[:-3])
    elif w.endswith("ed") and len(w) > 4 and _VOWEL.search(w[:-2]):
        w = _undouble(w[:-2])
    elif w.endswith("ly") and len(w) > 5:
        w = w[:-2]
    if w.endswith("e") and len(w) > 3:
        w = w[:-1]
    if w.endswith("y") and len(w) > 3:
        w = w[:-1] + "i"
    return w


# A conversation's vocabulary is small next to its word count (LoCoMo: ~3M words
# over ~30k distinct at 100k turns), so stems are remembered; bounded so an
# adversarial stream of unique tokens cannot grow it without limit.
_stem_cached = functools.lru_cache(maxsize=1 << 17)(stem)


def analyze(text: str, *, stopwords: frozenset[str] = STOPWORDS) -> list[str]:
    """Index terms of ``text``: lowercased words minus stop words, stemmed."""
    return [_stem_cached(w) for w in _WORD.findall(text.lower().replace("'", "")) if w not in stopwords]


class BM25Index:
    """Okapi BM25 over documents added one at a time.

    Adding a document is O(its terms): posting lists and lengths only grow,
    and the numpy arrays a query reads are extended with the new tail rather
    than rebuilt, so scoring after an add stays proportional to the postings
    of the query terms.

    Args:
        k1: Term-frequency saturation.
        b: Length normalisation (0: none, 1: full).
    """

    def __init__(self, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self._postings: dict[str, tuple[list[int], list[int]]] = {}
        self._arrays: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._lengths = np.zeros(64, dtype=np.float64)
        self._n = 0
        self._norm: np.ndarray | None = None

    def __len__(self) -> int:
        return self._n

    def add(self, terms: Sequence[str]) -> int:
        """Add one document's terms; returns its position."""
        doc = self._n
        if doc == len(self._lengths):
            self._lengths = np.concatenate((self._lengths, np.zeros(len(self._lengths))))
        self._lengths[doc] = len(terms)
        self._n += 1
        for term, tf in Counter(terms).items():
            docs, tfs = self._postings.setdefault(term, ([], []))
            docs.append(doc)
            tfs.append(tf)
        self._norm = None
        return doc

    def extend(self, docs: Iterable[Sequence[str]]) -> None:
        """Add many documents (postings built in bulk: the same index as adding them one by one)."""
        docs = list(docs)
        if len(docs) < 64:
            for terms in docs:
                self.add(terms)
            return
        base, count = self._n, len(docs)
        need = base + count
        if need > len(self._lengths):
            grown = np.zeros(max(need, 2 * len(self._lengths)))
            grown[:base] = self._lengths[:base]
            self._lengths = grown
        lengths = np.fromiter((len(d) for d in docs), np.int64, count)
        self._lengths[base:need] = lengths
        self._n = need
        self._norm = None
        tokens = list(itertools.chain.from_iterable(docs))
        if not tokens:
            return
        # C-level passes only: distinct terms in first-seen order, then each token's number.
        vocab = {t: i for i, t in enumerate(dict.fromkeys(tokens))}
        ids = np.fromiter(map(vocab.__getitem__, tokens), np.int64, len(tokens))
        doc = np.repeat(np.arange(base, need, dtype=np.int64), lengths)
        # One (term, doc) key per occurrence; unique keys sorted by term then doc give the postings.
        keys, tf = np.unique(ids * need + doc, return_counts=True)
        term_of, doc_of = keys // need, keys % need
        cuts = np.flatnonzero(np.diff(term_of)) + 1
        names = list(vocab)
        for lo, hi in zip(
            np.concatenate(([0], cuts)).tolist(), np.concatenate((cuts, [len(keys)])).tolist(), strict=True
        ):
            term = names[int(term_of[lo])]
            docs_list, tfs_list = self._postings.setdefault(term, ([], []))
            docs_list.extend(doc_of[lo:hi].tolist())
            tfs_list.extend(tf[lo:hi].tolist())

    def __contains__(self, term: str) -> bool:
        return term in self._postings

    def posting(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        """Document positions and term frequencies of ``term`` (empty if unknown)."""
        lists = self._postings.get(term)
        if lists is None:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        docs, tfs = lists
        cached = self._arrays.get(term)
        have = 0 if cached is None else len(cached[0])
        if have < len(docs):
            tail = (np.asarray(docs[have:], dtype=np.int64), np.asarray(tfs[have:], dtype=np.float64))
            cached = (
                tail if cached is None else (np.concatenate((cached[0], tail[0])), np.concatenate((cached[1], tail[1])))
            )
            self._arrays[term] = cached
        assert cached is not None
        return cached

    def idf(self, term: str) -> float:
        """Robertson–Spärck Jones idf, floored at a small positive value."""
        lists = self._postings.get(term)
        n = len(lists[0]) if lists else 0
        return max(math.log(1.0 + (self._n - n + 0.5) / (n + 0.5)), 1e-6)

    def scores(self, terms: Iterable[str], weights: dict[str, float] | None = None) -> np.ndarray:
        """BM25 score of every document for the query ``terms`` (unknown terms add nothing).

        Args:
            terms: Query terms (repeats count once).
            weights: Optional per-term multipliers (e.g. for expansion terms).
        """
        out = np.zeros(self._n)
        if not self._n:
            return out
        if self._norm is None:
            lengths = self._lengths[: self._n]
            avg = max(float(lengths.mean()), 1.0)
            self._norm = self.k1 * (1.0 - self.b + self.b * lengths / avg)
        for term in dict.fromkeys(terms):
            if term not in self._postings:
                continue
            docs, tf = self.posting(term)
            w = self.idf(term) * (weights.get(term, 1.0) if weights else 1.0)
            out[docs] += w * tf * (self.k1 + 1.0) / (tf + self._norm[docs])
        return out
