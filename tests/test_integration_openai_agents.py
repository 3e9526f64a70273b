"""StratamemSession under the Agents SDK's own Runner and ScriptedModel (no API key)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, RunContextWrapper, Runner, SQLiteSession, function_tool, set_tracing_disabled
from agents.memory import Session, SessionSettings
from agents.testing import ScriptedModel, assistant_message, function_call

from stratamem import AsyncMemory, Config, InvalidTurnError, Memory, ValidationError
from stratamem.integrations.openai_agents import StratamemSession
from stratamem.tokens import count_messages, get_tokenizer

set_tracing_disabled(True)  # the SDK's tracing would export to OpenAI: no network, no telemetry here

_weather_calls: list[str] = []


@function_tool
def get_weather(city: str) -> str:
    """Weather for a city."""
    _weather_calls.append(city)
    return f"Sunny in {city}, 21C"


def _script() -> list[Any]:
    return [
        [function_call("get_weather", {"city": "Lisbon"}, call_id="call_1")],
        [assistant_message("It is sunny in Lisbon.", item_id="m1")],
        [assistant_message("Your budget is $50K.", item_id="m2")],
        [function_call("get_weather", {"city": "Porto"}, call_id="call_2")],
        [assistant_message("Porto is sunny too.", item_id="m3")],
    ]


_PROMPTS = ["Weather in Lisbon?", "Our budget is $50K. Repeat it.", "And Porto?"]


async def _conversation(session: Any) -> tuple[list[str], ScriptedModel]:
    model = ScriptedModel(_script())
    agent = Agent(name="helper", instructions="Be brief.", model=model, tools=[get_weather])
    outputs = []
    for prompt in _PROMPTS:
        result = await Runner.run(agent, prompt, session=session)
        outputs.append(result.final_output)
    model.assert_complete()
    return outputs, model


def test_runner_round_trips_items_exactly_like_the_sdks_sqlite_session(tmp_path: Path) -> None:
    async def go() -> None:
        amem = AsyncMemory(tmp_path / "a.db", namespace="agents")
        ours = StratamemSession("user-1", amem)
        assert isinstance(ours, Session)
        theirs = SQLiteSession("user-1")  # the SDK's default memory, in memory
        out_ours, model_ours = await _conversation(ours)
        out_theirs, model_theirs = await _conversation(theirs)
        assert out_ours == out_theirs == ["It is sunny in Lisbon.", "Your budget is $50K.", "Porto is sunny too."]
        # Same history stored, item for item, and the same inputs sent to the model on every call.
        assert await ours.get_items() == await theirs.get_items()
        assert [c.input for c in model_ours.calls] == [c.input for c in model_theirs.calls]
        # The third run's first call saw the whole earlier conversation, tool call and output included.
        third = model_ours.calls[3].input
        assert {"type": "function_call_output", "call_id": "call_1", "output": "Sunny in Lisbon, 21C"} in third
        assert any(i.get("content") == "Our budget is $50K. Repeat it." for i in third)
        await amem.close()
        # Durable: a new process reads the same items back, and stratamem sees every turn.
        amem2 = AsyncMemory(tmp_path / "a.db", namespace="agents")
        assert await StratamemSession("user-1", amem2).get_items() == await theirs.get_items()
        turns = await amem2.turns("user-1")
        assert [t.role for t in turns][:4] == ["user", "assistant", "tool", "assistant"]
        assert turns[1].turn.blocks[0].name == "get_weather"  # the call is a real tool_use block
        ctx = await amem2.context("budget", budget=300)
        assert any("$50K" in str(m["content"]) for m in ctx.messages)
        await amem2.close()

    asyncio.run(go())


def test_session_protocol_semantics_match_the_sdk_session(tmp_path: Path) -> None:
    """The assertions of the SDK's session tests, run against both implementations."""

    async def check(session: Any) -> None:
        assert await session.get_items() == []
        assert await session.pop_item() is None
        items = [
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": "Hi there!"},
            {"role": "user", "content": "How are you?"},
            {"role": "assistant", "content": "Fine."},
        ]
        await session.add_items(items[:2])
        await session.add_items(items[2:])
        assert await session.get_items() == items
        assert await session.get_items(limit=2) == items[2:]
        assert await session.get_items(limit=0) == []
        assert await session.get_items(limit=10) == items
        assert await session.pop_item() == items[-1]
        assert await session.get_items() == items[:-1]
        await session.add_items([{"role": "assistant", "content": "Great."}])
        assert (await session.get_items())[-1] == {"role": "assistant", "content": "Great."}
        await session.clear_session()
        assert await session.get_items() == []
        await session.add_items([{"role": "user", "content": "Fresh start"}])
        assert await session.get_items() == [{"role": "user", "content": "Fresh start"}]
        await session.clear_session()
        await session.clear_session()
        assert await session.get_items() == []

    async def go() -> None:
        await check(SQLiteSession("s"))
        amem = AsyncMemory(tmp_path / "p.db", namespace="p")
        await check(StratamemSession("s", amem))
        # Cleared threads stay as history; the live thread resolves the same in a new session object.
        names = [s.name for s in amem.memory.store.sessions("p")]
        assert names == ["s", "s@gen1", "s@gen2"]
        assert await StratamemSession("s", amem).get_items() == []
        # The pop forgot turn 4 (Memory.forget); a sequence number is never reused.
        assert [t.seq for t in await amem.turns("s")] == [1, 2, 3, 5]
        # limit from the SDK's SessionSettings
        limited = StratamemSession("t", amem, session_settings=SessionSettings(limit=1))
        await limited.add_items([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
        assert await limited.get_items() == [{"role": "user", "content": "b"}]
        await amem.close()

    asyncio.run(go())


def test_bad_input_is_refused_at_the_boundary_and_stores_nothing(tmp_path: Path) -> None:
    async def go() -> None:
        amem = AsyncMemory(tmp_path / "b.db", namespace="b")
        session = StratamemSession("s", amem)
        with pytest.raises(InvalidTurnError):
            await session.add_items([{"role": "user", "content": "ok"}, {"nothing": 1}])
        with pytest.raises(InvalidTurnError, match="answers no tool call"):
            await session.add_items([{"type": "function_call_output", "call_id": "ghost", "output": "x"}])
        with pytest.raises(ValidationError):
            await session.add_items("not a list")  # type: ignore[arg-type]
        assert await session.get_items() == []
        for bad in ({"mode": "fancy"}, {"budget": 0}):
            with pytest.raises(ValidationError):
                StratamemSession("s", amem, **bad)
        with pytest.raises(ValidationError):
            StratamemSession("bad id!", amem)
        with pytest.raises(ValidationError):
            StratamemSession("s", "memory.db")  # type: ignore[arg-type]
        await amem.close()

    asyncio.run(go())


def test_context_mode_keeps_a_long_tool_heavy_run_within_budget(tmp_path: Path) -> None:
    tok = get_tokenizer()

    async def go() -> None:
        amem = AsyncMemory(tmp_path / "c.db", namespace="c")
        raw = StratamemSession("long", amem)
        budgeted = StratamemSession("long", amem, mode="context", budget=2000)
        for i in range(40):
            await raw.add_items(
                [
                    {"role": "user", "content": f"Step {i}: read file_{i}.py"},
                    {"type": "function_call", "call_id": f"c{i}", "name": "read", "arguments": json.dumps({"i": i})},
                    {"type": "function_call_output", "call_id": f"c{i}", "output": f"contents {i} " + "x " * 600},
                    {"role": "assistant", "content": f"file_{i}.py is read"},
                ]
            )
        await raw.add_items(
            [{"role": "user", "content": "The deploy key is KEY-7781."}, {"role": "assistant", "content": "Noted."}]
        )
        for i in range(3):
            await raw.add_items([{"role": "user", "content": f"filler {i}"}, {"role": "assistant", "content": "ok"}])
        await raw.add_items([{"role": "user", "content": "What is the deploy key?"}])
        full = await raw.get_items()
        view = await budgeted.get_items()
        assert len(full) == 40 * 4 + 2 + 6 + 1
        as_chat = [
            {"role": i["role"], "content": i["content"]}
            if "role" in i
            else {"role": "tool", "tool_call_id": i["call_id"], "content": i["output"]}
            if i["type"] == "function_call_output"
            else {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": i["call_id"],
                        "type": "function",
                        "function": {"name": i["name"], "arguments": i["arguments"]},
                    }
                ],
            }
            for i in view
        ]
        assert (
            count_messages(as_chat, tok) <= 2000 < count_messages([{"role": "user", "content": json.dumps(full)}], tok)
        )
        texts = json.dumps(view)
        assert "KEY-7781" in texts  # recalled for the latest question
        assert view[-1] == {"role": "user", "content": "What is the deploy key?"}
        # Tool calls and outputs stay paired in the view.
        calls = {i["call_id"] for i in view if i.get("type") == "function_call"}
        outs = {i["call_id"] for i in view if i.get("type") == "function_call_output"}
        assert outs <= calls
        # The SDK runs on the budgeted view.
        model = ScriptedModel([[assistant_message("KEY-7781", item_id="k")]])
        agent = Agent(name="a", model=model)
        result = await Runner.run(agent, "Tell me again.", session=budgeted)
        assert result.final_output == "KEY-7781"
        assert "KEY-7781" in json.dumps(model.calls[0].input)
        await amem.close()

    asyncio.run(go())


