"""The Store contract: every behaviour is one test, run on SQLite and on PostgreSQL.

The PostgreSQL half runs against a real server (pgserver, or ``STRATAMEM_PG_DSN``);
each test gets a fresh schema.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pg import fresh_schema, schema_url

from stratamem import Memory
from stratamem.errors import BackendError, ConfigError, MigrationError, NotFoundError, ValidationError
from stratamem.records import ImageBlock, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock, Turn
from stratamem.store import Store, TurnBatch
from stratamem.store.open import open_store

BACKENDS = ["sqlite", "postgres"]
T0 = datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=UTC)

Opener = Callable[..., Store]


@pytest.fixture(params=BACKENDS)
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Opens (and reopens) one fresh store of the parametrized backend; closes them all after."""
    if request.param == "sqlite":
        target = str(tmp_path / "store.db")
    else:
        dsn = request.getfixturevalue("pg_dsn")
        target = schema_url(dsn, fresh_schema(dsn))
    opened: list[Store] = []

    def open_(**kwargs: Any) -> Store:
        store = open_store(target, **kwargs)
        opened.append(store)
        return store

    open_.target = target  # type: ignore[attr-defined]
    yield open_
    for s in opened:
        s.close()


@pytest.fixture
def store(opener: Opener) -> Store:
    return opener()


def turn(text: str, role: str = "user", **kw: Any) -> Turn:
    return Turn(role=role, content=text, timestamp=T0, **kw)  # type: ignore[arg-type]


def batch(session: str, *texts: str, **kw: Any) -> TurnBatch:
    return TurnBatch(session, [turn(t) for t in texts], [len(t) for t in texts], **kw)


def raw_execute(store: Store, statement: str) -> None:
    """Run SQL on the store's own database behind its back (to simulate other writers)."""
    if store.backend == "sqlite":
        with store.lock:  # type: ignore[attr-defined]
            store.connection.execute(statement)  # type: ignore[attr-defined]
    else:
        with store.connection() as conn:  # type: ignore[attr-defined]
            conn.execute(statement)


# --- append ----------------------------------------------------------------------------


def test_append_assigns_ids_and_gap_free_sequences_in_input_order(store: Store) -> None:
    out = store.append("ns", [batch("a", "one", "two"), batch("b", "x"), batch("a", "three")])
    assert [(t.session, t.seq, t.text, t.tokens) for t in out] == [
        ("a", 1, "one", 3),
        ("a", 2, "two", 3),
        ("b", 1, "x", 1),
        ("a", 3, "three", 5),
    ]
    assert len({t.id for t in out}) == 4
    more = store.append("ns", [batch("a", "four")])
    assert (more[0].seq, more[0].id > max(t.id for t in out)) == (4, True)


def test_turns_round_trip_every_field_and_block_type(store: Store) -> None:
    blocks = (
        TextBlock("héllo 👋 \u2028 tab\tend"),
        ThinkingBlock("hmm", signature="sig"),
        ToolUseBlock(id="tu1", name="search", input={"q": "x", "n": [1, 2.5, None, True]}),
        ImageBlock(media_type="image/png", data="aGk="),
    )
    turns = [
        Turn(role="assistant", content=blocks, timestamp=T0, name="bot", model="m-1", metadata={"k": {"z": 1, "a": 2}}),
        Turn(role="tool", content=(ToolResultBlock("tu1", (TextBlock("42"),), is_error=True),), timestamp=T0),
        Turn(role="user", content="", timestamp=datetime(1999, 12, 31, 23, 59, 59, 1, tzinfo=UTC)),
    ]
    stored = store.append("ns", [TurnBatch("s", turns, [7, 8, 9])])
    back = store.turns("ns", "s")
    assert [t.turn for t in back] == turns
    assert back == stored
    assert [t.turn.to_dict() for t in back] == [t.to_dict() for t in turns]


def test_append_with_no_turns_creates_the_namespace_but_no_session(store: Store) -> None:
    assert store.append("ns", [TurnBatch("s", [], [])]) == []
    assert (store.namespaces(), store.sessions("ns")) == (["ns"], [])


