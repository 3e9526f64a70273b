"""A chat model over the caller's own, already-built provider client (``wrap(..., summary_model=...)``).

:class:`ClientChat` lets checkpoints be written through the client the agent
already uses (its endpoint, key and retries), without building a second
client from settings; its calls are not stored as turns.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import ModelError
from ..events import run_to_completion
from ..llm import Completion, check_chat_input

__all__ = ["ClientChat"]


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
            out = Completion(
                text,
                getattr(usage, "prompt_tokens", None),
                getattr(usage, "completion_tokens", None),
                result.model,
                result.choices[0].finish_reason if result.choices else None,
            )
        else:
            text = "".join(getattr(b, "text", "") for b in result.content if getattr(b, "type", None) == "text")
            out = Completion(
                text, result.usage.input_tokens, result.usage.output_tokens, result.model, result.stop_reason
            )
        if not text.strip():
            raise ModelError(f"{self.provider} summary model {self.model!r} returned an empty answer")
        return out
