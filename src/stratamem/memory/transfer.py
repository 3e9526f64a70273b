"""Export and import of one namespace: the :meth:`stratamem.Memory.export` and ``import_`` bodies."""

from __future__ import annotations

from typing import IO, Any

from ..exchange import plan_import, read_export, write_export
from ..ingest import IngestSession

__all__ = ["export_from", "import_into"]


def export_from(memory: Any, out: IO[str]) -> tuple[int, int]:
    """Write ``memory``'s namespace as JSON Lines (see :meth:`stratamem.Memory.export`)."""
    store = memory.store
    return write_export(
        out,
        memory.namespace,
        memory.tokenizer.name,
        store.sessions(memory.namespace),
        store.iter_turns(memory.namespace),
    )


def import_into(memory: Any, source: IO[str], *, dedupe: bool = True) -> tuple[int, int, int]:
    """Import an export into ``memory``'s namespace in one transaction (see :meth:`stratamem.Memory.import_`)."""
    data = read_export(source)
    with memory.store.transaction():
        plan = plan_import(memory.store, memory.namespace, data, dedupe=dedupe)
        for s in data.sessions:
            # Create sessions even when empty, so an export round-trips exactly.
            memory.store.ensure_session(
                memory.namespace, s.name, platform=s.platform, channel=s.channel, created_at=s.created_at
            )
        stored = memory._append_sessions(
            [
                IngestSession(s.name, plan.turns[s.name], platform=s.platform, channel=s.channel)
                for s in data.sessions
                if plan.turns[s.name]
            ]
        )
    # Only committed turns may reach the derived structures.
    memory._derived.after_add(stored)
    return len(data.sessions), len(stored), plan.skipped
