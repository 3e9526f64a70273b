"""Hybrid recall over stored turns: lexical + vector + structure, fused.

:class:`HybridIndex` indexes each turn three ways and scores a query on each:

* the turn itself (BM25 on its words, cosine on its embedding),
* its *window* — the turn with its neighbours in the same session, since an
  answer often sits in the reply to the turn that names the topic,
* its *session* — all turns of the session, so a turn in the session that
  talks about the query's topic outranks a stray word match elsewhere.

Each signal is scaled to [0, 1] for the query and summed with the weights
of :class:`Weights`; names of speakers and dates named in the query add small
boosts (:mod:`stratamem.retrieve.query`). The verbatim turn is what is
returned; windows and sessions only help rank it. Rendering and budget
packing live in :mod:`stratamem.retrieve.render`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Protocol

import numpy as np

from ..errors import ValidationError
from ..records import StoredTurn
from ..store.term_ids import StoredTerms
from .corpus import TurnCorpus
from .eventdates import ToldDays, decode_events, event_spans, first_day
from .ivf import ScanSettings
from .lexical import BM25Index, analyze
from .passages import PassageVectors, is_long, passage_texts
from .plan import PlanSettings, QueryPlan, gather, merge
from .query import QueryFacts, read_query, without_speakers
from .rewrite import QueryRewriter, RuleRewriter
from .roles import ROLE_CODES, role_cue
from .scans import Scan, scan_queries
from .sentences import sentence_texts
from .timewords import resolve_anchor
from .turn_slots import TurnSlots
from .vector_rows import _Rows
from .weights import LEXICAL_WEIGHTS, NORMALISERS, Weights, fuse_signals

__all__ = ["LEXICAL_WEIGHTS", "NORMALISERS", "Embedder", "Hit", "HybridIndex", "Weights", "fuse_signals", "passages"]


SENTENCES = True
"""Whether an index with an embedder gives short multi-sentence turns sentence vectors by default
(``embedding.sentences`` in :mod:`stratamem.config`)."""


GATHER_DEPTH = 500
"""Candidates beyond ``k`` an ``aggregate`` question gathers from (turns of other sessions)."""


def _top(fused: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` best scores, best first (ties: lower position first)."""
    if k < len(fused):
        # Partial selection first: a full sort of 100k scores costs more than the scoring.
        cand = np.argpartition(-fused, k - 1)[:k]
        return cand[np.lexsort((cand, -fused[cand]))]
    return np.argsort(-fused, kind="stable")


class Embedder(Protocol):
    """What the index needs from an embedder: unit-length vectors, batch first."""

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        """One row per text, L2-normalised."""


@dataclass(frozen=True, slots=True)
class Hit:
    """One recalled unit with its provenance and why it ranked where it did."""

    id: str
    """Unit id, e.g. ``turn:42``."""
    kind: str
    """``turn`` (summaries and memory items join later)."""
    turn_ids: tuple[int, ...]
    """Turns the unit covers."""
    score: Mapping[str, float] = field(default_factory=dict)
    """Per-signal contributions and ``fused``, the sum they rank by."""


