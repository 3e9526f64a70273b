"""Growable rows for the open recall index, and vectors kept in their compact stored form.

An index opened from the store gets its vectors as int8 codes (turn vectors,
:func:`~stratamem.embed.quantize.int8_codes`; passage vectors likewise;
sentence vectors as 4-bit codes unpacked to int8,
:func:`~stratamem.embed.quantize.int4_codes`). :class:`VectorRows` keeps
them so — one byte a component and one float32 per row, against four bytes
a component for float32 rows (issue 28: at 1M turns the float32 rows of the
turns and of the sentences were ~5.4 GB) — and decodes a block of rows at a
time when it scores a query. A decoded block is bit for bit the rows
:func:`~stratamem.embed.quantize.decode_int8` gives (the same
:func:`~stratamem.embed.quantize.unit_rows`); a query's dot products are
taken with the codes and scaled per row after (:meth:`VectorRows.dots`),
equal to the decoded rows' within float rounding.

Vectors that arrive as float32 (an index without a store, or an embedder's
fresh answer) keep that form; a float row added to a matrix of codes is
quantized as the store would quantize it (int8, 127 levels).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..embed.quantize import inverse_norms, unit_rows
from .ivf import Clusters

__all__ = ["BLOCK", "VectorRows"]

BLOCK = 1024
"""Rows per block when scoring (see :meth:`VectorRows.dots`)."""


class _Rows:
    """A growable numpy array (amortised O(1) append), read through :attr:`view`.

    A buffer that grows gets room for as many rows again as it then holds, the first batch
    included (an index opened from the store, the sentence rows stacked at the first planned
    question). That room costs no memory until rows are written into it (``np.zeros`` of a large
    buffer is pages the system maps on first write), and it keeps the agent loop's first ``add``
    from copying the whole matrix into a larger one (issue 28: a first batch used to become the
    buffer as it was, full, and at 100k turns that ``add`` then copied ~100 MB of sentence codes,
    +20 ms on one call).
    """

    def __init__(self, dtype: Any, width: int | None = None) -> None:
        self._buf = np.zeros((64,) if width is None else (64, width), dtype=dtype)
        self.n = 0

    def extend(self, rows: np.ndarray) -> None:
        self.claim(len(rows))[:] = rows

    def claim(self, count: int) -> np.ndarray:
        """The next ``count`` rows (grown into as needed), counted in; the caller writes them."""
        need = self.n + count
        if need > len(self._buf):
            grown = np.zeros((max(2 * need, 2 * len(self._buf)),) + self._buf.shape[1:], dtype=self._buf.dtype)
            grown[: self.n] = self._buf[: self.n]
            self._buf = grown
        lo, self.n = self.n, need
        return self._buf[lo:need]

    @property
    def view(self) -> np.ndarray:
        return self._buf[: self.n]


def _quantize(rows: np.ndarray) -> np.ndarray:
    """Float rows as int8 codes (each over its largest magnitude, times 127): what the store keeps."""
    scale = np.abs(rows).max(axis=1) if rows.shape[1] else np.zeros(len(rows), np.float32)
    safe = np.where(scale > 0, scale, 1.0).astype(np.float32)
    return np.clip(np.rint(rows / safe[:, None] * 127.0), -127, 127).astype(np.int8)


class VectorRows:
    """Unit vectors of ``dims`` components, growable, held as int8 codes or as float32.

    The form is fixed by the first rows added: int8 rows are codes (the
    vector is the code row over its length), float32 rows are the vectors.
    """

    def __init__(self, dims: int, codes: bool) -> None:
        self.dims, self.codes = dims, codes
        self._rows = _Rows(np.int8 if codes else np.float32, dims)
        self._inverse = _Rows(np.float32) if codes else None
        self.clusters: Clusters | None = None
        """The rows' lists for approximate scans (:mod:`.ivf`), made by the first :meth:`dots_probed`."""

    @classmethod
    def of(cls, rows: np.ndarray) -> VectorRows:
        """Empty rows in the form of ``rows`` (int8: codes; otherwise float32)."""
        return cls(rows.shape[1], rows.dtype == np.int8)

    def __len__(self) -> int:
        return self._rows.n

    @property
    def nbytes(self) -> int:
        """Bytes the rows take (the buffers' room for more rows is not counted: until rows are written
        into it, the system gives it no memory)."""
        return self._rows.view.nbytes + (self._inverse.view.nbytes if self._inverse is not None else 0)

    def extend(self, rows: np.ndarray) -> None:
        """Append rows: int8 codes or float32 unit vectors (converted to this matrix's form)."""
        if self._inverse is None:
            self._rows.extend(unit_rows(rows) if rows.dtype == np.int8 else np.asarray(rows, dtype=np.float32))
        else:
            codes = rows if rows.dtype == np.int8 else _quantize(np.asarray(rows, dtype=np.float32))
            self._rows.extend(codes)
            self._inverse.extend(inverse_norms(codes))
        if self.clusters is not None:
            self.clusters.add(self)  # new rows join their lists (cheap: a few dot products each)

    def extend_parts(self, parts: Sequence[np.ndarray]) -> None:
        """:meth:`extend` with the rows of ``parts`` in order, int8 codes written straight into this
        matrix's buffer (no concatenated copy of them all: the sentence rows of 1M turns are ~1 GB)."""
        if self._inverse is None or any(p.dtype != np.int8 for p in parts):
            self.extend(np.concatenate(parts))
            return
        slot = self._rows.claim(sum(len(p) for p in parts))
        np.concatenate(parts, out=slot)
        self._inverse.extend(inverse_norms(slot))
        if self.clusters is not None:
            self.clusters.add(self)

    def block(self, lo: int, hi: int) -> np.ndarray:
        """Rows ``lo`` to ``hi`` as float32 unit vectors."""
        if self._inverse is None:
            return self._rows.view[lo:hi]
        return unit_rows(self._rows.view[lo:hi], self._inverse.view[lo:hi])

    def take(self, at: np.ndarray) -> np.ndarray:
        """The rows at positions ``at`` as float32 unit vectors."""
        if self._inverse is None:
            return self._rows.view[at]
        return unit_rows(self._rows.view[at], self._inverse.view[at])

    def dots(self, q: np.ndarray) -> np.ndarray:
        """Dot product of every row with ``q`` (float32), a block of :data:`BLOCK` rows at a time.

        Codes are multiplied as they are and each row's product scaled by its
        inverse norm after: one pass over the codes fewer than decoding the
        block first (100k rows of 384: ~6 ms against ~11 ms; float32 rows: ~5 ms),
        and the same cosine within float rounding (the scale is applied to
        the sum, not to each term). Blocks also keep OpenBLAS on one thread: it
        hands larger matrix–vector products to its threads, whose hand-off cost
        more than the product on a small shared machine (10k rows: 2–8 ms
        threaded vs 0.6 ms in blocks).
        """
        return self.dots_many([q])[0]

    def dots_many(self, queries: Sequence[np.ndarray]) -> np.ndarray:
        """:meth:`dots` of each of ``queries`` (``(len(queries), rows)``), in one pass over the rows.

        Each block of codes is converted to float32 once and multiplied by every
        query while it is in cache: the conversion is two thirds of a pass, and
        a planned question with sub-queries scores several (issue 28). Every
        row of the result is bit for bit what :meth:`dots` of that query gives
        (the same matrix–vector product of the same block).
        """
        n = len(self)
        out = np.empty((len(queries), n), dtype=np.float32)
        rows = self._rows.view
        if self._inverse is None:
            for lo in range(0, n, BLOCK):
                for j, q in enumerate(queries):
                    np.dot(rows[lo : lo + BLOCK], q, out=out[j, lo : lo + BLOCK])
            return out
        qs = [np.asarray(q, dtype=np.float32) for q in queries]
        buf = np.empty((min(n, BLOCK), self.dims), dtype=np.float32)  # (one block, reused: no allocation per block)
        for lo in range(0, n, BLOCK):
            block = rows[lo : lo + BLOCK]
            buf[: len(block)] = block
            for j, q32 in enumerate(qs):
                np.dot(buf[: len(block)], q32, out=out[j, lo : lo + BLOCK])
        out *= self._inverse.view
        return out

    def scan(self, queries: Sequence[np.ndarray], probe: int | None) -> np.ndarray:
        """:meth:`dots_many` (``probe`` ``None``), else :meth:`dots_probed`'s products."""
        return self.dots_many(queries) if probe is None else self.dots_probed(queries, probe)[0]

    def dots_probed(self, queries: Sequence[np.ndarray], probe: int) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`dots_many` over the rows of each query's ``probe`` nearest lists only (:mod:`.ivf`).

        Returns ``(dots, scanned)``: ``dots`` is ``(len(queries), rows)`` with every
        query's exact product at the ``scanned`` positions (the union of the lists
        probed for all queries, increasing) and 0 elsewhere. The lists are made on
        the first call and grown as rows are added.
        """
        if self.clusters is None:
            self.clusters = Clusters.build(self)
        qs = [np.asarray(q, dtype=np.float32) for q in queries]
        lists = np.unique(np.concatenate([self.clusters.nearest(q, probe) for q in qs]))
        scanned = self.clusters.rows(lists.tolist())
        out = np.zeros((len(qs), len(self)), dtype=np.float32)
        rows = self._rows.view
        for lo in range(0, len(scanned), BLOCK):
            at = scanned[lo : lo + BLOCK]
            block = rows[at].astype(np.float32)
            for j, q32 in enumerate(qs):
                out[j, at] = block @ q32
        if self._inverse is not None:
            out[:, scanned] *= self._inverse.view[scanned]
        return out, scanned
