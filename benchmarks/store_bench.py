"""SQLite vs PostgreSQL, side by side: ingest throughput, context() latency, durability drills.

Run from the repository root::

    .venv/bin/python benchmarks/store_bench.py            # full: 200 kills, 4x2000 / 8x2000 writers, 10k + 100k
    .venv/bin/python benchmarks/store_bench.py --quick    # smoke run (minutes less)
    .venv/bin/python benchmarks/store_bench.py --parts crash   # only the SIGKILL drill (200 kills per backend)

The crash drill's child ingests through ``Memory`` with the pyramid on (segments
of 4 turns, archive writes) and runs a compacting agent loop; after every kill
the turns, the derived data and a resume are checked
(``stratamem.testing.drills.crash_drill``).

PostgreSQL is a throwaway pgserver (PostgreSQL 16.2 + pgvector) in /tmp unless
``STRATAMEM_PG_DSN`` names a server. Turn text is LoCoMo's (read at run time
from ``../shared/data``), cycled to reach the sizes. Figures are wall-clock on
whatever machine runs this; run both backends in the same invocation to compare.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOCOMO = ROOT.parent / "shared" / "data" / "locomo" / "locomo10.json"
sys.path.insert(0, str(ROOT / "tests"))

from pg import LocalPostgres, fresh_schema, schema_url  # noqa: E402

from stratamem import Memory  # noqa: E402
from stratamem.records import Turn  # noqa: E402
from stratamem.store import TurnBatch, open_store  # noqa: E402
from stratamem.testing import drills  # noqa: E402
from stratamem.tokens import count_turn, get_tokenizer  # noqa: E402


def locomo_texts() -> list[tuple[str, str]]:
    """(speaker, text) of every LoCoMo turn, in order."""
    data = json.loads(LOCOMO.read_text())
    out = []
    for sample in data:
        conv = sample["conversation"]
        for key in sorted(
            (k for k in conv if k.startswith("session_") and not k.endswith("date_time")),
            key=lambda k: int(k.split("_")[1]),
        ):
            out.extend((t["speaker"], t["text"]) for t in conv[key])
    return out


def fill(target: str, n: int, texts: list[tuple[str, str]], session_len: int = 500) -> float:
    """Store ``n`` LoCoMo turns in sessions of ``session_len``; returns turns/s of bulk append."""
    tok = get_tokenizer("o200k_base")
    speakers = {s for s, _ in texts}
    first = sorted(speakers)[0]
    store = open_store(target)
    start = time.perf_counter()
    for base in range(0, n, 1000):
        turns, counts, session = [], [], f"s{base // session_len}"
        batches = []
        for i in range(base, min(n, base + 1000)):
            speaker, text = texts[i % len(texts)]
            t = Turn(role="user" if speaker == first else "assistant", content=text)
            if f"s{i // session_len}" != session:
                batches.append(TurnBatch(session, turns, counts))
                turns, counts, session = [], [], f"s{i // session_len}"
            turns.append(t)
            counts.append(count_turn(t, tok))
        batches.append(TurnBatch(session, turns, counts))
        store.append("bench", batches)
    rate = n / (time.perf_counter() - start)
    store.close()
    return rate


def context_latency(target: str, sessions: int, calls: int) -> tuple[float, float]:
    """p50 and p95 (ms) of ``Memory.context`` at budget 4096 on random sessions."""
    rng = random.Random(1)
    mem = Memory(open_store(target), namespace="bench", embedder=None)
    mem.context("warm up", budget=4096)
    times = []
    for _ in range(calls):
        session = None if rng.random() < 0.2 else f"s{rng.randrange(sessions)}"
        t0 = time.perf_counter()
        mem.context("what did they say about the trip?", budget=4096, session=session)
        times.append((time.perf_counter() - t0) * 1000)
    mem.close()
    q = statistics.quantiles(times, n=20)
    return statistics.median(times), q[18]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small counts (smoke run)")
    ap.add_argument("--trials", type=int, help="SIGKILL trials per backend (default 200, quick 20)")
    ap.add_argument(
        "--parts",
        nargs="*",
        default=["ingest", "context", "crash", "faults"],
        choices=["ingest", "context", "crash", "faults"],
        help="what to run (default: everything)",
    )
    args = ap.parse_args()
    trials = args.trials or (20 if args.quick else 200)
    per_writer = 300 if args.quick else 2000
    sizes = [10_000] if args.quick else [10_000, 100_000]
    work = Path(tempfile.mkdtemp(prefix="smbench-", dir="/tmp"))
    work.chmod(0o777)
    server = None
    dsn = os.environ.get("STRATAMEM_PG_DSN")
    if not dsn:
        server = LocalPostgres()
        dsn = server.dsn
    texts = locomo_texts()

    def target(backend: str, name: str) -> str:
        if backend == "sqlite":
            return str(work / f"{name}.db")
        return schema_url(dsn, fresh_schema(dsn, name))

    rows: dict[str, dict[str, str]] = {"sqlite": {}, "postgres": {}}
    print(f"machine: {os.cpu_count()} cores; LoCoMo turns: {len(texts)}; work dir {work}", flush=True)

    for backend in ("sqlite", "postgres"):
        r = rows[backend]
        (work / backend).mkdir()
        for writers in (1, 4, 8) if "ingest" in args.parts else ():
            res = drills.run_writers(
                target(backend, f"w{writers}"), "ingest", work / backend, writers=writers, turns_each=per_writer
            )
            c = res.check
            r[f"ingest {writers}x{per_writer} (turns/s)"] = f"{res.turns_per_second:,.0f}"
            r[f"  lost/dup/gaps/errors, {writers} writers"] = f"{c.lost}/{c.duplicated}/{c.gaps}/{len(res.errors)}"
            print(backend, writers, "writers", res.turns_per_second, c, res.errors[:3], flush=True)
        for n in sizes if "context" in args.parts else ():
            t = target(backend, f"ctx{n}")
            rate = fill(t, n, texts)
            p50, p95 = context_latency(t, n // 500, 200)
            r[f"bulk append {n // 1000}k (turns/s)"] = f"{rate:,.0f}"
            r[f"context() {n // 1000}k p50 / p95 (ms)"] = f"{p50:.2f} / {p95:.2f}"
            print(backend, n, rate, p50, p95, flush=True)
        if "crash" in args.parts:
            crash_rows(r, backend, target(backend, "crash"), work / backend, trials)
    if "faults" in args.parts:
        fault_rows(rows, work, server)

    keys = list(rows["sqlite"]) + [k for k in rows["postgres"] if k not in rows["sqlite"]]
    width = max(len(k) for k in keys)
    print()
    print(f"{'':{width}}  {'SQLite':>28}  {'PostgreSQL':>28}")
    for k in keys:
        print(f"{k:{width}}  {rows['sqlite'].get(k, ''):>28}  {rows['postgres'].get(k, ''):>28}")
    if server is not None:
        server.stop()


def crash_rows(r: dict[str, str], backend: str, target: str, work: Path, trials: int) -> None:
    """The SIGKILL drill with the pyramid and a compacting agent loop in the child (``derived=True``)."""
    t0 = time.perf_counter()
    crash = drills.crash_drill(target, "crash", work, trials=trials, seed=42)
    seconds = time.perf_counter() - t0
    c, d = crash.check, crash.derived
    r["crash: trials / failed"] = f"{crash.trials} / {len(crash.failed_trials)}"
    r["crash: acked / lost / dup / gaps"] = f"{c.acknowledged} / {c.lost} / {c.duplicated} / {c.gaps}"
    r["crash: committed, not acked (allowed)"] = str(crash.unacknowledged_stored)
    r["crash: integrity"] = c.integrity
    r["crash: derived overlap/gap/prov/unread"] = (
        f"{d.overlaps}/{d.gaps}/{d.bad_provenance}/{d.unreadable}" if d else "n/a"
    )
    r["crash: dup items / bad states"] = f"{d.duplicate_items} / {d.state_errors}" if d else "n/a"
    r["crash: nodes L1/L2/L3"] = "/".join(str(crash.shape.get(f"level {i} nodes", 0)) for i in (1, 2, 3))
    r["crash: cold / archived segments"] = (
        f"{crash.shape.get('cold segments', 0)} / {crash.shape.get('archived segments', 0)}"
    )
    r["crash: compactions / fallbacks"] = (
        f"{crash.shape.get('compactions', 0)} / {crash.shape.get('compaction fallbacks', 0)}"
    )
    r["crash: killed in add/agent/derive/ckpt"] = "/".join(
        str(crash.phases.get(k, 0)) for k in ("add", "agent", "derive", "checkpoint")
    )
    r["crash: wall time (s)"] = f"{seconds:.0f}"
    print(backend, "crash", crash.check, crash.derived, crash.phases, crash.shape, crash.failures[:5], flush=True)


def fault_rows(rows: dict[str, dict[str, str]], work: Path, server: LocalPostgres | None) -> None:
    """Disk full and read-only file on SQLite; a PostgreSQL restart mid-batch."""
    for name, fn in (("disk full", drills.disk_full_drill), ("read-only file", drills.read_only_drill)):
        d = work / name.replace(" ", "_")
        d.mkdir()
        d.chmod(0o777)
        res = fn(d)
        rows["sqlite"][f"fault: {name}"] = "ok" if res.ok else f"FAILED {res}"
        rows["postgres"][f"fault: {name}"] = "n/a"
        print(name, res, flush=True)
    if server is not None:
        from stratamem.store.postgres.store import PostgresStore

        store = PostgresStore(server.dsn, schema=fresh_schema(server.dsn, "restart"), busy_timeout_ms=5000)
        res = drills.restart_drill(store, lambda: server.pg_ctl("restart", "-m", "immediate"))
        store.close()
        rows["postgres"]["fault: restart mid-batch"] = (
            f"ok ({len(res.failed)} of {res.batches} batches refused whole)" if res.ok else f"FAILED {res}"
        )
        print("restart", res, flush=True)
    else:
        rows["postgres"]["fault: restart mid-batch"] = "skipped (external server)"
    rows["sqlite"]["fault: restart mid-batch"] = "n/a"


if __name__ == "__main__":
    main()