def passages(terms: Sequence[str], size: int) -> list[Sequence[str]]:
    """``terms`` cut into runs of ``size`` starting every ``size // 2`` (one run if it is short)."""
    if len(terms) <= size:
        return [terms]
    step = max(1, size // 2)
    return [terms[i : i + size] for i in range(0, len(terms) - size + step, step)]


class HybridIndex:
    """An in-memory hybrid index over turns, grown incrementally.

    Adding turns costs work proportional to the new turns (their analysis,
    postings and embeddings) plus O(N) numpy to refresh the structure arrays;
    nothing is rebuilt from scratch, and the scores equal those of an index
    built in one go over the same turns (:mod:`stratamem.retrieve.corpus`).

    Args:
        embedder: Embeddings for the vector signals; ``None`` ranks lexically
            only (``Hit.score`` then has no ``vector`` keys, which callers
            report as degraded recall).
        weights: Signal weights.
    """

    def __init__(
        self,
        embedder: Embedder | None = None,
        weights: Weights | None = None,
        loader: Callable[[Sequence[int]], list[StoredTurn]] | None = None,
        *,
        planning: PlanSettings | None = None,
        sentences: bool = SENTENCES,
        rewriter: QueryRewriter | None = None,
    ) -> None:
        self.embedder = embedder
        self.weights = weights or (Weights() if embedder is not None else LEXICAL_WEIGHTS)
        self.planning = planning or PlanSettings()
        """How planned questions place their hits (:mod:`stratamem.retrieve.plan`)."""
        self.sentences = bool(sentences) and embedder is not None
        """Whether short multi-sentence turns have sentence vectors (:mod:`stratamem.retrieve.sentences`)."""
        self.rewriter: QueryRewriter = rewriter or RuleRewriter()
        """Who plans a question (:mod:`stratamem.retrieve.rewrite`): the rules unless a model is given."""
        self.scan = ScanSettings()
        """When the vector scans go through lists (:mod:`stratamem.retrieve.ivf`): a matrix past ``scan.rows`` rows."""
        self._corpus = TurnCorpus(self.weights.window, embedder.embed_batch if embedder is not None else None)
        # Reads full turns by id: an index opened from the store holds only turn keys
        # (id, session, speaker, time) and reads a turn when it is recalled.
        self._loader = loader
        self._passages = BM25Index(self._corpus.k1, self._corpus.b)
        self._passage_turn: list[int] = []
        self._passage_array = np.zeros(0, dtype=np.int64)
        self._passage_vectors = PassageVectors()
        self._roles = _Rows(np.int64)  # (an array, not a list: the garbage collector walks no element of it)
        self._sentence_vectors = PassageVectors()
        self._told = ToldDays()

    def __len__(self) -> int:
        return len(self._corpus)

    @property
    def turns(self) -> TurnSlots:
        """The indexed turns, in the order they were added (read-only by convention).

        In an index opened from the store (:mod:`stratamem.retrieve.persisted`),
        turns not recalled yet are :class:`~stratamem.store.base_turn_index.TurnKey`
        values (``id``, ``session``, ``name``, ``timestamp``); :meth:`turn` always
        returns the full turn.
        """
        return self._corpus.turns

    def _materialize(self, positions: Iterable[int]) -> None:
        """Replace turn keys at ``positions`` with the full turns (one read)."""
        c = self._corpus
        want = [int(i) for i in positions if not isinstance(c.turns[i], StoredTurn)]
        if not want or self._loader is None:
            return
        full = {st.id: st for st in self._loader([c.turns[i].id for i in want])}
        for i in want:
            got = full.get(c.turns[i].id)
            if got is not None:
                c.turns[i] = got

    @property
    def lexical_only(self) -> bool:
        """Whether recall runs without vectors."""
        return self.embedder is None

    def add_turns(
        self,
        turns: Iterable[StoredTurn],
        *,
        terms: Sequence[list[str]] | StoredTerms | None = None,
        vectors: np.ndarray | None = None,
        passages: Mapping[int, np.ndarray] | None = None,
        sentences: Mapping[int, np.ndarray] | None = None,
        events: Sequence[str | None] | None = None,
    ) -> None:
        """Add stored turns (in stored order); already indexed ids are ignored.

        Only the new turns are analysed and embedded; ``terms`` and ``vectors``
        (one per turn, from a persisted index) skip that work
        (:meth:`~stratamem.retrieve.corpus.TurnCorpus.add`). With
        :attr:`Weights.vector_passage` on, long turns also get passage vectors:
        ``passages`` (turn id -> its passage vectors, from a persisted index)
        gives them; with :attr:`sentences` on, short turns of several sentences
        get sentence vectors, given by ``sentences`` likewise; the others are
        embedded here when the full turn is at hand. ``events`` (one stored
        events string per turn, :mod:`stratamem.retrieve.eventdates`; ``None``
        for a turn without one) gives the days the turns tell of, which are
        otherwise read from the full turns here. Everything is embedded before
        the index changes, so an embedder error leaves it as it was.
        """
        given = list(turns)
        if events is not None and len(events) != len(given):
            raise ValueError(f"{len(events)} event strings for {len(given)} turns")
        spans = self._told_days(given, events)
        want_passages = self.embedder is not None and self.weights.vector_passage > 0
        if not want_passages and not self.sentences:
            self._add_events(self._add(given, terms, vectors), spans)
            return
        if terms is None:
            terms = [analyze(TurnCorpus.text(st)) for st in given]
        # Passages and sentences are chosen by term count alone: stored term ids stay ids.
        sizes = np.diff(terms.offsets).tolist() if isinstance(terms, StoredTerms) else [len(t) for t in terms]
        jobs: list[tuple[dict[int, np.ndarray], int, list[str]]] = []
        made_p, made_s = dict(passages or {}), dict(sentences or {})
        if want_passages:
            jobs += [(made_p, tid, texts) for tid, texts in self.passage_texts(given, sizes, skip=passages)]
        if self.sentences:
            jobs += [(made_s, tid, texts) for tid, texts in self.sentence_texts(given, sizes, skip=sentences)]
        flat = [t for _, _, texts in jobs for t in texts]
        if flat:
            assert self.embedder is not None
            vec = np.asarray(self.embedder.embed_batch(flat), dtype=np.float32)
            at = 0
            for made, tid, texts in jobs:
                made[tid] = vec[at : at + len(texts)]
                at += len(texts)
        new = self._add(given, terms, vectors)
        ids = self._corpus.turns.ids(new)
        empty = np.zeros((0, 0))
        if want_passages:
            self._passage_vectors.add(new, [made_p.get(t, empty) for t in ids])
        if self.sentences:
            self._sentence_vectors.add(new, [made_s.get(t, empty) for t in ids])
        self._add_events(new, spans)

    def sentence_texts(
        self, turns: Sequence[StoredTurn], term_counts: Sequence[int], skip: Mapping[int, np.ndarray] | None = None
    ) -> list[tuple[int, list[str]]]:
        """``(turn id, sentence texts)`` of the short multi-sentence, not yet indexed full turns among
        ``turns`` (their term counts in ``term_counts``; those in ``skip`` left out): what
        :meth:`add_turns` embeds as sentences."""
        out = []
        seen: set[int] = set()
        for st, n in zip(turns, term_counts, strict=True):
            if st.id in self._corpus.pos or st.id in seen or (skip and st.id in skip) or not isinstance(st, StoredTurn):
                continue
            seen.add(st.id)
            texts = sentence_texts(st, int(n))
            if texts:
                out.append((st.id, texts))
        return out

    def _told_days(
        self, turns: list[StoredTurn], events: Sequence[str | None] | None
    ) -> dict[int, list[tuple[int, int]]]:
        """Per new turn id: the day spans it tells of (given stored strings, else read from full turns)."""
        out: dict[int, list[tuple[int, int]]] = {}
        for j, st in enumerate(turns):
            if st.id in self._corpus.pos:
                continue
            stored = events[j] if events is not None else None
            if stored is not None:
                got = decode_events(stored)
            elif isinstance(st, StoredTurn):
                got = event_spans(st.text, st.timestamp)
            else:
                got = []
            if got:
                out[st.id] = got
        return out

    def _add_events(self, new: list[int], spans: dict[int, list[tuple[int, int]]]) -> None:
        for i, tid in zip(new, self._corpus.turns.ids(new), strict=True):
            self._told.add(i, spans.get(tid, ()))

    def told_days(self, turn_id: int) -> list[tuple[int, int]]:
        """Day spans (days since 1970-01-01, end exclusive) the indexed turn tells of
        (:mod:`stratamem.retrieve.eventdates`).

        Raises:
            KeyError: The id is not indexed.
        """
        return self._told.of(self._corpus.pos[turn_id])

    def passage_texts(
        self, turns: Sequence[StoredTurn], term_counts: Sequence[int], skip: Mapping[int, np.ndarray] | None = None
    ) -> list[tuple[int, list[str]]]:
        """``(turn id, passage texts)`` of the long, not yet indexed full turns among ``turns`` (their term
        counts in ``term_counts``; those in ``skip`` left out): what :meth:`add_turns` embeds as passages."""
        out = []
        seen: set[int] = set()
        for st, n in zip(turns, term_counts, strict=True):
            if st.id in self._corpus.pos or st.id in seen or (skip and st.id in skip):
                continue
            if not isinstance(st, StoredTurn) or not is_long(int(n)):
                continue
            seen.add(st.id)
            out.append((st.id, passage_texts(st)))
        return out

    def _add(
        self, turns: list[StoredTurn], terms: Sequence[list[str]] | StoredTerms | None, vectors: np.ndarray | None
    ) -> list[int]:
        new = self._corpus.add(turns, terms=terms, vectors=vectors)
        # An opened turn's first stored term id gives its role: its terms are never decoded.
        self._roles.extend(np.asarray(self._corpus.terms.first_codes(new, ROLE_CODES), dtype=np.int64))
        size = self.weights.passage_terms
        if size:
            for i in new:
                for chunk in passages(self._corpus.terms[i], size):
                    self._passages.add(chunk)
                    self._passage_turn.append(i)
        return new

    def turn(self, turn_id: int) -> StoredTurn:
        """The indexed turn with this id.

        Raises:
            KeyError: The id is not indexed.
        """
        at = self._corpus.pos[turn_id]
        self._materialize([at])
        return self._corpus.turns[at]

    def similarity(self, a: int, b: int) -> float:
        """How alike two indexed turns are: embedding cosine, or content-word Jaccard when lexical only.

        Raises:
            KeyError: An id is not indexed.
        """
        c = self._corpus
        i, j = c.pos[a], c.pos[b]
        if c.vectors is not None:
            a_, b_ = c.vectors.take(np.array([i, j]))
            return float(a_ @ b_)
        x, y = set(c.terms[i]), set(c.terms[j])
        return len(x & y) / len(x | y) if x or y else 0.0

    # --- searching ----------------------------------------------------------------------

    def query_facts(self, query: str, now: datetime | None = None) -> QueryFacts:
        """Speakers, dates and relative-time windows of ``query``, resolved against ``now``.

        ``now`` defaults to the newest indexed turn's time. An event anchor
        ("before my trip") is dated by the turn that matches its words best
        (BM25): the day it tells of, if it names one ("yesterday I …"), else its
        session's; an event found nowhere gives no window.
        """
        c = self._corpus
        c.ready()
        if now is None and self.turns:
            now = self.turns[-1].timestamp
        facts = read_query(query, c.speakers, now)
        windows = list(facts.windows)
        for anchor in facts.anchors:
            scores = c.lexical(analyze(anchor.event))[0]
            if scores.size and float(scores.max()) > 0:
                at = int(np.argmax(scores))
                # The day the turn tells of ("yesterday I had the filling"), else the day it was said.
                told = first_day(self.told_days(c.turns[at].id))
                windows.append(resolve_anchor(anchor, told or c.session_dates[int(c.session_of[at])]))
        return replace(facts, windows=tuple(windows))

    def signals(
        self, query: str, *, weighted_only: bool = False, now: datetime | None = None, sentence_mix: float = 0.0
    ) -> tuple[dict[str, np.ndarray], QueryFacts]:
        """Each signal's raw per-turn scores for ``query`` (for tuning and the manifest).

        Args:
            query: The query text.
            weighted_only: Skip the vector signals whose weight is 0 (they cannot
                change the ranking; saves O(N·d) work per query).
            now: When the query is asked, for relative times (default: the newest turn's time).
            sentence_mix: Mix the best sentence cosine into ``vector`` (what a planned
                question does, :attr:`~stratamem.retrieve.plan.PlanSettings.sentence_mix`).
        """
        return self._signals(query, weighted_only, now, sentence_mix)

    def vector_text(self, query: str) -> str:
        """What ``query``'s vector is embedded from, here and in item and summary ranking: the query without
        the speaker names it mentions (:func:`.without_speakers`: the speaker boost carries the person)."""
        return without_speakers(query, self._corpus.speakers)

    def _query_vectors(self, queries: Sequence[str]) -> list[np.ndarray | None]:
        """One embedding call for a question and its sub-queries (``None`` each without vectors), each
        embedded from its :meth:`vector_text`."""
        if self._corpus.vectors is None:
            return [None] * len(queries)
        assert self.embedder is not None  # vectors are only ever stored with an embedder
        texts = [self.vector_text(q) for q in queries]
        return list(np.asarray(self.embedder.embed_batch(texts), dtype=np.float32))

    def _scans(self, queries: Sequence[np.ndarray | None], mix: float) -> list[Scan]:
        """The vector scans of each query vector (:func:`.scans.scan_queries`: turn cosines, best sentence
        cosines when ``mix`` mixes them in, best passage cosines when weighted)."""
        assert self._corpus.vectors is not None
        sv, pv = self._sentence_vectors, self._passage_vectors
        return scan_queries(
            [q for q in queries if q is not None],  # (all of them: the index has vectors)
            self._corpus.vectors,
            sv if mix > 0 and len(sv) else None,
            pv if self.weights.vector_passage > 0 else None,
            self.scan,  # (each matrix exactly, or through its lists past scan.rows rows)
        )

    def _signals(
        self, query: str, weighted_only: bool, now: datetime | None, mix: float, scan: Scan | None = None
    ) -> tuple[dict[str, np.ndarray], QueryFacts]:
        c = self._corpus
        facts = self.query_facts(query, now)
        # "two weeks ago" is carried by the date window; as words it only matches
        # turns that happen to say "week" (a month name stays: turns name months).
        terms = analyze(facts.without_relative_words(query))
        sig = self._lexical(terms, None)
        w = self.weights
        if c.vectors is not None:
            if scan is None:
                scan = self._scans(self._query_vectors([query]), mix)[0]
            q, dots, sentences, passages = scan
            sig["vector"] = np.clip(dots, 0, None)
            if sentences is not None:
                # Best over the turn and its sentences, mixed in: a fact said in one clause counts.
                sig["vector"] = (1.0 - mix) * sig["vector"] + mix * np.clip(sentences, 0, None)
            if passages is not None:
                sig["vector_passage"] = np.clip(passages, 0, None)
            if not weighted_only or w.vector_window > 0:
                sig["vector_window"] = np.clip(c.window_cosines(dots), 0, None)
            if not weighted_only or w.vector_session > 0:
                sig["vector_session"] = np.clip(c.session_vectors() @ q, 0, None)[c.session_of]
            if not weighted_only or w.vector_prev > 0 or w.vector_next > 0:
                padded = np.append(sig["vector"], 0.0)
                sig["vector_prev"], sig["vector_next"] = padded[c.prev], padded[c.next]
        cue = role_cue(query) if not weighted_only or w.role > 0 else None
        if cue is not None:
            routed = self._roles.view == ROLE_CODES[cue]
            if routed.any():
                sig["role"] = routed.astype(np.float64)
        if facts.speakers:
            codes = [c.speakers[name] for name in facts.speakers]
            sig["speaker"] = np.isin(c.speaker_of, codes).astype(np.float64)
        if facts.dates:
            per_session = np.array([facts.date_match(d) for d in c.session_dates])
            sig["date"] = per_session[c.session_of]
        if facts.windows:
            per_session = np.array([facts.window_match(d) for d in c.session_dates])
            sig["date_window"] = per_session[c.session_of]
            if len(self._told) and (not weighted_only or w.event_date > 0):
                told = self._told.scores(facts.windows, len(c.turns))
                if told.any():
                    sig["event_date"] = told
        if facts.current and len(c.session_dates) > 1:
            when = np.array([d.timestamp() for d in c.session_dates])
            span = float(when.max() - when.min())
            if span > 0:
                sig["recency"] = ((when - when.min()) / span)[c.session_of]
        if self.weights.feedback_docs:
            sig.update(self._feedback(terms, sig))
        return sig, facts

    def _lexical(self, terms: list[str], weights: dict[str, float] | None) -> dict[str, np.ndarray]:
        c = self._corpus
        turn, window, session = c.lexical(terms, weights)
        sig = {"lexical": turn, "lexical_window": window, "lexical_session": session[c.session_of]}
        if self.weights.passage_terms:
            sig["lexical_passage"] = self._best_passage(terms, weights)
        padded = np.append(turn, 0.0)
        sig["lexical_prev"], sig["lexical_next"] = padded[c.prev], padded[c.next]
        return sig

    def _best_passage(self, terms: list[str], weights: dict[str, float] | None) -> np.ndarray:
        """Each turn's best passage BM25 (passages of all turns form one collection)."""
        if len(self._passage_array) != len(self._passage_turn):
            self._passage_array = np.asarray(self._passage_turn, dtype=np.int64)
        out = np.zeros(len(self.turns))
        np.maximum.at(out, self._passage_array, self._passages.scores(terms, weights))
        return out

    def _feedback(self, terms: list[str], sig: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """Lexical signals again, with terms borrowed from the first pass's best turns (RM-style)."""
        w = self.weights
        top = np.argsort(-self.fuse(sig)[0], kind="stable")[: w.feedback_docs]
        gain: dict[str, float] = {}
        asked = set(terms)
        for i in top:
            for t in set(self._corpus.terms[i]) - asked:
                gain[t] = gain.get(t, 0.0) + self._corpus.bm25.idf(t)
        extra = sorted(gain, key=lambda t: -gain[t])[: w.feedback_terms]
        weights = dict.fromkeys(extra, w.feedback_weight)
        return self._lexical(terms + extra, weights)

    def _substance(self) -> np.ndarray | None:
        w = self.weights
        return self._corpus.substance(w.substance_terms) if w.substance > 0 else None

    def fuse(self, sig: Mapping[str, np.ndarray]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Fused scores and the weighted part each signal contributes (see :func:`fuse_signals`)."""
        fused, parts, prior = fuse_signals(sig, self.weights, self._substance())
        if prior.size:
            parts["substance"] = prior
        return fused, parts

    def plan(self, query: str, now: datetime | None = None) -> QueryPlan:
        """How ``query`` is searched (:mod:`stratamem.retrieve.plan`): :attr:`rewriter`'s plan, or
        ``single`` when :attr:`planning` is off."""
        if not self.planning.enabled:
            return QueryPlan()
        return self.rewriter.plan(query, now=now, speakers=tuple(self._corpus.speakers))

    def search(
        self, query: str, k: int = 10, *, now: datetime | None = None, plan: QueryPlan | None = None
    ) -> list[Hit]:
        """The ``k`` best turns for ``query``, best first, with score breakdowns.

        ``now`` is when the query is asked: relative times in it ("last month")
        are resolved against it (default: the newest indexed turn's time).
        ``plan`` (default: :meth:`plan`) says whether the question needs several
        turns: an ``aggregate`` question gathers one turn per session after the
        first ones (a gathered hit's score has ``gathered``); a question with
        sub-queries interleaves their rankings with its own (a hit a sub-query
        placed has ``subquery``, its 1-based number, and that sub-query's breakdown).

        Raises:
            ValidationError: ``query`` is not a string, ``k`` is not positive,
                ``now`` is not a datetime or ``plan`` not a :class:`QueryPlan`.
        """
        if now is not None and not isinstance(now, datetime):
            raise ValidationError(f"now must be a datetime, got {type(now).__name__}")
        if not isinstance(query, str):
            raise ValidationError(f"query must be a string, got {type(query).__name__}")
        if isinstance(k, bool) or not isinstance(k, int) or k <= 0:
            raise ValidationError(f"k must be a positive integer, got {k!r}")
        if plan is not None and not isinstance(plan, QueryPlan):
            raise ValidationError(f"plan must be a QueryPlan, got {type(plan).__name__}")
        if not self.turns:
            return []
        if plan is None:
            plan = self.plan(query, now)
        if plan.multi:
            return self._planned(query, k, now, plan)
        sig, _ = self.signals(query, weighted_only=True, now=now)
        scored = fuse_signals(sig, self.weights, self._substance())
        top = _top(scored[0], k)
        return self._hits(top, np.zeros(len(top), dtype=np.int64), [scored])

    def _planned(self, query: str, k: int, now: datetime | None, plan: QueryPlan) -> list[Hit]:
        """:meth:`search` of a question that needs several turns (:mod:`stratamem.retrieve.plan`)."""
        p = self.planning
        queries = [query, *plan.subqueries]
        vectors = self._corpus.vectors is not None
        # Every query vector is scored in one pass over each matrix (a sub-query's scans cost no new pass).
        scans = self._scans(self._query_vectors(queries), p.sentence_mix) if vectors else [None] * len(queries)
        scored = [
            fuse_signals(self._signals(text, True, now, p.sentence_mix, scan)[0], self.weights, self._substance())
            for text, scan in zip(queries, scans, strict=True)
        ]
        if plan.subqueries and p.share:
            depth = p.share * len(queries)
            rankings = [_top(scored[0][0], k + depth)]
            for fused, _, _ in scored[1:]:
                r = _top(fused, depth)
                rankings.append(r[fused[r] > 0])  # a sub-query that matches nothing places nothing
            order, source = merge(rankings, p.share)
            return self._hits(order[:k], source[:k], scored)
        fused = scored[0][0]
        if plan.shape != "aggregate":
            top = _top(fused, k)
            return self._hits(top, np.zeros(len(top), dtype=np.int64), scored)
        order, gathered = gather(_top(fused, max(k, p.head) + GATHER_DEPTH), fused, self._corpus.session_of, p)
        return self._hits(order[:k], np.zeros(min(k, len(order)), dtype=np.int64), scored, gathered)

    def _hits(
        self,
        top: np.ndarray,
        source: np.ndarray,
        scored: Sequence[tuple[np.ndarray, dict[str, np.ndarray], np.ndarray]],
        gathered: frozenset[int] = frozenset(),
    ) -> list[Hit]:
        """Hits at positions ``top``, each with the breakdown of the ranking that placed it (``source``:
        0 the question, ``i`` its sub-query ``i``); ``gathered``: positions gathering placed."""
        self._materialize(top)
        out = []
        # Breakdowns only for the hits: the per-signal arrays are never materialised.
        for i, src in zip(top, source, strict=True):
            fused, parts, prior = scored[int(src)]
            score = {n: float(v[i]) for n, v in parts.items()}
            if prior.size:
                score["substance"] = float(prior[i])
            score["fused"] = float(fused[i])
            if src:
                score["subquery"] = float(src)
            if int(i) in gathered:
                score["gathered"] = 1.0
            st = self.turns[i]
            out.append(Hit(f"turn:{st.id}", "turn", (st.id,), score))
        return out

    def describe(self) -> dict[str, Any]:
        """Size and mode, for status output."""
        return {"turns": len(self._corpus), "sessions": self._corpus.sessions, "lexical_only": self.lexical_only}
