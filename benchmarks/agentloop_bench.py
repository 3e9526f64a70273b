"""Agent-loop benchmark: replay a long tool-using transcript with and without management.

Replays the deterministic transcript of ``benchmarks/data/make_agent_transcript.py``
(hundreds of tool calls with large outputs) call by call, the way an agent
loop would send it, on three tracks:

* **raw** — every message so far, unmanaged;
* **pruned** — the live list after :func:`~stratamem.agentloop.prune_tool_results`
  (seed defaults: trim > 4,000 chars to 1,500 + 1,500, clear after 6, keep 2);
* **managed** — :meth:`~stratamem.agentloop.Compactor.prepare_messages`: pruning
  plus compaction, every message stored in a SQLite memory.

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
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "data"))

from make_agent_transcript import messages as transcript  # noqa: E402

from stratamem import Memory  # noqa: E402
from stratamem.agentloop import Compactor, prune_tool_results  # noqa: E402
from stratamem.config import CompactionConfig, Config, PruningConfig  # noqa: E402
from stratamem.llm import OpenAIChat  # noqa: E402
from stratamem.providers import structural_problems  # noqa: E402
from stratamem.testing.llm_server import FakeLLMServer, checkpoint_reply  # noqa: E402
from stratamem.tokens import REPLY_TOKENS, count_message, count_messages, get_tokenizer  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    """Run the replay and print per-turn and total figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=40, help="user turns in the transcript")
    ap.add_argument("--threshold", type=int, default=32_000, help="compaction threshold (tokens)")
    ap.add_argument("--keep-recent", type=int, default=8_000, help="keep_recent_tokens")
    ap.add_argument("--reserve", type=int, default=4_000, help="output_reserve")
    ap.add_argument("--checkpoint-max", type=int, default=2_000, help="checkpoint_max_tokens")
    args = ap.parse_args(argv)

    tok = get_tokenizer("o200k_base")
    all_msgs = list(transcript(args.turns))
    ccfg = CompactionConfig(threshold=args.threshold, keep_recent_tokens=args.keep_recent,
                            output_reserve=args.reserve, checkpoint_max_tokens=args.checkpoint_max)
    pcfg = PruningConfig()
    tool_calls = sum(1 for m in all_msgs if m["role"] == "assistant" and isinstance(m["content"], list))
    print(f"transcript: {args.turns} user turns, {len(all_msgs)} messages, {tool_calls} tool calls, "
          f"{sum(len(str(m['content'])) for m in all_msgs):,} characters")
    print(f"pruning: seed defaults; compaction: threshold {ccfg.threshold:,}, keep_recent {ccfg.keep_recent_tokens:,}, "
          f"reserve {ccfg.output_reserve:,}, checkpoint <= {ccfg.checkpoint_max_tokens:,} tokens")
    print("summarizer: deterministic checkpoint_reply on FakeLLMServer via the openai client (NOT a real model)\n")

    raw_total = pruned_total = managed_total = 0
    raw_running = REPLY_TOKENS
    pruned: list[dict] = []
    managed: list[dict] = []
    calls = compactions = fallbacks = sum_in = sum_out = summary_calls = 0
    peak = {"raw": 0, "pruned": 0, "managed": 0}
    over_budget = 0
    budget = ccfg.threshold - ccfg.output_reserve
    t0 = time.perf_counter()
    with FakeLLMServer(reply=checkpoint_reply) as server, Memory(":memory:", namespace="bench",
                                                                 config=Config(compaction=ccfg), embedder=None) as mem:
        model = OpenAIChat("fake-summarizer", base_url=server.openai_base_url, max_retries=0)
        comp = Compactor(model, provider="anthropic", memory=mem, session="replay", config=ccfg, pruning=pcfg)
        print(f"{'turn':>4} {'calls':>5} {'raw':>9} {'pruned':>8} {'managed':>8} {'compactions':>11}")
        turn = -1
        turn_calls = 0
        last = (0, 0, 0)
        for i, m in enumerate(all_msgs):
            if m["role"] == "assistant":  # the agent calls the model before each assistant message
                calls += 1
                turn_calls += 1
                prune_tool_results(pruned, pcfg, tokenizer=tok)
                p = count_messages(pruned, tok)
                res = comp.prepare_messages(managed)
                if res.compaction.status in ("compacted", "fallback"):
                    compactions += res.compaction.status == "compacted"
                    fallbacks += res.compaction.status == "fallback"
                    sum_in += res.compaction.summary_input_tokens
                    sum_out += res.compaction.summary_output_tokens
                    summary_calls += res.compaction.summary_calls
                g = res.tokens
                assert not structural_problems(managed, "anthropic"), "managed list became invalid"
                over_budget += g > budget
                raw_total, pruned_total, managed_total = raw_total + raw_running, pruned_total + p, managed_total + g
                for k, v in (("raw", raw_running), ("pruned", p), ("managed", g)):
                    peak[k] = max(peak[k], v)
                last = (raw_running, p, g)
            if m["role"] == "user" and isinstance(m["content"], str):
                if turn >= 0:
                    print(f"{turn:>4} {turn_calls:>5} {last[0]:>9,} {last[1]:>8,} {last[2]:>8,} {compactions:>11}")
                turn += 1
                turn_calls = 0
            raw_running += count_message(m, tok)
            pruned.append(dict(m))
            managed.append(dict(m))
        print(f"{turn:>4} {turn_calls:>5} {last[0]:>9,} {last[1]:>8,} {last[2]:>8,} {compactions:>11}")
        comp.sync(managed)
        stored = len(mem.turns("replay"))
        state = comp.state
    elapsed = time.perf_counter() - t0

    print(f"\nmodel calls replayed: {calls}")
    print(f"prompt tokens summed over all calls: raw {raw_total:,} | pruned {pruned_total:,} "
          f"({pruned_total / raw_total:.1%}) | pruned+compacted {managed_total:,} ({managed_total / raw_total:.1%})")
    print(f"largest single request: raw {peak['raw']:,} | pruned {peak['pruned']:,} | managed {peak['managed']:,} "
          f"(budget {budget:,}; managed requests over budget: {over_budget})")
    print(f"compactions: {compactions} (fallbacks {fallbacks}), summarizer calls {summary_calls}, "
          f"summarizer tokens in {sum_in:,} / out {sum_out:,}")
    saved = pruned_total - managed_total
    print(f"tokens saved by compaction over pruning alone: {saved:,} prompt tokens for {sum_in + sum_out:,} "
          f"summarizer tokens (ratio {saved / max(1, sum_in + sum_out):.1f}x)")
    print(f"turns stored in memory: {stored} of {len(all_msgs)} messages; state: compactions "
          f"{state.compaction_count}, files read {len(state.files_read)}, modified {len(state.files_modified)}")
    print(f"wall time: {elapsed:.1f}s (2-core shared machine; includes exact token counting and SQLite writes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
