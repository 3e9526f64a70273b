"""Context assembly: recall into the budget, no duplicates, policies, a truthful manifest."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stratamem import Memory, ValidationError
from stratamem.providers import structural_problems
from stratamem.tokens import get_tokenizer

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


def _long_history(mem: Memory) -> None:
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
    mem.add(msgs[:120], session="week1")
    mem.add(msgs[120:], session="week2")


@pytest.fixture
def history(tmp_path: Path) -> Memory:
    mem = Memory(tmp_path / "h.db", namespace="team", embedder=None)
    _long_history(mem)
    return mem


def test_an_old_fact_is_recalled_verbatim_into_a_small_budget(history: Memory) -> None:
    ctx = history.context("How often does the staging password rotate?", budget=300, session="week2")
    assert ctx.tokens <= 300
    needle_id = history.turns("week1")[6].id
    recalled = [i for i in ctx.manifest.items if i.reason == "recalled"]
    assert needle_id in {i.turn_ids[0] for i in recalled}
    assert NEEDLE in ctx.messages[0]["content"]
    assert ctx.messages[0]["role"] == "system"
    # The window is the newest part of week2, after the system block.
    assert ctx.messages[-1]["content"] == f"{FILLER[239 % len(FILLER)]} (note 239)"
    assert "no embedder configured: recall is lexical only (BM25 + session structure)" in ctx.manifest.notes


def test_nothing_appears_twice(history: Memory) -> None:
    ctx = history.context("note 238 footer", budget=2000, session="week2")
    ids = [i.id for i in ctx.manifest.items]
    assert len(ids) == len(set(ids))
    dupes = [m for m in ctx.manifest.near_misses if m.reason == "duplicate_of_window"]
    window = {i.id for i in ctx.manifest.items if i.reason == "recent_window"}
    assert dupes and all(m.id in window for m in dupes)


def test_recall_policy_spends_the_whole_budget_on_history(history: Memory) -> None:
    ctx = history.context("staging password rotation", budget=500, policy="recall", format="text")
    reasons = {i.reason for i in ctx.manifest.items}
    # No recent window under this policy, and recalled turns come before summaries:
    # here they use the whole budget, so no summary is left room. The filler turns
    # repeat each other: one copy of each is shown, the room freed goes to more turns.
    assert reasons == {"recalled"}
    dupes = [m for m in ctx.manifest.near_misses if m.reason == "duplicate"]
    shown = {i.id for i in ctx.manifest.items}
    assert dupes and all(m.duplicate_of in shown for m in dupes)
    assert NEEDLE in ctx.text
    assert ctx.text.startswith("## Earlier conversation (recalled, verbatim)\n## 5 January 2026\n")


def test_without_a_query_the_window_shares_with_summaries_only(history: Memory) -> None:
    ctx = history.context(budget=400, session="week2")
    # The filler history repeats itself: every summary only restates sentences the
    # window shows, so none is shown (one copy of each fact), and each says which.
    assert {i.reason for i in ctx.manifest.items} == {"recent_window"}
    window_ids = {i.id for i in ctx.manifest.items}
    dupes = [m for m in ctx.manifest.near_misses if m.kind in ("segment", "consolidation")]
    assert dupes and all(m.reason == "duplicate" and m.duplicate_of in window_ids for m in dupes)
    window = sum(i.tokens for i in ctx.manifest.items if i.reason == "recent_window")
    # With nothing recalled, the window gets current / (current + bulk) of the budget.
    assert 0.5 * 400 < window <= 0.5 / 0.7 * (400 - 3)


def test_unknown_policy_is_refused(history: Memory) -> None:
    with pytest.raises(ValidationError, match="unknown policy 'greedy'"):
        history.context("x", budget=100, policy="greedy")


_MEM: dict[str, Memory] = {}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
# From 4: 3 Anthropic tokens are 2 o200k tokens, below the request overhead (test_shells checks it raises).
@given(
    budget=st.integers(min_value=4, max_value=2500),
    fmt=st.sampled_from(["openai", "anthropic", "text"]),
    policy=st.sampled_from(["hybrid", "topics", "pyramid", "state_first", "recall"]),
    query=st.sampled_from(["staging password", "footer media query", "teal button colour", "zzz"]),
)
def test_assembly_never_exceeds_the_budget_and_stays_valid(
    tmp_path_factory: pytest.TempPathFactory, budget: int, fmt: str, policy: str, query: str
) -> None:
    if "m" not in _MEM:
        _MEM["m"] = Memory(tmp_path_factory.mktemp("prop") / "p.db", namespace="p", embedder=None)
        _long_history(_MEM["m"])
    ctx = _MEM["m"].context(query, budget=budget, session="week2", format=fmt, policy=policy)
    assert ctx.tokens <= budget
    tok = get_tokenizer()
    if fmt == "text":
        assert ctx.tokens == tok.count(ctx.text)
    elif ctx.messages or fmt == "openai":
        assert structural_problems([m for m in ctx.messages if m["role"] != "system"], fmt) == []
    else:
        # An empty Anthropic request is invalid (review #8): only when nothing fits at all.
        assert ctx.manifest.items == ()
    # Nothing twice: each verbatim turn once, summaries disjoint, and no summary
    # that only restates turns shown verbatim.
    verbatim = [i.turn_ids[0] for i in ctx.manifest.items if i.kind == "turn"]
    assert len(verbatim) == len(set(verbatim))
    summarized = [t for i in ctx.manifest.items if i.reason == "summary" for t in i.turn_ids]
    assert len(summarized) == len(set(summarized))
    for i in ctx.manifest.items:
        if i.reason == "summary":
            assert not set(i.turn_ids) <= set(verbatim)


def test_hot_items_are_kept_and_cold_items_recalled_into_the_prompt(history: Memory) -> None:
    hot = history.items.add("Deploys happen on Tuesdays only.", "decision")
    cold = history.items.add("The on-call rota is kept in the Ops wiki under rotations.", "fact")
    history.items.spill(ids=[cold.id])
    ctx = history.context("where is the on-call rota?", budget=600, session="week2")
    by_id = {i.id: i for i in ctx.manifest.items}
    assert by_id[f"item:{hot.id}"].reason == "hot_item"
    assert by_id[f"item:{cold.id}"].reason == "recalled_item"
    system = ctx.messages[0]["content"]
    assert system.startswith(
        "## Remembered facts\n- (decision) Deploys happen on Tuesdays only.\n"
        "- (fact) The on-call rota is kept in the Ops wiki under rotations."
    )
    assert ctx.tokens <= 600


def test_assembling_a_context_changes_no_memory_item(history: Memory) -> None:
    item = history.items.add("The on-call rota is kept in the Ops wiki under rotations.", "fact")
    history.items.spill(ids=[item.id])
    before = history.items.get(item.id)
    for _ in range(3):
        ctx = history.context("where is the on-call rota kept?", budget=600, session="week2")
        assert f"item:{item.id}" in {i.id for i in ctx.manifest.items}
    assert history.items.get(item.id) == before


def _topic_memory(tmp_path: Path) -> Memory:
    from stratamem import Config

    mem = Memory(
        tmp_path / "topics.db",
        namespace="t",
        config=Config().replace(pyramid={"preset": "topics", "segmenter": "topic", "max_message_chars": 40}),
        embedder=None,
    )
    t = T0
    for topic in range(6):
        msgs = [{"role": "user", "content": f"new topic: subject {topic} " + "detail " * 3, "timestamp": t.isoformat()}]
        for i in range(5):
            t += timedelta(minutes=1)
            msgs.append(
                {
                    "role": "assistant" if i % 2 == 0 else "user",
                    "content": f"about subject {topic}, point {i} " + "x" * (60 if i == 4 else 0),
                    "timestamp": t.isoformat(),
                }
            )
        t += timedelta(hours=1)  # a silence seals the topic
        mem.add(msgs, session="s")
    return mem


def test_topics_policy_shows_the_current_topic_then_topic_and_bulk_summaries(tmp_path: Path) -> None:
    mem = _topic_memory(tmp_path)
    ctx = mem.context("anything", budget=2000, session="s", policy="topics", format="text")
    items = ctx.manifest.items
    current = [i.turn_ids[0] for i in items if i.reason == "recent_window"]
    assert current == [t.id for t in mem.turns("s")[-6:]]  # the open topic, subject 5
    # Earlier topics, newest first; they fit, so each is expanded to its turns.
    expanded = [i for i in items if i.reason == "expanded"]
    assert [i.turn_ids[0] for i in expanded] == [mem.turns("s")[k].id for k in (24, 18, 12, 6, 0)]
    # The current topic is far under its half of the budget: its long last message is shown whole.
    assert ctx.text.endswith("about subject 5, point 4 " + "x" * 60)
    assert ctx.tokens <= 2000
    # A tighter budget: the newest topic still expands; the next ones are hot and not
    # summarized yet: shown expanded, as an excerpt or a summary made on demand, or (where
    # not even a summary line fits) left out over budget; never as a placeholder.
    small = mem.context("anything", budget=300, session="s", policy="topics", format="text")
    assert [(i.turn_ids[0], i.reason) for i in small.manifest.items if i.kind == "segment"] == [
        (mem.turns("s")[24].id, "expanded"),
        (mem.turns("s")[18].id, "summary_on_demand"),
    ]
    assert {m.reason for m in small.manifest.near_misses} == {"over_budget"}
    assert "(not summarized yet)" not in small.text
    # Escalation step 1: with 120 tokens the current topic (81 stored tokens) exceeds its half of the budget, so the
    # long last message is shown cut, with a marker; the stored turn is whole.
    tiny = mem.context("anything", budget=120, session="s", policy="topics", format="text")
    assert tiny.text.endswith("about subject 5, point 4 xxxxxxxxxxxxxxx [truncated: 45 of 85 characters not shown]")
    assert mem.turns("s")[-1].text.endswith("x" * 60)
    assert small.tokens <= 300
