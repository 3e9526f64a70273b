"""Seed 002 (progressive history compression), the rows issue 27's audit found short.

Each test reproduces the audit's finding on the code before the fix.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from stratamem import Config, Memory
from stratamem.tokens import get_tokenizer

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
WORDS = "kettle garden river orange window spoon ladder candle harbour violin pepper meadow".split()


def _long_message(tokens: int) -> str:
    """A message of exactly ``tokens`` o200k tokens: distinct sentences (an inventory read aloud)."""
    tok = get_tokenizer("o200k_base")
    sentences: list[str] = []
    i = 0
    while tok.count(" ".join(sentences)) < tokens:
        sentences.append(f"Box {i} in the {WORDS[i % len(WORDS)]} shed holds {i * 7 % 90 + 3} spare parts.")
        i += 1
    text = " ".join(sentences)
    while tok.count(text) > tokens:
        text = text[:-1]
    return text


@pytest.mark.parametrize("budget", [400, 2000, 4000, 6000])
def test_seed002_large_sealed_topic_never_vanishes(tmp_path: Path, budget: int) -> None:
    """The audit: one 2,509-token message seals a topic by tokens (default ``topics`` preset, deferred
    summaries); the next turn opens a new topic; the ``topics`` context dropped the sealed topic whole."""
    big = _long_message(2509)
    mem = Memory(
        tmp_path / "t.db", namespace="n", config=Config().replace(pyramid={"preset": "topics"}), embedder=None
    )
    assert mem.config.pyramid.defer_summarization
    mem.add([{"role": "user", "content": big, "timestamp": T0.isoformat()}], session="s")
    later = (T0 + timedelta(minutes=1)).isoformat()
    mem.add([{"role": "assistant", "content": "Noted, thanks.", "timestamp": later}], session="s")
    (node,) = mem.pyramid.nodes(level=1)
    assert (node.tier, node.summary, node.reason) == ("hot", None, "tokens")

    ctx = mem.context("what did I write?", budget=budget, session="s", policy="topics", format="text")
    assert ctx.tokens <= budget
    (shown,) = [i for i in ctx.manifest.items if i.id == f"node:{node.id}"]
    assert "not_summarized_and_too_big" not in {m.reason for m in ctx.manifest.near_misses}
    if budget == 400:
        # Not even the excerpt fits: a summary made on demand from its turns (step 2), not stored.
        assert shown.reason == "summary_on_demand"
        assert "Box 0 in the kettle shed holds 3 spare parts." in ctx.text
        assert mem.pyramid.node(node.id).summary is None
    elif budget == 2000:
        # Too big for what is left: an excerpt (seed 002's escalation step 1: each message cut at
        # max_message_chars with a marker), never nothing.
        assert shown.reason == "excerpt"
        assert big[:2000] in ctx.text
        assert f"[truncated: {len(big) - 2000:,} of {len(big):,} characters not shown]" in ctx.text
    else:
        # It does not fit the topics' 30% share but fits what the current topic left: shown whole.
        assert shown.reason == "expanded"
        assert big in ctx.text
