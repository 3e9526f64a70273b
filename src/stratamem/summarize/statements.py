"""The statements of a turn: its sentences, cleaned of greetings and vocatives, and what each looks like.

Memory items quote one statement of a turn ("Caroline: I went to a LGBTQ
support group yesterday."), not the turn's greeting ("Hey Mel!"). This
module reads a turn's prose (:func:`stratamem.summarize._units.prose_sentences`:
code, tables and logs left out) into :class:`Statement` values:

* **cleaning** — a sentence loses its leading greetings, reactions and
  discourse openers ("Hey Mel! ", "Wow, ", "Side note: ", "Btw, "), the
  vocatives that name the people talking ("Dave, " at the start, ", Mel!" at
  the end), and a shared photo's caption (``[shares a photo of …]``, as
  :mod:`stratamem.ingest.locomo` appends it), which is kept as a turn feature;
* **features** — shallow, readable signals of what a sentence says: first
  person, verbs of possession, plans, preferences and life events, dates and
  numbers, names that are not the speakers', questions, second person,
  reactions and compliments, length; and of its turn: length, how much of it
  asks or addresses the other person.

Nothing here decides: :mod:`stratamem.summarize.salience` weighs the features,
:mod:`stratamem.summarize.slots` reads subjects, attributes and values, and
:mod:`stratamem.items.extract` turns the best statements into items.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ._units import prose_sentences

__all__ = ["FEATURES", "Statement", "asks", "clean", "statements", "turn_features"]

_PHOTO = re.compile(r"\s*\[shares? [^\]]*\]\s*", re.IGNORECASE)
# Words that open a sentence without saying anything about anyone: greetings,
# reactions, fillers, discourse markers. Removed from the front, repeatedly.
_OPENER = re.compile(
    r"^(?:hey+|hi+|hello|heya|yo|howdy|wow+|whoa|woah|oh+|ooh|aw+|yay|omg|lol|haha+|hah|ha|hmm+|ah+|uh|um|"
    r"well|yeah|yea|yes|yep|yup|sure|ok|okay|alright|so|and|but|also|btw|by the way|anyway|side note|"
    r"unrelated,? but|p\.?s\.?|thanks|thank you|thx|congrats|congratulations|cool|nice|great|awesome|"
    r"amazing|totally|definitely|absolutely|of course|honestly|gotcha|right|indeed|exactly|true)"
    r"(?:\s+(?:so\s+)?much)?(?:\s*[,!.:;…-]+\s*|\s+(?=(?-i:[A-Z])))",
    re.IGNORECASE,
)
# Discourse markers that open a sentence and may run straight into it ("Unrelated, but these days ...").
_DISCOURSE = re.compile(
    r"^(?:side note|unrelated,? but|by the way|btw|also|anyway|p\.?s\.?|oh,? and|and also)\b[,:;.-]*\s*",
    re.IGNORECASE,
)
_QUESTION_START = re.compile(
    r"^(?:what|how|why|when|where|who|which|do|did|does|are|is|was|were|have|has|can|could|would|will|"
    r"any|anything|got any|ever)\b",
    re.IGNORECASE,
)
# Openers of reactions and compliments: a sentence starting so comments on the other person.
_REACTION = re.compile(
    r"^(?:thanks|thank you|that's|that is|that was|that sounds|sounds|so glad|glad|sorry|love (?:it|that|this)|"
    r"good (?:luck|job|idea)|keep (?:it up|up)|you're|you are|you've|you have|you did|you must|you should|no way|"
    r"how (?:cool|nice|fun)|"
    r"what (?:a|an)\b|i'm (?:so |really )?(?:glad|happy|sorry|proud)|i bet|i hope you|i can't wait|"
    r"it's (?:so |really )?(?:great|awesome|amazing|cool|nice) (?:to|that)|best of luck|take care|"
    r"talk (?:soon|later)|see you|catch you|good to (?:see|hear)|great to (?:see|hear)|nice to (?:see|hear))\b",
    re.IGNORECASE,
)
FIRST_PERSON = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|im|my|me|mine|myself|we|we're|we've|we'll|our|us)\b", re.I)
SECOND_PERSON = re.compile(r"\b(?:you|your|you're|you've|you'll|yours|ya)\b", re.IGNORECASE)
NUMBER = re.compile(
    r"\b(?:\d+(?:[.,:]\d+)?(?:st|nd|rd|th|k|%)?|one|two|three|four|five|six|seven|eight|nine|ten|twelve|"
    r"twenty|hundred|thousand|first|second|third|dozen|couple)\b",
    re.IGNORECASE,
)
DATE = re.compile(
    r"\b(?:january|february|march|april|may|june|july|august|september|october|november|december|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|yesterday|tomorrow|tonight|today|"
    r"weekend|last (?:week|month|year|night|time|summer|winter|spring|fall)|next (?:week|month|year)|ago|"
    r"recently|this (?:week|month|year|summer|winter|spring|fall)|since|years?|months?|weeks?)\b",
    re.IGNORECASE,
)
# Verbs and nouns of what observations about people are made of: possession, plans,
# preferences, life events and activities, family and work.
VERB = re.compile(
    r"\b(?:have|has|had|got|own|owns|bought|buy|adopted|adopt|plan(?:ning|ned|s)?|going to|gonna|will|"
    r"want(?:ed)? to|hop(?:e|ing) to|thinking (?:of|about)|decided|love|loved|like|liked|prefer|favou?rite|"
    r"enjoy(?:ed|s)?|into|start(?:ed|ing)?|join(?:ed)?|mov(?:ed|ing)|went|go to|visit(?:ed)?|took|"
    r"finish(?:ed)?|made|paint(?:ed|ing)?|ran|run|signed up|volunteer(?:ed|ing)?|attend(?:ed|ing)?|"
    r"graduat(?:ed|ing)|work(?:ing|ed|s)? (?:on|at|as)|learn(?:ed|ing)|play(?:ed|ing)?|won|lost|married|born|"
    r"kids?|son|daughter|husband|wife|family|job|live[sd]?|living|been|tried|trying|practic(?:e|ed|ing)|"
    r"study(?:ing)?|studied|taking|teach(?:ing)?|wrote|writing|read|reading|built|building|started|got)\b",
    re.IGNORECASE,
)
_CAPITAL = re.compile(r"\b[A-Z][a-z]+(?:[\s-]+[A-Z][a-z]+)*\b")
_NOT_NAMES = frozenset(
    (
        "I I'm I've I'd I'll Hey Hi Hello Wow Thanks Thank Yeah Yes No Oh Sure Great Awesome Amazing That That's "
        "This It It's What How Why When Where Who Which Do Did Does Are Is Was Were Have Has Can Could Would Will "
        "Any Me My We Our You Your So And But Also Just Good Nice Cool Congrats Sounds Glad Sorry Love Lol Haha "
        "Totally Definitely Absolutely For Not Keep Let Let's Here There Well Ah Aw Awww Ha Hmm Omg Really Maybe "
        "Anyway Sometimes Right Okay Ok Check Look See The A An In On At If Since After Before Then Now Last Next "
        "Btw By Side Unrelated Plus Anyways Gotcha Yep Yup Wish Hope Please"
    ).split()
)
_WORDS = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’-]*")

FEATURES: tuple[str, ...] = (
    "words",
    "first_person",
    "fp_verb",
    "date",
    "number",
    "entity",
    "question",
    "second_person",
    "reaction",
    "cleaned_share",
    "turn_words",
    "turn_question_share",
    "turn_second_share",
    "turn_sentences",
    "photo",
    "answers",
    "opening",
)
"""The features of a statement, in the order salience weights read them (:mod:`.salience`).

