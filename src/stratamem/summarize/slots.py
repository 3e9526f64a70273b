"""Whom a statement is about, which of their attributes it sets, to what value, and when one statement updates another.

"I moved to Denver" and, months later, "we finally finished unpacking in
Austin" give the same attribute (*residence*) of the same subject (the
speaker) two values: the second updates the first. "I went hiking in Denver"
and "Austin has great tacos" do not, although both name a city. A label
"(superseded?)" on the wrong pair misleads a model more than no label, so
the rule asks for all of it (:func:`updates`), clause by clause (an attribute
and its value are read in the same clause: "we moved to Denver, so the kids
started at a new school" sets the residence, not the school):

* both are statements (not questions) about the **same subject** — the
  speaker, unless the sentence starts with "my/our <relation>" ("My sister
  moved to Leeds" is about the sister);
* they name the **same attribute**, from a small lexicon of the attributes
  people's facts change in (:data:`ATTRIBUTES`: residence, job, pet, record,
  level, membership, partner, school, car);
* they give it **different values of one kind** — each holds a value the
  other lacks, among names (a capitalised word that does not start the
  sentence; not a month or weekday), numbers and times, roles ("as a/an …",
  "become a …") or places ("at a boxing club", "joined a yoga studio"): a
  city is not replaced by a price, nor a job title by a city;
* the newer one **says it changed** ("now", "new", "moved", "switched",
  "joined", "started", "finally", "renamed", "no longer", "these days", ...);
  for an attribute people hold several values of at once (:data:`MANY`:
  clubs, pets), it says the old one went ("cancelled", "instead", "renamed",
  "these days", ...): joining a second club replaces nothing.

Items use the same reading (:func:`slot`): a statement whose first attribute
clause holds one attribute and a value carries ``subject:attribute`` as its
key and the value, so a later item with another value supersedes it
(:mod:`stratamem.items.extraction`), and recalled turns are labelled only on
such a pair (:mod:`stratamem.retrieve.updates`). The rule is measured by
``benchmarks/items_updates.py`` (pairs of the chat set's user turns) and in
contexts by ``benchmarks/items_quality.py --parts labels``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from ._units import prose_sentences
from .statements import clean

__all__ = [
    "ATTRIBUTES",
    "MANY",
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
        "residence": "live lives living lived moved move moving settled home city apartment flat house rent renting "
        "unpacking unpacked relocated neighbourhood neighborhood",
        "job": "work works working job jobs position positions career careers role employer company occupation "
        "promoted promotion hired shift",
        "pet": "cat cats kitten dog dogs puppy pet pets renamed renaming rename",
        "record": "record best fastest pb 5k 10k marathon pace",
        "level": "level exam certificate grade belt tested",
        "membership": "membership gym club studio member joined",
        "partner": "partner girlfriend boyfriend wife husband married engaged dating fiance fiancee",
        "school": "school university college degree studying course major",
        "car": "car drive drives driving",
    }.items()
}
"""Attribute classes: words that name the same attribute of a person's life (a small lexicon, ours)."""

MANY = frozenset({"membership", "pet"})
"""Attributes a person holds several values of at once (clubs, pets): a new value replaces an old one
only when the newer statement says so (:data:`_REPLACED`: "cancelled", "instead", "renamed", ...)."""

# Word pairs that look like an attribute but are not one ("the living room", "a work trip").
_NOT_ATTRIBUTES = re.compile(
    r"\b(?:living room|work (?:trip|out|outs|on|through)|works? (?:for me|well|fine)|home ?made|at home|"
    r"best (?:part|way|thing|friend)|personal best part)\b",
    re.IGNORECASE,
)
_CUE = re.compile(
    r"\b(?:now|new|newly|moved|switched|switching|joined|started|starting|finally|renam\w*|instead|anymore|"
    r"no longer|these days|changed|became|become|passed|cancelled|canceled|quit|left|promoted|upgraded|"
    r"ended up|came through|officially)\b",
    re.IGNORECASE,
)
_REPLACED = re.compile(
    r"\b(?:cancell?ed|canceled|quit|left|no longer|instead|anymore|renam\w*|switched|these days|used to|"
    r"stopped|gave up|replaced)\b",
    re.IGNORECASE,
)
_ROLE = re.compile(r"\b(?:as (?:an?|the)|(?:become|became|becoming) an?) ((?:[a-z][a-z-]* ?){1,4})", re.IGNORECASE)
# Words a role's noun phrase stops before ("as a graphic designer leaves me drained" is a graphic designer).
_ROLE_END = frozenset(
    "leaves leave is was has have had and since at on in for who which with but so i my last this the a an "
    "now too then here there".split()
)
_PLACE = re.compile(r"\b(?:at|joined) (?:an?|the|my|our) ((?:[a-z][a-z-]+ ){0,2}[a-z][a-z-]+)", re.IGNORECASE)
# Words that end a place's noun phrase early ("joined a yoga studio instead" is the yoga studio).
_PLACE_TAIL = frozenset("instead now again too that which who on in at for with twice once every this last".split())
_NAME = re.compile(r"\b[A-Z][a-z]+\b|\b[A-C][12]\b")
_NUMBER = re.compile(r"\b\d+(?::\d+)?(?:[.,]\d+)?[a-z]?\b")
_NOT_VALUES = frozenset(
    "i i'm i've i'd i'll january february march april may june july august september october november december "
    "monday tuesday wednesday thursday friday saturday sunday".split()
)
_RELATIVE = re.compile(
    r"^(?:[A-Z][a-z]+, )?(?:my|our) (parents?|mum|mom|dad|father|mother|cousin|friend|neighbou?r|sister|brother|"
    r"boss|coworker|colleague|son|daughter|kids?|aunt|uncle|grandma|grandpa|partner|wife|husband|girlfriend|boyfriend)\b",
    re.IGNORECASE,
)
_CLAUSE = re.compile(r"[,;:()]|\s(?:and|but|so|because|while|which|who)\s|\s[-–—]\s", re.IGNORECASE)
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


