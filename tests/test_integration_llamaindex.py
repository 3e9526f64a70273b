"""StratamemMemoryBlock inside LlamaIndex's Memory, driven by a chat engine over MockLLM (no API key)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.base.llms.types import ChatMessage, CompletionResponse, MessageRole
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms import MockLLM
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.memory import Memory as LlamaMemory

from stratamem import AsyncMemory, Memory, ValidationError
from stratamem.integrations.llamaindex import StratamemMemoryBlock

PROMPTS: list[str] = []


class RecordingLLM(MockLLM):
    """LlamaIndex's MockLLM that records every prompt it is sent and answers briefly."""

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        PROMPTS.append(prompt)
        return CompletionResponse(text=f"noted ({len(PROMPTS)})")


def _chat(memory: LlamaMemory) -> str:
    PROMPTS.clear()
    engine = SimpleChatEngine.from_defaults(llm=RecordingLLM(), memory=memory)
    engine.chat("Remember: the deploy key is KEY-7781.")
    for i in range(12):
        engine.chat(f"Filler message {i} about the weather, lunch and the weekend plans " * 3)
    engine.chat("What is the deploy key?")
    return PROMPTS[-1]


def _li_memory(session: str, blocks: list[Any]) -> LlamaMemory:
    # A small short-term window, so older messages are flushed to the blocks.
    return LlamaMemory.from_defaults(
        session_id=session, token_limit=400, chat_history_token_ratio=0.5, token_flush_size=100, memory_blocks=blocks
    )


def test_flushed_messages_are_stored_and_recalled_into_the_prompt(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "l.db", namespace="li")
    block = StratamemMemoryBlock(memory=mem, session="s1", budget=300)
    with_block = _chat(_li_memory("s1", [block]))
    without = _chat(_li_memory("s2", []))  # LlamaIndex's default memory, same window
    assert "KEY-7781" in with_block  # recalled by stratamem after the window dropped it
    assert "KEY-7781" not in without
    stored = mem.turns("s1")
    assert stored[0].text == "Remember: the deploy key is KEY-7781."
    assert {t.role for t in stored} == {"user", "assistant"}
    assert len(stored) >= 10  # the flushed messages, durably
    mem.close()


def test_block_returns_nothing_before_a_flush_and_truncates_to_a_smaller_budget(tmp_path: Path) -> None:
    async def go() -> None:
        amem = AsyncMemory(tmp_path / "b.db", namespace="li")
        block = StratamemMemoryBlock(memory=amem, session="s", budget=2000)
        question = [ChatMessage(role=MessageRole.USER, content="where is the offsite?")]
        assert await block.aget(question) == ""
        await block.aput(
            [
                ChatMessage(
                    role=MessageRole.USER, content=f"Note {i}: the offsite is in Lisbon, hotel {i} " + "filler " * 40
                )
                for i in range(20)
            ]
            + [
                ChatMessage(
                    role=MessageRole.TOOL, content="search returned 3 hotels", additional_kwargs={"name": "search"}
                )
            ]
        )
        full = await block.aget(question)
        assert "Lisbon" in full and amem.tokenizer.count(full) <= 2000
        smaller = await block.atruncate(full, amem.tokenizer.count(full) - 300)
        assert smaller is not None and "Lisbon" in smaller and amem.tokenizer.count(smaller) <= 300
        assert await block.atruncate(full, amem.tokenizer.count(full)) is None
        assert (await amem.turns("s"))[-1].text == "[search] search returned 3 hotels"
        await amem.close()

    asyncio.run(go())


def test_invalid_settings_are_refused() -> None:
    with pytest.raises(ValidationError):
        StratamemMemoryBlock(memory="db")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        StratamemMemoryBlock(memory=AsyncMemory(":memory:"), session="no spaces allowed")
    with pytest.raises(ValueError):  # pydantic's own check of the field
        StratamemMemoryBlock(memory=AsyncMemory(":memory:"), budget=0)
