"""Event dates: the days a turn tells of, resolved when the turn is written (issue 30).

"Yesterday I helped my cousin move", said on Thursday 5 December, is about
Wednesday the 4th. The session date is known when the turn is written, so the
relative times a turn's own words name ("yesterday", "two weeks ago", "last
Saturday", "on March 3", "last month") are resolved then, with the query-side
resolver of :mod:`stratamem.retrieve.timewords` against the turn's timestamp,
and stored beside the turn's index row (``recall_index.events``, migration
``m019_recall_events``). A question that names a time ("what did I do this
past Wednesday?", an interval whose two ends were told as "yesterday") then
finds the turn by the day it tells of, not only by the day it was said on:
signal ``event_date`` of :class:`~stratamem.retrieve.weights.Weights`, and the
date of an event anchor ("three days after my dentist visit").

An event is stored as its day span ``start:end`` (days since 1970-01-01, end
exclusive); a turn's events are space-joined (``""``: none; a ``NULL`` row was
written before this existed and is filled when the index opens).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import numpy as np

from .timewords import DateWindow, read_windows, utc

__all__ = ["ToldDays", "decode_events", "encode_events", "event_scores", "event_spans", "first_day"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_DAY_S = 86400.0
# A weekday or "this week" in a sentence about plans is a day to come, which the
# past-facing resolver would put a week back: such phrases are left out.
_AMBIGUOUS = re.compile(r"^(on|this)\s+(?!past\b|morning\b)")
_FUTURE = re.compile(
    r"\b(will|won't|shall|going to|gonna|'ll|plan(?:s|ning)? to|next|tomorrow|upcoming|hope to|want to)\b",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"[^.!?\n]+")


def _said_of_the_future(text: str, phrase: str) -> bool:
    low = text.lower()
    at = low.find(phrase)
    if at < 0:
        return False
    for m in _SENTENCE.finditer(low):
        if m.start() <= at < m.end():
            return bool(_FUTURE.search(m.group(0)))
    return False


def event_spans(text: str, when: datetime) -> list[tuple[int, int]]:
    """Day spans ``(start, end)`` (days since 1970-01-01, end exclusive) of the times ``text``
    tells of, said at ``when``. Phrases naming a day to come are left out."""
    out: list[tuple[int, int]] = []
    for w in read_windows(text, utc(when)):
        if _AMBIGUOUS.match(w.phrase) and _said_of_the_future(text, w.phrase):
            continue
        span = ((w.start - _EPOCH).days, max((w.end - _EPOCH).days, (w.start - _EPOCH).days + 1))
        if span not in out:
            out.append(span)
    return out


def encode_events(spans: Sequence[tuple[int, int]]) -> str:
    """``spans`` as stored: ``"19695:19696 19600:19631"`` (``""``: none)."""
    return " ".join(f"{a}:{b}" for a, b in spans)


def decode_events(stored: str) -> list[tuple[int, int]]:
    """The spans of a stored events string (malformed parts are skipped: it is derived data)."""
    out = []
    for part in stored.split():
        a, _, b = part.partition(":")
        if a.lstrip("-").isdigit() and b.lstrip("-").isdigit():
            out.append((int(a), int(b)))
    return out


def event_scores(owners: np.ndarray, spans: np.ndarray, windows: Sequence[DateWindow], n: int) -> np.ndarray:
    """Per turn (``n`` of them): the best score any query window gives the middle of any day span
    the turn tells of — 1 inside the window, falling linearly to 0 at its slack outside. No report
    lag (:data:`~stratamem.retrieve.timewords.REPORT_LAG` is for the day a turn was *said*; this is
    the day it tells of).

    Args:
        owners: Turn position of each event row.
        spans: ``(rows, 2)`` day spans.
        windows: The query's date windows.
        n: Number of turns.
    """
    out = np.zeros(n)
    if not len(owners) or not windows:
        return out
    mid = (spans[:, 0] + spans[:, 1]) * (_DAY_S / 2)  # seconds since the epoch
    best = np.zeros(len(owners))
    for w in windows:
        start, end = (w.start - _EPOCH).total_seconds(), (w.end - _EPOCH).total_seconds()
        slack = w.slack.total_seconds()
        gap = np.where(mid < start, start - mid, np.where(mid >= end, mid - end, 0.0))
        score = np.clip(1.0 - gap / slack, 0.0, 1.0) if slack > 0 else (gap == 0).astype(np.float64)
        np.maximum(best, score, out=best)
    np.maximum.at(out, owners, best)
    return out


def first_day(spans: Sequence[tuple[int, int]]) -> datetime | None:
    """The first day of a turn's first told event (``None``: it tells of none)."""
    return _EPOCH + timedelta(days=spans[0][0]) if spans else None


class ToldDays:
    """The day spans the turns of one index tell of, one row per event, and their score for a query."""

    def __init__(self) -> None:
        self._owner: list[int] = []
        self._span: list[tuple[int, int]] = []
        self._arrays: tuple[np.ndarray, np.ndarray] = (np.zeros(0, np.int64), np.zeros((0, 2), np.int64))

    def __len__(self) -> int:
        return len(self._owner)

    def add(self, position: int, spans: Sequence[tuple[int, int]]) -> None:
        """The spans of the turn at ``position``."""
        for span in spans:
            self._owner.append(position)
            self._span.append(span)

    def of(self, position: int) -> list[tuple[int, int]]:
        """The spans of the turn at ``position`` (in the order told)."""
        return [span for i, span in zip(self._owner, self._span, strict=True) if i == position]

    def scores(self, windows: Sequence[DateWindow], n: int) -> np.ndarray:
        """:func:`event_scores` of every turn (``n`` of them) for the query's ``windows``."""
        if len(self._arrays[0]) != len(self._owner):
            self._arrays = (
                np.asarray(self._owner, dtype=np.int64),
                np.asarray(self._span, dtype=np.int64).reshape(-1, 2),
            )
        return event_scores(*self._arrays, windows, n)
