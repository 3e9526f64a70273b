"""Pyramid benchmark on LoCoMo: compression per level, fact coverage, storage.

Reads ``../shared/data/locomo/locomo10.json`` (beside the repository) at run
time. Each conversation is ingested session by session into its own
namespace, and each session is sealed when it ends (as an app closes a
conversation). LoCoMo's per-session ``observation`` facts are used only to
score, never as input.

Prints, for presets ``pyramid`` and ``topics``:

* per level: nodes, turns, turn tokens, summary tokens, token compression ratio;
* fact coverage of the level-1 summaries: the share of observation facts whose
  content words (speaker names excluded) are at least half present in the
  summaries of their session, for ``heuristic`` vs ``extractive`` under the
  same summary token budget;
* storage of 1,000 LoCoMo turns with hot, warm and cold tiers populated
  (database + archive), beside the same turns stored without the pyramid and
  seed 000's ~800 KB per 1,000 turns.

Usage: ``.venv/bin/python benchmarks/pyramid_bench.py [--conversations N]``
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

from stratamem import Config, Memory
from stratamem.ingest import IngestSession, read_file

LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo10.json"

# The scorer's own word rules, independent of the summarizers' helpers.
_STOP = set(
    """a an the and or but if of to in on at by for with from as is are was were be been being it its this
