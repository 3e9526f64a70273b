"""Prototype re-rankers for questions that need several evidence turns (issue 30): the core.

Everything here runs *outside* the library, on the public
:meth:`stratamem.retrieve.HybridIndex.signals` / :meth:`~stratamem.retrieve.HybridIndex.fuse`
output, so the engineer who builds issue 30 into ``retrieve/`` can see which
rule pays before writing it. A rule takes the question's :class:`Scored`
state and returns a ranking (turn positions, best first); nothing calls a
language model. This module holds the state, the question-shape detectors
and the rules that only *reorder* the engine's ranking; rules that add or
replace a signal are in :mod:`benchmarks.locomo.rerank_signals`, and the
measured list is :data:`benchmarks.locomo.rerank_signals.RULES`.

* :func:`decompose` — the question split into sub-queries ("between X and Y",
  "X and Y", "both", lists, "A or B", "before/after X"); each sub-query is scored
  on its own and guaranteed a share of the top of the ranking (round-robin merge).
* :func:`gather` — for aggregation questions ("how many …", "what … has X
  done", "which cities …"), the best turn of each session first, so ten
  places hold ten mentions rather than one mention and its neighbours.
* :func:`explain_away`, :func:`cluster_cap`, :func:`cover_terms` — diversity
  rules, measured to show what diversifying costs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from stratamem.retrieve import HybridIndex, analyze

__all__ = [
    "Scored",
    "cluster_cap",
    "cover_terms",
    "decompose",
    "explain_away",
    "gather",
    "gather_all",
    "is_aggregation",
    "merge",
    "score",
    "subqueries",
    "with_fused",
]

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


def score(index: HybridIndex, query: str, now: datetime | None, session: np.ndarray, speakers: Sequence[str]) -> Scored:
    """Signals, fused scores and ranking of ``query`` (the engine's own, via public methods)."""
    sig, _ = index.signals(query, weighted_only=True, now=now)
    fused, parts = index.fuse(sig)
    order = np.argsort(-fused, kind="stable")
    return Scored(query, now, index, fused, parts, order, session, speakers, sig=sig)


# --- question shapes ----------------------------------------------------------------------

_PLURAL = r"(?!\w*(?:ss|us|is)\b)[a-z][\w+-]*s"  # a plural head noun ("books", "LGBTQ+ events"), not "class"
_EPISODE = re.compile(
    r"\b(during|at the|after|before|when|while|on (?:the )?\w+day|last|recently|yesterday|ago|"
    r"in (?:january|february|march|april|may|june|july|august|september|october|november|december)"
    r"|in \d{4}|for (?:the|her|his|their) \w+)\b",
    re.IGNORECASE,
)
_AGG_ALWAYS = re.compile(
    r"\bhow many times\b|\bhow (many|much)\b[^?]*\b(in total|total|altogether|so far|all together)\b"
    r"|\bhow many (?!days|weeks|months|years|hours|minutes)\w+ (have|has|did|do|does)\b"
    r"|\bwhat (are|were) (all|some)\b|\ball the\b|\blist\b|\bin what ways\b"
    rf"|\b(what|which) (?:\S+ ){{0,2}}{_PLURAL} (has|have)\b|\bwhere (has|have)\b|\bwho (has|have)\b",
    re.IGNORECASE,
)
_AGG_HABIT = re.compile(rf"\b(what|which) (?:\S+ ){{0,2}}{_PLURAL} (does|do|did)\b|\bwhat do \S+ like\b", re.IGNORECASE)


def is_aggregation(query: str) -> bool:
    """A question whose answer collects several mentions: counts ("how many times", "how many books
    have I"), sums ("in total"), lists ("what books has Melanie read?", "where has she camped?"), and
    "what <plural> does/did X …" when no single episode is named ("during the party", "last week")."""
    if re.search(r"\b(kind|type|sort)s? of\b", query, re.IGNORECASE) and not re.search(r"\b(has|have)\b", query):
        return False
    return bool(_AGG_ALWAYS.search(query) or (_AGG_HABIT.search(query) and not _EPISODE.search(query)))


_BETWEEN = re.compile(r"\bbetween (.+?) and (.+?)(?:[?.!,]|$)", re.IGNORECASE)
_ANCHOR = re.compile(r"\b(before|after|since|until) ((?:my|our|i|we|the|he|she|they|\w+'s)\b[^?.!,;]*)", re.IGNORECASE)
_LIST = re.compile(r"([\w' -]+?),\s*([\w' -]+?),?\s+(?:and|or)\s+([\w' -]+)", re.IGNORECASE)
_CHOICE = re.compile(r"(?:-|,|:)\s*(?:the\s+)?([\w' -]{2,40}?)\s+or\s+(?:the\s+)?([\w' -]{2,40}?)\s*\?\s*$")
_PAIR = re.compile(
    r"\b([A-Z][\w'-]*|my [\w'-]+(?: [\w'-]+)?|the [\w'-]+(?: [\w'-]+)?) (?:and|&) "
    r"([A-Z][\w'-]*|my [\w'-]+(?: [\w'-]+)?|the [\w'-]+(?: [\w'-]+)?)\b"
)


def subqueries(query: str, speakers: Sequence[str] = ()) -> list[str]:
    """Sub-queries a question is made of (empty: nothing to split).

    * "between X and Y" -> X, Y;
    * "X and Y" (two names, or two short noun phrases "my A and the B") -> the question with
      each in place of the pair ("What do Jon and Gina both like?" -> "What do Jon like?", …);
    * "A, B and C" -> A, B, C;
    * "Which did X first - A or B?" -> the question with A, with B;
    * "before/after/since X" -> X (the anchor event is looked for on its own).
    """
    out: list[str] = []
    m = _BETWEEN.search(query)
    c = _CHOICE.search(query)
    if m:
        a, b = m.group(1).split(), m.group(2).split()
        if len(b) <= 2 < len(a):  # "between Andrew adopting Toby and Buddy": Buddy is adopted too
            b = a[: -len(b)] + b
        out += [" ".join(a), " ".join(b)]
    elif c:
        stem_ = query[: c.start()].strip()
        out += [f"{stem_} {c.group(1)}", f"{stem_} {c.group(2)}"]
    else:
        p = _PAIR.search(query)
        if p:
            for one in (p.group(1), p.group(2)):
                out.append(re.sub(r"\bboth\b ?", "", query[: p.start()] + one + query[p.end() :]))
        else:
            lst = _LIST.search(query)
            if lst and all(len(g.split()) <= 4 for g in lst.groups()):
                out += list(lst.groups())
    for a in _ANCHOR.finditer(query):
        if len(a.group(2).split()) <= 8:
            out.append(a.group(2))
    return [s.strip() for s in dict.fromkeys(out) if analyze(s)]


# --- rules ----------------------------------------------------------------------------------


def merge(rankings: Sequence[Sequence[int]], shares: Sequence[int], rest: Sequence[int]) -> list[int]:
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
    return merge(rankings, [share] * len(rankings), s.order)


def gather(s: Scored, per_session: int = 1, floor: float = 0.5, head: int = 10, keep: int = 0) -> list[int]:
    """For an aggregation question: the best ``per_session`` turns of each session first.

    The engine's first ``keep`` turns stay where they are (and count for their sessions);
    after them only turns scoring at least ``floor`` of the best take part (a session with
    nothing on the topic gets no place) until ``head`` places are filled, then the
    engine's order resumes. Other questions: unchanged.
    """
    if not is_aggregation(s.query):
        return list(s.order)
    top = float(s.fused[s.order[0]]) if len(s.order) else 0.0
    taken: dict[int, int] = {}
    first: list[int] = []
    for i in s.order[:keep]:
        first.append(int(i))
        taken[int(s.session[i])] = taken.get(int(s.session[i]), 0) + 1
    for i in s.order[keep:]:
        if s.fused[i] < floor * top or len(first) >= head:
            break
        sess = int(s.session[i])
        if taken.get(sess, 0) < per_session:
            taken[sess] = taken.get(sess, 0) + 1
            first.append(int(i))
    chosen = set(first)
    return first + [int(i) for i in s.order if int(i) not in chosen]


def explain_away(
    s: Scored, alpha: float = 1.0, window: int | None = None, depth: int = 60, session_share: float = 1.0
) -> list[int]:
    """Greedy re-rank of the top ``depth``: once a turn is taken, the credit its neighbours
    borrowed through the window/neighbour signals is discounted by ``alpha`` (and the
    session signal of its session by ``session_share``)."""
    w = window if window is not None else s.index.weights.window
    cand = [int(i) for i in s.order[:depth]]
    score_ = {i: float(s.fused[i]) for i in cand}
    borrowed = {
        i: sum(float(s.parts[n][i]) for n in _BORROWED if n in s.parts and n != "lexical_session") for i in cand
    }
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
        best = max(
            left,
            key=lambda i: (float(s.fused[i]) + gain * sum(idf[t] for t in has[i] - covered) / total, -cand.index(i)),
        )
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
    return placed + list(held) + [int(i) for i in s.order if int(i) not in chosen and int(i) not in held]


def with_fused(s: Scored, fused: np.ndarray) -> Scored:
    """``s`` re-ranked by ``fused`` (sub-query cache shared)."""
    return Scored(
        s.query,
        s.now,
        s.index,
        fused,
        s.parts,
        np.argsort(-fused, kind="stable"),
        s.session,
        s.speakers,
        s.cache,
        s.sig,
    )


def gather_all(s: Scored) -> list[int]:
    """One turn per session first for *every* question (to see what session diversity costs elsewhere)."""
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
