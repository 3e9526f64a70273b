"""Chat models: the protocol summarizers and compaction call, and its clients.

stratamem never builds a model client from a string behind your back: you
pass a :class:`ChatModel` instance in. :class:`OpenAIChat` talks to any
OpenAI-compatible endpoint (which covers local servers) and
:class:`AnthropicChat` to Anthropic's API, each through the provider's
official client library (the ``llm`` extra). Offline fakes for tests live in
:mod:`stratamem.testing` (:mod:`stratamem.testing.llm_server` is a real HTTP
server on 127.0.0.1 that both clients can talk to).

Both clients share one policy: bounded input (checked before any network
call), a per-call timeout, our own retries with exponential backoff on
transient failures (timeouts, lost connections, 408/409/429/5xx), and every
failure surfaced as :class:`~stratamem.errors.ModelError`. Neither reads the
environment: the endpoint and key are what you pass.

Both also offer ``complete_json`` (not part of the :class:`ChatModel`
protocol, so your own models keep working without it): the answer constrained
to a JSON schema where the provider can — OpenAI's ``response_format`` of type
``json_schema`` (strict), Anthropic's single forced tool whose input is the
object — returned as JSON text. Callers still check what comes back.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit

from .errors import ConfigError, ModelError, ValidationError

__all__ = ["AnthropicChat", "ChatModel", "Completion", "OpenAIChat"]

log = logging.getLogger("stratamem.llm")

_RETRY_STATUS = frozenset({408, 409, 429})


@dataclass(frozen=True, slots=True)
class Completion:
    """A model's answer with the usage the provider reported."""

    text: str
    """The generated text."""
    input_tokens: int | None = None
    """Input tokens the provider counted (for calibration), if reported."""
    output_tokens: int | None = None
    """Output tokens the provider counted, if reported."""
    model: str | None = None
    """Model that answered."""
    finish_reason: str | None = None
    """Why generation stopped (``stop``/``end_turn``, ``length``/``max_tokens`` …), if reported."""
    attempts: int = 1
    """Calls made to get this answer (1 + retries)."""

    def tokens(self, tokenizer: Any, *prompt: str) -> tuple[int, int]:
        """``(input, output)`` tokens of this call: the provider's counts, else ``tokenizer``'s count of
        the ``prompt`` texts and of the answer (for spend accounting when a provider reports none)."""
        inp = self.input_tokens if self.input_tokens is not None else sum(tokenizer.count(p) for p in prompt)
        out = self.output_tokens if self.output_tokens is not None else tokenizer.count(self.text)
        return inp, out


@runtime_checkable
class ChatModel(Protocol):
    """A chat model that turns a system prompt and messages into text.

    Implementations raise :class:`~stratamem.errors.ModelError` on any failure
    (HTTP error, timeout, empty answer) after their own retries; callers decide
    the fallback, and record it visibly.
    """

    model: str
    """Model name sent to the provider."""

    def complete(self, system: str, messages: Sequence[Mapping[str, Any]], *, max_tokens: int) -> Completion:
        """Generate one answer.

        Args:
            system: System prompt.
            messages: ``[{"role": "user"|"assistant", "content": str}, ...]``.
            max_tokens: Upper bound for the answer.

        Raises:
            ModelError: The call failed or timed out after retries.
        """
        ...


