"""Prompt caching as the providers bill it: their rules per model, and the usage they report back.

Two values the layers exchange:

* :class:`CacheRules` — what a provider caches for a model and at what price,
  as multipliers of the input price (never dollar prices: those stay with the
  caller). :func:`cache_rules` reads the table. Figures, read 2026-11-27:

  - Anthropic (``cache_control`` breakpoints, at most 4 per request): reads
    0.1x, 5-minute writes 1.25x; the shortest cacheable prefix is 4,096 tokens
    for Claude Opus 4.5/4.6 and Haiku 4.5, 2,048 for Haiku 3/3.5 and 1,024 for
    the others (Sonnet 4.x, Opus 4/4.1, Sonnet 3.7), per Anthropic's
    prompt-caching page.
  - OpenAI (automatic prefix caching from 1,024 tokens, no write premium):
    cached input 0.25x for GPT-4.1, 0.1x for GPT-5, 0.5x for GPT-4o and the
    rest (the pricing page's cached-input column).

* :class:`PromptUsage` — the input side of one call's reported usage, read from
  the provider's own usage object or dict (:meth:`PromptUsage.from_provider`):
  Anthropic ``input_tokens`` + ``cache_creation_input_tokens`` +
  ``cache_read_input_tokens`` (``input_tokens`` alone is only the uncached
  tail, so the request's size is the sum); OpenAI Chat Completions
  ``prompt_tokens`` and ``prompt_tokens_details.cached_tokens``; Responses
  ``input_tokens`` and ``input_tokens_details.cached_tokens``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ValidationError

__all__ = ["CacheRules", "PromptUsage", "cache_rules"]


@dataclass(frozen=True, slots=True)
class CacheRules:
    """How a provider caches prompts for one model, as multipliers of its input price."""

    min_tokens: int
    """Shortest prefix the provider caches (a breakpoint before it writes nothing)."""
    read: float
    """Price of a cached token read back, per input token."""
    write: float
    """Price of a token written to the cache (Anthropic's 5-minute writes; OpenAI: 1, no premium)."""
    breakpoints: int
    """Most ``cache_control`` breakpoints one request may carry (0: caching is automatic)."""


_ANTHROPIC_MIN = (
    (("claude-opus-4-6", "claude-opus-4-5", "claude-haiku-4-5"), 4096),
    (("claude-3-5-haiku", "claude-3-haiku", "claude-haiku-3"), 2048),
)
_OPENAI_READ = (("gpt-4.1", 0.25), ("gpt-5", 0.1), ("gpt-4o", 0.5))


def cache_rules(provider: str | None, model: str | None = None, *, min_tokens: int | None = None) -> CacheRules:
    """The caching rules of ``provider``'s ``model`` (an unknown model gets the provider's usual ones).

    ``min_tokens`` overrides the table's minimum (``context.cache_min_tokens``).
    Without a provider (``text`` contexts) the Anthropic rules stand in: the
    stricter of the two.
    """
    name = (model or "").lower()
    if provider == "openai":
        read = next((r for prefix, r in _OPENAI_READ if name.startswith(prefix)), 0.5)
        return CacheRules(min_tokens or 1024, read, 1.0, 0)
    least = next((n for prefixes, n in _ANTHROPIC_MIN if name.startswith(prefixes)), 1024)
    return CacheRules(min_tokens or least, 0.1, 1.25, 4)


def _get(obj: Any, name: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def _count(value: Any, path: str) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValidationError(f"expected a token count, got {value!r}", path=path)
    return value


@dataclass(frozen=True, slots=True)
class PromptUsage:
    """The input side of one model call's usage, as the provider reported it."""

    input: int
    """Every input token of the request, cached or not."""
    cached_read: int
    """Tokens read from the provider's cache."""
    cache_written: int
    """Tokens written to the cache (Anthropic; OpenAI reports none)."""
    source: str
    """``anthropic``, ``openai-chat`` or ``openai-responses``: which usage shape it was read from."""
    output: int | None = None
    """Output tokens, when reported."""

    @property
    def uncached(self) -> int:
        """Input tokens billed at the full price."""
        return max(0, self.input - self.cached_read - self.cache_written)

    @property
    def hit_rate(self) -> float:
        """Share of the input read from the cache (0 for an empty request)."""
        return self.cached_read / self.input if self.input else 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON form (the manifest's ``cache.reported``, a conversation's ``last_usage``)."""
        out: dict[str, Any] = {
            "input": self.input,
            "cached_read": self.cached_read,
            "cache_written": self.cache_written,
            "hit_rate": round(self.hit_rate, 4),
            "source": self.source,
        }
        if self.output is not None:
            out["output"] = self.output
        return out

    @classmethod
    def from_provider(cls, usage: Any) -> PromptUsage:
        """Read a provider's usage object or dict (see the module docstring for the fields).

        Raises:
            ValidationError: Not a usage of a known shape, or a count that is not a non-negative integer.
        """
        if isinstance(usage, PromptUsage):  # already read (a wrapped client reports it back as is)
            return usage
        if hasattr(usage, "model_dump") and not isinstance(usage, Mapping):
            usage = usage.model_dump()
        if _get(usage, "prompt_tokens") is not None:
            details = _get(usage, "prompt_tokens_details") or {}
            total = _count(_get(usage, "prompt_tokens"), "usage.prompt_tokens")
            cached = _count(_get(details, "cached_tokens"), "usage.prompt_tokens_details.cached_tokens")
            out = _count(_get(usage, "completion_tokens"), "usage.completion_tokens")
            return cls(total, min(cached, total), 0, "openai-chat", out)
        if _get(usage, "input_tokens") is None:
            raise ValidationError(
                "not a provider usage: expected prompt_tokens (OpenAI Chat) or input_tokens (Anthropic, Responses)",
                path="usage",
            )
        tail = _count(_get(usage, "input_tokens"), "usage.input_tokens")
        out = _count(_get(usage, "output_tokens"), "usage.output_tokens")
        details = _get(usage, "input_tokens_details")
        if details is not None:
            cached = _count(_get(details, "cached_tokens"), "usage.input_tokens_details.cached_tokens")
            return cls(tail, min(cached, tail), 0, "openai-responses", out)
        read = _count(_get(usage, "cache_read_input_tokens"), "usage.cache_read_input_tokens")
        written = _count(_get(usage, "cache_creation_input_tokens"), "usage.cache_creation_input_tokens")
        return cls(tail + read + written, read, written, "anthropic", out)