def test_append_refuses_mismatched_token_counts_and_stores_nothing(store: Store) -> None:
    with pytest.raises(ValueError, match="one token count per turn"):
        store.append("ns", [batch("a", "ok"), TurnBatch("b", [turn("x")], [])])
    assert store.namespaces() == []


@pytest.mark.parametrize("namespace, session", [("", "s"), ("ns", "bad name"), ("-x", "s"), ("ns", "a/b")])
def test_append_refuses_invalid_names(store: Store, namespace: str, session: str) -> None:
    with pytest.raises(ValidationError, match="invalid"):
        store.append(namespace, [batch(session, "x")])
    assert store.namespaces() == []


def test_a_failing_transaction_leaves_the_store_as_it_was(store: Store) -> None:
    store.append("ns", [batch("a", "kept")])
    with pytest.raises(RuntimeError, match="boom"), store.transaction():
        store.append("ns", [batch("a", "lost1")])
        store.append("other", [batch("b", "lost2")])
        store.ensure_session("ns", "lost-session")
        raise RuntimeError("boom")
    assert [t.text for t in store.turns("ns")] == ["kept"]
    assert store.namespaces() == ["ns"]
    assert [s.name for s in store.sessions("ns")] == ["a"]
    # The sequence counter rolled back too: the next turn is seq 2, not 3.
    assert store.append("ns", [batch("a", "next")])[0].seq == 2


def test_transaction_commits_several_calls_together(store: Store) -> None:
    with store.transaction():
        store.append("ns", [batch("a", "1")])
        with store.transaction():
            store.append("ns", [batch("a", "2")])
    assert [t.seq for t in store.turns("ns", "a")] == [1, 2]


def test_a_failing_nested_block_rolls_back_only_itself(store: Store) -> None:
    with store.transaction():
        store.append("ns", [batch("a", "outer")])
        with pytest.raises(KeyError), store.transaction():
            store.append("ns", [batch("a", "inner")])
            raise KeyError("x")
        store.append("ns", [batch("a", "after")])
    assert [(t.seq, t.text) for t in store.turns("ns", "a")] == [(1, "outer"), (2, "after")]


# --- sessions and namespaces ------------------------------------------------------------


def test_ensure_session_creates_once_and_keeps_first_labels(store: Store) -> None:
    created = datetime(2023, 1, 2, 3, 4, 5, tzinfo=UTC)
    s1 = store.ensure_session("ns", "s", platform="slack", channel="#dev", created_at=created)
    s2 = store.ensure_session("ns", "s", platform="cli", channel="other")
    assert s1 == s2
    assert (s1.namespace, s1.name, s1.platform, s1.channel, s1.created_at) == ("ns", "s", "slack", "#dev", created)


def test_append_labels_a_new_session(store: Store) -> None:
    store.append("ns", [batch("s", "x", platform="telegram", channel="c1")])
    s = store.session("ns", "s")
    assert (s.platform, s.channel) == ("telegram", "c1")


def test_session_lookup_names_what_is_missing(store: Store) -> None:
    store.ensure_session("ns", "s")
    with pytest.raises(NotFoundError, match="unknown namespace 'nope'"):
        store.session("nope", "s")
    with pytest.raises(NotFoundError, match="unknown session 'zz' in namespace 'ns'"):
        store.session("ns", "zz")


def test_sessions_are_listed_oldest_first_and_namespaces_sorted(store: Store) -> None:
    store.append("zeta", [batch("second", "x"), batch("first", "y")])
    store.ensure_session("Alpha", "only")
    store.ensure_session("zeta", "third")
    assert [s.name for s in store.sessions("zeta")] == ["second", "first", "third"]
    assert store.sessions("unknown") == []
    assert store.namespaces() == ["Alpha", "zeta"]
    assert (store.has_namespace("zeta"), store.has_namespace("zet")) == (True, False)


# --- reading ------------------------------------------------------------------------------


