"""Ingest cost: reading a Claude Code log, storing it with dedupe keys, and re-ingesting it.

Baseline, measured in the same run: ``Memory.add_sessions``, the store path
without dedupe keys (what ``stratamem ingest`` did before). Derived work
(pyramid, embeddings) is off in both, so the table shows the ingest path itself.

Usage::

    python benchmarks/ingest_bench.py [--episodes 200] [--repeat 5]

Prints medians over ``--repeat`` runs, each on a fresh SQLite file.

``--locomo N`` measures instead the whole write path on the first N LoCoMo
conversations in one namespace (``Memory.add_sessions``, default
configuration: local MiniLM, pyramid, items), this tree beside the tree of
``--baseline`` (a git revision, extracted with ``git archive``; default
``120575a``, before issue 12's fourth pass), each run in a fresh process,
the two alternating, and this tree again with ``embedding.sentences`` off
(issue 30's sentence vectors). Per run: wall and CPU seconds (CPU time is
steadier on a shared box), turns/s, the seconds spent making turn vectors
(``TurnIndexer.index``, sentence vectors included) and in the pyramid
(``Pyramid.update``: summaries, their vectors, items), texts given to
MiniLM, the store file's size and the bytes of passage and sentence vectors,
and the load average::

    python benchmarks/ingest_bench.py --locomo 10 --repeat 1
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "fixtures"))

from make_claude_code_log import write_log

from stratamem import Config, Memory
from stratamem.ingest import read_file

CONFIG = Config().replace(pyramid={"enabled": False})


def _timed(fn) -> float:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


ROOT = Path(__file__).resolve().parents[1]
LOCOMO = ROOT.parent / "shared" / "data" / "locomo" / "locomo10.json"

_LOCOMO_RUN = """
import dataclasses, json, os, resource, time
from stratamem import Memory
from stratamem.embed.local import LocalMiniLM
from stratamem.ingest import read_file
from stratamem.pyramid.consolidate import Pyramid
from stratamem.retrieve.persisted import TurnIndexer

spent = {{"index": 0.0, "pyramid": 0.0, "texts": 0}}
def timed(cls, name, key):
    orig = getattr(cls, name)
    def run(self, *a, **k):
        t = time.perf_counter()
        try:
            return orig(self, *a, **k)
        finally:
            spent[key] += time.perf_counter() - t
    setattr(cls, name, run)
timed(TurnIndexer, "index", "index")
timed(Pyramid, "update", "pyramid")
embed = LocalMiniLM.embed_batch
def counted(self, texts):
    spent["texts"] += len(texts)
    return embed(self, texts)
LocalMiniLM.embed_batch = counted

sessions = read_file({locomo!r}, "locomo")
keep = list(dict.fromkeys(s.namespace for s in sessions))[:{n}]
sessions = [dataclasses.replace(s, namespace=None, session=f"{{s.namespace}}-{{s.session}}")
            for s in sessions if s.namespace in keep]
from stratamem import Config
mem = Memory({db!r}, config=Config().replace(**{config}))
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
t, c = time.perf_counter(), cpu()
mem.add_sessions(sessions)
wall, used = time.perf_counter() - t, cpu() - c
parts = mem.store.embeddings.passages.size("default")[1]
mem.close()
print(json.dumps({{"turns": sum(len(s.turns) for s in sessions), "wall": wall, "cpu": used,
                  "load": os.getloadavg()[0], "db": os.path.getsize({db!r}), "parts": parts, **spent}}))
