"""SQLite storage of agent-loop conversation state (seed 001, phase 3 table).

A feature store (see :class:`~stratamem.store.sqlite.SQLiteStore`): it shares
the store's connection, lock and ``transaction()``. Rows are keyed by
namespace and session *names*, so state can be kept for a conversation whose
turns are not stored here. The record and its rules live in
:mod:`stratamem.agentloop.state` and :mod:`stratamem.agentloop.compaction`.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ...agentloop.state import ConversationState
from ...records import check_name, format_timestamp, parse_timestamp

if TYPE_CHECKING:
    from .store import SQLiteStore

__all__ = ["SQLiteConversations"]

_COLUMNS = ("namespace, session, summary, compaction_count, turn_count, compacted_messages, files_read, "
            "files_modified, last_status, last_error, failures, calibration, updated_at, loop")


def _loop_json(state: ConversationState) -> str:
    """The agent-loop fields added by ``m009_conversation_loop``, as one JSON object."""
    return json.dumps({"resume_seq": state.resume_seq, "deferred": state.deferred,
                       "last_usage": dict(state.last_usage)})


def _loop_fields(text: str | None) -> dict[str, Any]:
    data = json.loads(text or "{}")
    return {"resume_seq": int(data.get("resume_seq", 0)), "deferred": int(data.get("deferred", 0)),
            "last_usage": dict(data.get("last_usage") or {})}


class SQLiteConversations:
    """Rows of ``conversations`` for one SQLite store.

    Args:
        store: The owning store; its connection, lock and transaction are used.
    """

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store

    def get(self, namespace: str, session: str) -> ConversationState | None:
        """The saved state of (namespace, session), or ``None``.

        Raises:
            BackendError: The database failed.
        """
        with self._store.lock, self._store._errors():
            row = self._store.connection.execute(
                f"SELECT {_COLUMNS} FROM conversations WHERE namespace=? AND session=?",
                (namespace, session)).fetchone()
        if row is None:
            return None
        return ConversationState(
            namespace=row[0], session=row[1], summary=row[2], compaction_count=row[3], turn_count=row[4],
            compacted_messages=row[5], files_read=tuple(json.loads(row[6])),
            files_modified=tuple(json.loads(row[7])), last_status=row[8], last_error=row[9], failures=row[10],
            calibration=json.loads(row[11]), **_loop_fields(row[13]), updated_at=parse_timestamp(row[12]))

    def put(self, state: ConversationState) -> None:
        """Insert or replace the state of its (namespace, session), in one transaction.

        Raises:
            ValidationError: Invalid namespace or session name.
            BackendError: The database failed; the previous state is unchanged.
        """
        check_name(state.namespace, "namespace")
        check_name(state.session, "session")
        values = (state.namespace, state.session, state.summary, state.compaction_count, state.turn_count,
                  state.compacted_messages, json.dumps(list(state.files_read)),
                  json.dumps(list(state.files_modified)), state.last_status, state.last_error, state.failures,
                  json.dumps(dict(state.calibration)), format_timestamp(state.updated_at), _loop_json(state))
        with self._store.transaction():
            self._store.connection.execute(
                f"INSERT OR REPLACE INTO conversations ({_COLUMNS}) VALUES ({', '.join('?' * len(values))})",
                values)

    def sessions(self, namespace: str) -> list[str]:
        """Sessions of ``namespace`` that have saved state, sorted."""
        with self._store.lock, self._store._errors():
            rows = self._store.connection.execute(
                "SELECT session FROM conversations WHERE namespace=? ORDER BY session", (namespace,)).fetchall()
        return [r[0] for r in rows]
