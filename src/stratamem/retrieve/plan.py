"""Query plans: what a question that needs several turns is made of, and how its hits are placed (issue 30).

Most questions are answered by one turn, and the fused ranking of
:class:`~stratamem.retrieve.engine.HybridIndex` finds it. A question whose
answer needs several turns has a shape the rules of :func:`plan_query`
recognise, and the shape says how the hits are placed:

* ``aggregate`` — counts, sums and lists over the history ("how many books
  have I finished?", "what is the total I've paid for …", "which cities did I
  travel to for business?", "what activities does Melanie do?"): the
  engine's first :attr:`PlanSettings.keep` turns stay, then the best turn of
  each session not yet placed (:func:`gather`), so ten places hold ten
  mentions rather than one mention and its neighbours;
* ``between`` — "how many days between X and Y", "between X and Y": X and Y are
  searched for on their own;
* ``choice`` — "which came first, A or B?": the question with A, and with B;
* ``pair`` — "X and Y" (two names or two short noun phrases, "both"): the question once per side;
* ``list`` — "A, B and C": A, B and C;
* ``anchor`` — "how many days after X did I Y", "before X": X (and Y) on their own.

Every shape but ``aggregate`` has sub-queries: each is scored on its own and
the rankings are interleaved (:func:`merge`), so each sub-query's best turns
hold places at the top — and so a share of any budget the ranking is packed
into. Nothing here calls a model: an optional model-made plan comes from
:mod:`stratamem.retrieve.rewrite`. The constants are chosen by joint
leave-one-conversation-out cross-validation (``benchmarks/locomo/plan_cv.py``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import ValidationError
from .lexical import analyze

__all__ = ["SHAPES", "PlanSettings", "QueryPlan", "gather", "is_aggregation", "merge", "plan_query", "subqueries"]

SHAPES = ("single", "aggregate", "between", "choice", "pair", "list", "anchor")
"""Question shapes a plan may name (``single``: answered by one turn, no plan)."""

MAX_SUBQUERIES = 4
"""Most sub-queries a plan carries (each costs one more scoring pass)."""


@dataclass(frozen=True, slots=True)
class QueryPlan:
    """How one question is searched: its shape and the sub-queries it is made of."""

    shape: str = "single"
    """One of :data:`SHAPES`."""
    subqueries: tuple[str, ...] = ()
    """Parts searched on their own (shapes other than ``single`` and ``aggregate``)."""
    source: str = "rules"
    """``rules`` (:func:`plan_query`) or ``model`` (:class:`~stratamem.retrieve.rewrite.ModelRewriter`)."""
    note: str | None = None
    """Why the plan is not the one asked for (a model rewriter failed and the rules planned), if so."""

    def __post_init__(self) -> None:
        if self.shape not in SHAPES:
            raise ValidationError(f"plan shape must be one of {SHAPES}, got {self.shape!r}")
        if not isinstance(self.subqueries, tuple) or not all(isinstance(q, str) and q.strip() for q in self.subqueries):
            raise ValidationError("plan subqueries must be a tuple of non-empty strings")
        if len(self.subqueries) > MAX_SUBQUERIES:
            raise ValidationError(f"a plan has at most {MAX_SUBQUERIES} subqueries, got {len(self.subqueries)}")
        if self.shape in ("single", "aggregate") and self.subqueries:
            raise ValidationError(f"a {self.shape!r} plan has no subqueries")
        if self.shape not in ("single", "aggregate") and not self.subqueries:
            raise ValidationError(f"a {self.shape!r} plan needs subqueries")

    @property
    def multi(self) -> bool:
        """Whether the question needs several turns (any shape but ``single``)."""
        return self.shape != "single"

    def describe(self) -> str:
        """One line for manifest notes: ``aggregate (rules): one turn per session after the first 5``."""
        if self.shape == "aggregate":
            how = "one turn per session after the engine's first ones"
        elif self.subqueries:
            how = "sub-queries " + "; ".join(repr(q) for q in self.subqueries)
        else:
            how = "one ranking"
        return f"{self.shape} ({self.source}): {how}" + (f" — {self.note}" if self.note else "")


@dataclass(frozen=True, slots=True)
class PlanSettings:
    """How a plan places hits. From the grid of joint leave-one-conversation-out cross-validation
    over LoCoMo and the assistant-chat set (``benchmarks/locomo/plan_cv.py``, docs/retrieval.md):
    8 of 10 folds chose keep 3 and mix 1, which cost LoCoMo 0.003 r@10 overall; keep 5 and mix 0.5
    is the nearest setting that leaves LoCoMo's r@10 and all@10 no lower than planning off."""

    enabled: bool = True
    """Plan questions at all (off: every question is ranked by its fused score alone)."""
    keep: int = 5
    """``aggregate``: the engine's first turns that keep their places before gathering."""
    per_session: int = 1
    """``aggregate``: turns of one session placed while gathering."""
    floor: float = 0.3
    """``aggregate``: a gathered turn scores at least this share of the best turn's score."""
    head: int = 10
    """``aggregate``: places filled by keeping and gathering; the fused order resumes after them."""
    interleave: bool = False
    """``aggregate``: gathered turns alternate with the fused order's next ones within ``head``
    (a list answered in one session keeps more of its places)."""
    share: int = 4
    """Sub-query shapes: places each sub-query (and the whole question) holds at the top (0: the
    sub-queries place nothing)."""
    sentence_mix: float = 0.5
    """For a planned question: the turn-vector signal becomes ``(1 - mix) × turn cosine + mix ×
    best cosine over the turn and its sentences`` (:mod:`stratamem.retrieve.sentences`); 0: turn only."""

    def __post_init__(self) -> None:
        for name in ("keep", "per_session", "head", "share"):
            value = getattr(self, name)
            least = 0 if name in ("keep", "share") else 1
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValidationError(f"plan setting {name} must be an integer of at least {least}, got {value!r}")
        for name in ("floor", "sentence_mix"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
                raise ValidationError(f"plan setting {name} must be between 0 and 1, got {value!r}")


# --- shapes -----------------------------------------------------------------------------------

# A plural head noun ("books", "LGBTQ+ events", "artists/bands", "people"), not "class".
_PLURAL = r"(?:(?!\w*(?:ss|us|is)\b)[a-z][\w+/-]*s|people|children|men|women)"
_OWNER = r"(?:[\w-]+'s?|my|our|his|her|their|your)"  # "Joanna's", "Audrey's dogs'", "my"
# Questions about one episode ("during the party", "last week") are answered by one turn.
_EPISODE = re.compile(
    r"\b(during|at the|after|before|when|while|on (?:the )?\w+day|last|recently|yesterday|ago|"
    r"in (?:january|february|march|april|may|june|july|august|september|october|november|december)"
    r"|for (?:the|her|his|their) \w+)\b",
    re.IGNORECASE,
)
_AGG_ALWAYS = re.compile(
    r"\bhow many times\b|\bhow (many|much)\b[^?]*\b(in total|total|altogether|so far|all together)\b"
    r"|\bwhat(?:'s| is| was) the total\b"
    r"|\bhow many (?!days|weeks|months|years|hours|minutes)\w+ (have|has|did|do|does)\b"
    r"|\bwhat (are|were) (all|some)\b|\ball the\b|\blist\b|\bin what ways\b"
    rf"|\b(what|which) (?:\S+ ){{0,2}}{_PLURAL} (has|have)\b|\bwhere (has|have)\b|\bwho (has|have)\b",
    re.IGNORECASE,
)
_AGG_HABIT = re.compile(
    rf"\b(what|which) (?:\S+ ){{0,2}}{_PLURAL} (does|do|did)\b|\bwhat do \S+ like\b"
    # "What are Joanna's hobbies?", "What are the names of John's children?": a plural the question asks for.
    rf"|\bwhat (?:are|were) (?:{_OWNER} (?:\S+ )?{_PLURAL}|the {_PLURAL} of {_OWNER})(?: |\?|$)"
    # "What does Calvin do to relax?": a habit, told in many sessions.
    r"|\bwhat (?:does|do) \S+ do (?:to|when)\b",
    re.IGNORECASE,
)
# Present perfect over a person's history: "What has Melanie painted?", "What kind of classes has
# James joined?", "How many car shows has Dave attended?" — every occasion so far counts.
_AGG_PERFECT = re.compile(
    # Case matters for the name only: (?i:...) around the words.
    r"\b(?i:what (?:has|have)) [A-Z][\w'-]* (?!been\b)(?:\w+ )?\w+(?:ed|en|ne|wn|ht)\b"
    rf"|\b(?i:(?:kind|type|sort)s? of (?:\S+ )?{_PLURAL} (?:has|have)) [A-Z][\w'-]* (?!been\b)"
    rf"|\b(?i:how many (?:\S+ ){{1,2}}{_PLURAL} (?:has|have))\b"
    # "What types of yoga has Maria practiced?": several kinds asked for.
    r"|\b(?i:(?:kinds|types|sorts) of)\b",
)
_KIND_OF = re.compile(r"\b(kind|type|sort)s? of\b", re.IGNORECASE)


def is_aggregation(query: str) -> bool:
    """A question whose answer collects several mentions: counts ("how many times", "how many books
    have I"), sums ("in total", "what is the total"), lists ("what books has Melanie read?", "where
    has she camped?", "what are Joanna's hobbies?", "what has Melanie painted?", "what types of yoga
    has Maria practiced?"), and "what <plural> does/did X …" or "what does X do to …" when no single
    episode is named. A singular "what kind of music does she like?" and the progressive "what has
    she been doing …" are one answer."""
    if _AGG_PERFECT.search(query):
        return True
    if _KIND_OF.search(query):
        return False  # "what kind of music does she like?", "what kind of flowers does he have?": one answer
    return bool(_AGG_ALWAYS.search(query) or (_AGG_HABIT.search(query) and not _EPISODE.search(query)))


_AUX = r"(?:did|do|does|was|were|is|are|have|has|had|will|would|could|can)"
_BETWEEN = re.compile(r"\bbetween (.+?) and (.+?)(?:[?.!,]|$)", re.IGNORECASE)
_ANCHOR = re.compile(r"\b(before|after|since|until) ((?:my|our|i|we|the|he|she|they|\w+'s)\b[^?.!,;]*)", re.IGNORECASE)
_ANCHOR_REST = re.compile(rf"^(.*?)\s+{_AUX}\s+(.+)$", re.IGNORECASE)
_LIST = re.compile(r"([\w' -]+?),\s*([\w' -]+?),?\s+(?:and|or)\s+([\w' -]+)", re.IGNORECASE)
_CHOICE = re.compile(r"(?:-|,|:)\s*(?:the\s+)?([\w' -]{2,40}?)\s+or\s+(?:the\s+)?([\w' -]{2,40}?)\s*\?\s*$")
_PAIR = re.compile(
    r"\b([A-Z][\w'-]*|my [\w'-]+(?: [\w'-]+)?|the [\w'-]+(?: [\w'-]+)?) (?:and|&) "
    r"([A-Z][\w'-]*|my [\w'-]+(?: [\w'-]+)?|the [\w'-]+(?: [\w'-]+)?)\b"
)


def _anchor_parts(text: str) -> list[str]:
    """An anchor's event, and the other event when a question goes on ("after X did I Y")."""
    m = _ANCHOR_REST.match(text.strip())
    if not m:
        return [text]
    out = [m.group(1)]
    if len(analyze(m.group(2))) >= 2:
        out.append(m.group(2))
    return out


def subqueries(query: str) -> tuple[str, list[str]]:
    """The sub-query shape of a question and its parts (``("single", [])``: nothing to split).

    * "between X and Y" → X, Y (``between``);
    * "…, A or B?" → the question with A, with B (``choice``);
    * "X and Y" (two names, or two short noun phrases "my A and the B") → the question
      with each in place of the pair (``pair``);
    * "A, B and C" → A, B, C (``list``);
    * "before/after/since X" → X, and what the question goes on to ask (``anchor``).
    """
    out: list[str] = []
    shape = "single"
    m = _BETWEEN.search(query)
    c = _CHOICE.search(query)
    if m:
        a, b = m.group(1).split(), m.group(2).split()
        if len(b) <= 2 < len(a):  # "between Andrew adopting Toby and Buddy": Buddy is adopted too
            b = a[: -len(b)] + b
        out, shape = [" ".join(a), " ".join(b)], "between"
    elif c:
        stem = query[: c.start()].strip()
        out, shape = [f"{stem} {c.group(1)}", f"{stem} {c.group(2)}"], "choice"
    elif p := _PAIR.search(query):
        for one in (p.group(1), p.group(2)):
            out.append(re.sub(r"\bboth\b ?", "", query[: p.start()] + one + query[p.end() :]))
        shape = "pair"
    elif (lst := _LIST.search(query)) and all(len(g.split()) <= 4 for g in lst.groups()):
        out, shape = list(lst.groups()), "list"
    for a in _ANCHOR.finditer(query):
        if len(a.group(2).split()) <= 10:
            out += _anchor_parts(a.group(2))
            shape = "anchor" if shape == "single" else shape
    parts = [s.strip() for s in dict.fromkeys(out) if analyze(s)]
    return (shape, parts[:MAX_SUBQUERIES]) if parts else ("single", [])


def plan_query(query: str) -> QueryPlan:
    """The rule plan of ``query``: sub-queries when it has a compound shape, else ``aggregate`` or ``single``."""
    shape, parts = subqueries(query)
    if parts:
        return QueryPlan(shape, tuple(parts))
    return QueryPlan("aggregate" if is_aggregation(query) else "single")


# --- placing hits -----------------------------------------------------------------------------


def gather(
    order: np.ndarray, fused: np.ndarray, session: np.ndarray, settings: PlanSettings
) -> tuple[np.ndarray, frozenset[int]]:
    """An aggregation question's ranking: the first ``keep`` of ``order`` stay; then, among turns
    scoring at least ``floor`` × the best, the next best of each session until it holds
    ``per_session`` places, until ``head`` places are filled (with ``interleave``, gathered turns
    and the rest of ``order`` take turns at those places); then ``order`` resumes.

    Args:
        order: Turn positions by descending ``fused`` (the candidates: any prefix of the full order).
        fused: Fused score of every turn position.
        session: Session number of every turn position.
        settings: The constants.

    Returns:
        The ranking, and the positions that gathering placed.
    """
    if not len(order):
        return order, frozenset()
    keep, head = min(settings.keep, settings.head), settings.head
    top = float(fused[order[0]])
    first = [int(i) for i in order[:keep]]
    taken: dict[int, int] = {}
    for i in first:
        taken[int(session[i])] = taken.get(int(session[i]), 0) + 1
    picked: list[int] = []
    for i in order[keep:]:
        if len(picked) >= head - keep or fused[i] < settings.floor * top:
            break
        s = int(session[i])
        if taken.get(s, 0) < settings.per_session:
            taken[s] = taken.get(s, 0) + 1
            picked.append(int(i))
    chosen = set(picked)
    rest = [int(i) for i in order[keep:] if int(i) not in chosen]
    if not settings.interleave:
        return np.asarray(first + picked + rest, dtype=np.int64), frozenset(picked)
    placed: list[int] = []
    g = r = 0
    while len(first) + len(placed) < head and (g < len(picked) or r < len(rest)):
        if g < len(picked) and (len(placed) % 2 == 0 or r >= len(rest)):
            placed.append(picked[g])
            g += 1
        else:
            placed.append(rest[r])
            r += 1
    shown = set(placed)
    tail = [i for i in order[keep:] if int(i) not in shown]
    return np.asarray(first + placed + tail, dtype=np.int64), frozenset(picked[:g])


def merge(rankings: Sequence[np.ndarray], share: int) -> tuple[np.ndarray, np.ndarray]:
    """Round-robin over ``rankings`` (the whole question's first): each places its next turn not yet
    placed until it has placed ``share``; then the first ranking's order resumes.

    Returns:
        ``(positions, source)``: the merged ranking and, per place, the index of the ranking
        that placed it (0: the whole question).
    """
    out: list[int] = []
    src: list[int] = []
    seen: set[int] = set()
    at = [0] * len(rankings)
    for _ in range(share):
        for r, ranking in enumerate(rankings):
            while at[r] < len(ranking) and int(ranking[at[r]]) in seen:
                at[r] += 1
            if at[r] < len(ranking):
                out.append(int(ranking[at[r]]))
                src.append(r)
                seen.add(out[-1])
    rest = [int(i) for i in rankings[0] if int(i) not in seen]
    return np.asarray(out + rest, dtype=np.int64), np.asarray(src + [0] * len(rest), dtype=np.int64)
