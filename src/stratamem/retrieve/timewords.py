"""Relative dates in a query, resolved against "now" into date windows.

"What did I buy two weeks ago?", "… last Saturday", "… yesterday", "… last
month", "… in March" name a time relative to when the question is asked.
:func:`read_windows` turns each such phrase into a :class:`DateWindow` (a
half-open span of days plus a slack). The ranking uses a window as a soft
boost (:mod:`stratamem.retrieve.engine`, signal ``date_window``): turns of a
session inside the window score 1, turns just outside it score less the
farther they are, and nothing is ever filtered out — a date in a question is
often approximate ("two weeks ago" may mean 12 or 17 days).

Phrases anchored on an event ("three days before my trip", "before I
moved") cannot be dated from the query alone: :func:`read_anchors` returns
them as :class:`EventAnchor`, which the index dates by finding the event.

"how many days ago …" asks for a duration, not a time, and yields no window.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

__all__ = ["REPORT_LAG", "DateWindow", "EventAnchor", "read_anchors", "read_windows", "resolve_anchor", "utc"]

_DAY = timedelta(days=1)
REPORT_LAG = timedelta(days=2)
"""A turn tells of a day up to two days later ("yesterday I…", "the day before yesterday…"),
so a session that soon after a window still scores fully."""
_MONTH_NAMES = "january february march april may june july august september october november december".split()
_WEEKDAYS = "monday tuesday wednesday thursday friday saturday sunday".split()
_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "couple of": 2,
    "a couple of": 2,
    "few": 3,
    "a few": 3,
    "several": 4,
}
_NUM = (
    r"(\d{1,3}|a couple of|couple of|a few|few|several|an|a|one|two|three|four|five|six|seven|eight|nine|ten"
    r"|eleven|twelve)"
)
_UNIT = r"(day|week|month|year)s?"
_UNIT_DAYS = {"day": 1, "week": 7, "month": 30, "year": 365}

_AGO = re.compile(rf"\b{_NUM}\s+{_UNIT}\s+ago\b")
_DURATION = re.compile(r"\bhow\s+(many|long|much)\b[^?.!]*$")
_YESTERDAY = re.compile(r"\b(the\s+day\s+before\s+yesterday|yesterday|today|tonight|this\s+morning)\b")
_LAST_UNIT = re.compile(r"(?<!the )\b(last|this|past|previous)\s+(week|weekend|month|year)\b(?!\s+of\b)")
_MONTH_ALT = "|".join(_MONTH_NAMES)
# An explicit day in the query ("… last week, as mentioned on 6 November, 2023") is the
# moment its relative phrases count from.
_EXPLICIT_DAY = re.compile(
    rf"\b(\d{{1,2}})\s+({_MONTH_ALT}),?\s+(\d{{4}})\b|\b({_MONTH_ALT})\s+(\d{{1,2}}),?\s+(\d{{4}})\b"
)
_WEEKDAY = re.compile(r"\b(?:(last|this\s+past|past|on|this)\s+)(" + "|".join(_WEEKDAYS) + r")\b")
_ON_DAY = re.compile(
    r"\b(on|since|around|by)\s+(" + "|".join(_MONTH_NAMES) + r")\s+(\d{1,2})(?:st|nd|rd|th)?\b"
    r"(?!,?\s*\d{4})"
)
_IN_MONTH = re.compile(
    r"\b(in|during|since|early|late|mid|back\s+in)\s+(" + "|".join(_MONTH_NAMES) + r")\b(?!\s*,?\s*\d{4})"
)
_ANCHOR = re.compile(rf"\b(?:{_NUM}\s+{_UNIT}\s+)?(before|after)\s+((?:my|our|i|we|the)\b[^?.!,;]*)")


def utc(when: datetime) -> datetime:
    """``when`` as an aware UTC datetime (a naive one is taken to be UTC already)."""
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def _midnight(when: datetime) -> datetime:
    return utc(when).replace(hour=0, minute=0, second=0, microsecond=0)


def _month_start(year: int, month: int) -> datetime:
    while month < 1:
        year, month = year - 1, month + 12
    while month > 12:
        year, month = year + 1, month - 12
    return datetime(year, month, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class DateWindow:
    """Days a query points at: ``[start, end)``, softened by ``slack`` on each side."""

    start: datetime
    """First instant inside (UTC)."""
    end: datetime
    """First instant after (UTC)."""
    phrase: str
    """The words it was read from, e.g. ``two weeks ago``."""
    slack: timedelta = _DAY
    """Distance outside the window over which the score falls from 1 to 0."""

    def score(self, when: datetime) -> float:
        """1.0 inside the window or up to :data:`REPORT_LAG` after it, falling linearly to 0 at ``slack`` beyond."""
        when = utc(when)
        if self.start <= when < self.end + REPORT_LAG:
            return 1.0
        gap = self.start - when if when < self.start else when - self.end - REPORT_LAG
        slack = self.slack.total_seconds()
        return max(0.0, 1.0 - gap.total_seconds() / slack) if slack > 0 else 0.0

    def describe(self) -> str:
        """``'two weeks ago' → 2023-05-01..2023-05-07 (±1 d)`` for manifests and notes."""
        last = self.end - timedelta(microseconds=1)
        return f"{self.phrase!r} → {self.start:%Y-%m-%d}..{last:%Y-%m-%d} (±{self.slack.total_seconds() / 86400:g} d)"


@dataclass(frozen=True, slots=True)
class EventAnchor:
    """A time named by an event: ``three days before my trip``."""

    event: str
    """The event's words, searched for in the history (``my trip``)."""
    direction: str
    """``before`` or ``after``."""
    days: int | None
    """Offset from the event in days (``None``: just before/after it)."""
    phrase: str
    """The whole phrase."""


