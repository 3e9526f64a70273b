"""``context.cache_step_recall: false``: a tool loop's steps get no per-call recall, so each request
of the loop is, byte for byte, the start of the next one (only the newest step is new)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from wire import plain

from stratamem import Memory
from stratamem.config import Config
from stratamem.context.cache_render import RECALL_TITLE
from stratamem.providers import structural_problems

ANIMALS = ["walrus", "heron", "otter", "lynx", "badger", "falcon"]
PLACES = ["harbour", "orchard", "quarry", "lighthouse", "market", "chapel"]
REQUEST = "Run the tests for the walrus at the harbour and fix what fails."
# Fixed clock: recall blocks carry date headings, so wall-clock times would let two runs
# straddling midnight differ.
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def _at(minute: int) -> datetime:
    return T0 + timedelta(minutes=minute)


def _recalled(ctx: Any) -> bool:
    """Whether the request carries a per-call (L4) block."""
    return RECALL_TITLE in ctx.text


def _fill(mem: Memory) -> None:
    """Two sealed sessions of animal facts, then the request opening session ``s3``."""
    for session in ("s1", "s2"):
        for i in range(12):
            animal, place = ANIMALS[i % 6], PLACES[(i * 5) % 6]
            text = f"In {session} the {animal} near the {place} ate {i + 3} apples before noon."
            mem.add(
                {"role": "user" if i % 2 == 0 else "assistant", "content": text},
                session=session,
                timestamp=_at(i + (0 if session == "s1" else 60)),
            )
        mem.seal(session)
    mem.add({"role": "user", "content": REQUEST}, session="s3", timestamp=_at(120))


def _step(mem: Memory, fmt: str, n: int) -> Any:
    """Tool step ``n`` of the request in ``s3``: its context, then the model's call and the result stored."""
    ctx = mem.context(REQUEST, budget=3000, session="s3", format=fmt, cache=True, now=_at(200 + n))
    call = {"type": "tool_use", "id": f"toolu_{n:03d}", "name": "bash", "input": {"command": f"pytest -k c{n}"}}
    mem.add(
        {"role": "assistant", "content": [{"type": "text", "text": f"Step {n}."}, call]},
        session="s3",
        timestamp=_at(121 + 2 * n),
    )
    result = {"type": "tool_result", "tool_use_id": f"toolu_{n:03d}", "content": f"{n + 1} passed in 0.1s"}
    mem.add({"role": "user", "content": [result]}, session="s3", format="anthropic", timestamp=_at(122 + 2 * n))
    return ctx


def _loop(db: Path, fmt: str, step_recall: bool, stays: bool = False, record: bool = True) -> list[Any]:
    cfg = Config.from_dict(
        {
            "pyramid": {"defer_summarization": False, "micro_chunk_size": 24},
            "context": {
                "cache_min_tokens": 64,
                "cache_step_recall": step_recall,
                "cache_recall_stays": stays,
                "record_manifests": record,
            },
        }
    )
    mem = Memory(db, namespace="steps", config=cfg, embedder=None)
    _fill(mem)
    contexts = [_step(mem, fmt, n) for n in range(6)]
    mem.close()
    return contexts


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_without_step_recall_each_request_of_a_tool_loop_starts_with_the_whole_previous_one(
    tmp_path: Path, fmt: str
) -> None:
    contexts = _loop(tmp_path / "off.db", fmt, step_recall=False, stays=False)
    # The request's own call recalls (the walrus at the harbour); its steps do not.
    assert [_recalled(c) for c in contexts] == [True, False, False, False, False, False]
    assert all(c.manifest.cache["anchor"] == contexts[0].manifest.cache["anchor"] for c in contexts)
    for before, after in zip(contexts[1:], contexts[2:], strict=False):
        assert structural_problems(list(after.messages), fmt) == []
        assert plain(after.system_blocks) == plain(before.system_blocks)
        # The whole previous request, the newest results included, then this call's step.
        assert plain(after.messages[: len(before.messages)]) == plain(before.messages)
        assert len(after.messages) == len(before.messages) + 2
    # The first step re-sends only what follows the request's words: its recall is gone.
    first, second = contexts[0].messages, contexts[1].messages
    assert plain(second[: len(first) - 1]) == plain(first[:-1])


