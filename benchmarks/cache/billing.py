"""Provider prompt-cache rules and list prices, and the two cache simulators the replays bill with.

Prices are list prices in USD per million input tokens, read on 2026-11-27 (the
day this table was written) from the pages named in ``source``. Output tokens
are left out of every bill: each arm answers the same calls, so output is the
same for all of them and only the input side differs.

Rules the simulators follow (the provider pages are named beside ``PRICES``):

* **OpenAI** (automatic prefix caching): a request of at least 1,024 tokens
  reuses the longest prefix it shares with a recent request; hits come in
  increments of 128 tokens (so ``cached = floor(lcp / 128) * 128`` when
  ``lcp >= 1024``, else 0). No write premium. Cached tokens are reported as
  ``usage.prompt_tokens_details.cached_tokens`` (Chat Completions) and
  ``usage.input_tokens_details.cached_tokens`` (Responses).
* **Anthropic** (explicit ``cache_control`` breakpoints, at most 4 per request):
  a breakpoint writes the prefix up to its block (only when that prefix has at
  least the model's minimum cacheable length); a later request reads the longest
  entry that is a prefix of it, found by looking back from each of its
  breakpoints over at most 20 block boundaries. Tokens up to the read are billed
  at 0.1x (``cache_read_input_tokens``), from there to the last cacheable
  breakpoint at 1.25x (5-minute writes, ``cache_creation_input_tokens``), the
  rest at 1x (``input_tokens``). Entries live 5 minutes, refreshed by each hit.
"""

from __future__ import annotations

import hashlib
from collections import deque
from dataclasses import dataclass

import numpy as np

from .request import Request, lcp

__all__ = ["PRICES", "AnthropicCache", "OpenAICache", "Price", "dollars"]

PRICE_DATE = "2026-11-27"


@dataclass(frozen=True, slots=True)
class Price:
    """One model's input-side list prices and cache rules."""

    provider: str
    """``openai`` or ``anthropic``."""
    input: float
    """USD per million uncached input tokens."""
    cached: float
    """USD per million tokens read from the cache."""
    write: float = 0.0
    """USD per million tokens written to the cache (Anthropic 5-minute writes; OpenAI: none)."""
    min_tokens: int = 1024
    """Shortest prefix the provider caches for this model."""
    source: str = ""
    """Where the figures were read."""


PRICES: dict[str, Price] = {
    # platform.claude.com/docs/en/docs/about-claude/pricing (model table: base input, 5m cache writes,
    # cache hits); minimum cacheable length: the prompt-caching page's per-model list, quoted in
    # github.com/anthropics/anthropic-sdk-python/issues/1194 (1,024 for Sonnet 4.6/4.5; 4,096 for Haiku 4.5).
    "claude-sonnet-4-6": Price(
        "anthropic", 3.00, 0.30, 3.75, 1024, "platform.claude.com/docs/en/docs/about-claude/pricing"
    ),
    "claude-haiku-4-5": Price(
        "anthropic", 1.00, 0.10, 1.25, 4096, "platform.claude.com/docs/en/docs/about-claude/pricing"
    ),
    # developers.openai.com/api/docs/pricing (not reachable from this machine); figures as reproduced
    # by github/docs data/tables/copilot/models-and-pricing.yml (GPT-4.1: $2.00 / $0.50 cached) and the
    # openai-cost crate's dated table (gpt-5: $1.25 / $0.125 cached). Caching rules:
    # developers.openai.com/api/docs/guides/prompt-caching.
    "gpt-4.1": Price("openai", 2.00, 0.50, 0.0, 1024, "developers.openai.com/api/docs/pricing (via github/docs)"),
    "gpt-5": Price("openai", 1.25, 0.125, 0.0, 1024, "developers.openai.com/api/docs/pricing (via openai-cost)"),
}

OPENAI_STEP = 128
"""OpenAI cache hits come in increments of this many tokens."""
ANTHROPIC_LOOKBACK = 20
"""Block boundaries an Anthropic breakpoint looks back over for an earlier entry."""


def dollars(price: Price, uncached: int, read: int, write: int = 0) -> float:
    """USD for input tokens split into uncached, cache-read and cache-written."""
    return (uncached * price.input + read * price.cached + write * price.write) / 1e6


class OpenAICache:
    """Automatic prefix caching: the longest prefix shared with one of the last ``keep`` requests.

    One cache per conversation scope; :meth:`reset` when the scope's cache has expired.
    """

    def __init__(self, min_tokens: int = 1024, keep: int = 16) -> None:
        self.min_tokens = min_tokens
        self._recent: deque[np.ndarray] = deque(maxlen=keep)

    def reset(self) -> None:
        """Forget every cached prefix."""
        self._recent.clear()

    def cached(self, req: Request) -> int:
        """Tokens of ``req`` billed as cached; then ``req`` is cached too."""
        best = max((lcp(req.tokens, old) for old in self._recent), default=0)
        self._recent.append(req.tokens)
        if len(req) < self.min_tokens or best < self.min_tokens:
            return 0
        return best // OPENAI_STEP * OPENAI_STEP


class AnthropicCache:
    """Explicit breakpoints: entries written at breakpoints, read back through the 20-block lookback."""

    def __init__(self, min_tokens: int) -> None:
        self.min_tokens = min_tokens
        self._entries: dict[int, set[bytes]] = {}  # prefix length -> hashes of prefixes of that length

    def reset(self) -> None:
        """Forget every entry (the scope's cache expired)."""
        self._entries.clear()

    @staticmethod
    def _key(req: Request, n: int) -> bytes:
        return hashlib.blake2b(req.tokens[:n].tobytes(), digest_size=16).digest()

    def bill(self, req: Request, breakpoints: list[int]) -> tuple[int, int, int]:
        """``(read, written, uncached)`` tokens of ``req`` sent with ``cache_control`` on ``breakpoints``
        (piece indices; at most 4 are honoured, the provider's limit)."""
        bps = sorted(breakpoints)[:4]
        total = len(req)
        if not bps:
            return 0, 0, total
        bounds = req.boundaries
        read = 0
        for bp in bps:
            j = bounds.index(bp) if bp in bounds else None
            if j is None:
                continue
            for k in range(j, max(-1, j - ANTHROPIC_LOOKBACK - 1), -1):
                n = int(req.ends[bounds[k]])
                if n <= read:
                    break
                if n in self._entries and self._key(req, n) in self._entries[n]:
                    read = n
                    break
        cacheable = [int(req.ends[bp]) for bp in bps if int(req.ends[bp]) >= self.min_tokens]
        last = max(cacheable, default=0)
        written = max(0, last - read)
        for n in cacheable:
            self._entries.setdefault(n, set()).add(self._key(req, n))
        return read, written, total - read - written
