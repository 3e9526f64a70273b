"""From a segment's key facts to memory items: which facts qualify and what type each gets.

The pyramid hands a level-1 segment's key facts to
:meth:`stratamem.items.Items.extract_from` (see :mod:`stratamem.pyramid`).
This module holds the pure part of that step: :func:`item_facts` picks the
facts that can become items (those with a source turn) and :func:`fact_type`
types each one with a small rule on the sentence, checked in this order:

1. **decision** — the sentence settles something: *decide(d)*, *decision*,
   *agreed*, *go with*, *let's use/do/go/move/switch/keep*, *we'll use*,
   *chose*, *switch(ing) to*, *move to*, *settled on*, *supersede(s)*, or an
   ADR number (*ADR 0004*).
2. **preference** — someone states a like, a dislike or a wish: *prefer*,
   *I (don't) want*, *I'd rather*, *I (don't) like / love / hate*, *favorite*,
   *please don't*, *no … please*.
3. **entity** — the sentence says what a named thing is: it starts with a
   capitalized name of one to four words followed by *is/are/was/were* and
   an article or possessive ("Ines Duarte is the contact at Northbeam").
4. **fact** — everything else.

The rule reads only the sentence (not who said it), so it is cheap,
deterministic and easy to predict; a user corrects a wrong type by
rejecting the item and adding the right one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..records import Summary

__all__ = ["ItemFact", "fact_type", "item_facts"]

_DECISION = re.compile(
    r"\b(?:decid(?:e|ed|es|ing)|decision|agreed|go(?:ing)? with|let's (?:use|do|go|move|switch|keep)|"
    r"we(?:'ll| will) (?:use|go|switch|move|keep)|cho(?:se|ose|sen)|switch(?:ing)? to|move to|settled on|"
    r"supersed(?:e|es|ed|ing)|adr[ -]?\d+)\b",
    re.IGNORECASE,
)
_PREFERENCE = re.compile(
    r"\b(?:prefer(?:s|red|ence)?|i (?:don't |do not )?want|i'd rather|i would rather|"
    r"i (?:don't |do not |really )?(?:like|love|hate|dislike)|favou?rite|please don't)\b|\bno \w+(?: \w+)? please\b",
    re.IGNORECASE,
)
_NOT_NAMES = frozenset(
    "it this that there these those the we i they he she you our my his her their a an here what which".split()
)
_ENTITY = re.compile(
    r"^((?:[A-Z][\w'’.&-]*\s+){0,3}[A-Z][\w'’.&-]*)\s+(?:is|are|was|were)\s+"
    r"(?:a|an|the|our|their|his|her|my|your|its)\b"
)


@dataclass(frozen=True, slots=True)
class ItemFact:
    """A key fact ready to become a memory item."""

    text: str
    """The fact as the summary states it (speaker-prefixed for extractive summaries)."""
    type: str
    """Item type from :func:`fact_type`."""
    turn_id: int
    """The turn it was said in (the item's provenance)."""


def _body(text: str) -> str:
    """The sentence without an extractive summary's ``speaker: `` prefix."""
    speaker, sep, body = text.partition(": ")
    return body if sep and " " not in speaker and len(speaker) <= 40 else text


def fact_type(text: str) -> str:
    """The memory-item type of a key fact: ``decision``, ``preference``, ``entity`` or ``fact``.

    Args:
        text: The fact (a ``speaker: `` prefix is ignored).

    Returns:
        The type, by the rule in this module's docstring.
    """
    body = _body(text).strip()
    if _DECISION.search(body):
        return "decision"
    if _PREFERENCE.search(body):
        return "preference"
    match = _ENTITY.match(body)
    if match and match.group(1).split()[0].lower() not in _NOT_NAMES:
        return "entity"
    return "fact"


def item_facts(summary: Summary) -> list[ItemFact]:
    """The key facts of ``summary`` that can become items: those that name their source turn, typed."""
    return [
        ItemFact(f.text, fact_type(f.text), f.turn_id)
        for f in summary.key_facts
        if f.turn_id is not None and f.text.strip()
    ]