def check_chat_input(system: Any, messages: Any, max_tokens: Any, max_input_chars: int) -> list[dict[str, str]]:
    """Validate a :meth:`ChatModel.complete` call and return plain message dicts.

    Raises:
        ValidationError: Wrong types, unknown roles, no messages, a first message
            that is not from the user, ``max_tokens`` < 1, or more than
            ``max_input_chars`` characters of input.
    """
    if not isinstance(system, str):
        raise ValidationError("system must be a string", path="system")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValidationError(f"max_tokens must be a positive integer, got {max_tokens!r}", path="max_tokens")
    if not isinstance(messages, Sequence) or isinstance(messages, str) or not messages:
        raise ValidationError("messages must be a non-empty list", path="messages")
    out: list[dict[str, str]] = []
    size = len(system)
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping) or m.get("role") not in ("user", "assistant"):
            raise ValidationError("each message needs role 'user' or 'assistant'", path=f"messages[{i}]")
        if not isinstance(m.get("content"), str):
            raise ValidationError("content must be a string", path=f"messages[{i}].content")
        size += len(m["content"])
        out.append({"role": m["role"], "content": m["content"]})
    if out[0]["role"] != "user":
        raise ValidationError("the first message must be from the user", path="messages[0]")
    if size > max_input_chars:
        raise ValidationError(
            f"input is {size:,} characters; this client accepts at most {max_input_chars:,}", path="messages"
        )
    return out


class _RetryingClient:
    """Shared construction, retry/backoff and error mapping; subclasses supply the client and one raw call."""

    provider = ""
    _default_url = ""
    _connection_errors: tuple[type[Exception], ...] = ()
    _api_errors: tuple[type[Exception], ...] = ()

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        max_retries: int = 2,
        backoff_s: float = 0.5,
        max_backoff_s: float = 8.0,
        max_input_chars: int = 1_000_000,
        temperature: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise ConfigError("model must be a non-empty string")
        if timeout_s <= 0 or max_retries < 0 or backoff_s < 0 or max_input_chars < 1:
            raise ConfigError("timeout_s and max_input_chars must be positive; max_retries and backoff_s not negative")
        self.model = model
        self.timeout_s = float(timeout_s)
        self.max_retries = int(max_retries)
        self.backoff_s = float(backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        self.max_input_chars = int(max_input_chars)
        self._sleep = sleep
        self.base_url = base_url or self._default_url
        host = urlsplit(self._default_url).hostname or ""
        if api_key is None and host in self.base_url:
            raise ConfigError(f"{type(self).__name__} needs an api_key for {host} (it never reads the environment)")
        self.temperature = temperature
        # The key is passed explicitly (a placeholder for keyless local servers) so the
        # client library never reads it, or the endpoint, from the environment.
        self._client = self._make_client(self.base_url, api_key or "unused")

    def _make_client(self, base_url: str, api_key: str) -> Any:
        """Build the provider's client (its own retries off) and set the error classes."""
        raise NotImplementedError

    def _call(self, system: str, messages: list[dict[str, str]], max_tokens: int) -> Completion:
        raise NotImplementedError

    def complete(self, system: str, messages: Sequence[Mapping[str, Any]], *, max_tokens: int) -> Completion:
        """Generate one answer, retrying transient failures with exponential backoff.

        Args:
            system: System prompt.
            messages: ``[{"role": "user"|"assistant", "content": str}, ...]``, starting with a user message.
            max_tokens: Upper bound for the answer.

        Returns:
            The answer with the provider's usage numbers and the attempts it took.

        Raises:
            ValidationError: The input is malformed or larger than ``max_input_chars`` (no call is made).
            ModelError: The call failed, timed out, or returned no text, after retries.
        """
        plain = check_chat_input(system, messages, max_tokens, self.max_input_chars)
        return self._retrying(lambda: self._call(system, plain, max_tokens))

    def complete_json(
        self,
        system: str,
        messages: Sequence[Mapping[str, Any]],
        *,
        schema: Mapping[str, Any],
        max_tokens: int,
        name: str = "answer",
    ) -> Completion:
        """Generate one answer as a JSON object the provider constrains to ``schema``; the text is that JSON.

        Args:
            system: System prompt.
            messages: As for :meth:`complete`.
            schema: A JSON schema of an object (every property listed in ``required``,
                optional ones nullable, ``additionalProperties`` false: OpenAI's strict mode).
            max_tokens: Upper bound for the answer.
            name: The schema's (OpenAI) or the tool's (Anthropic) name: letters, digits, ``_`` and ``-``.

        Raises:
            ValidationError: The input is malformed or too large (no call is made).
            ModelError: The call failed or returned nothing, after retries. The JSON is not
                checked against the schema here: the caller does that.
        """
        plain = check_chat_input(system, messages, max_tokens, self.max_input_chars)
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_-]{1,64}", name):
            raise ValidationError("name must be 1-64 letters, digits, '_' or '-'", path="name")
        return self._retrying(lambda: self._call_json(system, plain, dict(schema), max_tokens, name))

    def _call_json(
        self, system: str, messages: list[dict[str, str]], schema: dict[str, Any], max_tokens: int, name: str
    ) -> Completion:
        raise NotImplementedError

    def _retrying(self, call: Callable[[], Completion]) -> Completion:
        """``call`` with the client's retries, backoff and error mapping (see :meth:`complete`)."""
        attempt = 0
        while True:
            attempt += 1
            try:
                result = call()
            except Exception as exc:  # mapped below: only the provider's own errors are expected
                retryable, why = self._classify(exc)
                if retryable and attempt <= self.max_retries:
                    delay = min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1))
                    log.warning(
                        "%s call failed (%s), retry %d/%d in %.2fs",
                        self.provider,
                        why,
                        attempt,
                        self.max_retries,
                        delay,
                    )
                    self._sleep(delay)
                    continue
                raise ModelError(
                    f"{self.provider} model {self.model!r} failed after {attempt} attempt(s): {why}"
                ) from exc
            if not result.text.strip():
                raise ModelError(f"{self.provider} model {self.model!r} returned an empty answer")
            return Completion(
                result.text, result.input_tokens, result.output_tokens, result.model, result.finish_reason, attempt
            )

    def _classify(self, exc: Exception) -> tuple[bool, str]:
        """Whether ``exc`` is worth retrying, and a short description without content."""
        status = getattr(exc, "status_code", None)
        name = type(exc).__name__
        if isinstance(status, int):
            return status in _RETRY_STATUS or status >= 500, f"HTTP {status} ({name})"
        if isinstance(exc, self._connection_errors):
            return True, name  # includes the client's timeout error
        if isinstance(exc, ModelError):
            return False, str(exc)
        if isinstance(exc, self._api_errors):
            return False, name
        raise exc  # a programming error, not a model failure: let it surface unchanged

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.model!r})"