that these those he she they them his her their i me my we our you your has have had do does did not no so
very also about into over after before up out just than then there here which who whom what when where why how
can could would should will may might must recently currently some any all more most other such own same""".split()
)


def fact_words(text: str, names: set[str]) -> set[str]:
    """Content words of a fact, crudely stemmed to 5 letters, without speaker names."""
    out = set()
    for w in re.findall(r"[a-z0-9]+", text.lower()):
        if w in _STOP or w in names or len(w) < 3:
            continue
        out.add(w[:5])
    return out


def covered(fact: str, summary_words: set[str], names: set[str], threshold: float = 0.5) -> bool:
    """A fact counts as covered when at least ``threshold`` of its content words appear."""
    words = fact_words(fact, names)
    return bool(words) and len(words & summary_words) / len(words) >= threshold


def sessions_by_sample(limit: int | None) -> list[tuple[dict, list[IngestSession]]]:
    samples = json.loads(LOCOMO.read_text(encoding="utf-8"))[:limit]
    sessions = read_file(str(LOCOMO), "locomo")
    by_ns: dict[str, list[IngestSession]] = {}
    for s in sessions:
        by_ns.setdefault(s.namespace or "", []).append(s)
    return [(sample, by_ns[f"locomo-{sample['sample_id']}"]) for sample in samples]


def ingest(mem: Memory, sessions: Iterable[IngestSession]) -> int:
    n = 0
    for s in sessions:
        n += len(mem.add_sessions([s]))
        mem.seal(s.session or "default")
    mem.pyramid.summarize_pending(include_hot=True)
    return n


def run(preset: str, summarizer: str, data, *, cap: int | None = None) -> dict:
    pyramid = {"preset": preset, "summarizer": summarizer}
    if cap is not None:
        pyramid.update(topic_summary_tokens=cap)
    config = Config().replace(pyramid=pyramid)
    levels: dict[int, list[int]] = {}
    facts_total = facts_cov = 0
    seg_summary_tokens = 0
    turns = 0
    t0 = time.perf_counter()
    for sample, sessions in data:
        conv = sample["conversation"]
        names = {conv["speaker_a"].lower(), conv["speaker_b"].lower()}
        mem = Memory(":memory:", namespace=sessions[0].namespace, config=config, embedder=None)
        turns += ingest(mem, sessions)
        for lv in mem.pyramid.level_stats():
            acc = levels.setdefault(lv.level, [0, 0, 0, 0])
            acc[0] += lv.nodes
            acc[1] += lv.turns
            acc[2] += lv.summarized_tokens
            acc[3] += lv.summary_tokens
        text_by_session: dict[str, list[str]] = {}
        for n in mem.pyramid.nodes(level=1):
            text_by_session.setdefault(n.session, []).append(n.summary.text if n.summary else "")
            seg_summary_tokens += n.summary_tokens or 0
        for key, per_speaker in sample["observation"].items():
            session = key.replace("_observation", "")
            words = fact_words(" ".join(text_by_session.get(session, [])), set())
            for facts in per_speaker.values():
                for fact, _evidence in facts:
                    facts_total += 1
                    facts_cov += covered(fact, words, names)
        mem.close()
    return {
        "preset": preset,
        "summarizer": summarizer,
        "turns": turns,
        "seconds": time.perf_counter() - t0,
        "levels": levels,
        "facts": facts_total,
        "covered": facts_cov,
        "coverage": facts_cov / facts_total if facts_total else 0.0,
        "segment_summary_tokens": seg_summary_tokens,
    }


def storage(data, target: int = 1000) -> dict:
    """Bytes of ``target`` LoCoMo turns in one database, with and without the pyramid.

    Conversations keep their own namespaces (ages, tiers and archives are per
    namespace); the last one is cut so the total is exactly ``target`` turns.
    """
    picked: list[tuple[str, IngestSession]] = []
    n = 0
    for _sample, sessions in data:
        for s in sessions:
            if n >= target:
                break
            take = s.turns[: target - n]
            picked.append(
                (s.namespace or "default", IngestSession(s.session, take, platform=s.platform, channel=s.channel))
            )
            n += len(take)
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, enabled in (("turns only", False), ("pyramid", True)):
            db = Path(tmp) / f"{label.replace(' ', '_')}.db"
            # Warm segments last 30 days here (default 7): LoCoMo sessions are days to weeks
            # apart, so with the default nearly every segment but the hot ones is already cold.
            config = Config().replace(pyramid={"enabled": enabled, "warm_max_age_hours": 24 * 30.0})
            mems: dict[str, Memory] = {}
            for ns, s in picked:
                mem = mems.setdefault(ns, Memory(db, namespace=ns, config=config, embedder=None))
                mem.add_sessions([s])
                if enabled:
                    mem.seal(s.session or "default")
            tiers: dict[str, list[int]] = {}
            archive = 0
            for mem in mems.values():
                if enabled:
                    mem.pyramid.summarize_pending(include_hot=True)
                    archive += mem.pyramid.archive.size_bytes() if mem.pyramid.archive else 0
                    for t in mem.pyramid.stats():
                        acc = tiers.setdefault(t.tier, [0, 0, 0, 0, 0])
                        for k, v in enumerate((t.nodes, t.turns, t.tokens, t.view_tokens, t.bytes)):
                            acc[k] += v
            store = next(iter(mems.values())).store
            turns = sum(m.status().turns for m in mems.values())
            store.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            db_bytes = store.size_bytes()
            store.connection.execute("VACUUM")
            store.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            vacuumed = store.size_bytes()
            out[label] = {
                "turns": turns,
                "namespaces": len(mems),
                "db_bytes": db_bytes,
                "vacuumed": vacuumed,
                "archive_bytes": archive,
                "total": db_bytes + archive,
                "tiers": tiers,
            }
            store.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=None, help="Only the first N conversations.")
    args = parser.parse_args()
    data = sessions_by_sample(args.conversations)
    results = {}
    for preset in ("pyramid", "topics"):
        for summarizer in ("heuristic", "extractive"):
            r = run(preset, summarizer, data)
            results[(preset, summarizer)] = r
            print(f"\n== preset {preset}, summarizer {summarizer}: {r['turns']} turns in {r['seconds']:.1f} s")
            print(f"{'level':>5} {'nodes':>6} {'turns':>7} {'turn tok':>9} {'summ tok':>9} {'ratio':>7}")
            for level, (nodes, turns, tok, summ) in sorted(r["levels"].items()):
                print(f"{level:>5} {nodes:>6} {turns:>7} {tok:>9} {summ:>9} {tok / summ if summ else 0:>7.2f}")
            print(
                f"fact coverage (level 1): {r['covered']}/{r['facts']} = {r['coverage']:.3f}"
                f"  (level-1 summary tokens: {r['segment_summary_tokens']})"
            )
        h, e = results[(preset, "heuristic")], results[(preset, "extractive")]
        # Same budget in practice, not only the same cap: give extractive the heuristic's
        # average summary size per segment.
        level1 = h["levels"][1]
        avg = max(1, round(h["segment_summary_tokens"] / level1[0]))
        m = run(preset, "extractive", data, cap=avg)
        print(
            f"extractive capped at the heuristic's average {avg} tokens/segment: fact coverage "
            f"{m['covered']}/{m['facts']} = {m['coverage']:.3f} (level-1 summary tokens: {m['segment_summary_tokens']})"
        )
        ratio = e["coverage"] / h["coverage"] if h["coverage"] else float("inf")
        print(
            f"-> {preset}: extractive / heuristic fact coverage = {e['coverage']:.3f} / {h['coverage']:.3f}"
            f" = {ratio:.2f}x (bar: >= 2x) {'PASS' if ratio >= 2 else 'FAIL'}"
        )
    print("\n== storage of 1,000 LoCoMo turns (seed 000 expects ~800 KB)")
    for label, s in storage(data).items():
        print(
            f"{label:>10}: {s['turns']} turns, db {s['db_bytes']:,} B (after VACUUM {s['vacuumed']:,} B)"
            f" + archive {s['archive_bytes']:,} B = {s['total']:,} B"
        )
        for tier, (nodes, turns, tokens, view, size) in s["tiers"].items():
            print(
                f"{'':>12}{tier:>5}: nodes {nodes:>4} turns {turns:>5} tokens {tokens:>7} view {view:>7} "
                f"bytes {size:>8} ratio {tokens / view if view else 1.0:.2f}"
            )


if __name__ == "__main__":
    main()
