"""Prototype rules that add or replace a ranking signal (issue 30), and the list measured.

Built on :mod:`benchmarks.locomo.rerank` (the state and the reordering rules);
measured by :mod:`benchmarks.locomo.multievidence`. Write-time work a real
implementation would store (sentence vectors, event dates) is computed here
once per index and kept in module dictionaries for the benchmark process.

* :func:`sentence_vectors` — the turn's vector signal as the best cosine over the turn
  and each of its sentences (short turns): a fact said in one clause of a turn about
  something else is not diluted.
* :func:`event_dates` — relative times a turn tells of ("yesterday I …"), resolved
  against the turn's own time as a write-time pass would, matched to the question's window.
* :func:`routed` — for a question the rules call multi-evidence only: sentence
  vectors, then sub-query shares or one turn per session after the engine's first few.
* :func:`rewrite_vector`, :func:`vector_feedback`, :func:`feedback`,
  :func:`expand_category`, :func:`event_gather` — measured, did not pay.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from stratamem.retrieve import analyze

from .rerank import (
    _PLURAL,
    Scored,
    cluster_cap,
    cover_terms,
    decompose,
    explain_away,
    gather,
    gather_all,
    is_aggregation,
    merge,
    subqueries,
    with_fused,
)

__all__ = [
    "RULES",
    "SENTENCE_EMBEDDER",
    "category_terms",
    "combo",
    "declarative",
    "event_dates",
    "event_fused",
    "event_gather",
    "expand_category",
    "feedback",
    "is_event",
    "rewrite_vector",
    "routed",
    "sentence_fused",
    "sentence_vectors",
    "vector_feedback",
]


def vector_feedback(s: Scored, docs: int = 3, gamma: float = 0.5) -> list[int]:
    """Rocchio on the turn vectors: the query vector plus ``gamma`` × the mean of the first
    pass's top ``docs`` turn vectors, re-scored with every other signal as it was."""
    corpus = s.index._corpus  # prototype only: the turn vectors
    if corpus.vectors is None or "vector" not in s.sig:
        return list(s.order)
    vec = corpus.vectors.view
    q = np.asarray(s.index.embedder.embed_batch([s.query]), dtype=np.float32)[0]
    q2 = q + gamma * vec[s.order[:docs]].mean(axis=0)
    q2 /= np.linalg.norm(q2) or 1.0
    sig = dict(s.sig)
    sig["vector"] = np.clip(vec @ q2, 0, None)
    fused, _ = s.index.fuse(sig)
    return [int(i) for i in np.argsort(-fused, kind="stable")]


_FIRST_PERSON = re.compile(r"\b(i|we|i've|we've|i'm|we're|i'd|my \w+ and i|me and my \w+)\b", re.IGNORECASE)
_EVENT_CUE = re.compile(
    r"\b(yesterday|last (week|weekend|month|year|night|\w+day)|\w+ (days|weeks|months|years) ago|ago|recently|"
    r"just|this (morning|weekend|week)|the other day|finally|signed up|joined|went|took|made|tried|started|"
    r"attended|visited|bought|finished|read|ran|painted|played|volunteered|participated|got|had|saw|watched)\b",
    re.IGNORECASE,
)


def is_event(text: str) -> bool:
    """A first-person statement that something happened ("I went camping last week")."""
    return bool(_FIRST_PERSON.search(text) and _EVENT_CUE.search(text))


_AUX = r"(?:does|do|did|has|have|had|is|was|are|were|will|would|can|could)"
_WH = re.compile(
    rf"^\s*(?:what|which|where|when|who|whom|whose|why|how(?: many| much| long| often)?)\b(?P<obj>(?:\s+[\w'+-]+){{0,4}}?)"
    rf"\s+{_AUX}\s+(?P<subj>my\s+[\w-]+|[\w-]+'s?\s+[\w-]+|[\w'-]+)\b\s*(?P<rest>[^?]*)\??\s*$",
    re.IGNORECASE,
)


