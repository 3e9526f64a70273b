"""``stratamem.wrap(client)``: the agent loop's bookkeeping around an official provider client.

Without it, every call of an agent loop needs ``prepare_messages`` before and
``observe_usage`` after. :func:`wrap` returns a stand-in for an OpenAI
(``openai.OpenAI`` / ``openai.AsyncOpenAI``) or Anthropic
(``anthropic.Anthropic`` / ``anthropic.AsyncAnthropic``) client whose
``chat.completions.create`` / ``messages.create`` / ``messages.stream`` do, per call:

1. take the messages the caller sent that are new since the last call (the
   caller keeps its full, uncompacted list; it is never changed);
2. store them (with a :class:`~stratamem.Memory`), prune old tool output and
   compact when needed — the :class:`~stratamem.agentloop.Compactor` rules,
   minimum-gain rule included — on the wrapper's own live list;
3. send the live list instead, with every other argument unchanged (when the
   memory's ``context.cache_layout`` is on: the caller's system prompt and
   ``memory.context(..., cache=True)`` instead, :mod:`stratamem.agentloop.layout_send`);
4. store the response as a turn and calibrate token counts from the usage the
   provider reported.

The provider's own response object is returned. A stream (``stream=True``, or
Anthropic's ``messages.stream(...)`` context manager) comes back as a thin proxy
that yields the provider's own events and does steps 4 when it is consumed to
the end (a stream abandoned half-way stores no response). For OpenAI streams
the wrapper asks for the usage chunk (``stream_options.include_usage``) and,
unless the caller asked for it too, does not show it.

Everything else (``models``, ``embeddings``, ``with_options`` ...) passes through
to the real client. One wrapped client carries one conversation at a time.

This module owns the wrapped resources (``chat.completions``, ``messages``,
the stream proxies) and :func:`wrap`; the per-conversation bookkeeping is
:mod:`stratamem.agentloop.loop_session`, SDK objects as plain dicts
:mod:`stratamem.agentloop.sdk`, the summarizer over the caller's own client
:mod:`stratamem.agentloop.client_chat`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import ValidationError
from .client_chat import ClientChat
from .compaction import Compactor
from .loop_session import LoopSession
from .sdk import _anthropic_reply, _AnthropicEvents, _openai_reply, _OpenAIChunks, _system_text

__all__ = ["WrappedClient", "wrap"]


class _StreamProxy:
    """Yields the provider's stream unchanged (minus hidden chunks) and records the reply at its end."""

    def __init__(self, stream: Any, acc: Any, done: Callable[[Any], Any], hide: Callable[[Any], bool]) -> None:
        self._stream = stream
        self._acc = acc
        self._done = done
        self._hide = hide
        self._finished = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    def __iter__(self) -> Any:
        for item in self._stream:
            self._acc.feed(item)
            if not self._hide(item):
                yield item
        if not self._finished:
            self._finished = True
            self._done(self._acc)

    def __enter__(self) -> _StreamProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stream.close()

    async def __aiter__(self) -> Any:
        async for item in self._stream:
            self._acc.feed(item)
            if not self._hide(item):
                yield item
        if not self._finished:
            self._finished = True
            await self._done(self._acc)

    async def __aenter__(self) -> _StreamProxy:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._stream.close()


# --- the wrapped resources ------------------------------------------------------------------


class _Completions:
    """``chat.completions`` of a wrapped OpenAI client."""

    def __init__(self, raw: Any, loop: LoopSession, is_async: bool) -> None:
        self._raw = raw
        self._loop = loop
        self._async = is_async

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)

    def create(self, *, messages: Any, **kwargs: Any) -> Any:
        """``chat.completions.create`` with the agent-loop bookkeeping (see :mod:`stratamem.agentloop.wrap`)."""
        if self._async:
            return self._acreate(messages, kwargs)
        sent = self._loop.before_layout(messages, None, model=kwargs.get("model"))
        stream, hide = self._stream_args(kwargs)
        resp = self._raw.create(messages=sent, **kwargs)
        if stream:
            return _StreamProxy(
                resp,
                _OpenAIChunks(),
                lambda acc: self._loop.after(sent, None, acc.reply(), acc.n_in, acc.n_out, acc.usage),
                hide,
            )
        self._loop.after(sent, None, *_openai_reply(resp))
        return resp

    async def _acreate(self, messages: Any, kwargs: dict[str, Any]) -> Any:
        sent = await self._loop.abefore_layout(messages, None, model=kwargs.get("model"))
        stream, hide = self._stream_args(kwargs)
        resp = await self._raw.create(messages=sent, **kwargs)
        if stream:
            return _StreamProxy(
                resp,
                _OpenAIChunks(),
                lambda acc: self._loop.aafter(sent, None, acc.reply(), acc.n_in, acc.n_out, acc.usage),
                hide,
            )
        await self._loop.aafter(sent, None, *_openai_reply(resp))
        return resp

    @staticmethod
    def _stream_args(kwargs: dict[str, Any]) -> tuple[bool, Callable[[Any], bool]]:
        if not kwargs.get("stream"):
            return False, lambda _c: False
        options = dict(kwargs.get("stream_options") or {})
        if options.get("include_usage"):
            return True, lambda _c: False
        kwargs["stream_options"] = {**options, "include_usage": True}
        # The usage-only chunk (no choices) was not asked for: keep it from the caller.
        return True, lambda c: not getattr(c, "choices", None) and getattr(c, "usage", None) is not None


