"""Records of the memory-item API: items, recall/spill results, status, suggestions and metrics.

Pure frozen values with their JSON form (``to_dict``), shared by the library
(:mod:`stratamem.items`), the store, the CLI and the MCP server, and the checks
an item's fields pass. The rules that produce them live in :mod:`stratamem.items`
and its part modules; the SQL in :mod:`stratamem.store.item_reads` and
:mod:`stratamem.store.item_store`.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..errors import ValidationError
from .checks import MAX_JSON_INT, check_json, check_text, format_timestamp

__all__ = [
    "DEAD_REVIEWS",
    "FACT_KEY_PREFIX",
    "ITEM_TYPES",
    "LATENCY_BUCKETS_MS",
    "REVIEW_STATES",
    "SCOPES",
    "TIERS",
    "ItemMetrics",
    "ItemStatus",
    "MemoryItem",
    "RecallResult",
    "Refusal",
    "SpillResult",
    "Suggestion",
    "TierStatus",
    "check_choice",
    "check_content",
    "check_item_id",
    "check_metadata",
    "check_scope",
    "fact_key",
    "fact_text",
    "latency_bucket_name",
    "visible_in",
]

ITEM_TYPES: tuple[str, ...] = ("fact", "decision", "entity", "preference", "event", "context", "message")
"""Kinds of memory item: seed 003's list (``message`` for a conversation turn kept as an item,
as in its Example 1), with ``preference`` and ``event`` (something that happened or is planned,
its ``valid_from`` the day it happens)."""

SCOPES: tuple[str, ...] = ("namespace", "session")
"""Who sees an item: the whole namespace, or only its own session (``session`` names it)."""

TIERS: tuple[str, ...] = ("hot", "warm", "cold")
"""Hot items are in the prompt; warm and cold are recalled on demand (warm ones are accessed more)."""

REVIEW_STATES: tuple[str, ...] = ("pending", "confirmed", "rejected", "dropped")
"""Review states of auto-extracted items (API items have none). ``dropped``: left out by the
review queue's cap (``items.max_pending_review``) as one of the least salient; kept, not live,
so the same fact is not extracted again (its source turns stay recallable)."""

DEAD_REVIEWS: tuple[str, ...] = ("rejected", "dropped")
"""Review states that take an item out of hot, recall and contexts."""

_WORD_RUN = re.compile(r"[^\W_]+")

FACT_KEY_PREFIX = "n1:"
"""Tag of :func:`fact_key` values: the normalisation's version (a change gets a new tag, never a silent split)."""


def fact_text(text: str) -> str:
    """The text two statements of one fact share: accents folded, case folded, runs of letters and digits.

    ``"Caroline: I moved to Denver!"`` and ``"caroline -- i moved to  denver"`` give
    the same; punctuation, spacing and case never make a second item.
    """
    folded = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return " ".join(_WORD_RUN.findall(folded.casefold()))


def fact_key(text: str) -> str:
    """The store's uniqueness key of an extracted item's text (tagged sha-256 of :func:`fact_text`).

    One extracted item per key and namespace: the stores' unique index
    (``m018_item_facts``) enforces it, whatever the writer. A text with no
    letter or digit at all is keyed by its own words, so two such texts stay apart.
    """
    basis = fact_text(text) or " ".join(text.split())
    return FACT_KEY_PREFIX + hashlib.sha256(basis.encode("utf-8")).hexdigest()[:32]


def _ts(value: datetime | None) -> str | None:
    return format_timestamp(value) if value is not None else None


