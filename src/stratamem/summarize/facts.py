"""What kind of memory item a statement makes: decision, event, preference, entity or fact.

The item extractors (:mod:`stratamem.items.extract`) type every statement
they keep with :func:`fact_type`, a small rule on the sentence, checked in
this order:

1. **decision** — the speaker settles something: *decide(d)*, *decision*,
   *agreed*, *go with*, *let's use/do/go/move/switch/keep*, *we'll use*,
   *chose*, *switch(ing) to*, *move to*, *settled on*, *supersede(s)*, or an
   ADR number (*ADR 0004*) — unless it is an action dated in the past ("I
   decided to take a break from work yesterday" is an event);
2. **event** — something that happened or is planned, with a time: a verb of
   doing (*went*, *visited*, *bought*, *adopted*, *joined*, *started*,
   *moved*, *am going to* ...) and a time expression (*yesterday*, *last
   week*, *next month*, *on Saturday*, *two weeks ago*, *in May* ...). Its
   item's ``valid_from`` is the day the expression names (the extractor
   reads it with :func:`stratamem.retrieve.timewords.read_windows`);
3. **preference** — a like, a dislike or a wish: *prefer*, *I (don't) want*,
   *I'd rather*, *I (don't) like / love / hate*, *favorite*, *I'm into*,
   *I enjoy*, *I'd love to*, *can't stand*, *please don't*, *no … please*;
4. **entity** — what a named thing is: a capitalized name of one to four
   words followed by *is/are/was/were* and an article or possessive ("Ines
   Duarte is the contact at Northbeam");
5. **fact** — everything else that was worth keeping.

The rule reads only the sentence (a ``speaker: `` prefix is ignored), so it
is cheap, deterministic and easy to predict; a user corrects a wrong type by
rejecting the item and adding the right one.
"""

from __future__ import annotations

import re

__all__ = ["explicit", "fact_type", "has_event_time"]

_DECISION = re.compile(
    r"\b(?:decid(?:e|ed|es|ing)|decision|agreed|go(?:ing)? with|let's (?:use|do|go|move|switch|keep)|"
    r"we(?:'ll| will) (?:use|go|switch|move|keep)|cho(?:se|ose|sen)|switch(?:ing)? to|move to|settled on|"
    r"supersed(?:e|es|ed|ing)|adr[ -]?\d+)\b",
    re.IGNORECASE,
)
_PREFERENCE = re.compile(
    r"\b(?:prefer(?:s|red|ence)?|i (?:don't |do not )?want|i'd rather|i would rather|"
    r"i (?:don't |do not |really |absolutely |just )?(?:like|love|hate|dislike|adore|enjoy)|favou?rite|"
    r"i'm (?:really |so |big )?into|i'd love to|i would love to|can't stand|please don't)\b|\bno \w+(?: \w+)? please\b",
    re.IGNORECASE,
)
_ACTION = re.compile(
    r"\b(?:went|go(?:ing)? to|gonna|will|visit(?:ed|ing)?|bought|buy(?:ing)?|adopt(?:ed|ing)?|join(?:ed|ing)|"
    r"start(?:ed|ing)|mov(?:ed|ing)|finish(?:ed|ing)|sign(?:ed)? up|took|attend(?:ed|ing)|graduat(?:ed|ing)|"
    r"got|married|won|lost|made|paint(?:ed)|tried|play(?:ed)|saw|met|had|did|hik(?:ed|ing)|travel(?:l?ed|ling)|"
    r"cook(?:ed)|bak(?:ed)|volunteer(?:ed)|celebrat(?:ed|ing)|watch(?:ed)|ran|run(?:ning)?|took|gave|received|"
    r"competed|performed|launched|opened|passed|quit|left|returned|came back|planning|plan to|decided)\b",
    re.IGNORECASE,
)
_WHEN = re.compile(
    r"\b(?:yesterday|today|tonight|tomorrow|this (?:morning|afternoon|evening|week|weekend|month|year|summer|"
    r"winter|spring|fall)|last (?:night|week|weekend|month|year|summer|winter|spring|fall|friday|saturday|sunday|"
    r"monday|tuesday|wednesday|thursday)|next (?:week|weekend|month|year|summer|winter|spring|fall)|"
    r"(?:\d+|a|an|one|two|three|four|five|six|a few|a couple of) (?:days?|weeks?|months?|years?) ago|"
    r"(?:on|this|last|next) (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)|"
    r"(?:in|on|since|during) (?:january|february|march|april|june|july|august|september|october|november|"
    r"december)|on the \d{1,2}(?:st|nd|rd|th))\b",
    re.IGNORECASE,
)
_NOT_NAMES = frozenset(
    "it this that there these those the we i they he she you our my his her their a an here what which".split()
)
_ENTITY = re.compile(
    r"^((?:[A-Z][\w'’.&-]*\s+){0,3}[A-Z][\w'’.&-]*)\s+(?:is|are|was|were)\s+"
    r"(?:a|an|the|our|their|his|her|my|your|its)\b"
)


