"""Text encodings of stratamem data: the Compact Turn Format and the TOON projection.

* :mod:`stratamem.formats.ctf` — CTF v1, a lossless tab-separated encoding of
  turns and summary rows (specified in ``docs/ctf.md``).
* :mod:`stratamem.formats.toon` — JSON values projected to TOON for prompts,
  checked by a round trip, with a visible fallback to compact JSON.
"""

from __future__ import annotations

from .ctf import CTF_VERSION, SummaryRow, decode_summaries, decode_turns, encode_summaries, encode_turns
from .toon import Projection, compact_json, project

__all__ = [
    "CTF_VERSION",
    "Projection",
    "SummaryRow",
    "compact_json",
    "decode_summaries",
    "decode_turns",
    "encode_summaries",
    "encode_turns",
    "project",
]
