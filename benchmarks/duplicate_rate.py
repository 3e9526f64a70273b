"""How often an assembled prompt shows the same fact twice, with the de-duplication pass off and on.

A prompt *repeats a fact* when some fact text (a sentence of at least
:data:`stratamem.context.dedup.FACT_TEXT_TOKENS` word tokens, compared after
normalisation: :func:`stratamem.context.dedup.repeated_facts`, the definition the
property test checks) occurs twice in it. For every prompt the same store is
asked twice in the same run, ``context.dedup = false`` (the baseline) and
``true``, and the table gives, per corpus, budget and policy:

* ``repeat %``: share of prompts repeating any fact, off → on;
* ``extra copies``: repeated fact sentences beyond the first copy, summed over the prompts;
* ``repeat tok``: tokens those extra copies cost (each counted once per extra copy);
* ``tokens``: median prompt tokens, off → on (the freed tokens are refilled, so it can stay level).

Corpora: LoCoMo (read at run time from ``../shared/data``; the first
``--conversations`` conversations, every ``--every``-th question as the query)
and the bundled sample conversation (``src/stratamem/data/sample_conversation.jsonl``,
a fixed list of questions about it). Stores are built in a temporary directory
with the default config and summaries made at seal time (extractive summaries
and extracted memory items, no LLM), lexical recall (no embedder).

``--thresholds`` also prints, for the pairs of fact sentences the pass can
compare on LoCoMo, how many a containment threshold calls near-duplicates
(the data behind :data:`stratamem.context.dedup.CONTAINMENT`).

    .venv/bin/python benchmarks/duplicate_rate.py [--conversations 2] [--every 8] [--budgets 500 1000 2000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.locomo.protocol import LOCOMO_PATH
from stratamem import Config, Memory
from stratamem.context import POLICIES
from stratamem.context.dedup import fact_tokens, repeated_facts, sentences
from stratamem.ingest import read_file
from stratamem.tokens import get_tokenizer

SAMPLE_QUESTIONS = [
    "What did we decide about the database and the retry policy?",
    "Where does the Paystream token come from?",
    "Why was a buyer charged twice?",
    "What is the busy timeout?",
    "Which status codes are retried?",
    "When is the drop and what happens before it?",
    "Who is Wei Zhang?",
    "What does the smoke test check?",
]


def _config(dedup: bool) -> Config:
    return Config().replace(pyramid={"defer_summarization": False}, context={"dedup": dedup, "record_manifests": False})


def _locomo(root: Path, conversations: int, every: int) -> list[tuple[str, Path, str, list[str]]]:
    raw = json.loads(LOCOMO_PATH.read_text(encoding="utf-8"))[:conversations]
    sessions = read_file(LOCOMO_PATH, fmt="locomo")
    out = []
    for sample in raw:
        ns = f"locomo-{sample['sample_id']}"
        path = root / f"{ns}.db"
        with Memory(path, namespace=ns, embedder=None, config=_config(True)) as mem:
            mem.add_sessions([s for s in sessions if s.namespace == ns])
            last = mem.store.latest_session(ns)
        questions = [str(q["question"]) for q in sample["qa"]][::every]
        out.append((ns, path, last, questions))
    return out


def _sample(root: Path) -> tuple[str, Path, str, list[str]]:
    path = root / "sample.db"
    src = resources.files("stratamem") / "data" / "sample_conversation.jsonl"
    with resources.as_file(src) as p, Memory(path, namespace="default", embedder=None, config=_config(True)) as mem:
        mem.ingest(read_file(p))
        last = mem.store.latest_session("default")
    return "default", path, last, SAMPLE_QUESTIONS


def _extra(text: str, tok) -> tuple[int, int]:
    """Extra copies of repeated fact texts in ``text`` and the tokens they cost."""
    reps = repeated_facts(text)
    copies = sum(n - 1 for n in reps.values())
    cost = sum((n - 1) * tok.count(k) for k, n in reps.items())
    return copies, cost


def _run(
    label: str, stores: Sequence[tuple[str, Path, str, list[str]]], budgets: Sequence[int], rows: list[list[str]]
) -> None:
    tok = get_tokenizer("o200k_base")
    for budget in budgets:
        for policy in POLICIES:
            stats = {False: [0, 0, 0, []], True: [0, 0, 0, []]}
            n = 0
            for ns, path, session, questions in stores:
                mems = {d: Memory(path, namespace=ns, embedder=None, config=_config(d)) for d in (False, True)}
                try:
                    for q in questions:
                        n += 1
                        for d, mem in mems.items():
                            ctx = mem.context(q, budget=budget, session=session, policy=policy, format="text")
                            assert ctx.tokens <= budget
                            copies, cost = _extra(ctx.text, tok)
                            s = stats[d]
                            s[0] += copies > 0
                            s[1] += copies
                            s[2] += cost
                            s[3].append(ctx.tokens)
                finally:
                    for mem in mems.values():
                        mem.close()
            off, on = stats[False], stats[True]
            rows.append(
                [
                    label,
                    str(budget),
                    policy,
                    str(n),
                    f"{100 * off[0] / n:.0f}% → {100 * on[0] / n:.0f}%",
                    f"{off[1]} → {on[1]}",
                    f"{off[2]} → {on[2]}",
                    f"{statistics.median(off[3]):.0f} → {statistics.median(on[3]):.0f}",
                ]
            )


def _thresholds(stores: Sequence[tuple[str, Path, str, list[str]]]) -> None:
    """Pairs of distinct fact sentences in LoCoMo (turns and summaries) by containment."""
    facts: list[frozenset[str]] = []
    for ns, path, _, _ in stores:
        with Memory(path, namespace=ns, embedder=None, config=_config(True)) as mem:
            for session in [s.name for s in mem.store.sessions(ns)]:
                for st in mem.turns(session):
                    facts += [frozenset(fact_tokens(s)) for s in sentences(st.text) if len(fact_tokens(s)) >= 4]
    facts = list(dict.fromkeys(facts))[:3000]
    index: dict[str, list[int]] = {}
    for i, f in enumerate(facts):
        for t in f:
            index.setdefault(t, []).append(i)
    cuts = [0.6, 0.7, 0.8, 0.9, 1.0]
    counts = dict.fromkeys(cuts, 0)
    examples: dict[float, list[tuple[str, str]]] = {c: [] for c in cuts}
    for i, f in enumerate(facts):
        common: dict[int, int] = {}
        for t in f:
            for j in index[t]:
                if j != i:
                    common[j] = common.get(j, 0) + 1
        for j, c in common.items():
            share = c / len(f)
            for cut in cuts:
                if share >= cut:
                    counts[cut] += 1
                    if len(examples[cut]) < 2 and (cut == 1.0 or share < cut + 0.1):
                        examples[cut].append((" ".join(sorted(f)), " ".join(sorted(facts[j]))))
    print(f"\nContainment of one LoCoMo fact sentence in another ({len(facts)} distinct sentences):")
    print("| threshold | ordered pairs at or above | example at the threshold |")
    print("|---|---|---|")
    for cut in cuts:
        ex = examples[cut][0] if examples[cut] else ("", "")
        print(f"| {cut:.1f} | {counts[cut]} | {ex[0][:60]} ⊂ {ex[1][:60]} |")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--conversations", type=int, default=2)
    ap.add_argument("--every", type=int, default=8, help="take every n-th LoCoMo question")
    ap.add_argument("--budgets", type=int, nargs="+", default=[500, 1000, 2000])
    ap.add_argument("--thresholds", action="store_true")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    rows: list[list[str]] = []
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        sample = _sample(root)
        locomo = _locomo(root, args.conversations, args.every)
        _run("sample", [sample], args.budgets, rows)
        _run("LoCoMo", locomo, args.budgets, rows)
        if args.thresholds:
            _thresholds(locomo)
    head = [
        "corpus",
        "budget",
        "policy",
        "prompts",
        "repeat % (off → on)",
        "extra copies",
        "repeat tok",
        "median tokens",
    ]
    print("\n| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for r in rows:
        print("| " + " | ".join(r) + " |")
    print(
        f"\n(off = context.dedup false, the baseline; on = the pass; same stores, same run; "
        f"{time.perf_counter() - t0:.0f} s)"
    )


if __name__ == "__main__":
    main()
