"""The spine's costs on LoCoMo: token counting, ingest, bytes on disk, each beside a plain baseline.

Three measurements over the 5,882 turns of ``locomo10.json`` (10 conversations,
272 sessions), each repeated and reported as the median:

1. **Tokenizer throughput.** Exact ``o200k_base`` and ``cl100k_base`` counts of
   every turn's text (``Tokenizer.count``) and of every turn as a message
   (``count_turn``: text + per-message overhead + name), in tokens/s, beside
   the baseline ``len(json.dumps(turn)) / 4`` measured in the same run. The
   baseline's error is reported against the exact message count (what a
   budget must be kept against), per turn and summed.
2. **Ingest throughput** into a fresh SQLite file: one ``Memory.add_sessions``
   call (one transaction) per LoCoMo session, and one ``Memory.add`` call per
   turn. Baseline: appending the same turns as JSON Lines to a file, flushed
   per session (or per turn), with and without ``os.fsync`` (an fsync per turn
   is timed on the first 1,000 turns only: on a shared disk it takes minutes). Durability is
   not equal and the table says so: the store runs WAL with
   ``synchronous=NORMAL``, so a commit survives a crash of the process but
   the last commits may be lost on power failure, like a flushed but not
   fsynced file; the fsync rows are the power-safe baseline. The store also
   validates every turn and counts its tokens exactly; the baseline does neither.
3. **Bytes per 1,000 turns** of the database (file + WAL after the ingest)
   beside the JSON Lines file of the same turns.

Run: ``.venv/bin/python benchmarks/spine_bench.py`` (about a minute on 2 cores;
``--runs`` sets the repetitions, default 3; ``--json PATH`` saves the figures).
The data is read at run time from ``../shared/data/locomo/locomo10.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from stratamem import Config, Memory
from stratamem.ingest import IngestSession, read_file
from stratamem.records import Turn
from stratamem.tokens import count_turn, get_tokenizer

_FSYNC_SLICE = 1000
LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo10.json"


def _median_time(fn: Callable[[], Any], runs: int) -> tuple[float, Any]:
    """Median wall time of ``runs`` calls of ``fn`` and the last call's result."""
    times, result = [], None
    for _ in range(runs):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def _baseline_estimate(turns: list[Turn]) -> list[float]:
    return [len(json.dumps(t.to_dict(), ensure_ascii=False)) / 4 for t in turns]


def _text_estimate(turns: list[Turn]) -> list[float]:
    return [len(t.text) / 4 for t in turns]


def _errors(estimates: list[float], exact: list[int]) -> dict[str, float]:
    errors = sorted(abs(e - x) / x for e, x in zip(estimates, exact, strict=True) if x)
    return {
        "total": sum(estimates) / sum(exact) - 1,
        "mean_abs": statistics.fmean(errors),
        "p95_abs": errors[int(0.95 * len(errors))],
    }


def bench_tokenizers(turns: list[Turn], runs: int) -> list[dict[str, Any]]:
    """Throughput of exact counting and of the len/4 baseline, and the baseline's error."""
    rows: list[dict[str, Any]] = []
    seconds, estimates = _median_time(lambda: _baseline_estimate(turns), runs)
    rows.append(
        {
            "method": "len(json.dumps(turn))/4",
            "seconds": seconds,
            "tokens": round(sum(estimates)),
            "tokens_per_s": sum(estimates) / seconds,
            "turns_per_s": len(turns) / seconds,
        }
    )
    seconds, text_estimates = _median_time(lambda: _text_estimate(turns), runs)
    rows.append(
        {
            "method": "len(text)/4",
            "seconds": seconds,
            "tokens": round(sum(text_estimates)),
            "tokens_per_s": sum(text_estimates) / seconds,
            "turns_per_s": len(turns) / seconds,
        }
    )
    for name in ("o200k_base", "cl100k_base"):
        tok = get_tokenizer(name)
        tok.count("warm up")  # loads the tables outside the timed runs
        seconds, counts = _median_time(lambda: [tok.count(t.text) for t in turns], runs)
        rows.append(
            {
                "method": f"{name} text",
                "seconds": seconds,
                "tokens": sum(counts),
                "tokens_per_s": sum(counts) / seconds,
                "turns_per_s": len(turns) / seconds,
                "len_text_4_error": _errors(text_estimates, counts),
            }
        )
        seconds, exact = _median_time(lambda: [count_turn(t, tok) for t in turns], runs)
        rows.append(
            {
                "method": f"{name} count_turn",
                "seconds": seconds,
                "tokens": sum(exact),
                "tokens_per_s": sum(exact) / seconds,
                "turns_per_s": len(turns) / seconds,
                "len_json_4_error": _errors(estimates, exact),
            }
        )
    return rows


