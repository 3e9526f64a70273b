"""Compact vector storage: int8 codes with one float32 scale per vector.

A unit-length float32 vector of 384 dimensions takes 1,536 bytes; stored as
int8 codes (each component divided by the vector's largest magnitude, times
127, rounded) plus that scale, it takes 388 — a quarter — and LoCoMo recall
does not move (``benchmarks/first_query.py`` measures it). Decoded vectors
are scaled back and normalised to unit length again, so dot products stay
cosines.

A blob is ``<f4 scale`` followed by ``dims`` int8 codes; its length alone
gives ``dims``, so a corrupt blob is detected on read.

Sentence vectors (:mod:`stratamem.retrieve.sentences`) are stored in 2 bits
(:func:`encode_int2`, since ``m026_compact_store``): a component's sign and
whether it passes 0.98 times the vector's root mean square, decoded to -3, -1,
1 or 3, four to a byte, no scale — 96 bytes for 384 dimensions. They were 4
bits (:func:`encode_int4`: codes -7..7 over the largest magnitude, 192 bytes)
since ``m024_sentence_nibbles``. Measured with ``Memory.context`` (issue 28,
``locomo_recall.py --cv`` beside main): 2 bits keep LoCoMo and the assistant
chats within 0.002 r@10 / b@1024; signs alone (1 bit, 48 bytes)
cost the chats' multi-session questions 0.039 r@10. Turn vectors in 4 bits
cost the chats 0.009. Turn vectors are stored in 6 bits (:func:`encode_int6`, issue 28):
codes -31..31 over the largest magnitude, four to three bytes, no scale —
288 bytes for 384 dimensions instead of 388. On the cached LoCoMo MiniLM
vectors a 6-bit code moves a cosine by 0.0012 on average (int8: 0.0003,
4 bits: 0.0054) and keeps 98.6 % of a query's dense top 10 (4 bits: 94 %).
An open index keeps them as int8 codes (:func:`turn_codes`), like int8
blobs, so its in-memory layout is the same for both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..errors import BackendError

if TYPE_CHECKING:  # numpy is imported where it is used: opening a store (`stratamem status`) needs none
    import numpy as np

__all__ = [
    "decode_int2",
    "decode_int4",
    "decode_int6",
    "decode_int8",
    "encode_int2",
    "encode_int4",
    "encode_int6",
    "encode_int8",
    "int2_blob_size",
    "int2_rows",
    "int4_blob_size",
    "int4_codes",
    "int4_rows",
    "int6_blob_size",
    "int6_codes",
    "int8_blob_size",
    "int8_codes",
    "inverse_norms",
    "is_turn_blob",
    "turn_codes",
    "unit_rows",
]


def _checked_rows(vectors: np.ndarray) -> np.ndarray:
    """``vectors`` as a float32 array, else ValueError: not 2-dimensional, or a non-finite value."""
    import numpy as np

    vec = np.asarray(vectors, dtype=np.float32)
    if vec.ndim != 2:
        raise ValueError(f"expected a 2-d array of vectors, got shape {vec.shape}")
    if not np.isfinite(vec).all():
        raise ValueError("vectors hold a NaN or infinite value")
    return vec


def _scaled_codes(vectors: np.ndarray, levels: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's largest magnitude, and its components over it times ``levels``, rounded (floats).

    Raises:
        ValueError: ``vectors`` is not 2-dimensional or holds a non-finite value.
    """
    import numpy as np

    vec = _checked_rows(vectors)
    scale = np.abs(vec).max(axis=1) if vec.shape[1] else np.zeros(len(vec), np.float32)
    safe = np.where(scale > 0, scale, 1.0).astype(np.float32)
    return scale, np.clip(np.rint(vec / safe[:, None] * float(levels)), -levels, levels)


def int8_blob_size(dims: int) -> int:
    """Bytes of one encoded vector of ``dims`` components."""
    return 4 + dims


def encode_int8(vectors: np.ndarray) -> list[bytes]:
    """Encode the rows of a 2-d float array as int8 blobs (one per row).

    Raises:
        ValueError: ``vectors`` is not 2-dimensional or holds a non-finite value.
    """
    import numpy as np

    scale, codes = _scaled_codes(vectors, 127)
    codes = codes.astype(np.int8)
    head = (scale / 127.0).astype("<f4")
    return [head[i].tobytes() + codes[i].tobytes() for i in range(len(codes))]


def decode_int8(blobs: Sequence[bytes], dims: int) -> np.ndarray:
    """Decode blobs made by :func:`encode_int8` into unit-length float32 rows.

    Raises:
        BackendError: A blob's length does not match ``dims`` (corrupt data).
    """
    return unit_rows(int8_codes(blobs, dims))


