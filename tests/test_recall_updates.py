"""Knowledge updates: the newer of two turns about the same thing ranks first, labelled when it updates the other."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from stratamem import Memory
from stratamem.ingest import IngestSession
from stratamem.records import StoredTurn, Turn
from stratamem.retrieve import Hit, HybridIndex
from stratamem.retrieve.updates import NEWER, SUPERSEDED, Update, find_updates, order_updates

UTC = UTC
MARCH, SEPT = datetime(2023, 3, 2, 10, tzinfo=UTC), datetime(2023, 9, 14, 10, tzinfo=UTC)
DENVER = "I moved to Denver last month for the new job."
AUSTIN = "We just settled into our new place in Austin, finally unpacked."


def _sessions() -> list[IngestSession]:
    def s(name: str, when: datetime, user: str, bot: str) -> IngestSession:
        return IngestSession(
            name,
            [
                Turn(role="user", content=user, timestamp=when),
                Turn(role="assistant", content=bot, timestamp=when + timedelta(seconds=30)),
            ],
        )

    return [
        s("s1", MARCH, DENVER, "Congratulations on the move and the job!"),
        s("s2", MARCH + timedelta(days=40), "I made a lasagna for dinner with my sister.", "Sounds tasty."),
        s("s3", SEPT, AUSTIN, "Welcome to Texas! How is the new neighbourhood?"),
        s("s4", SEPT + timedelta(days=3), "Any tips for growing basil indoors?", "Give it plenty of light."),
    ]


def test_the_newer_of_two_turns_about_where_i_live_ranks_first_and_both_are_labelled(tmp_path: Path, minilm) -> None:
    mem = Memory(tmp_path / "u.db", namespace="u", embedder=minilm)
    mem.add_sessions(_sessions())
    denver, austin = (next(st.id for st in mem.turns() if st.text == t) for t in (DENVER, AUSTIN))
    ctx = mem.context("Where do I live now?", budget=300, format="text", policy="recall")
    recalled = [i.id for i in ctx.manifest.items if i.reason == "recalled"]
    assert {f"turn:{denver}", f"turn:{austin}"} <= set(recalled)
    assert f"user: {NEWER} {AUSTIN}" in ctx.text and f"user: {SUPERSEDED} {DENVER}" in ctx.text
    # The date headers say when each was said.
    assert ctx.text.index("## 2 March 2023") < ctx.text.index(DENVER) < ctx.text.index("## 14 September 2023")
    # The note counts the labels shown (the assistant's replies may form a second group, by ranking).
    newer, older = ctx.text.count(f": {NEWER} "), ctx.text.count(f": {SUPERSEDED} ")
    assert newer >= 1 and older >= 1
    assert f"knowledge updates: {newer} turn(s) marked (newer), {older} marked (superseded?)" in ctx.manifest.notes
    # The ranking itself puts Austin first (what a tight budget keeps).
    tight = mem.context("Where do I live now?", budget=40, format="text", policy="recall")
    assert AUSTIN in tight.text and DENVER not in tight.text
    # Unrelated turns of the same speaker are not grouped.
    assert "lasagna" not in "".join(line for line in ctx.text.splitlines() if NEWER in line or SUPERSEDED in line)
    mem.close()


def _st(i: int, who: str, text: str, day: int) -> StoredTurn:
    return StoredTurn(
        id=i,
        namespace="n",
        session=f"s{i}",
        seq=1,
        tokens=1,
        turn=Turn(role="user", content=text, name=who, timestamp=MARCH + timedelta(days=day)),
    )


TURNS = [
    _st(1, "Ana", "My manager at work is Sarah, she runs the data team.", 0),
    _st(2, "Ana", "My new manager at work is Tom since the reorg of the data team.", 90),
    _st(3, "Ben", "My manager at work is Priya, she runs the data team.", 95),
    _st(4, "Ana", "Sarah is my manager at work and the data team lead.", 0),
]


def test_grouping_needs_the_same_speaker_a_different_day_and_similar_words() -> None:
    index = HybridIndex()
    index.add_turns(TURNS)
    hits = index.search("Who is Ana's manager at work on the data team?", k=4)
    assert {h.turn_ids[0] for h in hits} == {1, 2, 3, 4}
    updates = find_updates(hits, index.turn, index.similarity, lexical=True)
    # Ben's turn is another person's fact; turns 1 and 4 were said the same day (no update between them),
    # but both are linked to turn 2, said 90 days later. Turn 2 updates turn 1 (the manager: Sarah, now Tom);
    # turn 4 names Sarah only as its first word, which is no value, so it is reordered but not labelled.
    assert updates in ([Update(2, (4, 1), (1,))], [Update(2, (1, 4), (1,))])
    ordered, labels = order_updates(hits, updates)
    assert labels == {2: NEWER, 1: SUPERSEDED}
    slots = sorted(n for n, h in enumerate(hits) if h.turn_ids[0] in (1, 2, 4))
    assert ordered[slots[0]].turn_ids == (2,)  # the newest takes the group's best slot
    assert [h.turn_ids for h in ordered if h.turn_ids[0] == 3] == [(3,)]
    assert sorted(h.turn_ids for h in ordered) == sorted(h.turn_ids for h in hits)


def test_weak_hits_and_dissimilar_turns_are_left_alone() -> None:
    same = _st(5, "Ana", "My manager at work is Sarah, she likes the data team.", 30)
    by_id = {t.id: t for t in [*TURNS, same]}
    hits = [Hit("turn:1", "turn", (1,), {"fused": 1.0}), Hit("turn:5", "turn", (5,), {"fused": 0.5})]
    # Turn 5 scores below 60% of the best: not compared by similarity (and it updates nothing).
    assert find_updates(hits, by_id.__getitem__, lambda a, b: 1.0) == []
    hits[1] = Hit("turn:5", "turn", (5,), {"fused": 0.9})
    assert find_updates(hits, by_id.__getitem__, lambda a, b: 0.29) == []
    assert find_updates(hits, by_id.__getitem__, lambda a, b: 0.3) == [Update(5, (1,))]
    assert find_updates([], by_id.__getitem__, lambda a, b: 1.0) == []
    # An update is found however weak its hit (among the top TOP_UPDATES): Tom replaced Sarah.
    weak = [Hit("turn:1", "turn", (1,), {"fused": 1.0}), Hit("turn:2", "turn", (2,), {"fused": 0.1})]
    assert find_updates(weak, by_id.__getitem__, lambda a, b: 0.0) == [Update(2, (1,), (1,))]


def test_a_large_cluster_is_a_topic_not_an_update() -> None:
    turns = [_st(i, "Ana", f"My manager at work is person {i} on the data team.", 10 * i) for i in range(1, 6)]
    by_id = {t.id: t for t in turns}
    hits = [Hit(f"turn:{t.id}", "turn", (t.id,), {"fused": 1.0}) for t in turns]
    assert find_updates(hits, by_id.__getitem__, lambda a, b: 0.9) == []
    # Grouped (and reordered), but "person 3" after "person 2" says nothing changed: no label.
    assert find_updates(hits[:3], by_id.__getitem__, lambda a, b: 0.9) == [Update(3, (2, 1))]
    assert order_updates(hits[:3], [Update(3, (2, 1))])[1] == {}


def test_similar_turns_that_update_nothing_are_reordered_but_not_labelled() -> None:
    trips = [
        _st(1, "Ana", "We spent a week in Hawaii and the beaches were wonderful.", 0),
        _st(2, "Ana", "The yoga retreat in Bali was wonderful, a week of beaches and quiet.", 60),
    ]
    by_id = {t.id: t for t in trips}
    hits = [Hit("turn:1", "turn", (1,), {"fused": 1.0}), Hit("turn:2", "turn", (2,), {"fused": 0.9})]
    groups = find_updates(hits, by_id.__getitem__, lambda a, b: 0.8)
    assert groups == [Update(2, (1,))]  # grouped: the newer ranks first
    ordered, labels = order_updates(hits, groups)
    assert [h.turn_ids for h in ordered] == [(2,), (1,)] and labels == {}


def test_an_update_is_labelled_even_when_its_turns_are_not_similar() -> None:
    moves = [
        _st(1, "Ana", "Since I live in Portland, anything outdoors depends on the weather.", 0),
        _st(2, "Ana", "Now that we've moved to Denver, everything takes a bit longer to find.", 60),
    ]
    by_id = {t.id: t for t in moves}
    hits = [Hit("turn:1", "turn", (1,), {"fused": 1.0}), Hit("turn:2", "turn", (2,), {"fused": 0.9})]
    groups = find_updates(hits, by_id.__getitem__, lambda a, b: 0.05)
    assert groups == [Update(2, (1,), (1,))]
    assert order_updates(hits, groups)[1] == {2: NEWER, 1: SUPERSEDED}


def test_an_assistant_never_updates_a_fact() -> None:
    said = [
        StoredTurn(i, "n", f"s{i}", 1, 1, Turn(role="assistant", content=text, timestamp=MARCH + timedelta(days=d)))
        for i, text, d in (
            (1, "Since you live in Portland, check the weather first.", 0),
            (2, "Now that you moved to Denver, the altitude matters.", 60),
        )
    ]
    by_id = {t.id: t for t in said}
    hits = [Hit("turn:1", "turn", (1,), {"fused": 1.0}), Hit("turn:2", "turn", (2,), {"fused": 0.9})]
    groups = find_updates(hits, by_id.__getitem__, lambda a, b: 0.9)
    assert groups == [Update(2, (1,))] and order_updates(hits, groups)[1] == {}
