"""Which LoCoMo turns are worth an item: simple salience features and rules, scored on turns (issue 25).

No engine involved: every LoCoMo turn is labelled *cited* when one of
LoCoMo's per-session observations cites it (40.6 % of turns), and candidate
rules are scored on that label:

* *precision* — share of selected turns that are cited: what *grounded* would
  be if each selected turn gave one item;
* *recall* — share of cited turns selected;
* *obs covered* — share of observations with a selected cited turn: what
  *covered* would be with one item per selected turn;
* *per 1k* — selected turns per 1,000 turns.

The features are shallow on purpose (regular expressions on the turn text,
the speaker names known): first-person statements, named entities, numbers
and dates, verbs of possession / plan / preference / life events, questions,
greetings, reactions and compliments, length. A logistic regression over the
same features, trained leave-one-conversation-out, shows how far they can go
together; the ceiling row is the best any single-source extractor could do at
150 items per 1k turns.

Usage::

    .venv/bin/python benchmarks/items_salience.py [--items dump.1.quality.json ...] [--examples 20]

``--items`` adds rows for extractors measured by ``benchmarks/items_quality.py --dump``
(the source turns of their items).
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
LOCOMO = ROOT.parent / "shared" / "data" / "locomo" / "locomo10.json"

_DIA = re.compile(r"D(\d+):(\d+)")
FIRST_PERSON = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|im|my|me|mine|we|we're|we've|our|us)\b", re.I)
NUMBER = re.compile(
    r"\b(?:\d+(?:[.,:]\d+)?|one|two|three|four|five|six|seven|eight|nine|ten|twelve|twenty|"
    r"hundred|thousand|first|second|third|dozen|couple)\b",
    re.I,
)
DATE = re.compile(
    r"\b(?:january|february|march|april|may|june|july|august|september|october|november|december|"
    r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|yesterday|tomorrow|tonight|today|"
    r"weekend|last (?:week|month|year|night|time)|next (?:week|month|year)|ago|recently|"
    r"this (?:week|month|year|summer|winter|spring|fall)|years?|months?|weeks?)\b",
    re.I,
)
# Possession, plans, preferences, life events and activities: what observations are made of.
VERB = re.compile(
    r"\b(?:have|has|had|got|get|own|bought|buy|adopted|adopt|plan(?:ning|ned|s)?|going to|gonna|will|want(?:ed)? to|"
    r"hop(?:e|ing) to|thinking (?:of|about)|decided|love|loved|like|liked|prefer|favou?rite|enjoy(?:ed)?|into|"
    r"start(?:ed|ing)?|join(?:ed)?|mov(?:ed|ing)|went|visit(?:ed)?|took|finish(?:ed)?|made|paint(?:ed)?|"
    r"ran|run|signed up|volunteer(?:ed|ing)?|attend(?:ed|ing)?|graduat(?:ed|ing)|work(?:ing|ed)? (?:on|at|as)|"
    r"learn(?:ed|ing)|play(?:ed|ing)?|won|lost|married|born|kids?|son|daughter|husband|wife|family|job)\b",
    re.I,
)
QUESTION_START = re.compile(
    r"^(?:what|how|why|when|where|who|which|do|did|does|are|is|was|were|have|has|can|could|"
    r"would|will|any)\b",
    re.I,
)
GREETING = re.compile(
    r"^(?:hey|hi|hello|yo|good (?:morning|evening|afternoon)|long time|bye|take care|"
    r"talk (?:soon|later)|see you|catch you)\b",
    re.I,
)
REACTION = re.compile(
    r"^(?:wow|whoa|awesome|great|amazing|cool|nice|congrat\w*|thanks?|thank you|that's|that is|"
    r"sounds|so glad|glad|sorry|oh|aw+|yay|lol|haha|love (?:it|that|this)|good (?:luck|job|idea)|"
    r"keep (?:it up|up)|you're|you are|you've|totally|definitely|absolutely|for sure|yeah|yes|"
    r"no way|ha|hmm|omg|i'm (?:so )?(?:glad|happy|sorry|proud))\b",
    re.I,
)
SECOND_PERSON = re.compile(r"\b(?:you|your|you're|you've|yours)\b", re.I)
_SPLIT = re.compile(r"(?<=[.!?])\s+")
_CAPITAL = re.compile(r"\b[A-Z][a-z]+(?:\s+[A-Z][a-z]+)*\b")
_NOT_NAMES = frozenset(
    (
        "I I'm I've I'd I'll Hey Hi Hello Wow Thanks Thank Yeah Yes No Oh Sure Great Awesome Amazing That "
        "That's This It It's What How Why When Where Who Which Do Did Does Are Is Was Were Have Has Can "
        "Could Would Will Any Me My We Our You Your So And But Also Just Good Nice Cool Congrats Sounds "
        "Glad Sorry Love Lol Haha Totally Definitely Absolutely For Not Keep Let Let's Here There Well Ah "
        "Aw Awww Ha Hmm Omg Really Maybe Anyway Sometimes Right Okay Ok Check Look See "
    ).split()
)


@dataclass(frozen=True, slots=True)
class TurnInfo:
    """One LoCoMo turn and its label."""

    sample: int
    dia: str
    speaker: str
    text: str
    photo: bool
    cited: bool
    features: Mapping[str, float]


def cited_ids(raw: Any) -> list[str]:
    """An observation's evidence as normalised ``dia_id``s."""
    parts = raw if isinstance(raw, list) else re.split(r"[;,\s]+", str(raw))
    return [f"D{int(m.group(1))}:{int(m.group(2))}" for p in parts if (m := _DIA.fullmatch(str(p).strip()))]


