"""What a batch of turns must pass before it is stored: a size limit and tool pairing.

:class:`~stratamem.memory.Memory` runs both on every write (``add``,
``add_sessions``, ``ingest``, ``import_``) before its transaction; a batch that
fails stores nothing, and the error names the message (``messages[i]``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..errors import InvalidTurnError
from ..records import Turn

__all__ = ["check_sizes", "check_tool_pairs"]


def check_sizes(turns: Sequence[Turn], limit: int) -> None:
    """Every turn's JSON form is at most ``limit`` characters (``store.max_turn_chars``).

    Raises:
        InvalidTurnError: A turn is longer.
    """
    for i, t in enumerate(turns):
        size = len(json.dumps(t.to_dict(), ensure_ascii=False))
        if size > limit:
            raise InvalidTurnError(
                f"turn is {size:,} characters; the limit is {limit:,} (config store.max_turn_chars)",
                path=f"messages[{i}]",
            )


def check_tool_pairs(store: Any, namespace: str, session: str, turns: Sequence[Turn]) -> None:
    """Every tool result answers a tool call made earlier in the batch or in the stored session.

    Raises:
        InvalidTurnError: A tool result answers no tool call.
    """
    known: set[str] = set()
    recent: set[str] | None = None
    for i, t in enumerate(turns):
        known.update(t.tool_use_ids)
        for tid in t.tool_result_ids:
            if tid in known:
                continue
            if recent is None:
                # Calls are usually just before their results: look there first,
                # then ask the store about the whole session.
                rows = store.turns(namespace, session, newest_first=True, limit=50)
                recent = {c for st in rows if st.role == "assistant" for c in st.turn.tool_use_ids}
            if tid in recent or store.has_tool_call(namespace, session, tid):
                known.add(tid)
                continue
            raise InvalidTurnError(
                f"tool result {tid!r} answers no tool call in session {session!r}", path=f"messages[{i}]"
            )
