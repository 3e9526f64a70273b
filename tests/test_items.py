"""Memory items (seed 003): tiers, spill, recall, promotion without thrashing, supersession, review,
metrics, namespace isolation, the CLI."""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stratamem import BackendError, BudgetError, Config, Memory, NotFoundError, ValidationError
from stratamem.cli import main as cli
from stratamem.errors import ModelError
from stratamem.items.api import Items
from stratamem.items.metrics import to_prometheus
from stratamem.items.recall import match_score
from stratamem.store import SQLiteStore
from stratamem.store import migrations as mig
from stratamem.store.sqlite.schema import MIGRATIONS
from stratamem.testing.hash_embedder import HashEmbedder
from stratamem.tokens import get_tokenizer


class Clock:
    """A settable clock: recalls and spills happen at the times the test says."""

    def __init__(self) -> None:
        self.now = datetime(2025, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def make(
    tmp_path: Path | None = None,
    namespace: str = "t",
    embedder: object | None = None,
    clock: Clock | None = None,
    **items_cfg: object,
) -> tuple[Memory, Items]:
    config = Config().replace(items=items_cfg) if items_cfg else Config()
    mem = Memory(tmp_path / "m.db" if tmp_path else ":memory:", namespace=namespace, config=config, embedder=None)
    items = Items(
        mem.store,
        namespace,
        tokenizer=mem.tokenizer,
        config=config.items,
        embedder=embedder,  # type: ignore[arg-type]
        events=mem.events,
        clock=clock,
    )
    return mem, items


# --- seed 003's three scenarios -------------------------------------------------------


def test_auto_spill_keeps_hot_within_its_token_limit(tmp_path: Path) -> None:
    mem, items = make(tmp_path, hot_token_limit=40, spill_count=2)
    for i in range(20):
        items.add(f"Message {i} with some content", "context")
    status = items.status()
    tok = get_tokenizer()
    assert tok.count("Message 0 with some content") == tok.count("Message 19 with some content") == 6
    # 40 tokens hold six 6-token items; each overflow spills two, so 5 or 6 stay hot.
    assert status.hot.tokens == 36 <= 40
    assert (status.hot.items, status.cold.items, status.warm.items) == (6, 14, 0)
    assert status.metrics.spills == 7 and status.metrics.spilled_items == 14
    assert [e.data["automatic"] for e in mem.events.recent("items.spilled")] == [True] * 7
    # Spill order is lowest relevance then oldest: the first 14 messages went cold.
    assert sorted(i.content for i in items.list("cold")) == sorted(f"Message {i} with some content" for i in range(14))
    mem.close()


def test_recall_from_cold_finds_the_budget() -> None:
    mem, items = make()
    fact = items.add("The budget is $50K", "fact")
    items.add("We meet on Tuesdays", "fact")
    items.spill(count=2)
    result = items.recall("what was the budget?")
    assert result.mode == "lexical"
    assert [i.content for i in result.items] == ["The budget is $50K"]
    assert result.scores == {fact.id: 1.0}
    assert result.items[0].access_count == 1
    mem.close()


def test_seed_promotion_of_a_recalled_important_fact() -> None:
    mem, items = make()
    items.add("Important fact", "fact")
    items.spill()
    for _ in range(5):
        items.recall("important fact")
    assert [i.content for i in items.hot()] == ["Important fact"]
    mem.close()


def test_frequently_recalled_item_is_promoted_even_on_weak_matches() -> None:
    mem, items = make(promote_threshold=0.85, warm_access_threshold=3)
    fact = items.add("Important fact about the launch window", "fact")
    items.spill(ids=[fact.id])
    seen = []
    for _ in range(4):
        r = items.recall("important budget")  # covers half the query words: a weak match (0.5)
        seen.append((r.scores[fact.id], r.items[0].access_count, r.items[0].tier, r.promoted))
    # Accessed more than 3 times -> promoted on the 4th recall, not before.
    assert seen == [(0.5, 1, "cold", ()), (0.5, 2, "cold", ()), (0.5, 3, "cold", ()), (0.5, 4, "hot", (fact.id,))]
    # Hot items are already in the prompt: recall does not return them.
    assert items.recall("important budget").items == ()
    assert items.metrics().promotions == 1
    mem.close()


def test_spilled_items_go_warm_only_when_accessed_more_than_the_threshold() -> None:
    mem, items = make(warm_access_threshold=1, promote_threshold=1.01)
    busy = items.add("Alpha project codename", "entity")
    quiet = items.add("Beta supplier contact", "entity")
    items.spill(ids=[busy.id])
    items.recall("alpha codename", auto_promote=False)
    items.recall("alpha codename", auto_promote=False)
    items.promote(busy.id)
    result = items.spill(ids=[busy.id, quiet.id])
    assert (result.to_warm, result.to_cold) == ((busy.id,), (quiet.id,))
    assert items.get(busy.id).tier == "warm" and items.get(quiet.id).tier == "cold"
    mem.close()


# --- no thrashing ---------------------------------------------------------------------


def test_alternating_recalls_of_two_items_competing_for_one_slot_do_not_thrash() -> None:
    clock = Clock()
    mem, items = make(clock=clock, hot_token_limit=6, promote_cooldown_s=60.0, spill_count=1)
    a = items.add("alpha rocket fuel supplier", "fact")
    b = items.add("bravo rocket engine vendor", "fact")  # 4 + 5 > 6: a is spilled
    assert (a.tokens, b.tokens) == (4, 5)
    items.spill(ids=[b.id])
    assert {items.get(a.id).tier, items.get(b.id).tier} == {"cold"}
    history = []
    for step in range(20):
        clock.advance(1)
        r = items.recall("alpha supplier" if step % 2 == 0 else "bravo vendor")
        history.append((r.promoted, tuple(x.reason for x in r.refused)))
    # a is promoted once; b then could only get in by evicting a, which is protected.
    assert history[0] == ((a.id,), ())
    assert history[1:] == [((), ("hot_full",)) if i % 2 == 0 else ((), ()) for i in range(19)]
    assert items.metrics().promotions == 1 and items.metrics().promotions_refused == 10
    # After the cooldown one swap is allowed, and then b holds the slot for a cooldown.
    clock.advance(60)
    swap = items.recall("bravo vendor")
    assert swap.promoted == (b.id,) and swap.spilled == (a.id,)
    later = []
    for step in range(10):
        clock.advance(1)
        r = items.recall("alpha supplier" if step % 2 == 0 else "bravo vendor")
        later.append(r.promoted)
    assert later == [()] * 10
    assert [i.id for i in items.hot()] == [b.id]
    mem.close()


def test_promotion_never_exceeds_the_hot_limit_and_refuses_oversized_items() -> None:
    clock = Clock()
    mem, items = make(clock=clock, hot_token_limit=6, spill_count=1)
    big = items.add("alpha bravo charlie delta echo", "fact", tier="cold")
    with pytest.raises(BudgetError, match="item has 10 tokens, more than the hot limit of 6"):
        items.add("alpha bravo charlie delta echo foxtrot golf", "fact")
    assert big.tokens == 6
    small = items.add("one two three", "fact")
    r = items.recall("alpha bravo charlie delta echo")
    assert r.promoted == (big.id,) and r.spilled == (small.id,) and items.status().hot.tokens == 6
    mem.close()


# --- supersession, review, extraction -------------------------------------------------


def test_newer_item_with_the_same_key_supersedes_the_older_one() -> None:
    clock = Clock()
    mem, items = make(clock=clock)
    old = items.add("The budget is $50K", "fact", key="project.budget")
    clock.advance(10)
    new = items.add("The budget is now $75K", "fact", key="project.budget")
    old_after = items.get(old.id)
    assert old_after.superseded_by == new.id and old_after.tier == "cold" and not old_after.live
    assert old_after.valid_to == new.valid_from == clock.now
    assert items.get(new.id).supersedes == (old.id,)
    items.spill(ids=[new.id])
    assert [i.id for i in items.recall("budget", auto_promote=False).items] == [new.id]
    both = items.recall("budget", auto_promote=False, include_superseded=True)
    assert [i.id for i in both.items] == [new.id, old.id]
    # As of a time before the replacement, only the old item held.
    past = items.recall("budget", auto_promote=False, include_superseded=True, as_of=clock.now - timedelta(seconds=5))
    assert [i.id for i in past.items] == [old.id]
    mem.close()


def test_a_failed_add_leaves_the_store_as_it_was() -> None:
    mem, items = make(hot_token_limit=10, spill_count=1)
    first = items.add("alpha bravo charlie delta", "fact")
    before = [i.to_dict() for i in items.list()]
    with pytest.raises(NotFoundError, match="no memory item 999"):
        items.add("echo foxtrot golf hotel india", "fact", supersedes=[999])  # would have spilled first
    assert [i.to_dict() for i in items.list()] == before
    assert items.metrics().spills == 0
    assert items.get(first.id).tier == "hot"
    mem.close()


def test_extracted_items_carry_provenance_and_can_be_confirmed_or_rejected() -> None:
    mem, items = make()
    turns = mem.add(
        [{"role": "user", "content": "I moved to Lisbon in May."}, {"role": "assistant", "content": "Lisbon, noted."}]
    )
    ids = [t.id for t in turns]
    made = items.extract_from(["User moved to Lisbon in May", "User moved to Lisbon in May"], ids)
    assert len(made) == 1
    item = made[0]
    assert (item.source, item.review, item.tier, item.provenance) == ("extracted", "pending", "cold", tuple(ids))
    assert items.extract_from(["User moved to Lisbon in May"], ids) == []  # re-extraction adds nothing
    assert items.confirm(item.id).review == "confirmed"
    assert items.reject(item.id).review == "rejected"
    assert items.recall("Lisbon").items == ()
    api = items.add("Prefers tea", "preference")
    with pytest.raises(ValidationError, match="only extracted items are reviewed"):
        items.confirm(api.id)
    other = mem.for_namespace("other")
    theirs = other.add({"role": "user", "content": "hello"})
    with pytest.raises(NotFoundError, match="not in namespace 't'"):
        items.extract_from(["x"], [theirs[0].id])
    assert items.status().flags == {
        "superseded": 0,
        "pending_review": 0,
        "rejected": 1,
        "dropped": 0,
        "unembedded": 2,
    }
    mem.close()


# --- semantic recall, embedder failures -----------------------------------------------


def test_hybrid_recall_uses_vectors_and_words() -> None:
    emb = HashEmbedder(64)
    mem, items = make(embedder=emb)
    a = items.add("budget approved fifty thousand dollars", "fact")
    items.add("the team meets every tuesday", "fact")
    items.spill(count=2)
    r = items.recall("approved budget", auto_promote=False)
    assert r.mode == "hybrid"
    assert [i.id for i in r.items] == [a.id]
    vecs = emb.embed_batch(["budget approved fifty thousand dollars", "approved budget"])
    assert r.lexical[a.id] == 1.0
    assert r.semantic[a.id] == pytest.approx(float(vecs[0] @ vecs[1]), abs=1e-5)
    # Every word of the query is in the item: the score is 1 with or without vectors (match_score).
    assert r.scores[a.id] == pytest.approx(match_score(1.0, r.semantic[a.id])) == 1.0
    mem.close()


def test_recall_from_cold_with_the_real_local_model_finds_a_paraphrase(tmp_path: Path, minilm: object) -> None:
    mem = Memory(tmp_path / "m.db", namespace="t", embedder=minilm)
    items = mem.items
    budget = items.add("The budget is $50K", "fact")
    items.add("We meet on Tuesdays at ten", "fact")
    items.add("Caroline adopted a dog named Max", "entity")
    items.spill(count=3)
    # No word of the question occurs in the fact: only the vectors can connect them.
    r = items.recall("How much money do we have to spend on the project?", auto_promote=False)
    assert r.mode == "hybrid"
    # The other two facts score under recall_min_score; the budget alone comes back, by its vector.
    assert [i.id for i in r.items] == [budget.id] and r.lexical[budget.id] == 0.0
    assert (
        r.scores[budget.id] == pytest.approx(match_score(0.0, r.semantic[budget.id])) and r.semantic[budget.id] >= 0.5
    )
    lexical_only = Items(mem.store, "t", tokenizer=mem.tokenizer)
    assert lexical_only.recall("How much money do we have to spend on the project?").items == ()
    mem.close()


def test_a_failing_embedder_never_loses_the_item_and_says_so() -> None:
    emb = HashEmbedder(64, fail_with=RuntimeError("model unavailable"))
    mem, items = make(embedder=emb)
    item = items.add("budget is fifty thousand", "fact")
    assert item.embedded is False
    assert [e.kind for e in mem.events.recent() if e.kind.startswith("items.embed")] == ["items.embed_failed"]
    assert items.status().flags["unembedded"] == 1
    with pytest.raises(ModelError, match="model unavailable"):
        items.recall("budget")
    emb.fail_with = None
    assert items.embed_missing() == 1
    items.spill()
    assert [i.id for i in items.recall("budget", auto_promote=False).items] == [item.id]
    mem.close()


def test_replacing_a_hot_item_by_key_spills_nothing_else() -> None:
    mem, items = make(hot_token_limit=12, spill_count=1)
    tok = get_tokenizer()
    assert [tok.count(t) for t in ("deploys run on friday", "the budget is fifty", "the budget is now sixty")] == [
        5,
        4,
        5,
    ]
    other = items.add("deploys run on friday")  # the oldest: first in spill order
    old = items.add("the budget is fifty", key="budget")
    new = items.add("the budget is now sixty", key="budget")  # 14 > 12 tokens, unless the old one leaves first
    assert {i.id for i in items.list("hot")} == {other.id, new.id}
    assert items.get(old.id).tier == "cold" and items.get(old.id).superseded_by == new.id
    assert items.metrics().spills == 0 and mem.events.recent("items.spilled") == []
    mem.close()


def test_every_embedder_failure_reaches_callers_as_a_model_error() -> None:
    class Broken:
        def __init__(self, answer: object) -> None:
            self.answer = answer

        def embed_batch(self, texts: list[str]) -> object:
            if isinstance(self.answer, BaseException):
                raise self.answer
            return self.answer

    answers = {
        "raises": KeyError("gone"),
        "ragged": [[1.0, 2.0], [3.0]],
        "not numbers": [["a", "b"]],
        "nan": [[1.0, float("nan")]],
        "wrong rows": [[1.0, 0.0], [0.0, 1.0]],
    }
    for label, answer in answers.items():
        mem, items = make(embedder=Broken(answer))
        item = items.add("budget is fifty", tier="cold")
        assert item.embedded is False, label
        assert len(mem.events.recent("items.embed_failed")) == 1, label
        with pytest.raises(ModelError, match="embed"):
            items.search("budget")
        with pytest.raises(ModelError, match="embed"):
            items.recall("budget")
        assert items.metrics().recalls == 0, label
        mem.close()


# --- read-only search -----------------------------------------------------------------


def _rows(path: Path) -> dict[str, list[tuple[object, ...]]]:
    conn = sqlite3.connect(path)
    tables = ("memory_items", "memory_item_metrics", "memory_item_vector_log", "namespaces")
    out = {t: conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() for t in tables}
    conn.close()
    return out


def _world(tmp_path: Path) -> tuple[Memory, Items, Clock]:
    clock = Clock()
    mem, items = make(
        tmp_path, embedder=HashEmbedder(64), clock=clock, hot_token_limit=30, spill_count=2, warm_access_threshold=1
    )
    for i in range(12):
        items.add(f"note {i}: the budget of project w{i % 4} is {i * 100} euros", key=f"k{i % 9}")
        clock.advance(60)
    items.recall("budget project w1", limit=2)  # some warm, some promoted: every state occurs
    return mem, items, clock


def test_search_ranks_exactly_like_recall_and_writes_nothing(tmp_path: Path) -> None:
    mem, items, clock = _world(tmp_path)
    fresh = Items(
        mem.store,
        "t",
        tokenizer=mem.tokenizer,
        config=items.config,
        embedder=HashEmbedder(64),
        events=mem.events,
        clock=clock,
    )
    queries = ("budget project w2", "euros 300", "note 7", "zebra")
    before = _rows(tmp_path / "m.db")
    events = len(mem.events.recent())
    found = [fresh.search(q, limit=4, include_superseded=True) for q in queries]
    assert _rows(tmp_path / "m.db") == before and len(mem.events.recent()) == events
    assert [len(r.items) for r in found] == [4, 4, 4, 0]
    for r in found:
        assert (r.promoted, r.refused, r.spilled, r.mode) == ((), (), (), "hybrid")
    recalled = [fresh.recall(q, limit=4, include_superseded=True, auto_promote=False) for q in queries]
    for s, r in zip(found, recalled, strict=True):
        assert [i.id for i in s.items] == [i.id for i in r.items]
        assert (s.scores, s.semantic, s.lexical) == (r.scores, r.semantic, r.lexical)
    assert _rows(tmp_path / "m.db") != before  # recall does write: the comparison above can fail
    mem.close()


def test_search_works_on_a_store_that_refuses_writes(tmp_path: Path) -> None:
    mem, items, clock = _world(tmp_path)
    expected = [i.id for i in items.search("budget project w3", limit=3).items]
    mem.close()
    store = SQLiteStore(tmp_path / "m.db")
    with store.lock:
        store.connection.execute("PRAGMA query_only = ON")  # every write now fails, BEGIN included
    reader = Items(store, "t", tokenizer=get_tokenizer(), config=items.config, embedder=HashEmbedder(64), clock=clock)
    assert [i.id for i in reader.search("budget project w3", limit=3).items] == expected
    assert len(expected) == 3
    with pytest.raises(BackendError, match="readonly"):
        reader.recall("budget project w3")
    store.close()


# --- ids, migration m007 --------------------------------------------------------------


def test_m007_keeps_every_item_and_its_search_and_stops_id_reuse(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    before_m007 = MIGRATIONS[: [m.name for m in MIGRATIONS].index("m007_item_ids")]
    conn = sqlite3.connect(path, isolation_level=None)
    mig.apply(conn, before_m007)
    conn.execute("INSERT INTO namespaces (id, name, created_at) VALUES (1, 't', '2025-01-01T00:00:00.000000Z')")
    for i, (text, newer) in enumerate(
        [("the old budget is fifty", 2), ("the budget is sixty", None), ("lunch is at noon", None)], start=1
    ):
        conn.execute(
            "INSERT INTO memory_items (id, namespace_id, content, type, tier, tokens, created_at, "
            "relevance, source, superseded_by) VALUES (?, 1, ?, 'fact', 'cold', 4, "
            "'2025-01-01T00:00:00.000000Z', 1.0, 'api', ?)",
            (i, text, newer),
        )
    old_rows = conn.execute("SELECT * FROM memory_items ORDER BY id").fetchall()
    conn.close()
    store = SQLiteStore(path)
    items = Items(store, "t", tokenizer=get_tokenizer())
    with store.lock:
        # m013_item_scope adds the scope column after them: every old item is namespace-wide; m018_item_facts
        # adds fact_key and salience, both NULL for API items.
        assert store.connection.execute("SELECT * FROM memory_items ORDER BY id").fetchall() == [
            (*row, "namespace", None, None) for row in old_rows
        ]
    assert [i.id for i in items.search("budget", include_superseded=True).items] == [2, 1]
    assert items.prune([3]) == 1
    assert items.add("a new fact").id == 4  # not 3 again
    assert [i.id for i in items.search("lunch noon").items] == []
    store.close()
    assert SQLiteStore(path).items.get("t", [1])[0].superseded_by == 2


_index_ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.sampled_from(["cold", "warm"]), st.booleans()),  # booleans: embedder up?
        st.tuples(st.just("prune"), st.integers(0, 30), st.just(False)),
        st.tuples(st.just("backfill"), st.just(""), st.just(False)),
        st.tuples(st.just("search"), st.just(""), st.just(False)),
    ),
    min_size=1,
    max_size=25,
)


