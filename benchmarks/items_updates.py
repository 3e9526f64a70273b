"""Which statements update an earlier one: candidate pairing rules scored on the chat set (issue 25).

No engine involved. Every user sentence of the assistant-chat set
(``benchmarks/data/make_recall_chats.py``) is a candidate statement; a rule
pairs an older and a newer statement of one haystack said on different days;
a pair is *right* when its two turns are the evidence ``[old, new]`` of one
``knowledge-update`` question. Printed per rule: pairs proposed, precision,
and how many of the 40 true updates it finds. This bounds what a label can
do once both sides are recalled: a context shows a label only for a pair the
rule proposed.

Rules:

* ``topic``     — today's grouping, read at the sentence level: same speaker,
  different day, a shared content word (today compares whole turns by cosine);
* ``statement`` — neither is a question, and they share a content word or an
  attribute class from a small lexicon (:data:`SLOTS`: residence, job, pet,
  record, level, membership, partner, school);
* ``values``    — ``statement``, and each holds a value the other lacks (a
  capitalised word that does not start the sentence, a number or time, or the
  phrase after "as a/an");
* ``cue``       — ``values``, and the newer one says it changed ("now", "new",
  "moved", "switched", "joined", ...);
* ``slot``      — ``values``, and the same attribute class;
* ``slot + cue`` — both;
* ``slot + cue + subject`` — and both are about the same person (the speaker,
  unless "my parents / cousin / friend ..." names someone else);
* the shipped rule, :func:`stratamem.summarize.slots.updates`, over whole user
  turns (every statement of each), which is what labels recalled turns.

Discourse openers ("Side note:", "Also,", "Unrelated, but") are removed first.

Usage::

    .venv/bin/python benchmarks/items_updates.py [--seed 11] [--examples 10]

The set's update statements come from templates (``chat_banks.UPDATES``), so a
rule tuned here overfits easily: read the table as "which conditions carry the
precision", not as the figure to expect on real chats.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

_SPLIT = re.compile(r"(?<=[.!?])\s+")
FIRST = re.compile(r"\b(?:i|i'm|i've|i'd|my|we|we've|we're|our|me|us)\b", re.I)
CUE = re.compile(
    r"\b(?:now|new|newly|moved|move|switched|switching|joined|started|finally|renam\w+|instead|"
    r"anymore|no longer|these days|since|changed|became|become|passed|record|cancelled)\b",
    re.I,
)
_AS = re.compile(r"\bas (?:an?|the) ([a-z][a-z ]{2,40}?)(?=[,.;!?]| and | last | since | my | I |$)", re.I)
_VALUE = re.compile(r"\b\d+(?::\d+)?[a-z]?\b|\b[A-Z][a-z]+\b|\b[A-C][12]\b")
_PREFIX = re.compile(r"^(?:side note|also|unrelated,? but|by the way|btw|oh,? and|anyway|p\.?s\.?)[:,]?\s*", re.I)
# Attribute classes: words that name the same slot of a person's life (a small lexicon, written for this note).
SLOTS: dict[str, frozenset[str]] = {
    k: frozenset(v.split())
    for k, v in {
        "residence": "live living lived moved move moving home place city apartment flat house rent unpacking "
        "neighbourhood",
        "job": "work working job position career role employer company occupation promoted hired shift",
        "pet": "kitten cat dog puppy pet renamed rename named called",
        "record": "record best fastest pb personal",
        "level": "level exam certificate tested grade",
        "membership": "membership gym club studio member joined train",
        "partner": "partner girlfriend boyfriend wife husband married engaged dating",
        "school": "school university degree studying course college",
    }.items()
}
SHIPPED = "stratamem.summarize.slots.updates (shipped; whole turns)"

_STOP = frozenset(
    """a an the and or but if of to in on at for with from by about as into over after before up down
out off than then so such that this these those there here it its is are was were be been being
am do does did have has had i me my we us our you your they them their what which who when where
why how all any both each few more most other some no not only own same too very can will just
should now also really get got go going went one anything everything something still bit much
many lot thing things time way keeps keep end ends week weeks day days month months year years
last next make makes made new old""".split()
)


@dataclass(frozen=True, slots=True)
class Statement:
    """One user sentence."""

    haystack: int
    turn: str
    session: int
    text: str


def statements(data: Mapping[str, Any]) -> list[Statement]:
    """Every sentence of every user turn, with its turn id and session number."""
    out = []
    for pos, h in enumerate(data["haystacks"]):
        for s_i, s in enumerate(h["sessions"]):
            for t in s["turns"]:
                if t["role"] == "user":
                    out += [
                        Statement(pos, t["id"], s_i, _PREFIX.sub("", x)) for x in _SPLIT.split(t["text"].strip()) if x
                    ]
    return out


def values(text: str) -> set[str]:
    """Value tokens: names and other capitalised words past the first, numbers and times, "as a ..." roles."""
    first = text.split(" ", 1)[0]
    found = {m.group(0).lower() for m in _VALUE.finditer(text) if not (m.start() == 0 and m.group(0) == first)}
    found.discard("i")
    found |= {m.group(1).strip().lower() for m in _AS.finditer(text)}
    return found


def content(text: str) -> set[str]:
    """Content words (lower case, no stop words)."""
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in _STOP and len(w) > 2}


_PEOPLE = re.compile(
    r"\b(?:my|our) (parents?|mum|mom|dad|father|mother|cousin|friend|neighbou?r|sister|brother|"
    r"boss|coworker|colleague|son|daughter|kids?|aunt|uncle|grandma|grandpa|company|team)\b",
    re.I,
)


def subject(text: str) -> str:
    """Whom a statement is about: the person named by "my <relation>" if any, else the speaker."""
    m = _PEOPLE.search(text)
    return m.group(1).lower() if m else "speaker"


def slots(text: str) -> set[str]:
    """The attribute classes a sentence's words name."""
    words = set(re.findall(r"[a-z0-9]+", text.lower()))
    return {k for k, v in SLOTS.items() if words & v}


