"""One copy of everything in a prompt: the de-duplication pass of context assembly.

A fact can reach an assembled context by several roads: the turn that said
it (in the window or recalled), a memory item extracted from that turn, and
a summary that covers it. Seed 004's rule is one copy. The assembly
(:func:`stratamem.context.assemble.assemble`) registers what it shows in a
:class:`Shown` registry, in priority order, and asks it about every unit of
lower priority before that unit is placed:

1. fixed blocks (instructions, working state, checkpoint) and the recent
   window: the caller's own material, shown as is and never edited;
2. recalled verbatim turns, best ranked first;
3. memory items;
4. summaries (and summaries expanded to their turns).

A unit of lower priority loses the sentences already shown (a summary keeps
the rest); when no fact sentence is left, it is dropped and its manifest
near-miss says ``duplicate_of`` the kept copy. The tokens it would have
cost stay in the budget for the next candidates.

**Fact sentence.** A unit's text is cut into sentences at ``.``, ``!`` or
``?`` followed by white space, and at line breaks. A sentence is reduced to
its word tokens (:func:`fact_tokens`: lower-cased runs of letters and digits);
one with at least :data:`MIN_FACT_TOKENS` tokens is a *fact sentence*.
Shorter ones ("Thanks!", "Done.") are never called duplicates.

**Near-duplicate.** Fact sentence ``s`` is already shown when some shown
fact sentence ``t`` contains at least :data:`CONTAINMENT` of ``s``'s distinct
tokens, *and* every number in ``s`` is in ``t`` with the word before it
("subject 2" is not "subject 5 ... 2 of 42"): a sentence that changes a value
("the vault code is now 5150") carries information the shown one lacks,
however much else it shares. Likewise every name in ``s`` (a capitalised word
inside the sentence) must be in ``t``: "I adopted a cat named Luna from the
shelter" is a second piece of evidence beside "I adopted a second cat called
Miso from the shelter", not a repeat of it (issue 30: a de-duplication rule
must never remove a different piece of evidence on the same topic).
Containment rather than Jaccard, because a restatement is usually shorter
than its source (an item or a summary sentence inside a long turn).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain, pairwise

from ..text import remember_short

__all__ = [
    "CONTAINMENT",
    "FACT_TEXT_TOKENS",
    "MIN_FACT_TOKENS",
    "Shown",
    "Stripped",
    "fact_sentences",
    "fact_tokens",
    "names",
    "repeated_facts",
    "sentences",
]

MIN_FACT_TOKENS = 4
"""Word tokens a sentence needs to count as a fact (shorter: acknowledgements, headers)."""

CONTAINMENT = 0.8
"""Share of a sentence's distinct tokens a shown sentence must hold for it to be a
near-duplicate (chosen from ``benchmarks/duplicate_rate.py --thresholds``; see docs/context.md)."""

FACT_TEXT_TOKENS = 5
"""Tokens a sentence needs to count as *fact text* when a rendered prompt is checked for
repeats (:func:`repeated_facts`); one more than the pass acts from, so what is checked is
never finer than what the pass removes."""

_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")
_TOKEN = re.compile(r"[^\W_]+")
_NUMBER = re.compile(r"\d")
# A summary line opens with its span, "- [8 May 2023, session_3, 10 turns] ", an item
# with its type, "- (decision) ", a window line with its time, "[2026-03-03 14:00] ",
# an excerpt with its mark, and turn lines with the speaker, "dana: ": framing, not fact.
_FRAME = re.compile(r"^\s*(-\s*)?(\[[^\]\n]*\]\s*|\([^)\n]*\)\s*)?")
# A speaker is one to three words of letters ("dana", "Wei Zhang"): no digits, so
# "Section 3: ..." keeps its number and is not a speaker label.
_SPEAKER = re.compile(r"^[^\W\d_][^\W\d_.'-]*(?:[ .'-][^\W\d_]+){0,2}:\s+(\([^)\n]*\)\s*)?")


def sentences(text: str) -> list[str]:
    """``text`` cut at sentence ends (``.``, ``!``, ``?`` then white space) and line breaks; blanks dropped."""
    return [s for s in _SPLIT.split(text) if s.strip()]


# Remembered: one context asks about the same turn, item and summary sentences many
# times (registering, stripping, re-packing), and consecutive contexts share most.
@remember_short(16_384)
def fact_tokens(sentence: str) -> tuple[str, ...]:
    """The sentence's word tokens, lower-cased, without its leading frame.

    The frame is what the prompt puts before a unit's own words: a list dash, a
    bracketed span or time (``[8 May 2023, s1, 10 turns]``), a parenthesised type
    or excerpt mark, and a speaker label (``dana:``).
    """
    return tuple(_TOKEN.findall(_SPEAKER.sub("", _FRAME.sub("", sentence, count=1), count=1).lower()))


@lru_cache(maxsize=16_384)
def names(sentence: str) -> frozenset[str]:
    """The names of a sentence, lower-cased: its capitalised words after the first ("Luna", "Elm"),
    not ``I`` and not all-capital ones ("OK", "LGBTQ"). The leading frame is not part of it."""
    words = _TOKEN.findall(_SPEAKER.sub("", _FRAME.sub("", sentence, count=1), count=1))
    return frozenset(w.lower() for w in words[1:] if w[0].isupper() and len(w) > 1 and not w.isupper())


def fact_sentences(text: str, min_tokens: int = MIN_FACT_TOKENS) -> list[tuple[str, ...]]:
    """The token tuples of ``text``'s fact sentences (at least ``min_tokens`` tokens), in order."""
    out = []
    for s in sentences(text):
        toks = fact_tokens(s)
        if len(toks) >= min_tokens:
            out.append(toks)
    return out