@settings(max_examples=30, deadline=None)
@given(operations=_index_ops)
def test_a_live_vector_index_always_equals_the_stored_vectors(operations: list[tuple[str, str, bool]]) -> None:
    """Whatever another handle adds, prunes or backfills, the reader's index ends equal to the table."""
    store = SQLiteStore(":memory:")
    emb = HashEmbedder(16)
    writer = Items(store, "t", tokenizer=get_tokenizer(), embedder=emb)
    reader = Items(store, "t", tokenizer=get_tokenizer(), embedder=HashEmbedder(16))
    for n, (kind, arg, up) in enumerate(operations):
        if kind == "add":
            emb.fail_with = None if up else RuntimeError("down")
            writer.add(f"fact {n} about topic{n % 3}", tier=arg)
            emb.fail_with = None
        elif kind == "prune":
            cold = [i.id for i in writer.list("cold")]
            if cold:
                writer.prune([cold[int(arg) % len(cold)]])
        elif kind == "backfill":
            writer.embed_missing()
        else:
            reader.search("topic1")
    reader.search("topic2")
    stored = {r[0]: r[1] for r in store.items.vectors_after("t", 0)}
    assert reader._index.ids() == set(stored)
    query = np.asarray(HashEmbedder(16).embed_batch(["topic2 fact"])[0], dtype=np.float32)
    expected = {i: float(np.frombuffer(b, dtype=np.float32) @ query) for i, b in stored.items()}
    got = dict(reader._index.scores_for(sorted(stored), query))
    assert got.keys() == expected.keys()
    assert all(abs(got[i] - expected[i]) < 1e-6 for i in got)
    store.close()


