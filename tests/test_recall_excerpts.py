"""Over-long recalled turns are shown as the passage that matches the query, marked as an excerpt."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stratamem import Memory
from stratamem.ingest import IngestSession
from stratamem.records import StoredTurn, Turn
from stratamem.retrieve import analyze, pack_turns
from stratamem.retrieve.excerpt import excerpt
from stratamem.tokens import get_tokenizer

TOK = get_tokenizer("o200k_base")
T0 = datetime(2024, 2, 1, 9, 0, tzinfo=UTC)
NEEDLE = "The sourdough starter needs feeding with rye flour every twelve hours."
FILLER = [
    f"Section {i}: general notes on kitchen organisation, shelves, labels and cleaning routines." for i in range(60)
]
LONG = " ".join(FILLER[:30] + [NEEDLE] + FILLER[30:])


def test_the_passage_grows_around_the_best_sentence_within_the_cap() -> None:
    text = "Alpha one. Bravo two. The rye starter is fed twice. Delta four. Echo five."
    ex = excerpt(text, analyze("how often is the rye starter fed"), 14, TOK)
    assert ex is not None
    # Ties grow forward: the text after the match is read before the text before it.
    assert ex.text == "… The rye starter is fed twice. Delta four. Echo five."
    assert text[ex.start : ex.end] == "The rye starter is fed twice. Delta four. Echo five."
    assert ex.tokens == TOK.count(ex.text) <= 14 and ex.total_tokens == TOK.count(text)
    # Nothing matches: the opening; nothing fits: no excerpt.
    assert excerpt(text, ["zebra"], 6, TOK).text == "Alpha one. …"  # type: ignore[union-attr]
    assert excerpt(text, ["rye"], 2, TOK) is None


def test_a_text_without_punctuation_is_cut_into_word_runs() -> None:
    words = " ".join(f"w{i}" for i in range(200)) + " needle " + " ".join(f"v{i}" for i in range(200))
    ex = excerpt(words, ["needl"], 60, TOK)
    assert ex is not None and "needle" in ex.text and ex.tokens <= 60
    assert ex.text.startswith("… ") and ex.text.endswith(" …")


def _turn(i: int, text: str, day: int) -> StoredTurn:
    return StoredTurn(
        id=i,
        namespace="ns",
        session=f"s{day}",
        seq=i,
        tokens=1,
        turn=Turn(role="assistant", content=text, timestamp=T0 + timedelta(days=day), name="Bot"),
    )


def test_packing_shows_a_long_hit_as_an_excerpt_instead_of_skipping_or_spending_it() -> None:
    long, short = _turn(1, LONG, 0), _turn(2, "The rye bread came out dense.", 1)
    assert TOK.count(LONG) > 900
    packed = pack_turns([long, short], 512, TOK, query="How often do I feed the rye sourdough starter?")
    assert [t.id for t in packed.turns] == [1, 2] and packed.tokens <= 512
    ex = packed.excerpts[1]
    assert NEEDLE in ex.text and ex.tokens <= 64 and ex.total_tokens == TOK.count(LONG)
    assert f"Bot: (excerpt: {ex.tokens} of {ex.total_tokens:,} tokens) … " in packed.text
    # Without a query there is no passage to prefer: skipped, as before.
    assert [t.id for t in pack_turns([long, short], 512, TOK).turns] == [2]
    # Opted out (long_share 1): the long turn does not fit and is skipped, as before.
    plain = pack_turns([long, short], 512, TOK, query="rye starter", long_share=1.0)
    assert [t.id for t in plain.turns] == [2] and plain.skipped == (1,) and not plain.excerpts


def test_memory_context_marks_the_excerpt_in_the_manifest_and_keeps_the_full_turn(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "x.db", namespace="k")
    mem.add_sessions(
        [
            IngestSession(
                "old",
                [
                    Turn(role="user", content="How do I keep a sourdough starter alive?", timestamp=T0),
                    Turn(role="assistant", content=LONG, timestamp=T0 + timedelta(seconds=30)),
                ],
            ),
            IngestSession(
                "new", [Turn(role="user", content="Thanks, baking today.", timestamp=T0 + timedelta(days=3))]
            ),
        ]
    )
    ctx = mem.context("How often should the rye starter be fed?", budget=600, format="text", policy="recall")
    long_id = mem.turns("old")[1].id
    [item] = [i for i in ctx.manifest.items if i.id == f"turn:{long_id}"]
    assert item.format == "excerpt" and item.reason == "recalled"
    [note] = [n for n in ctx.manifest.notes if n.startswith(f"turn:{long_id} shown as an excerpt")]
    assert f"of {TOK.count(LONG)} tokens" in note
    assert NEEDLE in ctx.text and FILLER[0] not in ctx.text and ctx.tokens <= 600
    assert mem.turns("old")[1].text == LONG  # the stored turn is whole
    mem.close()


_MEM: dict[str, Memory] = {}


def _shared_memory(tmp_path_factory) -> Memory:
    if "m" not in _MEM:
        mem = Memory(tmp_path_factory.mktemp("ex") / "p.db", namespace="p")
        mem.add(
            [
                {"role": "user", "content": "Where is the vault code written down?"},
                {"role": "assistant", "content": LONG.replace(NEEDLE, "The vault code is 4471, on the card.")},
            ],
            session="old",
        )
        mem.add(
            [{"role": "user", "content": f"Status update {i}: the build is green."} for i in range(30)]
            + [{"role": "assistant", "content": " ".join(FILLER[:20])}],
            session="now",
        )
        _MEM["m"] = mem
    return _MEM["m"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
# From 4: 3 Anthropic tokens are 2 o200k tokens, below the request overhead (test_shells checks it raises).
@given(
    budget=st.integers(min_value=4, max_value=2500),
    policy=st.sampled_from(["hybrid", "recall", "pyramid"]),
    fmt=st.sampled_from(["text", "openai", "anthropic"]),
    query=st.sampled_from([None, "vault code", "What is the vault code?", "build status"]),
)
def test_contexts_with_long_turns_never_exceed_the_budget(
    tmp_path_factory, budget: int, policy: str, fmt: str, query: str | None
) -> None:
    mem = _shared_memory(tmp_path_factory)
    ctx = mem.context(query, budget=budget, session="now", format=fmt, policy=policy)
    assert ctx.tokens <= budget
    excerpts = [i for i in ctx.manifest.items if i.format == "excerpt"]
    for item in excerpts:  # every excerpt shown is announced in the text and explained in the notes
        assert any(n.startswith(f"{item.id} shown as an excerpt: ") for n in ctx.manifest.notes)
    assert ctx.text.count("(excerpt: ") == len(excerpts)