@pytest.mark.parametrize("record", [True, False])
def test_with_step_recall_every_step_recalls_after_its_newest_results(tmp_path: Path, record: bool) -> None:
    # Without cache_recall_stays, or with it but no recorded manifests to read the kept block from.
    contexts = _loop(tmp_path / "on.db", "openai", step_recall=True, stays=not record, record=record)
    assert all(_recalled(c) for c in contexts)
    for before, after in zip(contexts, contexts[1:], strict=False):
        assert before.messages[-1]["content"].startswith(RECALL_TITLE)
        assert after.messages[: len(before.messages) - 1] == before.messages[:-1]
        assert after.messages[len(before.messages) - 1] != before.messages[-1]


def _blocks(ctx: Any) -> list[str]:
    """The per-call (L4) blocks of a request, wherever they sit."""
    texts = []
    for m in ctx.messages:
        content = m.get("content")
        for b in [{"text": content}] if isinstance(content, str) else content or ():
            if isinstance(b, dict) and str(b.get("text", "")).startswith(RECALL_TITLE):
                texts.append(b["text"])
    return texts


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_a_requests_recall_stays_after_its_words_and_each_step_only_appends(tmp_path: Path, fmt: str) -> None:
    contexts = _loop(tmp_path / "stays.db", fmt, step_recall=True, stays=True)
    first = _blocks(contexts[0])
    # The request's own call recalls; every step shows that same block, once, where it was.
    assert len(first) == 1 and "apples before noon" in first[0]
    assert all(_blocks(c) == first for c in contexts)
    assert all(c.manifest.cache["anchor"] == contexts[0].manifest.cache["anchor"] for c in contexts)
    for before, after in zip(contexts, contexts[1:], strict=False):
        assert structural_problems(list(after.messages), fmt) == []
        # The whole previous request, its recall and newest results included, then this call's step.
        assert plain(after.messages[: len(before.messages)]) == plain(before.messages)
        assert len(after.messages) == len(before.messages) + 2
        assert after.manifest.cache["kept_recall"]["texts"] == {str(_request_id(after)): first[0]}


def _request_id(ctx: Any) -> int:
    return next(int(i.id.split(":")[1]) for i in ctx.manifest.items if i.reason == "recent_window")


def test_after_a_plain_reply_the_previous_messages_recall_goes(tmp_path: Path) -> None:
    """A chat (no tool steps): the per-call block is last and goes at the next message, as before."""
    cfg = Config.from_dict({"context": {"cache_min_tokens": 64}})
    mem = Memory(tmp_path / "chat.db", namespace="chat", config=cfg, embedder=None)
    for i in range(12):
        text = f"The {ANIMALS[i % 6]} near the {PLACES[(i * 5) % 6]} ate {i + 3} apples before noon."
        mem.add({"role": "user" if i % 2 == 0 else "assistant", "content": text}, session="s1")
    mem.seal("s1")
    mem.add({"role": "user", "content": "Tell me about the walrus at the harbour."}, session="s2")
    one = mem.context(
        "Tell me about the walrus at the harbour.", budget=3000, session="s2", format="openai", cache=True
    )
    mem.add({"role": "assistant", "content": "It ate apples."}, session="s2")
    mem.add({"role": "user", "content": "And the otter in the orchard."}, session="s2")
    two = mem.context("And the otter in the orchard.", budget=3000, session="s2", format="openai", cache=True)
    mem.close()
    assert one.messages[-1]["content"].startswith(RECALL_TITLE)
    assert _blocks(one)[0] not in _blocks(two)  # the first message's block did not stay
    assert plain(two.messages[: len(one.messages) - 1]) == plain(one.messages[:-1])


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_once_the_window_passes_the_requests_words_its_recall_opens_the_window(tmp_path: Path, fmt: str) -> None:
    cfg = Config.from_dict({"pyramid": {"defer_summarization": False}, "context": {"cache_min_tokens": 64}})
    mem = Memory(tmp_path / "lead.db", namespace="lead", config=cfg, embedder=None)
    for i in range(12):
        text = f"The {ANIMALS[i % 6]} near the {PLACES[(i * 5) % 6]} ate {i + 3} apples before noon."
        mem.add({"role": "user" if i % 2 == 0 else "assistant", "content": text}, session="s1")
    mem.seal("s1")
    mem.add({"role": "user", "content": REQUEST}, session="s2")
    contexts = []
    for n in range(14):
        contexts.append(mem.context(REQUEST, budget=1500, session="s2", format=fmt, cache=True))
        call = {"type": "tool_use", "id": f"toolu_{n:03d}", "name": "bash", "input": {"command": f"pytest -k c{n}"}}
        mem.add({"role": "assistant", "content": [{"type": "text", "text": f"Step {n}."}, call]}, session="s2")
        log = " ".join(f"test_{n}_{k} passed" for k in range(40))
        result = {"type": "tool_result", "tool_use_id": f"toolu_{n:03d}", "content": log}
        mem.add({"role": "user", "content": [result]}, session="s2", format="anthropic")
    mem.close()
    first = _blocks(contexts[0])
    assert len(first) == 1
    # Every call shows the request's recall once, the same bytes, also after the window left its words.
    assert all(_blocks(c) == first for c in contexts)
    request_id = _request_id(contexts[0])
    shown = [any(request_id in i.turn_ids for i in c.manifest.items if i.reason == "recent_window") for c in contexts]
    assert shown[0] and not shown[-1]
    for before, after in zip(contexts, contexts[1:], strict=False):
        assert structural_problems(list(after.messages), fmt) == []
        if after.manifest.cache["anchor"] == before.manifest.cache["anchor"]:
            assert plain(after.messages[: len(before.messages)]) == plain(before.messages)
    # Where the request's words are gone, the block opens the window: before its first step.
    for c in (c for c, s in zip(contexts, shown, strict=True) if not s):
        opening = next(i for i, m in enumerate(c.messages) if m["role"] == "assistant")
        assert any(RECALL_TITLE in str(m["content"]) for m in c.messages[:opening])


