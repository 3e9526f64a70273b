"""Derived work never turns a committed add into an error, and recall sees every writer."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from stratamem import Config, Memory


class _BrokenSummarizer:
    """A summarizer that fails with an arbitrary, non-library exception."""

    name = "broken"

    def summarize(self, turns, *, max_tokens):  # test double of the protocol
        raise RuntimeError("boom")

    def consolidate(self, children, *, max_tokens, executive=False):
        raise RuntimeError("boom")


class _FlakyEmbedder:
    """A real embedder (deterministic vectors) that can be told to fail."""

    name = "flaky"
    dimensions = 8

    def __init__(self) -> None:
        self.fail = False

    def embed_batch(self, texts):
        if self.fail:
            raise RuntimeError("embedding service down")
        out = np.zeros((len(texts), 8), dtype=np.float32)
        for i, t in enumerate(texts):
            out[i, hash(t) % 8] = 1.0
        return out


def test_a_failing_embedder_after_the_index_loaded_loses_no_turn(tmp_path: Path) -> None:
    emb = _FlakyEmbedder()
    mem = Memory(tmp_path / "e.db", namespace="n", embedder=emb, config=Config().replace(pyramid={"enabled": False}))
    [first] = mem.add([{"role": "user", "content": "the deploy key lives in vault"}], session="s")
    mem.context("deploy key", budget=200, session="s")  # loads the index
    emb.fail = True
    stored = mem.add([{"role": "user", "content": "second turn"}], session="s")
    assert [t.seq for t in stored] == [2]
    # The turn and its terms are stored; only its vector is missing, and that is reported
    # twice: as work left for the next read (status counts turns without a vector) and as the failure.
    assert [w.split(":")[0] for w in mem.status().warnings] == [
        "1 turns without index (made at the next context, search or ingest)",
        "recall.embed_failed",
    ]
    assert [e.kind for e in mem.events.recent("recall.embed_failed")] == ["recall.embed_failed"]
    assert mem.store.embeddings.turns.counts("n") == (2, 1)
    assert mem.status().embedded_turns == 1
    emb.fail = False
    [third] = mem.add([{"role": "user", "content": "third turn about the deploy key"}], session="s")
    ctx = mem.context("deploy key", budget=300, session="s", policy="recall")
    assert {first.id, third.id} <= {i.turn_ids[0] for i in ctx.manifest.items if i.reason == "recalled"}
    assert mem.status().turns == 3
    assert mem.status().embedded_turns == 3  # the missing vector was made when the index reopened


def test_turns_written_by_another_writer_are_recalled(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    config = Config().replace(pyramid={"enabled": False})
    reader = Memory(path, namespace="team", config=config, embedder=None)
    reader.add([{"role": "user", "content": "hello"}], session="s")
    assert reader.context("kubernetes upgrade", budget=300, policy="recall").manifest.items == ()
    writer = Memory(path, namespace="team", config=config, embedder=None)
    [fact] = writer.add([{"role": "user", "content": "The kubernetes upgrade is planned for June 3."}], session="s")
    ctx = reader.context("kubernetes upgrade", budget=300, policy="recall")
    assert fact.id in {i.turn_ids[0] for i in ctx.manifest.items if i.reason == "recalled"}


def test_tool_results_pair_with_calls_far_back_in_the_session(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "t.db", namespace="n", config=Config().replace(pyramid={"enabled": False}), embedder=None)
    mem.add(
        [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "call_%x_1", "type": "function", "function": {"name": "long_job", "arguments": "{}"}}
                ],
            }
        ],
        session="s",
    )
    mem.add([{"role": "user", "content": f"waiting {i}"} for i in range(300)], session="s")
    [res] = mem.add([{"role": "tool", "tool_call_id": "call_%x_1", "content": "done"}], session="s")
    assert res.turn.tool_result_ids == ("call_%x_1",)


def test_the_pyramid_failing_never_fails_the_add(tmp_path: Path) -> None:
    mem = Memory(
        tmp_path / "p.db",
        namespace="n",
        summarizer=_BrokenSummarizer(),
        config=Config().replace(pyramid={"micro_chunk_size": 2, "defer_summarization": False}),
        embedder=None,
    )
    stored = mem.add([{"role": "user", "content": f"turn {i}"} for i in range(6)], session="s")
    assert [t.seq for t in stored] == list(range(1, 7))
    assert mem.status().turns == 6


def test_a_read_only_store_still_builds_contexts_and_reports_the_unrecorded_manifest(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "ro.db", namespace="n", config=Config().replace(pyramid={"enabled": False}), embedder=None)
    mem.add([{"role": "user", "content": "the release is on Friday"}], session="s")
    with mem.store.lock:  # type: ignore[attr-defined]
        mem.store.connection.execute("PRAGMA query_only = ON")  # type: ignore[attr-defined]
    ctx = mem.context("release day", budget=200, session="s")
    assert ctx.messages[-1]["content"] == "the release is on Friday"
    assert [w.split(":")[0] for w in mem.status().warnings] == ["manifest.record_failed"]


def test_a_second_writer_does_not_force_an_index_rebuild_on_every_call(tmp_path: Path) -> None:
    path = tmp_path / "two.db"
    config = Config().replace(pyramid={"enabled": False})
    a, b = (
        Memory(path, namespace="t", config=config, embedder=None),
        Memory(path, namespace="t", config=config, embedder=None),
    )
    a.add([{"role": "user", "content": "seed turn"}], session="s")
    a.context("seed", budget=200, policy="recall")
    index = a._derived.live.index
    for i in range(4):
        b.add([{"role": "user", "content": f"from b {i}"}], session="s")
        a.add([{"role": "user", "content": f"from a {i}"}], session="s")
        ctx = a.context(f"from b {i}", budget=300, policy="recall")
        assert a._derived.live.index is index  # caught up in place, never rebuilt
        assert {t.text for t in a.turns()} >= {f"from b {i}", f"from a {i}"}
        assert len(index) == a.status().turns
        assert ctx.tokens <= 300


def test_topics_view_truncates_text_blocks_and_tool_results_but_keeps_pairing(tmp_path: Path) -> None:
    from stratamem.providers import structural_problems

    mem = Memory(
        tmp_path / "tb.db",
        namespace="n",
        config=Config().replace(pyramid={"micro_chunk_size": 50, "max_message_chars": 50}),
        embedder=None,
    )
    mem.add(
        [
            {"role": "user", "content": "hello there"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "cat", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "L" * 5000},
            {"role": "assistant", "content": [{"type": "text", "text": "A" * 5000}]},
        ],
        session="s",
    )
    ctx = mem.context(budget=400, session="s", policy="topics")
    assert [m["role"] for m in ctx.messages] == ["user", "assistant", "tool", "assistant"]
    assert ctx.messages[2]["content"] == "L" * 50 + " [truncated: 4,950 of 5,000 characters not shown]"
    assert ctx.messages[3]["content"] == "A" * 50 + " [truncated: 4,950 of 5,000 characters not shown]"
    assert structural_problems(ctx.messages, "openai") == []
    assert mem.turns("s")[2].text == "L" * 5000