Reading = tuple[str, frozenset[str], frozenset[str], bool, bool]
"""What :func:`updated` compares of one clause: ``(subject, attributes, kind:value set, changed, replaced)``."""


def subject(sentence: str, speaker: str) -> str:
    """Whom ``sentence`` is about: the speaker, or the relative it starts with ("My sister ...", "Priya, my sister")."""
    m = _RELATIVE.match(sentence.strip())
    return f"{speaker}'s {m.group(1).lower()}" if m else speaker


def attributes(text: str) -> set[str]:
    """The attribute classes ``text``'s words name (not "living room", "work trip", ...)."""
    words = set(_WORD.findall(_NOT_ATTRIBUTES.sub(" ", text).lower()))
    return {name for name, lexicon in ATTRIBUTES.items() if words & lexicon}


def _kinds(text: str, names: Iterable[str]) -> list[tuple[str, str]]:
    """``(kind, value)`` of a clause in order: ``name``, ``number``, ``role``, ``place``."""
    skip = {n.lower() for n in names} | _NOT_VALUES
    found = [
        ("name", m.group(0).lower()) for m in _NAME.finditer(text) if m.start() > 0 and m.group(0).lower() not in skip
    ]
    found += [("number", m.group(0).lower()) for m in _NUMBER.finditer(text)]
    for m in _ROLE.finditer(text):
        words = m.group(1).lower().split()
        cut = next((i for i, w in enumerate(words) if w in _ROLE_END), len(words))
        if cut:
            found.append(("role", " ".join(words[:cut])))
    for m in _PLACE.finditer(text):
        words = m.group(1).lower().split()
        while words and words[-1] in _PLACE_TAIL:
            words.pop()
        if words and words[0] not in _NOT_VALUES and not m.group(1)[:1].isupper():
            found.append(("place", " ".join(words)))
    return list(dict.fromkeys(found))


def values(sentence: str, names: Iterable[str] = ()) -> list[str]:
    """Value words of ``sentence`` in order: names past the first word (not the speakers'), numbers, roles, places."""
    return list(dict.fromkeys(v for _, v in _kinds(sentence, names)))


def changed(sentence: str) -> bool:
    """Whether ``sentence`` says something changed ("now", "moved", "switched", "no longer", ...)."""
    return bool(_CUE.search(sentence))


def _clauses(sentence: str) -> list[str]:
    return [c.strip() for c in _CLAUSE.split(sentence) if c and c.strip()]


def slot(sentence: str, speaker: str, names: Iterable[str] = ()) -> Slot | None:
    """The attribute a statement sets and its value, read in the clause that names the attribute first.

    "We moved to Denver last spring, so the kids started at a new school" sets
    the speaker's *residence* to ``denver`` (the school is another clause).
    ``None`` for a question, or when that clause holds several attributes or no value.
    """
    if sentence.rstrip().endswith("?"):
        return None
    names = [speaker, *names]
    for i, clause in enumerate(_clauses(sentence)):
        found = attributes(clause)
        if not found:
            continue
        # Only the first clause's first word starts the sentence (a capital there is no value).
        vals = [v for _, v in _kinds(clause if i == 0 else " " + clause, names)]
        if len(found) != 1 or not vals:
            return None
        return Slot(subject(sentence, speaker), found.pop(), " ".join(vals))
    return None


def readings(text: str, speaker: str, names: Iterable[str] = ()) -> list[Reading]:
    """The :data:`Reading` of each clause of each statement (not question) of a turn's text, said by ``speaker``."""
    names = [speaker, *names]
    out: list[Reading] = []
    for raw in prose_sentences(text):
        if raw.rstrip().endswith("?"):
            continue
        sentence = clean(raw, names)
        if not sentence:
            continue
        who, cue, replaced = subject(sentence, speaker), changed(sentence), bool(_REPLACED.search(sentence))
        for i, clause in enumerate(_clauses(sentence)):
            found = attributes(clause)
            if found:
                kinds = _kinds(clause if i == 0 else " " + clause, names)
                out.append((who, frozenset(found), frozenset(f"{k}:{v}" for k, v in kinds), cue, replaced))
    return out


def updated(before: Iterable[Reading], after: Iterable[Reading]) -> bool:
    """Whether a clause read in ``after`` updates one read in ``before`` (the module's rule)."""
    before = list(before)
    for who, attrs, vals, cue, replaced in after:
        if not cue or not vals:
            continue
        for who_before, attrs_before, vals_before, _, _ in before:
            shared = attrs & attrs_before
            if who != who_before or not shared or (shared <= MANY and not replaced):
                continue
            kinds = {v.split(":", 1)[0] for v in vals - vals_before} & {v.split(":", 1)[0] for v in vals_before - vals}
            if kinds:
                return True
    return False


def updates(older: str, newer: str, speaker: str, names: Iterable[str] = ()) -> bool:
    """Whether a statement of ``newer`` updates one of ``older`` (both said by ``speaker``): the module's rule."""
    names = list(names)
    return updated(readings(older, speaker, names), readings(newer, speaker, names))
