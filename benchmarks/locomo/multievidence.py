"""Why multi-evidence questions miss a gold turn, and what prototype re-rankers would pay (issue 30).

    .venv/bin/python -m benchmarks.locomo.multievidence --dataset locomo [--examples /tmp/ex.md]
    .venv/bin/python -m benchmarks.locomo.multievidence --dataset synth --examples /tmp/ex-synth.md

Part 1 (diagnosis): the engine with default weights ranks every question (the
same ranking as ``HybridIndex.search``: signals and fusion through its public
methods); for the question types named by ``--types`` each gold turn outside
the top 10 is described (rank, the turns that beat it, the signals it lacked)
and given an automatic *cause* and the question a *shape*; counts are printed
and, with ``--examples``, every case is written out for reading by hand.

Part 2 (prototypes): every rule of :data:`benchmarks.locomo.rerank_signals.RULES` re-ranks the
same scored questions; r@10, all@5/10/25 and budget recall / all@B at 1,024 and
2,048 o200k tokens (the compact renderer, as the engine's own row of
``locomo_recall.py``) are printed per category/type beside the engine's.
Default weights only (no CV): the rules are compared with each other and
with the engine in the same run.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from stratamem.retrieve import CompactRenderer, HybridIndex, analyze, pack_turns
from stratamem.store import SQLiteStore
from stratamem.tokens import get_tokenizer

from .embedcache import CACHE, SYNTH_CACHE, CachedEmbedder, cached_embedder
from .metrics import category_label
from .protocol import LOCOMO_PATH, load_conversations
from .rerank import Scored, is_aggregation, score, subqueries
from .rerank_signals import RULES, SENTENCE_EMBEDDER
from .runner import _CountCache

DEFAULT_TYPES = {"locomo": ("1 multi-hop",), "synth": ("multi-session", "temporal", "knowledge-update")}
_INTERVAL = re.compile(
    r"\bhow long\b|\bhow many (days|weeks|months|years)\b|\bbetween\b|\bbefore\b|\bafter\b"
    r"|\bsince\b|\bfirst\b|\bwhen did\b",
    re.IGNORECASE,
)


def _load(dataset: str, store: SQLiteStore, samples: list[int] | None) -> tuple[list, Any, dict]:
    """Conversations, the cached embedder, and ``(sample, question index) -> answer`` (scoring side)."""
    if dataset == "locomo":
        raw = json.loads(LOCOMO_PATH.read_text(encoding="utf-8"))
        answers = {
            (str(s["sample_id"]), i): str(qa.get("answer", qa.get("adversarial_answer", "")))
            for s in raw
            for i, qa in enumerate(s["qa"])
        }
        return load_conversations(store, samples=samples), cached_embedder(CACHE), answers
    from benchmarks.data.make_recall_chats import load_or_generate

    from .synth import load_synth

    data = load_or_generate()
    answers = {(h["id"], i): str(q["answer"]) for h in data["haystacks"] for i, q in enumerate(h["questions"])}
    return load_synth(store, data, samples), cached_embedder(SYNTH_CACHE), answers


def answer_shape(question: str, answer: str) -> str:
    """What the gold answer says the question needs (scoring side only: the engine never sees it)."""
    if re.search(r"\bhow (many|much)\b", question, re.IGNORECASE):
        return "count / sum"
    if re.search(r"\bhow long\b|\bhow many (days|weeks|months)\b", question, re.IGNORECASE):
        return "interval"
    items = [a for a in re.split(r",|;|\band\b|\bor\b", answer) if a.strip()]
    if len(items) >= 2 and len(answer.split()) <= 30:
        return "list"
    return "one answer (bridge / restated fact)"


def shape(question: str, category: Any) -> str:
    """What the question asks of its evidence (first that applies)."""
    if category == "knowledge-update":
        return "update (old and new value)"
    if is_aggregation(question):
        return "aggregation / list / count"
    if subqueries(question):
        return "two entities / events (X and Y, both, between)"
    if _INTERVAL.search(question):
        return "interval / ordering"
    return "one fact told in several turns (bridge)"


def _clusters(top: list[int], session: np.ndarray, window: int) -> list[list[int]]:
    """Top positions grouped into neighbourhoods: same session, within ``window`` of a member."""
    groups: list[list[int]] = []
    for i in sorted(top):
        if groups and session[groups[-1][-1]] == session[i] and i - groups[-1][-1] <= window:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


def cause(s: Scored, p: int, gold_pos: set[int], text_of: Any, named: set[str], speaker_of: Any) -> tuple[str, dict]:
    """Why gold position ``p`` is outside the top 10 (first that applies) and the facts behind it."""
    top = [int(i) for i in s.order[:10]]
    tenth = top[-1]
    qterms = set(analyze(s.query))
    shared = qterms & set(analyze(text_of(p)))
    deficit = {n: float(v[tenth] - v[p]) for n, v in s.parts.items()}
    gap = float(s.fused[tenth] - s.fused[p])
    clusters = _clusters(top, s.session, s.index.weights.window)
    biggest = max(clusters, key=len)
    per_session = Counter(int(s.session[i]) for i in top)
    facts = {
        "shared": sorted(shared),
        "gap": gap,
        "deficit": dict(sorted(deficit.items(), key=lambda kv: -kv[1])[:3]),
        "biggest_cluster": len(biggest),
        "top_session_share": per_session.most_common(1)[0][1],
        "found": sorted(g for g in gold_pos if g in top),
    }
    if named and speaker_of(p) not in named and deficit.get("speaker", 0) >= 0.5 * gap:
        return "speaker: the question names the other speaker", facts
    if not shared:
        return "no shared word (paraphrase / hypernym / coreference)", facts
    if len(biggest) >= 4 and p not in biggest:
        return "crowded: one neighbourhood fills the top 10", facts
    if per_session.most_common(1)[0][1] >= 6 and int(s.session[p]) != per_session.most_common(1)[0][0]:
        return "crowded: one session fills the top 10", facts
    return "outscored by same-topic turns", facts


def _metrics(ranking: list[int], gold_pos: set[int], turns: list, tokenizer: Any, budgets: tuple[int, ...]) -> dict:
    out: dict[str, float] = {}
    for k in (5, 10, 25):
        hit = gold_pos & set(ranking[:k])
        if k == 10:
            out["r@10"] = len(hit) / len(gold_pos)
        out[f"all@{k}"] = float(hit == gold_pos)
    for b in budgets:
        kept = {t.id for t in pack_turns([turns[i] for i in ranking[:400]], b, tokenizer, CompactRenderer()).turns}
        hit = {i for i in gold_pos if turns[i].id in kept}
        out[f"b@{b}"] = len(hit) / len(gold_pos)
        out[f"all@{b}"] = float(hit == gold_pos)
    return out


def main(argv: list[str] | None = None) -> None:
    """Diagnose the misses of the chosen types and score every prototype rule."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", choices=("locomo", "synth"), default="locomo")
    ap.add_argument("--samples", type=int, nargs="*")
    ap.add_argument("--types", nargs="*", help="categories/types to diagnose (default: per dataset)")
    ap.add_argument("--examples", type=Path, help="write every diagnosed miss here (markdown)")
    ap.add_argument("--rules", nargs="*", help="rule names to score (default: all)")
    ap.add_argument("--budgets", type=int, nargs="*", default=[1024, 2048])
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    types = set(args.types or DEFAULT_TYPES[args.dataset])
    rules = {n: f for n, f in RULES.items() if not args.rules or n in args.rules}
    tokenizer = _CountCache(get_tokenizer("o200k_base"))
    values: dict[str, dict[str, list[dict]]] = {n: defaultdict(list) for n in rules}
    causes: Counter = Counter()
    shapes: Counter = Counter()
    shape_cause: Counter = Counter()
    missed_q: Counter = Counter()
    answer_shapes: Counter = Counter()
    detector: Counter = Counter()
    buckets: Counter = Counter()
    lines: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "me.db")
        convs, embedder, answers = _load(args.dataset, store, args.samples)
        sentence_cache = None
        if embedder is not None:
            sentence_cache = CachedEmbedder(embedder.inner, Path(f"/tmp/stratamem-r30-sentences-{args.dataset}.npz"))
            SENTENCE_EMBEDDER[:] = [sentence_cache]
        for conv in convs:
            index = HybridIndex(embedder=embedder)
            index.add_turns(conv.turns)
            turns = list(index.turns)
            pos = {st.id: i for i, st in enumerate(turns)}
            sessions = {s: n for n, s in enumerate(dict.fromkeys(st.session for st in turns))}
            session = np.array([sessions[st.session] for st in turns])
            speakers = sorted({st.turn.name for st in turns if st.turn.name})
            dia = {i: conv.dia_of[st.id] for i, st in enumerate(turns)}
            for q in conv.questions:
                s = score(index, q.text, q.question_date, session, speakers)
                gold_pos = {pos[t] for t, d in conv.dia_of.items() if d in q.gold}
                cat = category_label(q.category)
                for name, rule in rules.items():
                    m = _metrics(rule(s), gold_pos, turns, tokenizer, tuple(args.budgets))
                    values[name][cat].append(m)
                    values[name]["all"].append(m)
                    if len(gold_pos) > 1:
                        values[name]["all (>= 2 gold)"].append(m)
                if cat not in types:
                    continue
                rank = {int(i): r for r, i in enumerate(s.order)}
                missed = [p for p in gold_pos if rank[p] >= 10]
                if not missed:
                    continue
                sh = shape(q.text, q.category)
                ans = answer_shape(q.text, answers.get((q.sample, q.index), ""))
                shapes[sh] += 1
                answer_shapes[ans] += 1
                detector[(ans, is_aggregation(q.text))] += 1
                missed_q[cat] += 1
                named = {n for n in speakers if re.search(rf"\b{re.escape(n)}\b", q.text)}
                lines.append(
                    f"\n### {conv.sample} q{q.index} [{cat}] {q.text}\n"
                    f"answer: {answers.get((q.sample, q.index), '')}\n"
                    f"shape: {sh} (answer side: {ans}); gold {', '.join(f'{dia[g]}@{rank[g]}' for g in sorted(gold_pos, key=rank.get))}"
                )
                for p in sorted(missed, key=rank.get):
                    c, facts = cause(s, p, gold_pos, lambda i: turns[i].text, named, lambda i: turns[i].turn.name)
                    causes[c] += 1
                    buckets[next(b for b in (25, 50, 100, 10**9) if rank[p] < b)] += 1
                    shape_cause[(sh, c)] += 1
                    st = index.turn(turns[p].id)
                    lines.append(
                        f"- MISSED {dia[p]} rank {rank[p]} ({st.turn.name or st.role}, "
                        f"{st.timestamp:%Y-%m-%d}): cause **{c}**; {facts}\n  > {_clip(st.text, 320)}"
                    )
                    for r, i in enumerate(s.order[:3]):
                        bt = index.turn(turns[int(i)].id)
                        mark = " (gold)" if int(i) in gold_pos else ""
                        lines.append(
                            f"  - beat by #{r} {dia[int(i)]}{mark} ({bt.turn.name or bt.role}): {_clip(bt.text, 160)}"
                        )
        store.close()
        if embedder is not None:
            embedder.save()
        if sentence_cache is not None:
            sentence_cache.save()
    print(
        f"{args.dataset}: {sum(len(c.questions) for c in convs)} questions; diagnosed types {sorted(types)}; "
        f"questions with a gold turn outside the top 10: {dict(missed_q)}"
    )
    print("\nquestion shapes (questions):")
    for k, v in shapes.most_common():
        print(f"  {v:>4}  {k}")
    print("\nanswer-side shapes (questions), and the question-side aggregation detector on them:")
    for k, v in answer_shapes.most_common():
        print(f"  {v:>4}  {k}  (detector says aggregation: {detector[(k, True)]})")
    print(
        "\nrank of the gold turns outside the top 10: "
        + ", ".join(f"<{b if b < 10**9 else 'inf'}: {buckets[b]}" for b in (25, 50, 100, 10**9))
    )
    print("\nmiss causes (gold turns outside the top 10):")
    for k, v in causes.most_common():
        print(f"  {v:>4}  {k}")
    print("\nshape x cause:")
    for (sh, c), v in sorted(shape_cause.items(), key=lambda kv: -kv[1]):
        print(f"  {v:>4}  {sh}  |  {c}")
    _print_rules(values, args.budgets)
    if args.examples:
        args.examples.write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(f"\nexamples: {args.examples}")
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")


def _clip(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _print_rules(values: dict[str, dict[str, list[dict]]], budgets: list[int]) -> None:
    base_name = next(iter(values))
    groups = list(values[base_name])
    groups = ["all", "all (>= 2 gold)"] + sorted(g for g in groups if not g.startswith("all"))
    metrics = ["r@10", "all@5", "all@10", "all@25"] + [m for b in budgets for m in (f"b@{b}", f"all@{b}")]
    for g in groups:
        rows = values[base_name].get(g, [])
        print(f"\n{g} (n={len(rows)})\n{'rule':<40}" + "".join(f"{m:>9}" for m in metrics))
        base = {m: float(np.mean([r[m] for r in rows])) for m in metrics}
        for name, per in values.items():
            vals = {m: float(np.mean([r[m] for r in per[g]])) for m in metrics}
            cells = "".join(f"{vals[m]:>9.3f}" if name == base_name else f"{vals[m] - base[m]:>+9.3f}" for m in metrics)
            print(f"{name:<40}{cells}")


if __name__ == "__main__":
    main()
