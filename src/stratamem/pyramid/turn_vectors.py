"""A summary's vector made from its turns' stored vectors, not by embedding its text.

Every turn already has a vector in the persisted recall index
(:mod:`stratamem.store.turn_index`), made by the same embedder when the turn
was written. A node's vector is the unit-length sum of its turns' vectors —
the direction of their mean — so the pyramid asks the model for nothing more.
Measured against embedding the summary text (``benchmarks/summary_rank_bench.py``,
the ``pyramid`` policy's top-3 segments for every LoCoMo question with
evidence): hit@3 0.613 against 0.597, hit@1 0.456 against 0.454; on the
synthetic assistant-chat set hit@3 0.112 against 0.108 and hit@1 0.068 against
0.076 (250 questions: a tie). On the LoCoMo ingest it spares about 490 texts,
35 of them long consolidations (``docs/embeddings.md``).

A node gets a derived vector only when every one of its turns has a stored
vector of the pyramid's model; otherwise its summary text is embedded as
before, so a store whose turn vectors are missing or from another model
still gets vectors of the right model.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..embed.quantize import is_turn_blob, turn_codes, unit_rows

__all__ = ["stored_turn_vectors", "turn_mean_vectors"]


def _vectors_of(store: Any, namespace: str, model: str) -> tuple[Any, Any] | None:
    """The store's recall-index feature and its meta, when it holds vectors of ``model``; else ``None``."""
    feature = getattr(getattr(store, "embeddings", None), "turns", None)
    if feature is None or not model:
        return None
    meta = feature.meta(namespace)
    if meta is None or meta.model != model or meta.dims <= 0:
        return None
    return feature, meta


def turn_mean_vectors(
    store: Any, namespace: str, model: str, turn_ids: Mapping[int, Sequence[int]]
) -> dict[int, np.ndarray]:
    """Unit vector of the sum of each node's stored turn vectors, for the nodes that can have one.

    Args:
        store: The store (its ``embeddings.turns`` holds the recall index rows).
        namespace: The namespace of the nodes.
        model: Name of the embedder the vectors must come from.
        turn_ids: Node id -> the ids of its turns.

    Returns:
        Node id -> float32 unit vector, only for nodes whose turns all have a
        stored vector of ``model`` (one read for all of them).
    """
    found = _vectors_of(store, namespace, model) if turn_ids else None
    if found is None:
        return {}
    feature, meta = found
    rows = feature.load(namespace, sorted({int(t) for ids in turn_ids.values() for t in ids}))
    out: dict[int, np.ndarray] = {}
    for node_id, ids in turn_ids.items():
        blobs = [rows[t].vector if t in rows else None for t in ids]
        if not blobs or not all(is_turn_blob(b, meta.dims) for b in blobs):
            continue
        total = unit_rows(turn_codes(blobs, meta.dims)).sum(axis=0, dtype=np.float64)  # type: ignore[arg-type]
        norm = float(np.linalg.norm(total))
        if norm > 0:
            out[node_id] = (total / norm).astype(np.float32)
    return out


def stored_turn_vectors(store: Any, namespace: str, model: str, turn_ids: Sequence[int]) -> dict[int, np.ndarray]:
    """The stored unit vectors of ``turn_ids`` made by ``model`` (those that have one), for the topic segmenter.

    Returns:
        Turn id -> float32 vector; empty when the store keeps no recall index,
        its vectors come from another model, or ``model`` is empty.
    """
    found = _vectors_of(store, namespace, model) if turn_ids else None
    if found is None:
        return {}
    feature, meta = found
    rows = feature.load(namespace, [int(t) for t in turn_ids])
    ids = [t for t in turn_ids if t in rows and is_turn_blob(rows[t].vector, meta.dims)]
    if not ids:
        return {}
    decoded = unit_rows(turn_codes([rows[t].vector for t in ids], meta.dims))
    return {t: decoded[i] for i, t in enumerate(ids)}
