"""Memory items of several turns: one speaker's account of one thing in a segment becomes one item citing every
turn that adds to it; another subject, another speaker, a far turn, or a statement that sets an attribute or
settles something does not join."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from stratamem import Config, Memory, Turn
from stratamem.items.extract import DEFAULT_MIN_SALIENCE, RuleExtractor
from stratamem.items.grouping import JOIN_COSINE, MAX_GAP, Piece, group, related
from stratamem.records.turns import StoredTurn
from stratamem.retrieve.corpus import TurnCorpus

T0 = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
POTTERY = (
    "Hey Omar! Guess what, last Saturday I went to my first pottery class and I made a bowl on the wheel "
    "with my friend Ines."
)
LOPSIDED = (
    "The bowl came out lopsided after three tries, but Ines said my centering on the wheel gets better every week."
)
GLAZE = "I'm going back next Saturday to glaze the bowl, and I want to try making a small vase on the wheel."
BUDGET = (
    "Busy week at the office, my manager Sofia asked me to run the quarterly budget review for the finance team "
    "by Friday."
)
LISBON = "We moved to Lisbon last spring, so the commute to my office is much shorter now and I walk to work every day."
CONVERSATION = [
    ("Nadia", POTTERY),
    ("Omar", "No way, that's so cool! How did it go?"),
    ("Nadia", LOPSIDED),
    ("Omar", "Ha, lopsided bowls have character. Are you going back?"),
    ("Nadia", GLAZE),
    ("Omar", "Sounds fun! And how's work these days?"),
    ("Nadia", BUDGET),
    ("Omar", "Good luck with that, you'll nail it."),
    ("Nadia", LISBON),
    ("Omar", "Lisbon is lovely, I'm jealous!"),
]


def _turns(conversation: list[tuple[str, str]], session: str = "s1", first_id: int = 1) -> list[StoredTurn]:
    return [
        StoredTurn(
            first_id + i,
            "t",
            session,
            i + 1,
            30,
            Turn(
                role="user" if name == "Nadia" else "assistant",
                content=text,
                name=name,
                timestamp=T0 + timedelta(seconds=30 * i),
            ),
        )
        for i, (name, text) in enumerate(conversation)
    ]


def _vectors(minilm: object, turns: list[StoredTurn]) -> dict[int, np.ndarray]:
    # what the recall index stores for a turn: MiniLM of "Speaker: text"
    rows = np.asarray(minilm.embed_batch([TurnCorpus.text(t) for t in turns]))  # type: ignore[attr-defined]
    return {t.id: rows[i] for i, t in enumerate(turns)}


def _outcome(found: list) -> list[tuple[tuple[int, ...], str]]:  # type: ignore[type-arg]
    return [(c.turn_ids, c.text) for c in found]


EXPECTED = [
    ((1, 3, 5), f"Nadia: {POTTERY.removeprefix('Hey Omar! ')} {LOPSIDED} {GLAZE}"),
    ((7,), f"Nadia: {BUDGET}"),
    ((9,), f"Nadia: {LISBON}"),
]


def test_an_account_told_over_three_turns_is_one_item_citing_all_three(minilm: object) -> None:
    turns = _turns(CONVERSATION)
    found = RuleExtractor().extract(turns, vectors=_vectors(minilm, turns))
    assert _outcome(found) == EXPECTED
    pottery = found[0]
    # type, time and slot are the most salient statement's ("I want to try making a small vase")
    assert (pottery.type, pottery.valid_from, pottery.slot) == ("preference", turns[4].timestamp, None)
    assert pottery.salience == max(c.salience for c in RuleExtractor().extract(turns[4:5], before=turns[3:4]))


def test_without_vectors_shared_words_decide_and_give_the_same_items() -> None:
    assert _outcome(RuleExtractor().extract(_turns(CONVERSATION))) == EXPECTED


def test_a_turn_on_the_same_thing_too_far_away_opens_its_own_item(minilm: object) -> None:
    chatter = [("Omar", "Haha nice."), ("Nadia", "Yeah!")] * 3  # more than MAX_GAP positions between
    conversation = [*CONVERSATION[:4], *chatter, *CONVERSATION[4:6]]
    assert conversation[10][1] == GLAZE and 11 - 3 > MAX_GAP
    turns = _turns(conversation)
    found = RuleExtractor().extract(turns, vectors=_vectors(minilm, turns))
    assert [c.turn_ids for c in found] == [(1, 3), (11,)]


def test_another_speaker_never_joins_an_account(minilm: object) -> None:
    conversation = [CONVERSATION[0], ("Omar", f"Same here! {LOPSIDED}"), CONVERSATION[4]]
    turns = _turns(conversation)
    found = RuleExtractor().extract(turns, vectors=_vectors(minilm, turns))
    assert [(c.turn_ids, c.text.partition(":")[0]) for c in found] == [((1, 3), "Nadia"), ((2,), "Omar")]


def test_a_statement_that_sets_an_attribute_or_settles_something_stands_alone(minilm: object) -> None:
    moved = "We moved to Lisbon last spring and the new flat is ten minutes from my office, so I walk every day."
    decided = "We decided to keep the flat in Lisbon and I'll walk to the office every day."
    conversation = [
        ("Nadia", LISBON),
        ("Omar", "Nice!"),
        ("Nadia", moved),
        ("Omar", "Great."),
        ("Nadia", decided),
    ]
    turns = _turns(conversation)
    found = RuleExtractor().extract(turns, vectors=_vectors(minilm, turns))
    assert [c.turn_ids for c in found] == [(1,), (3,), (5,)]
    assert [c.slot for c in found][:2] == ["nadia:residence", "nadia:residence"]
    assert found[2].type == "decision"


def _piece(turn_id: int, seq: int, speaker: str = "Nadia", terms: str = "", alone: bool = False) -> Piece:
    return Piece(turn_id, seq, speaker, f"statement {turn_id}", frozenset(terms.split()), alone=alone)


def test_group_joins_by_cosine_of_any_member_and_by_words_only_without_vectors() -> None:
    east, north = np.array([1.0, 0.0]), np.array([0.0, 1.0])
    diagonal = np.array([1.0, 1.0]) / np.sqrt(2)  # cosine 0.71 with both
    a, b, c = _piece(1, 1, terms="bowl"), _piece(2, 3, terms="budget"), _piece(3, 5, terms="bowl")
    vectors = {1: east, 2: diagonal, 3: north}
    assert [[p.turn_id for p in g] for g in group([a, b, c], vectors)] == [[1, 2, 3]]
    assert [[p.turn_id for p in g] for g in group([a, b, c], {1: east, 2: north, 3: north})] == [[1], [2, 3]]
    # words only when a vector is missing; an account is the speaker's latest: the budget closed the bowl's
    assert [[p.turn_id for p in g] for g in group([a, b, c])] == [[1], [2], [3]]
    d = _piece(4, 3, terms="bowl")
    assert [[p.turn_id for p in g] for g in group([a, d, c])] == [[1, 4, 3]]
    assert related(c, [a], {3: north}) is True  # a's vector is missing: their shared word decides
    assert related(c, [a], {1: east, 3: north}) is False  # both vectors known: 0.0 < JOIN_COSINE
    assert JOIN_COSINE > 0.0


def test_group_keeps_alone_pieces_single_and_the_speaker_account_open_past_them() -> None:
    pieces = [_piece(1, 1, terms="bowl"), _piece(2, 3, terms="bowl", alone=True), _piece(3, 5, terms="bowl")]
    assert [[p.turn_id for p in g] for g in group(pieces)] == [[1, 3], [2]]


def test_memory_stores_one_item_citing_every_turn_of_the_account(tmp_path: Path, minilm: object) -> None:
    config = Config().replace(pyramid={"defer_summarization": False, "micro_chunk_size": 10})
    mem = Memory(str(tmp_path / "g.db"), namespace="g", config=config, embedder=minilm)
    added = mem.add(
        [
            {
                "role": "user" if n == "Nadia" else "assistant",
                "content": t,
                "name": n,
                "timestamp": T0 + timedelta(seconds=30 * i),
            }
            for i, (n, t) in enumerate(CONVERSATION)
        ],
        session="s1",
    )
    ids = [t.id for t in added]
    items = sorted(mem.items.list(), key=lambda i: i.provenance[0])
    assert [(tuple(i.provenance), i.content) for i in items] == [
        ((ids[0], ids[2], ids[4]), EXPECTED[0][1]),
        ((ids[6],), EXPECTED[1][1]),
        ((ids[8],), EXPECTED[2][1]),
    ]
    # the same turns told again in another session add nothing new: one item per fact
    mem.add([{**t.turn.to_dict(), "timestamp": T0 + timedelta(days=1)} for t in mem.turns()], session="s2")
    assert len(mem.items.list()) == 3
    mem.close()


def test_the_default_threshold_is_the_documented_one() -> None:
    assert RuleExtractor().min_salience == DEFAULT_MIN_SALIENCE == 0.75


@pytest.mark.parametrize("gap", [MAX_GAP, MAX_GAP + 1])
def test_group_gap_bound_is_inclusive(gap: int) -> None:
    pieces = [_piece(1, 1, terms="bowl"), _piece(2, 1 + gap, terms="bowl")]
    assert len(group(pieces)) == (1 if gap <= MAX_GAP else 2)


def test_without_vectors_a_shared_photo_caption_does_not_make_two_things_one() -> None:
    # The LoCoMo reader appends a shared photo's caption to the turn; its words say nothing the speaker states
    # (this joined the bread and the brother's residency before the words were read from the statements).
    caption = " [shares a photo of a golden medal on a wooden table]"
    conversation = [
        (
            "Nadia",
            "I spent Sunday baking sourdough bread with my neighbour Rita and the loaves came out crusty and tall.",
        ),
        ("Omar", "Wow, congrats! What's new with your family?"),
        (
            "Nadia",
            "My brother Karim starts his residency at the children's hospital next month and he is nervous about "
            "the night shifts.",
        ),
    ]
    turns = _turns([(who, text + caption if who == "Nadia" else text) for who, text in conversation])
    assert [c.turn_ids for c in RuleExtractor().extract(turns)] == [(1,), (3,)]
