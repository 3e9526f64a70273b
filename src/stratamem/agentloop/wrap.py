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
3. send the live list instead, with every other argument unchanged;
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
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import ModelError, ValidationError
from ..events import bind_loop, run_to_completion
from ..llm import Completion, check_chat_input
from .compaction import Compactor

__all__ = ["ClientChat", "LoopSession", "WrappedClient", "wrap"]

log = logging.getLogger("stratamem.agentloop.wrap")

_BLOCK_KEYS = {"text": ("type", "text"), "tool_use": ("type", "id", "name", "input"),
               "thinking": ("type", "thinking", "signature"), "redacted_thinking": ("type", "data"),
               "tool_result": ("type", "tool_use_id", "content", "is_error"), "image": ("type", "source"),
               "image_url": ("type", "image_url")}
_MESSAGE_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name")


def _dump(obj: Any) -> Any:
    """A provider SDK object (pydantic) as plain JSON data; plain data unchanged."""
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_none=True)
    return obj


def _plain_block(block: Any) -> Any:
    block = _dump(block)
    if not isinstance(block, Mapping):
        return block
    keys = _BLOCK_KEYS.get(str(block.get("type")))
    if keys is None:
        return dict(block)
    out = {k: block[k] for k in keys if k in block}
    if out.get("type") == "tool_result" and isinstance(out.get("content"), list):
        out["content"] = [_plain_block(b) for b in out["content"]]
    return out


def plain_message(message: Any) -> dict[str, Any]:
    """A message the caller sent (a dict or an SDK object) as a plain provider dict.

    SDK-only fields (``refusal``, ``annotations``, ``citations`` …) are dropped:
    they are not part of the conversation and the store refuses unknown keys.

    Raises:
        ValidationError: Not a message object.
    """
    m = _dump(message)
    if not isinstance(m, Mapping) or "role" not in m:
        raise ValidationError("each message must be an object with a role", path="messages")
    out = {k: m[k] for k in _MESSAGE_KEYS if k in m and m[k] is not None}
    if isinstance(out.get("content"), list):
        out["content"] = [_plain_block(b) for b in out["content"]]
    if out.get("tool_calls"):
        out["tool_calls"] = [{"id": c.get("id"), "type": c.get("type", "function"),
                              "function": {"name": (c.get("function") or {}).get("name"),
                                           "arguments": (c.get("function") or {}).get("arguments") or "{}"}}
                             for c in (_dump(c) for c in out["tool_calls"])]
    if out.get("role") == "assistant" and "content" not in out and not out.get("tool_calls"):
        out["content"] = ""
    return out


def _system_text(system: Any) -> str | None:
    """Anthropic ``system`` (a string or text blocks) as one string, for counting."""
    if system is None or isinstance(system, str):
        return system or None
    parts = [_dump(b) for b in system]
    return "\n".join(str(p.get("text", "")) for p in parts if isinstance(p, Mapping)) or None


# --- the per-conversation bookkeeping -------------------------------------------------------