def declarative(query: str, speakers: Sequence[str]) -> str | None:
    """A wh-question said as the statement its answer would be in, in the ``Speaker: text`` form
    turns are embedded in ("What activities does Melanie partake in?" -> "Melanie: I partake in
    activities"; "Which cities did I travel to?" -> "user: I travel to cities"); ``None`` when the
    question does not have that shape."""
    m = _WH.match(query)
    if not m:
        return None
    subj, rest, obj = m.group("subj"), m.group("rest").strip(), m.group("obj").strip()
    names = {n.lower(): n for n in speakers}
    low = subj.lower()
    if low in ("i", "we") or low.startswith("my "):
        who, head = "user", subj
    elif low.split("'")[0] in names:
        who = names[low.split("'")[0]]
        head = "my " + subj.split()[-1] if " " in subj else "I"
    elif low == "you":
        who, head = "assistant", "I"
    else:
        return None
    obj = re.sub(r"^(kinds?|types?|sorts?) of\s+", "", obj, flags=re.IGNORECASE)
    return f"{who}: {head} {rest} {obj}".strip()


def rewrite_vector(s: Scored, mode: str = "mean") -> list[int]:
    """The vector signal scored with the declarative form of the question (:func:`declarative`):
    ``replace`` the question's vector, or the normalised ``mean`` of both, or the ``max`` of the two cosines."""
    corpus = s.index._corpus  # prototype only: the turn vectors
    text = declarative(s.query, s.speakers)
    if corpus.vectors is None or "vector" not in s.sig or not text:
        return list(s.order)
    vec = corpus.vectors.view
    q, r = np.asarray(s.index.embedder.embed_batch([s.query, text]), dtype=np.float32)
    sig = dict(s.sig)
    if mode == "replace":
        sig["vector"] = np.clip(vec @ r, 0, None)
    elif mode == "max":
        sig["vector"] = np.maximum(np.clip(vec @ r, 0, None), s.sig["vector"])
    else:
        m = q + r
        sig["vector"] = np.clip(vec @ (m / (np.linalg.norm(m) or 1.0)), 0, None)
    fused, _ = s.index.fuse(sig)
    return [int(i) for i in np.argsort(-fused, kind="stable")]


