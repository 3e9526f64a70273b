"""A Pydantic AI history processor backed by stratamem (extra ``stratamem[pydantic-ai]``).

>>> from pydantic_ai import Agent                                          # doctest: +SKIP
>>> from stratamem.integrations.pydantic_ai import StratamemHistory      # doctest: +SKIP
>>> history = StratamemHistory(AsyncMemory("agent.db"), session="user-42", budget=8000)  # doctest: +SKIP
>>> agent = Agent("openai:gpt-5", capabilities=[history.capability()])  # doctest: +SKIP

``history.capability()`` is a ``ProcessHistory`` capability (pydantic-ai 2.x's
form of ``history_processors``) that also stores each model response as it
arrives. Before every model request it

1. stores the run's new messages as turns of ``session`` (all of them, tool
   calls and returns included, as they appear: durable even if the run dies);
2. replaces the history from earlier runs by stratamem's budgeted context for
   the run's prompt (recent window, recalled turns, summaries, memory items),
   computed once at the start of the run and reused for its later requests, so
   the prompt prefix stays stable within a run;
3. keeps the current run's messages verbatim after it.

So an agent can be called with no ``message_history`` at all (the history
comes from stratamem) or with the whole history (it is replaced by its budgeted
form). When the session has no stored turns yet, the given history is stored first.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from ..aio import AsyncMemory
from ..errors import ValidationError
from ..memory import Memory
from ..records import check_name
from ._sessions import session_exists

__all__ = ["StratamemCapability", "StratamemHistory", "from_openai_messages", "to_openai_messages"]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "\n".join(c if isinstance(c, str) else str(getattr(c, "text", "") or "") for c in content).strip()
    return json.dumps(content, ensure_ascii=False, default=str)


def to_openai_messages(messages: Sequence[ModelMessage]) -> list[dict[str, Any]]:
    """Pydantic AI messages as OpenAI Chat Completions messages (what stratamem stores)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if isinstance(m, ModelRequest):
            for p in m.parts:
                if isinstance(p, SystemPromptPart):
                    out.append({"role": "system", "content": p.content})
                elif isinstance(p, UserPromptPart):
                    out.append({"role": "user", "content": _text(p.content)})
                elif isinstance(p, ToolReturnPart):
                    out.append({"role": "tool", "tool_call_id": p.tool_call_id, "content": p.model_response_str()})
                elif isinstance(p, RetryPromptPart):
                    if p.tool_name is not None:
                        out.append({"role": "tool", "tool_call_id": p.tool_call_id, "content": p.model_response()})
                    else:
                        out.append({"role": "user", "content": p.model_response()})
        elif isinstance(m, ModelResponse):
            text = "\n".join(p.content for p in m.parts if isinstance(p, TextPart))
            calls = [
                {
                    "id": p.tool_call_id,
                    "type": "function",
                    "function": {"name": p.tool_name, "arguments": p.args_as_json_str()},
                }
                for p in m.parts
                if isinstance(p, ToolCallPart)
            ]
            msg: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                msg["tool_calls"] = calls
            if text or calls:
                out.append(msg)
    return out


def from_openai_messages(messages: Sequence[Mapping[str, Any]]) -> list[ModelMessage]:
    """OpenAI Chat Completions messages (a rendered stratamem context) as Pydantic AI messages."""
    out: list[ModelMessage] = []
    names: dict[str, str] = {}
    for m in messages:
        role, content = m.get("role"), _text(m.get("content") or "")
        if role == "assistant":
            parts: list[Any] = [TextPart(content)] if content else []
            for call in m.get("tool_calls") or ():
                fn = call.get("function") or {}
                names[call.get("id")] = fn.get("name") or "tool"
                parts.append(ToolCallPart(fn.get("name") or "tool", fn.get("arguments") or "{}", call.get("id")))
            out.append(ModelResponse(parts=parts))
        elif role == "tool":
            cid: Any = m.get("tool_call_id")  # a JSON value, passed on as given
            out.append(ModelRequest(parts=[ToolReturnPart(names.get(cid, "tool"), content, cid)]))
        elif role == "system":
            out.append(ModelRequest(parts=[SystemPromptPart(content)]))
        else:
            out.append(ModelRequest(parts=[UserPromptPart(content)]))
    return out