class LoopSession:
    """The live list of one wrapped conversation and the compactor that manages it.

    Reachable as ``wrapped.stratamem``. :attr:`messages` is what is sent;
    :attr:`compactor` holds the state (``compactor.state``: checkpoint,
    compactions, failures, last usage).
    """

    def __init__(self, make_compactor: Callable[[], Compactor], provider: str) -> None:
        self._make = make_compactor
        self.provider = provider
        self.compactor = make_compactor()
        self.messages: list[dict[str, Any]] = []
        """The live (pruned, compacted) list sent to the provider."""
        self._caller_len = 0
        self._caller_last: dict[str, Any] | None = None
        self._response_pending = False
        self._resumed = False

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
        msgs = [plain_message(m) for m in messages]
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
            log.info("wrapped conversation %s: the caller sent a new message list; starting over",
                     self.compactor.session)
            self.compactor = self._make()
            self.messages = []
            n = 0
        new = msgs[n:]
        if self._response_pending and new and new[0].get("role") == "assistant":
            new = new[1:]  # the caller appended the response the wrapper already holds
        self._response_pending = False
        self.messages.extend(copy.deepcopy(new))
        self._caller_len, self._caller_last = len(msgs), msgs[-1]

    def before(self, messages: Any, system: str | None) -> list[dict[str, Any]]:
        """Absorb the caller's messages, store, prune and compact; returns the list to send."""
        self._absorb(messages)
        self.compactor.prepare_messages(self.messages, system=system)
        return [copy.deepcopy(m) for m in self.messages]

    async def abefore(self, messages: Any, system: str | None) -> list[dict[str, Any]]:
        """:meth:`before` for async clients (blocking work in a worker thread)."""
        self._absorb(messages)
        await self.compactor.aprepare_messages(self.messages, system=system)
        return [copy.deepcopy(m) for m in self.messages]

    def after(self, sent: list[dict[str, Any]], system: str | None, reply: dict[str, Any] | None,
              input_tokens: int | None, output_tokens: int | None) -> None:
        """Store the reply and calibrate from the reported usage."""
        if reply is not None:
            self.messages.append(reply)
            self.compactor.sync(self.messages)
            self._response_pending = True
        if isinstance(input_tokens, int) and input_tokens > 0:
            self.compactor.observe_usage(sent, input_tokens, system=system, output_tokens=output_tokens)

    async def aafter(self, sent: list[dict[str, Any]], system: str | None, reply: dict[str, Any] | None,
                     input_tokens: int | None, output_tokens: int | None) -> None:
        """:meth:`after` for async clients."""
        with bind_loop(asyncio.get_running_loop()):
            await asyncio.to_thread(self.after, sent, system, reply, input_tokens, output_tokens)


# --- replies and usage from provider objects ---------------------------------------------------

def _openai_reply(resp: Any) -> tuple[dict[str, Any] | None, int | None, int | None]:
    usage = getattr(resp, "usage", None)
    n_in = getattr(usage, "prompt_tokens", None)
    n_out = getattr(usage, "completion_tokens", None)
    choices = getattr(resp, "choices", None) or []
    if not choices:
        return None, n_in, n_out
    return plain_message(choices[0].message), n_in, n_out


def _anthropic_reply(resp: Any) -> tuple[dict[str, Any] | None, int | None, int | None]:
    usage = getattr(resp, "usage", None)
    n_in, n_out = getattr(usage, "input_tokens", None), getattr(usage, "output_tokens", None)
    blocks = [_plain_block(b) for b in (getattr(resp, "content", None) or [])]
    return ({"role": "assistant", "content": blocks} if blocks else None), n_in, n_out


