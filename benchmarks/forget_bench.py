"""MCP context payload against its budget, and forget latency, on LoCoMo conversations.

Part ``budget`` — the product owner's report: a 500-token ``memory_context``
over MCP returned ~9.9k tokens, because the full manifest and its near-misses
rode along with the context. For each budget, LoCoMo conversation 0 (read at
run time from ``../shared/data``; one namespace, its sessions in order, lexical
recall, default config) answers 20 of its questions twice:

* ``before``: what the tool returned until now — the context's messages plus
  its full manifest, as JSON (the earlier ``memory_context`` result);
* ``after``: :func:`stratamem.mcp_budget.context_result` (what ``get_context``
  returns now), ``openai`` format, with and without ``explain``.

Reported: median and max o200k tokens of the whole result, and the share of
results over budget.

Part ``forget`` — wall time of ``Memory.forget`` of one turn, of one session
and of a whole namespace on a copy of a SQLite store holding LoCoMo
conversations 0–3 (each its own namespace, ~2.5k turns in all), beside the
time to ``add`` that many turns (the baseline a user knows).

    .venv/bin/python benchmarks/forget_bench.py [--parts budget forget]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.locomo.protocol import LOCOMO_PATH
from stratamem import Memory
from stratamem.ingest import read_file
from stratamem.mcp_budget import context_result

BUDGETS = (250, 500, 1000, 2000, 4000)


def _conversations(n: int) -> list[list]:
    sessions = read_file(LOCOMO_PATH, fmt="locomo")
    names = list(dict.fromkeys(s.namespace for s in sessions))[:n]
    return [[s for s in sessions if s.namespace == ns] for ns in names]


def budget_part(tmp: Path) -> None:
    conv = _conversations(1)[0]
    questions = [q["question"] for q in json.loads(LOCOMO_PATH.read_text())[0]["qa"]][:20]
    mem = Memory(tmp / "budget.db", namespace="c0")
    mem.add_sessions([dataclasses.replace(s, namespace=None) for s in conv])
    count = mem.tokenizer.count
    print(f"LoCoMo conversation 0: {mem.status().turns} turns, {len(questions)} questions, lexical recall")
    print(
        f"{'budget':>7} | {'before median':>13} {'max':>6} {'over':>5} | {'after median':>12} {'max':>6} "
        f"{'over':>5} | {'explain median':>14} {'max':>6} {'over':>5}"
    )
    for budget in BUDGETS:
        before, after, explained = [], [], []
        for q in questions:
            ctx = mem.context(q, budget=budget, format="openai")
            before.append(
                count(
                    json.dumps(
                        {
                            "format": ctx.format,
                            "messages": [dict(m) for m in ctx.messages],
                            "system": ctx.system,
                            "text": None,
                            "tokens": ctx.tokens,
                            "manifest": ctx.manifest.to_dict(),
                        },
                        ensure_ascii=False,
                    )
                )
            )
            after.append(count(context_result(mem, query=q, budget=budget, session=None, fmt="openai", explain=False)))
            explained.append(
                count(context_result(mem, query=q, budget=budget, session=None, fmt="openai", explain=True))
            )

        def row(xs: list[int]) -> str:
            return f"{statistics.median(xs):>13.0f} {max(xs):>6} {sum(x > budget for x in xs) / len(xs):>5.0%}"

        print(f"{budget:>7} | {row(before)} | {row(after)[1:]} | {row(explained)[-26:]:>26}", flush=True)
    mem.close()


def forget_part(tmp: Path) -> None:
    convs = _conversations(4)
    src = tmp / "forget-src.db"
    t0 = time.perf_counter()
    total = 0
    for i, conv in enumerate(convs):
        with Memory(src, namespace=f"c{i}") as mem:
            total += len(mem.add_sessions([dataclasses.replace(s, namespace=None) for s in conv]))
    add_s = time.perf_counter() - t0
    print(
        f"\n{len(convs)} LoCoMo conversations, {total} turns: add_sessions took {add_s:.1f} s "
        f"({add_s / total * 1000:.2f} ms/turn, pyramid + items on)"
    )
    rows = []
    for what in ("one turn", "one session", "whole namespace"):
        times = []
        for rep in range(3):
            db = tmp / f"forget-{rep}.db"
            for suffix in ("", "-wal", "-shm"):
                if Path(f"{src}{suffix}").exists():
                    shutil.copy(f"{src}{suffix}", f"{db}{suffix}")
            if Path(f"{src}.archive").exists():
                shutil.copytree(f"{src}.archive", f"{db}.archive", dirs_exist_ok=True)
            with Memory(db, namespace="c0") as mem:
                turns = mem.turns()
                _ = mem.pyramid  # finish any pending work outside the timing
                t = time.perf_counter()
                if what == "one turn":
                    report = mem.forget(turns=[turns[len(turns) // 2].id])
                elif what == "one session":
                    report = mem.forget(session=turns[len(turns) // 2].session)
                else:
                    report = mem.forget(all_namespace=True)
                times.append(time.perf_counter() - t)
            shutil.rmtree(f"{db}.archive", ignore_errors=True)
        rows.append(
            (
                what,
                statistics.median(times),
                report.turns,
                report.nodes_rebuilt,
                report.nodes_removed,
                len(report.archive_files),
            )
        )
    print(f"{'forget':<16} {'median s':>9} {'turns':>6} {'rebuilt':>8} {'removed':>8} {'files':>6}")
    for what, s, turns_n, rebuilt, removed, files in rows:
        print(f"{what:<16} {s:>9.3f} {turns_n:>6} {rebuilt:>8} {removed:>8} {files:>6}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--parts", nargs="+", choices=["budget", "forget"], default=["budget", "forget"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sm-forget-") as tmp:
        if "budget" in args.parts:
            budget_part(Path(tmp))
        if "forget" in args.parts:
            forget_part(Path(tmp))


if __name__ == "__main__":
    main()
