"""An OpenAI Agents SDK ``Session`` backed by stratamem (extra ``stratamem[openai-agents]``).

>>> from agents import Agent, Runner                                # doctest: +SKIP
>>> from stratamem import AsyncMemory                               # doctest: +SKIP
>>> from stratamem.integrations.openai_agents import StratamemSession  # doctest: +SKIP
>>> session = StratamemSession("user-42", AsyncMemory("agent.db"))  # doctest: +SKIP
>>> await Runner.run(agent, "hi", session=session)                  # doctest: +SKIP

Every item is stored as one turn (the item itself kept losslessly in the turn's
metadata), so the whole conversation is recallable by ``Memory.context`` and the
CLI. ``mode="raw"`` returns the items exactly as added (the SDK's own
behaviour); ``mode="context"`` returns the budgeted context instead: the recent
window, older turns recalled for the latest user message, pyramid summaries and
memory items, with old tool output pruned, within ``budget`` tokens.

``clear_session`` starts a new thread: the SDK sees an empty session, and the
earlier turns stay in stratamem as history (they are never silently dropped;
erase them with ``Memory.forget`` once it is available). ``pop_item`` deletes
the newest turn through :func:`stratamem.integrations._forget.forget_session_tail`.

Tenant routing: pass ``namespace_for`` (a function of the SDK's
``RunContextWrapper``) and each run's items go to the namespace it returns.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from agents.memory import SessionSettings

from ..agentloop import prune_tool_results
from ..aio import AsyncMemory
from ..errors import StratamemError, ValidationError
from ..memory import Memory
from ..records import check_name
from ._forget import forget_session_tail
from ._responses import item_to_turn, messages_to_items, turn_to_item
from ._sessions import session_exists

__all__ = ["MODES", "StratamemSession"]

MODES = ("raw", "context")
"""``raw``: the items as added. ``context``: the budgeted, pruned, recalled context."""

_GEN = "@gen"


class StratamemSession:
    """The Agents SDK ``Session`` protocol over an :class:`~stratamem.AsyncMemory`.

    Args:
        session_id: The SDK session id (a stratamem session name: letters, digits, ``_.:@+=-``).
        memory: An ``AsyncMemory`` (or a ``Memory``, wrapped in one). Not closed by the session.
        mode: ``raw`` or ``context`` (see :data:`MODES`).
        budget: Token budget of the context in ``context`` mode (default: the memory's configured one).
        policy: Context policy in ``context`` mode (default: the memory's configured one).
        namespace_for: Optional ``wrapper -> namespace`` routing for multi-tenant runs.
        session_settings: The SDK's ``SessionSettings`` (its ``limit`` applies to ``get_items``).

    Raises:
        ValidationError: Invalid session id, mode, budget or memory.
    """

    def __init__(
        self,
        session_id: str,
        memory: AsyncMemory | Memory,
        *,
        mode: str = "raw",
        budget: int | None = None,
        policy: str | None = None,
        namespace_for: Callable[[Any], str] | None = None,
        session_settings: SessionSettings | None = None,
    ) -> None:
        self.session_id = check_name(session_id, "session")
        if isinstance(memory, Memory):
            memory = AsyncMemory.wrap(memory)
        if not isinstance(memory, AsyncMemory):
            raise ValidationError(f"memory must be an AsyncMemory or Memory, got {type(memory).__name__}")
        if mode not in MODES:
            raise ValidationError(f"unknown mode {mode!r} (expected one of {', '.join(MODES)})")
        if budget is not None and (not isinstance(budget, int) or isinstance(budget, bool) or budget < 1):
            raise ValidationError(f"budget must be a positive integer, got {budget!r}")
        self.memory = memory
        self.mode = mode
        self.budget = budget
        self.policy = policy
        self.namespace_for = namespace_for
        self.session_settings = session_settings
        self._tenants: dict[str, AsyncMemory] = {}
        self._current: dict[str, str] = {}

    # --- routing ----------------------------------------------------------------------

    def _memory(self, wrapper: Any) -> AsyncMemory:
        if self.namespace_for is None or wrapper is None:
            return self.memory
        ns = check_name(self.namespace_for(wrapper), "namespace")
        if ns == self.memory.namespace:
            return self.memory
        if ns not in self._tenants:
            self._tenants[ns] = self.memory.for_namespace(ns)
        return self._tenants[ns]

    def _thread(self, mem: Memory) -> str:
        """The stratamem session holding the live thread: ``session_id`` or its latest ``@genN`` after clears."""
        ns = mem.namespace
        if ns not in self._current:
            prefix = self.session_id + _GEN
            gens = [
                int(s.name[len(prefix) :])
                for s in mem.store.sessions(ns)
                if s.name.startswith(prefix) and s.name[len(prefix) :].isdigit()
            ]
            self._current[ns] = f"{prefix}{max(gens)}" if gens else self.session_id
        return self._current[ns]

    # --- the Session protocol ---------------------------------------------------------

    async def get_items(self, limit: int | None = None, *, wrapper: Any = None) -> list[dict[str, Any]]:
        """The session's history, oldest first: the items as added (``raw``) or the budgeted context.

        Args:
            limit: At most this many of the newest items (default: ``session_settings.limit``, else all).
        """
        if limit is None and self.session_settings is not None:
            limit = self.session_settings.limit
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool)):
            raise ValidationError(f"limit must be an integer, got {limit!r}")
        if limit is not None and limit <= 0:
            return []
        amem = self._memory(wrapper)
        if self.mode == "raw":
            return await amem.run(lambda m: self._raw(m, limit))
        return await amem.run(lambda m: self._context(m, limit))

    def _raw(self, mem: Memory, limit: int | None) -> list[dict[str, Any]]:
        thread = self._thread(mem)
        if not session_exists(mem, thread):
            return []
        rows = mem.turns(thread, limit=limit, newest_first=True)
        return [turn_to_item(st) for st in reversed(rows)]

    def _context(self, mem: Memory, limit: int | None) -> list[dict[str, Any]]:
        thread = self._thread(mem)
        recent = self._raw(mem, 50)
        if not recent:
            return []
        # Recall is driven by the latest user message (the SDK adds the new input after reading).
        query = next(
            (
                str(i.get("content"))
                for i in reversed(recent)
                if i.get("role") == "user" and isinstance(i.get("content"), str)
            ),
            None,
        )
        ctx = mem.context(query, budget=self.budget, session=thread, format="openai", policy=self.policy)
        messages = [dict(m) for m in copy.deepcopy(ctx.messages)]
        prune_tool_results(messages, mem.config.pruning, tokenizer=mem.tokenizer)
        items = messages_to_items(messages)
        return items[-limit:] if limit is not None else items

    async def add_items(self, items: list[Any], *, wrapper: Any = None) -> None:
        """Store the items as turns of the live thread, all in one transaction.

        Raises:
            InvalidTurnError: An item is malformed, or a tool output answers no earlier call; nothing is stored.
        """
        if not isinstance(items, list):
            raise ValidationError(f"items must be a list, got {type(items).__name__}")
        if not items:
            return
        turns = [item_to_turn(_as_dict(item), i) for i, item in enumerate(items)]
        amem = self._memory(wrapper)
        await amem.run(lambda m: m.add(turns, session=self._thread(m)))

    async def pop_item(self, *, wrapper: Any = None) -> dict[str, Any] | None:
        """Remove and return the newest item (``None`` if the session is empty)."""

        def pop(m: Memory) -> dict[str, Any] | None:
            thread = self._thread(m)
            if not session_exists(m, thread) or not m.turns(thread, limit=1):
                return None
            return turn_to_item(forget_session_tail(m, thread, 1)[0])

        return await self._memory(wrapper).run(pop)

    async def clear_session(self, *, wrapper: Any = None) -> None:
        """Start a new, empty thread for this session id (earlier turns stay as history)."""

        def clear(m: Memory) -> None:
            thread = self._thread(m)
            if not session_exists(m, thread) or not m.turns(thread, limit=1):
                return
            n = int(thread[len(self.session_id + _GEN) :]) + 1 if _GEN in thread[len(self.session_id) :] else 1
            name = check_name(f"{self.session_id}{_GEN}{n}", "session")
            m.store.ensure_session(m.namespace, name)
            self._current[m.namespace] = name

        await self._memory(wrapper).run(clear)


def _as_dict(item: Any) -> Mapping[str, Any]:
    """An SDK item as a plain dict (the SDK passes dicts; pydantic models are dumped)."""
    if isinstance(item, Mapping):
        return item
    dump = getattr(item, "model_dump", None)
    if callable(dump):
        return dump(exclude_unset=True)
    raise StratamemError(f"cannot store an item of type {type(item).__name__}")
