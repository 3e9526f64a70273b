"""The LoCoMo protocol on tiny hand-made data: gold normalisation, ingestion, scoring, budget walk."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.locomo.metrics import Scores, Unit, all_found, covered, recall_frac, summarise
from benchmarks.locomo.protocol import load_conversations, normalise_dia, normalise_evidence
from stratamem.retrieve import CompactRenderer, pack_turns
from stratamem.store import SQLiteStore
from stratamem.tokens import get_tokenizer

SAMPLE = {
    "sample_id": "tiny",
    "conversation": {
        "speaker_a": "Ana",
        "speaker_b": "Ben",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a puppy named Rex."},
            {"speaker": "Ben", "dia_id": "D1:2", "text": "Congrats! What breed?"},
            {"speaker": "Ana", "dia_id": "D1:3", "text": "A beagle.", "blip_caption": "a photo of a dog"},
        ],
        "session_2_date_time": "10:00 am on 2 June, 2023",
        "session_2": [
            {"speaker": "Ben", "dia_id": "D2:1", "text": "I ran a marathon in Rome."},
            {"speaker": "Ana", "dia_id": "D2:2", "text": "Amazing, how long did it take?"},
        ],
    },
    "qa": [
        {"question": "What breed is Ana's dog?", "answer": "beagle", "evidence": ["D1:03", "D1:1"], "category": 4},
        {"question": "Where did Ben run?", "answer": "Rome", "evidence": ["D2:1; D9:9"], "category": 1},
        {"question": "Nothing?", "answer": "x", "evidence": [], "category": 5},
        {"question": "Ghost?", "answer": "x", "evidence": ["D7:1"], "category": 2},
    ],
    "session_summary": {"secret": "never read by the engine"},
}


@pytest.fixture
def tiny(tmp_path: Path):
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps([SAMPLE]))
    store = SQLiteStore(tmp_path / "m.db")
    yield load_conversations(store, path)[0]
    store.close()


def test_dia_ids_lose_zero_padding() -> None:
    assert normalise_dia(" D30:05 ") == "D30:5"
    assert normalise_dia("D1:10") == "D1:10"


def test_evidence_lists_are_split_deduplicated_and_filtered() -> None:
    known = {"D8:6", "D9:17", "D1:1"}
    assert normalise_evidence(["D8:6; D9:17", "D9:17", "D1:01,D2:2", "D44:1"], known) == ("D8:6", "D9:17", "D1:1")


def test_questions_without_existing_evidence_are_skipped(tiny) -> None:
    assert [q.text for q in tiny.questions] == ["What breed is Ana's dog?", "Where did Ben run?"]
    assert tiny.skipped == 2
    assert tiny.questions[0].gold == ("D1:3", "D1:1")
    assert tiny.questions[1].gold == ("D2:1",)


def test_ingestion_goes_through_the_library_with_dates_and_captions(tiny) -> None:
    assert tiny.namespace == "locomo-tiny"
    assert [tiny.dia_of[st.id] for st in tiny.turns] == ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2"]
    assert tiny.turns[2].text == "A beagle. [shares a photo of a dog]"
    assert tiny.turns[3].timestamp.isoformat() == "2023-06-02T10:00:00+00:00"
    # The engine sees turns only: no evidence, answers or LoCoMo summaries in any stored field.
    assert {k for st in tiny.turns for k in st.turn.metadata} == {"dia_id", "image_caption"}
    assert not any("secret" in json.dumps(st.turn.to_dict()) for st in tiny.turns)


def test_recall_frac_at_k_counts_gold_turns_covered(tiny) -> None:
    ids = {d: i for i, d in tiny.dia_of.items()}
    q = tiny.questions[0]
    ranking = [Unit((ids["D1:2"],)), Unit((ids["D1:3"],)), Unit((ids["D1:1"],))]
    assert recall_frac(q.gold, covered(ranking[:1], tiny.dia_of, strict=True)) == 0.0
    assert recall_frac(q.gold, covered(ranking[:2], tiny.dia_of, strict=True)) == 0.5
    assert recall_frac(q.gold, covered(ranking[:3], tiny.dia_of, strict=True)) == 1.0


def test_a_summary_counts_for_coverage_but_not_strict(tiny) -> None:
    ids = {d: i for i, d in tiny.dia_of.items()}
    summary = Unit((ids["D1:1"], ids["D1:2"], ids["D1:3"]), verbatim=False)
    q = tiny.questions[0]
    assert recall_frac(q.gold, covered([summary], tiny.dia_of, strict=True)) == 0.0
    assert recall_frac(q.gold, covered([summary], tiny.dia_of, strict=False)) == 1.0


def test_scores_summarise_overall_and_per_category(tiny) -> None:
    ids = {d: i for i, d in tiny.dia_of.items()}
    scores = Scores()
    scores.add(tiny.questions[0], [Unit((ids["D1:3"],))], {512: []}, tiny.dia_of)
    scores.add(tiny.questions[1], [Unit((ids["D2:1"],))], {512: [Unit((ids["D2:1"],))]}, tiny.dia_of)
    table = summarise(scores)
    assert table["all"]["r@1"] == 0.75
    assert table["all"]["b@512"] == 0.5
    assert table["4 single-hop"]["r@1"] == 0.5
    assert table["1 multi-hop"]["b@512"] == 1.0
    assert table["all"]["n"] == 2.0


def test_budget_walk_keeps_what_fits_and_counts_exactly(tiny) -> None:
    tok = get_tokenizer("o200k_base")
    ranked = [tiny.turns[3], tiny.turns[0], tiny.turns[4], tiny.turns[2]]
    full = pack_turns(ranked, 4096, tok)
    assert full.text == (
        "## 8 May 2023\nAna: I adopted a puppy named Rex.\n"
        "Ana: A beagle. [shares a photo of a dog]\n"
        "## 2 June 2023\nBen: I ran a marathon in Rome.\nAna: Amazing, how long did it take?"
    )
    assert full.tokens == tok.count(full.text)
    for budget in range(1, full.tokens + 1):
        packed = pack_turns(ranked, budget, tok, CompactRenderer())
        assert packed.tokens <= budget
        assert packed.tokens == (tok.count(packed.text) if packed.turns else 0)
        assert len(packed.turns) + len(packed.skipped) == 4


# --- every gold turn found: all@k (issue 30) --------------------------------------------------------


def test_all_at_k_is_one_only_when_every_gold_turn_is_in_the_top_k(tiny) -> None:
    ids = {d: i for i, d in tiny.dia_of.items()}
    q = tiny.questions[0]  # gold D1:3 and D1:1
    ranking = [Unit((ids["D1:2"],)), Unit((ids["D1:3"],)), Unit((ids["D1:1"],))]
    assert [all_found(q.gold, covered(ranking[:k], tiny.dia_of, strict=True)) for k in (1, 2, 3)] == [0.0, 0.0, 1.0]
    scores = Scores()
    packed = {512: ranking[1:2], 1024: ranking[1:]}  # a budget walk that keeps one, then both
    scores.add(q, ranking + [Unit((ids["D2:2"],))] * 22, packed, tiny.dia_of)
    row = summarise(scores)["all"]
    assert (row["r@5"], row["all@5"], row["all@10"]) == (1.0, 1.0, 1.0)
    assert (row["b@512"], row["allb@512"], row["allb@1024"]) == (0.5, 0.0, 1.0)
    two = Scores()
    two.add(q, ranking[:2], {512: []}, tiny.dia_of)
    assert (summarise(two)["all"]["r@5"], summarise(two)["all"]["all@5"]) == (0.5, 0.0)


def test_all_at_k_equals_recall_for_one_gold_turn_and_min_gold_keeps_the_others(tiny) -> None:
    ids = {d: i for i, d in tiny.dia_of.items()}
    scores = Scores()
    scores.add(tiny.questions[0], [Unit((ids["D1:3"],))], {512: []}, tiny.dia_of)  # 2 gold, half found
    scores.add(tiny.questions[1], [Unit((ids["D2:1"],))], {512: []}, tiny.dia_of)  # 1 gold, found
    one = tiny.questions[1]
    assert len(one.gold) == 1
    assert scores.strict["all@5"][1] == scores.strict["r@5"][1] == 1.0
    multi = summarise(scores, min_gold=2)
    assert multi["all"]["n"] == 1.0 and "1 multi-hop" not in multi
    assert (multi["all"]["r@5"], multi["all"]["all@5"]) == (0.5, 0.0)


def test_format_dedup_counts_a_window_twin_as_shown_and_a_duplicate_as_lost(tiny) -> None:
    from benchmarks.locomo.runner import Result, format_dedup

    result = Result("Memory.context (recall)", tracks_repeats=True)
    result.scores.add(tiny.questions[0], [], {2048: []}, tiny.dia_of)
    result.records.append(
        {
            "kept": {2048: ["D1:1"]},
            "repeats": {
                2048: [["D1:1", "duplicate_of_window", "window", True], ["D1:3", "duplicate", "turn:1", False]]
            },
            "stripped": {2048: {"D1:1": ["I adopted a puppy named Rex."]}},
        }
    )
    line = format_dedup([result]).splitlines()[-1]
    assert "left out    2 {'duplicate_of_window': 1, 'duplicate': 1}" in line
    assert "lost 1 {'duplicate': 1} in 1 of 1 questions {'4 single-hop': 1}" in line
    assert line.endswith("shown but missing a sentence 1")
