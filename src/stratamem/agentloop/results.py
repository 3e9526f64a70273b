"""What the compactor reports: one compaction attempt, and one prepared request.

:class:`CompactionResult` is returned by :meth:`~stratamem.agentloop.Compactor.compact`
(and inside :class:`PrepareResult` by
:meth:`~stratamem.agentloop.Compactor.prepare_messages`); the state that
persists between calls is :class:`~stratamem.records.ConversationState`.
"""

from __future__ import annotations

from dataclasses import dataclass

from .pruning import PruneStats

__all__ = ["CompactionResult", "PrepareResult"]


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """What one call of :meth:`Compactor.compact` did."""

    status: str
    """``compacted``, ``fallback`` (model failed), ``truncated`` (no model), ``cancelled``, ``not_needed``,
    ``deferred`` (over the threshold, but the minimum-gain rule or the cooldown put it off) or ``capped``
    (compaction disabled: the legacy cap of ``legacy_max_messages`` applied)."""
    compaction_number: int = 0
    """The checkpoint generation this attempt was for."""
    tokens_before: int = 0
    """Calibrated tokens of the request before (system + messages, without the output reserve)."""
    tokens_after: int = 0
    """Calibrated tokens of the request after."""
    messages_before: int = 0
    """Messages before."""
    messages_after: int = 0
    """Messages after."""
    removed_indices: tuple[int, ...] = ()
    """Indices (in the list before) of the messages taken out of the prompt."""
    turn_ids: tuple[int, ...] = ()
    """Stored turn ids of those messages (when a memory is attached)."""
    pinned_indices: tuple[int, ...] = ()
    """Indices kept verbatim because a pre-compaction handler pinned them or their turn holds a decision."""
    split_turn: bool = False
    """Whether complete tool steps of the newest turn had to be compacted too."""
    summary_calls: int = 0
    """Model calls made for the checkpoint."""
    summary_input_tokens: int = 0
    """Input tokens those calls cost (provider-reported, else our count)."""
    summary_output_tokens: int = 0
    """Output tokens those calls cost."""
    missing_sections: tuple[str, ...] = ()
    """Checkpoint sections the model left out."""
    error: str | None = None
    """Why the attempt fell back (error type and message), if it did."""
    reason: str | None = None
    """Why a needed compaction was ``deferred`` (the minimum-gain rule or the cooldown)."""
    sealed_segment: int | None = None
    """Id of the pyramid segment sealed at this compaction, if one was."""
    items_extracted: int = 0
    """Memory items extracted from the new checkpoint."""


@dataclass(frozen=True, slots=True)
class PrepareResult:
    """What :meth:`Compactor.prepare_messages` did before a model call."""

    pruning: PruneStats
    """Tool-output pruning counts."""
    compaction: CompactionResult
    """Compaction outcome (``not_needed`` when under the threshold)."""
    tokens: int
    """Calibrated tokens of the prepared request (without the output reserve)."""
