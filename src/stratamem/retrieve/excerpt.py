"""The passage of an over-long turn that answers a query.

A recalled turn of 1,500 tokens (a long assistant answer, a pasted file)
would either take most of a small budget or be skipped. :func:`excerpt`
instead picks the sentences that best match the query and grows them into
one contiguous passage within a token cap, marked with ``…`` where text was
left out. The stored turn is never changed; the full text stays one
``expand`` away.

Units are paragraphs split into sentences, and sentences longer than
:data:`MAX_UNIT_WORDS` words are cut into word runs, so a turn without
punctuation (code, logs) still yields a passage. A unit scores the number of
distinct query terms it holds (analysed as the index analyses text); the
best unit seeds the passage (the first one on ties; the opening when nothing
matches), which then grows one neighbour at a time towards the better
scoring side (forward on ties) while it fits.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from ..tokens import Tokenizer
from .lexical import analyze

__all__ = ["ELLIPSIS", "MAX_UNIT_WORDS", "Excerpt", "excerpt"]

ELLIPSIS = "…"
MAX_UNIT_WORDS = 24
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"\S+")


@dataclass(frozen=True, slots=True)
class Excerpt:
    """A contiguous passage of a turn's text."""

    text: str
    """The passage, with ``…`` where text before or after it was left out."""
    start: int
    """Character offset of the passage in the full text."""
    end: int
    """Character offset just after the passage."""
    tokens: int
    """Exact tokens of :attr:`text`."""
    total_tokens: int
    """Exact tokens of the full text."""


def _units(text: str) -> list[tuple[int, int]]:
    """Character spans of sentences (or word runs of long sentences), in order."""
    spans: list[tuple[int, int]] = []
    pos = 0
    for m in [*_SENTENCE_END.finditer(text), None]:
        end = m.start() if m else len(text)
        words = list(_WORD.finditer(text, pos, end))
        for i in range(0, len(words), MAX_UNIT_WORDS):
            run = words[i : i + MAX_UNIT_WORDS]
            spans.append((run[0].start(), run[-1].end()))
        if m:
            pos = m.end()
    return spans


def _render(text: str, spans: list[tuple[int, int]], lo: int, hi: int) -> str:
    body = text[spans[lo][0] : spans[hi][1]]
    return (ELLIPSIS + " " if lo > 0 else "") + body + (" " + ELLIPSIS if hi < len(spans) - 1 else "")


def excerpt(text: str, query_terms: Collection[str], max_tokens: int, tokenizer: Tokenizer) -> Excerpt | None:
    """The best-matching contiguous passage of ``text`` within ``max_tokens``.

    Args:
        text: The full text.
        query_terms: Analysed query terms (:func:`stratamem.retrieve.analyze`).
        max_tokens: Cap on the passage's tokens, ``…`` marks included.
        tokenizer: The tokenizer the cap is counted in.

    Returns:
        The passage, or ``None`` when not even one unit fits (or the text is empty).
    """
    spans = _units(text)
    if not spans or max_tokens <= 0:
        return None
    wanted = set(query_terms)
    scores = [len(wanted.intersection(analyze(text[a:b]))) for a, b in spans]
    seed = max(range(len(spans)), key=lambda i: (scores[i], -i))
    lo = hi = seed
    best = _render(text, spans, lo, hi)
    used = tokenizer.count(best)
    if used > max_tokens:
        # One unit is already too long (long tokens: code, ids): split it into words.
        a, b = spans[seed]
        words = [(m.start(), m.end()) for m in _WORD.finditer(text, a, b)]
        if len(words) < 2:
            return None
        spans = spans[:seed] + words + spans[seed + 1 :]
        scores = scores[:seed] + [len(wanted.intersection(analyze(text[x:y]))) for x, y in words] + scores[seed + 1 :]
        seed = max(range(seed, seed + len(words)), key=lambda i: (scores[i], -i))
        lo = hi = seed
        best = _render(text, spans, lo, hi)
        used = tokenizer.count(best)
        if used > max_tokens:
            return None
    while lo > 0 or hi < len(spans) - 1:
        back = scores[lo - 1] if lo > 0 else -1
        ahead = scores[hi + 1] if hi < len(spans) - 1 else -1
        nlo, nhi = (lo - 1, hi) if back > ahead else (lo, hi + 1)
        candidate = _render(text, spans, nlo, nhi)
        n = tokenizer.count(candidate)
        if n > max_tokens:
            # The better side does not fit; the other side might (a shorter sentence).
            olo, ohi = (lo, hi + 1) if (nlo, nhi) == (lo - 1, hi) else (lo - 1, hi)
            if olo < 0 or ohi > len(spans) - 1:
                break
            candidate = _render(text, spans, olo, ohi)
            n = tokenizer.count(candidate)
            if n > max_tokens:
                break
            nlo, nhi = olo, ohi
        lo, hi, best, used = nlo, nhi, candidate, n
    return Excerpt(best, spans[lo][0], spans[hi][1], used, tokenizer.count(text))
