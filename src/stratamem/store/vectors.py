"""How node (summary) and item vectors are kept: int8 codes with one float32 scale (``m015_int8_vectors``).

Callers hand the stores little-endian float32 bytes and get float32 bytes
back, as before; in between, a vector is stored as the turn vectors of the
recall index are (:mod:`stratamem.embed.quantize`: ``<f4 scale`` then one
int8 code per component, 388 bytes for 384 dimensions instead of 1,536).

Reading multiplies the codes by the scale, so a vector comes back within
half a quantisation step (``scale / 2``) of what was written, magnitude
included; it is not re-normalised, because the store does not know that a
caller's vector was unit length (the embedder wrapper makes it so).

Both backends return the same values. SQLite keeps the int8 blob; PostgreSQL
keeps pgvector ``vector`` columns (its exact-cosine search runs on them, and
pgvector has no int8 type) holding :func:`quantized` values — the very
floats SQLite decodes — so a differential run of the two backends builds the
same indexes and rankings, and only SQLite's file shrinks. The pgvector
wire forms (text literal in, ``vector_send`` binary out) live here too, so
the shared node and item code (:mod:`stratamem.store.node_store`,
:mod:`stratamem.store.item_reads`) reads and writes either backend through
:func:`vector_select`, :func:`read_vector`, :func:`vector_placeholder` and
:func:`write_vector`.
"""

from __future__ import annotations

from typing import Any

from ..embed.quantize import encode_int8
from ..errors import BackendError
from .sql import SQLITE, Dialect, dialect_of

__all__ = [
    "m015_int8_vectors",
    "pack_vector",
    "quantized",
    "read_vector",
    "unpack_vector",
    "vector_from_binary",
    "vector_literal",
    "vector_placeholder",
    "vector_select",
    "write_vector",
]


def pack_vector(raw: bytes) -> bytes:
    """The stored int8 form of little-endian float32 bytes.

    Raises:
        ValueError: ``raw`` is not a whole number of float32 values, or holds NaN or infinity.
    """
    import numpy as np

    if len(raw) % 4:
        raise ValueError(f"a float32 vector needs a multiple of 4 bytes, got {len(raw)}")
    return encode_int8(np.frombuffer(raw, dtype="<f4").reshape(1, -1))[0]


def unpack_vector(blob: bytes) -> bytes:
    """Little-endian float32 bytes of a stored int8 form (codes times scale).

    Raises:
        BackendError: The blob is shorter than its scale (corrupt data).
    """
    import numpy as np

    if len(blob) < 4:
        raise BackendError(f"stored vector is {len(blob)} bytes, shorter than its 4-byte scale")
    scale = np.frombuffer(blob, dtype="<f4", count=1)[0]
    codes = np.frombuffer(blob, dtype=np.int8, offset=4).astype("<f4")
    return (codes * scale).astype("<f4").tobytes()


def quantized(raw: bytes) -> bytes:
    """``raw`` after a store round trip: the float32 bytes :func:`unpack_vector` gives for it."""
    return unpack_vector(pack_vector(raw))


# --- pgvector's wire forms (PostgreSQL keeps the quantized floats in ``vector`` columns) ----------


def vector_literal(blob: bytes) -> str:
    """pgvector text for little-endian float32 bytes.

    Raises:
        ValueError: The bytes are not a whole number of float32 values, or empty.
    """
    import numpy as np

    if not blob or len(blob) % 4:
        raise ValueError(f"a vector needs a positive multiple of 4 bytes, got {len(blob)}")
    values = np.frombuffer(blob, dtype="<f4")
    if not np.all(np.isfinite(values)):
        raise ValueError("a vector must not contain NaN or infinity (pgvector refuses them)")
    return "[" + ",".join(repr(v) for v in values.astype(np.float64).tolist()) + "]"


def vector_from_binary(data: bytes) -> bytes:
    """Little-endian float32 bytes from pgvector's binary form (int16 dims, int16 unused, big-endian floats).

    Raises:
        BackendError: The value is truncated.
    """
    import numpy as np

    dims = int.from_bytes(data[:2], "big")
    if len(data) != 4 + 4 * dims:
        raise BackendError(f"pgvector value of {len(data)} bytes does not hold {dims} dimensions")
    return np.frombuffer(data, dtype=">f4", offset=4).astype("<f4").tobytes()


