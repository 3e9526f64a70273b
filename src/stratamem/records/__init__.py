"""The ground floor: every value the layers exchange, as frozen records with a JSON form.

Records depend on nothing but :mod:`stratamem.errors`; the store, the engine
packages and the shells all speak them. One module per concept:

* :mod:`~stratamem.records.checks` — name and text checks, canonical UTC timestamps;
* :mod:`~stratamem.records.blocks` — content blocks (text, image, tool call, tool result, thinking);
* :mod:`~stratamem.records.turns` — :class:`Turn`, :class:`Session`, :class:`StoredTurn`;
* :mod:`~stratamem.records.summaries` — :class:`Summary` and its sentences and key facts;
* :mod:`~stratamem.records.nodes` — pyramid :class:`Node` and :class:`TierStats`;
* :mod:`~stratamem.records.items` — :class:`MemoryItem`, recall/spill results, item status and metrics;
* :mod:`~stratamem.records.manifests` — :class:`Context`, :class:`ContextItem`, :class:`Manifest`, :class:`NearMiss`;
* :mod:`~stratamem.records.conversations` — :class:`ConversationState` (compaction's checkpoint state).

Names two modules share (``TIERS`` of nodes and of items) and helpers of one
concept (the item checks, ``summaries.render``, ``conversations.STATUSES``) are
imported from their module.
"""

from __future__ import annotations

from .blocks import Block, ImageBlock, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock, block_from_dict
from .checks import check_name, check_text, format_timestamp, parse_timestamp
from .conversations import ConversationState
from .items import (
    ITEM_TYPES,
    REVIEW_STATES,
    SCOPES,
    ItemMetrics,
    ItemStatus,
    MemoryItem,
    RecallResult,
    Refusal,
    SpillResult,
    Suggestion,
    TierStatus,
)
from .manifests import Context, ContextItem, Manifest, NearMiss
from .nodes import SUMMARY_STATUSES, Node, SummaryStatus, Tier, TierStats
from .summaries import KeyFact, Sentence, Summary
from .turns import ROLES, Role, Session, StoredTurn, Turn

__all__ = [
    "ITEM_TYPES",
    "REVIEW_STATES",
    "ROLES",
    "SCOPES",
    "SUMMARY_STATUSES",
    "Block",
    "Context",
    "ContextItem",
    "ConversationState",
    "ImageBlock",
    "ItemMetrics",
    "ItemStatus",
    "KeyFact",
    "Manifest",
    "MemoryItem",
    "NearMiss",
    "Node",
    "RecallResult",
    "Refusal",
    "Role",
    "Sentence",
    "Session",
    "SpillResult",
    "StoredTurn",
    "Suggestion",
    "Summary",
    "SummaryStatus",
    "TextBlock",
    "ThinkingBlock",
    "Tier",
    "TierStats",
    "TierStatus",
    "ToolResultBlock",
    "ToolUseBlock",
    "Turn",
    "block_from_dict",
    "check_name",
    "check_text",
    "format_timestamp",
    "parse_timestamp",
]