class _Chat:
    def __init__(self, raw: Any, loop: LoopSession, is_async: bool) -> None:
        self._raw = raw
        self.completions = _Completions(raw.completions, loop, is_async)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)


class _StreamManager:
    """Wraps Anthropic's ``MessageStreamManager`` (sync or async): records the final message on exit."""

    def __init__(self, manager: Any, loop: LoopSession, sent: Any, system: str | None) -> None:
        self._manager = manager
        self._loop = loop
        self._sent = sent
        self._system = system
        self._stream: Any = None

    def __enter__(self) -> Any:
        self._stream = self._manager.__enter__()
        return self._stream

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        try:
            if exc_type is None:
                self._loop.after(self._sent, self._system, *_anthropic_reply(self._stream.get_final_message()))
        finally:
            out = self._manager.__exit__(exc_type, exc, tb)
        return out

    async def __aenter__(self) -> Any:
        self._stream = await self._manager.__aenter__()
        return self._stream

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        try:
            if exc_type is None:
                final = await self._stream.get_final_message()
                await self._loop.aafter(self._sent, self._system, *_anthropic_reply(final))
        finally:
            out = await self._manager.__aexit__(exc_type, exc, tb)
        return out


class _Messages:
    """``messages`` of a wrapped Anthropic client."""

    def __init__(self, raw: Any, loop: LoopSession, is_async: bool) -> None:
        self._raw = raw
        self._loop = loop
        self._async = is_async

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)

    def create(self, *, messages: Any, **kwargs: Any) -> Any:
        """``messages.create`` with the agent-loop bookkeeping (see :mod:`stratamem.agentloop.wrap`)."""
        if self._async:
            return self._acreate(messages, kwargs)
        system = _system_text(kwargs.get("system"))
        sent = self._loop.before_layout(messages, kwargs.get("system"), model=kwargs.get("model"))
        kwargs = self._with_system(kwargs)
        resp = self._raw.create(messages=sent, **kwargs)
        if kwargs.get("stream"):
            return _StreamProxy(
                resp,
                _AnthropicEvents(),
                lambda acc: self._loop.after(sent, system, acc.reply(), acc.n_in, acc.n_out, acc.usage),
                lambda _e: False,
            )
        self._loop.after(sent, system, *_anthropic_reply(resp))
        return resp

    async def _acreate(self, messages: Any, kwargs: dict[str, Any]) -> Any:
        system = _system_text(kwargs.get("system"))
        sent = await self._loop.abefore_layout(messages, kwargs.get("system"), model=kwargs.get("model"))
        kwargs = self._with_system(kwargs)
        resp = await self._raw.create(messages=sent, **kwargs)
        if kwargs.get("stream"):
            return _StreamProxy(
                resp,
                _AnthropicEvents(),
                lambda acc: self._loop.aafter(sent, system, acc.reply(), acc.n_in, acc.n_out, acc.usage),
                lambda _e: False,
            )
        await self._loop.aafter(sent, system, *_anthropic_reply(resp))
        return resp

    def _with_system(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        """The call's arguments with the cache layout's ``system`` blocks (the caller's first), when on."""
        if self._loop.layout and self._loop.sent_system is not None:
            return {**kwargs, "system": self._loop.sent_system}
        return kwargs

    def stream(self, *, messages: Any, **kwargs: Any) -> Any:
        """``messages.stream(...)``: the provider's stream manager; the final message is recorded on exit.

        For an async client, prepare work runs when the ``async with`` is entered.
        """
        system = _system_text(kwargs.get("system"))
        if self._async:
            return _AsyncStreamEntry(self, messages, kwargs, system)
        sent = self._loop.before_layout(messages, kwargs.get("system"), model=kwargs.get("model"))
        return _StreamManager(self._raw.stream(messages=sent, **self._with_system(kwargs)), self._loop, sent, system)


class _AsyncStreamEntry:
    """``async with wrapped.messages.stream(...)``: prepares (async), then enters the provider's manager."""

    def __init__(self, owner: _Messages, messages: Any, kwargs: dict[str, Any], system: str | None) -> None:
        self._owner, self._messages, self._kwargs, self._system = owner, messages, kwargs, system
        self._inner: _StreamManager | None = None

    async def __aenter__(self) -> Any:
        loop = self._owner._loop
        sent = await loop.abefore_layout(self._messages, self._kwargs.get("system"), model=self._kwargs.get("model"))
        kwargs = self._owner._with_system(self._kwargs)
        self._inner = _StreamManager(self._owner._raw.stream(messages=sent, **kwargs), loop, sent, self._system)
        return await self._inner.__aenter__()

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> Any:
        assert self._inner is not None
        return await self._inner.__aexit__(exc_type, exc, tb)


class WrappedClient:
    """A provider client with the agent-loop bookkeeping; everything else passes through.

    Made by :func:`wrap`. ``.stratamem`` is the :class:`LoopSession` (live list,
    compactor, state); ``.unwrapped`` the original client.
    """

    def __init__(self, client: Any, provider: str, is_async: bool, session: LoopSession) -> None:
        self.unwrapped = client
        self.stratamem = session
        self._provider = provider
        if provider == "openai":
            self.chat = _Chat(client.chat, session, is_async)
        else:
            self.messages = _Messages(client.messages, session, is_async)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.unwrapped, name)

    def __repr__(self) -> str:
        return f"stratamem.wrap({self.unwrapped!r})"


