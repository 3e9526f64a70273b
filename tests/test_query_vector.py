"""The query vector is embedded without the speaker names the question mentions (issue 30).

Every turn is embedded as ``Speaker: text``; a name in the question pulls its vector towards
turns that merely name that person ("Thanks Melanie, …"). The speaker boost carries the person,
so the vector scores what is asked about. Real MiniLM for the ranking, the recording
HashEmbedder for what is embedded.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stratamem import Memory
from stratamem.embed import LocalMiniLM
from stratamem.records import StoredTurn, Turn
from stratamem.retrieve import HybridIndex, read_query
from stratamem.retrieve.query import without_speakers
from stratamem.testing.hash_embedder import HashEmbedder

T0 = datetime(2023, 5, 1, 18, 0, tzinfo=UTC)
SPEAKERS = ("Caroline", "Melanie")
CHAT = [
    ("Caroline", "Hey Melanie! Great to see you, Melanie. How have you been?"),
    ("Melanie", "Hi Caroline! I'm off to go swimming with the kids this afternoon."),
    ("Caroline", "Thanks Melanie, you're such a good friend to me."),
    ("Melanie", "Caroline, I painted a sunset over the lake last week."),
    ("Caroline", "Melanie, I hope your week goes well, Melanie!"),
    ("Melanie", "Talk soon Caroline, take care!"),
]


def _turns() -> list[StoredTurn]:
    return [
        StoredTurn(
            id=i + 1,
            namespace="n",
            session="s1",
            seq=i + 1,
            tokens=12,
            turn=Turn(role="user", content=text, name=name, timestamp=T0 + timedelta(minutes=i)),
        )
        for i, (name, text) in enumerate(CHAT)
    ]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What activities does Melanie partake in?", "What activities does partake in?"),
        ("What do Melanie's kids like?", "What do kids like?"),
        ("What do Caroline and Melanie both like?", "What do and both like?"),
        ("Where did the Melanies go?", "Where did the Melanies go?"),  # a plural is no speaker's name
        ("What did Carolines' friends bring?", "What did friends bring?"),
        ("Melanie?", "Melanie?"),  # nothing else would be left
        ("What did Mel paint?", "What did Mel paint?"),  # "Mel" is no speaker
        ("what does melanie like?", "what does melanie like?"),  # names are matched as written, like read_query
    ],
)
def test_without_speakers_drops_exactly_the_names_read_query_finds(query: str, expected: str) -> None:
    assert without_speakers(query, SPEAKERS) == expected


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(["Melanie", "Melanie's", "Caroline", "what", "kids", "do", "Mel", "?", "it's"]), max_size=8
    )
)
def test_the_stripped_query_names_no_speaker_unless_nothing_else_is_left(words: list[str]) -> None:
    query = " ".join(words)
    out = without_speakers(query, SPEAKERS)
    if not read_query(query, SPEAKERS).speakers:
        assert out == query  # a question naming nobody is embedded as asked
    elif out != query:
        assert read_query(out, SPEAKERS).speakers == frozenset()


def test_the_query_and_its_sub_queries_are_embedded_without_the_names() -> None:
    emb = HashEmbedder()
    ix = HybridIndex(emb)
    ix.add_turns(_turns())
    emb.calls.clear()
    ix.search("What activities does Melanie partake in?", k=3)
    ix.search("What do Caroline and Melanie both like?", k=3)
    assert emb.calls == [
        ["What activities does partake in?"],
        ["What do and both like?", "What do like?", "What do like?"],
    ]


def test_a_context_embeds_the_question_once_for_turns_and_items(tmp_path: Path) -> None:
    """Turn recall and item search (and summary ranking, given the same text) rank with the vector of the
    question without the speaker names: one embedded text, not the stripped one and then the one asked."""
    emb = HashEmbedder()
    mem = Memory(str(tmp_path / "q.db"), embedder=emb)
    mem.add([Turn(role="user", content=text, name=name) for name, text in CHAT], session="s1")
    mem.items.add("Melanie paints sunsets over the lake.", type="fact")
    emb.calls.clear()
    mem.context("What activities does Melanie partake in?", budget=400)
    embedded = [t for call in emb.calls for t in call]
    assert embedded and set(embedded) == {"What activities does partake in?"}
    emb.calls.clear()
    mem.context("What did they paint?", budget=400)  # no speaker named: embedded as asked
    assert {t for call in emb.calls for t in call} == {"What did they paint?"}


def test_a_question_about_a_person_ranks_what_they_did_above_turns_that_only_name_them(minilm: LocalMiniLM) -> None:
    ix = HybridIndex(minilm)
    ix.add_turns(_turns())
    hits = ix.search("What activities does Melanie partake in?", k=6)
    # Swimming and painting first; with the name in the query vector "Talk soon Caroline, take care!" led.
    assert [h.turn_ids[0] for h in hits[:2]] == [2, 4]
