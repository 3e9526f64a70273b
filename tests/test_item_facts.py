"""One extracted item per fact: the store's uniqueness rule holds under concurrent writer processes and
threads on both backends, restatements merge their provenance, a new value of an attribute supersedes the
old one, and m018 collapses the duplicates today's check-then-insert race left behind."""

from __future__ import annotations

import multiprocessing
import sqlite3
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pg import fresh_schema, schema_url

from stratamem import Config, Memory
from stratamem.errors import BackendError, MigrationError
from stratamem.records.candidates import Candidate
from stratamem.records.items import fact_key, fact_text
from stratamem.store import migrations as mig
from stratamem.store import open_store
from stratamem.store.new_rows import NewItem
from stratamem.store.sqlite.schema import MIGRATIONS
from stratamem.store.sqlite.store import SQLiteStore

T0 = datetime(2024, 1, 8, 9, 0, tzinfo=UTC)
FACTS = [f"Ana: I adopted a cat named Miso number {n}." for n in range(12)]
TURNS = [
    ("Ana", "I adopted a rescue cat last week and named her Miso, she sleeps all day on the sofa near the window."),
    ("Ben", "Wow, that's lovely Ana! How old is she?"),
    ("Ana", "We moved to Lisbon last spring, so the commute to the studio is much shorter now and I walk every day."),
    ("Ben", "Nice!"),
]


