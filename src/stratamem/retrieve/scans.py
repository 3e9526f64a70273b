"""The vector scans of a question and its sub-queries, each distinct query vector scanned once.

A planned question scores several query vectors (:mod:`.plan`), and they
often coincide: each vector is embedded from the query without the speaker
names it mentions (:func:`.query.without_speakers`), so the two sub-queries of
a ``pair`` question ("When did Caroline go …", "When did Melanie go …") have
one vector text and one vector. Scanning it twice costs a pass over every
turn vector and every sentence vector for the same numbers (issue 28: at
100k turns, a third of a pair question's scans). Each query's row of
:meth:`.VectorRows.dots_many` is bit for bit what it is in any other batch,
so scanning the distinct vectors and handing each query its vector's row
gives every query exactly the scans it had.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    from .ivf import ScanSettings

__all__ = ["Scan", "distinct", "scan_queries"]

Scan = tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]
"""A query vector and its scans: turn cosines, best sentence and best passage cosines (each ``None`` when unused)."""


class _Matrix(Protocol):
    def __len__(self) -> int: ...

    def scan(self, queries: Sequence[np.ndarray], probe: int | None) -> np.ndarray: ...


class _Best(Protocol):
    def __len__(self) -> int: ...

    def best_many(
        self, queries: Sequence[np.ndarray], turn_cosines: Sequence[np.ndarray], probe: int | None = None
    ) -> list[np.ndarray]: ...


def distinct(vectors: Sequence[np.ndarray]) -> tuple[list[np.ndarray], list[int]]:
    """The distinct vectors of ``vectors`` (equal bytes: equal vectors), in first-seen order, and the
    position of each of ``vectors`` among them."""
    first: dict[bytes, int] = {}
    slots = [first.setdefault(np.asarray(v, dtype=np.float32).tobytes(), len(first)) for v in vectors]
    kept = [vectors[slots.index(j)] for j in range(len(first))]
    return kept, slots


def scan_queries(
    vectors: Sequence[np.ndarray],
    turns: _Matrix,
    sentences: _Best | None,
    passages: _Best | None,
    settings: ScanSettings,
) -> list[Scan]:
    """Each of ``vectors`` with its turn cosines and, where given, its best sentence and best passage
    cosines (``sentences`` / ``passages``: ``None`` when unused), each distinct vector scanned once.

    Each matrix is scanned exactly or through its lists by its own row count (``settings``,
    :meth:`.ScanSettings.probe_for`): the sentence rows (~2.5 a turn) reach the threshold long
    before the turn rows do, and they are most of a planned question's scans.

    A repeated vector gets copies of its arrays, so no two queries share one that a caller may change.
    """
    kept, slots = distinct(vectors)
    dots = list(turns.scan(kept, settings.probe_for(len(turns))))
    none: list[np.ndarray | None] = [None] * len(kept)
    best_s: Sequence[np.ndarray | None] = none
    if sentences is not None:
        best_s = sentences.best_many(kept, dots, settings.probe_for(len(sentences)))
    best_p: Sequence[np.ndarray | None] = none
    if passages is not None:
        best_p = passages.best_many(kept, dots, settings.probe_for(len(passages)))
    out: list[Scan] = []
    given: set[int] = set()
    for v, j in zip(vectors, slots, strict=True):
        d, s, p = dots[j], best_s[j], best_p[j]
        if j in given:
            d, s, p = d.copy(), _copy(s), _copy(p)
        given.add(j)
        out.append((v, d, s, p))
    return out


def _copy(a: np.ndarray | None) -> np.ndarray | None:
    return None if a is None else a.copy()
