"""The pyramid's migrations on PostgreSQL: the shared bodies, with the pgvector check first.

Statements and DDL are one implementation for every backend,
:mod:`stratamem.store.node_store`. On PostgreSQL every row carries the tenant
column ``namespace``; segments name their session directly; ``node_turns`` has
the primary key ``(namespace, level, turn_id)``; summary embeddings are
pgvector values holding the int8-quantized floats; and there are no foreign
keys into the canonical tables (retention deletes turns while their coverage
rows stay), only node-to-node links within the namespace.
"""

from __future__ import annotations

from typing import Any

from .. import node_store
from ..node_store import m014_summary_spend, m020_node_settled
from .search import require_pgvector

__all__ = ["m003_pyramid", "m014_summary_spend", "m020_node_settled"]


def m003_pyramid(conn: Any) -> None:
    """Pyramid nodes and their turn coverage (:func:`stratamem.store.node_store.m003_pyramid`), pgvector first."""
    require_pgvector(conn)
    node_store.m003_pyramid(conn)
