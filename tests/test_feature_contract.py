"""The feature stores' contract: embeddings cache, pyramid nodes, conversations, memory items.

Every behaviour runs on SQLite and on PostgreSQL (a real server: pgserver, one
per run, or ``STRATAMEM_PG_DSN``; a fresh schema per test). Single-backend
tests assert exact outcomes; the ``differential`` tests drive the same
scenario through the public API on both backends in one test and require
identical results (ids included: both hand out 1, 2, 3 … in a fresh store).
"""

from __future__ import annotations

import itertools
import sqlite3
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pg import fresh_schema, schema_url

from stratamem import Config, Memory
from stratamem.embed.cache import CachedEmbedder
from stratamem.errors import BackendError, ConfigError, MigrationError, NotFoundError, ValidationError
from stratamem.items.api import Items
from stratamem.records import KeyFact, Summary, Turn
from stratamem.records.conversations import ConversationState
from stratamem.store import Store, TurnBatch
from stratamem.store.new_rows import NewItem, NewNode
from stratamem.store.open import open_store
from stratamem.store.postgres.store import PostgresStore
from stratamem.store.sqlite.store import SQLiteStore
from stratamem.store.vectors import quantized
from stratamem.testing.hash_embedder import HashEmbedder
from stratamem.tokens import get_tokenizer

BACKENDS = ["sqlite", "postgres"]
T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
TOKENIZER = get_tokenizer()