``words``, ``turn_words`` and ``turn_sentences`` enter as ``ln(1 + n)``; the
rest are 0/1 flags or shares (0-1). ``answers``: the turn before it, by someone
else, asked a question; ``opening``: one of the first two turns of its session."""


@dataclass(frozen=True, slots=True)
class Statement:
    """One sentence of a turn, cleaned, with its features."""

    text: str
    """The cleaned sentence (first letter capitalised)."""
    raw: str
    """The sentence as the turn says it."""
    position: int
    """Its index among the turn's sentences."""
    features: Mapping[str, float] = field(default_factory=dict)
    """Feature values by name (:data:`FEATURES`)."""

    @property
    def question(self) -> bool:
        """Whether it asks rather than states."""
        return bool(self.features.get("question"))


def _vocative(names: Iterable[str]) -> re.Pattern[str] | None:
    alts = sorted({re.escape(n) for n in names if n}, key=len, reverse=True)
    if not alts:
        return None
    name = "(?:" + "|".join(alts) + ")"
    # "Dave, ..." / "Mel! ..." at the start; ", Dave!" / " Mel." at the end.
    return re.compile(rf"^{name}\s*[,!.:;…-]+\s*|[,\s]+{name}\s*(?=[.!?…]*$)", re.IGNORECASE)