def sentences(text: str) -> list[str]:
    """Sentences of a turn (split after . ! ?)."""
    return [s for s in _SPLIT.split(text.strip()) if s]


def features(text: str, names: set[str], photo: bool) -> dict[str, float]:
    """The shallow features of one turn (without the photo caption the reader appends)."""
    sents = sentences(text) or [text]
    ents = [
        m.group(0)
        for s in sents
        for m in _CAPITAL.finditer(s)
        if m.group(0).split()[0] not in _NOT_NAMES and m.group(0) not in names and m.start() > 0
    ]
    # A capitalised word that starts a sentence counts when it is not a common opener.
    ents += [
        s.split()[0].strip(",.!?")
        for s in sents
        if s.split()
        and s.split()[0].strip(",.!?") not in _NOT_NAMES
        and s.split()[0][:1].isupper()
        and s.split()[0].strip(",.!?") not in names
        and len(s.split()[0]) > 2
    ]
    questions = sum(s.rstrip().endswith("?") or bool(QUESTION_START.match(s)) for s in sents)
    statements = [s for s in sents if not s.rstrip().endswith("?")]
    first = sum(bool(FIRST_PERSON.search(s)) for s in statements)
    words = len(text.split())
    return {
        "words": float(words),
        "sentences": float(len(sents)),
        "question_share": questions / len(sents),
        "question_only": float(questions == len(sents)),
        "first_person": float(first > 0),
        "first_person_share": first / len(sents),
        "entity": float(bool(ents)),
        "number": float(bool(NUMBER.search(text))),
        "date": float(bool(DATE.search(text))),
        "verb": float(bool(VERB.search(" ".join(statements)))),
        "fp_verb": float(any(FIRST_PERSON.search(s) and VERB.search(s) for s in statements)),
        "greeting": float(bool(GREETING.match(text.strip()))),
        "reaction": float(bool(REACTION.match(text.strip()))),
        "second_person_share": sum(bool(SECOND_PERSON.search(s)) for s in sents) / len(sents),
        "photo": float(photo),
    }


def load(path: Path = LOCOMO) -> tuple[list[TurnInfo], list[list[tuple[str, ...]]]]:
    """Every LoCoMo turn with its features and label; per sample, each observation's cited ids."""
    data = json.loads(path.read_text(encoding="utf-8"))
    out: list[TurnInfo] = []
    obs: list[list[tuple[str, ...]]] = []
    for pos, s in enumerate(data):
        conv = s["conversation"]
        names = {conv["speaker_a"], conv["speaker_b"]}
        names |= {n.split()[0] for n in names}
        these = [tuple(cited_ids(f[1])) for per in s["observation"].values() for facts in per.values() for f in facts]
        obs.append([o for o in these if o])
        cited = {d for o in these for d in o}
        for key, turns in conv.items():
            if key.startswith("session_") and isinstance(turns, list):
                for t in turns:
                    photo = bool(t.get("blip_caption"))
                    out.append(
                        TurnInfo(
                            pos,
                            t["dia_id"],
                            t["speaker"],
                            t["text"],
                            photo,
                            t["dia_id"] in cited,
                            features(t["text"], names, photo),
                        )
                    )
    return out, obs


