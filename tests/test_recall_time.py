"""Relative times in a query ("two weeks ago", "last Saturday", "before my trip") resolved against ``now``."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from stratamem import Memory
from stratamem.cli import main
from stratamem.errors import ValidationError
from stratamem.ingest import IngestSession
from stratamem.records import StoredTurn, Turn
from stratamem.retrieve import HybridIndex, read_query
from stratamem.retrieve.timewords import DateWindow, read_anchors, read_windows, resolve_anchor

UTC = UTC
NOW = datetime(2023, 5, 17, 15, 0, tzinfo=UTC)  # a Wednesday


def _day(y: int, m: int, d: int) -> datetime:
    return datetime(y, m, d, tzinfo=UTC)


def _spans(query: str, now: datetime = NOW) -> list[tuple[datetime, datetime, float]]:
    return [(w.start, w.end, w.slack.days) for w in read_windows(query, now)]


def test_relative_phrases_resolve_to_exact_windows() -> None:
    assert _spans("What did I buy two weeks ago?") == [(_day(2023, 4, 30), _day(2023, 5, 7), 3)]
    assert _spans("What did I cook 3 days ago?") == [(_day(2023, 5, 14), _day(2023, 5, 15), 1)]
    assert _spans("Where did I go last Saturday?") == [(_day(2023, 5, 13), _day(2023, 5, 14), 1)]
    assert _spans("What did I do on Wednesday?") == [(_day(2023, 5, 10), _day(2023, 5, 11), 1)]
    assert _spans("What did I eat yesterday?") == [(_day(2023, 5, 16), _day(2023, 5, 17), 1)]
    assert _spans("and the day before yesterday?") == [(_day(2023, 5, 15), _day(2023, 5, 16), 1)]
    assert _spans("What did I read last month?") == [(_day(2023, 4, 1), _day(2023, 5, 1), 7)]
    assert _spans("plans for last week") == [(_day(2023, 5, 8), _day(2023, 5, 15), 3)]
    assert _spans("last weekend") == [(_day(2023, 5, 13), _day(2023, 5, 15), 1)]
    assert _spans("goals last year") == [(_day(2022, 1, 1), _day(2023, 1, 1), 30)]
    # A bare month is the most recent one not after now: March is this year's, June last year's.
    assert _spans("What did I do in March?") == [(_day(2023, 3, 1), _day(2023, 4, 1), 7)]
    assert _spans("What did I do in June?") == [(_day(2022, 6, 1), _day(2022, 7, 1), 7)]
    assert _spans("In May I went hiking") == [(_day(2023, 5, 1), _day(2023, 6, 1), 7)]
    # A day without a year: the most recent one not after now.
    assert _spans("What did I do on March 14?") == [(_day(2023, 3, 14), _day(2023, 3, 15), 1)]
    assert _spans("What did I do on July 4th?") == [(_day(2022, 7, 4), _day(2022, 7, 5), 1)]
    assert _spans("Running since May 3") == [(_day(2023, 5, 3), _day(2023, 5, 4), 1)]
    assert _spans("What did I do this past Tuesday?") == [(_day(2023, 5, 16), _day(2023, 5, 17), 1)]


def test_an_explicit_day_in_the_query_is_what_its_relative_phrases_count_from() -> None:
    # 23 January 2022 was a Sunday: "last Friday" is the 21st, whatever now is.
    assert _spans("What did Joanna finish last Friday on 23 January, 2022?") == [
        (_day(2022, 1, 21), _day(2022, 1, 22), 1)
    ]
    assert _spans("Tim's issue last week, as mentioned on November 6, 2023?") == [
        (_day(2023, 10, 30), _day(2023, 11, 6), 3)
    ]
    # "the last week of August 2023" is a date, not a time relative to now.
    assert _spans("Where was Jolene during the last week of August 2023?") == []


def test_durations_modal_may_and_explicit_years_give_no_window() -> None:
    assert read_windows("How many days ago did I buy the bag?", NOW) == ()
    assert read_windows("How long ago did we move?", NOW) == ()
    assert read_windows("may I ask what you may know", NOW) == ()
    assert read_windows("What happened in June 2021?", NOW) == ()  # the month/year date signal handles it
    assert read_query("What did I buy two weeks ago?").windows == ()  # no now: nothing resolved


def test_window_scores_are_soft_outside_and_the_description_is_readable() -> None:
    w = DateWindow(_day(2023, 5, 1), _day(2023, 5, 8), "two weeks ago", timedelta(days=4))
    assert w.score(_day(2023, 5, 1)) == 1.0 and w.score(datetime(2023, 5, 7, 23)) == 1.0
    # Up to two days after the window a turn may still tell of it ("yesterday I …"): full score.
    assert w.score(datetime(2023, 5, 9, 23)) == 1.0
    assert w.score(_day(2023, 5, 12)) == pytest.approx(0.5)
    assert w.score(_day(2023, 4, 29)) == pytest.approx(0.5)
    assert w.score(_day(2023, 4, 1)) == 0.0
    assert w.describe() == "'two weeks ago' → 2023-05-01..2023-05-07 (±4 d)"


def test_event_anchors_are_read_and_dated_by_the_event() -> None:
    [a] = read_anchors("What did I book three days before my trip to Rome?")
    assert (a.event, a.direction, a.days) == ("my trip to rome", "before", 3)
    w = resolve_anchor(a, datetime(2023, 6, 10, 9, tzinfo=UTC))
    assert (w.start, w.end) == (_day(2023, 6, 7), _day(2023, 6, 8))
    [b] = read_anchors("Where did I work before I moved?")
    assert (b.event, b.direction, b.days) == ("i moved", "before", None)
    w = resolve_anchor(b, _day(2023, 6, 10))
    assert (w.start, w.end) == (_day(2023, 5, 11), _day(2023, 6, 11))


def _sessions() -> list[tuple[datetime, list[str]]]:
    return [
        (_day(2023, 3, 4), ["I bought a new blue jacket at the mall today."]),
        (_day(2023, 4, 20), ["I finally booked the hotel for my trip to Rome."]),
        (_day(2023, 5, 2), ["I bought a red jacket for the hiking season."]),
        (_day(2023, 5, 13), ["Went to the farmers market and bought apples."]),
        (_day(2023, 5, 16), ["My trip to Rome starts next week, so excited!"]),
    ]


def _stored() -> list[StoredTurn]:
    return [
        StoredTurn(
            id=i,
            namespace="ns",
            session=f"s{i}",
            seq=1,
            tokens=1,
            turn=Turn(role="user", content=text, timestamp=day + timedelta(hours=10)),
        )
        for i, (day, [text]) in enumerate(_sessions(), 1)
    ]


def test_a_relative_time_boosts_turns_of_its_window_and_filters_nothing() -> None:
    index = HybridIndex()
    index.add_turns(_stored())
    hits = index.search("Which jacket did I buy two weeks ago?", k=5, now=NOW)
    assert hits[0].turn_ids == (3,) and hits[0].score["date_window"] == 0.5
    assert {h.turn_ids[0] for h in hits} >= {1, 3}  # a soft boost: the March jacket is still recalled
    # Asked in mid-March instead, the same words point at the blue jacket.
    hits = index.search("Which jacket did I buy two weeks ago?", k=5, now=_day(2023, 3, 18))
    assert hits[0].turn_ids == (1,) and hits[0].score["date_window"] == 0.5
    # Without a relative time there is no such signal at all.
    assert "date_window" not in index.search("Which jacket did I buy?", k=1, now=NOW)[0].score


def test_now_defaults_to_the_newest_turn_and_anchors_find_their_event() -> None:
    index = HybridIndex()
    index.add_turns(_stored())
    facts = index.query_facts("What did I buy last Saturday?")
    assert facts.now == datetime(2023, 5, 16, 10, tzinfo=UTC)
    assert [(w.start, w.end) for w in facts.windows] == [(_day(2023, 5, 13), _day(2023, 5, 14))]
    # "my trip to Rome" is best matched by session 2 (20 April): 26 days before it is 25 March.
    facts = index.query_facts("What did I buy 26 days before my trip to Rome?")
    assert [(w.start, w.end) for w in facts.windows] == [(_day(2023, 3, 25), _day(2023, 3, 26))]
    with pytest.raises(ValidationError, match="now must be a datetime"):
        index.search("jacket", k=1, now="2023-05-17")  # type: ignore[arg-type]


def _memory(path: Path) -> Memory:
    mem = Memory(path, namespace="t")
    mem.add_sessions(
        [
            IngestSession(
                f"s{i}",
                [
                    Turn(role="user", content=text, timestamp=day + timedelta(hours=10)),
                    Turn(role="assistant", content="Noted.", timestamp=day + timedelta(hours=10, seconds=30)),
                ],
            )
            for i, (day, [text]) in enumerate(_sessions(), 1)
        ]
    )
    return mem


def test_memory_context_resolves_now_and_explains_the_window(tmp_path: Path) -> None:
    mem = _memory(tmp_path / "m.db")
    ctx = mem.context("Which jacket did I buy two weeks ago?", budget=400, format="text", policy="recall", now=NOW)
    assert (
        "time window: 'two weeks ago' → 2023-04-30..2023-05-06 (±3.5 d) (now 2023-05-17 15:00 UTC)"
        in ctx.manifest.notes
    )
    by_id = {i.id: i for i in ctx.manifest.items}
    red = next(st.id for st in mem.turns() if "red jacket" in st.text)
    assert by_id[f"turn:{red}"].score["date_window"] == 0.5
    # A naive now is UTC; the default is the newest turn's time (16 May, 10:00).
    naive = mem.context(
        "Which jacket did I buy two weeks ago?",
        budget=400,
        format="text",
        policy="recall",
        now=datetime(2023, 5, 17, 15, 0),
    )
    assert naive.manifest.notes == ctx.manifest.notes
    default = mem.context("Which jacket did I buy two weeks ago?", budget=400, format="text", policy="recall")
    assert (
        "time window: 'two weeks ago' → 2023-04-29..2023-05-05 (±3.5 d) (now 2023-05-16 10:00 UTC)"
        in default.manifest.notes
    )
    with pytest.raises(ValidationError, match="now must be a datetime"):
        mem.context("jacket", now="yesterday")  # type: ignore[arg-type]
    mem.close()


def test_cli_context_now_flag(tmp_path: Path) -> None:
    _memory(tmp_path / "c.db").close()
    args = [
        "--db",
        str(tmp_path / "c.db"),
        "--namespace",
        "t",
        "context",
        "What did I buy last Saturday?",
        "--policy",
        "recall",
        "--budget",
        "300",
        "--json",
    ]
    out = CliRunner().invoke(main, [*args, "--now", "2023-05-17T15:00:00"], catch_exceptions=False)
    assert out.exit_code == 0
    notes = json.loads(out.output)["manifest"]["notes"]
    assert "time window: 'last saturday' → 2023-05-13..2023-05-13 (±1 d) (now 2023-05-17 15:00 UTC)" in notes
    bad = CliRunner().invoke(main, [*args, "--now", "last tuesday"])
    assert bad.exit_code != 0 and "not an ISO 8601 date/time" in bad.output


def test_a_question_about_the_present_prefers_newer_sessions_softly() -> None:
    turns = [
        StoredTurn(
            id=i, namespace="ns", session=f"s{i}", seq=1, tokens=1, turn=Turn(role="user", content=text, timestamp=day)
        )
        for i, (day, text) in enumerate(
            [
                (_day(2023, 1, 5), "I live in Denver, close to the mountains."),
                (_day(2023, 3, 1), "Lunch was a salad with extra feta."),
                (_day(2023, 6, 1), "We live in Austin and it is hot."),
            ],
            1,
        )
    ]
    index = HybridIndex()
    index.add_turns(turns)
    assert read_query("Which city do I live in these days?").current
    assert not read_query("Which city did I live in?").current
    hits = index.search("Which city do I live in these days?", k=3)
    assert hits[0].turn_ids == (3,) and hits[0].score["recency"] == pytest.approx(0.3)
    assert hits[1].turn_ids == (1,) and hits[1].score["recency"] == 0.0
    # Half-way between the oldest and the newest session: half the boost.
    assert next(h for h in hits if h.turn_ids == (2,)).score["recency"] == pytest.approx(0.3 * 55 / 147)
    assert "recency" not in index.search("Which city did I live in?", k=1)[0].score
