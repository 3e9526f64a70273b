"""The records the persisted recall index exchanges with its stores (both backends).

See :mod:`stratamem.store.turn_index`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from .turn_stamps import unpack_stamp

__all__ = ["IndexMeta", "TurnIndexRow", "TurnKey"]


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
    events: str | None = None
    """The days it tells of, resolved when it was written (:mod:`stratamem.retrieve.eventdates`:
    ``"19695:19696 …"``, ``""`` for none), or ``None`` if not read yet (a row written before them)."""
    sentences: int | None = None
    """How many sentence vectors the turn has in ``store.embeddings.passages``
    (:mod:`stratamem.retrieve.sentences`; 0: none), or ``None`` if they were not made."""


class TurnKey(NamedTuple):
    """What the recall index needs of a turn to rank it; the full turn is read when it is recalled.

    Opening an index of 100k turns reads these few columns instead of
    decoding and validating every turn. A named tuple, not a frozen
    dataclass: the store builds one per turn with ``TurnKey._make`` straight
    from its rows (C speed), where a frozen dataclass's ``__init__`` cost
    ~1 s per 100k turns on a loaded 2-core machine.
    """

    id: int
    """The turn's id."""
    namespace: str
    """Its namespace."""
    session: str
    """Its session's name."""
    name: str | None
    """Its speaker's name, if any."""
    ts: datetime | str | bytes
    """Its timestamp as stored (parsed on access: only a session's first turn is ever asked;
    SQLite's 8-byte form: :mod:`stratamem.store.turn_stamps`)."""

    @property
    def timestamp(self) -> datetime:
        """The turn's timestamp."""
        return self.ts if isinstance(self.ts, datetime) else unpack_stamp(self.ts)