# --- rules --------------------------------------------------------------------------------------

Rule = Callable[[Mapping[str, float]], bool]


def _chat(f: Mapping[str, float]) -> bool:
    """A short turn that opens with a greeting, a reaction or a compliment."""
    return bool(f["greeting"] or f["reaction"]) and f["words"] < 15


def points(f: Mapping[str, float]) -> float:
    """A hand-weighted salience score (round weights, read off the feature rates; not fitted)."""
    return (
        1.0 * f["fp_verb"]
        + 0.8 * f["first_person_share"]
        + 0.6 * f["date"]
        + 0.3 * f["entity"]
        + 0.3 * f["number"]
        + 0.6 * float(np.log(max(f["words"], 1.0) / 10))
        - 1.0 * f["question_share"]
        - 0.6 * f["second_person_share"]
        - 0.4 * float(_chat(f))
    )


RULES: dict[str, Rule] = {
    "A  not a question-only turn": lambda f: not f["question_only"],
    "B  A and a first-person statement": lambda f: not f["question_only"] and bool(f["first_person"]),
    "C  B and (entity or number or date or verb)": lambda f: (
        not f["question_only"]
        and bool(f["first_person"])
        and bool(f["entity"] or f["number"] or f["date"] or f["verb"])
    ),
    "D  first-person statement with a possession/plan/preference/event verb (fp_verb)": lambda f: (
        bool(f["fp_verb"]) and not f["question_only"]
    ),
    "E  D and not chit-chat (short greeting/reaction)": lambda f: (
        bool(f["fp_verb"]) and not f["question_only"] and not _chat(f)
    ),
    "F  E and (entity or number or date)": lambda f: (
        bool(f["fp_verb"]) and not f["question_only"] and not _chat(f) and bool(f["entity"] or f["number"] or f["date"])
    ),
    "G  F and >= 10 words": lambda f: (
        bool(f["fp_verb"])
        and not f["question_only"]
        and not _chat(f)
        and bool(f["entity"] or f["number"] or f["date"])
        and f["words"] >= 10
    ),
    "H  E or a shared photo": lambda f: (
        (bool(f["fp_verb"]) and not f["question_only"] and not _chat(f)) or bool(f["photo"])
    ),
    "I  E and >= 20 words": lambda f: (
        bool(f["fp_verb"]) and not f["question_only"] and not _chat(f) and f["words"] >= 20
    ),
    "J  points >= 1.2 (hand-weighted score, see points())": lambda f: points(f) >= 1.2,
    "K  points >= 1.6": lambda f: points(f) >= 1.6,
    "L  points >= 2.0": lambda f: points(f) >= 2.0,
}


def score(
    selected: Sequence[bool], turns: Sequence[TurnInfo], obs: Sequence[Sequence[tuple[str, ...]]]
) -> dict[str, float]:
    """Precision, recall, observation coverage and selections per 1k turns of a turn selection."""
    sel = [t for t, s in zip(turns, selected, strict=True) if s]
    cited = sum(t.cited for t in turns)
    chosen = {(t.sample, t.dia) for t in sel}
    n_obs = sum(len(o) for o in obs)
    hit_obs = sum(any((pos, d) in chosen for d in o) for pos, per in enumerate(obs) for o in per)
    return {
        "n": len(sel),
        "precision": sum(t.cited for t in sel) / max(1, len(sel)),
        "recall": sum(t.cited for t in sel) / max(1, cited),
        "obs": hit_obs / max(1, n_obs),
        "per1k": 1000 * len(sel) / len(turns),
    }


def ceiling(turns: Sequence[TurnInfo], obs: Sequence[Sequence[tuple[str, ...]]], per1k: float) -> dict[str, float]:
    """The best observation coverage one-source-turn items can reach at ``per1k`` items per 1k turns.

    Greedy set cover over cited turns (each observation counted once): within a
    few percent of the optimum, and an upper bound on what any extractor
    achieves with one source turn per item.
    """
    budget = int(per1k * len(turns) / 1000)
    left = [(pos, set(o)) for pos, per in enumerate(obs) for o in per]
    gain: Counter[tuple[int, str]] = Counter((pos, d) for pos, o in left for d in o)
    picked: set[tuple[int, str]] = set()
    covered = 0
    while len(picked) < budget and gain:
        best, n = gain.most_common(1)[0]
        if n == 0:
            break
        picked.add(best)
        still = []
        for pos, o in left:
            if pos == best[0] and best[1] in o:
                covered += 1
                for d in o:
                    gain[(pos, d)] -= 1
            else:
                still.append((pos, o))
        left = still
        del gain[best]
    n_obs = sum(len(o) for o in obs)
    return {"n": len(picked), "obs": covered / n_obs, "per1k": 1000 * len(picked) / len(turns)}