def clean(sentence: str, names: Iterable[str] = ()) -> str:
    """``sentence`` without leading greetings and fillers, vocatives naming ``names``, or a photo caption.

    Returns ``""`` when nothing is left (a sentence that only greets).
    """
    text = _PHOTO.sub(" ", sentence).strip()
    vocative = _vocative(names)
    for _ in range(6):  # "Hey Dave! Wow, ..." peels in a few rounds
        before = text
        text = _DISCOURSE.sub("", _OPENER.sub("", text).strip()).strip()
        if vocative is not None:
            text = vocative.sub("", text).strip()
        if text == before:
            break
    text = text.strip(" ,;:-–—")
    if not re.search(r"[A-Za-z0-9]", text):
        return ""
    return text[0].upper() + text[1:]


def _flag(pattern: re.Pattern[str], text: str) -> float:
    return 1.0 if pattern.search(text) else 0.0


def _entity(text: str, names: set[str]) -> float:
    """1 when a capitalised word other than an opener or the speakers' names appears (not at the start)."""
    for m in _CAPITAL.finditer(text):
        first = m.group(0).split()[0]
        if m.start() > 0 and first not in _NOT_NAMES and m.group(0) not in names and first not in names:
            return 1.0
    return 0.0


def asks(text: str) -> bool:
    """Whether a turn's text ends by asking something (its last sentence is a question)."""
    sentences = prose_sentences(_PHOTO.sub(" ", text).strip())
    return bool(sentences) and (sentences[-1].rstrip().endswith("?") or bool(_QUESTION_START.match(sentences[-1])))


def turn_features(sentences: list[str], photo: bool, answers: bool = False, opening: bool = False) -> dict[str, float]:
    """The turn-level features every statement of a turn shares (``answers``, ``opening``: see :data:`FEATURES`)."""
    n = max(1, len(sentences))
    asks = sum(1 for s in sentences if s.rstrip().endswith("?") or _QUESTION_START.match(s))
    return {
        "turn_words": math.log1p(sum(len(_WORDS.findall(s)) for s in sentences)),
        "turn_question_share": asks / n,
        "turn_second_share": sum(1 for s in sentences if SECOND_PERSON.search(s)) / n,
        "turn_sentences": math.log1p(len(sentences)),
        "photo": 1.0 if photo else 0.0,
        "answers": 1.0 if answers else 0.0,
        "opening": 1.0 if opening else 0.0,
    }


def statements(
    text: str, names: Iterable[str] = (), *, answers: bool = False, opening: bool = False
) -> list[Statement]:
    """The cleaned statements of a turn's text, each with its features (greetings alone, or a lone word, give none).

    Args:
        text: The turn's text (prose is taken from it: code and logs are skipped).
        names: The names of the people talking (never entities; vocatives when they address).
        answers: The turn before, by someone else, asked a question (:func:`asks`).
        opening: The turn is one of the first two of its session.
    """
    names = {n for n in names if n}
    names |= {n.split()[0] for n in names}
    photo = bool(_PHOTO.search(text))
    raw = prose_sentences(_PHOTO.sub(" ", text).strip()) if photo else prose_sentences(text)
    shared = turn_features(raw, photo, answers, opening)
    out: list[Statement] = []
    for i, sentence in enumerate(raw):
        body = clean(sentence, names)
        if len(_WORDS.findall(body)) < 2:  # nothing left but a name or an exclamation
            continue
        n_raw, n_body = len(_WORDS.findall(sentence)), len(_WORDS.findall(body))
        is_question = sentence.rstrip().endswith("?") or bool(_QUESTION_START.match(body))
        statement = not is_question
        first = statement and bool(FIRST_PERSON.search(body))
        features = {
            "words": math.log1p(n_body),
            "first_person": 1.0 if first else 0.0,
            "fp_verb": 1.0 if first and VERB.search(body) else 0.0,
            "date": _flag(DATE, body),
            "number": _flag(NUMBER, body),
            "entity": _entity(body, names),
            "question": 1.0 if is_question else 0.0,
            "second_person": _flag(SECOND_PERSON, body),
            "reaction": 1.0 if _REACTION.match(body) or _REACTION.match(sentence) else 0.0,
            "cleaned_share": 1.0 - n_body / n_raw if n_raw else 0.0,
            **shared,
        }
        out.append(Statement(body, sentence, i, features))
    return out
