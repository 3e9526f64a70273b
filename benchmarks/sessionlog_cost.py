"""What writing session logs on every add costs (seed 004, issue 27).

``Memory(project_dir=...)`` appends each committed batch to
``.stratamem/sessions/<namespace>/<session>.jsonl``. This adds the same LoCoMo
turns one by one (the agent-loop pattern: one add per message) to two fresh
SQLite stores, interleaved add by add so the machine's load hits both alike:
one without a project directory (the baseline: no logs) and one with. Lexical
only (no embedder) and no pyramid, so the add itself is as cheap as it gets and
the log's share shows at its largest.

    .venv/bin/python benchmarks/sessionlog_cost.py [--turns 2000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from stratamem import Config, Memory

LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo10.json"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=2000)
    args = ap.parse_args()
    conv = json.loads(LOCOMO.read_text(encoding="utf-8"))[0]["conversation"]
    texts = [t["text"] for k in sorted(conv) if k.startswith("session_") and k[8:].isdigit() for t in conv[k]]
    texts = (texts * (args.turns // len(texts) + 1))[: args.turns]
    cfg = Config.from_dict({"pyramid": {"enabled": False}})
    with tempfile.TemporaryDirectory() as tmp:
        plain = Memory(Path(tmp, "plain.db"), namespace="n", config=cfg, embedder=None)
        logged = Memory(Path(tmp, "logged.db"), namespace="n", config=cfg, embedder=None, project_dir=tmp)
        times: dict[str, list[float]] = {"no logs (baseline)": [], "logs on add": []}
        for i, text in enumerate(texts):
            msg = {"role": "user" if i % 2 == 0 else "assistant", "content": text}
            for name, mem in (("no logs (baseline)", plain), ("logs on add", logged)):
                t = time.perf_counter()
                mem.add(msg, session="s")
                times[name].append((time.perf_counter() - t) * 1000)
        size = os.path.getsize(Path(tmp, ".stratamem", "sessions", "n", "s.jsonl"))
        plain.close()
        logged.close()
    print(f"load average {os.getloadavg()[0]:.2f}; {len(texts)} adds of one turn each; log {size / 1024:.0f} KiB")
    print("| store | add p50 (ms) | add p95 (ms) |")
    print("|---|---|---|")
    for name, ts in times.items():
        q = statistics.quantiles(ts, n=20)
        print(f"| {name} | {statistics.median(ts):.3f} | {q[18]:.3f} |")
    base, ours = (statistics.median(ts) for ts in times.values())
    print(f"ratio p50: {ours / base:.2f}")


if __name__ == "__main__":
    main()