_Entries = tuple[tuple[frozenset[str], frozenset[tuple[str, str]]], ...]


@remember_short(4096)
def _fact_entries(text: str, min_tokens: int) -> _Entries:
    """(distinct tokens, adjacent token pairs) of each fact sentence of ``text``, as :class:`Shown` keeps them.

    Remembered for the reason :func:`fact_tokens` is: the window's turns are registered
    again by every context.
    """
    return tuple((frozenset(toks), frozenset(pairwise(toks))) for toks in fact_sentences(text, min_tokens))


@remember_short(4096)
def _restate_facts(text: str, min_tokens: int) -> tuple[tuple[tuple[str, ...], frozenset[str]], ...]:
    """(tokens, :func:`names`) of each fact sentence of ``text``, as :meth:`Shown.restates` asks about them.

    Remembered: every context screens its few hundred recalled turns, and
    consecutive contexts recall mostly the same ones (issue 28).
    """
    return tuple((toks, names(s)) for s in sentences(text) if len(toks := fact_tokens(s)) >= min_tokens)


@dataclass(frozen=True, slots=True)
class Stripped:
    """A unit's text with the sentences already shown taken out."""

    text: str
    """What is left (the original text when nothing was shown)."""
    duplicate_of: tuple[str, ...]
    """Ids of the kept copies of the removed sentences, first seen first, no repeats."""
    facts_left: int
    """Fact sentences left in :attr:`text`; 0 means the unit restates what is shown."""
    removed: int
    """Fact sentences removed."""


