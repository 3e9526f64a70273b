"""Summarization spend (seed 000's "savings must exceed cost") and the pyramid's Prometheus metrics."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from test_pyramid import msgs

from stratamem import Config, Memory
from stratamem.cli import main
from stratamem.llm import OpenAIChat
from stratamem.pyramid.metrics import PyramidMetrics, pyramid_prometheus
from stratamem.summarize.llm import LLMSummarizer
from stratamem.testing.llm_server import FakeLLMServer
from stratamem.tokens import get_tokenizer

REPLY = json.dumps(
    {
        "summary": "Alice paid in Paris.",
        "key_facts": [],
        "themes": ["paris", "money", "notes"],
        "executive": "Payments were noted.",
    }
)
TOKENIZER = get_tokenizer()


def llm_memory(path: Any, server: FakeLLMServer, **pyramid: Any) -> Memory:
    model = OpenAIChat("m", base_url=server.openai_base_url, max_retries=0)
    config = Config().replace(pyramid={"summarizer": "llm", "defer_summarization": False, **pyramid})
    return Memory(path, namespace="t", config=config, summarizer=LLMSummarizer(model, TOKENIZER), embedder=None)


def expected_spend(server: FakeLLMServer, levels: list[int]) -> list[dict[str, int]]:
    """Per level: the calls the server answered and the usage it reported for them."""
    out: dict[int, dict[str, int]] = {}
    for level, req in zip(levels, server.requests, strict=True):
        row = out.setdefault(level, {"level": level, "calls": 0, "input_tokens": 0, "output_tokens": 0})
        row["calls"] += 1
        row["input_tokens"] += server.input_tokens(req)
        row["output_tokens"] += TOKENIZER.count(REPLY)
    return [out[k] for k in sorted(out)]


def test_spend_sums_the_providers_usage_per_level_and_shows_beside_the_tokens_saved(tmp_path: Path):
    with FakeLLMServer(reply=REPLY) as server:
        mem = llm_memory(tmp_path / "m.db", server, micro_chunk_size=5, mini_chunk_size=10, macro_chunk_size=1000)
        mem.add(msgs(20))
        levels = [n.level for n in mem.pyramid.nodes()]
        # 4 segments (level 1), 2 minis (level 2), each summarized by one call, in node order.
        assert levels == [1, 1, 1, 1, 2, 2]
        spend = mem.pyramid.spend()
        want = expected_spend(server, levels)
        assert [s.to_dict() for s in spend.levels] == want
        assert spend.calls == 6 == len(server.requests)
        assert spend.input_tokens == sum(server.input_tokens(r) for r in server.requests)
        assert spend.output_tokens == 6 * TOKENIZER.count(REPLY)
        segs = mem.pyramid.nodes(level=1)
        assert spend.tokens_saved == sum(n.tokens for n in segs) - sum(n.summary_tokens for n in segs)
        status = mem.status()
        assert (
            status.summary_calls,
            status.summary_input_tokens,
            status.summary_output_tokens,
            status.summary_tokens_saved,
        ) == (6, spend.input_tokens, spend.output_tokens, spend.tokens_saved)
        # A failed answer still cost its tokens: counted, and the node falls back.
        server.reply = lambda _req: "not json"
        before = len(server.requests)
        mem.add(msgs(5, start=20))
        assert mem.pyramid.nodes()[-1].summary_status == "failed"
        after = mem.pyramid.spend()
        assert after.calls == 7 and len(server.requests) == before + 1
        assert after.input_tokens == spend.input_tokens + server.input_tokens(server.requests[-1])
        assert after.output_tokens == spend.output_tokens + TOKENIZER.count("not json")
        mem.close()
    # The CLI shows the same figures (read from the store by a fresh process-like Memory).
    result = CliRunner().invoke(
        main, ["--db", str(tmp_path / "m.db"), "--namespace", "t", "tiers", "--json"], catch_exceptions=False
    )
    shown = json.loads(result.output)["summary_spend"]
    assert (shown["calls"], shown["input_tokens"], shown["output_tokens"]) == (
        7,
        after.input_tokens,
        after.output_tokens,
    )
    result = CliRunner().invoke(
        main, ["--db", str(tmp_path / "m.db"), "--namespace", "t", "tiers"], catch_exceptions=False
    )
    assert (
        f"summary spend: 7 calls, {after.input_tokens} input + {after.output_tokens} output tokens; "
        f"saved per prompt: {after.tokens_saved} tokens"
    ) in result.output
    result = CliRunner().invoke(
        main, ["--db", str(tmp_path / "m.db"), "--namespace", "t", "status", "--json"], catch_exceptions=False
    )
    assert json.loads(result.output)["summary_calls"] == 7


def test_local_summarizers_spend_nothing():
    mem = Memory(
        ":memory:", namespace="t", config=Config().replace(pyramid={"summarizer": "extractive"}), embedder=None
    )
    mem.add(msgs(40))
    spend = mem.pyramid.spend()
    assert (spend.levels, spend.calls, spend.cost_tokens) == ((), 0, 0)
    assert spend.tokens_saved > 0 and spend.savings_exceed_cost


def test_prometheus_text_has_tier_sizes_seals_failures_and_spend(tmp_path: Path):
    with FakeLLMServer(reply=REPLY) as server:
        mem = llm_memory(":memory:", server, micro_chunk_size=5, mini_chunk_size=1000)
        mem.add(msgs(10))
        server.reply = lambda _req: "not json"
        mem.add(msgs(5, start=10))
        text = pyramid_prometheus([PyramidMetrics.of(mem.pyramid)])
        spend = mem.pyramid.spend()
    samples = dict(re.findall(r"^(stratamem_pyramid_\S+) (\S+)$", text, re.MULTILINE))
    assert samples['stratamem_pyramid_tier_nodes{namespace="t",tier="hot"}'] == "2"
    assert samples['stratamem_pyramid_tier_nodes{namespace="t",tier="warm"}'] == "1"
    assert samples['stratamem_pyramid_tier_turns{namespace="t",tier="warm"}'] == "5"
    assert samples['stratamem_pyramid_segments_sealed_total{namespace="t"}'] == "3"
    assert samples['stratamem_pyramid_summary_failures{namespace="t"}'] == "1"
    assert samples['stratamem_pyramid_summary_calls_total{namespace="t",level="1"}'] == "3"
    assert samples['stratamem_pyramid_summary_input_tokens_total{namespace="t",level="1"}'] == str(spend.input_tokens)
    assert samples['stratamem_pyramid_summary_output_tokens_total{namespace="t",level="1"}'] == str(spend.output_tokens)
    assert "# TYPE stratamem_pyramid_segments_sealed_total counter" in text


def _topics_memory(scope: str) -> Memory:
    from datetime import timedelta

    from test_pyramid import T0

    config = Config().replace(
        pyramid={"preset": "topics", "summarizer": "extractive", "bulk_merge_size": 3, "consolidation_scope": scope},
        context={"default_budget": 400},
    )
    mem = Memory(":memory:", namespace="t", config=config, embedder=None)
    t = T0
    for topic in range(8):
        for name in ("a", "b"):
            batch = []
            for i in range(4):
                t += timedelta(minutes=1)
                batch.append(
                    {
                        "role": "user" if i % 2 == 0 else "assistant",
                        "content": f"{name} subject {topic} point {i}: Alice paid {topic * 10 + i} euros "
                        f"for the {name}{topic} project in Paris and Rome.",
                        "timestamp": t.isoformat(),
                    }
                )
            mem.add(batch, session=name)
        t += timedelta(hours=1)  # a silence seals each topic
    return mem


def test_topics_context_reports_tokens_per_tier_and_the_compression_ratio():
    mem = _topics_memory("session")
    bulks = mem.pyramid.nodes(level=2)
    assert bulks and all(n.session in ("a", "b") for n in bulks)
    for n in bulks:
        assert {c.session for c in mem.pyramid.children(n.id)} == {n.session}
    ctx = mem.context("what did Alice pay?", budget=1500, session="a", policy="topics", format="text")
    m = ctx.manifest
    by_kind: dict[str, int] = {"turn": 0, "segment": 0, "consolidation": 0}
    source = 0
    for item in m.items:
        by_kind[item.kind] += item.tokens
        if item.kind == "turn":
            source += mem.store.turns("t", ids=[item.turn_ids[0]])[0].tokens
        else:
            node = mem.pyramid.node(int(item.id.split(":")[1]))
            assert node.session == "a"  # nothing of session b's history in session a's topics context
            source += node.tokens
    assert dict(m.tier_tokens) == {
        "current": by_kind["turn"],
        "topics": by_kind["segment"],
        "bulks": by_kind["consolidation"],
    }
    assert m.tier_tokens["bulks"] > 0 and m.tier_tokens["current"] > 0
    assert m.source_tokens == source
    assert m.compression_ratio == source / sum(by_kind.values())
    d = m.to_dict()
    assert (d["tier_tokens"], d["source_tokens"], d["compression_ratio"]) == (
        dict(m.tier_tokens),
        source,
        round(source / sum(by_kind.values()), 3),
    )
    # Other policies report no tiers.
    assert mem.context("what did Alice pay?", budget=1500, session="a").manifest.tier_tokens == {}


def test_namespace_wide_bulks_mix_sessions_when_asked():
    mem = _topics_memory("namespace")
    bulks = mem.pyramid.nodes(level=2)
    assert bulks and all(n.session is None for n in bulks)
    assert any(len({c.session for c in mem.pyramid.children(n.id)}) == 2 for n in bulks)


def test_pyramid_policy_at_1500_tokens_shows_hot_window_relevant_warm_chunks_and_macro_summaries(minilm):
    from datetime import timedelta

    from test_pyramid import T0

    config = Config().replace(pyramid={"summarizer": "extractive"}, context={"policy": "pyramid"})
    mem = Memory(":memory:", namespace="t", config=config, embedder=minilm)
    topics = [
        "gardening tomatoes",
        "car repair brakes",
        "cooking pasta",
        "piano lessons",
        "tax forms",
        "hiking boots",
        "birthday party",
        "moving flat",
        "job interview",
        "dog training",
        "guitar strings",
        "budget spreadsheet",
        "wedding plans",
        "kitchen paint",
    ]
    turns = []
    for i in range(140):
        topic = topics[i // 10]
        turns.append(
            {
                "role": "user" if i % 2 == 0 else "assistant",
                "content": f"About {topic}: note {i} on the {topic} plan, step {i % 10}.",
                "timestamp": (T0 + timedelta(minutes=i)).isoformat(),
            }
        )
    mem.add(turns, session="s")
    ctx = mem.context("what did we decide about the dog training?", budget=1500, session="s")
    m = ctx.manifest
    assert ctx.tokens <= 1500
    window = [i for i in m.items if i.reason == "recent_window"]
    chunks = [i for i in m.items if i.kind == "segment"]
    macros = [i for i in m.items if i.kind == "consolidation"]
    assert window and chunks and macros
    # The window keeps to its share (50% of what the fixed blocks leave), not the whole budget.
    assert sum(i.tokens for i in window) <= 1500 * 0.5
    # The most relevant warm chunk is the dog-training one (turns 90-99), expanded to its turns.
    dog = mem.pyramid.nodes(level=1)[9]
    assert chunks[0].id == f"node:{dog.id}" and chunks[0].reason == "expanded"
    assert len(chunks) <= 3
    # Macro summaries are the top-level consolidations.
    assert {i.id for i in macros} <= {
        f"node:{n.id}" for n in mem.pyramid.nodes() if n.level >= 2 and n.parent_id is None
    }


def test_prompt_view_lists_only_the_sessions_own_topics_and_bulks_when_consolidation_is_per_session():
    from stratamem.pyramid.escalation import prompt_view

    for scope, expect_other in (("session", False), ("namespace", True)):
        mem = _topics_memory(scope)
        view = prompt_view(mem.pyramid, "a", 4000)
        shown = [mem.pyramid.node(i.node_id) for i in (*view.topics, *view.bulks)]
        assert view.bulks
        others = [
            n
            for n in shown
            if n.session not in ("a", None)
            or (n.session is None and any(c.session == "b" for c in mem.pyramid.children(n.id)))
        ]
        assert bool(others) is expect_other
