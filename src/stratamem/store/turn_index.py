"""The persisted recall index (``m010_recall_index``, ``m021_term_ids``), one implementation for every backend.

What a new process needs to answer its first query without re-embedding or
re-analysing anything: per turn, its analysed index terms (as ids into the
namespace's vocabulary, :mod:`stratamem.store.term_ids`) and its vector
(int8 codes + scale, :mod:`stratamem.embed.quantize`), and per namespace,
which model made the vectors and which analyser made the terms. Window,
neighbour and session vectors are not stored: the index derives them from
the turn vectors in O(N) numpy when it opens.

Rows are keyed by ``(tenant, turn_id)`` — the namespace's id on SQLite (a
clustered ``WITHOUT ROWID`` key), its name on PostgreSQL — so a namespace
loads as one range scan and deleting turns, or a whole namespace, is one
statement. Every statement is here, and the tables' DDL, one column list
for both backends (:mod:`stratamem.store.ddl`).
Reach it as ``store.embeddings.turns``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..errors import BackendError
from .base_turn_index import IndexMeta, TurnIndexRow, TurnKey
from .ddl import TYPES, run_tables
from .sql import SQLITE, Dialect, Sql, Writer, chunks, dialect_of, upsert
from .term_ids import StoredTerms, decode_ids, encode_ids, encode_many

__all__ = ["TurnIndex", "m010_recall_index", "m019_recall_events", "m021_term_ids", "m025_turn_vectors6", "prune_terms"]

# First key of the two-key advisory lock serializing one namespace's vocabulary writers on PostgreSQL ("Rt").
_LOCK_CLASS = 0x5274


def m010_recall_index(conn: Any) -> None:
    """Per-turn index terms and compact vectors, and per-namespace index settings.

    Vectors are plain bytes: the index is loaded whole into the process and
    scored there, never searched in the database.
    """
    run_tables(
        conn,
        (
            "recall_index",
            [
                "{tenant_column}",
                "turn_id {bigint} NOT NULL",
                "terms TEXT NOT NULL",
                "vector {blob}",
                "PRIMARY KEY ({tenant}, turn_id)",
            ],
            True,
        ),
        (
            "recall_index_meta",
            ["{tenant_pk}", "model TEXT NOT NULL", "dims INTEGER NOT NULL", "analyzer TEXT NOT NULL"],
            False,
        ),
    )


def m019_recall_events(conn: Any) -> None:
    """Per turn, the days it tells of, resolved when it was written, and how many sentence vectors it
    has (``NULL``: not made; rows written before this)."""
    conn.execute("ALTER TABLE recall_index ADD COLUMN events TEXT")
    conn.execute("ALTER TABLE recall_index ADD COLUMN sentences INTEGER")


# m019_recall_events' columns are part of the rebuilt table: m021 runs after m019 on every store
# (a store migrated m021 first, by a version without m019, gets them from m019 afterwards).
_INDEX_COLUMNS = [
    "{tenant_column}",
    "turn_id {bigint} NOT NULL",
    "term_ids {blob} NOT NULL",
    "vector {blob}",
    "events TEXT",
    "sentences INTEGER",
    "PRIMARY KEY ({tenant}, turn_id)",
]
_TERMS_COLUMNS = ["{tenant_column}", "term TEXT NOT NULL", "id {bigint} NOT NULL", "PRIMARY KEY ({tenant}, term)"]
_BATCH = 5000


def m021_term_ids(conn: Any) -> None:
    """Index terms stored as varint ids into a per-namespace vocabulary instead of strings (both backends).

    ``recall_terms`` holds each namespace's distinct terms once; the
    ``recall_index`` table is rebuilt with ``term_ids`` (the turn's term ids,
    in order, :func:`~stratamem.store.term_ids.encode_ids`) in place of the
    space-joined ``terms`` text, each namespace's vocabulary numbered in the
    order its turns first use a term; ``recall_index_meta.next_term`` is the
    next id to give. The vectors, event dates and sentence counts
    (:func:`m019_recall_events`) are copied unchanged. Rows are converted in
    batches inside the migration's transaction.
    """
    d = dialect_of(conn)
    run_tables(conn, ("recall_terms", _TERMS_COLUMNS, True), ("recall_index_new", _INDEX_COLUMNS, True))
    conn.execute(
        "ALTER TABLE recall_index_meta ADD COLUMN next_term {bigint} NOT NULL DEFAULT 0".format_map(TYPES[d.name])
    )
    t = d.tenant
    vocab: dict[Any, dict[str, int]] = {}
    last: tuple[Any, ...] = ()
    while True:
        after = f"WHERE ({t}, turn_id) > (?, ?)" if last else ""
        rows = conn.execute(
            d.sql(
                f"SELECT {t}, turn_id, terms, vector, events, sentences FROM recall_index {after} "
                f"ORDER BY {t}, turn_id LIMIT {_BATCH}"
            ),
            last,
        ).fetchall()
        if not rows:
            break
        last = tuple(rows[-1][:2])
        out = []
        for key, turn_id, terms, vector, events, sentences in rows:
            ids = vocab.setdefault(key, {})
            blob = encode_ids(ids.setdefault(w, len(ids)) for w in terms.split())
            out.append((key, turn_id, blob, vector, events, sentences))
        cur = conn.cursor()
        cur.executemany(d.sql("INSERT INTO recall_index_new VALUES (?, ?, ?, ?, ?, ?)"), out)
    cur = conn.cursor()
    for key, ids in vocab.items():
        cur.executemany(
            d.sql(f"INSERT INTO recall_terms ({t}, term, id) VALUES (?, ?, ?)"), [(key, w, i) for w, i in ids.items()]
        )
        conn.execute(d.sql(f"UPDATE recall_index_meta SET next_term = ? WHERE {t} = ?"), (len(ids), key))
    conn.execute("DROP TABLE recall_index")
    conn.execute("ALTER TABLE recall_index_new RENAME TO recall_index")
    if d is not SQLITE:
        conn.execute("ALTER TABLE recall_index RENAME CONSTRAINT recall_index_new_pkey TO recall_index_pkey")


def m025_turn_vectors6(conn: Any) -> None:
    """Stored turn vectors re-encoded from int8 to 6 bits (both backends), in place.

    Each ``recall_index.vector`` of ``dims + 4`` bytes (``dims``: its
    namespace's ``recall_index_meta.dims``) holds int8 codes of magnitude at
    most 127 and a scale; its codes are encoded again by
    :func:`~stratamem.embed.quantize.encode_int6` (``3 * dims / 4`` bytes,
    what is written now) — no model is needed. Any other blob is left as it
    is: a row of another size is stale already and made again on open.
    Rows are converted in batches inside the migration's transaction.
    """
    from ..embed.quantize import encode_int6, int8_blob_size, int8_codes

    d = dialect_of(conn)
    t = d.tenant
    last: tuple[Any, ...] = ()
    while True:
        after = f"AND (r.{t}, r.turn_id) > (?, ?)" if last else ""
        rows = conn.execute(
            d.sql(
                f"SELECT r.{t}, r.turn_id, r.vector, m.dims FROM recall_index r "
                f"JOIN recall_index_meta m ON m.{t} = r.{t} WHERE r.vector IS NOT NULL {after} "
                f"ORDER BY r.{t}, r.turn_id LIMIT {_BATCH}"
            ),
            last,
        ).fetchall()
        if not rows:
            return
        last = tuple(rows[-1][:2])
        out = []
        for key, turn_id, blob, dims in rows:
            blob = bytes(blob)
            if dims and len(blob) == int8_blob_size(int(dims)):
                codes = int8_codes([blob], int(dims)).astype("float32")
                out.append((encode_int6(codes)[0], key, turn_id))
        if out:
            conn.cursor().executemany(d.sql(f"UPDATE recall_index SET vector = ? WHERE {t} = ? AND turn_id = ?"), out)


def _blob(value: object) -> bytes | None:
    return None if value is None else bytes(value)  # type: ignore[call-overload]


def _term_ids(w: Writer, d: Dialect, key: Any, namespace: str, terms: Iterable[str]) -> dict[str, int]:
    """Ids of ``terms`` in the namespace's vocabulary, giving new ones to terms not in it (inside ``w``).

    PostgreSQL takes the namespace's vocabulary lock first, so two writers
    never give one term two ids (SQLite's write transaction already excludes
    the other writers).
    """
    t = d.tenant
    if d is not SQLITE:
        w.execute("SELECT pg_advisory_xact_lock(?, hashtext(?))", (_LOCK_CLASS, namespace))
    want = list(dict.fromkeys(terms))
    known: dict[str, int] = {}
    for part in chunks(want):
        for term, tid in w.execute(
            f"SELECT term, id FROM recall_terms WHERE {t} = ? AND {d.in_list('term', len(part))}", [key, *part]
        ).fetchall():
            known[term] = int(tid)
    new = [term for term in want if term not in known]
    if new:
        row = w.execute(f"SELECT next_term FROM recall_index_meta WHERE {t} = ?", (key,)).fetchone()
        if row is None:  # (no settings row yet: the vocabulary's own largest id)
            row = w.execute(f"SELECT COALESCE(MAX(id) + 1, 0) FROM recall_terms WHERE {t} = ?", (key,)).fetchone()
        start = int(row[0])
        known.update(zip(new, range(start, start + len(new)), strict=True))
        w.executemany(
            f"INSERT INTO recall_terms ({t}, term, id) VALUES (?, ?, ?)", [(key, term, known[term]) for term in new]
        )
        w.execute(f"UPDATE recall_index_meta SET next_term = ? WHERE {t} = ?", (start + len(new), key))
    return known


def prune_terms(w: Writer, d: Dialect, key: Any) -> int:
    """Drop the vocabulary terms no stored turn of the namespace uses any more (after a forget); returns how many.

    A forgotten turn's words must not stay behind in the vocabulary.
    """
    t = d.tenant
    blobs = [bytes(r[0]) for r in w.execute(f"SELECT term_ids FROM recall_index WHERE {t} = ?", (key,)).fetchall()]
    used = set(decode_ids(blobs)[0].tolist()) if blobs else set()
    stale = [int(r[0]) for r in w.execute(f"SELECT id FROM recall_terms WHERE {t} = ?", (key,)).fetchall()]
    stale = [i for i in stale if i not in used]
    for part in chunks(stale):
        w.execute(f"DELETE FROM recall_terms WHERE {t} = ? AND {d.in_list('id', len(part))}", [key, *part])
    return len(stale)


class TurnIndex:
    """Terms and vectors of indexed turns, per namespace.

    Shares the owning store's connection handling and transactions.

    Args:
        sql: The owning store's SQL layer.
    """

    def __init__(self, sql: Sql) -> None:
        self._sql = sql
        self._ns = sql.dialect.tenant

    def meta(self, namespace: str) -> IndexMeta | None:
        """The model, dimensions and analyser the namespace's rows were made with (``None``: none yet)."""
        key = self._sql.tenant_key(namespace)
        rows = (
            []
            if key is None
            else self._sql.rows(f"SELECT model, dims, analyzer FROM recall_index_meta WHERE {self._ns} = ?", (key,))
        )
        return IndexMeta(rows[0][0], int(rows[0][1]), rows[0][2]) if rows else None

    def set_meta(self, namespace: str, meta: IndexMeta) -> None:
        """Record the settings of the namespace's rows, discarding rows they invalidate.

        Another analyser makes every row's terms stale (all rows are deleted,
        and the vocabulary with them); another model makes the vectors stale
        (they are cleared, terms kept). One transaction.

        Raises:
            BackendError: The write failed (nothing changed).
        """
        with self._sql.write() as w:
            key = self._sql.tenant_key(namespace)
            if key is None:
                return
            # FOR UPDATE on PostgreSQL: two writers of one namespace must not both pass the check.
            lock = "" if self._sql.dialect.name == "sqlite" else " FOR UPDATE"
            row = w.execute(
                f"SELECT model, dims, analyzer FROM recall_index_meta WHERE {self._ns} = ?{lock}", (key,)
            ).fetchone()
            if row is not None and row[2] != meta.analyzer:
                w.execute(f"DELETE FROM recall_index WHERE {self._ns} = ?", (key,))
                w.execute(f"DELETE FROM recall_terms WHERE {self._ns} = ?", (key,))
                w.execute(f"UPDATE recall_index_meta SET next_term = 0 WHERE {self._ns} = ?", (key,))
            elif row is not None and (row[0], int(row[1])) != (meta.model, meta.dims):
                w.execute(f"UPDATE recall_index SET vector = NULL WHERE {self._ns} = ?", (key,))
            w.execute(
                upsert("recall_index_meta", (self._ns,), ("model", "dims", "analyzer")),
                (key, meta.model, meta.dims, meta.analyzer),
            )

    def put(self, namespace: str, rows: Sequence[TurnIndexRow]) -> None:
        """Store rows (replacing existing ones of the same turns), in one transaction.

        Each row's space-joined terms are stored as ids into the namespace's
        vocabulary; terms it does not hold yet are added to it.

        Raises:
            BackendError: The write failed (nothing was stored).
        """
        if not rows:
            return
        d = self._sql.dialect
        lists = [r.terms.split() for r in rows]
        with self._sql.write() as w:
            key = self._sql.tenant_key(namespace)
            if key is None:
                return
            ids = _term_ids(w, d, key, namespace, (term for terms in lists for term in terms))
            flat = [ids[term] for terms in lists for term in terms]
            blobs = encode_many(flat, [len(terms) for terms in lists])
            w.executemany(
                upsert("recall_index", (self._ns, "turn_id"), ("term_ids", "vector", "events", "sentences")),
                [(key, r.turn_id, b, r.vector, r.events, r.sentences) for r, b in zip(rows, blobs, strict=True)],
            )

    def _vocab(self, key: Any) -> list[str]:
        rows = self._sql.rows(f"SELECT id, term FROM recall_terms WHERE {self._ns} = ?", (key,))
        vocab = [""] * (max((int(r[0]) for r in rows), default=-1) + 1)
        for tid, term in rows:
            vocab[int(tid)] = term
        return vocab

    def load(self, namespace: str, turn_ids: Sequence[int] | None = None) -> dict[int, TurnIndexRow]:
        """The rows of the namespace (or of some of its turns), by turn id, terms space-joined."""
        key = self._sql.tenant_key(namespace)
        if key is None:
            return {}
        if turn_ids is None:
            rows = self._index_rows("", (key,))
        else:
            rows = []
            for part in chunks([int(i) for i in turn_ids]):
                rows += self._index_rows(f" AND {self._sql.dialect.in_list('turn_id', len(part))}", [key, *part])
        if not rows:
            return {}
        ids, offsets = decode_ids([bytes(r[1]) for r in rows])
        terms = StoredTerms(ids, offsets, self._vocab(key))
        return {
            int(r[0]): TurnIndexRow(int(r[0]), terms.text(i), _blob(r[2]), r[3], None if r[4] is None else int(r[4]))
            for i, r in enumerate(rows)
        }

    def _index_rows(self, where: str, params: Sequence[object]) -> list[tuple[Any, ...]]:
        """Rows ``(turn_id, term_ids, vector, events, sentences)`` of the namespace, ``where`` narrowing them."""
        select = "SELECT turn_id, term_ids, vector, {} FROM recall_index WHERE " + f"{self._ns} = ?{where}"
        try:
            # Binary rows: every turn's vector and term ids, half the bytes of hex text (PostgreSQL).
            return self._sql.rows(select.format("events, sentences"), params, binary=True)
        except BackendError as exc:
            if "no such column" not in str(exc):
                raise
            # A read-only SQLite file written without m019_recall_events (an older version, or one
            # with m021_term_ids but not m019) is read without migrating: its rows have no event
            # dates or sentence counts yet (NULL: not made).
            return self._sql.rows(select.format("NULL, NULL"), params)

    def _key_rows(self, namespace: str, key: object) -> list[tuple[object, ...]]:
        # The namespace name rides along as a parameter, so each row is a TurnKey as read (TurnKey._make).
        return self._sql.rows(
            f"SELECT t.id, CAST(? AS TEXT), s.name, t.name, t.ts FROM turns t JOIN sessions s "
            f"ON s.{self._ns} = t.{self._ns} AND s.id = t.session_id WHERE t.{self._ns} = ? "
            "ORDER BY t.session_id, t.seq",
            (namespace, key),
            binary=True,
        )

    def keys(self, namespace: str) -> list[TurnKey]:
        """Id, session, speaker and timestamp of every turn of the namespace, in (session, sequence) order.

        The order of the store's ``iter_turns``; no content is read.
        """
        key = self._sql.tenant_key(namespace)
        return [] if key is None else list(map(TurnKey._make, self._key_rows(namespace, key)))

    def open_rows(
        self, namespace: str
    ) -> tuple[list[TurnKey], StoredTerms, list[bool], list[bytes | None], list[str | None], list[int | None]]:
        """:meth:`keys` with each turn's stored terms, vector, events and sentence count, in one read.

        Returns the keys, every turn's term ids (an empty list for a turn
        without a row), which turns have a row, each turn's vector
        (``None``: no row or no vector), its event dates and its sentence
        vector count (``None``: no row, or not made). What opening the index reads: two
        ordered scans and the vocabulary instead of two reads and a lookup per turn.
        """
        key = self._sql.tenant_key(namespace)
        if key is None:
            return [], StoredTerms.from_lists([]), [], [], [], []
        # Two range scans, joined here: joined in SQL, SQLite's planner sorts the rows (vectors
        # included) in a temporary B-tree, which took twice as long at 100k turns.
        keys = self._key_rows(namespace, key)
        rows = {r[0]: r for r in self._index_rows("", (key,))}
        got = [rows.get(k[0]) for k in keys]
        ids, offsets = decode_ids([b"" if r is None else bytes(r[1]) for r in got])
        return (
            list(map(TurnKey._make, keys)),
            StoredTerms(ids, offsets, self._vocab(key)),
            [r is not None for r in got],
            [None if r is None else _blob(r[2]) for r in got],
            [None if r is None else r[3] for r in got],
            [None if r is None or r[4] is None else int(r[4]) for r in got],
        )

    def missing(self, namespace: str, *, vectors: bool) -> list[int]:
        """Ids of the namespace's turns without a row (or, with ``vectors``, without a stored vector), ascending.

        What a crash between a commit and its indexing left behind (see
        :meth:`stratamem.memory.derived.Derived.repair`); one anti-join.
        """
        key = self._sql.tenant_key(namespace)
        if key is None:
            return []
        lacking = "r.turn_id IS NULL" + (" OR r.vector IS NULL" if vectors else "")
        return [
            int(r[0])
            for r in self._sql.rows(
                f"SELECT t.id FROM turns t LEFT JOIN recall_index r ON r.{self._ns} = t.{self._ns} "
                f"AND r.turn_id = t.id WHERE t.{self._ns} = ? AND ({lacking}) ORDER BY t.id",
                (key,),
            )
        ]

    def counts(self, namespace: str) -> tuple[int, int]:
        """``(rows, rows with a vector)`` of the namespace."""
        key = self._sql.tenant_key(namespace)
        if key is None:
            return 0, 0
        rows = self._sql.rows(f"SELECT COUNT(*), COUNT(vector) FROM recall_index WHERE {self._ns} = ?", (key,))
        return int(rows[0][0]), int(rows[0][1])

    def vocabulary(self, namespace: str) -> list[str]:
        """The namespace's stored vocabulary, by id (``""`` for an id no longer used)."""
        key = self._sql.tenant_key(namespace)
        return [] if key is None else self._vocab(key)

    def delete(self, namespace: str, turn_ids: Sequence[int] | None = None) -> int:
        """Delete the rows of some turns (or all of the namespace, with its settings); returns rows deleted.

        Terms only the deleted turns used leave the vocabulary in the same transaction.

        Raises:
            BackendError: The delete failed (nothing was deleted).
        """
        d = self._sql.dialect
        with self._sql.write() as w:
            key = self._sql.tenant_key(namespace)
            if key is None:
                return 0
            if turn_ids is None:
                w.execute(f"DELETE FROM recall_index_meta WHERE {self._ns} = ?", (key,))
                w.execute(f"DELETE FROM recall_terms WHERE {self._ns} = ?", (key,))
                return int(w.execute(f"DELETE FROM recall_index WHERE {self._ns} = ?", (key,)).rowcount)
            deleted = 0
            for part in chunks([int(i) for i in turn_ids]):
                deleted += int(
                    w.execute(
                        f"DELETE FROM recall_index WHERE {self._ns} = ? AND {d.in_list('turn_id', len(part))}",
                        [key, *part],
                    ).rowcount
                )
            if deleted:
                prune_terms(w, d, key)
            return deleted
