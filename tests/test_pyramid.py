"""The pyramid through Memory: sealing, consolidation without gaps or overlaps, tiers,
summaries with visible failures, expansion, statistics and seed 002's prompt view."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stratamem import Config, Memory
from stratamem.errors import ConfigError, ModelError, NotFoundError
from stratamem.items.search import embed_texts
from stratamem.llm import OpenAIChat
from stratamem.pyramid.escalation import prompt_view
from stratamem.store.vectors import quantized
from stratamem.summarize.llm import LLMSummarizer
from stratamem.testing.llm_server import FakeLLMServer

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)


def msgs(n: int, start: int = 0, minutes: float = 1.0, words: int = 12) -> list[dict]:
    out = []
    for i in range(start, start + n):
        body = " ".join(f"w{(i * 7 + k) % 50}" for k in range(words))
        out.append(
            {
                "role": "user" if i % 2 == 0 else "assistant",
                "content": f"Note {i}: Alice paid {i} euros in Paris. {body}.",
                "timestamp": (T0 + timedelta(minutes=minutes * i)).isoformat(),
            }
        )
    return out


def cfg(**pyramid) -> Config:
    return Config().replace(pyramid=pyramid)


def check_tree(mem: Memory) -> None:
    """Every turn in at most one node per level; each level covers a gap-free prefix."""
    nodes = mem.pyramid.nodes()
    store = mem.store.nodes
    levels = sorted({n.level for n in nodes})
    for level in levels:
        at = [n for n in nodes if n.level == level]
        seen: dict[int, int] = {}
        for n in at:
            ids = mem.pyramid.turn_ids(n.id)
            assert len(ids) == n.turn_count
            for t in ids:
                assert t not in seen, f"turn {t} in nodes {seen[t]} and {n.id} at level {level}"
                seen[t] = n.id
        assert store.coverage(mem.namespace, level) == seen
        if level == 1:
            for session in {n.session for n in at}:
                covered = sorted(n.seq_range for n in at if n.session == session)
                # Per session: consecutive runs starting at seq 1, no gap, no overlap.
                expect = 1
                for lo, hi in covered:
                    assert lo == expect
                    expect = hi + 1
                assert mem.pyramid._nodes.sealed_seq(mem.namespace, session) == expect - 1
        else:
            per_session = mem.config.pyramid.consolidation_scope == "session"
            below_all = [n for n in nodes if n.level == level - 1]
            for group in {n.session for n in below_all} if per_session else {None}:
                below = [n for n in below_all if not per_session or n.session == group]
                parented = [n for n in below if n.parent_id is not None]
                # The consolidated children are the oldest nodes of the level below (of the
                # session, when consolidation is per session), with no hole.
                assert [n.id for n in parented] == [n.id for n in below[: len(parented)]]
            for n in at:
                kids = mem.pyramid.children(n.id)
                if per_session:
                    assert {k.session for k in kids} == {n.session}
                assert sorted(t for k in kids for t in mem.pyramid.turn_ids(k.id)) == mem.pyramid.turn_ids(n.id)
                assert n.tokens == sum(k.tokens for k in kids)


def test_fixed_segments_and_mini_chunks_follow_the_pyramid_preset():
    mem = Memory(":memory:", namespace="t", config=cfg(summarizer="heuristic"), embedder=None)
    for m in msgs(95):
        mem.add(m)
    segs = mem.pyramid.nodes(level=1)
    assert [n.seq_range for n in segs] == [(i * 10 + 1, i * 10 + 10) for i in range(9)]
    assert [n.reason for n in segs] == ["size"] * 9
    minis = mem.pyramid.nodes(level=2)
    # Seed 000 checked mini consolidation only at multiples of 10 turns and so fired every
    # 50 turns with interval 25; here every 3 micro chunks (>= 25 turns) become one mini.
    assert [mem.pyramid.turn_ids(n.id)[0] for n in minis] == [1, 31, 61]
    assert [n.turn_count for n in minis] == [30, 30, 30]
    assert mem.pyramid.nodes(level=3) == []
    assert [t.seq for t in mem.pyramid.open_turns("default")] == list(range(91, 96))
    check_tree(mem)


def test_macro_consolidation_covers_at_least_one_hundred_turns():
    mem = Memory(":memory:", namespace="t", config=cfg(summarizer="heuristic"), embedder=None)
    mem.add(msgs(130))
    [macro] = mem.pyramid.nodes(level=3)
    assert macro.kind == "macro" and macro.turn_count == 120
    assert [c.kind for c in mem.pyramid.children(macro.id)] == ["mini"] * 4
    assert macro.summary is not None and macro.summary.executive is not None
    check_tree(mem)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=st.lists(
        st.tuples(
            st.sampled_from(["add", "add", "add", "seal"]),
            st.sampled_from(["a", "b", "c"]),
            st.integers(1, 9),
            st.floats(0, 50),
        ),
        min_size=1,
        max_size=14,
    ),
    preset=st.sampled_from(["pyramid", "topics", "user_turn"]),
    scope=st.sampled_from(["session", "namespace"]),
)
def test_every_turn_belongs_to_exactly_one_node_per_level(ops, preset, scope):
    if preset == "user_turn":
        config = cfg(
            preset="custom", segmenter="user_turn", mini_chunk_size=4, macro_chunk_size=9, summarizer="heuristic"
        )
    elif preset == "topics":
        config = cfg(
            preset="topics", summarizer="heuristic", bulk_merge_size=2, topic_summary_tokens=30, hot_chunks=1
        ).replace(context={"default_budget": 200})
    else:
        config = cfg(micro_chunk_size=3, mini_chunk_size=5, macro_chunk_size=11, summarizer="heuristic", hot_chunks=1)
    config = config.replace(pyramid={"consolidation_scope": scope})
    mem = Memory(":memory:", namespace="p", config=config, embedder=None)
    clock = 0
    for op, session, n, gap in ops:
        if op == "seal":
            try:
                mem.seal(session)
            except NotFoundError:
                assert session not in {s.name for s in mem.store.sessions("p")}
        else:
            batch = msgs(n, start=clock, minutes=gap)
            clock += n
            mem.add(batch, session=session)
        check_tree(mem)
    for s in mem.store.sessions("p"):
        mem.seal(s.name)
    check_tree(mem)
    # After sealing every session, level 1 covers every stored turn.
    assert len(mem.store.nodes.coverage("p", 1)) == mem.status().turns


def test_topics_preset_seals_on_phrases_and_merges_the_three_oldest_topics_into_a_bulk():
    config = cfg(preset="topics", summarizer="extractive").replace(context={"default_budget": 1000})
    mem = Memory(":memory:", namespace="t", config=config, embedder=None)
    for k in range(7):
        mem.add(
            [
                {
                    "role": "user",
                    "content": f"{'New topic: ' if k else ''}subject {k} is about the harvest of lot {k} "
                    f"in Huila, Colombia, picked on 3 May {2020 + k}.",
                },
                {"role": "assistant", "content": f"Noted: lot {k} from Huila, harvested 3 May {2020 + k}."},
            ]
        )
    topics = mem.pyramid.nodes(level=1)
    assert [t.reason for t in topics] == ["phrase"] * 6
    assert [t.kind for t in topics] == ["topic"] * 6
    # 6 sealed topics x ~24 estimated summary tokens exceed 30% of 1000 tokens? No: 144 < 300,
    # so nothing is merged until the allocation is exceeded.
    assert mem.pyramid.nodes(level=2) == []
    small = Memory(":memory:", namespace="t", config=config.replace(context={"default_budget": 200}), embedder=None)
    for k in range(7):
        small.add(
            [
                {"role": "user", "content": f"{'New topic: ' if k else ''}lot {k} from Huila, May {2020 + k}."},
                {"role": "assistant", "content": f"Noted lot {k}."},
            ]
        )
    bulks = small.pyramid.nodes(level=2)
    # Allocation 60 tokens, 24 per topic: merge the 3 oldest whenever more than 2 are pending.
    assert [b.kind for b in bulks] == ["bulk", "bulk"]
    assert [len(small.pyramid.children(b.id)) for b in bulks] == [3, 3]
    check_tree(small)


def test_a_manual_seal_closes_the_open_turns_and_is_recorded():
    mem = Memory(":memory:", namespace="t", embedder=None)
    mem.add(msgs(4))
    seen = []
    mem.events.subscribe("segment.sealed", seen.append)
    node = mem.seal("default")
    assert node is not None and node.reason == "manual" and node.seq_range == (1, 4)
    assert mem.seal("default") is None
    assert [e.data["node_id"] for e in seen] == [node.id]
    with pytest.raises(NotFoundError):
        mem.seal("nope")


def test_tiers_move_hot_to_warm_to_cold_and_expand_gives_back_the_turns(tmp_path: Path):
    mem = Memory(
        tmp_path / "m.db",
        namespace="t",
        config=cfg(micro_chunk_size=5, mini_chunk_size=10, macro_chunk_size=30, hot_chunks=2, warm_max_turns=0),
        embedder=None,
    )
    stored = mem.add(msgs(47))
    by_tier = {t: [n.id for n in mem.pyramid.nodes(level=1, tier=t)] for t in ("hot", "warm", "cold")}
    # 9 segments (ids 1-9, then 4 minis, 1 macro); the 6 under the macro chunk (turns 1-30)
    # are cold, the 2 newest hot, the rest warm.
    assert by_tier == {"cold": [1, 2, 3, 4, 5, 6], "warm": [7], "hot": [8, 9]}
    for n in mem.pyramid.nodes(level=1):
        assert [t.id for t in mem.pyramid.expand(n.id)] == mem.pyramid.turn_ids(n.id)
        assert mem.pyramid.expand(n.id) == [s for s in stored if s.id in set(mem.pyramid.turn_ids(n.id))]
        if n.tier != "hot":
            assert n.summary_status == "ok" and n.summary is not None
    cold = mem.pyramid.node(1)
    assert cold.archive_ref is not None and cold.archive_ref.endswith(cold.archive_ref.split("@")[1])
    macro = mem.pyramid.nodes(level=3)[0]
    assert [t.seq for t in mem.pyramid.expand(macro.id)] == list(range(1, 31))
    assert (tmp_path / "m.db.archive" / "t").is_dir()


def test_segments_older_than_the_warm_age_go_cold():
    mem = Memory(
        ":memory:", namespace="t", config=cfg(micro_chunk_size=5, warm_max_age_hours=2, hot_chunks=1), embedder=None
    )
    mem.add(msgs(10, minutes=1))
    mem.add(msgs(10, start=10, minutes=20))  # the last turns are hours later
    tiers = [n.tier for n in mem.pyramid.nodes(level=1)]
    assert tiers == ["cold", "cold", "warm", "hot"]


def test_defer_summarization_leaves_hot_segments_pending():
    mem = Memory(
        ":memory:", namespace="t", config=cfg(micro_chunk_size=5, mini_chunk_size=100, hot_chunks=2), embedder=None
    )
    mem.add(msgs(15))
    assert [(n.tier, n.summary_status) for n in mem.pyramid.nodes(level=1)] == [
        ("warm", "ok"),
        ("hot", "pending"),
        ("hot", "pending"),
    ]
    eager = Memory(
        ":memory:",
        namespace="t",
        config=cfg(micro_chunk_size=5, mini_chunk_size=100, defer_summarization=False),
        embedder=None,
    )
    eager.add(msgs(15))
    assert [n.summary_status for n in eager.pyramid.nodes(level=1)] == ["ok", "ok", "ok"]


def test_a_failing_model_keeps_the_node_with_an_extractive_summary_and_a_visible_failure():
    with FakeLLMServer(reply="not json") as server:
        model = OpenAIChat("m", base_url=server.openai_base_url, max_retries=0)
        mem = Memory(
            ":memory:",
            namespace="t",
            config=cfg(summarizer="llm", micro_chunk_size=5, defer_summarization=False),
            summarizer=LLMSummarizer(model, Memory(":memory:", embedder=None).tokenizer),
            embedder=None,
        )
        failures = []
        mem.events.subscribe("summarizer.failed", failures.append)
        stored = mem.add(msgs(5))
        [node] = mem.pyramid.nodes(level=1)
        assert node.summary_status == "failed"
        assert node.summary is not None and node.summary.summarizer == "extractive"
        assert "not json" not in node.summary.text and "JSON summary" in node.summary_error
        assert [e.data["node_id"] for e in failures] == [node.id]
        assert len(mem.turns()) == len(stored) == 5
        # The model recovers: retrying replaces the fallback.
        server.reply = lambda _req: json.dumps(
            {"summary": "Alice paid in Paris.", "key_facts": [], "themes": ["money", "paris", "alice"]}
        )
        assert mem.pyramid.retry_failed() == 1
        fixed = mem.pyramid.node(node.id)
        assert (fixed.summary_status, fixed.summary.text, fixed.summary_error) == ("ok", "Alice paid in Paris.", None)


def test_the_llm_strategy_needs_a_summarizer_instance():
    # Refused when the memory is built, before any turn could be stored without summaries.
    with pytest.raises(ConfigError, match="LLMSummarizer"):
        Memory(":memory:", namespace="t", config=cfg(summarizer="llm"), embedder=None)


class _Embedder:
    """A tiny deterministic embedder (anything with embed_batch works)."""

    def embed_batch(self, texts):
        import numpy as np

        return np.array([[len(t), t.count("a"), 1.0] for t in texts], dtype=np.float32)


def test_summaries_are_embedded_when_an_embedder_is_given():
    mem = Memory(
        ":memory:", namespace="t", config=cfg(micro_chunk_size=5, defer_summarization=False), embedder=_Embedder()
    )
    mem.add(msgs(5))
    [node] = mem.pyramid.nodes(level=1)
    vec = mem.pyramid.embedding(node.id)
    # Stored through the one embedder wrapper, which makes rows unit length.
    raw = np.array([len(node.summary.text), node.summary.text.count("a"), 1.0], dtype=np.float32)
    unit = (raw / np.linalg.norm(raw)).astype(np.float32)
    # Kept as int8 codes and a scale (store/vectors.py): back within half a quantisation step.
    assert vec is not None and vec.tobytes() == quantized(unit.tobytes())
    assert np.abs(vec - unit).max() <= np.abs(unit).max() / 127 / 2 + 1e-7


def test_tier_statistics_count_every_turn_once(tmp_path: Path):
    mem = Memory(
        tmp_path / "m.db",
        namespace="t",
        config=cfg(micro_chunk_size=5, mini_chunk_size=10, macro_chunk_size=30, warm_max_turns=0),
        embedder=None,
    )
    mem.add(msgs(47))
    stats = {s.tier: s for s in mem.pyramid.stats()}
    assert {k: (s.nodes, s.turns) for k, s in stats.items()} == {
        "hot": (2, 10),
        "warm": (1, 5),
        "cold": (6, 30),
        "open": (0, 2),
    }
    assert sum(s.tokens for s in stats.values()) == mem.status().tokens
    assert stats["hot"].compression_ratio == 1.0
    assert stats["cold"].compression_ratio > 1.5
    assert stats["cold"].bytes > 0
    levels = mem.pyramid.level_stats()
    assert [lv.level for lv in levels] == [1, 2, 3]
    assert levels[0].compression_ratio > 1.0


def test_prompt_view_escalates_in_seed_two_order():
    config = cfg(preset="topics", max_message_chars=40).replace(context={"default_budget": 200})
    mem = Memory(":memory:", namespace="t", config=config, embedder=None)
    for k in range(20):
        mem.add(
            [
                {"role": "user", "content": f"{'New topic: ' if k else ''}lot {k} from Huila, May {2020 + k}."},
                {"role": "assistant", "content": f"Noted lot {k}."},
            ]
        )
    long_text = " ".join(f"w{i}" for i in range(150))
    mem.add({"role": "user", "content": long_text})
    view = prompt_view(mem.pyramid, "default", 200)
    assert view.steps[0] == "truncate"
    long = [i for i in view.current if i.truncated]
    assert len(long) == 1 and long[0].text == long_text[:40] + " [truncated]"
    assert sum(i.tokens for i in view.current) <= 100
    assert sum(i.tokens for i in view.topics) <= 60
    assert sum(i.tokens for i in view.bulks) <= 40
    assert "drop_bulk" in view.steps and view.omitted_nodes
    # Only the view dropped them: every turn is still stored.
    assert len(mem.turns()) == 41


# --- review findings: failures never escape add, no retry storm, tiers read incrementally -------------------


class _FlakySummarizer:
    """A custom strategy that raises a plain exception while ``broken`` and counts its calls."""

    name = "flaky"

    def __init__(self, tokenizer) -> None:
        from stratamem.summarize.heuristic import HeuristicSummarizer

        self.inner = HeuristicSummarizer(tokenizer)
        self.broken = True
        self.calls = 0

    def summarize(self, turns, *, max_tokens):
        self.calls += 1
        if self.broken:
            raise RuntimeError("flaky backend exploded")
        return self.inner.summarize(turns, max_tokens=max_tokens)

    def merge(self, parts, *, max_tokens, executive=False):
        self.calls += 1
        if self.broken:
            raise RuntimeError("flaky backend exploded")
        return self.inner.merge(parts, max_tokens=max_tokens, executive=executive)


def test_a_chat_client_validation_error_falls_back_and_add_does_not_raise():
    # Reviewer repro t2: the client refuses input over its limit before any request.
    with FakeLLMServer(reply="unused") as server:
        model = OpenAIChat("m", base_url=server.openai_base_url, max_input_chars=200, max_retries=0)
        mem = Memory(
            ":memory:",
            namespace="t",
            config=cfg(summarizer="llm", micro_chunk_size=2, defer_summarization=False),
            summarizer=LLMSummarizer(model, Memory(":memory:", embedder=None).tokenizer),
            embedder=None,
        )
        failures = []
        mem.events.subscribe("summarizer.failed", failures.append)
        stored = mem.add(
            [{"role": "user", "content": "hello " * 100}, {"role": "assistant", "content": "hi there " * 50}]
        )
        [node] = mem.pyramid.nodes()
        assert len(stored) == 2 and len(mem.turns()) == 2
        assert (node.summary_status, node.summary.summarizer) == ("failed", "extractive")
        assert node.summary_error.startswith("ValidationError: messages: input is ")
        assert [(e.data["node_id"], e.data["error"]) for e in failures] == [(node.id, "ValidationError")]
        assert server.requests == []


def test_any_custom_summarizer_exception_falls_back_once_and_only_retry_failed_tries_again():
    tokenizer = Memory(":memory:", embedder=None).tokenizer
    flaky = _FlakySummarizer(tokenizer)
    mem = Memory(
        ":memory:",
        namespace="t",
        config=cfg(micro_chunk_size=5, defer_summarization=False),
        summarizer=flaky,
        embedder=None,
    )
    failures = []
    mem.events.subscribe("summarizer.failed", failures.append)
    mem.add(msgs(5))
    [node] = mem.pyramid.nodes()
    assert (node.summary_status, node.summary.summarizer) == ("failed", "extractive")
    assert node.summary_error == "RuntimeError: flaky backend exploded"
    assert flaky.calls == 1
    # Later adds neither raise nor call the model again for the failed node.
    mem.add(msgs(3, start=5))
    mem.add(msgs(1, start=8))
    assert flaky.calls == 1 and len(failures) == 1
    assert mem.pyramid.node(node.id).summary_status == "failed"
    flaky.broken = False
    assert mem.pyramid.retry_failed() == 1
    fixed = mem.pyramid.node(node.id)
    assert (fixed.summary_status, fixed.summary_error, fixed.summary.summarizer) == ("ok", None, "heuristic")
    assert flaky.calls == 2


def test_a_failing_event_handler_is_reported_and_the_pyramid_finishes_its_work():
    mem = Memory(":memory:", namespace="t", config=cfg(micro_chunk_size=5, defer_summarization=False), embedder=None)
    hook_failures = []
    mem.events.subscribe("hook.failed", hook_failures.append)

    def broken_hook(_event):
        raise KeyError("subscriber bug")

    mem.events.subscribe("segment.sealed", broken_hook)
    stored = mem.add(msgs(5))
    [node] = mem.pyramid.nodes()
    assert len(stored) == 5 and node.summary_status == "ok"
    assert [(e.data["event"], e.data["error"]) for e in hook_failures] == [("segment.sealed", "KeyError")]


class _BrokenEmbedder:
    """Raises a plain exception while ``broken``; then a fixed 2-d vector."""

    def __init__(self) -> None:
        self.broken = True

    def embed_batch(self, texts):
        if self.broken:
            raise ConnectionError("embedding service down")
        return np.array([[3.0, 4.0]] * len(texts), dtype=np.float32)


def test_an_embedder_failure_marks_the_node_and_retry_failed_embeds_it():
    embedder = _BrokenEmbedder()
    mem = Memory(
        ":memory:",
        namespace="t",
        config=cfg(micro_chunk_size=5, defer_summarization=False, auto_extract_facts=False),
        embedder=embedder,
    )
    failed = []
    mem.events.subscribe("embed.failed", failed.append)
    mem.add(msgs(5))
    [node] = mem.pyramid.nodes()
    # The summary stands; the missing vector is visible on the node and as an event.
    assert (node.summary_status, node.summary.summarizer, node.has_embedding) == ("failed", "extractive", False)
    with pytest.raises(ModelError) as wrapped:  # the project's one embedder wrapper words the cause
        embed_texts(_BrokenEmbedder(), ["x"])
    assert node.summary_error == f"embedding failed: {wrapped.value}"
    assert "embedding service down" in node.summary_error
    assert [(e.data["node_id"], e.data["error"]) for e in failed] == [(node.id, "ModelError")]
    embedder.broken = False
    assert mem.pyramid.retry_failed() == 1
    assert mem.pyramid.node(node.id).summary_status == "ok"
    # [0.6, 0.8] kept as int8 codes [95, 127] with the scale 0.8 / 127.
    assert mem.pyramid.embedding(node.id).tobytes() == quantized(np.array([0.6, 0.8], dtype=np.float32).tobytes())
    assert mem.pyramid.embedding(node.id) == pytest.approx([95 * 0.8 / 127, 0.8], abs=1e-7)


def test_warm_segments_are_stored_as_ctf():
    from stratamem.formats import ctf

    mem = Memory(
        ":memory:", namespace="t", config=cfg(micro_chunk_size=5, hot_chunks=1, mini_chunk_size=100), embedder=None
    )
    stored = mem.add(msgs(10))
    [warm] = mem.pyramid.nodes(tier="warm")
    fmt, content = mem.store.nodes.warm_content("t", warm.id)
    assert fmt == "ctf" and ctf.decode_turns(content) == [s.turn for s in stored[:5]]
    assert mem.pyramid.expansion(warm.id).sources == {warm.id: "warm"}


def _full_plan_moves(mem: Memory) -> dict:
    """What the pre-review algorithm (every segment, the whole top-level coverage) would still move."""
    from stratamem.pyramid.tiers import plan_tiers

    p = mem.config.pyramid
    segments = mem.pyramid.nodes(level=1)
    top = len(mem.pyramid.plan.levels) + 1
    covered = set(mem.store.nodes.coverage(mem.namespace, top))
    return plan_tiers(
        segments,
        hot_chunks=p.hot_chunks,
        hot_max_tokens=p.hot_max_tokens,
        covered_by_top={n.id for n in segments if n.first_turn_id in covered},
        reference=mem.store.nodes.newest_turn_time(mem.namespace),
        warm_max_age=timedelta(hours=p.warm_max_age_hours),
        warm_max_turns=p.warm_max_turns,
    )


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=st.lists(
        st.tuples(
            st.sampled_from(["a", "b"]),
            st.integers(1, 7),
            st.sampled_from([0.5, 30, 400, -600]),  # minutes; imported history may go back
            st.sampled_from([1, 40]),
        ),
        min_size=1,
        max_size=12,
    ),
    hot=st.integers(0, 3),
    hot_tokens=st.sampled_from([60, 50_000]),
    warm=st.sampled_from([0, 9, 100]),
)
def test_reading_only_unsettled_segments_moves_tiers_exactly_like_a_full_scan(ops, hot, hot_tokens, warm):
    mem = Memory(
        ":memory:",
        namespace="p",
        config=cfg(
            micro_chunk_size=3,
            mini_chunk_size=5,
            macro_chunk_size=11,
            hot_chunks=hot,
            hot_max_tokens=hot_tokens,
            warm_max_turns=warm,
            warm_max_age_hours=2,
            summarizer="heuristic",
        ),
        embedder=None,
    )
    clock = 0.0
    for session, n, gap, words in ops:
        batch = []
        for _ in range(n):
            clock += gap
            # Long turns make segments bigger than the hot budget: they skip hot while older ones may not.
            batch.append(
                {
                    "role": "user",
                    "content": f"t{clock} " + "word " * words,
                    "timestamp": (T0 + timedelta(minutes=clock)).isoformat(),
                }
            )
        before = len(mem.pyramid.nodes())
        mem.add(batch, session=session)
        if len(mem.pyramid.nodes()) > before:  # tiers move when something is sealed, as they always did
            # A fixpoint of the full-scan rule: nothing the old algorithm would move was left behind.
            assert _full_plan_moves(mem) == {}
    check_tree(mem)


def test_concurrent_writers_of_one_namespace_on_postgres_queue_on_the_pyramid_lock(pg_dsn):
    import threading

    from pg import fresh_schema, schema_url

    from stratamem.store.open import open_store

    url = schema_url(pg_dsn, fresh_schema(pg_dsn, "race"))
    config = cfg(micro_chunk_size=2, mini_chunk_size=4, macro_chunk_size=12, summarizer="heuristic")
    open_store(url).close()  # migrate once, before the writers race
    errors: list[str] = []
    returned: list[int] = []

    def writer(w: int) -> None:
        with Memory(open_store(url), namespace="shared", config=config, embedder=None) as mem:
            for i in range(12):
                try:
                    returned.extend(
                        t.id
                        for t in mem.add(
                            [{"role": "user", "content": f"w{w} q{i}"}, {"role": "assistant", "content": f"a{i}"}],
                            session=f"s{w % 2}",
                        )
                    )
                except Exception as exc:  # noqa: BLE001 - every error counts; the assertion below names them
                    errors.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with Memory(open_store(url), namespace="shared", config=config, embedder=None) as mem:
        assert sorted(t.id for t in mem.turns()) == sorted(returned) and len(returned) == 72
        assert (
            sum(n.turn_count for n in mem.pyramid.nodes(level=1))
            + sum(len(mem.pyramid.open_turns(s)) for s in ("s0", "s1"))
            == 72
        )
        check_tree(mem)


def test_the_postgres_pyramid_lock_holds_one_namespace_until_commit(pg_dsn):
    from pg import fresh_schema, schema_url

    from stratamem.store.open import open_store

    url = schema_url(pg_dsn, fresh_schema(pg_dsn, "lock"))
    holder, other = open_store(url), open_store(url)
    try:

        def free(namespace: str) -> bool:
            with other.transaction(), other.connection() as conn:
                return conn.execute(
                    "SELECT pg_try_advisory_xact_lock(%s, hashtext(%s))", (0x5079, namespace)
                ).fetchone()[0]

        with holder.transaction():
            holder.nodes.lock("ns")
            assert (free("ns"), free("another")) == (False, True)
        assert free("ns") is True
    finally:
        holder.close()
        other.close()


def test_warm_holds_the_turns_20_to_100_back_and_older_segments_are_cold():
    # Seed 000: hot = the last 20 turns (2 micro chunks), warm = turns 20-100 back, cold = 100+.
    mem = Memory(":memory:", namespace="t", config=cfg(summarizer="heuristic"), embedder=None)
    mem.add(msgs(130))
    by_tier = {t: [n.seq_range for n in mem.pyramid.nodes(level=1, tier=t)] for t in ("hot", "warm", "cold")}
    assert by_tier == {
        "hot": [(111, 120), (121, 130)],
        "warm": [(i * 10 + 1, i * 10 + 10) for i in range(3, 11)],
        "cold": [(1, 10), (11, 20), (21, 30)],
    }
    assert [n.turn_count for n in mem.pyramid.nodes(level=3)] == [120]  # 4 minis of 30
    stats = {s.tier: (s.nodes, s.turns) for s in mem.pyramid.stats()}
    assert stats == {"hot": (2, 20), "warm": (8, 80), "cold": (3, 30), "open": (0, 0)}
    # Ten more turns push one more segment past the window.
    mem.add(msgs(10, start=130))
    stats = {s.tier: (s.nodes, s.turns) for s in mem.pyramid.stats()}
    assert stats == {"hot": (2, 20), "warm": (8, 80), "cold": (4, 40), "open": (0, 0)}


def test_consolidations_merge_one_session_unless_the_scope_is_the_namespace():
    def build(scope: str) -> Memory:
        mem = Memory(
            ":memory:",
            namespace="t",
            # Session b's turns are dated 1,000 minutes after a's: a would be sealed as idle.
            config=cfg(summarizer="heuristic", consolidation_scope=scope, seal_idle_minutes=0),
            embedder=None,
        )
        # Two interleaved sessions: 30 turns each, added 15 at a time.
        for part in range(2):
            for name, base in (("a", 0), ("b", 1000)):
                mem.add(msgs(15, start=base + part * 15), session=name)
        return mem

    mem = build("session")
    minis = mem.pyramid.nodes(level=2)
    assert [(n.session, n.turn_count) for n in minis] == [("a", 30), ("b", 30)]
    for n in minis:
        assert {c.session for c in mem.pyramid.children(n.id)} == {n.session}
    mem = build("namespace")
    minis = mem.pyramid.nodes(level=2)
    assert [(n.session, n.turn_count) for n in minis] == [(None, 30), (None, 30)]
    # Namespace-wide, a chunk mixes the sessions' segments in the order they were sealed.
    assert [{c.session for c in mem.pyramid.children(n.id)} for n in minis] == [{"a", "b"}, {"a", "b"}]


def _segments(mem: Memory) -> list[tuple[str | None, int, str | None]]:
    return [(n.session, n.turn_count, n.reason) for n in mem.pyramid.nodes(level=1)]


def test_a_quiet_session_is_sealed_once_the_namespace_has_moved_on(tmp_path: Path):
    path = tmp_path / "idle.db"
    mem = Memory(path, namespace="t", config=cfg(summarizer="heuristic"), embedder=None)
    mem.add(msgs(14), session="a")  # minutes 0-13: one segment of 10, four turns open
    assert _segments(mem) == [("a", 10, "size")]
    mem.add(msgs(3, start=20), session="b")  # minute 22: a has been quiet 9 minutes, under 30
    assert _segments(mem) == [("a", 10, "size")]
    mem.add(msgs(2, start=60), session="b")  # minute 61: a quiet 48 minutes, b still talking
    assert _segments(mem) == [("a", 10, "size"), ("a", 4, "idle")]
    tail = mem.pyramid.nodes(level=1)[-1]
    assert [t.seq for t in mem.turns(session="a")][10:] == list(range(tail.seq_range[0], tail.seq_range[1] + 1))
    assert tail.summary_status == "pending"  # summarized at the next context (defer_summarization)
    # Another process learns the open sessions from the store: b's five turns.
    other = Memory(path, namespace="t", config=cfg(summarizer="heuristic"), embedder=None)
    other.add(msgs(1, start=200), session="c")
    assert _segments(other) == [("a", 10, "size"), ("a", 4, "idle"), ("b", 5, "idle")]
    # a goes on 100 minutes after c's turn: a new segment after its idle one, and c is now quiet.
    other.add(msgs(10, start=300), session="a")
    assert _segments(other)[3:] == [("a", 10, "size"), ("c", 1, "idle")]
    check_tree(other)


def test_seal_idle_minutes_zero_leaves_quiet_sessions_open():
    mem = Memory(":memory:", namespace="t", config=cfg(summarizer="heuristic", seal_idle_minutes=0), embedder=None)
    mem.add(msgs(4), session="a")
    mem.add(msgs(2, start=600), session="b")
    assert _segments(mem) == []