def _target(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if backend == "sqlite":
        return str(tmp_path / "facts.db")
    dsn = request.getfixturevalue("pg_dsn")
    return schema_url(dsn, fresh_schema(dsn, "f"))


def _memory(target: str) -> Memory:
    config = Config().replace(pyramid={"defer_summarization": False, "micro_chunk_size": 4})
    return Memory(open_store(target), namespace="race", config=config, embedder=None)


def _writer(target: str, writer: int, barrier: Any, rounds: int, out: Any) -> None:
    """One writer process: the same facts at the same moment (a barrier per round), then the same turns."""
    mem = _memory(target)
    turn = mem.add({"role": "user", "content": f"writer {writer} is here", "timestamp": T0}, session=f"w{writer}")[0]
    try:
        for r in range(rounds):
            barrier.wait(timeout=60)
            mem.items.extract_facts([(FACTS[r], "fact", [turn.id])])
        barrier.wait(timeout=60)
        for r in range(2):
            mem.add(
                [
                    {"role": "user" if who == "Ana" else "assistant", "content": text, "name": who, "timestamp": T0}
                    for who, text in TURNS
                ],
                session=f"w{writer}-{r}",
            )
        out.put((writer, turn.id, None))
    except Exception as exc:  # noqa: BLE001 - reported to the test, which fails on it
        out.put((writer, turn.id, f"{type(exc).__name__}: {exc}"))
    finally:
        mem.store.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_four_writer_processes_extracting_the_same_facts_leave_one_item_per_fact(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    target = _target(backend, tmp_path, request)
    _memory(target).store.close()  # the schema first, so the writers race on items only
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(4), ctx.Queue()
    rounds = 8
    procs = [ctx.Process(target=_writer, args=(target, w, barrier, rounds, out)) for w in range(4)]
    for p in procs:
        p.start()
    results = sorted(out.get(timeout=300) for _ in procs)
    for p in procs:
        p.join(timeout=60)
    assert [r[2] for r in results] == [None] * 4
    mem = _memory(target)
    try:
        items = [i for i in mem.items.list() if i.source == "extracted"]
        texts = [fact_text(i.content) for i in items]
        assert len(texts) == len(set(texts))  # 0 duplicates
        # Each raced fact is one item naming every writer's turn.
        writer_turns = tuple(sorted(r[1] for r in results))
        raced = {i.content: i.provenance for i in items if i.content in FACTS}
        assert raced == dict.fromkeys(FACTS[:rounds], writer_turns)
        # The same turns added by every writer (twice each): one item per fact, sourced to all 8 turns.
        added = [i for i in items if i.content not in FACTS]
        assert [(i.content, len(i.provenance)) for i in added] == [
            (
                "Ana: I adopted a rescue cat last week and named her Miso, she sleeps all day on the sofa near the "
                "window.",
                8,
            ),
            (
                "Ana: We moved to Lisbon last spring, so the commute to the studio is much shorter now and I walk "
                "every day.",
                8,
            ),
        ]
    finally:
        mem.store.close()


def test_two_threads_sharing_one_memory_extract_each_fact_once(tmp_path: Path) -> None:
    mem = _memory(str(tmp_path / "t.db"))
    turn = mem.add({"role": "user", "content": "hello", "timestamp": T0}, session="s")[0]
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            for fact in FACTS:
                barrier.wait(timeout=30)
                mem.items.extract_facts([(fact, "fact", [turn.id])])
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(i.content for i in mem.items.list()) == sorted(FACTS)


_batches = st.lists(
    st.lists(st.tuples(st.integers(0, 5), st.sampled_from(["", " ", "!", ".", "  "]), st.integers(1, 4)), max_size=5),
    min_size=1,
    max_size=8,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=_batches)
def test_any_interleaving_of_overlapping_batches_keeps_one_item_per_fact_with_every_source(
    tmp_path_factory: pytest.TempPathFactory, batches: list[list[tuple[int, str, int]]]
) -> None:
    mem = Memory(tmp_path_factory.mktemp("h") / "h.db", namespace="h", embedder=None)
    turns = [t.id for t in mem.add([{"role": "user", "content": f"t{i}"} for i in range(4)], session="s")]
    words = ["Bea: I keep bees", "Bea: my hives are in Leeds", "Cy: I run", "Cy: I swim", "Bea: I bake", "Cy: I row"]
    expected: dict[str, set[int]] = {}
    for batch in batches:
        mem.items.extract_facts(
            [(words[w].upper() if n % 2 else words[w] + p, "fact", [turns[n - 1]]) for w, p, n in batch]
        )
        for w, _, n in batch:
            expected.setdefault(fact_text(words[w]), set()).add(turns[n - 1])
    items = mem.items.list()
    assert sorted(fact_text(i.content) for i in items) == sorted(expected)
    assert {fact_text(i.content): set(i.provenance) for i in items} == expected
    mem.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_the_store_refuses_a_second_row_with_a_taken_fact_key(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    store = open_store(_target(backend, tmp_path, request))
    try:
        row = NewItem(
            "Ana: I swim.",
            "fact",
            "cold",
            4,
            1.0,
            "extracted",
            "2024-01-01T00:00:00.000000Z",
            review="pending",
            fact_key=fact_key("Ana: I swim."),
            salience=0.9,
        )
        first = store.items.insert("n", row)
        assert store.items.insert_fact("n", row) is None  # ON CONFLICT DO NOTHING
        with pytest.raises(BackendError):
            store.items.insert("n", row)  # a writer that forgot the check still cannot duplicate
        assert [i.id for i in store.items.select("n")] == [first]
        assert store.items.insert_fact("other", row) is not None  # keys are per namespace
    finally:
        store.close()


def test_a_restatement_with_the_same_value_merges_and_a_new_value_supersedes(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "s.db", namespace="s", embedder=None)
    t = [x.id for x in mem.add([{"role": "user", "content": f"t{i}"} for i in range(4)], session="s")]
    old = Candidate("Ana: I live in Porto.", "fact", (t[0],), 0.9, "Ana", "residence", "porto", T0)
    same = Candidate("Ana: Porto is where I live now.", "fact", (t[1],), 0.95, "Ana", "residence", "porto", T0)
    new = Candidate(
        "Ana: We moved to Lisbon.", "event", (t[2],), 0.9, "Ana", "residence", "lisbon", T0 + timedelta(days=90)
    )
    (porto,) = mem.items.extract([old])
    assert mem.items.extract([same]) == []  # the same subject, attribute and value: one item, two sources
    assert (mem.items.get(porto.id).provenance, mem.items.get(porto.id).salience) == ((t[0], t[1]), 0.95)
    (lisbon,) = mem.items.extract([new])
    replaced = mem.items.get(porto.id)
    assert (replaced.superseded_by, replaced.valid_to, replaced.live) == (lisbon.id, T0 + timedelta(days=90), False)
    assert mem.items.get(lisbon.id).key == "ana:residence"
    # An older value told late does not replace the newer one: it is stored already superseded.
    late = Candidate(
        "Ana: Back then I lived in Braga.", "fact", (t[3],), 0.9, "Ana", "residence", "braga", T0 - timedelta(days=300)
    )
    (braga,) = mem.items.extract([late])
    assert (mem.items.get(braga.id).superseded_by, mem.items.get(lisbon.id).live) == (lisbon.id, True)
    # No attribute, no automatic supersession.
    mem.items.extract([Candidate("Ana: I like Lisbon in spring.", "preference", (t[3],), 0.9)])
    assert mem.items.get(lisbon.id).live
    mem.close()


# --- m018: the migration collapses what the old race left -------------------------------------------------


def _old_sqlite(path: Path) -> None:
    """A store at m015 holding items as the old extractor and its race left them (raw rows, as it wrote them)."""
    conn = sqlite3.connect(path, isolation_level=None)
    mig.apply(conn, [m for m in MIGRATIONS if m.name != "m018_item_facts"])
    conn.execute("INSERT INTO namespaces (id, name, created_at) VALUES (1, 'n', '2025-01-01T00:00:00.000000Z')")
    conn.execute("INSERT INTO namespaces (id, name, created_at) VALUES (2, 'm', '2025-01-01T00:00:00.000000Z')")
    rows = [  # id, ns, content, tier, review, provenance, access, relevance, superseded_by, source
        (1, 1, "Ana: I swim.", "cold", "pending", "[3]", 1, 0.5, None, "extracted"),
        (2, 1, "ana: i swim!", "warm", "pending", "[4]", 2, 0.9, None, "extracted"),
        (3, 1, "Ana: I  swim", "cold", "rejected", "[5]", 0, 0.2, None, "extracted"),
        (4, 1, "Ana: I row.", "cold", "confirmed", "[6]", 0, 1.0, None, "extracted"),
        (5, 1, "Ana: I row", "cold", "pending", "[7]", 0, 1.0, None, "extracted"),
        (6, 1, "Ana: I dive.", "cold", "pending", "[8]", 0, 1.0, 5, "extracted"),  # named a copy as its replacement
        (7, 1, "Ana: I swim.", "hot", None, "[]", 0, 1.0, None, "api"),  # API items keep no key
        (8, 2, "Ana: I swim.", "cold", "pending", "[9]", 0, 1.0, None, "extracted"),  # another namespace
    ]
    conn.executemany(
        "INSERT INTO memory_items (id, namespace_id, content, type, tier, tokens, created_at, relevance, source, "
        "provenance, review, access_count, superseded_by) "
        "VALUES (?, ?, ?, 'fact', ?, 3, '2025-01-01T00:00:00.000000Z', ?, ?, ?, ?, ?, ?)",
        [(i, ns, c, tier, rel, src, prov, rev, acc, sup) for i, ns, c, tier, rev, prov, acc, rel, sup, src in rows],
    )
    conn.close()


def test_m018_collapses_duplicates_keeping_the_highest_tier_every_source_and_the_users_no(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _old_sqlite(path)
    store = SQLiteStore(path)
    try:
        got = {i.id: i for i in store.items.select("n")}
        swim = got[2]  # warm beats cold: the keeper, so nothing moves between tiers
        assert (swim.tier, swim.review, swim.provenance, swim.access_count, swim.relevance) == (
            "warm",
            "rejected",  # one copy was rejected: the user said no
            (3, 4, 5),
            3,
            0.9,
        )
        assert [(got[i].superseded_by, got[i].live) for i in (1, 3)] == [(2, False), (2, False)]
        row = got[4]  # equal tiers: the lowest id keeps; confirmed beats pending
        assert (row.review, row.provenance, got[5].superseded_by) == ("confirmed", (6, 7), 4)
        assert got[6].superseded_by == 4  # repointed from the collapsed copy to its keeper
        assert (got[7].source, got[7].superseded_by, got[7].tier) == ("api", None, "hot")
        assert [i.provenance for i in store.items.select("m")] == [(9,)]
        keys = store.connection.execute("SELECT id, fact_key FROM memory_items ORDER BY id").fetchall()
        assert [k for k in keys if k[1] is not None] == [
            (2, fact_key("Ana: I swim.")),
            (4, fact_key("Ana: I row.")),
            (6, fact_key("Ana: I dive.")),
            (8, fact_key("Ana: I swim.")),
        ]
    finally:
        store.close()


def test_a_failing_m018_leaves_the_store_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _old_sqlite(path)
    conn = sqlite3.connect(path, isolation_level=None)
    before = conn.execute("SELECT * FROM memory_items ORDER BY id").fetchall()
    conn.execute(
        "CREATE TRIGGER stop_collapse BEFORE UPDATE OF superseded_by ON memory_items "
        "BEGIN SELECT RAISE(ABORT, 'disk trouble'); END"
    )
    conn.close()
    with pytest.raises(MigrationError, match="m018_item_facts"):
        SQLiteStore(path)
    conn = sqlite3.connect(path, isolation_level=None)
    assert conn.execute("SELECT * FROM memory_items ORDER BY id").fetchall() == before
    assert "fact_key" not in [r[1] for r in conn.execute("PRAGMA table_info(memory_items)")]
    assert conn.execute("SELECT COUNT(*) FROM _stratamem_migrations WHERE name = 'm018_item_facts'").fetchone() == (0,)
    conn.execute("DROP TRIGGER stop_collapse")
    conn.close()
    SQLiteStore(path).close()  # applies now


def test_m018_collapses_duplicates_on_postgres_the_same_way(pg_dsn: str) -> None:
    import psycopg

    from stratamem.store.postgres import schema as pg_schema
    from stratamem.store.postgres.store import PostgresStore

    name = fresh_schema(pg_dsn, "m16")
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        pg_schema.ensure_schema(conn, name)
        conn.execute(f'SET search_path TO "{name}", public')
        pg_schema.apply(conn, [m for m in pg_schema.MIGRATIONS if m.name != "m018_item_facts"])
        conn.execute("INSERT INTO namespaces (namespace) VALUES ('n')")
        for content, tier, review, prov in (
            ("Ana: I swim.", "cold", "pending", "[3]"),
            ("ana: i swim!", "warm", "pending", "[4]"),
            ("Ana: I  swim", "cold", "rejected", "[5]"),
        ):
            conn.execute(
                "INSERT INTO memory_items (namespace, content, type, tier, tokens, created_at, relevance, source, "
                "provenance, review, terms) VALUES ('n', %s, 'fact', %s, 3, now(), 1.0, 'extracted', %s, %s, "
                "to_tsvector('simple', %s))",
                (content, tier, prov, review, content),
            )
    store = PostgresStore(pg_dsn, schema=name)
    try:
        items = store.items.select("n")
        assert [(i.tier, i.review, i.provenance, i.superseded_by) for i in items] == [
            ("cold", "pending", (3,), items[1].id),
            ("warm", "rejected", (3, 4, 5), None),
            ("cold", "rejected", (5,), items[1].id),
        ]
    finally:
        store.close()
