"""Memory items benchmark: seed 003's Example 1 on LoCoMo, recall latency at scale, MCP round trips.

Usage::

    .venv/bin/python benchmarks/items_bench.py                 # everything
    .venv/bin/python benchmarks/items_bench.py --parts example latency --sizes 1000 10000
    .venv/bin/python benchmarks/items_bench.py --no-dense      # lexical only

Parts:

* ``example`` — seed 003 Example 1 on a real conversation: every LoCoMo turn of one
  conversation is added to hot memory in order (default 4,000-token hot limit, so
  early turns are auto-spilled to cold); after the last turn, every question whose
  evidence turns all sit in cold is recalled. Reports hit@1/3/10 (an evidence turn
  among the top k) for ``Items.recall`` (lexical, and hybrid when MiniLM loads) beside
  the raw FTS5 BM25 order over the same cold items, plus one narrated example.
* ``latency`` — recall latency p50/p95 with N items in one namespace (N = 1k, 10k,
  100k by default), lexical and hybrid, and FTS5 vs ``bm25s`` for the lexical search.
* ``mcp`` — round-trip latency per tool call through the SDK client, over a real
  stdio subprocess (``stratamem mcp``) and over streamable HTTP on 127.0.0.1
  (``stratamem mcp --http``), each from a copy of the same database.

Reads ``../shared/data/locomo/locomo10.json`` at run time (never copied).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from datetime import UTC

from stratamem import Config, Memory
from stratamem.items.api import Items
from stratamem.items.search import fts_query
from stratamem.records import format_timestamp
from stratamem.store.new_rows import NewItem

LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo10.json"


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values), q)) if values else float("nan")


def load_minilm(enabled: bool) -> Any:
    """The local MiniLM embedder, or None (said out loud) when disabled or not importable."""
    if not enabled:
        print("dense: disabled (--no-dense)")
        return None
    try:
        from stratamem.embed import LocalMiniLM
    except ImportError as exc:
        print(f"dense: stratamem.embed not importable ({exc}); lexical only")
        return None
    t0 = time.perf_counter()
    emb = LocalMiniLM()
    emb.embed_batch(["warm up"])
    print(f"dense: LocalMiniLM loaded in {time.perf_counter() - t0:.2f} s")
    return emb


def conversation_turns(sample: dict[str, Any]) -> list[tuple[str, str, str]]:
    """``(dia_id, session, text)`` of every turn in order."""
    conv = sample["conversation"]
    n = 1
    out = []
    while f"session_{n}" in conv:
        for t in conv[f"session_{n}"]:
            out.append((t["dia_id"], f"session_{n}", f"{t['speaker']}: {t['text']}"))
        n += 1
    return out


def _norm_ids(evidence: list[str]) -> list[str]:
    out = []
    for e in evidence:
        for part in e.replace(";", ",").split(","):
            part = part.strip()
            if ":" in part:
                d, t = part.split(":", 1)
                out.append(f"{d}:{int(t)}" if t.isdigit() else part)
    return out


# --- part 1: Example 1 --------------------------------------------------------------


def example(data: list[dict[str, Any]], sample_no: int, embedder: Any) -> None:
    sample = data[sample_no]
    turns = conversation_turns(sample)
    print(
        f"\n== seed 003 Example 1 on LoCoMo conversation {sample_no} ({len(turns)} turns, "
        f"{sum(1 for k in sample['conversation'] if k.startswith('session_') and not k.endswith('time'))} sessions)"
    )
    modes = [("lexical", None)] + ([("hybrid", embedder)] if embedder is not None else [])
    for mode, emb in modes:
        with tempfile.TemporaryDirectory() as tmp:
            mem = Memory(Path(tmp) / "m.db", namespace="conv", embedder=None)
            items = Items(mem.store, "conv", tokenizer=mem.tokenizer, config=Config().items, embedder=emb)
            by_dia: dict[str, int] = {}
            spilled_at: dict[int, int] = {}
            t0 = time.perf_counter()
            for n, (dia, session, text) in enumerate(turns, 1):
                it = items.add(text, "message", session=session)  # turns as items (seed 003)
                by_dia[dia] = it.id
                for ev in items.events.recent("items.spilled")[-1:]:
                    for i in ev.data["ids"]:
                        spilled_at.setdefault(i, n)
            add_s = time.perf_counter() - t0
            dia_of = {v: k for k, v in by_dia.items()}
            cold = {i.id for i in items.list("cold")} | {i.id for i in items.list("warm")}
            status = items.status()
            print(
                f"[{mode}] added {len(turns)} turns in {add_s:.1f} s; hot {status.hot.items} items / "
                f"{status.hot.tokens} tokens (limit {status.hot_limit}), cold {status.cold.items}, "
                f"spills {status.metrics.spills}"
            )
            qs = []
            for qa in sample["qa"]:
                gold = [by_dia[g] for g in _norm_ids(qa.get("evidence", [])) if g in by_dia]
                if qa.get("category") == 5 or not gold or not all(g in cold for g in gold):
                    continue
                qs.append((qa["question"], set(gold)))
            hits = {1: 0, 3: 0, 10: 0}
            base = {1: 0, 3: 0, 10: 0}
            lat: list[float] = []
            emb_ms: list[float] = []
            firsts = []
            for q, gold in qs:
                r = items.recall(q, 10, auto_promote=False)
                lat.append(r.latency_ms)
                emb_ms.append(r.embed_ms)
                ranked = [i.id for i in r.items]
                fts = [i for i, _ in mem.store.items.lexical("conv", fts_query(q), limit=10)]
                for k in hits:
                    hits[k] += bool(set(ranked[:k]) & gold)
                    base[k] += bool(set(fts[:k]) & gold)
                if ranked and ranked[0] in gold:
                    firsts.append((spilled_at.get(ranked[0], 0), q, ranked[0]))
            n = len(qs)
            print(
                f"[{mode}] {n} questions whose evidence was spilled to cold; "
                f"Items.recall hit@1/3/10 = {hits[1] / n:.3f} / {hits[3] / n:.3f} / {hits[10] / n:.3f}; "
                f"baseline FTS5-BM25 order hit@1/3/10 = {base[1] / n:.3f} / {base[3] / n:.3f} / {base[10] / n:.3f}; "
                f"recall p50 {_pct(lat, 50):.2f} ms p95 {_pct(lat, 95):.2f} ms "
                f"(of which query embedding p50 {_pct(emb_ms, 50):.2f} ms)"
            )
            # The narrated example: the earliest-spilled fact that a late question recalls first.
            if firsts:
                when, q, g = min(firsts)
                r = items.recall(q, 3)
                it = r.items[0]
                order = list(by_dia)
                print(
                    f"[{mode}] example: turn {dia_of[g]} (#{order.index(dia_of[g]) + 1}) was spilled to cold at "
                    f"turn #{when}; after turn #{len(turns)} the question {q!r} recalls it first "
                    f"(score {r.scores[it.id]:.2f}); promoted={it.id in r.promoted} -> tier {it.tier}; "
                    f"content {it.content[:80]!r}"
                )
            mem.close()


# --- part 2: latency ----------------------------------------------------------------


def _corpus(data: list[dict[str, Any]]) -> list[str]:
    return [text for s in data for _, _, text in conversation_turns(s)]


def latency(data: list[dict[str, Any]], sizes: list[int], embedder: Any, queries: int) -> None:
    texts = _corpus(data)
    questions = [qa["question"] for s in data for qa in s["qa"]][:queries]
    print(f"\n== recall latency ({len(questions)} LoCoMo questions, limit 10, no promotion; base texts {len(texts)})")
    base_vecs = None
    if embedder is not None:
        t0 = time.perf_counter()
        base_vecs = embedder.embed_batch(texts)
        print(
            f"embedded {len(texts)} base texts in {time.perf_counter() - t0:.1f} s "
            f"({len(texts) / (time.perf_counter() - t0):.0f}/s)"
        )
    rng = np.random.default_rng(7)
    for size in sizes:
        with tempfile.TemporaryDirectory() as tmp:
            mem = Memory(Path(tmp) / "m.db", namespace="big", embedder=None)
            tok = mem.tokenizer
            now = format_timestamp(time_now())
            t0 = time.perf_counter()
            docs = []
            with mem.store.transaction():
                for i in range(size):
                    base = i % len(texts)
                    text = texts[base] if i < len(texts) else f"{texts[base]} (note {i // len(texts)})"
                    docs.append(text)
                    vec = None
                    if base_vecs is not None:
                        v = base_vecs[base] + (rng.normal(0, 0.02, base_vecs.shape[1]) if i >= len(texts) else 0)
                        vec = (v / np.linalg.norm(v)).astype(np.float32).tobytes()
                    mem.store.items.insert(
                        "big",
                        NewItem(
                            content=text,
                            type="fact",
                            tier="cold",
                            tokens=tok.count(text),
                            relevance=0.5,
                            source="api",
                            created_at=now,
                            embedding=vec,
                            embedding_model=getattr(embedder, "name", None) if vec else None,
                        ),
                    )
            build = time.perf_counter() - t0
            row = [f"N={size:>6}: insert {build:5.1f} s"]
            for mode, emb in [("lexical", None), ("hybrid", embedder)]:
                if mode == "hybrid" and emb is None:
                    continue
                items = Items(mem.store, "big", tokenizer=tok, config=Config().items, embedder=emb)
                first = time.perf_counter()
                items.recall(questions[0], 10, auto_promote=False)  # loads the vector index once
                warm = (time.perf_counter() - first) * 1000
                res = [items.recall(q, 10, auto_promote=False) for q in questions]
                lat = [r.latency_ms for r in res]
                search = [r.latency_ms - r.embed_ms for r in res]
                row.append(f"{mode} p50 {_pct(lat, 50):6.2f} ms p95 {_pct(lat, 95):6.2f} ms (first {warm:.0f} ms)")
                if mode == "hybrid":
                    row.append(
                        f"hybrid without query embedding p50 {_pct(search, 50):.2f} ms p95 {_pct(search, 95):.2f} ms"
                    )
            fts = []
            for q in questions:
                t = time.perf_counter()
                mem.store.items.lexical("big", fts_query(q), limit=100)
                fts.append((time.perf_counter() - t) * 1000)
            row.append(f"FTS5 top-100 p50 {_pct(fts, 50):.2f} ms p95 {_pct(fts, 95):.2f} ms")
            row.append(_bm25s(docs, questions))
            print(" | ".join(row))
            mem.close()


def _bm25s(docs: list[str], questions: list[str]) -> str:
    try:
        import bm25s
    except ImportError:
        return "bm25s not installed"
    t0 = time.perf_counter()
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(docs, stopwords="en", show_progress=False), show_progress=False)
    build = time.perf_counter() - t0
    lat = []
    for q in questions:
        t = time.perf_counter()
        toks = bm25s.tokenize([q], stopwords="en", show_progress=False, return_ids=False)[0]
        scores = retriever.get_scores(toks)
        np.argpartition(-scores, min(100, len(scores) - 1))[:100]
        lat.append((time.perf_counter() - t) * 1000)
    return f"bm25s index {build:.1f} s, top-100 p50 {_pct(lat, 50):.2f} ms p95 {_pct(lat, 95):.2f} ms"


def time_now() -> Any:
    from datetime import datetime

    return datetime.now(UTC)


# --- part 3: MCP ----------------------------------------------------------------------


def mcp_roundtrip(data: list[dict[str, Any]], calls: int) -> None:
    import shutil

    print(f"\n== MCP round trip per tool call (SDK client, real server subprocess, {calls} calls each)")
    with tempfile.TemporaryDirectory() as tmp:
        seed_db = Path(tmp) / "seed.db"
        with Memory(seed_db, namespace="agent", embedder=None) as mem:
            turns = conversation_turns(data[0])[:200]
            mem.add(
                [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, (_, _, t) in enumerate(turns)],
                session="s1",
            )
            for _, _, t in turns[:1000]:
                mem.items.add(t, "context", tier="cold")
        for transport in ("stdio", "http"):
            # Each transport starts from the same database: the calls add and spill items.
            db = Path(tmp) / f"{transport}.db"
            shutil.copy(seed_db, db)
            _mcp_transport(transport, db, tmp, data, calls)


def _mcp_transport(transport: str, db: Path, project: str, data: list[dict[str, Any]], calls: int) -> None:
    import os
    import socket
    import subprocess

    import anyio
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    exe = str(Path(sys.executable).with_name("stratamem"))
    env = {"STRATAMEM_DB": str(db), "STRATAMEM_NAMESPACE": "agent", "PATH": os.environ.get("PATH", "")}
    plan: list[tuple[str, Any]] = [
        ("memory_status", lambda i: {}),
        ("memory_add", lambda i: {"content": f"benchmark fact number {i}", "type": "fact"}),
        (
            "memory_recall",
            lambda i: {"query": data[0]["qa"][i % len(data[0]["qa"])]["question"], "auto_promote": False},
        ),
        ("memory_spill", lambda i: {"count": 1}),
        ("memory_context", lambda i: {"query": "what happened", "budget": 2000}),
        ("memory_state_read", lambda i: {}),
    ]
    proc = None
    t0 = time.perf_counter()
    if transport == "stdio":
        target: Any = StdioServerParameters(command=exe, args=["mcp", "--project", project], env=env)
    else:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        proc = subprocess.Popen(
            [exe, "mcp", "--http", "--port", str(port), "--project", project],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"MCP HTTP server did not start (exit {proc.poll()})") from None
                time.sleep(0.05)
        target = f"http://127.0.0.1:{port}/mcp"

    async def main() -> None:
        async with Client(target, read_timeout_seconds=60) as client:
            what = "spawn + handshake" if transport == "stdio" else "spawn + listen + handshake"
            print(f"[{transport}] connect ({what}) {1000 * (time.perf_counter() - t0):.0f} ms")
            for name, args in plan:
                lat = []
                for i in range(calls):
                    t = time.perf_counter()
                    res = await client.call_tool(name, args(i))
                    lat.append((time.perf_counter() - t) * 1000)
                    if res.is_error:
                        raise RuntimeError(f"{name}: {res.content[0].text}")
                print(f"[{transport}] {name:<18} p50 {statistics.median(lat):6.2f} ms  p95 {_pct(lat, 95):6.2f} ms")

    try:
        anyio.run(main)
    finally:
        if proc is not None:
            proc.kill()
            proc.wait(10)


def main(argv: list[str] | None = None) -> None:
    """Run the selected parts and print their figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", nargs="*", default=["example", "latency", "mcp"])
    ap.add_argument("--sample", type=int, default=0, help="LoCoMo conversation for the example")
    ap.add_argument("--sizes", type=int, nargs="*", default=[1_000, 10_000, 100_000])
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--calls", type=int, default=30)
    ap.add_argument("--no-dense", action="store_true")
    args = ap.parse_args(argv)
    data = json.loads(LOCOMO.read_text(encoding="utf-8"))
    embedder = load_minilm(not args.no_dense) if {"example", "latency"} & set(args.parts) else None
    if "example" in args.parts:
        example(data, args.sample, embedder)
    if "latency" in args.parts:
        latency(data, args.sizes, embedder, args.queries)
    if "mcp" in args.parts:
        mcp_roundtrip(data, args.calls)


if __name__ == "__main__":
    main()
