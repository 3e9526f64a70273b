"""Turns and provider shapes: validation and lossless round trips."""

from __future__ import annotations

import math
import re
import sqlite3
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import timestamps

from stratamem import Config, Memory
from stratamem.errors import InvalidTurnError
from stratamem.providers import (
    anthropic_block,
    from_anthropic,
    from_openai,
    structural_problems,
    to_anthropic,
    to_openai,
)
from stratamem.records import (
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Turn,
    block_from_dict,
    format_timestamp,
    parse_timestamp,
)
from stratamem.store.rows import turn_columns

TS = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)

OPENAI_CONVERSATION = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "List the files", "name": "dana"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": '{"path": "src"}'}},
            {"id": "call_2", "type": "function", "function": {"name": "ls", "arguments": '{"path": "tests"}'}},
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "a.py\nb.py"},
    {"role": "tool", "tool_call_id": "call_2", "content": "test_a.py"},
    {"role": "assistant", "content": "Three files."},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "And this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBOR", "detail": "low"}},
        ],
    },
]

ANTHROPIC_CONVERSATION = [
    {"role": "user", "content": "List the files"},
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "I should call ls.", "signature": "sig=="},
            {"type": "text", "text": "Listing."},
            {"type": "tool_use", "id": "tu_1", "name": "ls", "input": {"path": "src"}},
        ],
    },
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "tu_1", "content": [{"type": "text", "text": "a.py"}]},
        ],
    },
    {"role": "assistant", "content": "One file."},
    {
        "role": "user",
        "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}},
            {"type": "text", "text": "What is this?"},
        ],
    },
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
    turn = Turn(
        role="assistant",
        content=(ThinkingBlock("hmm", "sig"), TextBlock("ok"), ToolUseBlock("t1", "grep", {"q": "x", "n": [1, 2]})),
        timestamp=TS,
        name="agent",
        model="gpt-4o",
        metadata={"k": [1, "two"]},
    )
    assert Turn.from_dict(turn.to_dict()) == turn


def test_structural_problems_names_an_orphaned_tool_result() -> None:
    messages = [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x", "content": []}]}]
    assert structural_problems(messages, "anthropic") == [
        "messages[0]: tool_result 'x' has no tool_use in the previous message"
    ]
    assert structural_problems([{"role": "tool", "tool_call_id": "x", "content": "r"}], "openai") == [
        "messages[0]: tool message 'x' answers no pending tool call"
    ]


@pytest.mark.parametrize(
    "bad, fragment",
    [
        ({"role": "wizard", "content": "x"}, "unknown role 'wizard'"),
        ({"role": "user"}, "missing 'content'"),
        ({"role": "user", "content": 42}, "content must be a string or a list"),
        ({"role": "user", "content": [{"type": "video", "url": "x"}]}, "unknown content block type 'video'"),
        ({"role": "user", "content": [{"type": ["text"], "text": "x"}]}, "unknown content block type ['text']"),
        ({"role": "user", "content": [{"type": "text"}]}, "expected a string, got NoneType"),
        ({"role": "user", "content": "a\x00b"}, "NUL character"),
        ({"role": "user", "content": "a\ud800b"}, "lone surrogate"),
        (
            {"role": "user", "content": [{"type": "tool_use", "id": "1", "name": "x", "input": {}}]},
            "tool_use and thinking blocks belong in an 'assistant' turn",
        ),
        (
            {"role": "tool", "content": [{"type": "text", "text": "x"}]},
            "a tool turn must hold at least one tool_result",
        ),
        ({"role": "tool", "content": "plain"}, "a tool turn must hold at least one tool_result"),
    ],
)
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
_json = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**63 - 1) | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=6,
)


@st.composite
def _turns(draw: st.DrawFn) -> Turn:
    role = draw(st.sampled_from(["system", "user", "assistant", "tool"]))
    if role == "tool":
        content: object = tuple(
            draw(
                st.lists(
                    st.builds(ToolResultBlock, _ids, st.tuples(st.builds(TextBlock, _text)), st.booleans()),
                    min_size=1,
                    max_size=3,
                )
            )
        )
    elif role == "assistant":
        blocks = st.one_of(
            st.builds(TextBlock, _text),
            st.builds(ThinkingBlock, _text, st.none() | _text),
            st.builds(ToolUseBlock, _ids, _text, st.dictionaries(_text, _json, max_size=3)),
        )
        content = draw(_text | st.lists(blocks, max_size=4).map(tuple))
    else:
        content = draw(
            _text
            | st.lists(
                st.one_of(st.builds(TextBlock, _text), st.builds(ImageBlock, st.just("image/png"), _text, st.none())),
                max_size=3,
            ).map(tuple)
        )
    return Turn(
        role=role,
        content=content,
        timestamp=TS,  # type: ignore[arg-type]
        name=draw(st.none() | _text),
        model=draw(st.none() | _text),
        metadata=draw(st.dictionaries(_text, _json, max_size=3)),
    )


