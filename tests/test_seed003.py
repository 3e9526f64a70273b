"""Seed 003 (hot/cold memory items), the row issue 27's audit found short: Example 1 with the default
(hybrid) recall did not promote turn 2 nor bring "$50K" into the context, where lexical mode did.

The scores that decide promotion must mean the same thing with and without vectors, so each case
runs in both modes (the local MiniLM model, and no embedder) and must come out the same.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stratamem import Config, Memory
from stratamem.tokens import get_tokenizer

TOKENIZER = get_tokenizer("o200k_base")
MODES = {"hybrid": {}, "lexical": {"embedder": None}}


def exactly(n: int, head: str) -> str:
    """``head`` padded with one-token words to exactly ``n`` tokens (seed 003's 200-token turns)."""
    text = head
    while TOKENIZER.count(text) < n:
        text += " x"
    return text


@pytest.mark.parametrize("mode", sorted(MODES))
def test_seed003_example_1_promotes_turn_2_in_both_modes(tmp_path: Path, mode: str) -> None:
    """Seed 003 Example 1 as written: turn 2 ("$50K budget") spilled to cold is recalled, promoted, in context."""
    config = Config().replace(items={"hot_token_limit": 1200, "spill_count": 2})
    with Memory(tmp_path / "m.db", namespace="agent", config=config, **MODES[mode]) as mem:
        mem.add({"role": "user", "content": "Let's discuss the project proposal."}, session="session-123")
        texts = {n: exactly(200, f"Turn {n}: about the project proposal scope and timeline") for n in range(1, 30)}
        texts[2] = exactly(200, "Turn 2: we agreed on a $50K budget for the proposal")
        ids = {n: mem.items.add(texts[n], "message", session="session-123").id for n in range(1, 30)}
        assert mem.items.get(ids[2]).tier == "cold"
        query = "What was the budget we discussed earlier?"
        found = mem.items.recall(query, session="session-123")
        assert found.mode == mode
        assert [i.id for i in found.items][0] == ids[2]
        assert found.scores[ids[2]] >= config.items.promote_threshold
        assert found.promoted == (ids[2],) and mem.items.get(ids[2]).tier == "hot"
        ctx = mem.context(query, session="session-123", format="text")
        assert any(i.id == f"item:{ids[2]}" and i.reason == "hot_item" for i in ctx.manifest.items)
        assert "$50K budget" in ctx.text


def _venue(mem: Memory) -> dict[str, int]:
    facts = {
        "deposit": "The venue deposit of 3,000 euros is due on 14 May.",
        "menu": "Lunch is vegetarian with one fish option.",
        "bus": "The coach leaves the hotel at 8:15 each morning.",
    }
    return {k: mem.items.add(v, "fact", tier="cold").id for k, v in facts.items()}


@pytest.mark.parametrize("mode", sorted(MODES))
def test_seed003_a_second_case_promotes_the_same_items_in_both_modes(tmp_path: Path, mode: str) -> None:
    """A fact named by every content word of the question is promoted in both modes; a question that
    shares no word and no meaning with the facts promotes nothing in either."""
    with Memory(tmp_path / "m.db", namespace="n", **MODES[mode]) as mem:
        ids = _venue(mem)
        found = mem.items.recall("When is the venue deposit due?")
        assert found.promoted == (ids["deposit"],)
        assert found.scores[ids["deposit"]] == 1.0
        assert mem.items.recall("Who won the chess tournament?").promoted == ()


def test_seed003_calibrated_cosine_only_adds_evidence() -> None:
    """The score rule itself: lexical alone without vectors; vectors never lower it; the cosine is put on
    the 0-1 scale between the calibrated floor and ceiling."""
    from stratamem.items.recall import COSINE_CEILING, COSINE_FLOOR, match_score

    assert match_score(0.5, None) == 0.5
    assert match_score(1.0, 0.0) == 1.0
    assert match_score(0.0, COSINE_FLOOR) == 0.0
    assert match_score(0.0, COSINE_CEILING) == 1.0
    assert match_score(0.0, (COSINE_FLOOR + COSINE_CEILING) / 2) == pytest.approx(0.5)
    assert match_score(0.5, (COSINE_FLOOR + COSINE_CEILING) / 2) == pytest.approx(0.75)
    grid: list[Any] = [(lex / 10, cos / 20) for lex in range(11) for cos in range(-4, 21)]
    assert all(match_score(lex, cos) >= lex - 1e-12 for lex, cos in grid)
