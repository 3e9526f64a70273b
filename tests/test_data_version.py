"""Every open ``Memory`` sees what other writers did: forgotten text is never served (issue 24, finding 1).

A ``Memory`` keeps a recall index, ranked summaries, an items cache and a
pyramid object between calls. Another ``Memory`` on the same store, or
another process, may forget what they were built from; the store's data
version (``stratamem.store.data_version``) tells every open memory at its
next call. Both backends, every context policy and search, a second
``Memory`` in this process and one in a child process.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from pg import fresh_schema, schema_url
from webserver import Server

from stratamem import Config, Memory
from stratamem.context import policy_names
from stratamem.store.new_rows import NewItem
from stratamem.store.open import open_store
from stratamem.testing.hash_embedder import HashEmbedder

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
MARK = "Zyqxmarker4471"  # in a cold, summarized segment: reachable verbatim and through summaries
HOT = "Quokkavault9090"  # in the hot tail: reachable verbatim only (window, recall)
# Small segments that go cold at once, summarized at once, so the marker reaches every summary level.
CFG = Config().replace(
    pyramid={
        "micro_chunk_size": 4,
        "mini_chunk_size": 8,
        "macro_chunk_size": 16,
        "hot_chunks": 1,
        "warm_max_age_hours": 1,
        "summarizer": "extractive",
        "defer_summarization": False,
    }
)
QUERY = "locker code Bob"


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "m.db")
    dsn = request.getfixturevalue("pg_dsn")
    return schema_url(dsn, fresh_schema(dsn, "dv"))


def opened(target: str, namespace: str = "alice") -> Memory:
    """A Memory on its own store object (its own connection), as another process would have."""
    store = open_store(target)
    return Memory(store, namespace=namespace, config=CFG, embedder=HashEmbedder())


@pytest.fixture
def pair(target: str) -> Iterator[tuple[Memory, Memory]]:
    """Two memories of one namespace, each on its own store object; the first holds 40 turns."""
    a, b = opened(target), opened(target)
    for i in range(40):
        text = f"Note {i}: Alice paid {i} euros in Paris for the museum tickets."
        if i == 13:
            text = f"My locker code is {MARK} and Bob knows it."
        if i == 38:
            text = f"The gym locker combination is {HOT}, Bob."
        a.add(
            {
                "role": "user" if i % 2 == 0 else "assistant",
                "content": text,
                "timestamp": (T0 + timedelta(hours=i)).isoformat(),
            },
            session="s1",
        )
    yield a, b
    a.close()
    b.close()


def turn_with(mem: Memory, text: str) -> int:
    [tid] = [t.id for t in mem.turns() if text in t.text]
    return tid


def served(mem: Memory, text: str, query: str = QUERY) -> dict[str, int]:
    """Copies of ``text`` in every policy's context and in the search hits of ``mem``."""
    out = {p: mem.context(query, policy=p, budget=3000, format="text").text.count(text) for p in policy_names()}
    out["search"] = sum(text in h.text for h in mem.search(query, k=20))
    return out


def test_a_forget_through_another_memory_is_never_served_by_an_open_one(pair: tuple[Memory, Memory]) -> None:
    a, b = pair
    before = served(b, MARK)  # every cache of b now holds the marker: recall, summaries, items, pyramid
    assert all(before.values()), before
    a.forget(turns=[turn_with(a, MARK)])
    assert served(b, MARK) == dict.fromkeys(before, 0)
    assert served(a, MARK) == dict.fromkeys(before, 0)


def test_forgetting_one_turn_and_adding_one_elsewhere_still_drops_it_from_recall(pair: tuple[Memory, Memory]) -> None:
    a, b = pair
    query = "gym locker combination"
    assert all(served(b, HOT, query).values())
    a.forget(turns=[turn_with(a, HOT)])
    a.add({"role": "user", "content": "An unrelated note about lunch plans."}, session="other")
    # The namespace holds as many turns as before: a count alone would keep b's index.
    assert b.status().turns == 40
    assert served(b, HOT, query) == dict.fromkeys(served(a, HOT, query), 0)


def test_a_forget_in_a_child_process_reaches_an_open_memory(pair: tuple[Memory, Memory], target: str) -> None:
    a, b = pair
    assert all(served(b, MARK).values())
    tid = turn_with(a, MARK)
    code = textwrap.dedent(
        f"""
        from stratamem import Memory
        from stratamem.store.open import open_store
        from test_data_version import CFG
        with Memory(open_store({target!r}), namespace="alice", config=CFG, embedder=None) as m:
            m.forget(turns=[{tid}])
        """
    )
    env_path = str(Path(__file__).parent)
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300, env=_env(env_path))
    assert set(served(b, MARK).values()) == {0}


