"""Prototype re-rankers for questions that need several evidence turns (issue 30).

Everything here runs *outside* the library, on the public
:meth:`stratamem.retrieve.HybridIndex.signals` / :meth:`~stratamem.retrieve.HybridIndex.fuse`
output, so the engineer who builds issue 30 into ``retrieve/`` can see which
rule pays before writing it. Each rule takes the question's :class:`Scored`
state and returns a ranking (turn positions, best first); nothing calls a
language model.

Rules:

* :func:`decompose` — the question split into sub-queries ("between X and Y",
  "X and Y", "both", lists, "before/after X"); each sub-query is scored on its
  own and guaranteed a share of the top of the ranking (round-robin merge).
* :func:`gather` — for aggregation questions ("how many …", "what … has X
  done", "which cities …"), the best turn of each session first, so ten
  places hold ten mentions rather than one mention and its neighbours.
* :func:`explain_away` — greedy: once a turn is taken, its neighbours lose the
  window/neighbour credit that turn lent them (their own words and vector
  stay), so one strong match cannot fill the top with its neighbourhood.
* :func:`cover_terms` — greedy: a turn gains for query words no turn above it
  holds (aspect coverage over the question's own content words).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from stratamem.retrieve import HybridIndex, analyze

__all__ = ["RULES", "Scored", "cover_terms", "decompose", "explain_away", "gather", "is_aggregation",
           "score", "subqueries"]

# Signals a turn gets from its neighbours (not from its own words or vector).
_BORROWED = ("lexical_window", "vector_window", "lexical_prev", "lexical_next", "lexical_session")


@dataclass(slots=True)
class Scored:
    """One question scored by the engine: what every rule starts from."""

    query: str
    now: datetime | None
    index: HybridIndex
    fused: np.ndarray
    """Fused score per turn position."""
    parts: dict[str, np.ndarray]
    """Weighted contribution of each signal per turn position."""
    order: np.ndarray
    """Positions by descending fused score (the engine's ranking)."""
    session: np.ndarray
    """Session number of each position."""
    speakers: Sequence[str]
    """Speaker names the index knows."""
    cache: dict[str, Scored] = field(default_factory=dict)
    """Sub-query states, by sub-query text."""
    sig: dict[str, np.ndarray] = field(default_factory=dict)
    """The raw signals (before weighting)."""

    def sub(self, text: str) -> Scored:
        """The same index scored for ``text`` (cached)."""
        if text not in self.cache:
            self.cache[text] = score(self.index, text, self.now, self.session, self.speakers)
        return self.cache[text]


def score(index: HybridIndex, query: str, now: datetime | None, session: np.ndarray,
          speakers: Sequence[str]) -> Scored:
    """Signals, fused scores and ranking of ``query`` (the engine's own, via public methods)."""
    sig, _ = index.signals(query, weighted_only=True, now=now)
    fused, parts = index.fuse(sig)
    order = np.argsort(-fused, kind="stable")
    return Scored(query, now, index, fused, parts, order, session, speakers, sig=sig)


# --- question shapes ----------------------------------------------------------------------

_AGG = re.compile(
    r"\bhow (many|much)\b|\bwhat (are|were) (all|some|the)\b|\ball the\b|\blist\b|\bin total\b|\btotal\b"
    r"|\b(what|which) (\S+ ){0,2}(\w+s)\b (has|have|did|does|do)\b"
    r"|\b(what|which) (kinds?|types?|sorts?) of\b|\bwhat (\w+ )?(activities|things|events|books|places|ways)\b"
    r"|\bwhere has\b|\bwho (has|have)\b|\bin what ways\b",
    re.IGNORECASE)


def is_aggregation(query: str) -> bool:
    """A question whose answer collects several mentions: counts, sums, lists, "what X has Y done"."""
    return bool(_AGG.search(query))


_BETWEEN = re.compile(r"\bbetween (.+?) and (.+?)(?:[?.!,]|$)", re.IGNORECASE)
_ANCHOR = re.compile(r"\b(before|after|since|until) ((?:my|our|i|we|the|he|she|they|\w+'s)\b[^?.!,;]*)",
                     re.IGNORECASE)
_LIST = re.compile(r"([\w' -]+?),\s*([\w' -]+?),?\s+(?:and|or)\s+([\w' -]+)", re.IGNORECASE)
_PAIR = re.compile(r"\b([A-Z][\w'-]*|my [\w'-]+(?: [\w'-]+)?|the [\w'-]+(?: [\w'-]+)?) (?:and|&) "
                   r"([A-Z][\w'-]*|my [\w'-]+(?: [\w'-]+)?|the [\w'-]+(?: [\w'-]+)?)\b")


def subqueries(query: str, speakers: Sequence[str] = ()) -> list[str]:
    """Sub-queries a question is made of (empty: nothing to split).

    * "between X and Y" -> X, Y;
    * "X and Y" (two names, or two short noun phrases "my A and the B") -> the question with
      each in place of the pair ("What do Jon and Gina both like?" -> "What do Jon like?", …);
    * "A, B and C" -> A, B, C;
    * "before/after/since X" -> X (the anchor event is looked for on its own).
    """
    out: list[str] = []
    m = _BETWEEN.search(query)
    if m:
        out += [m.group(1), m.group(2)]
    else:
        p = _PAIR.search(query)
        if p:
            for one in (p.group(1), p.group(2)):
                out.append(re.sub(r"\bboth\b ?", "", query[:p.start()] + one + query[p.end():]))
        else:
            lst = _LIST.search(query)
            if lst and all(len(g.split()) <= 4 for g in lst.groups()):
                out += list(lst.groups())
    for a in _ANCHOR.finditer(query):
        if len(a.group(2).split()) <= 8:
            out.append(a.group(2))
    return [s.strip() for s in dict.fromkeys(out) if analyze(s)]


# --- rules ----------------------------------------------------------------------------------

def _merge(rankings: Sequence[Sequence[int]], shares: Sequence[int], rest: Sequence[int]) -> list[int]:
    """Round-robin: ranking ``i`` places its next turn until it has placed ``shares[i]``; then ``rest``."""
    out: list[int] = []
    seen: set[int] = set()
    at = [0] * len(rankings)
    placed = [0] * len(rankings)
    while any(p < s for p, s in zip(placed, shares, strict=True)):
        moved = False
        for i, r in enumerate(rankings):
            if placed[i] >= shares[i]:
                continue
            while at[i] < len(r) and r[at[i]] in seen:
                at[i] += 1
            if at[i] < len(r):
                out.append(int(r[at[i]]))
                seen.add(int(r[at[i]]))
                placed[i] += 1
                moved = True
        if not moved:
            break
    out += [int(i) for i in rest if int(i) not in seen]
    return out


def decompose(s: Scored, share: int = 3) -> list[int]:
    """The engine's ranking with each sub-query's best ``share`` turns guaranteed a place near the top.

    The full question keeps the first place and ``share`` places too; with no sub-queries
    the ranking is the engine's.
    """
    subs = subqueries(s.query, s.speakers)
    if not subs:
        return list(s.order)
    rankings = [s.order] + [s.sub(q).order for q in subs]
    return _merge(rankings, [share] * len(rankings), s.order)


def gather(s: Scored, per_session: int = 1, floor: float = 0.5, head: int = 10) -> list[int]:
    """For an aggregation question: the best ``per_session`` turns of each session first.

    Only turns scoring at least ``floor`` of the best take part in the first pass (a
    session with nothing on the topic gets no place); the first ``head`` places are
    filled that way, then the engine's order resumes. Other questions: unchanged.
    """
    if not is_aggregation(s.query):
        return list(s.order)
    top = float(s.fused[s.order[0]]) if len(s.order) else 0.0
    taken: dict[int, int] = {}
    first: list[int] = []
    for i in s.order:
        if s.fused[i] < floor * top or len(first) >= head:
            break
        sess = int(s.session[i])
        if taken.get(sess, 0) < per_session:
            taken[sess] = taken.get(sess, 0) + 1
            first.append(int(i))
    chosen = set(first)
    return first + [int(i) for i in s.order if int(i) not in chosen]


def explain_away(s: Scored, alpha: float = 1.0, window: int | None = None, depth: int = 60,
                 session_share: float = 1.0) -> list[int]:
    """Greedy re-rank of the top ``depth``: once a turn is taken, the credit its neighbours
    borrowed through the window/neighbour signals is discounted by ``alpha`` (and the
    session signal of its session by ``session_share``)."""
    w = window if window is not None else s.index.weights.window
    cand = [int(i) for i in s.order[:depth]]
    score_ = {i: float(s.fused[i]) for i in cand}
    borrowed = {i: sum(float(s.parts[n][i]) for n in _BORROWED if n in s.parts and n != "lexical_session")
                for i in cand}
    sess_part = {i: float(s.parts["lexical_session"][i]) if "lexical_session" in s.parts else 0.0 for i in cand}
    out: list[int] = []
    hit_sessions: set[int] = set()
    near: set[int] = set()
    left = set(cand)
    while left:
        def adjusted(i: int) -> float:
            v = score_[i]
            if i in near:
                v -= alpha * borrowed[i]
            if int(s.session[i]) in hit_sessions:
                v -= session_share * sess_part[i]
            return v
        best = max(left, key=lambda i: (adjusted(i), -cand.index(i)))
        out.append(best)
        left.discard(best)
        hit_sessions.add(int(s.session[best]))
        for j in range(best - w, best + w + 1):
            if 0 <= j < len(s.session) and s.session[j] == s.session[best]:
                near.add(j)
    return out + [int(i) for i in s.order[depth:]]


def cover_terms(s: Scored, gain: float = 0.5, depth: int = 60) -> list[int]:
    """Greedy re-rank of the top ``depth``: a turn gains ``gain`` × the share (by IDF) of the
    question's content words it holds that no turn taken before it holds."""
    terms = list(dict.fromkeys(analyze(s.query)))
    corpus = s.index._corpus  # prototype only: the per-turn analysed terms and IDF
    idf = {t: corpus.bm25.idf(t) for t in terms}
    total = sum(idf.values()) or 1.0
    cand = [int(i) for i in s.order[:depth]]
    has = {i: set(corpus.terms[i]) & set(terms) for i in cand}
    covered: set[str] = set()
    out: list[int] = []
    left = set(cand)
    while left:
        best = max(left, key=lambda i: (float(s.fused[i]) + gain * sum(idf[t] for t in has[i] - covered) / total,
                                        -cand.index(i)))
        out.append(best)
        left.discard(best)
        covered |= has[best]
    return out + [int(i) for i in s.order[depth:]]


def cluster_cap(s: Scored, cap: int = 2, head: int = 10) -> list[int]:
    """The first ``head`` places hold at most ``cap`` turns of one neighbourhood (same session,
    within the window of a placed turn); the turns held back follow, in the engine's order."""
    w = s.index.weights.window
    placed: list[int] = []
    held: list[int] = []
    for i in s.order:
        i = int(i)
        if len(placed) >= head:
            break
        near = sum(1 for j in placed if s.session[j] == s.session[i] and abs(j - i) <= w)
        (held if near >= cap else placed).append(i)
    chosen = set(placed)
    return placed + [i for i in held] + [int(i) for i in s.order if int(i) not in chosen and int(i) not in held]


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
    re.IGNORECASE)


