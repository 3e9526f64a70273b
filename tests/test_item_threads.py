"""An account goes on through the conversation: a statement that points back with a pronoun ("She's shy with
guests") or that the other person's question ties to the account ("Did you make a bowl at the studio yet?")
joins its speaker's item, though it shares no word with it; a question that changes the subject does not."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from stratamem import Turn
from stratamem.items.extract import RuleExtractor
from stratamem.items.grouping import MAX_GAP, Piece, group
from stratamem.records.turns import StoredTurn

T0 = datetime(2023, 7, 3, 18, 20, tzinfo=UTC)
CAT = (
    "We finally got a second cat last month, a tabby called Miso who loves sleeping on my keyboard while I work "
    "from home."
)
SHY = (
    "She's shy with guests, but she follows me around the flat all day, and at night she sleeps on my pillow next "
    "to my head."
)
COURSE = (
    "Last week I tried pottery at the studio near my flat, and now I throw clay there every Thursday evening with my "
    "friend Ines."
)
BOWL = "I made a lopsided bowl on the wheel on Saturday and I'm glazing it green next week."
KARIM = (
    "My brother Karim starts his residency at the children's hospital next month and he is nervous about the "
    "night shifts."
)


def _turns(conversation: list[tuple[str, str]]) -> list[StoredTurn]:
    return [
        StoredTurn(
            i + 1,
            "t",
            "s1",
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


def _items(conversation: list[tuple[str, str]]) -> list[tuple[tuple[int, ...], str]]:
    return [(c.turn_ids, c.text) for c in RuleExtractor().extract(_turns(conversation))]


def test_a_statement_pointing_back_with_a_pronoun_continues_the_account() -> None:
    # No content word in common (cat, tabby, Miso / shy, guests, flat, pillow): the pronoun ties them.
    found = _items([("Nadia", CAT), ("Omar", "Aww! What is she like?"), ("Nadia", SHY)])
    assert found == [((1, 3), f"Nadia: {CAT} {SHY}")]


def test_the_other_persons_question_ties_a_statement_to_the_account() -> None:
    # The studio and the bowl share no word; Omar's question is about both (pottery, studio / bowl).
    found = _items([("Nadia", COURSE), ("Omar", "Pottery! Did you make a bowl at the studio yet?"), ("Nadia", BOWL)])
    assert found == [((1, 3), f"Nadia: {COURSE} {BOWL}")]


def test_a_question_that_changes_the_subject_opens_another_item() -> None:
    found = _items([("Nadia", COURSE), ("Omar", "Fun! How is your family doing?"), ("Nadia", KARIM)])
    assert found == [((1,), f"Nadia: {COURSE}"), ((3,), f"Nadia: {KARIM}")]


def test_refers_back_reads_a_pronoun_among_the_first_words_only() -> None:
    from stratamem.items.grouping import refers_back

    assert refers_back("His name's Ned and he's been awesome since I adopted him.") is True
    assert refers_back("It took me three tries to get the glaze right.") is True
    # a pronoun further on, or "it" as an empty subject ("it's", "it sounds"), points back to nothing
    assert refers_back("My brother Karim starts his residency next month.") is False
    assert refers_back("It's amazing how art can show feelings.") is False
    assert refers_back("It sounds like a great trip.") is False


def _piece(turn_id: int, seq: int, speaker: str = "Nadia", terms: str = "", **kw: bool) -> Piece:
    return Piece(turn_id, seq, speaker, f"statement {turn_id}", frozenset(terms.split()), **kw)


def test_group_joins_a_pointing_back_piece_within_the_gap_and_never_an_alone_one() -> None:
    cat, shy = _piece(1, 1, terms="cat tabby"), _piece(2, 3, terms="guests pillow", refers=True)
    assert [[p.turn_id for p in g] for g in group([cat, shy])] == [[1, 2]]
    far = _piece(2, 2 + MAX_GAP, terms="guests", refers=True)
    assert [[p.turn_id for p in g] for g in group([cat, far])] == [[1], [2]]
    alone = _piece(2, 3, terms="guests", refers=True, alone=True)
    assert [[p.turn_id for p in g] for g in group([cat, alone])] == [[1], [2]]


def test_group_links_through_another_speakers_turn_between_only() -> None:
    course, bowl = _piece(1, 1, terms="pottery course"), _piece(3, 3, terms="bowl wheel")
    question = _piece(2, 2, speaker="Omar", terms="pottery bowl")
    assert [[p.turn_id for p in g] for g in group([course, bowl], context=[course, question, bowl])] == [[1, 3]]
    assert [[p.turn_id for p in g] for g in group([course, bowl])] == [[1], [3]]
    # the speaker's own turn between is not a thread, nor a turn after the statement
    own = _piece(2, 2, terms="pottery bowl")
    assert len(group([course, bowl], context=[course, own, bowl])) == 2
    later = _piece(4, 4, speaker="Omar", terms="pottery bowl")
    assert len(group([course, bowl], context=[course, bowl, later])) == 2


def test_an_agents_reply_is_no_thread_between_two_things_a_user_said() -> None:
    # An assistant turn without a name answers everything the user said: it would tie anything to anything.
    conversation = [
        ("Nadia", COURSE),
        ("", "Pottery sounds relaxing! Whether you make a bowl or a vase, the studio time counts. Anything else?"),
        ("Nadia", BOWL),
    ]
    turns = [
        StoredTurn(
            t.id, t.namespace, t.session, t.seq, t.tokens, Turn(role=t.turn.role, content=t.turn.content, name=None)
        )
        if not t.turn.name
        else t
        for t in _turns(conversation)
    ]
    assert [c.turn_ids for c in RuleExtractor().extract(turns)] == [(1,), (3,)]


@st.composite
def _segments(draw: st.DrawFn) -> tuple[list[Piece], list[Piece]]:
    words = st.frozensets(st.sampled_from(["bowl", "studio", "cat", "flat", "race", "job"]), max_size=3)
    n = draw(st.integers(min_value=0, max_value=10))
    context = [
        Piece(
            i + 1,
            i + 1,
            draw(st.sampled_from(["Nadia", "Omar"])),
            f"statement {i + 1}",
            draw(words),
            draw(st.booleans()),
            draw(st.booleans()),
            draw(st.booleans()),
        )
        for i in range(n)
    ]
    kept = [p for p in context if draw(st.booleans())]
    return kept, context


@settings(max_examples=200, deadline=None)
@given(_segments())
def test_every_kept_statement_is_in_one_group_of_one_speaker_in_turn_order_weak_ones_only_continue(
    segment: tuple[list[Piece], list[Piece]],
) -> None:
    kept, context = segment
    groups = group(kept, None, context)
    grouped = sorted(p.turn_id for g in groups for p in g)
    assert len(grouped) == len(set(grouped))  # in at most one group
    assert {p.turn_id for p in kept if not p.weak} <= set(grouped) <= {p.turn_id for p in kept}
    for g in groups:
        assert not g[0].weak  # a weak statement only continues an account
        assert len({p.speaker for p in g}) == 1
        assert [p.seq for p in g] == sorted(p.seq for p in g)
        assert all(b.seq - a.seq <= MAX_GAP for a, b in zip(g, g[1:], strict=False))
        assert len(g) == 1 or not any(p.alone for p in g)


CAMPING = (
    "We went camping at the lake last weekend with my sister and her two kids, and we slept in tents by the water "
    "for three nights."
)
FISH = (
    "Mia and Leo caught their first fish at the lake, a small trout, and we grilled it over the campfire for "
    "dinner that night."
)
CHAT = "Sounds amazing, I love that spot."


def test_a_statement_under_the_bar_continues_an_account_but_makes_no_item_of_its_own() -> None:
    from stratamem.items.extract import JOIN_SALIENCE

    # The fish scores between JOIN_SALIENCE and the default bar: alone it stays a turn; after the camping trip
    # (the same lake) it adds to that account.
    fish = _turns([("Nadia", CAMPING), ("Omar", CHAT), ("Nadia", FISH)])[2]
    kept = RuleExtractor()._kept(fish, None, ["Nadia", "Omar"])
    assert kept is not None and kept.weak and JOIN_SALIENCE <= kept.salience < RuleExtractor().min_salience
    found = _items([("Nadia", CAMPING), ("Omar", CHAT), ("Nadia", FISH)])
    assert found == [((1, 3), f"Nadia: {CAMPING} {FISH}")]
    assert _items([("Nadia", KARIM), ("Omar", CHAT), ("Nadia", FISH)]) == [((1,), f"Nadia: {KARIM}")]
