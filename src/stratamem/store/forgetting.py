"""What a forget removes, as the stores receive it: one plan, applied in one transaction.

The rules (which nodes shrink or go, which items lose their provenance, which
manifests and archive files mention a forgotten turn) live in
:mod:`stratamem.forget`; a store only executes the plan it is given, on its
own tables, all or nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime

__all__ = ["ForgetPlan", "NodeRewrite"]


@dataclass(frozen=True, slots=True)
class NodeRewrite:
    """A pyramid node that keeps some of its turns: its new extent, summary cleared.

    The summary, its token count and the node's embedding are cleared and the
    summary status set to ``pending``: the old summary may quote a forgotten
    turn, so it must go in the same transaction as the turn.
    """

    node_id: int
    turn_count: int
    tokens: int
    first_turn_id: int
    last_turn_id: int
    start: datetime
    end: datetime
    seq_range: tuple[int, int] | None
    """New ``(seq_lo, seq_hi)`` of a segment (``None`` for a consolidation)."""
    warm: tuple[str, str] | None = None
    """New ``(format, content)`` of a warm segment, re-encoded from the turns that remain."""
    view_tokens: int | None = None
    """Tokens of the new warm view (warm segments only)."""


@dataclass(frozen=True, slots=True)
class ForgetPlan:
    """Everything one forget deletes or rewrites in a namespace."""

    namespace: str
    turn_ids: tuple[int, ...]
    """Canonical turns to delete (and their ``node_turns`` rows at every level)."""
    sessions: tuple[str, ...] = ()
    """Sessions whose rows go too (their turns are in ``turn_ids``)."""
    whole_namespace: bool = False
    """Delete every row of the namespace, the namespace row included."""
    delete_nodes: tuple[int, ...] = ()
    """Pyramid nodes left without turns (children before parents)."""
    rewrite_nodes: tuple[NodeRewrite, ...] = ()
    """Pyramid nodes that keep some turns."""
    segment_spans: Mapping[int, tuple[int, int]] = field(default_factory=dict)
    """Segments that only take over a deleted neighbour's sequence span: ``node_id -> (seq_lo, seq_hi)``."""
    archive_refs: Mapping[int, str | None] = field(default_factory=dict)
    """New archive reference of cold segments whose day file is rewritten (``None``: no archived copy)."""
    delete_items: tuple[int, ...] = ()
    """Memory items whose every source is forgotten (or that belong to a forgotten session)."""
    item_provenance: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    """Items re-sourced to the provenance that remains."""
    delete_manifests: tuple[int, ...] = ()
    """Recorded manifests that mention a forgotten turn, node or item."""
    conversations: tuple[str, ...] = ()
    """Sessions whose agent-loop state (checkpoint) is dropped."""
    embedding_hashes: tuple[str, ...] = ()
    """Content hashes of forgotten texts in the embedding cache (every model)."""
    archive_pending: Mapping[str, str] = field(default_factory=dict)
    """Archive day files to finish after commit: ``file -> "replace" | "delete"`` (recorded in the
    same transaction, so a crash before the files are done is finished on the next open)."""
