"""Query plans (issue 30): question shapes, gathering and sub-query shares, in the engine and in a context.

Real index (lexical, or with the documented HashEmbedder where sentence vectors
matter), real SQLite files through ``Memory``.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stratamem import Config, Memory
from stratamem.errors import ValidationError
from stratamem.ingest import IngestSession
from stratamem.records import StoredTurn, Turn
from stratamem.retrieve import HybridIndex, Weights
from stratamem.retrieve.plan import PlanSettings, QueryPlan, gather, is_aggregation, merge, plan_query, subqueries
from stratamem.testing.hash_embedder import HashEmbedder

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
OFF = PlanSettings(enabled=False)


# --- shapes ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "shape", "parts"),
    [
        ("How many books have I told you I finished reading?", "aggregate", ()),
        ("What is the total I've paid for houseplants?", "aggregate", ()),
        ("Which cities did I travel to for business?", "aggregate", ()),
        ("How many times has Melanie gone camping?", "aggregate", ()),
        ("What kind of music does she like?", "single", ()),
        ("What did I buy two weeks ago?", "single", ()),
        ("When did Caroline go to the LGBTQ support group?", "single", ()),
        (
            "How many days passed between my dentist appointment and the classical concert?",
            "between",
            ("my dentist appointment", "the classical concert"),
        ),
        (
            "Which happened first, the car inspection or my niece's play?",
            "choice",
            ("Which happened first car inspection", "Which happened first my niece's play"),
        ),
        (
            "What do Jon and Gina both have in common?",
            "pair",
            ("What do Jon have in common?", "What do Gina have in common?"),
        ),
        (
            "How many days after my dentist visit did I go to the concert?",
            "anchor",
            ("my dentist visit", "I go to the concert"),
        ),
    ],
)
def test_rules_plan_each_shape(question: str, shape: str, parts: tuple[str, ...]) -> None:
    plan = plan_query(question)
    assert (plan.shape, plan.subqueries, plan.source) == (shape, parts, "rules")
    assert plan.multi == (shape != "single")


def test_a_question_about_one_episode_or_one_kind_is_not_an_aggregation() -> None:
    assert is_aggregation("What books does Melanie read?")
    assert not is_aggregation("What books did Melanie read during the trip?")
    assert not is_aggregation("What kind of books does Melanie read?")
    assert subqueries("What did Caroline research?") == ("single", [])


@pytest.mark.parametrize(
    "question",
    [
        "What are Joanna's hobbies?",  # "what are X's <plural>"
        "What are Maria's dogs' names?",
        "What are the names of John's children?",
        "What are my hobbies?",
        "What has Melanie painted?",  # present perfect over a person's history
        "What has John cooked?",
        "What kind of classes has James joined?",  # "kind of" with the present perfect
        "How many car shows has Dave attended?",  # a count of a two-word plural
        "What musical artists/bands has Melanie seen?",
        "What does Calvin do to relax?",  # a habit
        "What types of yoga has Maria practiced?",  # several kinds asked for
        "What people has Maria met while volunteering?",  # an irregular plural
        "Which cities did Dave travel to in 2023?",  # a year is no single episode
    ],
)
def test_list_questions_that_name_no_count_are_aggregations(question: str) -> None:
    assert plan_query(question).shape == "aggregate"


@pytest.mark.parametrize(
    "question",
    [
        "What is Caroline's identity?",  # one thing asked for
        "What has John been teaching his siblings?",  # progressive: one ongoing thing
        "What kind of articles has Tim been writing about for the online magazine?",
        "What does Dana do for a living?",
        "What are the new shoes that Melanie got used for?",  # no owner of a plural
        "What are Joanna's hobbies during the trip?",  # one episode named
    ],
)
def test_questions_about_one_thing_stay_single(question: str) -> None:
    assert plan_query(question).shape == "single"


def test_plans_and_settings_refuse_what_they_cannot_mean() -> None:
    with pytest.raises(ValidationError, match="shape"):
        QueryPlan("sideways")
    with pytest.raises(ValidationError, match="needs subqueries"):
        QueryPlan("between")
    with pytest.raises(ValidationError, match="has no subqueries"):
        QueryPlan("aggregate", ("x",))
    with pytest.raises(ValidationError, match="at most 4"):
        QueryPlan("list", tuple("abcde"))
    with pytest.raises(ValidationError, match="non-empty"):
        QueryPlan("list", ("a", " "))
    with pytest.raises(ValidationError, match="keep"):
        PlanSettings(keep=-1)
    with pytest.raises(ValidationError, match="head"):
        PlanSettings(head=0)
    with pytest.raises(ValidationError, match="floor"):
        PlanSettings(floor=1.5)
    with pytest.raises(ValidationError, match="sentence_mix"):
        PlanSettings(sentence_mix=True)  # type: ignore[arg-type]
    assert QueryPlan("between", ("a", "b")).describe() == "between (rules): sub-queries 'a'; 'b'"


# --- placing ----------------------------------------------------------------------------------


def test_gather_keeps_the_first_turns_then_takes_one_per_session_above_the_floor() -> None:
    fused = np.array([10.0, 9.0, 8.0, 7.0, 6.0, 5.9, 5.0, 1.0])
    session = np.array([0, 0, 0, 0, 1, 1, 2, 3])
    order = np.argsort(-fused, kind="stable")
    got, picked = gather(order, fused, session, PlanSettings(keep=2, per_session=1, floor=0.5, head=10))
    # Kept: 0, 1 (session 0 full); gathered: 4 (session 1), 6 (session 2); turn 7 is under the floor.
    assert got.tolist() == [0, 1, 4, 6, 2, 3, 5, 7] and picked == {4, 6}
    got, picked = gather(order, fused, session, PlanSettings(keep=0, per_session=2, floor=0.0, head=3))
    assert got.tolist() == [0, 1, 4, 2, 3, 5, 6, 7] and picked == {0, 1, 4}
    # Interleaved: gathered turns and the fused order take turns after the kept ones.
    got, picked = gather(order, fused, session, PlanSettings(keep=1, floor=0.0, head=6, interleave=True))
    assert got.tolist() == [0, 4, 1, 6, 2, 7, 3, 5] and picked == {4, 6, 7}


def test_merge_interleaves_each_ranking_for_its_share_then_resumes_the_question() -> None:
    main = np.array([0, 1, 2, 3, 4, 5])
    a, b = np.array([7, 0, 8]), np.array([9])
    order, source = merge([main, a, b], 2)
    assert order.tolist() == [0, 7, 9, 1, 8, 2, 3, 4, 5]
    assert source.tolist() == [0, 1, 2, 0, 1, 0, 0, 0, 0]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.floats(0, 10), st.integers(0, 5)), min_size=1, max_size=40),
    st.integers(0, 6),
    st.integers(1, 3),
    st.floats(0, 1),
    st.integers(1, 12),
    st.booleans(),
)
def test_gather_reorders_without_losing_a_turn(
    rows: list[tuple[float, int]], keep: int, per: int, floor: float, head: int, interleave: bool
) -> None:
    fused = np.array([f for f, _ in rows])
    session = np.array([s for _, s in rows])
    order = np.argsort(-fused, kind="stable")
    settings = PlanSettings(keep=keep, per_session=per, floor=floor, head=head, interleave=interleave)
    got, picked = gather(order, fused, session, settings)
    assert sorted(got.tolist()) == sorted(order.tolist())  # a permutation: nothing dropped, nothing doubled
    kept = min(keep, head, len(order))
    assert got[:kept].tolist() == order[:kept].tolist()
    assert picked <= set(got[kept:head].tolist()) and len(picked) <= head - kept
    gathered = list(picked)
    rank = {int(i): r for r, i in enumerate(order)}
    # The fused order's own turns in the head, and everything after it, keep their order.
    others = [rank[int(i)] for i in got[kept:head] if int(i) not in picked]
    assert others == sorted(others)
    tail = [rank[int(i)] for i in got[max(head, kept) :]]
    assert tail == sorted(tail)
    counts: dict[int, int] = {}
    for i in list(got[:kept]) + gathered:
        counts[int(session[i])] = counts.get(int(session[i]), 0) + 1
    assert all(counts[int(session[i])] <= max(per, sum(session[order[:kept]] == session[i])) for i in gathered)
    assert all(fused[i] >= floor * fused[order[0]] for i in gathered)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(st.integers(0, 30), max_size=15, unique=True), min_size=1, max_size=4), st.integers(0, 4))
def test_merge_places_each_share_and_keeps_every_turn_of_the_question(rankings: list[list[int]], share: int) -> None:
    arrays = [np.array(r, dtype=np.int64) for r in rankings]
    order, source = merge(arrays, share)
    assert len(set(order.tolist())) == len(order)  # no turn twice
    assert set(rankings[0]) <= set(order.tolist())
    for r, ranking in enumerate(rankings):
        placed = [int(i) for i, s in zip(order, source, strict=True) if s == r]
        if r:
            assert len(placed) <= share and placed == [i for i in ranking if i in placed]
        # Each ranking's best turn is in the first len(rankings) places when it has a share.
        if share and ranking:
            assert ranking[0] in order[: len(rankings) * share].tolist()


# --- in the engine ------------------------------------------------------------------------------


def _turn(tid: int, session: str, text: str, when: datetime, role: str = "user") -> StoredTurn:
    return StoredTurn(tid, "n", session, tid, 10, Turn(role, text, timestamp=when))


def _books() -> list[StoredTurn]:
    """One session full of talk about one book; three other sessions each mention another."""
    out = []
    tid = 1
    for i in range(8):
        out.append(_turn(tid, "s1", f"The mushroom book I finished has a chapter on morels, part {i}.", T0))
        tid += 1
    for day, book in enumerate(
        ("a memoir by an astronaut", "a thriller set on an oil rig", "a novel about a family restaurant"), 1
    ):
        when = T0 + timedelta(days=10 * day)
        out.append(_turn(tid, f"s{day + 1}", "Can you help me plan a garden bed layout?", when))
        out.append(_turn(tid + 1, f"s{day + 1}", f"Also, I finished {book} last night, what a book.", when))
        out.append(_turn(tid + 2, f"s{day + 1}", "Thanks, that layout works for the tomatoes.", when))
        tid += 3
    return out


def test_an_aggregation_question_gathers_one_mention_per_session() -> None:
    question = "How many books have I finished?"
    mentions = {10, 13, 16}
    planned = HybridIndex()
    planned.add_turns(_books())
    off = HybridIndex(planning=OFF)
    off.add_turns(_books())
    before = [h.turn_ids[0] for h in off.search(question, k=8)]
    assert mentions.isdisjoint(before)  # one session's copies crowd the others out
    hits = planned.search(question, k=8)
    assert mentions <= {h.turn_ids[0] for h in hits}
    keep = PlanSettings().keep
    assert [h.turn_ids[0] for h in hits[:keep]] == before[:keep]  # the engine's first turns stay
    assert all(h.score.get("gathered") == 1.0 for h in hits[keep:] if h.turn_ids[0] in mentions)
    assert planned.plan(question).shape == "aggregate" and off.plan(question) == QueryPlan()


def test_each_sub_query_of_an_interval_question_holds_a_place_at_the_top() -> None:
    turns = [
        _turn(i, f"s{i}", f"We talked about the garden and the tomatoes again, day {i}.", T0) for i in range(1, 30)
    ]
    turns.append(_turn(40, "d", "Yesterday I had a molar filled at the dentist.", T0 + timedelta(days=40)))
    turns.append(
        _turn(41, "c", "Two days ago I saw a string quartet concert in the old church.", T0 + timedelta(days=60))
    )
    # (The question's own words are about the garden; the plan names the two events.)
    question = "How long was it between the garden talks about tomatoes?"
    index = HybridIndex()
    index.add_turns(turns)
    plan = QueryPlan("between", ("my dentist visit", "the quartet concert"))
    hits = index.search(question, k=3, plan=plan)
    assert [h.turn_ids[0] for h in hits][1:] == [40, 41]
    assert [h.score.get("subquery") for h in hits] == [None, 1.0, 2.0]
    assert hits[1].score["fused"] == index.search("my dentist visit", k=1, plan=QueryPlan())[0].score["fused"]
    # Without the plan the garden turns fill the top.
    assert {40, 41}.isdisjoint(h.turn_ids[0] for h in index.search(question, k=3, plan=QueryPlan()))
    with pytest.raises(ValidationError, match="plan"):
        index.search(question, plan="between")  # type: ignore[arg-type]


def test_a_planned_question_ranks_by_sentence_vectors_and_a_single_one_does_not() -> None:
    emb = HashEmbedder(64)
    turns = [
        _turn(
            1,
            "a",
            "Can you help me fix the leaking kitchen sink before the weekend guests arrive? "
            "Side note: I finished a thriller set on an oil rig.",
            T0,
        ),
        _turn(2, "b", "What paint should I buy for the fence?", T0 + timedelta(days=3)),
    ]
    index = HybridIndex(emb)
    index.add_turns(turns)
    one = "Side note: I finished a thriller set on an oil rig."
    assert index.sentences and one.split(": ", 1)[0]
    sig_single, _ = index.signals("thriller oil rig")
    sig_mixed, _ = index.signals("thriller oil rig", sentence_mix=1.0)
    assert sig_mixed["vector"][0] > sig_single["vector"][0]  # the clause alone is nearer than the whole turn
    assert sig_mixed["vector"][1] == pytest.approx(sig_single["vector"][1])  # one sentence: no sentence vectors
    no = HybridIndex(emb, sentences=False)
    no.add_turns(turns)
    assert no.signals("thriller oil rig", sentence_mix=1.0)[0]["vector"][0] == pytest.approx(sig_single["vector"][0])


def test_plan_cv_ranks_as_the_engine_does(tmp_path: Path) -> None:
    from benchmarks.data.make_recall_chats import generate
    from benchmarks.locomo import plan_cv
    from benchmarks.locomo.synth import load_synth
    from stratamem.store import SQLiteStore

    data = generate(seed=2, haystacks=1, sessions=12)
    store = SQLiteStore(tmp_path / "s.db")
    conv = load_synth(store, data)[0]
    emb = HashEmbedder(32)
    cached = plan_cv.collect([conv], emb)
    assert {q.plan.shape for q in cached} >= {"single", "aggregate", "between", "choice"}
    points = [
        plan_cv.Point((5, 1, 0.5, 10, False), 3, 0.5, 0.5),
        plan_cv.Point((0, 2, 0.3, 15, True), 2, 1.0, 0.0),
        plan_cv.OFF,
    ]
    for point in points:
        index = HybridIndex(emb, Weights(event_date=point.event), planning=point.settings())
        index.add_turns(conv.turns)
        pos = {st.id: i for i, st in enumerate(index.turns)}
        for q, cq in zip(conv.questions, cached, strict=True):
            engine = [pos[h.turn_ids[0]] for h in index.search(q.text, k=10, now=q.question_date)]
            assert plan_cv.rank(cq, point, 10).tolist() == engine, (point, q.text)
    store.close()


# --- in a context: the plan is noted, and two evidence turns on one topic both stay --------------


def test_the_context_notes_the_plan_and_keeps_two_evidence_turns_on_one_topic(tmp_path: Path) -> None:
    config = Config().replace(pyramid={"enabled": False})
    with Memory(tmp_path / "m.db", namespace="n", config=config, embedder=None) as mem:
        sessions = []
        for day in range(6):
            sessions.append(
                IngestSession(
                    f"s{day}",
                    [
                        Turn(
                            "user", f"What should I cook for dinner on day {day}?", timestamp=T0 + timedelta(days=day)
                        ),
                        Turn(
                            "assistant", "A tray of roast vegetables with lentils.", timestamp=T0 + timedelta(days=day)
                        ),
                    ],
                )
            )
        first = "I adopted a cat named Luna from the shelter on Elm Street."
        second = "I adopted a second cat, a ginger one called Miso, from the shelter on Elm Street."
        sessions.insert(1, IngestSession("cat1", [Turn("user", first, timestamp=T0 + timedelta(days=1, hours=2))]))
        sessions.insert(4, IngestSession("cat2", [Turn("user", second, timestamp=T0 + timedelta(days=3, hours=2))]))
        mem.add_sessions(sessions)
        ctx = mem.context("How many cats have I adopted from the shelter?", budget=400, policy="recall")
        assert first in ctx.text and second in ctx.text  # same topic, same shelter: two pieces of evidence
        assert any(n.startswith("query plan: aggregate (rules)") for n in ctx.manifest.notes)
        assert not [m for m in ctx.manifest.near_misses if m.duplicate_of is not None]


def test_the_cv_guard_allows_only_settings_that_keep_every_type_near_planning_off() -> None:
    from benchmarks.locomo import plan_cv

    # Two points (0 = planning off), two conversations, two types of 10 questions each.
    by_type = np.array([[[8.0, 9.0], [8.0, 9.0]], [[9.0, 9.0], [9.0, 8.0]]])  # [P, S, T] summed r@10
    tables = plan_cv.Tables(
        r10=by_type.sum(axis=2),
        bud=np.zeros((2, 2)),
        by_type=by_type,
        counts=np.array([20.0, 20.0]),
        type_counts=np.full((2, 2), 10.0),
        samples=["a", "b"],
        types=["x", "y"],
    )
    # Held out "a": trained on "b", where point 1 loses 0.1 on type y: not allowed.
    assert plan_cv.guarded([tables], 0, 0, 0.01).tolist() == [True, False]
    # Held out "b": trained on "a", where point 1 loses nothing.
    assert plan_cv.guarded([tables], 0, 1, 0.01).tolist() == [True, True]
    assert plan_cv.guarded([tables], 0, 0, 0.1).tolist() == [True, True]