@pytest.fixture
def filled(store: Store) -> Store:
    store.append("ns", [batch("a", *[f"a{i}" for i in range(1, 7)]), batch("b", "b1", "b2")])
    store.append("other", [batch("a", "secret")])
    return store


def test_turns_are_ordered_by_session_then_sequence(filled: Store) -> None:
    assert [t.text for t in filled.turns("ns")] == ["a1", "a2", "a3", "a4", "a5", "a6", "b1", "b2"]
    assert [t.text for t in filled.turns("ns", newest_first=True, limit=3)] == ["b2", "b1", "a6"]


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        ({"session": "a", "min_seq": 2, "max_seq": 4}, ["a2", "a3", "a4"]),
        ({"session": "a", "max_seq": 5, "newest_first": True, "limit": 2}, ["a5", "a4"]),
        ({"session": "b"}, ["b1", "b2"]),
        ({"session": "missing"}, []),
        ({"ids": []}, []),
    ],
)
def test_turns_filters(filled: Store, kwargs: dict[str, Any], expected: list[str]) -> None:
    kwargs = dict(kwargs)  # the parameters are shared by both backends' runs
    session = kwargs.pop("session", None)
    assert [t.text for t in filled.turns("ns", session, **kwargs)] == expected


def test_turns_by_id_never_return_another_namespaces_rows(filled: Store) -> None:
    every = {t.text: t.id for ns in ("ns", "other") for t in filled.turns(ns)}
    got = filled.turns("ns", ids=[every["secret"], every["a3"], every["b1"]])
    assert [t.text for t in got] == ["a3", "b1"]
    assert filled.turns("other", ids=[every["a1"]]) == []


def test_iter_turns_streams_everything_in_order(filled: Store) -> None:
    assert list(filled.iter_turns("ns", batch_size=3)) == filled.turns("ns")
    assert list(filled.iter_turns("nobody")) == []


def test_stats_count_sessions_turns_tokens_and_bytes(filled: Store) -> None:
    filled.append("ns", [TurnBatch("c", [turn("é€")], [5])])
    s = filled.stats("ns")
    assert (s.namespace, s.sessions, s.turns, s.tokens, s.text_bytes) == ("ns", 3, 9, 6 * 2 + 2 * 2 + 5, 8 * 2 + 5)
    assert filled.stats("nobody").turns == 0
    assert filled.size_bytes() > 0


# --- opening, migrations, durability -------------------------------------------------------


def test_reopening_sees_committed_turns(opener: Opener) -> None:
    first = opener()
    stored = first.append("ns", [batch("s", "persist me")])
    first.close()
    assert opener().turns("ns") == stored


def test_reopening_with_another_tokenizer_is_refused(opener: Opener) -> None:
    opener(tokenizer="o200k_base").close()
    with pytest.raises(ConfigError, match="o200k_base"):
        opener(tokenizer="cl100k_base")


def test_migrations_are_recorded_by_name_and_a_newer_schema_is_refused(opener: Opener) -> None:
    store = opener()
    raw_execute(
        store,
        "INSERT INTO _stratamem_migrations (name) VALUES ('m999_future')"
        if store.backend == "postgres"
        else "INSERT INTO _stratamem_migrations (name, applied_at) VALUES ('m999_future', 'x')",
    )
    store.close()
    with pytest.raises(MigrationError, match="m999_future"):
        opener()


def test_postgres_records_the_same_migration_names_as_sqlite(tmp_path: Path, pg_dsn: str) -> None:
    from stratamem.store.postgres import schema as postgres_schema
    from stratamem.store.sqlite import schema as sqlite_schema

    lite = [m.name for m in sqlite_schema.MIGRATIONS]
    pg = [m.name for m in postgres_schema.MIGRATIONS]
    # Postgres mirrors the core now; feature migrations are mirrored as they land.
    assert pg == [name for name in lite if name in pg]
    store = open_store(schema_url(pg_dsn, fresh_schema(pg_dsn)))
    with store.connection() as conn:  # type: ignore[attr-defined]
        assert postgres_schema.applied(conn) == pg
    store.close()


