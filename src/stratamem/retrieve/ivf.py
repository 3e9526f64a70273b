"""Approximate vector scans for large indexes: rows grouped into lists around centroids (IVF).

A vector matrix of fewer than :attr:`ScanSettings.rows` rows is scored against
every row (exact, :meth:`.VectorRows.dots_many`). Past it a
full scan is most of a warm context (issue 28: at 1M turns the int8 products
over the 1M turn rows took ~70 ms and those over ~2.5M sentence rows ~175 ms
per query vector), so each matrix is cut into :data:`LISTS` lists and a query
scans only the :attr:`ScanSettings.probe` lists whose centroids are nearest
to it. The rows scanned are scored exactly (the same int8 products, scaled by
the row's inverse norm); a row in no probed list scores 0, which the signals
read as "no similarity" (they clip cosines at 0).

The centroids are found once per open matrix, two levels deep so that placing
a row costs :data:`COARSE` + :data:`FINE` dot products rather than one per
list: :data:`COARSE` centroids by spherical k-means over an evenly spaced
sample of the rows, then :data:`FINE` inside each of them over its share of
the sample. A row joins the list of the best fine centroid of its best coarse
one. Rows added later (the agent loop) join lists the same way; rows are never
taken out, because the index is append-only: a forget (or retention) reopens
the whole index from the store (:meth:`.LiveIndex.current`), clusters
included. Everything is deterministic (sample by position, seeds by position),
so two processes over one store build the same lists.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

log = logging.getLogger("stratamem.retrieve")

if TYPE_CHECKING:
    from .vector_rows import VectorRows

__all__ = ["COARSE", "FINE", "LISTS", "SAMPLE", "Clusters", "ScanSettings"]

COARSE = 32
"""Centroids of the first level (a row is compared with each)."""

FINE = 32
"""Centroids inside each coarse one (a row is compared with those of its coarse centroid)."""

LISTS = COARSE * FINE
"""Lists a matrix is cut into (at most: a coarse centroid with few sample rows gets fewer)."""

SAMPLE = 64 * LISTS
"""Rows the centroids are found from (evenly spaced over the matrix): 64 per list."""

ROUNDS = 8
"""k-means rounds at each level."""

_BLOCK = 4096  # rows placed per step (a float32 block of 6 MB at 384 dims)


@dataclass(frozen=True, slots=True)
class ScanSettings:
    """When and how widely an index scans its vectors approximately (``embedding.approximate_from``
    and ``embedding.probe`` in :mod:`stratamem.config`)."""

    rows: int = 200_000
    """Rows from which a vector matrix (turns, sentences, passages) is scanned through lists (below:
    every row, exactly). Each matrix goes by its own rows: the sentence rows (~2.5 a turn on the
    benchmark's store) cross it at ~80k turns, the turn rows at 200k. LoCoMo and the chat set are
    far below (~15k sentence rows), so their recall is that of the exact scan. 0: never."""
    probe: int = 64
    """Lists scanned per query vector, of :data:`LISTS`: at 1M turns ~6% of the rows
    (docs/benchmarks.md gives the overlap with the exact top 50)."""

    def applies(self, rows: int) -> bool:
        """Whether a matrix of ``rows`` rows is scanned approximately."""
        return 0 < self.rows <= rows

    def probe_for(self, rows: int) -> int | None:
        """Lists to probe in a matrix of ``rows`` rows (``None``: it scans every row)."""
        return self.probe if self.applies(rows) else None


def _kmeans(rows: np.ndarray, k: int) -> np.ndarray:
    """``k`` unit centroids of unit ``rows`` (spherical k-means, :data:`ROUNDS` rounds, seeded with
    evenly spaced rows; a centroid that loses all its rows keeps its place)."""
    centroids = rows[np.linspace(0, len(rows) - 1, k).astype(np.int64)].copy()
    for _ in range(ROUNDS):
        nearest = np.argmax(rows @ centroids.T, axis=1)
        # Each centroid's rows summed by one product with their 0/1 membership (np.add.at: ~100x slower).
        sums = (nearest[None, :] == np.arange(k)[:, None]).astype(np.float32) @ rows
        norms = np.linalg.norm(sums, axis=1)
        moved = norms > 0
        centroids[moved] = sums[moved] / norms[moved, None]
    return centroids


@contextmanager
def _one_thread() -> Iterator[None]:
    """BLAS on one thread for the products of a build: on a busy machine handing each small matrix
    product to OpenBLAS's threads cost ~25x the product (a 1M-row build: minutes instead of seconds).
    Without threadpoolctl (it comes with the ``embed`` extra) the products run as BLAS chooses."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        log.info("threadpoolctl is not installed (the embed extra): the list build runs BLAS on its own threads")
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield


class Clusters:
    """The lists of one :class:`.VectorRows` matrix: centroids, and the rows of each list.

    Made by :meth:`build`; grown by :meth:`add` as the matrix grows.
    """

    def __init__(self, coarse: np.ndarray, fine: list[np.ndarray]) -> None:
        self.coarse = coarse
        self._fine = fine
        # Fine centroids flattened (list number = offset of its coarse centroid + its place).
        self._offsets = np.concatenate(([0], np.cumsum([len(f) for f in fine])))
        self.centroids = np.concatenate(fine) if fine else np.zeros((0, coarse.shape[1]), np.float32)
        self._members: list[list[np.ndarray]] = [[] for _ in range(len(self.centroids))]
        self.size = 0
        """Rows placed so far (the first ``size`` rows of the matrix)."""

    def __len__(self) -> int:
        return len(self.centroids)

    @classmethod
    def build(cls, matrix: VectorRows) -> Clusters:
        """Centroids from a sample of ``matrix``, then every row placed in its list."""
        with _one_thread():
            return cls._build(matrix)

    @classmethod
    def _build(cls, matrix: VectorRows) -> Clusters:
        n = len(matrix)
        sample = matrix.take(np.unique(np.linspace(0, n - 1, min(n, SAMPLE)).astype(np.int64)))
        coarse = _kmeans(sample, min(COARSE, len(sample)))
        owner = np.argmax(sample @ coarse.T, axis=1)
        fine = []
        for c in range(len(coarse)):
            mine = sample[owner == c]
            # A coarse centroid no sample row chose keeps itself as its one list.
            fine.append(_kmeans(mine, min(FINE, len(mine))) if len(mine) else coarse[c : c + 1].copy())
        out = cls(coarse, fine)
        out._add(matrix)
        return out

    def place(self, rows: np.ndarray) -> np.ndarray:
        """The list of each of the unit ``rows``: the best fine centroid of its best coarse one."""
        top = np.argmax(rows @ self.coarse.T, axis=1)
        out = np.empty(len(rows), dtype=np.int64)
        for c in np.unique(top):
            mine = np.flatnonzero(top == c)
            out[mine] = self._offsets[c] + np.argmax(rows[mine] @ self._fine[c].T, axis=1)
        return out

    def add(self, matrix: VectorRows) -> None:
        """Place the rows of ``matrix`` past :attr:`size` (all of them the first time)."""
        if len(matrix) - self.size > _BLOCK:
            with _one_thread():
                self._add(matrix)
        else:
            self._add(matrix)  # (a few rows: products too small for BLAS to thread)

    def _add(self, matrix: VectorRows) -> None:
        n = len(matrix)
        for lo in range(self.size, n, _BLOCK):
            hi = min(n, lo + _BLOCK)
            lists = self.place(matrix.block(lo, hi))
            order = np.argsort(lists, kind="stable")
            ranked = lists[order]
            cuts = np.flatnonzero(np.diff(ranked)) + 1
            for run in np.split(order, cuts):
                self._members[int(lists[run[0]])].append(run + lo)
        self.size = n
        # Few, large parts per list: scanning concatenates them.
        for at, parts in enumerate(self._members):
            if len(parts) > 8:
                self._members[at] = [np.concatenate(parts)]

    def rows(self, lists: Sequence[int]) -> np.ndarray:
        """Positions of the rows in ``lists`` (increasing)."""
        parts = [p for at in lists for p in self._members[at]]
        if not parts:
            return np.zeros(0, dtype=np.int64)
        return np.sort(np.concatenate(parts))

    def nearest(self, q: np.ndarray, probe: int) -> np.ndarray:
        """The ``probe`` lists whose centroids are nearest to ``q``."""
        scores = self.centroids @ q
        if probe >= len(scores):
            return np.arange(len(scores))
        return np.argpartition(-scores, probe - 1)[:probe]
