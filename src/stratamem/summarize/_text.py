"""Lexical helpers shared by the local summarizers: sentences, content words, themes, fitting."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence

from ..tokens import Tokenizer

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])|\n+")
_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*|\d+(?:[.,:]\d+)*")

STOPWORDS = frozenset(
    """
a about above after again against all also am an and any are aren't as at be because been before being
below between both but by can can't cannot could couldn't did didn't do does doesn't doing don't down during
each few for from further get got had hadn't has hasn't have haven't having he he'd he'll he's her here
here's hers herself him himself his how how's i i'd i'll i'm i've if in into is isn't it it's its itself
just let's like me more most mustn't my myself no nor not now of off on once only or other ought our ours
ourselves out over own really same she she'd she'll she's should shouldn't so some such than that that's
the their theirs them themselves then there there's these they they'd they'll they're they've this those
through to too under until up very was wasn't we we'd we'll we're we've were weren't what what's when
when's where where's which while who who's whom why why's will with won't would wouldn't you you'd you'll
you're you've your yours yourself yourselves yeah yes oh hey hi hello thanks thank wow great good cool
awesome nice sure okay ok well much many lot lots thing things something anything one ever even still
always way know think going go gonna want make made really glad sounds sound love totally absolutely
definitely amazing time see feel feels felt
""".split()
)

_MONTHS = (
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec"
).split()
_WEEKDAYS = "monday tuesday wednesday thursday friday saturday sunday".split()
_RELATIVE = (
    "yesterday today tomorrow tonight ago last next week weekend month year weeks months years "
    "morning evening afternoon night recently"
).split()
DATE_WORDS = frozenset(_MONTHS + _WEEKDAYS + _RELATIVE)


def split_sentences(text: str) -> list[str]:
    """Split text into sentences at end punctuation followed by a capital, and at line breaks."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def words(text: str) -> list[str]:
    """Word tokens of ``text`` (letters with inner apostrophes/hyphens, or numbers)."""
    return _WORD.findall(text)


def normalize(word: str) -> str:
    """Lower-case and fold simple plurals and possessives, so 'Paintings'/'painting' and "Mel's"/'Mel' match."""
    w = word.lower().replace("’", "'")
    if w.endswith("'s"):
        w = w[:-2]
    if len(w) > 4 and w.endswith("ies"):
        w = w[:-3] + "y"
    elif len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
        w = w[:-1]
    return w


def content_words(text: str) -> list[str]:
    """Normalized words of ``text`` that are not stop words."""
    out = []
    for w in words(text):
        # Capitalized words are usually names: "Paris" must not lose its "s".
        n = w.lower().replace("’", "'").removesuffix("'s") if w[0].isupper() else normalize(w)
        if n not in STOPWORDS and len(n) > 1:
            out.append(n)
    return out


def signals(sentence: str) -> tuple[int, int]:
    """``(names, numbers_and_dates)`` in a sentence.

    Names are capitalized words that do not start the sentence and are not
    the pronoun "I"; numbers are digit runs; dates are month, weekday and
    relative-time words.
    """
    tokens = words(sentence)
    names = sum(
        1 for i, w in enumerate(tokens) if i > 0 and w[0].isupper() and w not in ("I", "I'm", "I've", "I'll", "I'd")
    )
    numbers = sum(1 for w in tokens if w[0].isdigit() or w.lower() in DATE_WORDS)
    return names, numbers


def themes(texts: Iterable[str], *, exclude: Iterable[str] = (), limit: int = 5) -> tuple[str, ...]:
    """Up to ``limit`` most frequent content words across ``texts`` (ties: first seen)."""
    skip = {normalize(e) for e in exclude}
    counts: Counter[str] = Counter()
    for t in texts:
        counts.update(w for w in content_words(t) if w not in skip and not w[0].isdigit())
    return tuple(w for w, _ in counts.most_common(limit))


def fit_text(text: str, max_tokens: int, tokenizer: Tokenizer) -> str:
    """``text`` cut at a word boundary to at most ``max_tokens`` tokens (an ellipsis marks a cut)."""
    if tokenizer.count(text) <= max_tokens:
        return text
    parts = text.split()
    lo, hi = 0, len(parts)
    # Binary search for the longest word prefix that fits with the ellipsis.
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if tokenizer.count(" ".join(parts[:mid]) + " …") <= max_tokens:
            lo = mid
        else:
            hi = mid - 1
    return (" ".join(parts[:lo]) + " …") if lo else ""


def jaccard(a: Sequence[str], b: Sequence[str]) -> float:
    """Jaccard similarity of two word lists as sets."""
    sa, sb = set(a), set(b)
    if not sa or not sb:
        return 0.0
    return len(sa & sb) / len(sa | sb)
