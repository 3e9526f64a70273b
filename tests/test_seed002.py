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
    mem = Memory(tmp_path / "t.db", namespace="n", config=Config().replace(pyramid={"preset": "topics"}), embedder=None)
    assert mem.config.pyramid.defer_summarization
    mem.add([{"role": "user", "content": big, "timestamp": T0.isoformat()}], session="s")
    later = (T0 + timedelta(minutes=1)).isoformat()
    mem.add([{"role": "assistant", "content": "Noted, thanks.", "timestamp": later}], session="s")
    (node,) = mem.pyramid.nodes(level=1)
    assert (node.tier, node.summary, node.reason) == ("hot", None, "tokens")

    ctx = mem.context("what did I write?", budget=budget, session="s", policy="topics", format="text")
    assert ctx.tokens <= budget
    assert "not_summarized_and_too_big" not in {m.reason for m in ctx.manifest.near_misses}
    (shown,) = [i for i in ctx.manifest.items if i.id == f"node:{node.id}"]
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


ALLERGIES_TO_CELLO = [
    "My daughter Maya was just diagnosed with a peanut allergy and I'm a bit overwhelmed.",
    "That's a lot to take in. Did the allergist give you an action plan and an epinephrine auto-injector?",
    "Yes, two EpiPens. One stays at school with the nurse, one in my bag.",
    "Good. It's worth checking the expiry dates and showing her teachers how to use it.",
    "Her school has a nut-free table at lunch but I worry about birthday parties with cake.",
    "Many parents bring a safe treat for their child to parties; you can also ask the host about ingredients.",
    "By the way, her cello lessons start again next week and she hasn't practised all summer.",
    "Short daily sessions work better than one long one. Fifteen minutes of scales and one piece is plenty.",
    "Her teacher wants her to learn the Bach minuet for the recital in December.",
    "Break the minuet into four-bar phrases and practise the tricky bowing slowly with a metronome.",
    "Should I rent a bigger cello? She's grown a lot.",
    "A half-size is usually right around age nine; ask her teacher to check her reach and bow arm.",
]


def _chat(texts: list[str]) -> list[dict[str, str]]:
    return [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": text,
            "timestamp": (T0 + timedelta(minutes=i)).isoformat(),
        }
        for i, text in enumerate(texts)
    ]


def _segments(mem: Memory) -> list[tuple[str, list[int]]]:
    return [(n.reason, list(mem.pyramid.turn_ids(n.id))) for n in mem.pyramid.nodes(level=1)]


@pytest.mark.parametrize("one_by_one", [False, True])
def test_seed002_subject_change_seals_a_topic(tmp_path: Path, one_by_one: bool) -> None:
    """The audit: 12 turns moving from a child's allergies to cello practice, with no phrase, no gap and
    under the token threshold, gave 0 segments. The turns' stored vectors show the change of subject."""
    mem = Memory(tmp_path / "t.db", namespace="n", config=Config().replace(pyramid={"preset": "topics"}))
    msgs = _chat(ALLERGIES_TO_CELLO)
    for batch in [[m] for m in msgs] if one_by_one else [msgs]:
        mem.add(batch, session="s")
    ids = [t.id for t in mem.turns("s")]
    assert _segments(mem) == [("subject", ids[:6])]
    assert [t.id for t in mem.pyramid.open_turns("s")] == ids[6:]


def test_seed002_subject_change_needs_vectors_and_can_be_turned_off(tmp_path: Path) -> None:
    """Without an embedder (no turn vectors), or with the rule off, the same turns stay one topic."""
    off = Config().replace(pyramid={"preset": "topics", "subject_change_similarity": 0.0})
    for name, config, embedder in [("none", Config().replace(pyramid={"preset": "topics"}), None), ("off", off, ...)]:
        kwargs = {} if embedder is ... else {"embedder": embedder}
        mem = Memory(tmp_path / f"{name}.db", namespace="n", config=config, **kwargs)
        mem.add(_chat(ALLERGIES_TO_CELLO), session="s")
        assert mem.pyramid.nodes(level=1) == []


@pytest.mark.parametrize(
    "opening",
    [
        "Let\u2019s move on: what about the garden?",
        "let\u2019s move on to the garden",
        "OK, changing the subject, what about the garden?",
        "To change the subject: the garden.",
        "On a different note, the garden needs work.",
    ],
)
def test_seed002_typographic_apostrophe_and_changing_the_subject_start_a_topic(tmp_path: Path, opening: str) -> None:
    """The audit: ``Let’s move on`` (U+2019) and "changing the subject" were not detected as boundaries."""
    mem = Memory(tmp_path / "t.db", namespace="n", config=Config().replace(pyramid={"preset": "topics"}), embedder=None)
    mem.add(_chat(["The invoice is due Friday.", "I'll pay it Thursday.", opening, "Sure."]), session="s")
    ids = [t.id for t in mem.turns("s")]
    assert _segments(mem) == [("phrase", ids[:2])]


def test_seed002_long_message_truncated_only_when_the_current_topic_exceeds_its_allocation(tmp_path: Path) -> None:
    """The audit: a >2,000-character message was truncated even with the topic far under its share (B = 50,000)."""
    mem = Memory(tmp_path / "t.db", namespace="n", config=Config().replace(pyramid={"preset": "topics"}), embedder=None)
    long = "The kiln log reads: " + " ".join(
        f"firing {i} reached cone {i % 10} at {900 + i} degrees." for i in range(90)
    )
    assert len(long) > 2000
    mem.add(_chat(["Here is the kiln log.", long]), session="s")
    roomy = mem.context("kiln", budget=50_000, session="s", policy="topics", format="text")
    assert long in roomy.text
    assert "[truncated:" not in roomy.text
    # The topic (about 900 tokens) exceeds half of a 1,200-token budget: now the long message is cut.
    tight = mem.context("kiln", budget=1200, session="s", policy="topics", format="text")
    assert long[:2000] + f" [truncated: {len(long) - 2000:,} of {len(long):,} characters not shown]" in tight.text
