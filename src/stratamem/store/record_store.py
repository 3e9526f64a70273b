"""The canonical record — namespaces, sessions, turns (``m001_core``) — written once for every backend.

:class:`RecordStore` is the base of :class:`~stratamem.store.sqlite.SQLiteStore`
and :class:`~stratamem.store.postgres.PostgresStore`: every method of the
:class:`~stratamem.store.base.Store` protocol that reads or writes these
tables is here, on the backend's :class:`~stratamem.store.sql.Sql` handle.
The backends keep what really differs: opening and configuring connections,
transactions and error mapping, the migration bodies (the tables' keys
differ: SQLite keys derived rows by ``namespace_id``, PostgreSQL by the name,
see :attr:`~stratamem.store.sql.Dialect.tenant`), file size and health checks.

Gap-free sequences: a batch reserves its range with ``UPDATE sessions SET
last_seq = last_seq + n ... RETURNING``. On SQLite ``BEGIN IMMEDIATE``
already serializes writers; on PostgreSQL the session's row lock serializes
the writers of that session only, and sessions are locked in name order so
two batches touching the same sessions cannot deadlock.
"""

from __future__ import annotations

import functools
import json
import logging
import random
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, Self, TypeVar

from ..errors import BackendError, ConfigError, NotFoundError, StratamemError
from ..records import Session, StoredTurn, check_name
from . import data_version
from .base import NamespaceStats, TurnBatch
from .features import SharedFeatures
from .rows import turn_columns, turn_from_columns
from .sql import CHUNK, SQLITE, Writer, chunks
from .text_codec import pack_text
from .turn_stamps import pack_stamp

log = logging.getLogger("stratamem.store")

T = TypeVar("T")

__all__ = ["RecordStore"]

_TURN_COLUMNS = "t.id, t.seq, t.tokens, s.name, t.role, t.text, t.content, t.name, t.model, t.ts, t.metadata"
_INSERTED = "session_id, seq, role, text, content, name, model, ts, tokens, metadata"
# Turns per INSERT: each row binds 11 values, and a statement stays under CHUNK values.
_TURNS_PER_INSERT = CHUNK // 11


@functools.lru_cache(maxsize=256)
def _insert_turns(tenant: str, count: int) -> str:
    """``INSERT`` of ``count`` turns returning each one's ``(session_id, seq, id)`` (cached: built on every append)."""
    values = ", ".join(["(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"] * count)
    return f"INSERT INTO turns ({tenant}, {_INSERTED}) VALUES {values} RETURNING session_id, seq, id"


@functools.lru_cache(maxsize=4)
def _session_id(tenant: str) -> str:
    return f"SELECT id FROM sessions WHERE {tenant} = ? AND name = ?"


def _call_ids(content: str) -> tuple[str, ...]:
    """Tool call ids of a stored assistant turn's block content (none when the row is corrupt)."""
    try:
        return turn_from_columns("assistant", "", content, None, None, "2000-01-01T00:00:00Z", None).tool_use_ids
    except (ValueError, RecursionError):  # a damaged row answers no call; reading it says what is wrong
        return ()


