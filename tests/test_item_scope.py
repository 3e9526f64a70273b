"""Memory items (seed 003, issue 17): session scope, the ``message`` type, promotion spilling only what is
needed, and forgetting a session's items — on SQLite and PostgreSQL, through the library, CLI and HTTP."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pg import fresh_schema, schema_url

from stratamem import Config, Memory, ValidationError
from stratamem.cli import main as cli
from stratamem.items.api import Items
from stratamem.records.items import visible_in
from stratamem.store import SQLiteStore, open_store
from stratamem.store import migrations as mig
from stratamem.store.sqlite.schema import MIGRATIONS
from stratamem.testing.hash_embedder import HashEmbedder
from stratamem.tokens import get_tokenizer

TOKENIZER = get_tokenizer()


def exactly(n: int, head: str) -> str:
    """``head`` padded with one-token words to exactly ``n`` tokens."""
    text = head
    while TOKENIZER.count(text) < n:
        text += " x"
    assert TOKENIZER.count(text) == n, (head, n)
    return text


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A fresh store of each backend."""
    if request.param == "sqlite":
        s = SQLiteStore(tmp_path / "m.db")
    else:
        dsn = request.getfixturevalue("pg_dsn")
        s = open_store(schema_url(dsn, fresh_schema(dsn, "scope")))
    yield s
    s.close()


def items_on(store: Any, namespace: str = "t", embedder: Any = None, **cfg: Any) -> Items:
    config = Config().replace(items=cfg) if cfg else Config()
    return Items(store, namespace, tokenizer=TOKENIZER, config=config.items, embedder=embedder)


# --- session scope ------------------------------------------------------------------------------


def test_a_session_scoped_item_is_seen_only_in_its_session(store: Any) -> None:
    items = items_on(store, embedder=HashEmbedder(32))
    wide = items.add("the office budget is 50K", session="s1")  # a session label, visible everywhere
    mine = items.add("my budget note for s1", session="s1", scope="session")
    theirs = items.add("their budget note for s2", session="s2", scope="session")
    hot_mine = items.add("hot budget reminder for s1", session="s1", scope="session")
    items.spill(ids=[wide.id, mine.id, theirs.id])
    assert (wide.scope, mine.scope, mine.session) == ("namespace", "session", "s1")

    def found(session: str | None) -> set[int]:
        return {i.id for i in items.search("budget", limit=10, session=session).items}

    assert found("s1") == {wide.id, mine.id}
    assert found("s2") == {wide.id, theirs.id}
    assert found(None) == {wide.id}
    assert found("s3") == {wide.id}
    assert {i.id for i in items.recall("budget note", limit=10, auto_promote=False, session="s2").items} == {
        wide.id,
        theirs.id,
    }
    assert [i.id for i in items.hot("s1")] == [hot_mine.id]
    assert items.hot("s2") == [] and items.hot() == []
    assert [i.id for i in items.list(session="s2")] == [wide.id, theirs.id]
    assert [i.id for i in items.list()] == [wide.id, mine.id, theirs.id, hot_mine.id]
    s1, everything = items.status("s1").to_dict(), items.status().to_dict()
    assert (s1["hot"]["items"], s1["cold"]["items"]) == (1, 2)
    assert (everything["hot"]["items"], everything["cold"]["items"]) == (1, 3)


def test_recall_in_one_session_promotes_and_records_access_only_on_what_it_sees(store: Any) -> None:
    items = items_on(store)
    a = items.add("deploy key rotates on friday", session="a", scope="session", tier="cold")
    b = items.add("deploy key rotates on monday", session="b", scope="session", tier="cold")
    got = items.recall("deploy key rotates", limit=5, session="a")
    assert [i.id for i in got.items] == [a.id] and got.promoted == (a.id,)
    assert items.get(b.id).access_count == 0 and items.get(b.id).tier == "cold"
    assert items.spill(count=5, session="b").spilled == ()  # b sees no hot item: a's is not its to spill
    assert items.spill(count=5, session="a").spilled == (a.id,)


def test_a_key_replaces_only_items_of_the_same_scope(store: Any) -> None:
    items = items_on(store)
    wide = items.add("budget is 50K", key="budget")
    s1 = items.add("budget for s1 is 10K", key="budget", session="s1", scope="session")
    s2 = items.add("budget for s2 is 20K", key="budget", session="s2", scope="session")
    s1b = items.add("budget for s1 is 12K", key="budget", session="s1", scope="session")
    wide2 = items.add("budget is 60K", key="budget", session="s1")
    assert items.get(s1.id).superseded_by == s1b.id
    assert items.get(wide.id).superseded_by == wide2.id
    assert items.get(s2.id).superseded_by is None and items.get(s1b.id).superseded_by is None