def _env(tests_dir: str) -> dict[str, str]:
    import os

    path = os.pathsep.join(filter(None, [tests_dir, os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}


def test_a_running_server_stops_serving_what_another_process_forgot(tmp_path: Path) -> None:
    db = tmp_path / "web.db"
    with Memory(db, namespace="default", config=CFG, embedder=None) as mem:
        for i in range(24):
            text = f"My locker code is {MARK} and Bob knows it." if i == 5 else f"Note {i} about museum tickets."
            mem.add({"role": "user", "content": text, "timestamp": (T0 + timedelta(hours=i)).isoformat()}, session="s")
        tid = turn_with(mem, MARK)
    srv = Server(db, config=CFG)
    try:
        url = f"{srv.url}/api/v1/namespaces/default/context"

        def copies() -> int:
            return sum(
                httpx.get(url, params={"query": QUERY, "policy": p, "budget": 3000, "format": "text"})
                .raise_for_status()
                .text.count(MARK)
                for p in policy_names()
            )

        assert copies() >= len(policy_names())
        cli = [sys.executable, "-m", "stratamem", "--db", str(db), "forget", "--turn", str(tid), "--yes"]
        subprocess.run(cli, check=True, timeout=300, capture_output=True)
        assert copies() == 0
    finally:
        srv.stop()


# --- the version itself -----------------------------------------------------------------------


def _item(content: str) -> NewItem:
    return NewItem(
        content=content,
        type="fact",
        tier="cold",
        tokens=3,
        relevance=0.5,
        source="user",
        created_at="2024-05-01T09:00:00Z",
        provenance=(),
    )


def test_writes_bump_the_version_and_destructive_ones_the_epoch(target: str) -> None:
    from stratamem.store.data_version import DataVersion

    with opened(target) as mem:
        store: Any = mem.store
        assert store.data_version("alice") == DataVersion(0, 0)
        mem.add([{"role": "user", "content": f"turn {i}"} for i in range(9)], session="s")
        after_add = store.data_version("alice")
        assert after_add.version > 0 and after_add.epoch == 0  # the append and the segments it sealed
        v = after_add.version
        with pytest.raises(RuntimeError), store.transaction():
            store.append("alice", [mem_batch()])
            raise RuntimeError("rolled back")
        assert store.data_version("alice") == DataVersion(v, 0)  # nothing committed, nothing bumped
        item = store.items.insert("alice", _item("Alice likes Paris"))
        assert store.data_version("alice") == DataVersion(v + 1, 0)
        store.items.update("alice", [item], tier="hot")
        assert store.data_version("alice") == DataVersion(v + 2, 0)
        store.items.delete("alice", [item])
        assert store.data_version("alice") == DataVersion(v + 3, 1)
        mem.forget(turns=[mem.turns()[0].id])
        forgot = store.data_version("alice")
        assert forgot.epoch == 2 and forgot.version > v + 3
        assert store.data_version("bob") == DataVersion(0, 0)  # per namespace
        mem.forget(all_namespace=True)
        gone = store.data_version("alice")
        assert gone.epoch == 3
        # Created again under the same name: the counters go on, never repeating a pair seen before.
        mem.add({"role": "user", "content": "again"}, session="s")
        assert store.data_version("alice") == DataVersion(gone.version + 1, 3)


def mem_batch() -> Any:
    from stratamem.records import Turn
    from stratamem.store import TurnBatch

    return TurnBatch("s", [Turn("user", "never stored")], [3])


def test_retention_that_purges_turns_bumps_the_epoch(tmp_path: Path) -> None:
    from stratamem.pyramid.retention import apply_retention

    cfg = CFG.replace(pyramid={"cold_retention_days": 1, "retention_purges_turns": True})
    with Memory(tmp_path / "r.db", namespace="alice", config=cfg, embedder=None) as mem:
        for i in range(12):
            mem.add({"role": "user", "content": f"turn {i}", "timestamp": (T0 + timedelta(hours=i)).isoformat()})
        before = mem.store.data_version("alice")  # type: ignore[attr-defined]
        report = apply_retention(mem.pyramid, now=datetime.now(UTC) + timedelta(days=30))
        assert report.turns_deleted > 0
        after = mem.store.data_version("alice")  # type: ignore[attr-defined]
        assert after.epoch > before.epoch  # archived content expired and turns purged: both destructive


def test_sqlite_answers_from_memory_until_a_connection_commits(tmp_path: Path) -> None:
    from stratamem.store.data_version import DataVersion

    first, second = open_store(tmp_path / "v.db"), open_store(tmp_path / "v.db")
    try:
        first.append("ns", [mem_batch()])
        ran: list[str] = []
        first.connection.set_trace_callback(ran.append)  # type: ignore[attr-defined]
        seen = first.data_version("ns")  # type: ignore[attr-defined]
        ran.clear()
        assert first.data_version("ns") == seen  # type: ignore[attr-defined]
        assert ran == ["PRAGMA data_version"]
        second.append("ns", [mem_batch()])  # another connection commits
        ran.clear()
        assert first.data_version("ns") == DataVersion(seen.version + 1, 0)  # type: ignore[attr-defined]
        assert len(ran) == 2 and "data_versions" in ran[1]
        first.append("ns", [mem_batch()])  # this connection commits: PRAGMA data_version stays, our count moves
        assert first.data_version("ns") == DataVersion(seen.version + 2, 0)  # type: ignore[attr-defined]
    finally:
        first.close()
        second.close()