class RecordStore(SharedFeatures):
    """Namespaces, sessions and turns over ``self.sql``; a backend store inherits it.

    A backend provides ``sql`` (its :class:`~stratamem.store.sql.Sql`) and
    ``close``; names its driver's errors (:attr:`_BACKEND_ERRORS`,
    :meth:`_backend_error`, which marks an error ``transient`` when the
    database rolled a whole transaction back under contention); and
    overrides :meth:`in_transaction` when it pins transactions to threads.
    """

    RETRY_ATTEMPTS = 3
    """Runs of a write the database rolled back under contention (see :meth:`retrying`)."""

    def in_transaction(self) -> bool:
        """Whether the calling thread is inside :meth:`transaction` (always false where nothing pins it)."""
        return False

    def retrying(self, work: Callable[[], T]) -> T:
        """``work()``, run again (up to :attr:`RETRY_ATTEMPTS` runs) while it fails with a transient error.

        A transient :class:`~stratamem.errors.BackendError` means the database
        rolled the transaction back because it collided with another writer's
        (a PostgreSQL deadlock): nothing was stored, so a second run is safe.
        ``work`` must open its own transaction(s) and keep nothing from a
        failed run. Inside a caller's transaction it runs once: the rollback,
        and the retry, are the caller's.
        """
        attempts = 1 if self.in_transaction() else self.RETRY_ATTEMPTS
        for attempt in range(attempts):
            try:
                return work()
            except BackendError as exc:
                if not exc.transient or attempt + 1 == attempts:
                    raise
                log.info("retrying a write the database rolled back (attempt %d): %s", attempt + 2, exc)
                # A random pause lets the writer that won finish first: run again at once, the two
                # can collide again (PostgreSQL's speculative inserts of a new key do exactly that).
                time.sleep(random.uniform(0.01, 0.05) * (attempt + 1))
        raise AssertionError("unreachable")  # pragma: no cover

    _BACKEND_ERRORS: tuple[type[Exception], ...] = ()
    """The driver's exceptions, each mapped to :class:`~stratamem.errors.BackendError` by :meth:`_errors`."""

    def _backend_error(self, exc: Exception) -> BackendError:
        """The :class:`~stratamem.errors.BackendError` a driver exception becomes (the backend names the store)."""
        return BackendError(str(exc))

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """Map the driver's errors to :class:`~stratamem.errors.BackendError`, keeping the cause."""
        try:
            yield
        except StratamemError:
            raise
        except self._BACKEND_ERRORS as exc:
            raise self._backend_error(exc) from exc

    def close(self) -> None:
        """Release the backend's connections. Idempotent."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- helpers ----------------------------------------------------------------------

    def _turn_select(self) -> str:
        d = self.sql.dialect
        return (
            f"SELECT {_TURN_COLUMNS} FROM turns t JOIN sessions s "
            f"ON s.{d.tenant} = t.{d.tenant} AND s.id = t.session_id"
        )

    @staticmethod
    def _stored(namespace: str, row: Sequence[Any]) -> StoredTurn:
        try:
            turn = turn_from_columns(*row[4:11])
        except (ValueError, RecursionError) as exc:  # InvalidTurnError included: a row no version writes
            # A damaged page or a hand edit: say which turn, in one line (never a traceback).
            raise BackendError(
                f"stored turn {row[0]} of namespace {namespace!r} is unreadable (corrupt row): "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        return StoredTurn(id=row[0], namespace=namespace, session=row[3], seq=row[1], tokens=row[2], turn=turn)

    def _check_tokenizer(self, tokenizer: str) -> None:
        """Record ``tokenizer`` on first open; refuse another one later (stored counts are never mixed)."""
        read = "SELECT value FROM store_meta WHERE key = 'tokenizer'"
        rows = self.sql.rows(read)  # read first: a read-only store must still open
        if not rows:
            with self.sql.write() as w:
                w.execute(
                    "INSERT INTO store_meta (key, value) VALUES ('tokenizer', ?) ON CONFLICT DO NOTHING", (tokenizer,)
                )
                rows = w.execute(read).fetchall()  # a concurrent first open may have won
        stored = rows[0][0]
        if stored != tokenizer:
            raise ConfigError(
                f"{self!r} keeps token counts made with {stored!r}; open it with that tokenizer "
                f"(asked for {tokenizer!r})"
            )

    # --- namespaces and sessions ------------------------------------------------------

    def namespaces(self) -> list[str]:
        """All namespace names, sorted."""
        name = self.sql.dialect.namespace_name
        return [
            r[0] for r in self.sql.rows(f"SELECT {name} FROM namespaces ORDER BY {self.sql.dialect.bytewise(name)}")
        ]

    def has_namespace(self, namespace: str) -> bool:
        """Whether the namespace exists."""
        return bool(
            self.sql.rows(f"SELECT 1 FROM namespaces WHERE {self.sql.dialect.namespace_name} = ?", (namespace,))
        )

    def namespace_stats(self) -> list[NamespaceStats]:
        """Every namespace with its counts, sorted by name (one query)."""
        d = self.sql.dialect
        key, name = f"n.{d.namespace_key}", f"n.{d.namespace_name}"
        rows = self.sql.rows(
            f"SELECT {name}, (SELECT COUNT(*) FROM sessions s WHERE s.{d.tenant} = {key}), COUNT(t.id), "
            f"COALESCE(SUM(t.tokens), 0), COALESCE(SUM({d.octets('t.text')} + "
            f"COALESCE({d.octets('t.content')}, 0)), 0) "
            f"FROM namespaces n LEFT JOIN turns t ON t.{d.tenant} = {key} GROUP BY {key}, {name} "
            f"ORDER BY {d.bytewise(name)}"
        )
        return [NamespaceStats(r[0], int(r[1]), int(r[2]), int(r[3]), int(r[4])) for r in rows]

    def ensure_session(
        self,
        namespace: str,
        session: str,
        *,
        platform: str | None = None,
        channel: str | None = None,
        created_at: datetime | None = None,
    ) -> Session:
        """Return the session, creating it (and the namespace) if missing.

        ``platform``, ``channel`` and ``created_at`` apply only when it is created.

        Raises:
            ValidationError: A namespace or session name is invalid.
        """
        check_name(namespace, "namespace")
        check_name(session, "session")
        with self.sql.write() as w:
            self._session_ids(w, w.tenant(namespace), [(session, platform, channel)], created_at)
        return self.session(namespace, session)

    def _session_ids(
        self,
        w: Writer,
        key: Any,
        sessions: Sequence[tuple[str, str | None, str | None]],
        created_at: datetime | None = None,
    ) -> dict[str, int]:
        """Ids of the named sessions, creating the missing ones in the order given (their ids order ``turns()``).

        Read first: sessions almost always exist, and a lookup is cheaper than
        an insert that does nothing; the insert still does nothing for a
        session a concurrent writer created meanwhile.
        """
        d = self.sql.dialect
        if len(sessions) == 1:  # the common case (one session per append): a constant statement
            row = w.execute(_session_id(d.tenant), (key, sessions[0][0])).fetchone()
            if row is not None:
                return {sessions[0][0]: int(row[0])}
        ids = self._lookup_sessions(w, key, [name for name, _, _ in sessions])
        missing = [s for s in sessions if s[0] not in ids]
        if missing:
            at = d.stamp(created_at or datetime.now(UTC))
            for name, platform, channel in missing:
                w.execute(
                    f"INSERT INTO sessions ({d.tenant}, name, platform, channel, created_at) "
                    f"VALUES (?, ?, ?, ?, ?) ON CONFLICT ({d.tenant}, name) DO NOTHING",
                    (key, name, platform, channel, at),
                )
            ids.update(self._lookup_sessions(w, key, [name for name, _, _ in missing]))
        return ids

    def _lookup_sessions(self, w: Writer, key: Any, names: list[str]) -> dict[str, int]:
        clause, values = self.sql.dialect.one_of("name", names)
        return {
            r[1]: int(r[0])
            for r in w.execute(
                f"SELECT id, name FROM sessions WHERE {self.sql.dialect.tenant} = ? AND {clause}", (key, *values)
            ).fetchall()
        }

    def _sessions(self, namespace: str, where: str, params: Sequence[Any]) -> list[Session]:
        d = self.sql.dialect
        rows = self.sql.rows(
            f"SELECT s.name, s.platform, s.channel, s.created_at FROM sessions s "
            f"WHERE {d.in_namespace('s')}{where} ORDER BY s.id",
            (namespace, *params),
        )
        return [Session(namespace, r[0], r[1], r[2], d.read_stamp(r[3])) for r in rows]

    def session(self, namespace: str, session: str) -> Session:
        """Return an existing session.

        Raises:
            NotFoundError: No such namespace or session.
        """
        found = self._sessions(namespace, " AND s.name = ?", (session,))
        if not found:
            if not self.has_namespace(namespace):
                raise NotFoundError(f"unknown namespace {namespace!r}")
            raise NotFoundError(f"unknown session {session!r} in namespace {namespace!r}")
        return found[0]

    def sessions(self, namespace: str) -> list[Session]:
        """All sessions of a namespace, oldest first."""
        return self._sessions(namespace, "", ())

    # --- turns ------------------------------------------------------------------------

    def append(self, namespace: str, batches: Sequence[TurnBatch]) -> list[StoredTurn]:
        """Store turns in one transaction: all of them or none.

        Where the backend has retryable errors (PostgreSQL: a deadlock or
        serialization failure, after which everything was rolled back), the
        transaction is retried up to twice when this call owns it.

        Returns:
            The stored turns, in input order.

        Raises:
            ValidationError: A namespace or session name is invalid.
            ValueError: A batch has a different number of turns and token counts.
            BackendError: The write failed; nothing was stored (if the connection
                dropped during COMMIT, PostgreSQL alone knows whether it landed).
        """
        check_name(namespace, "namespace")
        for b in batches:
            check_name(b.session, "session")
            if len(b.turns) != len(b.tokens):
                raise ValueError("each batch needs one token count per turn")
        return self.retrying(lambda: self._append_batches(namespace, batches))

    def _append_batches(self, namespace: str, batches: Sequence[TurnBatch]) -> list[StoredTurn]:
        with self.sql.write() as w:
            return self._append(w, namespace, batches)

    def _append(self, w: Writer, namespace: str, batches: Sequence[TurnBatch]) -> list[StoredTurn]:
        d = self.sql.dialect
        key = w.tenant(namespace)
        counts: dict[str, int] = {}
        labels: dict[str, tuple[str | None, str | None]] = {}
        for b in batches:
            if b.turns:
                counts[b.session] = counts.get(b.session, 0) + len(b.turns)
                labels.setdefault(b.session, (b.platform, b.channel))
        if not counts:
            return []
        sid = self._session_ids(w, key, [(name, *labels[name]) for name in counts])
        # Reserve each session's range under its row lock, in name order (see the module docstring).
        next_seq: dict[str, int] = {}
        reserve = f"UPDATE sessions SET last_seq = last_seq + ? WHERE {d.tenant} = ? AND id = ? RETURNING last_seq"
        for name in sorted(counts):
            last = w.execute(reserve, (counts[name], key, sid[name])).fetchone()[0]
            next_seq[name] = int(last) - counts[name] + 1
        # Bumped after the session rows (locked in name order) and before the turns take their ids: on
        # PostgreSQL the version row's lock, held to commit, then orders the namespace's appends, so each
        # commits ids above every id committed before it (``ids_commit_in_order``; the recall index's
        # in-step check reads only the turns above its newest id instead of counting every turn).
        data_version.bump(w, namespace)
        rows: list[tuple[Any, ...]] = []
        placed: list[tuple[str, int, int]] = []
        for b in batches:
            for turn, tokens in zip(b.turns, b.tokens, strict=True):
                seq = next_seq[b.session]
                next_seq[b.session] = seq + 1
                text, content, meta = turn_columns(turn)
                stored_text = pack_text(text) if d is SQLITE else text  # docs: store/text_codec.py
                rows.append(
                    (
                        key,
                        sid[b.session],
                        seq,
                        turn.role,
                        stored_text,
                        content,
                        turn.name,
                        turn.model,
                        pack_stamp(turn.timestamp) if d is SQLITE else turn.timestamp,  # store/turn_stamps.py
                        int(tokens),
                        meta,
                    )
                )
                placed.append((b.session, seq, int(tokens)))
        ids: dict[tuple[int, int], int] = {}
        for part in (rows,) if len(rows) <= _TURNS_PER_INSERT else chunks(rows, _TURNS_PER_INSERT):
            # RETURNING order is not promised for a multi-row insert: match ids by (session, seq).
            for session_id, seq, tid in w.execute(
                _insert_turns(d.tenant, len(part)), [v for row in part for v in row]
            ).fetchall():
                ids[(int(session_id), int(seq))] = int(tid)
        turns = [t for b in batches for t in b.turns]
        return [
            StoredTurn(ids[(sid[name], seq)], namespace, name, seq, tokens, turn)
            for (name, seq, tokens), turn in zip(placed, turns, strict=True)
        ]

    def turns(
        self,
        namespace: str,
        session: str | None = None,
        *,
        ids: Sequence[int] | None = None,
        min_seq: int | None = None,
        max_seq: int | None = None,
        newest_first: bool = False,
        limit: int | None = None,
        role: str | None = None,
    ) -> list[StoredTurn]:
        """Turns of a namespace (optionally one session, optionally one role), ordered by session then sequence.

        One statement; with a session, both backends find it by ``(namespace,
        name)`` first and then scan its ``(session_id, seq)`` range.
        """
        d = self.sql.dialect
        where = [d.in_namespace("t")]
        params: list[Any] = [namespace]
        if session is not None:
            where.append("s.name = ?")
            params.append(session)
        if ids is not None:
            id_list = [int(i) for i in ids]
            if not id_list:
                return []
            clause, values = d.one_of("t.id", id_list)
            where.append(clause)
            params.extend(values)
        for clause, value in (("t.seq >= ?", min_seq), ("t.seq <= ?", max_seq)):
            if value is not None:
                where.append(clause)
                params.append(int(value))
        select = self._turn_select()
        if role == "system":
            # Every context reads the session's system prompts: through the partial index of
            # system turns (turns_system, m008), not by scanning the session (issue 28: ~50 ms
            # at 100k turns). The condition is a literal (a bound parameter cannot prove the
            # index's), and SQLite is told the index: its planner prefers (session_id, seq).
            where.append("t.role = 'system'")
            if d.name == "sqlite":
                select = select.replace("FROM turns t ", "FROM turns t INDEXED BY turns_system ", 1)
        elif role is not None:
            where.append("t.role = ?")
            params.append(role)
        order = "DESC" if newest_first else "ASC"
        statement = f"{select} WHERE {' AND '.join(where)} ORDER BY t.session_id {order}, t.seq {order}"
        if limit is not None:
            statement += " LIMIT ?"
            params.append(int(limit))
        return [self._stored(namespace, r) for r in self.sql.rows(statement, params)]

    def latest_session(self, namespace: str) -> str | None:
        """The session of the most recently stored turn (``None`` if there is none)."""
        d = self.sql.dialect
        rows = self.sql.rows(
            f"SELECT s.name FROM turns t JOIN sessions s ON s.{d.tenant} = t.{d.tenant} "
            f"AND s.id = t.session_id WHERE {d.in_namespace('t')} ORDER BY t.id DESC LIMIT 1",
            (namespace,),
        )
        return rows[0][0] if rows else None

    def iter_turns(self, namespace: str, *, batch_size: int = 1000) -> Iterator[StoredTurn]:
        """Every turn of a namespace in (session, sequence) order, streamed in batches."""
        d = self.sql.dialect
        last_session, last_seq = -1, 0
        while True:
            rows = self.sql.rows(
                f"{self._turn_select().replace('SELECT t.id', 'SELECT t.session_id, t.id')} "
                f"WHERE {d.in_namespace('t')} AND (t.session_id, t.seq) > (?, ?) ORDER BY t.session_id, t.seq "
                "LIMIT ?",
                (namespace, last_session, last_seq, batch_size),
            )
            if not rows:
                return
            for r in rows:
                yield self._stored(namespace, r[1:])
            last_session, last_seq = rows[-1][0], rows[-1][2]

    def turn_ids(self, namespace: str) -> list[int]:
        """Ids of every turn of the namespace, ascending (cheap: no content is read)."""
        return [
            r[0]
            for r in self.sql.rows(
                f"SELECT t.id FROM turns t WHERE {self.sql.dialect.in_namespace('t')} ORDER BY t.id", (namespace,)
            )
        ]

    def data_version(self, namespace: str) -> data_version.DataVersion:
        """Where ``namespace``'s data stands: compare with the last one seen (:mod:`stratamem.store.data_version`)."""
        return data_version.read(self.sql, namespace)

    def turn_extent(self, namespace: str) -> tuple[int, int]:
        """``(number of turns, largest turn id)`` of the namespace (``(0, 0)`` when empty), in one query."""
        row = self.sql.rows(
            f"SELECT COUNT(*), COALESCE(MAX(t.id), 0) FROM turns t WHERE {self.sql.dialect.in_namespace('t')}",
            (namespace,),
        )[0]
        return int(row[0]), int(row[1])

    def turns_after(self, namespace: str, after_id: int) -> tuple[int, int]:
        """``(number of turns, largest id)`` of the namespace's turns with an id above ``after_id``
        (``(0, after_id)`` when none): the namespace's ``(tenant, id)`` index, not every turn."""
        row = self.sql.rows(
            f"SELECT COUNT(*), COALESCE(MAX(t.id), ?) FROM turns t WHERE {self.sql.dialect.in_namespace('t')} "
            "AND t.id > ?",
            (int(after_id), namespace, int(after_id)),
        )[0]
        return int(row[0]), int(row[1])

    def turn_count(self, namespace: str) -> int:
        """Number of turns in the namespace."""
        return int(
            self.sql.rows(f"SELECT COUNT(*) FROM turns t WHERE {self.sql.dialect.in_namespace('t')}", (namespace,))[0][
                0
            ]
        )

    def has_tool_call(self, namespace: str, session: str, tool_use_id: str) -> bool:
        """Whether an assistant turn of the session made the tool call ``tool_use_id``."""
        d = self.sql.dialect
        # Block content is compact JSON, so the call's id appears as "id":"<json string>".
        needle = json.dumps(tool_use_id, ensure_ascii=False)
        pattern = '%"id":' + needle.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        rows = self.sql.rows(
            f"SELECT t.content FROM turns t JOIN sessions s ON s.{d.tenant} = t.{d.tenant} AND s.id = t.session_id "
            f"WHERE {d.in_namespace('t')} AND s.name = ? AND t.role = 'assistant' AND t.content LIKE ? ESCAPE '\\'",
            (namespace, session, pattern),
        )
        return any(tool_use_id in _call_ids(c) for (c,) in rows)

    def stats(self, namespace: str) -> NamespaceStats:
        """Counts and sizes for the namespace."""
        d = self.sql.dialect
        row = self.sql.rows(
            f"SELECT COUNT(*), COALESCE(SUM(t.tokens), 0), COALESCE(SUM({d.octets('t.text')} + "
            f"COALESCE({d.octets('t.content')}, 0)), 0) FROM turns t WHERE {d.in_namespace('t')}",
            (namespace,),
        )[0]
        sessions = self.sql.rows(f"SELECT COUNT(*) FROM sessions s WHERE {d.in_namespace('s')}", (namespace,))[0][0]
        return NamespaceStats(namespace, int(sessions), int(row[0]), int(row[1]), int(row[2]))
