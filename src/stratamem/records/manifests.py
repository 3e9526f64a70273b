"""What an assembled context holds and why: context items, near-misses, the manifest.

Nothing enters a prompt without a reason (seed 004). Every piece of an
assembled :class:`Context` is listed in its :class:`Manifest` with its tokens,
its reason and its score breakdown; what competed for a slot and did not fit is
listed as a :class:`NearMiss`. The assembly itself lives in :mod:`stratamem.context`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .checks import format_timestamp

__all__ = ["Context", "ContextItem", "Manifest", "NearMiss"]


@dataclass(frozen=True, slots=True)
class ContextItem:
    """One unit placed in a context."""

    id: str
    """Stable id of the unit, e.g. ``turn:42``, ``node:7``, ``state``."""
    kind: str
    """``turn``, ``segment``, ``consolidation``, ``item``, ``state``, ``instructions`` or ``checkpoint``."""
    tokens: int
    """Exact tokens the unit adds to the rendered context."""
    reason: str
    """Why it is there, e.g. ``recent_window``, ``recalled``, ``always_included``."""
    tier: str | None = None
    """``hot``, ``warm`` or ``cold`` for pyramid nodes; ``None`` otherwise."""
    format: str = "text"
    """How it is rendered: ``text``, ``summary``, ``ctf``, ``toon`` or ``json``."""
    score: Mapping[str, float] = field(default_factory=dict)
    """Score breakdown (e.g. ``vector``, ``lexical``, ``recency``, ``fused``)."""
    turn_ids: tuple[int, ...] = ()
    """Turns this unit covers (a turn covers itself; a summary its provenance)."""
    duplicate_of: tuple[str, ...] = ()
    """Ids of the units already showing sentences this one had and lost to them
    (:mod:`stratamem.context.dedup`); empty when it is shown whole."""

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``duplicate_of`` only when some sentences were left out as shown elsewhere)."""
        out: dict[str, Any] = {
            "id": self.id,
            "kind": self.kind,
            "tier": self.tier,
            "format": self.format,
            "tokens": self.tokens,
            "reason": self.reason,
            "score": dict(self.score),
            "turn_ids": list(self.turn_ids),
        }
        if self.duplicate_of:
            out["duplicate_of"] = list(self.duplicate_of)
        return out


@dataclass(frozen=True, slots=True)
class NearMiss:
    """A candidate that competed for a slot and was left out."""

    id: str
    """Id of the unit."""
    kind: str
    """Kind of unit (as in :class:`ContextItem`)."""
    tokens: int
    """Tokens it would have cost."""
    reason: str
    """Why it was left out, e.g. ``over_budget``, ``duplicate`` (see :attr:`duplicate_of`)."""
    score: Mapping[str, float] = field(default_factory=dict)
    """Its score breakdown."""
    duplicate_of: str | None = None
    """For a unit left out as a repeat (reason ``duplicate``, ``duplicate_of_window``,
    ``restates_window_turns``, ``restates_included_turns``, ``overlaps_included_summary``):
    the id of the unit that shows its content (the kept copy)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``duplicate_of`` only for a duplicate)."""
        out = {
            "id": self.id,
            "kind": self.kind,
            "tokens": self.tokens,
            "reason": self.reason,
            "score": dict(self.score),
        }
        if self.duplicate_of is not None:
            out["duplicate_of"] = self.duplicate_of
        return out


