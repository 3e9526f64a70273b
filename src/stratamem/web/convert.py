"""JSON forms of library records the library does not serialize itself (turns, sessions, contexts)."""

from __future__ import annotations

from typing import Any

from ..records import Session, StoredTurn, format_timestamp
from ..records.manifests import Context

__all__ = ["context_json", "session_json", "turn_json"]


def turn_json(st: StoredTurn) -> dict[str, Any]:
    """A stored turn: its identity plus the canonical turn."""
    return {"id": st.id, "session": st.session, "seq": st.seq, "tokens": st.tokens, **st.turn.to_dict()}


def session_json(s: Session) -> dict[str, Any]:
    """A session's labels."""
    return {"name": s.name, "platform": s.platform, "channel": s.channel, "created_at": format_timestamp(s.created_at)}


def context_json(ctx: Context) -> dict[str, Any]:
    """An assembled context with its manifest (as ``stratamem context --json`` prints it)."""
    return ctx.to_dict()
