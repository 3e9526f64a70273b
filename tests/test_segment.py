"""Segmenters: fixed, topic boundaries (phrase, gap, tokens), per user turn; replay-stable."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from stratamem.pyramid.segment import FixedSegmenter, Segmenter, TopicSegmenter, UserTurnSegmenter
from stratamem.records import StoredTurn, Turn

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
PHRASES = ("new topic", "let's move on")


def make(specs: list[tuple[str, str, float, int]]) -> list[StoredTurn]:
    """(role, text, minutes after T0, tokens) -> stored turns of session 's'."""
    return [
        StoredTurn(i + 1, "ns", "s", i + 1, tokens, Turn(role, text, timestamp=T0 + timedelta(minutes=m)))
        for i, (role, text, m, tokens) in enumerate(specs)
    ]


def seqs(split_result) -> tuple[list[list[int]], list[str], list[int]]:
    return (
        [[t.seq for t in s.turns] for s in split_result.seals],
        [s.reason for s in split_result.seals],
        [t.seq for t in split_result.open],
    )


def test_fixed_segmenter_seals_full_runs_and_keeps_the_rest_open():
    turns = make([("user", f"m{i}", i, 5) for i in range(23)])
    runs, reasons, open_ = seqs(FixedSegmenter(10).split(turns))
    assert runs == [list(range(1, 11)), list(range(11, 21))]
    assert reasons == ["size", "size"]
    assert open_ == [21, 22, 23]


def test_topic_segmenter_seals_before_a_user_turn_with_a_boundary_phrase():
    turns = make(
        [
            ("user", "hi", 0, 5),
            ("assistant", "hello, new topic?", 1, 5),
            ("user", "OK, Let's  move on to budgets", 2, 5),
            ("assistant", "sure", 3, 5),
        ]
    )
    runs, reasons, open_ = seqs(TopicSegmenter(PHRASES, timedelta(minutes=30), 1000).split(turns))
    # The assistant's "new topic" is not a boundary; the user's phrase starts the new topic.
    assert runs == [[1, 2]]
    assert reasons == ["phrase"]
    assert open_ == [3, 4]


def test_topic_phrases_match_whole_words_only():
    turns = make([("user", "hi", 0, 5), ("user", "a brand-new topical idea", 1, 5)])
    assert seqs(TopicSegmenter(PHRASES, timedelta(minutes=30), 1000).split(turns))[0] == []


def test_topic_segmenter_seals_at_a_silence_of_thirty_minutes():
    turns = make([("user", "a", 0, 5), ("assistant", "b", 29.9, 5), ("user", "c", 59.9, 5), ("user", "d", 60, 5)])
    runs, reasons, open_ = seqs(TopicSegmenter(PHRASES, timedelta(minutes=30), 1000).split(turns))
    assert runs == [[1, 2]]
    assert reasons == ["gap"]
    assert open_ == [3, 4]


def test_topic_segmenter_seals_after_the_turn_that_reaches_the_token_threshold():
    turns = make([("user", "a", 0, 400), ("assistant", "b", 1, 700), ("user", "c", 2, 100), ("user", "d", 3, 10)])
    runs, reasons, open_ = seqs(TopicSegmenter(PHRASES, timedelta(minutes=30), 1200).split(turns))
    assert runs == [[1, 2, 3]]
    assert reasons == ["tokens"]
    assert open_ == [4]


def test_user_turn_segmenter_seals_one_request_with_everything_after_it():
    turns = make(
        [
            ("system", "rules", 0, 5),
            ("user", "q1", 1, 5),
            ("assistant", "a1", 2, 5),
            ("assistant", "a1b", 3, 5),
            ("user", "q2", 4, 5),
            ("assistant", "a2", 5, 5),
            ("user", "q3", 6, 5),
        ]
    )
    runs, reasons, open_ = seqs(UserTurnSegmenter().split(turns))
    assert runs == [[1, 2, 3, 4], [5, 6]]
    assert reasons == ["user_turn", "user_turn"]
    assert open_ == [7]


SEGMENTERS: list[Segmenter] = [
    FixedSegmenter(3),
    TopicSegmenter(PHRASES, timedelta(minutes=30), 50),
    UserTurnSegmenter(),
]

turn_specs = st.lists(
    st.tuples(
        st.sampled_from(["user", "assistant", "tool_like"]),
        st.sampled_from(["hello", "new topic please", "let's move on", "ok"]),
        st.floats(0, 45),
        st.integers(1, 30),
    ),
    max_size=30,
)


@settings(max_examples=60, deadline=None)
@given(specs=turn_specs, cuts=st.lists(st.integers(0, 30), max_size=6), which=st.integers(0, 2))
def test_replaying_turns_one_batch_at_a_time_seals_the_same_segments(specs, cuts, which):
    minutes = 0.0
    norm = []
    for role, text, gap, tokens in specs:
        minutes += gap
        norm.append(("assistant" if role == "tool_like" else role, text, minutes, tokens))
    turns = make(norm)
    seg = SEGMENTERS[which]
    at_once = seg.split(turns)
    # Incremental: feed growing prefixes, re-splitting only what is still open (as the pyramid does).
    sealed: list[list[int]] = []
    open_: list[StoredTurn] = []
    done = 0
    for cut in sorted({c for c in cuts if c <= len(turns)}) + [len(turns)]:
        open_ = open_ + turns[done:cut]
        done = max(done, cut)
        part = seg.split(open_)
        sealed += [[t.seq for t in s.turns] for s in part.seals]
        open_ = list(part.open)
    assert sealed == [[t.seq for t in s.turns] for s in at_once.seals]
    assert [t.seq for t in open_] == [t.seq for t in at_once.open]
    # Every turn is in exactly one sealed run or open, in order.
    assert [q for run in sealed for q in run] + [t.seq for t in open_] == [t.seq for t in turns]
