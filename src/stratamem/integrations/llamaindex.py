"""A LlamaIndex memory block backed by stratamem (extra ``stratamem[llamaindex]``).

>>> from llama_index.core.memory import Memory                              # doctest: +SKIP
>>> from stratamem.integrations.llamaindex import StratamemMemoryBlock    # doctest: +SKIP
>>> block = StratamemMemoryBlock(memory=AsyncMemory("agent.db"), session="user-42")  # doctest: +SKIP
>>> memory = Memory.from_defaults(session_id="user-42", memory_blocks=[block])  # doctest: +SKIP

LlamaIndex's ``Memory`` keeps a short-term FIFO of messages and, when it
overflows, hands the oldest ones to its memory blocks. This block stores those
messages as stratamem turns, durably and in full, and when LlamaIndex pulls the
blocks before a model call it returns stratamem's budgeted context for the
latest user message: the older turns recalled for it (hybrid BM25 + vectors),
pyramid summaries and memory items, as text LlamaIndex inserts into the
system message. ``atruncate`` shrinks it to a smaller budget instead of dropping it.
"""

from __future__ import annotations

from typing import Any

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.memory.memory import BaseMemoryBlock
from pydantic import ConfigDict, Field, PrivateAttr

from ..aio import AsyncMemory
from ..errors import ValidationError
from ..memory import Memory
from ..records import check_name
from ._sessions import session_exists

__all__ = ["StratamemMemoryBlock"]

_ROLES = {
    MessageRole.USER: "user",
    MessageRole.ASSISTANT: "assistant",
    MessageRole.SYSTEM: "system",
    MessageRole.DEVELOPER: "system",
}


def _to_turn_dict(message: ChatMessage) -> dict[str, Any] | None:
    """One LlamaIndex message as a plain turn; tool traffic becomes labelled assistant text."""
    text = message.content or ""
    role = _ROLES.get(message.role)
    if role is None:  # tool / function / chatbot: kept as text, since their call ids may be gone
        name = message.additional_kwargs.get("name") or message.role.value
        role, text = "assistant", f"[{name}] {text}"
    if not text.strip():
        return None
    return {"role": role, "content": text}


class StratamemMemoryBlock(BaseMemoryBlock[str]):
    """Long-term memory for LlamaIndex ``Memory``: flushed messages in, budgeted context out.

    Args:
        memory: An ``AsyncMemory`` or ``Memory`` (wrapped). Not closed by the block.
        session: The stratamem session the flushed messages are stored in.
        budget: Token budget of the returned context (default 1,500).
        name: Block name in LlamaIndex's memory template.
        priority: LlamaIndex truncation priority (0 = never truncate).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    name: str = Field(default="stratamem", description="The name of the memory block.")
    session: str = Field(default="default", description="stratamem session of the flushed messages.")
    budget: int = Field(default=1500, gt=0, description="Token budget of the recalled context.")
    _amem: AsyncMemory = PrivateAttr()

    def __init__(self, memory: AsyncMemory | Memory, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if isinstance(memory, Memory):
            memory = AsyncMemory.wrap(memory)
        if not isinstance(memory, AsyncMemory):
            raise ValidationError(f"memory must be an AsyncMemory or Memory, got {type(memory).__name__}")
        check_name(self.session, "session")
        self._amem = memory

    @property
    def memory(self) -> AsyncMemory:
        """The ``AsyncMemory`` the block reads and writes."""
        return self._amem

    async def _aput(self, messages: list[ChatMessage]) -> None:
        """Store the messages LlamaIndex flushed from its short-term memory, in one transaction."""
        turns = [t for t in map(_to_turn_dict, messages) if t is not None]
        if turns:
            await self._amem.add(turns, session=self.session, format="openai")

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        """The budgeted context for the latest user message (empty before anything was flushed)."""
        return await self._context(messages, self.budget)

    async def _context(self, messages: list[ChatMessage] | None, budget: int) -> str:
        query = next((m.content for m in reversed(messages or []) if m.role == MessageRole.USER and m.content), None)

        def build(mem: Memory) -> str:
            if not session_exists(mem, self.session):
                return ""
            # The short-term FIFO already holds the newest messages: only recall and summaries add anything,
            # so the window is skipped (policy "recall").
            return mem.context(query, budget=budget, session=self.session, format="text", policy="recall").text

        return await self._amem.run(build)

    async def atruncate(self, content: str, tokens_to_truncate: int) -> str | None:
        """The context re-assembled within a smaller budget (``None`` when nothing fits)."""
        have = self._amem.tokenizer.count(content)
        budget = have - int(tokens_to_truncate)
        if budget < 32:
            return None
        return await self._context(self._last_messages, budget) or None

    _last_messages: list[ChatMessage] | None = PrivateAttr(default=None)

    async def aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        """Pull the block (remembers the messages, so :meth:`atruncate` recalls for the same question)."""
        self._last_messages = list(messages or [])
        return await self._aget(messages, **block_kwargs)