def int8_codes(blobs: Sequence[bytes], dims: int) -> np.ndarray:
    """The int8 codes of blobs made by :func:`encode_int8`, one ``(n, dims)`` int8 array (no scale).

    The scale is positive and a decoded vector is re-normalised, so it cancels:
    ``unit_rows(int8_codes(b, d))`` is ``decode_int8(b, d)``, bit for bit. An open
    recall index keeps these codes (a quarter of the float32 rows) and decodes a
    block of rows at a time when it scores a query.

    Raises:
        BackendError: A blob's length does not match ``dims`` (corrupt data).
    """
    import numpy as np

    size = int8_blob_size(dims)
    if not blobs:
        return np.zeros((0, dims), dtype=np.int8)
    if set(map(len, blobs)) != {size}:  # (a C-level pass: this runs over every stored vector at open)
        bad = next(len(b) for b in blobs if len(b) != size)
        raise BackendError(f"stored vector is {bad} bytes, expected {size} for {dims} dimensions")
    raw = np.frombuffer(b"".join(blobs), dtype=np.uint8).reshape(len(blobs), size)
    # The scale stays in the blob so the magnitude can be restored if ever needed.
    return np.ascontiguousarray(raw[:, 4:]).view(np.int8)


_NORM_BLOCK = 4096


def inverse_norms(codes: np.ndarray) -> np.ndarray:
    """``1 / |row|`` of each row of int8 codes, as float32 (a zero row: ``1e12``); computed in blocks
    of rows so no float32 copy of the whole matrix is made."""
    import numpy as np

    out = np.empty(len(codes), dtype=np.float32)
    for lo in range(0, len(codes), _NORM_BLOCK):
        block = codes[lo : lo + _NORM_BLOCK].astype(np.float32)
        norms = np.sqrt(np.einsum("ij,ij->i", block, block))
        out[lo : lo + _NORM_BLOCK] = 1.0 / np.maximum(norms, np.float32(1e-12))
    return out


def unit_rows(codes: np.ndarray, inverse: np.ndarray | None = None) -> np.ndarray:
    """Rows of int8 codes as unit-length float32 vectors (``inverse``: their :func:`inverse_norms`).

    The one decoding every stored vector goes through, so a block decoded by
    an open index equals the rows :func:`decode_int8` and :func:`decode_int4` give.
    """
    import numpy as np

    inv = inverse_norms(codes) if inverse is None else inverse
    out = codes.astype(np.float32)
    out *= inv[:, None]
    return out


def int4_blob_size(dims: int) -> int:
    """Bytes of one :func:`encode_int4` vector of ``dims`` components (two codes a byte)."""
    return (dims + 1) // 2


def encode_int4(vectors: np.ndarray) -> list[bytes]:
    """Encode the rows of a 2-d float array in 4 bits a component (one blob per row).

    Each component over the row's largest magnitude, times 7, rounded: a code
    in -7..7, stored plus 8 in a nibble (the first component in the high one).

    Raises:
        ValueError: ``vectors`` is not 2-dimensional or holds a non-finite value.
    """
    import numpy as np

    _, signed = _scaled_codes(vectors, 7)
    codes = (signed + 8).astype(np.uint8)
    if codes.shape[1] % 2:  # an odd length: a zero code pads the last byte
        codes = np.hstack([codes, np.full((len(codes), 1), 8, np.uint8)])
    packed = (codes[:, 0::2] << 4) | codes[:, 1::2]
    return [packed[i].tobytes() for i in range(len(packed))]


def decode_int4(blobs: Sequence[bytes], dims: int) -> np.ndarray:
    """Decode blobs made by :func:`encode_int4` into unit-length float32 rows.

    Raises:
        BackendError: A blob's length does not match ``dims`` (corrupt data).
    """
    return unit_rows(int4_codes(blobs, dims))


def int4_codes(blobs: Sequence[bytes], dims: int) -> np.ndarray:
    """The codes (-7..7) of blobs made by :func:`encode_int4`, unpacked into one ``(n, dims)`` int8 array.

    Raises:
        BackendError: A blob's length does not match ``dims`` (corrupt data).
    """
    import numpy as np

    if not blobs:
        return np.zeros((0, dims), dtype=np.int8)
    _check_sizes(blobs, int4_blob_size(dims), "4-bit", dims)
    return int4_rows(b"".join(blobs), dims)