# --- threads --------------------------------------------------------------------------


def test_one_items_serves_concurrent_adds_searches_and_recalls_from_threads(tmp_path: Path) -> None:
    mem, items = make(tmp_path, embedder=HashEmbedder(32), hot_token_limit=60, spill_count=2)
    errors: list[BaseException] = []
    added: list[int] = []

    def guarded(work: object) -> object:
        def run() -> None:
            try:
                work()  # type: ignore[operator]
            except BaseException as exc:  # noqa: BLE001 - collected and asserted empty below
                errors.append(exc)

        return run

    def writer(w: int) -> None:
        for i in range(20):
            added.append(items.add(f"writer{w} fact{i} token{w}x{i}", tier="hot" if i % 2 else "cold").id)

    def reader(r: int) -> None:
        for i in range(20):
            items.search(f"writer{r % 2} fact{i}")
            items.recall(f"token{r % 2}x{i}", auto_promote=bool(i % 2))

    threads = [threading.Thread(target=guarded(lambda w=w: writer(w))) for w in range(2)]
    threads += [threading.Thread(target=guarded(lambda r=r: reader(r))) for r in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == [] and not any(t.is_alive() for t in threads)
    stored = items.list()
    assert sorted(added) == [i.id for i in stored] and len(stored) == 40
    assert items.status().hot.tokens <= 60
    items.search("anything")
    assert items._index.ids() == {i.id for i in stored if i.embedded} and all(i.embedded for i in stored)
    for it in stored:
        if it.tier != "hot":
            assert it.id in [x.id for x in items.search(it.content.split()[2], limit=1).items]
    mem.close()


# --- status, metrics ------------------------------------------------------------------


def test_status_suggests_spill_recall_and_prune() -> None:
    mem, items = make(
        hot_token_limit=20, max_cold_items=2, warm_access_threshold=0, spill_count=1, promote_threshold=1.01
    )
    cold = [items.add(f"cold note {w}", "context", tier="cold") for w in ("kilo", "lima", "mike")]
    s = items.status()
    assert [(x.type, x.item_ids) for x in s.suggestions] == [("prune", (cold[0].id,))]
    busy = items.add("warm fact zulu", "fact")
    items.spill(ids=[busy.id])
    items.recall("zulu", auto_promote=False)
    items.promote(busy.id)
    items.spill(ids=[busy.id])
    assert items.get(busy.id).tier == "warm"
    kinds = [x.type for x in items.status().suggestions]
    assert kinds == ["recall", "prune"]
    items.add("alpha bravo charlie delta echo foxtrot golf hotel india", "fact")  # 12 tokens
    items.add("quebec romeo", "fact")  # 5 tokens: 85 % of the limit, and hot is no longer half empty
    s = items.status()
    assert s.hot.tokens == 17 and [x.type for x in s.suggestions] == ["prune"]
    items.add("one two three", "fact")  # 20 tokens: over 90 %
    s = items.status()
    assert s.utilization_percent == 100.0 and [x.type for x in s.suggestions] == ["spill", "prune"]
    assert items.prune() == 1
    assert [x.type for x in items.status().suggestions] == ["spill"]
    mem.close()


def test_metrics_export_in_prometheus_text_format() -> None:
    mem, items = make(hot_token_limit=100)
    items.add("The budget is $50K", "fact")
    items.spill()
    items.recall("budget", auto_promote=False)
    items.recall("nothing matches this", auto_promote=False)
    m = items.metrics()
    assert (m.recalls, m.recall_hits, m.hit_rate, m.spills, m.spilled_items) == (2, 1, 0.5, 1, 1)
    text = to_prometheus([m])
    assert text.endswith("\n")
    assert 'stratamem_memory_recalls_total{namespace="t"} 2' in text
    assert 'stratamem_memory_hit_rate{namespace="t"} 0.5' in text
    assert 'stratamem_memory_recall_latency_ms_count{namespace="t"} 2' in text
    assert 'stratamem_memory_recall_latency_ms_bucket{namespace="t",le="+Inf"} 2' in text
    assert "# TYPE stratamem_memory_recall_latency_ms histogram" in text
    samples = [ln for ln in text.splitlines() if not ln.startswith("#")]
    assert all(re.fullmatch(r"[a-z_]+\{[^}]*\} [0-9.+Inf]+", ln) for ln in samples)
    mem.close()


def test_bad_input_gets_clear_errors() -> None:
    mem, items = make(auto_spill=False, hot_token_limit=5)
    with pytest.raises(ValidationError, match="'opinion' is not one of fact"):
        items.add("x", "opinion")
    with pytest.raises(ValidationError, match="content: must not be empty"):
        items.add("  ")
    with pytest.raises(ValidationError, match="limit must be a positive integer"):
        items.recall("x", 0)
    with pytest.raises(ValidationError, match="count must be a positive integer"):
        items.spill(0)
    items.add("one two three", "fact")
    with pytest.raises(BudgetError, match="auto_spill is off"):
        items.add("four five six", "fact")
    with pytest.raises(NotFoundError):
        items.get(12345)
    mem.close()


# --- namespace isolation (property) ---------------------------------------------------

_words = st.sampled_from(["budget", "alpha", "tea", "lisbon", "rocket", "tuesday", "vendor", "plan"])
_ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.lists(_words, min_size=1, max_size=4)),
        st.tuples(st.just("recall"), st.lists(_words, min_size=1, max_size=2)),
        st.tuples(st.just("spill"), st.integers(1, 3)),
        st.tuples(st.just("promote_other"), st.integers(0, 5)),
        st.tuples(st.just("key"), st.lists(_words, min_size=1, max_size=3)),
    ),
    max_size=12,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(theirs=st.lists(st.lists(_words, min_size=1, max_size=4), min_size=1, max_size=5), ops=_ops)