def test_run_context_routes_each_tenant_to_its_namespace(tmp_path: Path) -> None:
    async def go() -> None:
        amem = AsyncMemory(tmp_path / "t.db", namespace="default")
        session = StratamemSession("chat", amem, namespace_for=lambda w: f"tenant-{w.context['tenant']}")
        for tenant, text in (("a", "alpha"), ("b", "beta")):
            model = ScriptedModel([[assistant_message(f"ok {text}", item_id="x")]])
            await Runner.run(Agent(name="r", model=model), text, session=session, context={"tenant": tenant})
        mem = amem.memory
        assert mem.store.namespaces() == ["tenant-a", "tenant-b"]
        a = await amem.for_namespace("tenant-a").turns("chat")
        assert [t.text for t in a] == ["alpha", "ok alpha"]
        wrapper = RunContextWrapper(context={"tenant": "b"})
        assert [i.get("content") for i in await session.get_items(wrapper=wrapper)][0] == "beta"
        await amem.close()

    asyncio.run(go())


def test_pop_forgets_a_turn_sealed_into_the_pyramid_and_its_segment_follows(tmp_path: Path) -> None:
    async def go() -> None:
        amem = AsyncMemory(tmp_path / "s.db", namespace="s")
        session = StratamemSession("x", amem)
        await session.add_items([{"role": "user", "content": "one"}, {"role": "assistant", "content": "two"}])
        segment = await amem.seal("x")
        assert segment is not None and segment.turn_count == 2
        assert await session.pop_item() == {"role": "assistant", "content": "two"}
        assert await session.get_items() == [{"role": "user", "content": "one"}]
        # The segment that covered both turns now covers only the one that is left.
        (node,) = list(amem.memory.pyramid.nodes(level=1))
        assert node.turn_count == 1
        await amem.close()

    asyncio.run(go())