def _ingest_batches(path: Path, sessions: list[IngestSession], config: Config) -> None:
    mems: dict[str, Memory] = {}
    # The tokenizer is built once outside the timing: its tables load in ~0.3-1 s per process.
    base = Memory(path, config=config, tokenizer=get_tokenizer(config.tokenizer), embedder=None)
    for s in sessions:
        mem = mems.setdefault(s.namespace, base.for_namespace(s.namespace))
        mem.add_sessions([s])
    base.close()


def _ingest_turns(path: Path, sessions: list[IngestSession], config: Config) -> None:
    mems: dict[str, Memory] = {}
    base = Memory(path, config=config, tokenizer=get_tokenizer(config.tokenizer), embedder=None)
    for s in sessions:
        mem = mems.setdefault(s.namespace, base.for_namespace(s.namespace))
        for t in s.turns:
            mem.add(t, session=s.session, platform=s.platform)
    base.close()


def _jsonl_lines(sessions: list[IngestSession]) -> list[list[str]]:
    return [
        [
            json.dumps({"namespace": s.namespace, "session": s.session, **t.to_dict()}, ensure_ascii=False) + "\n"
            for t in s.turns
        ]
        for s in sessions
    ]


def _append_jsonl(path: Path, batches: list[list[str]], per_turn: bool, fsync: bool) -> None:
    with open(path, "a", encoding="utf-8") as f:
        for lines in batches:
            for line in lines:
                f.write(line)
                if per_turn:
                    f.flush()
                    if fsync:
                        os.fsync(f.fileno())
            if not per_turn:
                f.flush()
                if fsync:
                    os.fsync(f.fileno())


def _db_bytes(path: Path) -> int:
    return sum(os.path.getsize(f"{path}{suffix}") for suffix in ("", "-wal") if os.path.exists(f"{path}{suffix}"))


def bench_ingest(
    sessions: list[IngestSession], runs: int, workdir: Path
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Ingest throughput of the store and the JSON Lines baselines, and bytes on disk."""
    n_turns = sum(len(s.turns) for s in sessions)
    batches = _jsonl_lines(sessions)
    fsync_slice = [[line for lines in batches for line in lines][:_FSYNC_SLICE]]
    counter = iter(range(10**6))

    def fresh(suffix: str) -> Path:
        return workdir / f"run{next(counter)}{suffix}"

    spine = Config().replace(pyramid={"enabled": False})
    full = Config()
    cases: list[tuple[str, str, Callable[[Path], None], str]] = [
        ("SQLite, store only", "per session (add_sessions)", lambda p: _ingest_batches(p, sessions, spine), ".db"),
        ("SQLite, store only", "per turn (add)", lambda p: _ingest_turns(p, sessions, spine), ".db"),
        ("SQLite, default config", "per session (add_sessions)", lambda p: _ingest_batches(p, sessions, full), ".db"),
        ("SQLite, default config", "per turn (add)", lambda p: _ingest_turns(p, sessions, full), ".db"),
        ("JSONL append, flush", "per session", lambda p: _append_jsonl(p, batches, False, False), ".jsonl"),
        ("JSONL append, flush", "per turn", lambda p: _append_jsonl(p, batches, True, False), ".jsonl"),
        ("JSONL append, fsync", "per session", lambda p: _append_jsonl(p, batches, False, True), ".jsonl"),
        # An fsync per turn costs milliseconds on a shared disk: measure it on a slice to keep the run short.
        (
            "JSONL append, fsync",
            f"per turn (first {_FSYNC_SLICE:,} turns)",
            lambda p: _append_jsonl(p, fsync_slice, True, True),
            ".jsonl",
        ),
    ]
    rows: list[dict[str, Any]] = []
    sizes: dict[str, Any] = {}
    for method, unit, fn, suffix in cases:
        times = []
        for _ in range(runs):
            path = fresh(suffix)
            start = time.perf_counter()
            fn(path)
            times.append(time.perf_counter() - start)
            size = _db_bytes(path) if suffix == ".db" else path.stat().st_size
            sizes.setdefault(method, size)
        seconds = statistics.median(times)
        n = _FSYNC_SLICE if unit.startswith("per turn (first") else n_turns
        rows.append({"method": method, "unit": unit, "seconds": seconds, "turns_per_s": n / seconds})
    db_path = workdir / "run0.db"
    with Memory(db_path, embedder=None) as mem:
        text_bytes = sum(mem.for_namespace(ns).status().text_bytes for ns in {s.namespace for s in sessions})
    size_rows = {
        "turns": n_turns,
        "db_bytes": sizes["SQLite, store only"],
        "db_bytes_default": sizes["SQLite, default config"],
        "jsonl_bytes": sizes["JSONL append, flush"],
        "text_bytes": text_bytes,
    }
    return rows, size_rows


def machine_note() -> str:
    """One line describing the machine and the software measured."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"machine: nproc={cpus}, load(1m)={load:.1f}, Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}, {platform.system()} {platform.machine()}"
    )