@settings(max_examples=200, deadline=None)
@given(_turns())
def test_every_turn_round_trips_through_its_canonical_dict(turn: Turn) -> None:
    assert Turn.from_dict(turn.to_dict()) == turn


# --- timestamps and JSON values that must never make a namespace unreadable (review #6) ----------


@settings(max_examples=300, deadline=None)
@given(timestamps)
def test_every_timestamp_survives_its_canonical_string(ts: datetime) -> None:
    text = format_timestamp(ts)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", text)
    assert parse_timestamp(text) == ts


def test_a_year_before_1000_is_stored_zero_padded_and_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    config = Config().replace(pyramid={"enabled": False})
    with Memory(path, config=config, embedder=None) as mem:
        mem.add({"role": "user", "content": "old", "timestamp": "0999-05-01T00:00:00Z"})
        mem.add({"role": "user", "content": "new", "timestamp": "2026-01-01T00:00:00Z"})
    conn = sqlite3.connect(path)
    # SQLite keeps a turn's time as 8 bytes of microseconds since year 1 (store/turn_stamps.py),
    # which sort as the times do: MAX(ts) is the newest turn.
    assert conn.execute("SELECT hex(ts) FROM turns ORDER BY id").fetchall() == [
        (f"{(datetime(999, 5, 1) - datetime(1, 1, 1)) // timedelta(microseconds=1):016X}",),
        (f"{(datetime(2026, 1, 1) - datetime(1, 1, 1)) // timedelta(microseconds=1):016X}",),
    ]
    assert (
        conn.execute("SELECT hex(MAX(ts)) FROM turns").fetchone()
        == conn.execute("SELECT hex(ts) FROM turns WHERE id = 2").fetchone()
    )
    conn.close()
    with Memory(path, config=config, embedder=None) as mem:
        assert [st.timestamp for st in mem.turns()] == [
            datetime(999, 5, 1, tzinfo=UTC),
            datetime(2026, 1, 1, tzinfo=UTC),
        ]
        assert mem.context(budget=200, format="text").text == (
            "[0999-05-01 00:00] user: old\n[2026-01-01 00:00] user: new"
        )


@pytest.mark.parametrize(
    "value",
    [
        "9999-12-31T23:59:59-05:00",
        "0001-01-01T00:00:00+05:00",
        datetime.max.replace(tzinfo=timezone(timedelta(hours=-5))),
    ],
)
def test_a_timestamp_outside_the_utc_range_is_an_invalid_turn(value: object) -> None:
    with pytest.raises(InvalidTurnError, match="outside years 1-9999 in UTC") as info:
        Turn.from_dict({"role": "user", "content": "x", "timestamp": value})
    assert str(info.value).startswith("turn.timestamp: ")
    with pytest.raises(InvalidTurnError, match="outside years 1-9999 in UTC"):
        from_openai([{"role": "user", "content": "x", "timestamp": value}])


def test_a_turn_built_directly_with_an_unrepresentable_instant_is_refused() -> None:
    with pytest.raises(InvalidTurnError, match="outside years 1-9999 in UTC"):
        Turn(role="user", content="x", timestamp=datetime.min.replace(tzinfo=timezone(timedelta(hours=3))))


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("shape", ["anthropic", "openai", "canonical", "block"])
def test_nan_and_infinity_in_tool_input_are_refused_in_every_shape(shape: str, number: float) -> None:
    with pytest.raises(InvalidTurnError, match="Out of range float values are not JSON compliant") as info:
        if shape == "anthropic":
            from_anthropic(
                [
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "t", "name": "n", "input": {"x": number}}],
                    }
                ]
            )
        elif shape == "openai":
            from_openai(
                [
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "t",
                                "type": "function",
                                "function": {
                                    "name": "n",
                                    "arguments": f'{{"x": {number!r}}}'.replace("nan", "NaN").replace(
                                        "inf", "Infinity"
                                    ),
                                },
                            }
                        ],
                    }
                ]
            )
        elif shape == "canonical":
            Turn.from_dict(
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t", "name": "n", "input": {"x": [number]}}],
                }
            )
        else:
            Turn(role="assistant", content=(ToolUseBlock("t", "n", {"x": {"y": number}}),))
    assert "input" in str(info.value)


def test_nan_in_metadata_is_refused() -> None:
    with pytest.raises(InvalidTurnError, match="metadata: not JSON-serializable"):
        Turn(role="user", content="x", metadata={"score": math.nan})