# --- a logistic regression over the same features (numpy, leave one conversation out) -----------


def _matrix(turns: Sequence[TurnInfo]) -> tuple[np.ndarray, list[str]]:
    keys = sorted(turns[0].features)
    x = np.array([[t.features[k] for k in keys] for t in turns], dtype=np.float64)
    x[:, keys.index("words")] = np.log1p(x[:, keys.index("words")])
    x[:, keys.index("sentences")] = np.log1p(x[:, keys.index("sentences")])
    return x, keys


def _fit(x: np.ndarray, y: np.ndarray, steps: int = 400, lr: float = 0.5, l2: float = 1e-3) -> np.ndarray:
    mu, sd = x.mean(0), x.std(0) + 1e-9
    z = np.hstack([(x - mu) / sd, np.ones((len(x), 1))])
    w = np.zeros(z.shape[1])
    for _ in range(steps):
        p = 1 / (1 + np.exp(-z @ w))
        w -= lr * (z.T @ (p - y) / len(y) + l2 * w)
    return np.concatenate([w, mu, sd])


def _predict(model: np.ndarray, x: np.ndarray) -> np.ndarray:
    k = x.shape[1]
    w, mu, sd = model[: k + 1], model[k + 1 : 2 * k + 1], model[2 * k + 1 :]
    z = np.hstack([(x - mu) / sd, np.ones((len(x), 1))])
    return 1 / (1 + np.exp(-z @ w))


def held_out_scores(turns: Sequence[TurnInfo]) -> tuple[np.ndarray, dict[str, float]]:
    """Each turn's probability from a model trained on the other nine conversations; mean weights."""
    x, keys = _matrix(turns)
    y = np.array([t.cited for t in turns], dtype=np.float64)
    samples = np.array([t.sample for t in turns])
    out = np.zeros(len(turns))
    weights = []
    for s in sorted(set(samples.tolist())):
        model = _fit(x[samples != s], y[samples != s])
        out[samples == s] = _predict(model, x[samples == s])
        weights.append(model[: len(keys)])
    return out, dict(zip(keys, np.mean(weights, axis=0).round(2).tolist(), strict=True))


# --- report -------------------------------------------------------------------------------------


def _row(name: str, r: Mapping[str, float]) -> str:
    return f"| {name} | {r['per1k']:.0f} | {r['precision']:.3f} | {r['recall']:.3f} | {r['obs']:.3f} |"


def extractor_rows(
    paths: Sequence[str], turns: Sequence[TurnInfo], obs: Sequence[Sequence[tuple[str, ...]]]
) -> list[str]:
    """Rows for the source turns of extractors dumped by ``items_quality.py --dump``."""
    rows = []
    for p in paths:
        dump = json.loads(Path(p).read_text(encoding="utf-8"))
        sources = {
            (c["sample"], d)
            for c in dump["conversations"]
            for i in c["items"]
            if i["source"] == "extracted"
            for d in i["sources"]
        }
        rows.append(
            _row(
                f"source turns of the items in {Path(p).name}",
                score([(t.sample, t.dia) in sources for t in turns], turns, obs),
            )
        )
    return rows