"""


def _locomo(n: int, repeat: int, baseline: str) -> None:
    """This tree's write path beside ``baseline``'s on the first ``n`` LoCoMo conversations."""
    with tempfile.TemporaryDirectory() as d:
        base_src = Path(d) / "baseline"
        base_src.mkdir()
        tar = subprocess.run(
            ["git", "-C", str(ROOT), "archive", baseline, "src"], capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(base_src)], input=tar, check=True)
        # (tree, configuration): this tree also without sentence vectors (issue 30), to show their cost.
        trees = {
            f"baseline {baseline}": (base_src / "src", {}),
            "this tree": (ROOT / "src", {}),
            "this tree, sentences off": (ROOT / "src", {"embedding": {"sentences": False}}),
        }
        runs: dict[str, list[dict]] = {name: [] for name in trees}
        for i in range(repeat):
            for t, (name, (src, config)) in enumerate(trees.items()):
                code = _LOCOMO_RUN.format(locomo=str(LOCOMO), n=n, db=str(Path(d) / f"{i}-{t}.db"), config=repr(config))
                out = subprocess.run(
                    [sys.executable, "-c", textwrap.dedent(code)],
                    capture_output=True,
                    text=True,
                    env={**os.environ, "PYTHONPATH": str(src)},
                    check=False,
                )
                if out.returncode != 0:
                    raise SystemExit(f"{name} failed:\n{out.stderr[-3000:]}")
                runs[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
    turns = runs["this tree"][0]["turns"]
    print(
        f"LoCoMo, first {n} conversation(s), {turns} turns, one namespace, default configuration; "
        f"median of {repeat} run(s), fresh process and file each, trees alternating\n"
    )
    print(
        "| tree | wall s | turns/s | CPU s | turns per CPU s | turn vectors s | pyramid s | texts embedded "
        "| file MB | part vectors MB | load |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    keys = ("wall", "cpu", "index", "pyramid", "texts", "load", "db", "parts")
    for name, rs in runs.items():
        med = {k: statistics.median(r[k] for r in rs) for k in keys}
        print(
            f"| {name} | {med['wall']:.1f} | {turns / med['wall']:.1f} | {med['cpu']:.1f} | "
            f"{turns / med['cpu']:.1f} | {med['index']:.1f} | {med['pyramid']:.1f} | {med['texts']:,.0f} | "
            f"{med['db'] / 1e6:.2f} | {med['parts'] / 1e6:.2f} | {med['load']:.1f} |"
        )


def main() -> None:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--locomo", type=int, default=0, help="LoCoMo conversations (1-10): the write-path table")
    parser.add_argument("--baseline", default="120575a", help="git revision beside this tree (with --locomo)")
    args = parser.parse_args()
    if args.locomo:
        _locomo(args.locomo, args.repeat, args.baseline)
        return
    rows: dict[str, list[float]] = {
        "read_file (parse + validate)": [],
        "add_sessions (baseline, no keys)": [],
        "ingest, first time (keys written)": [],
        "ingest again (all skipped)": [],
    }
    with tempfile.TemporaryDirectory() as d:
        log = Path(d) / "session.jsonl"
        lines = write_log(log, episodes=args.episodes)
        turns = sum(len(s.turns) for s in read_file(log))
        for i in range(args.repeat):
            sessions = []
            rows["read_file (parse + validate)"].append(_timed(lambda: sessions.extend(read_file(log))))
            with Memory(Path(d) / f"base{i}.db", namespace="b", config=CONFIG) as base:
                rows["add_sessions (baseline, no keys)"].append(_timed(lambda: base.add_sessions(sessions)))
            with Memory(Path(d) / f"ing{i}.db", namespace="b", config=CONFIG) as mem:
                rows["ingest, first time (keys written)"].append(_timed(lambda: mem.ingest(sessions)))
                again = read_file(log)
                rows["ingest again (all skipped)"].append(_timed(lambda: mem.ingest(again)))
                assert mem.status().turns == turns
    base = statistics.median(rows["add_sessions (baseline, no keys)"])
    print(f"Claude Code log: {lines} lines, {turns} turns; median of {args.repeat} runs, fresh SQLite file each\n")
    print("| step | median s | turns/s | vs baseline |\n|---|---:|---:|---:|")
    for name, times in rows.items():
        med = statistics.median(times)
        print(f"| {name} | {med:.3f} | {turns / med:,.0f} | {med / base:.2f}x |")


if __name__ == "__main__":
    main()
