"""How much of LoCoMo's observations memory items can cover at all, at a given item volume (issue 25).

*covered* (``items_quality.py``) is the share of LoCoMo's per-session
observations whose cited turn is the source of an extracted item. Under a cap
on items (≤ 150 per 1,000 turns) it has a ceiling, whatever the extractor.
This script computes it with no engine, from the data alone:

* **oracle, one turn per item** — greedy set cover: pick, one at a time, the
  turn that covers most observations not yet covered, until the volume is
  spent (greedy is within 1 - 1/e of the optimum and, here, with observations
  citing almost always one turn, practically exact);
* **oracle, items of several turns as the extractor allows** — an item may
  cite several turns of *one speaker* in *one segment* (the pyramid's
  10-turn micro chunks of a session, ``pyramid.micro_chunk_size``;
  :mod:`stratamem.items.grouping`), so the best item of a (speaker, segment)
  cites all of that speaker's cited turns there; greedy over those. This
  ignores the grouping's "about the same thing" test, so it is an upper bound;
* **the fitted scorer** — the salience of every turn (the library's own
  :func:`stratamem.summarize.salience.salience`, or held out with
  ``--held-out``: weights fitted on the other nine conversations by
  ``items_fit.py``'s code), thresholded; the kept turns of one speaker in one
  segment either each an item, or grouped as far as the extractor's rule can
  go (all into one item), or by the extractor's rule without vectors (near and
  sharing a content word). Printed per threshold: items per 1k, grounded,
  covered, source precision — and the best covered with items ≤ the cap and
  grounded ≥ 0.85.

By default the last segment of each conversation's last session counts as
extractable (``--open-tail`` leaves the open tail of the last session out, as
``items_quality.py`` without ``--seal-sessions`` does).

Usage::

    .venv/bin/python benchmarks/items_ceiling.py [--cap 150] [--held-out] [--open-tail]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from benchmarks.items_quality import LOCOMO, observations  # noqa: E402

SEGMENT = 10
"""Turns per micro segment (``pyramid.micro_chunk_size``'s default)."""


@dataclass(frozen=True, slots=True)
class TurnRef:
    """One LoCoMo turn: where it sits and who said it."""

    sample: int
    dia: str
    speaker: str
    segment: tuple[int, int, int]
    """(sample, session, chunk): the pyramid segment it falls in."""
    seq: int
    """Position in its session."""
    text: str


def load(open_tail: bool) -> tuple[list[TurnRef], list[list[tuple[str, ...]]], list[dict]]:
    """Every extractable turn, the observations (cited ids) per sample, the raw samples."""
    data = json.loads(LOCOMO.read_text(encoding="utf-8"))
    turns: list[TurnRef] = []
    obs_per: list[list[tuple[str, ...]]] = []
    for pos, sample in enumerate(data):
        conv = sample["conversation"]
        obs_per.append([ids for _, _, ids in observations(sample)])
        keys = sorted((k for k in conv if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k.split("_")[1]))
        for si, key in enumerate(keys):
            session = conv[key]
            last = si == len(keys) - 1
            for i, t in enumerate(session):
                if open_tail and last and i >= (len(session) // SEGMENT) * SEGMENT:
                    continue
                text = t["text"] + (f" [shares {t['blip_caption']}]" if t.get("blip_caption") else "")
                turns.append(TurnRef(pos, t["dia_id"], t["speaker"], (pos, si, i // SEGMENT), i, text))
    return turns, obs_per, data


def _cover_index(obs_per: Sequence[Sequence[tuple[str, ...]]]) -> dict[tuple[int, str], list[int]]:
    """(sample, dia_id) -> the indices of the observations citing it (global numbering)."""
    index: dict[tuple[int, str], list[int]] = defaultdict(list)
    k = 0
    for pos, per in enumerate(obs_per):
        for ids in per:
            for d in set(ids):
                index[(pos, d)].append(k)
            k += 1
    return index


def greedy(sets: Sequence[frozenset[int]], budget: int) -> int:
    """Observations covered by greedy set cover with ``budget`` sets (lazy: gains only shrink)."""
    import heapq

    covered: set[int] = set()
    heap = [(-len(s), i) for i, s in enumerate(sets) if s]
    heapq.heapify(heap)
    used = 0
    while heap and used < budget:
        neg, i = heapq.heappop(heap)
        gain = len(sets[i] - covered)
        if gain == 0:
            continue
        if gain < -neg:
            heapq.heappush(heap, (-gain, i))
            continue
        covered |= sets[i]
        used += 1
    return len(covered)


def oracles(turns: Sequence[TurnRef], obs_per: Sequence[Sequence[tuple[str, ...]]], caps: Sequence[int]) -> None:
    """Print the covered ceiling per cap, one turn per item and items of one speaker's segment."""
    index = _cover_index(obs_per)
    n_obs = sum(len(p) for p in obs_per)
    single = [frozenset(index.get((t.sample, t.dia), ())) for t in turns]
    by_group: dict[tuple, set[int]] = defaultdict(set)
    for t, s in zip(turns, single, strict=True):
        by_group[(t.segment, t.speaker)] |= s
    grouped = [frozenset(s) for s in by_group.values()]
    n = len(turns)
    print(f"LoCoMo: {n:,} extractable turns, {n_obs:,} observations, {len(grouped):,} (speaker, segment) pairs\n")
    print("| items per 1k turns | oracle: one turn per item | oracle: one speaker's segment per item |")
    print("|---:|---:|---:|")
    for cap in caps:
        budget = int(cap * n / 1000)
        print(f"| {cap} | {greedy(single, budget) / n_obs:.3f} | {greedy(grouped, budget) / n_obs:.3f} |")


def scores(turns: Sequence[TurnRef], data: Sequence[dict], held_out: bool) -> np.ndarray:
    """Each turn's salience as the extractor computes it (best statement; explicit ones at least 0.9)."""
    from stratamem.items.extract import EXPLICIT_SALIENCE
    from stratamem.summarize.facts import explicit
    from stratamem.summarize.salience import salience
    from stratamem.summarize.statements import FEATURES, asks, statements

    feats: list[list[tuple[np.ndarray, bool]]] = []
    for t in turns:
        conv = data[t.sample]["conversation"]
        names = [conv["speaker_a"], conv["speaker_b"]]
        session = conv[f"session_{int(t.dia[1:].split(':')[0])}"]
        prev = session[t.seq - 1] if t.seq else None
        answers = prev is not None and prev["speaker"] != t.speaker and asks(prev["text"])
        sts = statements(t.text, names, answers=answers, opening=t.seq < 2)
        feats.append([(np.array([s.features[f] for f in FEATURES]), explicit(s.text)) for s in sts])
    out = np.zeros(len(turns))
    if not held_out:
        for k, fs in enumerate(feats):
            vals = [EXPLICIT_SALIENCE if ex else salience(dict(zip(FEATURES, x, strict=True))) for x, ex in fs]
            out[k] = max(vals, default=0.0)
        return out
    from benchmarks.items_fit import fit, predict

    cited = _cited(data)
    rows_x, rows_y, rows_s, rows_t = [], [], [], []
    for k, (t, fs) in enumerate(zip(turns, feats, strict=True)):
        for x, _ in fs:
            rows_x.append(x)
            rows_y.append(float((t.sample, t.dia) in cited))
            rows_s.append(t.sample)
            rows_t.append(k)
    x, y, s = np.array(rows_x), np.array(rows_y), np.array(rows_s)
    prob = np.zeros(len(y))
    for fold in sorted(set(rows_s)):
        train = s != fold
        prob[~train] = predict(*fit(x[train], y[train], 1e-3), x[~train])
    for p, k in zip(prob, rows_t, strict=True):
        out[k] = max(out[k], float(p))
    for k, fs in enumerate(feats):
        if any(ex for _, ex in fs):
            out[k] = max(out[k], EXPLICIT_SALIENCE)
    return out


def _cited(data: Sequence[dict]) -> set[tuple[int, str]]:
    return {(pos, d) for pos, sample in enumerate(data) for _, _, ids in observations(sample) for d in ids}


def scorer_table(
    turns: Sequence[TurnRef],
    obs_per: Sequence[Sequence[tuple[str, ...]]],
    data: Sequence[dict],
    sal: np.ndarray,
    cap: int,
) -> None:
    """Thresholds of the fitted salience: items per 1k, grounded, covered, source precision per grouping."""
    index = _cover_index(obs_per)
    cited = _cited(data)
    n_obs = sum(len(p) for p in obs_per)
    n = len(turns)
    print(
        "\n| min salience | kept turns / 1k | grouping | items / 1k | grounded | covered | source precision |\n"
        "|---:|---:|---|---:|---:|---:|---:|"
    )
    best: dict[str, tuple[float, float]] = {}
    for tau in np.arange(0.50, 0.90, 0.02):
        kept = [t for t, p in zip(turns, sal, strict=True) if p >= tau]
        covered = len({o for t in kept for o in index.get((t.sample, t.dia), ())}) / n_obs
        prec = sum((t.sample, t.dia) in cited for t in kept) / max(1, len(kept))
        groups: dict[str, list[list[TurnRef]]] = {"one turn per item": [[t] for t in kept]}
        seg: dict[tuple, list[TurnRef]] = defaultdict(list)
        for t in kept:
            seg[(t.segment, t.speaker)].append(t)
        groups["speaker's segment per item"] = list(seg.values())
        for name, items in groups.items():
            grounded = sum(any((t.sample, t.dia) in cited for t in g) for g in items) / max(1, len(items))
            per1k = 1000 * len(items) / n
            print(
                f"| {tau:.2f} | {1000 * len(kept) / n:.0f} | {name} | {per1k:.0f} | {grounded:.3f} "
                f"| {covered:.3f} | {prec:.3f} |"
            )
            if per1k <= cap and grounded >= 0.85 and covered > best.get(name, (0.0, 0.0))[0]:
                best[name] = (covered, tau)
    for name, (cov, tau) in best.items():
        print(f"best covered with ≤ {cap}/1k and grounded ≥ 0.85, {name}: {cov:.3f} (min salience {tau:.2f})")


def misses(turns: Sequence[TurnRef], data: Sequence[dict], sal: np.ndarray, dump: Path, tau: float) -> None:
    """Why the observation-cited turns that are no item's source got none (an ``items_quality.py --dump``)."""
    from stratamem.summarize.statements import statements

    convs = json.loads(dump.read_text(encoding="utf-8"))["conversations"]
    sources = {(c["sample"], d) for c in convs for i in c["items"] for d in i["sources"]}
    cited = _cited(data)
    measured = {c["sample"] for c in convs}
    extractable = {(t.sample, t.dia): (t, s) for t, s in zip(turns, sal, strict=True)}
    why: Counter[str] = Counter()
    total = 0
    for sample, dia in sorted(cited):
        if sample not in measured or (sample, dia) in sources:
            continue
        total += 1
        if (sample, dia) not in extractable:
            why["in the open last segment of the conversation (never extracted)"] += 1
            continue
        t, s = extractable[(sample, dia)]
        conv = data[sample]["conversation"]
        found = statements(t.text, [conv["speaker_a"], conv["speaker_b"]])
        if not found:
            why["nothing left once greetings, vocatives and the photo caption are cleaned"] += 1
        elif all(st.question for st in found):
            why["only questions"] += 1
        elif s < tau - 0.1:
            why[f"salience < {tau - 0.1:.2f}"] += 1
        elif s < tau:
            why[f"salience {tau - 0.1:.2f}-{tau:.2f} (just under the cut)"] += 1
        else:
            why["kept by the scorer, yet no item cites it (segment boundaries, store merges)"] += 1
    n_cited = sum(1 for k in cited if k[0] in measured)
    print(f"\n{total:,} of {n_cited:,} cited turns are no item's source ({dump.name}, min salience {tau}):\n")
    print("| why | turns | share of the missed |\n|---|---:|---:|")
    for reason, n in why.most_common():
        print(f"| {reason} | {n:,} | {n / total:.3f} |")


def main(argv: Sequence[str] | None = None) -> None:
    """Print the oracle ceilings and the fitted scorer's reach."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--caps", type=int, nargs="*", default=[100, 150, 200, 250, 300])
    ap.add_argument("--cap", type=int, default=150, help="the item cap the scorer table is read against")
    ap.add_argument("--held-out", action="store_true", help="score turns with weights fitted on the other nine")
    ap.add_argument("--open-tail", action="store_true", help="leave out each conversation's open last segment")
    ap.add_argument("--no-scorer", action="store_true")
    ap.add_argument("--misses", type=Path, help="an items_quality.py --dump file: why cited turns got no item")
    ap.add_argument("--min-salience", type=float, default=0.74, help="the threshold the --misses dump ran at")
    args = ap.parse_args(argv)
    turns, obs_per, data = load(args.open_tail)
    oracles(turns, obs_per, args.caps)
    sal = scores(turns, data, args.held_out)
    if not args.no_scorer:
        scorer_table(turns, obs_per, data, sal, args.cap)
    if args.misses:
        misses(turns, data, sal, args.misses, args.min_salience)


if __name__ == "__main__":
    main()
