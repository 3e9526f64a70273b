"""AsyncMemory: parity with Memory, concurrency, cancellation, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import inspect
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pg import fresh_schema, schema_url

from stratamem import AsyncMemory, BudgetError, InvalidTurnError, Memory, StratamemError, ValidationError
from stratamem.aio import EXCLUDED
from stratamem.store.open import open_store


def _public_memory_names() -> list[str]:
    return sorted(
        n
        for n, a in vars(Memory).items()
        if not n.startswith("_") and (inspect.isfunction(a) or isinstance(a, property))
    )


def test_every_public_memory_method_has_an_async_twin_or_a_documented_exclusion() -> None:
    missing = [
        n
        for n in _public_memory_names()
        if n not in EXCLUDED and not inspect.iscoroutinefunction(getattr(AsyncMemory, n, None))
    ]
    assert missing == [], f"public Memory methods without an async twin (add one or list in EXCLUDED): {missing}"
    # No stale exclusions, and every exclusion says why.
    assert sorted(set(EXCLUDED) - set(_public_memory_names())) == []
    assert all(len(reason) > 20 for reason in EXCLUDED.values())


def test_twins_keep_the_sync_signature_and_docs() -> None:
    for name in _public_memory_names():
        if name in EXCLUDED:
            continue
        assert inspect.signature(getattr(AsyncMemory, name)) == inspect.signature(getattr(Memory, name)), name
        assert f"Memory.{name}" in inspect.getdoc(getattr(AsyncMemory, name)), name
    assert inspect.iscoroutinefunction(AsyncMemory.close)
    assert inspect.iscoroutinefunction(AsyncMemory.run)


def _msgs(tag: str, n: int) -> list[dict[str, Any]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"{tag} part {i}"} for i in range(n)]


def _check_gap_free(mem: Memory) -> dict[str, list[str]]:
    by_session: dict[str, list[str]] = {}
    for s in mem.store.sessions(mem.namespace):
        rows = mem.turns(s.name)
        assert [r.seq for r in rows] == list(range(1, len(rows) + 1)), s.name
        by_session[s.name] = [r.text for r in rows]
    return by_session


async def _hammer(amem: AsyncMemory, tasks: int, batches: int) -> None:
    async def worker(t: int) -> None:
        for b in range(batches):
            # Half the tasks share two sessions, half write their own.
            session = f"shared{t % 2}" if t % 2 == 0 else f"own{t}"
            await amem.add(_msgs(f"t{t}b{b}", 3), session=session)
            if b % 2:
                await amem.context(f"t{t}b{b}", budget=300, session=session)

    await asyncio.gather(*(worker(t) for t in range(tasks)))


def _assert_hammered(mem: Memory, tasks: int, batches: int) -> None:
    by_session = _check_gap_free(mem)
    texts = Counter(t for rows in by_session.values() for t in rows)
    expected = {f"t{t}b{b} part {i}" for t in range(tasks) for b in range(batches) for i in range(3)}
    assert set(texts) == expected and set(texts.values()) == {1}  # nothing lost, nothing duplicated
    for rows in by_session.values():  # each batch contiguous and in order inside its session
        for i in range(0, len(rows), 3):
            tag = rows[i].rsplit(" part ", 1)[0]
            assert rows[i : i + 3] == [f"{tag} part {k}" for k in range(3)]
    assert mem.status().turns == tasks * batches * 3


def test_concurrent_tasks_lose_and_duplicate_nothing_on_sqlite(tmp_path: Path) -> None:
    async def go() -> None:
        async with AsyncMemory(tmp_path / "a.db", namespace="n") as amem:
            await _hammer(amem, tasks=12, batches=6)

    asyncio.run(go())
    with Memory(tmp_path / "a.db", namespace="n") as mem:
        _assert_hammered(mem, 12, 6)


@pytest.mark.postgres
def test_concurrent_tasks_lose_and_duplicate_nothing_on_postgres(pg_dsn: str) -> None:
    url = schema_url(pg_dsn, fresh_schema(pg_dsn, "aio"))

    async def go() -> None:
        async with AsyncMemory(open_store(url), namespace="n") as amem:
            await _hammer(amem, tasks=12, batches=4)
            # Two namespaces on one store share the worker and stay apart.
            other = amem.for_namespace("other")
            await asyncio.gather(other.add(_msgs("o", 2), session="s"), amem.add(_msgs("m", 2), session="m"))
            assert [t.text for t in await other.turns()] == ["o part 0", "o part 1"]
            await other.close()
            assert (await amem.status()).turns == 12 * 4 * 3 + 2  # the sibling's close left the store open
            third = amem.for_namespace("third")
        with pytest.raises(StratamemError, match="closed"):
            await third.turns()  # closing the root closed its siblings

    asyncio.run(go())
    mem = Memory(open_store(url), namespace="n")
    try:
        by_session = _check_gap_free(mem)
        assert by_session.pop("m") == ["m part 0", "m part 1"]
        texts = Counter(t for rows in by_session.values() for t in rows)
        assert len(texts) == 12 * 4 * 3 and set(texts.values()) == {1}
    finally:
        mem.close()


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=st.lists(st.tuples(st.sampled_from("abc"), st.integers(1, 4)), min_size=1, max_size=12))
def test_any_interleaving_gives_gap_free_sessions_holding_each_batch_whole(plan: list[tuple[str, int]]) -> None:
    async def go() -> Memory:
        amem = AsyncMemory(":memory:", namespace="p")
        await asyncio.gather(*(amem.add(_msgs(f"b{i}", n), session=s) for i, (s, n) in enumerate(plan)))
        return amem.memory

    mem = asyncio.run(go())
    by_session = _check_gap_free(mem)
    for i, (s, n) in enumerate(plan):
        rows = by_session[s]
        start = rows.index(f"b{i} part 0")
        assert rows[start : start + n] == [f"b{i} part {k}" for k in range(n)]
    assert sum(len(r) for r in by_session.values()) == sum(n for _, n in plan)
    mem.close()


def test_cancelled_tasks_never_leave_a_partial_batch(tmp_path: Path) -> None:
    async def go() -> tuple[set[int], set[int]]:
        amem = AsyncMemory(tmp_path / "c.db", namespace="c")
        tasks = [asyncio.create_task(amem.add(_msgs(f"k{i}", 4), session=f"s{i % 3}")) for i in range(60)]
        await asyncio.sleep(0)
        for i, task in enumerate(tasks):
            if i % 3 == 0:
                task.cancel()
            if i % 7 == 0:
                await asyncio.sleep(0.001)  # let the worker get into some of them
        results = await asyncio.gather(*tasks, return_exceptions=True)
        cancelled = {i for i, r in enumerate(results) if isinstance(r, asyncio.CancelledError)}
        done = {i for i, r in enumerate(results) if isinstance(r, list)}
        await amem.close()
        return cancelled, done

    cancelled, done = asyncio.run(go())
    assert cancelled and done and cancelled | done == set(range(60))
    with Memory(tmp_path / "c.db", namespace="c") as mem:
        by_session = _check_gap_free(mem)
        counts = Counter(t.rsplit(" part ", 1)[0] for rows in by_session.values() for t in rows)
    assert set(counts.values()) <= {4}  # every batch whole or absent
    present = {int(tag[1:]) for tag in counts}
    assert done <= present  # every completed call is stored
    assert present - done <= cancelled  # anything else stored was cancelled while already running


def test_a_failing_batch_raises_the_sync_error_and_stores_nothing(tmp_path: Path) -> None:
    async def go() -> None:
        async with AsyncMemory(tmp_path / "f.db", namespace="f") as amem:
            await amem.add(_msgs("ok", 2))
            bad = _msgs("bad", 2) + [{"role": "tool", "tool_call_id": "nope", "content": "x"}]
            with pytest.raises(InvalidTurnError, match="answers no tool call"):
                await amem.add(bad)
            with pytest.raises(BudgetError):
                await amem.context("x", budget=0)
            with pytest.raises(ValidationError):
                await amem.add(_msgs("x", 1), session="bad name!")
            assert [t.text for t in await amem.turns()] == ["ok part 0", "ok part 1"]
        with pytest.raises(StratamemError, match="closed"):
            await amem.turns()
        with pytest.raises(ValidationError):
            await AsyncMemory.wrap(amem.memory).run(42)  # type: ignore[arg-type]

    asyncio.run(go())
    with pytest.raises(ValidationError):
        AsyncMemory.wrap("not a memory")  # type: ignore[arg-type]


def test_results_match_memory_call_for_call(tmp_path: Path) -> None:
    script: list[tuple[str, list[dict[str, Any]], str]] = [
        (
            "s1",
            [
                {"role": "user", "content": "Our budget is $50K for the Lisbon offsite."},
                {"role": "assistant", "content": "Noted: $50K."},
            ],
            "budget",
        ),
        (
            "s2",
            [
                {"role": "user", "content": "Book the venue near the river."},
                {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "book", "arguments": '{"where": "river"}'},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "booked"},
            ],
            "venue",
        ),
        ("s1", [{"role": "user", "content": "What was the budget again?"}], "Lisbon budget"),
    ]
    sync = Memory(tmp_path / "s.db", namespace="p")

    async def go() -> list[Any]:
        out = []
        async with AsyncMemory(tmp_path / "a.db", namespace="p") as amem:
            for session, msgs, query in script:
                added = await amem.add(msgs, session=session)
                ctx = await amem.context(query, budget=400, session=session)
                out.append(
                    (
                        [(t.session, t.seq, t.tokens, t.turn.content) for t in added],
                        ctx.messages,
                        ctx.tokens,
                        [i.id for i in ctx.manifest.items],
                    )
                )
            st_ = await amem.status()
            out.append((st_.turns, st_.tokens, st_.sessions))
            out.append(await amem.run(lambda m: [t.text for t in m.turns("s2")]))
        return out

    got = asyncio.run(go())
    want: list[Any] = []
    for session, msgs, query in script:
        added = sync.add(msgs, session=session)
        ctx = sync.context(query, budget=400, session=session)
        want.append(
            (
                [(t.session, t.seq, t.tokens, t.turn.content) for t in added],
                ctx.messages,
                ctx.tokens,
                [i.id for i in ctx.manifest.items],
            )
        )
    s = sync.status()
    want.append((s.turns, s.tokens, s.sessions))
    want.append([t.text for t in sync.turns("s2")])
    sync.close()
    assert got == want


def test_the_event_loop_keeps_running_while_the_store_works(tmp_path: Path) -> None:
    async def go() -> int:
        ticks = 0
        stop = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await asyncio.sleep(0)

        async with AsyncMemory(tmp_path / "t.db", namespace="t") as amem:
            t = asyncio.create_task(ticker())
            for i in range(30):
                await amem.add(_msgs(f"x{i}", 2))
            stop.set()
            await t
        return ticks

    assert asyncio.run(go()) >= 30  # the loop ran other tasks during every store call


def test_wrapping_one_memory_twice_shares_one_worker_and_sync_callers_use_it(tmp_path: Path) -> None:
    import threading

    mem = Memory(tmp_path / "w.db", namespace="w")
    a, b = AsyncMemory.wrap(mem), AsyncMemory.wrap(mem)
    assert a is b
    worker_threads: set[int] = set()

    def add(m: Memory, i: int) -> None:
        worker_threads.add(threading.get_ident())
        m.add(_msgs(f"sync{i}", 2), session="s")

    # Sync callers on several threads and async tasks, all on the one worker.
    threads = [threading.Thread(target=lambda i=i: a.run_sync(lambda m: add(m, i))) for i in range(4)]
    for t in threads:
        t.start()

    async def go() -> None:
        await asyncio.gather(*(a.run(lambda m, i=i: add(m, 10 + i)) for i in range(4)))
        # run_sync from inside the worker runs directly instead of deadlocking.
        assert await a.run(lambda m: a.run_sync(lambda m2: m2 is m)) is True

    asyncio.run(go())
    for t in threads:
        t.join()
    assert len(worker_threads) == 1 and threading.get_ident() not in worker_threads
    assert len(mem.turns("s")) == 16 and [t.seq for t in mem.turns("s")] == list(range(1, 17))
    with pytest.raises(ValidationError):
        a.run_sync("nope")  # type: ignore[arg-type]
    asyncio.run(a.close())
    assert AsyncMemory.wrap(Memory(tmp_path / "w.db", namespace="w")) is not a  # a closed one is not reused
