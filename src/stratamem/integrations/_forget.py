"""Deleting the newest turns of a session: the one place adapters delete anything.

The OpenAI Agents SDK's ``pop_item`` removes the newest item of a session.
:func:`forget_session_tail` picks the newest turns and removes them through
:meth:`Memory.forget <stratamem.memory.Memory.forget>`, so everything derived
from them (pyramid nodes, items, vectors, archive frames, manifests) goes too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import ValidationError

if TYPE_CHECKING:
    from ..memory import Memory
    from ..records import StoredTurn

__all__ = ["forget_session_tail"]


def forget_session_tail(memory: Memory, session: str, count: int) -> list[StoredTurn]:
    """Forget the newest ``count`` turns of ``session`` and return them.

    Runs on the caller's thread (``AsyncMemory`` calls it on its worker).

    Raises:
        ValidationError: ``count`` is not positive or the session has fewer turns.
        NotFoundError: Unknown session.
        BackendError: The store failed; nothing was deleted.
    """
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise ValidationError(f"count must be a positive integer, got {count!r}")
    tail = memory.turns(session, limit=count, newest_first=True)
    if len(tail) < count:
        raise ValidationError(f"session {session!r} has {len(tail)} turn(s), cannot forget {count}")
    memory.forget(turns=[t.id for t in tail])
    return tail
