"""Passage vectors of long turns (``m011_passages``), one implementation for every backend.

One row per long turn (:mod:`stratamem.retrieve.passages`): the model that
made the vectors (since ``m028_model_ids`` the id of its key in
``recall_models``, where each key is stored once) and all its passages' int8 vectors
(:mod:`stratamem.embed.quantize`) concatenated in one blob — a blob's length
gives the passage count. Short turns (all of LoCoMo) have no row, so a store
of short turns does not grow. Rows made by another model are ignored on
read and replaced on the next write. Keyed like ``recall_index``
(:mod:`stratamem.store.turn_index`), so a forget deletes a turn's passages
with its row. The table's DDL is here too, one column list for both
backends (:mod:`stratamem.store.ddl`).

The same table keeps short turns' sentence vectors
(:mod:`stratamem.retrieve.sentence_rows`, under their own model key). On
SQLite it is an ordinary rowid table since ``m023_passage_pages``: its rows
(one blob of 0.4–4.7 KB per turn) fit a rowid table's leaf pages whole,
where the clustered (``WITHOUT ROWID``) table of ``m011_passages`` kept at
most ~1 KB of a row on its page and moved the rest to overflow pages of
their own — 2.7× the blobs' bytes on LoCoMo.
Reach it as ``store.embeddings.passages``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .ddl import run_tables
from .sql import SQLITE, Sql, chunks, dialect_of, upsert

__all__ = [
    "Passages",
    "m011_passages",
    "m023_passage_pages",
    "m024_sentence_nibbles",
    "m026_compact_store",
    "m026_sentence_bits",
    "m028_compact_rows",
    "m028_model_ids",
]

_COLUMNS = [
    "{tenant_column}",
    "turn_id {bigint} NOT NULL",
    "model TEXT NOT NULL",
    "vectors {blob} NOT NULL",
    "PRIMARY KEY ({tenant}, turn_id)",
]


def m011_passages(conn: Any) -> None:
    """Per long turn: its passages' int8 vectors in one blob, with the model that made them."""
    run_tables(conn, ("recall_passages", _COLUMNS, True))


def m023_passage_pages(conn: Any) -> None:
    """SQLite: ``recall_passages`` rebuilt as a rowid table, rows moved unchanged (PostgreSQL: nothing to do).

    A clustered (``WITHOUT ROWID``) table keeps at most about a quarter of a
    page of each row on its b-tree page (1,002 bytes of 4,096) and spills the
    rest to overflow pages, one page at least per row; a rowid table keeps a
    row of up to 4,061 bytes on its leaf page. Sentence blobs of 1–2.7 KB per
    short turn filled 2,036 KB of pages with 751 KB of vectors on one LoCoMo
    conversation. The key (tenant, turn id) stays the primary key (an index
    beside the table). PostgreSQL's heap already stores such rows whole (and
    larger ones in TOAST), so its table is left as it is.
    """
    if dialect_of(conn) is not SQLITE:
        return
    run_tables(conn, ("recall_passages_new", _COLUMNS, False))
    conn.execute(
        "INSERT INTO recall_passages_new (namespace_id, turn_id, model, vectors) "
        "SELECT namespace_id, turn_id, model, vectors FROM recall_passages ORDER BY namespace_id, turn_id"
    )
    conn.execute("DROP TABLE recall_passages")
    conn.execute("ALTER TABLE recall_passages_new RENAME TO recall_passages")


_BATCH = 2000


def m024_sentence_nibbles(conn: Any) -> None:
    """Stored sentence vectors re-encoded from int8 to 4 bits (both backends), their key ``.../sentences4``.

    A sentence row (model key ``<model>/<dims>/sentences``) holds int8
    vectors of ``dims + 4`` bytes each; each is decoded and encoded again by
    :func:`~stratamem.embed.quantize.encode_int4` (``(dims + 1) // 2`` bytes),
    and the row recorded under ``<model>/<dims>/sentences4``, what
    :mod:`stratamem.retrieve.sentence_rows` reads then. No model is needed. A
    row whose length is not a whole number of vectors is left as it is (its
    key is then stale: the turn's sentences are made again on open).
    """
    from ..embed.quantize import decode_int8, encode_int4, int8_blob_size

    def recode(blob: bytes, dims: int) -> bytes | None:
        size = int8_blob_size(dims)
        if len(blob) % size:
            return None
        return b"".join(encode_int4(decode_int8([blob[i : i + size] for i in range(0, len(blob), size)], dims)))

    _recode_sentences(conn, "/sentences", "/sentences4", recode)