def test_closed_store_raises_backend_error(store: Store) -> None:
    store.close()
    store.close()  # idempotent
    with pytest.raises(BackendError):
        store.turns("ns")
    with pytest.raises(BackendError):
        store.append("ns", [batch("s", "x")])


def test_a_writer_that_cannot_get_the_lock_gets_backend_error_and_stores_nothing(opener: Opener) -> None:
    store = opener(config=_store_config(busy_timeout_ms=300))
    store.append("ns", [batch("s", "first")])
    holder = opener()
    release = threading.Event()
    locked = threading.Event()

    def hold() -> None:
        with holder.transaction():
            holder.append("ns", [batch("s", "holder")])
            locked.set()
            release.wait(10)

    t = threading.Thread(target=hold)
    t.start()
    assert locked.wait(10)
    try:
        with pytest.raises(BackendError) as info:
            store.append("ns", [batch("s", "blocked")])
        cause = info.value.__cause__
        assert cause is not None and "lock" in str(cause).lower()
    finally:
        release.set()
        t.join()
    assert [t.text for t in store.turns("ns")] == ["first", "holder"]


def test_memory_facade_runs_on_the_store(store: Store) -> None:
    mem = Memory(store, namespace="agent", embedder=None)
    mem.add([{"role": "user", "content": "hello there"}, {"role": "assistant", "content": "hi!"}], session="s")
    ctx = mem.context("greeting", budget=200)
    assert [m["content"] for m in ctx.messages] == ["hello there", "hi!"]
    assert (mem.status().turns, mem.status().backend) == (2, store.backend)


def _store_config(**kw: Any) -> Any:
    from stratamem.config import StoreConfig

    return StoreConfig(**kw)


# --- PostgreSQL specifics ---------------------------------------------------------------------


def test_unreachable_postgres_is_a_backend_error_without_the_password() -> None:
    with pytest.raises(BackendError, match="cannot open PostgreSQL") as info:
        open_store("postgresql://u:hunter2@127.0.0.1:1/db?connect_timeout=1")
    assert "hunter2" not in str(info.value)
    assert isinstance(info.value.__cause__, psycopg.Error)


def test_postgres_url_schema_must_agree_with_config(pg_dsn: str) -> None:
    with pytest.raises(ConfigError, match="disagrees"):
        open_store(schema_url(pg_dsn, "a_schema"), config=_store_config(pg_schema="b_schema"))
    with pytest.raises(ConfigError, match="lowercase SQL identifier"):
        open_store(schema_url(pg_dsn, "Bad-Name"))


# --- stratamem migrate --to postgres ----------------------------------------------------------


def test_migrate_copies_sqlite_into_postgres_and_verifies(tmp_path: Path, pg_dsn: str) -> None:
    from click.testing import CliRunner

    from stratamem.cli import main

    db = tmp_path / "src.db"
    lite = open_store(str(db))
    lite.ensure_session("a", "empty", platform="cli", created_at=T0)
    lite.append("a", [batch("s1", "one", "two"), batch("s2", "three")])
    lite.append(
        "b",
        [
            TurnBatch(
                "s",
                [
                    Turn(
                        role="assistant",
                        content=(TextBlock("x"), ToolUseBlock("t", "f")),
                        timestamp=T0,
                        metadata={"m": 1},
                    )
                ],
                [9],
            )
        ],
    )
    lite.close()
    url = schema_url(pg_dsn, fresh_schema(pg_dsn))
    result = CliRunner().invoke(main, ["--db", str(db), "migrate", "--to", "postgres", url, "--json"])
    assert result.exit_code == 0, result.output
    report = {r["namespace"]: (r["sessions"], r["turns"]) for r in __import__("json").loads(result.output)}
    assert report == {"a": (3, 3), "b": (1, 1)}
    lite, pg = open_store(str(db)), open_store(url)
    for ns in ("a", "b"):
        assert [(t.session, t.seq, t.tokens, t.turn) for t in pg.turns(ns)] == [
            (t.session, t.seq, t.tokens, t.turn) for t in lite.turns(ns)
        ]
        assert pg.sessions(ns) == lite.sessions(ns)
    # Copying again is refused: the namespaces already have sessions there.
    again = CliRunner().invoke(main, ["--db", str(db), "migrate", "--to", "postgres", url])
    assert again.exit_code == 1
    assert "already has sessions" in again.output
    assert pg.stats("a").turns == 3
    lite.close()
    pg.close()


