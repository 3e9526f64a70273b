"""Turn text compressed on SQLite: raw deflate with a preset dictionary of everyday English (issue 28).

A turn's text is the largest canonical part of a store (~134 KB per 1,000
LoCoMo turns, 137 bytes a turn). Such short texts barely compress on their
own (deflate alone saves ~23 %): there is too little text to find repeats
in. A *preset dictionary* gives deflate those repeats up front: words and
phrases of everyday English and of code, written for this purpose (no
corpus was copied), so a short message finds most of its words in it
(~34 % saved on LoCoMo, read back in ~3 µs a turn).

The stored form is a BLOB in the ``turns.text`` column (SQLite keeps each
value's own type): one version byte (``1``: :data:`DICTIONARY_V1`, raw
deflate), the text's UTF-8 length as a LEB128 varint (so the store's byte
statistics, :func:`octets` registered as the SQL function
``stratamem_octets``, read the raw size without inflating), and the deflate
stream. A text is stored compressed only when it is
at least :data:`MIN_BYTES` long and the blob is smaller; anything else stays
TEXT, as every row written before ``m027_compact_content`` did, so both forms are
read. A dictionary is never edited once released: a new one gets a new
version byte. PostgreSQL keeps ``TEXT`` (a ``text`` value cannot hold bytes;
its TOAST compresses long values itself).
"""

from __future__ import annotations

import zlib
from typing import Any

from ..errors import DecodeError

__all__ = ["DICTIONARY_V1", "MIN_BYTES", "m027_turn_texts", "octets", "pack_text", "unpack_text"]

MIN_BYTES = 48
"""Texts shorter than this stay TEXT (a few bytes to save, and they read as they are in SQL)."""

# Least common first: deflate finds the dictionary's last bytes at the shortest distances (cheapest to name).
DICTIONARY_V1 = (
    " def return import from class self None True False print function const let var async await "
    "error file line test run tests passed failed install version config path src data json http "
    "value result list string number name type args kwargs index length size error: Error "
    " https:// www. .com .py .js .md README TODO "
    " Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March April May June "
    "July August September October November December morning afternoon evening night "
    " mom dad mother father brother sister husband wife son daughter kids children friend friends family "
    "dog cat pet home house school college job work office team project class book books music song "
    "movie game games trip travel beach park city country food dinner lunch breakfast coffee "
    "painting art photo picture pictures camping hiking running yoga garden car birthday party "
    "weekend week month year years today yesterday tomorrow lately recently sometimes always never "
    " interesting incredible beautiful wonderful fantastic exciting special important difficult "
    "hard easy happy sad proud grateful thankful excited glad lucky sure true right wrong best better "
    "new old big small little long great good nice cool fun awesome amazing "
    " question answer problem idea plan goal dream hope help support advice experience story stories "
    "moment moments memories memory life world people person thing things something anything everything "
    "nothing someone everyone "
    " What's up? How are you? How's it going? How have you been? What do you think? "
    "What about you? Tell me more! Let me know. Take care! See you soon! Good luck! "
    "I'm sorry to hear that. That's great! That's awesome! That's amazing! That sounds like "
    "Thank you so much! Thanks for sharing! I'm so happy for you! I'm glad you "
    "It's been a while. I've been thinking about it. I'd love to "
    " because although however actually really very so too also just only even still already "
    "maybe probably definitely especially totally pretty quite much more most many some any "
    "every each other another such what which who whom whose when where why how "
    " would could should might must can will shall may "
    " make made take took give gave get got go went come came see saw know knew think thought "
    "feel felt want wanted need needed love loved like liked try tried find found keep kept "
    "start started begin began finish finished learn learned share shared enjoy enjoyed "
    "remember remind talk talked tell told say said ask asked look looked looking working "
    "doing going getting having being trying thinking feeling making taking "
    " I'm I've I'll I'd you're you've you'll you'd he's she's it's we're we've we'll they're "
    "they've that's there's what's don't doesn't didn't can't couldn't won't wouldn't isn't "
    "aren't wasn't weren't haven't hasn't "
    " my your his her its our their me you him them us mine yours myself yourself "
    " and the to of in that is was for it with as on at by from this be are have has had "
    "not but or an all so if about up out into than then them they we you he she it a I. "
)
"""Version 1 of the preset dictionary (ASCII; never edited)."""

_DICTS = {1: DICTIONARY_V1.encode()}
_VERSIONS = {bytes([v]) for v in _DICTS}


def pack_text(text: str) -> str | bytes:
    """``text`` as the SQLite column stores it: a compressed BLOB when that is smaller, else the text."""
    raw = text.encode("utf-8")
    if len(raw) < MIN_BYTES:
        return text
    co = zlib.compressobj(9, zlib.DEFLATED, -15, 9, zlib.Z_DEFAULT_STRATEGY, _DICTS[1])
    blob = b"\x01" + _varint(len(raw)) + co.compress(raw) + co.flush()
    return blob if len(blob) < len(raw) else text


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _header(blob: bytes) -> tuple[int, int]:
    """``(raw length, offset of the deflate stream)`` of a packed text."""
    n, shift, at = 0, 0, 1
    while at < len(blob):
        byte = blob[at]
        n |= (byte & 0x7F) << shift
        at += 1
        if not byte & 0x80:
            return n, at
        shift += 7
    raise DecodeError("stored turn text is truncated (no length)")


def octets(value: Any) -> int | None:
    """The UTF-8 length of a stored text, packed or not (SQLite's ``stratamem_octets``)."""
    if value is None:
        return None
    if isinstance(value, str):
        return len(value.encode("utf-8"))
    blob = bytes(value)
    return _header(blob)[0] if blob[:1] in _VERSIONS else len(blob)


def unpack_text(value: Any) -> str:
    """Inverse of :func:`pack_text` (TEXT values come back as they are).

    Raises:
        DecodeError: A BLOB of an unknown version or a corrupt stream.
    """
    if isinstance(value, str):
        return value
    blob = bytes(value)
    zdict = _DICTS.get(blob[0]) if blob else None
    if zdict is None:
        raise DecodeError(f"stored turn text of unknown form (version byte {blob[:1]!r})")
    size, at = _header(blob)
    try:
        do = zlib.decompressobj(-15, zdict)
        out = do.decompress(blob[at:]) + do.flush()
        if not do.eof or len(out) != size:
            raise DecodeError("stored turn text is truncated")
        return out.decode("utf-8")
    except (zlib.error, UnicodeDecodeError) as exc:
        raise DecodeError(f"stored turn text is corrupt: {exc}") from exc


def m027_turn_texts(conn: Any) -> None:
    """Every stored turn text of a SQLite store packed (:func:`pack_text`); PostgreSQL: nothing to do.

    In batches of 2,000 turns in id order; idempotent (a packed text is a BLOB and is not read again).
    """
    from .sql import SQLITE, dialect_of

    if dialect_of(conn) is not SQLITE:
        return
    last = 0
    while True:
        rows = conn.execute(
            "SELECT id, text FROM turns WHERE id > ? AND typeof(text) = 'text' ORDER BY id LIMIT 2000", (last,)
        ).fetchall()
        if not rows:
            return
        last = int(rows[-1][0])
        packed = [(p, int(tid)) for tid, text in rows if isinstance(p := pack_text(text), bytes)]
        conn.executemany("UPDATE turns SET text = ? WHERE id = ?", packed)
