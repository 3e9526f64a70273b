"""Auto-extracted memory items: a sealed segment's key facts become cold, review-pending items,
typed by a fixed rule, sourced to their turns, never stored twice, and a failure of the step is
visible and retried without losing a turn."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pg import fresh_schema, schema_url

from stratamem import Config, Memory
from stratamem.llm import OpenAIChat
from stratamem.records import KeyFact, Summary
from stratamem.store import open_store
from stratamem.summarize.facts import ItemFact, fact_type, item_facts
from stratamem.summarize.llm import LLMSummarizer
from stratamem.testing.llm_server import FakeLLMServer

T0 = datetime(2026, 3, 3, 14, 0, tzinfo=UTC)

CONVERSATION = [
    (
        "user",
        "Ines Duarte is the contact at Northbeam Logistics for the warehouse. The pickups need planning. "
        "Stock counts should stay exact.",
    ),
    (
        "assistant",
        "Noted. I will email Ines on Monday about the pickup window. Planning pickups early avoids "
        "surprises. Exact stock counts come from the database.",
    ),
    ("user", "We decided to ship with PostgreSQL 16 on 20 March. The migration script needs care. Backups come first."),
    (
        "assistant",
        "Then I will write ADR 0003 today. The migration script copies table by table. Backups run before every copy.",
    ),
    ("user", "I prefer short commit messages, under 50 characters. Long bodies are fine when needed."),
    ("assistant", "Understood, short commit messages from now on. Bodies explain the reasons."),
]


def msgs() -> list[dict]:
    return [
        {
            "role": role,
            "content": text,
            "name": "dana" if role == "user" else None,
            "timestamp": (T0 + timedelta(minutes=i)).isoformat(),
        }
        for i, (role, text) in enumerate(CONVERSATION)
    ]


def memory(path: Path | str, **pyramid) -> Memory:
    return Memory(
        path,
        namespace="shop",
        config=Config().replace(pyramid={"defer_summarization": False, **pyramid}),
        embedder=None,
    )


def sealed(mem: Memory):
    mem.add(msgs(), session="s")
    node = mem.seal("s")
    assert node is not None
    return mem.pyramid.node(node.id)


EXPECTED = [  # (content, type, provenance): one per key fact of the segment, in order
    ("dana: Ines Duarte is the contact at Northbeam Logistics for the warehouse.", "entity", (1,)),
    ("assistant: I will email Ines on Monday about the pickup window.", "fact", (2,)),
    ("dana: We decided to ship with PostgreSQL 16 on 20 March.", "decision", (3,)),
    ("assistant: Then I will write ADR 0003 today.", "decision", (4,)),
    ("dana: I prefer short commit messages, under 50 characters.", "preference", (5,)),
]


def test_the_type_rule_on_example_sentences():
    assert fact_type("dana: We decided to ship with PostgreSQL 16.") == "decision"
    assert fact_type("dana: Go with it: 3 attempts, 200 ms base.") == "decision"
    assert fact_type("Record it as ADR 0004 superseding 0002.") == "decision"
    assert fact_type("dana: No ORMs, I want to see every SQL statement.") == "preference"
    assert fact_type("Melanie: I love painting lake sunrises.") == "preference"
    assert fact_type("priya: Ines Duarte is the contact at Northbeam.") == "entity"
    assert fact_type("Northbeam Logistics was our warehouse in 2025.") == "entity"
    assert fact_type("The cap is EUR 150 a month.") == "fact"  # "The" is not a name
    assert fact_type("assistant: 5 failures out of 30, so about 1 in 6.") == "fact"


def test_only_facts_with_a_source_turn_become_items():
    summary = Summary(
        "x", key_facts=(KeyFact("dana: We chose Hetzner.", 7), KeyFact("generated", None), KeyFact("  ", 8))
    )
    assert item_facts(summary) == [ItemFact("dana: We chose Hetzner.", "decision", 7)]


def test_a_summarized_segment_stores_its_key_facts_as_cold_auto_extracted_items(tmp_path):
    mem = memory(tmp_path / "m.db")
    node = sealed(mem)
    assert node.summary_status == "ok"
    items = mem.items.list()
    assert [(i.content, i.type, i.provenance) for i in items] == EXPECTED
    assert list(node.key_facts) == [c for c, _, _ in EXPECTED]
    assert {(i.source, i.review, i.tier, i.session) for i in items} == {("extracted", "pending", "cold", "s")}
    # Recallable, but not pinned in the prompt.
    assert mem.items.hot() == []
    hit = mem.items.recall("who is the contact at Northbeam?", auto_promote=False)
    assert hit.items[0].content == EXPECTED[0][0]
    # The user reviews them.
    assert mem.items.confirm(items[2].id).review == "confirmed"
    rejected = mem.items.reject(items[1].id)
    assert (rejected.review, rejected.live) == ("rejected", False)


def test_resummarizing_a_segment_adds_no_second_copy_and_does_not_revive_a_rejected_fact(tmp_path):
    mem = memory(tmp_path / "m.db")
    node = sealed(mem)
    first = mem.items.list()
    mem.items.reject(first[0].id)
    # Make the pyramid summarize the segment again (as retry_failed does after any failure).
    mem.store.connection.execute("UPDATE nodes SET summary_status = 'failed' WHERE id = ?", (node.id,))
    assert mem.pyramid.retry_failed() == 1
    again = mem.items.list()
    assert [(i.id, i.content, i.review) for i in again] == [
        (i.id, i.content, "rejected" if i.id == first[0].id else "pending") for i in first
    ]


def test_the_same_fact_in_another_wording_of_case_and_spacing_is_not_stored_twice(tmp_path):
    mem = memory(tmp_path / "m.db")
    sealed(mem)
    before = len(mem.items.list())
    made = mem.items.extract_facts(
        [
            ("DANA: we decided to ship with  PostgreSQL 16 on 20 March", "decision", [3]),
            ("dana: A new fact about the pickup on Tuesday.", "fact", [2]),
        ]
    )
    assert [i.content for i in made] == ["dana: A new fact about the pickup on Tuesday."]
    assert len(mem.items.list()) == before + 1


def test_extraction_is_off_when_the_config_says_so(tmp_path):
    mem = memory(tmp_path / "m.db", auto_extract_facts=False)
    node = sealed(mem)
    assert node.key_facts and mem.items.list() == []


def test_a_failing_extraction_keeps_turns_and_summary_is_visible_and_is_retried(tmp_path):
    mem = memory(tmp_path / "m.db")
    # A real SQLite failure on the item insert, not a stand-in.
    mem.store.connection.execute(
        "CREATE TRIGGER no_items BEFORE INSERT ON memory_items BEGIN SELECT RAISE(ABORT, 'items are frozen'); END"
    )
    failures = []
    mem.events.subscribe("items.extract_failed", failures.append)
    stored = mem.add(msgs(), session="s")  # Memory.add does not raise
    node = mem.pyramid.node(mem.seal("s").id)
    assert len(mem.turns()) == len(stored) == 6
    assert node.summary is not None and node.key_facts == tuple(c for c, _, _ in EXPECTED)
    assert node.summary_status == "failed"
    assert node.summary_error.startswith("item extraction failed: BackendError")
    assert [(e.data["node_id"], e.data["error"]) for e in failures] == [(node.id, "BackendError")]
    assert mem.items.list() == []
    mem.store.connection.execute("DROP TRIGGER no_items")
    assert mem.pyramid.retry_failed() == 1
    fixed = mem.pyramid.node(node.id)
    assert (fixed.summary_status, fixed.summary_error) == ("ok", None)
    assert [(i.content, i.type, i.provenance) for i in mem.items.list()] == EXPECTED


def test_a_fallback_summary_is_not_mined_the_retried_model_summary_is(tmp_path):
    reply = json.dumps(
        {
            "summary": "Dana picked PostgreSQL 16 and short commits.",
            "key_facts": [
                {"fact": "Dana decided to ship with PostgreSQL 16 on 20 March", "turn": 3},
                {"fact": "Dana prefers commit messages under 50 characters", "turn": 5},
                {"fact": "not from this segment", "turn": 999},
            ],
            "themes": ["postgresql", "commits", "launch"],
        }
    )
    with FakeLLMServer(reply="not json") as server:
        model = OpenAIChat("m", base_url=server.openai_base_url, max_retries=0)
        mem = Memory(
            tmp_path / "m.db",
            namespace="shop",
            config=Config().replace(pyramid={"summarizer": "llm", "defer_summarization": False}),
            summarizer=LLMSummarizer(model, Memory(":memory:", embedder=None).tokenizer),
            embedder=None,
        )
        node = sealed(mem)
        assert (node.summary_status, node.summary.summarizer) == ("failed", "extractive")
        assert mem.items.list() == []
        server.reply = lambda _req: reply
        assert mem.pyramid.retry_failed() == 1
        assert [(i.content, i.type, i.provenance) for i in mem.items.list()] == [
            ("Dana decided to ship with PostgreSQL 16 on 20 March", "decision", (3,)),
            ("Dana prefers commit messages under 50 characters", "preference", (5,)),
        ]


def test_items_of_one_namespace_are_not_duplicates_of_another(tmp_path):
    mem = memory(tmp_path / "m.db")
    sealed(mem)
    other = mem.for_namespace("other")
    other.add(msgs(), session="s")
    other.seal("s")
    assert [i.content for i in other.items.list()] == [c for c, _, _ in EXPECTED]
    assert [i.provenance for i in other.items.list()] == [(7,), (8,), (9,), (10,), (11,)]


@pytest.mark.parametrize("facts", [[("x", "fact", [])], [("x", "opinion", [1])]])
def test_bad_extracted_facts_are_refused_before_anything_is_stored(tmp_path, facts):
    mem = memory(tmp_path / "m.db")
    sealed(mem)
    before = mem.items.list()
    from stratamem.errors import ValidationError

    with pytest.raises(ValidationError):
        mem.items.extract_facts(facts)
    assert mem.items.list() == before


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_extraction_gives_the_same_items_on_every_backend_that_keeps_items(tmp_path, request, backend):
    if backend == "sqlite":
        store = open_store(str(tmp_path / "m.db"))
    else:
        dsn = request.getfixturevalue("pg_dsn")
        store = open_store(schema_url(dsn, fresh_schema(dsn, "x")))
    try:
        mem = memory(store)
        sealed(mem)
        assert [(i.content, i.type, i.provenance, i.tier, i.review) for i in mem.items.list()] == [
            (c, t, p, "cold", "pending") for c, t, p in EXPECTED
        ]
    finally:
        store.close()