def _number(word: str) -> int:
    return int(word) if word.isdigit() else _NUMBERS[word]


def _ago(n: int, unit: str, now: datetime, phrase: str) -> DateWindow:
    days = n * _UNIT_DAYS[unit]
    centre = _midnight(now) - timedelta(days=days)
    # An approximate span: "two weeks ago" is rarely exactly 14 days.
    half = timedelta(days={"day": 0, "week": 3, "month": 10, "year": 120}[unit])
    slack = timedelta(days=max(1.0, days * 0.25))
    return DateWindow(centre - half, centre + half + _DAY, phrase, slack)


def _calendar(which: str, unit: str, now: datetime, phrase: str) -> DateWindow:
    today = _midnight(now)
    back = which != "this"
    if unit == "week":
        monday = today - timedelta(days=today.weekday())
        start = monday - timedelta(days=7) if back else monday
        return DateWindow(start, start + timedelta(days=7), phrase, timedelta(days=3))
    if unit == "weekend":
        saturday = today - timedelta(days=(today.weekday() - 5) % 7)
        if back and saturday + timedelta(days=2) > today:
            saturday -= timedelta(days=7)
        return DateWindow(saturday, saturday + timedelta(days=2), phrase, _DAY)
    if unit == "month":
        start = _month_start(today.year, today.month - (1 if back else 0))
        return DateWindow(start, _month_start(start.year, start.month + 1), phrase, timedelta(days=7))
    start = datetime(today.year - (1 if back else 0), 1, 1, tzinfo=UTC)
    return DateWindow(start, start.replace(year=start.year + 1), phrase, timedelta(days=30))


def read_windows(query: str, now: datetime) -> tuple[DateWindow, ...]:
    """Date windows for the relative time phrases of ``query``, resolved against ``now``.

    Bare month names ("in March") resolve to the most recent such month not
    after ``now``; a weekday ("last Saturday", "on Friday") to the most recent
    one before today. A query that asks for a duration ("how many weeks ago
    did I …") yields none.
    """
    text = query.lower()
    if _DURATION.search(text) and ("ago" in text or "since" in text):
        return ()
    explicit = _EXPLICIT_DAY.search(text)
    if explicit:
        g = explicit.group
        d, month, y = (g(1), g(2), g(3)) if g(1) else (g(5), g(4), g(6))
        try:
            now = datetime(int(y), _MONTH_NAMES.index(month) + 1, int(d), 23, 59, tzinfo=UTC)
        except ValueError:
            pass  # "31 February": keep now
    today = _midnight(now)
    out: list[DateWindow] = []
    for m in _AGO.finditer(text):
        out.append(_ago(_number(m.group(1)), m.group(2), now, m.group(0)))
    for m in _YESTERDAY.finditer(text):
        back = {"the day before yesterday": 2, "yesterday": 1}.get(re.sub(r"\s+", " ", m.group(1)), 0)
        day = today - timedelta(days=back)
        out.append(DateWindow(day, day + _DAY, m.group(0), _DAY))
    for m in _LAST_UNIT.finditer(text):
        out.append(_calendar(m.group(1), m.group(2), now, m.group(0)))
    for m in _WEEKDAY.finditer(text):
        target = _WEEKDAYS.index(m.group(2))
        back = (today.weekday() - target) % 7 or 7
        day = today - timedelta(days=back)
        out.append(DateWindow(day, day + _DAY, m.group(0), _DAY))
    days_named: list[tuple[int, int]] = []
    for m in _ON_DAY.finditer(text):
        days_named.append(m.span())
        month, d = _MONTH_NAMES.index(m.group(2)) + 1, int(m.group(3))
        year = today.year if (month, d) <= (today.month, today.day) else today.year - 1
        try:
            day = datetime(year, month, d, tzinfo=UTC)
        except ValueError:
            continue
        out.append(DateWindow(day, day + _DAY, m.group(0), _DAY))
    for m in _IN_MONTH.finditer(text):
        if any(a <= m.start() < b for a, b in days_named):
            continue  # "since May 3" is a day, not the month
        if m.group(2) == "may" and not re.search(r"\b(?i:in|during|since)\s+May\b", query):
            continue  # the modal verb, not the month
        month = _MONTH_NAMES.index(m.group(2)) + 1
        year = today.year if month <= today.month else today.year - 1
        start = _month_start(year, month)
        out.append(DateWindow(start, _month_start(year, month + 1), m.group(0), timedelta(days=7)))
    return tuple(out)


def read_anchors(query: str) -> tuple[EventAnchor, ...]:
    """Times named by an event ("three days before my trip", "after we moved")."""
    out: list[EventAnchor] = []
    for m in _ANCHOR.finditer(query.lower()):
        event = m.group(4).strip()
        if not event or len(event.split()) > 8:
            continue
        days = _number(m.group(1)) * _UNIT_DAYS[m.group(2)] if m.group(1) else None
        out.append(EventAnchor(event, m.group(3), days, m.group(0).strip()))
    return tuple(out)


def resolve_anchor(anchor: EventAnchor, when: datetime) -> DateWindow:
    """The window an anchor names once its event is dated ``when``.

    With an offset the window is that day (slack of a quarter of the offset);
    without, it is the 30 days before (or after) the event, softly.
    """
    day = _midnight(when)
    sign = -1 if anchor.direction == "before" else 1
    if anchor.days is not None:
        at = day + sign * timedelta(days=anchor.days)
        return DateWindow(at, at + _DAY, anchor.phrase, timedelta(days=max(1.0, anchor.days * 0.25)))
    if sign < 0:
        return DateWindow(day - timedelta(days=30), day + _DAY, anchor.phrase, timedelta(days=30))
    return DateWindow(day, day + timedelta(days=31), anchor.phrase, timedelta(days=30))
