"""Topic boundaries from a change of subject (seed 002, issue 27): do they over-split?

LoCoMo has no topic labels, so two measures stand in for them, both through the
real :class:`~stratamem.pyramid.segment.TopicSegmenter` on the vectors the recall
index stores (MiniLM of ``Speaker: text``, int8 as stored):

* every LoCoMo session alone: subject boundaries per 100 turns and the median
  topic length in turns (a session of ~21 turns that LoCoMo's speakers spend on
  a few subjects should give few boundaries; a boundary every few turns would
  be over-splitting);
* splices: the first half of one session followed by the second half of a
  session of another conversation (a true change of subject at the seam): the
  share of splices with a boundary within 2 turns of the seam, and boundaries
  elsewhere per 100 turns (false alarms);
* the packaged sample conversation (``stratamem.data``), every session.

Only the subject rule is measured (phrases, gaps and the token threshold are
off). The baseline beside each threshold is the segmenter without the rule
(similarity 0, as before issue 27), which never sees a subject change.

    .venv/bin/python benchmarks/topic_boundaries.py [--thresholds 0.35 0.4 0.45 0.5] [--splices 300]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path

import numpy as np

from stratamem.embed.local import LocalMiniLM
from stratamem.embed.quantize import decode_int8, encode_int8
from stratamem.pyramid.segment import TopicSegmenter
from stratamem.records import StoredTurn, Turn

LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo10.json"
T0 = datetime(2024, 1, 1, tzinfo=UTC)


def _locomo_sessions() -> list[list[tuple[str, str]]]:
    data = json.loads(LOCOMO.read_text(encoding="utf-8"))
    out = []
    for sample in data:
        conv = sample["conversation"]
        k = 1
        while f"session_{k}" in conv:
            out.append(
                [
                    ("user" if t["speaker"] == conv["speaker_a"] else "assistant", f"{t['speaker']}: {t['text']}")
                    for t in conv[f"session_{k}"]
                ]
            )
            k += 1
    return out


def _sample_sessions() -> list[list[tuple[str, str]]]:
    text = resources.files("stratamem.data").joinpath("sample_conversation.jsonl").read_text(encoding="utf-8")
    sessions: dict[str, list[tuple[str, str]]] = {}
    for line in text.splitlines():
        rec = json.loads(line)
        content = rec.get("content") or ""
        if rec["role"] in ("user", "assistant") and isinstance(content, str) and content.strip():
            sessions.setdefault(rec["session"], []).append(
                (rec["role"], f"{rec.get('name') or rec['role']}: {content}")
            )
    return list(sessions.values())


def _stored(vectors: np.ndarray) -> np.ndarray:
    """The vectors as the recall index stores and reads them back (int8)."""
    return decode_int8(list(encode_int8(vectors)), vectors.shape[1])


def _boundaries(roles: list[str], vecs: np.ndarray, similarity: float) -> list[int]:
    turns = [
        StoredTurn(i + 1, "ns", "s", i + 1, 1, Turn(role, "x", timestamp=T0 + timedelta(seconds=i)))  # type: ignore[arg-type]
        for i, role in enumerate(roles)
    ]
    seg = TopicSegmenter((), timedelta(days=3650), 10**9, similarity=similarity)
    split = seg.split(turns, {t.id: vecs[i] for i, t in enumerate(turns)})
    out, at = [], 0
    for seal in split.seals:
        at += len(seal.turns)
        out.append(at)
    return out


def _session_stats(
    sessions: list[list[tuple[str, str]]], vecs: list[np.ndarray], similarity: float
) -> tuple[float, float]:
    found, turns, lengths = 0, 0, []
    for sess, v in zip(sessions, vecs, strict=True):
        b = _boundaries([r for r, _ in sess], v, similarity) if similarity > 0 else []
        found += len(b)
        turns += len(sess)
        edges = [0, *b, len(sess)]
        lengths += [hi - lo for lo, hi in zip(edges, edges[1:], strict=False)]
    return 100 * found / max(1, turns), statistics.median(lengths)


def _splices(
    sessions: list[list[tuple[str, str]]], vecs: list[np.ndarray], similarity: float, n: int
) -> tuple[float, float]:
    rng = random.Random(7)
    hits, false, turns = 0, 0, 0
    for _ in range(n):
        i, j = rng.sample(range(len(sessions)), 2)
        a, b = sessions[i], sessions[j]
        ha, hb = len(a) // 2, len(b) // 2
        roles = [r for r, _ in a[:ha]] + ["user" if q % 2 == 0 else "assistant" for q in range(len(b) - hb)]
        v = np.vstack([vecs[i][:ha], vecs[j][hb:]])
        found = _boundaries(roles, v, similarity) if similarity > 0 else []
        hits += any(abs(x - ha) <= 2 for x in found)
        false += sum(abs(x - ha) > 2 for x in found)
        turns += len(roles)
    return hits / n, 100 * false / max(1, turns)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--thresholds", type=float, nargs="+", default=[0.35, 0.40, 0.45, 0.50])
    ap.add_argument("--splices", type=int, default=300)
    args = ap.parse_args()
    model = LocalMiniLM()
    t = time.perf_counter()
    sets = {"LoCoMo": _locomo_sessions(), "sample": _sample_sessions()}
    vecs = {name: [_stored(model.embed_batch([x for _, x in s])) for s in ss] for name, ss in sets.items()}
    print(f"embedded {sum(len(s) for ss in sets.values() for s in ss)} turns in {time.perf_counter() - t:.0f} s")
    print()
    print(
        "| similarity | LoCoMo boundaries /100 turns | median topic (turns) | splice seam found | false /100 turns "
        "| sample boundaries /100 turns |"
    )
    print("|---|---|---|---|---|---|")
    for similarity in [0.0, *args.thresholds]:
        rate, median = _session_stats(sets["LoCoMo"], vecs["LoCoMo"], similarity)
        seam, false = _splices(sets["LoCoMo"], vecs["LoCoMo"], similarity, args.splices)
        sample_rate, _ = _session_stats(sets["sample"], vecs["sample"], similarity)
        label = "0 (baseline: no subject rule)" if similarity == 0 else f"{similarity:.2f}"
        print(f"| {label} | {rate:.2f} | {median:g} | {seam:.2f} | {false:.2f} | {sample_rate:.2f} |")


if __name__ == "__main__":
    main()
