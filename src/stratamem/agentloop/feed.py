"""After a compaction: seal the pyramid segment and keep the checkpoint's durable facts.

Seed 001 phase 3. A compaction is an episode boundary and the moment to keep
knowledge before context is compressed, so with a :class:`~stratamem.Memory`
it seals the session's open turns into a pyramid segment and stores the
checkpoint's decisions, constraints and critical context as extracted memory
items — through the public ``Memory.seal`` and ``Items.extract_facts``. With a
project directory (``Memory(project_dir=...)``) the checkpoint's completed work
and decisions reach the working state's ``state.json`` too (seed 004: what is
completed is promoted to medium-term memory). All are derived work over
committed turns: a failure is returned for the caller to report, never raised. The rules of compaction itself live in
:mod:`stratamem.agentloop.compaction`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..config import CompactionConfig
from .checkpoint import checkpoint_facts, checkpoint_progress

if TYPE_CHECKING:
    from ..memory import Memory

__all__ = ["feed_memory"]

log = logging.getLogger("stratamem.agentloop.feed")


def feed_memory(
    memory: Memory, session: str, config: CompactionConfig, checkpoint: str | None, turn_ids: tuple[int, ...]
) -> tuple[int | None, int, list[str]]:
    """Seal ``session``'s open turns and extract ``checkpoint``'s facts with ``turn_ids`` as provenance.

    Sealing runs when ``config.seal_segment`` is on and the memory's pyramid is
    enabled; extraction when ``config.extract_items`` is on and there is a new
    checkpoint. Facts the namespace already has are skipped by ``extract_facts``.

    Returns:
        ``(sealed segment id or None, items extracted, problems)``; each problem is
        ``"step: ErrorType: message"``.
    """
    sealed: int | None = None
    extracted = 0
    problems: list[str] = []
    if config.seal_segment and memory.config.pyramid.enabled:
        try:
            node = memory.seal(session)
            sealed = node.id if node is not None else None
        except Exception as exc:  # noqa: BLE001 - derived structure: reported by the caller
            problems.append(f"seal: {type(exc).__name__}: {exc}")
    if config.extract_items and checkpoint and turn_ids:
        facts = checkpoint_facts(checkpoint)
        if facts:
            try:
                items = memory.items.extract_facts([(text, kind, turn_ids) for text, kind in facts], session=session)
                extracted = len(items)
            except Exception as exc:  # noqa: BLE001 - derived knowledge: reported by the caller
                problems.append(f"items: {type(exc).__name__}: {exc}")
    project = getattr(memory, "project_dir", None)
    if checkpoint and project is not None:
        done, decisions = checkpoint_progress(checkpoint)
        if done or decisions:
            try:
                memory.state(project).promote(done, decisions)
            except Exception as exc:  # noqa: BLE001 - derived knowledge: reported by the caller
                problems.append(f"state: {type(exc).__name__}: {exc}")
    if problems:
        log.warning(
            "after compaction of session %r: %s", session, "; ".join(":".join(p.split(":", 2)[:2]) for p in problems)
        )
    return sealed, extracted, problems