def show_items(path: str, n: int, seed: int = 25) -> None:
    """``n`` random ungrounded and ``n`` random grounded items of a dump, with their source turn (and observation)."""
    import random

    data = json.loads(LOCOMO.read_text(encoding="utf-8"))
    dump = json.loads(Path(path).read_text(encoding="utf-8"))
    text, cites = {}, {}
    for pos, s in enumerate(data):
        for key, turns in s["conversation"].items():
            if key.startswith("session_") and isinstance(turns, list):
                text.update(((pos, t["dia_id"]), f"{t['speaker']}: {t['text']}") for t in turns)
        for per in s["observation"].values():
            for facts in per.values():
                for f in facts:
                    for d in cited_ids(f[1]):
                        cites.setdefault((pos, d), str(f[0]))
    items = [(c["sample"], i) for c in dump["conversations"] for i in c["items"] if i["source"] == "extracted"]
    rng = random.Random(seed)
    bad = [x for x in items if not any((x[0], d) in cites for d in x[1]["sources"])]
    good = [x for x in items if any((x[0], d) in cites for d in x[1]["sources"])]
    for title, pool in (("not grounded", bad), ("grounded", good)):
        print(f"\n{n} random {title} items of {len(pool)} (item | source turn | observation citing it)")
        for pos, it in rng.sample(pool, min(n, len(pool))):
            d = it["sources"][0]
            obs = cites.get((pos, d))
            print(
                f"- [{pos} {d}] ({it['type']}) {it['content']}\n    turn: {text[(pos, d)][:220]}"
                + (f"\n    observation: {obs}" if obs else "")
            )


def main(argv: Sequence[str] | None = None) -> None:
    """Print the rule table, the learned weights and the ceiling."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", nargs="*", default=[], help="items_quality.py --dump files to add as rows")
    ap.add_argument("--examples", type=int, default=0, help="print this many false positives of rule E")
    ap.add_argument("--show", type=int, default=0, help="with --items: this many bad and good items of the first dump")
    args = ap.parse_args(argv)
    if args.show and args.items:
        show_items(args.items[0], args.show)
        return
    turns, obs = load()
    n_cited = sum(t.cited for t in turns)
    print(
        f"LoCoMo: {len(turns):,} turns, {n_cited:,} cited by an observation ({n_cited / len(turns):.3f}), "
        f"{sum(len(o) for o in obs):,} observations\n"
    )
    print(
        "| rule (turn selected when ...) | per 1k turns | precision (≈ grounded) | recall of cited turns "
        "| obs covered (≈ covered) |\n|---|---:|---:|---:|---:|"
    )
    print(_row("every turn", score([True] * len(turns), turns, obs)))
    for name, rule in RULES.items():
        print(_row(name, score([rule(t.features) for t in turns], turns, obs)))
    for line in extractor_rows(args.items, turns, obs):
        print(line)
    for label, key in (("points()", points), ("length alone (words)", lambda f: f["words"])):
        vals = np.array([key(t.features) for t in turns])
        for per1k in (150, 250):
            cut = np.quantile(vals, 1 - per1k / 1000)
            print(_row(f"{label}, top {per1k}/1k (>= {cut:.2f})", score(list(vals >= cut), turns, obs)))
    prob, weights = held_out_scores(turns)
    for per1k in (150, 250, 400):
        cut = np.quantile(prob, 1 - per1k / 1000)
        print(_row(f"logistic regression, held-out conversation, top {per1k}/1k", score(list(prob >= cut), turns, obs)))
    for per1k in (150, 250):
        c = ceiling(turns, obs, per1k)
        print(
            f"| ceiling: the best {per1k}/1k single-source items (set cover of observations) | {c['per1k']:.0f} "
            f"| 1.000 | - | {c['obs']:.3f} |"
        )
    print(
        "\nlogistic-regression weights (standardised features, mean over the 10 folds): "
        + ", ".join(f"{k} {v:+.2f}" for k, v in sorted(weights.items(), key=lambda kv: -abs(kv[1])))
    )
    print(
        "\nfeature rates (cited vs not cited): "
        + ", ".join(
            f"{k} {np.mean([t.features[k] for t in turns if t.cited]):.2f}/"
            f"{np.mean([t.features[k] for t in turns if not t.cited]):.2f}"
            for k in sorted(turns[0].features)
            if k not in ("words", "sentences")
        )
    )
    print(
        "median words (cited vs not): "
        f"{np.median([t.features['words'] for t in turns if t.cited]):.0f} / "
        f"{np.median([t.features['words'] for t in turns if not t.cited]):.0f}"
    )
    if args.examples:
        rule = RULES["E  D and not chit-chat (short greeting/reaction)"]
        fps = [t for t in turns if rule(t.features) and not t.cited][: args.examples]
        print("\nrule E, selected but not cited:")
        for t in fps:
            print(f"  {t.sample} {t.dia} {t.speaker}: {t.text[:160]}")


if __name__ == "__main__":
    main()
