"""Chat models: the protocol summarizers and compaction call, and its clients.

stratamem never builds a model client from a string behind your back: you
pass a :class:`ChatModel` instance in. Clients for any OpenAI-compatible
endpoint (which covers local servers) and for Anthropic's API live in this
module; offline fakes for tests live in :mod:`stratamem.testing`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = ["ChatModel", "Completion"]


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
