"""The default hybrid policy sizes its recent window by how much the query matches it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from stratamem import Memory
from stratamem.context import Recalled
from stratamem.context.window import WINDOW_FLOOR, is_follow_up, window_fraction
from stratamem.records import StoredTurn, Turn

T0 = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
NEEDLE = "The staging database password rotates every 45 days, set by Priya."
FILLER = [
    "Let's look at the CSS for the header.",
    "The button colour should be teal.",
    "I pushed the layout fix.",
    "Tests pass on my machine.",
    "Can you review the PR?",
    "Sure, looking now.",
    "The footer overlaps on mobile.",
    "Fixed with a media query.",
]
LAST = [
    "For the orders table I suggest a composite index on (customer_id, created_at).",
    "Would a partial index on open orders help the orders table too?",
    "Yes: a partial index WHERE status = 'open' keeps the orders table index small.",
]


@pytest.fixture
def mem(tmp_path: Path) -> Memory:
    m = Memory(tmp_path / "w.db", namespace="w")
    msgs = []
    for i in range(240):
        text = NEEDLE if i == 6 else f"{FILLER[i % len(FILLER)]} (note {i})"
        msgs.append(
            {
                "role": "user" if i % 2 == 0 else "assistant",
                "content": text,
                "timestamp": (T0 + timedelta(minutes=i)).isoformat(),
            }
        )
    m.add(msgs[:120], session="week1")
    tail = [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": t,
            "timestamp": (T0 + timedelta(days=7, minutes=i)).isoformat(),
        }
        for i, t in enumerate(LAST)
    ]
    m.add(msgs[120:] + tail, session="week2")
    yield m
    m.close()


def _window_tokens(ctx) -> int:
    return sum(i.tokens for i in ctx.manifest.items if i.reason == "recent_window")


def test_a_question_about_the_past_gets_a_small_window_and_the_budget_goes_to_recall(mem: Memory) -> None:
    ctx = mem.context(
        "How often does the staging database password rotate?", budget=1200, session="week2", format="text"
    )
    assert 0 < _window_tokens(ctx) <= int(1200 * 0.5 * WINDOW_FLOOR)
    assert NEEDLE in ctx.text
    [note] = [n for n in ctx.manifest.notes if n.startswith("hybrid: window match")]
    assert "window keeps 10% of its share; recalled history draws first" in note
    assert any(m.reason == "window_shrunk_for_recall" for m in ctx.manifest.near_misses)
    # Recall takes what the window gave up. The filler repeats itself: one copy of each
    # sentence is recalled and the repeats are left out as duplicates of the shown copy
    # (docs/context.md), so a few distinct turns hold everything that matched.
    recalled = [i for i in ctx.manifest.items if i.reason == "recalled"]
    assert len(recalled) >= 9
    shown = {i.id for i in ctx.manifest.items}
    dupes = [m for m in ctx.manifest.near_misses if m.reason == "duplicate"]
    assert len(dupes) > 50 and all(m.duplicate_of in shown for m in dupes)


def test_without_a_query_or_with_a_follow_up_the_window_keeps_its_share(mem: Memory) -> None:
    full = _window_tokens(mem.context(budget=600, session="week2", format="text"))
    assert full > 0.4 * 600
    for query in ("go on", "can you make it shorter?"):
        ctx = mem.context(query, budget=600, session="week2", format="text")
        assert _window_tokens(ctx) == full, query
        assert not any(n.startswith("hybrid: window match") for n in ctx.manifest.notes)
        # With MiniLM every turn scores a little; a follow-up still recalls nothing and says so.
        assert "follow-up query: nothing recalled, the recent window holds the thread" in ctx.manifest.notes
        assert not any(i.reason == "recalled" for i in ctx.manifest.items)


def test_a_question_about_the_last_turns_keeps_the_window(mem: Memory) -> None:
    ctx = mem.context(
        "Which partial index did you suggest for the orders table?", budget=600, session="week2", format="text"
    )
    window = {i.id for i in ctx.manifest.items if i.reason == "recent_window"}
    newest = {f"turn:{st.id}" for st in mem.turns("week2")[-3:]}
    assert newest <= window
    assert _window_tokens(ctx) > 0.4 * 600
    assert not any(n.startswith("hybrid: window match") for n in ctx.manifest.notes)


def _r(i: int, fused: float) -> Recalled:
    st = StoredTurn(
        id=i, namespace="n", session="s", seq=i, tokens=1, turn=Turn(role="user", content=f"t{i}", timestamp=T0)
    )
    return Recalled(st, {"fused": fused})


def test_window_fraction_is_read_from_the_rank_of_the_best_window_turn() -> None:
    # Recalled out of score order (updates reorder hits): ranks come from the scores.
    hits = [_r(i, 3.0 - 0.1 * i) for i in range(1, 13)][::-1]
    q = "Where did the team put the staging password?"
    assert window_fraction(q, hits, {1}) == (1.0, 1.0)
    assert window_fraction(q, hits, {3, 9}) == (1.0, pytest.approx(0.8))  # rank 2: among the top 3
    assert window_fraction(q, hits, {6}) == (WINDOW_FLOOR, pytest.approx(0.5))  # rank 5
    assert window_fraction(q, hits, {11, 12}) == (WINDOW_FLOOR, 0.0)  # ranks 10 and 11
    assert window_fraction(q, hits, {99}) == (WINDOW_FLOOR, 0.0)  # not recalled at all
    keep, match = window_fraction(q, hits, {5})  # rank 4
    assert match == pytest.approx(0.6) and keep == pytest.approx(WINDOW_FLOOR + (1 - WINDOW_FLOOR) / 3)
    assert window_fraction(None, hits, {3}) == (1.0, 1.0)
    assert window_fraction(q, [], {3}) == (1.0, 1.0)
    assert window_fraction("and then?", hits, {3}) == (1.0, 1.0)
    assert is_follow_up("what about the second option?") and not is_follow_up("What is Caroline's job?")
    assert not is_follow_up("what did I say last time") and not is_follow_up("What is the vault code?")
