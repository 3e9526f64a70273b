"""What the shells show about a live conversation: checkpoint, compactions, failures, last usage.

One function, :func:`conversation_report`, read by ``stratamem conversation show``
and the MCP tool ``conversation_show``, so both say the same thing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import NotFoundError
from ..records import check_name, format_timestamp
from ..records.conversations import ConversationState

if TYPE_CHECKING:
    from ..memory import Memory

__all__ = ["conversation_report", "state_report"]


def state_report(state: ConversationState) -> dict[str, Any]:
    """One conversation state as plain JSON data (the checkpoint text included)."""
    return {
        "session": state.session,
        "checkpoint": state.summary,
        "compaction_count": state.compaction_count,
        "last_status": state.last_status,
        "last_error": state.last_error,
        "failures": state.failures,
        "deferred": state.deferred,
        "turn_count": state.turn_count,
        "compacted_messages": state.compacted_messages,
        "resume_seq": state.resume_seq,
        "files_read": list(state.files_read),
        "files_modified": list(state.files_modified),
        "last_usage": dict(state.last_usage),
        "calibration": dict(state.calibration),
        "updated_at": format_timestamp(state.updated_at),
    }


def conversation_report(memory: Memory, session: str | None = None) -> dict[str, Any]:
    """The agent-loop state of one session, or of every session of the memory's namespace.

    Args:
        memory: Whose conversations.
        session: One session; ``None`` lists every session that has state.

    Returns:
        ``{"namespace", "conversations": [state, ...]}`` (see :func:`state_report`).

    Raises:
        ValidationError: Invalid session name.
        NotFoundError: ``session`` has no conversation state.
    """
    store = memory.store.conversations
    if session is not None:
        state = store.get(memory.namespace, check_name(session, "session"))
        if state is None:
            raise NotFoundError(
                f"session {session!r} has no agent-loop conversation state in namespace {memory.namespace!r}"
            )
        states = [state]
    else:
        states = [
            s for s in (store.get(memory.namespace, name) for name in store.sessions(memory.namespace)) if s is not None
        ]
    return {"namespace": memory.namespace, "conversations": [state_report(s) for s in states]}
