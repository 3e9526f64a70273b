"""The cache layout's window always shows the newest step (issue 26): texts cut to fit, pairs kept.

Before, a tool step larger than the window's room left the window empty: on the
real Claude Code logs at B 2,000 the model did not see its own newest tool
result on 24 of 149 calls of one session and 33 of 142 of the other (OpenAI
format; Anthropic 30 and 35). Now the step is shown with its texts cut (head
and tail around a marker naming the stored turn), every call with its results.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from conftest import SHARED
from hypothesis import given, settings
from hypothesis import strategies as hs
from wire import result_ids

from stratamem import Config, Memory
from stratamem.context.step_cut import MIN_KEEP, cut_turn, fit_turn, is_cut
from stratamem.ingest import read_file
from stratamem.providers import structural_problems
from stratamem.records import StoredTurn, Turn
from stratamem.records.blocks import ImageBlock, TextBlock, ToolResultBlock, ToolUseBlock
from stratamem.tokens import get_tokenizer

LOGS = SHARED / "data" / "transcripts" / "claude_code"
REF = re.compile(r"kept (\d+) head \+ (\d+) tail of (\d+) characters; all of it is stored as turn:(\d+)")
TOK = get_tokenizer("o200k_base")
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _stored(turn: Turn, id: int = 7) -> StoredTurn:
    return StoredTurn(id=id, namespace="n", session="s", seq=1, tokens=TOK.count(turn.text), turn=turn)


def _cost(st: StoredTurn) -> int:
    return TOK.count(st.turn.text) + 4 * len(st.turn.blocks)


texts = hs.text(alphabet="abc xyz\n0123", min_size=0, max_size=3000)


@settings(max_examples=60, deadline=None)
@given(results=hs.lists(texts, min_size=1, max_size=4), words=texts, arg=texts, limit=hs.integers(20, 900))
def test_a_cut_turn_fits_keeps_its_ids_and_each_text_s_head_and_tail(
    results: list[str], words: str, arg: str, limit: int
) -> None:
    call = Turn(
        "assistant",
        (TextBlock(words or "go"), *(ToolUseBlock(f"c{i}", "bash", {"cmd": arg}) for i in range(len(results)))),
        timestamp=T0,
    )
    answer = Turn(
        "tool",
        tuple(
            ToolResultBlock(f"c{i}", (TextBlock(r), ImageBlock("image/png", "aGk=")) if i == 0 else (TextBlock(r),))
            for i, r in enumerate(results)
        ),
        timestamp=T0,
    )
    for st in (_stored(call), _stored(answer)):
        got = fit_turn(st, limit, _cost)
        if got is None:
            # Nothing fits: even the deepest cut is over the limit.
            assert _cost(cut_turn(st, MIN_KEEP)) > limit or max(map(len, [words, arg, *results])) <= MIN_KEEP
            continue
        assert _cost(got) <= limit and got.id == st.id and got.role == st.role
        assert got.turn.tool_use_ids == st.turn.tool_use_ids
        assert got.turn.tool_result_ids == st.turn.tool_result_ids
        assert [type(b) for b in got.turn.blocks] == [type(b) for b in st.turn.blocks]
        assert fit_turn(st, limit, _cost) == got  # deterministic: the same bytes on every call
        if got is st:
            assert not is_cut(got)
            continue
        for old, new in zip(st.turn.blocks, got.turn.blocks, strict=True):
            before = [old.text] if isinstance(old, TextBlock | ToolResultBlock) else []
            after = [new.text] if isinstance(new, TextBlock | ToolResultBlock) else []
            if isinstance(old, ToolUseBlock):
                before, after = [old.input["cmd"]], [new.input["cmd"]]  # type: ignore[attr-defined]
            if isinstance(old, ToolResultBlock):
                assert new.has_image == old.has_image  # type: ignore[union-attr]
            for b, a in zip(before, after, strict=True):
                m = REF.search(a)
                if m is None:
                    assert a == b
                    continue
                head, tail, total = int(m[1]), int(m[2]), int(m[3])
                assert total == len(b) > head + tail and int(m[4]) == st.id
                assert a.startswith(b[:head]) and a.endswith(b[len(b) - tail :])


@pytest.mark.parametrize(
    ("log", "unseen"),
    [
        ("258c7280-ae70-4798-800f-63464d01a85d.jsonl", {"openai": 0, "anthropic": 1}),
        ("8463c716-a2ea-4c14-9efa-87158ebd9f20.jsonl", {"openai": 0, "anthropic": 2}),
    ],
)
def test_every_call_of_a_real_claude_code_log_sees_its_newest_step(
    tmp_path: Path, log: str, unseen: dict[str, int]
) -> None:
    """Replayed turn by turn at B 2,000, a context before each model call (each assistant turn after a step).

    The only steps not shown are Anthropic ones whose call carries thinking, which is never cut
    (its signature must stay whole), larger than the room: the manifest says so.
    """
    (session,) = [s for s in read_file(LOGS / log) if not s.session.count(".")]
    cfg = Config().replace(pyramid={"enabled": False}, context={"cache_layout": True})
    mem = Memory(tmp_path / "log.db", config=cfg, embedder=None)
    missed = {"openai": 0, "anthropic": 0}
    calls = parallel = cut = 0
    newest: tuple[str, ...] = ()
    for turn in session.turns:
        if turn.role == "assistant" and newest:
            calls += 1
            parallel += len(newest) > 1
            for fmt in ("openai", "anthropic"):
                ctx = mem.context("continue", budget=2000, session=session.session, format=fmt)
                assert ctx.tokens <= 2000
                messages = list(ctx.messages)
                if set(newest) <= result_ids(messages):
                    # Every call with its results, every result after its call.
                    assert structural_problems(messages, fmt) == []
                    cut += fmt == "openai" and any("cut to fit" in n for n in ctx.manifest.notes)
                else:
                    missed[fmt] += 1
                    assert fmt == "anthropic" and any("no window is shown" in n for n in ctx.manifest.notes)
        mem.add(turn, session=session.session)
        if turn.role == "assistant" and turn.tool_use_ids:
            newest = turn.tool_use_ids
        elif turn.role == "user":
            newest = ()
    mem.close()
    assert missed == unseen
    assert calls > 140 and parallel > 15 and cut > 20
