"""Retention of cold content (seed 000: ``cold_retention_days``, 0 = forever).

:func:`apply_retention` expires the archived content of segments archived
more than ``cold_retention_days`` ago (whole days: the cutoff is midnight
UTC) and forgets their references. Summaries, key facts, themes and
provenance (turn ids) stay: the memory degrades to its summaries, it does
not forget that the conversation happened. With ``retention_purges_turns``
the canonical turns of those segments are deleted too; otherwise they stay in
the store and :meth:`~stratamem.pyramid.Pyramid.expand` still reads them.

A segment's archive day file and its ``archived_at`` come from the same
instant of the pyramid's clock, so a node expires together with its file.
A day file is deleted only when no node of the namespace refers to it any
more, and only after the store transaction that dropped the references has
committed: a failure leaves every reference pointing at a file that exists.
Day files older than the cutoff that nothing refers to (a deletion that
failed last time, a frame whose transaction rolled back) go too.

Retention runs only when called (``stratamem retention``, or your scheduler);
nothing is deleted as a side effect of adding turns.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Any

from ..errors import ArchiveError
from ..events import Event
from .archive import Archive
from .consolidate import Pyramid

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
        return {
            "cutoff": self.cutoff.isoformat() if self.cutoff else None,
            "files": list(self.files),
            "nodes": self.nodes,
            "turns_deleted": self.turns_deleted,
        }


def apply_retention(pyramid: Pyramid, *, now: datetime | None = None) -> RetentionReport:
    """Expire archived cold content older than ``cold_retention_days``.

    Args:
        pyramid: The namespace's pyramid.
        now: The current time (default: the pyramid's clock).

    Raises:
        ArchiveError: A file cannot be deleted (the store is already updated;
            the next run deletes the file).
        BackendError: The store failed; nothing was changed, no file deleted.
    """
    days = pyramid.config.pyramid.cold_retention_days
    if days == 0:
        return RetentionReport(None, (), 0, 0)
    now = now or pyramid.clock()
    cutoff = datetime.combine((now - timedelta(days=days)).date(), time(0), tzinfo=UTC)
    nodes, ns = pyramid.store.nodes, pyramid.namespace
    deleted = 0
    with pyramid.store.transaction():
        nodes.lock(ns)
        expired = nodes.archived_before(ns, cutoff)
        nodes.clear_archive(ns, [n for n, _ in expired])
        if pyramid.config.pyramid.retention_purges_turns:
            deleted = nodes.delete_turns(ns, [t for n, _ in expired for t in nodes.turn_ids(ns, n)])
    if deleted:
        pyramid._newest = (0, None, None)  # a purged turn may have held the newest time: recompute it
    files: tuple[str, ...] = ()
    if pyramid.archive is not None:
        live = nodes.archive_refs(ns)
        files = _delete_unreferenced(pyramid.archive, [ref for _, ref in expired], live, cutoff)
    pyramid.events.emit(
        Event("retention.applied", {"nodes": len(expired), "files": len(files), "turns_deleted": deleted}, namespace=ns)
    )
    return RetentionReport(cutoff, files, len(expired), deleted)


def _file(ref: str) -> str | None:
    # A reference that does not parse names no file, so it can neither expire one nor keep one alive.
    try:
        return Archive.file_of(ref)
    except ArchiveError:
        return None


def _delete_unreferenced(
    archive: Archive, expired: Iterable[str], live: Iterable[str], cutoff: datetime
) -> tuple[str, ...]:
    """Delete the day files of expired references (and old orphans) that no live reference names."""
    candidates = {_file(r) for r in expired} | {
        p.name for p in archive.files() if Archive.day_of(p.name) < cutoff.date()
    }
    keep = {_file(r) for r in live}
    return tuple(archive.delete(sorted(n for n in candidates - keep if n is not None)))
