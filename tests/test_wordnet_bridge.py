"""The WordNet reader and helpers of the issue-30 fifth-round prototype (benchmarks/locomo/wordnet*.py).

The WordNet files are not in the repository: these tests write a five-synset noun
database in WordNet's own format and read it back.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import benchmarks.locomo.category_expand as ce
from benchmarks.locomo import wordnet_expand
from benchmarks.locomo.wordnet import NounNet
from benchmarks.locomo.wordnet_oracle import lemma_stems, plural

# offset lexfile pos w_cnt(hex) word lex_id ... p_cnt ptr(symbol offset pos src/tgt) ... | gloss
DATA = """\
  1 This header line is skipped, as in Princeton's files.
00000100 04 n 01 activity 0 002 ~ 00000200 n 0000 ~ 00000400 n 0000 | any specific behavior
00000200 04 n 02 sport 0 athletics 0 002 @ 00000100 n 0000 ~ 00000300 n 0000 | an active diversion
00000300 04 n 02 swimming 0 swim 0 001 @ 00000200 n 0000 | the act of swimming
00000400 04 n 01 hobby 0 001 @ 00000100 n 0000 | an auxiliary activity
00000500 04 n 01 water_sport 0 000 | a sport played in water
"""
INDEX = """\
  1 This header line is skipped.
activity n 1 1 ~ 1 1 00000100
sport n 1 2 @ ~ 1 1 00000200
swimming n 1 1 @ 1 1 00000300
hobby n 1 1 @ 1 1 00000400
water_sport n 1 0 1 0 00000500
"""


@pytest.fixture
def net(tmp_path: Path) -> NounNet:
    (tmp_path / "data.noun").write_text(DATA, encoding="utf-8")
    (tmp_path / "index.noun").write_text(INDEX, encoding="utf-8")
    return NounNet(tmp_path)


def test_reader_follows_is_a_links_down_and_up_within_the_depth(net: NounNet) -> None:
    assert net.words[200] == ["sport", "athletics"]
    assert net.closure([100], 1) == {100: 0, 200: 1, 400: 1}
    assert net.closure([100], 2) == {100: 0, 200: 1, 400: 1, 300: 2}
    assert net.closure([300], 6, down=False) == {300: 0, 200: 1, 100: 2}


def test_plural_question_words_find_their_noun_senses(net: NounNet) -> None:
    assert net.lemma_senses("activities", 3) == [100]
    assert net.lemma_senses("sports", 3) == [200]
    assert net.lemma_senses("water_sports", 3) == [500]
    assert net.lemma_senses("camping", 3) == []


def test_lemma_stems_are_analysed_single_words(net: NounNet) -> None:
    # "swimming" and "swim" share the stem the turn "I'm off to go swimming" is indexed under
    assert lemma_stems(net, net.closure([200], 1)) == {"sport", "athletic", "swim"}
    assert lemma_stems(net, {500: 0}) == set()  # a multi-word lemma is not a single term


def test_plural_detection() -> None:
    assert [plural(w) for w in ("activities", "children", "class", "bus", "hobby")] == [True, True, False, False, False]


def test_a_missing_wordnet_directory_says_what_to_set(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="STRATAMEM_WORDNET_DIR"):
        NounNet(tmp_path)


def test_importing_the_prototype_leaves_the_harness_alone() -> None:
    assert ce.Expander is not wordnet_expand.WordNetExpander
    assert ce._parse is wordnet_expand._parse
    assert ce.fused is wordnet_expand._fused
