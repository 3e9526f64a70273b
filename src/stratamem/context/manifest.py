"""What an assembled context holds and why: context items, near-misses, the manifest.

Nothing enters a prompt without a reason (seed 004). Every piece of an
assembled :class:`Context` is listed in its :class:`Manifest` with its tokens,
its reason and its score breakdown; what competed for a slot and did not fit is
listed as a :class:`NearMiss`. The assembly itself lives in :mod:`stratamem.context`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ..records import format_timestamp

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

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"id": self.id, "kind": self.kind, "tier": self.tier, "format": self.format,
                "tokens": self.tokens, "reason": self.reason, "score": dict(self.score),
                "turn_ids": list(self.turn_ids)}


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
    """Why it was left out, e.g. ``over_budget``, ``duplicate_of:turn:42``."""
    score: Mapping[str, float] = field(default_factory=dict)
    """Its score breakdown."""

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"id": self.id, "kind": self.kind, "tokens": self.tokens, "reason": self.reason,
                "score": dict(self.score)}


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
    created_at: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    """When the context was assembled."""

    def to_dict(self) -> dict[str, Any]:
        """JSON form (as stored and shown by ``stratamem context --explain``)."""
        return {"timestamp": format_timestamp(self.created_at), "budget_tokens": self.budget,
                "total_tokens": self.total_tokens, "policy": self.policy, "query": self.query,
                "tokenizer": self.tokenizer, "notes": list(self.notes),
                "items": [i.to_dict() for i in self.items],
                "near_misses": [n.to_dict() for n in self.near_misses]}


@dataclass(frozen=True, slots=True)
class Context:
    """An assembled context, rendered for one provider, with its manifest."""

    format: str
    """``openai``, ``anthropic`` or ``text``."""
    messages: tuple[Mapping[str, Any], ...]
    """Provider messages (empty for ``text``)."""
    system: str | None
    """System prompt for ``anthropic`` (``None`` otherwise)."""
    text: str
    """Plain-text rendering (for ``text``; also handy for logging sizes)."""
    manifest: Manifest
    """What is in it and why."""

    @property
    def tokens(self) -> int:
        """Exact tokens of the rendered context."""
        return self.manifest.total_tokens