def is_event(text: str) -> bool:
    """A first-person statement that something happened ("I went camping last week")."""
    return bool(_FIRST_PERSON.search(text) and _EVENT_CUE.search(text))


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


def _combo(s: Scored) -> list[int]:
    """decompose, then gather for aggregation questions, over the explained-away ranking."""
    base = explain_away(s)
    subs = subqueries(s.query, s.speakers)
    if subs:
        return _merge([base] + [explain_away(s.sub(q)) for q in subs], [3] * (1 + len(subs)), base)
    if is_aggregation(s.query):
        s2 = Scored(s.query, s.now, s.index, s.fused, s.parts, np.asarray(base), s.session, s.speakers, s.cache)
        return gather(s2)
    return base


RULES: Mapping[str, Callable[[Scored], list[int]]] = {
    "engine (default weights)": lambda s: list(s.order),
    "decompose (share 3)": decompose,
    "decompose (share 2)": lambda s: decompose(s, 2),
    "gather (1/session, floor .5)": gather,
    "gather (1/session, floor .3)": lambda s: gather(s, floor=0.3),
    "gather (2/session, floor .5)": lambda s: gather(s, per_session=2),
    "gather (any question)": lambda s: _gather_all(s),
    "gather (1/session, no floor)": lambda s: gather(s, floor=0.0),
    "cluster cap 2 (all questions)": cluster_cap,
    "cluster cap 3 (all questions)": lambda s: cluster_cap(s, 3),
    "vector feedback (3 docs, .5)": vector_feedback,
    "event boost + gather (agg only)": event_gather,
    "explain-away (window)": explain_away,
    "explain-away (window, half)": lambda s: explain_away(s, alpha=0.5),
    "cover-terms (gain .5)": cover_terms,
    "cover-terms (gain 1)": lambda s: cover_terms(s, 1.0),
    "combo: explain-away+decompose+gather": _combo,
}
"""Rules measured by :mod:`benchmarks.locomo.multievidence` (name -> ranking function)."""


def _gather_all(s: Scored) -> list[int]:
    """:func:`gather` applied to every question (to see what session diversity costs elsewhere)."""
    top = float(s.fused[s.order[0]]) if len(s.order) else 0.0
    taken: set[int] = set()
    first: list[int] = []
    for i in s.order:
        if s.fused[i] < 0.5 * top or len(first) >= 10:
            break
        if int(s.session[i]) not in taken:
            taken.add(int(s.session[i]))
            first.append(int(i))
    chosen = set(first)
    return first + [int(i) for i in s.order if int(i) not in chosen]


def describe_rules() -> dict[str, Any]:
    """Rule name -> first docstring line (for the report)."""
    return {n: (f.__doc__ or "").strip().splitlines()[0] if f.__doc__ else "" for n, f in RULES.items()}