class _OpenAIChunks:
    """Rebuilds an OpenAI streamed reply from its chunks."""

    def __init__(self) -> None:
        self.text: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.n_in: int | None = None
        self.n_out: int | None = None

    def feed(self, chunk: Any) -> None:
        usage = getattr(chunk, "usage", None)
        if usage is not None:
            self.n_in, self.n_out = usage.prompt_tokens, usage.completion_tokens
        for choice in getattr(chunk, "choices", None) or []:
            if getattr(choice, "index", 0) != 0:
                continue
            delta = choice.delta
            if getattr(delta, "content", None):
                self.text.append(delta.content)
            for tc in getattr(delta, "tool_calls", None) or []:
                entry = self.calls.setdefault(tc.index, {"id": None, "type": "function",
                                                         "function": {"name": "", "arguments": ""}})
                if tc.id:
                    entry["id"] = tc.id
                fn = tc.function
                if fn is not None:
                    entry["function"]["name"] += fn.name or ""
                    entry["function"]["arguments"] += fn.arguments or ""

    def reply(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": "assistant", "content": "".join(self.text)}
        if self.calls:
            out["tool_calls"] = [self.calls[k] for k in sorted(self.calls)]
            if not out["content"]:
                del out["content"]  # a pure tool call has no text
        return out


class _AnthropicEvents:
    """Rebuilds an Anthropic streamed reply from its raw events."""

    def __init__(self) -> None:
        self.blocks: dict[int, dict[str, Any]] = {}
        self.partial: dict[int, str] = {}
        self.n_in: int | None = None
        self.n_out: int | None = None

    def feed(self, event: Any) -> None:
        kind = getattr(event, "type", None)
        if kind == "message_start":
            self.n_in = event.message.usage.input_tokens
            self.n_out = event.message.usage.output_tokens
        elif kind == "content_block_start":
            self.blocks[event.index] = _plain_block(event.content_block)
            if self.blocks[event.index].get("type") == "tool_use":
                self.partial[event.index] = ""
        elif kind == "content_block_delta":
            block, delta = self.blocks.get(event.index), event.delta
            if block is None:
                return
            dtype = getattr(delta, "type", None)
            if dtype == "text_delta":
                block["text"] = block.get("text", "") + delta.text
            elif dtype == "input_json_delta":
                self.partial[event.index] += delta.partial_json
            elif dtype == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta.thinking
            elif dtype == "signature_delta":
                block["signature"] = delta.signature
        elif kind == "message_delta":
            usage = getattr(event, "usage", None)
            if usage is not None and getattr(usage, "output_tokens", None) is not None:
                self.n_out = usage.output_tokens
            if usage is not None and getattr(usage, "input_tokens", None):
                self.n_in = usage.input_tokens

    def reply(self) -> dict[str, Any]:
        import json

        blocks = []
        for i in sorted(self.blocks):
            b = self.blocks[i]
            if b.get("type") == "tool_use" and self.partial.get(i):
                b["input"] = json.loads(self.partial[i])
            blocks.append(b)
        return {"role": "assistant", "content": blocks}


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
        sent = self._loop.before(messages, None)
        stream, hide = self._stream_args(kwargs)
        resp = self._raw.create(messages=sent, **kwargs)
        if stream:
            return _StreamProxy(resp, _OpenAIChunks(),
                                lambda acc: self._loop.after(sent, None, acc.reply(), acc.n_in, acc.n_out), hide)
        self._loop.after(sent, None, *_openai_reply(resp))
        return resp

    async def _acreate(self, messages: Any, kwargs: dict[str, Any]) -> Any:
        sent = await self._loop.abefore(messages, None)
        stream, hide = self._stream_args(kwargs)
        resp = await self._raw.create(messages=sent, **kwargs)
        if stream:
            return _StreamProxy(resp, _OpenAIChunks(),
                                lambda acc: self._loop.aafter(sent, None, acc.reply(), acc.n_in, acc.n_out), hide)
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
        sent = self._loop.before(messages, system)
        resp = self._raw.create(messages=sent, **kwargs)
        if kwargs.get("stream"):
            return _StreamProxy(resp, _AnthropicEvents(),
                                lambda acc: self._loop.after(sent, system, acc.reply(), acc.n_in, acc.n_out),
                                lambda _e: False)
        self._loop.after(sent, system, *_anthropic_reply(resp))
        return resp

    async def _acreate(self, messages: Any, kwargs: dict[str, Any]) -> Any:
        system = _system_text(kwargs.get("system"))
        sent = await self._loop.abefore(messages, system)
        resp = await self._raw.create(messages=sent, **kwargs)
        if kwargs.get("stream"):
            return _StreamProxy(resp, _AnthropicEvents(),
                                lambda acc: self._loop.aafter(sent, system, acc.reply(), acc.n_in, acc.n_out),
                                lambda _e: False)
        await self._loop.aafter(sent, system, *_anthropic_reply(resp))
        return resp

    def stream(self, *, messages: Any, **kwargs: Any) -> Any:
        """``messages.stream(...)``: the provider's stream manager; the final message is recorded on exit.

        For an async client, prepare work runs when the ``async with`` is entered.
        """
        system = _system_text(kwargs.get("system"))
        if self._async:
            return _AsyncStreamEntry(self, messages, kwargs, system)
        sent = self._loop.before(messages, system)
        return _StreamManager(self._raw.stream(messages=sent, **kwargs), self._loop, sent, system)


class _AsyncStreamEntry:
    """``async with wrapped.messages.stream(...)``: prepares (async), then enters the provider's manager."""

    def __init__(self, owner: _Messages, messages: Any, kwargs: dict[str, Any], system: str | None) -> None:
        self._owner, self._messages, self._kwargs, self._system = owner, messages, kwargs, system
        self._inner: _StreamManager | None = None

    async def __aenter__(self) -> Any:
        sent = await self._owner._loop.abefore(self._messages, self._system)
        self._inner = _StreamManager(self._owner._raw.stream(messages=sent, **self._kwargs), self._owner._loop,
                                     sent, self._system)
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


# --- a summarizer over the caller's own client -------------------------------------------------

class ClientChat:
    """A :class:`~stratamem.llm.ChatModel` over an already-built provider client (sync or async).

    :func:`wrap` uses it when you give ``summary_model``: checkpoints are then
    written by that model through your own client (its endpoint, key and
    retries), and these calls are not stored as turns.

    Args:
        client: The unwrapped ``openai``/``anthropic`` client.
        model: Model name for summaries.
        provider: ``openai`` or ``anthropic``.
    """

    def __init__(self, client: Any, model: str, provider: str) -> None:
        self.client = client
        self.model = model
        self.provider = provider

    def complete(self, system: str, messages: Sequence[Mapping[str, Any]], *, max_tokens: int) -> Completion:
        """One summary call; any provider failure becomes :class:`~stratamem.errors.ModelError`."""
        plain = check_chat_input(system, messages, max_tokens, 4_000_000)
        try:
            if self.provider == "openai":
                payload = ([{"role": "system", "content": system}] if system else []) + plain
                result = self.client.chat.completions.create(model=self.model, messages=payload, max_tokens=max_tokens)
            else:
                extra = {"system": system} if system else {}
                result = self.client.messages.create(model=self.model, messages=plain, max_tokens=max_tokens, **extra)
            if inspect.isawaitable(result):
                result = run_to_completion(result)
        except Exception as exc:  # the provider library's errors: the compactor falls back visibly
            raise ModelError(f"{self.provider} summary model {self.model!r} failed: {type(exc).__name__}") from exc
        if self.provider == "openai":
            text = (result.choices[0].message.content or "") if result.choices else ""
            usage = result.usage
            out = Completion(text, getattr(usage, "prompt_tokens", None), getattr(usage, "completion_tokens", None),
                             result.model, result.choices[0].finish_reason if result.choices else None)
        else:
            text = "".join(getattr(b, "text", "") for b in result.content if getattr(b, "type", None) == "text")
            out = Completion(text, result.usage.input_tokens, result.usage.output_tokens, result.model,
                             result.stop_reason)
        if not text.strip():
            raise ModelError(f"{self.provider} summary model {self.model!r} returned an empty answer")
        return out


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
    raise ValidationError(f"stratamem.wrap takes an openai.OpenAI/AsyncOpenAI or anthropic.Anthropic/AsyncAnthropic "
                          f"client, got {type(client).__name__}", path="client")


def wrap(client: Any, *, memory: Any = None, session: str = "default", summarizer: Any = None,
         summary_model: str | None = None, agent_model: str = "default", **compactor_options: Any) -> WrappedClient:
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
    model = summarizer if summarizer is not None else (
        ClientChat(client, summary_model, provider) if summary_model else None)

    def make() -> Compactor:
        return Compactor(model, provider=provider, memory=memory, session=session, agent_model=agent_model,
                         **compactor_options)

    return WrappedClient(client, provider, is_async, LoopSession(make, provider))
