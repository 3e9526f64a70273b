"""Agent-loop benchmark: replay a long tool-using transcript with and without management.

Replays the deterministic transcript of ``benchmarks/data/make_agent_transcript.py``
(hundreds of tool calls with large outputs) call by call, the way an agent
loop would send it, on three tracks:

* **raw** — every message so far, unmanaged;
* **pruned** — the live list after :func:`~stratamem.agentloop.prune_tool_results`
  (seed defaults: trim > 4,000 chars to 1,500 + 1,500, clear after 6, keep 2);
* **managed** — :meth:`~stratamem.agentloop.Compactor.prepare_messages`: pruning
  plus compaction, every message stored in a SQLite memory; twice, side by side:
  with the minimum-gain rule off (every call over the threshold compacts, the
  behaviour before issue 17) and on (``min_gain_ratio``, ``cooldown_calls``).

The summarizer is NOT a language model: it is the deterministic
:func:`~stratamem.testing.llm_server.checkpoint_reply`, served by
:class:`~stratamem.testing.llm_server.FakeLLMServer` on 127.0.0.1 and called
through the real ``openai`` client. Its token usage is what that server
reports (exact ``o200k_base`` counts of prompt and reply), so "summarizer
tokens spent" is the real input size and a checkpoint-sized output.

Usage::

    .venv/bin/python benchmarks/agentloop_bench.py [--turns 40] [--threshold 32000]
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "data"))

from make_agent_transcript import messages as transcript

from stratamem import Memory
from stratamem.agentloop import Compactor, prune_tool_results
from stratamem.config import CompactionConfig, Config, PruningConfig
from stratamem.llm import OpenAIChat
from stratamem.providers import structural_problems
from stratamem.testing.llm_server import FakeLLMServer, checkpoint_reply
from stratamem.tokens import REPLY_TOKENS, count_message, count_messages, get_tokenizer


@dataclass
class Track:
    """Totals of one managed replay."""

    name: str
    prompt_total: int = 0
    peak: int = 0
    over_budget: int = 0
    compactions: int = 0
    fallbacks: int = 0
    deferred: int = 0
    summary_calls: int = 0
    sum_in: int = 0
    sum_out: int = 0
    stored: int = 0
    per_turn: list[int] = field(default_factory=list)


def one_turn(msgs: list[dict]) -> list[dict]:
    """The transcript as one long autonomous turn: the first request, then every tool step.

    Each later request and the answer before it are dropped, so the list stays
    valid (a tool result is followed by the next step's assistant message).
    """
    out: list[dict] = []
    for m in msgs:
        if m["role"] == "user" and isinstance(m["content"], str) and out:
            if out[-1]["role"] == "assistant" and isinstance(out[-1]["content"], str):
                out.pop()
            continue
        out.append(m)
    return out


def replay(
    name: str, all_msgs: list[dict], ccfg: CompactionConfig, pcfg: PruningConfig, server: FakeLLMServer
) -> Track:
    """Replay the transcript call by call through ``prepare_messages`` with ``ccfg``."""
    track = Track(name)
    budget = ccfg.threshold - ccfg.output_reserve
    with Memory(":memory:", namespace="bench", config=Config(compaction=ccfg), embedder=None) as mem:
        model = OpenAIChat("fake-summarizer", base_url=server.openai_base_url, max_retries=0)
        comp = Compactor(model, provider="anthropic", memory=mem, session="replay", config=ccfg, pruning=pcfg)
        managed: list[dict] = []
        last = 0
        for m in all_msgs:
            if m["role"] == "assistant":  # the agent calls the model before each assistant message
                res = comp.prepare_messages(managed)
                c = res.compaction
                track.compactions += c.status == "compacted"
                track.fallbacks += c.status == "fallback"
                track.deferred += c.status == "deferred"
                track.sum_in += c.summary_input_tokens
                track.sum_out += c.summary_output_tokens
                track.summary_calls += c.summary_calls
                assert not structural_problems(managed, "anthropic"), "managed list became invalid"
                track.over_budget += res.tokens > budget
                track.prompt_total += res.tokens
                track.peak = max(track.peak, res.tokens)
                last = res.tokens
            if m["role"] == "user" and isinstance(m["content"], str) and managed:
                track.per_turn.append(last)
            # A deep copy: pruning edits tool-result blocks in place, and the tracks must not share them.
            managed.append(copy.deepcopy(m))
        track.per_turn.append(last)
        comp.sync(managed)
        track.stored = len(mem.turns("replay"))
    return track


def main(argv: list[str] | None = None) -> int:
    """Run the replay and print per-turn and total figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=40, help="user turns in the transcript")
    ap.add_argument("--threshold", type=int, default=32_000, help="compaction threshold (tokens)")
    ap.add_argument("--keep-recent", type=int, default=8_000, help="keep_recent_tokens")
    ap.add_argument("--reserve", type=int, default=4_000, help="output_reserve")
    ap.add_argument("--checkpoint-max", type=int, default=2_000, help="checkpoint_max_tokens")
    ap.add_argument("--min-gain", type=float, default=0.2, help="min_gain_ratio of the ruled track")
    ap.add_argument("--cooldown", type=int, default=2, help="cooldown_calls of the ruled track")
    ap.add_argument(
        "--one-turn",
        action="store_true",
        help="replay the transcript as one long autonomous turn (every step after the first request)",
    )
    ap.add_argument("--no-pruning", action="store_true", help="turn tool-output pruning off (compaction alone)")
    args = ap.parse_args(argv)

    tok = get_tokenizer("o200k_base")
    all_msgs = list(transcript(args.turns))
    if args.one_turn:
        all_msgs = one_turn(all_msgs)
        print("scenario: one long turn (the first request, then every tool step)")
    base = dict(
        threshold=args.threshold,
        keep_recent_tokens=args.keep_recent,
        output_reserve=args.reserve,
        checkpoint_max_tokens=args.checkpoint_max,
    )
    eager_cfg = CompactionConfig(**base, min_gain_ratio=0.0, cooldown_calls=0)
    ruled_cfg = CompactionConfig(**base, min_gain_ratio=args.min_gain, cooldown_calls=args.cooldown)
    pcfg = PruningConfig(enabled=not args.no_pruning)
    tool_calls = sum(1 for m in all_msgs if m["role"] == "assistant" and isinstance(m["content"], list))
    print(
        f"transcript: {args.turns} user turns, {len(all_msgs)} messages, {tool_calls} tool calls, "
        f"{sum(len(str(m['content'])) for m in all_msgs):,} characters"
    )
    print(
        f"pruning: {'off' if args.no_pruning else 'seed defaults'}; compaction: threshold {args.threshold:,}, keep_recent {args.keep_recent:,}, "
        f"reserve {args.reserve:,}, checkpoint <= {args.checkpoint_max:,} tokens"
    )
    print(
        f"minimum-gain rule: off (every call over the threshold compacts) vs on (min_gain_ratio "
        f"{args.min_gain}, cooldown {args.cooldown} calls, hard limit {int(args.threshold * (1 + args.min_gain)):,})"
    )
    print("summarizer: deterministic checkpoint_reply on FakeLLMServer via the openai client (NOT a real model)\n")

    raw_total = pruned_total = calls = 0
    raw_running = REPLY_TOKENS
    pruned: list[dict] = []
    peak_raw = peak_pruned = 0
    for m in all_msgs:
        if m["role"] == "assistant":
            calls += 1
            prune_tool_results(pruned, pcfg, tokenizer=tok)
            p = count_messages(pruned, tok)
            raw_total, pruned_total = raw_total + raw_running, pruned_total + p
            peak_raw, peak_pruned = max(peak_raw, raw_running), max(peak_pruned, p)
        raw_running += count_message(m, tok)
        pruned.append(copy.deepcopy(m))

    t0 = time.perf_counter()
    with FakeLLMServer(reply=checkpoint_reply) as server:
        eager = replay("rule off", all_msgs, eager_cfg, pcfg, server)
        t1 = time.perf_counter()
        ruled = replay("rule on", all_msgs, ruled_cfg, pcfg, server)
    t2 = time.perf_counter()
    budget = args.threshold - args.reserve

    print(f"model calls replayed: {calls}")
    print(
        f"{'track':<26} {'prompt tokens':>14} {'% raw':>6} {'largest':>8} {'over':>5} {'compactions':>11} "
        f"{'deferred':>8} {'summ. calls':>11} {'summ. in':>9} {'summ. out':>9}"
    )
    print(f"{'raw':<26} {raw_total:>14,} {1:>6.1%} {peak_raw:>8,} {'':>5} {'':>11} {'':>8} {'':>11} {'':>9} {'':>9}")
    print(
        f"{'pruned' if not args.no_pruning else 'pruning off':<26} {pruned_total:>14,} {pruned_total / raw_total:>6.1%} {peak_pruned:>8,}"
    )
    for t in (eager, ruled):
        print(
            f"{'pruned + compacted, ' + t.name:<26} {t.prompt_total:>14,} {t.prompt_total / raw_total:>6.1%} "
            f"{t.peak:>8,} {t.over_budget:>5} {t.compactions:>11} {t.deferred:>8} {t.summary_calls:>11} "
            f"{t.sum_in:>9,} {t.sum_out:>9,}"
        )
    print(
        f"(largest = largest single request; over = requests above the budget {budget:,}; "
        f"fallbacks: {eager.fallbacks} / {ruled.fallbacks})"
    )
    for t in (eager, ruled):
        saved = pruned_total - t.prompt_total
        print(
            f"{t.name}: saved {saved:,} prompt tokens over pruning alone for {t.sum_in + t.sum_out:,} summarizer "
            f"tokens (ratio {saved / max(1, t.sum_in + t.sum_out):.1f}x); turns stored {t.stored} of "
            f"{len(all_msgs)}"
        )
    print(
        f"rule on vs off: compactions {ruled.compactions} vs {eager.compactions} "
        f"({ruled.compactions / max(1, eager.compactions):.2f}x), summarizer tokens "
        f"{ruled.sum_in + ruled.sum_out:,} vs {eager.sum_in + eager.sum_out:,} "
        f"({(ruled.sum_in + ruled.sum_out) / max(1, eager.sum_in + eager.sum_out):.2f}x), prompt tokens "
        f"{ruled.prompt_total:,} vs {eager.prompt_total:,} ({ruled.prompt_total / max(1, eager.prompt_total):.3f}x)"
    )
    print(
        f"wall time: rule off {t1 - t0:.1f}s, rule on {t2 - t1:.1f}s (2-core shared machine; exact token "
        f"counting and SQLite writes included)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