# --- the entry point ----------------------------------------------------------------------------


def _kind(client: Any) -> tuple[str, bool]:
    """``(provider, is_async)`` of an official client; ``ValidationError`` for anything else."""
    try:
        import openai
    except ImportError:  # pragma: no cover - the llm extra is not installed
        openai = None  # type: ignore[assignment]
    try:
        import anthropic
    except ImportError:  # pragma: no cover
        anthropic = None  # type: ignore[assignment]
    if openai is not None and isinstance(client, openai.OpenAI | openai.AsyncOpenAI):
        return "openai", isinstance(client, openai.AsyncOpenAI)
    if anthropic is not None and isinstance(client, anthropic.Anthropic | anthropic.AsyncAnthropic):
        return "anthropic", isinstance(client, anthropic.AsyncAnthropic)
    raise ValidationError(
        f"stratamem.wrap takes an openai.OpenAI/AsyncOpenAI or anthropic.Anthropic/AsyncAnthropic "
        f"client, got {type(client).__name__}",
        path="client",
    )


def wrap(
    client: Any,
    *,
    memory: Any = None,
    session: str = "default",
    summarizer: Any = None,
    summary_model: str | None = None,
    agent_model: str = "default",
    **compactor_options: Any,
) -> WrappedClient:
    """Wrap an official OpenAI or Anthropic client so every call stores, prunes, compacts and calibrates.

    Args:
        client: ``openai.OpenAI``, ``openai.AsyncOpenAI``, ``anthropic.Anthropic`` or
            ``anthropic.AsyncAnthropic``.
        memory: A :class:`~stratamem.Memory`: every message and response is stored
            as a turn of ``session``, and the conversation state persists.
        session: Conversation (session) name.
        summarizer: A :class:`~stratamem.llm.ChatModel` that writes checkpoints.
        summary_model: Instead of ``summarizer``: a model name to write checkpoints
            through ``client`` itself (:class:`ClientChat`). With neither, compaction
            truncates (status ``truncated``) and says so.
        agent_model: Calibration key (the model your calls use).
        **compactor_options: Passed to :class:`~stratamem.agentloop.Compactor`
            (``config``, ``pruning``, ``events``, ``namespace`` …).

    Returns:
        The wrapped client (``.stratamem`` is its :class:`LoopSession`).

    Raises:
        ValidationError: Not an official client, or both ``summarizer`` and ``summary_model``.
        ConfigError: Invalid compaction settings.
    """
    provider, is_async = _kind(client)
    if summarizer is not None and summary_model is not None:
        raise ValidationError("give summarizer or summary_model, not both", path="summary_model")
    model = (
        summarizer
        if summarizer is not None
        else (ClientChat(client, summary_model, provider) if summary_model else None)
    )

    def make() -> Compactor:
        return Compactor(
            model, provider=provider, memory=memory, session=session, agent_model=agent_model, **compactor_options
        )

    return WrappedClient(client, provider, is_async, LoopSession(make, provider, memory=memory, session=session))