def _open(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Store:
    if backend == "sqlite":
        return SQLiteStore(tmp_path / f"{len(list(tmp_path.iterdir()))}.db")
    dsn = request.getfixturevalue("pg_dsn")
    return open_store(schema_url(dsn, fresh_schema(dsn, "f")))


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """One fresh store of the parametrized backend."""
    s = _open(request.param, tmp_path, request)
    yield s
    s.close()


@pytest.fixture
def both(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[list[Any]]:
    """A fresh SQLite store and a fresh PostgreSQL store, for differential tests."""
    stores = [_open(b, tmp_path, request) for b in BACKENDS]
    yield stores
    for s in stores:
        s.close()


def raw(store: Any, statement: str, params: tuple[Any, ...] = ()) -> None:
    """Run SQL behind the store's back (to corrupt or drop what it relies on)."""
    if store.backend == "sqlite":
        with store.lock:
            store.connection.execute(statement.replace("%s", "?"), params)
    else:
        with store.connection() as conn:
            conn.execute(statement, params)


class Clock:
    """A settable clock, so both backends see the same times."""

    def __init__(self) -> None:
        self.now = datetime(2025, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def msgs(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"Note {i}: Alice paid {i} euros in Paris for the w{i % 7} project.",
            "timestamp": (T0 + timedelta(minutes=i)).isoformat(),
        }
        for i in range(start, start + n)
    ]


def pyramid_config(**pyramid: Any) -> Config:
    return Config().replace(pyramid={"summarizer": "heuristic", **pyramid})


def turn(text: str) -> Turn:
    return Turn(role="user", content=text, timestamp=T0)


# --- embeddings cache -------------------------------------------------------------------------


def test_embedding_cache_round_trips_exact_vectors_and_keeps_the_first_write(store: Any) -> None:
    cache = store.embeddings
    v = np.array([0.1, -2.5, 3.0e-8, 1 / 3], dtype=np.float32)
    cache.put_many("m1", {"b2:aa": v, "b2:bb": v * 2})
    cache.put_many("m1", {"b2:aa": v * 7})  # an existing key is left as it is
    cache.put_many("m2", {"b2:aa": v * 3})
    got = cache.get_many("m1", ["b2:aa", "b2:bb", "b2:missing", "b2:aa"])
    assert sorted(got) == ["b2:aa", "b2:bb"]
    assert got["b2:aa"].tobytes() == v.tobytes() and got["b2:aa"].dtype == np.float32
    assert got["b2:bb"].tobytes() == (v * 2).tobytes()
    assert (cache.count(), cache.count("m1"), cache.count("m2")) == (3, 2, 1)
    assert cache.clear("m1") == 2
    assert (cache.count(), cache.get_many("m1", ["b2:aa"])) == (1, {})
    assert cache.clear() == 1


def test_embedding_cache_refuses_a_matrix_and_a_corrupt_row(store: Any) -> None:
    with pytest.raises(ValueError, match="one-dimensional"):
        store.embeddings.put_many("m", {"h": np.zeros((2, 2), dtype=np.float32)})
    assert store.embeddings.count() == 0
    store.embeddings.put_many("m", {"h": np.ones(4, dtype=np.float32)})
    raw(store, "UPDATE embeddings SET dims = 5")
    with pytest.raises(BackendError, match="corrupt"):
        store.embeddings.get_many("m", ["h"])


def test_a_cached_embedder_embeds_each_text_once_across_store_handles(store: Any) -> None:
    model = HashEmbedder(8)
    first = CachedEmbedder(model, store.embeddings).embed_batch(["alpha", "beta"])
    again = CachedEmbedder(model, store.embeddings).embed_batch(["beta", "alpha", "gamma"])
    assert model.calls == [["alpha", "beta"], ["gamma"]]
    assert again[0].tobytes() == first[1].tobytes() and again[1].tobytes() == first[0].tobytes()


# --- conversations --------------------------------------------------------------------------


def test_conversation_state_round_trips_replaces_and_lists_by_namespace(store: Any) -> None:
    conv = store.conversations
    assert conv.get("ns", "s1") is None
    state = ConversationState(
        "ns",
        "s1",
        summary="## Goal\nship ✓",
        compaction_count=2,
        turn_count=40,
        compacted_messages=31,
        files_read=("a.py", "b é.py"),
        files_modified=("a.py",),
        last_status="summarized",
        failures=1,
        calibration={"gpt-x": 1.07},
        resume_seq=17,
        deferred=3,
        last_usage={"input_tokens": 9_000, "output_tokens": 12, "model": "gpt-x"},
        updated_at=datetime(2025, 2, 3, 4, 5, 6, 789012, tzinfo=UTC),
    )
    conv.put(state)
    assert conv.get("ns", "s1") == state
    newer = ConversationState("ns", "s1", summary=None, last_status="failed", last_error="timeout", updated_at=T0)
    conv.put(newer)
    assert conv.get("ns", "s1") == newer
    conv.put(ConversationState("ns", "B", updated_at=T0))
    conv.put(ConversationState("ns", "a", updated_at=T0))
    conv.put(ConversationState("other", "zz", updated_at=T0))
    assert conv.sessions("ns") == ["B", "a", "s1"]  # by code point on both backends
    assert conv.get("other", "s1") is None and conv.sessions("nobody") == []


def test_conversation_state_with_a_bad_name_is_refused_and_nothing_stored(store: Any) -> None:
    with pytest.raises(ValidationError):
        store.conversations.put(ConversationState("ns", "", updated_at=T0))
    assert store.conversations.sessions("ns") == []


# --- pyramid nodes -----------------------------------------------------------------------------


def _segment(store: Any, turns: list[Any], level: int = 1, tier: str | None = "hot") -> int:
    return store.nodes.insert(
        "ns",
        NewNode(
            level=level,
            kind="micro" if level == 1 else "mini",
            session="s" if level == 1 else None,
            seq_range=(turns[0].seq, turns[-1].seq) if level == 1 else None,
            turn_ids=tuple(t.id for t in turns),
            tokens=sum(t.tokens for t in turns),
            start=turns[0].turn.timestamp,
            end=turns[-1].turn.timestamp,
            reason="size" if level == 1 else "consolidation",
            tier=tier,
        ),
    )


def test_node_rows_round_trip_and_a_turn_cannot_join_two_nodes_of_one_level(store: Any) -> None:
    stored = store.append("ns", [TurnBatch("s", [turn(f"t{i}") for i in range(6)], [3] * 6)])
    first = _segment(store, stored[:3])
    assert store.nodes.sealed_seq("ns", "s") == 3
    with pytest.raises(BackendError):
        _segment(store, stored[2:5])  # turn 3 is already covered at level 1
    assert [n.id for n in store.nodes.list("ns")] == [first]  # the failed insert left nothing
    second = _segment(store, stored[3:])
    parent = _segment(store, stored, level=2, tier=None)
    store.nodes.set_parent("ns", [first, second], parent)
    node = store.nodes.get("ns", first)
    assert (
        node.level,
        node.kind,
        node.session,
        node.seq_range,
        node.turn_count,
        node.tokens,
        node.parent_id,
        node.tier,
        node.summary_status,
        node.has_embedding,
        node.start,
    ) == (1, "micro", "s", (1, 3), 3, 9, parent, "hot", "pending", False, T0)
    assert store.nodes.turn_ids("ns", parent) == [t.id for t in stored]
    assert store.nodes.coverage("ns", 1) == {t.id: (first if t.seq <= 3 else second) for t in stored}
    assert store.nodes.levels("ns") == [1, 2]
    assert [n.id for n in store.nodes.list("ns", level=1, unparented=True)] == []
    assert [n.id for n in store.nodes.list("ns", parent_id=parent, newest_first=True, limit=1)] == [second]
    assert store.nodes.newest_turn_time("ns") == T0
    with pytest.raises(NotFoundError):
        store.nodes.get("other", first)  # ids of another namespace do not exist there
    assert (store.nodes.list("other"), store.nodes.levels("other"), store.nodes.coverage("other", 1)) == ([], [], {})


def test_summaries_embeddings_tiers_and_archive_references(store: Any) -> None:
    stored = store.append("ns", [TurnBatch("s", [turn("é" * 10), turn("plain")], [4, 5])])
    node_id = _segment(store, stored)
    vec = np.array([0.25, -1e-3, 7.0, 1 / 7], dtype=np.float32)
    summary = Summary(
        "Alice paid.", key_facts=(KeyFact("Alice paid 5 euros", stored[1].id),), themes=("money",), summarizer="test"
    )
    store.nodes.set_summary(
        "ns", node_id, summary, tokens=3, status="ok", error=None, view_tokens=4, embedding=vec.tobytes()
    )
    node = store.nodes.get("ns", node_id)
    assert (node.summary, node.summary_tokens, node.view_tokens, node.has_embedding) == (summary, 3, 4, True)
    # Kept as int8 codes and a scale: back within half a quantisation step, the same on both backends.
    back = store.nodes.embedding("ns", node_id)
    assert back == quantized(vec.tobytes())
    assert np.abs(np.frombuffer(back, dtype=np.float32) - vec).max() <= 7.0 / 127 / 2 + 1e-7
    store.nodes.set_tier("ns", node_id, "warm", at=T0, view_tokens=6, warm=("ctf", "W|é"))
    assert store.nodes.warm_content("ns", node_id) == ("ctf", "W|é")
    sizes = store.nodes.tier_sizes("ns")
    assert [tuple(r) for r in sizes] == [("warm", 1, 2, 9, 6, 4, len(summary_json(summary)))]
    assert store.nodes.tier_raw_bytes("ns") == {"warm": 20 + 5}
    archived = T0 + timedelta(days=3)
    store.nodes.set_tier("ns", node_id, "cold", at=archived, view_tokens=3, archive_ref="2025-01-01.zst")
    assert store.nodes.warm_content("ns", node_id) is None
    # archived_at is the instant the pyramid passed (its clock), not the database's now.
    assert store.nodes.archived_before("ns", archived + timedelta(microseconds=1)) == [(node_id, "2025-01-01.zst")]
    assert store.nodes.archived_before("ns", archived) == []
    assert store.nodes.archived_before("other", archived + timedelta(days=1)) == []
    assert store.nodes.archive_refs("ns") == {"2025-01-01.zst"}
    assert store.nodes.archive_refs("other") == set()
    store.nodes.clear_archive("ns", [node_id])
    assert store.nodes.archive_refs("ns") == set()
    assert store.nodes.delete_turns("ns", [stored[0].id, 999_999]) == 1
    assert [t.text for t in store.turns("ns")] == ["plain"]


def test_node_methods_by_id_answer_only_inside_their_namespace(store: Any) -> None:
    mine = store.append("ns", [TurnBatch("s", [turn("a"), turn("b")], [1, 1])])
    theirs = store.append("other", [TurnBatch("s", [turn("c"), turn("d")], [1, 1])])
    node_id = _segment(store, mine)
    summary = Summary("A and b.", summarizer="test")
    vec = np.array([1.0, 0.0], dtype=np.float32).tobytes()
    store.nodes.set_summary("ns", node_id, summary, tokens=3, status="ok", error=None, embedding=vec)
    store.nodes.set_tier("ns", node_id, "warm", at=T0, view_tokens=2, warm=("json", "[]"))
    # Reads by id from another namespace see nothing.
    assert (
        store.nodes.turn_ids("other", node_id),
        store.nodes.warm_content("other", node_id),
        store.nodes.embedding("other", node_id),
    ) == ([], None, None)
    assert store.nodes.covered("ns", 1, [t.id for t in mine + theirs]) == {t.id for t in mine}
    assert store.nodes.covered("other", 1, [t.id for t in mine]) == set()
    # Writes by id into another namespace are refused and change nothing.
    writes: dict[str, Callable[[], object]] = {
        "set_summary": lambda: store.nodes.set_summary(
            "other", node_id, Summary("x", summarizer="t"), tokens=1, status="ok", error=None
        ),
        "set_status": lambda: store.nodes.set_status("other", node_id, "failed", "x"),
        "set_tier": lambda: store.nodes.set_tier(
            "other", node_id, "cold", at=T0, view_tokens=1, archive_ref="2024-05-01.jsonl.zst@0+1"
        ),
        "set_parent": lambda: store.nodes.set_parent("other", [node_id], node_id),
    }
    for call in writes.values():
        with pytest.raises(NotFoundError):
            call()
    store.nodes.clear_archive("other", [node_id])
    assert store.nodes.delete_turns("other", [t.id for t in mine]) == 0
    node = store.nodes.get("ns", node_id)
    assert (node.summary, node.summary_status, node.tier, node.parent_id, node.archive_ref) == (
        summary,
        "ok",
        "warm",
        None,
        None,
    )
    assert [t.id for t in store.turns("ns")] == [t.id for t in mine]
    # A failed status keeps the summary it had; tier_not filters by tier.
    store.nodes.set_status("ns", node_id, "failed", "embedding failed: down")
    node = store.nodes.get("ns", node_id)
    assert (node.summary, node.summary_status, node.summary_error) == (summary, "failed", "embedding failed: down")
    assert [n.id for n in store.nodes.list("ns", level=1, tier_not="cold")] == [node_id]
    assert store.nodes.list("ns", level=1, tier_not="warm") == []


def test_the_pyramid_lock_is_taken_inside_a_transaction_on_both_backends(store: Any) -> None:
    store.append("ns", [TurnBatch("s", [turn("a")], [1])])
    with store.transaction():
        store.nodes.lock("ns")
        node_id = _segment(store, store.turns("ns"))
    assert [n.id for n in store.nodes.list("ns")] == [node_id]


def summary_json(summary: Summary) -> bytes:
    """A summary as stored: quotes of the node's turns by reference, a null executive left out (m027)."""
    import json

    from stratamem.store.summary_refs import pack

    return json.dumps(pack(summary.to_dict(), {}), ensure_ascii=False, separators=(",", ":")).encode()


def _node_view(mem: Memory) -> list[dict[str, Any]]:
    out = []
    for n in mem.pyramid.nodes():
        d = n.to_dict()
        del d["created_at"]
        d["turn_ids"] = mem.pyramid.turn_ids(n.id)
        d["embedding"] = None if mem.pyramid.embedding(n.id) is None else mem.pyramid.embedding(n.id).tobytes()
        out.append(d)
    return out


def test_differential_the_pyramid_builds_the_same_tree_tiers_and_expansions(both: list[Any]) -> None:
    views = []
    for store in both:
        mem = Memory(
            store,
            namespace="t",
            embedder=HashEmbedder(16),
            config=pyramid_config(
                micro_chunk_size=5,
                mini_chunk_size=10,
                macro_chunk_size=30,
                defer_summarization=False,
                archive_cold_content=False,
                consolidation_scope="namespace",
                warm_max_turns=0,
            ),
        )
        # (Memory keeps a file archive beside a SQLite file only; without it both keep
        # cold content in the canonical turns, so everything else must match.)
        mem.add(msgs(23), session="a")
        mem.add(msgs(24, start=23), session="b")
        mem.pyramid.seal("a")
        nodes = _node_view(mem)
        stats = [s.to_dict() for s in mem.pyramid.stats()]
        levels = [lv.to_dict() for lv in mem.pyramid.level_stats()]
        expanded = {n["id"]: [t.text for t in mem.pyramid.expand(n["id"])] for n in nodes}
        context = mem.context("what did Alice pay in Paris?", budget=600)
        views.append((nodes, stats, levels, expanded, [m["content"] for m in context.messages]))
    lite, pg = views
    assert len(lite[0]) == 14 and {n["tier"] for n in lite[0]} == {"hot", "warm", "cold", None}
    assert pg[0] == lite[0]
    assert pg[1:] == lite[1:]


def test_memory_add_runs_the_pyramid_on_every_backend(store: Any) -> None:
    mem = Memory(store, namespace="t", config=pyramid_config(micro_chunk_size=5), embedder=None)
    mem.add(msgs(12))
    assert [(n.level, n.seq_range) for n in mem.pyramid.nodes(level=1)] == [(1, (1, 5)), (1, (6, 10))]


def test_memory_refuses_a_store_missing_the_feature_stores_its_config_uses(tmp_path: Path) -> None:
    class CoreOnly:
        """A store that keeps turns but no derived data."""

        backend = "core-only"
        tokenizer = "o200k_base"

    with pytest.raises(ConfigError, match="core-only store has no items, conversations, nodes, manifests feature"):
        Memory(CoreOnly(), namespace="t", embedder=None)  # type: ignore[arg-type]

    class NoPyramid(CoreOnly):
        items = conversations = object()

    lean = Config().replace(pyramid={"enabled": False}, context={"record_manifests": False})
    assert Memory(NoPyramid(), namespace="t", config=lean, embedder=None).store.backend == "core-only"  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="has no nodes, manifests feature"):
        Memory(NoPyramid(), namespace="t", embedder=None)  # type: ignore[arg-type]


# --- memory items ------------------------------------------------------------------------------


def _items(store: Any, namespace: str = "t", **cfg: Any) -> Items:
    config = Config().replace(items=cfg) if cfg else Config()
    return Items(store, namespace, tokenizer=TOKENIZER, config=config.items, embedder=HashEmbedder(32), clock=Clock())


def test_lexical_search_folds_case_and_diacritics_and_matches_whole_words(store: Any) -> None:
    items = _items(store)
    cafe = items.add("Meeting at the CAFÉ near Zürich", tier="cold").id
    mail = items.add("Send the e-mail to bob@example.com", tier="cold").id
    items.add("Caffeine is a stimulant", tier="cold")
    db = store.items
    assert [i for i, _ in db.lexical("t", '"cafe"', limit=10)] == [cafe]
    assert [i for i, _ in db.lexical("t", '"zurich" OR "nothing"', limit=10)] == [cafe]
    assert [i for i, _ in db.lexical("t", '"example"', limit=10)] == [mail]
    assert [i for i, _ in db.lexical("t", '"mail" OR "bob"', limit=10)] == [mail]
    assert db.lexical("t", '"caf"', limit=10) == []  # no prefix matching
    assert db.lexical("other", '"cafe"', limit=10) == []
    scores = db.lexical("t", '"cafe" OR "send" OR "stimulant"', limit=2)
    assert len(scores) == 2 and all(s < 0 for _, s in scores)  # bm25-like: more negative is better


def test_item_vectors_round_trip_as_int8_in_id_order(store: Any) -> None:
    items = _items(store)
    a = items.add("first fact", tier="cold")
    items.add("second fact", tier="cold")
    rows = store.items.vectors_after("t", 0)
    assert [r[0] for r in rows] == [a.id, a.id + 1] and {r[2] for r in rows} == {"hash-embedder"}
    expected = HashEmbedder(32).embed_batch(["first fact"])[0].astype(np.float32)
    assert rows[0][1] == quantized(expected.tobytes())
    assert store.items.vectors_after("t", a.id) == rows[1:]
    assert store.items.vectors_after("other", 0) == []


def test_item_ids_of_another_namespace_behave_as_missing(store: Any) -> None:
    mine = _items(store, "mine")
    theirs = _items(store, "theirs")
    secret = theirs.add("their secret", tier="cold").id
    assert store.items.get("mine", [secret]) == []
    assert store.items.update("mine", [secret], tier="hot") == 0
    assert store.items.delete("mine", [secret]) == 0
    store.items.record_access("mine", {secret: 0.9}, "2025-01-01T00:00:00.000000Z")
    with pytest.raises(NotFoundError):
        mine.get(secret)
    item = theirs.get(secret)
    assert (item.tier, item.access_count, item.relevance) == ("cold", 0, 1.0)
    assert mine.recall("secret").items == ()


def test_a_failed_item_write_leaves_the_store_as_it_was(store: Any) -> None:
    items = _items(store, hot_token_limit=12, auto_spill=False)
    items.add("one two three")
    before = [i.to_dict() for i in items.list()]
    with pytest.raises(BackendError):
        with store.transaction():
            store.items.insert(
                "t",
                NewItem(
                    content="x",
                    type="fact",
                    tier="hot",
                    tokens=1,
                    relevance=1.0,
                    source="api",
                    created_at="2025-01-01T00:00:00.000000Z",
                ),
            )
            store.items.add_metrics("t", {"spills": 1})
            raw(store, "INSERT INTO memory_items (id) VALUES (NULL)")  # a NOT NULL violation inside
    assert [i.to_dict() for i in items.list()] == before
    assert items.metrics().to_dict()["spills"] == 0


def test_item_ids_are_never_reused_and_a_pruned_items_vector_is_never_scored(store: Any) -> None:
    items = _items(store)
    a = items.add("alpha fact about databases")
    b = items.add("zebra giraffe savanna animals", tier="cold")
    assert [i.id for i in items.recall("zebra", auto_promote=False).items] == [b.id]  # b's vector is loaded
    assert items.prune([b.id]) == 1
    c = items.add("quantum chromodynamics lecture notes", tier="cold")
    assert (a.id, b.id, c.id) == (1, 2, 3)
    assert items.recall("zebra giraffe savanna animals", auto_promote=False).items == ()
    quantum = items.recall("quantum chromodynamics lecture notes", auto_promote=False)
    # The same text scores the cosine of its vector with its stored (int8) form: 1 less the quantisation error.
    vec = HashEmbedder(32).embed_batch(["quantum chromodynamics lecture notes"])[0]
    stored = np.frombuffer(quantized(vec.astype(np.float32).tobytes()), dtype=np.float32)
    assert [i.id for i in quantum.items] == [c.id] and quantum.semantic[c.id] == pytest.approx(
        float(stored @ vec), abs=1e-6
    )
    assert 0.999 < quantum.semantic[c.id] < 1.0
    assert items._index.ids() == {a.id, c.id}


def test_a_live_index_replays_vectors_backfilled_or_pruned_through_another_handle(store: Any) -> None:
    failing = HashEmbedder(32, fail_with=RuntimeError("model down"))
    writer = Items(store, "t", tokenizer=TOKENIZER, embedder=failing, clock=Clock())
    reader = _items(store)
    late = writer.add("the invoice total is forty two euros", tier="cold")
    failing.fail_with = None
    other = writer.add("the office plant needs water", tier="cold")
    assert [i.id for i in reader.recall("office plant", auto_promote=False).items] == [other.id]
    assert reader._index.ids() == {other.id} and reader._index.last_id == other.id
    assert writer.embed_missing() == 1  # below the reader's high-water mark: only the log tells it
    found = reader.search("invoice total")
    assert [i.id for i in found.items] == [late.id] and found.semantic[late.id] > 0.5
    assert writer.prune([other.id]) == 1
    reader.search("anything at all")
    assert reader._index.ids() == {late.id}


def test_pruning_the_newer_item_keeps_the_older_one_superseded(store: Any) -> None:
    items = _items(store)
    old = items.add("The project budget is 10000 euros", key="budget")
    new = items.add("The project budget is 25000 euros", key="budget")
    items.spill(ids=[new.id])
    assert items.prune([new.id]) == 1
    after = items.get(old.id)
    assert (after.superseded_by, after.tier, after.live) == (new.id, "cold", False)
    assert items.recall("project budget euros", auto_promote=False).items == ()
    assert [i.id for i in items.search("project budget euros", include_superseded=True).items] == [old.id]
    with pytest.raises(ValidationError, match="superseded, rejected or dropped; it cannot be hot"):
        items.promote(old.id)
    assert items.status().flags["superseded"] == 1


def test_differential_items_tiers_recall_promotion_supersession_and_status(both: list[Any]) -> None:
    views = []
    for store in both:
        items = _items(store, hot_token_limit=40, spill_count=2, warm_access_threshold=1)
        clock: Clock = items._clock  # type: ignore[assignment]
        for i in range(8):
            items.add(f"Fact {i}: the budget for project w{i} is {i * 100} euros", key=f"k{i % 6}")
            clock.now += timedelta(minutes=1)
        recalls = []
        for q in ("budget for project w1", "w1 euros", "project w3", "nothing matches zebra"):
            r = items.recall(q, limit=2)
            recalls.append((q, [i.id for i in r.items], r.promoted, r.spilled, [x.reason for x in r.refused]))
            clock.now += timedelta(minutes=5)
        extracted = items.extract_from(
            ["Alice likes tea", "Bob likes coffee"],
            [t.id for t in store.append("t", [TurnBatch("s", [turn("x")], [1])])],
        )
        items.confirm(extracted[0].id)
        items.reject(extracted[1].id)
        items.supersede(2, 8)
        pruned = items.prune([i.id for i in items.list("cold") if i.superseded_by is not None][:1])
        status = items.status().to_dict()
        status.pop("metrics")
        listing = [i.to_dict() for i in items.list()]
        views.append((recalls, status, listing, pruned, items.metrics().to_dict()))
    lite, pg = views
    assert lite[0][0][1] and lite[3] == 1
    for a, b in zip(lite, pg, strict=True):
        assert _strip_latency(b) == _strip_latency(a)


def _strip_latency(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_latency(v) for k, v in value.items() if "latency" not in k}
    return value


# --- migrations, errors ------------------------------------------------------------------------


def test_postgres_applies_every_sqlite_migration_by_name_in_order(both: list[Any]) -> None:
    from stratamem.store import migrations
    from stratamem.store.postgres import schema as postgres_schema
    from stratamem.store.sqlite import schema as sqlite_schema

    lite, pg = both
    names = [m.name for m in sqlite_schema.MIGRATIONS]
    assert [m.name for m in postgres_schema.MIGRATIONS] == names
    with lite.lock:
        assert migrations.applied(lite.connection) == names
    with pg.connection() as conn:
        assert postgres_schema.applied(conn) == names


def test_every_feature_store_method_maps_driver_errors(store: Any) -> None:
    store.append("ns", [TurnBatch("s", [turn("x")], [1])])  # the namespace exists: reads reach the tables
    for table in (
        "memory_item_metrics",
        "memory_item_vector_log",
        "memory_items",
        "node_turns",
        "nodes",
        "conversations",
        "embeddings",
    ):
        raw(store, f"DROP TABLE {table}")
    state = ConversationState("ns", "s", updated_at=T0)
    item = NewItem(
        content="x",
        type="fact",
        tier="hot",
        tokens=1,
        relevance=1.0,
        source="api",
        created_at="2025-01-01T00:00:00.000000Z",
    )
    calls: dict[str, Callable[[], object]] = {
        "embeddings.get_many": lambda: store.embeddings.get_many("m", ["h"]),
        "embeddings.put_many": lambda: store.embeddings.put_many("m", {"h": np.ones(2, dtype=np.float32)}),
        "embeddings.count": lambda: store.embeddings.count(),
        "embeddings.clear": lambda: store.embeddings.clear(),
        "conversations.get": lambda: store.conversations.get("ns", "s"),
        "conversations.put": lambda: store.conversations.put(state),
        "conversations.sessions": lambda: store.conversations.sessions("ns"),
        "nodes.get": lambda: store.nodes.get("ns", 1),
        "nodes.list": lambda: store.nodes.list("ns"),
        "nodes.sealed_seq": lambda: store.nodes.sealed_seq("ns", "s"),
        "nodes.turn_ids": lambda: store.nodes.turn_ids("ns", 1),
        "nodes.embedding": lambda: store.nodes.embedding("ns", 1),
        "nodes.set_parent": lambda: store.nodes.set_parent("ns", [1], 2),
        "nodes.archive_refs": lambda: store.nodes.archive_refs("ns"),
        "nodes.covered": lambda: store.nodes.covered("ns", 1, [1]),
        "nodes.set_status": lambda: store.nodes.set_status("ns", 1, "failed", "x"),
        "items.select": lambda: store.items.select("ns"),
        "items.insert": lambda: store.items.insert("ns", item),
        "items.lexical": lambda: store.items.lexical("ns", '"x"', limit=3),
        "items.vectors_after": lambda: store.items.vectors_after("ns", 0),
        "items.vector_log_head": lambda: store.items.vector_log_head("ns"),
        "items.vector_changes": lambda: store.items.vector_changes("ns", 0),
        "items.tier_totals": lambda: store.items.tier_totals("ns"),
        "items.add_metrics": lambda: store.items.add_metrics("ns", {"a": 1}),
    }
    unmapped = []
    for name, call in calls.items():
        try:
            call()
            unmapped.append(f"{name}: no error")
        except BackendError as exc:
            if not isinstance(exc.__cause__, (sqlite3.Error, psycopg.Error)):
                unmapped.append(f"{name}: cause {exc.__cause__!r}")
    assert unmapped == []


# --- PostgreSQL only: what SQLite has no counterpart for ---------------------------------------


@pytest.fixture
def pg(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    s = _open("postgres", tmp_path, request)
    yield s
    s.close()


def test_postgres_nearest_is_the_exact_cosine_ranking(pg: Any) -> None:
    items = _items(pg)
    texts = [f"note {i} about topic {i % 5} and colour {i % 3}" for i in range(40)]
    ids = [items.add(t, tier="cold").id for t in texts]
    query = HashEmbedder(32).embed_batch(["topic 3 colour 1"])[0]
    # Stored as int8 codes and a scale (store/vectors.py): the ranking is exact over those vectors.
    mat = np.stack(
        [
            np.frombuffer(quantized(row.astype(np.float32).tobytes()), dtype=np.float32)
            for row in HashEmbedder(32).embed_batch(texts)
        ]
    )
    cos = mat @ query / np.linalg.norm(mat, axis=1)
    order = sorted(range(len(ids)), key=lambda i: (-cos[i], ids[i]))[:5]
    got = pg.items.nearest("t", query, 5)
    assert [i for i, _ in got] == [ids[i] for i in order]
    assert np.allclose([c for _, c in got], cos[order], atol=1e-6)
    assert pg.items.nearest("other", query, 5) == [] and pg.items.nearest("t", query, 0) == []


def test_postgres_lexical_refuses_fts5_syntax_it_does_not_translate(pg: Any) -> None:
    for bad in ('"a" NOT "b"', "(a OR b)", "a*", "content:a", 'NEAR("a" "b")'):
        with pytest.raises(ValidationError):
            pg.items.lexical("t", bad, limit=3)
    assert pg.items.lexical("t", '"!!!"', limit=3) == []


def test_a_role_that_cannot_create_pgvector_gets_a_migration_error_naming_the_fix(pg_dsn: str) -> None:
    name = fresh_schema(pg_dsn, "novec")  # a unique name, reused for a database and a role
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {name} LOGIN")
        conn.execute(f"CREATE DATABASE {name} OWNER {name}")
    try:
        with pytest.raises(MigrationError, match="CREATE EXTENSION vector"):
            PostgresStore(psycopg.conninfo.make_conninfo(pg_dsn, dbname=name, user=name))
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE {name} WITH (FORCE)")
            conn.execute(f"DROP ROLE {name}")


def test_a_least_privilege_role_uses_every_feature_store(pg_dsn: str) -> None:
    """The grants docs/postgres.md lists are enough once the owner has migrated the schema."""
    schema = fresh_schema(pg_dsn, "lp")
    PostgresStore(pg_dsn, schema=schema).close()  # the owner creates and migrates it
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {schema} LOGIN")
        conn.execute(f"GRANT USAGE ON SCHEMA {schema} TO {schema}")
        conn.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {schema}")
    worker = PostgresStore(psycopg.conninfo.make_conninfo(pg_dsn, user=schema), schema=schema)
    try:
        mem = Memory(worker, namespace="t", embedder=HashEmbedder(8), config=pyramid_config(micro_chunk_size=5))
        mem.add(msgs(6))
        item = mem.items.add("the budget is 50 euros", tier="cold")
        # Not promoted (every word of the query matches: it would go hot and prune only takes cold items).
        assert [i.id for i in mem.items.recall("budget", auto_promote=False).items] == [item.id]
        assert mem.items.prune([item.id]) == 1
        worker.conversations.put(ConversationState("t", "s", updated_at=T0))
        worker.embeddings.put_many("m", {"h": np.ones(2, dtype=np.float32)})
        assert (len(mem.pyramid.nodes()), worker.embeddings.clear()) == (1, 1)
    finally:
        worker.close()
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f"DROP OWNED BY {schema}")
            conn.execute(f"DROP ROLE {schema}")


# --- namespace isolation of the feature stores, as a property on both backends ----------------

# Names that differ only in case or by a prefix (where a sloppy filter would leak).
_NAMES = ["a", "A", "ab"]
_feature_ops = st.lists(
    st.one_of(
        st.tuples(st.just("item"), st.sampled_from(_NAMES), st.sampled_from(["budget", "tea", "paris"])),
        st.tuples(st.just("recall"), st.sampled_from(_NAMES), st.sampled_from(["budget", "tea", "paris"])),
        st.tuples(st.just("spill"), st.sampled_from(_NAMES), st.just("")),
        st.tuples(st.just("state"), st.sampled_from(_NAMES), st.sampled_from(["s", "S"])),
        st.tuples(st.just("turns"), st.sampled_from(_NAMES), st.just("")),
    ),
    min_size=1,
    max_size=8,
)
_example = itertools.count()


@pytest.fixture(scope="module", params=BACKENDS)
def shared(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One store per backend for every example (each example uses fresh namespace names)."""
    if request.param == "sqlite":
        s: Any = SQLiteStore(tmp_path_factory.mktemp("fi") / "fi.db")
    else:
        dsn = request.getfixturevalue("pg_dsn")
        s = open_store(schema_url(dsn, fresh_schema(dsn, "fi")))
    yield s
    s.close()


def _snapshot(store: Any, ns: str) -> tuple[Any, ...]:
    return (
        [i.to_dict() for i in store.items.select(ns)],
        store.items.metrics(ns),
        [(s, store.conversations.get(ns, s)) for s in store.conversations.sessions(ns)],
        [n.to_dict() for n in store.nodes.list(ns)],
        store.nodes.coverage(ns, 1),
    )


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(operations=_feature_ops)
def test_feature_operations_never_read_or_change_another_namespace(shared: Any, operations: list[tuple]) -> None:
    prefix = f"x{next(_example)}-"
    config = pyramid_config(micro_chunk_size=2).replace(items={"hot_token_limit": 30, "spill_count": 1})
    mems = {n: Memory(shared, namespace=prefix + n, config=config, embedder=None) for n in _NAMES}
    for kind, name, arg in operations:
        ns = prefix + name
        before = {other: _snapshot(shared, prefix + other) for other in _NAMES if other != name}
        mem = mems[name]
        if kind == "item":
            mem.items.add(f"{ns} note about {arg}")
        elif kind == "recall":
            assert all(i.namespace == ns and ns in i.content for i in mem.items.recall(arg).items)
        elif kind == "spill":
            mem.items.spill(1)
        elif kind == "state":
            shared.conversations.put(ConversationState(ns, arg, summary=ns, updated_at=T0))
        else:
            mem.add(msgs(3))  # seals segments through the pyramid
        assert {other: _snapshot(shared, prefix + other) for other in before} == before, (kind, name)
        assert all(i.content.startswith(ns + " ") for i in shared.items.select(ns))
        assert all((state.summary or ns) == ns for _, state in _snapshot(shared, ns)[2])


def test_summary_spend_adds_up_per_level_and_goes_with_its_namespace(store: Any) -> None:
    store.append("ns", [TurnBatch("s", [turn("t")], [1])])
    store.append("other", [TurnBatch("s", [turn("t")], [1])])
    assert store.nodes.spend("ns") == []
    store.nodes.add_spend("ns", 1, calls=2, input_tokens=300, output_tokens=40)
    store.nodes.add_spend("ns", 2, calls=1, input_tokens=90, output_tokens=25)
    store.nodes.add_spend("ns", 1, calls=1, input_tokens=150, output_tokens=20)
    store.nodes.add_spend("other", 1, calls=5, input_tokens=1, output_tokens=1)
    assert store.nodes.spend("ns") == [(1, 3, 450, 60), (2, 1, 90, 25)]
    assert store.nodes.spend("other") == [(1, 5, 1, 1)]
    # Forgetting the namespace forgets what it spent; the other namespace keeps its rows.
    Memory(store, namespace="ns", embedder=None).forget(all_namespace=True)
    assert store.nodes.spend("ns") == []
    assert store.nodes.spend("other") == [(1, 5, 1, 1)]


def test_a_nodes_settle_turn_is_the_newest_turn_when_its_summary_first_stood(store: Any) -> None:
    stored = store.append("ns", [TurnBatch("s", [turn("a"), turn("b")], [1, 1])])
    node_id = _segment(store, stored)
    assert store.nodes.get("ns", node_id).settled_turn is None
    later = store.append("ns", [TurnBatch("s", [turn("c")], [1])])
    store.nodes.set_summary("ns", node_id, Summary("A and b.", summarizer="t"), tokens=3, status="failed", error="x")
    assert store.nodes.get("ns", node_id).settled_turn == later[0].id
    store.append("ns", [TurnBatch("s", [turn("d")], [1])])
    store.nodes.set_summary("ns", node_id, Summary("A, then b.", summarizer="t"), tokens=3, status="ok", error=None)
    assert store.nodes.get("ns", node_id).settled_turn == later[0].id  # a retry keeps the first
