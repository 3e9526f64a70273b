"""Storage of agent-loop conversation state (seed 001, phase 3; ``m004_conversations``, ``m009_conversation_loop``).

One feature store for every backend (it speaks :mod:`stratamem.store.sql`).
Rows are keyed by namespace and session *names*, so state can be kept for a
conversation whose turns are not stored here. List- and mapping-valued fields
are JSON text. The record and its rules live in
:mod:`stratamem.records.conversations` and :mod:`stratamem.agentloop.compaction`.
"""

from __future__ import annotations

import json
from typing import Any

from ..records import check_name
from ..records.conversations import ConversationState
from .sql import Sql, run_ddl, upsert

__all__ = ["Conversations", "m004_conversations", "m009_conversation_loop"]

_COLUMNS = (
    "namespace, session, summary, compaction_count, turn_count, compacted_messages, files_read, "
    "files_modified, last_status, last_error, failures, calibration, updated_at, loop"
)

_TABLE = """CREATE TABLE conversations (
        namespace TEXT NOT NULL,
        session TEXT NOT NULL,
        summary TEXT,
        compaction_count INTEGER NOT NULL DEFAULT 0,
        turn_count INTEGER NOT NULL DEFAULT 0,
        compacted_messages INTEGER NOT NULL DEFAULT 0,
        files_read TEXT NOT NULL DEFAULT '[]',
        files_modified TEXT NOT NULL DEFAULT '[]',
        last_status TEXT NOT NULL DEFAULT 'none',
        last_error TEXT,
        failures INTEGER NOT NULL DEFAULT 0,
        calibration TEXT NOT NULL DEFAULT '{}',
        updated_at STAMP NOT NULL,
        PRIMARY KEY (namespace, session)
    )"""


def m004_conversations(conn: Any) -> None:
    """Agent-loop conversation state: checkpoint, counters, tracked files (seed 001)."""
    # Keyed by names, not ids: state may exist for a conversation whose turns live elsewhere.
    run_ddl(conn, {"sqlite": [_TABLE.replace("STAMP", "TEXT")], "postgres": [_TABLE.replace("STAMP", "TIMESTAMPTZ")]})


def m009_conversation_loop(conn: Any) -> None:
    """Agent-loop fields (resume point, deferred compactions, last usage) as one JSON column."""
    conn.execute("ALTER TABLE conversations ADD COLUMN loop TEXT NOT NULL DEFAULT '{}'")


def _loop_json(state: ConversationState) -> str:
    """The agent-loop fields added by ``m009_conversation_loop``, as one JSON object."""
    return json.dumps(
        {"resume_seq": state.resume_seq, "deferred": state.deferred, "last_usage": dict(state.last_usage)}
    )


def _loop_fields(text: str | None) -> dict[str, Any]:
    data = json.loads(text or "{}")
    return {
        "resume_seq": int(data.get("resume_seq", 0)),
        "deferred": int(data.get("deferred", 0)),
        "last_usage": dict(data.get("last_usage") or {}),
    }


class Conversations:
    """Rows of ``conversations`` for one store.

    Args:
        sql: The owning store's SQL layer.
    """

    def __init__(self, sql: Sql) -> None:
        self._sql = sql

    def get(self, namespace: str, session: str) -> ConversationState | None:
        """The saved state of (namespace, session), or ``None``.

        Raises:
            BackendError: The database failed.
        """
        rows = self._sql.rows(
            f"SELECT {_COLUMNS} FROM conversations WHERE namespace = ? AND session = ?", (namespace, session)
        )
        if not rows:
            return None
        row = rows[0]
        return ConversationState(
            namespace=row[0],
            session=row[1],
            summary=row[2],
            compaction_count=row[3],
            turn_count=row[4],
            compacted_messages=row[5],
            files_read=tuple(json.loads(row[6])),
            files_modified=tuple(json.loads(row[7])),
            last_status=row[8],
            last_error=row[9],
            failures=row[10],
            calibration=json.loads(row[11]),
            **_loop_fields(row[13]),
            updated_at=self._sql.dialect.read_stamp(row[12]),
        )

    def put(self, state: ConversationState) -> None:
        """Insert or replace the state of its (namespace, session), in one transaction.

        Raises:
            ValidationError: Invalid namespace or session name.
            BackendError: The database failed; the previous state is unchanged.
        """
        check_name(state.namespace, "namespace")
        check_name(state.session, "session")
        values = (
            state.namespace,
            state.session,
            state.summary,
            state.compaction_count,
            state.turn_count,
            state.compacted_messages,
            json.dumps(list(state.files_read)),
            json.dumps(list(state.files_modified)),
            state.last_status,
            state.last_error,
            state.failures,
            json.dumps(dict(state.calibration)),
            self._sql.dialect.stamp(state.updated_at),
            _loop_json(state),
        )
        names = _COLUMNS.split(", ")
        with self._sql.write() as w:
            w.execute(upsert("conversations", names[:2], names[2:]), values)

    def sessions(self, namespace: str) -> list[str]:
        """Sessions of ``namespace`` that have saved state, sorted by code point."""
        rows = self._sql.rows(
            f"SELECT session FROM conversations WHERE namespace = ? ORDER BY {self._sql.dialect.bytewise('session')}",
            (namespace,),
        )
        return [r[0] for r in rows]
