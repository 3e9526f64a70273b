"""Passage vectors for long turns: the vector signal sees the whole answer, not its opening.

MiniLM reads at most 256 word pieces, so a turn's vector describes only
its first ~180 words; a fact in the middle of a 1,500-token assistant
answer is invisible to it. A *long* turn (more than :data:`LONG_TERMS`
content words, which puts its text past what the model reads) is therefore
also cut into passages — runs of whole sentences of at most
:data:`PASSAGE_WORDS` words, each starting with the last sentence of the
one before, so two sentences that belong together across a cut are whole
in some passage — and each passage
is embedded as ``Speaker: passage``. The turn's passage score for a query
is the best cosine over its own vector and its passages' vectors.

Whether a turn is long is decided on its content-word count, which a
persisted index holds without reading the text
(:mod:`stratamem.retrieve.persisted`): an index opened from the store knows
which turns should have passage rows. Short turns (all of LoCoMo) get none,
so their storage does not grow.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..embed.quantize import (
    encode_int2,
    encode_int4,
    encode_int8,
    int4_blob_size,
    int4_codes,
    int8_blob_size,
    int8_codes,
    unit_rows,
)
from ..errors import BackendError, ModelError
from ..records import StoredTurn
from .vector_rows import VectorRows, _Rows

__all__ = [
    "LONG_TERMS",
    "MAX_PASSAGES",
    "PASSAGE_WORDS",
    "PassageVectors",
    "decode_blob",
    "embed_blobs",
    "encode_blob",
    "is_long",
    "passage_texts",
    "split_passages",
    "term_count",
]

PASSAGE_WORDS = 140
"""Most whitespace words per passage: ~190 word pieces with the speaker prefix, inside MiniLM's 256."""

MAX_PASSAGES = 8
"""Most passages embedded per turn (the first ones: ~1,100 words, ~1,500 tokens of text). Bounds the
embedding work a long tool output or pasted document adds at write time; past them BM25 still sees
every word."""

LONG_TERMS = 80
"""Content words above which a turn is split: about 160+ words of text, past what one vector reads well."""

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


def is_long(term_count: int) -> bool:
    """Whether a turn with ``term_count`` content words gets passage vectors."""
    return term_count > LONG_TERMS


def term_count(terms: Sequence[str] | str) -> int:
    """How many index terms a turn has: an opened index holds them as one space-joined string."""
    if isinstance(terms, str):
        return terms.count(" ") + 1 if terms else 0
    return len(terms)


def _sentences(text: str, size: int) -> list[list[str]]:
    """Sentences as word lists; a sentence longer than a passage is cut into passage-sized runs."""
    out: list[list[str]] = []
    for part in _SENTENCE.split(text):
        words = part.split()
        for lo in range(0, len(words), size):
            out.append(words[lo : lo + size])
    return [s for s in out if s]


def split_passages(text: str, words: int = PASSAGE_WORDS) -> list[str]:
    """``text`` as overlapping runs of whole sentences, each at most ``words`` words.

    A passage starts at a sentence boundary and takes sentences while they
    fit; the next one starts with the last sentence of the previous (so
    consecutive passages share one sentence). The
    result depends on the text alone (deterministic) and covers every word.
    A text of at most ``words`` words is one passage.
    """
    if words <= 0:
        raise ValueError(f"words must be positive, got {words}")
    sents = _sentences(text, words)
    if not sents:
        return []
    out: list[str] = []
    start = 0
    while True:
        end, size = start, 0
        while end < len(sents) and (end == start or size + len(sents[end]) <= words):
            size += len(sents[end])
            end += 1
        out.append(" ".join(w for s in sents[start:end] for w in s))
        if end >= len(sents):
            return out
        # The next passage repeats the last sentence: a fact spread over a cut is whole in one of them.
        start = max(end - 1, start + 1)


def passage_texts(st: StoredTurn) -> list[str]:
    """What a long turn's passages are embedded as: ``Speaker: passage``, like the turn itself."""
    speaker = st.turn.name or st.role
    return [f"{speaker}: {p}" for p in split_passages(st.text)[:MAX_PASSAGES]]


def encode_blob(vectors: np.ndarray, bits: int = 8) -> bytes:
    """One turn's passage (or sentence) vectors as one blob: their int8 encodings (``bits`` 4 or 2:
    :func:`encode_int4`, :func:`encode_int2`), concatenated."""
    encode = {2: encode_int2, 4: encode_int4}.get(bits, encode_int8)
    return b"".join(encode(vectors))


def embed_blobs(
    embedder: Any, turns: Sequence[StoredTurn], texts: Sequence[Sequence[str]], what: str, bits: int = 8
) -> dict[int, bytes]:
    """Each turn's ``texts`` embedded in one call, as one :func:`encode_blob` per turn that has some.

    ``what`` names the texts in errors (``passage``, ``sentence``); ``bits`` is the encoding (8, 4 or 2).

    Raises:
        ModelError: The embedder failed, or answered with the wrong shape or non-finite values.
    """
    flat = [t for group in texts for t in group]
    if not flat:
        return {}
    try:
        vec = np.asarray(embedder.embed_batch(flat), dtype=np.float32)
    except Exception as exc:  # a pluggable model may raise anything: one error type for callers
        raise ModelError(f"embedding {len(flat)} {what}(s) failed: {type(exc).__name__}: {exc}") from exc
    if vec.ndim != 2 or len(vec) != len(flat) or not np.isfinite(vec).all():
        raise ModelError(f"embedder returned shape {vec.shape} (or non-finite values) for {len(flat)} {what}(s)")
    out, at = {}, 0
    for st, group in zip(turns, texts, strict=True):
        if group:
            out[st.id] = encode_blob(vec[at : at + len(group)], bits)
        at += len(group)
    return out


