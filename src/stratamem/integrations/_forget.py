"""Deleting the newest turns of a session: the one place adapters delete anything.

The OpenAI Agents SDK's ``pop_item`` removes the newest item of a session. The
store protocol has no deletion yet (``Memory.forget`` is being built on the
``forget`` branch); until it lands, :func:`forget_session_tail` deletes the
newest turns itself, and only when that is safe without touching derived data:
the turns must not be sealed into a pyramid segment (nothing but the open tail
is removed, so no node, archive or summary refers to them). Swap this function
for ``Memory.forget`` when it is merged; nothing else in the adapters deletes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import StratamemError, ValidationError

if TYPE_CHECKING:
    from ..memory import Memory
    from ..records import StoredTurn

__all__ = ["forget_session_tail"]


def forget_session_tail(memory: Memory, session: str, count: int) -> list[StoredTurn]:
    """Delete the newest ``count`` turns of ``session`` in one transaction and return them.

    The session's sequence counter moves back with them, so sequences stay
    gap-free. Runs on the caller's thread (``AsyncMemory`` calls it on its worker).

    Raises:
        ValidationError: ``count`` is not positive, the session has fewer turns, or a turn
            is already sealed into a pyramid segment (deleting it needs ``Memory.forget``).
        NotFoundError: Unknown session.
        BackendError: The store failed; nothing was deleted.
    """
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise ValidationError(f"count must be a positive integer, got {count!r}")
    tail = memory.turns(session, limit=count, newest_first=True)
    if len(tail) < count:
        raise ValidationError(f"session {session!r} has {len(tail)} turn(s), cannot forget {count}")
    if memory.config.pyramid.enabled:
        open_ids = {t.id for t in memory.pyramid.open_turns(session)}
        if any(t.id not in open_ids for t in tail):
            raise ValidationError(f"the newest turns of session {session!r} are sealed into a pyramid segment; "
                                  "removing them needs Memory.forget")
    store = memory.store
    ns = memory.namespace
    with store.transaction():
        if store.backend == "sqlite":
            conn = store.connection  # type: ignore[attr-defined]
            row = conn.execute("SELECT s.id, s.last_seq FROM sessions s JOIN namespaces n ON n.id = s.namespace_id "
                               "WHERE n.name = ? AND s.name = ?", (ns, session)).fetchone()
            last = row[1]
            deleted = conn.execute("DELETE FROM turns WHERE session_id = ? AND seq > ?",
                                   (row[0], last - count)).rowcount
            conn.execute("UPDATE sessions SET last_seq = ? WHERE id = ?", (last - count, row[0]))
        else:
            with store.connection() as conn:  # type: ignore[attr-defined]
                # The row lock on the session serializes this with appends to it.
                sid, last = conn.execute("SELECT id, last_seq FROM sessions WHERE namespace = %s AND name = %s "
                                         "FOR UPDATE", (ns, session)).fetchone()
                deleted = conn.execute("DELETE FROM turns WHERE namespace = %s AND session_id = %s AND seq > %s",
                                       (ns, sid, last - count)).rowcount
                conn.execute("UPDATE sessions SET last_seq = %s WHERE namespace = %s AND id = %s",
                             (last - count, ns, sid))
        if deleted != count or tail[0].seq != last:
            # Another writer got in between the read and the lock: roll back, change nothing.
            raise StratamemError(f"session {session!r} changed while forgetting its newest turns; nothing deleted")
    return tail

