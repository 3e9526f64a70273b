"""The records the persisted recall index exchanges with its stores (both backends).

See :mod:`stratamem.store.sqlite_turn_embeddings` and
:mod:`stratamem.store.postgres_turn_embeddings`.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["IndexMeta", "TurnIndexRow"]


@dataclass(frozen=True, slots=True)
class IndexMeta:
    """What a namespace's persisted index rows were made with."""

    model: str
    """Embedding model of the vectors (``""``: none yet)."""
    dims: int
    """Vector length (0 with no model)."""
    analyzer: str
    """Fingerprint of the word analysis that made the terms."""


@dataclass(frozen=True, slots=True)
class TurnIndexRow:
    """One turn's persisted index entry."""

    turn_id: int
    """The turn."""
    terms: str
    """Its analysed index terms, space-separated."""
    vector: bytes | None
    """Its vector as an int8 blob (:func:`stratamem.embed.quantize.encode_int8`), or ``None`` if not embedded."""
