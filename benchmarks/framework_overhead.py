"""Per-turn overhead of each framework adapter beside the framework's own default memory, and prompt tokens.

Part ``overhead`` (every framework with its own fake model, no network; real
SQLite files under a temporary directory; median wall time per turn over
``--turns`` turns, after 3 warm-up turns):

* ``AsyncMemory`` vs ``Memory``: ``add`` of a user/assistant pair + ``context(budget=2000)``;
* OpenAI Agents SDK: ``Runner.run`` with a ``ScriptedModel`` (one tool call per turn),
  ``SQLiteSession`` (the SDK's default, on a file) vs ``StratamemSession`` raw and context mode;
* LangGraph: ``put`` + ``get`` + ``search`` per turn, ``InMemoryStore`` vs ``StratamemStore``;
  and a ``create_agent`` turn (fake tool-calling model) without vs with ``StratamemMiddleware``;
* LlamaIndex: a ``SimpleChatEngine`` turn over ``MockLLM``, default ``Memory`` (SQLAlchemy, in memory)
  vs ``Memory`` + ``StratamemMemoryBlock``;
* Pydantic AI: ``Agent.run`` with ``FunctionModel``, plain ``message_history`` vs ``StratamemHistory``.

Part ``tokens``: a ``--long``-turn tool-heavy Agents SDK conversation (each turn: a
user message, a tool call returning ~2,000 characters, an answer; a fact planted
in turn 1 and asked for in the last turn), once with ``SQLiteSession`` (the SDK
replays the whole history) and once with ``StratamemSession(mode="context",
budget=4000)``. Reported: total prompt tokens over the run (o200k_base, the
JSON of the items each model call received), the last call's prompt tokens, and
whether the last call's input holds the planted fact.

Part ``pg`` (the AsyncMemory design decision, on a real PostgreSQL: ``STRATAMEM_PG_DSN``
or a throwaway ``pgserver``): one INSERT + COMMIT per call through psycopg's
``AsyncConnection`` (a native async path) vs a sync psycopg connection called
through a worker thread (AsyncMemory's offload); and ``Memory.add`` vs
``AsyncMemory.add`` of a user/assistant pair on the PostgreSQL store.

    .venv/bin/python benchmarks/framework_overhead.py [--turns 30] [--long 200] [--parts overhead tokens pg]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from stratamem import AsyncMemory, Memory
from stratamem.tokens import get_tokenizer

WARMUP = 3


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples[WARMUP:]) * 1000


async def _time_async(step: Callable[[int], Awaitable[Any]], turns: int) -> float:
    samples = []
    for i in range(turns + WARMUP):
        t0 = time.perf_counter()
        await step(i)
        samples.append(time.perf_counter() - t0)
    return _median_ms(samples)


def _time_sync(step: Callable[[int], Any], turns: int) -> float:
    samples = []
    for i in range(turns + WARMUP):
        t0 = time.perf_counter()
        step(i)
        samples.append(time.perf_counter() - t0)
    return _median_ms(samples)


def _pair_sync(base: Callable[[int], Any], ours: Callable[[int], Any], turns: int) -> tuple[float, float]:
    """Median ms per turn of each, their turns interleaved so load drift hits both alike."""
    a: list[float] = []
    b: list[float] = []
    for i in range(turns + WARMUP):
        for step, out in ((base, a), (ours, b)):
            t0 = time.perf_counter()
            step(i)
            out.append(time.perf_counter() - t0)
    return _median_ms(a), _median_ms(b)


async def _pair_async(
    base: Callable[[int], Awaitable[Any]], ours: Callable[[int], Awaitable[Any]], turns: int
) -> tuple[float, float]:
    """:func:`_pair_sync` for coroutines."""
    a: list[float] = []
    b: list[float] = []
    for i in range(turns + WARMUP):
        for step, out in ((base, a), (ours, b)):
            t0 = time.perf_counter()
            await step(i)
            out.append(time.perf_counter() - t0)
    return _median_ms(a), _median_ms(b)


def _pair(i: int) -> list[dict[str, str]]:
    return [
        {"role": "user", "content": f"Turn {i}: please check item {i} in the inventory list"},
        {"role": "assistant", "content": f"Item {i} is in stock, {i * 3} units left."},
    ]


# --- parts ------------------------------------------------------------------------------


def bench_aio(tmp: Path, turns: int) -> list[tuple[str, str, float, float]]:
    sync = Memory(tmp / "sync.db", namespace="b")

    async def sync_step(i: int) -> None:
        sync.add(_pair(i), session="s")
        sync.context(f"item {i}", budget=2000, session="s")

    async def go() -> tuple[float, float]:
        amem = AsyncMemory(tmp / "async.db", namespace="b")

        async def step(i: int) -> None:
            await amem.add(_pair(i), session="s")
            await amem.context(f"item {i}", budget=2000, session="s")

        ms = await _pair_async(sync_step, step, turns)
        await amem.close()
        return ms

    base, ours = asyncio.run(go())
    sync.close()
    return [("stratamem", "Memory add+context vs AsyncMemory", base, ours)]


def bench_openai_agents(tmp: Path, turns: int) -> list[tuple[str, str, float, float]]:
    from agents import Agent, Runner, SQLiteSession, function_tool
    from agents.testing import ScriptedModel, assistant_message, function_call

    from stratamem.integrations.openai_agents import StratamemSession

    @function_tool
    def stock(item: int) -> str:
        """Stock of an item."""
        return f"item {item}: {item * 3} units"

    def script(n: int) -> list[Any]:
        steps: list[Any] = []
        for i in range(n):
            steps += [[function_call("stock", {"item": i}, call_id=f"c{i}")], [assistant_message(f"ok {i}")]]
        return steps

    def turn(session: Any) -> Callable[[int], Awaitable[Any]]:
        agent = Agent(name="b", model=ScriptedModel(script(turns + WARMUP)), tools=[stock])
        return lambda i: Runner.run(agent, f"stock of item {i}?", session=session)

    async def go() -> list[tuple[str, str, float, float]]:
        amem = AsyncMemory(tmp / "oai.db", namespace="b")
        base1, raw = await _pair_async(
            turn(SQLiteSession("b", str(tmp / "sdk.db"))), turn(StratamemSession("b", amem)), turns
        )
        base2, ctx = await _pair_async(
            turn(SQLiteSession("c", str(tmp / "sdk.db"))),
            turn(StratamemSession("c", amem, mode="context", budget=4000)),
            turns,
        )
        await amem.close()
        return [
            ("openai-agents", "Runner.run turn: SQLiteSession vs StratamemSession (raw)", base1, raw),
            ("openai-agents", "Runner.run turn: SQLiteSession vs StratamemSession (context)", base2, ctx),
        ]

    return asyncio.run(go())


def bench_langgraph(tmp: Path, turns: int) -> list[tuple[str, str, float, float]]:
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.tools import tool
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.store.memory import InMemoryStore

    from stratamem.integrations.langgraph import StratamemMiddleware, StratamemStore

    def store_step(store: Any) -> Callable[[int], None]:
        def step(i: int) -> None:
            ns = ("users", f"u{i % 5}")
            store.put(ns, f"fact{i}", {"text": f"user likes item {i} and colour {i % 7}"})
            store.get(ns, f"fact{i}")
            store.search(("users",), query=f"colour {i % 7}", limit=5)

        return step

    mem = Memory(tmp / "lg.db", namespace="b")
    base, ours = _pair_sync(store_step(InMemoryStore()), store_step(StratamemStore(mem)), turns)

    class Fake(GenericFakeChatModel):
        def bind_tools(self, tools: Any, **kw: Any) -> Fake:
            return self

    @tool
    def stock(item: int) -> str:
        """Stock of an item."""
        return f"item {item}: {item * 3} units"

    def agent_step(middleware: list[Any]) -> Callable[[int], None]:
        msgs = []
        for i in range(turns + WARMUP):
            msgs += [
                AIMessage("", tool_calls=[{"name": "stock", "args": {"item": i}, "id": f"c{i}"}]),
                AIMessage(f"ok {i}"),
            ]
        agent = create_agent(
            Fake(messages=iter(msgs)), tools=[stock], middleware=middleware, checkpointer=InMemorySaver()
        )
        cfg = {"configurable": {"thread_id": "t"}}
        return lambda i: agent.invoke({"messages": [HumanMessage(f"stock of item {i}?")]}, cfg)

    plain, with_mw = _pair_sync(agent_step([]), agent_step([StratamemMiddleware(mem)]), turns)
    mem.close()
    return [
        ("langgraph", "store put+get+search: InMemoryStore vs StratamemStore", base, ours),
        ("langchain", "create_agent turn: no middleware vs StratamemMiddleware", plain, with_mw),
    ]


def bench_llamaindex(tmp: Path, turns: int) -> list[tuple[str, str, float, float]]:
    from llama_index.core.chat_engine import SimpleChatEngine
    from llama_index.core.llms import MockLLM
    from llama_index.core.memory import Memory as LlamaMemory

    from stratamem.integrations.llamaindex import StratamemMemoryBlock

    def step_for(blocks: list[Any], session: str) -> Callable[[int], Any]:
        memory = LlamaMemory.from_defaults(session_id=session, token_limit=2000, memory_blocks=blocks)
        engine = SimpleChatEngine.from_defaults(llm=MockLLM(max_tokens=8), memory=memory)
        return lambda i: engine.chat(f"Turn {i}: please check item {i} in the inventory list")

    mem = Memory(tmp / "li.db", namespace="b")
    base, ours = _pair_sync(step_for([], "a"), step_for([StratamemMemoryBlock(memory=mem, session="b")], "b"), turns)
    mem.close()
    return [("llamaindex", "SimpleChatEngine turn: default Memory vs + StratamemMemoryBlock", base, ours)]


def bench_pydantic_ai(tmp: Path, turns: int) -> list[tuple[str, str, float, float]]:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart
    from pydantic_ai.models.function import FunctionModel

    from stratamem.integrations.pydantic_ai import StratamemHistory

    model = FunctionModel(lambda messages, info: ModelResponse(parts=[TextPart("ok")]))

    async def go() -> list[tuple[str, str, float, float]]:
        plain = Agent(model)
        history: list[Any] = []

        async def plain_step(i: int) -> None:
            result = await plain.run(f"Turn {i}: check item {i}", message_history=history)
            history[:] = result.all_messages()

        amem = AsyncMemory(tmp / "pai.db", namespace="b")
        ours_agent = Agent(model, capabilities=[StratamemHistory(amem, session="s", budget=4000).capability()])
        base, ours = await _pair_async(plain_step, lambda i: ours_agent.run(f"Turn {i}: check item {i}"), turns)
        await amem.close()
        return [("pydantic-ai", "Agent.run turn: message_history vs StratamemHistory", base, ours)]

    return asyncio.run(go())


def bench_tokens(tmp: Path, long: int) -> list[tuple[str, int, int, bool]]:
    from agents import Agent, Runner, SQLiteSession, function_tool
    from agents.testing import ScriptedModel, assistant_message, function_call

    from stratamem.integrations.openai_agents import StratamemSession

    tok = get_tokenizer()

    @function_tool
    def read_log(part: int) -> str:
        """Read part of a log."""
        return f"log part {part}: " + " ".join(f"event-{part}-{k} status=ok latency={k * 7}ms" for k in range(70))

    async def run(session: Any) -> tuple[int, int, bool]:
        steps: list[Any] = []
        for i in range(long):
            steps += [[function_call("read_log", {"part": i}, call_id=f"c{i}")], [assistant_message(f"read part {i}")]]
        model = ScriptedModel(steps)
        agent = Agent(name="t", model=model, tools=[read_log])
        for i in range(long):
            prompt = (
                "Remember: the rollback password is ORCHID-42. Read log part 0."
                if i == 0
                else "What is the rollback password? Then read the next part."
                if i == long - 1
                else f"Read log part {i}."
            )
            await Runner.run(agent, prompt, session=session)
        sizes = [tok.count(json.dumps(c.input, default=str)) for c in model.calls]
        return sum(sizes), sizes[-2], "ORCHID-42" in json.dumps(model.calls[-2].input, default=str)

    async def go() -> list[tuple[str, int, int, bool]]:
        full = await run(SQLiteSession("t", str(tmp / "tok.db")))
        amem = AsyncMemory(tmp / "tok-ours.db", namespace="t")
        ours = await run(StratamemSession("t", amem, mode="context", budget=4000))
        await amem.close()
        return [("SQLiteSession (whole history)", *full), ("StratamemSession context, budget 4000", *ours)]

    return asyncio.run(go())


def bench_pg(turns: int) -> list[tuple[str, str, float, float]]:
    import concurrent.futures
    import os

    import psycopg

    from stratamem.store.open import open_store

    server = None
    dsn = os.environ.get("STRATAMEM_PG_DSN")
    if not dsn:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from pg import LocalPostgres

        server = LocalPostgres()
        dsn = server.dsn
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("DROP TABLE IF EXISTS smfw_bench; CREATE TABLE smfw_bench (id serial, v text)")
        n = max(turns * 10, 100)

        async def native() -> float:
            aconn = await psycopg.AsyncConnection.connect(dsn)

            async def step(i: int) -> None:
                async with aconn.transaction():
                    await aconn.execute("INSERT INTO smfw_bench (v) VALUES (%s)", (f"row {i}",))

            ms = await _time_async(step, n)
            await aconn.close()
            return ms

        async def offload() -> float:
            conn = psycopg.connect(dsn)
            pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)

            def insert(i: int) -> None:
                with conn.transaction():
                    conn.execute("INSERT INTO smfw_bench (v) VALUES (%s)", (f"row {i}",))

            ms = await _time_async(lambda i: asyncio.wrap_future(pool.submit(insert, i)), n)
            pool.shutdown()
            conn.close()
            return ms

        rows = [
            (
                "postgres",
                "INSERT+COMMIT: psycopg AsyncConnection vs sync conn on a worker",
                asyncio.run(native()),
                asyncio.run(offload()),
            )
        ]
        sync = Memory(open_store(f"{dsn}{'&' if '?' in dsn else '?'}schema=smfw_sync"), namespace="b")

        async def sync_add(i: int) -> None:
            sync.add(_pair(i), session="s")

        async def amem_add() -> tuple[float, float]:
            amem = AsyncMemory(open_store(f"{dsn}{'&' if '?' in dsn else '?'}schema=smfw_async"), namespace="b")
            ms = await _pair_async(sync_add, lambda i: amem.add(_pair(i), session="s"), turns)
            await amem.close()
            return ms

        rows.append(("postgres", "add of a pair: Memory vs AsyncMemory", *asyncio.run(amem_add())))
        sync.close()
        return rows
    finally:
        if server is not None:
            server.stop()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=30)
    ap.add_argument("--long", type=int, default=200)
    ap.add_argument("--parts", nargs="+", default=["overhead", "tokens"], choices=["overhead", "tokens", "pg"])
    args = ap.parse_args(argv)
    from agents import set_tracing_disabled

    set_tracing_disabled(True)  # the SDK's tracing exports to OpenAI; this benchmark stays offline
    with tempfile.TemporaryDirectory(prefix="smfw-") as d:
        tmp = Path(d)
        if "overhead" in args.parts:
            rows = []
            for bench in (bench_aio, bench_openai_agents, bench_langgraph, bench_llamaindex, bench_pydantic_ai):
                rows += bench(tmp, args.turns)
            print(f"\nPer-turn wall time, median of {args.turns} turns (ms)")
            print(f"| {'framework':<14} | {'what (baseline vs ours)':<66} | baseline |   ours |  ratio |")
            print(f"|{'-' * 16}|{'-' * 68}|---------:|-------:|-------:|")
            for fw, what, base, ours in rows:
                print(f"| {fw:<14} | {what:<66} | {base:8.2f} | {ours:6.2f} | {ours / base:6.2f} |")
        if "pg" in args.parts:
            print("\nPostgreSQL per-call wall time, median (ms)")
            print("| backend | what (baseline vs ours) | baseline | ours | ratio |")
            print("|---|---|---:|---:|---:|")
            for fw, what, base, ours in bench_pg(args.turns):
                print(f"| {fw} | {what} | {base:.2f} | {ours:.2f} | {ours / base:.2f} |")
        if "tokens" in args.parts:
            print(f"\nPrompt tokens over a {args.long}-turn tool-heavy Agents SDK run (o200k_base)")
            print("| session | total prompt tokens | last-question prompt tokens | fact from turn 1 in it |")
            print("|---|---:|---:|---|")
            for name, total, last, fact in bench_tokens(tmp, args.long):
                print(f"| {name} | {total:,} | {last:,} | {'yes' if fact else 'no'} |")


if __name__ == "__main__":
    main()