_PAST = re.compile(
    r"\b(?:yesterday|last (?:night|week|weekend|month|year|summer|winter|spring|fall|\w+day)|"
    r"(?:\d+|a|an|one|two|three|four|five|six|a few|a couple of) (?:days?|weeks?|months?|years?) ago)\b",
    re.IGNORECASE,
)


def _body(text: str) -> str:
    """The sentence without a ``speaker: `` prefix."""
    speaker, sep, body = text.partition(": ")
    return body if sep and " " not in speaker and len(speaker) <= 40 else text


_EXPLICIT_PREFERENCE = re.compile(
    r"\b(?:i (?:really |strongly |much )?prefer|we prefer|my favou?rite|our favou?rite|"
    r"i (?:don't|do not|never) want|please (?:don't|do not|never|always)|i'd rather|we'd rather|can't stand|"
    r"i (?:always|never) (?:use|eat|drink|want))\b",
    re.IGNORECASE,
)
_CONSTRAINT = re.compile(
    r"\b(?:must (?:not|never|always|stay|remain)|mustn't|should (?:always|never|stay)|at most|no more than|"
    r"no later than|(?:the|our|my) (?:deadline|budget|limit|cap) is)\b",
    re.IGNORECASE,
)
# Decisions said in so many words ("let's keep going" is a cheer, not a decision).
_SETTLED = re.compile(
    r"\b(?:decided|decision|agreed|settled on|chose|chosen|switch(?:ing|ed)? to|"
    r"let's (?:use|switch)|we(?:'ll| will) (?:use|switch)|adr[ -]?\d+)\b",
    re.IGNORECASE,
)
_FIRST = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|my|me|we|we're|we've|we'll|our|us|let's)\b", re.IGNORECASE)
_ADR = re.compile(r"\badr[ -]?\d+", re.IGNORECASE)


def explicit(text: str) -> bool:
    """Whether a statement settles something in so many words: a decision, a stated preference or a constraint.

    These are what an agent must not forget whatever else a conversation holds
    ("We decided to ship with PostgreSQL 16", "I prefer short commit messages",
    "Stock counts must stay exact"); a question never is one, and a decision
    needs a first-person subject ("we decided", "I chose") or an ADR number.
    (What a named thing is — "Ines Duarte is the contact at Northbeam" — is not:
    in chat, "Sam is a great guy" says it far more often.)
    """
    body = _body(text).strip()
    if body.rstrip().endswith("?"):
        return False
    kind = fact_type(body)
    if kind == "decision" and _SETTLED.search(body):
        return bool(_FIRST.search(body) or _ADR.search(body))
    return bool(_EXPLICIT_PREFERENCE.search(body) or _CONSTRAINT.search(body))


def has_event_time(text: str) -> bool:
    """Whether ``text`` names when something happens or happened (a time expression of an event)."""
    return bool(_WHEN.search(text))


def fact_type(text: str) -> str:
    """The memory-item type of a statement: ``decision``, ``event``, ``preference``, ``entity`` or ``fact``.

    Args:
        text: The statement (a ``speaker: `` prefix is ignored).

    Returns:
        The type, by the rule in this module's docstring.
    """
    body = _body(text).strip()
    event = bool(_ACTION.search(body)) and has_event_time(body)
    if _DECISION.search(body) and not (event and _PAST.search(body)):
        return "decision"
    if event:
        return "event"
    if _PREFERENCE.search(body):
        return "preference"
    match = _ENTITY.match(body)
    if match and match.group(1).split()[0].lower() not in _NOT_NAMES:
        return "entity"
    return "fact"