def test_bad_scope_arguments_are_refused_and_nothing_is_stored(store: Any) -> None:
    items = items_on(store)
    with pytest.raises(ValidationError, match="session: a session-scoped item needs session=<name>"):
        items.add("orphan", scope="session")
    with pytest.raises(ValidationError, match="scope: 'team' is not one of namespace, session"):
        items.add("x", session="s1", scope="team")
    for call in (
        lambda: items.search("x", session="bad name"),
        lambda: items.hot("bad name"),
        lambda: items.list(session=""),
        lambda: items.status("a/b"),
        lambda: items.spill(session="?"),
    ):
        with pytest.raises(ValidationError, match="invalid session name"):
            call()
    assert items.list() == []


def test_the_context_of_a_session_holds_its_items_and_never_another_sessions(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", namespace="n", embedder=None) as mem:
        mem.add({"role": "user", "content": "hello from one"}, session="one")
        mem.add({"role": "user", "content": "hello from two"}, session="two")
        wide = mem.items.add("The team budget is 50K", "fact")
        one = mem.items.add("Session one prefers tea", "preference", session="one", scope="session")
        two = mem.items.add("Session two prefers coffee", "preference", session="two", scope="session")
        cold_two = mem.items.add("Session two drink order: coffee", session="two", scope="session", tier="cold")

        def ids(session: str) -> set[str]:
            ctx = mem.context("which drink order", session=session, format="text")
            return {i.id for i in ctx.manifest.items if i.kind == "item"}

        assert ids("one") == {f"item:{wide.id}", f"item:{one.id}"}
        assert ids("two") == {f"item:{wide.id}", f"item:{two.id}", f"item:{cold_two.id}"}


_scopes = st.sampled_from([None, "s1", "s2", "s3"])
_word = st.sampled_from(["budget", "tea", "rocket", "lisbon"])
_op = st.one_of(
    st.tuples(
        st.just("add"), st.sampled_from(["a", "b"]), _scopes, st.booleans(), _word, st.sampled_from(["hot", "cold"])
    ),
    st.tuples(st.just("recall"), st.sampled_from(["a", "b"]), _scopes, st.booleans(), _word, st.just("")),
    st.tuples(st.just("spill"), st.sampled_from(["a", "b"]), _scopes, st.booleans(), _word, st.just("")),
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(ops=st.lists(_op, min_size=1, max_size=25))
def test_no_read_ever_shows_another_namespace_or_another_sessions_scoped_items(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[Any, ...]]
) -> None:
    store = SQLiteStore(tmp_path_factory.mktemp("p") / "m.db")
    spaces = {ns: items_on(store, ns, hot_token_limit=30, spill_count=1) for ns in ("a", "b")}
    reads = [None, "s1", "s2", "s3"]
    for op, ns, session, scoped, word, tier in ops:
        items = spaces[ns]
        if op == "add":
            items.add(
                f"{word} note {ns} {session}",
                session=session,
                scope="session" if scoped and session else "namespace",
                tier=tier,
            )
        elif op == "recall":
            got = items.recall(word, limit=10, session=session, auto_promote=scoped)
            assert all(i.namespace == ns and visible_in(i, session) for i in got.items)
        else:
            items.spill(count=1, session=session)
        for name, it in spaces.items():
            everything = it.list()
            assert all(i.namespace == name for i in everything)
            for reader in reads:
                # Exactly the visible ones: nothing leaks and nothing visible is lost.
                want = {i.id for i in everything if visible_in(i, reader)}
                assert {i.id for i in it.list(session=reader)} == (want if reader else {i.id for i in everything})
                assert {i.id for i in it.hot(reader)} == {
                    i.id for i in everything if i.tier == "hot" and visible_in(i, reader)
                }
                hits = it.search(word, limit=50, session=reader).items
                assert {i.id for i in hits} == {
                    i.id for i in everything if i.id in want and i.tier != "hot" and word in i.content
                }
                totals = it.status(reader).to_dict()
                seen = [i for i in everything if reader is None or visible_in(i, reader)]
                assert totals["hot"]["items"] == sum(i.tier == "hot" for i in seen)
    store.close()


def test_m013_keeps_old_items_visible_to_the_whole_namespace(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    mig.apply(conn, [m for m in MIGRATIONS if m.name != "m013_item_scope"])
    conn.execute("INSERT INTO namespaces (id, name, created_at) VALUES (1, 't', '2025-01-01T00:00:00.000000Z')")
    conn.execute(
        "INSERT INTO memory_items (namespace_id, session, content, type, tier, tokens, created_at, "
        "relevance, source) VALUES (1, 's1', 'the budget is fifty', 'fact', 'cold', 4, "
        "'2025-01-01T00:00:00.000000Z', 1.0, 'api')"
    )
    conn.close()
    store = SQLiteStore(path)
    items = items_on(store)
    (old,) = items.list()
    assert (old.scope, old.session) == ("namespace", "s1")
    assert [i.id for i in items.search("budget", session="s2").items] == [old.id]
    with store.lock:
        assert store.connection.execute(
            "SELECT name FROM _stratamem_migrations WHERE name = 'm013_item_scope'"
        ).fetchall() == [("m013_item_scope",)]
    store.close()


# --- promotion spills only what is needed --------------------------------------------------------


def test_promoting_into_a_full_hot_tier_spills_exactly_the_items_needed(store: Any) -> None:
    items = items_on(store, hot_token_limit=1000, spill_count=4)
    hot = [items.add(exactly(100, f"hot item {i}")) for i in range(10)]
    big = items.add(exactly(150, "the big cold item"), tier="cold")
    assert items.status().hot.tokens == 1000
    promoted = items.promote(big.id)
    assert promoted.tier == "hot"
    # 150 tokens need two 100-token slots: the two first in spill order (equal relevance: oldest), no more.
    assert [i.id for i in items.list() if i.tier != "hot" and i.id != big.id] == [hot[0].id, hot[1].id]
    assert items.status().hot.tokens == 950
    assert items.metrics().to_dict()["spilled_items"] == 2


def test_a_promotion_that_fits_spills_nothing_and_one_that_needs_one_slot_spills_one(store: Any) -> None:
    items = items_on(store, hot_token_limit=500, spill_count=4)
    hot = [items.add(exactly(100, f"hot item {i}")) for i in range(4)]
    small = items.add(exactly(100, "small cold item"), tier="cold")
    other = items.add(exactly(60, "other cold item"), tier="cold")
    items.promote(small.id)
    assert all(items.get(h.id).tier == "hot" for h in hot)
    items.promote(other.id)  # 560 > 500: one 100-token item makes room
    assert [i.id for i in items.list() if i.tier == "cold"] == [hot[0].id]


def test_a_recall_promotion_also_spills_only_what_is_needed(store: Any) -> None:
    items = items_on(store, hot_token_limit=1000, spill_count=4)
    hot = [items.add(exactly(100, f"hot item {i}")) for i in range(10)]
    wanted = items.add(exactly(150, "zeppelin hangar lease renewal"), tier="cold")
    got = items.recall("zeppelin hangar lease renewal")
    assert got.promoted == (wanted.id,)
    assert set(got.spilled) == {hot[0].id, hot[1].id}
    assert items.status().hot.tokens == 950


def test_add_still_spills_a_batch_of_spill_count(store: Any) -> None:
    items = items_on(store, hot_token_limit=1000, spill_count=4)
    hot = [items.add(exactly(100, f"hot item {i}")) for i in range(10)]
    items.add(exactly(100, "one more"))
    assert [i.id for i in items.list() if i.tier != "hot"] == [h.id for h in hot[:4]]


# --- the message type: seed 003 Example 1 as written ----------------------------------------------


def test_seed_example_1_conversation_with_memory_management(tmp_path: Path) -> None:
    """Turns 1-6 hot (1200 tokens); turn 7 spills turns 1-2 to cold; turn 30 asks for the budget,
    turn 2 is found in cold and promoted to hot, and the next context answers from it."""
    config = Config().replace(items={"hot_token_limit": 1200, "spill_count": 2})
    with Memory(tmp_path / "m.db", namespace="agent", config=config, embedder=None) as mem:
        mem.add({"role": "user", "content": "Let's discuss the project proposal."}, session="session-123")
        texts = {n: exactly(200, f"Turn {n}: about the project proposal scope and timeline") for n in range(1, 31)}
        texts[2] = exactly(200, "Turn 2: we agreed on a $50K budget for the proposal")
        ids: dict[int, int] = {}

        def turn(n: int) -> None:
            ids[n] = mem.items.add(texts[n], "message", session="session-123").id

        for n in range(1, 7):
            turn(n)
        status = mem.items.status("session-123")
        assert [i.id for i in mem.items.hot("session-123")] == [ids[n] for n in range(6, 0, -1)]
        assert status.hot.tokens == 1200 and status.utilization_percent == 100.0
        turn(7)
        assert [i.id for i in mem.items.list(tier="cold")] == [ids[1], ids[2]]
        assert [i.id for i in mem.items.hot("session-123")] == [ids[n] for n in range(7, 2, -1)]
        assert mem.items.status("session-123").hot.tokens == 1000
        for n in range(8, 30):
            turn(n)
        assert mem.items.get(ids[2]).tier == "cold"
        hot_before = mem.items.status().hot.tokens
        found = mem.items.recall("What was the budget we discussed earlier?", session="session-123")
        assert [i.id for i in found.items] == [ids[2]] and "$50K budget" in found.items[0].content
        assert found.scores[ids[2]] >= config.items.promote_threshold
        assert found.promoted == (ids[2],) and mem.items.get(ids[2]).tier == "hot"
        # Only as many hot turns as the promoted one needs leave hot.
        assert len(found.spilled) == -(-(hot_before + 200 - 1200) // 200)
        ctx = mem.context("What was the budget we discussed earlier?", session="session-123", format="text")
        assert any(i.id == f"item:{ids[2]}" and i.reason == "hot_item" for i in ctx.manifest.items)
        assert "$50K budget" in ctx.text


# --- forgetting a session takes its items ------------------------------------------------------


def test_forgetting_a_session_removes_its_items_and_keeps_the_rest(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", namespace="n", embedder=None) as mem:
        for s in ("one", "two"):
            mem.add({"role": "user", "content": f"hello from {s}"}, session=s)
        wide = mem.items.add("namespace fact")
        labelled = mem.items.add("fact noted in one", session="one")
        scoped = mem.items.add("one's own note", session="one", scope="session", tier="cold")
        other = mem.items.add("two's own note", session="two", scope="session")
        report = mem.forget(session="one")
        assert report.items_removed == 2
        assert [i.id for i in mem.items.list()] == [wide.id, other.id]
        assert labelled.id != scoped.id and mem.items.search("own note", session="one").items == ()


# --- CLI and HTTP -------------------------------------------------------------------------------


def test_cli_scopes_items_to_a_session(tmp_path: Path) -> None:
    runner = CliRunner()
    base = ["--db", str(tmp_path / "cli.db"), "-n", "agent", "--embedding", "none"]

    def run(*args: str) -> Any:
        res = runner.invoke(cli, [*base, *args], catch_exceptions=False)
        assert res.exit_code == 0, res.output
        return json.loads(res.output)

    mine = run("items", "add", "s1 budget note", "--session", "s1", "--scope", "session", "--tier", "cold")
    wide = run("items", "add", "shared budget note", "--type", "message", "--tier", "cold")
    assert (mine["scope"], wide["type"]) == ("session", "message")
    assert [i["id"] for i in run("items", "recall", "budget note", "--no-promote", "-k", "5")["items"]] == [wide["id"]]
    assert {i["id"] for i in run("items", "recall", "budget note", "--no-promote", "-s", "s1", "-k", "5")["items"]} == {
        wide["id"],
        mine["id"],
    }
    assert [i["id"] for i in run("items", "list", "--session", "s2")] == [wide["id"]]
    assert run("items", "status", "--session", "s2")["cold"]["items"] == 1
    assert run("items", "status")["cold"]["items"] == 2
    bad = runner.invoke(cli, [*base, "items", "add", "x", "--scope", "session"])
    assert bad.exit_code == 1 and "ValidationError: session: a session-scoped item needs session=<name>" in bad.output


def test_http_item_routes_take_scope_and_session(tmp_path: Path) -> None:
    from webserver import Server, web_config

    srv = Server(tmp_path / "w.db", namespace="agent", config=web_config().replace(embedding={"provider": "none"}))
    try:
        with srv.client() as http:
            ns = "/api/v1/namespaces/agent"
            mine = http.post(
                f"{ns}/items", json={"content": "s1 rocket note", "session": "s1", "scope": "session", "tier": "cold"}
            )
            wide = http.post(f"{ns}/items", json={"content": "shared rocket note", "type": "message", "tier": "cold"})
            assert (mine.status_code, wide.status_code) == (201, 201), mine.text
            recall = http.post(
                f"{ns}/items/recall", json={"query": "rocket note", "limit": 5, "auto_promote": False, "session": "s2"}
            )
            assert [i["id"] for i in recall.json()["items"]] == [wide.json()["id"]]
            listed = http.get(f"{ns}/items", params={"session": "s1"}).json()["items"]
            assert [i["id"] for i in listed] == [mine.json()["id"], wide.json()["id"]]
            unknown = http.post(f"{ns}/items/recall", json={"query": "rocket", "sessionId": "s1"})
            assert unknown.status_code == 400 and "sessionId" in unknown.text
            orphan = http.post(f"{ns}/items", json={"content": "x", "scope": "session"})
            assert orphan.status_code == 400 and orphan.json()["error"]["path"] == "session"
    finally:
        srv.stop()