def test_a_copy_that_does_not_verify_is_rolled_back(tmp_path: Path, pg_dsn: str) -> None:
    from stratamem.store.postgres.migrate import copy_store

    lite = open_store(str(tmp_path / "gap.db"))
    lite.append("ns", [batch("s", "one", "two", "three")])
    # A gap in the source (seq 2 removed) cannot be reproduced by a gap-free target.
    raw_execute(lite, "DELETE FROM turns WHERE seq = 2")
    pg = open_store(schema_url(pg_dsn, fresh_schema(pg_dsn)))
    with pytest.raises(BackendError, match="did not verify"):
        copy_store(lite, pg)
    assert (pg.namespaces(), pg.sessions("ns")) == ([], [])
    lite.close()
    pg.close()


def test_no_driver_exception_escapes_any_method(store: Store) -> None:
    """httpx-style: every backend error surfaces as BackendError with the driver error as cause."""
    import sqlite3

    store.append("ns", [batch("s", "x")])
    # Tables vanish behind the store's back: every statement now fails in the driver.
    raw_execute(store, "DROP TABLE turns")
    raw_execute(store, "DROP TABLE sessions")
    raw_execute(store, "DROP TABLE namespaces")
    calls = {
        "append": lambda: store.append("ns", [batch("s", "y")]),
        "ensure_session": lambda: store.ensure_session("ns", "t"),
        "session": lambda: store.session("ns", "s"),
        "sessions": lambda: store.sessions("ns"),
        "namespaces": lambda: store.namespaces(),
        "has_namespace": lambda: store.has_namespace("ns"),
        "turns": lambda: store.turns("ns"),
        "iter_turns": lambda: list(store.iter_turns("ns")),
        "stats": lambda: store.stats("ns"),
    }
    for name, call in calls.items():
        with pytest.raises(BackendError) as info:
            call()
        assert isinstance(info.value.__cause__, (sqlite3.Error, psycopg.Error)), name


def test_latest_session_is_the_session_of_the_newest_turn(store: Store) -> None:
    assert store.latest_session("ns") is None
    store.append("ns", [batch("b", "one"), batch("a", "two")])
    assert store.latest_session("ns") == "a"
    store.append("ns", [batch("b", "three")])
    assert store.latest_session("ns") == "b"
    store.append("other", [batch("z", "four")])
    assert store.latest_session("ns") == "b"


def test_turn_ids_and_count_see_only_the_namespace(store: Store) -> None:
    a = store.append("ns", [batch("s", "one", "two")])
    store.append("other", [batch("s", "x")])
    b = store.append("ns", [batch("t", "three")])
    assert store.turn_ids("ns") == [t.id for t in a + b]
    assert (store.turn_count("ns"), store.turn_count("other"), store.turn_count("nobody")) == (3, 1, 0)


def test_has_tool_call_finds_calls_anywhere_in_the_session_exactly(store: Store) -> None:
    call = Turn(role="assistant", content=(ToolUseBlock(id='c_1%"x', name="ls", input={"id": "c_2"}),), timestamp=T0)
    store.append("ns", [TurnBatch("s", [call], [5]), batch("s", *[f"filler {i}" for i in range(30)])])
    assert store.has_tool_call("ns", "s", 'c_1%"x')
    assert not store.has_tool_call("ns", "s", "c_1")  # a prefix is not the id
    assert not store.has_tool_call("ns", "s", "c_2")  # an input value named "id" is not a call id
    assert not store.has_tool_call("ns", "t", 'c_1%"x')  # other session
    assert not store.has_tool_call("other", "s", 'c_1%"x')
