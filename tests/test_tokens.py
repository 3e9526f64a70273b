"""Exact offline token counts, message overheads and calibration."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import texts, turns

from stratamem.errors import ConfigError
from stratamem.providers import from_anthropic, to_openai
from stratamem.records import ImageBlock, TextBlock, Turn
from stratamem.tokens import (
    IMAGE_TOKENS,
    MESSAGE_TOKENS,
    REPLY_TOKENS,
    TOOL_CALL_TOKENS,
    BPETokenizer,
    Calibration,
    CharEstimator,
    count_message,
    count_messages,
    count_turn,
    get_tokenizer,
    truncate_to_tokens,
)


def test_o200k_counts_known_strings_exactly() -> None:
    tok = get_tokenizer("o200k_base")
    # Reference ids from OpenAI's o200k_base ("hello world" is [24912, 2375]).
    assert BPETokenizer("o200k_base").encode("hello world") == [24912, 2375]
    assert tok.count("") == 0
    assert tok.count("hello world") == 2


def test_cl100k_is_a_different_exact_encoding() -> None:
    assert BPETokenizer("cl100k_base").encode("hello world") == [15339, 1917]


def test_special_token_text_is_counted_as_plain_text() -> None:
    assert get_tokenizer().count("<|endoftext|>") > 1


def test_long_text_beyond_the_encoder_limit_is_counted_exactly() -> None:
    tok = get_tokenizer()
    unit = "lorem ipsum dolor sit amet. "
    per_repeat = tok.count(unit * 2) - tok.count(unit)
    # 1.12 M characters: past what the encoder takes in one call, so it is split at spaces.
    assert tok.count(unit * 40_000) == tok.count(unit) + per_repeat * 39_999


def test_unknown_encoding_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="unknown tokenizer encoding"):
        BPETokenizer("p99k_base")
    with pytest.raises(ConfigError):
        get_tokenizer("chars/zero")


def test_char_estimator_is_only_an_explicit_choice() -> None:
    est = get_tokenizer("chars/4")
    assert isinstance(est, CharEstimator)
    assert est.count("abcdefgh") == 2
    assert get_tokenizer().name == "o200k_base"


def test_turn_count_adds_overheads_and_a_fixed_image_cost() -> None:
    tok = get_tokenizer()
    turn = Turn(role="user", content=(TextBlock("hello world"), ImageBlock(url="http://x/y.png")), name="dana")
    assert count_turn(turn, tok) == MESSAGE_TOKENS + 1 + 2 + IMAGE_TOKENS


def test_request_count_includes_reply_priming_and_system() -> None:
    tok = get_tokenizer()
    msgs = [{"role": "user", "content": "hello world"}]
    assert count_messages(msgs, tok) == REPLY_TOKENS + MESSAGE_TOKENS + 2
    assert count_messages(msgs, tok, system="hello world") == REPLY_TOKENS + 2 * (MESSAGE_TOKENS + 2)


def test_calibration_learns_a_per_model_factor_and_never_shrinks_by_default() -> None:
    cal = Calibration(alpha=0.5)
    assert cal.adjust("claude", 1000) == 1000
    assert cal.observe("claude", 1000, 1200) == pytest.approx(1.2)
    assert cal.observe("claude", 1000, 1100) == pytest.approx(1.15)
    assert cal.adjust("claude", 1000) == 1150
    assert cal.adjust("gpt-4o", 1000) == 1000
    cal.observe("gpt-4o", 1000, 900)
    assert cal.adjust("gpt-4o", 1000) == 1000
    assert Calibration(allow_shrink=True).from_dict({"gpt-4o": 0.9}, allow_shrink=True).adjust("gpt-4o", 1000) == 900
    with pytest.raises(ValueError):
        cal.observe("claude", 0, 10)


# --- stored counts equal the OpenAI rendering (review #28) ----------------------------------


@settings(max_examples=300, deadline=None)
@given(turns())
def test_a_turn_count_equals_its_openai_rendering(turn: Turn) -> None:
    tok = get_tokenizer()
    assert count_turn(turn, tok) == sum(count_message(m, tok) for m in to_openai([turn]))


def test_several_tool_results_cost_one_tool_message_each() -> None:
    tok = get_tokenizer()
    [turn] = from_anthropic(
        [
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": tid, "content": text}
                    for tid, text in (("a", "one"), ("b", "two"), ("c", "three"))
                ],
            }
        ]
    )
    # Three tool messages: framing + tool-call framing + one token of text each.
    assert count_turn(turn, tok) == 3 * (MESSAGE_TOKENS + TOOL_CALL_TOKENS + 1) == 36


def test_thinking_costs_nothing_in_the_stored_count() -> None:
    tok = get_tokenizer()
    [turn] = from_anthropic(
        [
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "long private reasoning " * 50, "signature": "s"},
                    {"type": "text", "text": "ok"},
                ],
            }
        ]
    )
    assert count_turn(turn, tok) == MESSAGE_TOKENS + 1


# --- truncation for any tokenizer (review #13) ---------------------------------------------


class _CountOnly:
    """A tokenizer with nothing but the protocol: one token per word-ish run."""

    name = "words"

    def count(self, text: str) -> int:
        return len(text.split()) + text.count(",")


@settings(max_examples=200, deadline=None)
@given(texts, st.integers(min_value=0, max_value=12), st.sampled_from(["o200k_base", "chars/4", "words"]))
def test_truncation_gives_a_prefix_within_the_limit(text: str, limit: int, which: str) -> None:
    tok = _CountOnly() if which == "words" else get_tokenizer(which)
    out = truncate_to_tokens(text, limit, tok)
    assert text.startswith(out)
    assert tok.count(out) <= limit
    if out != text and which != "o200k_base":
        # These counters only grow with the text, so one more character would not fit.
        assert tok.count(text[: len(out) + 1]) > limit


def test_truncation_keeps_text_that_fits_and_cuts_by_tokens() -> None:
    tok = get_tokenizer()
    assert truncate_to_tokens("hello world", 2, tok) == "hello world"
    assert truncate_to_tokens("hello world " * 10, 5, tok) == "hello world hello world hello"
    assert truncate_to_tokens("abcdefghij", 2, CharEstimator()) == "abcdefgh"
    assert truncate_to_tokens("x", 0, CharEstimator()) == ""
    with pytest.raises(ValueError, match="must not be negative"):
        truncate_to_tokens("x", -1, tok)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.sampled_from(["hello world", "naïve café 🍵", "x" * 1999, "y " * 1000, "z" * 2001, ""]) | texts,
        min_size=1,
        max_size=6,
    )
)
def test_remembered_counts_equal_fresh_encodings(batch: list[str]) -> None:
    """BPETokenizer.count caches short texts: asked twice, in any order, it answers as the encoder does."""
    tok = BPETokenizer("cl100k_base")
    for text in [*batch, *reversed(batch)]:
        assert tok.count(text) == len(tok.encode(text))