def test_operations_in_one_namespace_never_change_or_reveal_another(
    theirs: list[list[str]], ops: list[tuple[str, object]]
) -> None:
    mem, b = make(namespace="b", hot_token_limit=12, spill_count=1)
    a = Items(mem.store, "a", tokenizer=mem.tokenizer, config=b.config)
    for words in theirs:
        b.add(" ".join(words), "fact", key="shared.key")
    b.spill(count=1)
    before = ([i.to_dict() for i in b.list()], b.metrics().to_dict(), b.status().to_dict())
    their_ids = [i.id for i in b.list()]
    their_texts = {i.content for i in b.list()}
    for op, arg in ops:
        if op == "add":
            got = a.add(" ".join(arg), "fact")  # type: ignore[arg-type]
            assert got.namespace == "a"
        elif op == "key":
            a.add(" ".join(arg), "fact", key="shared.key")  # type: ignore[arg-type]
        elif op == "recall":
            r = a.recall(" ".join(arg))  # type: ignore[arg-type]
            assert not {i.id for i in r.items} & set(their_ids)
            assert all(i.namespace == "a" for i in r.items)
        elif op == "spill":
            a.spill(int(arg))  # type: ignore[call-overload]
        else:
            target = their_ids[int(arg) % len(their_ids)]  # type: ignore[call-overload]
            for call in (a.promote, a.get, a.confirm, a.reject):
                with pytest.raises(NotFoundError):
                    call(target)
            with pytest.raises(NotFoundError):
                a.spill(ids=[target])
    after = ([i.to_dict() for i in b.list()], b.metrics().to_dict(), b.status().to_dict())
    assert after == before
    assert all(i.namespace == "a" and (i.content not in their_texts or i.id not in their_ids) for i in a.list())
    mem.close()