def test_the_kept_block_is_read_from_the_store_not_from_the_process(tmp_path: Path) -> None:
    """A memory opened afresh for each call (a CLI, another worker) sends the same bytes."""
    warm = _loop(tmp_path / "warm.db", "anthropic", step_recall=True, stays=True)
    cfg = Config.from_dict(
        {"pyramid": {"defer_summarization": False, "micro_chunk_size": 24}, "context": {"cache_min_tokens": 64}}
    )
    db = tmp_path / "cold.db"
    with Memory(db, namespace="steps", config=cfg, embedder=None) as mem:
        _fill(mem)
    cold = []
    for n in range(6):
        with Memory(db, namespace="steps", config=cfg, embedder=None) as mem:
            cold.append(_step(mem, "anthropic", n))
    assert [plain(c.messages) for c in cold] == [plain(c.messages) for c in warm]
    assert all(_blocks(c) == _blocks(cold[0]) for c in cold)


def test_a_window_opening_at_a_request_carries_the_leading_block_in_its_first_message(tmp_path: Path) -> None:
    """Anthropic: the previous loop's request block leads a window that opens at the next request;
    it goes into that request's user message (two user messages in a row are not a valid request)."""
    cfg = Config.from_dict({"pyramid": {"defer_summarization": False}, "context": {"cache_min_tokens": 64}})
    mem = Memory(tmp_path / "requests.db", namespace="x", config=cfg, embedder=None)
    for i in range(12):
        text = f"The {ANIMALS[i % 6]} near the {PLACES[(i * 5) % 6]} ate {i + 3} apples before noon."
        mem.add({"role": "user" if i % 2 == 0 else "assistant", "content": text}, session="s1")
    mem.seal("s1")
    contexts, n = [], 0
    for r in range(5):
        request = f"Run the tests for the {ANIMALS[r]} at the {PLACES[r]} and fix what fails."
        mem.add({"role": "user", "content": request}, session="s2")
        for _ in range(3):
            contexts.append(mem.context(request, budget=1500, session="s2", format="anthropic", cache=True))
            call = {"type": "tool_use", "id": f"t{n}", "name": "bash", "input": {"command": f"pytest -k c{n}"}}
            mem.add({"role": "assistant", "content": [{"type": "text", "text": f"Step {n}."}, call]}, session="s2")
            log = " ".join(f"test_{n}_{j} passed" for j in range(40))
            result = {"type": "tool_result", "tool_use_id": f"t{n}", "content": log}
            mem.add({"role": "user", "content": [result]}, session="s2", format="anthropic")
            n += 1
        mem.add({"role": "assistant", "content": "Done."}, session="s2")
    mem.close()
    assert [structural_problems(list(c.messages), "anthropic") for c in contexts] == [[]] * len(contexts)
    led = [
        c
        for c in contexts
        if isinstance(first := c.messages[0]["content"], list)
        and len(first) > 1
        and str(first[0].get("text", "")).startswith(RECALL_TITLE)
        and str(first[1].get("text", "")).startswith("Run the tests")
    ]
    assert len(led) == 6
