"""Hypothesis strategies for stratamem records, aimed at the edge cases.

Reusable by any test module: ``from strategies import turns, texts``.

* :data:`texts` — arbitrary storable Unicode (no NUL, no lone surrogates), mixed
  with the strings that break naive encoders: tabs, newlines, CR, backslashes,
  the seed's stand-ins ``␉``/``␊``, a lone ``-``, ``\\N``, ``null``, empty.
* :data:`json_values` — JSON-native values (what metadata and tool inputs hold).
* :data:`timestamps` — aware datetimes in any fixed UTC offset, years 1–9999.
* :func:`blocks_for` / :data:`turns` / :data:`turn_lists` — turns that satisfy
  the records' role/block rules, with arbitrary names, models and metadata.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from hypothesis import strategies as st

from stratamem.records import ImageBlock, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock, Turn

TRICKY = (
    "",
    "-",
    "\t",
    "\n",
    "\r",
    "\r\n",
    "\\",
    "\\\\",
    "\\N",
    "\\J",
    "\\t",
    "\\n",
    "␉",
    "␊",
    "null",
    "None",
    "|",
    "\\|",
    " ",
    "  ",
    "=",
    "#CTF v1 turns",
    "\u2028",
    "\x85",
    "\x0b",
    "é",
    "😀",
    "\u200b",
)

_chars = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
_plain = st.text(alphabet=_chars, max_size=30)
texts = st.one_of(
    st.sampled_from(TRICKY),
    _plain,
    st.lists(st.one_of(st.sampled_from(TRICKY), _plain), max_size=6).map("".join),
)
"""Storable Unicode strings, biased towards separators and escape look-alikes."""

short_texts = st.one_of(st.sampled_from(TRICKY), st.text(alphabet=_chars, max_size=8))
"""Short strings for ids, names and dictionary keys."""

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | short_texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(short_texts, inner, max_size=3),
    max_leaves=8,
)
"""JSON-native values: what survives any JSON round trip unchanged."""

json_objects = st.dictionaries(short_texts, json_values, max_size=3)
"""JSON objects (metadata, tool inputs)."""

_offsets = st.timedeltas(min_value=timedelta(hours=-23, minutes=-59), max_value=timedelta(hours=23, minutes=59))
timestamps = st.builds(
    lambda dt, off: dt.replace(tzinfo=timezone(off)),
    st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)),
    _offsets,
)
"""Aware datetimes in arbitrary fixed offsets (kept a day inside datetime's range)."""

images = st.one_of(
    st.builds(ImageBlock, media_type=st.none() | short_texts, data=texts, detail=st.none() | short_texts),
    st.builds(ImageBlock, media_type=st.none() | short_texts, url=texts, detail=st.none() | short_texts),
)
text_blocks = st.builds(TextBlock, texts)
tool_uses = st.builds(ToolUseBlock, id=short_texts, name=short_texts, input=json_objects)
thinking = st.builds(ThinkingBlock, texts, st.none() | short_texts)
tool_results = st.builds(
    ToolResultBlock,
    tool_use_id=short_texts,
    content=st.lists(text_blocks | images, max_size=3).map(tuple),
    is_error=st.booleans(),
)


def blocks_for(role: str) -> st.SearchStrategy[tuple]:
    """Block tuples a turn of ``role`` may hold."""
    if role == "assistant":
        return st.lists(text_blocks | images | tool_uses | thinking, max_size=4).map(tuple)
    if role == "tool":
        return st.tuples(
            st.lists(tool_results, min_size=1, max_size=3), st.lists(text_blocks | images, max_size=2)
        ).map(lambda p: tuple(p[0] + p[1]))
    return st.lists(text_blocks | images, max_size=3).map(tuple)


@st.composite
def turns(draw: st.DrawFn, timestamp: st.SearchStrategy[datetime] = timestamps) -> Turn:
    """An arbitrary valid turn."""
    role = draw(st.sampled_from(("system", "user", "assistant", "tool")))
    content = draw(blocks_for(role)) if role == "tool" else draw(texts | blocks_for(role))
    return Turn(
        role=role,
        content=content,
        timestamp=draw(timestamp),
        name=draw(st.none() | short_texts),
        model=draw(st.none() | short_texts),
        metadata=draw(json_objects),
    )


@st.composite
def conversation(draw: st.DrawFn, max_size: int = 8) -> list[Turn]:
    """A list of turns shaped like a real chunk: shared names/models, near timestamps.

    Exercises the header-default paths of encoders (constant names, steps) that
    fully random turns rarely hit.
    """
    start = draw(st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)))
    step = draw(st.sampled_from((0, 1, 30, 0.5, 3600)))
    names = {"user": draw(st.none() | short_texts), "assistant": draw(st.none() | short_texts)}
    model = draw(st.none() | short_texts)
    n = draw(st.integers(min_value=0, max_value=max_size))
    out = []
    at = start
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        jitter = draw(st.sampled_from((0, 0, 0, 7, -1)))
        at = at + timedelta(seconds=step + jitter)
        out.append(
            Turn(
                role=role,
                content=draw(texts),
                timestamp=at,
                name=names[role],
                model=model if role == "assistant" else None,
            )
        )
    return out


turn_lists = st.one_of(st.lists(turns(), max_size=6), conversation())
"""Lists of turns: fully arbitrary ones and chunk-shaped ones."""