def test_a_sync_memory_is_accepted_and_wrapped(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "w.db", namespace="w", config=Config())
    session = StratamemSession("w", mem)
    asyncio.run(session.add_items([{"role": "user", "content": "hi"}]))
    assert [t.text for t in mem.turns("w")] == ["hi"]
    mem.close()


@pytest.mark.postgres
def test_session_semantics_on_postgres(pg_dsn: str) -> None:
    from pg import fresh_schema, schema_url

    from stratamem.store.open import open_store

    async def go() -> None:
        amem = AsyncMemory(open_store(schema_url(pg_dsn, fresh_schema(pg_dsn, "oai"))), namespace="pg")
        session = StratamemSession("s", amem)
        items = [{"role": "user", "content": f"m{i}"} for i in range(4)]
        await asyncio.gather(session.add_items(items[:2]), StratamemSession("t", amem).add_items(items))
        await session.add_items(items[2:])
        assert await session.pop_item() == items[3]
        assert await session.get_items() == items[:3]
        await session.add_items([{"role": "assistant", "content": "again"}])
        assert [t.seq for t in await amem.turns("s")] == [1, 2, 3, 5]
        await session.clear_session()
        assert await session.get_items() == []
        assert len(await StratamemSession("t", amem).get_items()) == 4
        await amem.close()

    asyncio.run(go())
