"""The turn corpus behind hybrid recall, kept append-only so the live loop stays cheap.

An agent adds a turn and asks for a context at every step, so nothing here
is rebuilt from scratch when a turn arrives:

* each turn's words are analysed once and posted to the per-turn BM25
  index (:class:`~stratamem.retrieve.lexical.BM25Index`), which only grows;
* the *window* and *session* collections (a turn with its neighbours, a
  whole session) have no index of their own: their term frequencies are
  derived per query from the per-turn postings — window sums by prefix sums
  over the turns in session order (a window is a contiguous run of one
  session), session sums by ``bincount`` — and their document frequency is
  the number of windows/sessions where the term occurs. This is exactly
  BM25 over the concatenated texts, without ever building those indexes;
* only new texts are embedded. A window's cosine is the sum of its turns'
  dot products with the query over the norm of their summed vectors, so per
  query one matrix–vector product over the turns is enough (window sums by
  the same prefix sums); only the norms are stored, and a new turn changes
  those of at most ``window`` earlier turns of its session. Session vectors
  are summed when first asked for (their weight is 0 by default).

The structure arrays (session order, window bounds, neighbours) are redone
with O(N) numpy when turns were added, never with per-turn Python loops.
Scoring and fusion live in :mod:`stratamem.retrieve.engine`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from ..errors import ModelError
from ..records import StoredTurn
from ..store.term_ids import StoredTerms
from .lexical import analyze
from .stored_terms import StoredTermsIndex, TermLists
from .turn_slots import TurnSlots
from .vector_rows import BLOCK, VectorRows, _Rows

__all__ = ["ANALYZER", "TurnCorpus"]

# Exercises every rule of the word analysis (case, apostrophes, stop words, stems, digits).
_PROBE = (
    "Caroline: I've been running the LGBTQ support groups since 7 May 2023 - they're "
    "amazing! Melanie's kids loved the pottery classes, painting & hiking trips."
)


def _fingerprint() -> str:
    """A short hash of how a probe text is indexed: changes whenever the analysis does."""
    import hashlib

    return hashlib.sha256(" ".join(analyze(_PROBE)).encode()).hexdigest()[:16]


ANALYZER = "a1:" + _fingerprint()
"""Identifies the word analysis; a persisted index made with another one is re-analysed."""


class TurnCorpus:
    """Turns, their terms, postings, structure and vectors, grown one batch at a time.

    Args:
        window: Neighbours on each side of a turn that form its window.
        embed: ``embed_batch`` of an embedder (unit rows), or ``None`` for no vectors.
        k1: BM25 term-frequency saturation (all three collections).
        b: BM25 length normalisation.
    """

    def __init__(self, window: int, embed: Any = None, k1: float = 1.2, b: float = 0.75) -> None:
        self.window, self.embed, self.k1, self.b = window, embed, k1, b
        self.turns = TurnSlots()  # (keys as plain tuples: the cyclic collector does not walk them)
        self.pos: dict[int, int] = {}
        self.terms = TermLists()
        self.bm25 = StoredTermsIndex(k1, b)
        self.speakers: dict[str, int] = {}
        self.session_dates: list[datetime] = []
        self._sessions: dict[tuple[str, str], int] = {}
        self._sizes: list[int] = []
        self._session_of = _Rows(np.int64)
        self._place = _Rows(np.int64)
        self._speaker_of = _Rows(np.int64)
        self._lengths = _Rows(np.int64)
        self._substance: tuple[tuple[int, float], np.ndarray] | None = None  # see substance()
        self.vectors: VectorRows | None = None
        self.window_norms: _Rows | None = None
        self._session_sums: _Rows | None = None
        self._stale = True
        self._edge: np.ndarray | None = None  # see _window_sums()

    def __len__(self) -> int:
        return len(self.turns)

    @property
    def sessions(self) -> int:
        """Number of sessions seen."""
        return len(self._sizes)

    @staticmethod
    def text(st: StoredTurn) -> str:
        """What a turn is indexed as: ``Speaker: text``."""
        return f"{st.turn.name or st.role}: {st.text}"

    # --- growing -----------------------------------------------------------------------

    def add(
        self,
        turns: Iterable[StoredTurn],
        *,
        terms: Sequence[list[str]] | Sequence[str] | StoredTerms | None = None,
        vectors: np.ndarray | None = None,
    ) -> list[int]:
        """Index turns not seen before (in stored order); returns their positions.

        The new texts are embedded before anything changes: if the embedder
        fails, its error propagates and the corpus is as it was, so the same
        turns can be added again later.

        Args:
            turns: Stored turns.
            terms: Their analysed terms (:func:`analyze` of :meth:`text`), when
                already known (a persisted index); one list (or space-joined
                string) per turn, or the stored ids of them all
                (:class:`~stratamem.store.term_ids.StoredTerms`): into an empty
                corpus these are kept as they are and a term's postings are
                found when a query first asks for it
                (:class:`~stratamem.retrieve.stored_terms.StoredTermsIndex`).
            vectors: Their unit vectors, when already known; one row per turn.
                With both given, nothing is analysed or embedded.
        """
        given = list(turns)
        if terms is not None and len(terms) != len(given):
            raise ValueError(f"{len(terms)} term lists for {len(given)} turns")
        if vectors is not None and len(vectors) != len(given):
            raise ValueError(f"{len(vectors)} vectors for {len(given)} turns")
        keep: dict[int, int] = {}
        for j, st in enumerate(given):
            if st.id not in self.pos and st.id not in keep:
                keep[st.id] = j
        if not keep:
            return []
        picked = list(keep.values())
        fresh = [given[j] for j in picked]
        texts = [self.text(st) for st in fresh] if terms is None or (vectors is None and self.embed is not None) else []
        vec: np.ndarray | None
        if vectors is not None and self.embed is not None:
            # int8 rows are stored codes (kept so: :mod:`.vector_rows`); others are unit float32 rows.
            supplied = vectors if vectors.dtype == np.int8 else np.asarray(vectors, dtype=np.float32)
            if len(picked) != len(supplied) or picked[-1] != len(supplied) - 1:
                supplied = supplied[picked]  # (picked is increasing: all of them means in order, no copy needed)
            vec = supplied
        else:
            vec = np.asarray(self.embed(texts), dtype=np.float32) if self.embed is not None else None
        if vec is not None and (
            vec.ndim != 2 or len(vec) != len(fresh) or (self.vectors is not None and vec.shape[1] != self.vectors.dims)
        ):
            raise ModelError(f"embedder returned shape {vec.shape} for {len(fresh)} texts")
        # Bookkeeping with C-level passes (dict/map/numpy), not a Python loop per turn:
        # an index opened from the store adds all of a namespace's turns at once.
        base = len(self.turns)
        new = list(range(base, base + len(fresh)))
        self.pos.update(zip([st.id for st in fresh], new, strict=True))
        keys = [(st.namespace, st.session) for st in fresh]
        firsts: dict[tuple[str, str], int] = {}
        for j, key in enumerate(keys):  # (one dict probe per turn; new sessions numbered in order of appearance)
            if key not in self._sessions and key not in firsts:
                firsts[key] = j
        for key, j in firsts.items():
            self._sessions[key] = len(self._sizes)
            self._sizes.append(0)
            self.session_dates.append(fresh[j].timestamp)
        sessions_arr = np.fromiter(map(self._sessions.__getitem__, keys), np.int64, len(keys))
        # Place within the session: the session's earlier size plus the turn's rank among this batch's turns of it.
        by_session = np.argsort(sessions_arr, kind="stable")
        ordered = sessions_arr[by_session]
        run_start = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
        rank = np.arange(len(ordered)) - np.repeat(run_start, np.diff(np.append(run_start, len(ordered))))
        sizes_before = np.asarray(self._sizes, dtype=np.int64)
        places_arr = np.empty(len(keys), dtype=np.int64)
        places_arr[by_session] = sizes_before[ordered] + rank
        for s_id, count in zip(*np.unique(sessions_arr, return_counts=True), strict=True):
            self._sizes[int(s_id)] += int(count)
        names = [st.turn.name if isinstance(st, StoredTurn) else st.name for st in fresh]
        speakers = [self.speakers.setdefault(name, len(self.speakers)) if name else -1 for name in names]
        self.turns.extend(fresh)
        sessions, places = sessions_arr, places_arr
        if isinstance(terms, StoredTerms) and not len(self.bm25) and len(picked) == len(terms):
            # Opened from the store: the ids stay as they are (O(read), no postings yet).
            counts = self.bm25.open_ids(terms)
            self.terms.open(terms, self.bm25.term_ids)
        else:
            if terms is None:
                fresh_terms = [analyze(t) for t in texts]
            elif isinstance(terms, StoredTerms):
                fresh_terms = [terms.terms(j) for j in picked]
            else:
                fresh_terms = [t.split() if isinstance(t, str) else list(t) for t in (terms[j] for j in picked)]
            self.bm25.extend(fresh_terms)
            counts = np.fromiter((len(t) for t in fresh_terms), np.int64, len(fresh_terms))
            self.terms.extend(fresh_terms)
        self._session_of.extend(sessions)
        self._place.extend(places)
        self._speaker_of.extend(np.asarray(speakers, dtype=np.int64))
        self._lengths.extend(counts)
        self._stale = True
        if vec is not None:
            self._add_vectors(np.asarray(new, dtype=np.int64), vec)
        return new

    def _add_vectors(self, new: np.ndarray, vec: np.ndarray) -> None:
        if self.vectors is None:
            self.vectors, self.window_norms = VectorRows.of(vec), _Rows(np.float64)
        assert self.window_norms is not None
        self.vectors.extend(vec)
        self.window_norms.extend(np.ones(len(vec)))
        # Session sums are made when first asked for (their weight is 0 by default).
        self._session_sums = None
        self._refresh()
        if len(new) == len(self.turns):
            # Everything is new (an index opened from the store): all norms at once.
            self.window_norms.view[:] = self._all_summed_norms()
            return
        # A new turn enters the windows of the (at most `window`) turns before it in its session.
        first = self.start[self.session_of[new]]
        back = [self.order[np.maximum(self.rank[new] - d, first)] for d in range(1, self.window + 1)]
        touched = np.unique(np.concatenate([new, *back]))
        self.window_norms.view[touched] = self._summed_norm(touched)

    def _all_summed_norms(self) -> np.ndarray:
        """:meth:`_summed_norm` of every row, with contiguous slices in session order.

        Rows whose whole window lies inside their session (nearly all of
        them) are summed over shifted slices with no mask; the few within
        ``window`` turns of a session's edge are then redone by
        :meth:`_summed_norm`. The same float32 additions in the same offset
        order as the per-row version, so the norms are bit-equal to an index
        grown turn by turn.
        """
        assert self.vectors is not None
        vec, w = self.vectors, self.window
        n = len(vec)
        # An index opened from the store holds its turns in session order already: no gather.
        in_order = bool(np.array_equal(self.order, np.arange(n)))
        out = np.empty(n)
        # In blocks of rows (session order), so the working set stays small.
        for p0 in range(0, n, 4096):
            p1 = min(n, p0 + 4096)
            g0, g1 = max(0, p0 - w), min(n, p1 + w)
            ordered = vec.block(g0, g1) if in_order else vec.take(self.order[g0:g1])  # rows g0 .. g1-1 in session order
            acc = np.zeros((p1 - p0, vec.dims), dtype=np.float32)
            for d in range(-w, w + 1):
                a, b = max(p0, -d), min(p1, n - d)
                if a < b:
                    np.add(acc[a - p0 : b - p0], ordered[a + d - g0 : b + d - g0], out=acc[a - p0 : b - p0])
            norms = np.maximum(np.linalg.norm(acc, axis=1).astype(np.float64), 1e-12)
            if in_order:
                out[p0:p1] = norms
            else:
                out[self.order[p0:p1]] = norms
        edge = np.flatnonzero((self.lo != self.rank - w) | (self.hi != self.rank + w + 1))
        if edge.size:
            out[edge] = self._summed_norm(edge)
        return out

    def _summed_norm(self, rows: np.ndarray) -> np.ndarray:
        """Length of each row's summed window vector (summed in a fixed offset order), floored at 1e-12."""
        assert self.vectors is not None
        vec = self.vectors
        at = self.rank[rows]
        acc = np.zeros((len(rows), vec.dims), dtype=np.float32)
        for d in range(-self.window, self.window + 1):
            j = at + d
            ok = (j >= self.lo[rows]) & (j < self.hi[rows])
            acc[ok] += vec.take(self.order[j[ok]])
        return np.maximum(np.linalg.norm(acc, axis=1).astype(np.float64), 1e-12)

    # --- structure ---------------------------------------------------------------------

    @property
    def session_of(self) -> np.ndarray:
        """Session number of each turn."""
        return self._session_of.view

    @property
    def speaker_of(self) -> np.ndarray:
        """Speaker code of each turn (``-1``: unnamed); codes are :attr:`speakers` values."""
        return self._speaker_of.view

    def _refresh(self) -> None:
        """Recompute session order, window bounds, neighbours and length norms (O(N) numpy)."""
        if not self._stale:
            return
        n = len(self.turns)
        session, place = self._session_of.view, self._place.view
        sizes = self._sizes_arr = np.asarray(self._sizes, dtype=np.int64)
        self.start = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        # Session order: by session, then place (turns of a session are stored in order).
        self.rank = self.start[session] + place
        self.order = np.empty(n, dtype=np.int64)
        self.order[self.rank] = np.arange(n)
        first = self.start[session]
        self.lo = np.maximum(self.rank - self.window, first)
        self.hi = np.minimum(self.rank + self.window + 1, first + sizes[session])
        # Neighbours within the session; -1 reads the zero appended to a score vector.
        self.prev = np.where(place > 0, self.order[np.maximum(self.rank - 1, 0)], -1)
        self.next = np.where(place + 1 < sizes[session], self.order[np.minimum(self.rank + 1, n - 1)], -1)
        # In session order (rank == position) with few turns near a session's edge: windows by slices.
        w = self.window
        edge = np.flatnonzero((self.lo != self.rank - w) | (self.hi != self.rank + w + 1))
        in_order = n > 0 and int(self.rank[0]) == 0 and bool((np.diff(self.rank) == 1).all())
        self._edge = edge if in_order and len(edge) * 4 < n else None
        lengths = self._lengths.view
        self._length_sums = np.concatenate(([0], np.cumsum(lengths[self.order])))
        win_len = (self._length_sums[self.hi] - self._length_sums[self.lo]).astype(np.float64)
        ses_len = np.bincount(session, weights=lengths, minlength=len(sizes))
        self._window_bm25_norm = self._norm(win_len)
        self._session_bm25_norm = self._norm(ses_len)
        self._stale = False

    def _norm(self, lengths: np.ndarray) -> np.ndarray:
        avg = max(float(lengths.mean()), 1.0) if lengths.size else 1.0
        return self.k1 * (1.0 - self.b + self.b * lengths / avg)

    def ready(self) -> None:
        """Bring the derived arrays up to date (cheap when nothing was added)."""
        self._refresh()

    # --- scoring -----------------------------------------------------------------------

    def _bm25(self, out: np.ndarray, tf: np.ndarray, norm: np.ndarray, weight: float) -> None:
        hit = np.flatnonzero(tf)
        self._bm25_at(out, hit, tf[hit], norm, weight)

    def _bm25_at(self, out: np.ndarray, hit: np.ndarray, t: np.ndarray, norm: np.ndarray, weight: float) -> None:
        """BM25 of one term for the documents ``hit`` (all with tf ``t`` > 0; df = their number)."""
        if not hit.size:
            return
        n, df = len(out), len(hit)
        idf = max(math.log(1.0 + (n - df + 0.5) / (df + 0.5)), 1e-6) * weight
        out[hit] += idf * t * (self.k1 + 1.0) / (t + norm[hit])

    def lexical(
        self, terms: Sequence[str], weights: dict[str, float] | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """BM25 of each turn, of each turn's window, and of each session, for query ``terms``.

        Window and session scores are exactly those of a BM25 index over the
        concatenated window/session texts (same k1, b, idf).
        """
        self._refresh()
        n = len(self.turns)
        turn = self.bm25.scores(terms, weights)
        window, session = np.zeros(n), np.zeros(len(self._sizes))
        for term in dict.fromkeys(terms):
            if term not in self.bm25:
                continue
            docs, tf = self.bm25.posting(term)
            w = weights.get(term, 1.0) if weights else 1.0
            self._window_bm25(window, docs, tf, w)
            ses_tf = np.bincount(self.session_of[docs], weights=tf, minlength=len(self._sizes))
            self._bm25(session, ses_tf, self._session_bm25_norm, w)
        return turn, window, session

    def window_cosines(self, dots: np.ndarray) -> np.ndarray:
        """Cosine of each turn's window vector with a query, from the turns' dot products with it."""
        assert self.window_norms is not None
        ordered = dots if self._edge is not None else dots[self.order]  # (in order: no gather)
        sums = np.concatenate(([0.0], np.cumsum(ordered, dtype=np.float64)))
        return self._window_sums(sums) / self.window_norms.view

    def substance(self, scale: float) -> np.ndarray:
        """``1 - exp(-terms / scale)`` per turn, from its count of content words (read-only: shared
        between queries, made again only when turns were added or ``scale`` changed)."""
        key = (len(self._lengths.view), scale)
        if self._substance is None or self._substance[0] != key:
            prior = 1.0 - np.exp(-self._lengths.view / scale)
            prior.flags.writeable = False
            self._substance = (key, prior)
        return self._substance[1]

    def _window_bm25(self, out: np.ndarray, docs: np.ndarray, tf: np.ndarray, weight: float) -> None:
        """Add one term's window BM25: window tf = sum of the term's tf over each window.

        A rare term touches few windows, so its window tfs are gathered sparsely
        (each posting lands in the windows of the turns within ``window`` places
        of it); a common term is summed densely by prefix sums. Both give the
        same integer sums.
        """
        n, w = len(out), self.window
        if len(docs) * (2 * w + 1) * 8 < n:
            at, ses = self.rank[docs], self.session_of[docs]
            first = self.start[ses]
            last = first + self._sizes_arr[ses]
            shifted = [at + d for d in range(-w, w + 1)]
            keep = [(t >= first) & (t < last) for t in shifted]
            where = np.concatenate([t[k] for t, k in zip(shifted, keep, strict=True)])
            value = np.concatenate([tf[k] for k in keep])
            slots, back = np.unique(where, return_inverse=True)
            self._bm25_at(out, self.order[slots], np.bincount(back, weights=value), self._window_bm25_norm, weight)
            return
        # Integer counts: int32 prefix sums are the same sums as float64 ones, at half the memory traffic.
        prefix = np.zeros(n + 1, dtype=np.int32)
        prefix[self.rank[docs] + 1] = tf
        self._bm25(out, self._window_sums(np.cumsum(prefix, dtype=np.int32)), self._window_bm25_norm, weight)

    def _window_sums(self, sums: np.ndarray) -> np.ndarray:
        """Each turn's window total from prefix sums over session order (``sums[r]``: the total of ranks
        below ``r``), in position order. With the turns in session order (an index opened from the store,
        and one grown session after session) the windows away from a session's edge are two shifted
        slices; only the edge rows are gathered (issue 28: the gathers over every turn cost twice the
        slices at 1M). The same subtractions, so the same values."""
        edge = self._edge
        if edge is None:
            return sums[self.hi] - sums[self.lo]
        n, w = len(self.rank), self.window
        out = np.empty(n, dtype=sums.dtype)
        if n > 2 * w:
            np.subtract(sums[2 * w + 1 :], sums[: n - 2 * w], out=out[w : n - w])
        out[edge] = sums[self.hi[edge]] - sums[self.lo[edge]]
        return out

    def session_vectors(self) -> np.ndarray:
        """Unit mean vector of each session (float64)."""
        if self._session_sums is None:
            assert self.vectors is not None
            sums = np.zeros((len(self._sizes), self.vectors.dims))
            # Unbuffered and in index order: each session's sum is accumulated turn by turn
            # in stored order, so it does not depend on how the turns were batched (nor on the blocks).
            for lo in range(0, len(self.vectors), 4 * BLOCK):
                block = self.vectors.block(lo, lo + 4 * BLOCK).astype(np.float64)
                np.add.at(sums, self.session_of[lo : lo + 4 * BLOCK], block)
            self._session_sums = _Rows(np.float64, sums.shape[1])
            self._session_sums.extend(sums)
        sums = self._session_sums.view
        return sums / np.maximum(np.linalg.norm(sums, axis=1, keepdims=True), 1e-12)