def rules(a: Statement, b: Statement) -> dict[str, bool]:
    """Which rules pair the older ``a`` with the newer ``b``."""
    va, vb = values(a.text), values(b.text)
    same_slot = bool(slots(a.text) & slots(b.text))
    topic = bool(content(a.text) & content(b.text))
    statement = (topic or same_slot) and not a.text.endswith("?") and not b.text.endswith("?")
    # Each side holds a value the other lacks (the attribute itself may be capitalised: "Spanish").
    differ = statement and bool(va - vb) and bool(vb - va)
    cue = bool(CUE.search(b.text))
    same_subject = subject(a.text) == subject(b.text)
    return {
        "topic": topic,
        "statement": statement,
        "values": differ,
        "cue": differ and cue,
        "slot": differ and same_slot,
        "slot + cue": differ and same_slot and cue,
        "slot + cue + subject": differ and same_slot and cue and same_subject,
    }


def main(argv: Sequence[str] | None = None) -> None:
    """Print the rule table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--examples", type=int, default=0, help="print this many wrong pairs of the last rule")
    args = ap.parse_args(argv)
    from benchmarks.data.make_recall_chats import load_or_generate

    data = load_or_generate(args.seed)
    truth = {
        (pos, tuple(q["evidence"]))
        for pos, h in enumerate(data["haystacks"])
        for q in h["questions"]
        if q["type"] == "knowledge-update" and len(q["evidence"]) == 2
    }
    names = ("topic", "statement", "values", "cue", "slot", "slot + cue", "slot + cue + subject", SHIPPED)
    pairs: dict[str, set[tuple[int, tuple[str, str]]]] = {n: set() for n in names}
    # The shipped rule reads whole turns (every statement of each): pair the user turns themselves.
    turns = {
        (pos, t["id"]): (s_i, t["text"])
        for pos, h in enumerate(data["haystacks"])
        for s_i, s in enumerate(h["sessions"])
        for t in s["turns"]
        if t["role"] == "user"
    }
    from stratamem.summarize.slots import readings, updated

    read = {k: readings(text, "user") for k, (_, text) in turns.items()}
    wrong_shipped: list[tuple[str, str]] = []
    keys = sorted(turns, key=lambda k: (k[0], turns[k][0]))  # in time order: haystack, then session
    for i, a in enumerate(keys):
        for b in keys[i + 1 :]:
            if a[0] == b[0] and turns[a][0] != turns[b][0] and updated(read[a], read[b]):
                pairs[SHIPPED].add((a[0], (a[1], b[1])))
                if (a[0], (a[1], b[1])) not in truth and len(wrong_shipped) < args.examples:
                    wrong_shipped.append((turns[a][1], turns[b][1]))
    wrong: list[tuple[str, str]] = []
    by_hay: dict[int, list[Statement]] = {}
    for st in statements(data):
        by_hay.setdefault(st.haystack, []).append(st)
    for pos, sts in by_hay.items():  # the note's sentence rules
        for i, a in enumerate(sts):
            for b in sts[i + 1 :]:
                if b.session == a.session:
                    continue
                got = rules(a, b)
                for n in got:
                    if got[n]:
                        pairs[n].add((pos, (a.turn, b.turn)))
                if got["slot + cue + subject"] and (pos, (a.turn, b.turn)) not in truth and len(wrong) < args.examples:
                    wrong.append((a.text, b.text))
    print(
        f"chat set seed {args.seed}: {sum(len(v) for v in by_hay.values()):,} user sentences, "
        f"{len(truth)} true updates\n"
    )
    print("| rule | pairs proposed | right | precision | true updates found |\n|---|---:|---:|---:|---:|")
    for n in names:
        right = len(pairs[n] & truth)
        print(f"| {n} | {len(pairs[n]):,} | {right} | {right / max(1, len(pairs[n])):.3f} | {right} / {len(truth)} |")
    for a, b in wrong:
        print(f"\n  old: {a}\n  new: {b}")
    if wrong_shipped:
        print("\nwrong pairs of the shipped rule:")
    for a, b in wrong_shipped:
        print(f"\n  old: {a}\n  new: {b}")


if __name__ == "__main__":
    main()
