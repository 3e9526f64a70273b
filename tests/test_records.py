"""Turns and provider shapes: validation and lossless round trips."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stratamem.errors import InvalidTurnError
from stratamem.providers import from_anthropic, from_openai, structural_problems, to_anthropic, to_openai
from stratamem.records import (
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Turn,
)

TS = datetime(2026, 3, 2, 9, 0, tzinfo=timezone.utc)

OPENAI_CONVERSATION = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "List the files", "name": "dana"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{\"path\": \"src\"}"}},
        {"id": "call_2", "type": "function", "function": {"name": "ls", "arguments": "{\"path\": \"tests\"}"}},
    ]},
    {"role": "tool", "tool_call_id": "call_1", "content": "a.py\nb.py"},
    {"role": "tool", "tool_call_id": "call_2", "content": "test_a.py"},
    {"role": "assistant", "content": "Three files."},
    {"role": "user", "content": [{"type": "text", "text": "And this?"},
                                 {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBOR", "detail": "low"}}]},
]

ANTHROPIC_CONVERSATION = [
    {"role": "user", "content": "List the files"},
    {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "I should call ls.", "signature": "sig=="},
        {"type": "text", "text": "Listing."},
        {"type": "tool_use", "id": "tu_1", "name": "ls", "input": {"path": "src"}},
    ]},
    {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "tu_1", "content": [{"type": "text", "text": "a.py"}]},
    ]},
    {"role": "assistant", "content": "One file."},
    {"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}},
                                 {"type": "text", "text": "What is this?"}]},
]


def test_openai_messages_round_trip_exactly() -> None:
    turns = from_openai(OPENAI_CONVERSATION, timestamp=TS)
    assert [t.role for t in turns] == ["system", "user", "assistant", "tool", "tool", "assistant", "user"]
    assert turns[2].tool_use_ids == ("call_1", "call_2")
    assert turns[3].tool_result_ids == ("call_1",)
    assert to_openai(turns) == OPENAI_CONVERSATION


def test_anthropic_messages_round_trip_exactly() -> None:
    turns = from_anthropic(ANTHROPIC_CONVERSATION, system="Be brief.", timestamp=TS)
    assert [t.role for t in turns] == ["system", "user", "assistant", "tool", "assistant", "user"]
    system, messages = to_anthropic(turns)
    assert system == "Be brief."
    assert messages == ANTHROPIC_CONVERSATION


def test_anthropic_conversation_renders_valid_for_openai_and_back() -> None:
    turns = from_anthropic(ANTHROPIC_CONVERSATION, timestamp=TS)
    openai = to_openai(turns)
    assert structural_problems(openai, "openai") == []
    again = from_openai(openai, timestamp=TS)
    # Thinking is dropped for OpenAI (it has no such block); all else survives.
    assert [t.text for t in again] == [t.text for t in turns]


def test_openai_conversation_renders_valid_for_anthropic() -> None:
    turns = from_openai(OPENAI_CONVERSATION, timestamp=TS)
    system, messages = to_anthropic(turns)
    assert system == "You are terse."
    assert structural_problems(messages, "anthropic") == []
    # The two parallel tool results are merged into one user message, results first.
    assert [b["tool_use_id"] for b in messages[2]["content"]] == ["call_1", "call_2"]


def test_canonical_dict_round_trip_keeps_every_field() -> None:
    turn = Turn(role="assistant", content=(
        ThinkingBlock("hmm", "sig"), TextBlock("ok"), ToolUseBlock("t1", "grep", {"q": "x", "n": [1, 2]})),
        timestamp=TS, name="agent", model="gpt-4o", metadata={"k": [1, "two"]})
    assert Turn.from_dict(turn.to_dict()) == turn


def test_structural_problems_names_an_orphaned_tool_result() -> None:
    messages = [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x", "content": []}]}]
    assert structural_problems(messages, "anthropic") == [
        "messages[0]: tool_result 'x' has no tool_use in the previous message"]
    assert structural_problems([{"role": "tool", "tool_call_id": "x", "content": "r"}], "openai") == [
        "messages[0]: tool message 'x' answers no pending tool call"]


@pytest.mark.parametrize("bad, fragment", [
    ({"role": "wizard", "content": "x"}, "unknown role 'wizard'"),
    ({"role": "user"}, "missing 'content'"),
    ({"role": "user", "content": 42}, "content must be a string or a list"),
    ({"role": "user", "content": [{"type": "video", "url": "x"}]}, "unknown content block type 'video'"),
    ({"role": "user", "content": [{"type": ["text"], "text": "x"}]}, "unknown content block type ['text']"),
    ({"role": "user", "content": [{"type": "text"}]}, "expected a string, got NoneType"),
    ({"role": "user", "content": "a\x00b"}, "NUL character"),
    ({"role": "user", "content": "a\ud800b"}, "lone surrogate"),
    ({"role": "user", "content": [{"type": "tool_use", "id": "1", "name": "x", "input": {}}]},
     "tool_use and thinking blocks belong in an 'assistant' turn"),
    ({"role": "tool", "content": [{"type": "text", "text": "x"}]}, "a tool turn must hold at least one tool_result"),
    ({"role": "tool", "content": "plain"}, "a tool turn must hold at least one tool_result"),
])
def test_malformed_turn_dicts_are_rejected_with_a_path(bad: dict, fragment: str) -> None:
    with pytest.raises(InvalidTurnError) as info:
        Turn.from_dict(bad)
    assert fragment in str(info.value)
    assert str(info.value).startswith("turn")


def test_image_block_needs_exactly_one_source() -> None:
    with pytest.raises(InvalidTurnError, match="exactly one of data or url"):
        Turn.from_dict({"role": "user", "content": [{"type": "image", "media_type": "image/png"}]})


_text = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=40)
_ids = st.text("abcdef0123456789", min_size=1, max_size=8)
_json = st.recursive(st.none() | st.booleans() | st.integers() | _text,
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3), max_leaves=6)


@st.composite
def _turns(draw: st.DrawFn) -> Turn:
    role = draw(st.sampled_from(["system", "user", "assistant", "tool"]))
    if role == "tool":
        content: object = tuple(draw(st.lists(
            st.builds(ToolResultBlock, _ids, st.tuples(st.builds(TextBlock, _text)), st.booleans()),
            min_size=1, max_size=3)))
    elif role == "assistant":
        blocks = st.one_of(st.builds(TextBlock, _text), st.builds(ThinkingBlock, _text, st.none() | _text),
                           st.builds(ToolUseBlock, _ids, _text, st.dictionaries(_text, _json, max_size=3)))
        content = draw(_text | st.lists(blocks, max_size=4).map(tuple))
    else:
        content = draw(_text | st.lists(st.one_of(st.builds(TextBlock, _text), st.builds(
            ImageBlock, st.just("image/png"), _text, st.none())), max_size=3).map(tuple))
    return Turn(role=role, content=content, timestamp=TS,  # type: ignore[arg-type]
                name=draw(st.none() | _text), model=draw(st.none() | _text),
                metadata=draw(st.dictionaries(_text, _json, max_size=3)))


@settings(max_examples=200, deadline=None)
@given(_turns())
def test_every_turn_round_trips_through_its_canonical_dict(turn: Turn) -> None:
    assert Turn.from_dict(turn.to_dict()) == turn