@dataclass(frozen=True, slots=True)
class MemoryItem:
    """One unit of long-term knowledge, as stored."""

    id: int
    """Store-assigned id (unique in the store; meaningful only within its namespace)."""
    namespace: str
    """Owner."""
    content: str
    """The knowledge, as text."""
    type: str
    """One of :data:`ITEM_TYPES`."""
    tier: str
    """One of :data:`TIERS`."""
    tokens: int
    """Exact token count of ``content`` with the store's tokenizer."""
    access_count: int
    """How many recalls returned it."""
    last_accessed_at: datetime | None
    """When a recall last returned it."""
    created_at: datetime
    """When it was added."""
    relevance: float
    """Running relevance (0–1): 1.0 when added or promoted, averaged with each recall's match score."""
    source: str
    """``api`` (added by a caller) or ``extracted`` (from segment summaries)."""
    provenance: tuple[int, ...] = ()
    """Turn ids it was extracted from (empty for API items)."""
    session: str | None = None
    """Session it was added in, if any (the one it belongs to when ``scope == "session"``)."""
    review: str | None = None
    """For extracted items: ``pending``, ``confirmed``, ``rejected`` or ``dropped``; ``None`` for API items."""
    key: str | None = None
    """Subject key; a newer live item with the same key supersedes this one."""
    valid_from: datetime | None = None
    """Start of the time the item holds true, if known."""
    valid_to: datetime | None = None
    """End of that time; set when a newer item supersedes this one."""
    superseded_by: int | None = None
    """Id of the newer item that replaced this one (then it is out of recall by default).

    It stays set if that item is pruned later: ids are never reused, and a fact
    once replaced does not come back."""
    supersedes: tuple[int, ...] = ()
    """Ids of the older items this one replaced."""
    promoted_at: datetime | None = None
    """Last promotion to hot."""
    demoted_at: datetime | None = None
    """Last spill out of hot."""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    """Caller's JSON metadata."""
    embedded: bool = False
    """Whether the item has a vector (semantic recall can find it)."""
    scope: str = "namespace"
    """``namespace`` (every session sees it) or ``session`` (only reads in ``session`` see it)."""
    salience: float | None = None
    """For extracted items: how likely the statement is a durable fact (0-1) by the extractor's
    score; ``None`` for API items. The review queue's cap keeps the most salient."""

    @property
    def live(self) -> bool:
        """Neither superseded, rejected nor dropped: eligible for hot and for default recall."""
        return self.superseded_by is None and self.review not in DEAD_REVIEWS

    def to_dict(self) -> dict[str, Any]:
        """JSON form (timestamps as canonical UTC strings)."""
        return {
            "id": self.id,
            "namespace": self.namespace,
            "content": self.content,
            "type": self.type,
            "tier": self.tier,
            "tokens": self.tokens,
            "access_count": self.access_count,
            "last_accessed_at": _ts(self.last_accessed_at),
            "created_at": _ts(self.created_at),
            "relevance": round(self.relevance, 4),
            "source": self.source,
            "provenance": list(self.provenance),
            "session": self.session,
            "review": self.review,
            "key": self.key,
            "valid_from": _ts(self.valid_from),
            "valid_to": _ts(self.valid_to),
            "superseded_by": self.superseded_by,
            "supersedes": list(self.supersedes),
            "promoted_at": _ts(self.promoted_at),
            "demoted_at": _ts(self.demoted_at),
            "metadata": dict(self.metadata),
            "embedded": self.embedded,
            "scope": self.scope,
            "salience": None if self.salience is None else round(self.salience, 4),
        }