def m026_sentence_bits(conn: Any) -> None:
    """Stored sentence vectors re-encoded from 4 bits to 2 (both backends), their key ``.../sentences2``.

    Each 4-bit row (``<model>/<dims>/sentences4``) is unpacked and encoded
    again by :func:`~stratamem.embed.quantize.encode_int2` (from its 4-bit
    codes: the edge between a small and a large level is 0.98 times their
    root mean square), and recorded under ``<model>/<dims>/sentences2``, what
    :mod:`stratamem.retrieve.sentence_rows` reads now. No model is needed. A
    row whose length is not a whole number of vectors is left as it is (its
    key is then stale: the turn's sentences are made again on open).
    """
    from ..embed.quantize import encode_int2, int4_blob_size, int4_rows

    def recode(blob: bytes, dims: int) -> bytes | None:
        if len(blob) % int4_blob_size(dims):
            return None
        return b"".join(encode_int2(int4_rows(blob, dims)))

    _recode_sentences(conn, "/sentences4", "/sentences2", recode)


def _recode_sentences(conn: Any, old: str, new: str, recode: Callable[[bytes, int], bytes | None]) -> None:
    """Rewrite every sentence row keyed ``<model>/<dims><old>`` by ``recode(blob, dims)``, keyed ``...<new>``.

    Rows go in batches of :data:`_BATCH` in key order. A row ``recode``
    refuses (``None``), an empty one or one whose key names no dimensions is
    left as it is.
    """
    d = dialect_of(conn)
    t = d.tenant
    last: tuple[Any, ...] = ()
    while True:
        after = f"AND ({t}, turn_id) > (?, ?)" if last else ""
        rows = conn.execute(
            d.sql(
                f"SELECT {t}, turn_id, model, vectors FROM recall_passages WHERE model LIKE '%{old}' {after} "
                f"ORDER BY {t}, turn_id LIMIT {_BATCH}"
            ),
            last,
        ).fetchall()
        if not rows:
            return
        last = tuple(rows[-1][:2])
        out = []
        for key, turn_id, model, blob in rows:
            blob, model = bytes(blob), str(model)
            dims = int(model.rsplit("/", 2)[-2]) if model.count("/") >= 2 else 0
            coded = recode(blob, dims) if dims > 0 and blob else None
            if coded is not None:
                out.append((model[: -len(old)] + new, coded, key, turn_id))
        if out:
            conn.cursor().executemany(
                d.sql(f"UPDATE recall_passages SET model = ?, vectors = ? WHERE {t} = ? AND turn_id = ?"), out
            )


def m026_compact_store(conn: Any) -> None:
    """Issue 28's third pass (both backends, no model needed): sentence vectors in 2 bits
    (:func:`m026_sentence_bits`), older manifests brief
    (:func:`~stratamem.store.manifests.m026_brief_manifests`). On SQLite the file is then vacuumed
    when enough of it is free (:func:`stratamem.store.migrations.apply`)."""
    from .manifests import m026_brief_manifests

    m026_sentence_bits(conn)
    m026_brief_manifests(conn)


_MODELS = {
    # SQLite: one clustered page keyed by the name (writers are serialized: the next id is MAX + 1).
    "sqlite": "CREATE TABLE recall_models (model TEXT PRIMARY KEY, id INTEGER NOT NULL) WITHOUT ROWID",
    "postgres": "CREATE TABLE recall_models (id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, "
    "model TEXT NOT NULL UNIQUE)",
}
_NEW_MODEL = {
    "sqlite": "INSERT INTO recall_models (model, id) SELECT ?, COALESCE(MAX(id), 0) + 1 FROM recall_models "
    "WHERE true ON CONFLICT (model) DO NOTHING",
    "postgres": "INSERT INTO recall_models (model) VALUES (?) ON CONFLICT (model) DO NOTHING",
}