class Shown:
    """What the assembled context already shows, sentence by sentence, with the id of each copy.

    Args:
        containment: Near-duplicate threshold (:data:`CONTAINMENT`).
        min_tokens: Tokens a fact sentence needs (:data:`MIN_FACT_TOKENS`).
        enabled: ``False`` turns the pass off: nothing is ever a duplicate
            (for measuring the pass, ``context.dedup = false``).
    """

    def __init__(
        self, containment: float = CONTAINMENT, min_tokens: int = MIN_FACT_TOKENS, enabled: bool = True
    ) -> None:
        self.containment = containment
        self.min_tokens = min_tokens
        self.enabled = enabled
        # (distinct tokens, adjacent token pairs, owner) of each shown fact sentence
        self._facts: list[tuple[frozenset[str], frozenset[tuple[str, str]], str]] = []
        # token -> indexes into _facts: a candidate must share a token with a shown fact.
        self._by_token: dict[str, list[int]] = {}

    def copy(self) -> Shown:
        """An independent registry holding what this one holds."""
        other = Shown(self.containment, self.min_tokens, self.enabled)
        other._facts = list(self._facts)
        other._by_token = {t: list(ns) for t, ns in self._by_token.items()}
        return other

    def add(self, owner: str, text: str) -> None:
        """Register ``text`` as shown, under the id of the unit that shows it."""
        if not self.enabled:
            return
        for bag, pairs in _fact_entries(text, self.min_tokens):
            n = len(self._facts)
            self._facts.append((bag, pairs, owner))
            for t in bag:
                self._by_token.setdefault(t, []).append(n)

    def find(self, tokens: Sequence[str], named: frozenset[str] = frozenset()) -> str | None:
        """The id of a shown copy of the fact sentence with these tokens (in order) and these
        :func:`names`, or ``None``."""
        if not self.enabled:
            return None
        bag = frozenset(tokens)
        if len(bag) == 0:
            return None
        need = self.containment * len(bag)
        # A shown fact holding ≥ ⌈need⌉ of the bag's tokens misses at most len(bag) − ⌈need⌉ of
        # them, so it holds one of ANY len(bag) − ⌈need⌉ + 1 of them: only the postings of that many
        # rarest tokens are read, never those of "the" or "i" (a context asks this thousands of times).
        by_token = self._by_token
        spare = len(bag) - math.ceil(need)
        present = bag & by_token.keys()
        if len(bag) - len(present) > spare:
            # More tokens than a copy may miss are in no shown fact at all: a new sentence
            # (most asked are), answered without reading any postings.
            return None
        # The absent tokens are the rarest (no postings); the present ones fill up the rest.
        rare = sorted(present, key=lambda t: len(by_token[t]))[: spare + 1 - (len(bag) - len(present))]
        candidates = set(chain.from_iterable([by_token[t] for t in rare]))
        numbers = None
        for n in sorted(candidates):
            shown, pairs, owner = self._facts[n]
            if len(bag & shown) < need:
                continue
            if numbers is None:
                numbers = {(a, b) for a, b in pairwise(("",) + tuple(tokens)) if _NUMBER.search(b)}
            if all((a, b) in pairs if a else b in shown for a, b in numbers) and named <= shown:
                return owner
        return None

    def restates(self, text: str) -> str | None:
        """The id of a kept copy when every fact sentence of ``text`` is shown (and it has one)."""
        facts = _restate_facts(text, self.min_tokens)
        if not self.enabled or not facts:
            return None
        owners = [self.find(toks, named) for toks, named in facts]
        return owners[0] if all(owners) else None

    def strip(self, text: str) -> Stripped:
        """``text`` without its fact sentences already shown (or repeated inside it).

        Sentences are joined back with a space within a line; line breaks are kept.
        """
        if not self.enabled:
            return Stripped(text, (), len(fact_sentences(text, self.min_tokens)), 0)
        local = Shown(self.containment, self.min_tokens)
        owners: list[str] = []
        kept_lines: list[str] = []
        facts_left = removed = 0
        for line in text.split("\n"):
            kept: list[str] = []
            for s in _sentences_in_line(line):
                toks = fact_tokens(s)
                if len(toks) < self.min_tokens:
                    kept.append(s)
                    continue
                owner = self.find(toks, names(s)) or local.find(toks, names(s))
                if owner is None:
                    local.add("", s)
                    kept.append(s)
                    facts_left += 1
                    continue
                removed += 1
                if owner and owner not in owners:
                    owners.append(owner)
                frame = _FRAME.match(s)
                if not kept and frame and frame.group(0).strip():
                    # Keep the line's frame ("- [8 May 2023, ...] ") for what follows.
                    kept.append(frame.group(0).rstrip())
            if any(k.strip() for k in kept):
                kept_lines.append(" ".join(kept))
        if removed == 0:
            return Stripped(text, (), facts_left, 0)
        return Stripped("\n".join(kept_lines), tuple(owners), facts_left, removed)


def _sentences_in_line(line: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+", line) if s.strip()]


def repeated_facts(text: str, min_tokens: int = FACT_TEXT_TOKENS) -> dict[str, int]:
    """Fact texts that occur more than once in a rendered prompt, with their counts.

    The measure of the property test and ``benchmarks/duplicate_rate.py``: the
    prompt is cut into lines and sentences (:func:`sentences`); a sentence
    reduced to its tokens without its frame (:func:`fact_tokens`) is *fact text*
    when it has at least ``min_tokens`` tokens; the keys are fact texts
    (tokens joined by spaces) seen twice or more, exactly after that normalisation.
    """
    seen: dict[str, int] = {}
    for s in sentences(text):
        toks = fact_tokens(s)
        if len(toks) >= min_tokens:
            key = " ".join(toks)
            seen[key] = seen.get(key, 0) + 1
    return {k: n for k, n in seen.items() if n > 1}
