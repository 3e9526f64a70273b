"""Fuzzing the CTF decoders: only DecodeError ever escapes, over 10,000+ generated inputs."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from stratamem.errors import DecodeError
from stratamem.formats.ctf import SummaryRow, decode_summaries, decode_turns, encode_summaries, encode_turns
from stratamem.records import TextBlock, ToolResultBlock, ToolUseBlock, Turn

T0 = datetime(2024, 1, 15, 10, 0, tzinfo=UTC)
_SEEDS = [
    encode_turns(
        [
            Turn(role="user", content="hi\tthere\\", timestamp=T0, name="A"),
            Turn(
                role="assistant",
                content=(TextBlock("x"), ToolUseBlock("c", "f", {"a": [1]})),
                timestamp=T0 + timedelta(seconds=3.5),
                model="m",
                metadata={"k": 1},
            ),
            Turn(role="tool", content=(ToolResultBlock("c", (TextBlock("ok"),)),), timestamp=T0, name=None),
        ]
    ),
    encode_turns(
        [
            Turn(role="user", content=c, timestamp=T0 + timedelta(seconds=30 * i), name="Ann")
            for i, c in enumerate(["a", "-", "", "\\N"])
        ]
    ),
    encode_summaries([SummaryRow("s1", 1, 9, "sum\nmary", ("a|b", "c")), SummaryRow("s2", 10, 12, "", ())]),
]
_ALPHABET = list('\t\n\r\\ =,.-|:0123456789NJZTtsuan{}[]"#CTFv') + ["␉", "é", "\u2028", "\x00", "\ud800"]


def _mutate(rng: random.Random, text: str) -> str:
    chars = list(text)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(5)
        pos = rng.randrange(len(chars) + 1)
        if op == 0 and chars:
            del chars[min(pos, len(chars) - 1)]
        elif op == 1:
            chars.insert(pos, rng.choice(_ALPHABET))
        elif op == 2 and chars:
            chars[min(pos, len(chars) - 1)] = rng.choice(_ALPHABET)
        elif op == 3:
            chars = chars[:pos]  # truncation
        else:
            chars[pos:pos] = list(rng.choice(["\\J[[[[", '\\J{"type":[]}', "9" * 30, "\\N", "\t", "\n"]))
    return "".join(chars)


def _decode_all(text: str) -> None:
    for decode in (decode_turns, decode_summaries):
        try:
            decode(text)
        except DecodeError as exc:
            assert exc.line is not None and exc.line >= 1


def test_ten_thousand_mutated_documents_raise_only_decode_error():
    rng = random.Random(20240115)
    count = 0
    for _ in range(4000):
        seed = rng.choice(_SEEDS)
        _decode_all(_mutate(rng, seed))
        count += 1
    for _ in range(6000):
        header = rng.choice(["#CTF v1 turns ", "#CTF v1 summaries ", "#CTF v1 turns n=1 t0=2024-01-15T10:00Z ", ""])
        body = "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, 60)))
        _decode_all(header + body)
        count += 1
    assert count == 10_000


def test_deeply_nested_json_is_a_decode_error():
    text = "#CTF v1 turns n=1 t0=2024-01-15T10:00Z\nu\t\\J" + "[" * 100_000 + "\n"
    try:
        decode_turns(text)
    except DecodeError as exc:
        assert exc.line == 2
    else:
        raise AssertionError("nested JSON decoded")


@settings(max_examples=1000, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_text_raises_only_decode_error(text):
    _decode_all(text)


@settings(max_examples=1000, deadline=None)
@given(
    st.sampled_from(
        [
            "#CTF v1 turns n=",
            "#CTF v1 turns n=2 t0=2024-01-15T10:00Z cols=role,time,name,model,meta,content\n",
            "#CTF v1 summaries n=1\n",
        ]
    ),
    st.text(max_size=120),
)
def test_arbitrary_text_after_a_header_raises_only_decode_error(header, text):
    _decode_all(header + text)
