"""Whom a statement is about, which of their attributes it sets, to what value, and when one statement updates another.

"I moved to Denver" and, months later, "we finally finished unpacking in
Austin" give the same attribute (*residence*) of the same subject (the
speaker) two values: the second updates the first. "I went hiking in Denver"
and "Austin has great tacos" do not, although both name a city. A label
"(superseded?)" on the wrong pair misleads a model more than no label, so
the rule asks for all of it (:func:`updates`):

* both are statements (not questions) about the **same subject** — the
  speaker, unless the sentence starts with "my/our <relation>" ("My sister
  moved to Leeds" is about the sister);
* they name the **same attribute**, from a small lexicon of the attributes
  people's facts change in (:data:`ATTRIBUTES`: residence, job, pet, record,
  level, membership, partner, school, car);
* they give it **different values** — each holds a value the other lacks: a
  capitalised word that does not start the sentence (not a month or weekday),
  a number or time, or the role after "as a/an";
* the newer one **says it changed** ("now", "new", "moved", "switched",
  "joined", "started", "finally", "no longer", "these days", ...).

Items use the same reading (:func:`slot`): a statement with exactly one
attribute and a value carries ``subject:attribute`` as its key and the value,
so a later item with another value supersedes it (:mod:`stratamem.items.extraction`),
and recalled turns are labelled only on such a pair (:mod:`stratamem.retrieve.updates`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from ._units import prose_sentences
from .statements import clean

__all__ = [
    "ATTRIBUTES",
    "Reading",
    "Slot",
    "attributes",
    "changed",
    "readings",
    "slot",
    "subject",
    "updated",
    "updates",
    "values",
]

ATTRIBUTES: dict[str, frozenset[str]] = {
    name: frozenset(words.split())
    for name, words in {
        "residence": "live lives living lived moved move moving home city apartment flat house rent renting "
        "unpacking unpacked relocated neighbourhood neighborhood",
        "job": "work works working job position career role employer company occupation promoted promotion hired "
        "shift",
        "pet": "cat cats kitten dog dogs puppy pet pets renamed",
        "record": "record best fastest pb",
        "level": "level exam certificate grade belt",
        "membership": "membership gym club studio member joined",
        "partner": "partner girlfriend boyfriend wife husband married engaged dating fiance fiancee",
        "school": "school university college degree studying course major",
        "car": "car drive drives driving",
    }.items()
}
"""Attribute classes: words that name the same attribute of a person's life (a small lexicon, ours)."""

_CUE = re.compile(
    r"\b(?:now|new|newly|moved|switched|switching|joined|started|starting|finally|renamed|instead|anymore|"
    r"no longer|these days|changed|became|become|passed|cancelled|canceled|quit|left|promoted|upgraded)\b",
    re.IGNORECASE,
)
_ROLE = re.compile(r"\bas (?:an?|the) ([a-z][a-z ]{2,40}?)(?=[,.;!?]| and | last | since | my | i |$)", re.IGNORECASE)
_VALUE = re.compile(r"\b\d+(?::\d+)?(?:[.,]\d+)?[a-z]?\b|\b[A-Z][a-z]+\b|\b[A-C][12]\b")
_NOT_VALUES = frozenset(
    "i i'm i've i'd i'll january february march april may june july august september october november december "
    "monday tuesday wednesday thursday friday saturday sunday".split()
)
_RELATIVE = re.compile(
    r"^(?:my|our) (parents?|mum|mom|dad|father|mother|cousin|friend|neighbou?r|sister|brother|boss|coworker|"
    r"colleague|son|daughter|kids?|aunt|uncle|grandma|grandpa|partner|wife|husband|girlfriend|boyfriend)\b",
    re.IGNORECASE,
)
_WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True, slots=True)
class Slot:
    """An attribute a statement gives a value to."""

    subject: str
    """Whom it is about: the speaker, or ``"<speaker>'s <relation>"``."""
    attribute: str
    """One of :data:`ATTRIBUTES`."""
    value: str
    """The value, lower case (several value words joined by a space, in sentence order)."""


def subject(sentence: str, speaker: str) -> str:
    """Whom ``sentence`` is about: the speaker, or the relative it starts with ("My sister ...")."""
    m = _RELATIVE.match(sentence.strip())
    return f"{speaker}'s {m.group(1).lower()}" if m else speaker


def attributes(sentence: str) -> set[str]:
    """The attribute classes ``sentence``'s words name."""
    words = set(_WORD.findall(sentence.lower()))
    return {name for name, lexicon in ATTRIBUTES.items() if words & lexicon}


def values(sentence: str, names: Iterable[str] = ()) -> list[str]:
    """Value words of ``sentence`` in order: names past the first word (not the speakers'), numbers, "as a" roles."""
    skip = {n.lower() for n in names} | _NOT_VALUES
    first = sentence.split(" ", 1)[0]
    found = [
        m.group(0).lower()
        for m in _VALUE.finditer(sentence)
        if not (m.start() == 0 and m.group(0) == first) and m.group(0).lower() not in skip
    ]
    found += [m.group(1).strip().lower() for m in _ROLE.finditer(sentence)]
    return list(dict.fromkeys(found))


def changed(sentence: str) -> bool:
    """Whether ``sentence`` says something changed ("now", "moved", "switched", "no longer", ...)."""
    return bool(_CUE.search(sentence))


_CLAUSE = re.compile(r"[,;:()]|\s(?:and|but|so|because|while|which|who)\s|\s[-–—]\s", re.IGNORECASE)


def slot(sentence: str, speaker: str, names: Iterable[str] = ()) -> Slot | None:
    """The attribute a statement sets and its value, read in the clause that names the attribute first.

    "We moved to Denver last spring, so the kids started at a new school" sets
    the speaker's *residence* to ``denver`` (the school is another clause).
    ``None`` for a question, or when that clause holds no value.
    """
    if sentence.rstrip().endswith("?"):
        return None
    for clause in _CLAUSE.split(sentence):
        found = attributes(clause)
        if not found:
            continue
        vals = values(clause.strip(), [speaker, *names])
        if len(found) != 1 or not vals:
            return None
        return Slot(subject(sentence, speaker), found.pop(), " ".join(vals))
    return None


Reading = tuple[str, frozenset[str], frozenset[str], bool]
"""What :func:`updates` compares of one statement: ``(subject, attributes, values, changed)``."""


def readings(text: str, speaker: str, names: Iterable[str] = ()) -> list[Reading]:
    """The :data:`Reading` of each statement (not question) of a turn's text, said by ``speaker``."""
    out = []
    for raw in prose_sentences(text):
        if raw.rstrip().endswith("?"):
            continue
        sentence = clean(raw, [speaker, *names])
        if sentence:
            out.append(
                (
                    subject(sentence, speaker),
                    frozenset(attributes(sentence)),
                    frozenset(values(sentence, [speaker, *names])),
                    changed(sentence),
                )
            )
    return out


def updated(before: Iterable[Reading], after: Iterable[Reading]) -> bool:
    """Whether a statement read in ``after`` updates one read in ``before`` (the module's rule)."""
    before = list(before)
    for who, attrs, vals, cue in after:
        if not cue or not attrs or not vals:
            continue
        for who_before, attrs_before, vals_before, _ in before:
            if who == who_before and attrs & attrs_before and vals - vals_before and vals_before - vals:
                return True
    return False


def updates(older: str, newer: str, speaker: str, names: Iterable[str] = ()) -> bool:
    """Whether a statement of ``newer`` updates one of ``older`` (both said by ``speaker``): the module's rule."""
    names = list(names)
    return updated(readings(older, speaker, names), readings(newer, speaker, names))
