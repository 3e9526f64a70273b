"""Index terms as small integers: how the recall index stores a turn's analysed terms (``m021_term_ids``).

A turn's index terms (stemmed words, stop words dropped) used to be stored as
one space-joined string per turn — the turn's words a second time, at ~83
bytes per LoCoMo turn. Now each namespace has a vocabulary (``recall_terms``:
each distinct term once, with an id given in order of first use) and a turn
stores its term ids, in order, as LEB128 varints: one byte for the first 128
terms of a namespace, two up to 16,384, three up to two million. On LoCoMo
that is ~25 bytes per turn plus ~5 for its share of the vocabulary. Nothing
is lost: decoding gives back the same term lists, in the same order.

Decoding is vectorised (numpy over the concatenated blobs of every turn of
a namespace), which is what opening an index does; the term lists then stay
ids (:class:`StoredTerms`) and a query's terms are looked up by id
(:class:`~stratamem.retrieve.stored_terms.StoredTermsIndex`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import BackendError

__all__ = ["StoredTerms", "decode_ids", "encode_ids", "encode_many"]

_MAX_ID = 2**32 - 1


def encode_ids(ids: Iterable[int]) -> bytes:
    """LEB128 varints of non-negative term ids, in order.

    Raises:
        ValueError: An id is negative or above 2**32 - 1.
    """
    out = bytearray()
    for value in ids:
        if value < 0 or value > _MAX_ID:
            raise ValueError(f"term id {value} is outside 0..{_MAX_ID}")
        while value >= 0x80:
            out.append((value & 0x7F) | 0x80)
            value >>= 7
        out.append(value)
    return bytes(out)


def encode_many(flat: Sequence[int] | np.ndarray, counts: Sequence[int] | np.ndarray) -> list[bytes]:
    """:func:`encode_ids` of many turns at once: ``flat`` holds every turn's ids, ``counts`` how many each has.

    Raises:
        ValueError: An id is negative or above 2**32 - 1, or the counts do not add up.
    """
    ids = np.asarray(flat, dtype=np.int64)
    per_turn = np.asarray(counts, dtype=np.int64)
    if int(per_turn.sum()) != len(ids):
        raise ValueError(f"{int(per_turn.sum())} ids counted, {len(ids)} given")
    if ids.size and (int(ids.min()) < 0 or int(ids.max()) > _MAX_ID):
        raise ValueError(f"a term id is outside 0..{_MAX_ID}")
    width = np.ones(len(ids), dtype=np.int64)
    for k in range(1, 5):
        width += ids >= (1 << (7 * k))
    ends = np.cumsum(width)
    out = np.zeros(int(ends[-1]) if ids.size else 0, dtype=np.uint8)
    starts = ends - width
    for k in range(5):
        has = width > k
        byte = (ids[has] >> (7 * k)) & 0x7F
        more = (width[has] > k + 1).astype(np.int64) << 7
        out[starts[has] + k] = byte | more
    # Each turn's bytes: the widths of its ids, summed.
    cut = np.concatenate(([0], np.cumsum(per_turn)))
    byte_cut = np.concatenate(([0], ends))[cut]
    data = out.tobytes()
    return [data[a:b] for a, b in zip(byte_cut[:-1].tolist(), byte_cut[1:].tolist(), strict=True)]


def decode_ids(blobs: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """Every turn's term ids from its blob: ``(ids, offsets)``, turn ``i``'s ids at ``ids[offsets[i]:offsets[i+1]]``.

    Raises:
        BackendError: A blob ends inside a varint (corrupt data).
    """
    raw = np.frombuffer(b"".join(blobs), dtype=np.uint8)
    sizes = np.fromiter(map(len, blobs), np.int64, len(blobs))
    byte_at = np.concatenate(([0], np.cumsum(sizes)))
    last = raw < 0x80  # the last byte of each varint
    if raw.size and not last[byte_at[1:][sizes > 0] - 1].all():
        raise BackendError("a stored term list ends inside a varint (corrupt recall index row)")
    # Term counts per turn: varint ends within its bytes.
    ends_before = np.concatenate(([0], np.cumsum(last)))
    offsets = ends_before[byte_at].astype(np.int64)
    if not raw.size:
        return np.zeros(0, dtype=np.uint32), offsets
    group = ends_before[:-1]  # the varint each byte belongs to
    first = np.concatenate(([0], np.flatnonzero(last)[:-1] + 1))
    shift = (np.arange(raw.size) - first[group]) * 7
    values = np.bincount(group, weights=(raw & 0x7F).astype(np.float64) * np.exp2(shift), minlength=len(first))
    return values.astype(np.uint32), offsets


@dataclass(frozen=True, slots=True)
class StoredTerms:
    """The term lists of many turns as ids into one vocabulary (what an index opens with).

    Turn ``i``'s terms are ``vocab[j]`` for ``j`` in ``ids[offsets[i]:offsets[i+1]]``.
    """

    ids: np.ndarray
    """Term ids of every turn, concatenated in turn order (uint32)."""
    offsets: np.ndarray
    """Where each turn's ids start (int64, one more entry than turns)."""
    vocab: Sequence[str]
    """The term of each id (``""`` for an id no stored turn uses any more)."""

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def terms(self, i: int) -> list[str]:
        """Turn ``i``'s terms, in order."""
        vocab = self.vocab
        return [vocab[j] for j in self.ids[self.offsets[i] : self.offsets[i + 1]].tolist()]

    def text(self, i: int) -> str:
        """Turn ``i``'s terms space-joined (the stored form before ``m021_term_ids``)."""
        return " ".join(self.terms(i))

    @classmethod
    def from_lists(cls, lists: Sequence[Sequence[str]]) -> StoredTerms:
        """The id form of term lists (ids in order of first use)."""
        vocab: dict[str, int] = {}
        flat = [vocab.setdefault(t, len(vocab)) for terms in lists for t in terms]
        counts = np.fromiter(map(len, lists), np.int64, len(lists))
        return cls(
            np.asarray(flat, dtype=np.uint32), np.concatenate(([0], np.cumsum(counts))).astype(np.int64), list(vocab)
        )