def _check_sizes(blobs: Sequence[bytes], size: int, kind: str, dims: int) -> None:
    """Raise :class:`BackendError` unless every blob is ``size`` bytes (one C-level pass when they are)."""
    if set(map(len, blobs)) != {size}:
        bad = next(len(b) for b in blobs if len(b) != size)
        raise BackendError(f"stored {kind} vector is {bad} bytes, expected {size} for {dims} dimensions")


def int4_rows(data: bytes, dims: int) -> np.ndarray:
    """The codes (-7..7) of back-to-back 4-bit vectors (``data``: a whole number of :func:`encode_int4` blobs,
    e.g. a stored blob of several sentences), one ``(n, dims)`` int8 array.

    Raises:
        BackendError: ``data`` is not a whole number of ``dims``-vectors (corrupt data).
    """
    import numpy as np

    size = int4_blob_size(dims)
    if len(data) % size:
        raise BackendError(f"stored 4-bit vectors are {len(data)} bytes, not a multiple of {size}")
    raw = np.frombuffer(data, dtype=np.uint8).reshape(len(data) // size, size)
    codes = np.empty((len(raw), 2 * size), dtype=np.int8)
    codes[:, 0::2] = raw >> 4
    codes[:, 1::2] = raw & 15
    codes -= 8
    return np.ascontiguousarray(codes[:, :dims])


def int6_blob_size(dims: int) -> int:
    """Bytes of one :func:`encode_int6` vector of ``dims`` components (four codes in three bytes)."""
    return (dims + 3) // 4 * 3


def encode_int6(vectors: np.ndarray) -> list[bytes]:
    """Encode the rows of a 2-d float array in 6 bits a component (one blob per row).

    Each component over the row's largest magnitude, times 31, rounded: a
    code in -31..31, stored plus 32; each four codes fill three bytes, the
    first code in the high bits. No scale is stored (it cancels when decoded
    vectors are normalised).

    Raises:
        ValueError: ``vectors`` is not 2-dimensional or holds a non-finite value.
    """
    import numpy as np

    _, signed = _scaled_codes(vectors, 31)
    codes = (signed + 32).astype(np.uint8)
    if codes.shape[1] % 4:  # zero codes pad the last group
        pad = 4 - codes.shape[1] % 4
        codes = np.hstack([codes, np.full((len(codes), pad), 32, np.uint8)])
    a, b, c, d = (codes[:, i::4] for i in range(4))
    packed = np.empty((len(codes), codes.shape[1] // 4, 3), dtype=np.uint8)
    packed[:, :, 0] = (a << 2) | (b >> 4)
    packed[:, :, 1] = ((b & 15) << 4) | (c >> 2)
    packed[:, :, 2] = ((c & 3) << 6) | d
    flat = packed.reshape(len(codes), -1)
    return [flat[i].tobytes() for i in range(len(flat))]


def decode_int6(blobs: Sequence[bytes], dims: int) -> np.ndarray:
    """Decode blobs made by :func:`encode_int6` into unit-length float32 rows.

    Raises:
        BackendError: A blob's length does not match ``dims`` (corrupt data).
    """
    return unit_rows(int6_codes(blobs, dims))


def int6_codes(blobs: Sequence[bytes], dims: int) -> np.ndarray:
    """The codes (-31..31) of blobs made by :func:`encode_int6`, unpacked into one ``(n, dims)`` int8 array.

    Raises:
        BackendError: A blob's length does not match ``dims`` (corrupt data).
    """
    import numpy as np

    size = int6_blob_size(dims)
    if not blobs:
        return np.zeros((0, dims), dtype=np.int8)
    _check_sizes(blobs, size, "6-bit", dims)
    raw = np.frombuffer(b"".join(blobs), dtype=np.uint8).reshape(len(blobs), size // 3, 3)
    codes = np.empty((len(blobs), size // 3 * 4), dtype=np.uint8)
    x, y, z = raw[:, :, 0], raw[:, :, 1], raw[:, :, 2]
    codes[:, 0::4] = x >> 2
    codes[:, 1::4] = ((x & 3) << 4) | (y >> 4)
    codes[:, 2::4] = ((y & 15) << 2) | (z >> 6)
    codes[:, 3::4] = z & 63
    out = codes.view(np.int8)
    out -= 32
    return np.ascontiguousarray(out[:, :dims])


def is_turn_blob(blob: bytes | None, dims: int) -> bool:
    """Whether ``blob`` is a stored turn vector of ``dims`` components: 6-bit (:func:`encode_int6`, what is
    written) or int8 (:func:`encode_int8`, what stores wrote before ``m025_lean_store``)."""
    return blob is not None and len(blob) in (int6_blob_size(dims), int8_blob_size(dims))


def turn_codes(blobs: Sequence[bytes], dims: int) -> np.ndarray:
    """The int8 codes of stored turn vectors, 6-bit or int8 blobs alike, one ``(n, dims)`` array in order.

    A 6-bit code is in -31..31, an int8 one in -127..127; each row is
    normalised on its own when scored (:func:`unit_rows`), so the two mix.

    Raises:
        BackendError: A blob is of neither size for ``dims`` (corrupt data).
    """
    import numpy as np

    small, big = int6_blob_size(dims), int8_blob_size(dims)
    sizes = set(map(len, blobs))  # (a C-level pass: this runs over every stored vector at open)
    if sizes <= {small}:  # the common case: one pass, no copy per row
        return int6_codes(blobs, dims)
    if not sizes <= {small, big}:
        bad = min(sizes - {small, big})
        raise BackendError(
            f"stored turn vector is {bad} bytes, expected {small} (6-bit) or {big} (int8) for {dims} dimensions"
        )
    out = np.empty((len(blobs), dims), dtype=np.int8)
    six = [i for i, b in enumerate(blobs) if len(b) == small]
    eight = [i for i, b in enumerate(blobs) if len(b) != small]
    out[six] = int6_codes([blobs[i] for i in six], dims)
    out[eight] = int8_codes([blobs[i] for i in eight], dims)
    return out


_INT2_EDGE = 0.9816  # Lloyd-Max for a Gaussian in four levels: edges 0 and +-0.98 sigma, levels +-0.45 and +-1.51
_INT2_LEVELS = (-3, -1, 1, 3)  # the levels' ratio, 1.51 / 0.45 = 3.4, rounded to small integers


def int2_blob_size(dims: int) -> int:
    """Bytes of one :func:`encode_int2` vector of ``dims`` components (four codes a byte)."""
    return (dims + 3) // 4


def encode_int2(vectors: np.ndarray) -> list[bytes]:
    """Encode the rows of a 2-d float array in 2 bits a component (one blob per row).

    A component's code is its sign and whether its magnitude passes 0.98
    times the row's root mean square (the edge that minimises the error of
    four levels for Gaussian components); it decodes to -3, -1, 1 or 3 (no
    scale: it cancels when decoded vectors are normalised). Stored as 0..3,
    four to a byte, the first component in the high bits.

    Raises:
        ValueError: ``vectors`` is not 2-dimensional or holds a non-finite value.
    """
    import numpy as np

    vec = _checked_rows(vectors)
    rms = np.sqrt(np.mean(np.square(vec.astype(np.float64)), axis=1, keepdims=True)) if vec.shape[1] else 0.0
    big = np.abs(vec) > _INT2_EDGE * rms
    codes = ((vec >= 0).astype(np.uint8) << 1) | (big == (vec >= 0)).astype(np.uint8)
    # 0: -3 (negative, big), 1: -1, 2: 1, 3: 3 (positive, big): the code is the level's rank.
    if codes.shape[1] % 4:
        codes = np.hstack([codes, np.zeros((len(codes), 4 - codes.shape[1] % 4), np.uint8)])
    packed = (codes[:, 0::4] << 6) | (codes[:, 1::4] << 4) | (codes[:, 2::4] << 2) | codes[:, 3::4]
    return [packed[i].tobytes() for i in range(len(packed))]


def decode_int2(blobs: Sequence[bytes], dims: int) -> np.ndarray:
    """Decode blobs made by :func:`encode_int2` into unit-length float32 rows.

    Raises:
        BackendError: A blob's length does not match ``dims`` (corrupt data).
    """
    if blobs:
        _check_sizes(blobs, int2_blob_size(dims), "2-bit", dims)
    return unit_rows(int2_rows(b"".join(blobs), dims))


def int2_rows(data: bytes, dims: int) -> np.ndarray:
    """The codes (-3, -1, 1 or 3) of back-to-back 2-bit vectors (``data``: a whole number of
    :func:`encode_int2` blobs), one ``(n, dims)`` int8 array.

    Raises:
        BackendError: ``data`` is not a whole number of ``dims``-vectors (corrupt data).
    """
    import numpy as np

    size = int2_blob_size(dims)
    if len(data) % size:
        raise BackendError(f"stored 2-bit vectors are {len(data)} bytes, not a multiple of {size}")
    raw = np.frombuffer(data, dtype=np.uint8).reshape(len(data) // size, size)
    codes = np.empty((len(raw), 4 * size), dtype=np.uint8)
    for i in range(4):
        codes[:, i::4] = (raw >> (6 - 2 * i)) & 3
    levels = np.asarray(_INT2_LEVELS, dtype=np.int8)
    return np.ascontiguousarray(levels[codes[:, :dims]])
