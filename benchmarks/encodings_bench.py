"""Token cost of the same LoCoMo turns as pretty JSON, compact JSON, CTF and TOON.

Every LoCoMo session (272 sessions, 5,882 turns) is encoded on its own, as a
warm chunk would be, and the o200k_base tokens are summed. Each row holds the
fields seed 000 compares: role, content, timestamp, model. JSON rows spell the
role in full and the timestamp as ISO 8601 (``2023-05-08T13:56:30Z``); the
model is ``null`` (LoCoMo has none), as in seed 000's example. A second JSON
baseline leaves the null model out, which is the fairest JSON there is.

Every CTF chunk is decoded back and compared with its turns; every TOON chunk
is decoded back and compared with its rows. A failure stops the run.

LoCoMo's sessions carry a date, not per-turn times, so ingest spaces turns 30 s
apart and CTF writes no time column at all. The "jittered" line re-times each
turn by a random 5–120 s step (seeded) to show the cost when times are
irregular, as in a live agent's history.

Run: ``.venv/bin/python benchmarks/encodings_bench.py``
The data is read at run time from ``../shared/data/locomo/locomo10.json``.
"""

from __future__ import annotations

import json
import random
import sys
import time
from datetime import timedelta
from pathlib import Path

import toon_format

from stratamem.formats.ctf import decode_turns, encode_turns
from stratamem.ingest import read_file
from stratamem.records import Turn
from stratamem.tokens import get_tokenizer

LOCOMO = Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo" / "locomo10.json"


def _iso(turn: Turn) -> str:
    ts = turn.timestamp
    return ts.strftime("%Y-%m-%dT%H:%M:%S") + (f".{ts.microsecond:06d}" if ts.microsecond else "") + "Z"


def _rows(turns: list[Turn], *, nulls: bool = True) -> list[dict]:
    rows = [{"role": t.role, "content": t.content, "timestamp": _iso(t), "model": t.model} for t in turns]
    return rows if nulls else [{k: v for k, v in r.items() if v is not None} for r in rows]


def _bare(turns: list[Turn]) -> list[Turn]:
    """The turns with only role, content, timestamp and model (what the JSON rows hold)."""
    return [Turn(role=t.role, content=t.content, timestamp=t.timestamp, model=t.model) for t in turns]


def _jitter(turns: list[Turn], rng: random.Random) -> list[Turn]:
    out, at = [], turns[0].timestamp
    for t in turns:
        out.append(Turn(role=t.role, content=t.content, timestamp=at, model=t.model))
        at = at + timedelta(seconds=rng.randint(5, 120))
    return out


def measure(chunks: list[list[Turn]]) -> dict[str, int]:
    """Token totals of each encoding over ``chunks``, after checking every round trip."""
    tok = get_tokenizer("o200k_base")
    totals = dict.fromkeys(("pretty_json", "compact_json", "compact_json_no_nulls", "ctf", "toon"), 0)
    for turns in chunks:
        rows = _rows(turns)
        totals["pretty_json"] += tok.count(json.dumps(rows, indent=2, ensure_ascii=False))
        totals["compact_json"] += tok.count(json.dumps(rows, separators=(",", ":"), ensure_ascii=False))
        totals["compact_json_no_nulls"] += tok.count(
            json.dumps(_rows(turns, nulls=False), separators=(",", ":"), ensure_ascii=False)
        )
        ctf = encode_turns(turns)
        if decode_turns(ctf) != turns:
            raise SystemExit("CTF round trip failed")
        totals["ctf"] += tok.count(ctf)
        toon = toon_format.dumps(rows)
        if toon_format.loads(toon) != rows:
            raise SystemExit("TOON round trip failed")
        totals["toon"] += tok.count(toon)
    return totals


def _report(title: str, totals: dict[str, int]) -> None:
    base = totals["compact_json"]
    print(f"\n{title}")
    print(f"{'encoding':<24}{'o200k tokens':>14}{'vs compact JSON':>18}")
    for name, value in totals.items():
        print(f"{name:<24}{value:>14,}{(value - base) / base:>+17.1%}")
    print(
        f"CTF saves {1 - totals['ctf'] / base:.1%} vs compact JSON, "
        f"{1 - totals['ctf'] / totals['compact_json_no_nulls']:.1%} vs compact JSON without nulls"
    )


def main() -> int:
    if not LOCOMO.exists():
        print(f"LoCoMo not found at {LOCOMO}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    sessions = read_file(LOCOMO, "locomo")
    chunks = [_bare(s.turns) for s in sessions if s.turns]
    print(f"LoCoMo: {len(chunks)} sessions, {sum(map(len, chunks)):,} turns; fields role, content, timestamp, model")
    _report("as ingested (turns 30 s apart)", measure(chunks))
    rng = random.Random(7)
    _report("jittered times (5-120 s steps)", measure([_jitter(c, rng) for c in chunks]))
    print(f"\n{time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