def main(argv: list[str] | None = None) -> int:
    """Run the three measurements and print their tables."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="repetitions per measurement (median reported)")
    parser.add_argument("--data", type=Path, default=LOCOMO, help="locomo10.json")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if not args.data.exists():
        print(f"LoCoMo data not found at {args.data}", file=sys.stderr)
        return 2

    sessions = read_file(args.data)
    turns = [t for s in sessions for t in s.turns]
    print(
        f"LoCoMo: {len(turns):,} turns in {len(sessions)} sessions, "
        f"{len({s.namespace for s in sessions})} conversations; median of {args.runs} runs"
    )
    print(machine_note())

    # The token counters and the JSONL appends take milliseconds: repeat them more for a steadier median.
    tok_rows = bench_tokenizers(turns, max(args.runs, 5))
    print("\n(a) token counting")
    print(f"{'method':<26} {'seconds':>8} {'tokens':>10} {'tokens/s':>12} {'turns/s':>10}")
    for r in tok_rows:
        print(
            f"{r['method']:<26} {r['seconds']:>8.3f} {r['tokens']:>10,} {r['tokens_per_s']:>12,.0f} "
            f"{r['turns_per_s']:>10,.0f}"
        )
    print("relative error of the estimates (total over all turns; per turn: mean and p95 of |error|):")
    for r in tok_rows:
        for key, label in (
            ("len_json_4_error", "len(json.dumps(turn))/4 vs count_turn"),
            ("len_text_4_error", "len(text)/4 vs exact text count"),
        ):
            if key in r:
                e = r[key]
                print(
                    f"  {label:<40} {r['method'].split()[0]:<12} total {e['total']:+7.1%}   "
                    f"mean {e['mean_abs']:6.1%}   p95 {e['p95_abs']:6.1%}"
                )

    with tempfile.TemporaryDirectory(prefix="stratamem-spine-") as tmp:
        ingest_rows, size = bench_ingest(sessions, args.runs, Path(tmp))
    print("\n(b) ingest into a fresh file")
    print(f"{'method':<24} {'batch':<32} {'seconds':>8} {'turns/s':>12}")
    for r in ingest_rows:
        print(f"{r['method']:<24} {r['unit']:<32} {r['seconds']:>8.3f} {r['turns_per_s']:>12,.0f}")
    print("durability: SQLite WAL synchronous=NORMAL survives a process crash but may lose the last commits on")
    print("power loss (like 'flush'); the 'fsync' rows are power-safe. SQLite rows include validation and exact")
    print("counting; 'default config' also segments and summarizes (the pyramid), 'store only' turns it off.")

    per_k = 1000 / size["turns"]
    print("\n(c) bytes per 1,000 turns")
    print(f"  SQLite, store only (file+WAL) {size['db_bytes'] * per_k:>12,.0f}  ({size['db_bytes']:,} bytes total)")
    print(
        f"  SQLite, default config        {size['db_bytes_default'] * per_k:>12,.0f}  "
        f"({size['db_bytes_default']:,} bytes total, with segments and summaries)"
    )
    print(
        f"  JSON Lines baseline           {size['jsonl_bytes'] * per_k:>12,.0f}  ({size['jsonl_bytes']:,} bytes total)"
    )
    print(f"  turn text alone (UTF-8)       {size['text_bytes'] * per_k:>12,.0f}")
    print(f"  ratio store only / JSONL      {size['db_bytes'] / size['jsonl_bytes']:>12.2f}")

    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "machine": machine_note(),
                    "runs": args.runs,
                    "tokenizers": tok_rows,
                    "ingest": ingest_rows,
                    "bytes": size,
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
