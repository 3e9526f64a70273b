"""Memory.search: ranked turns and summaries with score breakdowns; Memory.namespaces on both backends."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from pg import fresh_schema, schema_url

from stratamem import Config, Memory
from stratamem.errors import NotFoundError, ValidationError
from stratamem.search import SearchHit
from stratamem.store.open import open_store

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
CFG = Config().replace(
    pyramid={
        "micro_chunk_size": 4,
        "hot_chunks": 1,
        "warm_max_age_hours": 1,
        "summarizer": "extractive",
        "defer_summarization": False,
    }
)


@pytest.fixture(params=["sqlite", "postgres"])
def mem(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Memory]:
    if request.param == "sqlite":
        store: Any = open_store(str(tmp_path / "m.db"))
    else:
        dsn = request.getfixturevalue("pg_dsn")
        store = open_store(schema_url(dsn, fresh_schema(dsn, "se")))
    m = Memory(store, namespace="alice", config=CFG)
    topics = [
        "the ferry to Porto leaves at 7:40",
        "dinner at the river restaurant",
        "the museum opens at ten",
        "hotel booking number B042",
        "the budget is 900 euros",
    ]
    for i in range(20):
        m.add(
            {
                "role": "user" if i % 2 == 0 else "assistant",
                "content": f"Remember {topics[i % 5]} (note {i}).",
                "timestamp": (T0 + timedelta(hours=i)).isoformat(),
            },
            session="a" if i < 12 else "b",
        )
    yield m
    m.close()


def test_search_ranks_turns_and_summaries_with_breakdowns(mem: Memory) -> None:
    hits = mem.search("ferry to Porto", k=6)
    assert all(isinstance(h, SearchHit) for h in hits) and len(hits) == 6
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    turns = [h for h in hits if h.kind == "turn"]
    summaries = [h for h in hits if h.kind in ("segment", "consolidation")]
    assert turns[0].score == 1.0 and "ferry to Porto" in turns[0].text
    assert turns[0].scores["fused"] > 0 and "lexical" in turns[0].scores
    assert turns[0].turn_ids == (int(turns[0].id.split(":")[1]),)
    assert summaries and summaries[0].score == 1.0 and summaries[0].tier in ("warm", "cold")
    # Summaries are ranked by words and, with an embedder, by their stored vectors too.
    assert set(summaries[0].scores) == {"lexical", "vector", "level", "fused"}
    assert all(h.to_dict()["id"] == h.id for h in hits)


def test_search_keeps_to_a_session_and_validates(mem: Memory) -> None:
    hits = mem.search("ferry", k=10, session="b")
    assert hits and all(h.session == "b" for h in hits)
    with pytest.raises(ValidationError):
        mem.search("   ")
    with pytest.raises(ValidationError):
        mem.search("ferry", k=0)
    with pytest.raises(NotFoundError):
        mem.search("ferry", session="nope")
    with pytest.raises(NotFoundError):
        mem.for_namespace("carol").search("ferry")


def test_namespaces_lists_every_namespace_with_counts(mem: Memory) -> None:
    mem.for_namespace("bob").add({"role": "user", "content": "hi there"}, session="x")
    stats = mem.namespaces()
    assert [(s.namespace, s.sessions, s.turns) for s in stats] == [("alice", 2, 20), ("bob", 1, 1)]
    assert stats[0].tokens == mem.status().tokens and stats[0].text_bytes == mem.status().text_bytes
    assert mem.store.namespaces() == ["alice", "bob"]