class OpenAIChat(_RetryingClient):
    """A chat model behind any OpenAI-compatible ``/chat/completions`` endpoint.

    Args:
        model: Model name sent with each request.
        base_url: Endpoint including ``/v1`` (default: OpenAI's). Local servers work too.
        api_key: Key sent as a bearer token. Required for OpenAI's own endpoint; for
            another endpoint, ``None`` sends a placeholder (local servers ignore it).
        timeout_s: Per-call timeout in seconds.
        max_retries: Retries after a transient failure (the library's own retries are off).
        backoff_s: First retry delay; doubles each retry.
        max_backoff_s: Upper bound of one retry delay.
        max_input_chars: Largest accepted input (system + messages), checked before calling.
        temperature: Sampling temperature, if the endpoint should not use its default.
        sleep: How to wait between retries (tests pass a recorder).

    Raises:
        ConfigError: Missing key for OpenAI's endpoint, or a bad limit.
    """

    provider = "openai"
    _default_url = "https://api.openai.com/v1"

    def _make_client(self, base_url: str, api_key: str) -> Any:
        import openai

        self._connection_errors = (openai.APIConnectionError,)
        self._api_errors = (openai.OpenAIError,)
        # Retries are ours (max_retries=0 here) so they are counted and logged.
        return openai.OpenAI(base_url=base_url, api_key=api_key, timeout=self.timeout_s, max_retries=0)

    def _call(self, system: str, messages: list[dict[str, str]], max_tokens: int) -> Completion:
        payload: list[dict[str, str]] = ([{"role": "system", "content": system}] if system else []) + messages
        extra: dict[str, Any] = {} if self.temperature is None else {"temperature": self.temperature}
        resp = self._client.chat.completions.create(
            model=self.model,
            messages=payload,
            max_tokens=max_tokens,
            **extra,
        )
        return self._completion(resp)

    def _call_json(
        self, system: str, messages: list[dict[str, str]], schema: dict[str, Any], max_tokens: int, name: str
    ) -> Completion:
        payload: list[dict[str, str]] = ([{"role": "system", "content": system}] if system else []) + messages
        extra: dict[str, Any] = {} if self.temperature is None else {"temperature": self.temperature}
        resp = self._client.chat.completions.create(
            model=self.model,
            messages=payload,
            max_tokens=max_tokens,
            response_format={
                "type": "json_schema",
                "json_schema": {"name": name, "schema": schema, "strict": True},
            },
            **extra,
        )
        return self._completion(resp)

    def _completion(self, resp: Any) -> Completion:
        if not resp.choices:
            raise ModelError(f"openai model {self.model!r} returned no choices")
        choice = resp.choices[0]
        usage = resp.usage
        return Completion(
            choice.message.content or "",
            usage.prompt_tokens if usage else None,
            usage.completion_tokens if usage else None,
            resp.model,
            choice.finish_reason,
        )


