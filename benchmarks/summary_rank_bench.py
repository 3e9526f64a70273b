"""Do the summaries' stored vectors help find the right history? LoCoMo, no model-written summaries.

Each LoCoMo conversation is ingested session by session into its own
namespace with the local ``extractive`` summarizer and the local MiniLM
embedder (summaries are embedded as the pyramid writes them). For every
question with evidence, the summaries are ranked for the question the way
the ``pyramid`` context policy picks its warm chunks
(:meth:`SummaryIndex.pyramid_parts`, top 3 segments), twice in the same run:

* ``words``: BM25 over summary and key facts only (the ranking before the
  vectors were used; the vectors are ignored);
* ``words+vectors``: the same plus the cosine of the question with each
  summary's stored vector (what the policy does now).

Reported: the share of questions whose evidence turn lies in the first
chunk (hit@1) or in any of the three chunks (hit@3), and the share with no
chunk at all (nothing judged relevant). Read at run time from
``../shared/data/locomo/locomo10.json``.

Usage: ``.venv/bin/python benchmarks/summary_rank_bench.py [--conversations N]``
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.locomo.protocol import LOCOMO_PATH, normalise_evidence
from stratamem import Config, Memory
from stratamem.context.sources import SummaryIndex
from stratamem.embed.default import configured_model
from stratamem.ingest import read_file


class WordsOnly(SummaryIndex):
    """The summary ranking with the vectors ignored (the baseline)."""

    def _cosines(self, pyramid: Any, query: str) -> None:
        return None


def run(conversations: int | None) -> dict[str, dict[str, int]]:
    raw = json.loads(LOCOMO_PATH.read_text(encoding="utf-8"))
    sessions = read_file(LOCOMO_PATH, fmt="locomo")
    model = configured_model(Config()).load()
    config = Config().replace(pyramid={"summarizer": "extractive"})
    counts = {name: {"questions": 0, "hit1": 0, "hit3": 0, "none": 0} for name in ("words", "words+vectors")}
    for sample in raw[:conversations]:
        ns = f"locomo-{sample['sample_id']}"
        mem = Memory(":memory:", namespace=ns, config=config, embedder=model)
        stored = mem.add_sessions([s for s in sessions if str(s.namespace) == ns])
        turn_of = {str(st.turn.metadata["dia_id"]): st.id for st in stored}
        indexes = {"words": WordsOnly(), "words+vectors": SummaryIndex()}
        for qa in sample.get("qa", []):
            gold = {turn_of[d] for d in normalise_evidence(qa.get("evidence") or [], set(turn_of))}
            if not gold:
                continue
            for name, index in indexes.items():
                chunks, _ = index.pyramid_parts(mem.pyramid, str(qa["question"]))
                c = counts[name]
                c["questions"] += 1
                c["none"] += not chunks
                c["hit1"] += bool(chunks) and bool(gold & set(chunks[0].turn_ids))
                c["hit3"] += any(gold & set(u.turn_ids) for u in chunks)
        mem.close()
    return counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conversations", type=int, default=None, help="Only the first N conversations.")
    args = ap.parse_args()
    t0 = time.perf_counter()
    counts = run(args.conversations)
    print(f"LoCoMo, extractive summaries, MiniLM vectors ({time.perf_counter() - t0:.0f} s)")
    print(f"{'ranking':<16}{'questions':>10}{'hit@1':>8}{'hit@3':>8}{'no chunk':>10}")
    for name, c in counts.items():
        n = c["questions"] or 1
        print(f"{name:<16}{c['questions']:>10}{c['hit1'] / n:>8.3f}{c['hit3'] / n:>8.3f}{c['none'] / n:>10.3f}")
    w, v = counts["words"], counts["words+vectors"]
    if w["hit3"]:
        print(f"-> hit@3 words+vectors / words = {v['hit3'] / w['hit3']:.2f}x")


if __name__ == "__main__":
    main()
