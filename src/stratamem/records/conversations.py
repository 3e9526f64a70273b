"""Conversation state: what compaction remembers about one live conversation.

One :class:`ConversationState` per (namespace, session): the current
checkpoint, how many compactions made it, how many messages the conversation
has had, the files its tool calls read and modified, and how the last
compaction went (so a failure is visible after the fact, even after a
restart). It is persisted by a :class:`~stratamem.store.base.ConversationStore`
(:class:`~stratamem.store.conversations.Conversations` on both backends);
the rules that change it live in :mod:`stratamem.agentloop.compaction`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

__all__ = ["STATUSES", "ConversationState"]

STATUSES = ("none", "compacted", "fallback", "truncated", "cancelled")
"""Values of :attr:`ConversationState.last_status`: nothing yet; summarized;
summarizer failed so the prompt was truncated; no model configured so the prompt
was truncated; a pre-compaction handler cancelled."""


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class ConversationState:
    """The persisted state of one agent conversation."""

    namespace: str
    """Namespace the conversation belongs to."""
    session: str
    """Session (conversation thread) name."""
    summary: str | None = None
    """The current checkpoint text (``None`` before the first successful compaction)."""
    compaction_count: int = 0
    """Successful compactions so far (the checkpoint's generation)."""
    turn_count: int = 0
    """Messages the conversation has had (stored ones, when a memory is attached)."""
    compacted_messages: int = 0
    """Messages removed from the live prompt by compaction or fallback so far."""
    files_read: tuple[str, ...] = ()
    """Paths the agent's tool calls read, oldest first."""
    files_modified: tuple[str, ...] = ()
    """Paths the agent's tool calls wrote, edited or deleted, oldest first."""
    last_status: str = "none"
    """Outcome of the latest compaction attempt (one of :data:`STATUSES`)."""
    last_error: str | None = None
    """Why the latest attempt fell back, if it did (error type and message, no content)."""
    failures: int = 0
    """Summarizer failures so far."""
    calibration: Mapping[str, float] = field(default_factory=dict)
    """Learned token-count correction per model (see :class:`~stratamem.tokens.Calibration`)."""
    resume_seq: int = 0
    """Sequence number of the first stored turn the latest compaction kept verbatim (0: none yet);
    :meth:`~stratamem.agentloop.Compactor.resume_messages` restarts from there."""
    deferred: int = 0
    """Compactions the minimum-gain rule or the cooldown put off (no summarizer call made)."""
    last_usage: Mapping[str, int | str] = field(default_factory=dict)
    """The latest provider-reported usage seen: ``input_tokens``, ``output_tokens``, ``estimated``, ``model``."""
    updated_at: datetime = field(default_factory=_now)
    """When the state last changed."""