class AnthropicChat(_RetryingClient):
    """A chat model behind Anthropic's Messages API (or a compatible endpoint).

    Args:
        model: Model name sent with each request.
        base_url: Endpoint without ``/v1`` (default: Anthropic's).
        api_key: Key sent as ``x-api-key``. Required for Anthropic's own endpoint; for
            another endpoint, ``None`` sends a placeholder.
        timeout_s, max_retries, backoff_s, max_backoff_s, max_input_chars, temperature, sleep:
            The shared client policy, exactly as for :class:`OpenAIChat`.

    Raises:
        ConfigError: Missing key for Anthropic's endpoint, or a bad limit.
    """

    provider = "anthropic"
    _default_url = "https://api.anthropic.com"

    def _make_client(self, base_url: str, api_key: str) -> Any:
        import anthropic

        self._connection_errors = (anthropic.APIConnectionError,)
        self._api_errors = (anthropic.AnthropicError,)
        return anthropic.Anthropic(base_url=base_url, api_key=api_key, timeout=self.timeout_s, max_retries=0)

    def _extra(self, system: str) -> dict[str, Any]:
        """The optional request fields: temperature when set, the system prompt when there is one."""
        extra: dict[str, Any] = {} if self.temperature is None else {"temperature": self.temperature}
        if system:
            extra["system"] = system
        return extra

    def _call(self, system: str, messages: list[dict[str, str]], max_tokens: int) -> Completion:
        extra = self._extra(system)
        resp = self._client.messages.create(
            model=self.model,
            messages=messages,
            max_tokens=max_tokens,
            **extra,
        )
        text = "".join(getattr(b, "text", "") for b in resp.content if getattr(b, "type", None) == "text")
        return Completion(text, resp.usage.input_tokens, resp.usage.output_tokens, resp.model, resp.stop_reason)

    def _call_json(
        self, system: str, messages: list[dict[str, str]], schema: dict[str, Any], max_tokens: int, name: str
    ) -> Completion:
        # One tool the model must call: its input is the answer, validated by the provider against the schema.
        extra = self._extra(system)
        resp = self._client.messages.create(
            model=self.model,
            messages=messages,
            max_tokens=max_tokens,
            tools=[{"name": name, "description": "Record the answer.", "input_schema": schema}],
            tool_choice={"type": "tool", "name": name},
            **extra,
        )
        calls = [b for b in resp.content if getattr(b, "type", None) == "tool_use" and getattr(b, "name", None) == name]
        # A model that answered in text instead of calling the tool: its text goes back, the caller checks it.
        text = (
            json.dumps(calls[0].input)
            if calls
            else "".join(getattr(b, "text", "") for b in resp.content if getattr(b, "type", None) == "text")
        )
        return Completion(text, resp.usage.input_tokens, resp.usage.output_tokens, resp.model, resp.stop_reason)