# --- CLI ------------------------------------------------------------------------------


def test_cli_items_round_trip_and_metrics(tmp_path: Path) -> None:
    runner = CliRunner()
    db = str(tmp_path / "cli.db")
    base = ["--db", db, "-n", "agent", "--embedding", "none"]

    def run(*args: str) -> str:
        res = runner.invoke(cli, [*base, *args], catch_exceptions=False)
        assert res.exit_code == 0, res.output
        return res.output

    added = json.loads(run("items", "add", "The budget is $50K", "--type", "fact"))
    assert added["tier"] == "hot"
    assert json.loads(run("items", "spill", "--count", "1"))["to_cold"] == [added["id"]]
    rec = json.loads(run("items", "recall", "budget", "--no-promote"))
    assert [i["content"] for i in rec["items"]] == ["The budget is $50K"] and rec["promoted"] == []
    assert json.loads(run("items", "promote", str(added["id"])))["tier"] == "hot"
    status = json.loads(run("items", "status"))
    assert status["hot"]["items"] == 1 and status["recall_mode"] == "lexical"
    assert 'stratamem_memory_recalls_total{namespace="agent"} 1' in run("metrics")
    assert json.loads(run("metrics", "--format", "json"))[0]["promotions"] == 1
    bad = runner.invoke(cli, [*base, "items", "promote", "999"])
    assert bad.exit_code == 1 and "NotFoundError: no memory item 999 in namespace 'agent'" in bad.output
