"""Role routing: which role's turns a query asks about, and the boost it gives them."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from stratamem.records import StoredTurn, Turn
from stratamem.retrieve import HybridIndex, Weights
from stratamem.retrieve.roles import role_code, role_cue


@pytest.mark.parametrize(
    ("query", "cue"),
    [
        ("What soil ratio did you suggest for my pots?", "assistant"),
        ("What kind of wall fixings did you tell me to buy?", "assistant"),
        ("In one of our chats you gave me a tip. Which ride did you say to take?", "assistant"),
        ("What car do I drive?", "user"),
        ("Where is my home at the moment?", "user"),
        ("Can you recommend something to watch on Friday night?", None),  # a request, not a recall
        ("When did Caroline go to the support group?", None),
    ],
)
def test_the_cue_of_a_query(query: str, cue: str | None) -> None:
    assert role_cue(query) == cue


def test_only_unnamed_speakers_have_a_routed_role() -> None:
    assert [role_code(t) for t in (["user", "car"], ["assistant", "soil"], ["caroline", "user"], [])] == [1, 2, 0, 0]
    # The stored, space-joined form gives the same codes without being split.
    assert [role_code(t) for t in ("user car", "assistant soil", "caroline user", "user", "")] == [1, 2, 0, 1, 0]


def _turn(i: int, role: str, text: str, name: str | None = None) -> StoredTurn:
    t = Turn(role, text, name=name, timestamp=datetime(2024, 1, 1, 0, i, tzinfo=UTC))
    return StoredTurn(id=i, namespace="n", session="s", seq=i, turn=t, tokens=5)


def test_the_boost_goes_to_the_asked_role_s_turns_only() -> None:
    turns = [
        _turn(1, "user", "my pots need soil"),
        _turn(2, "assistant", "use a soil ratio of two to one"),
        _turn(3, "user", "thanks for the soil tip", name="Ana"),
    ]
    index = HybridIndex(None, replace(Weights(), role=0.5))
    index.add_turns(turns)
    sig, _ = index.signals("What soil ratio did you suggest for my pots?", weighted_only=True)
    assert sig["role"].tolist() == [0.0, 1.0, 0.0]
    parts = {h.turn_ids[0]: h.score for h in index.search("What soil ratio did you suggest for my pots?", k=3)}
    assert (parts[2]["role"], parts[1]["role"], parts[3]["role"]) == (0.5, 0.0, 0.0)
    assert "role" not in index.signals("When was the soil bought?", weighted_only=True)[0]
    off = HybridIndex(None, replace(Weights(), role=0.0))
    off.add_turns(turns)
    assert "role" not in off.signals("What soil ratio did you suggest?", weighted_only=True)[0]
