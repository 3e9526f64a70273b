"""Event dates and sentence vectors made when a turn is written (issue 30), and kept in the store.

Real SQLite files and a real PostgreSQL (pgserver); the documented offline
HashEmbedder stands in for MiniLM where only the plumbing is under test.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pg import fresh_schema, schema_url

from stratamem import Config, Memory
from stratamem.ingest import IngestSession
from stratamem.records import StoredTurn, Turn
from stratamem.retrieve import HybridIndex, Weights
from stratamem.retrieve.eventdates import decode_events, encode_events, event_spans
from stratamem.retrieve.sentences import sentence_texts, split_sentences
from stratamem.store.open import open_store
from stratamem.store.sqlite import SQLiteStore
from stratamem.testing.hash_embedder import HashEmbedder

THU = datetime(2024, 12, 5, 18, 30, tzinfo=UTC)  # a Thursday
NO_PYRAMID = Config().replace(pyramid={"enabled": False})


def _days(*dates: tuple[int, int, int]) -> list[tuple[int, int]]:
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    out = []
    for y, m, d in dates:
        day = (datetime(y, m, d, tzinfo=UTC) - epoch).days
        out.append((day, day + 1))
    return out


# --- reading the days a turn tells of -------------------------------------------------------------


def test_a_turn_tells_of_the_days_its_relative_times_name_resolved_against_when_it_was_said() -> None:
    assert event_spans("Yesterday I helped my cousin move into a fourth-floor flat.", THU) == _days((2024, 12, 4))
    assert event_spans("The day before yesterday I ran a 10K.", THU) == _days((2024, 12, 3))
    assert event_spans("Last Saturday we went to the coast.", THU) == _days((2024, 11, 30))
    assert event_spans("On Monday I went to the dentist.", THU) == _days((2024, 12, 2))
    two_weeks = event_spans("I started a ceramics course two weeks ago.", THU)
    assert two_weeks == [(two_weeks[0][0], two_weeks[0][0] + 7)] and _days((2024, 11, 18))[0][0] == two_weeks[0][0]
    # A weekday in a sentence about plans is a day to come: left out, not put a week back.
    assert event_spans("I'm going to a concert on Friday, can't wait.", THU) == []
    assert event_spans("I will see the dentist this Tuesday.", THU) == []
    assert event_spans("Can you help me plan a garden bed?", THU) == []


def test_stored_event_strings_round_trip_and_malformed_parts_are_skipped() -> None:
    spans = _days((2024, 12, 4)) + [(20000, 20031)]
    assert encode_events(spans) == "20061:20062 20000:20031"
    assert decode_events(encode_events(spans)) == spans
    assert decode_events("") == [] and decode_events("20061:x 7 20000:20031") == [(20000, 20031)]


def test_only_short_turns_of_several_sentences_get_sentence_vectors() -> None:
    def st(text: str, name: str | None = None) -> StoredTurn:
        return StoredTurn(1, "n", "s", 1, 10, Turn("user", text, name=name))

    text = "Can you help me fix the sink? Side note: I got through a thriller on the plane. Thanks!"
    assert split_sentences(text) == [
        "Can you help me fix the sink?",
        "Side note: I got through a thriller on the plane.",
    ]
    assert sentence_texts(st(text), 12) == [
        "user: Can you help me fix the sink?",
        "user: Side note: I got through a thriller on the plane.",
    ]
    assert sentence_texts(st(text), 200) == []  # a long turn has passages instead
    assert sentence_texts(st(text), 11) == []  # a turn of few content words says one thing
    # "That's so cool!" is too short to say something of its own: one sentence is left, no vectors.
    assert sentence_texts(st("That's so cool! I went hiking with my dog near the lake yesterday."), 20) == []
    assert sentence_texts(st("One sentence only here, nothing else."), 5) == []
    # A LoCoMo photo caption is a sentence of its own, spoken by the named speaker.
    caption = "Look at what I made! [shares a photo of a painting of a sunset over a lake]"
    assert sentence_texts(st(caption, "Melanie"), 12) == [
        "Melanie: Look at what I made!",
        "Melanie: [shares a photo of a painting of a sunset over a lake]",
    ]


# --- ranking by the day told ----------------------------------------------------------------------


def _turn(tid: int, session: str, text: str, when: datetime) -> StoredTurn:
    return StoredTurn(tid, "n", session, tid, 10, Turn("user", text, timestamp=when))


def _week() -> list[StoredTurn]:
    wed, sat = THU - timedelta(days=1), THU + timedelta(days=2)
    return [
        _turn(1, "wed", "I spent the evening sorting old photos from the move.", wed),
        _turn(2, "wed", "The new flat still smells of paint.", wed),
        _turn(3, "sat", "Three days ago I helped my cousin move into a fourth-floor flat.", sat),
        _turn(4, "sat", "Any tips for sore shoulders?", sat),
    ]


def test_a_question_about_a_day_finds_the_turn_that_tells_of_it_said_days_later() -> None:
    question = "What did I do this past Wednesday?"
    now = THU + timedelta(days=5)  # Tuesday 10 December
    told = HybridIndex()
    told.add_turns(_week())
    assert told.told_days(3) == _days((2024, 12, 4)) and told.told_days(1) == []
    hits = told.search(question, k=2, now=now)
    assert hits[0].turn_ids == (3,) and hits[0].score["event_date"] == Weights().event_date
    # Without the day told, only Wednesday's own session is in the question's window.
    plain = HybridIndex(weights=Weights(event_date=0.0))
    plain.add_turns(_week())
    assert 3 not in {h.turn_ids[0] for h in plain.search(question, k=2, now=now)}


def test_an_event_anchor_is_dated_by_the_day_its_turn_tells_of() -> None:
    index = HybridIndex()
    index.add_turns([_turn(1, "a", "Yesterday I had a molar filled at the dentist.", THU)])
    facts = index.query_facts("What did I eat two days after my dentist visit?", THU + timedelta(days=20))
    (window,) = facts.windows
    assert window.start == datetime(2024, 12, 6, tzinfo=UTC)  # 4 December told, not 5 December said


# --- kept in the store --------------------------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "sqlite":
        s: Any = SQLiteStore(tmp_path / "e.db")
    else:
        dsn = request.getfixturevalue("pg_dsn")
        s = open_store(schema_url(dsn, fresh_schema(dsn, "ev")))
    yield s
    s.close()


SAID = [
    "Can you help me fix the leaking kitchen sink before the weekend guests arrive? "
    "Side note: yesterday I got through a thriller on the plane.",
    "Plumbers are pricey, so start with the trap under the basin.",
    "Perfect, thanks.",
    "What paint should I buy for the old wooden garden fence this autumn? "
    "By the way, two weeks ago I started a ceramics course.",
]


def _sessions() -> list[IngestSession]:
    return [
        IngestSession(
            "s1", [Turn("user" if i % 2 == 0 else "assistant", t, timestamp=THU) for i, t in enumerate(SAID[:3])]
        ),
        IngestSession("s2", [Turn("user", SAID[3], timestamp=THU + timedelta(days=9))]),
    ]


def _hits(mem: Memory, query: str, now: datetime) -> list[tuple[int, float]]:
    return [(h.turn_ids[0], round(h.score["fused"], 9)) for h in mem._recall_index().search(query, k=4, now=now)]


def test_event_dates_and_sentence_vectors_are_stored_at_write_time_and_reopened_without_embedding(store: Any) -> None:
    emb = HashEmbedder(32)
    mem = Memory(store, namespace="n", config=NO_PYRAMID, embedder=emb)
    ids = [st.id for st in mem.add_sessions(_sessions())]
    rows = store.embeddings.turns.load("n")
    assert [rows[i].events for i in ids] == [
        encode_events(_days((2024, 12, 4))),
        "",
        "",
        encode_events(event_spans(SAID[3], THU + timedelta(days=9))),
    ]
    assert rows[ids[3]].events != "" and [rows[i].sentences for i in ids] == [2, 0, 0, 2]
    key = f"{emb.name}/32/sentences2"
    assert sorted(store.embeddings.passages.load("n", key)) == [ids[0], ids[3]]
    # Turn texts, then the sentences of the two turns that have several: nothing else was embedded.
    embedded = [t for c in emb.calls for t in c]
    assert len(embedded) == len(SAID) + 4
    question, now = "How many books have I finished lately?", THU + timedelta(days=12)
    fresh = HashEmbedder(32)
    other = Memory(store, namespace="n", config=NO_PYRAMID, embedder=fresh)
    assert _hits(other, question, now) == _hits(mem, question, now)
    assert {tuple(c) for c in fresh.calls} == {(question,)}  # only the question
    assert other._recall_index().told_days(ids[0]) == _days((2024, 12, 4))
    # Forgetting a turn deletes its sentence vectors with its index row.
    mem.forget(turns=[ids[0]])
    assert sorted(store.embeddings.passages.load("n", key)) == [ids[3]]


def test_rows_written_before_event_dates_and_sentences_are_filled_when_the_index_opens(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with Memory(path, namespace="n", config=NO_PYRAMID, embedder=HashEmbedder(32)) as mem:
        ids = [st.id for st in mem.add_sessions(_sessions())]
        want = _hits(mem, "thriller ceramics", THU + timedelta(days=12))
        # As a store written before migration m019 looks: no events, no sentence counts, no sentence rows.
        mem.store.connection.execute("UPDATE recall_index SET events = NULL, sentences = NULL")
        mem.store.connection.execute("DELETE FROM recall_passages")
    emb = HashEmbedder(32)
    with Memory(path, namespace="n", config=NO_PYRAMID, embedder=emb) as mem:
        assert _hits(mem, "thriller ceramics", THU + timedelta(days=12)) == want
        rows = mem.store.embeddings.turns.load("n")
        assert [rows[i].sentences for i in ids] == [2, 0, 0, 2] and rows[ids[0]].events == encode_events(
            _days((2024, 12, 4))
        )
        # The turn vectors were not made again: only the four sentences and the query.
        assert sorted(t for c in emb.calls for t in c) == sorted(
            [t for i in (0, 3) for t in sentence_texts(mem._recall_index().turn(ids[i]), 20)] + ["thriller ceramics"]
        )


def test_a_store_with_term_ids_but_no_event_columns_gains_them_and_fills_them_on_open(tmp_path: Path) -> None:
    # What main's version before this merge left: m021_term_ids applied, m019_recall_events not.
    path = tmp_path / "lean.db"
    with Memory(path, namespace="n", config=NO_PYRAMID, embedder=HashEmbedder(32)) as mem:
        ids = [st.id for st in mem.add_sessions(_sessions())]
        want = _hits(mem, "thriller ceramics", THU + timedelta(days=12))
        rows = mem.store.embeddings.turns.load("n")
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("ALTER TABLE recall_index DROP COLUMN events")
        conn.execute("ALTER TABLE recall_index DROP COLUMN sentences")
        conn.execute("DELETE FROM recall_passages")
        conn.execute("DELETE FROM _stratamem_migrations WHERE name = 'm019_recall_events'")
    conn.close()
    with Memory(path, namespace="n", config=NO_PYRAMID, embedder=HashEmbedder(32)) as mem:  # m019 runs after m021
        assert _hits(mem, "thriller ceramics", THU + timedelta(days=12)) == want
        assert mem.store.embeddings.turns.load("n") == rows
        assert [rows[i].sentences for i in ids] == [2, 0, 0, 2]


def test_sentences_off_stores_none_and_turning_them_on_makes_them_on_open(tmp_path: Path) -> None:
    path = tmp_path / "off.db"
    off = NO_PYRAMID.replace(embedding={"sentences": False})
    emb = HashEmbedder(32)
    with Memory(path, namespace="n", config=off, embedder=emb) as mem:
        ids = [st.id for st in mem.add_sessions(_sessions())]
        assert sum(len(c) for c in emb.calls) == len(SAID)
        assert [r.sentences for r in mem.store.embeddings.turns.load("n").values()] == [None] * 4
        assert not mem._recall_index().sentences
    on = HashEmbedder(32)
    with Memory(path, namespace="n", config=NO_PYRAMID, embedder=on) as mem:
        index = mem._recall_index()
        assert index.sentences and len(index._sentence_vectors) == 4
        assert sum(len(c) for c in on.calls) == 4  # the sentences only
        assert sorted(mem.store.embeddings.passages.load("n", f"{on.name}/32/sentences2")) == [ids[0], ids[3]]


def test_a_read_only_file_written_before_event_dates_is_read_without_them(tmp_path: Path) -> None:
    from test_store_faults import _drop_file_override, cli, conversation

    db = tmp_path / "store" / "old.db"
    assert cli(db, "ingest", str(conversation(tmp_path / "c.jsonl"))).returncode == 0
    conn = sqlite3.connect(db)  # as the version before m019_recall_events left it
    with conn:
        conn.execute("ALTER TABLE recall_index DROP COLUMN events")
        conn.execute("ALTER TABLE recall_index DROP COLUMN sentences")
        conn.execute("DELETE FROM _stratamem_migrations WHERE name = 'm019_recall_events'")
    conn.close()
    for p in db.parent.iterdir():
        p.chmod(0o444)
    db.parent.chmod(0o555)
    try:
        out = cli(db, "context", "lake house", "--format", "text", preexec=_drop_file_override)
        assert (out.returncode, out.stderr) == (0, "")  # no error, and no failed write of the days made here
        assert "lake house" in out.stdout
    finally:
        db.parent.chmod(0o755)
        db.chmod(0o644)
    assert cli(db, "status").returncode == 0  # writable again: migrated on this open
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT COUNT(*) FROM recall_index WHERE events IS NULL").fetchone()[0] == 80
    conn.close()
