"""A batch of turns checked and counted before the store sees it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import InvalidTurnError
from ..ingest import IngestSession
from ..ingest.checks import check_sizes, check_tool_pairs
from ..ingest.dedupe import at_source
from ..records import Turn, check_name
from ..store import TurnBatch
from ..tokens import count_turn

__all__ = ["checked_batch", "session_batch"]


def checked_batch(
    memory: Any, session: str, turns: Sequence[Turn], platform: str | None = None, channel: str | None = None
) -> TurnBatch:
    """Refuse ``memory``'s batch before anything is stored (:mod:`stratamem.ingest.checks`); count its tokens.

    ``memory`` is a :class:`stratamem.Memory`: its store, namespace, turn size limit and tokenizer apply.

    Raises:
        InvalidTurnError: A turn is too large, or a tool result answers no tool call.
    """
    check_sizes(turns, memory.config.store.max_turn_chars)
    check_tool_pairs(memory.store, memory.namespace, session, turns)
    return TurnBatch(session, turns, [count_turn(t, memory.tokenizer) for t in turns], platform, channel)


def session_batch(memory: Any, session: IngestSession) -> TurnBatch:
    """An imported session's batch for ``memory`` (:func:`checked_batch`).

    Raises:
        ValidationError: The session's name is not valid.
        InvalidTurnError: As :func:`checked_batch`, naming the file and line the turn came from.
    """
    name = check_name(session.session or "default", "session")
    try:
        return checked_batch(memory, name, session.turns, session.platform, session.channel)
    except InvalidTurnError as exc:
        raise at_source(session, exc) from None
