"""Generate the synthetic assistant-chat recall benchmark (deterministic, seeded).

Each *haystack* is one user's months of chats with an AI assistant: 40+
dated sessions, 400+ turns, short-to-medium user requests and long assistant
answers (about 500–2,000 tokens of how-to prose on cooking, travel, code,
finance, health, fitness, gardening, home repair, careers and music). Facts
about the user are dropped once, in passing, into requests about something
else; some change later; preferences are only implied; some events are dated
relative to the session ("yesterday I ..."); a few facts are spread over
several sessions; some answers contain a specific thing the assistant said; since version 2,
pairs of events told with relative dates in two sessions are asked about
together ("how many days passed between A and B?", "which happened first?").
Questions paraphrase the evidence and come with a question date, their type,
the evidence turn ids and the answer. All text comes from the banks in
:mod:`benchmarks.data.chat_banks` through one ``random.Random(seed)`` per
haystack, so the same seed always gives byte-identical JSON. The version-2
additions draw from a second generator per haystack after everything of
version 1 is decided, and only add a sentence to a few user turns: with
``intervals=False`` the output is byte-identical to version 1, and with them
every version-1 question is unchanged.

Usage::

    python benchmarks/data/make_recall_chats.py --out /tmp/chats.json [--seed 11] [--haystacks 10]

The file is ~10 MB, so the benchmark generates it into a cache under /tmp at
run time (:func:`load_or_generate`) instead of keeping it in the repository.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.data import chat_banks as B

VERSION = 2
"""Bumped whenever the generator's output changes (part of the cache key). Version 1 is
``generate(..., intervals=False)``."""

TYPES_V1 = ("single-session-user", "knowledge-update", "preference", "temporal", "multi-session", "assistant-recall")
"""Question types of version 1."""

TYPES = (*TYPES_V1, "interval")
"""Question types, in report order (``interval``: since version 2)."""

PER_HAYSTACK = {
    "single-session-user": 7,
    "knowledge-update": 4,
    "preference": 4,
    "temporal": 4,
    "multi-session": 3,
    "assistant-recall": 3,
    "interval": 3,
}
"""Questions of each type per haystack (25 of version 1, 28 in all)."""


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


def _sentence(s: str) -> str:
    s = _cap(s.strip())
    return s if s[-1:] in ".!?" else s + "."


@dataclass
class _Slot:
    """One user turn (session, round) and what gets mixed into it."""

    extras: list[str] = field(default_factory=list)
    evidence: bool = False


@dataclass
class _Plan:
    """Everything decided for one haystack before any text is written."""

    dates: list[datetime]
    topics: list[str]
    subjects: list[str]
    rounds: list[int]
    user: dict[tuple[int, int], _Slot] = field(default_factory=dict)
    assistant: dict[tuple[int, int], list[str]] = field(default_factory=dict)
    added: dict[tuple[int, int], list[str]] = field(default_factory=dict)
    """Version 2: sentences added to user turns (placed with the second generator)."""


def _turn_id(session: int, rnd: int, role: str) -> str:
    return f"S{session + 1}:{2 * rnd + (1 if role == 'user' else 2)}"


class _Haystack:
    """Builds one haystack from its own RNG."""

    def __init__(self, seed: int, index: int, sessions: int, intervals: bool = True) -> None:
        self.rng = random.Random(f"stratamem-chats:{seed}:{index}")
        # Version 2's draws: never from self.rng, so everything of version 1 stays as it was.
        self.rng2 = random.Random(f"stratamem-chats-v2:{seed}:{index}")
        self.intervals = intervals
        self.index = index
        rng = self.rng
        start = datetime(2024, 1, 8, tzinfo=UTC) + timedelta(days=rng.randint(0, 300))
        dates, day = [], start
        for _ in range(sessions):
            day += timedelta(days=rng.choice((1, 2, 2, 3, 3, 4, 5, 6, 8)))
            dates.append(day.replace(hour=rng.randint(7, 22), minute=rng.randint(0, 59)))
        topics = [rng.choice(list(B.TOPICS)) for _ in range(sessions)]
        subjects = [rng.choice(B.TOPICS[t]["subjects"]) for t in topics]
        rounds = [rng.randint(4, 6) for _ in range(sessions)]
        while sum(rounds) * 2 < 420:
            rounds[rng.randrange(sessions)] += 1
        self.plan = _Plan(dates, topics, subjects, rounds)
        self.question_date = dates[-1] + timedelta(days=rng.randint(1, 3), hours=rng.randint(0, 5))
        self.questions: list[dict[str, Any]] = []

    # --- placing statements ------------------------------------------------------------------

    def _free_slot(self, sessions: range | list[int], *, avoid: set[int] = frozenset()) -> tuple[int, int]:
        """A user turn not yet holding evidence, in one of ``sessions``."""
        p = self.plan
        pool = [s for s in sessions if s not in avoid] or list(sessions)
        for _ in range(200):
            s = self.rng.choice(pool)
            key = (s, self.rng.randrange(p.rounds[s]))
            slot = p.user.setdefault(key, _Slot())
            if not slot.evidence:
                slot.evidence = True
                return key
        raise RuntimeError("no free user turn left")  # pragma: no cover - sizes make this unreachable

    def _say(self, key: tuple[int, int], text: str) -> str:
        self.plan.user.setdefault(key, _Slot()).extras.append(text)
        return _turn_id(key[0], key[1], "user")

    def _distract(self, text: str, avoid: set[int]) -> None:
        s = self.rng.choice([i for i in range(len(self.plan.dates)) if i not in avoid])
        self.plan.user.setdefault((s, self.rng.randrange(self.plan.rounds[s])), _Slot()).extras.append(text)

    def _question(self, qtype: str, text: str, answer: str, evidence: dict[str, str]) -> None:
        self.questions.append(
            {
                "id": f"h{self.index:02d}-q{len(self.questions) + 1:02d}",
                "type": qtype,
                "question": text,
                "question_date": self.question_date.isoformat(),
                "answer": answer,
                "evidence": sorted(evidence, key=_order),
                "evidence_text": evidence,
            }
        )

    # --- question kinds ------------------------------------------------------------------------

    def facts(self, n: int) -> None:
        rng, everywhere = self.rng, range(len(self.plan.dates))
        for kind in rng.sample(B.FACTS, n):
            v = rng.choice(kind["values"])
            statement = rng.choice(kind["say"]).format(*v)
            key = self._free_slot(everywhere)
            tid = self._say(key, statement)
            for d in rng.sample(kind["distract"], min(2, len(kind["distract"]))):
                self._distract(d.format(*v), {key[0]})
            self._question(
                "single-session-user",
                rng.choice(kind["ask"]).format(*v),
                kind["answer"].format(*v),
                {tid: v[-1] if kind["key"] not in ("commute", "race") else v[0]},
            )

    def updates(self, n: int) -> None:
        rng, ns = self.rng, len(self.plan.dates)
        for kind in rng.sample(B.UPDATES, n):
            v = rng.choice(kind["values"])
            old = self._free_slot(range(int(ns * 0.4)))
            new = self._free_slot(range(int(ns * 0.6), ns))
            ids = {
                self._say(old, rng.choice(kind["old"]).format(*v)): v[0],
                self._say(new, rng.choice(kind["new"]).format(*v)): v[1],
            }
            self._question("knowledge-update", rng.choice(kind["ask"]), kind["answer"].format(*v), ids)

    def preferences(self, n: int) -> None:
        rng = self.rng
        for kind in rng.sample(B.PREFERENCES, n):
            v = rng.choice(kind["values"])
            hint = rng.choice(kind["hint"]).format(*v)
            tid = self._say(self._free_slot(range(len(self.plan.dates))), hint)
            # The evidence is the hint itself; its distinctive words are the second value.
            self._question("preference", rng.choice(kind["ask"]), kind["answer"].format(*v), {tid: hint})

    def temporal(self, n: int) -> None:
        rng, p, ns = self.rng, self.plan, len(self.plan.dates)
        events = rng.sample(B.EVENTS, n // 2 + 2)
        for said, _ in events[n // 2 :]:  # the same kind of remark, other dates: not the evidence
            self._distract(rng.choice(B.TEMPORAL_DISTRACT) + f", and once I {said}", set())
        for said, gist in events[: n // 2]:
            key = self._free_slot(range(int(ns * 0.5), ns))
            back, rel = rng.choice(((0, "this morning I"), (1, "yesterday I"), (2, "the day before yesterday I")))
            when = (p.dates[key[0]] - timedelta(days=back)).date()
            tid = self._say(key, f"{rel} {said}")
            self._question(
                "temporal",
                f"What did I do {_ago_phrase(when, self.question_date.date())}?",
                f"{gist} ({said}, on {when.isoformat()})",
                {tid: said},
            )
        for started, paraphrase, word in rng.sample(B.STARTS, n - n // 2):
            key = self._free_slot(range(ns))
            days, rel = rng.choice(B.REL_AGO)
            when = (p.dates[key[0]] - timedelta(days=days)).date()
            tid = self._say(key, f"{rel} I {started}")
            self._question(
                "temporal",
                rng.choice((f"When did I begin my {paraphrase}?", f"How long have I been doing the {paraphrase} now?")),
                f"started around {when.isoformat()}",
                {tid: word},
            )

    def aggregates(self, n: int) -> None:
        rng, ns = self.rng, len(self.plan.dates)
        for kind in rng.sample(B.AGGREGATES, n):
            items = rng.sample(kind["items"], rng.randint(2, 3))
            thirds = [range(i * ns // len(items), (i + 1) * ns // len(items)) for i in range(len(items))]
            ids = {}
            for item, part in zip(items, thirds, strict=True):
                v = item if isinstance(item, tuple) else (item,)
                ids[self._say(self._free_slot(part), rng.choice(kind["say"]).format(*v))] = str(v[0])
            if kind["answer"] == "count":
                answer = str(len(items))
            elif kind["answer"] == "sum":
                answer = f"{sum(i[1] for i in items)} dollars"
            else:
                answer = ", ".join(items)
            self._question("multi-session", kind["ask"], answer, ids)

    def _free_slot2(self, sessions: range, avoid: set[int]) -> tuple[int, int]:
        """A user turn holding no evidence of either version, in ``sessions`` (second generator)."""
        p = self.plan
        pool = [s for s in sessions if s not in avoid] or list(sessions)
        for _ in range(200):
            s = self.rng2.choice(pool)
            key = (s, self.rng2.randrange(p.rounds[s]))
            if not p.user.get(key, _Slot()).evidence and key not in p.added:
                return key
        raise RuntimeError("no free user turn left")  # pragma: no cover - sizes make this unreachable

    def interval_pairs(self, n: int) -> None:
        """Version 2: two events told with relative dates in two sessions, asked about together."""
        rng, p, ns = self.rng2, self.plan, len(self.plan.dates)
        events = rng.sample(B.PAIRED_EVENTS, 2 * n)
        for q in range(n):
            (said_a, ask_a, noise_a), (said_b, ask_b, noise_b) = events[2 * q], events[2 * q + 1]
            key_a = self._free_slot2(range(int(ns * 0.15), int(ns * 0.5)), set())
            key_b = self._free_slot2(range(int(ns * 0.55), ns), set())
            days = {}
            ids = {}
            for key, said in ((key_a, said_a), (key_b, said_b)):
                rel, back = rng.choice(B.TOLD_AGO)
                days[said] = (p.dates[key[0]] - timedelta(days=back)).date()
                p.added[key] = [f"{rel} I {said}"]
                ids[_turn_id(key[0], key[1], "user")] = said
            for noise in (noise_a, noise_b):
                key = self._free_slot2(range(ns), {key_a[0], key_b[0]})
                p.added[key] = [noise]
            first, second = (ask_a, ask_b) if rng.random() < 0.5 else (ask_b, ask_a)
            if q < n - 1:
                text = rng.choice(B.INTERVAL_ASK).format(a=first, b=second)
                answer = f"{abs((days[said_b] - days[said_a]).days)} days"
            else:
                text = rng.choice(B.ORDER_ASK).format(a=first, b=second)
                answer = ask_a if days[said_a] <= days[said_b] else ask_b
            self._question("interval", _cap(text), answer, ids)

    def assistant_facts(self, n: int) -> None:
        rng, p = self.rng, self.plan
        sessions = rng.sample(range(len(p.dates)), n)
        for s in sessions:
            fact = rng.choice(B.ASSISTANT_FACTS[p.topics[s]])
            v = rng.choice(fact["values"])
            rnd = rng.randrange(p.rounds[s])
            p.assistant.setdefault((s, rnd), []).append(fact["say"].format(v))
            ask = fact["ask"] if rng.random() < 0.5 else f"In one of our chats you gave me a tip. {fact['ask']}"
            self._question("assistant-recall", ask, fact["answer"].format(v), {_turn_id(s, rnd, "assistant"): v})

    # --- writing the text ------------------------------------------------------------------------

    def _fill(self, template: str, topic: str, subject: str) -> str:
        terms = B.TOPICS[topic]["terms"]
        a, b = self.rng.sample(terms, 2)
        return template.format(a=a, b=b, n=self.rng.randint(2, 12), s=subject)

    def user_text(self, s: int, rnd: int) -> str:
        rng, p = self.rng, self.plan
        topic, subject = p.topics[s], p.subjects[s]
        if rnd == 0:
            ask = rng.choice(B.TOPICS[topic]["asks"]).format(s=subject)
        else:
            ask = rng.choice(B.FOLLOWUPS).format(h=rng.choice(B.TOPICS[topic]["heads"]).lower())
        parts = [ask]
        for detail in rng.sample(B.USER_DETAILS, rng.randint(1, 3) if rnd == 0 else rng.randint(0, 1)):
            parts.append(self._fill(detail, topic, subject))
        if rng.random() < 0.4:
            parts.insert(0, rng.choice(B.CHATTER))
        for extra in p.user.get((s, rnd), _Slot()).extras:
            lead = rng.choice(("", "By the way, ", "Unrelated, but ", "Also, ", "Side note: "))
            parts.insert(rng.randint(0, len(parts)), _sentence(lead + extra) if lead else _sentence(extra))
        for extra in p.added.get((s, rnd), []):  # version 2, after every draw of version 1
            lead = self.rng2.choice(("", "By the way, ", "Oh, and ", "Also, ", "Side note: "))
            parts.insert(self.rng2.randint(0, len(parts)), _sentence(lead + extra) if lead else _sentence(extra))
        return " ".join(parts)

    def assistant_text(self, s: int, rnd: int) -> str:
        rng, p = self.rng, self.plan
        topic, subject = p.topics[s], p.subjects[s]
        bank = B.TOPICS[topic]
        target = int(420 * 3.5 ** rng.random())  # words; ~1.2 o200k tokens each: ~500–2,000 tokens
        pool = bank["sentences"] + B.ELABORATIONS
        order: list[str] = []
        heads = rng.sample(bank["heads"], len(bank["heads"]))
        out = [rng.choice(B.OPENERS) + " " + self._fill(rng.choice(B.GENERIC_SENTENCES), topic, subject)]
        words = len(out[0].split())
        inserts = list(p.assistant.get((s, rnd), []))
        h = 0
        while words < target:
            section = []
            for _ in range(rng.randint(3, 6)):
                if not order:
                    order = rng.sample(pool, len(pool))
                section.append(self._fill(order.pop(), topic, subject))
            if inserts and rng.random() < 0.5:
                section.insert(rng.randint(0, len(section)), inserts.pop())
            para = " ".join(section)
            out.append(f"**{heads[h % len(heads)]}**\n\n{para}")
            h += 1
            words += len(para.split()) + 2
        for extra in inserts:  # never dropped
            out.insert(rng.randint(1, len(out)), extra)
        out.append(rng.choice(B.CLOSERS))
        return "\n\n".join(out)

    def build(self) -> dict[str, Any]:
        p = self.plan
        for qtype, count in PER_HAYSTACK.items():
            if qtype == "interval":
                continue
            {
                "single-session-user": self.facts,
                "knowledge-update": self.updates,
                "preference": self.preferences,
                "temporal": self.temporal,
                "multi-session": self.aggregates,
                "assistant-recall": self.assistant_facts,
            }[qtype](count)
        if self.intervals:
            self.interval_pairs(PER_HAYSTACK["interval"])
        sessions = []
        for s, date in enumerate(p.dates):
            turns = []
            for rnd in range(p.rounds[s]):
                t = date + timedelta(minutes=4 * rnd)
                turns.append(
                    {
                        "id": _turn_id(s, rnd, "user"),
                        "role": "user",
                        "text": self.user_text(s, rnd),
                        "timestamp": t.isoformat(),
                    }
                )
                turns.append(
                    {
                        "id": _turn_id(s, rnd, "assistant"),
                        "role": "assistant",
                        "text": self.assistant_text(s, rnd),
                        "timestamp": (t + timedelta(minutes=1)).isoformat(),
                    }
                )
            sessions.append({"id": f"S{s + 1}", "date": date.isoformat(), "topic": p.topics[s], "turns": turns})
        return {
            "id": f"h{self.index:02d}",
            "question_date": self.question_date.isoformat(),
            "sessions": sessions,
            "questions": self.questions,
        }


def _order(turn_id: str) -> tuple[int, int]:
    s, t = turn_id[1:].split(":")
    return int(s), int(t)


def _ago_phrase(when: Any, today: Any) -> str:
    """How a user would name a past day, seen from ``today``."""
    delta = (today - when).days
    if delta <= 6:
        return f"this past {when.strftime('%A')}"
    if delta <= 20:
        return f"{delta} days ago"
    return f"on {when.strftime('%B')} {when.day}"


def generate(seed: int = 11, haystacks: int = 10, sessions: int = 44, intervals: bool = True) -> dict[str, Any]:
    """The whole dataset as a JSON-ready dict (same arguments, same dict); ``intervals=False``
    gives version 1 byte for byte."""
    if sessions < 10:
        raise ValueError("need at least 10 sessions per haystack")
    return {
        "name": "stratamem-synth-chats",
        "version": VERSION if intervals else 1,
        "seed": seed,
        "types": list(TYPES if intervals else TYPES_V1),
        "haystacks": [_Haystack(seed, i, sessions, intervals).build() for i in range(haystacks)],
    }


def dumps(data: dict[str, Any]) -> bytes:
    """Canonical bytes of a dataset (sorted keys, no whitespace variance)."""
    return json.dumps(data, sort_keys=True, ensure_ascii=False, indent=None, separators=(",", ":")).encode()


def cache_path(seed: int = 11, haystacks: int = 10, sessions: int = 44, intervals: bool = True) -> Path:
    """Where :func:`load_or_generate` keeps the generated file (outside the repository)."""
    tag = hashlib.sha256(Path(__file__).read_bytes() + Path(B.__file__).read_bytes()).hexdigest()[:10]
    version = VERSION if intervals else 1
    return Path(f"/tmp/stratamem-synth-chats-v{version}-{seed}-{haystacks}-{sessions}-{tag}.json")


def load_or_generate(seed: int = 11, haystacks: int = 10, sessions: int = 44, intervals: bool = True) -> dict[str, Any]:
    """The dataset, from the /tmp cache when the generator and banks are unchanged (``intervals=False``: version 1)."""
    path = cache_path(seed, haystacks, sessions, intervals)
    if path.exists():
        return json.loads(path.read_bytes())
    data = generate(seed, haystacks, sessions, intervals)
    tmp = path.with_suffix(".part")
    tmp.write_bytes(dumps(data))
    tmp.replace(path)
    return data


def main(argv: list[str] | None = None) -> None:
    """Write the dataset and print its shape."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--haystacks", type=int, default=10)
    ap.add_argument("--sessions", type=int, default=44)
    ap.add_argument("--v1", action="store_true", help="version 1: no interval questions (byte-identical)")
    args = ap.parse_args(argv)
    data = generate(args.seed, args.haystacks, args.sessions, intervals=not args.v1)
    raw = dumps(data)
    args.out.write_bytes(raw)
    turns = sum(len(s["turns"]) for h in data["haystacks"] for s in h["sessions"])
    qs = [q for h in data["haystacks"] for q in h["questions"]]
    print(
        f"{args.out}: {len(raw) / 1e6:.1f} MB, {len(data['haystacks'])} haystacks, {turns} turns, {len(qs)} questions"
    )
    for t in data["types"]:
        print(f"  {t}: {sum(q['type'] == t for q in qs)}")


if __name__ == "__main__":
    main()
