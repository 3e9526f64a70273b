"""StratamemHistory under Pydantic AI's own agent loop with FunctionModel and TestModel (no API key)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from stratamem import AsyncMemory, Memory, ValidationError
from stratamem.integrations.pydantic_ai import StratamemHistory, from_openai_messages, to_openai_messages
from stratamem.tokens import count_messages, get_tokenizer


def _scripted(seen: list[list[ModelMessage]]) -> FunctionModel:
    """Calls `lookup` once per run when the prompt asks to, then answers from the tool output."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        last = messages[-1]
        prompt = next((p.content for p in last.parts if getattr(p, "part_kind", "") == "user-prompt"), None)
        if isinstance(prompt, str) and prompt.startswith("look up"):
            return ModelResponse(parts=[ToolCallPart("lookup", {"topic": prompt[8:]}, f"call-{len(seen)}")])
        returns = [p for p in last.parts if getattr(p, "part_kind", "") == "tool-return"]
        if returns:
            return ModelResponse(parts=[TextPart(f"found: {returns[0].content}")])
        return ModelResponse(parts=[TextPart(f"ok: {prompt}")])

    return FunctionModel(respond)


def _agent(model: Any, history: StratamemHistory) -> Agent:
    agent = Agent(model, capabilities=[history.capability()])
    assert isinstance(history.capability(), ProcessHistory)

    @agent.tool_plain
    def lookup(topic: str) -> str:
        """Look a topic up."""
        return f"{topic} facts " + "detail " * 300

    return agent


def test_every_message_is_stored_and_earlier_runs_come_back_from_stratamem(tmp_path: Path) -> None:
    async def go() -> None:
        amem = AsyncMemory(tmp_path / "p.db", namespace="pai")
        history = StratamemHistory(amem, session="chat-1", budget=4000)
        seen: list[list[ModelMessage]] = []
        agent = _agent(_scripted(seen), history)
        r1 = await agent.run("Our budget is $50K.")
        r2 = await agent.run("look up venues")  # no message_history: the history comes from stratamem
        r3 = await agent.run("What is our budget?", message_history=r2.all_messages())
        assert r1.output == "ok: Our budget is $50K."
        assert r2.output.startswith("found: venues facts")
        assert r3.output == "ok: What is our budget?"
        turns = await amem.turns("chat-1")
        assert [t.role for t in turns] == [
            "user",
            "assistant",
            "user",
            "assistant",
            "tool",
            "assistant",
            "user",
            "assistant",
        ]
        assert turns[4].text.count("detail") == 300  # the tool output is stored whole
        # The second run's first request already held the first run, read back from the store.
        first_of_run2 = to_openai_messages(seen[1])
        assert first_of_run2[0] == {"role": "user", "content": "Our budget is $50K."}
        assert first_of_run2[-1] == {"role": "user", "content": "look up venues"}
        # The third run got no duplicate of the history it was handed.
        texts = [m.get("content") for m in to_openai_messages(seen[-1])]
        assert texts.count("Our budget is $50K.") == 1 and texts.count("look up venues") == 1
        await amem.close()

    asyncio.run(go())


def test_budget_bounds_the_history_of_a_long_tool_heavy_conversation(tmp_path: Path) -> None:
    tok = get_tokenizer()

    async def go() -> None:
        amem = AsyncMemory(tmp_path / "b.db", namespace="pai")
        history = StratamemHistory(amem, session="long", budget=1500)
        seen: list[list[ModelMessage]] = []
        agent = _agent(_scripted(seen), history)
        await agent.run("The deploy key is KEY-7781.")
        for i in range(12):
            await agent.run(f"look up topic{i}")
        await agent.run("what is the deploy key")
        last = to_openai_messages(seen[-1])
        assert count_messages(last[:-1], tok) <= 1500  # the earlier runs, within budget
        assert "KEY-7781" in json.dumps(last)  # recalled from the first run
        assert (await amem.status()).turns == 2 + 12 * 4 + 1 + 1
        await amem.close()

    asyncio.run(go())


def test_test_model_calls_every_tool_and_the_history_stays_valid(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "t.db", namespace="pai")
    history = StratamemHistory(mem, session="t")
    agent = _agent(TestModel(), history)
    outputs = [agent.run_sync("go").output for _ in range(3)]
    assert "lookup" in outputs[0]
    # TestModel calls the tool once per conversation (it sees the earlier return in the history).
    assert [t.role for t in mem.turns("t")] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    mem.close()


def test_conversion_round_trips_chat_messages() -> None:
    chat = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "done"},
        {"role": "assistant", "content": "bye"},
    ]
    back = to_openai_messages(from_openai_messages(chat))
    assert back == chat
    assert isinstance(from_openai_messages(chat)[3], ModelRequest)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValidationError):
        StratamemHistory("db", session="s")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        StratamemHistory(AsyncMemory(":memory:"), session="bad name")
    with pytest.raises(ValidationError):
        StratamemHistory(AsyncMemory(":memory:"), budget=-5)