def m028_model_ids(conn: Any) -> None:
    """Each passage row names its model key by a small id into ``recall_models`` (both backends, idempotent).

    The key (``all-MiniLM-L6-v2/384/sentences2``: 31 bytes) was stored on
    every row, ~17 KB per 1,000 LoCoMo turns for one value per store; now it
    is stored once, and a row holds its id (one byte). Reads are the same:
    :meth:`Passages.load` filters on the id of the key it is asked for. SQLite
    rebuilds the table (a rowid table, as ``m023_passage_pages`` made it);
    PostgreSQL adds the column, fills it and drops the old one.
    """
    d = dialect_of(conn)
    if d is SQLITE:
        done = any(r[1] == "model_id" for r in conn.execute("PRAGMA table_info(recall_passages)").fetchall())
    else:
        done = (
            conn.execute(
                "SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() "
                "AND table_name = 'recall_passages' AND column_name = 'model_id'"
            ).fetchone()
            is not None
        )
    if done:
        return
    conn.execute(_MODELS[d.name])
    if d is SQLITE:
        conn.execute(
            "INSERT INTO recall_models (model, id) SELECT model, ROW_NUMBER() OVER (ORDER BY model) "
            "FROM (SELECT DISTINCT model FROM recall_passages) AS keys"
        )
    else:  # (ids from the identity column, so later inserts continue after them)
        conn.execute("INSERT INTO recall_models (model) SELECT DISTINCT model FROM recall_passages ORDER BY model")
    if d is SQLITE:
        run_tables(conn, ("recall_passages_new", _COLUMNS_V28, False))
        conn.execute(
            "INSERT INTO recall_passages_new (namespace_id, turn_id, model_id, vectors) "
            "SELECT p.namespace_id, p.turn_id, m.id, p.vectors FROM recall_passages p "
            "JOIN recall_models m ON m.model = p.model ORDER BY p.namespace_id, p.turn_id"
        )
        conn.execute("DROP TABLE recall_passages")
        conn.execute("ALTER TABLE recall_passages_new RENAME TO recall_passages")
        return
    for statement in (
        "ALTER TABLE recall_passages ADD COLUMN model_id BIGINT",
        "UPDATE recall_passages p SET model_id = m.id FROM recall_models m WHERE m.model = p.model",
        "ALTER TABLE recall_passages ALTER COLUMN model_id SET NOT NULL",
        "ALTER TABLE recall_passages DROP COLUMN model",
    ):
        conn.execute(statement)


_COLUMNS_V28 = [
    "{tenant_column}",
    "turn_id {bigint} NOT NULL",
    "model_id {bigint} NOT NULL",
    "vectors {blob} NOT NULL",
    "PRIMARY KEY ({tenant}, turn_id)",
]
"""``recall_passages`` since ``m028_model_ids`` (SQLite's rebuild; PostgreSQL reaches the same columns by ALTER)."""


def m028_compact_rows(conn: Any) -> None:
    """Issue 28's row pass (both backends, no model needed, idempotent): SQLite turn timestamps in
    8 bytes (:func:`~stratamem.store.turn_stamps.m028_turn_stamps`), passage rows naming their model key
    by id (:func:`m028_model_ids`). On SQLite the file is then vacuumed
    when enough of it is free (:func:`stratamem.store.migrations.apply`)."""
    from .turn_stamps import m028_turn_stamps

    m028_turn_stamps(conn)
    m028_model_ids(conn)


class Passages:
    """Passage vector blobs of long turns, per namespace (shares the store's transactions).

    Args:
        sql: The owning store's SQL layer.
    """

    def __init__(self, sql: Sql) -> None:
        self._sql = sql
        self._ns = sql.dialect.tenant

    def put(self, namespace: str, model: str, blobs: dict[int, bytes]) -> None:
        """Store the passage blobs of turns (turn id -> blob), replacing theirs, in one transaction.

        Raises:
            BackendError: The write failed (nothing was stored).
        """
        if not blobs:
            return
        with self._sql.write() as w:
            key = self._sql.tenant_key(namespace)
            if key is None:  # (SQLite: a namespace that does not exist has no id; nothing to store)
                return
            w.execute(_NEW_MODEL[self._sql.dialect.name], (model,))
            (mid,) = w.execute("SELECT id FROM recall_models WHERE model = ?", (model,)).fetchone()
            w.executemany(
                upsert("recall_passages", (self._ns, "turn_id"), ("model_id", "vectors")),
                [(key, int(t), int(mid), b) for t, b in blobs.items()],
            )

    def load(self, namespace: str, model: str, turn_ids: Sequence[int] | None = None) -> dict[int, bytes]:
        """Blobs made by ``model`` of the namespace's long turns (or of some of them), by turn id."""
        key = self._sql.tenant_key(namespace)
        if key is None:
            return {}
        select = (
            f"SELECT turn_id, vectors FROM recall_passages WHERE {self._ns} = ? "
            "AND model_id = (SELECT id FROM recall_models WHERE model = ?)"
        )
        if turn_ids is None:
            rows = self._sql.rows(select, (key, model), binary=True)  # every blob: binary rows (PostgreSQL)
        else:
            rows = []
            for part in chunks([int(i) for i in turn_ids]):
                rows += self._sql.rows(
                    f"{select} AND {self._sql.dialect.in_list('turn_id', len(part))}", [key, model, *part]
                )
        return {int(r[0]): bytes(r[1]) for r in rows}

    def size(self, namespace: str) -> tuple[int, int]:
        """``(rows, bytes of vector blobs)`` of the namespace."""
        key = self._sql.tenant_key(namespace)
        if key is None:
            return 0, 0
        rows = self._sql.rows(
            f"SELECT COUNT(*), COALESCE(SUM(LENGTH(vectors)), 0) FROM recall_passages WHERE {self._ns} = ?", (key,)
        )
        return int(rows[0][0]), int(rows[0][1])