_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+|\s*(?=\[shares )")
SENTENCE_EMBEDDER: list[Any] = []
"""The embedder for sentence vectors (set by the driver: a cached one, so reruns skip the model)."""
_SENTENCES: dict[int, np.ndarray] = {}  # id(index) -> best-sentence cosine helper: (turn of row, vectors)
SENTENCE_MAX_TERMS = 80
"""Turns with more content words than this are left to the passage vectors (long turns)."""


def _sentence_rows(s: Scored) -> tuple[np.ndarray, np.ndarray]:
    """Per index: the sentence vectors of every short multi-sentence turn and the turn of each row."""
    key = id(s.index)
    if key not in _SENTENCES:
        owner, texts = [], []
        for i, t in enumerate(s.index.turns):
            st = s.index.turn(t.id)
            parts = [x.strip() for x in _SENTENCE.split(st.text) if len(x.split()) >= 3]
            if len(parts) < 2 or len(analyze(st.text)) > SENTENCE_MAX_TERMS:
                continue
            who = st.turn.name or st.role
            owner += [i] * len(parts)
            texts += [f"{who}: {x}" for x in parts]
        emb = SENTENCE_EMBEDDER[0] if SENTENCE_EMBEDDER else s.index.embedder
        vec = np.asarray(emb.embed_batch(texts), dtype=np.float32) if texts else np.zeros((0, 384), np.float32)
        _SENTENCES[key] = (np.asarray(owner, dtype=np.int64), vec)  # type: ignore[assignment]
    return _SENTENCES[key]  # type: ignore[return-value]


def sentence_fused(s: Scored, mode: str = "max") -> np.ndarray:
    """Fused scores with the ``vector`` signal taken as the best cosine over the turn and each of
    its sentences (``max``), or the mean of that and the turn cosine (``mean``); short turns only
    (a fact said in one clause of a turn about something else is not diluted by the rest)."""
    if "vector" not in s.sig:
        return s.fused
    owner, vec = _sentence_rows(s)
    q = np.asarray(s.index.embedder.embed_batch([s.query]), dtype=np.float32)[0]
    best = s.sig["vector"].copy()
    if len(owner):
        np.maximum.at(best, owner, np.clip(vec @ q, 0, None))
    sig = dict(s.sig)
    sig["vector"] = best if mode == "max" else (best + s.sig["vector"]) / 2
    return s.index.fuse(sig)[0]


def sentence_vectors(s: Scored, mode: str = "max") -> list[int]:
    """The ranking by :func:`sentence_fused`."""
    return [int(i) for i in np.argsort(-sentence_fused(s, mode), kind="stable")]


_EVENT_DATES: dict[int, list[list[Any]]] = {}  # id(index) -> per turn: DateWindows its own words name


def _turn_event_windows(s: Scored) -> list[list[Any]]:
    """Per turn: the days its own relative-time phrases name ("yesterday I …", "two weeks ago I
    started …", "last Saturday"), resolved against the turn's own time — what a write-time pass
    would store (:func:`stratamem.retrieve.timewords.read_windows` on the turn text)."""
    from stratamem.retrieve.timewords import read_windows

    key = id(s.index)
    if key not in _EVENT_DATES:
        out = []
        for t in s.index.turns:
            st = s.index.turn(t.id)
            out.append(list(read_windows(st.text, st.timestamp)) if st.timestamp else [])
        _EVENT_DATES[key] = out
    return _EVENT_DATES[key]


def event_dates(s: Scored, weight: float = 0.5) -> list[int]:
    """Turns whose *told* event day (resolved at write time) falls in a time the question names
    gain ``weight`` × the query window's score of that day (the session-date signal
    ``date_window`` stays as it is)."""
    return [int(i) for i in np.argsort(-event_fused(s, weight), kind="stable")]


def event_fused(s: Scored, weight: float = 0.5) -> np.ndarray:
    """The fused scores with the :func:`event_dates` boost added."""
    facts = s.index.query_facts(s.query, s.now)
    if not facts.windows:
        return s.fused
    per_turn = _turn_event_windows(s)
    boost = np.zeros(len(s.fused))
    for i, wins in enumerate(per_turn):
        for w in wins:
            mid = w.start + (w.end - w.start) / 2
            boost[i] = max(boost[i], max(_strict(qw, mid) for qw in facts.windows))
    return s.fused + weight * boost


def _strict(window: Any, when: Any) -> float:
    """A query window's score of an event day, without the report lag (the day is the event's own)."""
    if window.start <= when < window.end:
        return 1.0
    gap = window.start - when if when < window.start else when - window.end
    slack = window.slack.total_seconds()
    return max(0.0, 1.0 - gap.total_seconds() / slack) if slack > 0 else 0.0


_EVENTS: dict[int, np.ndarray] = {}  # id(index) -> event mask per turn (benchmark process only)


def event_gather(s: Scored, boost: float = 0.3, per_session: int = 1) -> list[int]:
    """For an aggregation question: turns that tell of an event (:func:`is_event`) by the named
    speaker (else anyone) gain ``boost``, then :func:`gather` one per session."""
    if not is_aggregation(s.query):
        return list(s.order)
    key = id(s.index)
    if key not in _EVENTS:
        _EVENTS[key] = np.array([is_event(s.index.turn(t.id).text) for t in s.index.turns])
    ev = _EVENTS[key]
    named = "speaker" in s.sig
    mask = ev & (s.sig["speaker"] > 0) if named else ev
    fused = s.fused + boost * mask * (s.fused > 0)
    order = np.argsort(-fused, kind="stable")
    s2 = Scored(s.query, s.now, s.index, fused, s.parts, order, s.session, s.speakers, s.cache, s.sig)
    return gather(s2, per_session=per_session, floor=0.0)


def _sentence_gather(s: Scored) -> list[int]:
    """:func:`sentence_vectors` (mean) then :func:`gather` (one per session) for aggregation questions."""
    return gather(with_fused(s, sentence_fused(s, "mean")))


def combo(s: Scored) -> list[int]:
    """Sentence vectors (mean); then sub-queries (each also with sentence vectors) guaranteed 3
    places, or for an aggregation question one turn per session first."""
    base = with_fused(s, sentence_fused(s, "mean"))
    subs = subqueries(s.query, s.speakers)
    if subs:
        rankings = [base.order] + [np.argsort(-sentence_fused(s.sub(q), "mean"), kind="stable") for q in subs]
        return merge(rankings, [3] * len(rankings), base.order)
    return gather(base)


def feedback(s: Scored, docs: int = 3, terms: int = 10, weight: float = 0.3) -> list[int]:
    """The engine's own lexical pseudo-relevance feedback (``Weights.feedback_docs``): terms of the
    first pass's top turns join the query (a bridge: "moved from my home country" lends
    "home country" to find "my home country, Sweden")."""
    from dataclasses import replace as _replace

    old = s.index.weights
    s.index.weights = _replace(old, feedback_docs=docs, feedback_terms=terms, feedback_weight=weight)
    try:
        sig, _ = s.index.signals(s.query, weighted_only=True, now=s.now)
        fused, _ = s.index.fuse(sig)
    finally:
        s.index.weights = old
    return [int(i) for i in np.argsort(-fused, kind="stable")]


def routed(s: Scored, per_session: int = 2, keep: int = 0) -> list[int]:
    """Only for a question the rules call multi-evidence (aggregation or sub-queries): sentence
    vectors (mean), then sub-queries with shares or ``per_session`` turns per session first;
    any other question keeps the engine's ranking."""
    subs = subqueries(s.query, s.speakers)
    if not subs and not is_aggregation(s.query):
        return list(s.order)
    base = with_fused(s, sentence_fused(s, "mean"))
    if subs:
        rankings = [base.order] + [np.argsort(-sentence_fused(s.sub(q), "mean"), kind="stable") for q in subs]
        return merge(rankings, [3] * len(rankings), base.order)
    return gather(base, per_session=per_session, keep=keep)


_HEAD = re.compile(rf"\b(?:what|which)\s+(?:\S+\s+){{0,2}}?({_PLURAL})\b|\bhow many\s+({_PLURAL})\b", re.IGNORECASE)
_VOCAB: dict[int, tuple[list[str], np.ndarray]] = {}  # id(index) -> (vocabulary, vectors)


def category_terms(s: Scored, top: int = 15, floor: float = 0.45) -> dict[str, float]:
    """Words of the history that embed close to the question's category noun ("activities",
    "cities", "books"): instances a turn would name instead ("swimming", "Porto", "thriller").
    The vocabulary is the index's own analysed terms; weight = cosine. Empty without a noun."""
    m = _HEAD.search(s.query)
    if not m or s.index.embedder is None:
        return {}
    noun = (m.group(1) or m.group(2)).lower()
    key = id(s.index)
    if key not in _VOCAB:
        corpus = s.index._corpus  # prototype only: the analysed terms of every turn
        vocab = sorted({t for terms in corpus.terms for t in terms if t.isalpha() and len(t) > 2})
        emb = SENTENCE_EMBEDDER[0] if SENTENCE_EMBEDDER else s.index.embedder
        _VOCAB[key] = (vocab, np.asarray(emb.embed_batch(vocab), dtype=np.float32))
    vocab, vec = _VOCAB[key]
    emb = SENTENCE_EMBEDDER[0] if SENTENCE_EMBEDDER else s.index.embedder
    q = np.asarray(emb.embed_batch([noun]), dtype=np.float32)[0]
    cos = vec @ q
    asked = set(analyze(s.query))
    out = {}
    for i in np.argsort(-cos)[: top + len(asked)]:
        if cos[i] >= floor and vocab[i] not in asked:
            out[vocab[i]] = float(cos[i])
        if len(out) >= top:
            break
    return out


def expand_category(s: Scored, weight: float = 0.5, gather_after: bool = True) -> list[int]:
    """For an aggregation question: the lexical signals scored again with :func:`category_terms`
    added (each at ``weight`` × its cosine), then (``gather_after``) routed as
    "keep 5, then one per session"."""
    if not is_aggregation(s.query):
        return list(s.order)
    extra = category_terms(s)
    if not extra:
        return routed(s, 1, keep=5) if gather_after else list(s.order)
    terms = analyze(s.index.query_facts(s.query, s.now).without_relative_words(s.query))
    lex = s.index._lexical(
        terms + list(extra), {**dict.fromkeys(terms, 1.0), **{t: weight * c for t, c in extra.items()}}
    )
    sig = {**s.sig, **{k: v for k, v in lex.items() if k in s.sig}}
    fused, _ = s.index.fuse(sig)
    s2 = with_fused(s, fused)
    return routed(s2, 1, keep=5) if gather_after else list(s2.order)


RULES: Mapping[str, Callable[[Scored], list[int]]] = {
    "engine (default weights)": lambda s: list(s.order),
    "decompose (share 3)": decompose,
    "gather (agg: 1/session, floor .5)": gather,
    "gather (agg: 1/session, no floor)": lambda s: gather(s, floor=0.0),
    "event boost + gather (agg)": event_gather,
    "gather (every question)": gather_all,
    "cluster cap 3 (every question)": lambda s: cluster_cap(s, 3),
    "explain-away (window, half)": lambda s: explain_away(s, alpha=0.5),
    "cover-terms (gain 1)": lambda s: cover_terms(s, 1.0),
    "vector feedback (3 docs, .5)": vector_feedback,
    "declarative rewrite (mean vector)": rewrite_vector,
    "sentence vectors (max)": sentence_vectors,
    "sentence vectors (mean)": lambda s: sentence_vectors(s, "mean"),
    "sentence vectors (mean) + gather (agg)": _sentence_gather,
    "event dates at write time (boost .5)": event_dates,
    "event dates at write time (boost 1)": lambda s: event_dates(s, 1.0),
    "combo: sentences + decompose + gather": combo,
    "gather (agg: 2/session, floor .5)": lambda s: gather(s, per_session=2),
    "sentence vectors (mean) + gather (agg: 2/session)": lambda s: gather(
        with_fused(s, sentence_fused(s, "mean")), per_session=2
    ),
    "routed: multi-evidence only, 1/session": lambda s: routed(s, 1),
    "routed: multi-evidence only, 2/session": routed,
    "lexical feedback (3 docs, 10 terms, .3)": feedback,
    "gather (agg: keep 3, then 1/session)": lambda s: gather(s, keep=3),
    "routed: keep 3, then 1/session": lambda s: routed(s, 1, keep=3),
    "routed: keep 5, then 1/session": lambda s: routed(s, 1, keep=5),
    "routed: keep 3, then 2/session": lambda s: routed(s, 2, keep=3),
    "gather (agg: keep 5, then 1/session; no sentence vectors)": lambda s: gather(s, keep=5),
    "recommended: event dates .5 + routed keep 5": lambda s: routed(with_fused(s, event_fused(s)), 1, keep=5),
    "category expansion (agg)": lambda s: expand_category(s, gather_after=False),
    "category expansion (agg) + routed keep 5": expand_category,
}
"""Rules measured by :mod:`benchmarks.locomo.multievidence` (name -> ranking function)."""
