"""The helpers of the issue-30 category-bridge prototype (benchmarks/locomo/category_expand.py, category_oracle.py)."""

from __future__ import annotations

import stratamem.retrieve.engine as engine
from benchmarks.locomo.category_expand import _asking, capped
from benchmarks.locomo.category_oracle import surface_forms
from stratamem.retrieve.plan import gather
from stratamem.retrieve.weights import fuse_signals


def test_surface_forms_keep_the_most_frequent_word_of_each_stem() -> None:
    forms = surface_forms(["We went camping.", "Camping again!", "I camped once", "the camp"])
    # "camping" x2, "camped" x1, "camp" x1 all analyse to the stem "camp"
    assert forms["camp"] == "camping"
    assert forms["went"] == "went"
    assert "we" not in forms  # a stop word is no index term


def test_capped_moves_a_crowded_neighbour_behind_the_top_ten() -> None:
    # turns 1, 2, 3 sit next to each other in session "a"; 9 is in session "b"
    place = {1: ("a", 0), 2: ("a", 1), 3: ("a", 2), 9: ("b", 0)}
    assert capped([1, 2, 3, 9], place, 2, 3) == [1, 2, 9, 3]
    assert capped([1, 2, 3, 9], place, 3, 3) == [1, 2, 3, 9]
    assert capped([1, 9, 3, 2], place, 1, 1) == [1, 9, 3, 2]  # 3 is two away from 1: not within reach 1; 2 is


def test_asking_share_ignores_the_photo_caption() -> None:
    assert _asking("Wow, nice! What inspired you? [shares a photo of a lake. Is it?]") == 0.5
    assert _asking("I went swimming.") == 0.0
    assert _asking("") == 0.0


def test_importing_the_prototype_leaves_the_engine_alone() -> None:
    assert engine.fuse_signals is fuse_signals
    assert engine.gather is gather
