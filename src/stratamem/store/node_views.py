"""Warm views of pyramid segments, in a table of their own (``m025_lean_store``), for every backend.

A warm segment keeps a compact copy of its turns (CTF or JSON,
:mod:`stratamem.pyramid.tiers`), and a cold one too with ``cold_format: ctf``.
Until ``m025_lean_store`` the copy was two columns of ``nodes``
(``warm_format``, ``warm_content``): a node row grew by its view (~1.6 KB on
LoCoMo) when the segment turned warm and shrank when it turned cold, and
SQLite split the pages the rows grew in and left them part-empty — on
LoCoMo a third of the ``nodes`` pages was slack (the pyramid took 267 KB per
1,000 turns with the column, 204 KB without it, same run). Here a view is
inserted whole and deleted whole, keyed like the node, and ``nodes`` rows
keep their size once summarized.

Every statement on ``node_views`` is here; :class:`~stratamem.store.node_store.NodeStore`
and the forget paths call these helpers inside their own transactions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .ddl import run_tables
from .sql import Dialect, Writer, chunks, dialect_of

__all__ = ["delete_views", "m025_lean_store", "m025_node_views", "put_view"]

_COLUMNS = [
    "{tenant_column}",
    "node_id {bigint} NOT NULL",
    "format TEXT NOT NULL",
    "content TEXT NOT NULL",
    "PRIMARY KEY ({tenant}, node_id)",
]


def m025_node_views(conn: Any) -> None:
    """``node_views`` made, every stored warm view moved into it unchanged, the two ``nodes`` columns dropped."""
    d = dialect_of(conn)
    t = d.tenant
    # A rowid table on SQLite: a view (1-3 KB) fits a leaf page whole (a clustered row spills past ~1 KB).
    run_tables(conn, ("node_views", _COLUMNS, False))
    conn.execute(
        f"INSERT INTO node_views ({t}, node_id, format, content) "
        f"SELECT {t}, id, warm_format, warm_content FROM nodes "
        f"WHERE warm_content IS NOT NULL AND warm_format IS NOT NULL ORDER BY {t}, id"
    )
    conn.execute("ALTER TABLE nodes DROP COLUMN warm_content")
    conn.execute("ALTER TABLE nodes DROP COLUMN warm_format")


def put_view(w: Writer, d: Dialect, key: Any, node_id: int, view: tuple[str, str] | None) -> None:
    """Make ``view`` (``(format, content)``) the node's warm view; ``None`` removes it."""
    w.execute(f"DELETE FROM node_views WHERE {d.tenant} = ? AND node_id = ?", (key, int(node_id)))
    if view is not None:
        w.execute(
            f"INSERT INTO node_views ({d.tenant}, node_id, format, content) VALUES (?, ?, ?, ?)",
            (key, int(node_id), view[0], view[1]),
        )


def delete_views(w: Writer, d: Dialect, key: Any, node_ids: Sequence[int] | None = None) -> None:
    """Remove the warm views of some of the namespace's nodes (``None``: all of them)."""
    if node_ids is None:
        w.execute(f"DELETE FROM node_views WHERE {d.tenant} = ?", (key,))
        return
    for part in chunks([int(i) for i in node_ids]):
        w.execute(f"DELETE FROM node_views WHERE {d.tenant} = ? AND {d.in_list('node_id', len(part))}", (key, *part))


def m025_lean_store(conn: Any) -> None:
    """Issue 28's leaner layout (both backends): turn vectors in 6 bits, warm views out of ``nodes``.

    :func:`~stratamem.store.turn_index.m025_turn_vectors6` re-encodes the
    stored int8 turn vectors; :func:`m025_node_views` moves the warm views
    into their own table. On SQLite the dropped columns rewrite ``nodes``,
    so the migration asks for a ``VACUUM`` (run when a quarter of the file
    is free pages: :func:`stratamem.store.migrations.apply`).
    """
    from .turn_index import m025_turn_vectors6

    m025_turn_vectors6(conn)
    m025_node_views(conn)
