"""Retention of cold content (seed 000: ``cold_retention_days``, 0 = forever).

Archived content is kept by day file; :func:`apply_retention` deletes the day
files archived more than ``cold_retention_days`` ago and forgets the
references to them. Summaries, key facts, themes and provenance (turn ids)
stay: the memory degrades to its summaries, it does not forget that the
conversation happened. With ``retention_purges_turns`` the canonical turns of
those segments are deleted too; otherwise they stay in the store and
:meth:`~stratamem.pyramid.Pyramid.expand` still reads them.

Retention runs only when called (``stratamem retention``, or your scheduler);
nothing is deleted as a side effect of adding turns.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, time, timedelta, timezone
from typing import Any

from .events import Event
from .pyramid import Pyramid

__all__ = ["RetentionReport", "apply_retention"]


@dataclass(frozen=True, slots=True)
class RetentionReport:
    """What a retention run removed."""

    cutoff: datetime | None
    """Content archived before this instant was expired (``None``: retention is off)."""
    files: tuple[str, ...]
    """Archive day files deleted."""
    nodes: int
    """Segments whose archived content was expired."""
    turns_deleted: int
    """Canonical turns deleted (only with ``retention_purges_turns``)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"cutoff": self.cutoff.isoformat() if self.cutoff else None, "files": list(self.files),
                "nodes": self.nodes, "turns_deleted": self.turns_deleted}


def apply_retention(pyramid: Pyramid, *, now: datetime | None = None) -> RetentionReport:
    """Expire archived cold content older than ``cold_retention_days``.

    Whole day files expire together: the cutoff is rounded down to midnight
    UTC, and a file is deleted only when every frame in it is older.

    Args:
        pyramid: The namespace's pyramid.
        now: The current time (default: the pyramid's clock).

    Raises:
        ArchiveError: A file cannot be deleted (references to it are kept).
        BackendError: The store failed; nothing was changed in it.
    """
    days = pyramid.config.pyramid.cold_retention_days
    if days == 0:
        return RetentionReport(None, (), 0, 0)
    now = now or pyramid.clock()
    cutoff = datetime.combine((now - timedelta(days=days)).date(), time(0), tzinfo=timezone.utc)
    nodes = pyramid.store.nodes
    expired = nodes.archived_before(pyramid.namespace, cutoff)
    purge = pyramid.config.pyramid.retention_purges_turns
    deleted = 0
    with pyramid.store.transaction():
        nodes.clear_archive([n for n, _ in expired])
        if purge:
            ids = [t for n, _ in expired for t in nodes.turn_ids(n)]
            deleted = nodes.delete_turns(ids)
        # Files go last: if the store write fails, the files (and references) are untouched.
        files = tuple(pyramid.archive.delete_before(cutoff.date())) if pyramid.archive is not None else ()
    pyramid.events.emit(Event("retention.applied", {"nodes": len(expired), "files": len(files),
                                                    "turns_deleted": deleted}, namespace=pyramid.namespace))
    return RetentionReport(cutoff, files, len(expired), deleted)