def test_the_store_serializer_never_writes_nan() -> None:
    turn = Turn(role="user", content="x", metadata={"score": 1.0})
    object.__setattr__(turn, "metadata", {"score": math.nan})  # bypass validation: the last line of defence
    with pytest.raises(ValueError, match="Out of range float values"):
        turn_columns(turn)


def test_a_nan_turn_is_refused_before_the_store_so_the_namespace_stays_readable(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", config=Config().replace(pyramid={"enabled": False}), embedder=None) as mem:
        mem.add({"role": "user", "content": "before"})
        with pytest.raises(InvalidTurnError, match=r"messages\[0\]\.content\[0\]\.input"):
            mem.add(
                {
                    "role": "assistant",
                    "content": [{"type": "tool_use", "id": "t", "name": "n", "input": {"x": math.nan}}],
                },
                format="anthropic",
            )
        assert [st.text for st in mem.turns()] == ["before"]


# --- one reader of content blocks: the canonical form and Anthropic's are two dialects of it (issue 29) ----

_BLOCKS = st.one_of(
    st.builds(TextBlock, _text),
    st.builds(ImageBlock, st.just("image/png"), _text, st.none()),
    st.builds(ImageBlock, st.none(), st.none(), _text),
    st.builds(ToolUseBlock, _ids, _text, st.dictionaries(_text, _json, max_size=3)),
    st.builds(
        ToolResultBlock,
        _ids,
        st.lists(
            st.one_of(st.builds(TextBlock, _text), st.builds(ImageBlock, st.just("image/jpeg"), _text, st.none())),
            max_size=3,
        ).map(tuple),
        st.booleans(),
    ),
    st.builds(ThinkingBlock, _text, st.none() | _text),
)


@settings(max_examples=300, deadline=None)
@given(_BLOCKS)
def test_a_block_reads_back_the_same_from_the_canonical_and_the_anthropic_form(block: object) -> None:
    role = {"tool_use": "assistant", "thinking": "assistant", "tool_result": "tool"}.get(block.type, "user")
    (message,) = to_anthropic([Turn(role=role, content=(block,), timestamp=TS)])[1]  # type: ignore[arg-type]
    (anthropic,) = message["content"]
    assert anthropic_block(anthropic, "b") == block_from_dict(block.to_dict()) == block  # type: ignore[attr-defined]


_TOOL_RESULT_WITH_A_CALL = {
    "type": "tool_result",
    "tool_use_id": "t",
    "content": [{"type": "text", "text": "ok"}, {"type": "tool_use", "id": "u", "name": "n", "input": {}}],
}


@pytest.mark.parametrize(
    "block, message",
    [
        (5, "content[0]: a content block must be an object, got int"),
        (
            {"type": "tool_use", "id": "t", "name": "n", "input": "x"},
            "content[0].input: tool_use input must be a JSON object",
        ),
        (_TOOL_RESULT_WITH_A_CALL, "content[0].content[1]: tool_result content may hold only text and image blocks"),
    ],
)
def test_a_malformed_block_gets_the_same_error_in_both_forms(block: object, message: str) -> None:
    """The Anthropic reader used to say less (no type, "an object", the list's path, not the part's)."""
    role = "tool" if isinstance(block, dict) and block["type"] == "tool_result" else "assistant"
    with pytest.raises(InvalidTurnError) as canonical:
        Turn.from_dict({"role": role, "content": [block]})
    with pytest.raises(InvalidTurnError) as anthropic:
        from_anthropic([{"role": "user" if role == "tool" else role, "content": [block]}])
    assert str(canonical.value) == f"turn.{message}"
    assert str(anthropic.value) == f"messages[0].{message}"


def test_tool_result_parts_may_be_any_sequence_in_both_forms() -> None:
    parts = ({"type": "text", "text": "a"}, {"type": "text", "text": "b"})
    expected = ToolResultBlock("t", (TextBlock("a"), TextBlock("b")))
    block = {"type": "tool_result", "tool_use_id": "t", "content": parts}
    assert block_from_dict(block) == anthropic_block(block, "b") == expected


def test_only_the_anthropic_form_ignores_keys_that_are_not_content_and_calls_a_foreign_type_unsupported() -> None:
    hinted = {"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}, "citations": []}
    assert anthropic_block(hinted, "b") == TextBlock("hi")
    with pytest.raises(InvalidTurnError, match=r"^b: unexpected keys in text block: \['cache_control', 'citations'\]$"):
        block_from_dict(hinted, "b")
    with pytest.raises(InvalidTurnError, match=r"^b: unsupported content block type 'redacted_thinking'$"):
        anthropic_block({"type": "redacted_thinking", "data": "x"}, "b")
    with pytest.raises(InvalidTurnError, match=r"^b: unknown content block type 'redacted_thinking' \(expected one of"):
        block_from_dict({"type": "redacted_thinking", "data": "x"}, "b")
