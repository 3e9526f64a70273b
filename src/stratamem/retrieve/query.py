"""What a query says beyond its words: the people it names and the dates it mentions.

LoCoMo-style questions name a speaker ("What did Caroline research?") and
sometimes a time ("… in May 2023?", "… in 2022?"); questions asked at a
given moment name times relative to it ("two weeks ago", "last Saturday"),
which :mod:`stratamem.retrieve.timewords` resolves against ``now`` into date
windows. These facts become small boosts in :mod:`stratamem.retrieve.engine`;
they never filter, so a question about the other person still finds its turn.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from .timewords import DateWindow, EventAnchor, read_anchors, read_windows, utc

__all__ = ["QueryFacts", "read_query", "without_speakers"]

_MONTHS = {
    m: i
    for i, m in enumerate(
        "january february march april may june july august september october november december".split(), 1
    )
}
_MONTH_RE = re.compile(r"\b(" + "|".join(_MONTHS) + r")\b(?:\s*,?\s*(\d{4}))?", re.IGNORECASE)
_YEAR_RE = re.compile(r"\b(19\d\d|20\d\d)\b")
_CURRENT_RE = re.compile(
    r"\b(now|currently|current|these days|nowadays|at the moment|at present|right now|"
    r"most recent(ly)?|latest|anymore|still|up to date)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class QueryFacts:
    """Speakers and dates read from a query."""

    speakers: frozenset[str]
    """Known speaker names the query mentions."""
    dates: tuple[tuple[int | None, int | None], ...]
    """``(year, month)`` pairs the query mentions; either part may be ``None``."""
    windows: tuple[DateWindow, ...] = ()
    """Relative times ("two weeks ago") resolved against :attr:`now`."""
    anchors: tuple[EventAnchor, ...] = ()
    """Times named by an event ("before my trip"), still to be dated by the index."""
    now: datetime | None = None
    """The moment relative times were resolved against (``None``: not resolved)."""
    current: bool = False
    """The query asks about the present state of something ("now", "currently", "these
    days", "most recently", …): newer statements should win over older ones."""

    def without_relative_words(self, query: str) -> str:
        """``query`` without the words of its relative-time phrases ("two weeks ago", "last Saturday").

        Month phrases ("in March") and event anchors ("before my trip") are kept:
        turns that name the month or the event should still match.
        """
        for w in self.windows:
            words = w.phrase.split()
            if words[-1] not in _MONTHS and "before" not in words and "after" not in words:
                query = re.sub(re.escape(w.phrase), " ", query, flags=re.IGNORECASE)
        return query

    def window_match(self, when: datetime) -> float:
        """The best :meth:`DateWindow.score` of ``when`` over :attr:`windows` (0 without windows)."""
        return max((w.score(when) for w in self.windows), default=0.0)

    def date_match(self, when: datetime) -> float:
        """1.0 when ``when`` falls in a mentioned month (or year, if only a year is named), else 0."""
        for year, month in self.dates:
            if (year is None or year == when.year) and (month is None or month == when.month):
                return 1.0
        return 0.0


def _named(query: str, speakers: Iterable[str]) -> frozenset[str]:
    """The known speakers ``query`` names: a word of its own, or with a possessive ending."""
    words = set(re.findall(r"[\w']+", query))
    return frozenset(s for s in speakers if s in words or f"{s}'s" in words or f"{s}s'" in words)


def without_speakers(query: str, speakers: Iterable[str]) -> str:
    """``query`` without the known speaker names it mentions (as :func:`read_query` finds them:
    "Melanie", "Melanie's", "Joannas'"); ``query`` itself if nothing else would be left.

    What the query *vector* is embedded from (issue 30): every turn is embedded as
    ``Speaker: text``, so a name in the question pulls its vector towards turns that merely name
    or are spoken by that person, whatever they say; the person is already carried by the
    speaker boost, and without the name the vector scores what the question asks about.
    """
    out = query
    for name in _named(query, speakers):
        out = re.sub(rf"(?<![\w']){re.escape(name)}(?:'s|s')?(?![\w'])", " ", out)
    out = re.sub(r"\s+", " ", out).strip()
    return out if re.search(r"\w", out) and out != query.strip() else query


def read_query(query: str, speakers: Iterable[str] = (), now: datetime | None = None) -> QueryFacts:
    """Read the speakers (among ``speakers``) and dates a query names.

    "May" without a year is read as a month only when capitalised inside a
    sentence, since the modal verb is far more common. With ``now`` (naive:
    UTC), relative times become :attr:`QueryFacts.windows` and event-anchored
    ones :attr:`QueryFacts.anchors`.
    """
    named = _named(query, speakers)
    dates: list[tuple[int | None, int | None]] = []
    spans: list[tuple[int, int]] = []
    for m in _MONTH_RE.finditer(query):
        word = m.group(1)
        opens_sentence = m.start() == 0 or query[: m.start()].rstrip()[-1:] in ".?!"
        if word.lower() == "may" and (word != "May" or opens_sentence) and not m.group(2):
            continue
        dates.append((int(m.group(2)) if m.group(2) else None, _MONTHS[word.lower()]))
        spans.append(m.span())
    for m in _YEAR_RE.finditer(query):
        if not any(a <= m.start() < b for a, b in spans):
            dates.append((int(m.group(1)), None))
    current = bool(_CURRENT_RE.search(query))
    if now is None:
        return QueryFacts(named, tuple(dates), current=current)
    now = utc(now)
    return QueryFacts(named, tuple(dates), read_windows(query, now), read_anchors(query), now, current)
