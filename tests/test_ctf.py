"""CTF v1: round trips, header economy, strict decoding, and the documented examples."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import TRICKY, texts, turn_lists

from stratamem.errors import DecodeError, ValidationError
from stratamem.formats.ctf import SummaryRow, decode_summaries, decode_turns, encode_summaries, encode_turns
from stratamem.records import TextBlock, ToolResultBlock, ToolUseBlock, Turn

T0 = datetime(2024, 1, 15, 10, 0, tzinfo=UTC)
DOCS = Path(__file__).resolve().parents[1] / "docs" / "ctf.md"


def _chat(*contents: str, step: float = 30) -> list[Turn]:
    return [
        Turn(
            role="user" if i % 2 == 0 else "assistant",
            content=c,
            timestamp=T0 + timedelta(seconds=i * step),
            name="Ann" if i % 2 == 0 else "Bo",
        )
        for i, c in enumerate(contents)
    ]


@settings(max_examples=300, deadline=None)
@given(turn_lists)
def test_encode_then_decode_is_the_identity_for_arbitrary_turns(turns):
    assert decode_turns(encode_turns(turns)) == turns


@settings(max_examples=200, deadline=None)
@given(texts)
def test_any_text_survives_as_content_name_and_model(text):
    turn = Turn(role="assistant", content=text, timestamp=T0, name=text, model=text)
    assert decode_turns(encode_turns([turn])) == [turn]


@pytest.mark.parametrize("text", TRICKY)
def test_tricky_strings_round_trip_exactly(text):
    turns = [
        Turn(role="user", content=text, timestamp=T0, name=text),
        Turn(role="user", content=text + "x", timestamp=T0, name=None),
    ]
    assert decode_turns(encode_turns(turns)) == turns


def test_none_and_the_string_dash_stay_distinct():
    turns = [
        Turn(role="assistant", content="-", timestamp=T0, model="-", name=None),
        Turn(role="assistant", content="", timestamp=T0, model=None, name="-"),
    ]
    out = decode_turns(encode_turns(turns))
    assert [(t.content, t.model, t.name) for t in out] == [("-", "-", None), ("", None, "-")]


def test_long_content_is_not_truncated():
    text = "word " * 20_000
    [turn] = decode_turns(encode_turns([Turn(role="user", content=text, timestamp=T0)]))
    assert turn.content == text


def test_blocks_survive_and_stay_distinct_from_text():
    call = ToolUseBlock("c1", "grep", {"pattern": "a\tb", "n": [1, 2.5, None]})
    turns = [
        Turn(role="assistant", content=(TextBlock("looking"), call), timestamp=T0, model="m"),
        Turn(role="tool", content=(ToolResultBlock("c1", (TextBlock("x\ny"),), is_error=True),), timestamp=T0),
        Turn(role="user", content=(TextBlock("plain"),), timestamp=T0),
        Turn(role="user", content="plain", timestamp=T0),
    ]
    out = decode_turns(encode_turns(turns))
    assert out == turns
    assert isinstance(out[2].content, tuple) and isinstance(out[3].content, str)


def test_constant_values_go_in_the_header_once():
    text = encode_turns(_chat("hi", "hello", "how are you?"))
    assert text == (
        "#CTF v1 turns n=3 t0=2024-01-15T10:00Z dt=30 name.u=Ann name.a=Bo\nu\thi\na\thello\nu\thow are you?\n"
    )


def test_irregular_times_get_a_time_column_with_the_common_step_left_empty():
    turns = _chat("a", "b", "c", "d")
    turns[2] = Turn(role="user", content="c", timestamp=turns[2].timestamp + timedelta(seconds=1.25), name="Ann")
    text = encode_turns(turns)
    assert (
        text.splitlines()[0]
        == "#CTF v1 turns n=4 cols=role,time,content t0=2024-01-15T10:00Z dt=30 name.u=Ann name.a=Bo"
    )
    assert text.splitlines()[1:] == ["u\t\ta", "a\t\tb", "u\t31.25\tc", "a\t28.75\td"]
    assert decode_turns(text) == turns


def test_varying_names_get_a_column_with_a_null_marker():
    turns = [Turn(role="user", content="a", timestamp=T0, name="Ann"), Turn(role="user", content="b", timestamp=T0)]
    text = encode_turns(turns)
    assert text.splitlines()[1:] == ["u\tAnn\ta", "u\t\\N\tb"]
    assert decode_turns(text) == turns


def test_an_empty_chunk_round_trips():
    assert encode_turns([]) == "#CTF v1 turns n=0\n"
    assert decode_turns("#CTF v1 turns n=0\n") == []


def test_timestamps_come_back_as_the_same_instant_in_utc():
    local = datetime(2024, 3, 1, 9, 30, 0, 123456, tzinfo=timezone(timedelta(hours=-5)))
    [turn] = decode_turns(encode_turns([Turn(role="user", content="x", timestamp=local)]))
    assert turn.timestamp == local and turn.timestamp.utcoffset() == timedelta(0)


def test_the_encoder_refuses_non_turns():
    with pytest.raises(ValidationError, match=r"turns\[1\]: expected a Turn, got dict"):
        encode_turns([Turn(role="user", content="x", timestamp=T0), {"role": "user"}])


GOOD = "#CTF v1 turns n=2 t0=2024-01-15T10:00Z dt=30\nu\thi\na\tho\n"


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        pytest.param("", 1, "missing header", id="empty"),
        pytest.param("u\thi\n", 1, "malformed header", id="no-header"),
        pytest.param("#CTF v2 turns n=0\n", 1, "unsupported CTF version 2", id="version"),
        pytest.param("#CTF v1 summaries n=0\n", 1, "expected a 'turns' document", id="kind"),
        pytest.param("#CTF v1 turns\n", 1, "lacks the row count", id="no-n"),
        pytest.param("#CTF v1 turns n=1\nu\thi\n", 1, "lacks the base time", id="no-t0"),
        pytest.param("#CTF v1 turns n=0 n=0\n", 1, "appears twice", id="dup-key"),
        pytest.param("#CTF v1 turns n=0 color=red\n", 1, "unknown header key 'color'", id="unknown-key"),
        pytest.param("#CTF v1 turns n=0 cols=content,role\n", 1, "must start with role", id="cols-order"),
        pytest.param("#CTF v1 turns n=0 cols=role,mood,content\n", 1, "unknown column 'mood'", id="cols-unknown"),
        pytest.param("#CTF v1 turns n=0 cols=role,name,content name.u=A\n", 1, "conflicts", id="default-vs-col"),
        pytest.param("#CTF v1 turns n=1 t0=2024-13-01T00:00Z\nu\thi\n", 1, "not a valid time", id="bad-t0"),
        pytest.param("#CTF v1 turns n=3 t0=2024-01-15T10:00Z\nu\thi\na\tho\n", 4, "truncated", id="truncated"),
        pytest.param("#CTF v1 turns n=1 t0=2024-01-15T10:00Z\nu\thi\na\tho\n", 3, "more follow", id="extra-row"),
        pytest.param("#CTF v1 turns n=1 t0=2024-01-15T10:00Z\nu\thi\tthere\n", 2, "expected 2 cells", id="cells"),
        pytest.param("#CTF v1 turns n=1 t0=2024-01-15T10:00Z\nx\thi\n", 2, "unknown role code 'x'", id="role"),
        pytest.param("#CTF v1 turns n=1 t0=2024-01-15T10:00Z\nu\tbad \\q\n", 2, "bad escape", id="escape"),
        pytest.param("#CTF v1 turns n=1 t0=2024-01-15T10:00Z\nu\tend\\\n", 2, "bad escape", id="trailing-backslash"),
        pytest.param("#CTF v1 turns n=2 t0=2024-01-15T10:00Z\nu\thi\na\tho\r\n", 3, "raw carriage return", id="crlf"),
        pytest.param(
            "#CTF v1 turns n=1 t0=2024-01-15T10:00Z cols=role,time,content\nu\t1e3\thi\n",
            2,
            "not a number of seconds",
            id="time",
        ),
        pytest.param(
            '#CTF v1 turns n=1 t0=2024-01-15T10:00Z\nu\t\\J[{"type":"tool_use"}]\n',
            2,
            "not a valid turn",
            id="block-role",
        ),
        pytest.param("#CTF v1 turns n=1 t0=2024-01-15T10:00Z\nu\t\\J[\n", 2, "not valid JSON", id="json"),
        pytest.param(
            "#CTF v1 turns n=1 t0=2024-01-15T10:00Z cols=role,meta,content\nu\t[1]\thi\n",
            2,
            "meta must be a JSON object",
            id="meta",
        ),
        pytest.param("#CTF v1 turns n=1 t0=2024-01-15T10:00Z\nt\thi\n", 2, "not a valid turn", id="tool-text"),
        pytest.param(
            "#CTF v1 turns n=1 t0=9999-12-31T23:59Z cols=role,time,content\nu\t120\thi\n",
            2,
            "out of range",
            id="overflow",
        ),
    ],
)
def test_malformed_documents_raise_decode_error_naming_the_line(text, line, message):
    with pytest.raises(DecodeError, match=message) as info:
        decode_turns(text)
    assert info.value.line == line


def test_a_good_document_decodes_and_extension_keys_are_ignored():
    assert [t.content for t in decode_turns(GOOD)] == ["hi", "ho"]
    assert decode_turns(GOOD.replace(" dt=30", " dt=30 x.origin=test")) == decode_turns(GOOD)
    assert decode_turns(GOOD.rstrip("\n")) == decode_turns(GOOD)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.builds(
            SummaryRow,
            id=texts,
            first=st.integers(0, 10**6),
            last=st.just(10**7),
            summary=texts,
            themes=st.lists(texts.filter(bool), max_size=4).map(tuple),
        ),
        max_size=5,
    )
)
def test_summary_rows_round_trip(rows):
    assert decode_summaries(encode_summaries(rows)) == rows


def test_summary_document_shape():
    rows = [SummaryRow("seg-1", 1, 10, "They met.\nThen left.", ("travel", "a|b"))]
    assert encode_summaries(rows) == "#CTF v1 summaries n=1\nseg-1\t1-10\tThey met.\\nThen left.\ttravel|a\\|b\n"


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        pytest.param("#CTF v1 summaries n=1\ns\t5-1\tx\t\n", 2, "first", id="range-order"),
        pytest.param("#CTF v1 summaries n=1\ns\t1..5\tx\t\n", 2, "range must be", id="range"),
        pytest.param("#CTF v1 summaries n=1\ns\t1-5\tx\ta||b\n", 2, "empty theme", id="empty-theme"),
        pytest.param("#CTF v1 summaries n=1 cols=id,summary\ns\t1-5\tx\t\n", 1, "columns are", id="cols"),
        pytest.param("#CTF v1 summaries n=1\ns\t1-5\tx\n", 2, "expected 4 cells", id="cells"),
    ],
)
def test_malformed_summaries_raise_decode_error(text, line, message):
    with pytest.raises(DecodeError, match=message) as info:
        decode_summaries(text)
    assert info.value.line == line


def test_summary_rows_refuse_empty_themes_and_reversed_ranges():
    with pytest.raises(ValidationError, match="theme must not be empty"):
        SummaryRow("s", 1, 2, "x", ("",))
    with pytest.raises(ValidationError, match="after last"):
        SummaryRow("s", 3, 2, "x")


def test_every_example_in_the_format_document_decodes():
    doc = DOCS.read_text(encoding="utf-8")
    examples = re.findall(r"```\n(#CTF v1 .*?)```", doc, re.S)
    assert len(examples) == 4  # ours (two turns documents, one summaries) and seed 000's dialect
    decoded = [decode_turns(e) if e.startswith("#CTF v1 turns") else decode_summaries(e) for e in examples]
    assert [len(d) for d in decoded] == [3, 3, 2, 2]
    assert decoded[0][0].name == "Caroline" and decoded[1][2].model == "gpt-4o"
