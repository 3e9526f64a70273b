"""The per-conversation bookkeeping of a wrapped client: the live list and its compactor.

:class:`LoopSession` (``wrapped.stratamem``) takes the messages the caller
sends, keeps what is new since the last call, runs
:meth:`~stratamem.agentloop.Compactor.prepare_messages` on its own live list
before a call and stores the reply and calibrates from the reported usage
after it. The wrapped resources that call it are :mod:`stratamem.agentloop.wrap`.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import ValidationError
from ..events import bind_loop
from ..records.usage import PromptUsage, cache_rules
from .breakpoints import Mark, caller_marks, expected_cache, place_breakpoints
from .compaction import Compactor
from .layout_send import layout_on, layout_request, report_layout_usage
from .sdk import _system_marks as _marks
from .sdk import _system_text as _plain_system
from .sdk import plain_message

__all__ = ["LoopSession"]

# The wrapper's logger: a new message list is logged as the wrapped conversation's event.
log = logging.getLogger("stratamem.agentloop.wrap")


class LoopSession:
    """The live list of one wrapped conversation and the compactor that manages it.

    Reachable as ``wrapped.stratamem``. :attr:`messages` is what is sent;
    :attr:`compactor` holds the state (``compactor.state``: checkpoint,
    compactions, failures, last usage).
    """

    def __init__(
        self, make_compactor: Callable[[], Compactor], provider: str, *, memory: Any = None, session: str = "default"
    ) -> None:
        self._make = make_compactor
        self.provider = provider
        self.compactor = make_compactor()
        self.layout = layout_on(memory)
        """Whether calls send ``memory.context(..., cache=True)``, not the live list (``context.cache_layout``)."""
        self._memory = memory if self.layout else None
        self._session = session
        self.sent_system: list[dict[str, Any]] | None = None
        """With the layout, Anthropic: the ``system`` blocks the last call sent (the caller's first)."""
        self._system_text: str | None = None
        self.messages: list[dict[str, Any]] = []
        """The live (pruned, compacted) list sent to the provider."""
        self._caller_len = 0
        self._caller_last: dict[str, Any] | None = None
        self._response_pending = False
        self._resumed = False
        self._marks: list[Mark] = []
        self._prev_sent: list[dict[str, Any]] | None = None
        self.last_cache: dict[str, Any] = {}
        """The last request's prompt-cache account: where our breakpoints went and the tokens the
        provider should read, write and bill in full (``expected``), beside the previous request."""

    def resume_messages(self) -> list[dict[str, Any]]:
        """After a restart: adopt the stored checkpoint + recent turns as the live list and return a copy.

        Send your next user message alone (``messages=[{"role": "user", ...}]``)
        or the returned list plus it; either way it is appended to the live list.
        """
        self.compactor = self._make()
        self.messages = self.compactor.resume_messages()
        snapshot = [copy.deepcopy(m) for m in self.messages]
        self._caller_len, self._caller_last = len(snapshot), (snapshot[-1] if snapshot else None)
        self._resumed = True
        return snapshot

    def _absorb(self, messages: Any) -> None:
        if isinstance(messages, str | bytes) or not isinstance(messages, Sequence | list):
            try:
                messages = list(messages)
            except TypeError:
                raise ValidationError("messages must be a list of messages", path="messages") from None
        # The caller's cache_control marks are kept aside: the live list holds none, the sent copy gets them back.
        msgs, self._marks = caller_marks([plain_message(m) for m in messages])
        if not msgs:
            raise ValidationError("messages must not be empty", path="messages")
        n = self._caller_len
        resumed, self._resumed = self._resumed, False
        if resumed and msgs and (len(msgs) < n or msgs[n - 1] != self._caller_last):
            # After resume_messages the caller may send only what is new.
            n = 0
        elif n and (len(msgs) < n or msgs[n - 1] != self._caller_last):
            # Not an extension of what this caller sent before: a new list. The stored
            # turns it repeats are adopted by the new compactor, not stored again.
            log.info(
                "wrapped conversation %s: the caller sent a new message list; starting over", self.compactor.session
            )
            self.compactor = self._make()
            self.messages = []
            n = 0
        new = msgs[n:]
        if self._response_pending and new and new[0].get("role") == "assistant":
            new = new[1:]  # the caller appended the response the wrapper already holds
        self._response_pending = False
        self.messages.extend(copy.deepcopy(new))
        self._caller_len, self._caller_last = len(msgs), msgs[-1]

    def before(
        self, messages: Any, system: str | None, *, system_marks: int = 0, model: str | None = None
    ) -> list[dict[str, Any]]:
        """Absorb the caller's messages, store, prune and compact; returns the list to send.

        ``system_marks``: ``cache_control`` marks on the caller's system blocks;
        ``model``: the model called (its minimum cacheable prefix).
        """
        self._absorb(messages)
        self.compactor.prepare_messages(self.messages, system=system)
        return self._outgoing(system, system_marks, model)

    def before_layout(self, messages: Any, system: Any, *, model: str | None = None) -> list[dict[str, Any]]:
        """:meth:`before`, then, with the cache layout, the context's messages to send instead of the live list.

        ``system`` is the caller's own (Anthropic: a string or blocks); the blocks
        to send in its place are left in :attr:`sent_system`.
        """
        text = _plain_system(system)
        sent = self.before(messages, text, system_marks=_marks(system), model=model)
        if not self.layout:
            return sent
        return self._layout_outgoing(system)

    async def abefore_layout(self, messages: Any, system: Any, *, model: str | None = None) -> list[dict[str, Any]]:
        """:meth:`before_layout` for async clients."""
        text = _plain_system(system)
        sent = await self.abefore(messages, text, system_marks=_marks(system), model=model)
        if not self.layout:
            return sent
        with bind_loop(asyncio.get_running_loop()):
            return await asyncio.to_thread(self._layout_outgoing, system)

    def _layout_outgoing(self, system: Any) -> list[dict[str, Any]]:
        config = self.compactor.config
        # The room the live list is kept within: the compaction threshold less the output reserve.
        budget = max(1, config.threshold - config.output_reserve)
        req = layout_request(
            self._memory,
            provider=self.provider,
            session=self._session,
            budget=budget,
            live=self.messages,
            system=system,
        )
        self.sent_system, self._system_text = req.system, req.system_text
        return req.messages

    def system_for(self, system: str | None) -> str | None:
        """The system text the last request was counted with (the layout's, when on)."""
        layout_system = self.layout and self.provider == "anthropic" and self.sent_system is not None
        return self._system_text if layout_system else system

    async def abefore(
        self, messages: Any, system: str | None, *, system_marks: int = 0, model: str | None = None
    ) -> list[dict[str, Any]]:
        """:meth:`before` for async clients (blocking work in a worker thread)."""
        self._absorb(messages)
        await self.compactor.aprepare_messages(self.messages, system=system)
        return self._outgoing(system, system_marks, model)

    def _outgoing(self, system: str | None, system_marks: int, model: str | None) -> list[dict[str, Any]]:
        """A copy of the live list with the caller's breakpoints and, when cache-aware (Anthropic), ours."""
        sent = [copy.deepcopy(m) for m in self.messages]
        anthropic = self.provider == "anthropic"
        comp = self.compactor
        factor = comp.calibration.factor(comp.agent_model)
        rules = cache_rules(self.provider, model or comp.agent_model)
        least = int(rules.min_tokens / factor) if factor > 0 else rules.min_tokens
        system_tokens = comp.tokenizer.count(system) if system else 0
        ours = anthropic and comp.config.cache_aware
        placed = place_breakpoints(
            sent,
            self._marks if anthropic else [],
            ours=ours,
            tokenizer=comp.tokenizer,
            min_tokens=least,
            system_tokens=system_tokens,
            system_marks=system_marks,
        )
        if comp.config.cache_aware:
            expected = expected_cache(
                self._prev_sent, sent, comp.tokenizer, min_tokens=least, marked=anthropic, system_tokens=system_tokens
            )
            self.last_cache = {"breakpoints": placed, "expected": expected}
            self._prev_sent = sent
        return sent

    def after(
        self,
        sent: list[dict[str, Any]],
        system: str | None,
        reply: dict[str, Any] | None,
        input_tokens: int | None,
        output_tokens: int | None,
        usage: PromptUsage | None = None,
    ) -> None:
        """Store the reply and calibrate from the reported usage.

        ``input_tokens`` is the whole request's (cached tokens included); ``usage``
        its split as reported, recorded in the state's ``last_usage``.
        """
        if reply is not None:
            self.messages.append(reply)
            self.compactor.sync(self.messages)
            self._response_pending = True
        if isinstance(input_tokens, int) and input_tokens > 0:
            system = self.system_for(system)
            self.compactor.observe_usage(sent, input_tokens, system=system, output_tokens=output_tokens, cache=usage)
        if self.layout:
            report_layout_usage(self._memory, self._session, usage)

    async def aafter(
        self,
        sent: list[dict[str, Any]],
        system: str | None,
        reply: dict[str, Any] | None,
        input_tokens: int | None,
        output_tokens: int | None,
        usage: PromptUsage | None = None,
    ) -> None:
        """:meth:`after` for async clients."""
        with bind_loop(asyncio.get_running_loop()):
            await asyncio.to_thread(self.after, sent, system, reply, input_tokens, output_tokens, usage)