@dataclass(frozen=True, slots=True)
class Manifest:
    """Every item of an assembled context, with the near-misses and notes."""

    budget: int
    """Token budget the context had to fit."""
    total_tokens: int
    """Exact tokens of the rendered context (never above ``budget``)."""
    items: tuple[ContextItem, ...]
    """What went in, in prompt order."""
    near_misses: tuple[NearMiss, ...] = ()
    """What did not fit, best first."""
    policy: str = "recent"
    """Allocation policy used."""
    query: str | None = None
    """The query recall ran on, if any."""
    tokenizer: str = "o200k_base"
    """Tokenizer the counts were made with."""
    notes: tuple[str, ...] = ()
    """Degradations and warnings, e.g. recall running lexical-only without an embedder."""
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    """When the context was assembled."""
    tier_tokens: Mapping[str, int] = field(default_factory=dict)
    """``topics`` policy: tokens each of seed 002's tiers takes (``current``, ``topics``, ``bulks``); else empty."""
    source_tokens: int = 0
    """``topics`` policy: exact tokens of the stored turns those tiers stand for (0 otherwise)."""
    counting: Mapping[str, Any] | None = None
    """How tokens were counted for the target provider (``Counting.to_dict()``: counter, factor,
    provider, model, source); ``budget`` and ``total_tokens`` are in that counting, item costs in the counter's."""
    cache: Mapping[str, Any] | None = None
    """The prompt-cache layout's account (``context.cache_layout``; ``None`` when it is off): the
    stable prefix's tokens per layer and its hash, the breakpoints, the anchor, and the provider's
    usage once reported (``Memory.report_usage``). Keys in docs/context.md ("Prompt caching")."""

    @property
    def compression_ratio(self) -> float:
        """``source_tokens`` per token shown in the tiers (1.0 when there are none): how much history each
        prompt token carries."""
        shown = sum(self.tier_tokens.values())
        return self.source_tokens / shown if shown and self.source_tokens else 1.0

    def to_dict(self) -> dict[str, Any]:
        """JSON form (as stored and shown by ``stratamem context --explain``)."""
        return {
            "timestamp": format_timestamp(self.created_at),
            "budget_tokens": self.budget,
            "total_tokens": self.total_tokens,
            "policy": self.policy,
            "query": self.query,
            "tokenizer": self.tokenizer,
            "notes": list(self.notes),
            "items": [i.to_dict() for i in self.items],
            "near_misses": [n.to_dict() for n in self.near_misses],
            "counting": dict(self.counting) if self.counting is not None else None,
            **(
                {
                    "tier_tokens": dict(self.tier_tokens),
                    "source_tokens": self.source_tokens,
                    "compression_ratio": round(self.compression_ratio, 3),
                }
                if self.tier_tokens
                else {}
            ),
            **({"cache": dict(self.cache)} if self.cache is not None else {}),
        }


@dataclass(frozen=True, slots=True)
class Context:
    """An assembled context, rendered for one provider, with its manifest."""

    format: str
    """``openai``, ``responses``, ``anthropic`` or ``text``."""
    messages: tuple[Mapping[str, Any], ...]
    """Provider messages (empty for ``text``)."""
    system: str | None
    """System prompt for ``anthropic`` (``None`` otherwise), always a string."""
    text: str
    """Plain-text rendering (for ``text``; also handy for logging sizes)."""
    manifest: Manifest
    """What is in it and why."""
    system_blocks: tuple[Mapping[str, Any], ...] | None = None
    """``anthropic`` with the cache layout: the system prompt as text blocks, the stable ones
    marked with ``cache_control`` (pass ``system=ctx.system_blocks or ctx.system``); else ``None``."""
    cache_key: str | None = None
    """With the cache layout: a key naming this namespace and session, for OpenAI's
    ``prompt_cache_key`` (requests with one key are routed to one cache); else ``None``."""

    @property
    def tokens(self) -> int:
        """Exact tokens of the rendered context."""
        return self.manifest.total_tokens

    def to_dict(self) -> dict[str, Any]:
        """JSON form: the rendered context and its manifest (``stratamem context --json``, the HTTP API)."""
        return {
            "format": self.format,
            "messages": [dict(m) for m in self.messages],
            "system": self.system,
            "text": self.text,
            "tokens": self.tokens,
            "manifest": self.manifest.to_dict(),
            **({"system_blocks": [dict(b) for b in self.system_blocks]} if self.system_blocks is not None else {}),
            **({"cache_key": self.cache_key} if self.cache_key is not None else {}),
        }