@dataclass(frozen=True, slots=True)
class Refusal:
    """A promotion a recall wanted but did not make, and why."""

    item_id: int
    """The item."""
    reason: str
    """``hot_full`` (no room without evicting items promoted within the cooldown) or
    ``too_large`` (larger than the hot limit)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"item_id": self.item_id, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class SpillResult:
    """What a spill moved."""

    spilled: tuple[int, ...]
    """Ids moved out of hot, in spill order."""
    to_warm: tuple[int, ...]
    """Those that went warm (accessed more than the warm threshold)."""
    to_cold: tuple[int, ...]
    """Those that went cold."""
    tokens: int
    """Tokens freed in hot."""

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "spilled_count": len(self.spilled),
            "spilled": list(self.spilled),
            "to_warm": list(self.to_warm),
            "to_cold": list(self.to_cold),
            "tokens": self.tokens,
        }


@dataclass(frozen=True, slots=True)
class RecallResult:
    """Items found by a recall, best first, with scores and what was promoted."""

    query: str
    """The query."""
    items: tuple[MemoryItem, ...]
    """Matching items (after a recall: access count, relevance and tier updated; after a search: as stored)."""
    scores: Mapping[int, float]
    """Match score (0–1) of each returned item for this query."""
    semantic: Mapping[int, float]
    """Cosine similarity of each returned item (empty in lexical mode)."""
    lexical: Mapping[int, float]
    """Share of the query's content words each returned item contains."""
    promoted: tuple[int, ...]
    """Ids moved to hot by this recall."""
    refused: tuple[Refusal, ...]
    """Promotions this recall wanted but did not make."""
    spilled: tuple[int, ...]
    """Ids spilled to make room for the promotions."""
    mode: str
    """``hybrid`` (semantic + lexical) or ``lexical`` (no embedder configured)."""
    latency_ms: float
    """Wall time of the recall, including ``embed_ms``."""
    embed_ms: float = 0.0
    """Time spent embedding the query (0 in lexical mode)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "query": self.query,
            "mode": self.mode,
            "items": [{**i.to_dict(), "score": round(self.scores[i.id], 4)} for i in self.items],
            "promoted": list(self.promoted),
            "refused": [r.to_dict() for r in self.refused],
            "spilled": list(self.spilled),
            "latency_ms": round(self.latency_ms, 3),
            "embed_ms": round(self.embed_ms, 3),
        }


@dataclass(frozen=True, slots=True)
class Suggestion:
    """Something the caller may want to do about the tiers (seed 003)."""

    type: str
    """``spill``, ``recall`` or ``prune``."""
    reason: str
    """Why, in a sentence."""
    item_ids: tuple[int, ...] = ()
    """Items the suggestion concerns."""

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"type": self.type, "reason": self.reason, "item_ids": list(self.item_ids)}


@dataclass(frozen=True, slots=True)
class TierStatus:
    """Items and tokens held in one tier."""

    items: int
    """Number of items."""
    tokens: int
    """Sum of their token counts."""


LATENCY_BUCKETS_MS: tuple[float, ...] = (1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500)
"""Upper bounds of the recall-latency histogram buckets (an implicit ``+Inf`` follows)."""


def latency_bucket_name(bound: float) -> str:
    """The persisted counter name of the recall-latency bucket with upper bound ``bound``."""
    return f"recall_latency_le_{bound:g}"


@dataclass(frozen=True, slots=True)
class ItemMetrics:
    """A namespace's memory-item metrics at one moment."""

    namespace: str
    """The namespace."""
    hot_tokens: int
    """Tokens of the hot items now."""
    hot_limit: int
    """The hot token limit."""
    spills: int
    """Spill operations (automatic and explicit)."""
    spilled_items: int
    """Items moved out of hot by spills."""
    recalls: int
    """Recall calls."""
    recall_hits: int
    """Recalls that returned at least one item."""
    promotions: int
    """Items promoted to hot."""
    promotions_refused: int
    """Promotions a recall wanted but the anti-thrash rules or hot capacity refused."""
    recall_latency_ms_sum: float
    """Total recall time in milliseconds."""
    recall_latency_buckets: tuple[tuple[float, int], ...]
    """Cumulative ``(upper bound ms, recalls at or under it)``."""

    @property
    def hot_utilization(self) -> float:
        """Hot tokens over the hot limit (0–1; may exceed 1 only if the limit was lowered)."""
        return self.hot_tokens / self.hot_limit if self.hot_limit else 0.0

    @property
    def hit_rate(self) -> float:
        """Share of recalls that found something (0 before the first recall)."""
        return self.recall_hits / self.recalls if self.recalls else 0.0

    @property
    def recall_latency_ms_mean(self) -> float:
        """Mean recall latency in milliseconds (0 before the first recall)."""
        return self.recall_latency_ms_sum / self.recalls if self.recalls else 0.0

    @classmethod
    def from_values(cls, namespace: str, values: Mapping[str, float], hot_tokens: int, hot_limit: int) -> ItemMetrics:
        """Build from the persisted name → value map."""

        def n(name: str) -> int:
            return int(values.get(name, 0))

        return cls(
            namespace,
            hot_tokens,
            hot_limit,
            n("spills"),
            n("spilled_items"),
            n("recalls"),
            n("recall_hits"),
            n("promotions"),
            n("promotions_refused"),
            float(values.get("recall_latency_ms_sum", 0.0)),
            tuple((b, n(latency_bucket_name(b))) for b in LATENCY_BUCKETS_MS),
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON form, including the derived rates."""
        return {
            "namespace": self.namespace,
            "hot_tokens": self.hot_tokens,
            "hot_limit": self.hot_limit,
            "hot_utilization": round(self.hot_utilization, 4),
            "spills": self.spills,
            "spilled_items": self.spilled_items,
            "recalls": self.recalls,
            "recall_hits": self.recall_hits,
            "hit_rate": round(self.hit_rate, 4),
            "promotions": self.promotions,
            "promotions_refused": self.promotions_refused,
            "recall_latency_ms_mean": round(self.recall_latency_ms_mean, 3),
            "recall_latency_ms_sum": round(self.recall_latency_ms_sum, 3),
        }


@dataclass(frozen=True, slots=True)
class ItemStatus:
    """Per-tier counts, hot utilization, flags, suggestions and metrics of a namespace."""

    namespace: str
    """The namespace."""
    hot: TierStatus
    """Hot tier."""
    warm: TierStatus
    """Warm tier."""
    cold: TierStatus
    """Cold tier."""
    hot_limit: int
    """Hot token limit."""
    flags: Mapping[str, int]
    """Counts of superseded, pending-review, rejected, dropped and not-embedded items."""
    suggestions: tuple[Suggestion, ...]
    """What to do next, if anything."""
    metrics: ItemMetrics
    """Counters and rates."""
    semantic: bool
    """Whether recall uses an embedder (otherwise it is lexical only)."""
    review_cap: int = 0
    """The review queue's cap (``items.max_pending_review``): at most this many extracted items wait for review."""

    @property
    def waiting(self) -> str:
        """One line for a person: ``"12 items waiting for review (cap 500)"``."""
        return f"{self.flags.get('pending_review', 0)} items waiting for review (cap {self.review_cap})"

    @property
    def utilization_percent(self) -> float:
        """Hot tokens as a percentage of the hot limit."""
        return 100.0 * self.hot.tokens / self.hot_limit if self.hot_limit else 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON form, shaped like seed 003's ``MemoryStatus``."""
        return {
            "namespace": self.namespace,
            "hot": {
                "items": self.hot.items,
                "tokens": self.hot.tokens,
                "limit": self.hot_limit,
                "utilization_percent": round(self.utilization_percent, 2),
            },
            "warm": {"items": self.warm.items, "tokens": self.warm.tokens},
            "cold": {"items": self.cold.items, "tokens": self.cold.tokens},
            "flags": dict(self.flags),
            "review": {
                "pending": self.flags.get("pending_review", 0),
                "cap": self.review_cap,
                "dropped": self.flags.get("dropped", 0),
            },
            "recall_mode": "hybrid" if self.semantic else "lexical",
            "suggestions": [s.to_dict() for s in self.suggestions],
            "metrics": self.metrics.to_dict(),
        }


def check_item_id(value: object) -> int:
    """An item id as an int (digit strings accepted), else ValidationError."""
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            value = int(str(value))
        except ValueError:
            raise ValidationError(f"item ids are integers, got {value!r}") from None
    if not -MAX_JSON_INT <= value <= MAX_JSON_INT:
        raise ValidationError("item ids are 64-bit integers (up to 2^63-1)", path="id")
    return int(value)


def check_choice(value: object, choices: tuple[str, ...], what: str) -> str:
    """``value`` if it is one of ``choices``, else ValidationError naming ``what``."""
    if value not in choices:
        raise ValidationError(f"{value!r} is not one of {', '.join(choices)}", path=what)
    return str(value)


def check_content(value: object, what: str = "content") -> str:
    """Storable, non-blank text, else ValidationError."""
    text = check_text(value, what)
    if not text.strip():
        raise ValidationError("must not be empty", path=what)
    return text


def check_scope(scope: object, session: str | None) -> str:
    """``scope`` if it is one of :data:`SCOPES` and a session-scoped item names its session, else ValidationError."""
    scope = check_choice(scope, SCOPES, "scope")
    if scope == "session" and session is None:
        raise ValidationError("a session-scoped item needs session=<name>", path="session")
    return scope


def visible_in(item: MemoryItem, session: str | None) -> bool:
    """Whether a read in ``session`` (``None``: no session) sees ``item``.

    Namespace-wide items are seen everywhere in their namespace; a session-scoped
    item only by reads in its own session. The stores' SQL filter
    (:func:`stratamem.store.sqlite.items.view_clause`) says the same.
    """
    return item.scope == "namespace" or (session is not None and item.session == session)


def check_metadata(metadata: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """A JSON-serializable copy of ``metadata`` (or None), else ValidationError."""
    if metadata is None:
        return None
    if not isinstance(metadata, Mapping):
        raise ValidationError(f"metadata must be a JSON object, got {type(metadata).__name__}", path="metadata")
    check_json(dict(metadata), "metadata", error=ValidationError)
    return dict(metadata)