def decode_blob(blob: bytes, dims: int, bits: int = 8, codes: bool = False) -> np.ndarray:
    """The unit passage (or sentence) vectors of a blob made by :func:`encode_blob` with ``bits``
    (``codes``: their int8 codes instead, what an open index keeps: :mod:`.vector_rows`).

    Raises:
        BackendError: The blob's length is not a whole number of ``dims``-vectors (corrupt data).
    """
    size = int4_blob_size(dims) if bits == 4 else int8_blob_size(dims)
    if not blob or len(blob) % size:
        raise BackendError(f"stored passage vectors are {len(blob)} bytes, not a multiple of {size}")
    unpack = int4_codes if bits == 4 else int8_codes
    out = unpack([blob[i : i + size] for i in range(0, len(blob), size)], dims)
    return out if codes else unit_rows(out)


class PassageVectors:
    """Passage vectors of the long turns of one index, and the per-turn best cosine for a query."""

    def __init__(self) -> None:
        # Stacked at the first query (after the index opened: its transients are gone by then), then
        # grown in place batch by batch (amortised): an ``add`` in the agent loop copies only its own
        # rows, never the whole matrix again (issue 28: at 100k turns the matrix is ~250k sentences,
        # and copying it after every turn cost more than the query).
        self._pending: list[tuple[int, np.ndarray]] = []
        self._count = 0
        self._matrix: VectorRows | None = None
        self._owner = _Rows(np.int64)
        self._run_cache: tuple[int, np.ndarray, np.ndarray] | None = None  # see _runs()

    def __len__(self) -> int:
        return self._count

    @property
    def turns(self) -> set[int]:
        """Positions of the turns that have passages (made on demand from the rows' owners: a set kept
        for every such turn was the largest container the garbage collector walked, issue 28: ~85k
        elements at 100k turns, ~1-3 ms of each full collection)."""
        return {pos for pos, _ in self._pending} | set(np.unique(self._owner.view).tolist())

    def add(self, positions: Sequence[int], vectors: Sequence[np.ndarray]) -> None:
        """Passages of turns at ``positions`` (one ``(passages, dims)`` array each, int8 codes or
        float32 unit rows; empty ones skipped)."""
        for pos, vec in zip(positions, vectors, strict=True):
            if len(vec):
                self._pending.append((int(pos), vec if vec.dtype == np.int8 else np.asarray(vec, dtype=np.float32)))
                self._count += len(vec)

    def best(self, q: np.ndarray, turn_cosines: np.ndarray) -> np.ndarray:
        """Per turn: the larger of its own cosine and its best passage's (turns without passages keep theirs)."""
        return self.best_many([q], [turn_cosines])[0]

    def best_many(
        self, queries: Sequence[np.ndarray], turn_cosines: Sequence[np.ndarray], probe: int | None = None
    ) -> list[np.ndarray]:
        """:meth:`best` of each query (with its turn cosines), the passages scored in one pass
        (:meth:`.VectorRows.dots_many`); ``probe``: only the rows of each query's ``probe`` nearest
        lists (:meth:`.VectorRows.dots_probed`, an index past :attr:`.ScanSettings.rows`)."""
        out = [np.asarray(t, dtype=np.float64).copy() for t in turn_cosines]
        if self._pending:
            if self._matrix is None:
                self._matrix = VectorRows.of(self._pending[0][1])
            for kind in (np.int8, np.float32):  # (a float row among codes: np.concatenate would upcast them all)
                part = [(pos, vec) for pos, vec in self._pending if vec.dtype == kind]
                if part:
                    self._matrix.extend_parts([vec for _, vec in part])
                    # (np.repeat: one call, where a np.full per turn cost ~4 µs each, seconds at 1M turns)
                    owners = np.fromiter((pos for pos, _ in part), dtype=np.int64, count=len(part))
                    self._owner.extend(np.repeat(owners, [len(vec) for _, vec in part]))
            self._pending = []
        if self._matrix is None:
            return out
        if probe is not None:
            dots, scanned = self._matrix.dots_probed(queries, probe)
            owners = self._owner.view[scanned]
            for best, row in zip(out, dots, strict=True):
                np.maximum.at(best, owners, row[scanned].astype(np.float64))
            return out
        starts, owners = self._runs()
        for best, dots in zip(out, self._matrix.dots_many(queries), strict=True):
            # Each turn's rows are one run: its best is one reduceat, then one max with its own cosine
            # (what np.maximum.at over every row gives, ~10x faster: 250 ms at 2.5M rows).
            best[owners] = np.maximum(best[owners], np.maximum.reduceat(dots, starts).astype(np.float64))
        return out

    def _runs(self) -> tuple[np.ndarray, np.ndarray]:
        """Where each turn's run of rows starts, and whose run it is (a turn's rows are added together,
        once: the owners of the runs are distinct)."""
        owner = self._owner.view
        if self._run_cache is None or self._run_cache[0] != len(owner):
            starts = np.flatnonzero(np.concatenate(([True], owner[1:] != owner[:-1])))
            self._run_cache = (len(owner), starts, owner[starts])
        return self._run_cache[1], self._run_cache[2]