# --- one column, either backend -------------------------------------------------------------------


def vector_select(dialect: Dialect, column: str) -> str:
    """``column`` (a stored node or item vector) as a select-list expression :func:`read_vector` decodes."""
    return column if dialect is SQLITE else f"vector_send({column})"


def read_vector(dialect: Dialect, value: Any) -> bytes:
    """Float32 bytes of a stored vector read through :func:`vector_select` (not ``None``)."""
    return unpack_vector(bytes(value)) if dialect is SQLITE else vector_from_binary(bytes(value))


def vector_placeholder(dialect: Dialect) -> str:
    """The placeholder for a value made by :func:`write_vector`."""
    return "?" if dialect is SQLITE else "CAST(? AS vector)"


def write_vector(dialect: Dialect, raw: bytes | None) -> Any:
    """The stored form of float32 bytes: the int8 blob (SQLite), the quantized floats as pgvector text (PostgreSQL).

    Raises:
        ValueError: ``raw`` is not a whole number of float32 values, or holds NaN or infinity.
    """
    if raw is None:
        return None
    return pack_vector(raw) if dialect is SQLITE else vector_literal(quantized(raw))


# Key columns of nodes and memory_items per dialect: m015 reads and writes the rows by key, in batches.
_KEYS = {"sqlite": "id", "postgres": "namespace, id"}
_BATCH = 1000


def m015_int8_vectors(conn: Any) -> None:
    """Node and item vectors become int8 codes with a scale (both backends; one body, the dialect decides).

    SQLite: every float32 blob in ``nodes.embedding`` and
    ``memory_items.embedding`` is rewritten in its int8 form (the item vector
    log's update trigger records each item, so in-memory indexes reload it).
    PostgreSQL: the ``vector`` values are replaced by their :func:`quantized`
    floats, and each item is logged, so both backends hold the same values.
    Rows are read and written in batches by key, inside the migration's transaction.
    """
    dialect = dialect_of(conn)
    for table in ("nodes", "memory_items"):
        _convert(conn, dialect, table)


def _convert(conn: Any, dialect: Dialect, table: str) -> None:
    import numpy as np

    keys = _KEYS[dialect.name]
    width = keys.count(",") + 1
    where = " AND ".join(f"{k.strip()} = ?" for k in keys.split(","))
    # PostgreSQL: the vector travels as a real[] (pgvector casts both ways; float4 text is exact).
    read = "embedding" if dialect is SQLITE else "CAST(embedding AS real[])"
    last: tuple[Any, ...] = ()
    while True:
        after = f"AND ({keys}) > ({', '.join('?' * width)})" if last else ""
        rows = conn.execute(
            dialect.sql(
                f"SELECT {keys}, {read} FROM {table} WHERE embedding IS NOT NULL {after} ORDER BY {keys} LIMIT {_BATCH}"
            ),
            last,
        ).fetchall()
        if not rows:
            return
        last = tuple(rows[-1][:width])
        cur = conn.cursor()
        if dialect is SQLITE:
            cur.executemany(
                f"UPDATE {table} SET embedding = ? WHERE {where}",
                [(pack_vector(bytes(r[-1])), *r[:width]) for r in rows],
            )
            continue
        params = [
            (np.frombuffer(quantized(np.asarray(r[-1], dtype="<f4").tobytes()), dtype="<f4").tolist(), *r[:width])
            for r in rows
        ]
        cur.executemany(
            dialect.sql(f"UPDATE {table} SET embedding = CAST(CAST(? AS real[]) AS vector) WHERE {where}"), params
        )
        if table == "memory_items":  # the PostgreSQL item store logs changed vectors itself (no trigger)
            cur.executemany(
                dialect.sql("INSERT INTO memory_item_vector_log (namespace, item_id) VALUES (?, ?)"),
                [r[:width] for r in rows],
            )