class StratamemHistory:
    """A Pydantic AI history processor: store every message, send the budgeted context (see module docs).

    Args:
        memory: An ``AsyncMemory`` or ``Memory`` (wrapped). Not closed by the processor.
        session: The stratamem session holding this conversation.
        budget: Token budget of the earlier-runs context (default: the memory's configured one).
        policy: Context policy (default: the memory's configured one).

    Raises:
        ValidationError: Invalid memory, session or budget.
    """

    def __init__(
        self,
        memory: AsyncMemory | Memory,
        *,
        session: str = "default",
        budget: int | None = None,
        policy: str | None = None,
    ) -> None:
        if isinstance(memory, Memory):
            memory = AsyncMemory.wrap(memory)
        if not isinstance(memory, AsyncMemory):
            raise ValidationError(f"memory must be an AsyncMemory or Memory, got {type(memory).__name__}")
        if budget is not None and (not isinstance(budget, int) or isinstance(budget, bool) or budget < 1):
            raise ValidationError(f"budget must be a positive integer, got {budget!r}")
        self.memory = memory
        self.session = check_name(session, "session")
        self.budget = budget
        self.policy = policy
        self._runs: dict[str, tuple[list[ModelMessage], int]] = {}
        """Per run id: the earlier-runs prefix computed at its start, and how many of its messages are stored."""

    async def __call__(self, ctx: RunContext[Any], messages: list[ModelMessage]) -> list[ModelMessage]:
        """Store the run's new messages and return the budgeted history plus the run's messages."""
        run_id = getattr(ctx, "run_id", None)
        mine = [m for m in messages if run_id is not None and getattr(m, "run_id", None) == run_id]
        earlier = [m for m in messages if not (run_id is not None and getattr(m, "run_id", None) == run_id)]
        if not mine:  # no run id to tell the run apart: treat the last message as the run's
            earlier, mine = messages[:-1], messages[-1:]
        key = run_id or ""
        if key not in self._runs:
            prompt = next(
                (
                    _text(p.content)
                    for m in reversed(mine)
                    if isinstance(m, ModelRequest)
                    for p in m.parts
                    if isinstance(p, UserPromptPart)
                ),
                None,
            )
            prefix = await self.memory.run(lambda mem: self._prefix(mem, earlier, prompt))
            self._runs[key] = (prefix, 0)
            while len(self._runs) > 16:  # concurrent runs are fine; finished ones are forgotten
                del self._runs[next(iter(self._runs))]
        prefix, stored = self._runs[key]
        new = to_openai_messages(mine[stored:])
        if new:
            await self.memory.add(new, session=self.session, format="openai")
        self._runs[key] = (prefix, len(mine))
        return [*prefix, *mine]

    async def record_response(self, ctx: RunContext[Any], response: ModelResponse) -> None:
        """Store a model response of the live run (the last one of a run reaches no later request)."""
        key = getattr(ctx, "run_id", None) or ""
        if key not in self._runs:
            return
        new = to_openai_messages([response])
        if new:
            await self.memory.add(new, session=self.session, format="openai")
        prefix, stored = self._runs[key]
        self._runs[key] = (prefix, stored + 1)

    def capability(self) -> StratamemCapability:
        """This processor as a Pydantic AI capability that also stores every model response."""
        return StratamemCapability(self)

    def _prefix(self, mem: Memory, earlier: list[ModelMessage], prompt: str | None) -> list[ModelMessage]:
        """The earlier runs as stratamem's budgeted context (runs on the memory's worker)."""
        if not session_exists(mem, self.session) or not mem.turns(self.session, limit=1):
            if not earlier:
                return []
            mem.add(to_openai_messages(earlier), session=self.session, format="openai")
        ctx = mem.context(prompt, budget=self.budget, session=self.session, format="openai", policy=self.policy)
        return from_openai_messages(list(ctx.messages))


@dataclass
class StratamemCapability(ProcessHistory[Any]):
    """``ProcessHistory`` with a :class:`StratamemHistory` that also records each model response."""

    processor: StratamemHistory

    async def after_model_request(
        self, ctx: RunContext[Any], *, request_context: Any, response: ModelResponse
    ) -> ModelResponse:
        """Store the response as turns, then pass it on unchanged."""
        await self.processor.record_response(ctx, response)
        return response
