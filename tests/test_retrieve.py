"""Hybrid recall: analysis, BM25, fused ranking with structure, dates and speakers, budget packing."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stratamem import Config, Memory
from stratamem.context import Candidates, ItemUnit, Recalled, assemble
from stratamem.context.sources import SummaryIndex
from stratamem.errors import BudgetError, ModelError, ValidationError
from stratamem.records import StoredTurn, Turn
from stratamem.retrieve import (
    BM25Index,
    CompactRenderer,
    HybridIndex,
    PlainRenderer,
    Weights,
    analyze,
    pack_turns,
    read_query,
    stem,
)
from stratamem.retrieve.engine import LEXICAL_WEIGHTS, passages
from stratamem.tokens import get_tokenizer

T0 = datetime(2023, 5, 8, 13, 0, tzinfo=UTC)


def _turns(sessions: Sequence[tuple[datetime, Sequence[tuple[str, str]]]]) -> list[StoredTurn]:
    out, n = [], 0
    for s, (start, lines) in enumerate(sessions, 1):
        for seq, (who, text) in enumerate(lines, 1):
            n += 1
            out.append(
                StoredTurn(
                    id=n,
                    namespace="ns",
                    session=f"session_{s}",
                    seq=seq,
                    tokens=1,
                    turn=Turn(
                        role="user" if who == "Ana" else "assistant",
                        content=text,
                        timestamp=start + timedelta(seconds=30 * seq),
                        name=who,
                    ),
                )
            )
    return out


class _BagOfWords:
    """A deterministic embedder for tests: hashed word counts, L2-normalised."""

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), 64), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in analyze(t):
                out[i, sum(map(ord, w)) % 64] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)


def test_stemmer_conflates_forms_of_one_word() -> None:
    assert {stem(w) for w in ("painting", "painted", "paints", "paint")} == {"paint"}
    assert {stem(w) for w in ("running", "runs")} == {"run"}
    assert {stem(w) for w in ("hiking", "hiked", "hikes", "hike")} == {"hik"}
    assert stem("stories") == stem("story")
    assert stem("bus") == "bus" and stem("class") == "class"


def test_analyze_drops_function_words_and_apostrophes() -> None:
    assert analyze("What did Caroline's kids paint?") == ["carolin", "kid", "paint"]


def test_bm25_scores_match_the_formula() -> None:
    index = BM25Index(k1=1.2, b=0.75)
    index.extend([["dog", "dog", "cat"], ["cat"], ["bird", "fish"]])
    s = index.scores(["dog", "unknown"])
    idf = math.log(1 + (3 - 1 + 0.5) / (1 + 0.5))
    avg = 2.0
    expected = idf * 2 * 2.2 / (2 + 1.2 * (1 - 0.75 + 0.75 * 3 / avg))
    assert s[0] == pytest.approx(expected)
    assert s[1] == 0.0 and s[2] == 0.0


def test_query_reading_finds_speakers_months_and_years() -> None:
    facts = read_query("What did Ana do in June 2023 and in 2022? May Ben come?", {"Ana", "Ben", "Cy"})
    assert facts.speakers == {"Ana", "Ben"}
    assert facts.dates == ((2023, 6), (2022, None))
    assert facts.date_match(datetime(2023, 6, 30, tzinfo=UTC)) == 1.0
    assert facts.date_match(datetime(2023, 7, 1, tzinfo=UTC)) == 0.0
    assert read_query("Where did Cy go in May?", {"Cy"}).dates == ((None, 5),)


CHAT = [
    (
        T0,
        [
            ("Ben", "Dance is my go-to for stress relief. Got any favorite styles?"),
            ("Ana", "Contemporary is so expressive and graceful, it speaks to me."),
            ("Ben", "Nice. I also started a pottery class."),
        ],
    ),
    (
        T0 + timedelta(days=30),
        [("Ana", "We went camping at the lake with the kids."), ("Ben", "Sounds fun, I love the lake too.")],
    ),
]


def test_a_reply_is_found_through_the_question_it_answers() -> None:
    turns = _turns(CHAT)
    plain = HybridIndex(weights=Weights(lexical_window=0, lexical_session=0, lexical_prev=0, lexical_next=0, speaker=0))
    plain.add_turns(turns)
    scores = {h.turn_ids[0]: h.score["fused"] for h in plain.search("Which favorite style of dance?", k=5)}
    assert scores[1] > 0 and scores[2] == 0.0
    index = HybridIndex()
    index.add_turns(turns)
    hits = index.search("Which favorite style of dance?", k=3)
    assert [h.turn_ids for h in hits[:2]] == [(1,), (2,)]
    assert hits[1].score["fused"] > hits[2].score["fused"]
    assert hits[1].score["lexical"] == 0.0 and hits[1].score["lexical_prev"] == 0.5


def test_a_date_in_the_query_prefers_turns_of_that_month() -> None:
    index = HybridIndex()
    index.add_turns(_turns(CHAT))
    assert index.search("What did Ben love at the lake in June 2023?", k=1)[0].turn_ids == (5,)
    hit = index.search("What did Ben say about the lake in May 2023?", k=5)
    assert hit[0].score["date"] == 0.0 and any(h.score.get("date") == 0.5 for h in hit)


def test_hits_carry_provenance_and_a_score_breakdown() -> None:
    index = HybridIndex()
    index.add_turns(_turns(CHAT))
    hit = index.search("pottery class", k=1)[0]
    assert hit.id == "turn:3" and hit.kind == "turn" and hit.turn_ids == (3,)
    assert hit.score["fused"] == pytest.approx(sum(v for k, v in hit.score.items() if k != "fused"))
    assert index.lexical_only and "vector" not in hit.score and "vector_passage" not in hit.score


def test_vectors_join_the_fusion_when_an_embedder_is_given() -> None:
    index = HybridIndex(embedder=_BagOfWords())
    index.add_turns(_turns(CHAT))
    hit = index.search("pottery class", k=1)[0]
    assert not index.lexical_only
    # Cosine 1, weighted; passages are not embedded by default.
    assert hit.turn_ids == (3,) and hit.score["vector"] == pytest.approx(Weights().vector)
    assert "vector_passage" not in hit.score and index.weights == Weights()
    assert HybridIndex().weights == LEXICAL_WEIGHTS and LEXICAL_WEIGHTS.lexical > LEXICAL_WEIGHTS.lexical_prev


def test_the_index_grows_and_ignores_turns_it_already_holds() -> None:
    turns = _turns(CHAT)
    index = HybridIndex()
    index.add_turns(turns[:3])
    assert index.search("lake", k=1)[0].score["fused"] == 0.0
    index.add_turns(turns)
    assert len(index) == 5
    assert index.search("camping lake", k=1)[0].turn_ids == (4,)
    assert index.turn(4) is turns[3]


def test_bad_arguments_raise_clear_errors() -> None:
    index = HybridIndex()
    assert index.search("anything", k=3) == []
    with pytest.raises(ValidationError, match="k must be"):
        index.search("x", k=0)
    with pytest.raises(ValidationError, match="query must be"):
        index.search(None, k=1)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="speaker"):
        Weights(speaker=-1)
    with pytest.raises(BudgetError):
        pack_turns([], 0, get_tokenizer("o200k_base"))


_TOK = get_tokenizer("o200k_base")


_CHARS = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
# Long texts made of sentences (words, punctuation, newlines) so some turns are excerpted.
_SENTENCES = st.lists(
    st.lists(
        st.sampled_from(["dog", "lake", "the", "pottery", "a", "ok", "!", "\n", "é"]), min_size=1, max_size=30
    ).map(" ".join),
    max_size=40,
).map(". ".join)


@settings(max_examples=80, deadline=None)
@given(
    texts=st.lists(st.one_of(st.text(_CHARS, max_size=60), _SENTENCES), min_size=1, max_size=12),
    budget=st.integers(min_value=1, max_value=400),
    plain=st.booleans(),
    query=st.sampled_from([None, "", "dog lake", "pottery"]),
    labelled=st.booleans(),
)
def test_packing_never_exceeds_the_budget(
    texts: list[str], budget: int, plain: bool, query: str | None, labelled: bool
) -> None:
    lines = [("Ana" if i % 2 else "Ben", t) for i, t in enumerate(texts)]
    turns = _turns([(T0, lines[: len(lines) // 2]), (T0 + timedelta(days=1), lines[len(lines) // 2 :])])
    labels = {t.id: "(newer)" for t in turns[::2]} if labelled else None
    packed = pack_turns(reversed(turns), budget, _TOK, PlainRenderer() if plain else None, query=query, labels=labels)
    assert packed.tokens <= budget
    assert packed.tokens == (_TOK.count(packed.text) if packed.turns else 0)
    assert {t.id for t in packed.turns} | set(packed.skipped) == {t.id for t in turns}
    renderer = PlainRenderer() if plain else CompactRenderer()
    assert all(packed.costs[t.id] == _TOK.count(renderer.line(t, packed.texts.get(t.id))) + 1 for t in packed.turns)
    for t in packed.turns:
        ex = packed.excerpts.get(t.id)
        if ex is not None:  # an excerpt is announced, counted and a real passage of the turn
            assert f"(excerpt: {ex.tokens:,} of {ex.total_tokens:,} tokens) " in packed.texts[t.id]
            assert ex.total_tokens == _TOK.count(t.text) and ex.tokens == _TOK.count(ex.text) < ex.total_tokens
            assert ex.text.strip("… ") == t.text[ex.start : ex.end].strip("… ")
        elif labels and t.id in labels:
            assert packed.texts[t.id] == f"(newer) {t.text}"
    if not query:
        assert not packed.excerpts  # no query words: nothing to excerpt for


_WORDS = "dog cat lake camping pottery dance paint rome marathon beagle puppy class june book".split()


@st.composite
def _interleaved(draw: st.DrawFn) -> tuple[list[StoredTurn], list[int], list[str]]:
    """Turns of several sessions written in an interleaved order, batch cut points, and queries."""
    n = draw(st.integers(min_value=1, max_value=40))
    sessions = draw(st.lists(st.integers(min_value=1, max_value=4), min_size=n, max_size=n))
    words = st.lists(st.sampled_from(_WORDS), min_size=0, max_size=6).map(" ".join)
    seq: dict[int, int] = {}
    turns = []
    for i, s in enumerate(sessions, 1):
        seq[s] = seq.get(s, 0) + 1
        who = draw(st.sampled_from(["Ana", "Ben", None]))
        turns.append(
            StoredTurn(
                id=i,
                namespace="ns",
                session=f"s{s}",
                seq=seq[s],
                tokens=1,
                turn=Turn(role="user", content=draw(words), name=who, timestamp=T0 + timedelta(days=30 * s, seconds=i)),
            )
        )
    cuts = sorted(draw(st.lists(st.integers(min_value=1, max_value=n), max_size=6)))
    queries = draw(
        st.lists(
            st.lists(st.sampled_from(_WORDS + ["Ana", "June", "2023"]), min_size=1, max_size=4).map(" ".join),
            min_size=1,
            max_size=3,
        )
    )
    return turns, cuts, queries


@settings(max_examples=40, deadline=None)
@given(case=_interleaved(), window=st.integers(min_value=0, max_value=3), vectors=st.booleans())
def test_an_incremental_index_ranks_exactly_as_a_fresh_one(case: tuple, window: int, vectors: bool) -> None:
    turns, cuts, queries = case
    weights = Weights(window=window, vector_session=0.4, vector_prev=0.2, vector_next=0.2)
    grown = HybridIndex(embedder=_BagOfWords() if vectors else None, weights=weights)
    done = 0
    for cut in cuts + [len(turns)]:
        grown.add_turns(turns[done:cut])
        done = max(done, cut)
        grown.search(queries[0], k=3)  # searching between batches must not disturb later results
        fresh = HybridIndex(embedder=_BagOfWords() if vectors else None, weights=weights)
        fresh.add_turns(turns[:done])
        for q in queries:
            a, b = grown.search(q, k=len(turns)), fresh.search(q, k=len(turns))
            assert [h.id for h in a] == [h.id for h in b]
            for x, y in zip(a, b, strict=True):
                assert x.score.keys() == y.score.keys()
                assert all(abs(x.score[k] - y.score[k]) <= 1e-9 for k in x.score)


@settings(max_examples=30, deadline=None)
@given(case=_interleaved(), window=st.integers(min_value=0, max_value=3))
def test_window_and_session_scores_equal_bm25_over_the_concatenated_texts(case: tuple, window: int) -> None:
    turns, _, queries = case
    index = HybridIndex(weights=Weights(window=window))
    index.add_turns(turns)
    terms = [analyze(f"{t.turn.name or t.role}: {t.text}") for t in turns]
    members: dict[str, list[int]] = {}
    for i, t in enumerate(turns):
        members.setdefault(t.session, []).append(i)
    windows, by_session = BM25Index(), BM25Index()
    for i, t in enumerate(turns):
        m = members[t.session]
        at = m.index(i)
        windows.add([w for j in m[max(0, at - window) : at + window + 1] for w in terms[j]])
    names = list(members)
    by_session.extend([w for j in members[s] for w in terms[j]] for s in names)
    for q in queries:
        sig, _ = index.signals(q)
        np.testing.assert_allclose(sig["lexical_window"], windows.scores(analyze(q)), rtol=0, atol=1e-12)
        expected = by_session.scores(analyze(q))[[names.index(t.session) for t in turns]]
        np.testing.assert_allclose(sig["lexical_session"], expected, rtol=0, atol=1e-12)


_TOPICS = ["paid rent in Paris", "baked bread with rye", "fixed the bike chain", "planned a trip to Rome"]


def test_the_summary_index_follows_the_pyramid_as_a_fresh_one_would(tmp_path) -> None:
    cfg = Config().replace(pyramid={"micro_chunk_size": 4, "mini_chunk_size": 3, "hot_chunks": 1})
    mem = Memory(str(tmp_path / "m.db"), config=cfg, embedder=None)
    queries = ["Paris rent", "rye bread", "bike", "Rome trip", "nothing matches"]
    seen: set[tuple[str, str | None]] = set()
    for step in range(12):
        mem.add(
            [
                {
                    "role": "user" if i % 2 == 0 else "assistant",
                    "content": f"Step {step}: Ana {_TOPICS[(step + i) % 4]} ({i}).",
                    "timestamp": (T0 + timedelta(days=2 * step, minutes=i)).isoformat(),
                }
                for i in range(3)
            ],
            session=f"s{step // 5}",
        )
        for q in queries:
            grown = mem._summary_index.rank(mem.pyramid, q)
            fresh = SummaryIndex().rank(mem.pyramid, q)
            assert [(u.id, u.text, u.tier, u.turn_ids) for u in grown] == [
                (u.id, u.text, u.tier, u.turn_ids) for u in fresh
            ]
            assert [u.score for u in grown] == [u.score for u in fresh]
            seen |= {(u.kind, u.tier) for u in fresh}
    # Segments went warm, then cold, and consolidations formed: every kind of change was followed.
    assert seen == {("segment", "warm"), ("segment", "cold"), ("consolidation", None)}


def test_substance_ranks_the_fuller_of_two_equal_matches_first_and_never_invents_a_match() -> None:
    long = "The lake trip with the kids, tents, canoes and a campfire every night."
    turns = _turns([(T0, [("Ana", "Lake!"), ("Ben", "Sounds fun."), ("Ana", long)])])
    index = HybridIndex(weights=Weights(lexical=0, lexical_window=0, lexical_session=0, lexical_prev=0, lexical_next=0))
    index.add_turns(turns)
    # Only the speaker boost matches (equally) Ana's two turns; substance orders them; Ben's turn stays at 0.
    hits = index.search("What did Ana say?", k=3)
    assert [h.turn_ids[0] for h in hits] == [3, 1, 2]
    w = Weights()
    assert hits[0].score["substance"] == pytest.approx(
        w.substance * (1 - math.exp(-len(analyze(f"Ana: {long}")) / w.substance_terms))
    )
    assert hits[1].score["substance"] == pytest.approx(w.substance * (1 - math.exp(-2 / w.substance_terms)))
    assert hits[2].score["fused"] == 0.0 and hits[2].score["substance"] == 0.0
    assert all(h.score["fused"] == 0.0 for h in index.search("volcano", k=3))
    with pytest.raises(ValidationError, match="substance_terms"):
        Weights(substance_terms=0)


def test_recall_policy_drops_an_item_that_restates_a_turn_shown_verbatim() -> None:
    turns = _turns(CHAT)
    items = [
        ItemUnit("item:1", "- (fact) Ben: I also started a pottery class.", "recalled_item", "cold", (3,)),
        ItemUnit("item:2", "- (fact) Ana likes lakes.", "recalled_item", "cold", (4,)),
        ItemUnit("item:3", "- (decision) Use PostgreSQL.", "recalled_item", "cold", ()),
    ]
    ctx = assemble(
        Candidates(items=items, recalled=[Recalled(turns[2], {"fused": 1.0})]),
        budget=400,
        tokenizer=_TOK,
        fmt="text",
        policy="recall",
    )
    kinds = [(i.id, i.reason) for i in ctx.manifest.items]
    # item:3 (no provenance) goes first; item:2's turn was not shown, so it follows the packing;
    # item:1 only restates turn 3, which is shown verbatim.
    assert kinds == [("item:3", "recalled_item"), ("item:2", "recalled_item"), ("turn:3", "recalled")]
    assert [m.reason for m in ctx.manifest.near_misses if m.id == "item:1"] == ["restates_included_turns"]
    assert ctx.text.index("## Remembered facts") < ctx.text.index("## Earlier conversation")


def test_window_scores_of_rare_and_common_terms_equal_bm25_over_the_concatenated_texts() -> None:
    # 600 turns in 3 interleaved sessions: "common" is in every turn (summed densely),
    # each "rareN" in one or two turns (gathered sparsely); both must equal the reference.
    lines = {s: [] for s in range(3)}
    for i in range(600):
        extra = f" rare{i // 2}" if i % 7 else ""
        lines[i % 3].append(("Ana" if i % 2 else "Ben", f"common word {i % 11}{extra}"))
    turns = _turns([(T0 + timedelta(days=s), lines[s]) for s in range(3)])
    index = HybridIndex(weights=Weights(window=2))
    index.add_turns(turns)
    terms = [analyze(f"{t.turn.name}: {t.text}") for t in turns]
    reference = BM25Index()
    for i, t in enumerate(turns):
        members = [j for j, u in enumerate(turns) if u.session == t.session]
        at = members.index(i)
        reference.add([w for j in members[max(0, at - 2) : at + 3] for w in terms[j]])
    for q in ("rare17 common", "rare0 rare299", "word 3"):
        sig, _ = index.signals(q)
        np.testing.assert_allclose(sig["lexical_window"], reference.scores(analyze(q)), rtol=0, atol=1e-12)


class _FailingOnce(_BagOfWords):
    """Fails its first call, as a remote embedder that is briefly down would."""

    def __init__(self) -> None:
        self.calls = 0

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        if self.calls == 1:
            raise ModelError("embedding service unavailable")
        return super().embed_batch(texts)


def test_a_failing_embedder_leaves_the_index_as_it_was_and_the_turns_can_be_added_again() -> None:
    turns = _turns(CHAT)
    index = HybridIndex(embedder=_FailingOnce())
    with pytest.raises(ModelError, match="unavailable"):
        index.add_turns(turns)
    assert len(index) == 0 and index.search("lake", k=3) == []
    index.add_turns(turns)
    fresh = HybridIndex(embedder=_BagOfWords())
    fresh.add_turns(turns)
    assert [(h.id, h.score) for h in index.search("pottery class lake", k=5)] == [
        (h.id, h.score) for h in fresh.search("pottery class lake", k=5)
    ]


@settings(max_examples=60, deadline=None)
@given(n=st.integers(min_value=0, max_value=300), size=st.integers(min_value=1, max_value=80))
def test_passages_cover_every_term_with_runs_no_longer_than_the_size(n: int, size: int) -> None:
    terms = [f"t{i}" for i in range(n)]
    runs = passages(terms, size)
    assert all(len(r) <= size for r in runs)
    assert {t for r in runs for t in r} == set(terms)
    if n <= size:
        assert runs == [terms]


def _long_and_short() -> list[StoredTurn]:
    filler = " ".join(f"word{i} thing{i % 7}" for i in range(300))
    long_answer = f"{filler} For the dough use seventy two percent hydration with a long cold proof. {filler}"
    chat = [
        ("Ana", "How do I bake bread at home?"),
        ("Bot", long_answer),
        ("Ana", "Hydration matters for houseplants too, my neighbour says."),
    ]
    chat += [("Ana", f"Unrelated note number {i} about my week.") for i in range(10)]
    return _turns([(T0, chat)])


def test_a_long_answer_is_found_by_its_best_passage() -> None:
    turns = _long_and_short()
    off = dict(lexical_window=0, lexical_session=0, lexical_prev=0, lexical_next=0, speaker=0, substance=0)
    whole = HybridIndex(weights=Weights(**off, lexical=1.0))
    whole.add_turns(turns)
    # Whole-turn BM25: 1,200 words of answer drown its one relevant sentence.
    assert whole.search("what hydration percent for the dough?", k=1)[0].id == "turn:3"
    best = HybridIndex(weights=Weights(**off, lexical=0.0, lexical_passage=1.0, passage_terms=64))
    best.add_turns(turns)
    hits = best.search("what hydration percent for the dough?", k=3)
    assert hits[0].id == "turn:2" and hits[0].score["lexical_passage"] == 1.0


def test_normalisations_put_signals_on_one_scale() -> None:
    from stratamem.retrieve.weights import _normalised

    x = np.array([0.0, 2.0, 8.0, 4.0])
    assert _normalised(x, "max", 10).tolist() == [0.0, 0.25, 1.0, 0.5]
    assert _normalised(x, "rank", 10).tolist() == [0.0, 10 / 12, 1.0, 10 / 11]
    z = _normalised(x, "z", 10)
    assert z[0] == 0.0 and z[2] == pytest.approx((8 - 3.5) / np.std(x)) and z[3] == pytest.approx(0.5 / np.std(x))
    assert not _normalised(np.zeros(3), "z", 10).any() and not _normalised(np.zeros(3), "max", 10).any()
    with pytest.raises(ValidationError):
        Weights(normalise="softmax")
