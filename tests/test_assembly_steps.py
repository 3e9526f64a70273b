"""The assembly's steps, one rule each: what a reader of ``context/assemble.py`` relies on."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from stratamem.context import Candidates, FixedBlock, ItemUnit, Recalled, SummaryUnit, assemble, get_policy
from stratamem.context.assembly import Allocation, Assembly
from stratamem.records import StoredTurn, Turn
from stratamem.tokens import get_tokenizer

TOK = get_tokenizer("o200k_base")
T0 = datetime(2026, 3, 3, 14, 0, tzinfo=UTC)
SHARES = (0.5, 0.3, 0.2)


def turn(i: int, text: str, role: str = "user", session: str = "now") -> StoredTurn:
    return StoredTurn(
        id=i,
        namespace="n",
        session=session,
        seq=i,
        tokens=TOK.count(text) + 4,
        turn=Turn(role=role, content=text, timestamp=T0 + timedelta(minutes=i)),
    )


def words(n: int, seed: str) -> str:
    return " ".join(f"{seed}{k}" for k in range(n))


def summary(i: int, text: str, turn_ids: tuple[int, ...], **kw: object) -> SummaryUnit:
    return SummaryUnit(
        f"node:{i}", "segment", f"- [3 March 2026, old, {len(turn_ids)} turns] {text}", turn_ids, tier="warm", **kw
    )  # type: ignore[arg-type]


def test_the_window_is_contiguous_and_reads_no_further_than_the_first_turn_that_does_not_fit() -> None:
    read: list[int] = []

    def newest_first() -> Iterator[StoredTurn]:
        for st in (
            turn(5, "Short question about the header?"),
            turn(4, words(400, "w"), role="assistant"),
            turn(3, "Another short one."),
            turn(2, "Never read."),
        ):
            read.append(st.id)
            yield st

    ctx = assemble(Candidates(recent=newest_first()), budget=300, tokenizer=TOK, fmt="text", policy="hybrid")
    assert [i.id for i in ctx.manifest.items] == ["turn:5"]
    # Turn 3 would fit, but the window is contiguous: the turn too big for it ends it.
    assert [(m.id, m.reason) for m in ctx.manifest.near_misses] == [("turn:4", "over_budget")]
    assert read == [5, 4]


def test_sections_and_manifest_entries_come_in_step_order() -> None:
    old = turn(3, "Ines Duarte runs the Northbeam warehouse and plans pickups a week ahead.", session="old")
    cands = Candidates(
        fixed=[FixedBlock("instructions", "instructions", "## Project instructions", "Use ruff and pytest.")],
        recent=[turn(21, "And the footer colours?", role="assistant"), turn(20, "Let us look at the header.")],
        recalled=[Recalled(old, {"fused": 1.0})],
        summaries=[summary(9, "Stock counts come from the database every night.", (1, 2))],
        items=[ItemUnit("item:7", "- (decision) Deploy on Fridays only", "hot_item", "hot")],
    )
    ctx = assemble(cands, budget=2000, tokenizer=TOK, fmt="text", policy="state_first", query="Northbeam pickups")
    titles = [
        "## Project instructions",
        "## Remembered facts",
        "## Earlier conversation (recalled, verbatim)",
        "## Summaries of older conversation",
    ]
    assert sorted(titles, key=ctx.text.index) == titles
    assert ctx.text.index(titles[-1]) < ctx.text.index("Let us look at the header.")
    assert [(i.id, i.reason) for i in ctx.manifest.items] == [
        ("instructions", "always_included"),
        ("item:7", "hot_item"),
        ("turn:3", "recalled"),
        ("node:9", "summary"),
        ("turn:20", "recent_window"),
        ("turn:21", "recent_window"),
    ]


def _allocate(policy: str, cands: Candidates, budget: int = 1000) -> Allocation:
    asm = Assembly.start(budget, TOK, "text", None, True)
    return get_policy(policy).allocate(asm, SHARES, cands)


def test_sections_with_nothing_to_show_give_their_shares_away() -> None:
    recent = [turn(2, "Hello there.")]
    recalled = [Recalled(turn(1, "An older turn.", session="old"), {"fused": 1.0})]
    assert _allocate("hybrid", Candidates(recent=recent)) == Allocation(1.0, 0.0, 0.0, 1000)
    both = _allocate("hybrid", Candidates(recent=recent, recalled=recalled))
    assert (both.current, both.history, both.bulk) == pytest.approx((0.625, 0.375, 0.0))
    # recall has no window: with nothing recalled nothing takes the budget ...
    assert _allocate("recall", Candidates(recent=recent)) == Allocation(0.0, 0.0, 0.0, 1000)
    ctx = assemble(Candidates(recent=recent), budget=500, tokenizer=TOK, fmt="text", policy="recall")
    assert ctx.manifest.items == () and ctx.text == ""
    # ... and with something recalled, recalled history takes the window's share too.
    assert _allocate("recall", Candidates(recalled=recalled)) == Allocation(0.0, 1.0, 0.0, 1000)


def test_pyramid_keeps_its_macros_a_reserve_and_shows_a_warm_chunk_it_expands_once() -> None:
    chunk_turns = [
        turn(11, "We picked PostgreSQL 16 for orders.", session="old"),
        turn(12, "Row locks keep the stock counts right.", role="assistant", session="old"),
    ]
    chunk = summary(
        4, "Database chosen.", (11, 12), expand=lambda: chunk_turns, expanded_tokens=sum(t.tokens for t in chunk_turns)
    )
    macro = SummaryUnit(
        "node:8",
        "consolidation",
        "- [March 2026, old, 40 turns] The order service, start to launch.",
        (1, 2, 11, 12),
        tier="cold",
    )
    cands = Candidates(recalled=[Recalled(chunk_turns[0], {"fused": 2.0})], summaries=[chunk], bulks=[macro])
    alloc = _allocate("pyramid", cands)
    assert alloc.reserve == TOK.count(macro.text) + 1 < alloc.tokens(alloc.bulk)
    ctx = assemble(cands, budget=1000, tokenizer=TOK, fmt="text", policy="pyramid", query="which database")
    assert [(m.id, m.reason) for m in ctx.manifest.near_misses] == [("turn:11", "in_warm_chunk")]
    assert [(i.id, i.reason) for i in ctx.manifest.items] == [("node:4", "expanded"), ("node:8", "summary")]
    assert ctx.text.count("We picked PostgreSQL 16 for orders.") == 1


def test_topics_fill_their_share_then_bulks_then_the_topics_left_waiting() -> None:
    first = summary(1, words(60, "a"), (1,), score={"recency": 0.0})
    second = summary(2, words(260, "b"), (2,), score={"recency": -1.0})
    bulk = SummaryUnit("node:3", "consolidation", f"- [March 2026, old, 9 turns] {words(60, 'c')}", (5, 6), tier="cold")
    ctx = assemble(
        Candidates(summaries=[first, second], bulks=[bulk]), budget=1000, tokenizer=TOK, fmt="text", policy="topics"
    )
    # The topics' share is 30%: the second topic waits for what the bulk leaves.
    assert [i.id for i in ctx.manifest.items] == ["node:1", "node:3", "node:2"]
    assert ctx.manifest.near_misses == ()


def test_an_unknown_policy_is_a_validation_error_for_the_pure_assembly_too() -> None:
    from stratamem import ValidationError

    with pytest.raises(ValidationError, match="expected one of hybrid, topics, pyramid, state_first, recall"):
        assemble(Candidates(), budget=100, tokenizer=TOK, fmt="text", policy="newest")
